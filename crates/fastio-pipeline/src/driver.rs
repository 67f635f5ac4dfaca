//! The local driver: Clara's "Pod Manager" on one machine. It creates the
//! job's context, publishes the plan, pre-allocates and pre-faults the
//! static outputs, then runs every operator as a child process as soon as
//! the operators it reads from have succeeded (in parallel up to `jobs`),
//! streams their output lines, and on any failure stops everything.
//!
//! One event loop (a `crossbeam-channel`) sees child exits (reaped with
//! `wait4`, for CPU time and peak RSS), output lines, ticks (timeouts) and
//! SIGINT/SIGTERM. On a failure — a non-zero exit, a signal, a timeout, or
//! Ctrl-C — no dependent starts, every running operator's process group
//! gets SIGTERM and, after a grace period, SIGKILL; the failed operator's
//! outputs are marked poisoned in the context. The context is anonymous by
//! default (a `memfd` the children inherit), so even a driver killed with
//! SIGKILL leaves nothing in `/dev/shm`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, unbounded};
use fastio::plan::{EntryKind, POISON_PREFIX, stream_env};
use fastio::{CONTEXT_ENV, Context, ContextOptions, OPERATOR_ENV};

use crate::hosts::{HostLink, LinkEvent};
use crate::snapshot;
use crate::sys;
use crate::validate::{IoType, Pipeline};

/// Environment variable naming the pipeline payload directory (`--input`).
pub const PAYLOAD_ENV: &str = "FASTIO_PAYLOAD";
/// Environment variable naming the job's output directory (`--output`).
pub const OUTPUT_ENV: &str = "FASTIO_OUTPUT";

/// How long an exited operator's output is drained before its exit is
/// reported.
const OUTPUT_DRAIN: Duration = Duration::from_millis(500);

/// Lines of a failed operator's stderr kept for the error message.
const STDERR_TAIL: usize = 10;

/// Errors of the driver itself (operator failures are in the report).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DriverError {
    /// The context could not be created or prepared.
    #[error("context: {0}")]
    Context(#[from] fastio::Error),
    /// An operator has no command to run.
    #[error("operator {0} has no container command")]
    NoCommand(String),
    /// A directory could not be created.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A signal handler could not be installed.
    #[error("signal handler: {0}")]
    Signal(std::io::Error),
    /// The link to the other hosts of a multi-host run failed before any
    /// operator started (a host that did not join in time, say).
    #[error("{0}")]
    Link(String),
    /// `--host` names no host of the pipeline's placement.
    #[error("host {host:?} runs no operator of this pipeline (its hosts: {})", hosts.join(", "))]
    UnknownHost {
        /// The host asked for.
        host: String,
        /// The pipeline's hosts.
        hosts: Vec<String>,
    },
    /// `/dev/shm` cannot hold what the pipeline needs before its operators
    /// start (checked first: no operator is started).
    #[error(
        "the pipeline's {} need {} of shared memory, but /dev/shm has {} free; no operator was started (raise its size: `docker run --shm-size=2g`, a Kubernetes emptyDir with `medium: Memory`, or `mount -o remount,size=2G /dev/shm`)",
        if *streaming { "streams" } else { "static entries" },
        fastio::human_bytes(*need),
        fastio::human_bytes(*free)
    )]
    NoRoom {
        /// Bytes needed.
        need: u64,
        /// Bytes free.
        free: u64,
        /// Whether the need is the streams' slots (else static entries).
        streaming: bool,
    },
}

/// How to run a pipeline.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The payload directory (inputs without `from`).
    pub input: Option<PathBuf>,
    /// Where stream outputs go (a directory per output under it); a
    /// temporary directory when absent.
    pub output: Option<PathBuf>,
    /// Most operators running at once.
    pub jobs: usize,
    /// Longest an operator may run.
    pub timeout: Option<Duration>,
    /// Between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// Extra context bytes beyond the static entries (for dynamic ones).
    pub headroom: u64,
    /// A named context under `/dev/shm` (for operators started outside the
    /// driver) instead of an anonymous one.
    pub named_context: bool,
    /// Keep the (named) context's segment after the run, to inspect.
    pub keep_context: bool,
    /// Where relative command paths are resolved (the definition's
    /// directory).
    pub base_dir: PathBuf,
    /// Environment variables for every operator, beside the definition's.
    pub env: Vec<(String, String)>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            input: None,
            output: None,
            jobs: std::thread::available_parallelism().map_or(2, |n| n.get()),
            timeout: None,
            grace: Duration::from_secs(3),
            headroom: 256 << 20,
            named_context: false,
            keep_context: false,
            base_dir: PathBuf::from("."),
            env: Vec::new(),
        }
    }
}

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
}

/// What happened in a run.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// Every operator, in definition order.
    pub operators: Vec<OperatorReport>,
    /// The first failure: (operator, what happened).
    pub failure: Option<(String, String)>,
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
    Streams(Vec<crate::supervise::StreamRate>),
    /// Every second and once at the end: the whole run now (for metrics
    /// and live views).
    Snapshot(Box<crate::snapshot::RunSnapshot>),
}

/// How often runs send a [`Progress::Snapshot`].
pub const SNAPSHOT_EVERY: Duration = Duration::from_secs(1);

pub(crate) enum Event {
    Line(usize, bool, String),
    Exited(usize, i32, libc::rusage),
}

pub(crate) struct Running {
    pub(crate) pid: i32,
    pub(crate) started: Instant,
    pub(crate) term_sent: Option<Instant>,
    pub(crate) timed_out: bool,
    pub(crate) stopped: bool,
}

impl Running {
    /// An operator started just now as `pid`.
    pub(crate) fn new(pid: i32) -> Running {
        Running {
            pid,
            started: Instant::now(),
            term_sent: None,
            timed_out: false,
            stopped: false,
        }
    }
}

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
        }
    }
}

/// Passes on a line of an operator, keeping the last stderr lines in its
/// report (for the failure message).
pub(crate) fn line(
    progress: &mut dyn FnMut(Progress),
    rep: &mut OperatorReport,
    stderr: bool,
    text: String,
) {
    if stderr {
        rep.stderr_tail.push(text.clone());
        if rep.stderr_tail.len() > STDERR_TAIL {
            rep.stderr_tail.remove(0);
        }
    }
    progress(Progress::Line {
        operator: rep.name.clone(),
        stderr,
        text,
    });
}

/// Passes on the lines the last children printed after they exited.
pub(crate) fn late_lines(
    rx: &Receiver<Event>,
    progress: &mut dyn FnMut(Progress),
    reports: &mut [OperatorReport],
) {
    while let Ok(Event::Line(i, stderr, text)) = rx.try_recv() {
        line(progress, &mut reports[i], stderr, text);
    }
}

/// Runs a validated pipeline on this machine.
#[derive(Debug)]
pub struct LocalDriver {
    pub(crate) pipeline: Pipeline,
    pub(crate) opts: RunOptions,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> DriverError + '_ {
    move |source| DriverError::Io {
        path: path.to_owned(),
        source,
    }
}

impl LocalDriver {
    /// A driver for `pipeline`.
    pub fn new(pipeline: Pipeline, opts: RunOptions) -> LocalDriver {
        LocalDriver { pipeline, opts }
    }

    pub(crate) fn context(&self) -> Result<Context, DriverError> {
        let mut bytes = 0u64;
        // What must be backed before any operator starts: every stream's
        // slots, or every static entry.
        let mut needed = 0u64;
        if let Some(st) = &self.pipeline.plan.streaming {
            for e in 0..self.pipeline.plan.entries.len() {
                let o = st.stream_options(&self.pipeline.plan, e)?;
                let reserved = o.reserved_bytes().unwrap_or(u64::MAX / 4);
                needed = needed.saturating_add(reserved);
                bytes += reserved + 4096;
            }
        }
        let streaming = self.pipeline.plan.streaming.is_some();
        for e in self
            .pipeline
            .plan
            .entries
            .iter()
            .filter(|e| e.is_static() && !streaming)
        {
            let elem = e.element.size() as u64;
            let n: u64 = e.shape.iter().map(|d| d.unwrap_or(0) as u64).product();
            needed = needed.saturating_add(n * elem);
            // Size classes round up by at most 1/8, plus a page.
            bytes += n * elem + n * elem / 8 + 4096;
        }
        // A named context lives in /dev/shm, whose size bounds it (64 MiB
        // in a default Docker container); an anonymous one is a memfd,
        // bounded by memory, not by /dev/shm.
        let named = self.opts.named_context || self.opts.keep_context;
        if let Some(free) = fastio::shm_free_bytes().filter(|_| named)
            && needed > free
        {
            return Err(DriverError::NoRoom {
                need: needed,
                free,
                streaming: self.pipeline.plan.streaming.is_some(),
            });
        }
        let entries = self.pipeline.plan.entries.len() as u32;
        let opts = ContextOptions::new()
            .capacity(bytes + self.opts.headroom)
            .max_allocations(4 * entries + 64)
            .max_names(2 * entries + 64)
            .max_participants((self.pipeline.operators.len() as u32 + 2).clamp(4, 64))
            .anonymous(!(self.opts.named_context || self.opts.keep_context))
            .persist(self.opts.keep_context);
        Ok(Context::new(&opts)?)
    }

    /// Publishes the plan and pre-allocates (and pre-faults) every static
    /// output under its entry name.
    fn prepare(&self, ctx: &Context, local: &dyn Fn(usize) -> bool) -> Result<(), DriverError> {
        self.pipeline.plan.publish(ctx)?;
        // Entries produced on another host arrive in fresh allocations
        // (the link publishes them); only ours are pre-allocated.
        for e in self
            .pipeline
            .plan
            .entries
            .iter()
            .filter(|e| e.is_static() && local(e.producer))
        {
            let element = dtype::Type::primitive(e.element);
            let shape: Vec<usize> = e.shape.iter().map(|d| d.unwrap_or(0)).collect();
            let mut a = ctx.create_array(element, &shape)?;
            a.map_mut()?.fill(0);
            a.publish(&e.key)?;
            a.release()?;
        }
        Ok(())
    }

    fn command(&self, op: usize, ctx_handle: &str, dirs: &Dirs) -> Result<Command, DriverError> {
        let def = &self.pipeline.operators[op];
        let (program, args) = def
            .command
            .split_first()
            .ok_or_else(|| DriverError::NoCommand(def.name.clone()))?;
        let program = if program.contains('/') && Path::new(program).is_relative() {
            // Absolute: the child starts in the definition's directory, so
            // a path relative to ours would be resolved from there again.
            let p = self.opts.base_dir.join(program);
            std::path::absolute(&p).unwrap_or(p)
        } else {
            PathBuf::from(program)
        };
        let mut cmd = Command::new(program);
        cmd.args(args)
            .current_dir(&self.opts.base_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .env(CONTEXT_ENV, ctx_handle)
            .env(OPERATOR_ENV, &def.name)
            .env(OUTPUT_ENV, &dirs.output);
        if let Some(input) = &self.opts.input {
            cmd.env(
                PAYLOAD_ENV,
                std::path::absolute(input).unwrap_or_else(|_| input.clone()),
            );
        }
        for (k, v) in &self.opts.env {
            cmd.env(k, v);
        }
        for (k, v) in &def.variables {
            cmd.env(k, v);
        }
        // Killed with the driver: never an orphaned operator.
        crate::sys::die_with_driver(&mut cmd);
        for (name, dir) in dirs.streams.iter() {
            cmd.env(name, dir);
        }
        Ok(cmd)
    }

    /// Runs the pipeline; `progress` sees starts, output lines and ends.
    pub fn run(&self, mut progress: impl FnMut(Progress)) -> Result<RunReport, DriverError> {
        with_signals(|interrupted| {
            let t0 = Instant::now();
            if self.pipeline.plan.streaming.is_some() {
                self.run_streaming(&mut progress, interrupted, t0, None)
            } else {
                self.run_inner(&mut progress, interrupted, t0, None)
            }
        })
    }

    /// Runs this host's part of a pipeline placed on several hosts: the
    /// operators placed on `link.host()`, in a local context, with the
    /// entries (and the frames of streams) that cross hosts carried by
    /// `link`. The report lists the other hosts' operators as
    /// [`Outcome::Elsewhere`]; a failure on any host is the run's failure.
    pub fn run_on_host(
        &self,
        link: &mut dyn HostLink,
        mut progress: impl FnMut(Progress),
    ) -> Result<RunReport, DriverError> {
        let placement = &self.pipeline.placement;
        if placement.host_index(link.host()).is_none() {
            return Err(DriverError::UnknownHost {
                host: link.host().to_owned(),
                hosts: placement.hosts.clone(),
            });
        }
        with_signals(|interrupted| {
            if self.pipeline.plan.streaming.is_some() {
                self.run_streaming(&mut progress, interrupted, Instant::now(), Some(link))
            } else {
                self.run_inner(&mut progress, interrupted, Instant::now(), Some(link))
            }
        })
    }

    fn run_inner(
        &self,
        progress: &mut dyn FnMut(Progress),
        interrupted: &AtomicBool,
        t0: Instant,
        mut link: Option<&mut dyn HostLink>,
    ) -> Result<RunReport, DriverError> {
        let ops = &self.pipeline.operators;
        let placement = &self.pipeline.placement;
        let here = link.as_ref().and_then(|l| placement.host_index(l.host()));
        let local = |i: usize| here.is_none_or(|h| placement.host_of[i] == h);
        for (i, op) in ops.iter().enumerate() {
            if op.command.is_empty() && local(i) {
                return Err(DriverError::NoCommand(op.name.clone()));
            }
        }
        let dirs = Dirs::make(&self.pipeline, self.opts.output.as_deref())?;
        let mut edges = edges_of(&self.pipeline.plan);
        let ctx = self.context()?;
        self.prepare(&ctx, &local)?;
        let handle = ctx.handle_for_children()?;
        let link_events = match link.as_deref_mut() {
            Some(l) => {
                l.start(&ctx).map_err(DriverError::Link)?;
                Some(l.events())
            }
            None => None,
        };
        let n = ops.len();
        let deps: Vec<Vec<usize>> = ops
            .iter()
            .map(|o| {
                let mut d: Vec<usize> = o.inputs.iter().filter_map(|i| i.from).collect();
                d.sort_unstable();
                d.dedup();
                d
            })
            .collect();
        let mut reports: Vec<OperatorReport> = ops
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let mut r = OperatorReport::not_run(&o.name);
                if !local(i) {
                    r.outcome = Outcome::Elsewhere(placement.host_name(i).to_owned());
                }
                r
            })
            .collect();
        let mut done = vec![false; n];
        // Operators of other hosts are never started here; they are done
        // when the link says so.
        let mut started: Vec<bool> = (0..n).map(|i| !local(i)).collect();
        let mut remote_ok = vec![false; n];
        let mut running: BTreeMap<usize, Running> = BTreeMap::new();
        let mut failure: Option<(String, String)> = None;
        let (tx, rx): (Sender<Event>, Receiver<Event>) = unbounded();
        let mut stopping = false;
        let mut last_snapshot = Instant::now();
        let ok = |i: usize, done: &[bool], reports: &[OperatorReport], remote_ok: &[bool]| {
            done[i] && (reports[i].outcome == Outcome::Succeeded || remote_ok[i])
        };
        loop {
            // Start what is ready.
            if !stopping {
                for i in self.pipeline.schedule.iter().flatten().copied() {
                    if running.len() >= self.opts.jobs.max(1) {
                        break;
                    }
                    if started[i] || !deps[i].iter().all(|&d| ok(d, &done, &reports, &remote_ok)) {
                        continue;
                    }
                    started[i] = true;
                    match self.spawn(i, &handle, &dirs, &tx) {
                        Ok(pid) => {
                            progress(Progress::Started(ops[i].name.clone()));
                            running.insert(i, Running::new(pid));
                            if let Some(l) = link.as_deref_mut() {
                                l.operator_started(i);
                            }
                        }
                        Err(e) => {
                            done[i] = true;
                            reports[i].outcome = Outcome::SpawnFailed(e.to_string());
                            failure.get_or_insert((
                                ops[i].name.clone(),
                                format!("could not start: {e}"),
                            ));
                            if let Some(l) = link.as_deref_mut() {
                                l.operator_finished(&ctx, i, Err(format!("could not start: {e}")));
                            }
                            stopping = true;
                        }
                    }
                }
            }
            // A local operator that has not started may still start once
            // the remote operators it waits for are done.
            let may_start = !stopping
                && (0..n).any(|i| {
                    !started[i]
                        && deps[i]
                            .iter()
                            .all(|&d| ok(d, &done, &reports, &remote_ok) || (!local(d) && !done[d]))
                });
            if running.is_empty() && !may_start {
                break;
            }
            let event = next_event(
                &rx,
                link_events.as_ref(),
                ops,
                &mut done,
                &mut remote_ok,
                &mut edges,
                &self.pipeline.plan,
                t0,
                &mut failure,
                &mut stopping,
            );
            match event {
                Some(Event::Line(i, stderr, text)) => {
                    line(progress, &mut reports[i], stderr, text);
                }
                Some(Event::Exited(i, status, usage)) => {
                    let Some(r) = running.remove(&i) else {
                        continue;
                    };
                    done[i] = true;
                    let rep = &mut reports[i];
                    account(rep, &r, status, &usage);
                    // A dead child's holds and mappings go back now.
                    let _ = ctx.recover();
                    if rep.outcome == Outcome::Succeeded {
                        rep.bytes_shared = self.bytes_of(&ctx, i);
                        for (_, e) in &self.pipeline.plan.operators[i].outputs {
                            let entry = &self.pipeline.plan.entries[*e];
                            if let Ok(a) = ctx.get(&entry.key) {
                                edges[*e].bytes = Some(a.size());
                                edges[*e].published_after = Some(t0.elapsed());
                            }
                        }
                        if let Some(l) = link.as_deref_mut() {
                            l.operator_finished(&ctx, i, Ok(()));
                        }
                    } else {
                        self.poison(&ctx, i);
                        if let Some(l) = link.as_deref_mut() {
                            l.operator_finished(&ctx, i, Err(describe(&rep.outcome)));
                        }
                        if failure.is_none() && rep.outcome != Outcome::Stopped {
                            failure = Some((ops[i].name.clone(), describe(&rep.outcome)));
                        }
                        stopping = true;
                    }
                    progress(Progress::Finished(ops[i].name.clone(), rep.outcome.clone()));
                }
                None => {}
            }
            if interrupted.load(Ordering::Relaxed) && !stopping {
                stopping = true;
            }
            stopping |= self.escalate(&mut running, stopping);
            if last_snapshot.elapsed() >= SNAPSHOT_EVERY {
                last_snapshot = Instant::now();
                let pids = |i: usize| running.get(&i).map(|r| r.pid);
                progress(Progress::Snapshot(Box::new(snapshot::take(
                    &ctx,
                    t0.elapsed(),
                    &reports,
                    &pids,
                    &|i| done[i],
                    &edges,
                ))));
            }
        }
        late_lines(&rx, progress, &mut reports);
        if let Some(l) = link {
            // Wait for the other hosts (they may still read what this
            // host sends) and take the first failure seen elsewhere.
            let elsewhere = l.finish(failure.as_ref(), interrupted);
            if failure.is_none() {
                failure = elsewhere;
            }
        }
        let interrupted = interrupted.load(Ordering::Relaxed);
        if interrupted && failure.is_none() {
            failure = Some(("driver".into(), "interrupted".into()));
        }
        // An entry that crossed to this host from its producer elsewhere
        // is an allocation of this host's context too: its size is what
        // this host received.
        for (e, entry) in self.pipeline.plan.entries.iter().enumerate() {
            if edges[e].bytes.is_none()
                && edges[e].published_after.is_some()
                && let Ok(a) = ctx.get(&entry.key)
            {
                edges[e].bytes = Some(a.size());
                let _ = a.release();
            }
        }
        // At the end every operator is finished (`NotRun` if it never
        // started).
        progress(Progress::Snapshot(Box::new(snapshot::take(
            &ctx,
            t0.elapsed(),
            &reports,
            &|_| None,
            &|_| true,
            &edges,
        ))));
        let results = self.results(&ctx);
        let kept_context = self.opts.keep_context.then(|| ctx.handle().to_owned());
        drop(ctx);
        Ok(RunReport {
            operators: reports,
            failure,
            interrupted,
            wall: t0.elapsed(),
            results,
            output_dir: dirs.output,
            kept_context,
            edges,
        })
    }

    /// Timeouts and the SIGTERM → SIGKILL escalation of a run that is
    /// `stopping`; true when a timeout starts the stop.
    pub(crate) fn escalate(&self, running: &mut BTreeMap<usize, Running>, stopping: bool) -> bool {
        let mut timed_out = false;
        for r in running.values_mut() {
            if let Some(limit) = self.opts.timeout
                && !r.timed_out
                && r.term_sent.is_none()
                && r.started.elapsed() > limit
            {
                r.timed_out = true;
                timed_out = true;
                signal_group(r.pid, libc::SIGTERM);
                r.term_sent = Some(Instant::now());
            }
        }
        if stopping || timed_out {
            for r in running.values_mut() {
                match r.term_sent {
                    None => {
                        r.stopped = !r.timed_out;
                        signal_group(r.pid, libc::SIGTERM);
                        r.term_sent = Some(Instant::now());
                    }
                    Some(at) if at.elapsed() > self.opts.grace => {
                        signal_group(r.pid, libc::SIGKILL);
                    }
                    Some(_) => {}
                }
            }
        }
        timed_out
    }

    pub(crate) fn spawn(
        &self,
        i: usize,
        handle: &str,
        dirs: &Dirs,
        tx: &Sender<Event>,
    ) -> Result<i32, DriverError> {
        let mut cmd = self.command(i, handle, dirs)?;
        let mut child = cmd.spawn().map_err(|e| DriverError::Io {
            path: PathBuf::from(&self.pipeline.operators[i].command[0]),
            source: e,
        })?;
        let pid = child.id() as i32;
        let mut closed = Vec::new();
        if let Some(out) = child.stdout.take() {
            closed.push(lines(out, i, false, tx.clone()));
        }
        if let Some(err) = child.stderr.take() {
            closed.push(lines(err, i, true, tx.clone()));
        }
        let tx = tx.clone();
        std::thread::spawn(move || {
            // `child` is never waited on by std (it is leaked below), so
            // the pid is reaped exactly once, here.
            let (status, usage) = sys::wait_child(pid).unwrap_or_else(|| {
                // Not waitable: report it as killed, with no usage.
                (libc::SIGKILL, sys::no_usage())
            });
            // Let the readers pass on the last lines first (the exit report
            // quotes stderr), but not forever: a descendant may keep the
            // pipes open.
            let deadline = Instant::now() + OUTPUT_DRAIN;
            for c in closed {
                let _ = c.recv_deadline(deadline);
            }
            let _ = tx.send(Event::Exited(i, status, usage));
            // Reaped above: std must not wait for it again.
            std::mem::forget(child);
        });
        Ok(pid)
    }

    /// Bytes of the shared-memory outputs operator `i` produced.
    fn bytes_of(&self, ctx: &Context, i: usize) -> u64 {
        self.pipeline.plan.operators[i]
            .outputs
            .iter()
            .filter_map(|(_, e)| ctx.get(&self.pipeline.plan.entries[*e].key).ok())
            .map(|a| a.size())
            .sum()
    }

    /// Marks every output of the failed operator `i` poisoned and withdraws
    /// its allocation, so no consumer maps torn data.
    fn poison(&self, ctx: &Context, i: usize) {
        let name = &self.pipeline.operators[i].name;
        for (_, e) in &self.pipeline.plan.operators[i].outputs {
            let key = &self.pipeline.plan.entries[*e].key;
            if let Ok(a) = ctx.get(key) {
                let _ = a.free();
            }
            if let Ok(mut m) = ctx.create(name.len().max(1) as u64) {
                if let Ok(mut w) = m.map_mut() {
                    w[..name.len()].copy_from_slice(name.as_bytes());
                }
                let _ = m.publish(&format!("{POISON_PREFIX}{key}"));
            }
        }
    }

    /// The text of every string entry nobody consumes.
    fn results(&self, ctx: &Context) -> Vec<(String, String)> {
        self.pipeline
            .plan
            .entries
            .iter()
            .filter(|e| e.kind == EntryKind::String && e.consumers.is_empty())
            .filter_map(|e| {
                let m = ctx.map(&e.key).ok()?;
                let end = m.iter().rposition(|&b| b != 0).map_or(0, |k| k + 1);
                Some((
                    e.name.clone(),
                    String::from_utf8_lossy(&m[..end]).into_owned(),
                ))
            })
            .collect()
    }
}

/// Runs `f` with SIGINT and SIGTERM setting the flag it is given (the run
/// then stops every operator), and the handlers removed afterwards.
fn with_signals(
    f: impl FnOnce(&AtomicBool) -> Result<RunReport, DriverError>,
) -> Result<RunReport, DriverError> {
    let interrupted = Arc::new(AtomicBool::new(false));
    let mut sig_ids = Vec::new();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        match signal_hook::flag::register(sig, interrupted.clone()) {
            Ok(id) => sig_ids.push(id),
            Err(e) => {
                for id in sig_ids {
                    signal_hook::low_level::unregister(id);
                }
                return Err(DriverError::Signal(e));
            }
        }
    }
    let result = f(&interrupted);
    for id in sig_ids {
        signal_hook::low_level::unregister(id);
    }
    result
}

/// Waits at most 50 ms for the next event of a local operator. News from
/// the other hosts that comes first is applied to the run's state
/// ([`remote_event`]; a link that closed is a failure of its own) and
/// gives `None`, as does a wait that runs out.
#[allow(clippy::too_many_arguments)]
pub(crate) fn next_event(
    rx: &Receiver<Event>,
    link_events: Option<&Receiver<LinkEvent>>,
    ops: &[crate::validate::OperatorDef],
    done: &mut [bool],
    remote_ok: &mut [bool],
    edges: &mut [EdgeReport],
    plan: &fastio::plan::Plan,
    t0: Instant,
    failure: &mut Option<(String, String)>,
    stopping: &mut bool,
) -> Option<Event> {
    let Some(events) = link_events else {
        return rx.recv_timeout(Duration::from_millis(50)).ok();
    };
    crossbeam_channel::select! {
        recv(rx) -> e => e.ok(),
        recv(events) -> le => {
            match le {
                Ok(le) => remote_event(le, ops, done, remote_ok, edges, plan, t0, failure, stopping),
                Err(_) => {
                    failure.get_or_insert((
                        "driver".into(),
                        "the link to the other hosts closed".into(),
                    ));
                    *stopping = true;
                }
            }
            None
        },
        default(Duration::from_millis(50)) => None,
    }
}

/// Applies what the link says happened elsewhere to the run's state.
#[allow(clippy::too_many_arguments)]
fn remote_event(
    event: LinkEvent,
    ops: &[crate::validate::OperatorDef],
    done: &mut [bool],
    remote_ok: &mut [bool],
    edges: &mut [EdgeReport],
    plan: &fastio::plan::Plan,
    t0: Instant,
    failure: &mut Option<(String, String)>,
    stopping: &mut bool,
) {
    match event {
        LinkEvent::RemoteSucceeded { op, .. } => {
            if op < done.len() {
                done[op] = true;
                remote_ok[op] = true;
                for (_, e) in &plan.operators[op].outputs {
                    edges[*e].published_after.get_or_insert(t0.elapsed());
                }
            }
        }
        LinkEvent::RemoteFailed { op, host, why } => {
            if op < done.len() {
                done[op] = true;
                failure.get_or_insert((ops[op].name.clone(), format!("on host {host}: {why}")));
            }
            *stopping = true;
        }
        LinkEvent::Failed { host, why } => {
            failure.get_or_insert((format!("host {host}"), why));
            *stopping = true;
        }
    }
}

/// Fills in how operator `r` ended from its wait status and usage.
pub(crate) fn account(rep: &mut OperatorReport, r: &Running, status: i32, usage: &libc::rusage) {
    rep.wall = r.started.elapsed();
    // Summed over every run of the operator (restarts included).
    rep.cpu += tv(usage.ru_utime) + tv(usage.ru_stime);
    rep.peak_rss_kib = rep.peak_rss_kib.max(usage.ru_maxrss.max(0) as u64);
    rep.outcome = if r.timed_out {
        Outcome::TimedOut
    } else if r.stopped {
        Outcome::Stopped
    } else if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        Outcome::Succeeded
    } else if libc::WIFEXITED(status) {
        Outcome::Failed(libc::WEXITSTATUS(status))
    } else {
        Outcome::Signaled(libc::WTERMSIG(status))
    };
}

fn tv(t: libc::timeval) -> Duration {
    Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
}

pub(crate) fn describe(o: &Outcome) -> String {
    match o {
        Outcome::Succeeded => "succeeded".into(),
        Outcome::Failed(c) => format!("exited with status {c}"),
        Outcome::Signaled(s) => format!("was killed by signal {s}"),
        Outcome::TimedOut => "timed out".into(),
        Outcome::Stopped => "was stopped".into(),
        Outcome::NotRun => "did not run".into(),
        Outcome::SpawnFailed(e) => format!("could not start: {e}"),
        Outcome::Elsewhere(h) => format!("ran on host {h}"),
    }
}

/// Sends `sig` to the process group of `pid` (each operator leads its own).
fn signal_group(pid: i32, sig: i32) {
    sys::signal_group(pid, sig);
}

/// A new directory `fastio-run-<pid>-<16 random hex digits>` in the
/// temporary directory, mode 0700, made with `mkdir` so that nothing
/// already there (another user's directory or symbolic link) is ever used,
/// under a name another user cannot prepare for.
pub(crate) fn private_temp_dir() -> Result<PathBuf, DriverError> {
    use std::os::unix::fs::DirBuilderExt;
    let base = std::env::temp_dir();
    let mut last = None;
    for _ in 0..64u32 {
        let dir = base.join(format!(
            "fastio-run-{}-{:016x}",
            std::process::id(),
            sys::random_u64().map_err(io_err(&base))?
        ));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(dir),
            Err(e) => return Err(io_err(&dir)(e)),
        }
    }
    let dir = last.unwrap_or(base);
    Err(io_err(&dir)(std::io::Error::from(
        std::io::ErrorKind::AlreadyExists,
    )))
}

/// Forwards the lines of `stream` as events until it closes; the returned
/// channel disconnects then.
fn lines(
    stream: impl Read + Send + 'static,
    i: usize,
    stderr: bool,
    tx: Sender<Event>,
) -> Receiver<()> {
    let (done, closed) = crossbeam_channel::bounded::<()>(0);
    std::thread::spawn(move || {
        let _done = done;
        let mut r = BufReader::new(stream);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match r.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let text = String::from_utf8_lossy(&buf)
                        .trim_end_matches(['\n', '\r'])
                        .to_owned();
                    if tx.send(Event::Line(i, stderr, text)).is_err() {
                        break;
                    }
                }
            }
        }
    });
    closed
}

/// The directories of a run: the output root and one per stream output.
pub(crate) struct Dirs {
    pub(crate) output: PathBuf,
    streams: Vec<(String, PathBuf)>,
}

impl Dirs {
    pub(crate) fn make(p: &Pipeline, output: Option<&Path>) -> Result<Dirs, DriverError> {
        // Operators run in the definition's directory: give them absolute
        // paths.
        let output = match output {
            Some(o) => {
                let o = std::path::absolute(o).map_err(io_err(o))?;
                std::fs::create_dir_all(&o).map_err(io_err(&o))?;
                o
            }
            // Always a new directory: operators may write there even when
            // the definition has no disk stream output. Private to this
            // user, under a name nobody can guess, as mkdtemp makes it.
            None => private_temp_dir()?,
        };
        let mut streams = Vec::new();
        for op in &p.operators {
            for out in &op.outputs {
                if matches!(out.ty, IoType::Stream { .. }) {
                    let dir = output.join(&op.name).join(&out.name);
                    std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
                    streams.push((stream_env(&op.name, &out.name), dir));
                }
            }
        }
        Ok(Dirs { output, streams })
    }
}
