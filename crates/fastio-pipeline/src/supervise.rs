//! The local driver's streaming run: every operator stays up while frames
//! flow through the streams of its entries (`fastio`'s streams, one per
//! entry, declared before any operator starts).
//!
//! Supervision, apart from the one-shot scheduling in `driver.rs`:
//! every operator starts at once; one that exits 0 is done (its outputs
//! ended with it); one that fails is started again while its
//! `streaming.restart` limit allows (its streams keep its place: upstream
//! is back-pressured, and it goes on at the frame it had not finished);
//! otherwise the run fails: every stream is poisoned, so each operator's
//! loop ends with `StreamPoisoned` at once, and the failure names the
//! operator and the first frame it did not deliver. Escalation (SIGTERM,
//! then SIGKILL after the grace period) and accounting are the one-shot
//! run's.
//!
//! On one host of a pipeline placed on several ([`LocalDriver::run_on_host`]),
//! the same supervision runs the operators placed here, over the streams
//! they touch; the link carries the frames of streams that cross hosts
//! (`fastio-net`). A failure elsewhere poisons every stream here, and a
//! failure here is told to the other hosts.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, unbounded};
use fastio::{Context, OperatorStats};

use crate::driver::Dirs;
use crate::driver::{
    DriverError, Event, LocalDriver, OperatorReport, Outcome, Progress, RunReport, Running,
    account, describe, edges_of, late_lines, line, next_event,
};
use crate::hosts::HostLink;
use crate::snapshot;

/// How often the driver reports the streams' progress.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(1);

impl LocalDriver {
    pub(crate) fn run_streaming(
        &self,
        progress: &mut dyn FnMut(Progress),
        interrupted: &AtomicBool,
        t0: Instant,
        mut link: Option<&mut dyn HostLink>,
    ) -> Result<RunReport, DriverError> {
        let plan = &self.pipeline.plan;
        let streaming = plan.streaming.as_ref().expect("a streaming plan");
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
        let ctx = self.context()?;
        plan.publish(&ctx)?;
        // The streams an operator of this host touches (all of them on
        // one host).
        for (e, entry) in plan.entries.iter().enumerate() {
            if local(entry.producer) || entry.consumers.iter().any(|&c| local(c)) {
                ctx.declare_stream(&entry.key, &streaming.stream_options(plan, e)?)?;
            }
        }
        let handle = ctx.handle_for_children()?;
        let link_events = match link.as_deref_mut() {
            Some(l) => {
                l.start(&ctx).map_err(DriverError::Link)?;
                Some(l.events())
            }
            None => None,
        };
        let mut edges_elsewhere = edges_of(plan);
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
        let (tx, rx): (Sender<Event>, Receiver<Event>) = unbounded();
        let mut running: BTreeMap<usize, Running> = BTreeMap::new();
        let mut failure: Option<(String, String)> = None;
        let mut stopping = false;
        // When the streams were poisoned: operators get the grace period
        // to see it and exit by themselves before the SIGTERM.
        let mut poisoned_at: Option<Instant> = None;
        for i in (0..ops.len()).filter(|&i| local(i)) {
            match self.start(i, &handle, &dirs, &tx) {
                Ok(r) => {
                    progress(Progress::Started(ops[i].name.clone()));
                    running.insert(i, r);
                    if let Some(l) = link.as_deref_mut() {
                        l.operator_started(i);
                    }
                }
                Err(e) => {
                    reports[i].outcome = Outcome::SpawnFailed(e.to_string());
                    let why = format!("could not start: {e}");
                    if let Some(l) = link.as_deref_mut() {
                        l.operator_finished(&ctx, i, Err(why.clone()));
                    }
                    failure.get_or_insert((ops[i].name.clone(), why));
                    stopping = true;
                    self.poison_all(&ctx);
                    poisoned_at = Some(Instant::now());
                    break;
                }
            }
        }
        // Operators in the order they exited (restarts included).
        let mut exits: Vec<usize> = Vec::new();
        let mut last_progress = Instant::now();
        let mut heads: Vec<u64> = vec![0; plan.entries.len()];
        let mut done_elsewhere = vec![false; ops.len()];
        let mut remote_ok = vec![false; ops.len()];
        while !running.is_empty() {
            let was_stopping = stopping;
            let event = next_event(
                &rx,
                link_events.as_ref(),
                ops,
                &mut done_elsewhere,
                &mut remote_ok,
                &mut edges_elsewhere,
                plan,
                t0,
                &mut failure,
                &mut stopping,
            );
            // A failure elsewhere stops the streams here.
            if stopping && !was_stopping {
                self.poison_all(&ctx);
                poisoned_at = Some(Instant::now());
            }
            match event {
                Some(Event::Line(i, stderr, text)) => {
                    line(progress, &mut reports[i], stderr, text);
                }
                Some(Event::Exited(i, status, usage)) => {
                    let Some(r) = running.remove(&i) else {
                        continue;
                    };
                    account(&mut reports[i], &r, status, &usage);
                    exits.push(i);
                    // A dead child's holds and mappings go back now.
                    let _ = ctx.recover();
                    let outcome = reports[i].outcome.clone();
                    if outcome == Outcome::Succeeded || outcome == Outcome::Stopped {
                        if let Some(l) = link.as_deref_mut() {
                            let result = match &outcome {
                                Outcome::Succeeded => Ok(()),
                                o => Err(describe(o)),
                            };
                            l.operator_finished(&ctx, i, result);
                        }
                        progress(Progress::Finished(ops[i].name.clone(), outcome));
                        continue;
                    }
                    let allowed = streaming.restarts.get(i).copied().unwrap_or(0);
                    if !stopping && reports[i].restarts < allowed {
                        reports[i].restarts += 1;
                        progress(Progress::Line {
                            operator: ops[i].name.clone(),
                            stderr: true,
                            text: format!(
                                "{}; starting it again ({} of {allowed})",
                                describe(&outcome),
                                reports[i].restarts
                            ),
                        });
                        match self.start(i, &handle, &dirs, &tx) {
                            Ok(r) => {
                                running.insert(i, r);
                                if let Some(l) = link.as_deref_mut() {
                                    l.operator_started(i);
                                }
                                continue;
                            }
                            Err(e) => {
                                reports[i].outcome = Outcome::SpawnFailed(e.to_string());
                            }
                        }
                    }
                    let at = self.first_undelivered(&ctx, i);
                    let why = format!("{} at frame {at}", describe(&reports[i].outcome));
                    if let Some(l) = link.as_deref_mut() {
                        // Told before the streams are poisoned: the other
                        // hosts hear the cause before its consequences.
                        l.operator_finished(&ctx, i, Err(why.clone()));
                    }
                    if failure.is_none() {
                        failure = Some((ops[i].name.clone(), why));
                    }
                    if !stopping {
                        stopping = true;
                        self.poison_all(&ctx);
                        poisoned_at = Some(Instant::now());
                    }
                    progress(Progress::Finished(
                        ops[i].name.clone(),
                        reports[i].outcome.clone(),
                    ));
                }
                None => {}
            }
            if interrupted.load(Ordering::Relaxed) && !stopping {
                stopping = true;
                self.poison_all(&ctx);
                poisoned_at = Some(Instant::now());
            }
            let grace_over = poisoned_at.is_some_and(|t| t.elapsed() >= self.opts.grace);
            if self.escalate(&mut running, stopping && grace_over) && !stopping {
                stopping = true;
                self.poison_all(&ctx);
                poisoned_at = Some(Instant::now());
            }
            if last_progress.elapsed() >= PROGRESS_EVERY {
                let secs = last_progress.elapsed().as_secs_f64();
                last_progress = Instant::now();
                progress(Progress::Streams(self.stream_rates(&ctx, &mut heads, secs)));
                let pids = |i: usize| running.get(&i).map(|r| r.pid);
                progress(Progress::Snapshot(Box::new(snapshot::take(
                    &ctx,
                    t0.elapsed(),
                    &reports,
                    &pids,
                    &|i| !running.contains_key(&i),
                    &self.stream_edges(&ctx),
                ))));
            }
        }
        late_lines(&rx, progress, &mut reports);
        for (i, rep) in reports.iter_mut().enumerate() {
            rep.frames = stats_of(&ctx, &ops[i].name);
        }
        if let Some(l) = link {
            // Wait for the other hosts (they may still take frames this
            // host sends) and take the first failure seen elsewhere: the
            // cause, when this host's first failure was only a stream
            // poisoned because of it.
            let elsewhere = l.finish(failure.as_ref(), interrupted);
            let only_poisoned = failure.as_ref().is_none_or(|(first, _)| {
                reports.iter().find(|r| &r.name == first).is_some_and(|r| {
                    r.stderr_tail
                        .iter()
                        .any(|l| l.contains("is poisoned from frame"))
                })
            });
            if elsewhere.is_some() && only_poisoned {
                failure = elsewhere;
            }
        }
        // The first operator to exit may have failed only because another
        // failed first and poisoned its inputs: blame the first failure
        // that was not a poisoned input, if there is one.
        if let Some((first, _)) = &failure
            && let Some(r) = reports.iter().find(|r| &r.name == first)
            && r.stderr_tail
                .iter()
                .any(|l| l.contains("is poisoned from frame"))
            && let Some(root) = exits.iter().find(|&&k| {
                let r = &reports[k];
                matches!(r.outcome, Outcome::Failed(_) | Outcome::Signaled(_))
                    && !r
                        .stderr_tail
                        .iter()
                        .any(|l| l.contains("is poisoned from frame"))
            })
        {
            let at = self.first_undelivered(&ctx, *root);
            failure = Some((
                ops[*root].name.clone(),
                format!("{} at frame {at}", describe(&reports[*root].outcome)),
            ));
        }
        let interrupted = interrupted.load(Ordering::Relaxed);
        if interrupted && failure.is_none() {
            failure = Some(("driver".into(), "interrupted".into()));
        }
        // Secondary failures (poisoned by the first) are `Stopped`.
        if failure.is_some() {
            for r in &mut reports {
                if matches!(r.outcome, Outcome::Failed(_)) {
                    let first = failure.as_ref().is_some_and(|(n, _)| n == &r.name);
                    if !first {
                        r.outcome = Outcome::Stopped;
                    }
                }
            }
        }
        let edges = self.stream_edges(&ctx);
        progress(Progress::Snapshot(Box::new(snapshot::take(
            &ctx,
            t0.elapsed(),
            &reports,
            &|_| None,
            &|_| true,
            &edges,
        ))));
        let kept_context = self.opts.keep_context.then(|| ctx.handle().to_owned());
        drop(ctx);
        Ok(RunReport {
            operators: reports,
            failure,
            interrupted,
            wall: t0.elapsed(),
            results: Vec::new(),
            output_dir: dirs.output,
            kept_context,
            edges,
        })
    }

    fn start(
        &self,
        i: usize,
        handle: &str,
        dirs: &Dirs,
        tx: &Sender<Event>,
    ) -> Result<Running, DriverError> {
        Ok(Running::new(self.spawn(i, handle, dirs, tx)?))
    }

    /// Fails every stream from its next frame: every operator's loop ends.
    fn poison_all(&self, ctx: &Context) {
        for e in &self.pipeline.plan.entries {
            let _ = ctx.poison_stream(&e.key);
        }
    }

    /// The first frame operator `i` did not deliver: its outputs' next
    /// frame, or for a sink the next frame of its inputs.
    fn first_undelivered(&self, ctx: &Context, i: usize) -> u64 {
        let plan = &self.pipeline.plan;
        let op = &plan.operators[i];
        let outs = op
            .outputs
            .iter()
            .filter_map(|(_, e)| ctx.stream_status(&plan.entries[*e].key).ok())
            .map(|s| s.head)
            .min();
        outs.or_else(|| {
            op.inputs
                .iter()
                .filter_map(|(_, e)| {
                    let entry = &plan.entries[*e];
                    let k = entry.consumers.iter().position(|&c| c == i)?;
                    let st = ctx.stream_status(&entry.key).ok()?;
                    st.consumers.get(k).map(|c| c.next)
                })
                .min()
        })
        .unwrap_or(0)
    }

    /// Frames per second of every stream since the last report.
    /// Every stream's frames and drops so far.
    fn stream_edges(&self, ctx: &Context) -> Vec<crate::driver::EdgeReport> {
        let plan = &self.pipeline.plan;
        let mut edges = edges_of(plan);
        for (edge, e) in edges.iter_mut().zip(&plan.entries) {
            if let Ok(st) = ctx.stream_status(&e.key) {
                edge.frames = Some(st.head);
                edge.dropped = Some(
                    st.consumers
                        .iter()
                        .fold(0u64, |a, c| a.saturating_add(c.dropped)),
                );
            }
        }
        edges
    }

    fn stream_rates(&self, ctx: &Context, heads: &mut [u64], secs: f64) -> Vec<StreamRate> {
        self.pipeline
            .plan
            .entries
            .iter()
            .zip(heads.iter_mut())
            .filter_map(|(e, last)| {
                let st = ctx.stream_status(&e.key).ok()?;
                let fps = (st.head.saturating_sub(*last)) as f64 / secs.max(1e-3);
                *last = st.head;
                // The age of its frames when its first consumer took them.
                let latency_ns = e.consumers.first().and_then(|&c| {
                    let op = &self.pipeline.plan.operators[c];
                    let k = op
                        .inputs
                        .iter()
                        .position(|(_, x)| self.pipeline.plan.entries[*x].key == e.key)?;
                    stats_of(ctx, &op.name)?.latency_ns.get(k).copied()
                });
                Some(StreamRate {
                    entry: e.name.clone(),
                    frames: st.head,
                    fps,
                    dropped: st
                        .consumers
                        .iter()
                        .fold(0u64, |a, c| a.saturating_add(c.dropped)),
                    latency_ns,
                })
            })
            .collect()
    }
}

/// The statistics operator `name` published, if any.
fn stats_of(ctx: &Context, name: &str) -> Option<OperatorStats> {
    OperatorStats::read(ctx, name).ok().flatten()
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
