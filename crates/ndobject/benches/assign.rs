//! Casts and copies, each as a ratio to `memcpy` of the same bytes.

#![allow(missing_docs)]
#![forbid(unsafe_code)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ndobject::{Array, AssignErrorMode, Index, MemoryBlock};

const N: usize = 1 << 20; // elements

fn memcpy_baseline(
    c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    bytes: usize,
) {
    let src = vec![1u8; bytes];
    let mut dst = vec![0u8; bytes];
    c.bench_function("baseline_memcpy", |b| {
        b.iter(|| {
            dst.copy_from_slice(black_box(&src));
            black_box(&dst);
        })
    });
}

fn benches(c: &mut Criterion) {
    let values: Vec<f32> = (0..N).map(|i| i as f32).collect();
    let a = Array::from_slice(&values, &[N]).unwrap();
    let f64t: dtype::Type = "float64".parse().unwrap();

    // Same-type assignment into an existing contiguous array: one memcpy.
    let mut g = c.benchmark_group("ndobject/assign_f32");
    g.throughput(Throughput::Bytes((N * 4) as u64));
    memcpy_baseline(&mut g, N * 4);
    let dst = Array::zeros("float32".parse().unwrap(), &[N]).unwrap();
    g.bench_function("assign_contiguous", |b| {
        b.iter(|| dst.assign(black_box(&a), AssignErrorMode::None).unwrap())
    });
    g.finish();

    // Contiguous cast: reads 4 bytes and writes 8 per element; the
    // baseline copies the 8 output bytes per element.
    let mut g = c.benchmark_group("ndobject/cast_f32_to_f64");
    g.throughput(Throughput::Bytes((N * 8) as u64));
    memcpy_baseline(&mut g, N * 8);
    g.bench_function("cast_contiguous", |b| {
        b.iter(|| black_box(a.cast(&f64t, AssignErrorMode::None).unwrap()))
    });
    g.bench_function("cast_checked_inexact", |b| {
        b.iter(|| black_box(a.cast(&f64t, AssignErrorMode::Inexact).unwrap()))
    });
    g.finish();

    // Strided and unaligned copies of float32 data into a contiguous array.
    let mut g = c.benchmark_group("ndobject/copy_f32");
    g.throughput(Throughput::Bytes((N * 4) as u64));
    memcpy_baseline(&mut g, N * 4);
    let wide = Array::from_slice(&vec![0f32; 2 * N], &[2 * N]).unwrap();
    let strided = wide.view(&[Index::slice(None, None, 2)]).unwrap();
    g.bench_function("strided_step2", |b| {
        b.iter(|| black_box(strided.to_contiguous().unwrap()))
    });
    let mut raw = vec![0u8; N * 4 + 1];
    raw[0] = 1;
    let block = MemoryBlock::from_owner(raw);
    let unaligned = Array::from_block(&block, 1, "float32".parse().unwrap(), &[N]).unwrap();
    g.bench_function("unaligned", |b| {
        b.iter(|| black_box(unaligned.to_contiguous().unwrap()))
    });
    let reversed = a.view(&[Index::slice(None, None, -1)]).unwrap();
    g.bench_function("negative_stride", |b| {
        b.iter(|| black_box(reversed.to_contiguous().unwrap()))
    });
    // Big-endian float32 to native float32 (a byte swap per element).
    let big: dtype::Type = "big_endian[float32]".parse().unwrap();
    let swapped = a.cast(&big, AssignErrorMode::None).unwrap();
    let f32t: dtype::Type = "float32".parse().unwrap();
    g.bench_function("byteswapped", |b| {
        b.iter(|| black_box(swapped.cast(&f32t, AssignErrorMode::None).unwrap()))
    });
    g.finish();
}

criterion_group! {
    name = group;
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_millis(300));
    targets = benches
}
criterion_main!(group);
