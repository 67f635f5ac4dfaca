//! Handoff between two processes: fastio against a Unix-socket copy and
//! memcpy, measured in one run. `peers/iceoryx2` measures iceoryx2 with the
//! same payloads, rules and function names (see `handoff_common`), and
//! `cargo xtask bench --report` sets them side by side.
//!
//! * `handoff/<size>` (latency, one payload at a time):
//!   - `baseline_memcpy`: one copy within one process, the floor;
//!   - `socket_<touch>`: the producer writes the payload into a Unix
//!     socket, the consumer reads it into its buffer and acknowledges;
//!   - `fastio_warm_<touch>`: create, write, publish and release (one
//!     step, `Allocation::publish_and_release`); the consumer
//!     waits for the name on the context's publication event, maps, reads,
//!     and unmaps and frees in one step (`MappedPublished::free`), which
//!     is its acknowledgement: the producer waits on the same event until
//!     the name is gone (`Context::wait_unpublished`). The context keeps
//!     a cache, so blocks (and their pages) are reused;
//!   - `fastio_cold_<touch>`: the same on a context without a cache: every
//!     handoff commits fresh pages and punches them out on free;
//!   - `floor_fresh_<touch>`: the kernel's floor for a handoff of fresh
//!     pages: the two processes share one `memfd`, the producer writes the
//!     payload through its mapping (the kernel allocates and zeroes the
//!     pages as it faults them in) and says so over the socket, the
//!     consumer reads through its own mapping, punches the range out (the
//!     pages go back to the system, the next payload's are fresh again)
//!     and acknowledges. No allocator, no tables, no names;
//!   - `socket_fresh_<touch>`: `socket_<touch>` with the consumer reading
//!     into a buffer allocated anew for each payload, as a one-shot job's
//!     receiver would;
//!   - `fastio_warm_spin_page`: `fastio_warm_page` with both sides spinning
//!     before they sleep ([`Context::set_wait_spin`]), the peer of
//!     iceoryx2's busy-polling variant;
//!   - `fastio_ring_page`, `fastio_ring_spin_page`: a stream of depth 1
//!     (`StreamProducer` / `StreamConsumer`): the producer writes the slot
//!     and publishes; the consumer takes the frame, reads it and drops it,
//!     which releases the slot, and that is the producer's acknowledgement
//!     (its next `next_slot` waits for it). No lock and no allocation per
//!     payload; sleeping, or both sides spinning.
//! * `stream/<size>` (throughput, at most `STREAM_DEPTH` payloads in
//!   flight): `socket_page` (the socket's own buffers bound what is in
//!   flight) and `fastio_warm_page` (a ring of names, a slot reused once
//!   its consumer freed it; with every slot in flight the producer polls
//!   for a free one, as iceoryx2's `RetryUntilDelivered` backpressure
//!   does, while the consumer sleeps on the event like iceoryx2's
//!   listener), and `fastio_ring_page`: a stream of depth `STREAM_DEPTH`
//!   (the ring of slots, lock-free) with the same waits;
//!   `fastio_ring_spin_page`, the same with both sides spinning (the peer
//!   of iceoryx2's polling subscriber, `iceoryx2_poll_page`). Each has an
//!   `_all` twin: the producer writes every byte, the consumer reads every
//!   byte (what operators do with whole frames). The ring's two sides
//!   count how often they waited (`Regime`).

mod handoff_common;

use std::hint::black_box;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use criterion::{BenchmarkGroup, BenchmarkId, Criterion, Throughput, measurement::WallTime};
use std::collections::HashMap;

use dtype::Primitive;
use fastio::{Context, ContextOptions, StreamConsumer, StreamOptions, StreamProducer};
use handoff_common::{
    Batch, CHILD_ENV, Consumer, Regime, SIZES, STREAM_DEPTH, STREAM_SIZES, Touch, configure,
    connect, produce_into,
};

/// Long enough for a 256 MiB cold handoff on a loaded machine.
const WAIT: Duration = Duration::from_secs(60);

/// An anonymous (`memfd`) context, as `fastio run` makes: the child
/// inherits its descriptor.
fn context(capacity: u64, cache: bool) -> Context {
    let mut options = ContextOptions::new().capacity(capacity).anonymous(true);
    if !cache {
        options = options.cache_limit(0);
    }
    Context::new(&options).unwrap()
}

/// Producer side of one fastio handoff.
fn produce(ctx: &Context, size: usize, name: &str, seq: u64) {
    let mut a = ctx.create(size as u64).unwrap();
    produce_into(&mut a.map_mut().unwrap(), seq);
    a.publish_and_release(name).unwrap();
}

/// The floor's `memfd`: mapped read-write here, read-only in the
/// consumer, which inherits the descriptor.
struct Floor {
    fd: i32,
    ptr: *mut u8,
    len: usize,
}

impl Floor {
    fn new(len: usize) -> Floor {
        // SAFETY: a NUL-terminated name; no flags (the descriptor is
        // inherited by the consumer).
        let fd = unsafe { libc::memfd_create(c"fastio-floor".as_ptr(), 0) };
        assert!(fd >= 0, "memfd_create");
        // SAFETY: a descriptor we own.
        assert_eq!(unsafe { libc::ftruncate(fd, len as libc::off_t) }, 0);
        Floor {
            fd,
            ptr: map(fd, len, true),
            len,
        }
    }
}

/// Maps `len` bytes of `fd`, shared.
fn map(fd: i32, len: usize, write: bool) -> *mut u8 {
    let prot = if write {
        libc::PROT_READ | libc::PROT_WRITE
    } else {
        libc::PROT_READ
    };
    // SAFETY: a fresh mapping at an address the kernel chooses.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd, 0) };
    assert_ne!(p, libc::MAP_FAILED, "mmap");
    // Huge pages where the system allows them for shared memory, as our
    // contexts ask (best effort).
    // SAFETY: the advice changes no content of the mapping just made.
    let _ = unsafe { libc::madvise(p, len, libc::MADV_HUGEPAGE) };
    p.cast()
}

struct Producer {
    warm: Context,
    cold: Context,
    floor: Floor,
    consumer: Consumer,
    /// Streams by name, made once (in the warm context).
    rings: HashMap<String, StreamProducer>,
}

/// The stream a batch uses: depth 1 for the round trips (`r`, `y`), the
/// stream depth for throughput (`R` sleeping, `Y` spinning).
fn ring_name(cmd: u8, size: usize) -> String {
    match cmd {
        b'R' | b'Y' => format!("ring-{size}"),
        _ => format!("ring1-{size}"),
    }
}

impl Producer {
    /// Times `batch` with `run`, which does the producer's part of every
    /// payload; the consumer's closing acknowledgement is outside the time.
    fn timed(&mut self, batch: Batch, run: impl FnOnce(&mut Self)) -> Duration {
        self.consumer.begin(batch);
        let t0 = Instant::now();
        run(self);
        let elapsed = t0.elapsed();
        self.consumer.wait_ack();
        elapsed
    }

    /// A socket copy (`S`, both buffers reused; `N`, the consumer's fresh
    /// each time) or the fresh-page floor (`F`).
    fn socket_or_floor_latency(&mut self, batch: Batch, src: &mut [u8]) -> Duration {
        self.timed(batch, |p| {
            for seq in 0..batch.iters {
                if batch.cmd == b'F' {
                    assert!(batch.size <= p.floor.len);
                    // SAFETY: inside the mapping; the consumer reads it only
                    // between our message and its acknowledgement, when we
                    // do not write.
                    let out = unsafe { std::slice::from_raw_parts_mut(p.floor.ptr, batch.size) };
                    produce_into(out, seq);
                    p.consumer.sock.write_all(b"g").unwrap();
                } else {
                    produce_into(src, seq);
                    p.consumer.sock.write_all(src).unwrap();
                }
                let mut ack = [0u8; 1];
                p.consumer.sock.read_exact(&mut ack).unwrap();
            }
        })
    }

    fn fastio_latency(&mut self, batch: Batch, cold: bool) -> Duration {
        self.warm.set_wait_spin(spin_budget(batch.cmd));
        self.timed(batch, |p| {
            let ctx = if cold { &p.cold } else { &p.warm };
            for seq in 0..batch.iters {
                produce(ctx, batch.size, "handoff", seq);
                ctx.wait_unpublished("handoff", WAIT).unwrap();
            }
        })
    }

    /// The producer of the stream `batch` uses, made on first use.
    fn ring(&mut self, batch: Batch) -> String {
        let name = ring_name(batch.cmd, batch.size);
        let depth = if matches!(batch.cmd, b'R' | b'Y') {
            STREAM_DEPTH
        } else {
            1
        };
        let warm = &self.warm;
        self.rings.entry(name.clone()).or_insert_with(|| {
            let opts = StreamOptions::new(Primitive::UInt8, &[batch.size]).depth(depth);
            warm.create_stream(&name, &opts).unwrap()
        });
        name
    }

    /// Depth-1 round trips: each `next_slot` waits for the consumer's
    /// release of the frame before.
    fn ring_latency(&mut self, batch: Batch) -> Duration {
        self.warm.set_wait_spin(spin_budget(batch.cmd));
        let name = self.ring(batch);
        self.timed(batch, |p| {
            let tx = p.rings.get_mut(&name).unwrap();
            for seq in 0..batch.iters {
                let mut slot = tx.next_slot(Some(WAIT)).unwrap();
                produce_into(slot.bytes_mut(), seq);
                slot.publish().unwrap();
            }
        })
    }

    fn ring_stream(&mut self, batch: Batch) -> Duration {
        self.warm.set_wait_spin(if batch.cmd == b'Y' {
            spin_budget(b'Y')
        } else {
            STREAM_BACKPRESSURE_SPIN
        });
        let name = self.ring(batch);
        let mut regime = Regime::new("producer");
        let t0 = Instant::now();
        self.consumer.begin(batch);
        let tx = self.rings.get_mut(&name).unwrap();
        for seq in 0..batch.iters {
            // A slot at once, or a wait for one (the ring was full).
            let at_once = tx.next_slot(Some(Duration::ZERO));
            let mut slot = if let Err(fastio::Error::StreamTimeout { .. }) = &at_once {
                drop(at_once);
                regime.frame(true);
                tx.next_slot(Some(WAIT)).unwrap()
            } else {
                regime.frame(false);
                at_once.unwrap()
            };
            batch.touch.produce(slot.bytes_mut(), seq);
            slot.publish().unwrap();
        }
        self.consumer.wait_ack();
        let elapsed = t0.elapsed();
        regime.flush();
        elapsed
    }

    fn socket_stream(&mut self, batch: Batch, src: &mut [u8]) -> Duration {
        let t0 = Instant::now();
        self.consumer.begin(batch);
        for seq in 0..batch.iters {
            produce_into(src, seq);
            self.consumer.sock.write_all(src).unwrap();
        }
        self.consumer.wait_ack();
        t0.elapsed()
    }

    fn fastio_stream(&mut self, batch: Batch) -> Duration {
        // Under backpressure (every slot in flight) the producer polls for
        // a free slot, as iceoryx2's `RetryUntilDelivered` does (its
        // adaptive wait); both consumers sleep on their event.
        self.warm.set_wait_spin(STREAM_BACKPRESSURE_SPIN);
        let t0 = Instant::now();
        self.consumer.begin(batch);
        let ring = names();
        for seq in 0..batch.iters {
            let slot = seq as usize % STREAM_DEPTH;
            if seq as usize >= STREAM_DEPTH {
                self.warm.wait_unpublished(&ring[slot], WAIT).unwrap();
            }
            let mut a = self.warm.create(batch.size as u64).unwrap();
            batch.touch.produce(&mut a.map_mut().unwrap(), seq);
            a.publish_and_release(&ring[slot]).unwrap();
        }
        self.consumer.wait_ack();
        t0.elapsed()
    }
}

/// How long the stream's producer polls for a free slot before it sleeps.
const STREAM_BACKPRESSURE_SPIN: Duration = Duration::from_millis(1);

/// How long waits spin before they sleep: long enough to cover any
/// handoff in the spinning variants (`x`, `y`, `Y`), zero otherwise.
fn spin_budget(cmd: u8) -> Duration {
    if matches!(cmd, b'x' | b'y' | b'Y') {
        Duration::from_secs(1)
    } else {
        Duration::ZERO
    }
}

/// The stream's slot names: a slot is reused once its consumer freed it.
fn names() -> Vec<String> {
    (0..STREAM_DEPTH).map(|k| format!("s{k}")).collect()
}

fn latency(g: &mut BenchmarkGroup<'_, WallTime>, p: &mut Producer) {
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
        drop(dst);
        let mut src = src;
        for touch in Touch::BOTH {
            for (name, cmd) in [
                ("socket", b'S'),
                ("socket_fresh", b'N'),
                ("floor_fresh", b'F'),
            ] {
                let name = format!("{name}_{}", touch.suffix());
                g.bench_function(BenchmarkId::new(name, label), |b| {
                    b.iter_custom(|iters| {
                        p.socket_or_floor_latency(batch_of(cmd, touch, size, iters), &mut src)
                    })
                });
            }
            for (kind, cold, cmd) in [("warm", false, b'w'), ("cold", true, b'c')] {
                let name = format!("fastio_{kind}_{}", touch.suffix());
                g.bench_function(BenchmarkId::new(name, label), |b| {
                    b.iter_custom(|iters| p.fastio_latency(batch_of(cmd, touch, size, iters), cold))
                });
            }
        }
        let name = "fastio_warm_spin_page";
        g.bench_function(BenchmarkId::new(name, label), |b| {
            b.iter_custom(|iters| p.fastio_latency(batch_of(b'x', Touch::Page, size, iters), false))
        });
        for (name, cmd) in [("fastio_ring_page", b'r'), ("fastio_ring_spin_page", b'y')] {
            g.bench_function(BenchmarkId::new(name, label), |b| {
                b.iter_custom(|iters| p.ring_latency(batch_of(cmd, Touch::Page, size, iters)))
            });
        }
    }
}

fn batch_of(cmd: u8, touch: Touch, size: usize, iters: u64) -> Batch {
    Batch {
        cmd,
        touch,
        size,
        iters,
    }
}

fn stream(g: &mut BenchmarkGroup<'_, WallTime>, p: &mut Producer) {
    for (size, label) in STREAM_SIZES {
        g.throughput(Throughput::Bytes(size as u64));
        let mut src = vec![7u8; size];
        g.bench_function(BenchmarkId::new("socket_page", label), |b| {
            b.iter_custom(|iters| {
                p.socket_stream(batch_of(b's', Touch::Page, size, iters), &mut src)
            })
        });
        for touch in Touch::BOTH {
            let t = touch.suffix();
            g.bench_function(BenchmarkId::new(format!("fastio_warm_{t}"), label), |b| {
                b.iter_custom(|iters| p.fastio_stream(batch_of(b'W', touch, size, iters)))
            });
            for (name, cmd) in [("fastio_ring", b'R'), ("fastio_ring_spin", b'Y')] {
                g.bench_function(BenchmarkId::new(format!("{name}_{t}"), label), |b| {
                    b.iter_custom(|iters| p.ring_stream(batch_of(cmd, touch, size, iters)))
                });
            }
        }
    }
}

/// The consumer process: serves batches until told to quit.
fn child(path: &str) {
    let warm = Context::attach(&std::env::var("WARM").unwrap()).unwrap();
    let cold = Context::attach(&std::env::var("COLD").unwrap()).unwrap();
    let floor_fd: i32 = std::env::var("FLOOR_FD").unwrap().parse().unwrap();
    let floor_len: usize = std::env::var("FLOOR_LEN").unwrap().parse().unwrap();
    let floor = map(floor_fd, floor_len, false);
    let mut sock = connect(path);
    let mut buf: Vec<u8> = Vec::new();
    let mut sum = 0u64;
    // Stream consumers stay attached across batches: an index that left
    // would no longer hold its producer back.
    let mut rings: HashMap<String, StreamConsumer> = HashMap::new();
    let mut regime = Regime::new("consumer");
    while let Some(batch) = Batch::recv(&mut sock) {
        warm.set_wait_spin(spin_budget(batch.cmd));
        let ring = names();
        // The stream a ring batch reads, found once per batch (not per
        // frame: iceoryx2's subscriber is not looked up per sample either).
        let mut rx = matches!(batch.cmd, b'r' | b'y' | b'R' | b'Y').then(|| {
            let name = ring_name(batch.cmd, batch.size);
            let c = match rings.remove(&name) {
                Some(c) => c,
                None => warm.stream_consumer(&name, 0).unwrap(),
            };
            (name, c)
        });
        for seq in 0..batch.iters {
            match batch.cmd {
                b'S' | b's' => {
                    buf.resize(batch.size, 0);
                    sock.read_exact(&mut buf).unwrap();
                    sum = sum.wrapping_add(batch.touch.consume(&buf));
                    if batch.cmd == b'S' {
                        sock.write_all(b"a").unwrap();
                    }
                }
                b'N' => {
                    // A fresh buffer (large ones come from mmap: fresh
                    // pages, faulted in as the socket fills them).
                    let mut fresh = vec![0u8; batch.size];
                    sock.read_exact(&mut fresh).unwrap();
                    sum = sum.wrapping_add(batch.touch.consume(&fresh));
                    drop(fresh);
                    sock.write_all(b"a").unwrap();
                }
                b'F' => {
                    let mut go = [0u8; 1];
                    sock.read_exact(&mut go).unwrap();
                    assert!(batch.size <= floor_len);
                    // SAFETY: inside the mapping; the producer wrote it
                    // before its message and writes again only after our
                    // acknowledgement.
                    let bytes = unsafe { std::slice::from_raw_parts(floor, batch.size) };
                    sum = sum.wrapping_add(batch.touch.consume(bytes));
                    // SAFETY: no reference into the range lives past here
                    // (`bytes` is not used again); the punch makes the
                    // range read as zeros.
                    let r = unsafe {
                        libc::fallocate(
                            floor_fd,
                            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                            0,
                            batch.size as libc::off_t,
                        )
                    };
                    assert_eq!(r, 0, "punch");
                    sock.write_all(b"a").unwrap();
                }
                b'w' | b'x' | b'c' | b'W' => {
                    let ctx = if batch.cmd == b'c' { &cold } else { &warm };
                    let name = if batch.cmd == b'W' {
                        ring[seq as usize % STREAM_DEPTH].as_str()
                    } else {
                        "handoff"
                    };
                    // Done: unmap and free in one step; the producer,
                    // waiting until the name goes, learns of it.
                    let m = ctx.map_wait(name, WAIT).unwrap();
                    sum = sum.wrapping_add(batch.touch.consume(&m));
                    m.free().unwrap();
                }
                b'r' | b'y' | b'R' | b'Y' => {
                    let (_, rx) = rx.as_mut().expect("found for a ring batch");
                    // A frame at once, or a wait for one (the ring ran
                    // dry): counted for the stream rows.
                    let at_once = rx.next(Some(Duration::ZERO));
                    let f = if let Err(fastio::Error::StreamTimeout { .. }) = &at_once {
                        drop(at_once);
                        regime.frame(true);
                        rx.next(Some(WAIT)).unwrap().unwrap()
                    } else {
                        regime.frame(false);
                        at_once.unwrap().unwrap()
                    };
                    sum = sum.wrapping_add(batch.touch.consume(&f));
                    // Dropping the frame releases its slot: the ack.
                }
                other => panic!("unknown batch command {other}"),
            }
        }
        if let Some((name, c)) = rx {
            rings.insert(name, c);
        }
        if matches!(batch.cmd, b'R' | b'Y') {
            regime.flush();
        } else {
            // Round trips wait every time: not a stream's regime.
            regime = Regime::new("consumer");
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
    let max = SIZES.last().unwrap().0 as u64;
    // Room for the streams too: depth-1 rings of every size, and rings of
    // `STREAM_DEPTH` slots of the stream sizes.
    let rings: u64 = SIZES
        .iter()
        .map(|(s, _)| *s as u64 + (1 << 20))
        .sum::<u64>()
        + STREAM_SIZES
            .iter()
            .map(|(s, _)| (STREAM_DEPTH as u64) * (*s as u64) + (1 << 20))
            .sum::<u64>();
    let warm = context(2 * max + rings, true);
    let cold = context(2 * max, false);
    let floor = Floor::new(max as usize);
    let consumer = Consumer::start(&[
        ("WARM", warm.handle_for_children().unwrap()),
        ("COLD", cold.handle_for_children().unwrap()),
        ("FLOOR_FD", floor.fd.to_string()),
        ("FLOOR_LEN", floor.len.to_string()),
    ]);
    let mut p = Producer {
        warm,
        cold,
        floor,
        consumer,
        rings: HashMap::new(),
    };
    let mut c = Criterion::default().configure_from_args();
    let mut g = c.benchmark_group("handoff");
    configure(&mut g);
    latency(&mut g, &mut p);
    g.finish();
    let mut g = c.benchmark_group("stream");
    configure(&mut g);
    stream(&mut g, &mut p);
    g.finish();
    drop(p);
    c.final_summary();
}
