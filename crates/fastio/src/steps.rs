//! An operator's frame loop in a streaming job: each [`Step`] is one frame
//! of every input (aligned by their source frame) and one slot of every
//! output, given out by [`Operator::frames`].
//!
//! ```no_run
//! # fn main() -> fastio::Result<()> {
//! let mut op = fastio::Operator::from_env()?;
//! for step in op.frames()? {
//!     let step = step?;
//!     let input = step.input("image")?;     // read-only, PROT_READ pages
//!     let mut out = step.output("mask")?;   // waits for a free slot
//!     out.set_shape(input.shape())?;
//!     out.bytes_mut()?.copy_from_slice(input.bytes());
//! } // each step publishes its outputs when it ends
//! # Ok(())
//! # }
//! ```
//!
//! * A **source** (an operator without inputs) gets steps until the job's
//!   frame count or duration is reached; then its outputs end.
//! * An operator **with inputs** gets a step for every source frame that
//!   reached all of its inputs: frames are aligned by
//!   [`Frame::source_seq`](crate::Frame::source_seq), and a frame that has
//!   no partner on another input (dropped upstream) is skipped. When an
//!   input ends, the loop ends and so do the outputs; when an input fails,
//!   the step is an error and the outputs fail too (downstream operators
//!   see [`Error::StreamPoisoned`]).
//! * A step's outputs are published, stamped with its source frame and
//!   timestamp, when the step is dropped (not while the thread panics); an
//!   output that was never asked for is skipped for that frame.
//! * A loop abandoned before its end (an error, a panic) fails its outputs;
//!   [`Steps::end`] ends them early on purpose.
//! * The loop publishes the operator's statistics ([`OperatorStats`]) in
//!   the context every [`STATS_EVERY`] and at the end, for the driver's
//!   live line and summary.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::context::Context;
use crate::entry::{Operator, lookup_entry};
use crate::error::{Error, Result};
use crate::stream::{Frame, StreamConsumer, StreamProducer};

/// Prefix of the name an operator's statistics are published under:
/// `fastio.stats/<operator, lower case>`.
pub const STATS_PREFIX: &str = "fastio.stats/";

/// How often a running loop publishes its statistics (for the driver's
/// live line and for watchers).
pub const STATS_EVERY: Duration = Duration::from_secs(1);

/// Prefix of the name under which an operator's frame loop says how it
/// ended: `fastio.end/<operator, lower case>` ([`LoopEnd`]).
pub const END_PREFIX: &str = "fastio.end/";

/// How an operator's frame loop ended, published in the context when it
/// ends (under [`END_PREFIX`]): the driver reads it when the process
/// exits, to tell a cause from a consequence without reading what the
/// operator printed. A process killed before its loop ended leaves none.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum LoopEnd {
    /// Its inputs ended (a source: its frame count or duration was
    /// reached), or it ended the loop on purpose ([`Steps::end`]).
    Finished,
    /// A stream of the operator (its name, the entry's key), an input or
    /// an output, was poisoned from `frame`: the loop ended because
    /// something else failed (upstream, or the run stopped).
    Poisoned {
        /// The stream.
        stream: String,
        /// The first frame of it that will never come.
        frame: u64,
    },
    /// Taking the next frame failed otherwise.
    Failed {
        /// The error.
        error: String,
    },
    /// The operator left its loop with an error or a panic while working
    /// on source frame `frame` (the last it was given, if any).
    Abandoned {
        /// That frame.
        frame: Option<u64>,
    },
}

impl LoopEnd {
    /// How operator `operator`'s loop ended, if it said so.
    pub fn read(ctx: &Context, operator: &str) -> Result<Option<LoopEnd>> {
        read_record(ctx, END_PREFIX, operator, "loop end")
    }

    /// Forgets what an earlier process of `operator` said (before it is
    /// started again).
    pub fn clear(ctx: &Context, operator: &str) -> Result<()> {
        let name = format!("{END_PREFIX}{}", operator.to_ascii_lowercase());
        match ctx.get(&name) {
            Ok(a) => a.free(),
            Err(Error::UnknownName(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn publish(&self, ctx: &Context, operator: &str) -> Result<()> {
        let bytes = postcard::to_allocvec(self)
            .map_err(|e| Error::Plan(format!("cannot encode the loop's end: {e}")))?;
        publish_record(
            ctx,
            &format!("{END_PREFIX}{}", operator.to_ascii_lowercase()),
            &bytes,
        )
    }
}

/// Where a loop says how it ended: the first thing said stays (a poisoned
/// output found in a step comes before the loop is abandoned because of
/// it).
#[derive(Debug)]
struct EndNote {
    ctx: Context,
    operator: String,
    said: Mutex<Option<LoopEnd>>,
}

impl EndNote {
    fn say(&self, end: LoopEnd) {
        let mut said = lock(&self.said);
        if said.is_none() {
            let _ = end.publish(&self.ctx, &self.operator);
            *said = Some(end);
        }
    }
}

/// The record operator `operator` published under `prefix`, if it did
/// (`what` names it in an error).
fn read_record<T: serde::de::DeserializeOwned>(
    ctx: &Context,
    prefix: &str,
    operator: &str,
    what: &str,
) -> Result<Option<T>> {
    let name = format!("{prefix}{}", operator.to_ascii_lowercase());
    let m = match ctx.map(&name) {
        Ok(m) => m,
        Err(Error::UnknownName(_)) => return Ok(None),
        Err(e) => return Err(e),
    };
    postcard::from_bytes(&m)
        .map(Some)
        .map_err(|e| Error::corrupt(format!("{what} of {operator}: {e}")))
}

/// Publishes `bytes` under `name`, replacing what was there.
fn publish_record(ctx: &Context, name: &str, bytes: &[u8]) -> Result<()> {
    if let Ok(old) = ctx.get(name) {
        old.free()?;
    }
    let mut a = ctx.create(bytes.len().max(1) as u64)?;
    a.map_mut()?[..bytes.len()].copy_from_slice(bytes);
    a.publish_and_release(name)
}

/// Samples kept per statistic (a reservoir beyond that).
const SAMPLES: usize = 1 << 16;

/// What an operator's frame loop did, published when it ends.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct OperatorStats {
    /// Steps taken (frames out, for a source).
    pub steps: u64,
    /// Frames received, per input (definition order).
    pub frames_in: Vec<u64>,
    /// Frames published, per output.
    pub frames_out: Vec<u64>,
    /// Frames lost to `drop-oldest` or skipped by alignment, per input.
    pub dropped: Vec<u64>,
    /// Of those, the frames skipped by alignment (no partner on another
    /// input), per input.
    pub skipped: Vec<u64>,
    /// Time per step, 50th and 99th percentile (ns).
    pub step_ns: [u64; 2],
    /// Age of each input's frames when they arrived (now minus the source
    /// timestamp), 50th and 99th percentile (ns), per input.
    pub latency_ns: Vec<[u64; 2]>,
    /// The same ages as a histogram, per input: frames counted in each
    /// bucket of [`LATENCY_BUCKETS_NS`] (a frame in the first bucket whose
    /// bound it does not exceed; the last count is beyond every bound).
    pub latency_buckets: Vec<Vec<u64>>,
    /// The sum of those ages (ns, saturating), per input.
    pub latency_sum_ns: Vec<u64>,
}

/// Upper bounds of the latency histogram's buckets (ns): 1 µs, 2 µs, 4 µs,
/// ... about 1 s (2^0 to 2^20 µs).
pub const LATENCY_BUCKETS_NS: [u64; 21] = {
    let mut b = [0u64; 21];
    let mut k = 0;
    while k < 21 {
        b[k] = 1000 << k;
        k += 1;
    }
    b
};

impl OperatorStats {
    /// The statistics operator `operator` published in `ctx`, if it did
    /// (its frame loop ended).
    pub fn read(ctx: &Context, operator: &str) -> Result<Option<OperatorStats>> {
        read_record(ctx, STATS_PREFIX, operator, "statistics")
    }
}

/// A bounded sample of durations with exact percentiles of what it kept.
#[derive(Debug, Default)]
struct Samples {
    kept: Vec<u64>,
    seen: u64,
    /// Counts per bucket of [`LATENCY_BUCKETS_NS`], then beyond.
    buckets: [u64; LATENCY_BUCKETS_NS.len() + 1],
    sum: u64,
}

impl Samples {
    fn add(&mut self, v: u64) {
        self.seen += 1;
        let b = LATENCY_BUCKETS_NS
            .iter()
            .position(|&bound| v <= bound)
            .unwrap_or(LATENCY_BUCKETS_NS.len());
        self.buckets[b] += 1;
        self.sum = self.sum.saturating_add(v);
        if self.kept.len() < SAMPLES {
            self.kept.push(v);
        } else {
            // A cheap deterministic reservoir: replace slot `seen * φ`.
            let i = (self.seen.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 48) as usize % SAMPLES;
            self.kept[i] = v;
        }
    }

    fn p50_p99(&self) -> [u64; 2] {
        if self.kept.is_empty() {
            return [0, 0];
        }
        let mut v = self.kept.clone();
        v.sort_unstable();
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        [at(0.5), at(0.99)]
    }
}

#[derive(Debug, Default)]
struct Tally {
    steps: u64,
    frames_in: Vec<u64>,
    frames_out: Vec<u64>,
    skipped: Vec<u64>,
    step: Samples,
    latency: Vec<Samples>,
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An output of the loop: its names and producer.
type Output = (Names, Arc<Mutex<StreamProducer>>);

/// An input's or output's local name and entry name (`<operator>/<output>`),
/// both of which [`Step::input`] and [`Step::output`] accept.
#[derive(Debug, Clone)]
struct Names {
    local: String,
    entry: String,
}

impl Names {
    fn of(&self) -> (&str, &str) {
        (&self.local, &self.entry)
    }
}

/// The steps of an operator ([`Operator::frames`]).
#[derive(Debug)]
pub struct Steps {
    ctx: Context,
    operator: String,
    inputs: Vec<(Names, StreamConsumer)>,
    outputs: Vec<Output>,
    frames: Option<u64>,
    until: Option<Instant>,
    tally: Arc<Mutex<Tally>>,
    live: Arc<AtomicBool>,
    /// How the loop ended, once known (a step that found an output
    /// poisoned says so at once).
    end: Arc<EndNote>,
    done: bool,
    /// The last source frame this operator's outputs delivered before it
    /// was restarted: inputs up to it are skipped.
    delivered: Option<u64>,
    /// When the statistics were last published.
    stats_at: Instant,
    /// The source frame of the last step given out.
    last_seq: Option<u64>,
}

impl Operator {
    /// The frame loop of this operator in a streaming job: attaches to its
    /// input streams (as the consumer the plan names) and output streams
    /// (as their producer). [`Error::Plan`] when the job does not stream.
    pub fn frames(&mut self) -> Result<Steps> {
        let (plan, index) = self.plan();
        let streaming = plan.streaming.as_ref().ok_or_else(|| {
            Error::Plan("the job does not stream (no `streaming` section)".into())
        })?;
        let op = &plan.operators[index];
        let ctx = self.context().clone();
        let mut inputs = Vec::new();
        for (local, e) in &op.inputs {
            let entry = &plan.entries[*e];
            let consumer = entry
                .consumers
                .iter()
                .position(|&c| c == index)
                .ok_or_else(|| {
                    Error::Plan(format!("{} does not consume {}", op.name, entry.name))
                })?;
            let names = Names {
                local: local.clone(),
                entry: entry.name.clone(),
            };
            inputs.push((names, ctx.stream_consumer(&entry.key, consumer)?));
        }
        let mut outputs = Vec::new();
        for (local, e) in &op.outputs {
            let entry = &plan.entries[*e];
            let producer = ctx.stream_producer(&entry.key)?;
            let names = Names {
                local: local.clone(),
                entry: entry.name.clone(),
            };
            outputs.push((names, Arc::new(Mutex::new(producer))));
        }
        // Taking a dead operator's place: a source goes on numbering where
        // it stopped; a stage skips the source frames its outputs already
        // delivered (it may have published and died before releasing its
        // inputs), so downstream sees each frame once.
        let next_out = outputs.iter().map(|(_, p)| lock(p).next_seq()).max();
        let delivered = outputs
            .iter()
            .map(|(_, p)| lock(p).last_source_seq())
            .min()
            .flatten();
        // Counts cover every process of the operator, not only this one: an
        // operator restarted after a failure goes on from what the streams
        // say its predecessors did (exact, up to their last frame), not
        // from their last statistics (up to a second old).
        let before = OperatorStats::read(&ctx, &op.name).ok().flatten();
        let earlier = |list: Option<&Vec<u64>>, k: usize| list.and_then(|l| l.get(k)).copied();
        let skipped: Vec<u64> = (0..inputs.len())
            .map(|k| earlier(before.as_ref().map(|b| &b.skipped), k).unwrap_or(0))
            .collect();
        // A frame taken is in, dropped by the ring or skipped by alignment
        // (a frame taken again after a restart, already delivered, counts
        // in once: see `aligned`).
        let frames_in: Vec<u64> = inputs
            .iter()
            .enumerate()
            .map(|(k, (_, c))| {
                c.next_seq()
                    .saturating_sub(c.dropped())
                    .saturating_sub(skipped[k])
            })
            .collect();
        let frames_out: Vec<u64> = outputs.iter().map(|(_, p)| lock(p).next_seq()).collect();
        let tally = Tally {
            steps: if inputs.is_empty() {
                next_out.unwrap_or(0)
            } else {
                frames_in.iter().copied().min().unwrap_or(0)
            },
            latency: (0..inputs.len()).map(|_| Samples::default()).collect(),
            frames_in,
            skipped,
            frames_out,
            ..Tally::default()
        };
        let source = inputs.is_empty();
        let outputs_empty = outputs.is_empty();
        Ok(Steps {
            ctx: ctx.clone(),
            operator: op.name.clone(),
            inputs,
            outputs,
            frames: if source { streaming.frames } else { None },
            until: streaming
                .duration_ms
                .filter(|_| source)
                .and_then(|ms| Instant::now().checked_add(Duration::from_millis(ms))),
            tally: Arc::new(Mutex::new(tally)),
            live: Arc::new(AtomicBool::new(false)),
            end: Arc::new(EndNote {
                ctx: ctx.clone(),
                operator: op.name.clone(),
                said: Mutex::new(None),
            }),
            done: false,
            delivered: if outputs_empty { None } else { delivered },
            stats_at: Instant::now(),
            last_seq: None,
        })
    }
}

impl Steps {
    /// Ends every output (or fails them, unless the loop finished), then
    /// publishes the statistics and how the loop ended.
    fn finish(&mut self, end: LoopEnd) {
        if self.done {
            return;
        }
        self.done = true;
        for (_, p) in &self.outputs {
            let mut p = lock(p);
            if end == LoopEnd::Finished {
                let _ = p.end();
            } else {
                p.poison();
            }
        }
        let _ = self.publish_stats();
        self.end.say(end);
    }

    /// The statistics so far.
    pub fn stats(&self) -> OperatorStats {
        let t = lock(&self.tally);
        OperatorStats {
            steps: t.steps,
            frames_in: t.frames_in.clone(),
            frames_out: t.frames_out.clone(),
            dropped: self
                .inputs
                .iter()
                .zip(&t.skipped)
                .map(|((_, c), s)| c.dropped() + s)
                .collect(),
            skipped: t.skipped.clone(),
            step_ns: t.step.p50_p99(),
            latency_ns: t.latency.iter().map(Samples::p50_p99).collect(),
            latency_buckets: t.latency.iter().map(|s| s.buckets.to_vec()).collect(),
            latency_sum_ns: t.latency.iter().map(|s| s.sum).collect(),
        }
    }

    fn publish_stats(&self) -> Result<()> {
        let bytes = postcard::to_allocvec(&self.stats())
            .map_err(|e| Error::Plan(format!("cannot encode statistics: {e}")))?;
        let name = format!("{STATS_PREFIX}{}", self.operator.to_ascii_lowercase());
        publish_record(&self.ctx, &name, &bytes)
    }

    /// One frame of every input, aligned by source frame; `None` at the
    /// end of an input.
    fn aligned(&mut self) -> Result<Option<Vec<Frame>>> {
        let mut frames: Vec<Option<Frame>> = Vec::with_capacity(self.inputs.len());
        for (_, c) in &mut self.inputs {
            match c.next(None)? {
                Some(f) => frames.push(Some(f)),
                None => return Ok(None),
            }
        }
        let source = |f: &Option<Frame>| f.as_ref().map_or(0, Frame::source_seq);
        loop {
            let target = frames.iter().map(source).max().unwrap_or(0);
            let mut moved = false;
            for (k, (_, c)) in self.inputs.iter_mut().enumerate() {
                while source(&frames[k]) < target {
                    lock(&self.tally).skipped[k] += 1;
                    // The old frame goes first: one held frame per input.
                    frames[k] = None;
                    match c.next(None)? {
                        Some(f) => frames[k] = Some(f),
                        None => return Ok(None),
                    }
                    moved = true;
                }
            }
            if !moved {
                // Already delivered by the operator this one replaces.
                if self.delivered.is_some_and(|d| target <= d) {
                    // The process it replaces took them in and stepped:
                    // they count as its frames in.
                    let mut t = lock(&self.tally);
                    t.steps += 1;
                    t.frames_in.iter_mut().for_each(|n| *n += 1);
                    drop(t);
                    for (k, (_, c)) in self.inputs.iter_mut().enumerate() {
                        frames[k] = None;
                        match c.next(None)? {
                            Some(f) => frames[k] = Some(f),
                            None => return Ok(None),
                        }
                    }
                    continue;
                }
                return Ok(Some(frames.into_iter().flatten().collect()));
            }
        }
    }
}

impl Iterator for Steps {
    type Item = Result<Step>;

    fn next(&mut self) -> Option<Result<Step>> {
        if self.done {
            return None;
        }
        if self.live.load(Ordering::Acquire) {
            return Some(Err(Error::FrameHeld(self.operator.clone())));
        }
        if self.stats_at.elapsed() >= STATS_EVERY {
            let _ = self.publish_stats();
            self.stats_at = Instant::now();
        }
        let (seq, timestamp_ns, frames) = if self.inputs.is_empty() {
            let steps = lock(&self.tally).steps;
            if self.frames.is_some_and(|n| steps >= n)
                || self.until.is_some_and(|t| Instant::now() >= t)
            {
                self.finish(LoopEnd::Finished);
                return None;
            }
            (steps, now_ns(), Vec::new())
        } else {
            match self.aligned() {
                Ok(Some(frames)) => {
                    let now = now_ns();
                    let mut t = lock(&self.tally);
                    for (k, f) in frames.iter().enumerate() {
                        t.frames_in[k] += 1;
                        t.latency[k].add(now.saturating_sub(f.timestamp_ns()));
                    }
                    (frames[0].source_seq(), frames[0].timestamp_ns(), frames)
                }
                Ok(None) => {
                    self.finish(LoopEnd::Finished);
                    return None;
                }
                Err(e) => {
                    self.finish(match &e {
                        Error::StreamPoisoned {
                            stream, from_frame, ..
                        } => LoopEnd::Poisoned {
                            stream: stream.clone(),
                            frame: *from_frame,
                        },
                        e => LoopEnd::Failed {
                            error: e.to_string(),
                        },
                    });
                    return Some(Err(e));
                }
            }
        };
        lock(&self.tally).steps += 1;
        self.last_seq = Some(seq);
        self.live.store(true, Ordering::Release);
        Some(Ok(Step {
            seq,
            timestamp_ns,
            inputs: self
                .inputs
                .iter()
                .map(|(n, _)| n.clone())
                .zip(frames.into_iter().map(Arc::new))
                .collect(),
            outputs: self.outputs.clone(),
            source: self.inputs.is_empty(),
            abandoned: false,
            started: Instant::now(),
            tally: self.tally.clone(),
            live: self.live.clone(),
            end: self.end.clone(),
        }))
    }
}

impl Steps {
    /// Ends the loop before its inputs end: the outputs end after the
    /// frames published so far, as at the end of the stream.
    pub fn end(&mut self) {
        self.finish(LoopEnd::Finished);
    }
}

impl Drop for Steps {
    /// A loop abandoned before its end (an error, `?`, a panic) fails its
    /// outputs: downstream operators see `StreamPoisoned`, not a stream
    /// that looks complete. [`Steps::end`] ends early on purpose.
    fn drop(&mut self) {
        self.finish(LoopEnd::Abandoned {
            frame: self.last_seq,
        });
    }
}

/// One frame of an operator's loop: its inputs' frames and its outputs'
/// slots. Dropping it publishes the outputs that were asked for.
#[derive(Debug)]
pub struct Step {
    seq: u64,
    timestamp_ns: u64,
    inputs: Vec<(Names, Arc<Frame>)>,
    outputs: Vec<Output>,
    /// A source's step: its frames are stamped when published (a source
    /// that paces itself waits inside the step).
    source: bool,
    /// Set by [`Step::abandon`]: its outputs are not published.
    abandoned: bool,
    started: Instant,
    tally: Arc<Mutex<Tally>>,
    live: Arc<AtomicBool>,
    end: Arc<EndNote>,
}

impl Step {
    /// The source frame this step derives from.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// When the source frame was taken (ns since the Unix epoch).
    pub fn timestamp_ns(&self) -> u64 {
        self.timestamp_ns
    }

    /// The frame of input `name` (its local name or its entry name,
    /// `<operator>/<output>`), read-only; [`Error::AmbiguousEntry`] when the
    /// name matches two inputs.
    pub fn input(&self, name: &str) -> Result<&Frame> {
        self.input_shared(name).map(|f| &**f)
    }

    /// The frame of input `name` as a shared handle that may outlive the
    /// step (a binding's view keeps its frame, and so its slot, this way;
    /// the consumer may hold up to `depth` frames at once).
    pub fn input_shared(&self, name: &str) -> Result<&Arc<Frame>> {
        let i = lookup_entry(&self.inputs, name, |(n, _)| n.of())?;
        Ok(&self.inputs[i].1)
    }

    /// The frames of every input, in definition order.
    pub fn inputs(&self) -> impl Iterator<Item = &Frame> {
        self.inputs.iter().map(|(_, f)| &**f)
    }

    /// Ends the step without publishing its outputs (as when the
    /// operator panics inside it): a binding's frame dropped while an
    /// exception unwinds.
    pub fn abandon(mut self) {
        self.abandoned = true;
    }

    /// The element type of output `name`, without taking its slot (a
    /// binding checks a typed view against it before asking for one).
    pub fn output_element(&self, name: &str) -> Result<dtype::Primitive> {
        let i = lookup_entry(&self.outputs, name, |(n, _)| n.of())?;
        Ok(lock(&self.outputs[i].1).element())
    }

    /// The slot of output `name` for this frame, waiting for a free one
    /// (back-pressure) the first time it is asked for.
    pub fn output(&self, name: &str) -> Result<OutputSlot<'_>> {
        let i = lookup_entry(&self.outputs, name, |(n, _)| n.of())?;
        let (_, p) = &self.outputs[i];
        let mut guard = lock(p);
        if let Err(e) = guard.begin(None) {
            if let Error::StreamPoisoned {
                stream, from_frame, ..
            } = &e
            {
                // Said now: the operator may exit without ending its loop.
                self.end.say(LoopEnd::Poisoned {
                    stream: stream.clone(),
                    frame: *from_frame,
                });
            }
            return Err(e);
        }
        Ok(OutputSlot { producer: guard })
    }
}

impl Drop for Step {
    fn drop(&mut self) {
        let publish = !self.abandoned && !std::thread::panicking();
        let stamp = if self.source {
            now_ns()
        } else {
            self.timestamp_ns
        };
        let mut t = lock(&self.tally);
        for (k, (_, p)) in self.outputs.iter().enumerate() {
            let mut p = lock(p);
            if publish && p.shape().is_some() {
                let ok = p.set_source(self.seq, stamp).and_then(|()| p.publish());
                if ok.is_ok() {
                    t.frames_out[k] += 1;
                }
            }
        }
        t.step.add(self.started.elapsed().as_nanos() as u64);
        drop(t);
        // The frames go with the step; then the loop may go on.
        self.inputs.clear();
        self.live.store(false, Ordering::Release);
    }
}

/// An output's slot in a step ([`Step::output`]).
#[derive(Debug)]
pub struct OutputSlot<'a> {
    producer: MutexGuard<'a, StreamProducer>,
}

impl OutputSlot<'_> {
    /// The frame's shape (the largest until set).
    pub fn shape(&self) -> &[usize] {
        self.producer.shape().unwrap_or(&[])
    }

    /// Sets the frame's shape (at most the declared largest).
    pub fn set_shape(&mut self, shape: &[usize]) -> Result<()> {
        self.producer.set_shape(shape)
    }

    /// The frame's bytes, to write.
    pub fn bytes_mut(&mut self) -> Result<&mut [u8]> {
        self.producer.bytes_mut()
    }

    /// The element type of the output.
    pub fn element(&self) -> dtype::Primitive {
        self.producer.element()
    }
}
