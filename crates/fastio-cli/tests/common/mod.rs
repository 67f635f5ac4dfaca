//! Helpers the CLI's tests share: the `fastio` binary, the operator
//! binaries of `fastio-examples`, files in a test's own directory.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The `fastio` binary under test.
pub fn fastio() -> &'static str {
    env!("CARGO_BIN_EXE_fastio")
}

/// `cargo build -q` in the profile of the `fastio` this test runs (the
/// directory it was built into: `debug` is the `dev` profile), so that a
/// binary built for the test sits beside it, not in another profile's
/// directory where an old one may be found.
pub fn cargo_build() -> Command {
    let mut c = Command::new(env!("CARGO"));
    c.args(["build", "-q"]);
    let dir = Path::new(fastio()).parent().and_then(|d| d.file_name());
    match dir.and_then(|d| d.to_str()) {
        Some("debug") | None => {}
        Some(profile) => {
            c.args(["--profile", profile]);
        }
    }
    c
}

/// Set (to anything) by `cargo xtask ci` and `cargo xtask flake`, which
/// build every helper binary of the tests before any test runs: a helper
/// is then only found, never built while other tests (some of them
/// timing what they watch) run beside the build.
pub const PREBUILT: &str = "FASTIO_TEST_PREBUILT";

/// The binary `path`, made by `cargo build ARGS` (in this test's profile).
///
/// Under xtask ([`PREBUILT`] set) it is only found: missing, the test
/// panics saying how to build it. Run by hand (`cargo test -p fastio-cli`),
/// the build runs once per test process for each `args`, under a file lock
/// in the target directory (test binaries run at once share it), so that
/// an example edited since is rebuilt, not found stale.
pub fn prebuilt(args: &[&str], path: PathBuf) -> PathBuf {
    static BUILT: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    if std::env::var_os(PREBUILT).is_some() {
        assert!(
            path.exists(),
            "{} is missing: with {PREBUILT} set the tests only find it \
             (`cargo xtask ci` and `cargo xtask flake` build it first); \
             build it with `cargo build {}`",
            path.display(),
            args.join(" ")
        );
        return path;
    }
    let key = args.join(" ");
    let mut built = BUILT.lock().unwrap_or_else(|p| p.into_inner());
    if !built.contains(&key) {
        let lock_path = Path::new(fastio()).with_file_name(".fastio-test-build.lock");
        let lock = std::fs::File::create(&lock_path).expect("create the build lock");
        lock.lock().expect("take the build lock");
        let st = cargo_build().args(args).status().expect("run cargo");
        drop(lock);
        assert!(st.success(), "cargo build {key}");
        built.push(key);
    }
    assert!(path.exists(), "cargo built no {}", path.display());
    path
}

/// A binary of `fastio-examples` beside ours (see [`prebuilt`]: found, or
/// built once by hand runs).
pub fn example(bin: &str) -> PathBuf {
    prebuilt(
        &["-p", "fastio-examples", "--bins"],
        Path::new(fastio()).with_file_name(bin),
    )
}

/// Writes `text` to `dir/name` (making `dir`); its path.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// `fio-shmfill hold ARGS...` (with `env`): a process holding a context
/// with a published `secret` until its stdin closes; the process, the
/// context's handle and its pid.
pub fn hold(args: &[&str], env: &[(&str, String)]) -> (Child, String, String) {
    let mut child = Command::new(example("fio-shmfill"))
        .arg("hold")
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!((words[0], words[2]), ("handle", "pid"), "{line}");
    (child, words[1].to_owned(), words[3].to_owned())
}
