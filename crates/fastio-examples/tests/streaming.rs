//! Streaming pipelines through the local driver with real operator
//! processes (`fio-streamop`, which checks every word of every frame):
//! a 10,000-frame chain, fan-out at three speeds, a diamond whose join
//! aligns two inputs, end of stream through all of them, and stages
//! SIGKILLed mid-frame with and without `restart: on-failure`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fastio_pipeline::{Definition, Failure, LocalDriver, Outcome, Progress, RunOptions, RunReport};

const OP: &str = env!("CARGO_BIN_EXE_fio-streamop");

fn array() -> &'static str {
    "type: array, element-type: uint32, shape: [-1, 64]"
}

/// An operator: `role args`, inputs `from/name`, one output, variables.
fn op(name: &str, role: &str, inputs: &[&str], output: Option<&str>, vars: &str) -> String {
    let ins: Vec<String> = inputs
        .iter()
        .map(|i| {
            let (from, n) = i.split_once('/').unwrap();
            format!("{{from: {from}, name: {n}, {}}}", array())
        })
        .collect();
    let mut args: Vec<String> = vec![role.to_owned()];
    args.extend(
        inputs
            .iter()
            .map(|i| i.split_once('/').unwrap().1.to_owned()),
    );
    args.extend(output.map(str::to_owned));
    format!(
        "- name: {name}\n  container: {{image: local, command: [{OP}, {}], variables: {{{vars}}}}}\n  input: [{}]\n  output: [{}]\n",
        args.join(", "),
        ins.join(", "),
        output.map_or(String::new(), |o| format!("{{name: {o}, {}}}", array())),
    )
}

fn pipeline(ops: &[String], streaming: &str) -> String {
    format!(
        "api-version: 0.5.0\nname: streams\noperators:\n{}streaming:\n{streaming}",
        ops.concat()
    )
}

/// `max-shape` lines for these outputs.
fn max_shapes(outputs: &[&str]) -> String {
    let mut s = "  max-shape:\n".to_owned();
    for o in outputs {
        s.push_str(&format!("    {o}: [8, 64]\n"));
    }
    s
}

fn run(yaml: &str) -> (RunReport, Vec<String>) {
    let def = Definition::parse("s.yaml", yaml, &[]).unwrap_or_else(|e| {
        panic!(
            "invalid test pipeline:\n{yaml}\n{}",
            e.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        )
    });
    let lines = Arc::new(Mutex::new(Vec::new()));
    let l = lines.clone();
    let opts = RunOptions {
        timeout: Some(Duration::from_secs(120)),
        grace: Duration::from_secs(2),
        ..RunOptions::default()
    };
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

fn frames_of(r: &RunReport, name: &str) -> fastio::OperatorStats {
    r.operators
        .iter()
        .find(|o| o.name == name)
        .and_then(|o| o.frames.clone())
        .unwrap_or_else(|| panic!("no statistics for {name}: {r:?}"))
}

#[test]
fn a_chain_of_10000_frames_arrives_whole_and_in_order() {
    let yaml = pipeline(
        &[
            op("src", "source", &[], Some("v"), ""),
            op("mid", "stage", &["src/v"], Some("w"), ""),
            op("sink", "sink", &["mid/w"], None, "EXPECT_FRAMES: 10000"),
        ],
        &format!(
            "  depth: 4\n  frames: 10000\n{}",
            max_shapes(&["src/v", "mid/w"])
        ),
    );
    let (r, lines) = run(&yaml);
    assert!(r.succeeded(), "{r:?}\n{lines:#?}");
    assert!(
        lines.contains(&"[sink] sink: 10000 frames".to_owned()),
        "{lines:?}"
    );
    let (src, mid, sink) = (
        frames_of(&r, "src"),
        frames_of(&r, "mid"),
        frames_of(&r, "sink"),
    );
    assert_eq!(
        (src.frames_out[0], mid.frames_in[0], mid.frames_out[0]),
        (10000, 10000, 10000)
    );
    assert_eq!((sink.frames_in[0], sink.dropped[0]), (10000, 0));
    // Latency is measured from the source's timestamp: positive, ordered.
    assert!(sink.latency_ns[0][0] > 0 && sink.latency_ns[0][0] <= sink.latency_ns[0][1]);
}

#[test]
fn fan_out_to_three_sinks_at_different_speeds_loses_nothing_under_block() {
    let yaml = pipeline(
        &[
            op("src", "source", &[], Some("v"), ""),
            op("fast", "sink", &["src/v"], None, "EXPECT_FRAMES: 600"),
            op(
                "slow",
                "sink",
                &["src/v"],
                None,
                "EXPECT_FRAMES: 600, SLOW_US: 500",
            ),
            op(
                "slower",
                "sink",
                &["src/v"],
                None,
                "EXPECT_FRAMES: 600, SLOW_US: 2000",
            ),
        ],
        &format!("  depth: 2\n  frames: 600\n{}", max_shapes(&["src/v"])),
    );
    let t0 = Instant::now();
    let (r, lines) = run(&yaml);
    assert!(r.succeeded(), "{r:?}\n{lines:#?}");
    // The slowest sink set the pace: 600 frames at >= 2 ms.
    assert!(t0.elapsed() >= Duration::from_millis(1200));
    for s in ["fast", "slow", "slower"] {
        assert!(
            lines.contains(&format!("[{s}] sink: 600 frames")),
            "{lines:?}"
        );
    }
}

#[test]
fn a_diamond_joins_its_two_branches_frame_by_frame_and_ends_cleanly() {
    let yaml = pipeline(
        &[
            op("src", "source", &[], Some("v"), ""),
            op("left", "stage", &["src/v"], Some("a"), ""),
            op("right", "stage", &["src/v"], Some("b"), "SLOW_US: 100"),
            op("join", "stage", &["left/a", "right/b"], Some("j"), ""),
            op("sink", "sink", &["join/j"], None, "EXPECT_FRAMES: 2000"),
        ],
        &format!(
            "  depth: 3\n  frames: 2000\n{}",
            max_shapes(&["src/v", "left/a", "right/b", "join/j"])
        ),
    );
    let (r, lines) = run(&yaml);
    assert!(r.succeeded(), "{r:?}\n{lines:#?}");
    let join = frames_of(&r, "join");
    assert_eq!(join.frames_in, vec![2000, 2000]);
    assert_eq!(join.dropped, vec![0, 0]);
}

#[test]
fn drop_oldest_lets_a_slow_sink_fall_behind_without_stopping_the_source() {
    let yaml = pipeline(
        &[
            op("src", "source", &[], Some("v"), "PAUSE_US: 50"),
            op("slow", "sink", &["src/v"], None, "SLOW_US: 2000"),
        ],
        &format!(
            "  depth: 2\n  overflow: drop-oldest\n  frames: 2000\n{}",
            max_shapes(&["src/v"])
        ),
    );
    let (r, lines) = run(&yaml);
    assert!(r.succeeded(), "{r:?}\n{lines:#?}");
    let slow = frames_of(&r, "slow");
    assert!(slow.dropped[0] > 0, "{slow:?}");
    assert_eq!(frames_of(&r, "src").frames_out[0], 2000);
}

#[test]
fn a_stage_killed_mid_frame_fails_the_run_naming_it_and_the_frame() {
    let yaml = pipeline(
        &[
            op("src", "source", &[], Some("v"), ""),
            op("mid", "stage", &["src/v"], Some("w"), "DIE_AT: 321"),
            op("sink", "sink", &["mid/w"], None, ""),
        ],
        &format!("  frames: 100000\n{}", max_shapes(&["src/v", "mid/w"])),
    );
    let t0 = Instant::now();
    let (r, lines) = run(&yaml);
    assert!(!r.succeeded());
    assert_eq!(
        r.failure,
        Some(Failure::Signaled {
            operator: "mid".into(),
            host: None,
            signal: 9,
            frame: Some(321)
        }),
        "{lines:#?}"
    );
    // Nobody hung: the others saw the poison at once.
    assert!(t0.elapsed() < Duration::from_secs(30));
    let sink = r.operators.iter().find(|o| o.name == "sink").unwrap();
    assert_eq!(sink.outcome, Outcome::Stopped, "{r:?}");
    // The sink read every frame before the one that died, none after.
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("[sink]")
                && l.contains("stream mid/w is poisoned from frame 321")),
        "{lines:#?}"
    );
}

#[test]
fn a_restarted_stage_resumes_at_the_frame_it_held_and_nothing_is_lost() {
    let marker = std::env::temp_dir().join(format!("fio-die-once-{}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    let yaml = pipeline(
        &[
            op("src", "source", &[], Some("v"), ""),
            op(
                "mid",
                "stage",
                &["src/v"],
                Some("w"),
                &format!("DIE_AT: 77, DIE_ONCE: {}", marker.display()),
            ),
            op("sink", "sink", &["mid/w"], None, "EXPECT_FRAMES: 500"),
        ],
        &format!(
            "  frames: 500\n{}  restart:\n    mid: {{policy: on-failure, limit: 2}}\n",
            max_shapes(&["src/v", "mid/w"])
        ),
    );
    let (r, lines) = run(&yaml);
    let _ = std::fs::remove_file(&marker);
    assert!(r.succeeded(), "{r:?}\n{lines:#?}");
    let mid = r.operators.iter().find(|o| o.name == "mid").unwrap();
    assert_eq!(mid.restarts, 1);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("starting it again (1 of 2)")),
        "{lines:#?}"
    );
    assert!(
        lines.contains(&"[sink] sink: 500 frames".to_owned()),
        "{lines:#?}"
    );
}

#[test]
fn an_operator_that_errors_out_is_blamed_not_the_sink_that_saw_its_poison_first() {
    let yaml = pipeline(
        &[
            op("src", "source", &[], Some("v"), ""),
            op("mid", "stage", &["src/v"], Some("w"), "FAIL_AT: 40"),
            op("sink", "sink", &["mid/w"], None, ""),
        ],
        &format!("  frames: 100000\n{}", max_shapes(&["src/v", "mid/w"])),
    );
    let (r, lines) = run(&yaml);
    assert_eq!(
        r.failure,
        Some(Failure::Exited {
            operator: "mid".into(),
            host: None,
            code: 1,
            frame: Some(40)
        }),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("[sink]") && l.contains("mid/w is poisoned from frame 40")),
        "{lines:#?}"
    );
}

/// Processes whose environment holds `STORM_MARK=mark` and
/// `FASTIO_OPERATOR=op`.
fn pids_of(mark: &str, op: &str) -> Vec<i32> {
    let want = [
        format!("STORM_MARK={mark}"),
        format!("FASTIO_OPERATOR={op}"),
    ];
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                let vars: Vec<&[u8]> = env.split(|&b| b == 0).collect();
                want.iter().all(|w| vars.contains(&w.as_bytes()))
            })
        })
        .collect()
}

/// SIGKILLs of the source and the stage at random moments, with restarts:
/// the run succeeds, and the sink (which checks every word and the order)
/// sees every frame exactly once.
#[test]
fn a_kill_storm_through_the_driver_loses_and_repeats_nothing() {
    let mark = format!("{}", std::process::id());
    let vars = format!("STORM_MARK: '{mark}'");
    let yaml = pipeline(
        &[
            op(
                "src",
                "source",
                &[],
                Some("v"),
                &format!("{vars}, PAUSE_US: 400"),
            ),
            op("mid", "stage", &["src/v"], Some("w"), &vars),
            op(
                "sink",
                "sink",
                &["mid/w"],
                None,
                &format!("{vars}, EXPECT_FRAMES: 3000"),
            ),
        ],
        &format!(
            "  depth: 3\n  frames: 3000\n{}  restart:\n    src: {{policy: on-failure, limit: 40}}\n    mid: {{policy: on-failure, limit: 40}}\n",
            max_shapes(&["src/v", "mid/w"])
        ),
    );
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let killer = {
        let done = done.clone();
        let mark = mark.clone();
        std::thread::spawn(move || {
            let mut rng = 0x9e37_79b9_7f4a_7c15u64;
            let mut next = move || {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng
            };
            let mut kills = 0;
            let t0 = Instant::now();
            while kills < 12 && t0.elapsed() < Duration::from_secs(60) {
                if done.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(40 + next() % 80));
                let who = if next() % 2 == 0 { "src" } else { "mid" };
                if let Some(&pid) = pids_of(&mark, who).first() {
                    let _ = std::process::Command::new("kill")
                        .args(["-9", &pid.to_string()])
                        .status();
                    kills += 1;
                }
            }
            kills
        })
    };
    let (r, lines) = run(&yaml);
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let kills = killer.join().unwrap();
    assert!(r.succeeded(), "{:?}\n{lines:#?}", r.failure);
    assert!(kills >= 3, "only {kills} kills landed");
    let restarts: u32 = r.operators.iter().map(|o| o.restarts).sum();
    assert!(restarts >= 3, "{restarts} restarts for {kills} kills");
    assert!(
        lines.contains(&"[sink] sink: 3000 frames".to_owned()),
        "{lines:#?}"
    );
    // Issue 28: the counts of a restarted operator cover every process of
    // it (up to each one's last frame), not only its last process's.
    let (src, mid, sink) = (
        frames_of(&r, "src"),
        frames_of(&r, "mid"),
        frames_of(&r, "sink"),
    );
    assert_eq!(
        (
            src.frames_out[0],
            mid.frames_in[0],
            mid.frames_out[0],
            sink.frames_in[0]
        ),
        (3000, 3000, 3000, 3000),
        "{restarts} restarts: {src:?}\n{mid:?}"
    );
    assert_eq!((src.steps, mid.steps, sink.steps), (3000, 3000, 3000));
}

/// The chain bench's Rust operator (`fio-chainop`, what `cargo xtask bench
/// chain` runs against dora-rs) passes every frame whole and in order,
/// and its sink writes what the bench reads.
#[test]
fn chain_bench_operators_deliver_every_frame_whole_and_in_order() {
    let chainop = env!("CARGO_BIN_EXE_fio-chainop");
    let dir = std::env::temp_dir().join(format!("chain-op-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let result = dir.join("result.txt");
    let port = "{name: frame, type: array, element-type: uint8, shape: [65536]}";
    let input = "{from: FROM, name: frame, type: array, element-type: uint8, shape: [65536]}";
    let yaml = format!(
        "api-version: 0.5.0\nname: chain\noperators:\n\
         - name: source\n  container: {{image: local, command: [{chainop}, source]}}\n  output: [{port}]\n\
         - name: stage\n  container: {{image: local, command: [{chainop}, stage]}}\n  input: [{}]\n  output: [{port}]\n\
         - name: sink\n  container: {{image: local, command: [{chainop}, sink], variables: {{RESULT: {:?}}}}}\n  input: [{}]\n\
         streaming:\n  depth: 2\n  frames: 300\n",
        input.replace("FROM", "source"),
        result.display().to_string(),
        input.replace("FROM", "stage"),
    );
    let (report, lines) = run(&yaml);
    assert!(report.failure.is_none(), "{report:?}\n{lines:?}");
    let text = std::fs::read_to_string(&result).unwrap();
    let field = |k: &str| -> Vec<u64> {
        let line = text.lines().find(|l| l.starts_with(k)).unwrap();
        line.split_whitespace()
            .skip(1)
            .map(|w| w.parse().unwrap())
            .collect()
    };
    assert_eq!(field("count "), [300]);
    assert_eq!(field("disorder "), [0]);
    assert_eq!(field("torn "), [0]);
    let lat = field("lat_ns");
    assert_eq!(lat.len(), 300);
    assert!(lat.iter().all(|&l| l < 60_000_000_000), "{lat:?}");
    assert!(field("last_ns")[0] >= field("first_ns")[0]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A stage killed after its output of frame 60 was published but while it
/// still held input frame 60: its restart takes input 60 again, must not
/// deliver it twice, and goes on at 61 (the sink exits 4 on a repeated
/// frame and 5 on a missing one).
#[test]
fn a_stage_restarted_after_publishing_does_not_deliver_that_frame_twice() {
    let marker = std::env::temp_dir().join(format!("fio-die-published-{}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    let yaml = pipeline(
        &[
            op("src", "source", &[], Some("v"), ""),
            op(
                "mid",
                "stage",
                &["src/v"],
                Some("w"),
                &format!("DIE_AFTER_PUBLISH: 60, DIE_ONCE: {}", marker.display()),
            ),
            op("sink", "sink", &["mid/w"], None, "EXPECT_FRAMES: 200"),
        ],
        &format!(
            "  frames: 200\n{}  restart:\n    mid: {{policy: on-failure, limit: 1}}\n",
            max_shapes(&["src/v", "mid/w"])
        ),
    );
    let (r, lines) = run(&yaml);
    let died = marker.exists();
    let _ = std::fs::remove_file(&marker);
    assert!(died, "the stage never reached frame 60: {lines:#?}");
    assert!(r.succeeded(), "{r:?}\n{lines:#?}");
    let mid = r.operators.iter().find(|o| o.name == "mid").unwrap();
    assert_eq!(mid.restarts, 1, "{lines:#?}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("dying after publishing frame 60")),
        "{lines:#?}"
    );
    assert!(
        lines.contains(&"[sink] sink: 200 frames".to_owned()),
        "{lines:#?}"
    );
    assert!(
        lines.contains(&"[mid] stage: 139 frames".to_owned()),
        "the restarted stage should handle frames 61..199: {lines:#?}"
    );
}

/// Two producers' outputs both called `out`, one sink reading both: by
/// entry name it gets each producer's frames (checked by their stage
/// count); by the shared local name it gets an error naming both entries,
/// never the first producer's frames.
fn two_outs(sink_args: &str) -> String {
    let a = array();
    format!(
        "api-version: 0.5.0\nname: two-outs\noperators:\n\
- name: m1\n  container: {{image: local, command: [{OP}, source, out]}}\n  output: [{{name: out, {a}}}]\n\
- name: m2\n  container: {{image: local, command: [{OP}, stage, out, out]}}\n  input: [{{from: m1, name: out, {a}}}]\n  output: [{{name: out, {a}}}]\n\
- name: sink\n  container: {{image: local, command: [{OP}, sink, {sink_args}], variables: {{EXPECT_STAGES: '1,0', EXPECT_FRAMES: 50}}}}\n  input: [{{from: m1, name: out, {a}}}, {{from: m2, name: out, {a}}}]\n\
streaming:\n  depth: 4\n  frames: 50\n{}",
        max_shapes(&["m1/out", "m2/out"])
    )
}

#[test]
fn a_name_shared_by_two_inputs_is_an_error_naming_both_and_entry_names_pick_each() {
    // m2's frames went through one stage, m1's through none.
    let (r, lines) = run(&two_outs("m2/out, M1/Out"));
    assert!(r.succeeded(), "{r:?}\n{lines:#?}");
    assert!(
        lines.contains(&"[sink] sink: 50 frames".to_owned()),
        "{lines:?}"
    );

    let (r, lines) = run(&two_outs("out"));
    assert!(!r.succeeded(), "{r:?}");
    let sink = r.operators.iter().find(|o| o.name == "sink").unwrap();
    assert!(matches!(sink.outcome, Outcome::Failed(1)), "{sink:?}");
    let err = lines
        .iter()
        .find(|l| l.starts_with("[sink] error:"))
        .unwrap_or_else(|| panic!("no error from the sink: {lines:#?}"));
    assert!(
        err.contains("\"out\"") && err.contains("\"m1/out\"") && err.contains("\"m2/out\""),
        "{err}"
    );
}

/// Issue 29: a source that fails at a random frame is the root cause in
/// every run, never a stage or sink that saw its poison first, whatever
/// they printed and wherever (here the consumers print their errors on
/// stdout): the driver reads how each loop ended from the context.
#[test]
fn a_failing_source_is_the_root_cause_in_every_run_not_the_consumers_that_saw_its_poison() {
    let mut seed = 0x2901_u64;
    for _ in 0..6 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let k = 5 + seed % 400;
        let quiet = "ERRORS_ON_STDOUT: '1'";
        let yaml = pipeline(
            &[
                op(
                    "src",
                    "source",
                    &[],
                    Some("v"),
                    &format!("FAIL_AT: {k}, {quiet}"),
                ),
                op("mid", "stage", &["src/v"], Some("w"), quiet),
                op("sink", "sink", &["mid/w", "src/v"], None, quiet),
            ],
            &format!("  frames: 100000\n{}", max_shapes(&["src/v", "mid/w"])),
        );
        let (r, lines) = run(&yaml);
        assert_eq!(
            r.failure,
            Some(Failure::Exited {
                operator: "src".into(),
                host: None,
                code: 1,
                frame: Some(k)
            }),
            "k = {k}: {lines:#?}"
        );
        for name in ["mid", "sink"] {
            let o = r.operators.iter().find(|o| o.name == name).unwrap();
            assert_eq!(o.outcome, Outcome::Stopped, "k = {k}: {o:?}");
        }
    }
}
