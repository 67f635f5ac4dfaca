//! What a run gives: how each operator ended ([`OperatorReport`]), what
//! each entry carried ([`EdgeReport`]), the root cause of a failure
//! ([`crate::Failure`]), and the progress a caller sees while the run goes
//! on ([`Progress`]). Both drivers (one-shot and streaming) and the
//! snapshots fill these; nothing here runs anything.

use std::path::PathBuf;
use std::time::Duration;

use crate::failure::Failure;

/// How an operator ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Exit status 0.
    Succeeded,
    /// A non-zero exit status.
    Failed(i32),
    /// Killed by a signal it did not get from the driver.
    Signaled(i32),
    /// Killed by the driver after its timeout.
    TimedOut,
    /// Stopped by the driver because another operator failed (or Ctrl-C).
    Stopped,
    /// Never started: something it depends on failed.
    NotRun,
    /// Could not be started.
    SpawnFailed(String),
    /// Placed on another host (named), whose driver runs it; a failure
    /// there is the run's failure.
    Elsewhere(String),
}

/// One operator's part of a run.
#[derive(Debug, Clone)]
pub struct OperatorReport {
    /// Its name.
    pub name: String,
    /// How it ended.
    pub outcome: Outcome,
    /// Wall time from start to exit.
    pub wall: Duration,
    /// User + system CPU time.
    pub cpu: Duration,
    /// Peak resident set, in KiB.
    pub peak_rss_kib: u64,
    /// Bytes of the shared-memory entries it produced.
    pub bytes_shared: u64,
    /// Its last stderr lines.
    pub stderr_tail: Vec<String>,
    /// In a streaming run: what its frame loop did (published by the
    /// operator when its loop ended).
    pub frames: Option<fastio::OperatorStats>,
    /// In a streaming run: how often it was started again.
    pub restarts: u32,
    /// How its last process failed, if it did: a cause, or a consequence
    /// ([`Failure::Poisoned`]) of the run's root cause.
    pub failure: Option<Failure>,
}

/// What happened in a run.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// Every operator, in definition order.
    pub operators: Vec<OperatorReport>,
    /// The root cause, when the run failed (see [`crate::RootCause`]).
    pub failure: Option<Failure>,
    /// Whether the run was interrupted (SIGINT/SIGTERM).
    pub interrupted: bool,
    /// Wall time of the whole run.
    pub wall: Duration,
    /// String entries nobody consumes (e.g. statistics), by entry name.
    pub results: Vec<(String, String)>,
    /// Where stream outputs went.
    pub output_dir: PathBuf,
    /// The kept context's handle (with `keep_context`).
    pub kept_context: Option<String>,
    /// Every shared-memory entry, in plan order: what the run measured of
    /// it (to draw the graph with, `fastio pipeline plan --format dot
    /// --run REPORT`).
    pub edges: Vec<EdgeReport>,
    /// What the recording wrote (`--record`, `streaming.record`).
    pub recording: Option<crate::RecordingReport>,
}

/// What a run measured of one entry (an edge of the graph).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EdgeReport {
    /// The entry (`operator/output`).
    pub entry: String,
    /// Bytes its producer published (one-shot runs).
    pub bytes: Option<u64>,
    /// When it was there for its consumers: from the start of the run to
    /// the driver seeing its producer succeed (one-shot runs).
    pub published_after: Option<Duration>,
    /// Frames published through it (streaming runs).
    pub frames: Option<u64>,
    /// Frames its consumers lost to `drop-oldest` (streaming runs).
    pub dropped: Option<u64>,
}

/// An edge report for every entry of `plan`, nothing measured yet.
pub(crate) fn edges_of(plan: &fastio::plan::Plan) -> Vec<EdgeReport> {
    plan.entries
        .iter()
        .map(|e| EdgeReport {
            entry: e.name.clone(),
            ..EdgeReport::default()
        })
        .collect()
}

impl RunReport {
    /// Whether every operator succeeded.
    pub fn succeeded(&self) -> bool {
        self.failure.is_none() && !self.interrupted
    }
}

/// Something the caller may show while the run goes on.
#[derive(Debug, Clone)]
pub enum Progress {
    /// An operator started.
    Started(String),
    /// A line an operator printed (`stderr` true for its stderr).
    Line {
        /// The operator.
        operator: String,
        /// From stderr.
        stderr: bool,
        /// The line, without its end.
        text: String,
    },
    /// An operator ended.
    Finished(String, Outcome),
    /// In a streaming run, every second: each stream's progress.
    Streams(Vec<StreamRate>),
    /// Every second and once at the end: the whole run now (for metrics
    /// and live views).
    Snapshot(Box<crate::snapshot::RunSnapshot>),
}

/// How often runs send a [`Progress::Snapshot`].
pub const SNAPSHOT_EVERY: Duration = Duration::from_secs(1);

impl OperatorReport {
    /// The report of an operator that has not run yet.
    pub(crate) fn not_run(name: &str) -> OperatorReport {
        OperatorReport {
            name: name.to_owned(),
            outcome: Outcome::NotRun,
            wall: Duration::ZERO,
            cpu: Duration::ZERO,
            peak_rss_kib: 0,
            bytes_shared: 0,
            stderr_tail: Vec::new(),
            frames: None,
            restarts: 0,
            failure: None,
        }
    }
}

/// One stream's progress ([`Progress::Streams`]).
#[derive(Debug, Clone, PartialEq)]
pub struct StreamRate {
    /// The entry it carries (`operator/output`).
    pub entry: String,
    /// Frames published so far.
    pub frames: u64,
    /// Frames per second since the last report.
    pub fps: f64,
    /// Frames its consumers lost to `drop-oldest`.
    pub dropped: u64,
    /// The age of its frames (p50, p99, ns) when its first consumer took
    /// them, from that operator's statistics (published every second).
    pub latency_ns: Option<[u64; 2]>,
}
