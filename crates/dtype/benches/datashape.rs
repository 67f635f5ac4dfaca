//! Datashape parse and print throughput.

#![allow(missing_docs)]
#![forbid(unsafe_code)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

const SHAPES: [(&str, &str); 4] = [
    ("primitive", "float32"),
    ("image", "3 * 224 * 224 * float32"),
    (
        "record",
        "var * {id: int64, name: string['U16'], pos: (float32, float32), tags: ?string[8, 'A']}",
    ),
    (
        "nested",
        "strided * var * {a: {b: {c: 4 * unaligned[big_endian[int64]]}, d: ?complex[float32]}, 'e f': bytes}",
    ),
];

fn parse(c: &mut Criterion) {
    let mut group = c.benchmark_group("dtype/parse");
    for (name, text) in SHAPES {
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_function(name, |b| b.iter(|| dtype::parse(black_box(text)).unwrap()));
    }
    group.finish();
    let mut group = c.benchmark_group("dtype/print");
    for (name, text) in SHAPES {
        let ty = dtype::parse(text).unwrap();
        group.bench_function(name, |b| b.iter(|| black_box(&ty).to_string()));
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(2)).warm_up_time(std::time::Duration::from_millis(500));
    targets = parse
}
criterion_main!(benches);
