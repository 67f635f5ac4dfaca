//! A run as a value: [`Run`] owns everything a run knows (its context and
//! directories, the operators' processes and reports, what is done here
//! and on other hosts, the edges, the link to the other hosts, whether it
//! is stopping, and its root cause) and has a method for each thing that
//! happens to a run: an operator started or exited, the link brought
//! news, a signal arrived, a deadline passed. It ends in a [`RunReport`].
//!
//! The two kinds of run are policies over it: the one-shot scheduler
//! (`schedule.rs`: what to start next; a failure stops the run) and the
//! streaming supervisor (`supervise.rs`: every operator at once; a failure
//! restarts the operator or stops the run). Neither keeps state of its
//! own about failures: every failure goes to [`Run::fail`], which keeps
//! the root cause ([`RootCause`]: the first cause, never a consequence).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, unbounded};
use fastio::{Context, LoopEnd};

use crate::driver::{DriverError, LocalDriver};
use crate::failure::{Failure, RootCause};
use crate::hosts::{Ended, HostLink, LinkEvent};
use crate::pipeline::OperatorDef;
use crate::process::{Dirs, Event, Running, account, late_lines, line};
use crate::report::{EdgeReport, OperatorReport, Outcome, Progress, RunReport, SNAPSHOT_EVERY};
use crate::snapshot;

/// How long a wait for the next event lasts at most (timeouts, signals and
/// snapshots are looked at in between).
const TICK: Duration = Duration::from_millis(50);

/// An operator's process that exited, as the waiter reported it.
pub(crate) struct Exit {
    /// The operator.
    pub(crate) op: usize,
    status: i32,
    usage: libc::rusage,
}

/// One run of a pipeline on this host (see the module docs).
pub(crate) struct Run<'d> {
    pub(crate) driver: &'d LocalDriver,
    pub(crate) ctx: Context,
    handle: String,
    dirs: Dirs,
    pub(crate) t0: Instant,
    /// Whether each operator runs on this host.
    local: Vec<bool>,
    /// This host's name, in a run across hosts.
    host: Option<String>,
    pub(crate) reports: Vec<OperatorReport>,
    pub(crate) running: BTreeMap<usize, Running>,
    /// Operators that are over: exited here, or said so by the link.
    pub(crate) done: Vec<bool>,
    /// Operators of other hosts that succeeded (their outputs are here).
    pub(crate) remote_ok: Vec<bool>,
    pub(crate) edges: Vec<EdgeReport>,
    /// The string entries nobody consumes (one-shot runs).
    pub(crate) results: Vec<(String, String)>,
    cause: RootCause,
    /// When the run began to stop (a failure, an interrupt).
    stopping_since: Option<Instant>,
    tx: Sender<Event>,
    rx: Receiver<Event>,
    link: Option<&'d mut dyn HostLink>,
    link_events: Option<Receiver<LinkEvent>>,
    interrupted: &'d AtomicBool,
    last_snapshot: Instant,
    /// The recording of this run (`--record`), finished with it.
    pub(crate) recording: Option<crate::record::Recording>,
}

impl<'d> Run<'d> {
    /// A run of `driver`'s pipeline on this host (every host when `link`
    /// is `None`): checks that every local operator has a command, makes
    /// the directories and the context. Nothing is published or started
    /// yet (the policy prepares the context, then calls [`Run::connect`]).
    pub(crate) fn new(
        driver: &'d LocalDriver,
        link: Option<&'d mut dyn HostLink>,
        interrupted: &'d AtomicBool,
        t0: Instant,
    ) -> Result<Run<'d>, DriverError> {
        let p = &driver.pipeline;
        let here = link.as_ref().and_then(|l| p.placement.host_index(l.host()));
        let local: Vec<bool> = (0..p.operators.len())
            .map(|i| here.is_none_or(|h| p.placement.host_of[i] == h))
            .collect();
        for (i, op) in p.operators.iter().enumerate() {
            if op.command.is_empty() && local[i] {
                return Err(DriverError::NoCommand(op.name.clone()));
            }
        }
        let dirs = Dirs::make(p, driver.opts.output.as_deref())?;
        let ctx = driver.context()?;
        let reports = p
            .operators
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let mut r = OperatorReport::not_run(&o.name);
                if !local[i] {
                    r.outcome = Outcome::Elsewhere(p.placement.host_name(i).to_owned());
                }
                r
            })
            .collect();
        let n = p.operators.len();
        let (tx, rx) = unbounded();
        Ok(Run {
            driver,
            ctx,
            handle: String::new(),
            dirs,
            t0,
            host: link.as_ref().map(|l| l.host().to_owned()),
            local,
            reports,
            running: BTreeMap::new(),
            done: vec![false; n],
            remote_ok: vec![false; n],
            edges: crate::report::edges_of(&p.plan),
            results: Vec::new(),
            cause: RootCause::default(),
            stopping_since: None,
            tx,
            rx,
            link,
            link_events: None,
            interrupted,
            last_snapshot: Instant::now(),
            recording: None,
        })
    }

    /// After the policy prepared the context: the handle children attach
    /// with, and the link to the other hosts started.
    pub(crate) fn connect(&mut self) -> Result<(), DriverError> {
        self.handle = self.ctx.handle_for_children()?;
        if let Some(l) = self.link.as_deref_mut() {
            l.start(&self.ctx).map_err(DriverError::Link)?;
            self.link_events = Some(l.events());
        }
        Ok(())
    }

    /// The pipeline's operators.
    pub(crate) fn ops(&self) -> &'d [OperatorDef] {
        &self.driver.pipeline.operators
    }

    /// Whether operator `i` runs on this host.
    pub(crate) fn is_local(&self, i: usize) -> bool {
        self.local[i]
    }

    /// Whether the run is stopping.
    pub(crate) fn stopping(&self) -> bool {
        self.stopping_since.is_some()
    }

    /// How long ago the run began to stop.
    pub(crate) fn stopping_for(&self) -> Option<Duration> {
        self.stopping_since.map(|t| t.elapsed())
    }

    /// Starts operator `i` (again, after a failure, in a streaming run).
    /// When it cannot start, that is the run's failure and `false`.
    pub(crate) fn start(&mut self, i: usize, progress: &mut dyn FnMut(Progress)) -> bool {
        let name = self.ops()[i].name.clone();
        // What an earlier process of it said of its end is not this one's.
        let _ = LoopEnd::clear(&self.ctx, &name);
        match self.driver.spawn(i, &self.handle, &self.dirs, &self.tx) {
            Ok(pid) => {
                self.running.insert(i, Running::new(pid));
                progress(Progress::Started(name));
                if let Some(l) = self.link.as_deref_mut() {
                    l.operator_started(i);
                }
                true
            }
            Err(e) => {
                self.done[i] = true;
                self.reports[i].outcome = Outcome::SpawnFailed(e.to_string());
                let f = self.with_host(Failure::SpawnFailed {
                    operator: name,
                    host: None,
                    error: e.to_string(),
                });
                self.reports[i].failure = Some(f.clone());
                self.tell_finished(i, Ended::Failed(&f));
                self.fail(f);
                false
            }
        }
    }

    /// Waits at most a tick for the next exit of a local operator. Lines
    /// the operators print are passed on and news from the other hosts is
    /// applied on the way ([`Run::on_link`]).
    pub(crate) fn next_exit(&mut self, progress: &mut dyn FnMut(Progress)) -> Option<Exit> {
        let event = match &self.link_events {
            None => self.rx.recv_timeout(TICK).ok(),
            Some(news) => {
                let news = news.clone();
                // A wake-up ahead of an entry (at most one an entry) goes
                // straight back to waiting: the news it announces follows.
                loop {
                    crossbeam_channel::select! {
                        recv(self.rx) -> e => break e.ok(),
                        recv(news) -> le => {
                            match le {
                                Ok(LinkEvent::EntryArriving { .. }) => continue,
                                Ok(le) => self.on_link(le),
                                Err(_) => self.fail(Failure::LinkClosed),
                            }
                            break None;
                        },
                        default(TICK) => break None,
                    }
                }
            }
        };
        match event? {
            Event::Line(i, stderr, text) => {
                line(progress, &mut self.reports[i], stderr, text);
                None
            }
            Event::Exited(op, status, usage) => Some(Exit { op, status, usage }),
        }
    }

    /// Applies what the link says happened elsewhere.
    fn on_link(&mut self, news: LinkEvent) {
        match news {
            LinkEvent::RemoteSucceeded { op, .. } => {
                if op < self.done.len() {
                    self.done[op] = true;
                    self.remote_ok[op] = true;
                    let elapsed = self.t0.elapsed();
                    for (_, e) in &self.driver.pipeline.plan.operators[op].outputs {
                        self.edges[*e].published_after.get_or_insert(elapsed);
                    }
                }
            }
            LinkEvent::RemoteFailed { op, failure } => {
                if op < self.done.len() {
                    self.done[op] = true;
                }
                self.fail(failure);
            }
            LinkEvent::Failed { failure } => self.fail(failure),
            // Only a wake-up ahead of the entry (`next_exit` waits on).
            LinkEvent::EntryArriving { .. } => {}
        }
    }

    /// Accounts for an exit: the operator's outcome (its resource usage
    /// added up over its processes); `None` for an operator that was not
    /// running.
    pub(crate) fn exited(&mut self, exit: &Exit) -> Option<Outcome> {
        let r = self.running.remove(&exit.op)?;
        self.done[exit.op] = true;
        let rep = &mut self.reports[exit.op];
        account(rep, &r, exit.status, &exit.usage);
        // A dead child's holds and mappings go back now.
        let _ = self.ctx.recover();
        Some(rep.outcome.clone())
    }

    /// The failure operator `i`'s last exit was, if any: a consequence
    /// when its frame loop said one of its streams was poisoned, else a cause
    /// (`frame`: the first frame it did not deliver, in a streaming run).
    pub(crate) fn failure_of(&self, i: usize, frame: Option<u64>) -> Option<Failure> {
        let operator = self.ops()[i].name.clone();
        let outcome = &self.reports[i].outcome;
        if matches!(
            outcome,
            Outcome::Succeeded | Outcome::Stopped | Outcome::NotRun | Outcome::Elsewhere(_)
        ) {
            return None;
        }
        let plan = &self.driver.pipeline.plan;
        if let Ok(Some(LoopEnd::Poisoned { stream, frame })) = LoopEnd::read(&self.ctx, &operator) {
            let entry = plan
                .entries
                .iter()
                .find(|e| e.key == stream)
                .map_or(stream, |e| e.name.clone());
            return Some(self.with_host(Failure::Poisoned {
                operator,
                host: None,
                entry,
                frame,
            }));
        }
        let f = match outcome {
            Outcome::Failed(code) => Failure::Exited {
                operator,
                host: None,
                code: *code,
                frame,
            },
            Outcome::Signaled(signal) => Failure::Signaled {
                operator,
                host: None,
                signal: *signal,
                frame,
            },
            Outcome::TimedOut => Failure::TimedOut {
                operator,
                host: None,
            },
            Outcome::SpawnFailed(error) => Failure::SpawnFailed {
                operator,
                host: None,
                error: error.clone(),
            },
            _ => return None,
        };
        Some(self.with_host(f))
    }

    /// `f`, naming this host in a run across hosts.
    fn with_host(&self, f: Failure) -> Failure {
        match &self.host {
            Some(h) => f.on_host(h),
            None => f,
        }
    }

    /// Notes a failure (the root cause is the first cause; a consequence
    /// only while no cause is known) and stops the run.
    pub(crate) fn fail(&mut self, f: Failure) {
        self.cause.note(f);
        self.stop();
    }

    /// Stops the run (no failure of its own: an operator stopped, an
    /// interrupt).
    pub(crate) fn stop(&mut self) {
        self.stopping_since.get_or_insert_with(Instant::now);
    }

    /// Tells the other hosts how local operator `i` ended (succeeded: its
    /// outputs other hosts use are in the context, and go now).
    pub(crate) fn tell_finished(&mut self, i: usize, ended: Ended<'_>) {
        if let Some(l) = self.link.as_deref_mut() {
            l.operator_finished(&self.ctx, i, ended);
        }
    }

    /// What happens between events: an interrupt stops the run, timeouts
    /// and the stop escalate (SIGTERM, then SIGKILL after the grace
    /// period), and a snapshot goes out every second. `terminate` says
    /// whether a stopping run may signal its operators yet.
    pub(crate) fn tick(
        &mut self,
        progress: &mut dyn FnMut(Progress),
        terminate: bool,
        edges: &dyn Fn(&Run<'_>) -> Vec<EdgeReport>,
    ) {
        if self.interrupted.load(Ordering::Relaxed) {
            self.stop();
        }
        let stop_now = self.stopping() && terminate;
        if self.driver.escalate(&mut self.running, stop_now) {
            // A timeout: its operator's exit is the failure.
            self.stop();
        }
        if self.last_snapshot.elapsed() >= SNAPSHOT_EVERY {
            self.last_snapshot = Instant::now();
            let edges = edges(self);
            self.snapshot(progress, &edges, false);
        }
    }

    /// Sends a snapshot of the run now (`end`: every operator is over).
    pub(crate) fn snapshot(
        &self,
        progress: &mut dyn FnMut(Progress),
        edges: &[EdgeReport],
        end: bool,
    ) {
        let pids = |i: usize| {
            if end {
                None
            } else {
                self.running.get(&i).map(|r| r.pid)
            }
        };
        let over = |i: usize| end || !self.running.contains_key(&i) && self.done[i];
        progress(Progress::Snapshot(Box::new(snapshot::take(
            &self.ctx,
            self.t0.elapsed(),
            &self.reports,
            &pids,
            &over,
            edges,
        ))));
    }

    /// The end: the last lines, the other hosts' end (they may still read
    /// what this host sends; their failures count as news), the interrupt,
    /// a last snapshot, and the report.
    pub(crate) fn finish(mut self, progress: &mut dyn FnMut(Progress)) -> RunReport {
        late_lines(&self.rx, progress, &mut self.reports);
        if let Some(l) = self.link.take()
            && let Some(elsewhere) = l.finish(self.cause.get(), self.interrupted)
        {
            self.cause.note(elsewhere);
        }
        let interrupted = self.interrupted.load(Ordering::Relaxed);
        if interrupted {
            self.cause.note(Failure::Interrupted);
        }
        // An entry that crossed to this host from its producer elsewhere
        // is an allocation of this host's context too: its size is what
        // this host received.
        for (e, entry) in self.driver.pipeline.plan.entries.iter().enumerate() {
            if self.edges[e].bytes.is_none()
                && self.edges[e].published_after.is_some()
                && let Ok(a) = self.ctx.get(&entry.key)
            {
                self.edges[e].bytes = Some(a.size());
                let _ = a.release();
            }
        }
        self.snapshot(progress, &self.edges, true);
        let recording = self.recording.take().map(crate::record::Recording::finish);
        let kept_context = self
            .driver
            .opts
            .keep_context
            .then(|| self.ctx.handle().to_owned());
        let Run {
            ctx,
            reports,
            cause,
            t0,
            results,
            dirs,
            edges,
            ..
        } = self;
        drop(ctx);
        RunReport {
            operators: reports,
            failure: cause.into_inner(),
            interrupted,
            wall: t0.elapsed(),
            results,
            output_dir: dirs.output,
            kept_context,
            edges,
            recording,
        }
    }
}
