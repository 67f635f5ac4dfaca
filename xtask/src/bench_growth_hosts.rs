//! Hosts in one run (issue 52, part 3; a part of `cargo xtask bench
//! growth`): a chain of n operators on n namespace hosts, one each
//! (source on `h0`, stages on `h1` …, the sink on the last), n = 2, 3 and
//! 4, every hop across a link; hosts meet on a bridge in a namespace of
//! its own (each host its network namespace and its own `/dev/shm`).
//! Measured per n: the time from spawning every host's `fastio run` to the
//! sink's first frame (joining, planning and the operators' start), and a
//! paced stream's latency end to end (p50/p99), per hop. Goals: the start
//! within 1 s per host; the latency per hop flat (within ×1.3 from the
//! fewest hosts to the most).

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::bench::human_time;
use crate::bench_chain::{percentile, verdict, wall_ns};
use crate::bench_hosts::ip;

/// Hosts per run, in order.
pub(crate) const HOST_COUNTS: [usize; 3] = [2, 3, 4];

/// Rounds per count (latencies pooled, the median start).
const ROUNDS: usize = 2;

/// The stream: frames of this many bytes, this many, this far apart (µs).
const FRAME_BYTES: u64 = 64 << 10;
const FRAMES: u64 = 300;
const PAUSE_US: u64 = 3_000;

/// Frames left out of the latency (start-up).
const WARMUP: usize = 20;

/// One count's figures.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HostRow {
    pub(crate) hosts: usize,
    /// Spawning every host to the sink's first frame (median of rounds).
    pub(crate) start_ns: f64,
    pub(crate) p50_ns: f64,
    pub(crate) p99_ns: f64,
}

impl HostRow {
    /// End-to-end p50 divided by the links a frame crosses.
    pub(crate) fn p50_per_hop_ns(&self) -> f64 {
        self.p50_ns / (self.hosts - 1) as f64
    }
}

/// `n` namespace hosts on a bridge (removed when dropped).
struct Mesh {
    switch: String,
    hosts: Vec<String>,
}

fn addr(i: usize) -> String {
    format!("10.79.0.{}", i + 1)
}

impl Mesh {
    fn new(n: usize) -> Result<Mesh, String> {
        let id = std::process::id();
        let mesh = Mesh {
            switch: format!("fiogrow{id}sw"),
            hosts: (0..n).map(|i| format!("fiogrow{id}h{i}")).collect(),
        };
        ip(&["netns", "add", &mesh.switch])
            .map_err(|e| format!("{e} (the hosts rows need root)"))?;
        ip(&["-n", &mesh.switch, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &mesh.switch, "link", "set", "br0", "up"])?;
        for (i, ns) in mesh.hosts.iter().enumerate() {
            let port = format!("p{i}");
            ip(&["netns", "add", ns])?;
            ip(&[
                "-n",
                ns,
                "link",
                "add",
                "eth0",
                "type",
                "veth",
                "peer",
                "name",
                &port,
                "netns",
                &mesh.switch,
            ])?;
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{}/24", addr(i)),
                "dev",
                "eth0",
            ])?;
            ip(&["-n", ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
            ip(&["-n", &mesh.switch, "link", "set", &port, "master", "br0"])?;
            ip(&["-n", &mesh.switch, "link", "set", &port, "up"])?;
        }
        Ok(mesh)
    }
}

impl Drop for Mesh {
    fn drop(&mut self) {
        for ns in &self.hosts {
            let _ = ip(&["netns", "del", ns]);
        }
        let _ = ip(&["netns", "del", &self.switch]);
    }
}

/// The chain of `n` operators, one per host.
fn chain_yaml(chainop: &Path, n: usize, result: &Path) -> String {
    let port = |from: &str| {
        format!(
            "  - {{{from}name: frame, type: array, element-type: uint8, shape: [{FRAME_BYTES}]}}\n"
        )
    };
    let c = chainop.display().to_string();
    let mut y = String::from(
        "api-version: 0.5.0\nname: hosts-growth\nversion: 1.0.0\ndescription: hosts in one run\n\
         placement:\n  default: h0\n  hosts:\n",
    );
    for i in 1..n {
        let _ = writeln!(y, "    h{i}: [op{i}]");
    }
    y.push_str("operators:\n");
    for i in 0..n {
        let (role, vars) = match i {
            0 => (
                "source",
                format!("SIZE: \"{FRAME_BYTES}\", PAUSE_US: \"{PAUSE_US}\""),
            ),
            i if i == n - 1 => (
                "sink",
                format!("RESULT: {:?}", result.display().to_string()),
            ),
            _ => ("stage", String::new()),
        };
        let _ = write!(
            y,
            "- name: op{i}\n  container:\n    image: bench\n    command: [{c:?}, {role}]\n    \
             variables: {{{vars}}}\n"
        );
        if i > 0 {
            let _ = write!(y, "  input:\n{}", port(&format!("from: op{}, ", i - 1)));
        }
        if i < n - 1 {
            let _ = write!(y, "  output:\n{}", port(""));
        }
    }
    let _ = write!(y, "streaming:\n  depth: 4\n  frames: {FRAMES}\n");
    y
}

/// One run on `n` hosts: (start ns, latencies after the warm-up).
fn round(
    fastio: &Path,
    chainop: &Path,
    n: usize,
    port: u16,
    dir: &Path,
) -> Result<(u64, Vec<u64>), String> {
    let mesh = Mesh::new(n)?;
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let result = dir.join("result.txt");
    let def = dir.join("pipeline.yaml");
    std::fs::write(&def, chain_yaml(chainop, n, &result))
        .map_err(|e| format!("write {}: {e}", def.display()))?;
    let t0 = wall_ns();
    let mut children = Vec::new();
    for (i, ns) in mesh.hosts.iter().enumerate() {
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
            "mount -t tmpfs -o size=2g tmpfs /dev/shm && exec \"$@\"",
            "sh",
            "timeout",
            "--signal=KILL",
            "120",
        ])
        .arg(fastio)
        .arg("run")
        .arg(&def)
        .args(["--host", &format!("h{i}"), "--join-timeout", "60"])
        .args(["--listen", &format!("tcp/{}:{port}", addr(i))]);
        for j in 0..i {
            c.args(["--connect", &format!("tcp/{}:{port}", addr(j))]);
        }
        c.current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        children.push(c.spawn().map_err(|e| format!("fastio on h{i}: {e}"))?);
    }
    let mut failed = Vec::new();
    for (i, child) in children.into_iter().enumerate() {
        let o = child
            .wait_with_output()
            .map_err(|e| format!("fastio on h{i}: {e}"))?;
        if !o.status.success() {
            failed.push(format!(
                "h{i} ({}): {}",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
    }
    drop(mesh);
    if !failed.is_empty() {
        return Err(format!("{n} hosts: {}", failed.join("; ")));
    }
    let text = std::fs::read_to_string(&result)
        .map_err(|e| format!("{n} hosts: the sink wrote no result: {e}"))?;
    let r = crate::bench_chain::parse_result(&text)?;
    if r.count != FRAMES || r.disorder + r.torn > 0 || r.first_ns < t0 {
        return Err(format!(
            "{n} hosts: the sink saw {} of {FRAMES} frames, {} out of order, {} torn",
            r.count, r.disorder, r.torn
        ));
    }
    Ok((
        r.first_ns - t0,
        r.latencies.into_iter().skip(WARMUP).collect(),
    ))
}

/// Every count's rows (the release `fastio` and `fio-chainop` built).
pub(crate) fn run(fastio: &Path, chainop: &Path) -> Result<Vec<HostRow>, String> {
    let base = crate::bench::target_dir().join("bench-growth");
    let mut rows = Vec::new();
    let mut port = 7700u16;
    for n in HOST_COUNTS {
        let mut starts = Vec::new();
        let mut lat = Vec::new();
        for r in 0..ROUNDS {
            port += 1;
            let (start, l) = round(
                fastio,
                chainop,
                n,
                port,
                &base.join(format!("hosts-{n}-{r}")),
            )?;
            starts.push(start);
            lat.extend(l);
        }
        starts.sort_unstable();
        lat.sort_unstable();
        let row = HostRow {
            hosts: n,
            start_ns: starts[starts.len() / 2] as f64,
            p50_ns: percentile(&lat, 0.5),
            p99_ns: percentile(&lat, 0.99),
        };
        println!(
            "growth: {n} hosts: start {} latency p50 {} p99 {} ({} per hop)",
            human_time(row.start_ns),
            human_time(row.p50_ns),
            human_time(row.p99_ns),
            human_time(row.p50_per_hop_ns())
        );
        rows.push(row);
    }
    Ok(rows)
}

/// The report's part for these rows.
pub(crate) fn markdown(rows: &[HostRow], w: &mut String, plots: &[&str]) {
    let _ = writeln!(
        w,
        "### Hosts in one run\n\nA chain of n operators on n namespace hosts, one each (every \
         hop across a link; hosts on a bridge, each its own `/dev/shm`; plain TCP): the time \
         from spawning every host's `fastio run` to the sink's first frame (joining, planning, \
         the operators' start), and a paced stream's latency ({FRAMES} frames of 64 KiB, one \
         every {} ms, p50/p99 after {WARMUP}, {ROUNDS} rounds pooled; the start is the median \
         round's).\n",
        PAUSE_US / 1000
    );
    if plots.contains(&"growth_hosts.svg") {
        let _ = writeln!(w, "![growth_hosts.svg](growth_hosts.svg)\n");
    }
    let _ = writeln!(
        w,
        "| hosts | start to the first frame | per host | latency p50 | p99 | p50 per hop |\n\
         |---|---|---|---|---|---|"
    );
    for r in rows {
        let _ = writeln!(
            w,
            "| {} | {} | {} | {} | {} | {} |",
            r.hosts,
            human_time(r.start_ns),
            human_time(r.start_ns / r.hosts as f64),
            human_time(r.p50_ns),
            human_time(r.p99_ns),
            human_time(r.p50_per_hop_ns())
        );
    }
    let mut goals = Vec::new();
    if let Some(slowest) = rows
        .iter()
        .map(|r| r.start_ns / r.hosts as f64)
        .max_by(f64::total_cmp)
    {
        goals.push(format!(
            "start at most {} per host (≤ 1 s: {})",
            human_time(slowest),
            verdict(slowest <= 1e9)
        ));
    }
    let hops: Vec<f64> = rows.iter().map(HostRow::p50_per_hop_ns).collect();
    if hops.len() > 1 {
        let lo = hops.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = hops.iter().copied().fold(0.0, f64::max);
        goals.push(format!(
            "p50 per hop from {} to {} (×{:.2}; flat within ×1.3: {})",
            human_time(lo),
            human_time(hi),
            hi / lo,
            verdict(hi / lo <= 1.3)
        ));
    }
    if !goals.is_empty() {
        let _ = writeln!(w, "\nGoals: {}.\n", goals.join("; "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_puts_one_operator_on_each_host_in_order() {
        let y = chain_yaml(Path::new("/x/fio-chainop"), 3, Path::new("/r.txt"));
        assert!(
            y.contains("  default: h0\n  hosts:\n    h1: [op1]\n    h2: [op2]\n"),
            "{y}"
        );
        assert!(y.contains("- name: op0\n"), "{y}");
        assert!(y.contains("command: [\"/x/fio-chainop\", source]"), "{y}");
        assert!(y.contains("command: [\"/x/fio-chainop\", stage]"), "{y}");
        assert!(y.contains("command: [\"/x/fio-chainop\", sink]"), "{y}");
        assert!(y.contains("{from: op1, name: frame"), "{y}");
        assert!(!y.contains("from: op2"), "{y}");
    }

    #[test]
    fn the_goals_come_from_the_numbers() {
        let rows = [
            HostRow {
                hosts: 2,
                start_ns: 1.5e9,
                p50_ns: 100e3,
                p99_ns: 300e3,
            },
            HostRow {
                hosts: 4,
                start_ns: 2.0e9,
                p50_ns: 420e3,
                p99_ns: 900e3,
            },
        ];
        let mut w = String::new();
        markdown(&rows, &mut w, &[]);
        assert!(
            w.contains("start at most 750.00 ms per host (≤ 1 s: met)"),
            "{w}"
        );
        assert!(
            w.contains("p50 per hop from 100.00 us to 140.00 us (×1.40; flat within ×1.3: MISSED)"),
            "{w}"
        );
        assert!(
            w.contains("| 4 | 2.00 s | 500.00 ms | 420.00 us | 900.00 us | 140.00 us |"),
            "{w}"
        );
    }
}
