//! The goal rows against iceoryx2, measured in alternating pairs.
//!
//! This VM's two vCPUs are threads of the host, and the host moves them
//! between its cores: a cache line's round trip between our two cores
//! (`core_round_trip_ns`) is about 100 ns in one minute, 230 or 530 ns in
//! another, and every handoff between two processes pays a few such round
//! trips. In one `cargo bench` of the whole workspace our handoff bench
//! and iceoryx2's run minutes apart, so their ratio in the tables says as
//! much about the host as about either library (2026-11-27: our 4 KiB
//! spinning stream 591 ns against iceoryx2's 230 ns in a report; run back
//! to back in the slow placement, 590 ns against 861 ns).
//!
//! So each goal row against iceoryx2 is measured again in [`ROUNDS`]
//! rounds. A round runs our function and iceoryx2's back to back, each in
//! a bench process of its own with the same criterion settings (which one
//! goes first alternates from round to round), and samples the core round
//! trip just before. The goal's ratio is the median over the rounds of
//! the ratio within each round; the report lists every round.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime};

use serde_json::Value;

use crate::bench::{Groups, Measured, collect, target_dir};
use crate::root;

/// Rounds per goal row.
pub(crate) const ROUNDS: usize = 5;

/// One goal row against iceoryx2: the criterion group (`handoff/4KiB`,
/// `stream/1MiB`) and the function of each side.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Pair {
    pub(crate) group: String,
    pub(crate) ours: &'static str,
    pub(crate) peer: &'static str,
}

/// Every goal row against iceoryx2, in the report's order.
pub(crate) fn iceoryx2_pairs() -> Vec<Pair> {
    let pair = |group: &str, ours, peer| Pair {
        group: group.to_owned(),
        ours,
        peer,
    };
    let mut out = vec![
        pair("handoff/4KiB", "fastio_warm_page", "iceoryx2_page"),
        pair(
            "handoff/4KiB",
            "fastio_warm_spin_page",
            "iceoryx2_poll_page",
        ),
        pair("handoff/4KiB", "fastio_ring_page", "iceoryx2_page"),
        pair(
            "handoff/4KiB",
            "fastio_ring_spin_page",
            "iceoryx2_poll_page",
        ),
    ];
    for size in ["4KiB", "64KiB", "1MiB", "16MiB", "64MiB"] {
        let group = format!("stream/{size}");
        out.push(pair(&group, "fastio_ring_page", "iceoryx2_page"));
        out.push(pair(&group, "fastio_ring_spin_page", "iceoryx2_poll_page"));
    }
    // Every byte written and read (what operators do with whole frames).
    for size in ["4KiB", "64KiB", "1MiB", "16MiB", "64MiB"] {
        let group = format!("stream/{size}");
        out.push(pair(&group, "fastio_ring_all", "iceoryx2_all"));
        out.push(pair(&group, "fastio_ring_spin_all", "iceoryx2_poll_all"));
    }
    for size in ["1MiB", "16MiB", "64MiB"] {
        let group = format!("stream/{size}");
        out.push(pair(&group, "fastio_warm_page", "iceoryx2_page"));
        out.push(pair(&group, "fastio_warm_all", "iceoryx2_all"));
    }
    out
}

/// How often one side of a stream row waited, over a bench process's
/// batches (warm-up included): `(waited, frames)` of the consumer (for
/// data) and of the producer (for space; ours only: iceoryx2's publisher
/// retries inside `send`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Waits {
    pub(crate) consumer: Option<(u64, u64)>,
    pub(crate) producer: Option<(u64, u64)>,
}

impl Waits {
    /// Sums the lines the benches append (`consumer|producer WAITED
    /// FRAMES`, see `handoff_common::Regime`).
    pub(crate) fn parse(text: &str) -> Waits {
        let mut w = Waits::default();
        for line in text.lines() {
            let mut it = line.split_whitespace();
            let (Some(side), Some(Ok(waited)), Some(Ok(frames))) = (
                it.next(),
                it.next().map(str::parse::<u64>),
                it.next().map(str::parse::<u64>),
            ) else {
                continue;
            };
            let slot = match side {
                "consumer" => &mut w.consumer,
                "producer" => &mut w.producer,
                _ => continue,
            };
            let (a, b) = slot.unwrap_or((0, 0));
            *slot = Some((a + waited, b + frames));
        }
        w
    }

    /// `consumer waited 12%, producer 80%` (what was counted).
    pub(crate) fn text(&self) -> String {
        let pct = |(w, n): (u64, u64)| 100.0 * w as f64 / n.max(1) as f64;
        let mut parts = Vec::new();
        if let Some(c) = self.consumer {
            parts.push(format!("consumer waited {:.0}%", pct(c)));
        }
        if let Some(p) = self.producer {
            parts.push(format!("producer {:.0}%", pct(p)));
        }
        parts.join(", ")
    }
}

/// One round of a pair: both medians (per payload), which went first, and
/// the core round trip sampled just before.
#[derive(Clone, Debug)]
pub(crate) struct Round {
    pub(crate) ours_ns: f64,
    pub(crate) peer_ns: f64,
    pub(crate) ours_first: bool,
    pub(crate) core_round_trip_ns: f64,
    /// How often each side waited (stream rows).
    pub(crate) ours_waits: Waits,
    pub(crate) peer_waits: Waits,
}

/// A pair and its rounds.
#[derive(Clone, Debug)]
pub(crate) struct PairedRow {
    pub(crate) pair: Pair,
    pub(crate) rounds: Vec<Round>,
}

impl PairedRow {
    /// The median over the rounds of our time ÷ the peer's.
    pub(crate) fn ratio(&self) -> Option<f64> {
        median(self.rounds.iter().map(|r| r.ours_ns / r.peer_ns).collect())
    }

    /// The median of our rounds' medians.
    pub(crate) fn ours_ns(&self) -> Option<f64> {
        median(self.rounds.iter().map(|r| r.ours_ns).collect())
    }

    /// The median of the peer's rounds' medians.
    pub(crate) fn peer_ns(&self) -> Option<f64> {
        median(self.rounds.iter().map(|r| r.peer_ns).collect())
    }
}

/// The paired rows of one run.
#[derive(Default)]
pub(crate) struct Paired {
    pub(crate) rows: Vec<PairedRow>,
}

impl Paired {
    /// The row of `group`, `ours` against `peer`, when it was measured.
    pub(crate) fn get(&self, group: &str, ours: &str, peer: &str) -> Option<&PairedRow> {
        self.rows
            .iter()
            .find(|r| r.pair.group == group && r.pair.ours == ours && r.pair.peer == peer)
    }
}

/// The median of `v` (the mean of the middle two for an even count, as
/// for criterion's samples: [`crate::bench::spread`]).
pub(crate) fn median(mut v: Vec<f64>) -> Option<f64> {
    crate::bench::spread(&mut v).map(|(median, _, _)| median)
}

/// A bench executable and the directory cargo runs it in.
struct Bench {
    exe: PathBuf,
    dir: PathBuf,
}

impl Bench {
    /// Builds the `handoff` bench of `manifest` (into `target_dir`) and
    /// finds its executable in cargo's messages.
    fn build(manifest: &Path, target_dir: &Path) -> Result<Bench, String> {
        let out = crate::step::cargo(["bench", "--no-run", "--message-format=json", "--bench"])
            .arg("handoff")
            .arg("--manifest-path")
            .arg(manifest)
            .env("CARGO_TARGET_DIR", target_dir)
            .output()
            .map_err(|e| format!("cargo bench --no-run: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "cargo bench --no-run --manifest-path {}: {}",
                manifest.display(),
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
            ));
        }
        let exe = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|m| {
                m["target"]["name"] == "handoff"
                    && m["target"]["kind"]
                        .as_array()
                        .is_some_and(|k| k.iter().any(|k| k == "bench"))
            })
            .find_map(|m| m["executable"].as_str().map(PathBuf::from))
            .ok_or_else(|| format!("no handoff bench executable for {}", manifest.display()))?;
        let dir = manifest.parent().unwrap_or(Path::new(".")).to_path_buf();
        Ok(Bench { exe, dir })
    }

    /// Runs the one benchmark `group/function` (criterion's `--exact`)
    /// writing under `home`, and reads its result.
    fn measure(
        &self,
        home: &Path,
        group: &str,
        function: &str,
    ) -> Result<(Measured, Waits), String> {
        let (g, value) = group.split_once('/').unwrap_or((group, ""));
        let id = format!("{g}/{function}/{value}");
        let since = SystemTime::now();
        let regime = home.join("regime.txt");
        let _ = std::fs::remove_file(&regime);
        let out = Command::new(&self.exe)
            .args(["--bench", "--exact", &id])
            .current_dir(&self.dir)
            .env("CRITERION_HOME", home)
            .env("FASTIO_BENCH_REGIME", &regime)
            .output()
            .map_err(|e| format!("{}: {e}", self.exe.display()))?;
        if !out.status.success() {
            return Err(format!(
                "{id} ({}): {}",
                self.exe.display(),
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
            ));
        }
        let mut groups = Groups::new();
        collect(home, since, &mut groups);
        let waits = Waits::parse(&std::fs::read_to_string(&regime).unwrap_or_default());
        groups
            .remove(group)
            .and_then(|rs| rs.into_iter().find(|r| r.function == function))
            .map(|m| (m, waits))
            .ok_or_else(|| format!("{id}: no criterion result under {}", home.display()))
    }
}

/// Measures every pair of `pairs` in [`ROUNDS`] alternating rounds.
pub(crate) fn run(pairs: &[Pair]) -> Result<Paired, String> {
    let root = root();
    let ours = Bench::build(&root.join("crates/fastio/Cargo.toml"), &target_dir())?;
    let peer = Bench::build(
        &root.join("peers/iceoryx2/Cargo.toml"),
        &root.join("target").join("peers"),
    )?;
    let home = target_dir().join("criterion-paired");
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(&home).map_err(|e| format!("create {}: {e}", home.display()))?;
    let mut paired = Paired::default();
    for pair in pairs {
        let mut rounds = Vec::new();
        for k in 0..ROUNDS {
            let ours_first = k.is_multiple_of(2);
            let core_round_trip_ns = core_round_trip_ns();
            let (mut o, mut p) = (None, None);
            for side in [ours_first, !ours_first] {
                if side {
                    o = Some(ours.measure(&home, &pair.group, pair.ours)?);
                } else {
                    p = Some(peer.measure(&home, &pair.group, pair.peer)?);
                }
            }
            let (Some((o, ours_waits)), Some((p, peer_waits))) = (o, p) else {
                unreachable!("both sides ran")
            };
            println!(
                "paired {} {} {:.0} ns / {} {:.0} ns = x{:.2} (core round trip {:.0} ns) {} / {}",
                pair.group,
                pair.ours,
                o.median_ns,
                pair.peer,
                p.median_ns,
                o.median_ns / p.median_ns,
                core_round_trip_ns,
                ours_waits.text(),
                peer_waits.text()
            );
            rounds.push(Round {
                ours_ns: o.median_ns,
                peer_ns: p.median_ns,
                ours_first,
                core_round_trip_ns,
                ours_waits,
                peer_waits,
            });
        }
        paired.rows.push(PairedRow {
            pair: pair.clone(),
            rounds,
        });
    }
    Ok(paired)
}

/// A word on a cache line of its own.
#[repr(align(128))]
struct Line(AtomicU64);

/// Spins until `line` holds `want`; false once `deadline` passed.
fn spin_until(line: &Line, want: u64, deadline: Instant) -> bool {
    let mut spins = 0u32;
    while line.0.load(Ordering::Acquire) != want {
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(4096) && Instant::now() >= deadline {
            return false;
        }
        std::hint::spin_loop();
    }
    true
}

/// The time of one round trip of a cache line between two threads (each
/// spinning until the other has stored its turn, on a line of its own),
/// the median of five bursts of 20,000 after 5,000 untimed (the scheduler
/// first places the new thread): what the host's placement of our two
/// vCPUs costs every cross-process handoff at the moment.
pub(crate) fn core_round_trip_ns() -> f64 {
    const WARM: u64 = 5_000;
    const TRIPS: u64 = 20_000;
    let mut bursts = Vec::new();
    for _ in 0..5 {
        // Both threads give up at the deadline (a busy machine may not
        // run them at once).
        let deadline = Instant::now() + std::time::Duration::from_secs(3);
        let lines = Arc::new([Line(AtomicU64::new(0)), Line(AtomicU64::new(0))]);
        let other = lines.clone();
        let echo = std::thread::spawn(move || {
            for i in 1..=WARM + TRIPS {
                if !spin_until(&other[0], i, deadline) {
                    return;
                }
                other[1].0.store(i, Ordering::Release);
            }
        });
        let mut t0 = Instant::now();
        let mut done = true;
        for i in 1..=WARM + TRIPS {
            if i == WARM + 1 {
                t0 = Instant::now();
            }
            lines[0].0.store(i, Ordering::Release);
            if !spin_until(&lines[1], i, deadline) {
                done = false;
                break;
            }
        }
        let ns = t0.elapsed().as_nanos() as f64 / TRIPS as f64;
        let _ = echo.join();
        if done {
            bursts.push(ns);
        }
    }
    median(bursts).unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_are_summed_per_side() {
        let w = Waits::parse("consumer 3 10\nproducer 0 10\nconsumer 1 10\njunk\nproducer x 1\n");
        assert_eq!(w.consumer, Some((4, 20)));
        assert_eq!(w.producer, Some((0, 10)));
        assert_eq!(w.text(), "consumer waited 20%, producer 0%");
        assert_eq!(Waits::parse("").text(), "");
    }

    #[test]
    fn every_stream_size_has_page_and_all_rows_in_both_modes() {
        let pairs = iceoryx2_pairs();
        for size in ["4KiB", "64KiB", "1MiB", "16MiB", "64MiB"] {
            for (ours, peer) in [
                ("fastio_ring_page", "iceoryx2_page"),
                ("fastio_ring_spin_page", "iceoryx2_poll_page"),
                ("fastio_ring_all", "iceoryx2_all"),
                ("fastio_ring_spin_all", "iceoryx2_poll_all"),
            ] {
                let group = format!("stream/{size}");
                assert!(
                    pairs
                        .iter()
                        .any(|p| p.group == group && p.ours == ours && p.peer == peer),
                    "{group} {ours}"
                );
            }
        }
    }

    #[test]
    fn ratio_is_the_median_of_the_rounds_ratios() {
        let round = |ours_ns, peer_ns| Round {
            ours_ns,
            peer_ns,
            ours_first: true,
            core_round_trip_ns: 100.0,
            ours_waits: Waits::default(),
            peer_waits: Waits::default(),
        };
        let row = PairedRow {
            pair: iceoryx2_pairs().remove(0),
            // Ratios 0.5, 2.0, 0.9: the median is 0.9, not the ratio of the
            // medians (300 / 400).
            rounds: vec![
                round(100.0, 200.0),
                round(800.0, 400.0),
                round(300.0, 333.3),
            ],
        };
        assert!((row.ratio().unwrap() - 300.0 / 333.3).abs() < 1e-9);
        assert_eq!(row.ours_ns(), Some(300.0));
        assert_eq!(row.peer_ns(), Some(333.3));
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }

    #[test]
    fn every_goal_row_against_iceoryx2_is_paired_once() {
        let pairs = iceoryx2_pairs();
        assert_eq!(pairs.len(), 4 + 10 + 10 + 6);
        for (i, p) in pairs.iter().enumerate() {
            assert!(p.peer.starts_with("iceoryx2_"), "{p:?}");
            assert!(!pairs[i + 1..].contains(p), "{p:?} twice");
        }
    }

    #[test]
    fn the_core_round_trip_is_measured() {
        let ns = core_round_trip_ns();
        assert!(ns.is_finite() && ns > 0.0, "{ns}");
    }
}
