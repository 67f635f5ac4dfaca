//! Fast I/O benchmarks, each reported by `cargo xtask bench` as a ratio to
//! the `baseline*` functions measured in the same run.
//!
//! * `steady_state`: `get` + `map` + unmap + release of a published
//!   allocation, against an in-process `HashMap` lookup + `Arc` clone.
//! * `cycle`: create + publish + get + free of a 4 KiB allocation whose
//!   block is recycled, against allocating and touching a 4 KiB `Vec`.
//! * `handoff/<size>`: one process hands `size` bytes to another. The
//!   producer (this process) creates, writes one byte per page, publishes
//!   and releases; the consumer (a child process) gets, maps, reads one
//!   byte per page and frees, then acknowledges over a Unix socket.
//!   `fastio_warm` reuses a cached block (pages already faulted in, in
//!   both processes); `fastio_cold` uses a context that keeps no cache, so
//!   every handoff commits and faults in fresh pages. Baselines:
//!   `baseline_socket` sends the same bytes through the Unix socket (the
//!   consumer reads them all into a buffer), `baseline_memcpy` copies them
//!   once within one process.

use std::collections::HashMap;
use std::hint::black_box;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use fastio::{Context, ContextOptions};

const CHILD_ENV: &str = "FASTIO_BENCH_CHILD";
const PAGE: usize = 4096;
const SIZES: [(usize, &str); 4] = [
    (4 << 10, "4KiB"),
    (1 << 20, "1MiB"),
    (64 << 20, "64MiB"),
    (256 << 20, "256MiB"),
];

fn options(capacity: u64) -> ContextOptions {
    ContextOptions::new()
        .capacity(capacity)
        .prefix("fastio-bench")
}

fn steady_state(c: &mut Criterion) {
    let ctx = Context::new(&options(1 << 20)).unwrap();
    let a = ctx.create(PAGE as u64).unwrap();
    a.publish("tensor").unwrap();
    let mut g = c.benchmark_group("steady_state");
    g.bench_function("fastio_get_map", |b| {
        b.iter(|| {
            let a = ctx.get(black_box("tensor")).unwrap();
            let m = a.map().unwrap();
            black_box(m[0]);
        })
    });
    g.bench_function("fastio_map_by_name", |b| {
        b.iter(|| {
            let m = ctx.map(black_box("tensor")).unwrap();
            black_box(m[0]);
        })
    });
    let mut map: HashMap<String, Arc<Vec<u8>>> = HashMap::new();
    map.insert("tensor".into(), Arc::new(vec![0u8; PAGE]));
    g.bench_function("baseline_hashmap_arc", |b| {
        b.iter(|| {
            let v = map.get(black_box("tensor")).unwrap().clone();
            black_box(v[0]);
        })
    });
    g.finish();
}

fn cycle(c: &mut Criterion) {
    let ctx = Context::new(&options(1 << 20)).unwrap();
    let mut g = c.benchmark_group("cycle");
    g.bench_function("fastio_create_publish_get_free", |b| {
        b.iter(|| {
            let a = ctx.create(PAGE as u64).unwrap();
            a.publish("cycle").unwrap();
            let got = ctx.get("cycle").unwrap();
            a.release().unwrap();
            got.free().unwrap();
        })
    });
    g.bench_function("baseline_vec_4k", |b| {
        b.iter(|| {
            let mut v = Vec::<u8>::with_capacity(PAGE);
            v.resize(PAGE, 1);
            black_box(&v);
        })
    });
    g.finish();
}

/// The consumer process and the socket to it.
struct Consumer {
    child: Child,
    sock: UnixStream,
}

impl Consumer {
    fn start(warm: &Context, cold: &Context) -> Consumer {
        let path = std::env::temp_dir().join(format!("fastio-bench-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).unwrap();
        let child = Command::new(std::env::current_exe().unwrap())
            .env(CHILD_ENV, &path)
            .env("WARM", warm.handle())
            .env("COLD", cold.handle())
            .spawn()
            .unwrap();
        let (sock, _) = listener.accept().unwrap();
        let _ = std::fs::remove_file(&path);
        big_buffers(&sock);
        Consumer { child, sock }
    }

    /// Sends a command and waits for the acknowledgement.
    fn round_trip(&mut self, cmd: u8, size: usize, payload: Option<&[u8]>) {
        let mut msg = [0u8; 9];
        msg[0] = cmd;
        msg[1..].copy_from_slice(&(size as u64).to_le_bytes());
        self.sock.write_all(&msg).unwrap();
        if let Some(p) = payload {
            self.sock.write_all(p).unwrap();
        }
        let mut ack = [0u8; 1];
        self.sock.read_exact(&mut ack).unwrap();
        assert_eq!(ack[0], b'k');
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        let _ = self.sock.write_all(&[b'q'; 9]);
        let _ = self.child.wait();
    }
}

/// 4 MiB socket buffers, as a tuned copy pipeline would use.
fn big_buffers(sock: &UnixStream) {
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

/// Producer side of one shared-memory handoff.
fn produce(ctx: &Context, size: usize) {
    let mut a = ctx.create(size as u64).unwrap();
    {
        let mut m = a.map_mut().unwrap();
        for i in (0..size).step_by(PAGE) {
            m[i] = i as u8;
        }
    }
    a.publish("handoff").unwrap();
    a.release().unwrap();
}

fn handoff(c: &mut Criterion) {
    let max = SIZES.last().unwrap().0 as u64;
    let warm = Context::new(&options(2 * max)).unwrap();
    let cold = Context::new(&options(2 * max).cache_limit(0)).unwrap();
    let mut consumer = Consumer::start(&warm, &cold);
    let mut g = c.benchmark_group("handoff");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    for (size, label) in SIZES {
        g.throughput(Throughput::Bytes(size as u64));
        let src = vec![7u8; size];
        let mut dst = vec![0u8; size];
        g.bench_function(BenchmarkId::new("baseline_memcpy", label), |b| {
            b.iter(|| {
                dst.copy_from_slice(black_box(&src));
                black_box(&dst);
            })
        });
        g.bench_function(BenchmarkId::new("baseline_socket", label), |b| {
            b.iter(|| consumer.round_trip(b's', size, Some(&src)))
        });
        // The consumer learns of each publication by waiting on the
        // context's publication event and answers by publishing `ack`: no
        // socket in the loop (one message per batch only).
        g.bench_function(BenchmarkId::new("fastio_warm_wait", label), |b| {
            b.iter_custom(|iters| {
                let mut msg = [0u8; 9];
                msg[0] = b'W';
                msg[1..].copy_from_slice(&iters.to_le_bytes());
                consumer.sock.write_all(&msg).unwrap();
                let t0 = Instant::now();
                for _ in 0..iters {
                    produce(&warm, size);
                    warm.wait_for("ack", Duration::from_secs(60))
                        .unwrap()
                        .free()
                        .unwrap();
                }
                let elapsed = t0.elapsed();
                let mut ack = [0u8; 1];
                consumer.sock.read_exact(&mut ack).unwrap();
                elapsed
            })
        });
        for (name, ctx, cmd) in [("fastio_warm", &warm, b'w'), ("fastio_cold", &cold, b'c')] {
            g.bench_function(BenchmarkId::new(name, label), |b| {
                b.iter_custom(|iters| {
                    let t0 = Instant::now();
                    for _ in 0..iters {
                        produce(ctx, size);
                        consumer.round_trip(cmd, size, None);
                    }
                    t0.elapsed()
                })
            });
        }
    }
    g.finish();
}

/// The consumer process: serves commands until told to quit.
fn child(path: &str) {
    let warm = Context::attach(&std::env::var("WARM").unwrap()).unwrap();
    let cold = Context::attach(&std::env::var("COLD").unwrap()).unwrap();
    let mut sock = UnixStream::connect(path).unwrap();
    big_buffers(&sock);
    let mut buf: Vec<u8> = Vec::new();
    loop {
        let mut msg = [0u8; 9];
        if sock.read_exact(&mut msg).is_err() || msg[0] == b'q' {
            return;
        }
        let size = u64::from_le_bytes(msg[1..].try_into().unwrap()) as usize;
        let mut sum = 0u64;
        if msg[0] == b'W' {
            // `size` is the number of handoffs of this batch.
            for _ in 0..size {
                let m = warm.map_wait("handoff", Duration::from_secs(60)).unwrap();
                sum += m.iter().step_by(PAGE).map(|&b| u64::from(b)).sum::<u64>();
                let a = m.allocation().try_clone().unwrap();
                drop(m);
                a.free().unwrap();
                warm.create(1).unwrap().publish("ack").unwrap();
            }
            black_box(sum);
            sock.write_all(b"k").unwrap();
            continue;
        }
        match msg[0] {
            b's' => {
                buf.resize(size, 0);
                sock.read_exact(&mut buf).unwrap();
                sum += buf.iter().step_by(PAGE).map(|&b| u64::from(b)).sum::<u64>();
            }
            cmd => {
                let ctx = if cmd == b'w' { &warm } else { &cold };
                let a = ctx.get("handoff").unwrap();
                {
                    let m = a.map().unwrap();
                    sum += m.iter().step_by(PAGE).map(|&b| u64::from(b)).sum::<u64>();
                }
                a.free().unwrap();
            }
        }
        black_box(sum);
        sock.write_all(b"k").unwrap();
    }
}

fn main() {
    if let Ok(path) = std::env::var(CHILD_ENV) {
        child(&path);
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    steady_state(&mut c);
    cycle(&mut c);
    handoff(&mut c);
    c.final_summary();
}
