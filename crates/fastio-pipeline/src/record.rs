//! Recording a run to an MCAP file (`RunOptions::record`,
//! `streaming.record`), with `fastio-record`'s layout.
//!
//! * A streaming run: every stream of this host is declared with one more
//!   consumer, the recorder's, so it records **losslessly**: like any
//!   `block` consumer it holds a frame until it is written (under
//!   `drop-oldest` it loses what any slow consumer would, and counts it).
//!   One thread per stream takes the frames; the file is shared.
//! * A one-shot run: every entry an operator published is written when
//!   the operator succeeds (name, datashape type, shape, bytes, operator,
//!   time).
//!
//! A failure to write (a full disk) stops the recording, never the run:
//! the recorder goes on taking frames so that nothing waits for it, and
//! the report says what went wrong.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use fastio::{Context, Error as FastioError};
use fastio_record::{EntryHeader, Recorder, RunInfo, Session};

use crate::driver::{DriverError, LocalDriver};

use fastio_record::RecordingReport;

/// A recording in progress (a [`Session`] of `fastio-record`).
pub(crate) struct Recording(Session);

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl LocalDriver {
    /// The file this run records to: `--record`, else `streaming.record`
    /// (relative to the definition's directory).
    pub(crate) fn record_path(&self) -> Option<PathBuf> {
        self.opts.record.clone().or_else(|| {
            self.pipeline
                .record
                .as_ref()
                .map(|p| self.opts.base_dir.join(p))
        })
    }

    /// The options of the stream of entry `e` (with the recorder's place).
    pub(crate) fn stream_options(&self, e: usize) -> Result<fastio::StreamOptions, DriverError> {
        let plan = &self.pipeline.plan;
        let streaming = plan.streaming.as_ref().ok_or_else(|| {
            DriverError::Context(FastioError::Plan("not a streaming plan".into()))
        })?;
        Ok(streaming.stream_options(plan, e)?)
    }

    fn run_info(&self) -> RunInfo {
        RunInfo {
            pipeline: self.pipeline.name.clone(),
            run: format!("pid {}", std::process::id()),
        }
    }

    /// Starts recording every stream declared in `ctx` (entries `local`),
    /// losslessly, from the recorder's place of each.
    pub(crate) fn record_streams(
        &self,
        ctx: &Context,
        local: &dyn Fn(usize) -> bool,
    ) -> Result<Option<Recording>, DriverError> {
        let Some(path) = self.record_path() else {
            return Ok(None);
        };
        let recorder = Recorder::create(&path, &self.run_info())?;
        let mut session = Session::new(path, recorder);
        let plan = &self.pipeline.plan;
        let max_shapes = plan
            .streaming
            .as_ref()
            .map(|s| s.max_shapes.clone())
            .unwrap_or_default();
        for (e, entry) in plan.entries.iter().enumerate() {
            if !local(e) {
                continue;
            }
            let max = max_shapes.get(e).cloned().unwrap_or_default();
            let consumer = ctx.stream_consumer(&entry.key, entry.consumers.len())?;
            session.add_consumer(consumer, entry.element, &max)?;
        }
        Ok(Some(Recording(session)))
    }

    /// Starts recording a one-shot run's entries.
    pub(crate) fn record_entries(&self) -> Result<Option<Recording>, DriverError> {
        let Some(path) = self.record_path() else {
            return Ok(None);
        };
        let recorder = Recorder::create(&path, &self.run_info())?;
        Ok(Some(Recording(Session::new(path, recorder))))
    }

    /// Writes every output operator `i` published.
    pub(crate) fn record_outputs(&self, rec: &mut Recording, ctx: &Context, i: usize) {
        let operator = &self.pipeline.operators[i].name;
        for (_, e) in &self.pipeline.plan.operators[i].outputs {
            let key = &self.pipeline.plan.entries[*e].key;
            let Ok(a) = ctx.get(key) else { continue };
            if let Ok(bytes) = a.map() {
                let header = EntryHeader {
                    entry: key.clone(),
                    operator: operator.clone(),
                    element_type: a.element_type().to_string(),
                    shape: a.dimensions().iter().map(|&d| d as u64).collect(),
                    recorded_ns: now_ns(),
                };
                rec.0.write_entry(&header, &bytes);
            }
            let _ = a.release();
        }
    }
}

impl LocalDriver {
    /// Feeds a one-shot run from a recording of its entries: every local
    /// source (an operator without inputs: what brings the payload in)
    /// whose outputs are all in `path` is done without running, its
    /// entries published from the file (checked against the plan: element
    /// type, shape, bytes); the rest of the pipeline runs on them.
    pub(crate) fn replay(
        &self,
        run: &mut crate::run::Run<'_>,
        path: &std::path::Path,
        started: &mut [bool],
        progress: &mut dyn FnMut(crate::report::Progress),
    ) -> Result<(), DriverError> {
        let bad = |what: String| DriverError::Replay(format!("{}: {what}", path.display()));
        let recorded = fastio_record::Recording::open(path)?.entries()?;
        let by_key: std::collections::BTreeMap<String, &fastio_record::RecordedEntry> = recorded
            .iter()
            .map(|r| (r.header.entry.to_ascii_lowercase(), r))
            .collect();
        let plan = &self.pipeline.plan;
        for (i, op) in plan.operators.iter().enumerate() {
            let source = self.pipeline.operators[i]
                .inputs
                .iter()
                .all(|input| input.from.is_none());
            if !run.is_local(i) || op.outputs.is_empty() || !source {
                continue;
            }
            let keys: Vec<&str> = op
                .outputs
                .iter()
                .map(|(_, e)| plan.entries[*e].key.as_str())
                .collect();
            let have: Vec<&str> = keys
                .iter()
                .copied()
                .filter(|k| by_key.contains_key(*k))
                .collect();
            if have.is_empty() {
                continue;
            }
            if have.len() != keys.len() {
                return Err(bad(format!(
                    "operator {} has outputs {}, the recording only {}",
                    self.pipeline.operators[i].name,
                    keys.join(", "),
                    have.join(", ")
                )));
            }
            for (_, e) in &op.outputs {
                let entry = &plan.entries[*e];
                let rec = by_key[entry.key.as_str()];
                self.publish_recorded(&run.ctx, entry, rec)
                    .map_err(|what| bad(format!("entry {}: {what}", entry.name)))?;
                run.edges[*e].bytes = Some(rec.bytes.len() as u64);
                run.edges[*e].published_after = Some(run.t0.elapsed());
            }
            let name = self.pipeline.operators[i].name.clone();
            started[i] = true;
            run.done[i] = true;
            run.reports[i].outcome = crate::report::Outcome::Succeeded;
            progress(crate::report::Progress::Line {
                operator: name.clone(),
                stderr: false,
                text: format!("replayed from {}: {}", path.display(), keys.join(", ")),
            });
            progress(crate::report::Progress::Finished(
                name,
                crate::report::Outcome::Succeeded,
            ));
        }
        Ok(())
    }

    /// Publishes a recorded entry as `entry` (a pre-allocated static one is
    /// filled in place).
    fn publish_recorded(
        &self,
        ctx: &Context,
        entry: &fastio::plan::EntryPlan,
        rec: &fastio_record::RecordedEntry,
    ) -> Result<(), String> {
        use fastio::plan::EntryKind;
        if entry.kind == EntryKind::String {
            return Err("string entries are not replayed yet".into());
        }
        let element = dtype::Primitive::from_name(&rec.header.element_type);
        if element != Some(entry.element) {
            return Err(format!(
                "recorded as {}, the pipeline says {}",
                rec.header.element_type,
                entry.element.name()
            ));
        }
        let shape: Vec<usize> = rec.header.shape.iter().map(|&d| d as usize).collect();
        let fits = shape.len() == entry.shape.len()
            && shape
                .iter()
                .zip(&entry.shape)
                .all(|(d, want)| want.is_none_or(|w| w == *d));
        if !fits {
            return Err(format!(
                "recorded with shape {shape:?}, the pipeline declares {}",
                entry.shape_text()
            ));
        }
        let bytes = shape
            .iter()
            .try_fold(entry.element.size(), |n, &d| n.checked_mul(d))
            .ok_or("its shape overflows")?;
        if bytes != rec.bytes.len() {
            return Err(format!(
                "{} bytes recorded for shape {shape:?} ({bytes} expected)",
                rec.bytes.len()
            ));
        }
        // A static entry was pre-allocated under its name: filled in place.
        if let Ok(mut pre) = ctx.get(&entry.key) {
            if pre.size() != bytes as u64 {
                return Err(format!(
                    "{} bytes recorded, {} allocated",
                    bytes,
                    pre.size()
                ));
            }
            pre.map_mut()
                .map_err(|e| e.to_string())?
                .copy_from_slice(&rec.bytes);
            return pre.release().map_err(|e| e.to_string());
        }
        let mut a = ctx
            .create_array(dtype::Type::primitive(entry.element), &shape)
            .map_err(|e| e.to_string())?;
        a.map_mut()
            .map_err(|e| e.to_string())?
            .copy_from_slice(&rec.bytes);
        a.publish(&entry.key).map_err(|e| e.to_string())?;
        a.release().map_err(|e| e.to_string())
    }
}

impl Recording {
    /// Waits until every stream's last frame is written (the run is over:
    /// each stream ended or failed), then closes the file.
    pub(crate) fn finish(mut self) -> RecordingReport {
        self.0.wait();
        self.0.finish()
    }
}
