//! `cargo xtask python`: installs the `fastio` Python package (crate
//! `fastio-python`) as a user does, `pip install crates/fastio-python`
//! (maturin's PEP 517 backend) into a virtual environment made anew
//! (`target/venv-python`), checks that it works with nothing else, then
//! installs the test tools and peers and runs its pytest suite there. The suite's pipeline test runs the `fastio` and
//! `fio-testop` binaries, built here first. mypy's `stubtest` then checks
//! the type stubs (`_native.pyi`) against the installed module.

use std::process::Command;

use crate::root;
use crate::step::{Step, cargo};

/// The test tools, pinned, with a DLPack consumer besides numpy (JAX on
/// the CPU), Foxglove's MCAP reader (recordings), and Apache TVM (the params tests compare with its loader and
/// writer; same pins as `cargo xtask interop`).
const TOOLS: [&str; 4] = ["pytest==9.2.0", "mypy==2.4.1", "jax==0.10.2", "mcap==1.6.0"];

/// What a user runs first: a context, an allocation through numpy.
const SMOKE: &str = "import numpy as np, fastio
ctx = fastio.FastIOContext.new(1 << 20)
a = ctx.create(24)
a.set_type_and_dimensions(np.float32, [2, 3])
a.map_as_numpy_array()[...] = 1.5
a.publish('x')
b = ctx.get('x')
v = np.from_dlpack(b)
assert v.shape == (2, 3) and not v.flags.writeable and float(v.sum()) == 9.0
print('fastio alone: ok', fastio.__file__)";

/// Whether `target/venv-python`'s `fastio` package imports and was built
/// from the current sources; when `build`, it is (re)built first if not
/// (`run`: installed as a user does, then its tests).
pub(crate) fn package_ready(build: bool) -> Result<bool, String> {
    let python = root().join("target/venv-python/bin/python");
    let ready = || {
        let mut probe = Command::new(&python);
        probe.args(["-c", "import fastio"]);
        crate::step::succeeds(probe) && installed_is_current()
    };
    if !ready() && build {
        run(false)?;
    }
    Ok(ready())
}

/// Whether `target/venv-python` holds a `fastio` package built after the
/// last change to any crate's sources (or `Cargo.lock`): a package built
/// from older sources may not read the contexts today's `fastio` makes
/// (the benches would run it beside today's binaries).
fn installed_is_current() -> bool {
    let venv_lib = root().join("target").join("venv-python").join("lib");
    let native = std::fs::read_dir(&venv_lib)
        .into_iter()
        .flatten()
        .flatten()
        .map(|py| py.path().join("site-packages").join("fastio"))
        .flat_map(|dir| std::fs::read_dir(dir).into_iter().flatten().flatten())
        .filter(|f| f.file_name().to_string_lossy().starts_with("_native"))
        .filter_map(|f| f.metadata().ok()?.modified().ok())
        .max();
    let Some(built) = native else {
        return false;
    };
    let mut newest = std::fs::metadata(root().join("Cargo.lock"))
        .and_then(|m| m.modified())
        .ok();
    let crates = root().join("crates");
    for krate in std::fs::read_dir(&crates).into_iter().flatten().flatten() {
        for part in ["src", "Cargo.toml", "pyproject.toml", "python"] {
            newest = newest.max(newest_in(&krate.path().join(part)));
        }
    }
    newest.is_none_or(|n| n <= built)
}

/// The newest modification time of `path` or anything below it.
fn newest_in(path: &std::path::Path) -> Option<std::time::SystemTime> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    let mut newest = meta.modified().ok();
    if meta.is_dir() {
        for e in std::fs::read_dir(path).into_iter().flatten().flatten() {
            newest = newest.max(newest_in(&e.path()));
        }
    }
    newest
}

/// `after_tests`: the workspace's tests were just built (`ci`'s test
/// step), which built every binary the package's tests run with the test
/// step's features: the same build is asked for, and nothing is rebuilt
/// (a narrower `cargo build -p ...` selects other features of shared
/// dependencies and rebuilds the CLI and its dependencies, over a minute).
pub(crate) fn run(after_tests: bool) -> Result<(), String> {
    let binaries = if after_tests {
        cargo(["test", "--workspace", "--all-features", "--no-run"])
    } else {
        cargo([
            "build",
            "-p",
            "fastio-cli",
            "-p",
            "fastio-examples",
            "-p",
            "fastio-capi",
        ])
    };
    Step::new("python binaries", binaries).run()?;
    // The way a user installs it, into a virtual environment made anew:
    // `pip install crates/fastio-python` reads pyproject.toml, builds
    // through maturin's PEP 517 backend in an isolated environment, and
    // brings numpy from PyPI as the package's only dependency.
    let venv = root().join("target").join("venv-python");
    std::fs::remove_dir_all(&venv)
        .or_else(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Ok(())
            } else {
                Err(e)
            }
        })
        .map_err(|e| format!("remove {}: {e}", venv.display()))?;
    let package = root().join("crates").join("fastio-python");
    let package = package.display().to_string();
    let python = crate::venv::python("venv-python", &[package.as_str()], "python")?;
    // It works with nothing else installed (outside the source tree, so
    // the installed package is the one imported).
    let mut smoke = Command::new(&python);
    smoke.args(["-c", SMOKE]).current_dir(root().join("target"));
    let said = Step::new("python: the package alone", smoke).run()?;
    if !said.contains("fastio alone: ok") {
        return Err(format!("the installed package said:\n{said}"));
    }
    // Then the test tools and the peers the tests compare with.
    let packages: Vec<&str> = TOOLS
        .iter()
        .chain(&crate::interop::PACKAGES)
        .copied()
        .collect();
    crate::venv::python("venv-python", &packages, "python tools")?;
    let debug = root().join("target").join("debug");
    let mut pytest = Command::new(&python);
    pytest
        .args(["-m", "pytest", "-q"])
        .arg(root().join("crates").join("fastio-python").join("tests"))
        .env("FASTIO_CLI", debug.join("fastio"))
        .env("FASTIO_TESTOP", debug.join("fio-testop"))
        .env("FASTIO_STREAMOP", debug.join("fio-streamop"))
        // A static library built for tests stays in `deps/`; `cargo build
        // -p fastio-capi` copies it up beside the binaries.
        .env(
            "FASTIO_CAPI_LIB",
            if after_tests {
                debug.join("deps").join("libfastio_capi.a")
            } else {
                debug.join("libfastio_capi.a")
            },
        )
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
