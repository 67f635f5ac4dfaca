//! `cargo xtask soak hosts --rounds N [--seed S] [--tls | --plain]`: faults
//! by the hundred on three namespace hosts (issue 51, part 3).
//!
//! Runs the test `soak_rounds_of_random_faults_on_three_hosts` of
//! `crates/fastio-cli/tests/hosts.rs` (root: it makes network namespaces)
//! with `FASTIO_SOAK_ROUNDS`, `FASTIO_SOAK_SEED` and `FASTIO_SOAK_TLS`,
//! reads the line it prints for each round (`soak round=K fault=… host=…
//! at_ms=… tls=… outcome=… slowest_exit_ms=… hangs=… … cause=…`), and
//! prints the figures: rounds, hangs, exits out of the bound, wrong
//! causes, wrong frames, leaks, processes left, the slowest exit per
//! fault kind. They go to `target/soak-hosts.json` too, for the bench
//! report. The test's whole output is in
//! `target/xtask-logs/soak-hosts.log`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use crate::root;
use crate::step::cargo;

pub(crate) const USAGE: &str = "soak hosts --rounds N [--seed S] [--tls | --plain]";

/// The test that runs the rounds.
const TEST: &str = "soak_rounds_of_random_faults_on_three_hosts";

/// The counters of a round line, in the order they are printed.
const COUNTS: [&str; 8] = [
    "hangs",
    "out_of_bound",
    "wrong_causes",
    "wrong_frames",
    "leaks",
    "processes_left",
    "missed",
    "split_causes",
];

/// What `cargo xtask soak hosts` was asked.
#[derive(Debug, PartialEq)]
pub(crate) struct Options {
    pub(crate) rounds: u64,
    /// Decimal or `0x` hexadecimal, as the test reads it; the test's own
    /// default when `None`.
    pub(crate) seed: Option<String>,
    /// Every round over mutual TLS (`Some(true)`), none (`Some(false)`),
    /// or every other one (`None`).
    pub(crate) tls: Option<bool>,
}

pub(crate) fn parse_args(args: &[String]) -> Result<Options, String> {
    let usage = || format!("usage: cargo xtask {USAGE}");
    let mut it = args.iter();
    if it.next().map(String::as_str) != Some("hosts") {
        return Err(format!("what to soak? (hosts)\n{}", usage()));
    }
    let mut o = Options {
        rounds: 0,
        seed: None,
        tls: None,
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--rounds" => {
                o.rounds = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("--rounds takes a number (at least 1)\n{}", usage()))?;
            }
            "--seed" => {
                let s = it
                    .next()
                    .filter(|s| match s.strip_prefix("0x") {
                        Some(hex) => u64::from_str_radix(hex, 16).is_ok(),
                        None => s.parse::<u64>().is_ok(),
                    })
                    .ok_or_else(|| format!("--seed takes a number (or 0x…)\n{}", usage()))?;
                o.seed = Some(s.clone());
            }
            "--tls" => o.tls = Some(true),
            "--plain" => o.tls = Some(false),
            other => return Err(format!("unknown argument {other:?}\n{}", usage())),
        }
    }
    if o.rounds == 0 {
        return Err(format!("--rounds N is required\n{}", usage()));
    }
    Ok(o)
}

/// One round line's `key=value` pairs.
fn parse_round(line: &str) -> Option<BTreeMap<String, String>> {
    let rest = line.strip_prefix("soak round=")?;
    let mut map = BTreeMap::new();
    for (k, part) in std::iter::once(("round", rest.split_whitespace().next()?)).chain(
        rest.split_whitespace()
            .skip(1)
            .filter_map(|p| p.split_once('=')),
    ) {
        map.insert(k.to_owned(), part.to_owned());
    }
    Some(map)
}

/// The figures of the rounds' lines.
#[derive(Debug, Default, PartialEq)]
struct Figures {
    rounds: u64,
    tls_rounds: u64,
    /// ok / failed / hung.
    outcomes: BTreeMap<String, u64>,
    /// The sums of [`COUNTS`].
    counts: BTreeMap<String, u64>,
    /// Per fault kind: rounds, rounds failed, the slowest exit (ms) after
    /// the fault in a failed round.
    faults: BTreeMap<String, (u64, u64, u64)>,
    /// The rounds with any problem (their lines).
    bad: Vec<String>,
}

fn figures(lines: &[String]) -> Figures {
    let mut f = Figures::default();
    for line in lines {
        let Some(r) = parse_round(line) else { continue };
        let num = |k: &str| r.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        f.rounds += 1;
        f.tls_rounds += num("tls");
        let outcome = r.get("outcome").cloned().unwrap_or_default();
        *f.outcomes.entry(outcome.clone()).or_default() += 1;
        let mut bad = false;
        for k in COUNTS {
            *f.counts.entry(k.to_owned()).or_default() += num(k);
            bad |= k != "missed" && num(k) > 0;
        }
        let kind = f
            .faults
            .entry(r.get("fault").cloned().unwrap_or_default())
            .or_default();
        kind.0 += 1;
        if outcome == "failed" {
            kind.1 += 1;
            kind.2 = kind.2.max(num("slowest_exit_ms"));
        }
        if bad {
            f.bad.push(line.clone());
        }
    }
    f
}

pub(crate) fn run(o: &Options) -> Result<(), String> {
    let started = std::time::Instant::now();
    let mut cmd = cargo([
        "test",
        "-p",
        "fastio-cli",
        "--test",
        "hosts",
        "--",
        TEST,
        "--exact",
        "--nocapture",
    ]);
    cmd.env("FASTIO_SOAK_ROUNDS", o.rounds.to_string());
    if let Some(s) = &o.seed {
        cmd.env("FASTIO_SOAK_SEED", s);
    }
    cmd.env(
        "FASTIO_SOAK_TLS",
        match o.tls {
            Some(true) => "1",
            Some(false) => "0",
            None => "mixed",
        },
    );
    let logs = root().join("target/xtask-logs");
    std::fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
    let log_path = logs.join("soak-hosts.log");
    let mut log =
        std::fs::File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
    eprintln!(
        "xtask: soak hosts: {} rounds (log {})",
        o.rounds,
        log_path.display()
    );
    let mut child = cmd
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cargo test: {e}"))?;
    let mut lines = Vec::new();
    let mut summary = None;
    for line in BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.map_err(|e| format!("reading the test's output: {e}"))?;
        let _ = writeln!(log, "{line}");
        if line.starts_with("soak round=") {
            eprintln!("{line}");
            lines.push(line);
        } else if line.starts_with("soak summary ") {
            eprintln!("{line}");
            summary = Some(line);
        } else if line.starts_with("soak round ") || line.contains("panicked") {
            // A round's problem, and what the hosts said.
            eprintln!("{line}");
        }
    }
    let status = child.wait().map_err(|e| format!("cargo test: {e}"))?;
    if lines.is_empty() {
        return Err(format!(
            "no soak round ran ({status}; it needs root to make namespaces): see {}",
            log_path.display()
        ));
    }
    let f = figures(&lines);
    let seed = summary
        .as_deref()
        .and_then(|s| s.split_whitespace().find_map(|p| p.strip_prefix("seed=")))
        .map(str::to_owned)
        .or_else(|| o.seed.clone())
        .unwrap_or_default();
    let date = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let mut command = format!("cargo xtask soak hosts --rounds {}", o.rounds);
    if let Some(s) = &o.seed {
        command += &format!(" --seed {s}");
    }
    match o.tls {
        Some(true) => command += " --tls",
        Some(false) => command += " --plain",
        None => {}
    }
    let count = |k: &str| f.counts.get(k).copied().unwrap_or(0);
    let slowest = f.faults.values().map(|v| v.2).max().unwrap_or(0);
    println!(
        "\nsoak hosts: {} rounds ({} over mutual TLS), seed {seed}, {:.0} s",
        f.rounds,
        f.tls_rounds,
        started.elapsed().as_secs_f64()
    );
    println!(
        "  outcomes: {}",
        f.outcomes
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for k in COUNTS {
        println!("  {:<16}{}", k.replace('_', " "), count(k));
    }
    println!("  slowest exit after the fault (failed rounds; bound 11 s):");
    for (kind, (n, failed, ms)) in &f.faults {
        println!(
            "    {kind:<14} {n:>4} rounds, {failed:>4} failed, slowest {:.1} s",
            *ms as f64 / 1000.0
        );
    }
    let faults: serde_json::Map<String, serde_json::Value> = f
        .faults
        .iter()
        .map(|(k, (n, failed, ms))| {
            (
                k.clone(),
                serde_json::json!({"rounds": n, "failed": failed, "slowest_exit_ms": ms}),
            )
        })
        .collect();
    let json = serde_json::json!({
        "command": command,
        "date": date,
        "seed": seed,
        "rounds": f.rounds,
        "tls_rounds": f.tls_rounds,
        "outcomes": f.outcomes,
        "hangs": count("hangs"),
        "out_of_bound": count("out_of_bound"),
        "wrong_causes": count("wrong_causes"),
        "wrong_frames": count("wrong_frames"),
        "leaks": count("leaks"),
        "processes_left": count("processes_left"),
        "missed": count("missed"),
        "split_causes": count("split_causes"),
        "bound_ms": 11000,
        "slowest_exit_ms": slowest,
        "faults": faults,
        "bad_rounds": f.bad,
        "test_passed": status.success(),
    });
    let out = root().join("target/soak-hosts.json");
    std::fs::write(&out, format!("{json:#}\n")).map_err(|e| format!("{}: {e}", out.display()))?;
    println!("  written to {}", out.display());
    if !f.bad.is_empty() || !status.success() {
        return Err(format!(
            "soak hosts: {} round(s) with a problem ({status}); see {}",
            f.bad.len(),
            log_path.display()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn arguments() {
        assert_eq!(
            parse_args(&args(&[
                "hosts", "--rounds", "30", "--seed", "0x51", "--tls"
            ])),
            Ok(Options {
                rounds: 30,
                seed: Some("0x51".into()),
                tls: Some(true)
            })
        );
        assert!(parse_args(&args(&["hosts"])).is_err());
        assert!(parse_args(&args(&["hosts", "--rounds", "0"])).is_err());
        assert!(parse_args(&args(&["disks", "--rounds", "3"])).is_err());
        assert!(parse_args(&args(&["hosts", "--rounds", "3", "--seed", "x"])).is_err());
    }

    #[test]
    fn figures_of_round_lines() {
        let lines = args(&[
            "soak round=0 fault=link-flap host=a at_ms=2883 down_ms=1634 tls=0 outcome=ok slowest_exit_ms=0 hangs=0 out_of_bound=0 wrong_causes=0 wrong_frames=0 leaks=0 processes_left=0 missed=0 cause=none",
            "soak round=1 fault=sigstop host=c at_ms=404 tls=1 outcome=failed slowest_exit_ms=2635 hangs=0 out_of_bound=0 wrong_causes=1 wrong_frames=0 leaks=0 processes_left=0 missed=0 cause=host-gone:c:sink:running",
            "soak round=2 fault=sigstop host=b at_ms=14 tls=1 outcome=failed slowest_exit_ms=3100 hangs=0 out_of_bound=0 wrong_causes=0 wrong_frames=0 leaks=0 processes_left=0 missed=0 cause=host-gone:b:stage:running",
            "not a round",
        ]);
        let f = figures(&lines);
        assert_eq!(f.rounds, 3);
        assert_eq!(f.tls_rounds, 2);
        assert_eq!(f.outcomes["failed"], 2);
        assert_eq!(f.counts["wrong_causes"], 1);
        assert_eq!(f.faults["sigstop"], (2, 2, 3100));
        assert_eq!(f.faults["link-flap"], (1, 0, 0));
        assert_eq!(f.bad, vec![lines[1].clone()]);
        let r = parse_round(&lines[0]).unwrap();
        assert_eq!(r["round"], "0");
        assert_eq!(r["cause"], "none");
    }
}
