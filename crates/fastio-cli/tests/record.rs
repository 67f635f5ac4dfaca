//! Issue 33: recording a run to MCAP (`fastio run --record`,
//! `streaming.record`), `fastio record --info`, and `fastio replay` as a
//! pipeline's source; hostile recordings give one clean error line.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use fastio_record::{ChannelKind, Recording};

fn tmpdir(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("record")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn fastio(dir: &Path, args: &[&str]) -> Output {
    Command::new(common::fastio())
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Word `i` of source frame `seq` (fio-streamop's rule), `stages` on.
fn value(seq: u64, i: usize, stages: u32) -> u32 {
    (seq as u32)
        .wrapping_mul(2_654_435_761)
        .wrapping_add(i as u32)
        .wrapping_add(stages)
}

const ARR: &str = "type: array, element-type: uint32, shape: [-1, 64]";

/// Every frame of `topic`: frame numbers 0.., rows `1 + seq % 16` (the
/// source's shapes), every word as fio-streamop writes it `stages` on.
fn check_recorded(path: &Path, topic: &str, frames: u64, stages: u32) {
    let rec = Recording::open(path).unwrap();
    let mut n = 0u64;
    for f in rec.frames(topic).unwrap() {
        let f = f.unwrap();
        let seq = f.header.frame;
        assert_eq!(seq, n, "{topic}: frames in order, none twice");
        assert_eq!(f.header.source_frame, seq);
        assert_eq!(
            f.header.shape,
            vec![1 + seq % 16, 64],
            "{topic} frame {seq}"
        );
        for (i, w) in f.bytes.chunks_exact(4).enumerate() {
            let got = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
            let want = if i == 0 {
                stages
            } else {
                value(seq, i, stages)
            };
            assert_eq!(got, want, "{topic} frame {seq} word {i}");
        }
        n += 1;
    }
    assert_eq!(n, frames, "{topic}");
}

/// A streaming run of 2,000 frames of varying shape, recorded (by
/// `streaming.record`) while its stage is SIGKILLed once and restarted:
/// every frame of both streams is in the file, in order, bit-exact; `fastio
/// record --info` lists them; each stream replayed by `fastio replay` into
/// a sink that checks every word, shape and order gives the same frames.
#[test]
fn a_run_recorded_while_a_stage_is_killed_replays_every_frame_bit_exact() {
    let dir = tmpdir("killed-stage");
    let op = common::example("fio-streamop").display().to_string();
    let once = dir.join("died-once");
    let yaml = format!(
        "api-version: 0.5.0
name: recorded
operators:
- name: src
  container: {{image: rust, command: [{op}, source, v]}}
  output: [{{name: v, {ARR}}}]
- name: stage
  container: {{image: rust, command: [{op}, stage, v, w], variables: {{DIE_AT: '777', DIE_ONCE: '{}'}}}}
  input: [{{from: src, name: v, {ARR}}}]
  output: [{{name: w, {ARR}}}]
- name: sink
  container: {{image: rust, command: [{op}, sink, w], variables: {{EXPECT_FRAMES: 2000}}}}
  input: [{{from: stage, name: w, {ARR}}}]
streaming:
  frames: 2000
  record: run.mcap
  max-shape:
    src/v: [16, 64]
    stage/w: [16, 64]
  restart:
    stage: {{policy: on-failure, limit: 1}}
",
        once.display()
    );
    common::write(&dir, "p.yaml", &yaml);
    let o = fastio(&dir, &["run", "p.yaml"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(once.exists(), "the stage never died: {}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("recorded: ") && stdout.contains("src/v 2000 frames, stage/w 2000 frames"),
        "{}",
        text(&o)
    );
    let file = dir.join("run.mcap");
    check_recorded(&file, "src/v", 2000, 0);
    check_recorded(&file, "stage/w", 2000, 1);
    let info = Recording::open(&file).unwrap().info().unwrap();
    assert!(info.complete);
    assert_eq!(
        info.counts.get("stage/w.skipped").map(String::as_str),
        Some("0")
    );
    assert!(info.channels.iter().all(|c| c.kind == ChannelKind::Stream));

    let o = fastio(&dir, &["record", "--info", "run.mcap"]);
    assert!(o.status.success(), "{}", text(&o));
    let listed = String::from_utf8_lossy(&o.stdout);
    assert!(
        listed.contains("4000 messages in 2 channels, closed well"),
        "{listed}"
    );
    assert!(
        listed.lines().any(|l| l.contains("stage/w")
            && l.contains("uint32 at most [16, 64]")
            && l.contains("2000 messages")),
        "{listed}"
    );

    // Each stream replayed into a sink that checks every frame (word 0
    // says how many stages the recorded frames went through).
    for (stream, stages) in [("src/v", 0), ("stage/w", 1)] {
        let fastio_bin = common::fastio();
        let yaml = format!(
            "api-version: 0.5.0
name: replayed
operators:
- name: replay
  container: {{image: rust, command: [{fastio_bin}, replay, run.mcap, --stream, {stream}, --pace, fast]}}
  output: [{{name: v, {ARR}}}]
- name: sink
  container: {{image: rust, command: [{op}, sink, v], variables: {{EXPECT_FRAMES: 2000, EXPECT_STAGES: '{stages}'}}}}
  input: [{{from: replay, name: v, {ARR}}}]
streaming:
  frames: 100000
  record: replayed.mcap
  max-shape:
    replay/v: [16, 64]
"
        );
        common::write(&dir, "r.yaml", &yaml);
        let o = fastio(&dir, &["run", "r.yaml"]);
        assert!(o.status.success(), "{stream}: {}", text(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.contains(&format!(
                "[replay] replay: 2000 frames of {stream} from run.mcap"
            )),
            "{}",
            text(&o)
        );
        assert!(out.contains("[sink] sink: 2000 frames"), "{}", text(&o));
        // What flowed the second time is what flowed the first.
        check_recorded(&dir.join("replayed.mcap"), "replay/v", 2000, stages);
    }
}

/// A one-shot run's entries (`fastio run --record`): name, type, shape,
/// bytes and operator of every entry published.
#[test]
fn a_one_shot_run_records_every_entry_it_published() {
    let dir = tmpdir("one-shot");
    let testop = common::example("fio-testop").display().to_string();
    let yaml = format!(
        "api-version: 0.5.0
name: entries
operators:
- name: make
  container: {{image: rust, command: [{testop}, fill, v, '1.5']}}
  output: [{{name: v, type: array, element-type: float32, shape: [2, 4]}}]
- name: total
  container: {{image: rust, command: [{testop}, sum, s, v]}}
  input: [{{from: make, name: v, type: array, element-type: float32, shape: [2, 4]}}]
  output: [{{name: s, type: float64}}]
"
    );
    common::write(&dir, "p.yaml", &yaml);
    let o = fastio(&dir, &["run", "p.yaml", "--record", "entries.mcap"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("recorded: entries.mcap (2 entries)"),
        "{}",
        text(&o)
    );
    let entries = Recording::open(&dir.join("entries.mcap"))
        .unwrap()
        .entries()
        .unwrap();
    assert_eq!(entries.len(), 2);
    let v = &entries[0];
    assert_eq!(
        (
            v.header.entry.as_str(),
            v.header.operator.as_str(),
            v.header.element_type.as_str(),
            &v.header.shape
        ),
        ("make/v", "make", "float32", &vec![2, 4])
    );
    assert!(
        v.bytes
            .chunks_exact(4)
            .all(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]) == 1.5)
    );
    assert_eq!(v.bytes.len(), 32);
    let s = &entries[1];
    assert_eq!(
        (s.header.entry.as_str(), s.header.element_type.as_str()),
        ("total/s", "float64")
    );
    assert_eq!(f64::from_ne_bytes(s.bytes[..8].try_into().unwrap()), 12.0);
}

/// Truncated, bit-flipped and hostile recordings given to `fastio replay`
/// (in a pipeline) and to `fastio record --info`: one clean error line
/// naming the file, exit 1, never a panic; the info of a cut file reads up
/// to its last complete message.
#[test]
fn hostile_recordings_give_one_clean_error_line() {
    let dir = tmpdir("hostile");
    let good = record_good(&dir);

    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        ("cut", good[..good.len() * 2 / 3].to_vec()),
        ("empty", Vec::new()),
        ("junk", b"not an mcap file at all".to_vec()),
    ];
    // A message's header length made huge, and a frame's bytes cut short
    // inside an otherwise whole file: find the first message of src/v.
    let mut hostile = good.clone();
    let at = message_start(&hostile, b"\"frame\":0,");
    hostile[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    cases.push(("huge header", hostile));
    let mut flipped = good.clone();
    let at = find(&flipped, b"\"shape\":[1,64]").expect("a shape");
    flipped[at + 9] = b'9'; // [1,64] -> [9,64]: more bytes than the message has
    cases.push(("wrong shape", flipped));

    for (name, bytes) in cases {
        let file = dir.join(format!("{}.mcap", name.replace(' ', "-")));
        std::fs::write(&file, &bytes).unwrap();
        let o = replay_into_sink(&dir, &file, "uint32", 16);
        assert!(!o.status.success(), "{name}: {}", text(&o));
        let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let replay = &report["operators"][0];
        assert_eq!(replay["outcome"], "exit 1", "{name}: {}", text(&o));
        let stderr = String::from_utf8_lossy(&o.stderr);
        let said: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("[replay] fastio: "))
            .collect();
        assert_eq!(said.len(), 1, "{name}: one error line: {stderr}");
        assert!(
            said[0].contains(&file.display().to_string()),
            "{name}: {}",
            said[0]
        );
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");

        let o = fastio(&dir, &["record", "--info", &file.display().to_string()]);
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("panicked"), "{name}: {err}");
        if name == "cut" {
            assert!(o.status.success(), "{}", text(&o));
            assert!(
                out.contains("read up to its last complete message"),
                "{out}"
            );
        } else {
            // Not a recording (empty, junk), or a damaged one: an error,
            // not "a cut recording with 0 messages".
            assert!(!o.status.success(), "{name}: {}", text(&o));
            assert_eq!(err.lines().count(), 1, "{name}: {err}");
            assert!(err.starts_with("fastio: record --info: "), "{name}: {err}");
            if matches!(name, "empty" | "junk") {
                assert!(err.contains("not an MCAP"), "{name}: {err}");
                assert!(out.is_empty(), "{name}: {out}");
            }
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Where the message whose header holds `marker` starts (its `u32` header
/// length; the header opens with its checksum).
fn message_start(hay: &[u8], marker: &[u8]) -> usize {
    let at = find(hay, marker).expect("the marker");
    let open = b"{\"crc32\":\"";
    let header = hay[..at]
        .windows(open.len())
        .rposition(|w| w == open)
        .expect("the header's start");
    header - 4
}

/// The source pipeline of the checksum tests: 60 frames of `src/v`
/// (uint32, `[1 + seq % 16, 64]`), recorded to `good.mcap` in `dir`.
fn record_good(dir: &Path) -> Vec<u8> {
    let op = common::example("fio-streamop").display().to_string();
    let yaml = format!(
        "api-version: 0.5.0
name: source
operators:
- name: src
  container: {{image: rust, command: [{op}, source, v]}}
  output: [{{name: v, {ARR}}}]
- name: sink
  container: {{image: rust, command: [{op}, sink, v]}}
  input: [{{from: src, name: v, {ARR}}}]
streaming:
  frames: 60
  max-shape:
    src/v: [16, 64]
"
    );
    common::write(dir, "p.yaml", &yaml);
    let o = fastio(dir, &["run", "p.yaml", "--record", "good.mcap"]);
    assert!(o.status.success(), "{}", text(&o));
    std::fs::read(dir.join("good.mcap")).unwrap()
}

/// `fastio replay FILE` into a sink that checks every word, its output
/// declared `element` at most `[rows, 64]`; `--report json`'s output.
fn replay_into_sink(dir: &Path, file: &Path, element: &str, rows: u32) -> Output {
    let op = common::example("fio-streamop").display().to_string();
    let fastio_bin = common::fastio();
    let arr = format!("type: array, element-type: {element}, shape: [-1, 64]");
    let yaml = format!(
        "api-version: 0.5.0
name: replay-check
operators:
- name: replay
  container: {{image: rust, command: [{fastio_bin}, replay, {}, --pace, fast]}}
  output: [{{name: v, {arr}}}]
- name: sink
  container: {{image: rust, command: [{op}, sink, v]}}
  input: [{{from: replay, name: v, {arr}}}]
streaming:
  frames: 100000
  max-shape:
    replay/v: [{rows}, 64]
",
        file.display()
    );
    common::write(dir, "r.yaml", &yaml);
    fastio(dir, &["run", "r.yaml", "--report", "json"])
}

/// Operator `name`'s part of a run's `--report json`.
fn operator_report(o: &Output, name: &str) -> serde_json::Value {
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    report["operators"]
        .as_array()
        .unwrap()
        .iter()
        .find(|op| op["name"] == name)
        .unwrap()
        .clone()
}

/// What the replay published and the sink received, from the report
/// (`None` where an operator's loop published no statistics).
fn published_and_received(o: &Output) -> (Option<u64>, Option<u64>) {
    (
        operator_report(o, "replay")["frames"]["frames_out"][0].as_u64(),
        operator_report(o, "sink")["frames"]["frames_in"][0].as_u64(),
    )
}

/// Issue 50, item 1: a recording whose largest shape or element type does
/// not fit the replaying output fails before anything is published, with
/// one line naming both; the sink receives nothing (it would exit 4 on a
/// frame of stale or zero words).
#[test]
fn a_replay_that_does_not_fit_publishes_nothing() {
    let dir = tmpdir("does-not-fit");
    record_good(&dir);
    let file = dir.join("good.mcap");
    let f = file.display().to_string();
    for (element, rows, want) in [
        (
            "uint32",
            8,
            format!(
                "replay: {f}: stream src/v holds uint32 at most [16, 64], output replay/v holds \
                 uint32 at most [8, 64]"
            ),
        ),
        (
            "int32",
            16,
            format!(
                "replay: {f}: stream src/v holds uint32 at most [16, 64], output replay/v holds \
                 int32 at most [16, 64]"
            ),
        ),
    ] {
        let o = replay_into_sink(&dir, &file, element, rows);
        assert!(!o.status.success(), "{}", text(&o));
        let stderr = String::from_utf8_lossy(&o.stderr);
        let said: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("[replay] fastio: "))
            .collect();
        assert_eq!(said, [format!("[replay] fastio: {want}")], "{}", text(&o));
        assert!(!stderr.contains("[sink] frame"), "{}", text(&o));
        let (published, received) = published_and_received(&o);
        assert!(published.unwrap_or(0) == 0, "{}", text(&o));
        assert!(received.unwrap_or(0) == 0, "{}", text(&o));
        let sink = operator_report(&o, "sink");
        assert_ne!(sink["outcome"], "exit 4", "a wrong word reached the sink");
    }
}

/// Issue 50, item 2: seeded random one-bit flips in a real recording (in
/// frame bytes, in message headers, anywhere in the file): each is refused
/// by `fastio replay` before it publishes a frame, with one line naming the
/// file (and, for a message, its stream and number), and listed by `fastio
/// record --info` (exit 1); or it is harmless: the replay publishes every
/// frame, each checked word by word by the sink.
#[test]
fn flipped_bits_in_a_recording_are_refused_before_anything_is_published() {
    let dir = tmpdir("flips");
    let good = record_good(&dir);
    let first = message_start(&good, b"\"frame\":0,");
    let last = message_start(&good, b"\"frame\":59,");
    let mut rng = 0x5eed_f11b_u64;
    let mut next = move |n: usize| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % n as u64) as usize
    };
    let mut detected = 0;
    for round in 0..12 {
        let at = match round % 3 {
            // Among the frame messages (bytes, headers, MCAP's records).
            0 => first + next(last - first),
            // In a message's header: its JSON.
            1 => message_start(&good, format!("\"frame\":{},", next(60)).as_bytes()) + 4 + next(40),
            // Anywhere: MCAP's records, metadata, schemas, channels.
            _ => next(good.len()),
        };
        let mut bytes = good.clone();
        bytes[at] ^= 1 << next(8);
        let file = dir.join(format!("flip-{round}.mcap"));
        std::fs::write(&file, &bytes).unwrap();
        let o = replay_into_sink(&dir, &file, "uint32", 16);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!stderr.contains("panicked"), "{}", text(&o));
        let sink = operator_report(&o, "sink");
        assert_ne!(
            sink["outcome"], "exit 4",
            "flip at {at}: a wrong word reached the sink"
        );
        let info = fastio(&dir, &["record", "--info", &file.display().to_string()]);
        if o.status.success() {
            // Harmless: every frame published and checked.
            let (published, received) = published_and_received(&o);
            assert_eq!((published, received), (Some(60), Some(60)), "flip at {at}");
            assert!(info.status.success(), "flip at {at}: {}", text(&info));
            continue;
        }
        detected += 1;
        let said: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("[replay] fastio: "))
            .collect();
        assert_eq!(said.len(), 1, "flip at {at}: {}", text(&o));
        assert!(said[0].contains(&file.display().to_string()), "{}", said[0]);
        if round % 3 == 1 {
            assert!(
                said[0].contains("src/v, message ")
                    && said[0].contains(" of the channel (")
                    && said[0].contains(" of the file)"),
                "flip at {at} in a message: {}",
                said[0]
            );
        }
        let (published, received) = published_and_received(&o);
        assert_eq!(published.unwrap_or(0), 0, "flip at {at}: {}", text(&o));
        assert_eq!(received.unwrap_or(0), 0, "flip at {at}: {}", text(&o));
        assert!(!info.status.success(), "flip at {at}: {}", text(&info));
        let out = String::from_utf8_lossy(&info.stdout);
        assert!(
            out.contains("problem: ") || !out.contains("closed well"),
            "flip at {at}: {out}"
        );
    }
    // Among the frame messages, every flip matters (a flip in an unused
    // field would be harmless, and MCAP's data CRC catches even those).
    assert!(detected >= 8, "{detected} of 12 flips detected");
}

/// `fastio record` attached to a running run, SIGKILLed at a seeded
/// random moment: the run goes on unharmed (every frame reaches its sink),
/// and the file reads up to its last complete message with `fastio record
/// --info` and the reader: every frame there bit-exact, in order. Once
/// more without the kill: the file is closed well when the run ends. Each
/// as an observer (lossy) and with `--lossless` (the recorder's place; its
/// stage may restart, so a dead consumer there would hold the stream: the
/// killed recorder must not).
/// The scheduling policy of every thread of process `pid` (field 41 of
/// `/proc/PID/task/TID/stat`).
fn thread_policies(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let Ok(stat) = std::fs::read_to_string(t.unwrap().path().join("stat")) else {
            continue; // a thread that ended meanwhile
        };
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        // Fields from 3 (state) on: the policy is field 41.
        out.push(after.split(' ').nth(41 - 3).unwrap().parse().unwrap());
    }
    out
}

#[test]
fn a_live_recorder_killed_mid_run_leaves_a_readable_file_and_never_disturbs_the_run() {
    let op = common::example("fio-streamop").display().to_string();
    let mut seed = 0x3333_u64;
    for round in 0..5 {
        let lossless = round >= 3;
        let dir = tmpdir(&format!("live-{round}"));
        // The source stops before frame 1000 until the test says (this
        // file): the recorder is killed while the stream still flows,
        // however slowly the run started.
        let release = dir.join("release");
        let yaml = format!(
            "api-version: 0.5.0
name: live-{round}
operators:
- name: src
  container: {{image: rust, command: [{op}, source, v], variables: {{PAUSE_US: 1500, HOLD_AT: 1000, HOLD_UNTIL: {}}}}}
  output: [{{name: v, {ARR}}}]
- name: stage
  container: {{image: rust, command: [{op}, stage, v, w]}}
  input: [{{from: src, name: v, {ARR}}}]
  output: [{{name: w, {ARR}}}]
- name: sink
  container: {{image: rust, command: [{op}, sink, w], variables: {{EXPECT_FRAMES: 1500}}}}
  input: [{{from: stage, name: w, {ARR}}}]
streaming:
  frames: 1500
  max-shape:
    src/v: [16, 64]
    stage/w: [16, 64]
  restart:
    sink: {{policy: on-failure, limit: 1}}
",
            release.display()
        );
        common::write(&dir, "p.yaml", &yaml);
        // A stalled stream fails the run (and the test) instead of hanging.
        let cpu_before = cpu_ticks();
        let run = Command::new(common::fastio())
            .args(["run", "p.yaml", "--timeout", "60"])
            .current_dir(&dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The recorder waits for the run's context, then attaches.
        let pipeline = format!("live-{round}");
        let mut args = vec![
            "record",
            "-o",
            "live.mcap",
            "--pipeline",
            &pipeline,
            "--wait",
            "60",
        ];
        if lossless {
            args.push("--lossless");
        }
        let mut recorder = Command::new(common::fastio())
            .args(&args)
            .current_dir(&dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // A lossy recorder runs only on CPU time the pipeline leaves
        // (SCHED_IDLE, every thread); a lossless one as scheduled.
        // (Looked at once its stream threads run: at most 60 s.)
        let mut policies = Vec::new();
        for _ in 0..6000 {
            std::thread::sleep(std::time::Duration::from_millis(10));
            policies = thread_policies(recorder.id());
            if policies.len() >= 2 {
                break;
            }
        }
        let want = if lossless { 0 } else { 5 }; // SCHED_OTHER, SCHED_IDLE
        assert!(
            policies.len() >= 2 && policies.iter().all(|&p| p == want),
            "round {round}: the recorder's threads' policies {policies:?}"
        );
        let killed = round % 3 != 2;
        // Whether the recorder must have written frames: it was not killed,
        // or it wrote some before it was.
        let mut must_have_frames = !killed;
        if killed {
            // Killed once it wrote a frame, then at a random moment. A
            // SCHED_IDLE recorder on a machine with no idle time (busy
            // loops beside the tests) gets none, by design: then it is
            // killed all the same after 10 s and not held to have written.
            let file = dir.join("live.mcap");
            let waited_from = cpu_ticks();
            let wrote = (0..500).any(|_| {
                std::thread::sleep(std::time::Duration::from_millis(20));
                Recording::open(&file)
                    .and_then(|r| r.info())
                    .is_ok_and(|i| {
                        let streams = i.channels.iter().filter(|c| c.kind == ChannelKind::Stream);
                        streams.clone().count() == 2 && streams.clone().all(|c| c.messages >= 1)
                    })
            });
            let idle = idle_share(waited_from, cpu_ticks());
            assert!(
                wrote || lossless || idle < 0.25,
                "round {round}: the recorder wrote no frame in 10 s, the machine {:.0}% idle",
                idle * 100.0
            );
            must_have_frames = wrote;
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            std::thread::sleep(std::time::Duration::from_millis(400 + seed % 1200));
            recorder.kill().unwrap(); // SIGKILL
        }
        std::fs::write(&release, b"").unwrap();
        let rec_out = recorder.wait_with_output().unwrap();
        let out = run.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "round {round}: the run failed: {}",
            text(&out)
        );
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("[sink] sink: 1500 frames"),
            "{}",
            text(&out)
        );
        if !killed {
            assert!(rec_out.status.success(), "{}", text(&rec_out));
        }
        let file = dir.join("live.mcap");
        let o = fastio(&dir, &["record", "--info", "live.mcap"]);
        assert!(o.status.success(), "round {round}: {}", text(&o));
        let said = String::from_utf8_lossy(&o.stdout);
        let info = Recording::open(&file).unwrap().info().unwrap();
        if killed {
            assert!(!info.complete, "round {round}: {said}");
        } else {
            assert!(info.complete && said.contains("closed well"), "{said}");
            let recorded: u64 = info.counts["src/v.frames"].parse().unwrap();
            assert_eq!(recorded, info.channels[0].messages);
            let skipped: u64 = info.counts["src/v.skipped"].parse().unwrap();
            // How much of the machine nothing wanted while the run ran:
            // all a lossy recorder gets (SCHED_IDLE).
            let idle = idle_share(cpu_before, cpu_ticks());
            if !lossless && idle >= 0.25 {
                // A stream of about 650 frames/s on an idle-enough machine:
                // an observer keeps up with it (it sleeps on the data event
                // while it does) and copies nearly every frame, rather than
                // sampling it as it does a stream it cannot follow.
                assert!(
                    recorded >= 2 * skipped && recorded > 100,
                    "round {round}: recorded {recorded}, skipped {skipped}, the machine {:.0}% \
                     idle: {said}",
                    idle * 100.0
                );
            } else if !lossless {
                // A busy machine (other tests, `cargo xtask flake --load`):
                // SCHED_IDLE gets little, by design; it still records.
                eprintln!(
                    "round {round}: the machine was {:.0}% idle: recorded {recorded}, skipped \
                     {skipped} (not held to keeping up)",
                    idle * 100.0
                );
                assert!(recorded > 0, "round {round}: {said}");
            }
            if lossless {
                // Every frame from the one it attached at to the last.
                assert_eq!(info.counts["src/v.skipped"], "0", "{said}");
                let first = Recording::open(&file)
                    .unwrap()
                    .frames("src/v")
                    .unwrap()
                    .next();
                let first = first.unwrap().unwrap().header.frame;
                assert_eq!(recorded, 1500 - first, "{said}");
            }
        }
        for (topic, stages) in [("src/v", 0u32), ("stage/w", 1)] {
            let mut last: Option<u64> = None;
            for f in Recording::open(&file).unwrap().frames(topic).unwrap() {
                let f = match f {
                    Ok(f) => f,
                    Err(e) => {
                        assert!(killed, "round {round}: {e}");
                        break;
                    }
                };
                let seq = f.header.frame;
                assert!(
                    last.is_none_or(|l| seq > l),
                    "{topic}: {seq} after {last:?}"
                );
                last = Some(seq);
                assert_eq!(f.header.shape, vec![1 + seq % 16, 64]);
                for (i, w) in f.bytes.chunks_exact(4).enumerate() {
                    let got = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                    let want = if i == 0 {
                        stages
                    } else {
                        value(seq, i, stages)
                    };
                    assert_eq!(got, want, "round {round}: {topic} frame {seq} word {i}");
                }
            }
            assert!(
                last.is_some() || !must_have_frames,
                "round {round}: {topic}: no frame recorded: {said}"
            );
        }
    }
}

/// The machine's CPU time so far (`/proc/stat`'s first line): idle ticks
/// (idle and iowait) and all ticks.
fn cpu_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|t| t.parse().ok())
        .collect();
    let idle = ticks.get(3).copied().unwrap_or(0) + ticks.get(4).copied().unwrap_or(0);
    (idle, ticks.iter().sum())
}

/// The share of CPU time that was idle between two [`cpu_ticks`].
fn idle_share(before: (u64, u64), after: (u64, u64)) -> f64 {
    let total = after.1.saturating_sub(before.1);
    if total == 0 {
        return 0.0;
    }
    after.0.saturating_sub(before.0) as f64 / total as f64
}

/// `fastio run --replay FILE` on a one-shot run: the operators whose
/// outputs are all in the recording are not run (here their command would
/// fail), their entries come from the file, and the rest runs on them; a
/// recording that does not fit the pipeline is one clean error line.
#[test]
fn a_one_shot_run_is_fed_from_recorded_entries() {
    let dir = tmpdir("one-shot-replay");
    let testop = common::example("fio-testop").display().to_string();
    let pipeline = |make: &str, element: &str| {
        format!(
            "api-version: 0.5.0
name: entries
operators:
- name: make
  container: {{image: rust, command: {make}}}
  output: [{{name: v, type: array, element-type: {element}, shape: [2, -1]}}]
- name: total
  container: {{image: rust, command: [{testop}, sum, s, v]}}
  input: [{{from: make, name: v, type: array, element-type: {element}, shape: [2, -1]}}]
  output: [{{name: s, type: float64}}]
"
        )
    };
    let fill = format!("[{testop}, fill, v, '2.5']");
    common::write(&dir, "live.yaml", &pipeline(&fill, "float32"));
    let o = Command::new(common::fastio())
        .args(["run", "live.yaml", "--record", "entries.mcap"])
        .env("FILL_SHAPE", "2,3")
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("[total] sum 15"),
        "{}",
        text(&o)
    );

    // `make` would fail if it ran: its entry comes from the file.
    common::write(&dir, "replay.yaml", &pipeline("[false]", "float32"));
    let o = fastio(&dir, &["run", "replay.yaml", "--replay", "entries.mcap"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("[make] replayed from entries.mcap: make/v"),
        "{}",
        text(&o)
    );
    assert!(out.contains("[total] sum 15"), "{}", text(&o));

    // The pipeline says a shape the recording does not have: shapes as
    // the docs write them, `?` for a dynamic dimension.
    common::write(
        &dir,
        "shape.yaml",
        &pipeline("[false]", "float32").replace("shape: [2, -1]", "shape: [3, -1]"),
    );
    let o = fastio(&dir, &["run", "shape.yaml", "--replay", "entries.mcap"]);
    assert!(!o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("entry make/v: recorded with shape [2, 3], the pipeline declares [3, ?]"),
        "{err}"
    );

    // The pipeline says int32 where the recording has float32.
    common::write(&dir, "wrong.yaml", &pipeline("[false]", "int32"));
    let o = fastio(&dir, &["run", "wrong.yaml", "--replay", "entries.mcap"]);
    assert!(!o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(
            "replay: entries.mcap: entry make/v: recorded as float32, the pipeline says int32"
        ),
        "{err}"
    );
}

/// `fastio replay --loop`: after the last recorded frame, again from the
/// first, until the run's frame count stops the source; what it published
/// (recorded again) is the recording over and over, frame for frame.
#[test]
fn a_looped_replay_repeats_the_recording_frame_for_frame() {
    let dir = tmpdir("loop");
    let op = common::example("fio-streamop").display().to_string();
    let yaml = format!(
        "api-version: 0.5.0
name: to-loop
operators:
- name: src
  container: {{image: rust, command: [{op}, source, v]}}
  output: [{{name: v, {ARR}}}]
- name: sink
  container: {{image: rust, command: [{op}, sink, v]}}
  input: [{{from: src, name: v, {ARR}}}]
streaming:
  frames: 37
  record: once.mcap
  max-shape:
    src/v: [16, 64]
"
    );
    common::write(&dir, "p.yaml", &yaml);
    let o = fastio(&dir, &["run", "p.yaml"]);
    assert!(o.status.success(), "{}", text(&o));
    let fastio_bin = common::fastio();
    let yaml = format!(
        "api-version: 0.5.0
name: looped
operators:
- name: replay
  container: {{image: rust, command: [{fastio_bin}, replay, once.mcap, --pace, fast, --loop]}}
  output: [{{name: v, {ARR}}}]
streaming:
  frames: 100
  record: looped.mcap
  max-shape:
    replay/v: [16, 64]
"
    );
    common::write(&dir, "r.yaml", &yaml);
    let o = fastio(&dir, &["run", "r.yaml"]);
    assert!(o.status.success(), "{}", text(&o));
    let once: Vec<_> = Recording::open(&dir.join("once.mcap"))
        .unwrap()
        .frames("src/v")
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let looped: Vec<_> = Recording::open(&dir.join("looped.mcap"))
        .unwrap()
        .frames("replay/v")
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!((once.len(), looped.len()), (37, 100));
    for (k, f) in looped.iter().enumerate() {
        let orig = &once[k % 37];
        assert_eq!(f.header.frame, k as u64);
        assert_eq!(
            (&f.header.shape, &f.bytes),
            (&orig.header.shape, &orig.bytes),
            "frame {k}"
        );
    }
}
