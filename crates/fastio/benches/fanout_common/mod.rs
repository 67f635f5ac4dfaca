//! What both sides of the fan-out bench share — ours
//! (`crates/fastio/benches/fanout.rs`) and iceoryx2's
//! (`peers/iceoryx2/benches/fanout.rs`, which includes this file by path):
//! one producer, `n` consumer processes of one stream, the same payloads,
//! pacing, frames in flight and measurements, so that the two lines each
//! prints for a count are like for like.
//!
//! The rules:
//! * the producer sends [`FRAMES`] frames, one every [`PACE`] (well below
//!   saturation at every count: what is measured is the cost of a frame,
//!   not a queue); per frame it writes one byte per page, then its number
//!   and the time it sends it (`CLOCK_MONOTONIC`, one clock for every
//!   process of the machine) in the first 16 bytes, then publishes (and
//!   notifies, where the transport has a separate notification); its
//!   **cost** is the time from asking for the frame's memory to the end of
//!   the publish;
//! * each consumer sleeps until woken (no busy-waiting), reads the frame's
//!   number and time and one byte per page, and records its **latency**:
//!   its clock when it got the frame minus the producer's stamp;
//! * at most [`DEPTH`] frames in flight per consumer, counted as the stream
//!   rows count them (`handoff_common::STREAM_DEPTH`);
//! * the first [`WARMUP`] frames are left out of every figure.
//!
//! Each side prints one line per payload size and count ([`Figures::line`]),
//! which `cargo xtask bench` reads.

#![allow(dead_code)] // each side uses its own subset

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

/// Consumer processes per stream, in order.
pub const COUNTS: [usize; 5] = [1, 2, 4, 8, 16];

/// Payload sizes, with their labels.
pub const SIZES: [(usize, &str); 2] = [(4 << 10, "4KiB"), (1 << 20, "1MiB")];

/// Frames per count and size (the first [`WARMUP`] not counted).
pub const FRAMES: u64 = 600;

/// Frames left out of every figure (start-up).
pub const WARMUP: u64 = 50;

/// One frame every this long.
pub const PACE: Duration = Duration::from_millis(2);

/// Frames in flight per consumer at most (as the stream rows count them).
pub const DEPTH: usize = 6;

/// The page: one byte of each is written and read.
pub const PAGE: usize = 4096;

/// The environment variable that makes a bench executable a consumer:
/// `INDEX SIZE`.
pub const CHILD_ENV: &str = "FASTIO_FANOUT_CHILD";

/// The longest any wait may take before the bench fails.
pub const WAIT: Duration = Duration::from_secs(60);

/// `CLOCK_MONOTONIC` in nanoseconds.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC exists on
    // every Linux.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(r, 0, "clock_gettime");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Writes frame `seq`: one byte per page, then its number and the time
/// (last, so that the stamp is the moment it goes).
pub fn produce(bytes: &mut [u8], seq: u64) {
    for i in (0..bytes.len()).step_by(PAGE) {
        bytes[i] = (seq as u8).wrapping_add(i as u8);
    }
    bytes[..8].copy_from_slice(&seq.to_le_bytes());
    bytes[8..16].copy_from_slice(&now_ns().to_le_bytes());
}

/// Reads a frame: its number and latency (now minus its stamp); checks
/// the one byte per page past the header.
pub fn consume(bytes: &[u8]) -> (u64, u64) {
    let now = now_ns();
    let seq = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    let sent = u64::from_le_bytes(bytes[8..16].try_into().unwrap());
    for i in (PAGE..bytes.len()).step_by(PAGE) {
        assert_eq!(
            bytes[i],
            (seq as u8).wrapping_add(i as u8),
            "frame {seq}: byte {i} is not the frame's"
        );
    }
    (seq, now.saturating_sub(sent))
}

/// The consumers of one count, started and ready.
pub struct Consumers {
    children: Vec<(Child, BufReader<ChildStdout>)>,
}

impl Consumers {
    /// Starts `n` consumers (this executable, with [`CHILD_ENV`] and
    /// `envs`) of payloads of `size` bytes, and waits until each says it
    /// is ready (its port open: no frame can pass it by).
    pub fn start(n: usize, size: usize, envs: &[(&str, String)]) -> Consumers {
        let exe = std::env::current_exe().unwrap();
        let mut children = Vec::new();
        for i in 0..n {
            let mut cmd = Command::new(&exe);
            cmd.env(CHILD_ENV, format!("{i} {size}"))
                .stdin(Stdio::null())
                .stdout(Stdio::piped());
            for (k, v) in envs {
                cmd.env(k, v);
            }
            let mut child = cmd.spawn().unwrap();
            let out = BufReader::new(child.stdout.take().unwrap());
            children.push((child, out));
        }
        for (i, (_, out)) in children.iter_mut().enumerate() {
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
            assert_eq!(line.trim(), "ready", "consumer {i}");
        }
        Consumers { children }
    }

    /// Waits for every consumer's latencies (each consumer's, in order).
    pub fn finish(self) -> Vec<Vec<u64>> {
        let mut all = Vec::new();
        for (i, (mut child, mut out)) in self.children.into_iter().enumerate() {
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
            let lat: Vec<u64> = line
                .strip_prefix("latencies ")
                .unwrap_or_else(|| panic!("consumer {i} said {line:?}"))
                .split_whitespace()
                .map(|w| w.parse().unwrap())
                .collect();
            assert!(child.wait().unwrap().success(), "consumer {i} failed");
            all.push(lat);
        }
        all
    }
}

/// The consumer's side of [`Consumers`]: its index and payload size (from
/// [`CHILD_ENV`]).
pub fn child_spec() -> Option<(usize, usize)> {
    let spec = std::env::var(CHILD_ENV).ok()?;
    let mut w = spec.split_whitespace().map(|w| w.parse().unwrap());
    Some((w.next().unwrap(), w.next().unwrap()))
}

/// Says the consumer is ready.
pub fn say_ready() {
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready").unwrap();
    out.flush().unwrap();
}

/// Gives the consumer's latencies (frames from [`WARMUP`] on) to the
/// producer.
pub fn say_latencies(lat: &[u64]) {
    let words: Vec<String> = lat
        .iter()
        .skip(WARMUP as usize)
        .map(u64::to_string)
        .collect();
    let mut out = std::io::stdout().lock();
    writeln!(out, "latencies {}", words.join(" ")).unwrap();
    out.flush().unwrap();
}

/// Waits until `start + PACE × (seq + 1)`.
pub fn pace(start: std::time::Instant, seq: u64) {
    let due = start + PACE * (seq as u32 + 1);
    let now = std::time::Instant::now();
    if due > now {
        std::thread::sleep(due - now);
    }
}

/// The value below which `q` of the sorted samples lie.
pub fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// What one count measured.
pub struct Figures {
    /// The producer's cost per frame (ns), from [`WARMUP`] on.
    pub producer: Vec<u64>,
    /// Each consumer's latencies (ns).
    pub latencies: Vec<Vec<u64>>,
}

impl Figures {
    /// `fanout side=S size=L consumers=N producer_p50_ns=… producer_p99_ns=…
    /// latency_p50_ns=… latency_p99_ns=… worst_consumer_p99_ns=… frames=…`:
    /// the producer's cost, every consumer's latencies pooled, and the
    /// highest of the consumers' own p99s.
    pub fn line(mut self, side: &str, label: &str) -> String {
        self.producer.sort_unstable();
        let mut pooled: Vec<u64> = self.latencies.iter().flatten().copied().collect();
        pooled.sort_unstable();
        let worst = self
            .latencies
            .iter_mut()
            .map(|l| {
                l.sort_unstable();
                percentile(l, 0.99)
            })
            .max()
            .unwrap_or(0);
        format!(
            "fanout side={side} size={label} consumers={} producer_p50_ns={} producer_p99_ns={} \
             latency_p50_ns={} latency_p99_ns={} worst_consumer_p99_ns={worst} frames={}",
            self.latencies.len(),
            percentile(&self.producer, 0.5),
            percentile(&self.producer, 0.99),
            percentile(&pooled, 0.5),
            percentile(&pooled, 0.99),
            pooled.len()
        )
    }
}
