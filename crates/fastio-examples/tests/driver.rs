//! The local driver with real operator processes (the `fio-testop` and
//! demo binaries of this crate): chains, fan-out, diamonds, dynamic
//! shapes, a 50-operator chain, failures, timeouts, an operator killed
//! while writing, SIGINT to the driver, two pipelines at once, and the
//! volume demo itself.

use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fastio_pipeline::{Definition, Failure, LocalDriver, Outcome, Progress, RunOptions, RunReport};

const TESTOP: &str = env!("CARGO_BIN_EXE_fio-testop");

fn op(name: &str, args: &str, inputs: &str, outputs: &str) -> String {
    format!(
        "- name: {name}\n  container: {{image: local, command: [{TESTOP}, {args}]}}\n  input: [{inputs}]\n  output: [{outputs}]\n"
    )
}

fn pipeline(ops: &[String]) -> String {
    format!(
        "api-version: 0.5.0\nname: test\noperators:\n{}",
        ops.concat()
    )
}

fn f32_array(shape: &str) -> String {
    format!("type: array, element-type: float32, shape: [{shape}]")
}

/// Runs `yaml`, returning the report and every output line.
fn run(yaml: &str, opts: RunOptions) -> (RunReport, Vec<String>) {
    let def = Definition::parse("test.yaml", yaml, &[]).unwrap_or_else(|e| {
        panic!(
            "invalid test pipeline: {}",
            e.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        )
    });
    let lines = Arc::new(Mutex::new(Vec::new()));
    let l = lines.clone();
    let report = LocalDriver::new(def.pipeline, opts)
        .run(move |p| {
            if let Progress::Line { operator, text, .. } = p {
                l.lock().unwrap().push(format!("[{operator}] {text}"));
            }
        })
        .unwrap();
    let lines = lines.lock().unwrap().clone();
    (report, lines)
}

fn fastio_segments() -> usize {
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("fastio-"))
        .count()
}

#[test]
fn chain_with_static_dynamic_scalar_and_string_entries() {
    let before = fastio_segments();
    let yaml = pipeline(&[
        op(
            "a",
            "fill, v, '1.5'",
            "",
            &format!("{{name: v, {}}}", f32_array("2, 3")),
        ),
        op(
            "b",
            "add, v, w, '1'",
            &format!("{{from: a, name: v, {}}}", f32_array("2, 3")),
            &format!("{{name: w, {}}}", f32_array("-1, 0")),
        ),
        op(
            "c",
            "sum, total, w",
            &format!("{{from: b, name: w, {}}}", f32_array("-1, 0")),
            "{name: total, type: f64}",
        ),
        op("d", "string, note, hello", "", "{name: note, type: string}"),
    ]);
    let (report, lines) = run(&yaml, RunOptions::default());
    assert!(report.succeeded(), "{report:?}");
    assert!(lines.contains(&"[c] sum 15".to_owned()), "{lines:?}");
    assert_eq!(report.results, [("d/note".to_owned(), "hello".to_owned())]);
    let a = &report.operators[0];
    assert_eq!(a.outcome, Outcome::Succeeded);
    assert_eq!(a.bytes_shared, 24);
    assert!(a.peak_rss_kib > 0 && a.wall > Duration::ZERO);
    assert_eq!(
        fastio_segments(),
        before,
        "anonymous context: nothing in /dev/shm"
    );
}

#[test]
fn fan_out_and_diamond() {
    let v = f32_array("4");
    let yaml = pipeline(&[
        op("src", "fill, v, '2'", "", &format!("{{name: v, {v}}}")),
        op(
            "left",
            "add, v, w, '1'",
            &format!("{{from: src, name: v, {v}}}"),
            &format!("{{name: w, {v}}}"),
        ),
        op(
            "right",
            "add, v, w, '10'",
            &format!("{{from: src, name: v, {v}}}"),
            &format!("{{name: w, {v}}}"),
        ),
        op(
            "join",
            "sum, s, left/w, right/w",
            &format!("{{from: left, name: w, {v}}}, {{from: right, name: w, {v}}}"),
            "{name: s, type: float64}",
        ),
    ]);
    let def = Definition::parse("d.yaml", &yaml, &[]).unwrap();
    assert_eq!(def.pipeline.schedule, [vec![0], vec![1, 2], vec![3]]);
    assert_eq!(def.pipeline.plan.entries[0].consumers, [1, 2]);
    let (report, lines) = run(&yaml, RunOptions::default());
    assert!(report.succeeded(), "{report:?} {lines:?}");
    // 4 * (2 + 1) + 4 * (2 + 10)
    assert!(lines.contains(&"[join] sum 60".to_owned()), "{lines:?}");
}

#[test]
fn a_fifty_operator_chain() {
    let v = f32_array("16");
    let mut ops = vec![op("op0", "fill, v, '0'", "", &format!("{{name: v, {v}}}"))];
    for i in 1..50 {
        ops.push(op(
            &format!("op{i}"),
            "add, v, v, '1'",
            &format!("{{from: op{}, name: v, {v}}}", i - 1),
            &format!("{{name: v, {v}}}"),
        ));
    }
    ops.push(op(
        "last",
        "sum, s, v",
        &format!("{{from: op49, name: v, {v}}}"),
        "{name: s, type: float64}",
    ));
    let (report, lines) = run(&pipeline(&ops), RunOptions::default());
    assert!(report.succeeded(), "{report:?}");
    assert!(
        lines.contains(&format!("[last] sum {}", 16 * 49)),
        "{lines:?}"
    );
    assert_eq!(report.operators.len(), 51);
}

#[test]
fn a_failing_operator_stops_its_dependents() {
    let v = f32_array("4");
    let yaml = pipeline(&[
        op("bad", "fail, '7'", "", &format!("{{name: v, {v}}}")),
        op(
            "after",
            "read, v",
            &format!("{{from: bad, name: v, {v}}}"),
            "",
        ),
    ]);
    let (report, _) = run(&yaml, RunOptions::default());
    assert!(!report.succeeded());
    assert_eq!(report.operators[0].outcome, Outcome::Failed(7));
    assert_eq!(report.operators[1].outcome, Outcome::NotRun);
    assert_eq!(
        report.failure,
        Some(Failure::Exited {
            operator: "bad".into(),
            host: None,
            code: 7,
            frame: None
        })
    );
    assert_eq!(
        report.failure.unwrap().to_string(),
        "operator bad exited with status 7"
    );
    assert_eq!(report.operators[0].stderr_tail, ["failing on purpose"]);
}

#[test]
fn a_timeout_stops_the_operator_and_the_others() {
    let yaml = pipeline(&[
        op("slow", "sleep, '30'", "", ""),
        op("other", "sleep, '30'", "", ""),
    ]);
    let t0 = Instant::now();
    let opts = RunOptions {
        timeout: Some(Duration::from_millis(300)),
        grace: Duration::from_secs(2),
        ..RunOptions::default()
    };
    let (report, _) = run(&yaml, opts);
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert_eq!(report.operators[0].outcome, Outcome::TimedOut);
    // Both ran past the timeout at the same moment: either is the cause.
    assert!(
        matches!(
            &report.failure,
            Some(Failure::TimedOut { operator, host: None }) if operator == "slow" || operator == "other"
        ),
        "{:?}",
        report.failure
    );
}

#[test]
fn an_operator_killed_while_writing_stops_the_pipeline() {
    let v = f32_array("1024");
    let yaml = pipeline(&[
        op("writer", "die-writing, v", "", &format!("{{name: v, {v}}}")),
        op(
            "reader",
            "read, v",
            &format!("{{from: writer, name: v, {v}}}"),
            "",
        ),
    ]);
    let (report, lines) = run(&yaml, RunOptions::default());
    assert!(lines.contains(&"[writer] wrote half; dying".to_owned()));
    assert_eq!(report.operators[0].outcome, Outcome::Signaled(9));
    assert_eq!(report.operators[1].outcome, Outcome::NotRun);
    assert_eq!(
        report.failure,
        Some(Failure::Signaled {
            operator: "writer".into(),
            host: None,
            signal: 9,
            frame: None
        })
    );
}

#[test]
fn two_pipelines_at_once() {
    let v = f32_array("8");
    let yaml = pipeline(&[
        op("a", "fill, v, '1'", "", &format!("{{name: v, {v}}}")),
        op(
            "b",
            "sum, s, v",
            &format!("{{from: a, name: v, {v}}}"),
            "{name: s, type: float64}",
        ),
    ]);
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let y = yaml.clone();
            std::thread::spawn(move || run(&y, RunOptions::default()))
        })
        .collect();
    for h in handles {
        let (report, lines) = h.join().unwrap();
        assert!(report.succeeded());
        assert!(lines.contains(&"[b] sum 8".to_owned()));
    }
}

/// Child side of the SIGINT test: runs a pipeline of sleepers.
#[test]
fn sigint_child() {
    if std::env::var("FASTIO_SIGINT_CHILD").is_err() {
        return;
    }
    let yaml = pipeline(&[
        op("s1", "sleep, '60'", "", ""),
        op("s2", "sleep, '60'", "", ""),
    ]);
    let def = Definition::parse("s.yaml", &yaml, &[]).unwrap();
    let report = LocalDriver::new(def.pipeline, RunOptions::default())
        .run(|p| {
            if let Progress::Line { text, .. } = p {
                println!("{text}");
            }
        })
        .unwrap();
    assert!(report.interrupted);
    std::process::exit(130);
}

#[test]
fn sigint_to_the_driver_stops_every_operator() {
    use std::io::{BufRead, BufReader};
    let before = fastio_segments();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "sigint_child",
            "--nocapture",
            "--test-threads=1",
            "-q",
        ])
        .env("FASTIO_SIGINT_CHILD", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut pids = Vec::new();
    let mut line = String::new();
    while pids.len() < 2 {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "child ended early");
        if let Some(p) = line.trim().strip_prefix("sleeping pid=") {
            pids.push(p.to_owned());
        }
    }
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "driver did not stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(130));
    for pid in pids {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let running = stat
            .rsplit(')')
            .next()
            .is_some_and(|r| !r.trim_start().starts_with('Z'));
        assert!(
            stat.is_empty() || !running,
            "operator {pid} still runs: {stat}"
        );
    }
    assert_eq!(fastio_segments(), before);
}

#[test]
fn the_volume_demo_runs_and_writes_its_png_and_statistics() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/pipelines/volume");
    let text = std::fs::read_to_string(dir.join("pipeline.yaml")).unwrap();
    // The definition starts each operator with `cargo run`; here the
    // binaries this test was built with run directly.
    let mut yaml = String::new();
    for line in text.lines() {
        match line.find("command: [cargo, run") {
            Some(k) => {
                let bin = line.rsplit(", ").next().unwrap().trim_end_matches(']');
                let exe = match bin {
                    "generate" => env!("CARGO_BIN_EXE_generate"),
                    "crop" => env!("CARGO_BIN_EXE_crop"),
                    "infer" => env!("CARGO_BIN_EXE_infer"),
                    "render" => env!("CARGO_BIN_EXE_render"),
                    "stats" => env!("CARGO_BIN_EXE_stats"),
                    other => panic!("unknown operator binary {other}"),
                };
                yaml.push_str(&format!("{}command: [{exe}]\n", &line[..k]));
            }
            None => {
                yaml.push_str(line);
                yaml.push('\n');
            }
        }
    }
    let out = std::env::temp_dir().join(format!("fastio-demo-test-{}", std::process::id()));
    let work = std::env::temp_dir().join(format!("fastio-demo-work-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    let opts = RunOptions {
        output: Some(out.clone()),
        base_dir: work.clone(),
        ..RunOptions::default()
    };
    let (report, lines) = run(&yaml, opts);
    assert!(report.succeeded(), "{report:?} {lines:?}");
    let png = std::fs::read(out.join("render/image/mip.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let (entry, json) = &report.results[0];
    assert_eq!(entry, "stats/summary");
    assert!(json.contains("\"voxels\": 262144"), "{json}");
    assert!(
        work.join("weights.params").exists(),
        "infer wrote its weights"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("[crop] cropped [3, 224, 255, 127] to [3, "))
    );
    let _ = std::fs::remove_dir_all(out);
    let _ = std::fs::remove_dir_all(work);
}

#[test]
fn the_seed_001_pipeline_runs_with_small_operators() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fastio-pipeline/tests/data/seed001_pair.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    // The seed's operators get commands: the producer allocates its
    // dynamic output [3, 2, 2, 2] of 1.0, the consumer reads it.
    let yaml = text
        .replace(
            "    image: my-docker-image-out\n    tag: my-tag\n",
            &format!(
                "    image: my-docker-image-out\n    tag: my-tag\n    command: [{TESTOP}, fill, dicom-data-in-shared-memory, '1']\n    variables: {{FILL_SHAPE: '3,2,2,2'}}\n"
            ),
        )
        .replace(
            "    image: my-docker-image-in\n    tag: my-tag\n",
            &format!(
                "    image: my-docker-image-in\n    tag: my-tag\n    command: [{TESTOP}, read, dicom-data-in-shared-memory]\n"
            ),
        );
    let input = std::env::temp_dir().join(format!("fastio-seed-input-{}", std::process::id()));
    std::fs::create_dir_all(&input).unwrap();
    let opts = RunOptions {
        input: Some(input.clone()),
        ..RunOptions::default()
    };
    let (report, lines) = run(&yaml, opts);
    assert!(report.succeeded(), "{report:?} {lines:?}");
    assert!(
        lines.contains(&"[operator-dynamic-in] read sum 24".to_owned()),
        "{lines:?}"
    );
    let _ = std::fs::remove_dir_all(input);
}
