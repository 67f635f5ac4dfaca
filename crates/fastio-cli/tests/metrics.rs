//! `fastio run --metrics ADDR` scraped over HTTP during real runs: names,
//! types and values checked against what the run itself reports.
//!
//! Every state a test scrapes lasts until the test ends it: operators wait
//! for a file the test writes ([`gate`]), a stream's source holds until
//! the test releases it; no test counts on a run lasting long enough for
//! a scrape (issue 54: under load, a driver slow to start missed such
//! windows).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};

use common::{example, fastio, write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A free loopback port.
fn port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// GET `path`: the status line and the body.
fn get(port: u16, path: &str) -> Option<(String, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    Some((head.lines().next()?.to_owned(), body.to_owned()))
}

/// How long a test waits for something it is sure will come (a bound
/// against a hang, not a window: nothing it waits for ends by itself).
const PATIENCE: Duration = Duration::from_secs(120);

/// A shell command that waits until `file` exists (bounded, so that an
/// operator left behind by a failed test ends: after 300 s it exits 9).
fn gate(file: &Path) -> String {
    format!(
        "i=0; until [ -e '{}' ]; do i=$((i+1)); [ $i -gt 6000 ] && exit 9; sleep 0.05; done",
        file.display()
    )
}

/// Writes `file`: the operator waiting at [`gate`] for it goes on.
fn release(file: &Path) {
    std::fs::write(file, b"go").unwrap();
}

/// This test's own empty directory (the test's name and this process).
fn test_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fastio-metrics-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Scrapes until `want` holds for the body (bounded: [`PATIENCE`]; what a
/// test waits for here stays until the test ends it).
fn scrape_until(port: u16, want: impl Fn(&str) -> bool) -> String {
    let t0 = Instant::now();
    let mut last = String::new();
    while t0.elapsed() < PATIENCE {
        if let Some((status, body)) = get(port, "/metrics") {
            assert_eq!(status, "HTTP/1.1 200 OK");
            if want(&body) {
                return body;
            }
            last = body;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the scrape never showed what was wanted; last:\n{last}");
}

/// `fastio run FILE --report json --metrics 127.0.0.1:PORT ARGS...`, its
/// output piped.
fn run_with_metrics(file: &Path, port: u16, args: &[&str]) -> std::process::Child {
    Command::new(fastio())
        .args([
            "run",
            file.to_str().unwrap(),
            "--report",
            "json",
            "--metrics",
        ])
        .arg(format!("127.0.0.1:{port}"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The value of the sample `series` (name and labels, exactly).
fn value(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

#[test]
fn a_one_shot_run_scraped_while_it_runs_and_against_its_report() {
    let dir = test_dir("one-shot");
    // `a` runs until the test has scraped it running; `b` (waiting for
    // `a`'s output, then running) until the test has scraped the end of `a`.
    let (go_a, go_b) = (dir.join("go-a"), dir.join("go-b"));
    let yaml = write(
        &dir,
        "p.yaml",
        &format!(
            "api-version: 0.5.0\nname: two\noperators:\n\
             - name: a\n  container: {{image: sh, command: [sh, -c, \"{}\"]}}\n  output:\n  \
             - {{name: v, type: array, element-type: float32, shape: [256, 256]}}\n\
             - name: b\n  container: {{image: sh, command: [sh, -c, \"{}\"]}}\n  input:\n  \
             - {{from: a, name: v, type: array, element-type: float32, shape: [256, 256]}}\n",
            gate(&go_a),
            gate(&go_b)
        ),
    );
    let port = port();
    let child = run_with_metrics(&yaml, port, &[]);
    // While `a` runs: its state, the context's memory, the types.
    let body = scrape_until(port, |b| {
        value(b, "fastio_operator_state{operator=\"a\",state=\"running\"}") == Some(1.0)
    });
    assert_eq!(
        value(
            &body,
            "fastio_operator_state{operator=\"b\",state=\"waiting\"}"
        ),
        Some(1.0)
    );
    for (name, kind) in [
        ("fastio_operator_state", "gauge"),
        ("fastio_operator_cpu_seconds", "counter"),
        ("fastio_operator_resident_bytes", "gauge"),
        ("fastio_context_used_bytes", "gauge"),
        ("fastio_context_capacity_bytes", "gauge"),
        ("fastio_context_participants", "gauge"),
        ("fastio_edge_latency_seconds", "histogram"),
    ] {
        assert!(
            body.contains(&format!("# TYPE {name} {kind}\n")),
            "{name} {kind}:\n{body}"
        );
    }
    // The static entry is pre-allocated: at least its bytes are in use.
    assert!(
        value(&body, "fastio_context_used_bytes").unwrap() >= 262_144.0,
        "{body}"
    );
    assert!(value(&body, "fastio_operator_resident_bytes{operator=\"a\"}").unwrap() > 0.0);
    // Once `a` is done: the edge's bytes, as the report will say.
    release(&go_a);
    let body = scrape_until(port, |b| {
        value(b, "fastio_edge_bytes{entry=\"a/v\"}").is_some()
    });
    assert_eq!(
        value(
            &body,
            "fastio_operator_state{operator=\"a\",state=\"succeeded\"}"
        ),
        Some(1.0)
    );
    let (status, _) = get(port, "/nothing").unwrap();
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    release(&go_b);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        value(&body, "fastio_edge_bytes{entry=\"a/v\"}"),
        report["edges"][0]["bytes"].as_f64()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_stream_scraped_has_frames_and_a_latency_histogram() {
    let op = example("fio-streamop");
    let dir = test_dir("stream");
    // The source holds before its last frame until the test has scraped.
    // Up to then, frames flow for at least 3 s (2 ms apart): the sink
    // publishes its statistics every second while frames come, so the
    // scrape's latency count reaches at least 1499 frames minus one
    // second's worth (500), whatever the load.
    let go = dir.join("go");
    let array = "type: array, element-type: uint32, shape: [-1, 64]";
    let yaml = write(
        &dir,
        "s.yaml",
        &format!(
            "api-version: 0.5.0\nname: s\noperators:\n\
             - name: src\n  container: {{image: local, command: [{o}, source, v], variables: {{PAUSE_US: '2000', HOLD_AT: '1499', HOLD_UNTIL: '{g}'}}}}\n  output: [{{name: v, {array}}}]\n\
             - name: sink\n  container: {{image: local, command: [{o}, sink, v]}}\n  input: [{{from: src, name: v, {array}}}]\n\
             streaming:\n  frames: 1500\n  max-shape:\n    src/v: [8, 64]\n",
            o = op.display(),
            g = go.display()
        ),
    );
    let port = port();
    let child = run_with_metrics(&yaml, port, &[]);
    let body = scrape_until(port, |b| {
        value(b, "fastio_edge_latency_seconds_count{entry=\"src/v\"}").is_some_and(|n| n >= 100.0)
    });
    let frames = value(&body, "fastio_edge_frames_total{entry=\"src/v\"}").unwrap();
    let count = value(&body, "fastio_edge_latency_seconds_count{entry=\"src/v\"}").unwrap();
    assert!(frames >= count, "published {frames}, received {count}");
    let inf = value(
        &body,
        "fastio_edge_latency_seconds_bucket{le=\"+Inf\",entry=\"src/v\"}",
    )
    .or_else(|| {
        value(
            &body,
            "fastio_edge_latency_seconds_bucket{entry=\"src/v\",le=\"+Inf\"}",
        )
    })
    .unwrap_or_else(|| panic!("no +Inf bucket:\n{body}"));
    assert_eq!(inf, count, "the +Inf bucket counts every frame");
    let sum = value(&body, "fastio_edge_latency_seconds_sum{entry=\"src/v\"}").unwrap();
    assert!(
        sum > 0.0 && sum / count < 1.0,
        "mean latency {} s",
        sum / count
    );
    release(&go);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["edges"][0]["frames"], 1500);
    assert!(frames <= 1500.0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 29: an operator's failure in the metrics is the same typed value
/// as in the report: its kind, whether it is a consequence, and its text.
#[test]
fn a_failure_is_in_the_metrics_as_in_the_report() {
    let dir = test_dir("failure");
    // `y` ignores SIGTERM (its trap is set before `x` fails: `x` waits for
    // `y` to say so) and runs until the test has scraped `x`'s failure;
    // the grace period outlasts it (the run ends when `y` does).
    let (y_ready, go_y) = (dir.join("y-ready"), dir.join("go-y"));
    let yaml = write(
        &dir,
        "p.yaml",
        &format!(
            "api-version: 0.5.0\nname: fails\noperators:\n\
             - name: x\n  container: {{image: sh, command: [sh, -c, \"{}; exit 3\"]}}\n\
             - name: y\n  container: {{image: sh, command: [sh, -c, \"trap '' TERM; : > '{}'; {}\"]}}\n",
            gate(&y_ready),
            y_ready.display(),
            gate(&go_y)
        ),
    );
    let port = port();
    let mut child = run_with_metrics(&yaml, port, &["--grace", "600"]);
    let series = "fastio_operator_failed{operator=\"x\",kind=\"exited\",consequence=\"false\",text=\"operator x exited with status 3\"}";
    let t0 = Instant::now();
    let body = loop {
        if let Some((_, body)) = get(port, "/metrics")
            && value(&body, series).is_some()
        {
            break body;
        }
        if let Some(st) = child.try_wait().unwrap() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            panic!("the run ended ({st}) before the scrape showed its failure: {err}");
        }
        assert!(t0.elapsed() < PATIENCE, "no scrape");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(value(&body, series), Some(1.0), "{body}");
    assert!(
        body.contains("# TYPE fastio_operator_failed gauge\n"),
        "{body}"
    );
    release(&go_y);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["failure"]["text"], "operator x exited with status 3");
    assert_eq!(report["failure"]["kind"], "exited");
    let _ = std::fs::remove_dir_all(&dir);
}
