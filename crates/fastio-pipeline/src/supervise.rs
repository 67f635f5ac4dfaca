//! The streaming run's policy over [`Run`]: every operator stays up while
//! frames flow through the streams of its entries (`fastio`'s streams, one
//! per entry, declared before any operator starts).
//!
//! Every operator starts at once; one that exits 0 is done (its outputs
//! ended with it); one that fails is started again while its
//! `streaming.restart` limit allows (its streams keep its place: upstream
//! is back-pressured, and it goes on at the frame it had not finished);
//! otherwise the run fails: every stream is poisoned, so each operator's
//! loop ends with `StreamPoisoned` at once (its loop says so in the
//! context: a consequence, never the root cause), and the failure names
//! the operator and the first frame it did not deliver. Operators get the
//! grace period to see the poison and exit before the SIGTERM.
//!
//! On one host of a pipeline placed on several ([`LocalDriver::run_on_host`]),
//! the same supervision runs the operators placed here, over the streams
//! they touch; the link carries the frames of streams that cross hosts
//! (`fastio-net`). A failure elsewhere poisons every stream here, and a
//! failure here is told to the other hosts before the streams here are
//! poisoned.

use std::time::{Duration, Instant};

use fastio::{Context, OperatorStats};

use crate::driver::{DriverError, LocalDriver};
use crate::hosts::Ended;
use crate::report::{EdgeReport, Outcome, Progress, RunReport, StreamRate, edges_of};
use crate::run::Run;

/// How often the driver reports the streams' progress.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(1);

impl LocalDriver {
    /// Supervises a streaming run (this host's part of it in a run across
    /// hosts).
    pub(crate) fn supervise(
        &self,
        mut run: Run<'_>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<RunReport, DriverError> {
        let plan = &self.pipeline.plan;
        let streaming = plan.streaming.as_ref().expect("a streaming plan");
        plan.publish(&run.ctx)?;
        // The streams an operator of this host touches (all of them on
        // one host).
        let here = |e: usize| {
            let entry = &plan.entries[e];
            run.is_local(entry.producer) || entry.consumers.iter().any(|&c| run.is_local(c))
        };
        let _ = streaming;
        for (e, entry) in plan.entries.iter().enumerate() {
            if here(e) {
                run.ctx
                    .declare_stream(&entry.key, &self.stream_options(e)?)?;
            }
        }
        run.recording = self.record_streams(&run.ctx, &here)?;
        run.connect()?;
        for i in 0..self.pipeline.operators.len() {
            if run.is_local(i) && !run.start(i, progress) {
                break;
            }
        }
        let mut poisoned = false;
        let mut last_progress = Instant::now();
        let mut heads: Vec<u64> = vec![0; plan.entries.len()];
        while !run.running.is_empty() {
            if let Some(exit) = run.next_exit(progress)
                && let Some(outcome) = run.exited(&exit)
            {
                self.on_stream_exit(&mut run, exit.op, outcome, progress);
            }
            // A failure anywhere (here, elsewhere, an interrupt) stops the
            // streams here; operators get the grace period to see it.
            if run.stopping() && !poisoned {
                self.poison_all(&run.ctx);
                poisoned = true;
            }
            let grace_over = run.stopping_for().is_some_and(|d| d >= self.opts.grace);
            run.tick(progress, grace_over, &|r: &Run<'_>| {
                self.stream_edges(&r.ctx)
            });
            if last_progress.elapsed() >= PROGRESS_EVERY {
                let secs = last_progress.elapsed().as_secs_f64();
                last_progress = Instant::now();
                progress(Progress::Streams(
                    self.stream_rates(&run.ctx, &mut heads, secs),
                ));
            }
        }
        for (i, op) in self.pipeline.operators.iter().enumerate() {
            run.reports[i].frames = stats_of(&run.ctx, &op.name);
        }
        run.edges = self.stream_edges(&run.ctx);
        let mut report = run.finish(progress);
        // Operators that failed only because of the root cause (their
        // inputs were poisoned) were stopped by it.
        if let Some(f) = &report.failure {
            for r in &mut report.operators {
                if matches!(r.outcome, Outcome::Failed(_)) && f.operator() != Some(r.name.as_str())
                {
                    r.outcome = Outcome::Stopped;
                }
            }
        }
        Ok(report)
    }

    /// A local operator exited with `outcome`: done, started again, or the
    /// run's failure.
    fn on_stream_exit(
        &self,
        run: &mut Run<'_>,
        i: usize,
        outcome: Outcome,
        progress: &mut dyn FnMut(Progress),
    ) {
        let name = self.pipeline.operators[i].name.clone();
        match outcome {
            Outcome::Succeeded => {
                // An earlier process's failure is history.
                run.reports[i].failure = None;
                run.tell_finished(i, Ended::Succeeded);
            }
            Outcome::Stopped => run.tell_finished(i, Ended::Stopped),
            _ => {
                let allowed = self
                    .pipeline
                    .plan
                    .streaming
                    .as_ref()
                    .and_then(|s| s.restarts.get(i).copied())
                    .unwrap_or(0);
                let at = self.first_undelivered(&run.ctx, i);
                let failure = run.failure_of(i, Some(at));
                run.reports[i].failure.clone_from(&failure);
                if !run.stopping() && run.reports[i].restarts < allowed {
                    run.reports[i].restarts += 1;
                    let why = failure.map_or_else(|| format!("{outcome:?}"), |f| f.to_string());
                    progress(Progress::Line {
                        operator: name,
                        stderr: true,
                        text: format!(
                            "{why}; starting it again ({} of {allowed})",
                            run.reports[i].restarts
                        ),
                    });
                    // A start that fails is the run's failure.
                    run.start(i, progress);
                    return;
                }
                if let Some(f) = failure {
                    // Told before the streams are poisoned: the other
                    // hosts hear the cause before its consequences.
                    run.tell_finished(i, Ended::Failed(&f));
                    run.fail(f);
                } else {
                    run.stop();
                }
            }
        }
        progress(Progress::Finished(
            self.pipeline.operators[i].name.clone(),
            run.reports[i].outcome.clone(),
        ));
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
    fn stream_edges(&self, ctx: &Context) -> Vec<EdgeReport> {
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
