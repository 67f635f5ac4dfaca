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

    /// The options of the stream of entry `e`: the plan's, with one more
    /// consumer, the recorder's place (the last index: detached until a
    /// recorder attaches, this driver's or `fastio record --lossless`).
    pub(crate) fn stream_options(&self, e: usize) -> Result<fastio::StreamOptions, DriverError> {
        let plan = &self.pipeline.plan;
        let streaming = plan.streaming.as_ref().ok_or_else(|| {
            DriverError::Context(FastioError::Plan("not a streaming plan".into()))
        })?;
        let opts = streaming.stream_options(plan, e)?;
        Ok(opts
            .consumers(plan.entries[e].consumers.len() + 1)
            .recorder_place(true))
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

impl Recording {
    /// Waits until every stream's last frame is written (the run is over:
    /// each stream ended or failed), then closes the file.
    pub(crate) fn finish(mut self) -> RecordingReport {
        self.0.wait();
        self.0.finish()
    }
}
