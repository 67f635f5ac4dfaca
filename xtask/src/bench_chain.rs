//! `cargo xtask bench chain` (and every `--report`): a 3-operator stream
//! (source → stage → sink) run as real pipelines, ours beside **dora-rs**
//! (PyPI `dora-rs` and `dora-rs-cli`, installed into `target/venv-dora`)
//! doing the same work, in the same run:
//!
//! * **latency** — the source paced well below saturation; per frame, the
//!   sink's wall clock minus the frame's source timestamp; p50 and p99
//!   after the first [`WARMUP`] frames;
//! * **throughput** — the source unpaced; frames per second between the
//!   sink's first and last frame;
//!
//! at 64 KiB, 1 MiB and 16 MiB frames, for our Rust operators
//! (`fio-chainop`), our Python operators and dora-rs's Python nodes
//! (`crates/fastio-python/bench/chain_*.py`). Every node does the same
//! work: the source copies a prepared frame into each frame it sends, the
//! stage copies its input frame into its output, the sink reads the
//! frame's number (and fails on a frame out of order). dora-rs's inputs
//! get a queue as long as the run (its queues drop the oldest input when
//! full; ours block). Each sink counts the frames it never saw, saw out
//! of order (by the frame's number in its metadata) or saw torn (payload
//! not the frame its metadata names): ours must be zero (the bench fails
//! otherwise); dora-rs's are reported.
//!
//! Beside the chain: the Python operator's own cost per frame (a sink that
//! waits until the source has published every frame, then times its
//! loop: next frame, input view, release), Python against Rust; and the
//! resident memory of a Rust and a Python consumer over 100,000 frames
//! (after 100,000 more that fill the fixed-size statistics reservoir).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::bench::human_time;
use crate::bench_peers::Peer;
use crate::root;
use crate::step::{Step, cargo};

/// The dora-rs packages, pinned (with what its Python nodes need).
pub(crate) const DORA: [&str; 4] = [
    "dora-rs==1.1.0",
    "dora-rs-cli==1.1.0",
    "pyarrow==26.0.1",
    "numpy==2.4.6",
];

/// Frames left out of the latency figures (start-up).
pub(crate) const WARMUP: usize = 20;

/// Every run is killed after this long (seconds).
const RUN_LIMIT_SECS: u32 = 300;

/// Rounds of the chain across hosts, ours and dora-rs taking turns.
const ACROSS_ROUNDS: usize = 3;

/// Frames in flight per edge of our streams.
const DEPTH: u64 = 4;

/// One frame size: (label, bytes, latency run's frames and pause between
/// frames in µs, throughput run's frames).
const SIZES: [(&str, u64, u64, u64, u64); 3] = [
    ("64KiB", 64 << 10, 500, 2_000, 5_000),
    ("1MiB", 1 << 20, 400, 5_000, 2_000),
    ("16MiB", 16 << 20, 150, 20_000, 200),
];

/// Who runs the chain.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Variant {
    FastioRust,
    FastioPython,
    DoraPython,
}

impl Variant {
    const ALL: [Variant; 3] = [
        Variant::FastioRust,
        Variant::FastioPython,
        Variant::DoraPython,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Variant::FastioRust => "fastio, Rust operators",
            Variant::FastioPython => "fastio, Python operators",
            Variant::DoraPython => "dora-rs, Python nodes",
        }
    }

    fn slug(self) -> &'static str {
        match self {
            Variant::FastioRust => "fastio-rust",
            Variant::FastioPython => "fastio-python",
            Variant::DoraPython => "dora-python",
        }
    }
}

/// What a sink wrote (see `chain_result.py`).
#[derive(Default, Debug)]
pub(crate) struct SinkResult {
    pub(crate) count: u64,
    pub(crate) disorder: u64,
    pub(crate) torn: u64,
    pub(crate) first_ns: u64,
    pub(crate) last_ns: u64,
    pub(crate) latencies: Vec<u64>,
    /// When the source took frames 0, 1000, 2000, … (ns, wall clock).
    ticks: Vec<u64>,
    loop_ns: Option<u64>,
    rss_kb_at: Option<u64>,
    rss_kb_end: Option<u64>,
    /// When a lossy recorder (or a viewer) was running beside the run
    /// (wall clock, ns).
    recorder_windows: Vec<(u64, u64)>,
    /// The most resident memory a viewer beside the run had (KiB).
    viewer_peak_kib: u64,
}

pub(crate) fn parse_result(text: &str) -> Result<SinkResult, String> {
    let mut r = SinkResult::default();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let key = words.next().unwrap_or("");
        let mut nums = words.map(|w| w.parse::<u64>().map_err(|e| format!("{line:?}: {e}")));
        let mut one = || nums.next().unwrap_or(Err(format!("{line:?}: no value")));
        match key {
            "count" => r.count = one()?,
            "disorder" => r.disorder = one()?,
            "torn" => r.torn = one()?,
            "first_ns" => r.first_ns = one()?,
            "last_ns" => r.last_ns = one()?,
            "loop_ns" => r.loop_ns = Some(one()?),
            "rss_kb_at" => r.rss_kb_at = Some(one()?),
            "rss_kb_end" => r.rss_kb_end = Some(one()?),
            "lat_ns" => r.latencies = nums.collect::<Result<_, _>>()?,
            "tick_ns" => r.ticks = nums.collect::<Result<_, _>>()?,
            _ => {}
        }
    }
    Ok(r)
}

/// The value below which `q` of the sorted samples lie.
pub(crate) fn percentile(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i.min(sorted.len() - 1)] as f64
}

/// How one run is set up.
pub(crate) struct Run<'a> {
    variant: Variant,
    dir: PathBuf,
    size: u64,
    frames: u64,
    pause_us: u64,
    /// The sink's extra environment (`WAIT_MS`, `RSS_AFTER`).
    sink_env: &'a [(&'a str, String)],
    /// Depth of our streams (the loop bench needs every frame to fit).
    depth: u64,
    /// The source in Rust whatever the variant (the loop bench).
    rust_source: bool,
    /// Who records the run meanwhile (the recorder bench).
    recorder: Recorder,
    /// The two namespace hosts it runs on (source and sink on `a`, the
    /// stage on `b`), or one host.
    across: Option<&'a Across<'a>>,
    /// Stages between the source and the sink (1: the classic chain of
    /// three operators; the growth bench runs 0 to 62).
    stages: usize,
}

/// The chain across two namespace hosts (issue 30): the source and the
/// sink on host `a`, the stage on host `b`, so every frame crosses the
/// link twice and its latency is still read on one clock (the hosts
/// share a kernel).
pub(crate) struct Across<'h> {
    hosts: &'h crate::bench_hosts::Hosts,
    /// The next free port (each run takes two).
    port: std::cell::Cell<u16>,
}

impl Across<'_> {
    fn ports(&self) -> (u16, u16) {
        let p = self.port.get();
        self.port.set(p + 2);
        (p, p + 1)
    }
}

/// A recorder beside a run (issue 33's bench: a lossy recorder must not
/// slow the source).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Recorder {
    None,
    /// `fastio record` beside the run: an observer, never holding a frame.
    Lossy,
    /// `streaming.record`: the driver's recorder, one more consumer.
    Lossless,
    /// `fastio view` beside the run with four clients of Foxglove's
    /// protocol (issue 53: a viewer never slows the pipeline).
    Viewer,
}

/// How long a lossy recorder records, and rests, in turns.
const RECORDER_ON: std::time::Duration = std::time::Duration::from_millis(700);
const RECORDER_OFF: std::time::Duration = std::time::Duration::from_millis(700);

/// Waits until the machine's cores have been at least 90% idle over 200 ms (at
/// most 10 s): each run across hosts starts on a quiet machine, whatever
/// ran before it.
fn settle() {
    fn idle_total() -> Option<(u64, u64)> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let cpu = stat.lines().next()?.strip_prefix("cpu ")?;
        let v: Vec<u64> = cpu
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        // user nice system idle iowait irq softirq steal
        let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
        Some((idle, v.iter().take(8).sum()))
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        let Some((i0, t0)) = idle_total() else { return };
        std::thread::sleep(std::time::Duration::from_millis(200));
        let Some((i1, t1)) = idle_total() else { return };
        if t1 > t0 && (i1 - i0) as f64 >= 0.9 * (t1 - t0) as f64 {
            return;
        }
    }
}

/// The wall-clock time in nanoseconds (one clock for every process of
/// the machine).
pub(crate) fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Runs `fastio record` (lossy, as a user would: it puts itself under
/// SCHED_IDLE) beside the chain in turns until `done`: when each ran.
fn toggle_recorder(
    fastio: &Path,
    dir: &Path,
    done: &std::sync::atomic::AtomicBool,
) -> Result<Vec<(u64, u64)>, String> {
    let mut windows = Vec::new();
    // Bounded: a run is at most RUN_LIMIT_SECS.
    for k in 0..(RUN_LIMIT_SECS as usize) {
        if done.load(std::sync::atomic::Ordering::Acquire) {
            break;
        }
        let mut cmd = Command::new(fastio);
        cmd.arg("record");
        if k == 0 {
            // The first waits for the run's context.
            cmd.args(["--wait", "30"]);
        }
        let from = wall_ns();
        let out = cmd
            .args([
                "-o",
                "lossy.mcap",
                "--pipeline",
                "chain-bench",
                "--duration",
            ])
            .arg(RECORDER_ON.as_secs_f64().to_string())
            .current_dir(dir)
            .output()
            .map_err(|e| format!("start fastio record: {e}"))?;
        let to = wall_ns();
        if !out.status.success() {
            // After the run ended there is nothing to record.
            if k > 0 && done.load(std::sync::atomic::Ordering::Acquire) {
                break;
            }
            return Err(format!(
                "fastio record beside the chain failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        windows.push((from, to));
        std::thread::sleep(RECORDER_OFF);
    }
    Ok(windows)
}

/// Resident memory of process `pid` (KiB), when it lives.
fn rss_kib(pid: u32) -> Option<u64> {
    status_kib(pid, "VmRSS:")
}

/// A `/proc/PID/status` field in KiB (`VmRSS:`, `VmHWM:`), when the
/// process lives.
fn status_kib(pid: u32, field: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(field))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// How a whole pipeline started (see [`Run::start_up`]).
pub(crate) struct StartUp {
    /// From spawning the runner (`fastio run`, `dora run`) to the sink's
    /// first frame (ns).
    pub(crate) to_first_frame_ns: u64,
    /// The runner process's own peak resident memory (KiB; its operators
    /// are processes of their own and not counted).
    pub(crate) runner_peak_kib: u64,
    /// Frames the sink saw.
    pub(crate) frames: u64,
}

/// Runs `fastio view` beside the chain in turns until `done`, each time
/// with four clients of Foxglove's protocol (`@foxglove/ws-protocol`, the
/// tests' `client.cjs`): three that subscribe to every channel and read
/// every message, one that subscribes and never reads. When each ran, and
/// the viewer's most resident memory (KiB).
fn toggle_viewer(
    fastio: &Path,
    dir: &Path,
    done: &std::sync::atomic::AtomicBool,
) -> Result<(Vec<(u64, u64)>, u64), String> {
    use std::io::BufRead;
    let script = root().join("crates/fastio-cli/tests/view/client.cjs");
    let node_modules = root().join("target/node-foxglove/node_modules");
    let mut windows = Vec::new();
    let mut peak = 0u64;
    for k in 0..(RUN_LIMIT_SECS as usize) {
        if done.load(std::sync::atomic::Ordering::Acquire) {
            break;
        }
        // The viewer's window opens before it starts: its start (attaching,
        // the clients' start) is its cost too.
        let from = wall_ns();
        let mut cmd = Command::new(fastio);
        cmd.args([
            "view",
            "--pipeline",
            "chain-bench",
            "--listen",
            "127.0.0.1:0",
        ]);
        if k == 0 {
            cmd.args(["--wait", "30"]);
        }
        let mut viewer = cmd
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("start fastio view: {e}"))?;
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let stderr = viewer.stderr.take().expect("piped");
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                let _ = tx.send(line);
            }
        });
        let mut said = Vec::new();
        let url = loop {
            match rx.recv_timeout(std::time::Duration::from_secs(40)) {
                Ok(line) => {
                    if let Some(at) = line.find("ws://") {
                        break Some(
                            line[at..]
                                .split_whitespace()
                                .next()
                                .unwrap_or("")
                                .to_owned(),
                        );
                    }
                    said.push(line);
                }
                Err(_) => break None,
            }
        };
        let Some(url) = url else {
            let _ = viewer.kill();
            let _ = viewer.wait();
            if k > 0 && done.load(std::sync::atomic::Ordering::Acquire) {
                break;
            }
            return Err(format!(
                "fastio view beside the chain: {}",
                said.join(" / ")
            ));
        };
        let seconds = (RECORDER_ON.as_secs() + 2).to_string();
        let clients: Vec<_> = ["read", "read", "read", "idle"]
            .iter()
            .map(|mode| {
                Command::new("node")
                    .arg(&script)
                    .args([mode, url.as_str(), seconds.as_str()])
                    .env("NODE_PATH", &node_modules)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .map_err(|e| format!("node (cargo xtask node installs the client): {e}"))
            })
            .collect::<Result<_, _>>()?;
        let until = std::time::Instant::now() + RECORDER_ON;
        while std::time::Instant::now() < until {
            peak = peak.max(rss_kib(viewer.id()).unwrap_or(0));
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = Command::new("kill")
            .args(["-INT", &viewer.id().to_string()])
            .status();
        let _ = viewer.wait();
        for mut c in clients {
            let _ = c.kill();
            let _ = c.wait();
        }
        windows.push((from, wall_ns()));
        std::thread::sleep(RECORDER_OFF);
    }
    Ok((windows, peak))
}

/// The source's rate (frames/s) in each 1,000-frame block that lay wholly
/// inside a recorder window (after its first 100 ms: the recorder starting)
/// and in each that lay wholly outside every window (100 ms apart from
/// them): (with, without).
fn rates_beside_recorder(r: &SinkResult) -> (Vec<f64>, Vec<f64>) {
    const MARGIN: u64 = 100_000_000;
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for b in r.ticks.windows(2) {
        let (t0, t1) = (b[0], b[1]);
        let rate = 1000.0 / (t1.saturating_sub(t0).max(1) as f64 / 1e9);
        if r.recorder_windows
            .iter()
            .any(|&(from, to)| t0 >= from + MARGIN && t1 <= to)
        {
            with.push(rate);
        } else if r
            .recorder_windows
            .iter()
            .all(|&(from, to)| t1 + MARGIN <= from || t0 >= to + MARGIN)
        {
            without.push(rate);
        }
    }
    (with, without)
}

/// The median of `v` (the upper middle for an even count; NaN when empty).
fn median_of(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// One run beside a `what` (a recorder, a viewer) switched on and off: the
/// source's median rate with it over its median rate without it, and the
/// run told in `runs`.
fn with_against_without(r: &SinkResult, what: &str, runs: &mut String) -> Result<f64, String> {
    let (with, without) = rates_beside_recorder(r);
    if with.len() < 20 || without.len() < 20 {
        return Err(format!(
            "{what} bench: too few stretches to compare ({} with the {what}, {} without, {} \
             windows)",
            with.len(),
            without.len(),
            r.recorder_windows.len()
        ));
    }
    let (blocks_with, blocks_without) = (with.len(), without.len());
    let (w, wo) = (median_of(with), median_of(without));
    let _ = write!(
        runs,
        "{}x{:.3} ({:.0} / {:.0} frames/s, {} / {} blocks)",
        if runs.is_empty() { "" } else { ", " },
        w / wo,
        w,
        wo,
        blocks_with,
        blocks_without
    );
    Ok(w / wo)
}

/// Paths every run needs.
pub(crate) struct Tools {
    pub(crate) fastio: PathBuf,
    pub(crate) chainop: PathBuf,
    python: PathBuf,
    pub(crate) dora_python: Option<PathBuf>,
    scripts: PathBuf,
}

impl Tools {
    /// The release binaries, our Python environment and scripts, and
    /// dora-rs's Python when installed.
    pub(crate) fn new(dora_python: Option<PathBuf>) -> Tools {
        let release = crate::bench::target_dir().join("release");
        Tools {
            fastio: release.join("fastio"),
            chainop: release.join("fio-chainop"),
            python: root().join("target/venv-python/bin/python"),
            dora_python,
            scripts: root().join("crates/fastio-python/bench"),
        }
    }
}

/// dora-rs's Python (installed into target/venv-dora if it is not),
/// noting in `peers` as `name` what ran (`how`) or why it is missing.
pub(crate) fn dora_peer(peers: &mut Vec<Peer>, name: &'static str, how: String) -> Option<PathBuf> {
    match crate::venv::python("venv-dora", &DORA, "dora") {
        Ok(p) => {
            peers.push(Peer::measured(name, how));
            Some(p)
        }
        Err(e) => {
            peers.push(Peer::missing(name, e));
            None
        }
    }
}

fn yaml_str(p: &Path) -> String {
    format!("{:?}", p.display().to_string())
}

impl Run<'_> {
    /// Runs it; what the sink measured.
    fn go(&self, tools: &Tools) -> Result<SinkResult, String> {
        if let Some(across) = self.across {
            // What ran before (a dora-rs cluster going down, its nodes'
            // interpreters exiting) is over before this run starts.
            settle();
            return self.go_across(tools, across);
        }
        let result = self.dir.join("result.txt");
        let runner = self.runner(tools, &result)?;
        let mut cmd = Command::new("timeout");
        cmd.args(["--signal=KILL", &RUN_LIMIT_SECS.to_string()])
            .arg(runner.get_program())
            .args(runner.get_args())
            .envs(runner.get_envs().filter_map(|(k, v)| Some((k, v?))));
        cmd.current_dir(&self.dir);
        // A lossy recorder beside it, on and off in turns: windows of
        // `RECORDER_ON` recording, `RECORDER_OFF` not, until the run ends.
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let recorder = matches!(self.recorder, Recorder::Lossy | Recorder::Viewer).then(|| {
            let (fastio, dir, done) = (tools.fastio.clone(), self.dir.clone(), done.clone());
            let viewer = self.recorder == Recorder::Viewer;
            std::thread::spawn(move || {
                if viewer {
                    toggle_viewer(&fastio, &dir, &done)
                } else {
                    toggle_recorder(&fastio, &dir, &done).map(|w| (w, 0))
                }
            })
        });
        let name = format!(
            "chain {}",
            self.dir.file_name().unwrap_or_default().display()
        );
        let before = shm_files();
        let ran = Step::new(name, cmd).run();
        // dora-rs (its Zenoh shared memory) leaves `*.zenoh` files in
        // /dev/shm: remove those this run made.
        for f in shm_files().difference(&before) {
            if f.ends_with(".zenoh") {
                let _ = std::fs::remove_file(Path::new("/dev/shm").join(f));
            }
        }
        done.store(true, std::sync::atomic::Ordering::Release);
        let (windows, viewer_peak_kib) = match recorder {
            Some(t) => t.join().map_err(|_| "the recorder thread panicked")??,
            None => (Vec::new(), 0),
        };
        ran?;
        let text = std::fs::read_to_string(&result)
            .map_err(|e| format!("{}: the sink wrote no result: {e}", self.dir.display()))?;
        let mut r = parse_result(&text)?;
        r.recorder_windows = windows;
        r.viewer_peak_kib = viewer_peak_kib;
        Ok(r)
    }

    /// Runs it on two namespace hosts (network and mount namespaces, a
    /// private `/dev/shm` each): ours as one `fastio run --host` on
    /// each; dora-rs as its documentation sets a cluster up (a coordinator,
    /// a daemon per machine meeting at one Zenoh peer endpoint, nodes
    /// placed by `deploy: machine:`, `dora start --attach`).
    fn go_across(&self, tools: &Tools, x: &Across<'_>) -> Result<SinkResult, String> {
        use crate::bench_hosts::ADDR_A;
        use std::process::Stdio;
        let _ = std::fs::remove_dir_all(&self.dir);
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| format!("create {}: {e}", self.dir.display()))?;
        let result = self.dir.join("result.txt");
        let (port, zenoh_port) = x.ports();
        // A host: its network namespace, and a mount namespace of its own
        // with a private tmpfs on /dev/shm, so that nothing passes between
        // hosts but the network (dora-rs's Zenoh would otherwise share
        // memory across them, as no two real hosts can). The program
        // keeps the pid (`exec`), so killing the child kills it.
        let host = |ns: &str, limit: bool, program: &Path| {
            let mut c = Command::new("ip");
            c.args([
                "netns",
                "exec",
                ns,
                "unshare",
                "--mount",
                "--propagation",
                "private",
            ])
            .args([
                "sh",
                "-c",
                "mount -t tmpfs -o size=8g tmpfs /dev/shm && exec \"$@\"",
                "sh",
            ]);
            if limit {
                c.args(["timeout", "--signal=KILL"])
                    .arg(RUN_LIMIT_SECS.to_string());
            }
            c.arg(program);
            c.current_dir(&self.dir);
            c
        };
        let in_ns = |ns: &str, program: &Path| host(ns, false, program);
        let limited = |ns: &str, program: &Path| host(ns, true, program);
        let failed = |what: &str, o: &std::process::Output| {
            // What it said last (on stderr, else on stdout), and how it ended.
            let said = |b: &[u8]| {
                let t = String::from_utf8_lossy(b).trim().to_owned();
                let start = t.char_indices().rev().nth(299).map_or(0, |(i, _)| i);
                t[start..].to_owned()
            };
            let mut text = said(&o.stderr);
            if text.is_empty() {
                text = said(&o.stdout);
            }
            format!("{what} ({}, {}): {text}", self.dir.display(), o.status)
        };
        let before = shm_files();
        let ran = if self.variant == Variant::DoraPython {
            let python = tools
                .dora_python
                .as_ref()
                .ok_or("dora-rs is not installed")?;
            let flow = self.dir.join("dataflow.yml");
            std::fs::write(&flow, self.dora_dataflow(tools, python, &result))
                .map_err(|e| format!("write {}: {e}", flow.display()))?;
            let bin = python.parent().ok_or("venv without bin")?;
            let dora = bin.join("dora");
            let path = format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            );
            let (cport, peer) = (port.to_string(), format!("tcp/{ADDR_A}:{zenoh_port}"));
            let mut cluster = Vec::new();
            let mut coordinator = in_ns(&x.hosts.a, &dora);
            coordinator
                .args(["coordinator", "--interface", ADDR_A, "--port", &cport])
                .args(["--store", "memory", "--quiet"])
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            cluster.push(
                coordinator
                    .spawn()
                    .map_err(|e| format!("dora coordinator: {e}"))?,
            );
            std::thread::sleep(std::time::Duration::from_millis(500));
            for (ns, machine) in [(&x.hosts.a, "a"), (&x.hosts.b, "b")] {
                let mut daemon = in_ns(ns, &dora);
                daemon
                    .args(["daemon", "--machine-id", machine])
                    .args(["--coordinator-addr", ADDR_A, "--coordinator-port", &cport])
                    .args(["--zenoh-peer", &peer, "--zenoh-no-multicast"])
                    .env("PATH", &path)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null());
                cluster.push(daemon.spawn().map_err(|e| format!("dora daemon: {e}"))?);
            }
            // The daemons register with the coordinator.
            std::thread::sleep(std::time::Duration::from_millis(1500));
            let mut start = limited(&x.hosts.a, &dora);
            start
                .arg("start")
                .arg(&flow)
                .args(["--attach", "--coordinator-addr", ADDR_A])
                .args(["--coordinator-port", &cport])
                .env("PATH", &path);
            let out = start.output().map_err(|e| format!("dora start: {e}"));
            let mut down = in_ns(&x.hosts.a, &dora);
            down.args(["down", "--force", "--coordinator-addr", ADDR_A])
                .args(["--coordinator-port", &cport])
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let _ = down.status();
            // Bounded: the cluster is given 5 s to go, then killed.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            for mut c in cluster {
                while c.try_wait().ok().flatten().is_none() && std::time::Instant::now() < deadline
                {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                let _ = c.kill();
                let _ = c.wait();
            }
            match out {
                Ok(o) if o.status.success() => Ok(()),
                Ok(o) => Err(failed("dora start across hosts", &o)),
                Err(e) => Err(e),
            }
        } else {
            let def = self.dir.join("pipeline.yaml");
            std::fs::write(&def, self.pipeline(tools, &result))
                .map_err(|e| format!("write {}: {e}", def.display()))?;
            let endpoint = format!("tcp/{ADDR_A}:{port}");
            let host = |ns: &str, name: &str, net: &str| {
                let mut c = limited(ns, &tools.fastio);
                c.arg("run")
                    .arg(&def)
                    .args(["--host", name, "--join-timeout", "60", net, &endpoint])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped());
                c
            };
            let a = host(&x.hosts.a, "a", "--listen")
                .spawn()
                .map_err(|e| format!("fastio run --host a: {e}"))?;
            let b = host(&x.hosts.b, "b", "--connect")
                .output()
                .map_err(|e| format!("fastio run --host b: {e}"))?;
            let a = a
                .wait_with_output()
                .map_err(|e| format!("fastio run --host a: {e}"))?;
            if !a.status.success() {
                Err(failed("fastio run --host a", &a))
            } else if !b.status.success() {
                Err(failed("fastio run --host b", &b))
            } else {
                Ok(())
            }
        };
        for f in shm_files().difference(&before) {
            if f.ends_with(".zenoh") {
                let _ = std::fs::remove_file(Path::new("/dev/shm").join(f));
            }
        }
        ran?;
        let text = std::fs::read_to_string(&result)
            .map_err(|e| format!("{}: the sink wrote no result: {e}", self.dir.display()))?;
        parse_result(&text)
    }

    fn sink_variables(&self, result: &Path) -> String {
        let mut vars = format!("RESULT: {}", yaml_str(result));
        for (k, v) in self.sink_env {
            let _ = write!(vars, ", {k}: {v:?}");
        }
        vars
    }

    /// A chain of `stages + 2` Rust operators (ours) or Python nodes
    /// (dora-rs) on one host, no recorder, our usual depth.
    pub(crate) fn chain(
        variant: Variant,
        dir: PathBuf,
        size: u64,
        frames: u64,
        pause_us: u64,
        stages: usize,
    ) -> Run<'static> {
        Run {
            variant,
            dir,
            size,
            frames,
            pause_us,
            sink_env: &[],
            depth: DEPTH,
            rust_source: false,
            recorder: Recorder::None,
            across: None,
            stages,
        }
    }

    /// Runs it on one host, watching the runner (`fastio run` or
    /// `dora run`, spawned here without a wrapper so that its own memory
    /// can be read every 5 ms): the time from its spawn to the sink's
    /// first frame, and its peak resident memory (`VmHWM`, last read
    /// before it exited). Killed after [`RUN_LIMIT_SECS`].
    pub(crate) fn start_up(&self, tools: &Tools) -> Result<StartUp, String> {
        let result = self.dir.join("result.txt");
        let mut cmd = self.runner(tools, &result)?;
        let log = self.dir.join("runner.log");
        let log =
            std::fs::File::create(&log).map_err(|e| format!("create {}: {e}", log.display()))?;
        let log2 = log.try_clone().map_err(|e| e.to_string())?;
        cmd.current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2);
        let before = shm_files();
        let t0 = wall_ns();
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("{}: spawn the runner: {e}", self.dir.display()))?;
        let deadline =
            std::time::Instant::now() + std::time::Duration::from_secs(RUN_LIMIT_SECS.into());
        let mut peak = 0;
        let status = loop {
            if let Some(hwm) = status_kib(child.id(), "VmHWM:") {
                peak = peak.max(hwm);
            }
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!(
                        "{}: the run did not end within {RUN_LIMIT_SECS} s",
                        self.dir.display()
                    ));
                }
                Err(e) => return Err(format!("{}: wait: {e}", self.dir.display())),
            }
        };
        for f in shm_files().difference(&before) {
            if f.ends_with(".zenoh") {
                let _ = std::fs::remove_file(Path::new("/dev/shm").join(f));
            }
        }
        if !status.success() {
            return Err(format!(
                "{}: the runner ended with {status} (see runner.log there)",
                self.dir.display()
            ));
        }
        let text = std::fs::read_to_string(&result)
            .map_err(|e| format!("{}: the sink wrote no result: {e}", self.dir.display()))?;
        let r = parse_result(&text)?;
        if r.count == 0 || r.first_ns < t0 {
            return Err(format!(
                "{}: the sink saw {} frames (first at {} ns, the run started at {t0} ns)",
                self.dir.display(),
                r.count,
                r.first_ns
            ));
        }
        Ok(StartUp {
            to_first_frame_ns: r.first_ns - t0,
            runner_peak_kib: peak,
            frames: r.count,
        })
    }

    /// Makes the run's directory afresh with its definition (our pipeline
    /// or dora-rs's dataflow, the sink writing to `result`), and the
    /// command that runs it there (`fastio run` or `dora run`).
    fn runner(&self, tools: &Tools, result: &Path) -> Result<Command, String> {
        let _ = std::fs::remove_dir_all(&self.dir);
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| format!("create {}: {e}", self.dir.display()))?;
        let mut cmd;
        if self.variant == Variant::DoraPython {
            let python = tools
                .dora_python
                .as_ref()
                .ok_or("dora-rs is not installed")?;
            let flow = self.dir.join("dataflow.yml");
            std::fs::write(&flow, self.dora_dataflow(tools, python, result))
                .map_err(|e| format!("write {}: {e}", flow.display()))?;
            let bin = python.parent().ok_or("venv without bin")?;
            cmd = Command::new(bin.join("dora"));
            cmd.arg("run").arg(&flow);
            let path = std::env::var("PATH").unwrap_or_default();
            cmd.env("PATH", format!("{}:{path}", bin.display()));
        } else {
            let def = self.dir.join("pipeline.yaml");
            std::fs::write(&def, self.pipeline(tools, result))
                .map_err(|e| format!("write {}: {e}", def.display()))?;
            cmd = Command::new(&tools.fastio);
            cmd.arg("run").arg(&def);
        }
        cmd.current_dir(&self.dir);
        Ok(cmd)
    }

    /// The stages' names, in order: `stage` when there is one (the hosts
    /// bench places it by that name), else `stage1`, `stage2`, ….
    fn stage_names(&self) -> Vec<String> {
        match self.stages {
            1 => vec!["stage".to_owned()],
            n => (1..=n).map(|i| format!("stage{i}")).collect(),
        }
    }

    /// Our pipeline definition.
    fn pipeline(&self, tools: &Tools, result: &Path) -> String {
        let command = |role: &str| -> String {
            if self.variant == Variant::FastioRust || (role == "source" && self.rust_source) {
                format!("[{}, {role}]", yaml_str(&tools.chainop))
            } else {
                format!(
                    "[{}, {}, {role}]",
                    yaml_str(&tools.python),
                    yaml_str(&tools.scripts.join("chain_fastio.py"))
                )
            }
        };
        let port = |dir: &str, from: &str| {
            format!(
                "  {dir}:\n  - {{{from}name: frame, type: array, element-type: uint8, shape: [{}]}}\n",
                self.size
            )
        };
        let mut y = String::from(
            "api-version: 0.5.0\nname: chain-bench\nversion: 1.0.0\ndescription: The chain bench.\n",
        );
        if self.across.is_some() {
            y.push_str("placement:\n  default: a\n  hosts:\n    b: [stage]\n");
        }
        y.push_str("operators:\n");
        let _ = write!(
            y,
            "- name: source\n  container:\n    image: bench\n    command: {}\n    \
             variables: {{SIZE: \"{}\", PAUSE_US: \"{}\"}}\n{}",
            command("source"),
            self.size,
            self.pause_us,
            port("output", "")
        );
        let names = self.stage_names();
        let mut from = "source";
        for name in &names {
            let _ = write!(
                y,
                "- name: {name}\n  container:\n    image: bench\n    command: {}\n{}{}",
                command("stage"),
                port("input", &format!("from: {from}, ")),
                port("output", "")
            );
            from = name;
        }
        let _ = write!(
            y,
            "- name: sink\n  container:\n    image: bench\n    command: {}\n    \
             variables: {{{}}}\n{}",
            command("sink"),
            self.sink_variables(result),
            port("input", &format!("from: {from}, "))
        );
        let _ = write!(
            y,
            "streaming:\n  depth: {}\n  frames: {}\n",
            self.depth, self.frames
        );
        if self.recorder == Recorder::Lossless {
            y.push_str("  record: lossless.mcap\n");
        }
        y
    }

    /// dora-rs's dataflow for the same chain.
    fn dora_dataflow(&self, tools: &Tools, python: &Path, result: &Path) -> String {
        let script = tools.scripts.join("chain_dora.py");
        let node = |id: &str, input: Option<&str>, env: String| {
            let role = if id.starts_with("stage") { "stage" } else { id };
            let mut n = format!(
                "  - id: {id}\n    path: {}\n    args: {:?}\n    env: {{{env}}}\n",
                yaml_str(python),
                format!("{} {role}", script.display())
            );
            if self.across.is_some() {
                let machine = if id == "stage" { "b" } else { "a" };
                let _ = writeln!(n, "    deploy:\n      machine: {machine}");
            }
            if let Some(from) = input {
                let _ = writeln!(
                    n,
                    "    inputs:\n      frame: {{source: {from}/frame, queue_size: {}}}",
                    self.frames
                );
            }
            if id != "sink" {
                n.push_str("    outputs: [frame]\n");
            }
            n
        };
        let mut y = String::from("nodes:\n");
        y.push_str(&node(
            "source",
            None,
            format!(
                "SIZE: \"{}\", FRAMES: \"{}\", PAUSE_US: \"{}\"",
                self.size, self.frames, self.pause_us
            ),
        ));
        let names = self.stage_names();
        let mut from = "source";
        for name in &names {
            y.push_str(&node(name, Some(from), String::new()));
            from = name;
        }
        y.push_str(&node("sink", Some(from), self.sink_variables(result)));
        y
    }
}

/// The names in /dev/shm now.
fn shm_files() -> std::collections::BTreeSet<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Latency and throughput of one variant at one size.
pub(crate) struct Measured {
    pub(crate) p50_ns: f64,
    pub(crate) p99_ns: f64,
    /// The median round's throughput (frames per second).
    pub(crate) fps: f64,
    /// The slowest and the fastest round's throughput.
    pub(crate) fps_range: (f64, f64),
    /// The lowest and the highest of the rounds' own p99 latencies.
    pub(crate) p99_range: (f64, f64),
    /// Frames the sink never saw, out of order, or not what they said.
    pub(crate) lost: u64,
    pub(crate) disorder: u64,
    pub(crate) torn: u64,
}

/// One round of a variant at a size: a paced run (latency) and an
/// unpaced one (throughput).
pub(crate) struct Round {
    /// Latencies after the first [`WARMUP`] frames.
    latencies: Vec<u64>,
    fps: f64,
    lost: u64,
    disorder: u64,
    torn: u64,
}

impl Measured {
    /// Rounds pooled: latencies of all rounds together, the median
    /// round's throughput, every frame lost or out of order counted.
    pub(crate) fn pooled(rounds: &[Round]) -> Measured {
        let mut lat: Vec<u64> = rounds
            .iter()
            .flat_map(|r| r.latencies.iter().copied())
            .collect();
        lat.sort_unstable();
        let p99s: Vec<f64> = rounds
            .iter()
            .map(|r| {
                let mut l = r.latencies.clone();
                l.sort_unstable();
                percentile(&l, 0.99)
            })
            .collect();
        let mut fps: Vec<f64> = rounds.iter().map(|r| r.fps).collect();
        fps.sort_by(f64::total_cmp);
        let median = match fps.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => fps[n / 2],
            n => (fps[n / 2 - 1] + fps[n / 2]) / 2.0,
        };
        Measured {
            p50_ns: percentile(&lat, 0.5),
            p99_ns: percentile(&lat, 0.99),
            fps: median,
            fps_range: (
                fps.first().copied().unwrap_or(f64::NAN),
                fps.last().copied().unwrap_or(f64::NAN),
            ),
            p99_range: (
                p99s.iter().copied().fold(f64::INFINITY, f64::min),
                p99s.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            ),
            lost: rounds.iter().map(|r| r.lost).sum(),
            disorder: rounds.iter().map(|r| r.disorder).sum(),
            torn: rounds.iter().map(|r| r.torn).sum(),
        }
    }
}

/// One round (see [`round`]) of a variant, alone.
fn measure(
    tools: &Tools,
    variant: Variant,
    size: (&str, u64, u64, u64, u64),
    across: Option<&Across<'_>>,
) -> Result<Measured, String> {
    Ok(Measured::pooled(&[round(tools, variant, size, across, 1)?]))
}

/// A paced and an unpaced run of `variant` at `size`, with `stages`
/// stages between source and sink; fails if a frame of ours was lost,
/// out of order or torn.
pub(crate) fn round(
    tools: &Tools,
    variant: Variant,
    size: (&str, u64, u64, u64, u64),
    across: Option<&Across<'_>>,
    stages: usize,
) -> Result<Round, String> {
    let (label, bytes, lat_frames, pause_us, tp_frames) = size;
    let base = crate::bench::target_dir().join("bench-chain");
    let hosts = match (across.is_some(), stages) {
        (true, _) => "-across".to_owned(),
        (false, 1) => String::new(),
        (false, n) => format!("-{}ops", n + 2),
    };
    let paced = Run {
        variant,
        dir: base.join(format!("{}-{label}{hosts}-latency", variant.slug())),
        size: bytes,
        frames: lat_frames,
        pause_us,
        sink_env: &[],
        depth: DEPTH,
        rust_source: false,
        recorder: Recorder::None,
        across,
        stages,
    }
    .go(tools)?;
    let flat_out = Run {
        variant,
        dir: base.join(format!("{}-{label}{hosts}-throughput", variant.slug())),
        size: bytes,
        frames: tp_frames,
        pause_us: 0,
        sink_env: &[],
        depth: DEPTH,
        rust_source: false,
        recorder: Recorder::None,
        across,
        stages,
    }
    .go(tools)?;
    let secs = flat_out.last_ns.saturating_sub(flat_out.first_ns) as f64 / 1e9;
    let r = Round {
        latencies: paced.latencies.iter().skip(WARMUP).copied().collect(),
        disorder: paced.disorder + flat_out.disorder,
        torn: paced.torn + flat_out.torn,
        fps: flat_out.count.saturating_sub(1) as f64 / secs,
        lost: (lat_frames - paced.count.min(lat_frames))
            + (tp_frames - flat_out.count.min(tp_frames)),
    };
    if variant != Variant::DoraPython && r.lost + r.disorder + r.torn > 0 {
        return Err(format!(
            "{} at {label}: {} frames lost, {} out of order, {} torn: our streams must deliver \
             every frame, in order, whole",
            variant.label(),
            r.lost,
            r.disorder,
            r.torn
        ));
    }
    Ok(r)
}

/// `text` fit for a cell of a markdown table: no `|`, no line breaks, at
/// most `chars` characters.
fn table_cell(text: &str, chars: usize) -> String {
    text.replace('|', "/")
        .replace('\n', " ")
        .chars()
        .take(chars)
        .collect()
}

pub(crate) fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "MISSED" }
}

/// Builds what the runs need, runs them, and writes the section of the
/// report (goals with met or missed) into `out`.
/// Only the recorder bench (`cargo xtask bench chain recorder`).
pub(crate) fn run_recorders(out: &mut String) -> Result<(), String> {
    build_chain_binaries()?;
    recorders(&Tools::new(None), out)
}

/// Only the viewer bench (`cargo xtask bench chain viewer`).
pub(crate) fn run_viewer(out: &mut String) -> Result<(), String> {
    build_chain_binaries()?;
    crate::node::foxglove_client()?;
    viewer(&Tools::new(None), out)
}

/// A viewer beside the unpaced chain (issue 53): `fastio view` with four
/// clients (three reading every channel, one never reading) on for
/// `RECORDER_ON`, off as long, in turns; the source's median rate over
/// 1,000-frame blocks with the viewer against without, in the same run,
/// and the viewer's most resident memory.
fn viewer(tools: &Tools, out: &mut String) -> Result<(), String> {
    const FRAMES: u64 = 1_500_000;
    const SIZE: u64 = 64 << 10;
    const RUNS: usize = 3;
    let dir = crate::bench::target_dir()
        .join("bench-chain")
        .join("viewer");
    let median = median_of;
    let mut ratios = Vec::new();
    let mut runs = String::new();
    let mut peak = 0u64;
    for _ in 0..RUNS {
        let r = Run {
            variant: Variant::FastioRust,
            dir: dir.clone(),
            size: SIZE,
            frames: FRAMES,
            pause_us: 0,
            sink_env: &[],
            depth: DEPTH,
            rust_source: true,
            recorder: Recorder::Viewer,
            across: None,
            stages: 1,
        }
        .go(tools)?;
        if r.count != FRAMES || r.disorder + r.torn > 0 {
            return Err(format!(
                "viewer bench: {} of {FRAMES} frames, {} out of order, {} torn",
                r.count, r.disorder, r.torn
            ));
        }
        ratios.push(with_against_without(&r, "viewer", &mut runs)?);
        peak = peak.max(r.viewer_peak_kib);
    }
    let ratio = median(ratios);
    let _ = writeln!(
        out,
        "\nA viewer beside the unpaced chain at 64 KiB (Rust operators; {RUNS} runs of {FRAMES} \
         frames, `fastio view` with four clients of Foxglove's protocol, three reading every \
         channel and one never reading, on for {:.1} s and off for {:.1} s in turns; the \
         source's median rate over 1,000-frame blocks with it against without it, in the same \
         run):\n  x{ratio:.3} (goal >= 0.95, never slows the source: {}); the runs: {runs}; the \
         viewer's most resident memory {:.1} MiB",
        RECORDER_ON.as_secs_f64(),
        RECORDER_OFF.as_secs_f64(),
        verdict(ratio >= 0.95),
        peak as f64 / 1024.0
    );
    Ok(())
}

pub(crate) fn build_chain_binaries() -> Result<(), String> {
    Step::new(
        "chain binaries",
        cargo([
            "build",
            "--release",
            "-p",
            "fastio-cli",
            "-p",
            "fastio-examples",
        ]),
    )
    .run()
    .map(drop)
}

pub(crate) fn run(report: bool, out: &mut String) -> Result<Vec<Peer>, String> {
    build_chain_binaries()?;
    if !crate::python::package_ready(report)? {
        return Err(
            "the fastio Python package is not built from the current sources (run `cargo xtask python` first)"
                .into(),
        );
    }
    let mut peers = Vec::new();
    let dora_python = dora_peer(
        &mut peers,
        "dora-rs",
        format!(
            "{} from PyPI in target/venv-dora, `dora run` (crates/fastio-python/bench/chain_dora.py)",
            DORA.join(" ")
        ),
    );
    let tools = Tools::new(dora_python);
    let _ = writeln!(
        out,
        "\nA 3-operator stream (source → stage → sink), whole pipelines, same run \
         (latency: paced source, p50/p99 after {WARMUP} frames; throughput: unpaced):"
    );
    for size in SIZES {
        let mut rows = Vec::new();
        for v in Variant::ALL {
            if v == Variant::DoraPython && tools.dora_python.is_none() {
                continue;
            }
            let m = measure(&tools, v, size, None)?;
            let _ = writeln!(
                out,
                "  {:<6} {:<26} latency p50 {:>10}  p99 {:>10}  throughput {:>9.1} frames/s  lost {}  out of order {}  torn {}",
                size.0,
                v.label(),
                human_time(m.p50_ns),
                human_time(m.p99_ns),
                m.fps,
                m.lost,
                m.disorder,
                m.torn
            );
            rows.push((v, m));
        }
        let dora = rows.iter().find(|(v, _)| *v == Variant::DoraPython);
        if let Some((_, d)) = dora {
            for (v, m) in rows.iter().filter(|(v, _)| *v != Variant::DoraPython) {
                let (p50, p99, tp) = (m.p50_ns / d.p50_ns, m.p99_ns / d.p99_ns, m.fps / d.fps);
                let _ = writeln!(
                    out,
                    "    goal {}, {} vs dora-rs: p50 x{p50:.3} (<= 0.5: {})  p99 x{p99:.3} (<= 0.5: {})  \
                     throughput x{tp:.2} (>= 2: {})",
                    size.0,
                    v.label(),
                    verdict(p50 <= 0.5),
                    verdict(p99 <= 0.5),
                    verdict(tp >= 2.0)
                );
            }
        }
    }
    python_overhead(&tools, out)?;
    rss(&tools, out)?;
    recorders(&tools, out)?;
    // The viewer beside the chain (issue 53), with Foxglove's protocol
    // client from npm.
    match crate::node::foxglove_client() {
        Ok(_) => viewer(&tools, out)?,
        Err(e) => {
            let _ = writeln!(
                out,
                "\nThe viewer beside the chain was not measured: its Foxglove client could not be \
                 installed ({e})."
            );
        }
    }
    Ok(peers)
}

/// Issue 30: the chain with its stage on another namespace host (the
/// source and the sink on host `a`, the stage on `b`: every frame crosses
/// twice), ours (`fastio run --host` on each, Rust operators) beside
/// dora-rs 1.x (a coordinator and a daemon per host, Python nodes), at
/// each size; written into `out` as markdown (a section of the hosts
/// bench). Goal: ≥ ×2 dora-rs's throughput, ≤ ×0.5 its latency, no frame
/// of ours lost; whatever dora-rs does is reported as it is (a run of
/// dora-rs that fails is a row saying so).
pub(crate) fn across_hosts(
    hosts: &crate::bench_hosts::Hosts,
    port: &mut u16,
    out: &mut String,
) -> Result<Vec<Peer>, String> {
    build_chain_binaries()?;
    let mut peers = Vec::new();
    let dora_python = dora_peer(
        &mut peers,
        "dora-rs (two hosts)",
        format!(
            "{} from PyPI in target/venv-dora: `dora coordinator`, `dora daemon --machine-id` \
             per namespace host meeting at `--zenoh-peer`, `dora start --attach`",
            DORA.join(" ")
        ),
    );
    let tools = Tools::new(dora_python);
    *port += 10;
    let across = Across {
        hosts,
        port: std::cell::Cell::new(*port),
    };
    out.push_str(&format!(
        "\nThe chain bench's 3-operator stream across the two hosts: source and sink on host \
         a, the stage on host b (every frame crosses the link twice; latency from the source's \
         timestamp to the sink on one clock; each host's processes in a mount namespace with a \
         private /dev/shm, so nothing passes between hosts but the network), ours with `fastio run --host` on each host (Rust \
         operators), dora-rs 1.x as its documentation sets a cluster up (a coordinator, a \
         daemon per host with `--zenoh-peer`, nodes placed with `deploy: machine:`, Python \
         nodes). Latency with a paced source, throughput unpaced; depth 4 for ours, dora-rs's \
         input queues as long as the run. Each size in {ACROSS_ROUNDS} rounds, ours and \
         dora-rs taking turns (ours first in rounds 1, 3, …, dora-rs in rounds 2, 4, …): latencies of \
         the rounds pooled (each round's own p99 beside), throughput the median round's, frames \
         lost summed; each run starts once the cores were 90% idle over 200 ms (at most 10 s).\n\n\
         | frame | who | latency p50 / p99 | throughput | lost / out of order / torn | goal vs dora-rs |\n\
         |---|---|---|---|---|---|\n",
    ));
    for size in SIZES {
        // Rounds taking turns (ours, dora-rs; dora-rs, ours; …): this
        // machine's speed drifts by a fifth or more over minutes, and a
        // pair measured once lands wherever the drift was.
        let mut ours = Vec::new();
        let (mut dora, mut dora_failed) = (Vec::new(), Vec::new());
        for r in 0..ACROSS_ROUNDS {
            let mut turn = [Variant::FastioRust, Variant::DoraPython];
            if r % 2 == 1 {
                turn.reverse();
            }
            for v in turn {
                match v {
                    Variant::DoraPython if tools.dora_python.is_some() => {
                        match round(&tools, v, size, Some(&across), 1) {
                            Ok(d) => dora.push(d),
                            Err(e) => dora_failed.push(e),
                        }
                    }
                    Variant::DoraPython => {}
                    _ => ours.push(round(&tools, v, size, Some(&across), 1)?),
                }
            }
        }
        let ours = Measured::pooled(&ours);
        let dora = if tools.dora_python.is_none() {
            None
        } else if dora.is_empty() {
            Some(Err(dora_failed.join("; ")))
        } else {
            Some(Ok(Measured::pooled(&dora)))
        };
        let row = |who: &str, m: &Measured, goal: &str| {
            format!(
                "| {} | {who} | {} / {} (rounds' p99 {}–{}) | {:.1} frames/s ({:.0} MB/s; rounds {:.0}–{:.0}) | {} / {} / {} | {goal} |\n",
                size.0,
                human_time(m.p50_ns),
                human_time(m.p99_ns),
                human_time(m.p99_range.0),
                human_time(m.p99_range.1),
                m.fps,
                m.fps * size.1 as f64 / 1e6,
                m.fps_range.0,
                m.fps_range.1,
                m.lost,
                m.disorder,
                m.torn
            )
        };
        let goal = match &dora {
            Some(Ok(d)) => {
                let (p50, p99, tp) = (
                    ours.p50_ns / d.p50_ns,
                    ours.p99_ns / d.p99_ns,
                    ours.fps / d.fps,
                );
                let ok = |b: bool| if b { "met" } else { "**missed**" };
                format!(
                    "p50 ×{p50:.3} ({}), p99 ×{p99:.3} ({}), throughput ×{tp:.2} ({})",
                    ok(p50 <= 0.5),
                    ok(p99 <= 0.5),
                    ok(tp >= 2.0)
                )
            }
            Some(Err(_)) => "dora-rs did not finish (below)".into(),
            None => "-".into(),
        };
        out.push_str(&row("fastio, Rust operators", &ours, &goal));
        match dora {
            Some(Ok(d)) => {
                let failed = match dora_failed.first() {
                    Some(e) => format!(
                        "{} of {ACROSS_ROUNDS} rounds failed: {}",
                        dora_failed.len(),
                        table_cell(e, 200)
                    ),
                    None => String::new(),
                };
                out.push_str(&row("dora-rs, Python nodes", &d, &failed))
            }
            Some(Err(e)) => {
                let e = table_cell(&e, 300);
                out.push_str(&format!(
                    "| {} | dora-rs, Python nodes | failed: {e} | - | - | |\n",
                    size.0
                ));
            }
            None => {}
        }
    }
    *port = across.port.get();
    Ok(peers)
}

/// Issue 33: does a lossy recorder slow the source? The unpaced chain at
/// 64 KiB, long runs with `fastio record` beside them in turns (on for
/// `RECORDER_ON`, off for as long): the source's rate in the stretches with
/// it against the stretches without it, *within one run* (runs of the
/// chain differ by a third on this machine, stretches of one run far
/// less). And the driver's lossless recorder against none (it holds
/// frames: as fast as the disk takes them).
fn recorders(tools: &Tools, out: &mut String) -> Result<(), String> {
    const FRAMES: u64 = 1_500_000;
    const LOSSLESS_FRAMES: u64 = 10_000;
    const SIZE: u64 = 64 << 10;
    const RUNS: usize = 5;
    let base = crate::bench::target_dir().join("bench-chain");
    let run = |recorder: Recorder, frames: u64| -> Result<SinkResult, String> {
        let dir = base.join(format!("recorder-{recorder:?}").to_lowercase());
        let r = Run {
            variant: Variant::FastioRust,
            dir,
            size: SIZE,
            frames,
            pause_us: 0,
            sink_env: &[],
            depth: DEPTH,
            rust_source: true,
            recorder,
            across: None,
            stages: 1,
        }
        .go(tools)?;
        if r.count != frames || r.disorder + r.torn > 0 {
            return Err(format!(
                "recorder bench ({recorder:?}): {} of {frames} frames, {} out of order, {} torn",
                r.count, r.disorder, r.torn
            ));
        }
        Ok(r)
    };
    let median = median_of;
    let mut ratios = Vec::new();
    let mut runs = String::new();
    for _ in 0..RUNS {
        let r = run(Recorder::Lossy, FRAMES)?;
        ratios.push(with_against_without(&r, "recorder", &mut runs)?);
    }
    let lossy = median(ratios);
    let info = {
        let f = base.join("recorder-lossy").join("lossy.mcap");
        let mut info = Command::new(&tools.fastio);
        info.args(["record", "--info"]).arg(&f).arg("--json");
        let said = Step::new("recorder bench info lossy", info).run()?;
        let json = said
            .lines()
            .rev()
            .find(|l| l.starts_with('{'))
            .unwrap_or("{}");
        let v: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
        let c = &v["counts"];
        format!(
            "its last window kept {} source frames and skipped {}",
            c["source/frame.frames"].as_str().unwrap_or("?"),
            c["source/frame.skipped"].as_str().unwrap_or("?")
        )
    };
    let _ = writeln!(
        out,
        "\nA lossy recorder beside the unpaced chain at 64 KiB (Rust operators; {RUNS} runs of \
         {FRAMES} frames, `fastio record` (SCHED_IDLE; once behind, a frame every 10 ms) on for {:.1} s \
         and off for {:.1} s in turns; the source's median rate over 1,000-frame blocks with it \
         against without it, in the same run):\n  x{lossy:.3} (goal >= 0.95, never slows the \
         source: {}); the runs: {runs}; {info}",
        RECORDER_ON.as_secs_f64(),
        RECORDER_OFF.as_secs_f64(),
        verdict(lossy >= 0.95),
    );
    // The lossless recorder: its own runs against runs without one, in
    // turns.
    let (mut none, mut lossless) = (Vec::new(), Vec::new());
    let fps = |r: &SinkResult| {
        r.count.saturating_sub(1) as f64
            / (r.last_ns.saturating_sub(r.first_ns).max(1) as f64 / 1e9)
    };
    for _ in 0..RUNS {
        none.push(fps(&run(Recorder::None, 200_000)?));
        lossless.push(fps(&run(Recorder::Lossless, LOSSLESS_FRAMES)?));
    }
    let (n, l) = (median(none), median(lossless));
    let _ = writeln!(
        out,
        "  lossless `streaming.record` ({LOSSLESS_FRAMES} frames, every one written): {l:.0} \
         frames/s against {n:.0} without = x{:.2} (as fast as the disk takes them)",
        l / n
    );
    Ok(())
}

/// The frame loop's own cost, Python against Rust: 2,000 frames of 4 KiB
/// all published before the sink starts looping.
fn python_overhead(tools: &Tools, out: &mut String) -> Result<(), String> {
    const FRAMES: u64 = 2_000;
    let base = crate::bench::target_dir().join("bench-chain");
    let env = [("WAIT_MS", "1500".to_owned())];
    let mut per_frame = Vec::new();
    for v in [Variant::FastioRust, Variant::FastioPython] {
        let r = Run {
            variant: v,
            dir: base.join(format!("{}-loop", v.slug())),
            size: 4096,
            frames: FRAMES,
            pause_us: 0,
            sink_env: &env,
            depth: FRAMES,
            rust_source: true,
            recorder: Recorder::None,
            across: None,
            stages: 1,
        }
        .go(tools)?;
        if r.count != FRAMES {
            return Err(format!(
                "{}: the loop sink saw {} of {FRAMES} frames",
                v.label(),
                r.count
            ));
        }
        let ns = r.loop_ns.ok_or("the loop sink wrote no loop_ns")? as f64 / FRAMES as f64;
        per_frame.push(ns);
    }
    let over = per_frame[1] - per_frame[0];
    let _ = writeln!(
        out,
        "  frame loop per frame (next frame + input view + release, 4 KiB, frames waiting): \
         Rust {}  Python {}  Python over Rust {}  goal <= 3 us: {}",
        human_time(per_frame[0]),
        human_time(per_frame[1]),
        human_time(over),
        verdict(over <= 3000.0)
    );
    Ok(())
}

/// Resident memory of a consumer over 100,000 frames, Rust and Python:
/// at frame 100,000 and at frame 200,000 (the first 100,000 fill the
/// operator's fixed-size statistics reservoir, 2 × 64 Ki samples); flat
/// means it grew less than 256 kB.
fn rss(tools: &Tools, out: &mut String) -> Result<(), String> {
    const AFTER: u64 = 100_000;
    const FRAMES: u64 = 2 * AFTER;
    let base = crate::bench::target_dir().join("bench-chain");
    let env = [("RSS_AFTER", AFTER.to_string())];
    for v in [Variant::FastioRust, Variant::FastioPython] {
        let r = Run {
            variant: v,
            dir: base.join(format!("{}-rss", v.slug())),
            size: 4096,
            frames: FRAMES,
            pause_us: 0,
            sink_env: &env,
            depth: DEPTH,
            rust_source: true,
            recorder: Recorder::None,
            across: None,
            stages: 1,
        }
        .go(tools)?;
        let (at, end) = (
            r.rss_kb_at.ok_or("no rss_kb_at")?,
            r.rss_kb_end.ok_or("no rss_kb_end")?,
        );
        let grew = end.saturating_sub(at);
        let _ = writeln!(
            out,
            "  consumer RSS over {AFTER} frames of 4 KiB, {}: {at} kB at frame {AFTER}, {end} kB at frame \
             {FRAMES} (grew {grew} kB) flat (< 256 kB): {}",
            v.label(),
            verdict(r.count == FRAMES && grew < 256)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_a_sink_writes() {
        let r = parse_result("count 3\nfirst_ns 10\nlast_ns 30\nlat_ns 5 6 7\n").unwrap();
        assert_eq!((r.count, r.first_ns, r.last_ns), (3, 10, 30));
        assert_eq!(r.latencies, [5, 6, 7]);
        assert!(parse_result("count x\n").is_err());
        let r = parse_result("count 2\nrss_kb_at 100\nrss_kb_end 120\n").unwrap();
        assert_eq!((r.rss_kb_at, r.rss_kb_end), (Some(100), Some(120)));
    }

    #[test]
    fn rounds_pool_latencies_and_take_the_median_rate() {
        let round = |latencies: Vec<u64>, fps: f64, lost: u64| Round {
            latencies,
            fps,
            lost,
            disorder: lost / 2,
            torn: 0,
        };
        let m = Measured::pooled(&[
            round(vec![30, 10], 900.0, 2),
            round(vec![20, 50], 700.0, 0),
            round(vec![40], 1_500.0, 5),
        ]);
        assert_eq!(m.p50_ns, 30.0);
        assert_eq!(m.p99_ns, 50.0);
        assert_eq!(m.fps, 900.0);
        assert_eq!(m.fps_range, (700.0, 1_500.0));
        assert_eq!(m.p99_range, (30.0, 50.0));
        assert_eq!((m.lost, m.disorder, m.torn), (7, 3, 0));
        let even = Measured::pooled(&[round(vec![1], 100.0, 0), round(vec![2], 300.0, 0)]);
        assert_eq!(even.fps, 200.0);
    }

    #[test]
    fn percentiles_of_sorted_samples() {
        let s: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&s, 0.5), 51.0);
        assert_eq!(percentile(&s, 0.99), 99.0);
        assert!(percentile(&[], 0.5).is_nan());
    }
}
