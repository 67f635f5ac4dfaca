//! Helpers the CLI's tests share: the `fastio` binary, the operator
//! binaries of `fastio-examples`, files in a test's own directory.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The `fastio` binary under test.
pub fn fastio() -> &'static str {
    env!("CARGO_BIN_EXE_fastio")
}

/// A binary of `fastio-examples` beside ours, built (or found up to date)
/// by cargo first.
pub fn example(bin: &str) -> PathBuf {
    let st = Command::new(env!("CARGO"))
        .args(["build", "-q", "-p", "fastio-examples", "--bin", bin])
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
