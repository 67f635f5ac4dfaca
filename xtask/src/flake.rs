//! `cargo xtask flake --runs N [--load K] [--filter NAME] [CARGO ARGS...]
//! [-- TEST ARGS...]`: the test step of `cargo xtask ci` run N times (with
//! K busy loops spinning beside it when asked), and every test that failed
//! at least once listed with how often and its first failure's panic.
//!
//! Each run is `cargo test --all-features --no-fail-fast`, built lean as
//! `ci` builds (line tables, no incremental state), with the test
//! step's environment (`FASTIO_ZENOH_PYTHON`, `FASTIO_TEST_PREBUILT`) and
//! its selection: `--workspace`, or the cargo arguments given (`-p
//! fastio-cli --test metrics`) for a quick sweep of a few tests; `--filter
//! NAME` and what follows `--` go to the test binaries. Everything is
//! built before the first run and before the load starts, the helper
//! binaries the tests run included, so no run builds anything. Logs are in
//! `target/xtask-logs/flake-N.log`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::step::{Step, cargo, count_tests};
use crate::{ZENOH_PY, root, venv};

/// What `cargo xtask flake` was asked.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Options {
    pub(crate) runs: u32,
    pub(crate) load: u32,
    /// Arguments to `cargo test` selecting what runs (empty: the
    /// workspace).
    pub(crate) cargo_args: Vec<String>,
    /// Arguments to the test binaries (after `--`): filters and options.
    pub(crate) test_args: Vec<String>,
}

pub(crate) const USAGE: &str =
    "flake --runs N [--load K] [--filter NAME] [CARGO TEST ARGS...] [-- TEST ARGS...]";

pub(crate) fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut o = Options::default();
    let mut runs = None;
    let mut it = args.iter();
    let number = |flag: &str, v: Option<&String>| -> Result<u32, String> {
        v.and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{flag} takes a number\nusage: cargo xtask {USAGE}"))
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--runs" => runs = Some(number("--runs", it.next())?),
            "--load" => o.load = number("--load", it.next())?,
            "--filter" => o.test_args.push(
                it.next()
                    .ok_or_else(|| format!("--filter takes a name\nusage: cargo xtask {USAGE}"))?
                    .clone(),
            ),
            "--" => o.test_args.extend(it.by_ref().cloned()),
            _ => o.cargo_args.push(a.clone()),
        }
    }
    o.runs = runs
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("--runs N (at least 1) is required\nusage: cargo xtask {USAGE}"))?;
    Ok(o)
}

/// One test's failures over the runs.
#[derive(Debug, Default)]
struct Failures {
    runs: Vec<u32>,
    /// The first failure's panic (or the end of the binary's output).
    first: String,
}

/// What one run's log says: the tests that passed and the failures
/// (`binary: test` -> what it printed), and binaries that ended without
/// libtest's summary (crashed, killed).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct RunResult {
    pub(crate) passed: u64,
    pub(crate) failed: Vec<(String, String)>,
}

pub(crate) fn run(o: &Options) -> Result<(), String> {
    let workspace = o.cargo_args.is_empty()
        || o.cargo_args
            .iter()
            .any(|a| a == "--workspace" || a == "--all");
    let mut selection: Vec<String> = vec!["--all-features".into()];
    if o.cargo_args.is_empty() {
        selection.push("--workspace".into());
    }
    selection.extend(o.cargo_args.iter().cloned());
    // The test step's builds and environment (see `ci`).
    crate::step::lean_builds();
    let zenoh_python = venv::python("venv-zenoh", &[ZENOH_PY], "zenoh peer")?;
    let zenoh_python = zenoh_python.display().to_string();
    // Build everything first: the tests, and the binaries they run (which
    // `cargo test --workspace` builds itself; a narrower selection not).
    let mut build = cargo(["test", "--no-run"]);
    build.args(&selection);
    Step::new("flake build", build).run()?;
    if !workspace {
        Step::new(
            "flake build helpers",
            cargo([
                "build",
                "--all-features",
                "-p",
                "fastio-examples",
                "--bins",
                "-p",
                "fastio-net",
                "--example",
                "intruder",
            ]),
        )
        .run()?;
    }
    let shown = format!(
        "cargo test {}{}",
        selection.join(" "),
        if o.test_args.is_empty() {
            String::new()
        } else {
            format!(" -- {}", o.test_args.join(" "))
        }
    );
    println!(
        "flake: {} run(s) of `{shown}`{}",
        o.runs,
        if o.load > 0 {
            format!(", {} busy loop(s) beside it", o.load)
        } else {
            String::new()
        }
    );
    let stop = Arc::new(AtomicBool::new(false));
    let spinners: Vec<_> = (0..o.load)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..10_000 {
                        x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005) ^ 1);
                    }
                }
                x
            })
        })
        .collect();
    let result = runs(o, &selection, &zenoh_python);
    stop.store(true, Ordering::Relaxed);
    for s in spinners {
        let _ = s.join();
    }
    let by_test = result?;
    if by_test.is_empty() {
        println!("flake: no test failed in {} run(s)", o.runs);
        return Ok(());
    }
    let mut out = format!("flake: {} test(s) failed at least once:\n", by_test.len());
    for (name, f) in &by_test {
        let runs: Vec<String> = f.runs.iter().map(u32::to_string).collect();
        let _ = writeln!(
            out,
            "\n{name}: failed in {} of {} run(s) (run {})\n  first failure:",
            f.runs.len(),
            o.runs,
            runs.join(", ")
        );
        for line in f.first.lines() {
            let _ = writeln!(out, "    {line}");
        }
    }
    println!("{out}");
    Err(format!("{} test(s) failed at least once", by_test.len()))
}

/// The runs, one after the other: every failing test, with its runs.
fn runs(
    o: &Options,
    selection: &[String],
    zenoh_python: &str,
) -> Result<BTreeMap<String, Failures>, String> {
    let dir = root().join("target").join("xtask-logs");
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let mut by_test: BTreeMap<String, Failures> = BTreeMap::new();
    for i in 1..=o.runs {
        let log_path = dir.join(format!("flake-{i}.log"));
        let started = Instant::now();
        let status = run_once(selection, &o.test_args, zenoh_python, &log_path)?;
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        let result = parse(&log);
        let (passed, failed) = count_tests(&log);
        println!(
            "run {i}/{}: {passed} passed, {failed} failed{} in {:.0} s ({})",
            o.runs,
            if result.failed.len() as u64 > failed {
                format!(
                    " (+{} binaries ended early)",
                    result.failed.len() as u64 - failed
                )
            } else {
                String::new()
            },
            started.elapsed().as_secs_f64(),
            log_path.display()
        );
        if !status.success() && result.failed.is_empty() {
            return Err(format!(
                "run {i}: cargo test exited with {status} and no test failed: see {}",
                log_path.display()
            ));
        }
        for (name, text) in result.failed {
            let f = by_test.entry(name).or_default();
            if f.runs.is_empty() {
                f.first = text;
            }
            f.runs.push(i);
        }
    }
    Ok(by_test)
}

fn run_once(
    selection: &[String],
    test_args: &[String],
    zenoh_python: &str,
    log_path: &Path,
) -> Result<std::process::ExitStatus, String> {
    let log = std::fs::File::create(log_path)
        .map_err(|e| format!("create {}: {e}", log_path.display()))?;
    let log2 = log.try_clone().map_err(|e| e.to_string())?;
    let mut cmd = cargo(["test", "--no-fail-fast"]);
    cmd.args(selection)
        .arg("--")
        .args(test_args)
        .env("FASTIO_ZENOH_PYTHON", zenoh_python)
        .env("FASTIO_TEST_PREBUILT", "1")
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2);
    cmd.status()
        .map_err(|e| format!("could not start cargo test: {e}"))
}

/// Longest panic kept of a failure, in lines.
const MAX_LINES: usize = 40;

/// The test binary a `Running` or `Doc-tests` line of cargo names:
/// `metrics` for `Running tests/metrics.rs (target/debug/deps/metrics-0a1b)`,
/// `fastio (doc)` for `Doc-tests fastio`.
fn binary_of(line: &str) -> Option<String> {
    let t = line.trim_start();
    if let Some(rest) = t.strip_prefix("Running ") {
        let path = rest.rsplit_once('(')?.1.trim_end_matches(')');
        let file = Path::new(path).file_name()?.to_str()?;
        let stem = file
            .rsplit_once('-')
            .filter(|(_, h)| h.chars().all(|c| c.is_ascii_hexdigit()))
            .map_or(file, |(s, _)| s);
        return Some(stem.to_owned());
    }
    t.strip_prefix("Doc-tests ")
        .map(|c| format!("{} (doc)", c.trim()))
}

/// Parses one run's output (cargo's lines and each test binary's libtest
/// output, interleaved as they were written).
pub(crate) fn parse(log: &str) -> RunResult {
    let mut r = RunResult::default();
    let mut binary = String::from("?");
    // The binary whose summary (`test result:`) has not come yet.
    let mut open: Option<String> = None;
    let mut tail: Vec<&str> = Vec::new();
    let mut failing: Vec<String> = Vec::new();
    let mut outputs: BTreeMap<String, String> = BTreeMap::new();
    let mut block: Option<(String, Vec<&str>)> = None;
    let finish_block = |block: &mut Option<(String, Vec<&str>)>,
                        outputs: &mut BTreeMap<String, String>| {
        if let Some((name, lines)) = block.take() {
            outputs.insert(name, panic_lines(&lines));
        }
    };
    let flush = |binary: &str,
                 failing: &mut Vec<String>,
                 outputs: &mut BTreeMap<String, String>,
                 r: &mut RunResult| {
        for t in failing.drain(..) {
            let text = outputs.remove(&t).unwrap_or_default();
            r.failed.push((format!("{binary}: {t}"), text));
        }
        outputs.clear();
    };
    for line in log.lines() {
        if let Some(b) = binary_of(line) {
            finish_block(&mut block, &mut outputs);
            if let Some(prev) = open.take() {
                // The previous binary never printed its summary.
                r.failed
                    .push((format!("{prev}: (the test binary itself)"), tail.join("\n")));
                flush(&prev, &mut failing, &mut outputs, &mut r);
            }
            binary = b;
            open = Some(binary.clone());
            tail.clear();
            continue;
        }
        if open.is_some() {
            tail.push(line);
            if tail.len() > MAX_LINES {
                tail.remove(0);
            }
        }
        if let Some(rest) = line.strip_prefix("test ")
            && let Some(name) = rest.strip_suffix(" ... FAILED")
        {
            failing.push(name.trim().to_owned());
            continue;
        }
        if let Some(rest) = line.strip_prefix("test ")
            && rest.ends_with(" ... ok")
        {
            r.passed += 1;
            continue;
        }
        if let Some(name) = line
            .strip_prefix("---- ")
            .and_then(|l| l.strip_suffix(" stdout ----"))
        {
            finish_block(&mut block, &mut outputs);
            block = Some((name.trim().to_owned(), Vec::new()));
            continue;
        }
        if line.starts_with("failures:") || line.starts_with("test result:") {
            finish_block(&mut block, &mut outputs);
        }
        if line.starts_with("test result:") {
            open = None;
            flush(&binary, &mut failing, &mut outputs, &mut r);
            continue;
        }
        if let Some((_, lines)) = block.as_mut() {
            lines.push(line);
        }
    }
    finish_block(&mut block, &mut outputs);
    if let Some(prev) = open.take() {
        r.failed
            .push((format!("{prev}: (the test binary itself)"), tail.join("\n")));
    }
    flush(&binary, &mut failing, &mut outputs, &mut r);
    r
}

/// A failing test's output, from its panic on (what it printed before is
/// in the log), at most [`MAX_LINES`] lines.
fn panic_lines(lines: &[&str]) -> String {
    let from = lines
        .iter()
        .position(|l| l.contains("panicked at"))
        .unwrap_or(0);
    let kept: Vec<&str> = lines[from..]
        .iter()
        .copied()
        .filter(|l| !l.starts_with("note: run with `RUST_BACKTRACE"))
        .collect();
    let mut text = kept
        .iter()
        .take(MAX_LINES)
        .copied()
        .collect::<Vec<_>>()
        .join("\n");
    if kept.len() > MAX_LINES {
        let _ = write!(text, "\n[... {} more lines]", kept.len() - MAX_LINES);
    }
    text.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn parses_its_arguments() {
        let o = parse_args(&s(&[
            "--runs",
            "3",
            "--load",
            "2",
            "-p",
            "fastio-cli",
            "--test",
            "metrics",
            "--filter",
            "a_failure",
            "--",
            "--test-threads",
            "1",
        ]))
        .unwrap();
        assert_eq!(
            o,
            Options {
                runs: 3,
                load: 2,
                cargo_args: s(&["-p", "fastio-cli", "--test", "metrics"]),
                test_args: s(&["a_failure", "--test-threads", "1"]),
            }
        );
        assert!(parse_args(&s(&["--load", "2"])).is_err());
        assert!(parse_args(&s(&["--runs", "0"])).is_err());
        assert!(parse_args(&s(&["--runs", "x"])).is_err());
    }

    #[test]
    fn finds_the_failures_and_their_panics() {
        let log = "\
   Compiling fastio-cli v0.1.0
     Running unittests src/main.rs (target/debug/deps/fastio-0123456789abcdef)

running 1 test
test tests::fine ... ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

     Running tests/metrics.rs (target/debug/deps/metrics-fedcba9876543210)

running 3 tests
test a_one_shot ... ok
test a_failure ... FAILED
test a_stream ... FAILED

failures:

---- a_failure stdout ----
something it printed
thread 'a_failure' panicked at crates/fastio-cli/tests/metrics.rs:290:9:
the run ended (exit status: 1) before the scrape showed its failure
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace

---- a_stream stdout ----
thread 'a_stream' panicked at crates/fastio-cli/tests/metrics.rs:90:5:
the scrape never showed what was wanted

failures:
    a_failure
    a_stream

test result: FAILED. 1 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out; finished in 3.00s

error: test failed, to rerun pass `-p fastio-cli --test metrics`
     Running tests/top.rs (target/debug/deps/top-00112233445566aa)

running 1 test
error: test failed, to rerun pass `-p fastio-cli --test top`

Caused by:
  process didn't exit successfully: `top-00112233445566aa` (signal: 11, SIGSEGV)
   Doc-tests dtype

running 1 test
test crates/dtype/src/lib.rs - (line 3) ... ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.10s
";
        let r = parse(log);
        assert_eq!(r.passed, 3);
        let names: Vec<&str> = r.failed.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "metrics: a_failure",
                "metrics: a_stream",
                "top: (the test binary itself)"
            ]
        );
        assert_eq!(
            r.failed[0].1,
            "thread 'a_failure' panicked at crates/fastio-cli/tests/metrics.rs:290:9:\n\
             the run ended (exit status: 1) before the scrape showed its failure"
        );
        assert!(
            r.failed[1]
                .1
                .ends_with("the scrape never showed what was wanted")
        );
        assert!(r.failed[2].1.contains("signal: 11"), "{}", r.failed[2].1);
    }
}
