//! Running one named step: a command whose output is logged to a file,
//! summarised on success and printed in full on failure.

use std::fs::File;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::root;

/// Whether the cargo commands of this run build lean (see [`lean_builds`]).
static LEAN_BUILDS: AtomicBool = AtomicBool::new(false);

/// From now on every cargo command this process starts keeps line tables
/// only in debug builds (enough for a backtrace's file and line; full debug
/// information is most of a debug build's size) and no incremental state (a second copy of
/// our crates' builds that a run from a clean clone never reuses). `ci`
/// builds so: a CI machine's disk is shared and its free space varies.
pub(crate) fn lean_builds() {
    LEAN_BUILDS.store(true, Ordering::Relaxed);
}

/// Applies [`lean_builds`]'s settings to a cargo command when they are on.
fn lean(cmd: &mut Command) {
    if LEAN_BUILDS.load(Ordering::Relaxed) {
        cmd.env("CARGO_INCREMENTAL", "0")
            .env("CARGO_PROFILE_DEV_DEBUG", "line-tables-only");
    }
}

/// A `cargo` command with the given arguments, run in the workspace root.
pub(crate) fn cargo<I, S>(args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args(args).current_dir(root());
    lean(&mut cmd);
    cmd
}

/// A `cargo +nightly` command. Runs through rustup so the toolchain
/// override applies even when `CARGO` points at a stable cargo.
pub(crate) fn cargo_nightly<I, S>(args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut cmd = Command::new("rustup");
    cmd.args(["run", "nightly", "cargo"])
        .args(args)
        .current_dir(root());
    // Cargo run by xtask inherits stable's RUSTC etc.; drop them.
    for var in [
        "CARGO",
        "RUSTC",
        "RUSTDOC",
        "RUSTUP_TOOLCHAIN",
        "CARGO_MANIFEST_DIR",
    ] {
        cmd.env_remove(var);
    }
    lean(&mut cmd);
    cmd
}

/// One step of a run.
pub(crate) struct Step {
    name: String,
    command: Command,
}

impl Step {
    pub(crate) fn new(name: impl Into<String>, command: Command) -> Step {
        Step {
            name: name.into(),
            command,
        }
    }

    pub(crate) fn env(mut self, key: &str, value: &str) -> Step {
        self.command.env(key, value);
        self
    }

    /// Runs the step; returns its output (stdout and stderr interleaved).
    pub(crate) fn run(mut self) -> Result<String, String> {
        let dir = root().join("target").join("xtask-logs");
        std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        let log_path: PathBuf = dir.join(format!("{}.log", self.name.replace(['/', ' '], "_")));
        let log =
            File::create(&log_path).map_err(|e| format!("create {}: {e}", log_path.display()))?;
        let log2 = log.try_clone().map_err(|e| e.to_string())?;
        let started = Instant::now();
        let status = self
            .command
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .status()
            .map_err(|e| format!("{}: could not start {:?}: {e}", self.name, self.command))?;
        let output = std::fs::read_to_string(&log_path).unwrap_or_default();
        let secs = started.elapsed().as_secs_f64();
        report(&self.name, secs, status.success());
        report_disk(&self.name);
        if status.success() {
            Ok(output)
        } else {
            println!("       {} exited with {status}", self.name);
            println!(
                "----- output of step {} ({}) -----",
                self.name,
                log_path.display()
            );
            println!("{output}");
            println!("----- end of output of step {} -----", self.name);
            Err(format!("step {} failed", self.name))
        }
    }
}

/// Prints a step's summary line.
pub(crate) fn report(name: &str, secs: f64, ok: bool) {
    let mark = if ok { "[ok]  " } else { "[FAIL]" };
    println!("{mark} {name:<24} {secs:>7.1} s");
}

/// Prints what the disk holds after `when`: the size of `target/` (and of
/// `fuzz/target`, the fuzz workspace's, when there is one) and the space
/// left on its file system, so a run that fills the disk shows which step
/// took it. Silent where `du` or `df` cannot answer.
pub(crate) fn report_disk(when: &str) {
    let target = root().join("target");
    let first_number = |cmd: &mut Command| -> Option<u64> {
        let out = cmd.stderr(Stdio::null()).output().ok()?;
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .find_map(|w| w.parse().ok())
    };
    let gib = |bytes: u64| bytes as f64 / f64::from(1u32 << 30);
    let fuzz = root().join("fuzz").join("target");
    let used = first_number(Command::new("du").arg("-sb").arg(&target));
    let fuzz_used = if fuzz.exists() {
        first_number(Command::new("du").arg("-sb").arg(&fuzz))
    } else {
        None
    };
    let free = first_number(Command::new("df").args(["--output=avail", "-B1"]).arg(
        if target.exists() {
            target.clone()
        } else {
            root()
        },
    ));
    if let (Some(used), Some(free)) = (used, free) {
        let fuzz = fuzz_used.map_or(String::new(), |f| {
            format!(", fuzz/target {:.1} GiB", gib(f))
        });
        println!(
            "       disk after {when}: target/ {:.1} GiB{fuzz}, {:.1} GiB free",
            gib(used),
            gib(free)
        );
    }
}

/// Sums libtest's `test result:` lines: (passed, failed).
pub(crate) fn count_tests(log: &str) -> (u64, u64) {
    let mut passed = 0;
    let mut failed = 0;
    for line in log.lines().filter(|l| l.starts_with("test result:")) {
        for part in line.split([';', '.']) {
            let mut words = part.split_whitespace().rev();
            let (Some(label), Some(n)) = (words.next(), words.next()) else {
                continue;
            };
            let n: u64 = n.parse().unwrap_or(0);
            match label {
                "passed" => passed += n,
                "failed" => failed += n,
                _ => {}
            }
        }
    }
    (passed, failed)
}

/// Whether `program args...` runs and exits 0 (output discarded).
pub(crate) fn succeeds(mut cmd: Command) -> bool {
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .stdin(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_libtest_summaries() {
        let log = "running 3 tests\ntest result: ok. 3 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.1s\n\
                   test result: FAILED. 2 passed; 5 failed; 0 ignored; 0 measured; 0 filtered out\n";
        assert_eq!(super::count_tests(log), (5, 5));
    }
}
