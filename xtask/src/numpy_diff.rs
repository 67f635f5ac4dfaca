//! `cargo xtask numpy [--cases N] [--seed S]`: `ndobject` against numpy.
//! numpy (in the interop virtual environment, `target/venv-interop`)
//! generates random cases with their expected results
//! (`crates/ndobject/compat/numpy_diff.py`): arrays of every primitive in
//! both byte orders, aligned and misaligned, through chains of views and
//! `casting='unsafe'` casts, and fixed-size string transcodes checked
//! against Python's codecs. The `numpy_diff` example of `ndobject` runs
//! every case and must agree on all of them (shape, strides, bytes, or an
//! error of the same kind).

use std::process::Command;

use crate::root;
use crate::step::{Step, cargo};

/// The case generator, relative to the workspace root.
pub(crate) const SCRIPT: &str = "crates/ndobject/compat/numpy_diff.py";

/// Cases per run, unless `--cases` says otherwise.
pub(crate) const DEFAULT_CASES: u64 = 3000;

/// The generator's seed, unless `--seed` says otherwise: a fixed seed, so
/// every run checks the same cases.
pub(crate) const DEFAULT_SEED: u64 = 20240531;

/// `[--cases N] [--seed S]`: (cases, seed).
pub(crate) fn parse_args(args: &[String]) -> Result<(u64, u64), String> {
    let mut cases = DEFAULT_CASES;
    let mut seed = DEFAULT_SEED;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let slot = match arg.as_str() {
            "--cases" => &mut cases,
            "--seed" => &mut seed,
            other => return Err(format!("unknown argument {other}")),
        };
        let value = it.next().ok_or_else(|| format!("{arg} needs a value"))?;
        *slot = value
            .parse()
            .map_err(|_| format!("{arg}: not a whole number: {value}"))?;
    }
    Ok((cases, seed))
}

/// Generates the cases into `target/numpy-diff/cases.jsonl` and checks
/// them with a release build of the example.
pub(crate) fn run(cases: u64, seed: u64) -> Result<(), String> {
    let python = crate::interop::python()?;
    let dir = root().join("target").join("numpy-diff");
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let file = dir.join("cases.jsonl");

    let (cases, seed) = (cases.to_string(), seed.to_string());
    let mut generate = Command::new(&python);
    generate
        .arg(root().join(SCRIPT))
        .args(["--cases", cases.as_str(), "--seed", seed.as_str()])
        .arg("--out")
        .arg(&file)
        .current_dir(root());
    let gen_log = Step::new("numpy cases", generate).run()?;

    let mut check = cargo([
        "run",
        "--quiet",
        "--release",
        "-p",
        "ndobject",
        "--example",
        "numpy_diff",
        "--",
    ]);
    check.arg(&file);
    let check_log = Step::new("numpy diff", check).run()?;
    let summary = crate::interop::summary("numpy_diff", &check_log)?;

    for line in gen_log.lines().filter(|l| l.starts_with("numpy_diff.py:")) {
        println!("       {line}");
    }
    println!("       {summary}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{DEFAULT_CASES, DEFAULT_SEED, parse_args};

    #[test]
    fn parses_cases_and_seed() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(parse_args(&[]).unwrap(), (DEFAULT_CASES, DEFAULT_SEED));
        assert_eq!(
            parse_args(&args(&["--seed", "7", "--cases", "10"])).unwrap(),
            (10, 7)
        );
        assert!(parse_args(&args(&["--cases"])).is_err());
        assert!(parse_args(&args(&["--cases", "x"])).is_err());
        assert!(parse_args(&args(&["extra"])).is_err());
    }
}
