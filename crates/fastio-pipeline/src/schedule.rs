//! The one-shot run's policy over [`Run`]: an operator starts as soon as
//! every operator it reads from has succeeded (here, or on another host
//! whose link brought its outputs), in the schedule's order and at most
//! `jobs` at once. A failure starts nothing more: the failed operator's
//! outputs are poisoned, every running operator is stopped (SIGTERM, then
//! SIGKILL after the grace period), and the run ends with its root cause.

use crate::driver::{DriverError, LocalDriver};
use crate::hosts::Ended;
use crate::report::{Outcome, Progress};
use crate::run::Run;

impl LocalDriver {
    /// Schedules a one-shot run (this host's part of it in a run across
    /// hosts) until nothing runs or may start; the caller finishes it.
    pub(crate) fn schedule(
        &self,
        run: &mut Run<'_>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<(), DriverError> {
        self.prepare(&run.ctx, &|i| run.is_local(i))?;
        run.recording = self.record_entries()?;
        run.connect()?;
        let deps: Vec<Vec<usize>> = run
            .ops()
            .iter()
            .map(|o| {
                let mut d: Vec<usize> = o.inputs.iter().filter_map(|i| i.from).collect();
                d.sort_unstable();
                d.dedup();
                d
            })
            .collect();
        // Operators of other hosts are never started here; they are done
        // when the link says so.
        let mut started: Vec<bool> = (0..deps.len()).map(|i| !run.is_local(i)).collect();
        if let Some(path) = self.opts.replay.clone() {
            self.replay(run, &path, &mut started, progress)?;
        }
        loop {
            if !run.stopping() {
                self.start_ready(run, &deps, &mut started, progress);
            }
            // A local operator that has not started may still start once
            // the remote operators it waits for are done.
            let may_start = !run.stopping()
                && (0..deps.len()).any(|i| {
                    !started[i]
                        && deps[i]
                            .iter()
                            .all(|&d| succeeded(run, d) || (!run.is_local(d) && !run.done[d]))
                });
            if run.running.is_empty() && !may_start {
                break;
            }
            if let Some(exit) = run.next_exit(progress)
                && let Some(outcome) = run.exited(&exit)
            {
                self.on_exit(run, exit.op, &outcome);
                progress(Progress::Finished(run.ops()[exit.op].name.clone(), outcome));
            }
            run.tick(progress, true, &|r: &Run<'_>| r.edges.clone());
        }
        run.results = self.results(&run.ctx);
        Ok(())
    }

    /// Starts every operator whose inputs are there, up to `jobs` running.
    fn start_ready(
        &self,
        run: &mut Run<'_>,
        deps: &[Vec<usize>],
        started: &mut [bool],
        progress: &mut dyn FnMut(Progress),
    ) {
        for i in self.pipeline.schedule.iter().flatten().copied() {
            if run.running.len() >= self.opts.jobs.max(1) || run.stopping() {
                break;
            }
            if started[i] || !deps[i].iter().all(|&d| succeeded(run, d)) {
                continue;
            }
            started[i] = true;
            run.start(i, progress);
        }
    }

    /// Operator `i` exited with `outcome`: its outputs are measured and
    /// sent, or poisoned and the run fails.
    fn on_exit(&self, run: &mut Run<'_>, i: usize, outcome: &Outcome) {
        if *outcome == Outcome::Succeeded {
            run.reports[i].bytes_shared = self.bytes_of(&run.ctx, i);
            if let Some(rec) = run.recording.as_mut() {
                self.record_outputs(rec, &run.ctx, i);
            }
            let elapsed = run.t0.elapsed();
            for (_, e) in &self.pipeline.plan.operators[i].outputs {
                let entry = &self.pipeline.plan.entries[*e];
                if let Ok(a) = run.ctx.get(&entry.key) {
                    run.edges[*e].bytes = Some(a.size());
                    run.edges[*e].published_after = Some(elapsed);
                    let _ = a.release();
                }
            }
            run.tell_finished(i, Ended::Succeeded);
            return;
        }
        self.poison(&run.ctx, i);
        match run.failure_of(i, None) {
            Some(f) => {
                run.reports[i].failure = Some(f.clone());
                run.tell_finished(i, Ended::Failed(&f));
                run.fail(f);
            }
            // Stopped by the driver: a consequence of the stop.
            None => {
                run.tell_finished(i, Ended::Stopped);
                run.stop();
            }
        }
    }
}

/// Whether operator `d` succeeded, here or elsewhere.
fn succeeded(run: &Run<'_>, d: usize) -> bool {
    run.done[d] && (run.reports[d].outcome == Outcome::Succeeded || run.remote_ok[d])
}
