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

/// A binary of `fastio-examples` beside ours, built (or found up to date)
/// by cargo first.
pub fn example(bin: &str) -> PathBuf {
    let st = cargo_build()
        .args(["-p", "fastio-examples", "--bin", bin])
        .status()
        .expect("run cargo");
    assert!(st.success(), "cargo build --bin {bin}");
    Path::new(fastio()).with_file_name(bin)
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
