//! C programs against the generated headers, compiled with the system C
//! compiler and linked with this crate's static library, run under
//! valgrind (errors and definite leaks fail the run): contexts and
//! allocations with every error path, and two Clara-style C operators in a
//! pipeline run by the local driver. The C++ API's programs are in
//! `cpp/tests.rs`.

use std::path::{Path, PathBuf};
use std::process::Command;

use fastio_pipeline::{Definition, LocalDriver, RunOptions};

#[path = "cpp/tests.rs"]
mod cpp;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// This crate's static library, built beside the test binary.
fn staticlib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    [deps.to_path_buf(), deps.parent().unwrap().to_path_buf()]
        .into_iter()
        .map(|d| d.join("libfastio_capi.a"))
        .find(|p| p.exists())
        .expect("libfastio_capi.a next to the test binary")
}

/// Compiles `tests/c/<name>.c` into the test's temporary directory.
/// Each build is a file of its own: tests running at once may build one
/// source, and one must not overwrite the program another runs.
fn compile(name: &str) -> PathBuf {
    static BUILT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = BUILT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{n}"));
    let st = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-g"])
        .arg("-I")
        .arg(crate_dir().join("include"))
        .arg("-I")
        .arg(crate_dir().join("tests/c"))
        .arg(crate_dir().join(format!("tests/c/{name}.c")))
        .arg(staticlib())
        .args(["-lpthread", "-ldl", "-lm", "-lrt", "-lutil", "-o"])
        .arg(&out)
        .status()
        .expect("run cc");
    assert!(st.success(), "cc failed for {name}.c");
    out
}

const VALGRIND: [&str; 5] = [
    "valgrind",
    "--quiet",
    "--error-exitcode=99",
    "--leak-check=full",
    "--errors-for-leak-kinds=definite",
];

fn valgrind_present() -> bool {
    let ok = Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok || std::env::var_os("CI").is_none(),
        "valgrind is required in CI (bash .ci/run installs it)"
    );
    ok
}

#[test]
fn contexts_and_allocations_from_c_under_valgrind() {
    let exe = compile("contexts");
    let mut cmd = if valgrind_present() {
        let mut c = Command::new(VALGRIND[0]);
        c.args(&VALGRIND[1..]).arg(&exe);
        c
    } else {
        Command::new(&exe)
    };
    let out = cmd.env("FASTIO_TEST", "1").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}\n{stderr}", out.status);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "contexts: ok\n");
}

fn command(exe: &Path) -> String {
    let mut parts: Vec<String> = Vec::new();
    if valgrind_present() {
        parts.extend(VALGRIND.iter().map(|s| s.to_string()));
    }
    parts.push(exe.display().to_string());
    format!("[{}]", parts.join(", "))
}

/// Runs the pipeline `yaml` with the local driver: its report and every
/// output line as `[operator] text`.
fn run(yaml: &str) -> (fastio_pipeline::RunReport, Vec<String>) {
    let def = Definition::parse("c.yaml", yaml, &[]).unwrap();
    let lines = std::sync::Mutex::new(Vec::new());
    let report = LocalDriver::new(def.pipeline, RunOptions::default())
        .run(|p| {
            if let fastio_pipeline::Progress::Line { operator, text, .. } = p {
                lines.lock().unwrap().push(format!("[{operator}] {text}"));
            }
        })
        .unwrap();
    (report, lines.into_inner().unwrap())
}

#[test]
fn clara_style_c_operators_in_a_pipeline() {
    let producer = compile("producer");
    let consumer = compile("consumer");
    let yaml = format!(
        "api-version: 0.5.0
name: c-operators
operators:
- name: c-producer
  container: {{image: c, command: {}}}
  output:
  - {{name: v, type: array, element-type: float32, shape: [2, -1]}}
- name: c-consumer
  container: {{image: c, command: {}}}
  input:
  - {{from: c-producer, name: v, type: array, element-type: float32, shape: [2, -1]}}
",
        command(&producer),
        command(&consumer)
    );
    let (report, lines) = run(&yaml);
    assert!(report.succeeded(), "{report:?}\n{lines:#?}");
    assert!(
        lines.contains(&"[c-producer] produced".to_owned()),
        "{lines:?}"
    );
    assert!(
        lines.contains(&"[c-consumer] consumed sum 7.5".to_owned()),
        "{lines:?}"
    );
}

/// Issue 22: a C consumer sees every input kind (static, dynamic, string,
/// scalar) with the shape, element type, size and pre-allocation its C
/// producer published; both call every entry function with each pointer
/// argument null first and then use the entry normally (under valgrind).
#[test]
fn c_inputs_are_what_the_producer_published_and_null_arguments_change_nothing() {
    let producer = compile("entries_producer");
    let consumer = compile("entries_consumer");
    let yaml = format!(
        "api-version: 0.5.0
name: c-entries
operators:
- name: maker
  container: {{image: c, command: {}}}
  output:
  - {{name: s, type: array, element-type: float32, shape: [2, 3]}}
  - {{name: d, type: array, element-type: int32, shape: [3, -1]}}
  - {{name: t, type: string}}
  - {{name: k, type: float64}}
- name: taker
  container: {{image: c, command: {}}}
  input:
  - {{from: maker, name: s, type: array, element-type: float32, shape: [2, 3]}}
  - {{from: maker, name: d, type: array, element-type: int32, shape: [3, -1]}}
  - {{from: maker, name: t, type: string}}
  - {{from: maker, name: k, type: float64}}
",
        command(&producer),
        command(&consumer)
    );
    let (report, lines) = run(&yaml);
    assert!(report.succeeded(), "{report:?}\n{lines:#?}");
    assert!(
        lines.contains(&"[maker] produced every kind".to_owned()),
        "{lines:?}"
    );
    assert!(
        lines.contains(&"[taker] every input as published".to_owned()),
        "{lines:?}"
    );
}

/// `fio-streamop` (of `fastio-examples`), built if this test runs alone.
fn streamop() -> PathBuf {
    example_bin("fio-streamop")
}

/// A binary of `fastio-examples` beside this test's profile directory.
/// `cargo xtask ci` and `cargo xtask flake` build it before any test runs
/// and set `FASTIO_TEST_PREBUILT`: it is then only found (a missing one is
/// a clear failure, never a build beside timed tests). Run by hand, cargo
/// builds the examples once per test process, under a file lock shared
/// with the other test processes.
fn example_bin(name: &str) -> PathBuf {
    static BUILT: std::sync::Once = std::sync::Once::new();
    let exe = std::env::current_exe().unwrap();
    let debug = exe.parent().unwrap().parent().unwrap().to_path_buf();
    let path = debug.join(name);
    if std::env::var_os("FASTIO_TEST_PREBUILT").is_some() {
        assert!(
            path.exists(),
            "{} is missing: with FASTIO_TEST_PREBUILT set the tests only find it; \
             build it with `cargo build -p fastio-examples --bins`",
            path.display()
        );
        return path;
    }
    BUILT.call_once(|| {
        let lock = std::fs::File::create(debug.join(".fastio-test-build.lock"))
            .expect("create the build lock");
        lock.lock().expect("take the build lock");
        let st = Command::new(env!("CARGO"))
            .args(["build", "-q", "-p", "fastio-examples", "--bins"])
            .status()
            .expect("run cargo");
        assert!(st.success(), "cargo build -p fastio-examples --bins");
    });
    assert!(path.exists(), "cargo built no {}", path.display());
    path
}

/// Issue 18: a C operator in a stream (`fastio_operator_next_frame` ...
/// `fastio_frame_done`), between Rust operators that check every word of
/// every frame, under valgrind.
#[test]
fn a_c_stage_in_a_streaming_pipeline() {
    let stage = compile("stream_stage");
    let op = streamop().display().to_string();
    let arr = "type: array, element-type: uint32, shape: [-1, 64]";
    let yaml = format!(
        "api-version: 0.5.0
name: c-stream
operators:
- name: src
  container: {{image: rust, command: [{op}, source, v]}}
  output: [{{name: v, {arr}}}]
- name: c
  container: {{image: c, command: {stage}}}
  input: [{{from: src, name: v, {arr}}}]
  output: [{{name: w, {arr}}}]
- name: sink
  container: {{image: rust, command: [{op}, sink, w], variables: {{EXPECT_FRAMES: 300}}}}
  input: [{{from: c, name: w, {arr}}}]
streaming:
  frames: 300
  max-shape:
    src/v: [16, 64]
    c/w: [16, 64]
",
        stage = command(&stage),
    );
    let (report, lines) = run(&yaml);
    assert!(report.succeeded(), "{report:?}\n{lines:#?}\n{yaml}");
    assert!(
        lines.contains(&"[c] c stage: 300 frames".to_owned()),
        "{lines:?}"
    );
    assert!(
        lines.contains(&"[sink] sink: 300 frames".to_owned()),
        "{lines:?}"
    );
}

/// Issue 28: an allocation of 2 GiB and more in C. Clara's
/// `__map_allocation` gives the size as an `int`: it is
/// `FASTIO_ERR_TOO_LARGE` with nothing written, never a truncated size;
/// `__map_allocation64` maps it whole (not under valgrind: 2 GiB).
#[test]
fn a_c_output_of_more_than_2_gib_is_too_large_for_an_int_and_maps_with_the_64_bit_call() {
    let large = compile("large");
    let yaml = format!(
        "api-version: 0.5.0
name: c-large
operators:
- name: big
  container: {{image: c, command: [{}]}}
  output:
  - {{name: big, type: array, element-type: uint8, shape: [{}]}}
",
        large.display(),
        (1u64 << 31) + 4096
    );
    let (report, lines) = run(&yaml);
    assert!(report.succeeded(), "{report:?}\n{lines:#?}");
    assert!(
        lines.contains(&format!(
            "[big] large: mapped {} bytes",
            (1u64 << 31) + 4096
        )),
        "{lines:?}"
    );
}

/// Issue 29: a C source that fails at a random frame is the root cause,
/// never the sink that saw its poison first (the sink prints its error on
/// stdout: the driver reads how each loop ended from the context), every
/// time.
#[test]
fn a_c_source_that_fails_is_the_root_cause_not_its_sink() {
    let source = compile("failing_source");
    let op = streamop().display().to_string();
    let arr = "type: array, element-type: uint32, shape: [-1, 64]";
    let mut seed = 0xc29_u64;
    for _ in 0..4 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let k = 3 + seed % 300;
        let yaml = format!(
            "api-version: 0.5.0
name: c-fails
operators:
- name: src
  container: {{image: c, command: [{}], variables: {{FAIL_AT: '{k}'}}}}
  output: [{{name: v, {arr}}}]
- name: sink
  container: {{image: rust, command: [{op}, sink, v], variables: {{ERRORS_ON_STDOUT: '1'}}}}
  input: [{{from: src, name: v, {arr}}}]
streaming:
  frames: 100000
  max-shape:
    src/v: [4, 64]
",
            source.display()
        );
        let (report, lines) = run(&yaml);
        assert_eq!(
            report.failure,
            Some(fastio_pipeline::Failure::Exited {
                operator: "src".into(),
                host: None,
                code: 1,
                frame: Some(k)
            }),
            "k = {k}: {lines:#?}"
        );
    }
}

/// Issue 28: two inputs whose local names are both `out`. In C, `out` is
/// an invalid argument naming both entries; `m1/out` and `m2/out` give each
/// producer's frames (checked by their stage count), under valgrind.
#[test]
fn a_c_sink_asking_for_a_name_two_inputs_share_gets_an_error_naming_both() {
    let sink = compile("two_inputs");
    let op = streamop().display().to_string();
    let arr = "type: array, element-type: uint32, shape: [-1, 64]";
    let yaml = format!(
        "api-version: 0.5.0
name: c-two-outs
operators:
- name: m1
  container: {{image: rust, command: [{op}, source, out]}}
  output: [{{name: out, {arr}}}]
- name: m2
  container: {{image: rust, command: [{op}, stage, out, out]}}
  input: [{{from: m1, name: out, {arr}}}]
  output: [{{name: out, {arr}}}]
- name: sink
  container: {{image: c, command: {sink}}}
  input: [{{from: m1, name: out, {arr}}}, {{from: m2, name: out, {arr}}}]
streaming:
  frames: 40
  max-shape:
    m1/out: [16, 64]
    m2/out: [16, 64]
",
        sink = command(&sink),
    );
    let (report, lines) = run(&yaml);
    assert!(report.succeeded(), "{report:?}\n{lines:#?}\n{yaml}");
    assert!(
        lines.contains(&"[sink] c sink: 40 frames".to_owned()),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("[sink] c sink: the name \"out\" matches two entries")),
        "{lines:?}"
    );
}

/// Streams from C without a pipeline: a producer, two consumer processes,
/// 1,000 frames of varying shape checked word by word, the end and the
/// poisoned end, drop-oldest and every error path (`tests/c/streams.c`),
/// under valgrind.
#[test]
fn streams_from_c_without_a_pipeline() {
    let exe = compile("streams");
    let mut cmd = if valgrind_present() {
        let mut c = Command::new(VALGRIND[0]);
        c.args(&VALGRIND[1..]).arg(&exe);
        c
    } else {
        Command::new(&exe)
    };
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}\n{stderr}", out.status);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "streams: ok\n");
}

/// `/dev/shm` running out, from C: run with a 16 MiB tmpfs on `/dev/shm`
/// in a private mount namespace (root; CI is), an allocation that does not
/// fit is `FASTIO_ERR_NO_SPACE` (`tests/c/nospace.c`), and nothing is
/// left behind.
#[test]
fn a_full_dev_shm_is_a_status_code_in_c() {
    let exe = compile("nospace");
    let script = format!(
        "mount -t tmpfs -o size=16m tmpfs /dev/shm || exit 97\n{}; echo rc=$?\nls -A /dev/shm",
        exe.display()
    );
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !stdout.contains("rc=") {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must be able to make a mount namespace: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    assert_eq!(
        stdout,
        "nospace: ok\nrc=0\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
