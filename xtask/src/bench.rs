//! `cargo xtask bench`: runs every criterion bench of the workspace and
//! reports each result with its ratio to every `baseline*` function of the
//! same group (and, for parameterised benchmarks, the same parameter),
//! measured in the same run; then runs the peers beside ours (see
//! [`crate::bench_peers`]): iceoryx2 beside the handoff
//! group, Apache TVM's loader beside the params read group, numpy beside
//! ndobject's copies and casts, the Python package beside the steady
//! state.
//!
//! `cargo xtask bench params` runs only the params-io bench;
//! `cargo xtask bench chain` only the stream chain beside dora-rs
//! ([`crate::bench_chain`]);
//! `cargo xtask bench growth` only how whole pipelines' costs grow
//! ([`crate::bench_growth`]);
//! `cargo xtask bench paired [GROUP]` only the goal rows against iceoryx2
//! in alternating pairs ([`crate::bench_paired`]).
//! `cargo xtask bench --report` runs everything and writes
//! `docs/bench/README.md` and its plots ([`crate::report`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::Value;

use crate::bench_paired::{self, Paired};
use crate::bench_peers::{self, Peer};
use crate::root;
use crate::step::{Step, cargo};

/// The params-io read group, and its size (as the bench computes it).
pub(crate) const PARAMS_READ_GROUP: &str = "params_read_1GiB";

/// One criterion result: per-iteration times of its samples.
pub(crate) struct Measured {
    pub(crate) function: String,
    pub(crate) mean_ns: f64,
    pub(crate) median_ns: f64,
    pub(crate) min_ns: f64,
    pub(crate) max_ns: f64,
    pub(crate) samples: usize,
    /// Bytes per iteration, when the bench declared a throughput.
    pub(crate) bytes: Option<f64>,
}

/// Results by group (`group` or `group/value`).
pub(crate) type Groups = BTreeMap<String, Vec<Measured>>;

/// The directory cargo builds into (`CARGO_TARGET_DIR` or `target`).
pub(crate) fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => root().join(dir),
        None => root().join("target"),
    }
}

pub(crate) fn run(extra: &[String]) -> Result<(), String> {
    let report = extra.iter().any(|a| a == "--report");
    let extra: Vec<String> = extra.iter().filter(|a| *a != "--report").cloned().collect();
    if report && !extra.is_empty() {
        return Err("`bench --report` runs every group; it takes no filter".into());
    }
    if extra.first().is_some_and(|a| a == "hosts") {
        // `bench hosts [entries | latency]`: all of the hosts section, or
        // the entries' tables (plain, TLS, the socket buffer check), or the
        // three-host chain's latency.
        let part = match extra.get(1).map(String::as_str) {
            None => crate::bench_hosts::Part::All,
            Some("entries") => crate::bench_hosts::Part::Entries,
            Some("latency") => crate::bench_hosts::Part::Latency,
            Some(other) => {
                return Err(format!(
                    "bench hosts: no part {other:?} (entries or latency, or none for all)"
                ));
            }
        };
        let mut out = String::new();
        let peers = crate::bench_hosts::run_part(&mut out, part)?;
        print!("{out}");
        for p in &peers {
            println!("peer {}: {}", p.name, p.status);
        }
        return Ok(());
    }
    if extra.first().is_some_and(|a| a == "wakes") {
        // `bench wakes`: the wake-up probe the hosts bench prints.
        println!(
            "{}",
            crate::wake_probe::sentence()
                .ok_or("the wake-up probe needs two cores and `taskset`")?
        );
        return Ok(());
    }
    if extra.first().is_some_and(|a| a == "paired") {
        // `bench paired [GROUP]`: the goal rows against iceoryx2 (of one
        // group, such as `stream/4KiB`) in alternating pairs.
        // `bench paired [GROUP [OURS...]]`: one group, and in it only the
        // rows of our functions named.
        let pairs: Vec<_> = bench_paired::iceoryx2_pairs()
            .into_iter()
            .filter(|p| extra.get(1).is_none_or(|g| p.group == *g))
            .filter(|p| extra.len() <= 2 || extra[2..].iter().any(|f| f == p.ours))
            .collect();
        if pairs.is_empty() {
            return Err(format!(
                "no goal row against iceoryx2 in group {:?}",
                extra[1]
            ));
        }
        for row in bench_paired::run(&pairs)?.rows {
            println!(
                "{} {} / {}: x{:.2} (median of {} rounds)",
                row.pair.group,
                row.pair.ours,
                row.pair.peer,
                row.ratio().unwrap_or(f64::NAN),
                row.rounds.len()
            );
        }
        return Ok(());
    }
    if extra.first().is_some_and(|a| a == "growth") {
        // `bench growth [consumers | stages | hosts | operators]`: how
        // costs grow, all of it or one part.
        let parts = match extra.get(1) {
            None => crate::bench_growth::Part::ALL.to_vec(),
            Some(w) => vec![crate::bench_growth::Part::named(w).ok_or_else(|| {
                format!("bench growth: no part {w:?} (consumers, stages, hosts or operators)")
            })?],
        };
        let (growth, peers) = crate::bench_growth::run(&parts)?;
        print!("{}", growth.markdown(&[]));
        for p in &peers {
            println!("peer {}: {}", p.name, p.status);
        }
        return Ok(());
    }
    if extra.first().is_some_and(|a| a == "chain") && extra.get(1).is_some_and(|a| a == "viewer") {
        let mut out = String::new();
        crate::bench_chain::run_viewer(&mut out)?;
        print!("{out}");
        return Ok(());
    }
    if extra.first().is_some_and(|a| a == "chain") && extra.get(1).is_some_and(|a| a == "recorder")
    {
        let mut out = String::new();
        crate::bench_chain::run_recorders(&mut out)?;
        print!("{out}");
        return Ok(());
    }
    if extra.first().is_some_and(|a| a == "chain") {
        let mut out = String::new();
        let peers = crate::bench_chain::run(false, &mut out)?;
        print!("{out}");
        for p in &peers {
            println!("peer {}: {}", p.name, p.status);
        }
        return Ok(());
    }
    let started = SystemTime::now();
    let (mut args, filter) = match extra.split_first() {
        Some((first, rest)) if first == "params" => (
            ["bench", "-p", "params-io", "--bench", "params"]
                .map(str::to_owned)
                .to_vec(),
            rest.to_vec(),
        ),
        _ => (
            vec!["bench".to_owned(), "--workspace".to_owned()],
            extra.clone(),
        ),
    };
    if !filter.is_empty() {
        args.push("--".to_owned());
        args.extend(filter.iter().cloned());
    }
    Step::new("bench", cargo(args)).run()?;
    let criterion_dir = target_dir().join("criterion");
    let mut groups = Groups::new();
    collect(&criterion_dir, started, &mut groups);
    let mut peers: Vec<Peer> = Vec::new();
    let mut beside = String::new();
    if groups
        .keys()
        .any(|g| g.starts_with("handoff/") || g.starts_with("stream/"))
    {
        peers.push(bench_peers::iceoryx2(&criterion_dir, &filter));
        groups.clear();
        collect(&criterion_dir, started, &mut groups);
    }
    // The goal rows against iceoryx2 once more, in alternating pairs (see
    // `bench_paired`): only for the report, whose goals use them.
    let mut paired = Paired::default();
    if report && peers.iter().any(|p| p.name == "iceoryx2" && p.measured) {
        match bench_paired::run(&bench_paired::iceoryx2_pairs()) {
            Ok(p) => paired = p,
            Err(e) => println!("paired rounds against iceoryx2 not measured: {e}"),
        }
    }
    if groups.is_empty() {
        println!("bench: no criterion results were written");
    }
    print!("{}", table(&groups));
    let mut params = String::new();
    if groups.contains_key(PARAMS_READ_GROUP) {
        let (p, section) = crate::bench_params::run(report);
        peers.extend(p);
        params = section;
    }
    if groups.keys().any(|g| g.starts_with("ndobject/")) {
        peers.push(bench_peers::numpy_beside(&groups, &mut beside)?);
    }
    if groups.contains_key("steady_state") {
        peers.push(bench_peers::python_beside(&groups, report, &mut beside)?);
    }
    let mut chain = String::new();
    let mut hosts = String::new();
    let mut growth = crate::bench_growth::Growth::default();
    if report {
        peers.extend(crate::bench_chain::run(report, &mut chain)?);
        let (g, p) = crate::bench_growth::run(&crate::bench_growth::Part::ALL)?;
        growth = g;
        peers.extend(p);
        peers.extend(crate::bench_hosts::run(&mut hosts)?);
    }
    print!("{params}{beside}{chain}{hosts}");
    for p in &peers {
        println!("peer {}: {}", p.name, p.status);
    }
    if report {
        crate::report::write(
            &groups,
            &peers,
            &crate::report::Sections {
                params: &params,
                beside: &beside,
                chain: &chain,
                hosts: &hosts,
                paired: &paired,
                growth: &growth,
            },
        )?;
    }
    Ok(())
}

/// Every group with each result's mean and its ratio to every baseline.
fn table(groups: &Groups) -> String {
    let mut out = String::new();
    for (group, results) in groups {
        out.push_str(group);
        out.push('\n');
        let baselines: Vec<&Measured> = results
            .iter()
            .filter(|r| r.function.starts_with("baseline"))
            .collect();
        for r in results {
            let mut line = format!("  {:<32} {:>14}", r.function, human_time(r.mean_ns));
            if let Some(bytes) = r.bytes {
                line.push_str(&format!("  {:>10.2} GB/s", bytes / r.mean_ns));
            }
            for base in baselines.iter().filter(|b| b.function != r.function) {
                line.push_str(&format!(
                    "  x{:.3} of {}",
                    r.mean_ns / base.mean_ns,
                    base.function
                ));
            }
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

pub(crate) fn human_time(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.1} ns")
    } else if ns < 1e6 {
        format!("{:.2} us", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// Finds the `new/` result directories criterion wrote after `since`.
pub(crate) fn collect(dir: &Path, since: SystemTime, out: &mut Groups) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        if path.file_name().is_some_and(|n| n == "new") {
            if let Some((group, r)) = read_result(&path, since) {
                out.entry(group).or_default().push(r);
            }
        } else {
            collect(&path, since, out);
        }
    }
    for results in out.values_mut() {
        results.sort_by(|a, b| a.function.cmp(&b.function));
    }
}

/// The median, minimum and maximum of per-iteration sample times.
pub(crate) fn spread(per_iter: &mut [f64]) -> Option<(f64, f64, f64)> {
    if per_iter.is_empty() {
        return None;
    }
    per_iter.sort_by(f64::total_cmp);
    let n = per_iter.len();
    let median = if n % 2 == 1 {
        per_iter[n / 2]
    } else {
        (per_iter[n / 2 - 1] + per_iter[n / 2]) / 2.0
    };
    Some((median, per_iter[0], per_iter[n - 1]))
}

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

fn read_result(dir: &Path, since: SystemTime) -> Option<(String, Measured)> {
    let estimates = dir.join("estimates.json");
    if std::fs::metadata(&estimates).ok()?.modified().ok()? < since {
        return None;
    }
    let bench = read_json(&dir.join("benchmark.json"))?;
    let est = read_json(&estimates)?;
    let sample = read_json(&dir.join("sample.json"))?;
    // Each criterion sample is a batch of `iters` iterations taking `times`
    // nanoseconds in all: its per-iteration time is the ratio.
    let iters = sample["iters"].as_array()?;
    let times = sample["times"].as_array()?;
    let mut per_iter: Vec<f64> = iters
        .iter()
        .zip(times)
        .filter_map(|(i, t)| Some(t.as_f64()? / i.as_f64()?))
        .collect();
    let samples = per_iter.len();
    let (median_ns, min_ns, max_ns) = spread(&mut per_iter)?;
    // A parameterised benchmark (`BenchmarkId::new(function, value)`) is
    // compared with the baselines of the same value: `group/value`.
    let mut group = bench["group_id"].as_str()?.to_owned();
    let function = bench["function_id"].as_str().unwrap_or("").to_owned();
    if let Some(v) = bench["value_str"].as_str() {
        group = format!("{group}/{v}");
    }
    Some((
        group,
        Measured {
            function,
            mean_ns: est["mean"]["point_estimate"].as_f64()?,
            median_ns,
            min_ns,
            max_ns,
            samples,
            bytes: bench["throughput"]["Bytes"].as_f64(),
        },
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn spread_is_median_min_max_of_the_samples() {
        let mut odd = [3.0, 1.0, 2.0];
        assert_eq!(super::spread(&mut odd), Some((2.0, 1.0, 3.0)));
        let mut even = [4.0, 1.0, 3.0, 2.0];
        assert_eq!(super::spread(&mut even), Some((2.5, 1.0, 4.0)));
        assert_eq!(super::spread(&mut []), None);
    }
}
