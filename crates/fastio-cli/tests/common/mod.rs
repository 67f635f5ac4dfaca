//! Helpers the CLI's tests share: the `fastio` binary, the operator
//! binaries of `fastio-examples`, files in a test's own directory.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

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
