//! The Rust operator of the chain bench (`cargo xtask bench chain`):
//! `fio-chainop ROLE`, one `uint8` input `frame` and/or one `uint8`
//! output `frame`, doing what the bench's Python and dora-rs nodes do.
//!
//! * `source` — copies a prepared frame into each output slot (as a
//!   camera driver copies its capture buffer), its number in the first 8
//!   bytes; `PAUSE_US` between frames.
//! * `stage` — copies each input frame into its output slot.
//! * `sink` — reads each frame's number; writes to the file `RESULT` the
//!   frame count, the wall-clock times of the first and last frame, and
//!   each frame's latency since its source timestamp (ns), one per line
//!   (`count N`, `disorder N`, `torn N`, `first_ns T`, `last_ns T`, `lat_ns L...`,
//!   `tick_ns T...`: when the source took frames 0, 1000, 2000, …). With
//!   `WAIT_MS` it sleeps that long first and writes `loop_ns`, the time
//!   its loop took (frames already waiting: the per-frame cost of the
//!   operator's own frame loop). With `RSS_AFTER=k` it keeps nothing per
//!   frame and writes its resident memory at frame `k` and at the end
//!   (`rss_kb_at`, `rss_kb_end`).
//!
//! The sink also counts frames out of order (`disorder N`) and frames
//! whose payload is not the frame its number says (`torn N`).

#![forbid(unsafe_code)]

use std::fmt::Write as _;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fastio::Operator;
use fastio_examples::Result;

const PORT: &str = "frame";

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Errors are printed as their message (one line), then exit 1.
fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result {
    let role = std::env::args().nth(1).unwrap_or_default();
    let mut op = Operator::from_env()?;
    match role.as_str() {
        "source" => {
            let pause = env_u64("PAUSE_US").map(Duration::from_micros);
            let mut prepared: Vec<u8> = Vec::new();
            for step in op.frames()? {
                let step = step?;
                let mut slot = step.output(PORT)?;
                let out = slot.bytes_mut()?;
                if prepared.len() != out.len() {
                    prepared = (0..out.len()).map(|i| i as u8).collect();
                }
                out.copy_from_slice(&prepared);
                if let Some(head) = out.get_mut(..8) {
                    head.copy_from_slice(&step.seq().to_le_bytes());
                }
                drop(slot);
                drop(step);
                if let Some(p) = pause {
                    std::thread::sleep(p);
                }
            }
        }
        "stage" => {
            for step in op.frames()? {
                let step = step?;
                let input = step.input(PORT)?;
                let mut slot = step.output(PORT)?;
                slot.bytes_mut()?.copy_from_slice(input.bytes());
            }
        }
        "sink" => sink(&mut op)?,
        other => return Err(format!("unknown role {other:?}").into()),
    }
    Ok(())
}

fn sink(op: &mut Operator) -> Result {
    let result = std::env::var("RESULT").map_err(|_| "RESULT is not set")?;
    let wait = env_u64("WAIT_MS");
    let rss_after = env_u64("RSS_AFTER");
    let mut rss_at = None;
    if let Some(ms) = wait {
        std::thread::sleep(Duration::from_millis(ms));
    }
    let mut latencies: Vec<u64> = Vec::new();
    // When the source took every 1,000th frame: its rate over time.
    let mut ticks: Vec<u64> = Vec::new();
    let (mut first, mut last) = (0u64, 0u64);
    let mut expect: Option<u64> = None;
    let mut count = 0u64;
    let (mut disorder, mut torn) = (0u64, 0u64);
    let started = Instant::now();
    for step in op.frames()? {
        let step = step?;
        let input = step.input(PORT)?;
        let mut head = [0u8; 8];
        let n = input.bytes().len().min(8);
        head[..n].copy_from_slice(&input.bytes()[..n]);
        let payload_seq = u64::from_le_bytes(head);
        let seq = step.seq();
        if expect.is_some_and(|e| seq < e) {
            disorder += 1;
        }
        if payload_seq != seq {
            torn += 1;
        }
        expect = Some(expect.map_or(seq + 1, |e| e.max(seq + 1)));
        count += 1;
        if rss_after == Some(count) {
            rss_at = rss_kb();
        }
        if wait.is_none() && rss_after.is_none() {
            let now = now_ns();
            latencies.push(now.saturating_sub(step.timestamp_ns()));
            if seq % 1000 == 0 {
                ticks.push(step.timestamp_ns());
            }
            if first == 0 {
                first = now;
            }
            last = now;
        }
    }
    let loop_ns = started.elapsed().as_nanos();
    let mut out = format!("count {count}\ndisorder {disorder}\ntorn {torn}\n");
    if wait.is_some() {
        let _ = writeln!(out, "loop_ns {loop_ns}");
    } else if rss_after.is_some() {
        let (at, end) = (
            rss_at.ok_or("no RSS at RSS_AFTER")?,
            rss_kb().ok_or("no RSS")?,
        );
        let _ = writeln!(out, "rss_kb_at {at}\nrss_kb_end {end}");
    } else {
        let _ = writeln!(out, "first_ns {first}\nlast_ns {last}");
        out.push_str("lat_ns");
        for l in &latencies {
            let _ = write!(out, " {l}");
        }
        out.push_str("\ntick_ns");
        for t in &ticks {
            let _ = write!(out, " {t}");
        }
        out.push('\n');
    }
    std::fs::write(&result, out)?;
    Ok(())
}

/// This process's resident memory (kB), from `/proc/self/status`.
fn rss_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
