//! `cargo xtask python`: builds the `fastio` Python package (crate
//! `fastio-python`) into a wheel as `pip install crates/fastio-python`
//! does (maturin's PEP 517 backend), installs that wheel into a
//! fresh virtual environment (`target/venv-python`), and runs its pytest
//! suite there. The suite's pipeline test runs the `fastio` and
//! `fio-testop` binaries, built here first. mypy's `stubtest` then checks
//! the type stubs (`_native.pyi`) against the installed module.

use std::process::Command;

use crate::root;
use crate::step::{Step, cargo};

/// The build and test tools, pinned, with Apache TVM (the params tests
/// compare with its loader and writer; same pins as `cargo xtask interop`).
const TOOLS: [&str; 3] = ["maturin==1.16.0", "pytest==9.2.0", "mypy==2.4.1"];

pub(crate) fn run() -> Result<(), String> {
    let packages: Vec<&str> = TOOLS
        .iter()
        .chain(&crate::interop::PACKAGES)
        .copied()
        .collect();
    let python = crate::venv::python("venv-python", &packages, "python")?;
    Step::new(
        "python binaries",
        cargo([
            "build",
            "-p",
            "fastio-cli",
            "-p",
            "fastio-examples",
            "-p",
            "fastio-capi",
        ]),
    )
    .run()?;
    let wheels = root().join("target").join("wheels");
    let _ = std::fs::remove_dir_all(&wheels);
    // The way a user installs it (`pip install crates/fastio-python`):
    // pip reads pyproject.toml and builds through maturin's PEP 517 backend
    // in an isolated environment, here into a wheel.
    let mut build = Command::new(&python);
    build
        .args([
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-cache-dir",
            "--wheel-dir",
        ])
        .arg(&wheels)
        .arg(root().join("crates").join("fastio-python"));
    Step::new("python wheel (pip)", build).run()?;
    let wheel = std::fs::read_dir(&wheels)
        .map_err(|e| format!("read {}: {e}", wheels.display()))?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or("maturin built no wheel")?;
    let mut install = Command::new(&python);
    install
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--force-reinstall",
            "--no-deps",
        ])
        .arg(&wheel);
    Step::new("python install wheel", install).run()?;
    let debug = root().join("target").join("debug");
    let mut pytest = Command::new(&python);
    pytest
        .args(["-m", "pytest", "-q"])
        .arg(root().join("crates").join("fastio-python").join("tests"))
        .env("FASTIO_CLI", debug.join("fastio"))
        .env("FASTIO_TESTOP", debug.join("fio-testop"))
        .env("FASTIO_STREAMOP", debug.join("fio-streamop"))
        .env("FASTIO_CAPI_LIB", debug.join("libfastio_capi.a"))
        .env("FASTIO_CAPI_DIR", root().join("crates").join("fastio-capi"))
        .current_dir(root());
    let log = Step::new("python pytest", pytest).run()?;
    if !log.lines().any(|l| l.contains(" passed"))
        || log.contains(" failed")
        || log.contains(" skipped")
    {
        return Err(format!("pytest did not pass every test:\n{log}"));
    }
    // Outside the source tree, so the installed package is the one checked.
    let mut stubtest = Command::new(&python);
    stubtest
        .args(["-m", "mypy.stubtest", "fastio._native"])
        .current_dir(root().join("target"));
    Step::new("python stubtest", stubtest).run()?;
    Ok(())
}
