//! `cargo xtask bench growth` (and every `--report`): how the cost of a
//! whole pipeline grows with the work, measured outside criterion as real
//! pipelines, ours beside dora-rs in the same run (issue 52, part 3):
//!
//! * **stages in a chain** — source → stage × (n − 2) → sink, n = 2, 4, 8
//!   and 16 operators (our Rust operators, `fio-chainop`), dora-rs's
//!   Python nodes at 2 and 8: end-to-end latency p50/p99 of a paced
//!   source and throughput of an unpaced one, at 64 KiB and 1 MiB. Every
//!   stage copies its input into its output, as in the chain bench
//!   ([`crate::bench_chain`], which runs each chain). Goals: latency per
//!   hop (end-to-end / (n − 1)) within ×1.3 from the fewest operators to
//!   the most; ≥ ×2 dora-rs's throughput at 2 and 8;
//! * **operators in one pipeline** — the same chain of n = 2 … 64
//!   operators, a few small frames: time from spawning the runner
//!   (`fastio run`, `dora run`) to the sink's first frame (every operator
//!   is up by then), and the runner's own peak resident memory; dora-rs at
//!   2 and 32. Goals: linear or better (the cost per added operator does
//!   not grow with n); ≤ dora-rs's start-up.
//!
//! * **consumers of one stream** — 1, 2, 4, 8 and 16 consumer processes
//!   of one stream, paced frames of 4 KiB and 1 MiB: the producer's cost
//!   per frame and the consumers' latency p50/p99
//!   (`crates/fastio/benches/fanout.rs`), beside iceoryx2 with as many
//!   subscribers (`peers/iceoryx2/benches/fanout.rs`), same rules
//!   (`fanout_common`). Goals: ours ≤ iceoryx2 at every count (latency and
//!   producer's cost, p50); our producer's cost at 16 ≤ ×2 of at 1.
//!
//! * **hosts in one run** — 2, 3 and 4 namespace hosts, a chain of one
//!   operator on each ([`crate::bench_growth_hosts`]).

use std::fmt::Write as _;

use crate::bench::human_time;
use crate::bench_chain::{Measured, Run, Tools, Variant, verdict};
use crate::bench_peers::Peer;
use crate::step::{Step, cargo};

/// Operators per chain in the stage rows (ours), and those dora-rs runs.
const STAGE_OPERATORS: [usize; 4] = [2, 4, 8, 16];
const STAGE_OPERATORS_DORA: [usize; 2] = [2, 8];

/// Frame sizes of the stage rows: (label, bytes, latency run's frames and
/// pause between them in µs, throughput run's frames).
const STAGE_SIZES: [(&str, u64, u64, u64, u64); 2] = [
    ("64KiB", 64 << 10, 300, 3_000, 3_000),
    ("1MiB", 1 << 20, 200, 8_000, 1_000),
];

/// Rounds of every stage row, pooled (latencies together, the median
/// round's throughput).
const STAGE_ROUNDS: usize = 2;

/// Operators per pipeline in the start-up rows (ours), and those dora-rs
/// runs.
const START_OPERATORS: [usize; 6] = [2, 4, 8, 16, 32, 64];
const START_OPERATORS_DORA: [usize; 2] = [2, 32];

/// Frames of our start-up runs (dora-rs's source sends more: see
/// [`run`]).
const START_FRAMES: u64 = 8;

/// Rounds of every start-up row (the median is reported).
const START_ROUNDS: usize = 3;

/// One stage row: a chain of `operators` at one frame size.
pub(crate) struct StageRow {
    pub(crate) operators: usize,
    pub(crate) size: &'static str,
    pub(crate) variant: Variant,
    pub(crate) measured: Measured,
}

impl StageRow {
    /// End-to-end p50 latency divided by the hops a frame makes.
    pub(crate) fn p50_per_hop_ns(&self) -> f64 {
        self.measured.p50_ns / (self.operators - 1) as f64
    }
}

/// One start-up row: a pipeline of `operators`, medians of its rounds.
pub(crate) struct StartRow {
    pub(crate) operators: usize,
    pub(crate) variant: Variant,
    pub(crate) to_first_frame_ns: f64,
    pub(crate) runner_peak_kib: f64,
}

/// One fan-out line: one side, size and count (`fanout_common`'s
/// `Figures::line`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FanoutRow {
    /// `fastio` or `iceoryx2`.
    pub(crate) side: String,
    pub(crate) size: String,
    pub(crate) consumers: usize,
    pub(crate) producer_p50_ns: f64,
    pub(crate) producer_p99_ns: f64,
    pub(crate) latency_p50_ns: f64,
    pub(crate) latency_p99_ns: f64,
    pub(crate) worst_consumer_p99_ns: f64,
}

impl FanoutRow {
    /// A `fanout side=… size=… consumers=… …` line, or `None`.
    pub(crate) fn parse(line: &str) -> Option<FanoutRow> {
        use crate::bench_peers::{field, word};
        let line = line.strip_prefix("fanout ")?;
        Some(FanoutRow {
            side: word(line, "side")?.to_owned(),
            size: word(line, "size")?.to_owned(),
            consumers: field(line, "consumers")? as usize,
            producer_p50_ns: field(line, "producer_p50_ns")?,
            producer_p99_ns: field(line, "producer_p99_ns")?,
            latency_p50_ns: field(line, "latency_p50_ns")?,
            latency_p99_ns: field(line, "latency_p99_ns")?,
            worst_consumer_p99_ns: field(line, "worst_consumer_p99_ns")?,
        })
    }
}

/// Everything this bench measured.
#[derive(Default)]
pub(crate) struct Growth {
    pub(crate) stages: Vec<StageRow>,
    pub(crate) starts: Vec<StartRow>,
    pub(crate) consumers: Vec<FanoutRow>,
    pub(crate) hosts: Vec<crate::bench_growth_hosts::HostRow>,
}

/// Runs the fan-out bench of each side; their lines, and iceoryx2's
/// status as a peer.
fn fanout(peers: &mut Vec<Peer>) -> Result<Vec<FanoutRow>, String> {
    let rows =
        |text: &str| -> Vec<FanoutRow> { text.lines().filter_map(FanoutRow::parse).collect() };
    let ours = Step::new(
        "fanout fastio",
        cargo(["bench", "-p", "fastio", "--bench", "fanout"]),
    )
    .run()?;
    let mut out = rows(&ours);
    let mut cmd = cargo([
        "bench",
        "--manifest-path",
        "peers/iceoryx2/Cargo.toml",
        "--bench",
        "fanout",
    ]);
    cmd.current_dir(crate::root()).env(
        "CARGO_TARGET_DIR",
        crate::root().join("target").join("peers"),
    );
    match Step::new("fanout iceoryx2", cmd).run() {
        Ok(text) => {
            out.extend(rows(&text));
            peers.push(Peer::measured(
                "iceoryx2 (fan-out)",
                "iceoryx2 from crates.io, built by xtask into target/peers \
                 (peers/iceoryx2/benches/fanout.rs)",
            ));
        }
        Err(e) => peers.push(Peer::missing("iceoryx2 (fan-out)", e)),
    }
    Ok(out)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Runs both parts; what they measured, and dora-rs's status as a peer.
/// The parts of this bench (`cargo xtask bench growth [PART]`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Part {
    Consumers,
    Stages,
    Hosts,
    Starts,
}

impl Part {
    /// Every part, in the order they run.
    pub(crate) const ALL: [Part; 4] = [Part::Consumers, Part::Stages, Part::Hosts, Part::Starts];

    /// The part a word names (`consumers`, `stages`, `hosts`, `operators`).
    pub(crate) fn named(word: &str) -> Option<Part> {
        match word {
            "consumers" => Some(Part::Consumers),
            "stages" => Some(Part::Stages),
            "hosts" => Some(Part::Hosts),
            "operators" => Some(Part::Starts),
            _ => None,
        }
    }
}

/// Runs the parts `parts`; what they measured, and the peers' status.
pub(crate) fn run(parts: &[Part]) -> Result<(Growth, Vec<Peer>), String> {
    crate::bench_chain::build_chain_binaries()?;
    let mut peers = Vec::new();
    let dora_python = crate::bench_chain::dora_peer(
        &mut peers,
        "dora-rs (growth)",
        format!(
            "{} from PyPI in target/venv-dora, `dora run` \
             (crates/fastio-python/bench/chain_dora.py)",
            crate::bench_chain::DORA.join(" ")
        ),
    );
    let tools = Tools::new(dora_python);
    let base = crate::bench::target_dir().join("bench-growth");
    let mut growth = Growth::default();
    if parts.contains(&Part::Consumers) {
        growth.consumers = fanout(&mut peers)?;
    }
    for r in &growth.consumers {
        println!(
            "growth: {} consumers, {}, {}: producer {} latency p50 {} p99 {}",
            r.consumers,
            r.size,
            r.side,
            human_time(r.producer_p50_ns),
            human_time(r.latency_p50_ns),
            human_time(r.latency_p99_ns)
        );
    }
    for size in STAGE_SIZES.iter().filter(|_| parts.contains(&Part::Stages)) {
        let size = *size;
        for variant in [Variant::FastioRust, Variant::DoraPython] {
            let counts: &[usize] = match variant {
                Variant::DoraPython if tools.dora_python.is_none() => &[],
                Variant::DoraPython => &STAGE_OPERATORS_DORA,
                _ => &STAGE_OPERATORS,
            };
            for &operators in counts {
                let rounds = (0..STAGE_ROUNDS)
                    .map(|_| crate::bench_chain::round(&tools, variant, size, None, operators - 2))
                    .collect::<Result<Vec<_>, _>>()?;
                let measured = Measured::pooled(&rounds);
                println!(
                    "growth: {} operators, {}, {}: p50 {} p99 {} {:.1} frames/s",
                    operators,
                    size.0,
                    variant.label(),
                    human_time(measured.p50_ns),
                    human_time(measured.p99_ns),
                    measured.fps
                );
                growth.stages.push(StageRow {
                    operators,
                    size: size.0,
                    variant,
                    measured,
                });
            }
        }
    }
    if parts.contains(&Part::Hosts) {
        growth.hosts = crate::bench_growth_hosts::run(&tools.fastio, &tools.chainop)?;
    }
    for variant in [Variant::FastioRust, Variant::DoraPython]
        .into_iter()
        .filter(|_| parts.contains(&Part::Starts))
    {
        let counts: &[usize] = match variant {
            Variant::DoraPython if tools.dora_python.is_none() => &[],
            Variant::DoraPython => &START_OPERATORS_DORA,
            _ => &START_OPERATORS,
        };
        for &operators in counts {
            let mut times = Vec::new();
            let mut peaks = Vec::new();
            for round in 0..START_ROUNDS {
                let dir = base.join(format!(
                    "start-{}-{operators}ops-{round}",
                    match variant {
                        Variant::DoraPython => "dora-python",
                        _ => "fastio-rust",
                    }
                ));
                // dora-rs may drop a frame sent before a node down the
                // chain is up: its source sends for up to 15 s, and the
                // sink's first frame is what counts. Ours loses none.
                let (frames, pause_us) = match variant {
                    Variant::DoraPython => (3_000, 5_000),
                    _ => (START_FRAMES, 2_000),
                };
                let s = Run::chain(variant, dir, 4096, frames, pause_us, operators - 2)
                    .start_up(&tools)?;
                if variant != Variant::DoraPython && s.frames != START_FRAMES {
                    return Err(format!(
                        "start-up with {operators} operators: the sink saw {} of {START_FRAMES} frames",
                        s.frames
                    ));
                }
                times.push(s.to_first_frame_ns as f64);
                peaks.push(s.runner_peak_kib as f64);
            }
            let row = StartRow {
                operators,
                variant,
                to_first_frame_ns: median(times),
                runner_peak_kib: median(peaks),
            };
            println!(
                "growth: start-up of {operators} operators, {}: {} to the first frame, \
                 runner {:.1} MiB",
                variant.label(),
                human_time(row.to_first_frame_ns),
                row.runner_peak_kib / 1024.0
            );
            growth.starts.push(row);
        }
    }
    Ok((growth, peers))
}

impl Growth {
    fn stage(&self, variant: Variant, size: &str, operators: usize) -> Option<&StageRow> {
        self.stages
            .iter()
            .find(|r| r.variant == variant && r.size == size && r.operators == operators)
    }

    fn start(&self, variant: Variant, operators: usize) -> Option<&StartRow> {
        self.starts
            .iter()
            .find(|r| r.variant == variant && r.operators == operators)
    }

    fn fanout_row(&self, side: &str, size: &str, consumers: usize) -> Option<&FanoutRow> {
        self.consumers
            .iter()
            .find(|r| r.side == side && r.size == size && r.consumers == consumers)
    }

    /// The report's markdown for every part, goals computed from the
    /// numbers; `plots` names the plots the report drew.
    pub(crate) fn markdown(&self, plots: &[&str]) -> String {
        let mut w = String::new();
        if !self.consumers.is_empty() {
            self.consumers_markdown(&mut w, plots);
        }
        if !self.stages.is_empty() {
            self.stages_markdown(&mut w, plots);
        }
        if !self.starts.is_empty() {
            self.starts_markdown(&mut w, plots);
        }
        if !self.hosts.is_empty() {
            crate::bench_growth_hosts::markdown(&self.hosts, &mut w, plots);
        }
        w
    }

    fn consumers_markdown(&self, w: &mut String, plots: &[&str]) {
        let _ = writeln!(
            w,
            "### Consumers of one stream\n\nOne producer and n consumer processes of one stream \
             (`cargo xtask bench growth`; `crates/fastio/benches/fanout.rs` beside \
             `peers/iceoryx2/benches/fanout.rs`, the rules in `fanout_common`): a frame every \
             2 ms (no queue), 6 in flight per consumer at most, one byte per page written and \
             read, consumers sleeping until woken; the producer's cost per frame (from asking \
             for the frame's memory to the end of its publish, and notify) and the consumers' \
             latency (stamp to reading it), p50/p99 of 550 frames after 50.\n"
        );
        if plots.contains(&"growth_consumers.svg") {
            let _ = writeln!(w, "![growth_consumers.svg](growth_consumers.svg)\n");
        }
        let _ = writeln!(
            w,
            "| frame | consumers | producer p50 ours / iceoryx2 | latency p50 ours / iceoryx2 | \
             latency p99 ours / iceoryx2 | worst consumer's p99 ours / iceoryx2 |\n\
             |---|---|---|---|---|---|"
        );
        let mut sizes: Vec<&str> = Vec::new();
        for r in &self.consumers {
            if !sizes.contains(&r.size.as_str()) {
                sizes.push(&r.size);
            }
        }
        let mut goals = Vec::new();
        for size in &sizes {
            let mut counts: Vec<usize> = self
                .consumers
                .iter()
                .filter(|r| r.size == *size)
                .map(|r| r.consumers)
                .collect();
            counts.sort_unstable();
            counts.dedup();
            let mut behind = Vec::new();
            for &n in &counts {
                let o = self.fanout_row("fastio", size, n);
                let x = self.fanout_row("iceoryx2", size, n);
                let pair = |f: fn(&FanoutRow) -> f64| {
                    format!(
                        "{} / {}",
                        o.map_or("–".into(), |r| human_time(f(r))),
                        x.map_or("–".into(), |r| human_time(f(r)))
                    )
                };
                let _ = writeln!(
                    w,
                    "| {size} | {n} | {} | {} | {} | {} |",
                    pair(|r| r.producer_p50_ns),
                    pair(|r| r.latency_p50_ns),
                    pair(|r| r.latency_p99_ns),
                    pair(|r| r.worst_consumer_p99_ns)
                );
                if let (Some(o), Some(x)) = (o, x) {
                    let (p, l) = (
                        o.producer_p50_ns / x.producer_p50_ns,
                        o.latency_p50_ns / x.latency_p50_ns,
                    );
                    if p > 1.0 || l > 1.0 {
                        behind.push(format!("{n} (producer ×{p:.2}, latency ×{l:.2})"));
                    }
                }
            }
            if counts
                .iter()
                .any(|&n| self.fanout_row("iceoryx2", size, n).is_some())
            {
                goals.push(format!(
                    "{size}: ours ≤ iceoryx2 at every count (producer's cost and latency, p50): {}{}",
                    verdict(behind.is_empty()),
                    if behind.is_empty() {
                        String::new()
                    } else {
                        format!(", behind at {}", behind.join(", "))
                    }
                ));
            }
            if let (Some(one), Some(most)) = (
                counts
                    .first()
                    .and_then(|&n| self.fanout_row("fastio", size, n)),
                counts
                    .last()
                    .and_then(|&n| self.fanout_row("fastio", size, n)),
            ) {
                let x = most.producer_p50_ns / one.producer_p50_ns;
                goals.push(format!(
                    "{size}: our producer's cost at {} consumers ×{x:.2} of at {} (≤ ×2: {})",
                    most.consumers,
                    one.consumers,
                    verdict(x <= 2.0)
                ));
            }
        }
        if !goals.is_empty() {
            let _ = writeln!(w, "\nGoals: {}.\n", goals.join("; "));
        }
    }

    fn stages_markdown(&self, w: &mut String, plots: &[&str]) {
        let _ = writeln!(
            w,
            "### Stages in a chain\n\nsource → stage × (n − 2) → sink, whole pipelines \
             (`cargo xtask bench growth`; every stage copies its input into its output; our \
             depth 4): latency of a paced source (p50/p99 after the first {} frames, \
             {STAGE_ROUNDS} rounds pooled), throughput of an unpaced one (the median round). \
             Ours with Rust operators, dora-rs with Python nodes.\n",
            crate::bench_chain::WARMUP
        );
        if plots.contains(&"growth_stages.svg") {
            let _ = writeln!(w, "![growth_stages.svg](growth_stages.svg)\n");
        }
        let _ = writeln!(
            w,
            "| frame | operators | who | latency p50 | p99 | p50 per hop | throughput |\n\
             |---|---|---|---|---|---|---|"
        );
        for r in &self.stages {
            let m = &r.measured;
            let _ = writeln!(
                w,
                "| {} | {} | {} | {} | {} | {} | {:.0} frames/s |",
                r.size,
                r.operators,
                r.variant.label(),
                human_time(m.p50_ns),
                human_time(m.p99_ns),
                human_time(r.p50_per_hop_ns()),
                m.fps
            );
        }
        let mut goals = Vec::new();
        for (size, ..) in STAGE_SIZES {
            let per_hop: Vec<f64> = STAGE_OPERATORS
                .iter()
                .filter_map(|&n| Some(self.stage(Variant::FastioRust, size, n)?.p50_per_hop_ns()))
                .collect();
            if per_hop.len() > 1 {
                let lo = per_hop.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = per_hop.iter().copied().fold(0.0, f64::max);
                goals.push(format!(
                    "{size}: p50 per hop from {} to {} (×{:.2}; within ×1.3: {})",
                    human_time(lo),
                    human_time(hi),
                    hi / lo,
                    verdict(hi / lo <= 1.3)
                ));
            }
            for n in STAGE_OPERATORS_DORA {
                if let (Some(o), Some(d)) = (
                    self.stage(Variant::FastioRust, size, n),
                    self.stage(Variant::DoraPython, size, n),
                ) {
                    let x = o.measured.fps / d.measured.fps;
                    goals.push(format!(
                        "{size}, {n} operators: throughput ×{x:.2} of dora-rs's (≥ ×2: {})",
                        verdict(x >= 2.0)
                    ));
                }
            }
        }
        if !goals.is_empty() {
            let _ = writeln!(w, "\nGoals: {}.\n", goals.join("; "));
        }
    }

    fn starts_markdown(&self, w: &mut String, plots: &[&str]) {
        let _ = writeln!(
            w,
            "### Operators in one pipeline\n\nThe same chain of n operators, frames of 4 KiB \
             ({START_FRAMES} of ours; dora-rs's source sends for up to 15 s, as dora-rs may drop \
             a frame sent before every node is up): \
             time from spawning the runner (`fastio run`, `dora run`) to the sink's first frame \
             (every operator is up by then), and the runner process's own peak resident memory \
             (`VmHWM`; operators are processes of their own); medians of {START_ROUNDS} \
             rounds.\n"
        );
        if plots.contains(&"growth_start.svg") {
            let _ = writeln!(w, "![growth_start.svg](growth_start.svg)\n");
        }
        let _ = writeln!(
            w,
            "| operators | who | to the first frame | per operator | runner's memory |\n\
             |---|---|---|---|---|"
        );
        for r in &self.starts {
            let _ = writeln!(
                w,
                "| {} | {} | {} | {} | {:.1} MiB |",
                r.operators,
                r.variant.label(),
                human_time(r.to_first_frame_ns),
                human_time(r.to_first_frame_ns / r.operators as f64),
                r.runner_peak_kib / 1024.0
            );
        }
        let mut goals = Vec::new();
        let ours: Vec<&StartRow> = self
            .starts
            .iter()
            .filter(|r| r.variant == Variant::FastioRust)
            .collect();
        // Linear or better: what each added operator costs, from one count
        // to the next, does not grow: the last step's is within ×1.5 of
        // the median step's (quadratic growth makes the last step the
        // dearest by far).
        let steps: Vec<(usize, f64)> = ours
            .windows(2)
            .map(|p| {
                let added = (p[1].operators - p[0].operators) as f64;
                (
                    p[1].operators,
                    (p[1].to_first_frame_ns - p[0].to_first_frame_ns) / added,
                )
            })
            .collect();
        if let (Some(first), Some(last)) = (steps.first(), steps.last()) {
            let typical = median(steps.iter().map(|s| s.1).collect());
            goals.push(format!(
                "each added operator costs {} up to {} operators, {} up to {}, {} at the median \
                 step (last within ×1.5 of the median, linear or better: {})",
                human_time(first.1),
                first.0,
                human_time(last.1),
                last.0,
                human_time(typical),
                verdict(last.1 <= 1.5 * typical)
            ));
        }
        for n in START_OPERATORS_DORA {
            if let (Some(o), Some(d)) = (
                self.start(Variant::FastioRust, n),
                self.start(Variant::DoraPython, n),
            ) {
                let x = o.to_first_frame_ns / d.to_first_frame_ns;
                goals.push(format!(
                    "{n} operators: start-up ×{x:.2} of dora-rs's (≤ ×1: {})",
                    verdict(x <= 1.0)
                ));
            }
        }
        if !goals.is_empty() {
            let _ = writeln!(w, "\nGoals: {}.\n", goals.join("; "));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(
        operators: usize,
        size: &'static str,
        variant: Variant,
        p50_ns: f64,
        fps: f64,
    ) -> StageRow {
        StageRow {
            operators,
            size,
            variant,
            measured: Measured {
                p50_ns,
                p99_ns: 2.0 * p50_ns,
                fps,
                fps_range: (fps, fps),
                p99_range: (2.0 * p50_ns, 2.0 * p50_ns),
                lost: 0,
                disorder: 0,
                torn: 0,
            },
        }
    }

    fn start(operators: usize, variant: Variant, ms: f64) -> StartRow {
        StartRow {
            operators,
            variant,
            to_first_frame_ns: ms * 1e6,
            runner_peak_kib: 10_240.0,
        }
    }

    #[test]
    fn the_goals_come_from_the_numbers() {
        let ours = Variant::FastioRust;
        let dora = Variant::DoraPython;
        let g = Growth {
            stages: vec![
                // 64 KiB: 100 µs per hop at 2 and 4 operators, 150 at 16.
                stage(2, "64KiB", ours, 100e3, 3000.0),
                stage(4, "64KiB", ours, 300e3, 2000.0),
                stage(16, "64KiB", ours, 2250e3, 500.0),
                stage(2, "64KiB", dora, 1e6, 1000.0),
                // 1 MiB: flat per hop.
                stage(2, "1MiB", ours, 1e6, 400.0),
                stage(8, "1MiB", ours, 7e6, 300.0),
                stage(8, "1MiB", dora, 20e6, 100.0),
            ],
            consumers: [
                "fanout side=fastio size=4KiB consumers=1 producer_p50_ns=1000 producer_p99_ns=2000 latency_p50_ns=10000 latency_p99_ns=20000 worst_consumer_p99_ns=20000 frames=550",
                "fanout side=fastio size=4KiB consumers=16 producer_p50_ns=2500 producer_p99_ns=5000 latency_p50_ns=30000 latency_p99_ns=90000 worst_consumer_p99_ns=99000 frames=8800",
                "fanout side=iceoryx2 size=4KiB consumers=1 producer_p50_ns=2000 producer_p99_ns=3000 latency_p50_ns=12000 latency_p99_ns=25000 worst_consumer_p99_ns=25000 frames=550",
                "fanout side=iceoryx2 size=4KiB consumers=16 producer_p50_ns=9000 producer_p99_ns=20000 latency_p50_ns=25000 latency_p99_ns=80000 worst_consumer_p99_ns=85000 frames=8800",
            ]
            .iter()
            .map(|l| FanoutRow::parse(l).unwrap())
            .collect(),
            hosts: Vec::new(),
            starts: vec![
                start(2, ours, 20.0),
                start(4, ours, 30.0),
                start(8, ours, 50.0),
                start(16, ours, 90.0),
                start(32, ours, 400.0),
                start(32, dora, 300.0),
            ],
        };
        let md = g.markdown(&[]);
        assert!(
            md.contains(
                "64KiB: p50 per hop from 100.00 us to 150.00 us (×1.50; within ×1.3: MISSED)"
            ),
            "{md}"
        );
        assert!(
            md.contains("1MiB: p50 per hop from 1.00 ms to 1.00 ms (×1.00; within ×1.3: met)"),
            "{md}"
        );
        assert!(
            md.contains("64KiB, 2 operators: throughput ×3.00 of dora-rs's (≥ ×2: met)"),
            "{md}"
        );
        assert!(
            md.contains("1MiB, 8 operators: throughput ×3.00 of dora-rs's (≥ ×2: met)"),
            "{md}"
        );
        // Steps per added operator: 5, 5, 5 ms, then 19.4 ms: not linear.
        assert!(md.contains("linear or better: MISSED"), "{md}");
        assert!(
            md.contains("32 operators: start-up ×1.33 of dora-rs's (≤ ×1: MISSED)"),
            "{md}"
        );
        assert!(
            md.contains("| 16 | fastio, Rust operators | 90.00 ms |"),
            "{md}"
        );
        assert!(
            md.contains("4KiB: ours ≤ iceoryx2 at every count (producer's cost and latency, p50): MISSED, behind at 16 (producer ×0.28, latency ×1.20)"),
            "{md}"
        );
        assert!(
            md.contains("4KiB: our producer's cost at 16 consumers ×2.50 of at 1 (≤ ×2: MISSED)"),
            "{md}"
        );
        assert!(
            md.contains("| 4KiB | 1 | 1.00 us / 2.00 us | 10.00 us / 12.00 us |"),
            "{md}"
        );
        assert_eq!(FanoutRow::parse("fanout side=fastio size=4KiB"), None);
    }
}
