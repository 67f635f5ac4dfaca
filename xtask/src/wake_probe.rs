//! How long this machine takes to run a process it wakes, on the other
//! core and on the waker's own (`cargo xtask bench hosts` prints both
//! beside its tables).
//!
//! Every crossing between hosts ends in a wake-up: the writing thread's
//! data wakes the reading one. On a VM whose idle vCPUs halt (no guest
//! halt polling), a thread woken on the other, idle core waits for the
//! host to run that vCPU again, tens of microseconds, where one woken on
//! the writer's core runs as soon as the writer waits. Which one a
//! crossing gets is the kernel's choice, so a transport's round trip can
//! move by that much from one machine, or one minute, to the next; the
//! probe says what this machine charged in this run.
//!
//! The probe is two processes joined by a pipe, each pinned to a core
//! with `taskset`: the writer sleeps [`GAP`] (long enough for the
//! reader's core to go idle), then writes the wall-clock time; the
//! reader, blocked in `read`, notes how long after that it ran.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::bench_chain::{percentile, wall_ns};

/// The hidden command the probe's two processes run (`xtask wake-probe
/// reader|writer`).
pub(crate) const COMMAND: &str = "wake-probe";

/// Wake-ups per probe.
const WAKES: usize = 2_000;

/// The writer's pause before each wake-up.
const GAP: Duration = Duration::from_micros(300);

/// Percentiles of one probe's wake-ups.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Wakes {
    pub(crate) p50_ns: f64,
    pub(crate) p90_ns: f64,
}

/// The median and the 90th percentile of `samples` (nanoseconds); `None`
/// when there are none.
fn summarize(mut samples: Vec<u64>) -> Option<Wakes> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_unstable();
    Some(Wakes {
        p50_ns: percentile(&samples, 0.5),
        p90_ns: percentile(&samples, 0.9),
    })
}

/// The probe with the reader on core `reader` and the writer on core
/// `writer`.
pub(crate) fn measure(reader: usize, writer: usize) -> Result<Wakes, String> {
    let exe = std::env::current_exe().map_err(|e| format!("wake probe: {e}"))?;
    let pinned = |core: usize, role: &str| {
        let mut c = Command::new("taskset");
        c.args(["-c", &core.to_string()])
            .arg(&exe)
            .args([COMMAND, role]);
        c
    };
    let mut r = pinned(reader, "reader")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("wake probe: taskset: {e}"))?;
    let pipe = r
        .stdin
        .take()
        .ok_or("wake probe: the reader has no stdin")?;
    let w = pinned(writer, "writer")
        .stdout(Stdio::from(pipe))
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("wake probe: taskset: {e}"))?;
    let out = r
        .wait_with_output()
        .map_err(|e| format!("wake probe: {e}"))?;
    for (who, o) in [("writer", &w.status), ("reader", &out.status)] {
        if !o.success() {
            return Err(format!("wake probe: the {who} failed ({o})"));
        }
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let samples = text
        .split_whitespace()
        .map(|w| {
            w.parse::<u64>()
                .map_err(|e| format!("wake probe: {w:?}: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    summarize(samples).ok_or_else(|| "wake probe: no wake-up measured".into())
}

/// The machine's two numbers, as a sentence for the report: a wake-up on
/// the other core and on the writer's own; `None` with fewer than two
/// cores (or without `taskset`).
pub(crate) fn sentence() -> Option<String> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    if cores < 2 {
        return None;
    }
    let other = measure(0, 1).ok()?;
    let same = measure(0, 0).ok()?;
    let us = |ns: f64| format!("{:.1} µs", ns / 1e3);
    Some(format!(
        "a process blocked on a pipe ran {} after the write that woke it from the other core \
         (p90 {}), {} from its own core (p90 {}; {WAKES} wake-ups {} µs apart, each process \
         pinned with `taskset`)",
        us(other.p50_ns),
        us(other.p90_ns),
        us(same.p50_ns),
        us(same.p90_ns),
        GAP.as_micros()
    ))
}

/// One side of the probe: `writer` writes [`WAKES`] times to stdout,
/// `reader` prints, for each, how long after the write it ran.
pub(crate) fn role(args: &[String]) -> Result<(), String> {
    match args.first().map(String::as_str) {
        Some("writer") => {
            let mut out = std::io::stdout().lock();
            for _ in 0..WAKES {
                std::thread::sleep(GAP);
                out.write_all(&wall_ns().to_le_bytes())
                    .and_then(|()| out.flush())
                    .map_err(|e| format!("wake probe writer: {e}"))?;
            }
            Ok(())
        }
        Some("reader") => {
            let mut input = std::io::stdin().lock();
            let mut lines = String::new();
            let mut at = [0u8; 8];
            for _ in 0..WAKES {
                match input.read_exact(&mut at) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                    Err(e) => return Err(format!("wake probe reader: {e}")),
                }
                let late = wall_ns().saturating_sub(u64::from_le_bytes(at));
                lines.push_str(&late.to_string());
                lines.push('\n');
            }
            print!("{lines}");
            Ok(())
        }
        _ => Err(format!("usage: xtask {COMMAND} reader|writer")),
    }
}

/// A CPU wake-up latency request of the kernel (PM QoS): held while the
/// value lives, as `fastio run --cpu-latency-us` holds one for a run.
pub(crate) struct LatencyRequest {
    _file: std::fs::File,
}

impl LatencyRequest {
    /// Asks every core to wake within `us` µs (`/dev/cpu_dma_latency`;
    /// root), `None` where this machine does not let us.
    pub(crate) fn hold(us: i32) -> Option<LatencyRequest> {
        let mut f = std::fs::File::options()
            .write(true)
            .open("/dev/cpu_dma_latency")
            .ok()?;
        f.write_all(&us.to_ne_bytes()).ok()?;
        Some(LatencyRequest { _file: f })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_is_the_median_and_the_ninetieth_percentile() {
        let samples: Vec<u64> = (1..=101).rev().map(|i| i * 1000).collect();
        let w = summarize(samples).unwrap();
        assert_eq!(w.p50_ns, 51_000.0);
        assert_eq!(w.p90_ns, 91_000.0);
        assert_eq!(summarize(Vec::new()), None);
    }

    #[test]
    fn a_role_must_be_named() {
        assert!(role(&[]).is_err());
        assert!(role(&["both".into()]).is_err());
    }
}
