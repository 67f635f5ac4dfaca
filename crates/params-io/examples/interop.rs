//! The Rust side of the Apache TVM interop check (driven by
//! `interop/tvm_interop.py`; see `docs/params-format.md`).
//!
//! ```text
//! interop read-tvm DIR      read DIR/tvm/*.params (written by TVM) strictly, compare every
//!                           tensor with the raw bytes TVM exported, and check that writing
//!                           the dict again gives TVM's bytes exactly
//! interop write-ours DIR    write DIR/ours/*.params + manifest.json + raw .bin files for TVM to load
//! interop make-bench-file PATH MIB   write the benchmark's file layout (64 float32 tensors)
//! interop make-model-file PATH N     write a model-shaped file: N tensors of a network's
//!                           shapes (biases, norms, convolutions, linear layers, counters)
//! interop measure CMD...     runs CMD (its output passes through), then prints
//!                           `peak_kib=` from wait4's rusage: this launcher is small, so
//!                           the child's peak RSS is its own (a child of a big parent
//!                           inherits the parent's RSS in ru_maxrss at exec)
//! interop child OP PATH [OUT]        one timed operation in a fresh process, for
//!                           `params_peers.py` (which reads its peak RSS with wait4):
//!                           OP = mmap_open | mmap_touch | read_full | write (PATH read
//!                           into memory untimed, then written to OUT)
//! ```
//!
//! Prints `N passed, M failed` and exits non-zero on any failure.

#![allow(missing_docs)]

use std::fs;
use std::path::Path;
use std::process::ExitCode;

use dtype::Primitive;
use params_io::format::LEGACY_BOOL;
use params_io::{ParamDict, ReadOptions, Tensor, WriteOptions};
use serde_json::{Value, json};

fn read_tvm(dir: &Path) -> Result<(usize, usize), String> {
    let tvm = dir.join("tvm");
    let manifest: Value = serde_json::from_str(
        &fs::read_to_string(tvm.join("manifest.json")).map_err(|e| format!("manifest: {e}"))?,
    )
    .map_err(|e| e.to_string())?;
    let (mut passed, mut failed) = (0, 0);
    for case in manifest.as_array().ok_or("manifest is not an array")? {
        let file = case["file"].as_str().ok_or("file")?;
        let path = tvm.join(file);
        let mut problems = Vec::new();
        match ReadOptions::new().read_path(&path) {
            Err(e) => problems.push(format!("strict read failed: {e}")),
            Ok(d) => {
                let tensors = case["tensors"].as_array().ok_or("tensors")?;
                if d.len() != tensors.len() {
                    problems.push(format!("{} tensors, TVM saved {}", d.len(), tensors.len()));
                }
                for (p, t) in d.iter().zip(tensors) {
                    let name = t["name"].as_str().unwrap_or("");
                    let dtype = t["dtype"].as_str().unwrap_or("");
                    let shape: Vec<usize> = t["shape"]
                        .as_array()
                        .map(|s| {
                            s.iter()
                                .filter_map(|v| v.as_u64().map(|v| v as usize))
                                .collect()
                        })
                        .unwrap_or_default();
                    let raw =
                        fs::read(tvm.join(t["bin"].as_str().unwrap_or(""))).unwrap_or_default();
                    let got = p.tensor();
                    if p.name() != name {
                        problems.push(format!("name {:?} != {name:?}", p.name()));
                    }
                    if got.primitive().name() != dtype {
                        problems.push(format!("{name}: dtype {} != {dtype}", got.primitive()));
                    }
                    if got.shape() != shape.as_slice() {
                        problems.push(format!("{name}: shape {:?} != {shape:?}", got.shape()));
                    }
                    if got.data() != raw.as_slice() {
                        problems.push(format!("{name}: data differs"));
                    }
                }
                // Our writer must reproduce TVM's bytes exactly.
                let ours = d.to_bytes().map_err(|e| e.to_string())?;
                let theirs = fs::read(&path).map_err(|e| e.to_string())?;
                if ours != theirs {
                    let at = ours
                        .iter()
                        .zip(&theirs)
                        .position(|(a, b)| a != b)
                        .unwrap_or(ours.len().min(theirs.len()));
                    problems.push(format!("rewrite differs from TVM's bytes at byte {at}"));
                }
                // And the mmap path must agree.
                match ReadOptions::new().map_path(&path) {
                    Ok(m) if m == d => {}
                    Ok(_) => problems.push("mmap differs from read".to_owned()),
                    Err(e) => problems.push(format!("mmap failed: {e}")),
                }
            }
        }
        if problems.is_empty() {
            passed += 1;
            println!("ok   read-tvm {file}");
        } else {
            failed += 1;
            println!("FAIL read-tvm {file}: {}", problems.join("; "));
        }
    }
    Ok((passed, failed))
}

fn bytes_of(p: Primitive, n: usize, seed: usize) -> Vec<u8> {
    let mut v: Vec<u8> = (0..n * p.size())
        .map(|i| (i * 7 + seed * 13 + 1) as u8)
        .collect();
    match p {
        Primitive::Bool => v.iter_mut().for_each(|b| *b &= 1),
        // Keep floats finite and not NaN so value comparison is exact.
        Primitive::Float16 | Primitive::BFloat16 => v.chunks_mut(2).for_each(|c| c[1] &= 0x3f),
        Primitive::Float32 | Primitive::Complex64 => v.chunks_mut(4).for_each(|c| c[3] &= 0x3f),
        Primitive::Float64 | Primitive::Complex128 => v.chunks_mut(8).for_each(|c| c[7] &= 0x3f),
        _ => {}
    }
    v
}

fn write_ours(dir: &Path) -> Result<(), String> {
    let out = dir.join("ours");
    fs::create_dir_all(&out).map_err(|e| e.to_string())?;
    let mut cases: Vec<(String, ParamDict, WriteOptions)> = Vec::new();

    // TVM 0.27 has no complex types: they go in a case of their own.
    let complex = [Primitive::Complex64, Primitive::Complex128];
    let mut all = ParamDict::new();
    for (i, p) in Primitive::ALL
        .into_iter()
        .enumerate()
        .filter(|(_, p)| !complex.contains(p))
    {
        let shape = [2usize, 3];
        all.insert(
            format!("t_{}", p.name()),
            Tensor::new(p, &shape, bytes_of(p, 6, i)).unwrap(),
        );
    }
    cases.push(("all_dtypes".into(), all, WriteOptions::default()));
    let mut cplx = ParamDict::new();
    for (i, p) in complex.into_iter().enumerate() {
        cplx.insert(
            format!("t_{}", p.name()),
            Tensor::new(p, &[2], bytes_of(p, 2, i)).unwrap(),
        );
    }
    cases.push(("complex".into(), cplx, WriteOptions::default()));

    let mut shapes = ParamDict::new();
    shapes.insert(
        "scalar",
        Tensor::new(Primitive::Float32, &[], bytes_of(Primitive::Float32, 1, 1)).unwrap(),
    );
    shapes.insert(
        "empty",
        Tensor::new(Primitive::Float32, &[0], vec![]).unwrap(),
    );
    shapes.insert(
        "four_d",
        Tensor::new(
            Primitive::Int16,
            &[2, 1, 3, 2],
            bytes_of(Primitive::Int16, 12, 2),
        )
        .unwrap(),
    );
    shapes.insert("", Tensor::new(Primitive::Int8, &[1], vec![5]).unwrap());
    shapes.insert(
        "名前/ü",
        Tensor::new(Primitive::UInt8, &[2], vec![1, 2]).unwrap(),
    );
    cases.push(("shapes_names".into(), shapes, WriteOptions::default()));

    let mut many = ParamDict::new();
    for i in 0..40i32 {
        many.insert(
            format!("p{}", 39 - i),
            Tensor::new(Primitive::Int32, &[1], i.to_le_bytes().to_vec()).unwrap(),
        );
    }
    cases.push(("order_40".into(), many, WriteOptions::default()));

    let mut legacy = ParamDict::new();
    legacy.insert(
        "mask",
        Tensor::new(Primitive::Bool, &[4], vec![1, 0, 0, 1])
            .unwrap()
            .with_dl_type(LEGACY_BOOL)
            .unwrap(),
    );
    cases.push(("legacy_bool".into(), legacy, WriteOptions::default()));

    let mut big = ParamDict::new();
    let n = 16 << 20;
    big.insert(
        "big",
        Tensor::new(
            Primitive::Float32,
            &[n / 4],
            bytes_of(Primitive::Float32, n / 4, 3),
        )
        .unwrap(),
    );
    cases.push(("big_16mib".into(), big, WriteOptions::default()));

    let mut manifest = Vec::new();
    for (case, d, opts) in cases {
        let file = format!("{case}.params");
        d.write_path_with(out.join(&file), &opts, &mut |_| {})
            .map_err(|e| e.to_string())?;
        let mut tensors = Vec::new();
        for (i, p) in d.iter().enumerate() {
            let bin = format!("{case}_{i}.bin");
            fs::write(out.join(&bin), p.tensor().data()).map_err(|e| e.to_string())?;
            tensors.push(json!({"name": p.name(), "dtype": p.tensor().primitive().name(), "shape": p.tensor().shape(), "bin": bin}));
        }
        let limitation = match case.as_str() {
            "complex" => {
                "TVM 0.27 has no complex dtype: it loads the records but cannot convert them"
            }
            "legacy_bool" => {
                "TVM >= 0.25 reads (1,1,1) as packed uint1: the legacy tag is for TVM < 0.25 only"
            }
            _ => "",
        };
        manifest.push(json!({"file": file, "tensors": tensors, "tvm_limitation": limitation}));
    }
    fs::write(
        out.join("manifest.json"),
        Value::Array(manifest).to_string(),
    )
    .map_err(|e| e.to_string())?;
    println!("wrote {}", out.display());
    Ok(())
}

fn make_bench_file(path: &Path, mib: usize) -> Result<(), String> {
    let per = (mib << 20) / 64 / 4 * 4;
    let mut d = ParamDict::new();
    for i in 0..64 {
        let data: Vec<u8> = (0..per).map(|j| (i * 31 + j) as u8).collect();
        d.insert(
            format!("layer{i}.weight"),
            Tensor::new(Primitive::Float32, &[per / 4], data).unwrap(),
        );
    }
    let n = d
        .write_path_with(path, &WriteOptions::default().sync(false), &mut |_| {})
        .map_err(|e| e.to_string())?;
    println!("wrote {n} bytes to {}", path.display());
    Ok(())
}

/// A model-shaped file: `n` tensors cycling through the kinds of a
/// convolutional network with a classifier (conv weights, batch-norm
/// vectors, biases, linear weights, an int64 counter, float16 embeddings).
fn make_model_file(path: &Path, n: usize) -> Result<(), String> {
    let mut d = ParamDict::new();
    for i in 0..n {
        let c = 16usize << (i / 7 % 4); // 16, 32, 64, 128 channels
        let (name, p, shape): (String, Primitive, Vec<usize>) = match i % 7 {
            0 => (
                format!("block{i}.conv.weight"),
                Primitive::Float32,
                vec![c, c, 3, 3],
            ),
            1 => (format!("block{i}.bn.gamma"), Primitive::Float32, vec![c]),
            2 => (format!("block{i}.bn.beta"), Primitive::Float32, vec![c]),
            3 => (format!("block{i}.bn.num_batches"), Primitive::Int64, vec![]),
            4 => (
                format!("block{i}.fc.weight"),
                Primitive::Float32,
                vec![c * 4, c],
            ),
            5 => (format!("block{i}.fc.bias"), Primitive::Float32, vec![c * 4]),
            _ => (format!("block{i}.embed"), Primitive::Float16, vec![64, c]),
        };
        let len = shape.iter().product::<usize>() * p.size();
        let data: Vec<u8> = (0..len).map(|j| (i * 131 + j * 7) as u8).collect();
        let t = Tensor::new(p, &shape, data).map_err(|e| e.to_string())?;
        d.insert(name, t);
    }
    let n = d
        .write_path_with(path, &WriteOptions::default().sync(false), &mut |_| {})
        .map_err(|e| e.to_string())?;
    println!("wrote {n} bytes to {}", path.display());
    Ok(())
}

/// `VmHWM` (peak resident set so far) of this process, in KiB.
fn hwm_kib() -> u64 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// One operation of `params_peers.py`, timed, in this (fresh) process;
/// prints `start_kib= before_kib= seconds= check=`.
fn child(op: &str, path: &Path, out: Option<&Path>) -> Result<(), String> {
    let start = hwm_kib();
    let e = |e: params_io::Error| e.to_string();
    let (before, secs, check) = match (op, out) {
        ("mmap_open", _) => {
            let t = std::time::Instant::now();
            let d = ReadOptions::new().map_path(path).map_err(e)?;
            let n: usize = d.iter().map(|p| p.tensor().shape().len()).sum();
            (start, t.elapsed().as_secs_f64(), n as u64 + d.len() as u64)
        }
        ("mmap_touch", _) => {
            let t = std::time::Instant::now();
            let d = ReadOptions::new().map_path(path).map_err(e)?;
            let sum = d.iter().fold(0u64, |acc, p| {
                p.tensor()
                    .data()
                    .iter()
                    .fold(acc, |a, &b| a.wrapping_add(u64::from(b)))
            });
            (start, t.elapsed().as_secs_f64(), sum)
        }
        ("read_full", _) => {
            let t = std::time::Instant::now();
            let d = ReadOptions::new().read_path(path).map_err(e)?;
            let secs = t.elapsed().as_secs_f64();
            (start, secs, d.data_bytes())
        }
        ("write", Some(out)) => {
            let d = ReadOptions::new().read_path(path).map_err(e)?;
            let before = hwm_kib();
            let t = std::time::Instant::now();
            let n = d
                .write_path_with(out, &WriteOptions::default().sync(false), &mut |_| {})
                .map_err(e)?;
            (before, t.elapsed().as_secs_f64(), n)
        }
        _ => return Err(format!("unknown child operation {op:?}")),
    };
    println!("start_kib={start} before_kib={before} seconds={secs:.6} check={check}");
    Ok(())
}

/// Runs `cmd` and prints its peak RSS from `wait4`; fails when it fails.
fn measure(cmd: &[&str]) -> Result<(), String> {
    let (program, args) = cmd.split_first().ok_or("measure: no command")?;
    let child = std::process::Command::new(program)
        .args(args)
        .spawn()
        .map_err(|e| format!("spawn {program}: {e}"))?;
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: a zeroed `rusage` is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our unreaped child (std never waits for it: we
    // do not call `wait`, and dropping a `Child` does not reap); `status`
    // and `usage` are valid for writes for the whole call.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    if r != pid {
        return Err(format!("wait4: {}", std::io::Error::last_os_error()));
    }
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Err(format!(
            "{} failed (wait status {status:#x})",
            cmd.join(" ")
        ));
    }
    println!("peak_kib={}", usage.ru_maxrss);
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["read-tvm", dir] => read_tvm(Path::new(dir)).map(|(p, f)| {
            println!("{p} passed, {f} failed");
            f
        }),
        ["write-ours", dir] => write_ours(Path::new(dir)).map(|()| 0),
        ["make-bench-file", path, mib] => {
            make_bench_file(Path::new(path), mib.parse().unwrap_or(1024)).map(|()| 0)
        }
        ["make-model-file", path, n] => {
            make_model_file(Path::new(path), n.parse().unwrap_or(2000)).map(|()| 0)
        }
        ["measure", cmd @ ..] => measure(cmd).map(|()| 0),
        ["child", op, path] => child(op, Path::new(path), None).map(|()| 0),
        ["child", op, path, out] => child(op, Path::new(path), Some(Path::new(out))).map(|()| 0),
        _ => Err(
            "usage: interop read-tvm DIR | write-ours DIR | make-bench-file PATH MIB | \
             make-model-file PATH N | measure CMD... | child OP PATH [OUT]"
                .to_owned(),
        ),
    };
    match result {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("interop: {e}");
            ExitCode::from(2)
        }
    }
}
