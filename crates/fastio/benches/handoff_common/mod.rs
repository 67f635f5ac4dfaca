//! What every handoff bench shares, ours and the peers' (the iceoryx2 bench
//! in `peers/iceoryx2` includes this file by path): the payload sizes, what
//! the consumer touches, the batch command the producer sends the consumer
//! over a Unix socket before each timed batch, and the criterion settings.
//!
//! The rules every variant follows, so none wins by doing less work:
//! * the producer writes one byte per page of each payload (the pages are
//!   committed, the contents are the consumer's to read), or, in the
//!   stream group's `_all` rows, every byte;
//! * the consumer reads one byte per page (`page`) or every byte (`all`)
//!   of each payload, through whatever the transport gives it;
//! * latency (`handoff` group): one payload at a time, the producer waits
//!   for the consumer's acknowledgement before the next;
//! * throughput (`stream` group): payloads go out back to back, at most
//!   [`STREAM_DEPTH`] in flight on either side (counted alike), and the
//!   batch ends when the consumer has read the last one; each side says
//!   how often it waited ([`Regime`]).

#![allow(dead_code)] // each bench uses its own subset

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::{Child, Command};
use std::time::Duration;

/// The size of a page: the unit one-byte-per-page touches step by.
pub const PAGE: usize = 4096;

/// Payload sizes of the handoff group, with their labels.
pub const SIZES: [(usize, &str); 6] = [
    (4 << 10, "4KiB"),
    (64 << 10, "64KiB"),
    (1 << 20, "1MiB"),
    (16 << 20, "16MiB"),
    (64 << 20, "64MiB"),
    (256 << 20, "256MiB"),
];

/// Payload sizes of the stream group.
pub const STREAM_SIZES: [(usize, &str); 5] = [
    (4 << 10, "4KiB"),
    (64 << 10, "64KiB"),
    (1 << 20, "1MiB"),
    (16 << 20, "16MiB"),
    (64 << 20, "64MiB"),
];

/// Payloads in flight at most in a stream, on both sides alike: the one
/// the producer writes, those waiting, the one the consumer reads. Ours: a
/// ring of this depth (its slots are all there is). iceoryx2: a subscriber
/// buffer of `STREAM_DEPTH - 2` samples, plus the one sample the publisher
/// may loan and the one the subscriber may borrow (its data segment holds
/// exactly these; the publisher waits while the buffer is full).
pub const STREAM_DEPTH: usize = 6;

/// The environment variable naming a file where both sides of a stream
/// bench append how often they waited ([`Regime`]).
pub const REGIME_ENV: &str = "FASTIO_BENCH_REGIME";

/// How often one side of a stream waited: the consumer for data (the ring
/// ran dry: the producer is the slower side), the producer for space (the
/// ring was full: the consumer is). Appended to the file in
/// [`REGIME_ENV`] after every batch as `consumer|producer WAITED FRAMES`.
pub struct Regime {
    side: &'static str,
    waited: u64,
    frames: u64,
}

impl Regime {
    /// A count for `side` (`consumer` or `producer`).
    pub fn new(side: &'static str) -> Regime {
        Regime {
            side,
            waited: 0,
            frames: 0,
        }
    }

    /// One frame, and whether this side had to wait for it.
    pub fn frame(&mut self, waited: bool) {
        self.frames += 1;
        self.waited += u64::from(waited);
    }

    /// Appends the batch's count to the file in [`REGIME_ENV`] (when set)
    /// and starts again.
    pub fn flush(&mut self) {
        if self.frames > 0
            && let Some(path) = std::env::var_os(REGIME_ENV)
            && let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
        {
            let _ = writeln!(f, "{} {} {}", self.side, self.waited, self.frames);
        }
        self.waited = 0;
        self.frames = 0;
    }
}

/// The environment variable that makes a bench executable the consumer.
pub const CHILD_ENV: &str = "FASTIO_HANDOFF_CHILD";

/// What the consumer reads of each payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Touch {
    /// One byte per page.
    Page,
    /// Every byte.
    All,
}

impl Touch {
    /// Both, in report order.
    pub const BOTH: [Touch; 2] = [Touch::Page, Touch::All];

    /// The suffix of the bench function's name.
    pub fn suffix(self) -> &'static str {
        match self {
            Touch::Page => "page",
            Touch::All => "all",
        }
    }

    /// Writes the payload as this variant says: one byte per page
    /// ([`produce_into`]) or every byte.
    pub fn produce(self, bytes: &mut [u8], seq: u64) {
        match self {
            Touch::Page => produce_into(bytes, seq),
            Touch::All => bytes.fill(seq as u8),
        }
    }

    /// Reads the payload as this variant says; the sum keeps the reads.
    pub fn consume(self, bytes: &[u8]) -> u64 {
        match self {
            Touch::Page => bytes.iter().step_by(PAGE).map(|&b| u64::from(b)).sum(),
            Touch::All => bytes.iter().map(|&b| u64::from(b)).sum(),
        }
    }
}

/// Writes one byte per page, as every producer does.
pub fn produce_into(bytes: &mut [u8], seq: u64) {
    for i in (0..bytes.len()).step_by(PAGE) {
        bytes[i] = (seq as u8).wrapping_add(i as u8);
    }
}

/// One timed batch, sent to the consumer before it starts.
#[derive(Clone, Copy, Debug)]
pub struct Batch {
    /// What to do; each bench defines its commands. `b'q'` ends the child.
    pub cmd: u8,
    /// What the consumer reads of each payload.
    pub touch: Touch,
    /// Bytes per payload.
    pub size: usize,
    /// Payloads in the batch.
    pub iters: u64,
}

impl Batch {
    const LEN: usize = 18;

    /// Sends the batch.
    pub fn send(&self, sock: &mut UnixStream) {
        let mut msg = [0u8; Self::LEN];
        msg[0] = self.cmd;
        msg[1] = u8::from(self.touch == Touch::All);
        msg[2..10].copy_from_slice(&(self.size as u64).to_le_bytes());
        msg[10..].copy_from_slice(&self.iters.to_le_bytes());
        sock.write_all(&msg).unwrap();
    }

    /// Receives a batch; `None` when the producer quit or hung up.
    pub fn recv(sock: &mut UnixStream) -> Option<Batch> {
        let mut msg = [0u8; Self::LEN];
        sock.read_exact(&mut msg).ok()?;
        if msg[0] == b'q' {
            return None;
        }
        Some(Batch {
            cmd: msg[0],
            touch: if msg[1] == 1 { Touch::All } else { Touch::Page },
            size: u64::from_le_bytes(msg[2..10].try_into().unwrap()) as usize,
            iters: u64::from_le_bytes(msg[10..].try_into().unwrap()),
        })
    }
}

/// The consumer process and the control socket to it.
pub struct Consumer {
    child: Child,
    /// Batches go out and acknowledgements come back here.
    pub sock: UnixStream,
}

impl Consumer {
    /// Starts this executable again as the consumer, with `envs` set.
    pub fn start(envs: &[(&str, String)]) -> Consumer {
        let path = std::env::temp_dir().join(format!("fastio-handoff-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).unwrap();
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.env(CHILD_ENV, &path);
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let child = cmd.spawn().unwrap();
        let (sock, _) = listener.accept().unwrap();
        let _ = std::fs::remove_file(&path);
        big_buffers(&sock);
        Consumer { child, sock }
    }

    /// Sends a batch (outside the timed region).
    pub fn begin(&mut self, batch: Batch) {
        batch.send(&mut self.sock);
    }

    /// Waits for the one-byte acknowledgement the consumer ends a batch with.
    pub fn wait_ack(&mut self) {
        let mut ack = [0u8; 1];
        self.sock.read_exact(&mut ack).unwrap();
        assert_eq!(ack[0], b'k');
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        let _ = self.sock.write_all(&[b'q'; Batch::LEN]);
        let _ = self.child.wait();
    }
}

/// The consumer's end of the control socket (the path is in [`CHILD_ENV`]).
pub fn connect(path: &str) -> UnixStream {
    let sock = UnixStream::connect(path).unwrap();
    big_buffers(&sock);
    sock
}

/// 4 MiB socket buffers, as a tuned copy pipeline would use.
pub fn big_buffers(sock: &UnixStream) {
    let size: libc::c_int = 4 << 20;
    for opt in [libc::SO_SNDBUF, libc::SO_RCVBUF] {
        // SAFETY: a valid socket descriptor, a pointer to a live c_int and
        // its exact size; setsockopt only reads it.
        let rc = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&raw const size).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0, "setsockopt");
    }
}

/// The criterion settings of both groups: ten samples, a short warm-up
/// (excluded from the results), two seconds of measurement.
pub fn configure<M: criterion::measurement::Measurement>(g: &mut criterion::BenchmarkGroup<'_, M>) {
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
}
