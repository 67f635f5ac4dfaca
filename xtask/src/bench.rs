//! `cargo xtask bench`: runs every criterion bench of the workspace and
//! reports each result with its ratio to the `baseline*` function of the
//! same group, measured in the same run.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::SystemTime;

use serde_json::Value;

use crate::root;
use crate::step::{Step, cargo};

struct Result1 {
    function: String,
    mean_ns: f64,
    bytes: Option<f64>,
}

pub(crate) fn run(extra: &[String]) -> Result<(), String> {
    let started = SystemTime::now();
    let mut args = vec!["bench".to_owned(), "--workspace".to_owned()];
    if !extra.is_empty() {
        args.push("--".to_owned());
        args.extend(extra.iter().cloned());
    }
    Step::new("bench", cargo(args)).run()?;
    let mut groups: BTreeMap<String, Vec<Result1>> = BTreeMap::new();
    collect(
        &root().join("target").join("criterion"),
        started,
        &mut groups,
    );
    if groups.is_empty() {
        println!("bench: no criterion results were written");
    }
    for (group, results) in &groups {
        println!("{group}");
        let baseline = results
            .iter()
            .find(|r| r.function.starts_with("baseline"))
            .map(|r| r.mean_ns);
        for r in results {
            let mut line = format!("  {:<32} {:>14}", r.function, human_time(r.mean_ns));
            if let Some(bytes) = r.bytes {
                line.push_str(&format!("  {:>10.2} GB/s", bytes / r.mean_ns));
            }
            if let Some(base) = baseline {
                line.push_str(&format!("  x{:.3} of baseline time", r.mean_ns / base));
            }
            println!("{line}");
        }
    }
    Ok(())
}

fn human_time(ns: f64) -> String {
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

/// Finds `new/benchmark.json` + `new/estimates.json` pairs written after `since`.
fn collect(dir: &Path, since: SystemTime, out: &mut BTreeMap<String, Vec<Result1>>) {
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
}

fn read_result(dir: &Path, since: SystemTime) -> Option<(String, Result1)> {
    let estimates = dir.join("estimates.json");
    if std::fs::metadata(&estimates).ok()?.modified().ok()? < since {
        return None;
    }
    let bench: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("benchmark.json")).ok()?).ok()?;
    let est: Value = serde_json::from_str(&std::fs::read_to_string(estimates).ok()?).ok()?;
    let group = bench["group_id"].as_str()?.to_owned();
    let mut function = bench["function_id"].as_str().unwrap_or("").to_owned();
    if let Some(v) = bench["value_str"].as_str() {
        function = format!("{function}/{v}");
    }
    let bytes = bench["throughput"]["Bytes"].as_f64();
    let mean_ns = est["mean"]["point_estimate"].as_f64()?;
    Some((
        group,
        Result1 {
            function,
            mean_ns,
            bytes,
        },
    ))
}
