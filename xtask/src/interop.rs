//! `cargo xtask interop`: `params-io` against the real Apache TVM, in both
//! directions. TVM (the PyPI wheel, in a virtual environment at
//! `target/venv-interop`) writes fixture files that our reader must read
//! exactly and rewrite byte for byte; our writer writes files that TVM must
//! load to the same values and re-save to our exact bytes
//! (`crates/params-io/interop/tvm_interop.py` and the `interop` example).
//! Any failed check fails the step with its full output.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::root;
use crate::step::{Step, cargo};

/// What the virtual environment holds: TVM and its dependencies, pinned
/// to the versions the interop run was checked with.
pub(crate) const PACKAGES: [&str; 4] = [
    "apache-tvm==0.27.0.post1",
    "apache-tvm-ffi==0.1.15.post2",
    "numpy==2.4.6",
    "ml_dtypes==0.6.0",
];

/// The Python side of the check, relative to the workspace root.
pub(crate) const SCRIPT: &str = "crates/params-io/interop/tvm_interop.py";

/// The interop virtual environment's Python, with [`PACKAGES`] installed.
pub(crate) fn python() -> Result<PathBuf, String> {
    crate::venv::python("venv-interop", &PACKAGES, "interop")
}

/// `python tvm_interop.py ARGS...` in the workspace root.
pub(crate) fn tvm_script(python: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(python);
    cmd.arg(root().join(SCRIPT)).args(args).current_dir(root());
    cmd
}

/// `cargo run -p params-io --example interop -- ARGS...`; the checks use
/// a debug build (quicker to build, fast enough for these files), the
/// bench a release build.
pub(crate) fn example(release: bool, args: &[&str]) -> Command {
    let mut cmd = cargo(["run", "--quiet", "-p", "params-io", "--example", "interop"]);
    if release {
        cmd.arg("--release");
    }
    cmd.arg("--").args(args);
    cmd
}

/// The `N passed, M failed` summary of a check's output; an error unless
/// something passed and nothing failed. Shared with the other checks that
/// print such a line (`numpy_diff`).
pub(crate) fn summary(step: &str, output: &str) -> Result<String, String> {
    let line = output
        .lines()
        .rev()
        .find(|l| l.contains(" passed, ") && l.trim_end().ends_with(" failed"))
        .ok_or_else(|| format!("{step}: no `N passed, M failed` line in its output"))?;
    let numbers: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    match numbers.as_slice() {
        [passed, 0] if *passed > 0 => Ok(line.trim().to_owned()),
        _ => Err(format!("{step}: {line}")),
    }
}

/// Runs the whole check.
pub(crate) fn run() -> Result<(), String> {
    let python = python()?;
    let dir = root().join("target").join("interop-run");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let d = dir
        .to_str()
        .ok_or_else(|| format!("{} is not UTF-8", dir.display()))?;

    let gen_log = Step::new("interop tvm writes", tvm_script(&python, &["gen", d])).run()?;
    if !gen_log.contains("TVM fixtures") {
        return Err(format!("tvm_interop.py gen wrote no fixtures:\n{gen_log}"));
    }
    let read_log = Step::new("interop we read tvm", example(false, &["read-tvm", d])).run()?;
    let read = summary("read-tvm", &read_log)?;
    Step::new("interop we write", example(false, &["write-ours", d])).run()?;
    let check_log =
        Step::new("interop tvm reads ours", tvm_script(&python, &["check", d])).run()?;
    let check = summary("tvm_interop.py check", &check_log)?;

    println!("       we read TVM's files: {read}");
    println!("       TVM reads our files: {check}");
    for line in gen_log
        .lines()
        .chain(check_log.lines())
        .filter(|l| l.starts_with("skipped") || l.starts_with("xfail"))
    {
        println!("       {line}");
    }
    // Passed: the fixtures (about 200 MiB) are not needed any more.
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::summary;

    #[test]
    fn a_check_passes_only_when_something_passed_and_nothing_failed() {
        assert_eq!(
            summary("s", "ok a\n7 passed, 0 failed\n").unwrap(),
            "7 passed, 0 failed"
        );
        assert!(summary("s", "FAIL a\n6 passed, 1 failed\n").is_err());
        assert!(summary("s", "0 passed, 0 failed\n").is_err());
        assert!(summary("s", "nothing ran\n").is_err());
    }
}
