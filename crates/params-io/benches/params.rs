//! Throughput on a generated 1 GiB parameter file (64 float32 tensors of
//! 16 MiB) in a temporary directory, deleted afterwards.
//!
//! Groups (ratios are printed by `cargo xtask bench` against `baseline*`):
//! * `params_write_1GiB`: `baseline_fs_write` (`std::fs::write` of the same
//!   bytes) vs `write_params` (atomic path write, no fsync, as fs::write).
//! * `params_read_1GiB`: `baseline_read_to_vec` (`std::fs::read`) vs
//!   `read_full` (strict read into owned tensors), `mmap_open` (headers
//!   only, zero-copy views) and `index` (headers via seek). Each result is
//!   dropped outside the timing (`iter_with_large_drop`), as TVM's loader
//!   is timed by `cargo xtask bench params`.
//!
//! Set `PARAMS_IO_BENCH_MIB` to change the size (default 1024).

#![allow(missing_docs)]
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::time::Duration;

use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use dtype::Primitive;
use params_io::{ParamDict, ReadOptions, Tensor, WriteOptions};

const TENSORS: usize = 64;

fn size_mib() -> usize {
    std::env::var("PARAMS_IO_BENCH_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024)
}

fn make_dict(total: usize) -> ParamDict {
    let per = total / TENSORS / 4 * 4;
    let mut d = ParamDict::new();
    for i in 0..TENSORS {
        let data: Vec<u8> = (0..per).map(|j| (i * 31 + j) as u8).collect();
        d.insert(
            format!("layer{i}.weight"),
            Tensor::new(Primitive::Float32, &[per / 4], data).unwrap(),
        );
    }
    d
}

fn bench(c: &mut Criterion) {
    let total = size_mib() << 20;
    let dir = std::env::temp_dir().join(format!("params-io-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path: PathBuf = dir.join("bench.params");
    let plain = dir.join("plain.bin");
    let dict = make_dict(total);
    let no_sync = WriteOptions::default().sync(false);
    dict.write_path_with(&path, &no_sync, &mut |_| {}).unwrap();
    let file_bytes = std::fs::read(&path).unwrap();
    let len = file_bytes.len() as u64;

    let mut g = c.benchmark_group("params_write_1GiB");
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(8))
        .throughput(Throughput::Bytes(len));
    g.bench_function("baseline_fs_write", |b| {
        b.iter(|| std::fs::write(&plain, &file_bytes).unwrap())
    });
    g.bench_function("write_params", |b| {
        b.iter(|| dict.write_path_with(&path, &no_sync, &mut |_| {}).unwrap())
    });
    g.finish();
    drop(file_bytes);
    let _ = std::fs::remove_file(&plain);

    let mut g = c.benchmark_group("params_read_1GiB");
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Bytes(len));
    g.bench_function("baseline_read_to_vec", |b| {
        b.iter_with_large_drop(|| std::fs::read(&path).unwrap())
    });
    g.bench_function("read_full", |b| {
        b.iter_with_large_drop(|| ReadOptions::new().read_path(&path).unwrap())
    });
    g.bench_function("mmap_open", |b| {
        b.iter_with_large_drop(|| ReadOptions::new().map_path(&path).unwrap())
    });
    g.bench_function("index", |b| {
        b.iter_with_large_drop(|| ReadOptions::new().index_path(&path).unwrap())
    });
    g.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, bench);
criterion_main!(benches);
