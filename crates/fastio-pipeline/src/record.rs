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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fastio::{Context, Error as FastioError, StreamConsumer};
use fastio_record::{EntryHeader, FrameHeader, Recorder, RunInfo, StreamId, StreamTotals};

use crate::driver::{DriverError, LocalDriver};

/// What a recording wrote ([`crate::RunReport::recording`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordingReport {
    /// The MCAP file.
    pub path: PathBuf,
    /// Per stream: frames written and skipped (a streaming run).
    pub streams: Vec<StreamTotals>,
    /// Entries written (a one-shot run).
    pub entries: u64,
    /// Why the recording stopped early, if it did.
    pub error: Option<String>,
}

type Shared = Arc<Mutex<Option<Recorder>>>;

fn lock(r: &Shared) -> std::sync::MutexGuard<'_, Option<Recorder>> {
    r.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A recording in progress.
pub(crate) struct Recording {
    path: PathBuf,
    recorder: Shared,
    threads: Vec<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    error: Arc<Mutex<Option<String>>>,
    entries: u64,
}

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

    /// Consumers the recorder adds to every stream (0 or 1).
    pub(crate) fn recorder_consumers(&self) -> usize {
        usize::from(self.pipeline.plan.streaming.is_some() && self.record_path().is_some())
    }

    /// The options of the stream of entry `e`, with the recorder's consumer.
    pub(crate) fn stream_options(&self, e: usize) -> Result<fastio::StreamOptions, DriverError> {
        let plan = &self.pipeline.plan;
        let streaming = plan.streaming.as_ref().ok_or_else(|| {
            DriverError::Context(FastioError::Plan("not a streaming plan".into()))
        })?;
        let opts = streaming.stream_options(plan, e)?;
        let consumers = plan.entries[e].consumers.len() + self.recorder_consumers();
        Ok(opts.consumers(consumers))
    }

    fn run_info(&self) -> RunInfo {
        RunInfo {
            pipeline: self.pipeline.name.clone(),
            run: format!("pid {}", std::process::id()),
        }
    }

    /// Starts recording every stream declared in `ctx` (entries `local`),
    /// as their last consumer.
    pub(crate) fn record_streams(
        &self,
        ctx: &Context,
        local: &dyn Fn(usize) -> bool,
    ) -> Result<Option<Recording>, DriverError> {
        let Some(path) = self.record_path() else {
            return Ok(None);
        };
        let mut recorder = Recorder::create(&path, &self.run_info())?;
        let mut streams: Vec<(StreamId, StreamConsumer)> = Vec::new();
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
            let id = recorder.add_stream(&entry.key, entry.element, &max)?;
            let consumer = ctx.stream_consumer(&entry.key, entry.consumers.len())?;
            streams.push((id, consumer));
        }
        let mut rec = Recording::new(path, recorder);
        for (id, consumer) in streams {
            rec.spawn(id, consumer);
        }
        Ok(Some(rec))
    }

    /// Starts recording a one-shot run's entries.
    pub(crate) fn record_entries(&self) -> Result<Option<Recording>, DriverError> {
        let Some(path) = self.record_path() else {
            return Ok(None);
        };
        let recorder = Recorder::create(&path, &self.run_info())?;
        Ok(Some(Recording::new(path, recorder)))
    }

    /// Writes every output operator `i` published.
    pub(crate) fn record_outputs(&self, rec: &mut Recording, ctx: &Context, i: usize) {
        let operator = &self.pipeline.operators[i].name;
        for (_, e) in &self.pipeline.plan.operators[i].outputs {
            let key = &self.pipeline.plan.entries[*e].key;
            let Ok(a) = ctx.get(key) else { continue };
            let written = a.map().map_err(|e| e.to_string()).and_then(|bytes| {
                let header = EntryHeader {
                    entry: key.clone(),
                    operator: operator.clone(),
                    element_type: a.element_type().to_string(),
                    shape: a.dimensions().iter().map(|&d| d as u64).collect(),
                    recorded_ns: now_ns(),
                };
                rec.write(|r| r.write_entry(&header, &bytes))
            });
            match written {
                Ok(true) => rec.entries += 1,
                Ok(false) => {}
                Err(e) => rec.failed(format!("entry {key}: {e}")),
            }
            let _ = a.release();
        }
    }
}

impl Recording {
    fn new(path: PathBuf, recorder: Recorder) -> Recording {
        Recording {
            path,
            recorder: Arc::new(Mutex::new(Some(recorder))),
            threads: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            error: Arc::new(Mutex::new(None)),
            entries: 0,
        }
    }

    /// Runs `f` on the recorder unless the recording already stopped;
    /// `Ok(true)` when it wrote.
    fn write(
        &self,
        f: impl FnOnce(&mut Recorder) -> fastio_record::Result<()>,
    ) -> Result<bool, String> {
        let mut guard = lock(&self.recorder);
        match guard.as_mut() {
            Some(r) => f(r).map(|()| true).map_err(|e| e.to_string()),
            None => Ok(false),
        }
    }

    fn failed(&self, why: String) {
        let mut e = self.error.lock().unwrap_or_else(PoisonError::into_inner);
        e.get_or_insert(why);
        // No more writes; what is in the file stays readable.
        lock(&self.recorder).take();
    }

    /// A thread that takes every frame of `consumer` and writes it.
    fn spawn(&mut self, id: StreamId, mut consumer: StreamConsumer) {
        let recorder = self.recorder.clone();
        let stop = self.stop.clone();
        let error = self.error.clone();
        let this = Recording {
            path: self.path.clone(),
            recorder: recorder.clone(),
            threads: Vec::new(),
            stop: stop.clone(),
            error,
            entries: 0,
        };
        self.threads.push(std::thread::spawn(move || {
            let mut dropped = 0;
            loop {
                match consumer.next(Some(Duration::from_millis(100))) {
                    Ok(Some(frame)) => {
                        let header = FrameHeader {
                            frame: frame.seq(),
                            source_frame: frame.source_seq(),
                            timestamp_ns: frame.timestamp_ns(),
                            shape: frame.shape().iter().map(|&d| d as u64).collect(),
                        };
                        if let Err(e) = this.write(|r| r.write_frame(id, &header, frame.bytes())) {
                            this.failed(format!("stream {}: {e}", consumer.name()));
                        }
                    }
                    // Ended, or poisoned by a failure (the run says which).
                    Ok(None) | Err(FastioError::StreamPoisoned { .. }) => break,
                    Err(FastioError::StreamTimeout { .. }) => {
                        if stop.load(Ordering::Acquire) {
                            this.failed(format!(
                                "stream {} had not ended when the run did",
                                consumer.name()
                            ));
                            break;
                        }
                    }
                    Err(e) => {
                        this.failed(format!("stream {}: {e}", consumer.name()));
                        break;
                    }
                }
                let now = consumer.dropped();
                if now > dropped {
                    let _ = this.write(|r| r.skipped(id, now - dropped));
                    dropped = now;
                }
            }
        }));
    }

    /// Waits for every stream's thread (each ends with its stream; one
    /// still waiting after the run gives up) and closes the file.
    pub(crate) fn finish(mut self) -> RecordingReport {
        self.stop.store(true, Ordering::Release);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        let recorder = lock(&self.recorder).take();
        let mut error = self
            .error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let streams = match recorder {
            Some(r) => match r.finish() {
                Ok(t) => t,
                Err(e) => {
                    error.get_or_insert(e.to_string());
                    Vec::new()
                }
            },
            None => Vec::new(),
        };
        RecordingReport {
            path: self.path,
            streams,
            entries: self.entries,
            error,
        }
    }
}
