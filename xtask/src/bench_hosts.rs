//! `cargo xtask bench hosts` (and a section of every `--report`): an entry
//! moved between two hosts by `fastio-net`, beside Zenoh alone and a plain
//! TCP copy of the same bytes on the same link, in the same run.
//!
//! The two hosts are network namespaces this bench makes, joined by one
//! veth pair with addresses it assigns (10.78.0.1 and 10.78.0.2, inside
//! those namespaces only), removed at the end. Each measurement runs
//! `hostbench` (an example of `fastio-net`) on both: host a sends N bytes
//! and host b answers (4 KiB back at 4 KiB: a round trip; 1 byte back
//! otherwise: a one-way transfer and its acknowledgement), the
//! repetitions of fastio-net in one run of a pipeline of round trips. See
//! `crates/fastio-net/examples/hostbench.rs` for what each side does.
//! The 4 KiB and 1 MiB cases run again, Zenoh alone and fastio-net,
//! under a CPU wake-up latency request of 0 µs (PM QoS) held for both.
//!
//! Then streams: a source (`fio-chainop`) on host a and a sink on host b,
//! frames of a fixed size at full speed, each host running `fastio run
//! --host`, beside the same definition run on one host and TCP's bulk
//! throughput (the 64 MiB case), in the same run.

use std::process::{Command, Stdio};

use crate::bench_peers::Peer;
use crate::step::{Step, cargo};

/// (label, bytes, bytes back, repetitions, rounds; four rounds of the
/// large cases, so that the TLS rows' ratio is not the mean of two). In each round the
/// transports take turns; the small cases, seconds each, run more rounds:
/// their medians swing from one run to the next on this VM (a 4 KiB round
/// trip of fastio-net 130 µs in one run, 163 µs in the next, Zenoh alone
/// 103–105 µs), and their goals are ratios within ±30%. And each run of
/// them is long enough to be past its start: in runs of 200 round trips
/// of 4 KiB the first hundred were slower, fastio-net's more (85–105 µs
/// against 78–90 µs in runs of 1,000; Zenoh alone 67–80 against 65–68).
const CASES: [(&str, usize, usize, usize, usize); 4] = [
    ("4 KiB", 4 << 10, 4 << 10, 1000, 12),
    ("1 MiB", 1 << 20, 1, 500, 10),
    ("64 MiB", 64 << 20, 1, 10, 4),
    ("1 GiB", 1 << 30, 1, 3, 4),
];

/// The transports: (name, column). `ztls` is fastio-net over mutual TLS
/// (`quic/` endpoints, certificates made by `pki`).
/// `zrawtls` is Zenoh alone over the same mutual TLS, `quinn` the QUIC
/// engine under Zenoh's `quic/` link, bare, with the same certificates
/// (see `hostbench`).
const TRANSPORTS: [(&str, &str); 6] = [
    ("tcp", "plain TCP"),
    ("zraw", "Zenoh alone"),
    ("zenoh", "fastio-net"),
    ("ztls", "fastio-net, mutual TLS"),
    ("zrawtls", "Zenoh alone, mutual TLS"),
    ("quinn", "bare quinn, mutual TLS"),
];

/// Indexes into [`TRANSPORTS`].
const TCP: usize = 0;
const ZRAW: usize = 1;
const OURS: usize = 2;
const OURS_TLS: usize = 3;
const ZRAW_TLS: usize = 4;
const QUINN: usize = 5;

/// A CA and certificates for hosts `a` and `b` in `dir`, by the openssl
/// lines of docs/hosts.md.
fn pki(dir: &std::path::Path) -> Result<(), String> {
    let doc =
        std::fs::read_to_string("docs/hosts.md").map_err(|e| format!("docs/hosts.md: {e}"))?;
    let block = doc
        .split_once("<!-- tls-certificates -->\n```sh\n")
        .and_then(|(_, after)| after.split_once("\n```"))
        .map(|(b, _)| b)
        .ok_or("docs/hosts.md has no certificates block")?;
    let rest = block.split_once('\n').map_or("", |(_, r)| r);
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let out = Command::new("sh")
        .args(["-c", &format!("set -e\nHOSTS=\"a b\"\n{rest}\n")])
        .current_dir(dir)
        .output()
        .map_err(|e| format!("sh: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "openssl: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// Two network namespaces joined by a veth pair: host `a` at
/// [`ADDR_A`], host `b` at 10.78.0.2 (removed when dropped).
pub(crate) struct Hosts {
    pub(crate) a: String,
    pub(crate) b: String,
}

/// Host `a`'s address on the veth pair.
pub(crate) const ADDR_A: &str = "10.78.0.1";

/// Runs `ip ARGS`; its error output when it fails.
pub(crate) fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Hosts {
    pub(crate) fn new() -> Result<Hosts, String> {
        let id = std::process::id();
        let h = Hosts {
            a: format!("fiobench{id}a"),
            b: format!("fiobench{id}b"),
        };
        ip(&["netns", "add", &h.a]).map_err(|e| format!("{e} (the hosts bench needs root)"))?;
        ip(&["netns", "add", &h.b])?;
        ip(&[
            "-n", &h.a, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns",
            &h.b,
        ])?;
        for (ns, addr) in [(&h.a, "10.78.0.1/24"), (&h.b, "10.78.0.2/24")] {
            ip(&["-n", ns, "addr", "add", addr, "dev", "eth0"])?;
            ip(&["-n", ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(h)
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.a]);
        let _ = ip(&["netns", "del", &self.b]);
    }
}

/// What one side printed.
#[derive(Default)]
struct Side {
    times_ns: Vec<f64>,
    anon_extra_kib: u64,
}

fn parse(out: &str) -> Side {
    let mut s = Side::default();
    for line in out.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["time_ns", _, ns] => s.times_ns.extend(ns.parse::<f64>().ok()),
            ["anon_peak_kib", peak, "anon_base_kib", base] => {
                let (p, b) = (peak.parse().unwrap_or(0u64), base.parse().unwrap_or(0u64));
                s.anon_extra_kib = p.saturating_sub(b);
            }
            _ => {}
        }
    }
    s
}

/// The smallest and the largest of `v` (the rounds' range).
fn range(v: &[f64]) -> (f64, f64) {
    (
        v.iter().copied().fold(f64::INFINITY, f64::min),
        v.iter().copied().fold(0.0, f64::max),
    )
}

fn median(v: &mut [f64]) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

/// One measurement: both sides, b first; what a and b printed.
fn measure(
    hosts: &Hosts,
    exe: &std::path::Path,
    transport: &str,
    case: (usize, usize, usize),
    port: u16,
) -> Result<(Side, Side), String> {
    let (bytes, back, reps) = case;
    let (a_peer, b_peer) = match transport {
        "tcp" => (format!("10.78.0.2:{port}"), format!("10.78.0.2:{port}")),
        "ztls" | "zrawtls" | "quinn" => (
            format!("quic/10.78.0.1:{port}"),
            format!("quic/10.78.0.1:{port}"),
        ),
        _ => (
            format!("tcp/10.78.0.1:{port}"),
            format!("tcp/10.78.0.1:{port}"),
        ),
    };
    let pki_dir = crate::bench::target_dir().join("bench-pki");
    let side = |ns: &str, role: &str, peer: &str| {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns])
            .arg(exe)
            .args([transport, role])
            .args(["--bytes", &bytes.to_string()])
            .args(["--back", &back.to_string()])
            .args(["--reps", &reps.to_string(), peer])
            .env("HOSTBENCH_TLS_DIR", &pki_dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    };
    let b = side(&hosts.b, "b", &b_peer)
        .spawn()
        .map_err(|e| format!("hostbench: {e}"))?;
    let a = side(&hosts.a, "a", &a_peer)
        .output()
        .map_err(|e| format!("hostbench: {e}"))?;
    let b = b
        .wait_with_output()
        .map_err(|e| format!("hostbench: {e}"))?;
    for (who, o) in [("a", &a), ("b", &b)] {
        if !o.status.success() {
            return Err(format!(
                "hostbench {transport} {who} ({bytes} bytes): {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
    }
    Ok((
        parse(&String::from_utf8_lossy(&a.stdout)),
        parse(&String::from_utf8_lossy(&b.stdout)),
    ))
}

fn human(ns: f64) -> String {
    crate::bench::human_time(ns)
}

/// Which of the hosts section `cargo xtask bench hosts` runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Part {
    /// Everything (what `--report` runs).
    All,
    /// The entries between two hosts: plain, over mutual TLS against the
    /// engine's own, and the socket buffer check.
    Entries,
    /// The three-host chain behind a slow consumer.
    Latency,
}

/// Runs the bench and writes its section (markdown) to `out`.
pub(crate) fn run(out: &mut String) -> Result<Vec<Peer>, String> {
    run_part(out, Part::All)
}

/// Runs `part` of the bench and writes it (markdown) to `out`.
pub(crate) fn run_part(out: &mut String, part: Part) -> Result<Vec<Peer>, String> {
    if part == Part::Latency {
        chain_latency(out)?;
        return Ok(Vec::new());
    }
    Step::new(
        "hostbench",
        cargo([
            "build",
            "--release",
            "-p",
            "fastio-net",
            "--example",
            "hostbench",
        ]),
    )
    .run()?;
    let exe = crate::bench::target_dir().join("release/examples/hostbench");
    pki(&crate::bench::target_dir().join("bench-pki"))?;
    let hosts = Hosts::new()?;
    out.push_str(
        "| entry | plain TCP | Zenoh alone | fastio-net | fastio-net's | goal | memory on a / b (goal: b's) | fastio-net, mutual TLS (QUIC) | TLS ÷ TCP (fastio-net) |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    // What a wake-up on the other core costs on this machine now (and
    // again after the entries): the small rows' ratios move with it.
    let wakes_before = crate::wake_probe::sentence();
    let mut port = 7600u16;
    let mut notes = Vec::new();
    // The TLS table's rows, written after the main table.
    let mut tls_rows = String::new();
    let mut firsts = Vec::new();
    // TCP's bytes per second on the bulk case, for the streams below.
    let mut tcp_bulk: Option<f64> = None;
    for (label, bytes, back, reps, rounds) in CASES {
        let mut medians = [None; TRANSPORTS.len()];
        let mut memory = String::from("-");
        let mut first = None;
        // Rounds of the transports taking turns, their samples pooled:
        // the machine's speed drifts, and each transport sees both.
        let mut samples: [Vec<f64>; TRANSPORTS.len()] = Default::default();
        // Each round's fastio-net median over Zenoh alone's: a pair
        // measured seconds apart, so a drift slower than a round leaves
        // the ratio alone.
        let mut paired = Vec::new();
        // The same over mutual TLS: fastio-net's over Zenoh alone's.
        let mut paired_tls = Vec::new();
        let mut extra = (0u64, 0u64);
        for round in 0..rounds {
            let mut turn: Vec<(usize, &(&str, &str))> = TRANSPORTS.iter().enumerate().collect();
            // Every other round the other way round: no transport always
            // runs right after the same one.
            if round % 2 == 1 {
                turn.reverse();
            }
            let mut round_medians = [None; TRANSPORTS.len()];
            for (k, (transport, _)) in turn {
                port += 1;
                let (a, b) = measure(&hosts, &exe, transport, (bytes, back, reps), port)?;
                if *transport == "zenoh" {
                    first = first.or(a.times_ns.first().copied());
                    extra = (extra.0.max(a.anon_extra_kib), extra.1.max(b.anon_extra_kib));
                }
                let mut times = a.times_ns;
                round_medians[k] = median(&mut times);
                samples[k].extend(times);
            }
            if let (Some(z), Some(ours)) = (round_medians[ZRAW], round_medians[OURS]) {
                paired.push(ours / z);
            }
            if let (Some(z), Some(ours)) = (round_medians[ZRAW_TLS], round_medians[OURS_TLS]) {
                paired_tls.push(ours / z);
            }
        }
        for (m, v) in medians.iter_mut().zip(samples.iter_mut()) {
            *m = median(v);
        }
        let paired_range = range(&paired);
        let paired = median(&mut paired);
        let paired_tls_range = range(&paired_tls);
        let paired_tls = median(&mut paired_tls);
        if medians[OURS].is_some() {
            let ratio = |extra_kib: u64| (bytes as f64 + extra_kib as f64 * 1024.0) / bytes as f64;
            memory = if bytes >= 1 << 20 {
                // The receiving host's: at most twice the entry at 1 MiB,
                // 1.1 times beyond.
                let bound = if bytes == 1 << 20 { 2.0 } else { 1.1 };
                format!(
                    "×{:.2} / ×{:.2} (≤ ×{bound}: {})",
                    ratio(extra.0),
                    ratio(extra.1),
                    if ratio(extra.1) <= bound {
                        "met"
                    } else {
                        "**missed**"
                    }
                )
            } else {
                // Zenoh's own buffers (about a MiB) dwarf a small entry.
                format!("+{} / +{} KiB", extra.0, extra.1)
            };
        }
        if let Some(f) = first {
            firsts.push(format!("{label} {}", human(f)));
        }
        if bytes == 64 << 20 {
            tcp_bulk = medians[TCP].map(|ns| bytes as f64 / (ns / 1e9));
        }
        let cell = |m: Option<f64>| m.map_or("-".to_owned(), human);
        let verdict = |ok: bool| if ok { "met" } else { "**missed**" };
        // Issue 30's goals: up to 1 MiB the bridge's own cost over Zenoh
        // alone, beyond it throughput against plain TCP.
        let (ratio, goal) = match (medians[TCP], medians[ZRAW], medians[OURS]) {
            (_, Some(z), Some(ours)) if bytes <= 1 << 20 => {
                let r = paired.unwrap_or(ours / z);
                let bound = if bytes <= 4096 { 1.3 } else { 1.05 };
                let what = if bytes <= 4096 { "round trip" } else { "time" };
                (
                    format!(
                        "{what} ×{r:.2} of Zenoh alone's (rounds ×{:.2}–×{:.2}; pooled medians ×{:.2})",
                        paired_range.0,
                        paired_range.1,
                        ours / z
                    ),
                    format!("≤ ×{bound}: {}", verdict(r <= bound)),
                )
            }
            (Some(tcp), _, Some(ours)) => {
                let r = tcp / ours;
                (
                    format!("throughput ×{r:.2} of TCP's"),
                    format!("≥ ×0.9: {}", verdict(r >= 0.9)),
                )
            }
            _ => ("-".into(), "-".into()),
        };
        if let (Some(z), Some(ours)) = (medians[ZRAW], medians[OURS]) {
            notes.push(format!(
                "{label}: Zenoh alone takes {} of fastio-net's {}",
                human(z),
                human(ours)
            ));
        }
        let tls_cost = match (medians[OURS], medians[OURS_TLS]) {
            (Some(tcp), Some(tls)) => format!("×{:.2}", tls / tcp),
            _ => "-".into(),
        };
        // Issue 51's goals over mutual TLS: fastio-net's own cost over
        // Zenoh alone on the same link, as the plain rows' (≤ ×1.3 for the
        // round trip, ≤ ×1.1 beyond).
        let (tls_ratio, tls_goal) = match (paired_tls, medians[ZRAW_TLS], medians[OURS_TLS]) {
            (Some(r), Some(z), Some(ours)) => {
                let bound = if bytes <= 4096 { 1.3 } else { 1.1 };
                (
                    format!(
                        "×{r:.2} (rounds ×{:.2}–×{:.2}; pooled medians ×{:.2})",
                        paired_tls_range.0,
                        paired_tls_range.1,
                        ours / z
                    ),
                    format!("≤ ×{bound}: {}", verdict(r <= bound)),
                )
            }
            _ => ("-".into(), "-".into()),
        };
        let over = |m: Option<f64>, base: Option<f64>| match (m, base) {
            (Some(m), Some(b)) => format!("×{:.2}", m / b),
            _ => "-".into(),
        };
        tls_rows.push_str(&format!(
            "| {label} | {} | {} | {} | {tls_ratio} | {tls_goal} | {} | {} | {} |\n",
            cell(medians[OURS_TLS]),
            cell(medians[ZRAW_TLS]),
            cell(medians[QUINN]),
            over(medians[ZRAW_TLS], medians[ZRAW]),
            over(medians[QUINN], medians[TCP]),
            over(medians[QUINN], medians[ZRAW_TLS]),
        ));
        out.push_str(&format!(
            "| {label} | {} | {} | {} | {ratio} | {goal} | {memory} | {} | {tls_cost} |\n",
            cell(medians[TCP]),
            cell(medians[ZRAW]),
            cell(medians[OURS]),
            cell(medians[OURS_TLS]),
        ));
    }
    let wakes_after = crate::wake_probe::sentence();
    out.push_str(&format!(
        "\nMedians of each exchange (a sends, b answers: the same 4 KiB back at 4 KiB, \
         1 byte otherwise), {} rounds with the transports taking turns ({}; every other \
         round in the reverse order), samples pooled. Against Zenoh alone the ratio is the \
         median of the rounds' ratios (each round's fastio-net median over its Zenoh alone \
         median, runs seconds apart: this VM's speed drifts by a fifth over minutes), with \
         the rounds' range and the ratio of the pooled medians beside it. \
         fastio-net runs all exchanges of a round in one run of a pipeline of round trips, \
         one Zenoh session, as TCP uses one connection; joining is not timed, and the first \
         round trip of a run, on a session just joined, took: {}. Goals (issue 30): the \
         bridge's own cost over Zenoh alone up to 1 MiB (4 KiB round trip ≤ ×1.3, 1 MiB \
         entry ≤ ×1.05), throughput ≥ ×0.9 of plain TCP's beyond. Memory is the entry once \
         (in shared memory) plus the most anonymous memory the process used beyond what it \
         had before its transport started (staging, Zenoh's buffers; fastio-net's start is \
         once the pipeline of round trips is read, before the session opens), sampled every \
         millisecond; goal for the receiving host b: ≤ ×2 at 1 MiB, ≤ ×1.1 beyond. \
         The TLS column is the same fastio-net exchange over mutual TLS 1.3 in QUIC \
         (`quic/` endpoints, the certificates of docs/hosts.md, access control on); its \
         last column is its time over plain-TCP fastio-net's. {}.\n",
        CASES.map(|c| c.4.to_string()).join(", "),
        CASES.map(|c| c.0).join(", "),
        firsts.join(", "),
        notes.join("; ")
    ));
    // Every crossing ends in a wake-up on one core or the other (the
    // kernel's choice): what each cost in this run.
    if let (Some(before), Some(after)) = (wakes_before, wakes_after) {
        out.push_str(&format!(
            "\nWake-ups on this machine in this run (docs/hosts.md, *Speed*): before the \
             entries, {before}; after them, {after}.\n"
        ));
    }
    out.push_str(
        "\nOver mutual TLS, the same exchanges against the engine's own: Zenoh alone over \
         the same `quic/` link and certificates, and bare quinn (the QUIC engine under \
         Zenoh's link: one connection, the same mutual TLS on rustls and ring, quinn's \
         transport defaults, one stream), in the same rounds as the table above. Goals \
         (issue 51): fastio-net over TLS ≤ ×1.3 of Zenoh alone over TLS for the 4 KiB \
         round trip, ≤ ×1.1 beyond (the median of the rounds' ratios).\n\n\
         | entry | fastio-net, mutual TLS | Zenoh alone, mutual TLS | bare quinn, mutual TLS | \
         fastio-net ÷ Zenoh alone (TLS) | goal | Zenoh alone: TLS ÷ TCP | quinn ÷ plain TCP | \
         quinn ÷ Zenoh alone (TLS) |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    out.push_str(&tls_rows);
    tls_socket_buffers(&hosts, &exe, &mut port, out)?;
    if part == Part::Entries {
        return Ok(Vec::new());
    }
    with_latency_request(&hosts, &exe, &mut port, out)?;
    streams(&hosts, &mut port, tcp_bulk, out)?;
    chain_latency(out)?;
    soak_figures(out);
    let mut peers = crate::bench_chain::across_hosts(&hosts, &mut port, out)?;
    peers.push(Peer {
        name: "zenoh (hosts)",
        measured: true,
        status: "plain TCP and Zenoh alone (crate zenoh 1.10, TCP) measured beside \
                 fastio-net, and fastio-net over mutual TLS (QUIC), on a veth pair between \
                 two namespaces"
            .into(),
    });
    Ok(peers)
}

/// The small cases again, Zenoh alone and fastio-net taking turns, while
/// a CPU wake-up latency request of 0 µs is held for both (the kernel's
/// PM QoS, as `fastio run --cpu-latency-us 0` holds it): idle cores poll
/// instead of halting, so the wake-ups that end every crossing cost what
/// they cost on a core that is awake, and the ratio is the bridge's own
/// work (docs/hosts.md, *Wake-ups*).
fn with_latency_request(
    hosts: &Hosts,
    exe: &std::path::Path,
    port: &mut u16,
    out: &mut String,
) -> Result<(), String> {
    let Some(_request) = crate::wake_probe::LatencyRequest::hold(0) else {
        out.push_str("\n(No CPU wake-up latency request could be held here: not root.)\n");
        return Ok(());
    };
    let wakes = crate::wake_probe::sentence().unwrap_or_default();
    let mut rows = Vec::new();
    for (label, bytes, back, reps, rounds) in [CASES[0], CASES[1]] {
        let mut paired = Vec::new();
        let mut samples: [Vec<f64>; 2] = Default::default();
        for round in 0..rounds / 2 {
            let mut turn = [(0, "zraw"), (1, "zenoh")];
            if round % 2 == 1 {
                turn.reverse();
            }
            let mut m = [None; 2];
            for (k, transport) in turn {
                *port += 1;
                let (a, _) = measure(hosts, exe, transport, (bytes, back, reps), *port)?;
                let mut times = a.times_ns;
                m[k] = median(&mut times);
                samples[k].extend(times);
            }
            if let [Some(z), Some(ours)] = m {
                paired.push(ours / z);
            }
        }
        let (lo, hi) = range(&paired);
        if let (Some(r), Some(z), Some(ours)) = (
            median(&mut paired),
            median(&mut samples[0]),
            median(&mut samples[1]),
        ) {
            rows.push(format!(
                "{label}: Zenoh alone {}, fastio-net {} (×{r:.2}; {} rounds ×{lo:.2}–×{hi:.2})",
                human(z),
                human(ours),
                rounds / 2
            ));
        }
    }
    out.push_str(&format!(
        "\nThe small entries again with idle cores kept from halting (a CPU wake-up latency \
         request of 0 µs held for both, as `fastio run --cpu-latency-us 0` holds it; Zenoh \
         alone and fastio-net taking turns, the ratio the median of the rounds'): {}. Under \
         the request, {wakes}. \
         Not a goal row: it shows what of the ratio above is the bridge's own work and what \
         the machine's wake-ups (docs/hosts.md, *Wake-ups*).\n",
        rows.join("; ")
    ));
    Ok(())
}

/// Stream cases: (label, frame bytes, frames): about a second across
/// hosts each (fewer frames made the rate a matter of the VM's moment).
const STREAM_CASES: [(&str, u64, u64); 3] = [
    ("64 KiB", 64 << 10, 20_000),
    ("1 MiB", 1 << 20, 2_000),
    ("8 MiB", 8 << 20, 250),
];

/// A source on host `a` and a sink on host `b` (`fio-chainop`), `frames`
/// frames of `size` bytes at full speed, depth 4.
fn stream_yaml(
    chainop: &std::path::Path,
    size: u64,
    frames: u64,
    result: &std::path::Path,
) -> String {
    let port = |from: &str| {
        format!("  - {{{from}name: frame, type: array, element-type: uint8, shape: [{size}]}}\n")
    };
    format!(
        "api-version: 0.5.0\nname: stream-bench\nplacement:\n  default: a\n  hosts:\n    b: [sink]\noperators:\n\
         - name: source\n  container:\n    image: bench\n    command: [{c:?}, source]\n    variables: {{SIZE: \"{size}\", PAUSE_US: \"0\"}}\n  output:\n{}\
         - name: sink\n  container:\n    image: bench\n    command: [{c:?}, sink]\n    variables: {{RESULT: {r:?}}}\n  input:\n{}\
         streaming:\n  depth: 4\n  frames: {frames}\n",
        port(""),
        port("from: source, "),
        c = chainop.display().to_string(),
        r = result.display().to_string(),
    )
}

/// What the sink of one stream run saw: bytes per second from its first
/// frame to its last, and latency p50 / p99 (ns).
struct StreamRun {
    bytes_per_s: f64,
    p50_ns: f64,
    p99_ns: f64,
}

fn stream_run(
    hosts: &Hosts,
    fastio: &std::path::Path,
    def: &std::path::Path,
    result: &std::path::Path,
    size: u64,
    frames: u64,
    port: Option<u16>,
) -> Result<StreamRun, String> {
    let _ = std::fs::remove_file(result);
    let run = |ns: &str, host: Option<(&str, Vec<String>)>| {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, "timeout", "--signal=KILL", "300"])
            .arg(fastio)
            .arg("run")
            .arg(def);
        if let Some((h, net)) = host {
            c.args(["--host", h, "--join-timeout", "60"]).args(net);
        }
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        c
    };
    let outputs = match port {
        None => vec![("one host", run(&hosts.a, None).output())],
        Some(p) => {
            let listen = vec!["--listen".to_owned(), format!("tcp/10.78.0.1:{p}")];
            let connect = vec!["--connect".to_owned(), format!("tcp/10.78.0.1:{p}")];
            let a = run(&hosts.a, Some(("a", listen)))
                .spawn()
                .map_err(|e| format!("fastio: {e}"))?;
            let b = run(&hosts.b, Some(("b", connect))).output();
            vec![("host b", b), ("host a", a.wait_with_output())]
        }
    };
    for (who, o) in outputs {
        let o = o.map_err(|e| format!("fastio: {e}"))?;
        if !o.status.success() {
            return Err(format!(
                "stream bench ({size} bytes, {who}): {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
    }
    let text = std::fs::read_to_string(result)
        .map_err(|e| format!("the stream bench's sink wrote no result: {e}"))?;
    let mut r = crate::bench_chain::parse_result(&text)?;
    if r.count != frames || r.disorder != 0 || r.torn != 0 {
        return Err(format!(
            "stream bench ({size} bytes): the sink saw {} of {frames} frames, {} out of order, {} torn",
            r.count, r.disorder, r.torn
        ));
    }
    r.latencies.sort_unstable();
    let secs = (r.last_ns.saturating_sub(r.first_ns)) as f64 / 1e9;
    Ok(StreamRun {
        bytes_per_s: (frames.saturating_sub(1) * size) as f64 / secs.max(1e-9),
        p50_ns: crate::bench_chain::percentile(&r.latencies, 0.5),
        p99_ns: crate::bench_chain::percentile(&r.latencies, 0.99),
    })
}

/// The stream rows: across hosts, on one host, and TCP's bulk rate.
fn streams(
    hosts: &Hosts,
    port: &mut u16,
    tcp_bulk: Option<f64>,
    out: &mut String,
) -> Result<(), String> {
    Step::new(
        "stream bench binaries",
        cargo([
            "build",
            "--release",
            "-p",
            "fastio-cli",
            "-p",
            "fastio-examples",
            "--bin",
            "fastio",
            "--bin",
            "fio-chainop",
        ]),
    )
    .run()?;
    let release = crate::bench::target_dir().join("release");
    let dir = std::env::temp_dir().join(format!("fastio-stream-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    out.push_str(
        "\nStreams: a source on host a, its sink on host b, frames at full speed (depth 4), \
         each host running `fastio run --host`; the same definition on one host; TCP's bulk \
         rate from the 64 MiB case above. Rates from the sink's first frame to its last; \
         latency from the source's timestamp to the sink (one clock: the hosts share a kernel).\n\n\
         | frame | one host | across hosts | across / TCP bulk | goal | latency p50 / p99 across | one host p50 |\n\
         |---|---|---|---|---|---|---|\n",
    );
    let mb = |bps: f64| format!("{:.0} MB/s", bps / 1e6);
    let result = dir.join("result.txt");
    let def = dir.join("stream.yaml");
    for (label, size, frames) in STREAM_CASES {
        std::fs::write(
            &def,
            stream_yaml(&release.join("fio-chainop"), size, frames, &result),
        )
        .map_err(|e| format!("write {}: {e}", def.display()))?;
        let fastio = release.join("fastio");
        let local = stream_run(hosts, &fastio, &def, &result, size, frames, None)?;
        *port += 1;
        let across = stream_run(hosts, &fastio, &def, &result, size, frames, Some(*port))?;
        let vs_tcp = tcp_bulk.map_or("-".to_owned(), |t| {
            format!("×{:.2}", across.bytes_per_s / t)
        });
        // Issue 30: small frames at 0.7 of TCP's bulk rate.
        let goal = match tcp_bulk {
            Some(t) if size == 64 << 10 => format!(
                "≥ ×0.7: {}",
                if across.bytes_per_s / t >= 0.7 {
                    "met"
                } else {
                    "**missed**"
                }
            ),
            _ => "-".to_owned(),
        };
        out.push_str(&format!(
            "| {label} | {} ({:.0} frames/s) | {} ({:.0} frames/s) | {vs_tcp} | {goal} | {} / {} | {} |\n",
            mb(local.bytes_per_s),
            local.bytes_per_s / size as f64,
            mb(across.bytes_per_s),
            across.bytes_per_s / size as f64,
            human(across.p50_ns),
            human(across.p99_ns),
            human(local.p50_ns),
        ));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The test that measures the three-host chain behind a slow consumer
/// (issue 51, part 1), and how many times the bench runs it.
const CHAIN_TEST: &str = "a_slow_consumer_on_a_third_host_holds_the_chain_to_the_depth_asked_for";
const CHAIN_RUNS: usize = 3;

/// The sink's median ages (µs) a run of [`CHAIN_TEST`] printed: before,
/// during and after its slow phase, and its cycle while slow.
fn chain_ages(stderr: &str) -> Option<[u64; 4]> {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("sink's median age: "))?;
    let num = |key: &str| -> Option<u64> {
        let (_, rest) = line.split_once(key)?;
        rest.split_whitespace().next()?.parse().ok()
    };
    Some([
        num("before ")?,
        num("during ")?,
        num("after ")?,
        num("while slow ")?,
    ])
}

/// Back-pressure across hosts (issue 51, part 1): camera@a → stage@b →
/// sink@c on three namespace hosts, `block`, depth 4, frames of 32 KiB,
/// the sink 4 ms a frame for frames 300 to 600. The CI test
/// [`CHAIN_TEST`] (debug build, as in CI) run [`CHAIN_RUNS`] times.
fn chain_latency(out: &mut String) -> Result<(), String> {
    let mut rows = String::new();
    let mut during_frames = Vec::new();
    for run in 1..=CHAIN_RUNS {
        let o = cargo([
            "test",
            "-p",
            "fastio-cli",
            "--test",
            "hosts",
            "--",
            CHAIN_TEST,
            "--exact",
            "--nocapture",
        ])
        .output()
        .map_err(|e| format!("cargo test: {e}"))?;
        let stderr = String::from_utf8_lossy(&o.stderr);
        let ages = chain_ages(&stderr);
        let Some([before, during, after, cycle]) = ages.filter(|_| o.status.success()) else {
            return Err(format!(
                "{CHAIN_TEST} (run {run}): {}",
                stderr
                    .lines()
                    .filter(|l| l.contains("panicked") || l.starts_with("sink's"))
                    .collect::<Vec<_>>()
                    .join(" / ")
            ));
        };
        let bound = (3 * 4 + 4) * cycle;
        let frames = during as f64 / cycle.max(1) as f64;
        during_frames.push(frames);
        rows.push_str(&format!(
            "| {run} | {:.1} ms | {:.1} ms ({frames:.1} frames of the sink's {:.1} ms) | {:.1} ms | ≤ {:.1} ms: {} | {} |\n",
            before as f64 / 1e3,
            during as f64 / 1e3,
            cycle as f64 / 1e3,
            after as f64 / 1e3,
            bound as f64 / 1e3,
            if during <= bound { "met" } else { "**missed**" },
            if 2 * before <= during && 2 * after <= during {
                "met"
            } else {
                "**missed**"
            },
        ));
    }
    let most = during_frames.iter().copied().fold(0.0, f64::max);
    out.push_str(&format!(
        "\nBack-pressure across hosts (issue 51, part 1): camera@a → stage@b → sink@c on three \
         namespace hosts, `block`, depth 4, frames of 32 KiB, the camera unpaced, the sink 4 ms \
         a frame for frames 300 to 600 only; the sink's median frame age before, during and \
         after its slow phase (`{CHAIN_TEST}`, the CI test, {CHAIN_RUNS} runs, debug build). \
         Goal: while slow ≤ (3 × depth + 4) frames of the sink's cycle; before and after, the \
         window grown back, at most half the age while slow. At most {most:.1} frames in this run (it was \
         46 frames, 183 ms, before credit by releases).\n\n\
         | run | before | while slow | after | goal while slow | before, after ≤ ½ |\n\
         |---|---|---|---|---|---|\n{rows}"
    ));
    Ok(())
}

/// The figures of the last `cargo xtask soak hosts` (issue 51, part 3),
/// from `target/soak-hosts.json`; the report says when there were none.
fn soak_figures(out: &mut String) {
    let path = crate::root().join("target/soak-hosts.json");
    let Some(j) = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
    else {
        out.push_str(
            "\nFaults by the hundred: no `cargo xtask soak hosts` has run in this tree \
             (target/soak-hosts.json).\n",
        );
        return;
    };
    let n = |k: &str| j[k].as_u64().unwrap_or(0);
    let mut faults = String::new();
    if let Some(map) = j["faults"].as_object() {
        for (kind, f) in map {
            faults.push_str(&format!(
                "| {kind} | {} | {} | {:.1} s |\n",
                f["rounds"].as_u64().unwrap_or(0),
                f["failed"].as_u64().unwrap_or(0),
                f["slowest_exit_ms"].as_u64().unwrap_or(0) as f64 / 1e3
            ));
        }
    }
    out.push_str(&format!(
        "\nFaults by the hundred (issue 51, part 3): `{}` of {} (seed {}): {} rounds, {} over \
         mutual TLS, on three namespace hosts streaming, one fault a round at a random moment. \
         Hangs {}, exits past the {:.0} s bound {}, wrong causes {}, wrong or out-of-order \
         frames {}, /dev/shm leaks {}, processes left {}, split causes (a flap that left two \
         hosts each judging the other gone: shown, not failed on) {}; the test {}.{}\n\n\
         | fault | rounds | failed (ended with a cause) | slowest exit after the fault |\n\
         |---|---|---|---|\n{faults}",
        j["command"].as_str().unwrap_or("?"),
        j["date"].as_str().unwrap_or("?"),
        j["seed"].as_str().unwrap_or("?"),
        n("rounds"),
        n("tls_rounds"),
        n("hangs"),
        n("bound_ms") as f64 / 1e3,
        n("out_of_bound"),
        n("wrong_causes"),
        n("wrong_frames"),
        n("leaks"),
        n("processes_left"),
        n("split_causes"),
        if j["test_passed"].as_bool() == Some(true) {
            "passed"
        } else {
            "**failed**"
        },
        if n("rounds") < 300 {
            " Fewer than the 300 rounds issue 51 asks for."
        } else {
            ""
        }
    ));
}

/// UDP datagrams host `ns` dropped for a full socket receive buffer so far
/// (`RcvbufErrors` of its `/proc/net/snmp`).
fn udp_rcvbuf_errors(ns: &str) -> Option<u64> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "cat", "/proc/net/snmp"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut udp = text.lines().filter(|l| l.starts_with("Udp:"));
    let (names, values) = (udp.next()?, udp.next()?);
    let at = names.split_whitespace().position(|n| n == "RcvbufErrors")?;
    values.split_whitespace().nth(at)?.parse().ok()
}

/// The kernel's default socket receive buffer, set for a while and put
/// back when dropped (`net.core.rmem_default` is not per network
/// namespace: it is the machine's).
struct RmemDefault {
    was: String,
}

const RMEM_DEFAULT: &str = "/proc/sys/net/core/rmem_default";

impl RmemDefault {
    fn set(bytes: u64) -> Result<RmemDefault, String> {
        let was = std::fs::read_to_string(RMEM_DEFAULT)
            .map_err(|e| format!("{RMEM_DEFAULT}: {e}"))?
            .trim()
            .to_owned();
        std::fs::write(RMEM_DEFAULT, bytes.to_string())
            .map_err(|e| format!("{RMEM_DEFAULT}: {e}"))?;
        Ok(RmemDefault { was })
    }
}

impl Drop for RmemDefault {
    fn drop(&mut self) {
        let _ = std::fs::write(RMEM_DEFAULT, &self.was);
    }
}

/// One of the cheap checks of issue 51's TLS rows: QUIC runs over UDP,
/// and quinn leaves the socket's receive buffer at the kernel's default
/// (212,992 bytes here, about 0.3 ms of data at 700 MB/s); a datagram that
/// finds it full is dropped, and the congestion controller backs off.
/// fastio-net over mutual TLS with the default and with 4 MiB
/// (`net.core.rmem_default`, a documented system setting), taking turns,
/// with the receiving host's drops.
fn tls_socket_buffers(
    hosts: &Hosts,
    exe: &std::path::Path,
    port: &mut u16,
    out: &mut String,
) -> Result<(), String> {
    const ROUNDS: usize = 4;
    const RAISED: u64 = 4 << 20;
    let default = std::fs::read_to_string(RMEM_DEFAULT)
        .map_err(|e| format!("{RMEM_DEFAULT}: {e}"))?
        .trim()
        .to_owned();
    let mut rows = Vec::new();
    for (label, bytes, back, reps) in [("1 MiB", 1 << 20, 1, 300), ("64 MiB", 64 << 20, 1, 6)] {
        // [default, raised]: times and drops.
        let mut times: [Vec<f64>; 2] = Default::default();
        let mut drops = [0u64; 2];
        for round in 0..ROUNDS {
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for k in order {
                let _raised = (k == 1).then(|| RmemDefault::set(RAISED)).transpose()?;
                *port += 1;
                let before = udp_rcvbuf_errors(&hosts.b).unwrap_or(0);
                let (a, _) = measure(hosts, exe, "ztls", (bytes, back, reps), *port)?;
                drops[k] += udp_rcvbuf_errors(&hosts.b)
                    .unwrap_or(0)
                    .saturating_sub(before);
                times[k].extend(a.times_ns);
            }
        }
        if let (Some(d), Some(r)) = (median(&mut times[0]), median(&mut times[1])) {
            rows.push(format!(
                "| {label} | {} ({} drops) | {} ({} drops) | ×{:.2} |",
                human(d),
                drops[0],
                human(r),
                drops[1],
                r / d
            ));
        }
    }
    out.push_str(&format!(
        "\nThe receive buffer of QUIC's UDP socket (a cheap check of issue 51): fastio-net over \
         mutual TLS with the kernel's default `net.core.rmem_default` ({default} bytes) and with \
         {} MiB, {ROUNDS} rounds taking turns, medians, and the datagrams host b dropped for a \
         full receive buffer (`RcvbufErrors`).\n\n\
         | entry | default buffer | 4 MiB buffer | 4 MiB ÷ default |\n|---|---|---|---|\n{}\n",
        RAISED >> 20,
        rows.join("\n")
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_tests_line_is_read() {
        let err = "noise\nsink's median age: before 1234 µs, during 61500 µs, after 1100 µs; its \
                   cycle while slow 4100 µs\n";
        assert_eq!(chain_ages(err), Some([1234, 61500, 1100, 4100]));
        assert_eq!(chain_ages("sink's median age: before x µs"), None);
        assert_eq!(chain_ages(""), None);
    }
}
