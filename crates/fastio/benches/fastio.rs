//! Fast I/O benchmarks, each reported by `cargo xtask bench` as a ratio to
//! the `baseline*` functions measured in the same run.
//!
//! * `steady_state`: `get` + `map` + unmap + release of a published
//!   allocation, against an in-process `HashMap` lookup + `Arc` clone.
//! * `cycle`: create + publish + get + free of a 4 KiB allocation whose
//!   block is recycled, against allocating and touching a 4 KiB `Vec`.
//! * `cold_parts/<size>`: where a cold handoff's time goes, in one
//!   process on a context without a cache: `create` (commit with
//!   `fallocate`, fault in with `MADV_POPULATE_WRITE`), a first read of
//!   one byte per page through a new read mapping (page faults), and
//!   `free` (hole punch), against writing one byte per page of a warm
//!   buffer of the same size.
//! * `growth_allocations/<n>`: create, publish and free one allocation, and
//!   look one up by name, in a context holding `n - 1` live ones (how the
//!   cost grows with the work: within ×2 from 10 to 65,536 means no scan).
//! * the handoff between processes is in `handoff.rs`.

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use fastio::{Context, ContextOptions};

const PAGE: usize = 4096;

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

/// One cold handoff's steps, each timed alone over `iters` rounds: which
/// step `part` selects is timed, the others run untimed.
fn cold_round(ctx: &Context, size: usize, iters: u64, part: &str) -> Duration {
    let mut timed = Duration::ZERO;
    for _ in 0..iters {
        let t = Instant::now();
        let mut a = ctx.create(size as u64).unwrap();
        if part == "create" {
            timed += t.elapsed();
        }
        let mut w = a.map_mut().unwrap();
        for i in (0..size).step_by(PAGE) {
            w[i] = 1;
        }
        drop(w);
        a.publish("cold").unwrap();
        let t = Instant::now();
        let m = ctx.map("cold").unwrap();
        let sum: u64 = (0..size).step_by(PAGE).map(|i| u64::from(m[i])).sum();
        black_box(sum);
        drop(m);
        if part == "first_read" {
            timed += t.elapsed();
        }
        let t = Instant::now();
        a.free().unwrap();
        if part == "free" {
            timed += t.elapsed();
        }
    }
    timed
}

fn cold_parts(c: &mut Criterion) {
    let ctx = Context::new(&options(1 << 28).cache_limit(0)).unwrap();
    for (size, label) in [(1usize << 20, "1MiB"), (16 << 20, "16MiB")] {
        let mut g = c.benchmark_group(format!("cold_parts/{label}"));
        g.throughput(Throughput::Bytes(size as u64));
        g.sample_size(10);
        for part in ["create", "first_read", "free"] {
            g.bench_function(format!("fastio_{part}"), |b| {
                b.iter_custom(|iters| cold_round(&ctx, size, iters, part))
            });
        }
        let mut warm = vec![0u8; size];
        g.bench_function("baseline_touch_warm", |b| {
            b.iter(|| {
                for i in (0..size).step_by(PAGE) {
                    warm[i] = warm[i].wrapping_add(1);
                }
                black_box(&warm);
            })
        });
        g.finish();
    }
}

/// Live allocations in one context (issue 52, how costs grow): the
/// context holds `n - 1` published allocations of 64 bytes, and each
/// operation is timed beside them: create, publish and free one more
/// (`create_publish_free`), and look one of the live ones up by name
/// (`lookup`: `get`, then drop the handle). The context's limit on
/// allocations alive at once is 65,536 (`ContextOptions::max_allocations`).
const GROWTH_ALLOCATIONS: [usize; 5] = [10, 100, 1_000, 10_000, 65_536];

fn growth_allocations(c: &mut Criterion) {
    for n in GROWTH_ALLOCATIONS {
        let ctx = Context::new(
            &options((n as u64 + 16) * PAGE as u64)
                .max_allocations(n as u32)
                .max_names(n as u32),
        )
        .unwrap();
        let live: Vec<String> = (0..n - 1).map(|i| format!("live/{i}")).collect();
        for name in &live {
            ctx.create(64).unwrap().publish_and_release(name).unwrap();
        }
        let mut g = c.benchmark_group(format!("growth_allocations/{n}"));
        g.sample_size(20);
        g.bench_function("create_publish_free", |b| {
            b.iter(|| {
                let a = ctx.create(64).unwrap();
                a.publish("one-more").unwrap();
                a.free().unwrap();
            })
        });
        let mut k = 0usize;
        g.bench_function("lookup", |b| {
            b.iter(|| {
                k = (k + 7919) % live.len();
                black_box(ctx.get(&live[k]).unwrap());
            })
        });
        g.finish();
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    steady_state(&mut c);
    cycle(&mut c);
    cold_parts(&mut c);
    growth_allocations(&mut c);
    c.final_summary();
}
