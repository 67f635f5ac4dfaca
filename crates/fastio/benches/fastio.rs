//! Fast I/O benchmarks, each reported by `cargo xtask bench` as a ratio to
//! the `baseline*` functions measured in the same run.
//!
//! * `steady_state`: `get` + `map` + unmap + release of a published
//!   allocation, against an in-process `HashMap` lookup + `Arc` clone.
//! * `cycle`: create + publish + get + free of a 4 KiB allocation whose
//!   block is recycled, against allocating and touching a 4 KiB `Vec`.
//! * the handoff between processes is in `handoff.rs`.

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;

use criterion::Criterion;
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

fn main() {
    let mut c = Criterion::default().configure_from_args();
    steady_state(&mut c);
    cycle(&mut c);
    c.final_summary();
}
