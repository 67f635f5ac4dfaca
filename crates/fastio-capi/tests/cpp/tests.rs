//! Issue 32: C++ programs over `include/fastio.hpp`, compiled with
//! `-std=c++17 -Wall -Wextra -Werror` and linked with this crate's static
//! library, in real pipelines beside Rust and C operators (one-shot and
//! streaming), each under valgrind and again built with AddressSanitizer
//! and UBSan; and every exception type of the C++ API from a real bad
//! call. README's operator (`scale`) is the one `examples/cpp` builds with
//! CMake against an installed prefix (`cargo xtask ci` does that too).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{
    VALGRIND, command, crate_dir, example_bin, run, staticlib, streamop, valgrind_present,
};

/// How a C++ program is built and run.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Check {
    /// Built plainly, run under valgrind (when present).
    Valgrind,
    /// Built with AddressSanitizer and UBSan (their reports fail the run).
    Sanitizers,
}

const CHECKS: [Check; 2] = [Check::Valgrind, Check::Sanitizers];

/// Compiles `source` (a `.cpp` file) into the test's temporary directory,
/// as a file of its own (tests running at once may build one source).
fn compile_cpp(source: &Path, check: Check) -> PathBuf {
    static BUILT: AtomicUsize = AtomicUsize::new(0);
    let n = BUILT.fetch_add(1, Ordering::Relaxed);
    let stem = source.file_stem().unwrap().to_string_lossy();
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("cpp-{stem}-{check:?}-{n}"));
    let mut cc = Command::new("c++");
    cc.args(["-std=c++17", "-Wall", "-Wextra", "-Werror", "-g"])
        .arg("-I")
        .arg(crate_dir().join("include"))
        .arg("-I")
        .arg(crate_dir().join("tests/cpp"));
    if check == Check::Sanitizers {
        cc.args([
            "-fsanitize=address,undefined",
            "-fno-sanitize-recover=undefined",
            "-fno-omit-frame-pointer",
        ]);
    }
    let st = cc
        .arg(source)
        .arg(staticlib())
        .args(["-lpthread", "-ldl", "-lm", "-lrt", "-lutil", "-o"])
        .arg(&out)
        .status()
        .expect("run c++");
    assert!(st.success(), "c++ failed for {}", source.display());
    out
}

fn test_source(name: &str) -> PathBuf {
    crate_dir().join("tests/cpp").join(format!("{name}.cpp"))
}

/// `examples/cpp/<name>.cpp`: the operators of the CMake project.
fn example_source(name: &str) -> PathBuf {
    crate_dir()
        .join("../../examples/cpp")
        .join(format!("{name}.cpp"))
}

/// The YAML command list of a C++ program: under valgrind, or as built.
fn cpp_command(exe: &Path, check: Check) -> String {
    match check {
        Check::Valgrind => command(exe),
        Check::Sanitizers => format!("[{}]", exe.display()),
    }
}

/// README's operator in C++ (`w = 2 * v`, a dynamic output) between a Rust
/// producer and a Rust and a C consumer: the sums prove every value.
#[test]
fn a_cpp_operator_in_a_one_shot_pipeline_beside_rust_and_c() {
    let testop = example_bin("fio-testop").display().to_string();
    let summer = super::compile("summer");
    for check in CHECKS {
        let scale = compile_cpp(&example_source("scale"), check);
        let yaml = format!(
            "api-version: 0.5.0
name: cpp-one-shot
operators:
- name: make
  container: {{image: rust, command: [{testop}, fill, v, '1.5']}}
  output: [{{name: v, type: array, element-type: float32, shape: [2, 4]}}]
- name: scale
  container: {{image: cpp, command: {}}}
  input: [{{from: make, name: v, type: array, element-type: float32, shape: [2, 4]}}]
  output: [{{name: w, type: array, element-type: float32, shape: [-1]}}]
- name: total
  container: {{image: rust, command: [{testop}, sum, s, w]}}
  input: [{{from: scale, name: w, type: array, element-type: float32, shape: [-1]}}]
  output: [{{name: s, type: float64}}]
- name: c-total
  container: {{image: c, command: {}}}
  input: [{{from: scale, name: w, type: array, element-type: float32, shape: [-1]}}]
",
            cpp_command(&scale, check),
            command(&summer)
        );
        let (report, lines) = run(&yaml);
        assert!(report.succeeded(), "{check:?}: {report:?}\n{lines:#?}");
        for line in [
            "[scale] scaled 8 values",
            "[total] sum 24",
            "[c-total] c sum 24",
        ] {
            assert!(
                lines.contains(&line.to_owned()),
                "{check:?}: {line}: {lines:#?}"
            );
        }
    }
}

/// `for (auto &frame : op.frames())` between Rust operators that check
/// every word of every frame (a frame of the wrong stage or order fails
/// the sink).
#[test]
fn a_cpp_stage_in_a_streaming_pipeline() {
    let op = streamop().display().to_string();
    let arr = "type: array, element-type: uint32, shape: [-1, 64]";
    for check in CHECKS {
        let stage = compile_cpp(&test_source("stream_stage"), check);
        let yaml = format!(
            "api-version: 0.5.0
name: cpp-stream
operators:
- name: src
  container: {{image: rust, command: [{op}, source, v]}}
  output: [{{name: v, {arr}}}]
- name: cpp
  container: {{image: cpp, command: {stage}}}
  input: [{{from: src, name: v, {arr}}}]
  output: [{{name: w, {arr}}}]
- name: sink
  container: {{image: rust, command: [{op}, sink, w], variables: {{EXPECT_FRAMES: 300}}}}
  input: [{{from: cpp, name: w, {arr}}}]
streaming:
  frames: 300
  max-shape:
    src/v: [16, 64]
    cpp/w: [16, 64]
",
            stage = cpp_command(&stage, check),
        );
        let (report, lines) = run(&yaml);
        assert!(report.succeeded(), "{check:?}: {report:?}\n{lines:#?}");
        assert!(
            lines.contains(&"[cpp] c++ stage: 300 frames".to_owned()),
            "{check:?}: {lines:#?}"
        );
        assert!(
            lines.contains(&"[sink] sink: 300 frames".to_owned()),
            "{check:?}: {lines:#?}"
        );
    }
}

/// A C++ stage whose loop body throws at a random frame after writing
/// half of its output: the frame is abandoned as the exception unwinds
/// (never published half-written: the sink checks every word of every
/// frame it gets), and the stage is the root cause at that frame.
#[test]
fn a_frame_an_exception_leaves_is_abandoned_not_published() {
    let op = streamop().display().to_string();
    let arr = "type: array, element-type: uint32, shape: [-1, 64]";
    let mut seed = 0xab4_u64;
    for check in CHECKS {
        let stage = compile_cpp(&test_source("stream_stage"), check);
        for _ in 0..2 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let k = 1 + seed % 150;
            let yaml = format!(
                "api-version: 0.5.0
name: cpp-abandon
operators:
- name: src
  container: {{image: rust, command: [{op}, source, v]}}
  output: [{{name: v, {arr}}}]
- name: cpp
  container: {{image: cpp, command: {}, variables: {{THROW_AT: '{k}'}}}}
  input: [{{from: src, name: v, {arr}}}]
  output: [{{name: w, {arr}}}]
- name: sink
  container: {{image: rust, command: [{op}, sink, w], variables: {{ERRORS_ON_STDOUT: '1'}}}}
  input: [{{from: cpp, name: w, {arr}}}]
streaming:
  frames: 100000
  max-shape:
    src/v: [16, 64]
    cpp/w: [16, 64]
",
                cpp_command(&stage, check)
            );
            let (report, lines) = run(&yaml);
            assert_eq!(
                report.failure,
                Some(fastio_pipeline::Failure::Exited {
                    operator: "cpp".into(),
                    host: None,
                    code: 1,
                    frame: Some(k)
                }),
                "{check:?}, k = {k}: {lines:#?}"
            );
            let sink = report.operators.iter().find(|o| o.name == "sink").unwrap();
            assert!(
                !sink.stderr_tail.iter().any(|l| l.contains(" word ")),
                "{check:?}, k = {k}: a half-written frame reached the sink: {:?}",
                sink.stderr_tail
            );
            assert!(
                report.operators.iter().any(|o| o.name == "cpp"
                    && o.stderr_tail
                        .iter()
                        .any(|l| l.contains(&format!("failing at frame {k} on purpose")))),
                "{check:?}: {report:?}"
            );
        }
    }
}

/// A C source that fails at a random frame: the C++ sink reads the frames
/// before it, then `op.frames()` throws `fastio::poisoned` (caught as that
/// type), and the source stays the root cause.
#[test]
fn a_cpp_sink_gets_fastio_poisoned_and_the_failing_source_is_the_root_cause() {
    let source = super::compile("failing_source");
    let arr = "type: array, element-type: uint32, shape: [-1, 64]";
    let mut seed = 0x32c_u64;
    for check in CHECKS {
        let sink = compile_cpp(&test_source("poisoned_sink"), check);
        for _ in 0..2 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let k = 3 + seed % 200;
            let yaml = format!(
                "api-version: 0.5.0
name: cpp-poisoned
operators:
- name: src
  container: {{image: c, command: [{}], variables: {{FAIL_AT: '{k}'}}}}
  output: [{{name: v, {arr}}}]
- name: sink
  container: {{image: cpp, command: {}}}
  input: [{{from: src, name: v, {arr}}}]
streaming:
  frames: 100000
  max-shape:
    src/v: [4, 64]
",
                source.display(),
                cpp_command(&sink, check)
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
                "{check:?}, k = {k}: {lines:#?}"
            );
            // Caught as fastio::poisoned (FASTIO_ERR_POISONED is 6), after
            // the frames before the failure: every one of them, or fewer
            // by at most the stream's depth (4) when the failing run
            // stopped the sink before it drained the ring.
            let seen: Vec<u64> = lines
                .iter()
                .filter_map(|l| l.strip_prefix("[sink] c++ sink: fastio::poisoned after "))
                .filter_map(|l| l.split_once(" frames (status 6): "))
                .filter_map(|(n, _)| n.parse().ok())
                .collect();
            assert!(
                matches!(seen[..], [n] if n <= k && n + 4 >= k),
                "{check:?}, k = {k}: {lines:#?}"
            );
        }
    }
}

/// Every exception type from a real bad call (`tests/cpp/errors.cpp`):
/// without a pipeline in a 16 MiB tmpfs on `/dev/shm` (no space, poisoned,
/// timeout, wrong element type, null and moved-from handles), and as an
/// operator (an input asked for the wrong type or for writing, an output
/// not allocated yet); the output it then writes reaches a Rust operator.
#[test]
fn every_cpp_exception_type_from_a_real_bad_call() {
    let testop = example_bin("fio-testop").display().to_string();
    for check in CHECKS {
        let exe = compile_cpp(&test_source("errors"), check);
        let prefix = match check {
            Check::Valgrind if valgrind_present() => VALGRIND.join(" ") + " ",
            _ => String::new(),
        };
        let script = format!(
            "mount -t tmpfs -o size=16m tmpfs /dev/shm || exit 97\n{prefix}{}; echo rc=$?\nls -A /dev/shm",
            exe.display()
        );
        let out = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c", &script])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        if stdout.contains("rc=") {
            assert_eq!(
                stdout,
                "c++ errors: contexts and streams ok\nrc=0\n",
                "{check:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        } else {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must be able to make a mount namespace: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }

        let yaml = format!(
            "api-version: 0.5.0
name: cpp-errors
operators:
- name: make
  container: {{image: rust, command: [{testop}, fill, v, '1.5']}}
  output: [{{name: v, type: array, element-type: int32, shape: [2, 4]}}]
- name: cpp-errors
  container: {{image: cpp, command: {}}}
  input: [{{from: make, name: v, type: array, element-type: int32, shape: [2, 4]}}]
  output: [{{name: o, type: array, element-type: float32, shape: [-1]}}]
- name: total
  container: {{image: rust, command: [{testop}, sum, s, o]}}
  input: [{{from: cpp-errors, name: o, type: array, element-type: float32, shape: [-1]}}]
  output: [{{name: s, type: float64}}]
",
            cpp_command(&exe, check)
        );
        let (report, lines) = run(&yaml);
        assert!(report.succeeded(), "{check:?}: {report:?}\n{lines:#?}");
        for line in ["[cpp-errors] c++ errors: entries ok", "[total] sum 4.5"] {
            assert!(
                lines.contains(&line.to_owned()),
                "{check:?}: {line}: {lines:#?}"
            );
        }
    }
}
