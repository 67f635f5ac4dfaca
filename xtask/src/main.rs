//! Project automation: `cargo xtask ci | flake | soak | fuzz | miri | bench | blaze | interop | numpy | install`.
//!
//! Every subcommand runs the same tools a developer would run by hand, in
//! the workspace root, and stops at the first failure with its output.

#![forbid(unsafe_code)]

mod bench;
mod bench_chain;
mod bench_growth;
mod bench_growth_hosts;
mod bench_hosts;
mod bench_paired;
mod bench_params;
mod bench_peers;
mod blaze;
mod flake;
mod fuzz;
mod headers;
mod install;
mod interop;
mod miri;
mod node;
mod numpy_diff;
mod python;
mod report;
mod soak;
mod step;
mod venv;
mod wake_probe;

use std::path::PathBuf;
use std::process::ExitCode;

use step::{Step, cargo};

const USAGE: &str = "usage: cargo xtask <command>

commands:
  ci                         fmt, clippy, tests, shm leak check, docs, package, Blaze check, TVM interop, numpy diff, Python package, install check, loom, miri, fuzz
  flake --runs N [--load K] [--filter NAME] [CARGO TEST ARGS...] [-- TEST ARGS...]
                             the test step N times (the workspace, or `-p fastio-cli --test metrics`...), with K busy loops beside it; lists every test that failed at least once, with its first panic
  soak hosts --rounds N [--seed S] [--tls | --plain]
                             three namespace hosts streaming (plain TCP and mutual TLS, alternating), one random fault a round (driver SIGKILL, link cut, link flap, operator SIGKILL, driver SIGSTOP 5 s) at a random moment; prints hangs, exits out of the bound, wrong causes, wrong frames, leaks, processes left, the slowest exit; writes target/soak-hosts.json (root)
  miri                       unit tests of the crates that contain unsafe, under Miri
  fuzz [--seconds N] [TARGET] replay the committed corpora, then fuzz each target (default 60 s)
  fuzz --cmin [TARGET]       minimize the corpora before committing them
  bench [params|chain [recorder]|hosts] [FILTER]  run the benchmarks and the peers beside them (or only params-io's, beside TVM's loader; the stream chain, beside dora-rs; or entries between two namespace hosts, beside Zenoh alone and TCP), print ratios
  bench hosts [entries|latency]
                             the hosts section alone: all of it, or the entries between two hosts (plain TCP, Zenoh alone, fastio-net; over mutual TLS beside Zenoh alone and bare quinn; QUIC's socket buffer), or the three-host chain behind a slow consumer
  bench chain viewer         a viewer (`fastio view` and four Foxglove clients, one never reading) beside the unpaced chain, on and off in turns: the source's rate with it against without, the viewer's memory
  bench paired [GROUP [OURS...]]
                             the goal rows against iceoryx2 in alternating pairs (all, one group such as stream/64MiB, or only our functions named in it)
  bench wakes                how long this machine takes to run a process woken from the other core and from its own (the hosts bench prints it too)
  bench --report             run every benchmark and peer, write docs/bench/README.md with SVG plots
  blaze                      check our canonical datashapes against Blaze's datashape package
  interop                    exchange params files with Apache TVM (PyPI) in both directions
  headers                    regenerate fastio-capi's C headers (cbindgen)
  install --prefix DIR       install the C/C++ library: shared and static libraries, headers, pkg-config file, CMake package
  install --check            install into target/, build a C program (pkg-config) and examples/cpp (CMake) against it, run the C++ operators in the demos
  node                       npm install Foxglove's client of its WebSocket protocol (pinned) into target/node-foxglove, for the viewer's tests
  python                     pip install crates/fastio-python into a new venv, check it alone, then run pytest (numpy, JAX, TVM beside it) and stubtest
  numpy [--cases N] [--seed S] ndobject's views, casts and string transcodes against numpy (default 3000 cases)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("ci") => ci(),
        Some("flake") => flake::parse_args(&args[1..]).and_then(|o| flake::run(&o)),
        Some("soak") => soak::parse_args(&args[1..]).and_then(|o| soak::run(&o)),
        Some("miri") => miri::run(),
        Some("fuzz") => fuzz::parse_args(&args[1..])
            .and_then(|(secs, target, cmin)| fuzz::run(secs, target.as_deref(), cmin)),
        Some("bench") => bench::run(&args[1..]),
        Some("blaze") => blaze::run(),
        Some("interop") => interop::run(),
        Some("headers") => headers::write(),
        Some("install") if args.get(1).map(String::as_str) == Some("--check") => install::check(),
        Some("install") => install::parse_args(&args[1..]).and_then(|prefix| install::run(&prefix)),
        Some("python") => python::run(false),
        Some("node") => node::foxglove_client().map(|m| println!("{}", m.display())),
        Some(wake_probe::COMMAND) => wake_probe::role(&args[1..]),
        Some("numpy") => numpy_diff::parse_args(&args[1..])
            .and_then(|(cases, seed)| numpy_diff::run(cases, seed)),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            Ok(())
        }
        _ => Err(format!("unknown or missing command\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root (the parent of this crate's directory).
pub(crate) fn root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

/// The Python peer of `fastio-net` (PyPI), the same release as the
/// workspace's `zenoh` crate.
pub(crate) const ZENOH_PY: &str = "eclipse-zenoh==1.10.2";

fn ci() -> Result<(), String> {
    let started = std::time::Instant::now();
    // A CI machine's disk is shared and its free space varies (once a few
    // hundred MiB): every debug build of the run keeps line tables only
    // (enough for a backtrace's file and line; full debug information is
    // most of a debug build's size; release builds keep the workspace's
    // `debug = 1`) and no build keeps incremental state (a second copy of
    // our crates' builds that a run from a clean clone never reuses).
    step::lean_builds();
    step::report_disk("start");
    Step::new("fmt", cargo(["fmt", "--all", "--check"])).run()?;
    Step::new(
        "clippy",
        cargo([
            "clippy",
            "--workspace",
            "--all-targets",
            "--all-features",
            "--",
            "-D",
            "warnings",
        ]),
    )
    .run()?;
    headers::check()?;
    // The plain-Zenoh Python reader of the multi-host tests (no fastio in
    // it): eclipse-zenoh at the version of our `zenoh` crate.
    let zenoh_python = venv::python("venv-zenoh", &[ZENOH_PY], "zenoh peer")?;
    // `cargo test --workspace` builds every binary the tests run (the
    // examples' operators beside `fastio`, `fastio-net`'s examples) before
    // any test starts: the tests only find them (FASTIO_TEST_PREBUILT),
    // never build beside tests that run.
    // Foxglove's own client of its WebSocket protocol (npm), which the
    // viewer's tests run in Node.js.
    let foxglove_client = node::foxglove_client()?;
    let test_log = Step::new("test", cargo(["test", "--workspace", "--all-features"]))
        .env("FASTIO_ZENOH_PYTHON", &zenoh_python.display().to_string())
        .env(
            "FASTIO_FOXGLOVE_NODE_MODULES",
            &foxglove_client.display().to_string(),
        )
        .env("FASTIO_TEST_PREBUILT", "1")
        .run()?;
    let (passed, failed) = step::count_tests(&test_log);
    shm_leak_check()?;
    Step::new(
        "doc",
        cargo(["doc", "--workspace", "--no-deps", "--all-features"]),
    )
    .env("RUSTDOCFLAGS", "-D warnings")
    .run()?;
    forget_packaged_sources()?;
    // Verification builds every crate alone, from its tarball, with
    // dependencies resolved afresh: a second full build. It goes into a
    // target directory of its own, made empty before (so no crate of ours
    // verified by an earlier run is reused, stale: cargo takes a registry
    // crate for immutable) and removed after, so the disk holds the two
    // builds only while this step runs.
    let package_target = root().join("target").join("package-check");
    remove_dir_if_present(&package_target)?;
    // Where an older xtask verified into the main target directory.
    remove_dir_if_present(&root().join("target").join("package"))?;
    let packaged = Step::new(
        "package",
        cargo([
            "package",
            "--workspace",
            "--exclude",
            "xtask",
            "--exclude",
            "fastio-examples",
            "--exclude",
            "fastio-python",
            "--allow-dirty",
            "--target-dir",
            &package_target.display().to_string(),
        ]),
    )
    .run();
    // Gone whether or not verification passed: a second full build must
    // not stay on a disk that may be nearly full.
    remove_dir_if_present(&package_target)?;
    packaged?;
    blaze::run()?;
    interop::run()?;
    numpy_diff::run(numpy_diff::DEFAULT_CASES, numpy_diff::DEFAULT_SEED)?;
    python::run(true)?;
    install::check()?;
    // Miri interprets on one core, and each fuzz target runs on one: the
    // two go side by side (each in its own target directory), with loom
    // before the fuzz runs. Both are always waited for; the first error
    // (Miri's, if both failed) is the step's.
    std::thread::scope(|s| {
        let miri = s.spawn(miri::run);
        let loom_and_fuzz = Step::new(
            "loom",
            cargo([
                "test",
                "-p",
                "shm-core",
                "--release",
                "--target-dir",
                "target/loom",
                "--lib",
                "loom",
            ]),
        )
        .env("RUSTFLAGS", "--cfg loom")
        .run()
        .and_then(|_| fuzz::run(15, None, false));
        let miri = miri
            .join()
            .unwrap_or_else(|_| Err("the Miri step panicked".into()));
        miri.and(loom_and_fuzz)
    })?;
    println!(
        "ci: all steps passed in {:.0?}\ntests: {passed} passed, {failed} failed",
        started.elapsed()
    );
    Ok(())
}

/// Removes `dir` and all in it; nothing to do when it is not there.
fn remove_dir_if_present(dir: &std::path::Path) -> Result<(), String> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("remove {}: {e}", dir.display())),
    }
}

/// `cargo package --workspace` verifies each crate against the tarballs of
/// the crates it depends on, through a local registry in
/// `target/package-check/package/tmp-registry`, which cargo unpacks into
/// `$CARGO_HOME/registry/src/-<hash of that path>/<crate>-<version>`. A later
/// run from a clone at the same path finds that directory and reuses it,
/// stale (the version number did not change), so a crate is verified
/// against an older copy of its dependency. Removing our crates' unpacked
/// copies from such local registries first makes every run verify against
/// the tarballs it just made.
fn forget_packaged_sources() -> Result<(), String> {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    let Some(src) = cargo_home.map(|h| h.join("registry").join("src")) else {
        return Ok(());
    };
    let Ok(registries) = std::fs::read_dir(&src) else {
        return Ok(());
    };
    let ours: Vec<String> = std::fs::read_dir(root().join("crates"))
        .map_err(|e| format!("read crates/: {e}"))?
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    for registry in registries.flatten() {
        // Local (path) registries are named `-<hash>`; crates.io's is not.
        if !registry.file_name().to_string_lossy().starts_with('-') {
            continue;
        }
        for unpacked in std::fs::read_dir(registry.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = unpacked.file_name().to_string_lossy().into_owned();
            let is_ours = ours.iter().any(|c| {
                name.strip_prefix(c.as_str())
                    .and_then(|rest| rest.strip_prefix('-'))
                    .is_some_and(|v| v.starts_with(|ch: char| ch.is_ascii_digit()))
            });
            if is_ours {
                std::fs::remove_dir_all(unpacked.path())
                    .map_err(|e| format!("remove {}: {e}", unpacked.path().display()))?;
            }
        }
    }
    Ok(())
}

/// Name prefixes of the shared-memory objects the test suites create.
const TEST_SHM_PREFIXES: [&str; 2] = ["shmcoretest", "fastiotest"];

/// Fails when a test left a shared-memory object behind in `/dev/shm`.
fn shm_leak_check() -> Result<(), String> {
    let started = std::time::Instant::now();
    let leaked: Vec<String> = std::fs::read_dir("/dev/shm")
        .map_err(|e| format!("read /dev/shm: {e}"))?
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| TEST_SHM_PREFIXES.iter().any(|p| n.starts_with(p)))
        .collect();
    if !leaked.is_empty() {
        println!(
            "[FAIL] {:<24} {:>7.1} s",
            "shm leak check",
            started.elapsed().as_secs_f64()
        );
        return Err(format!(
            "tests left segments in /dev/shm: {}",
            leaked.join(", ")
        ));
    }
    println!(
        "[ok]   {:<24} {:>7.1} s",
        "shm leak check",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
