//! `cargo xtask bench`: runs every criterion bench of the workspace and
//! reports each result with its ratio to every `baseline*` function of the
//! same group (and, for parameterised benchmarks, the same parameter),
//! measured in the same run.
//!
//! `cargo xtask bench params` runs only the params-io bench. Whenever the
//! params read group ran, Apache TVM's `load_param_dict_from_file` is
//! timed on a file of the same layout and size (in the interop virtual
//! environment, see [`interop`]) and set beside our
//! numbers with ratios.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::Value;

use crate::step::{Step, cargo};
use crate::{interop, root};

/// The params-io read group, and its size (as the bench computes it).
const PARAMS_READ_GROUP: &str = "params_read_1GiB";

struct Result1 {
    function: String,
    mean_ns: f64,
    bytes: Option<f64>,
}

/// The directory cargo builds into (`CARGO_TARGET_DIR` or `target`).
fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => root().join(dir),
        None => root().join("target"),
    }
}

pub(crate) fn run(extra: &[String]) -> Result<(), String> {
    let started = SystemTime::now();
    let (mut args, extra) = match extra.split_first() {
        Some((first, rest)) if first == "params" => (
            ["bench", "-p", "params-io", "--bench", "params"]
                .map(str::to_owned)
                .to_vec(),
            rest,
        ),
        _ => (vec!["bench".to_owned(), "--workspace".to_owned()], extra),
    };
    if !extra.is_empty() {
        args.push("--".to_owned());
        args.extend(extra.iter().cloned());
    }
    Step::new("bench", cargo(args)).run()?;
    let mut groups: BTreeMap<String, Vec<Result1>> = BTreeMap::new();
    collect(&target_dir().join("criterion"), started, &mut groups);
    if groups.is_empty() {
        println!("bench: no criterion results were written");
    }
    for (group, results) in &groups {
        println!("{group}");
        let baselines: Vec<&Result1> = results
            .iter()
            .filter(|r| r.function.starts_with("baseline"))
            .collect();
        for r in results {
            let mut line = format!("  {:<32} {:>14}", r.function, human_time(r.mean_ns));
            if let Some(bytes) = r.bytes {
                line.push_str(&format!("  {:>10.2} GB/s", bytes / r.mean_ns));
            }
            for base in baselines.iter().filter(|b| b.function != r.function) {
                line.push_str(&format!(
                    "  x{:.3} of {}",
                    r.mean_ns / base.mean_ns,
                    base.function
                ));
            }
            println!("{line}");
        }
    }
    if let Some(ours) = groups.get(PARAMS_READ_GROUP) {
        tvm_beside(ours)?;
    }
    if groups.keys().any(|g| g.starts_with("ndobject/")) {
        numpy_beside(&groups)?;
    }
    if groups.contains_key("steady_state") {
        python_beside(&groups)?;
    }
    Ok(())
}

/// The Python package's side (`crates/fastio-python/bench/bench_python.py`,
/// in the venv `cargo xtask python` builds): the steady-state get + map per
/// call beside Rust's from this run, and a 64 MiB handoff between two
/// Python processes beside `multiprocessing.shared_memory` and pickling.
fn python_beside(groups: &BTreeMap<String, Vec<Result1>>) -> Result<(), String> {
    let python = root()
        .join("target")
        .join("venv-python")
        .join("bin")
        .join("python");
    let mut probe = std::process::Command::new(&python);
    probe.args(["-c", "import fastio"]);
    if !crate::step::succeeds(probe) {
        println!(
            "Python comparison skipped: the fastio package is not built (run `cargo xtask python` first)"
        );
        return Ok(());
    }
    let mut cmd = std::process::Command::new(&python);
    cmd.arg(root().join("crates/fastio-python/bench/bench_python.py"))
        .current_dir(root());
    let log = Step::new("bench python", cmd).run()?;
    let results = parse_time_read(&log);
    let get = |name: &str| results.iter().find(|(n, _)| n == name).map(|(_, s)| *s);
    println!("Python (median of batches after a warm-up) beside Rust (criterion mean), same run:");
    if let (Some(py), Some(rust)) = (
        get("python/get_map_numpy"),
        groups
            .get("steady_state")
            .and_then(|rs| rs.iter().find(|r| r.function == "fastio_get_map")),
    ) {
        let over = py * 1e9 - rust.mean_ns;
        let verdict = if over <= 3000.0 { "met" } else { "MISSED" };
        println!(
            "  get + map_as_numpy_array + release   python {}  rust {}  python over rust {}  goal <= 3 us: {verdict}",
            human_time(py * 1e9),
            human_time(rust.mean_ns),
            human_time(over)
        );
    }
    if let Some(f) = get("handoff_64MiB/fastio") {
        for peer in ["handoff_64MiB/shared_memory", "handoff_64MiB/pickle_pipe"] {
            if let Some(p) = get(peer) {
                println!(
                    "  64 MiB handoff between Python processes: fastio {}  {peer} {}  x{:.3}",
                    human_time(f * 1e9),
                    human_time(p * 1e9),
                    f / p
                );
            }
        }
    }
    Ok(())
}

/// numpy's side of the ndobject copies and casts.
const NUMPY_SCRIPT: &str = "crates/ndobject/compat/numpy_bench.py";
/// Elements per array in the ndobject bench (`N` in
/// `crates/ndobject/benches/assign.rs`); numpy is timed on the same count.
const NDOBJECT_BENCH_ELEMENTS: &str = "1048576";
/// The most our time may be, as a multiple of numpy's, per operation.
const NUMPY_GOALS: [(&str, f64); 6] = [
    ("ndobject/assign_f32/assign_contiguous", 1.1),
    ("ndobject/cast_f32_to_f64/cast_contiguous", 1.2),
    ("ndobject/copy_f32/strided_step2", 1.2),
    ("ndobject/copy_f32/negative_stride", 1.2),
    ("ndobject/copy_f32/unaligned", 1.5),
    ("ndobject/copy_f32/byteswapped", 1.5),
];

/// Times the same operations in numpy right after our bench and prints
/// each beside ours, with the ratio and its goal. Without a Python
/// environment for numpy it says so and carries on.
fn numpy_beside(groups: &BTreeMap<String, Vec<Result1>>) -> Result<(), String> {
    let python = match interop::python() {
        Ok(p) => p,
        Err(e) => {
            println!("numpy comparison skipped: {e}");
            return Ok(());
        }
    };
    let mut cmd = std::process::Command::new(&python);
    cmd.arg(root().join(NUMPY_SCRIPT))
        .arg(NDOBJECT_BENCH_ELEMENTS)
        .current_dir(root());
    let log = Step::new("bench numpy", cmd).run()?;
    println!(
        "numpy beside ndobject ({} elements, same run; numpy: median of 15 batches \
         after a warm-up; ours: criterion mean); ratio = our time / numpy's",
        NDOBJECT_BENCH_ELEMENTS
    );
    for (name, numpy_secs) in parse_time_read(&log) {
        let Some((group, function)) = name.rsplit_once('/') else {
            continue;
        };
        let Some(ours) = groups
            .get(group)
            .and_then(|rs| rs.iter().find(|r| r.function == function))
        else {
            println!(
                "  {name:<44} numpy {}  (not in this run)",
                human_time(numpy_secs * 1e9)
            );
            continue;
        };
        let ratio = ours.mean_ns / (numpy_secs * 1e9);
        let goal = NUMPY_GOALS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, g)| {
                let verdict = if ratio <= *g { "met" } else { "MISSED" };
                format!("  goal <= x{g:.1}: {verdict}")
            })
            .unwrap_or_default();
        println!(
            "  {name:<44} ours {:>10}  numpy {:>10}  x{ratio:.3}{goal}",
            human_time(ours.mean_ns),
            human_time(numpy_secs * 1e9)
        );
    }
    Ok(())
}

/// TVM's loader timed by `tvm_interop.py time`: (first load, best load,
/// file bytes), in seconds.
struct TvmTime {
    first: f64,
    best: f64,
    bytes: f64,
}

fn parse_tvm_time(output: &str) -> Option<TvmTime> {
    let line = output
        .lines()
        .find(|l| l.starts_with("tvm_load_param_dict_from_file "))?;
    let field = |key: &str| -> Option<f64> {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))?
            .parse()
            .ok()
    };
    Some(TvmTime {
        first: field("seconds")?,
        best: field("best")?,
        bytes: field("bytes")?,
    })
}

/// `NAME seconds=S ...` lines of `interop time-read`: (name, seconds).
fn parse_time_read(output: &str) -> Vec<(String, f64)> {
    output
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let name = words.next()?;
            let secs = words
                .find_map(|w| w.strip_prefix("seconds="))?
                .parse()
                .ok()?;
            Some((name.to_owned(), secs))
        })
        .collect()
}

/// Times TVM's `load_param_dict_from_file` on a file of the bench's layout
/// and size, and ours on the same file with the same protocol (best of 3,
/// run right after), and prints them beside the params read group with
/// ratios. Without a Python environment for TVM it says so and carries on.
fn tvm_beside(criterion: &[Result1]) -> Result<(), String> {
    let python = match interop::python() {
        Ok(p) => p,
        Err(e) => {
            println!("TVM comparison skipped: {e}");
            return Ok(());
        }
    };
    let mib = std::env::var("PARAMS_IO_BENCH_MIB").unwrap_or_else(|_| "1024".to_owned());
    let dir = std::env::temp_dir().join(format!("xtask-bench-tvm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let file = dir.join("bench.params");
    let path = file.to_string_lossy().into_owned();
    let timed = (|| {
        Step::new(
            "bench tvm file",
            interop::example(true, &["make-bench-file", &path, &mib]),
        )
        .run()?;
        let log = Step::new(
            "bench tvm load",
            interop::tvm_script(&python, &["time", &path, "3"]),
        )
        .run()?;
        let tvm = parse_tvm_time(&log)
            .ok_or_else(|| format!("unexpected output of tvm_interop.py time:\n{log}"))?;
        let log = Step::new(
            "bench our load",
            interop::example(true, &["time-read", &path]),
        )
        .run()?;
        Ok::<_, String>((tvm, parse_time_read(&log)))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    let (tvm, ours) = timed?;
    let line = |name: &str, secs: f64| {
        let mut l = format!(
            "  {name:<32} {:>14}  {:>10.2} GB/s",
            human_time(secs * 1e9),
            tvm.bytes / secs / 1e9
        );
        if !name.starts_with("tvm_") {
            l.push_str(&format!(
                "  TVM first x{:.2}, TVM best x{:.2}",
                tvm.first / secs,
                tvm.best / secs
            ));
        }
        println!("{l}");
    };
    println!(
        "TVM 0.27 load_param_dict_from_file beside params-io, on one {} MiB file of the \
         bench's layout ({} bytes); ratio = TVM's time / ours (> 1: we are faster)",
        mib, tvm.bytes
    );
    println!(" each best of 3, run back to back:");
    line("tvm_load (first of 3)", tvm.first);
    line("tvm_load (best of 3)", tvm.best);
    for (name, secs) in &ours {
        line(name, *secs);
    }
    println!(" criterion means ({PARAMS_READ_GROUP} above):");
    for r in criterion {
        line(&r.function, r.mean_ns / 1e9);
    }
    Ok(())
}

fn human_time(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.1} ns")
    } else if ns < 1e6 {
        format!("{:.2} us", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// Finds `new/benchmark.json` + `new/estimates.json` pairs written after `since`.
fn collect(dir: &Path, since: SystemTime, out: &mut BTreeMap<String, Vec<Result1>>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        if path.file_name().is_some_and(|n| n == "new") {
            if let Some((group, r)) = read_result(&path, since) {
                out.entry(group).or_default().push(r);
            }
        } else {
            collect(&path, since, out);
        }
    }
}

fn read_result(dir: &Path, since: SystemTime) -> Option<(String, Result1)> {
    let estimates = dir.join("estimates.json");
    if std::fs::metadata(&estimates).ok()?.modified().ok()? < since {
        return None;
    }
    let bench: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("benchmark.json")).ok()?).ok()?;
    let est: Value = serde_json::from_str(&std::fs::read_to_string(estimates).ok()?).ok()?;
    // A parameterised benchmark (`BenchmarkId::new(function, value)`) is
    // compared with the baselines of the same value: `group/value`.
    let mut group = bench["group_id"].as_str()?.to_owned();
    let function = bench["function_id"].as_str().unwrap_or("").to_owned();
    if let Some(v) = bench["value_str"].as_str() {
        group = format!("{group}/{v}");
    }
    let bytes = bench["throughput"]["Bytes"].as_f64();
    let mean_ns = est["mean"]["point_estimate"].as_f64()?;
    Some((
        group,
        Result1 {
            function,
            mean_ns,
            bytes,
        },
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_the_tvm_timing_line() {
        let t = super::parse_tvm_time(
            "noise\ntvm_load_param_dict_from_file seconds=1.2500 best=0.5000 bytes=1073744222 gbps=0.859\n",
        )
        .unwrap();
        assert_eq!((t.first, t.best, t.bytes), (1.25, 0.5, 1073744222.0));
        assert!(super::parse_tvm_time("tvm_load_param_dict_from_file seconds=x").is_none());
        let ours = super::parse_time_read(
            "baseline_fs_read seconds=0.5829 gbps=1.842\nparams_io_mmap_open seconds=0.0003 gbps=4189.379\n",
        );
        assert_eq!(
            ours,
            [
                ("baseline_fs_read".to_owned(), 0.5829),
                ("params_io_mmap_open".to_owned(), 0.0003)
            ]
        );
    }
}
