//! What a run looks like now: [`Progress::Snapshot`], sent every second by
//! both kinds of run and once at their end, from the state the driver and
//! the context already hold (no second bookkeeping): the context's memory,
//! each operator's state, process, CPU and memory, each edge's bytes or
//! frames, and the statistics streaming operators publish.
//!
//! [`Progress::Snapshot`]: crate::Progress::Snapshot

use std::time::Duration;

use fastio::{Context, OperatorStats, Stats};

use crate::report::{EdgeReport, OperatorReport, Outcome};

/// How far an operator is.
#[derive(Debug, Clone, PartialEq)]
pub enum OperatorState {
    /// Not started yet (waiting for its inputs).
    Waiting,
    /// Its process runs.
    Running,
    /// It ended so.
    Finished(Outcome),
}

/// One operator now.
#[derive(Debug, Clone)]
pub struct OperatorSnapshot {
    /// Its name.
    pub name: String,
    /// How far it is.
    pub state: OperatorState,
    /// Its process, while it runs.
    pub pid: Option<i32>,
    /// CPU time so far (user + system).
    pub cpu: Duration,
    /// Resident memory now (peak, once it ended), bytes.
    pub rss_bytes: u64,
    /// Times it was started again (streaming runs).
    pub restarts: u32,
    /// Its frame loop's statistics (streaming operators publish them every
    /// second).
    pub stats: Option<OperatorStats>,
    /// How its last process failed, if it did (a cause or a consequence).
    pub failure: Option<crate::Failure>,
}

/// A run now.
#[derive(Debug, Clone)]
pub struct RunSnapshot {
    /// Since the run started.
    pub elapsed: Duration,
    /// The context's memory and allocations.
    pub context: Option<Stats>,
    /// Processes attached to the context: alive, and dead but not yet
    /// reaped.
    pub participants: (u64, u64),
    /// Every operator, in definition order.
    pub operators: Vec<OperatorSnapshot>,
    /// Every entry, in plan order, with what was measured of it so far.
    pub edges: Vec<EdgeReport>,
}

/// CPU time and resident bytes of process `pid` now, from `/proc`.
pub fn process_usage(pid: i32) -> Option<(Duration, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command (which may hold spaces), from field 3 on.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    let per_second = crate::sys::clock_ticks_per_second();
    let cpu = Duration::from_nanos(ticks.saturating_mul(1_000_000_000) / per_second.max(1));
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss_kib: u64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Some((cpu, rss_kib * 1024))
}

/// A snapshot of `reports` (with `running`: the pids of the operators
/// running now) and the context `ctx`.
pub(crate) fn take(
    ctx: &Context,
    elapsed: Duration,
    reports: &[OperatorReport],
    running: &dyn Fn(usize) -> Option<i32>,
    finished: &dyn Fn(usize) -> bool,
    edges: &[EdgeReport],
) -> RunSnapshot {
    let operators = reports
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let pid = running(i);
            let (state, cpu, rss_bytes) = match pid {
                Some(pid) => {
                    let (cpu, rss) = process_usage(pid).unwrap_or_default();
                    (OperatorState::Running, r.cpu + cpu, rss)
                }
                None if finished(i) => (
                    OperatorState::Finished(r.outcome.clone()),
                    r.cpu,
                    r.peak_rss_kib * 1024,
                ),
                None => (OperatorState::Waiting, r.cpu, 0),
            };
            OperatorSnapshot {
                name: r.name.clone(),
                state,
                pid,
                cpu,
                rss_bytes,
                restarts: r.restarts,
                stats: OperatorStats::read(ctx, &r.name)
                    .ok()
                    .flatten()
                    .or_else(|| r.frames.clone()),
                failure: r.failure.clone(),
            }
        })
        .collect();
    let participants = ctx.participants();
    RunSnapshot {
        elapsed,
        context: ctx.stats().ok(),
        participants,
        operators,
        edges: edges.to_vec(),
    }
}
