//! Issue 53: a running pipeline live in Foxglove (`fastio run --view`,
//! `fastio view`), seen by a client of the protocol that is not ours:
//! Foxglove's `@foxglove/ws-protocol` from npm, in Node.js
//! (`tests/view/client.cjs`), installed by `cargo xtask ci` into
//! `target/node-foxglove` (`cargo xtask node` alone).

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::Value;

fn tmpdir(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("view")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The `node_modules` holding `@foxglove/ws-protocol` and `ws`:
/// `FASTIO_FOXGLOVE_NODE_MODULES` (set by `cargo xtask ci`), else
/// `target/node-foxglove/node_modules`. Never skipped: missing, the test
/// fails saying how to make it.
fn node_modules() -> PathBuf {
    let p = std::env::var_os("FASTIO_FOXGLOVE_NODE_MODULES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/node-foxglove/node_modules")
        });
    assert!(
        p.join("@foxglove/ws-protocol").exists() && p.join("ws").exists(),
        "{} has no @foxglove/ws-protocol: run `cargo xtask node` (`cargo xtask ci` does) to \
         npm install the pinned client into target/node-foxglove (Node.js and npm: Debian's \
         nodejs and npm, which `bash .ci/run` installs)",
        p.display()
    );
    p
}

/// `node client.cjs MODE URL SECONDS`, its stdout piped.
fn client(mode: &str, url: &str, seconds: u32) -> Child {
    client_with(mode, url, seconds, &[])
}

/// [`client`] with variables in its environment.
fn client_with(mode: &str, url: &str, seconds: u32, vars: &[(&str, &str)]) -> Child {
    Command::new("node")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/view/client.cjs"))
        .args([mode, url, &seconds.to_string()])
        .envs(vars.iter().copied())
        .env("NODE_PATH", node_modules())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run node (Debian: apt-get install nodejs npm)")
}

/// Waits for `child` at most `limit`; its exit success, stdout, stderr.
fn finish(child: Child, limit: Duration) -> (bool, String, String) {
    // Its output is read while it runs (a child that fills a pipe nobody
    // reads would wait forever); killed after `limit`.
    let pid = child.id();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let o = match rx.recv_timeout(limit) {
        Ok(o) => o,
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            rx.recv().unwrap()
        }
    }
    .unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Every stderr line of `child`, as they come.
fn stderr_lines(child: &mut Child) -> Receiver<String> {
    let (tx, rx) = channel();
    let err = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Reads lines (kept in `seen`) until one has `ws://`; its URL.
fn viewer_url(lines: &Receiver<String>, seen: &mut Vec<String>) -> String {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(60) {
        let Ok(line) = lines.recv_timeout(Duration::from_millis(200)) else {
            continue;
        };
        seen.push(line.clone());
        if let Some(at) = line.find("ws://") {
            let url: String = line[at..]
                .chars()
                .take_while(|c| !c.is_whitespace())
                .collect();
            return url;
        }
    }
    panic!("no viewer address within 60 s: {seen:#?}");
}

/// A streaming pipeline of known frames: the demo's camera (`uint8 [240,
/// 320, 3]`, 20 fps) into `gray` (`float32 [H, W]`, an image too), and
/// fio-streamop's `src` (`uint32 [1 + seq % 16, 64]`, every 50 ms) into a
/// sink that checks all `frames` arrive.
fn pipeline(dir: &Path, name: &str, frames: u32) -> PathBuf {
    let camera = common::example("camera").display().to_string();
    let gray = common::example("gray").display().to_string();
    let op = common::example("fio-streamop").display().to_string();
    let yaml = format!(
        "api-version: 0.5.0
name: {name}
operators:
- name: camera
  container: {{image: rust, command: [{camera}], variables: {{FPS: 20}}}}
  output: [{{name: image, type: array, element-type: uint8, shape: [240, 320, 3]}}]
- name: gray
  container: {{image: rust, command: [{gray}]}}
  input: [{{from: camera, name: image, type: array, element-type: uint8, shape: [240, 320, 3]}}]
  output: [{{name: luma, type: array, element-type: float32, shape: [-1, -1]}}]
- name: src
  container: {{image: rust, command: [{op}, source, v], variables: {{PAUSE_US: 50000}}}}
  output: [{{name: v, type: array, element-type: uint32, shape: [-1, 64]}}]
- name: sink
  container: {{image: rust, command: [{op}, sink, v], variables: {{EXPECT_FRAMES: {frames}}}}}
  input: [{{from: src, name: v, type: array, element-type: uint32, shape: [-1, 64]}}]
streaming:
  frames: {frames}
  max-shape:
    gray/luma: [240, 320]
    src/v: [16, 64]
"
    );
    common::write(dir, "p.yaml", &yaml)
}

/// What the check client saw (its one JSON line).
fn seen_by_client(ok: bool, out: &str, err: &str) -> Value {
    assert!(ok, "the check client failed: {err}\n{out}");
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out:?} {err}"))
}

/// Images, frames and values checked by the client (it checks every pixel
/// of every camera frame it gets against the camera's formula, and the
/// min/max/mean of every frame against its pixels or words).
fn assert_frames_checked(seen: &Value) {
    for key in [
        "images_checked",
        "camera_frames",
        "src_frames_checked",
        "gray_images",
    ] {
        assert!(seen[key].as_u64().unwrap() >= 5, "{key}: {seen}");
    }
    assert_eq!(
        seen["schemas"]["camera/image/image"],
        "protobuf foxglove.RawImage"
    );
    assert_eq!(seen["schemas"]["src/v/frame"], "json fastio.Frame");
}

/// `fastio run --view` with four clients beside it: one that checks what
/// it sees (after a first short visit: it comes, takes a message, leaves
/// and comes back), one that subscribes to everything and never reads
/// again, one that sends random bytes, invalid JSON and bogus requests
/// over WebSocket and random bytes over raw TCP. Every pixel the client
/// decodes is the camera's; the operators' last numbers are the report's;
/// a log line and the end came; and the run is unharmed: every frame at
/// the sink, none dropped, in about the time it takes alone.
#[test]
fn a_run_seen_live_in_foxglove_pixel_for_pixel_unharmed_by_bad_clients() {
    node_modules();
    let dir = tmpdir("run-view");
    let frames = 100;
    let p = pipeline(&dir, "viewed", frames);
    let mut run = Command::new(common::fastio())
        .arg("run")
        .arg(&p)
        // A rate the check client keeps up with on a busy machine (it
        // checks every pixel): what it does not take, the server drops.
        .args([
            "--view",
            "127.0.0.1:0",
            "--view-rate",
            "10",
            "--report",
            "json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = stderr_lines(&mut run);
    let mut seen_lines = Vec::new();
    let url = viewer_url(&lines, &mut seen_lines);
    let idle = client("idle", &url, 20);
    let garbage = client("garbage", &url, 4);
    let check = client("check", &url, 60);
    let (ok, out, _) = finish(run, Duration::from_secs(120));
    seen_lines.extend(lines.try_iter());
    let stderr = seen_lines.join("\n");
    assert!(ok, "the run failed:\n{stderr}\n{out}");
    let report: Value = serde_json::from_str(&out).unwrap();
    let (cok, cout, cerr) = finish(check, Duration::from_secs(30));
    let seen = seen_by_client(cok, &cout, &cerr);
    let _ = finish(garbage, Duration::from_secs(10));
    let mut idle = idle;
    let _ = idle.kill();
    let _ = idle.wait();

    // The run, unharmed.
    assert_eq!(report["succeeded"], true, "{report}");
    let op = |name: &str| {
        report["operators"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(op("sink")["frames"]["in"], serde_json::json!([frames]));
    assert_eq!(op("gray")["frames"]["in"], serde_json::json!([frames]));
    for e in report["edges"].as_array().unwrap() {
        assert_eq!(e["frames"], frames, "{e}");
        assert_eq!(e["dropped"], 0, "{e}");
    }
    // 100 frames at 20 fps: 5 s, and the operators' start.
    let wall = report["wall_seconds"].as_f64().unwrap();
    assert!(wall < 15.0, "{wall} s:\n{stderr}");

    // What the client saw.
    assert_frames_checked(&seen);
    for name in ["camera", "gray", "src", "sink"] {
        let last = &seen["operators"][name];
        assert_eq!(last["frames"], op(name)["frames"], "{name}: {last}");
        assert_eq!(last["restarts"], op(name)["restarts"], "{name}");
        assert!(last["cpu_seconds"].as_f64().is_some(), "{name}: {last}");
    }
    assert!(seen["operator_messages"].as_u64().unwrap() >= 8, "{seen}");
    assert_eq!(seen["schemas"]["log"], "protobuf foxglove.Log");
    let logs = seen["logs"].as_array().unwrap();
    assert!(
        logs.iter()
            .any(|l| l["name"] == "sink" && l["message"] == format!("sink: {frames} frames")),
        "{logs:#?}"
    );
    assert!(
        logs.iter().any(|l| l["name"] == "fastio"
            && l["message"].as_str().unwrap().starts_with("streams: ")
            && l["level"] == 2),
        "{logs:#?}"
    );
    assert_eq!(seen["end"]["succeeded"], true);
    assert_eq!(seen["end"]["text"], "succeeded");
    assert_eq!(seen["end"]["pipeline"], "viewed");
    // One line per client: the check client twice, the idle one, the
    // garbage one's WebSocket.
    let connected = stderr.matches("viewer: client ").count();
    assert!(connected >= 4, "{connected} clients:\n{stderr}");
    assert!(stderr.contains("viewer: a client left"), "{stderr}");
}

/// `fastio view --wait` started before the run finds it when it starts
/// and shows it to a client to its end; then, beside a second run, a
/// `fastio view` stopped by Ctrl-C (SIGINT) mid-run says so and exits 0,
/// and that run goes on to its last frame.
#[test]
fn fastio_view_waits_for_the_run_and_its_ctrl_c_leaves_the_run_alone() {
    node_modules();
    let dir = tmpdir("standalone");
    let frames = 100;
    let p = pipeline(&dir, "viewed-alone", frames);
    let view = || {
        Command::new(common::fastio())
            .args([
                "view",
                "--pipeline",
                "viewed-alone",
                "--wait",
                "60",
                "--listen",
                "127.0.0.1:0",
                "--rate",
                "10",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let run = || {
        Command::new(common::fastio())
            .arg("run")
            .arg(&p)
            .args(["--report", "json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let all_frames = |child: Child| {
        let (ok, out, err) = finish(child, Duration::from_secs(120));
        assert!(ok, "the run failed: {err}\n{out}");
        let report: Value = serde_json::from_str(&out).unwrap();
        for e in report["edges"].as_array().unwrap() {
            assert_eq!(e["frames"], frames, "{e}");
        }
    };

    let mut viewer = view();
    // A second viewer and a recorder on the same run: each is one more
    // process attached to the run's context.
    let mut viewer2 = view();
    let recorder = Command::new(common::fastio())
        .args(["record", "-o"])
        .arg(dir.join("beside.mcap"))
        .args(["--pipeline", "viewed-alone", "--wait", "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let first = run();
    let lines = stderr_lines(&mut viewer);
    let lines2 = stderr_lines(&mut viewer2);
    let mut seen_lines = Vec::new();
    let url = viewer_url(&lines, &mut seen_lines);
    let mut seen_lines2 = Vec::new();
    viewer_url(&lines2, &mut seen_lines2);
    let check = client("check", &url, 60);
    all_frames(first);
    let (cok, cout, cerr) = finish(check, Duration::from_secs(30));
    let seen = seen_by_client(cok, &cout, &cerr);
    assert_frames_checked(&seen);
    // Outside the driver: how it ended is not known, restarts neither.
    assert_eq!(seen["end"]["ended"], true);
    assert!(seen["end"]["succeeded"].is_null(), "{seen}");
    assert!(seen["operators"]["sink"]["restarts"].is_null());
    let (vok, _, _) = finish(viewer, Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(100));
    seen_lines.extend(lines.try_iter());
    assert!(vok, "{seen_lines:#?}");
    assert!(
        seen_lines.iter().any(|l| l.contains("view: the run ended")),
        "{seen_lines:#?}"
    );
    let (vok2, _, _) = finish(viewer2, Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(100));
    seen_lines2.extend(lines2.try_iter());
    assert!(vok2, "{seen_lines2:#?}");
    assert!(
        seen_lines2
            .iter()
            .any(|l| l.contains("view: the run ended")),
        "{seen_lines2:#?}"
    );
    // The recorder runs under SCHED_IDLE (it takes only what the machine
    // leaves idle): on a busy machine it may take long to finish; never
    // forever.
    let (rok, rout, rerr) = finish(recorder, Duration::from_secs(120));
    assert!(rok, "the recorder beside two viewers: {rerr}\n{rout}");

    // Ctrl-C of a viewer: the run goes on.
    let mut viewer = view();
    let second = run();
    let lines = stderr_lines(&mut viewer);
    let mut seen_lines = Vec::new();
    viewer_url(&lines, &mut seen_lines);
    std::thread::sleep(Duration::from_secs(1));
    let st = Command::new("kill")
        .args(["-INT", &viewer.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let (vok, _, _) = finish(viewer, Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(100));
    seen_lines.extend(lines.try_iter());
    assert!(vok, "{seen_lines:#?}");
    assert!(
        seen_lines
            .iter()
            .any(|l| l.contains("view: stopped (the run goes on)")),
        "{seen_lines:#?}"
    );
    all_frames(second);
}

/// A process's resident memory of one kind (`RssAnon`: what it
/// allocated; `RssShmem`: the run's shared memory it has touched), bytes.
fn rss_bytes(pid: u32, kind: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix(kind)?.strip_prefix(':'))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// Memory per client is bounded by `--backlog` messages, each at most the
/// largest frame: `fastio view --backlog 2` beside a run of full-HD images
/// (`rgb8 [1080, 1920, 3]`, 6.2 MB, and its `float32` luma, 8.3 MB, 20 a
/// second for 8 s), with three clients that subscribe to every channel and
/// stop reading once they got a message of both image channels, and one
/// that reads everything. Unbounded, each idle
/// client would hold the run's 320 images (2.3 GB); with the default
/// backlog of 64, 64 of them. The viewer's own resident memory (`RssAnon`:
/// not the run's shared pages it maps), sampled throughout, stays within a
/// base of 96 MiB (the process, each stream's copy of its frame and its
/// encoding, the allocator's retained pages) plus, per client, the backlog
/// and two more messages (one being written, one being framed) of the
/// largest size; the reading client got the images, and the run every
/// frame.
#[test]
fn a_client_that_never_reads_holds_the_viewer_to_its_backlog() {
    node_modules();
    let dir = tmpdir("backlog");
    let frames = 160u32;
    let (h, w) = (1080usize, 1920usize);
    let camera = common::example("camera").display().to_string();
    let gray = common::example("gray").display().to_string();
    let yaml = format!(
        "api-version: 0.5.0
name: viewed-large
operators:
- name: camera
  container: {{image: rust, command: [{camera}], variables: {{FPS: 20}}}}
  output: [{{name: image, type: array, element-type: uint8, shape: [{h}, {w}, 3]}}]
- name: gray
  container: {{image: rust, command: [{gray}]}}
  input: [{{from: camera, name: image, type: array, element-type: uint8, shape: [{h}, {w}, 3]}}]
  output: [{{name: luma, type: array, element-type: float32, shape: [-1, -1]}}]
streaming:
  frames: {frames}
  max-shape:
    gray/luma: [{h}, {w}]
"
    );
    let p = common::write(&dir, "p.yaml", &yaml);
    let backlog = 2u64;
    let mut viewer = Command::new(common::fastio())
        .args([
            "view",
            "--pipeline",
            "viewed-large",
            "--wait",
            "60",
            "--listen",
            "127.0.0.1:0",
            "--rate",
            "30",
            "--backlog",
            &backlog.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = stderr_lines(&mut viewer);
    let mut seen_lines = Vec::new();
    let mut run = Command::new(common::fastio())
        .arg("run")
        .arg(&p)
        .args(["--report", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let url = viewer_url(&lines, &mut seen_lines);
    // Each stops reading once it got a message of both image channels.
    let idle: Vec<Child> = (0..3)
        .map(|_| client_with("idle", &url, 90, &[("IDLE_IMAGE_CHANNELS", "2")]))
        .collect();
    let reader = client("read", &url, 90);
    let clients = 4u64;

    // The viewer's memory, every 20 ms, until the run ends.
    let (mut peak, mut peak_shared) = (0u64, 0u64);
    let t0 = Instant::now();
    while run.try_wait().unwrap().is_none() && t0.elapsed() < Duration::from_secs(120) {
        peak = peak.max(rss_bytes(viewer.id(), "RssAnon").unwrap_or(0));
        peak_shared = peak_shared.max(rss_bytes(viewer.id(), "RssShmem").unwrap_or(0));
        std::thread::sleep(Duration::from_millis(20));
    }
    let (ok, out, err) = finish(run, Duration::from_secs(10));
    assert!(ok, "the run failed: {err}\n{out}");
    let report: Value = serde_json::from_str(&out).unwrap();
    for e in report["edges"].as_array().unwrap() {
        assert_eq!(e["frames"], frames, "{e}");
        assert_eq!(e["dropped"], 0, "{e}");
    }
    let (vok, _, verr) = finish(viewer, Duration::from_secs(20));
    seen_lines.extend(lines.try_iter());
    assert!(vok, "{seen_lines:#?} {verr}");
    let (rok, rout, rerr) = finish(reader, Duration::from_secs(20));
    for mut c in idle {
        let _ = c.kill();
        let o = c.wait_with_output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        // Subscribed to both images (and the frames, operators, log, run)
        // before it stopped reading: its queue was fed.
        assert!(
            out.contains("idle: stopped reading") && out.contains("images from 2"),
            "an idle client never got both image channels: {out:?} {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    assert!(rok, "the reading client: {rerr}\n{rout}");

    // The largest message: a luma image (float32) and its header.
    let largest = (h * w * 4 + 4096) as u64;
    let bound = (96 << 20) + clients * (backlog + 2) * largest;
    assert!(
        peak > 0 && peak <= bound,
        "the viewer held {:.0} MiB at its peak; bound {:.0} MiB ({clients} clients × ({backlog} \
         queued + 2) × {:.1} MiB + 96 MiB)",
        peak as f64 / 1048576.0,
        bound as f64 / 1048576.0,
        largest as f64 / 1048576.0
    );
    // The reader got images (beside the idle clients), so the queues were
    // fed: at least 20 frames' worth.
    let bytes: u64 = rout
        .split_whitespace()
        .skip_while(|w| *w != "bytes")
        .nth(1)
        .and_then(|b| b.parse().ok())
        .unwrap_or_else(|| panic!("the reader's line: {rout:?}"));
    assert!(
        bytes >= 20 * (h * w * 3) as u64,
        "the reading client got {bytes} bytes"
    );
    eprintln!(
        "viewer peak {:.1} MiB (bound {:.1} MiB), the run's shared memory it touched {:.1} MiB, \
         the reader got {:.0} MB",
        peak as f64 / 1048576.0,
        bound as f64 / 1048576.0,
        peak_shared as f64 / 1048576.0,
        bytes as f64 / 1e6
    );
}
