//! shm-core benchmarks (criterion). Run with `cargo bench -p shm-core --bench shm`.
//!
//! Groups (ids starting with `baseline` are references for ratios):
//! * `lock/*`: uncontended lock+unlock pairs (ns), vs `baseline_cas_store`.
//! * `wakeup/cross_process_one_way`: futex hand-off to a child process
//!   (the bench binary re-executed with `SHMCORE_BENCH_CHILD`), one way.
//! * `segment_create/*`: create + map + unlink (+ fallocate) by size.
//! * `page_touch/*`: writing a freshly mapped segment (first touch) and an
//!   already-faulted one, vs `baseline_memcpy` of the same size.

use std::hint::black_box;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput};
use shm_core::{Offset, Segment, SegmentOptions, ShmEvent, ShmMutex};

const PREFIX: &str = "shmcorebench";
const CHILD_ENV: &str = "SHMCORE_BENCH_CHILD";

fn quick<'a>(
    c: &'a mut Criterion,
    name: &str,
) -> criterion::BenchmarkGroup<'a, criterion::measurement::WallTime> {
    let mut g = c.benchmark_group(name);
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    g
}

fn at(seg: &Segment, rel: u64) -> Offset {
    Offset(seg.data_offset().get() + rel)
}

fn bench_locks(c: &mut Criterion) {
    let seg = Segment::create(&SegmentOptions::new(8192).prefix(PREFIX)).unwrap();
    let p = seg.join().unwrap();
    let m: &ShmMutex = seg.at(at(&seg, 0)).unwrap();
    let word: &AtomicU32 = seg.at(at(&seg, 2048)).unwrap();
    let mut g = quick(c, "lock");
    g.bench_function("baseline_cas_store", |b| {
        b.iter(|| {
            let _ = black_box(word.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed));
            word.store(0, Ordering::Release);
        })
    });
    g.bench_function("mutex_lock_unlock", |b| {
        b.iter(|| drop(black_box(m.lock(&p).unwrap())))
    });
    g.finish();
}

/// Child side of the wake-up benchmark: answer every ping with a pong.
fn pong_child(name: &str) {
    let seg = Segment::open(name).unwrap();
    let ping: &ShmEvent = seg.at(at(&seg, 0)).unwrap();
    let pong: &ShmEvent = seg.at(at(&seg, 64)).unwrap();
    let stop: &AtomicU32 = seg.at(at(&seg, 128)).unwrap();
    // The ping count first, then ready: the parent pings as soon as it
    // sees ready, and a ping read into `seen` would never be answered.
    let mut seen = ping.current();
    pong.notify(); // ready
    let t0 = Instant::now();
    while stop.load(Ordering::Acquire) == 0 && t0.elapsed() < Duration::from_secs(300) {
        if let Some(s) = ping.wait_while(seen, Duration::from_millis(100)) {
            seen = s;
            pong.notify();
        }
    }
}

fn bench_wakeup(c: &mut Criterion) {
    let seg = Segment::create(&SegmentOptions::new(8192).prefix(PREFIX)).unwrap();
    let ping: &ShmEvent = seg.at(at(&seg, 0)).unwrap();
    let pong: &ShmEvent = seg.at(at(&seg, 64)).unwrap();
    let stop: &AtomicU32 = seg.at(at(&seg, 128)).unwrap();
    let before = pong.current();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(CHILD_ENV, seg.name().unwrap())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        pong.wait_while(before, Duration::from_secs(30)).is_some(),
        "child did not start"
    );
    let mut g = quick(c, "wakeup");
    g.bench_function("cross_process_one_way", |b| {
        b.iter_custom(|iters| {
            let t0 = Instant::now();
            for _ in 0..iters {
                let seen = pong.current();
                ping.notify();
                pong.wait_while(seen, Duration::from_secs(10))
                    .expect("child stopped answering");
            }
            t0.elapsed() / 2
        })
    });
    g.finish();
    stop.store(1, Ordering::Release);
    ping.notify();
    let _ = child.wait();
}

fn bench_create(c: &mut Criterion) {
    let mut g = quick(c, "segment_create");
    for size in [64u64 << 10, 1 << 20, 16 << 20] {
        g.throughput(Throughput::Bytes(size));
        g.bench_with_input(
            BenchmarkId::new("create_map_unlink", size),
            &size,
            |b, &size| {
                b.iter(|| {
                    drop(black_box(
                        Segment::create(&SegmentOptions::new(size).prefix(PREFIX).allocate(false))
                            .unwrap(),
                    ))
                })
            },
        );
        g.bench_with_input(
            BenchmarkId::new("create_fallocate_map_unlink", size),
            &size,
            |b, &size| {
                b.iter(|| {
                    drop(black_box(
                        Segment::create(&SegmentOptions::new(size).prefix(PREFIX)).unwrap(),
                    ))
                })
            },
        );
    }
    g.finish();
}

fn bench_touch(c: &mut Criterion) {
    const SIZE: u64 = 16 << 20;
    let src = vec![0x5Au8; SIZE as usize];
    let mut dst = vec![0u8; SIZE as usize];
    let mut g = quick(c, "page_touch");
    g.throughput(Throughput::Bytes(SIZE));
    g.bench_function("baseline_memcpy", |b| {
        b.iter(|| {
            dst.copy_from_slice(black_box(&src));
            black_box(&dst);
        })
    });
    g.bench_function("write_fresh_segment", |b| {
        b.iter_batched(
            || Segment::create(&SegmentOptions::new(SIZE).prefix(PREFIX).allocate(false)).unwrap(),
            |seg| {
                // SAFETY: nothing else references the fresh segment's bytes.
                unsafe { seg.write_bytes(seg.data_offset(), black_box(&src)) }.unwrap();
                seg
            },
            BatchSize::PerIteration,
        )
    });
    let warm = Segment::create(&SegmentOptions::new(SIZE).prefix(PREFIX)).unwrap();
    // SAFETY: the bench lends out no reference to the segment's bytes and
    // copies from one thread (the same holds in the loop below).
    unsafe { warm.write_bytes(warm.data_offset(), &src) }.unwrap();
    g.bench_function("write_mapped_segment", |b| {
        b.iter(|| {
            // SAFETY: as above.
            unsafe { warm.write_bytes(warm.data_offset(), black_box(&src)) }.unwrap()
        })
    });
    g.finish();
}

fn main() {
    if let Ok(name) = std::env::var(CHILD_ENV) {
        pong_child(&name);
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    bench_locks(&mut c);
    bench_wakeup(&mut c);
    bench_create(&mut c);
    bench_touch(&mut c);
    c.final_summary();
    // Benchmarks leave nothing behind.
    let left = shm_core::list_segments(Some(PREFIX)).unwrap();
    assert!(
        left.iter().all(|s| s.alive) || left.is_empty(),
        "bench leaked {left:?}"
    );
    let _ = shm_core::gc(Some(PREFIX));
}
