//! Recording live streams: a [`Session`] writes one file from a thread per
//! stream, each taking frames as a consumer (lossless: it holds a frame
//! until it is written, like any `block` consumer) or through an observer
//! (lossy: it never holds one, and counts what it missed).
//!
//! A failure to write (a full disk) stops the recording, never the streams:
//! a consumer's thread goes on taking frames so that nothing waits for it,
//! and the report says what went wrong.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use dtype::Primitive;
use fastio::{Error as FastioError, StreamConsumer, StreamTap};

use crate::error::Result;
use crate::format::{EntryHeader, FrameHeader};
use crate::write::{Recorder, StreamId, StreamTotals};

/// What a recording wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordingReport {
    /// The MCAP file.
    pub path: PathBuf,
    /// Per stream: frames written and skipped.
    pub streams: Vec<StreamTotals>,
    /// Entries written (a one-shot run).
    pub entries: u64,
    /// Why the recording stopped early, if it did.
    pub error: Option<String>,
}

#[derive(Clone)]
struct Shared {
    recorder: Arc<Mutex<Option<Recorder>>>,
    totals: Arc<Mutex<Vec<StreamTotals>>>,
    error: Arc<Mutex<Option<String>>>,
    stop: Arc<AtomicBool>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// Runs `f` on the recorder unless the recording already stopped.
    fn write(
        &self,
        f: impl FnOnce(&mut Recorder) -> Result<()>,
    ) -> std::result::Result<(), String> {
        let mut guard = lock(&self.recorder);
        match guard.as_mut() {
            Some(r) => {
                let out = f(r).map_err(|e| e.to_string());
                *lock(&self.totals) = r.totals();
                out
            }
            None => Ok(()),
        }
    }

    /// Stops writing (what is in the file stays readable); the first
    /// reason is kept.
    fn failed(&self, why: String) {
        lock(&self.error).get_or_insert(why);
        lock(&self.recorder).take();
    }
}

/// How long a stream's thread waits for a frame before it looks at the
/// stop flag again.
const WAIT: Duration = Duration::from_millis(100);

/// A frame as the threads hand it to the file.
struct Taken<'a> {
    seq: u64,
    source_seq: u64,
    timestamp_ns: u64,
    shape: &'a [usize],
    bytes: &'a [u8],
}

/// A recording in progress.
pub struct Session {
    path: PathBuf,
    shared: Shared,
    threads: Vec<JoinHandle<()>>,
    entries: u64,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("path", &self.path)
            .field("threads", &self.threads.len())
            .finish_non_exhaustive()
    }
}

impl Session {
    /// A session writing through `recorder` (its file is `path`).
    pub fn new(path: PathBuf, recorder: Recorder) -> Session {
        Session {
            path,
            shared: Shared {
                recorder: Arc::new(Mutex::new(Some(recorder))),
                totals: Arc::new(Mutex::new(Vec::new())),
                error: Arc::new(Mutex::new(None)),
                stop: Arc::new(AtomicBool::new(false)),
            },
            threads: Vec::new(),
            entries: 0,
        }
    }

    /// Set it to make every thread stop at its next frame (a signal, a
    /// duration); [`Session::finish`] sets it too.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.shared.stop.clone()
    }

    fn add_stream(&self, name: &str, element: Primitive, max_shape: &[usize]) -> Result<StreamId> {
        let mut guard = lock(&self.shared.recorder);
        match guard.as_mut() {
            Some(r) => r.add_stream(name, element, max_shape),
            None => Err(crate::Error::Invalid {
                path: self.path.clone(),
                what: "the recording stopped".into(),
            }),
        }
    }

    /// Records the stream `consumer` reads, losslessly: each frame is
    /// held until it is written (frames lost before the consumer attached,
    /// or to `drop-oldest`, are counted as skipped).
    pub fn add_consumer(
        &mut self,
        mut consumer: StreamConsumer,
        element: Primitive,
        max_shape: &[usize],
    ) -> Result<()> {
        let id = self.add_stream(consumer.name(), element, max_shape)?;
        let name = consumer.name().to_owned();
        // Frames published before it attached are not its to skip.
        let before = consumer.dropped();
        self.spawn(id, name, before, move |shared, id, name| {
            let got = consumer.next(Some(WAIT)).map(|f| {
                f.map(|frame| {
                    write_frame(
                        shared,
                        id,
                        name,
                        Taken {
                            seq: frame.seq(),
                            source_seq: frame.source_seq(),
                            timestamp_ns: frame.timestamp_ns(),
                            shape: frame.shape(),
                            bytes: frame.bytes(),
                        },
                    )
                })
            });
            (got, consumer.dropped())
        });
        Ok(())
    }

    /// Records the stream `tap` observes, lossy: it never holds a frame;
    /// frames overwritten before it copied them are counted as skipped.
    pub fn add_tap(&mut self, mut tap: StreamTap) -> Result<()> {
        let id = self.add_stream(tap.name(), tap.element(), tap.max_shape())?;
        let name = tap.name().to_owned();
        self.spawn(id, name, 0, move |shared, id, name| {
            let got = tap.next(Some(WAIT)).map(|f| {
                f.map(|f| {
                    write_frame(
                        shared,
                        id,
                        name,
                        Taken {
                            seq: f.seq,
                            source_seq: f.source_seq,
                            timestamp_ns: f.timestamp_ns,
                            shape: &f.shape,
                            bytes: &f.bytes,
                        },
                    )
                })
            });
            (got, tap.skipped())
        });
        Ok(())
    }

    /// A stream's thread: `take` writes its next frame (if one came in
    /// time) and says how many it missed so far; until the stream ends or
    /// fails, or the session stops.
    fn spawn(
        &mut self,
        id: StreamId,
        name: String,
        mut missed: u64,
        mut take: impl FnMut(&Shared, StreamId, &str) -> (fastio::Result<Option<()>>, u64)
        + Send
        + 'static,
    ) {
        let shared = self.shared.clone();
        self.threads.push(std::thread::spawn(move || {
            while !shared.stop.load(Ordering::Acquire) {
                let (got, now) = take(&shared, id, &name);
                if now > missed {
                    let _ = shared.write(|r| r.skipped(id, now - missed));
                    missed = now;
                }
                match got {
                    Ok(Some(())) | Err(FastioError::StreamTimeout { .. }) => {}
                    // Ended, or poisoned by a failure (the run says which).
                    Ok(None) | Err(FastioError::StreamPoisoned { .. }) => break,
                    Err(e) => {
                        shared.failed(format!("stream {name}: {e}"));
                        break;
                    }
                }
            }
        }));
    }

    /// Writes one entry of a one-shot run.
    pub fn write_entry(&mut self, header: &EntryHeader, bytes: &[u8]) {
        match self.shared.write(|r| r.write_entry(header, bytes)) {
            Ok(()) if lock(&self.shared.recorder).is_some() => self.entries += 1,
            Ok(()) => {}
            Err(e) => self.shared.failed(format!("entry {}: {e}", header.entry)),
        }
    }

    /// Stops every thread still running (at its next frame), waits for
    /// them and closes the file. To record every stream to its end, call
    /// [`Session::wait`] first.
    pub fn finish(mut self) -> RecordingReport {
        self.shared.stop.store(true, Ordering::Release);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        let recorder = lock(&self.shared.recorder).take();
        let mut error = lock(&self.shared.error).take();
        let streams = match recorder {
            Some(r) => match r.finish() {
                Ok(t) => t,
                Err(e) => {
                    error.get_or_insert(e.to_string());
                    lock(&self.shared.totals).clone()
                }
            },
            // Stopped early: what was written before.
            None => lock(&self.shared.totals).clone(),
        };
        RecordingReport {
            path: self.path,
            streams,
            entries: self.entries,
            error,
        }
    }

    /// Waits until every stream ended (or failed) and its thread wrote
    /// its last frame, or the stop flag was set.
    pub fn wait(&mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn write_frame(shared: &Shared, id: StreamId, name: &str, f: Taken<'_>) {
    let header = FrameHeader {
        frame: f.seq,
        source_frame: f.source_seq,
        timestamp_ns: f.timestamp_ns,
        shape: f.shape.iter().map(|&d| d as u64).collect(),
    };
    if let Err(e) = shared.write(|r| r.write_frame(id, &header, f.bytes)) {
        shared.failed(format!("stream {name}: {e}"));
    }
}
