//! Streams across hosts: every frame of a stream whose producer and
//! consumers are placed on different hosts crosses once per consuming
//! host, with back-pressure across the link.
//!
//! Each host declares, in its own context, the streams of its operators
//! (the same options on every host: depth, largest shape, one consumer
//! index per consumer of the plan). Then, for a stream that crosses:
//!
//! * on the producing host a [`Forwarder`] per consuming host attaches as
//!   the first consumer index of that host's operators (the host's other
//!   indices are detached: the frame crosses once) and sends each frame,
//!   lent to Zenoh from its slot without a copy, on
//!   `<run>/stream/<entry>/<host>` ([`StreamMsg`]);
//! * on each consuming host a [`Bridge`] is the local stream's producer
//!   (the indices of consumers placed elsewhere are detached): it copies
//!   each frame into the next slot, publishes it with the frame's shape,
//!   source number and time, and says how many frames it has placed on
//!   `<run>/credit/<entry>/<host>`.
//!
//! Credit: a forwarder sends a frame only while fewer than the stream's
//! depth are sent and not placed. So a slow consumer fills its host's
//! stream, the bridge waits for a slot, credit stops, the forwarder stops
//! taking frames, and the producer's stream fills: the producer waits, as
//! it would for a local consumer (under `block`; under `drop-oldest` each
//! side drops instead). Zenoh's receiving thread never waits: at most
//! depth frames (plus the end) are ever queued for a bridge.
//!
//! The end of a stream crosses as an end message after its last frame;
//! a poisoned stream as a poison. A bridge that stops for any other reason
//! (its run stopping, the producing host gone, a frame that is not what
//! the stream takes) poisons its local stream: a consumer never mistakes a
//! failure for the end.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};
use dtype::Primitive;
use fastio::{Error as FioError, Frame, StreamConsumer, StreamProducer};
use fastio_pipeline::{Failure, LinkEvent};
use zenoh::Wait;
use zenoh::bytes::ZBytes;
use zenoh::pubsub::Publisher;

use crate::error::NetError;
use crate::link::Inner;
use crate::wire::{StreamMsg, encode_credit, entry_bytes};

/// How long a forwarder or bridge waits before looking at the run's stop
/// and the other host's liveness again.
const POLL: Duration = Duration::from_millis(100);

/// What a message queued for a bridge is: a decoded header and its payload,
/// or why the sample could not be read.
pub(crate) type Incoming = Result<(StreamMsg, ZBytes), NetError>;

/// Frames a consuming host has placed in its stream, as it last said.
#[derive(Default)]
pub(crate) struct Credit {
    placed: Mutex<u64>,
    changed: Condvar,
}

impl Credit {
    /// A credit message arrived (they may overtake each other: the largest
    /// count wins).
    pub(crate) fn update(&self, placed: u64) {
        let mut p = self.placed.lock().unwrap_or_else(|e| e.into_inner());
        if placed > *p {
            *p = placed;
            self.changed.notify_all();
        }
    }

    /// Waits until fewer than `window` of the `sent` frames are not placed;
    /// false when `give_up` says to stop first.
    fn wait_below(&self, sent: u64, window: u64, give_up: &dyn Fn() -> bool) -> bool {
        let mut p = self.placed.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if sent.saturating_sub(*p) < window {
                return true;
            }
            if give_up() {
                return false;
            }
            p = self
                .changed
                .wait_timeout(p, POLL)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// A frame lent to Zenoh: its slot stays held until Zenoh has sent it.
struct Lent(Frame);

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        self.0.bytes()
    }
}

/// Sends the frames of one stream to one consuming host.
pub(crate) struct Forwarder {
    pub(crate) inner: Arc<Inner>,
    pub(crate) entry: usize,
    /// The consuming host.
    pub(crate) to: String,
    pub(crate) consumer: StreamConsumer,
    pub(crate) publisher: Arc<Publisher<'static>>,
    pub(crate) credit: Arc<Credit>,
    /// Frames sent and not placed, at most.
    pub(crate) window: u64,
    pub(crate) stop: Arc<AtomicBool>,
}

impl Forwarder {
    pub(crate) fn run(mut self) {
        if let Err(why) = self.forward() {
            let p = &self.inner.pipeline;
            let e = &p.plan.entries[self.entry];
            let _ = self.inner.events.send(LinkEvent::Failed {
                failure: Failure::Transfer {
                    entry: e.name.clone(),
                    from: p.placement.hosts[self.inner.here].clone(),
                    to: vec![self.to.clone()],
                    error: why.to_string(),
                },
            });
        }
    }

    fn give_up(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.inner.host_gone(&self.to)
    }

    fn send(&self, msg: &StreamMsg, payload: ZBytes) -> Result<(), NetError> {
        self.publisher
            .put(payload)
            .attachment(msg.encode())
            .wait()
            .map_err(|e| NetError::Protocol(e.to_string()))
    }

    fn forward(&mut self) -> Result<(), NetError> {
        let element = self.inner.pipeline.plan.entries[self.entry].element;
        let mut sent = 0u64;
        loop {
            if self.give_up() {
                // The run stops (each driver poisons its own streams), or
                // the host is gone (judged by the link's liveliness).
                return Ok(());
            }
            // Credit first: a frame is taken only when it may go at once,
            // so this consumer never holds more frames than are in flight
            // (fewer than the depth, within `next`'s limit).
            if !self
                .credit
                .wait_below(sent, self.window, &|| self.give_up())
            {
                return Ok(());
            }
            match self.consumer.next(Some(POLL)) {
                Ok(Some(frame)) => {
                    let msg = StreamMsg::Frame {
                        element,
                        seq: frame.seq(),
                        source_seq: frame.source_seq(),
                        timestamp_ns: frame.timestamp_ns(),
                        shape: frame.shape().iter().map(|&d| d as u64).collect(),
                    };
                    self.send(&msg, ZBytes::from(bytes::Bytes::from_owner(Lent(frame))))?;
                    sent += 1;
                }
                Ok(None) => {
                    let frames = self.consumer.next_seq();
                    return self.send(&StreamMsg::End { element, frames }, ZBytes::new());
                }
                Err(FioError::StreamPoisoned { from_frame, .. }) => {
                    let msg = StreamMsg::Poisoned {
                        element,
                        from: from_frame,
                    };
                    return self.send(&msg, ZBytes::new());
                }
                Err(FioError::StreamTimeout { .. }) => {}
                // Zenoh still has the frames sent last (under
                // `drop-oldest` one may be held): they go back in moments.
                Err(FioError::FrameHeld(_)) => std::thread::sleep(Duration::from_micros(200)),
                Err(e) => return Err(NetError::Protocol(e.to_string())),
            }
        }
    }
}

/// How a bridge ended.
enum Ended {
    /// The producer ended or poisoned the stream, and so did the bridge.
    AsSent,
    /// The run stopped or the producing host is gone: the local stream
    /// is poisoned.
    Stopped,
}

/// Places the frames of one stream, sent by the producing host, in the
/// local stream.
pub(crate) struct Bridge {
    pub(crate) inner: Arc<Inner>,
    pub(crate) entry: usize,
    /// The producing host.
    pub(crate) from: String,
    pub(crate) producer: StreamProducer,
    pub(crate) rx: Receiver<Incoming>,
    /// Set when more arrived than the credit allows.
    pub(crate) overrun: Arc<AtomicBool>,
    pub(crate) credit: Arc<Publisher<'static>>,
    /// Frames placed between credit messages: half the window (at least
    /// one), so the link carries half as many credit messages as frames
    /// while the forwarder still always has frames in flight.
    pub(crate) credit_every: u64,
    pub(crate) stop: Arc<AtomicBool>,
}

impl Bridge {
    pub(crate) fn run(mut self) {
        match self.bridge() {
            Ok(Ended::AsSent) => {}
            Ok(Ended::Stopped) => self.producer.poison(),
            Err(why) => {
                self.producer.poison();
                self.inner.cannot_receive(self.entry, &self.from, &why);
            }
        }
    }

    fn give_up(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.inner.host_gone(&self.from)
    }

    fn bridge(&mut self) -> Result<Ended, NetError> {
        let element = self.inner.pipeline.plan.entries[self.entry].element;
        let mut placed = 0u64;
        let mut credited = 0u64;
        let mut last: Option<u64> = None;
        loop {
            if self.overrun.load(Ordering::Relaxed) {
                return Err(NetError::Protocol(
                    "more frames arrived than the credit allows".into(),
                ));
            }
            let (msg, payload) = match self.rx.recv_timeout(POLL) {
                Ok(m) => m?,
                Err(RecvTimeoutError::Timeout) if !self.give_up() => continue,
                Err(_) => return Ok(Ended::Stopped),
            };
            let sent_as = match &msg {
                StreamMsg::Frame { element, .. }
                | StreamMsg::End { element, .. }
                | StreamMsg::Poisoned { element, .. } => *element,
            };
            if sent_as != element {
                return Err(NetError::Protocol(format!(
                    "frames of {sent_as} arrived; the plan says {element}"
                )));
            }
            match msg {
                StreamMsg::Frame {
                    seq,
                    source_seq,
                    timestamp_ns,
                    shape,
                    ..
                } => {
                    if last.is_some_and(|l| seq <= l) {
                        return Err(NetError::Protocol(format!(
                            "frame {seq} arrived after frame {last:?}"
                        )));
                    }
                    last = Some(seq);
                    if !self.place(element, source_seq, timestamp_ns, &shape, &payload)? {
                        return Ok(Ended::Stopped);
                    }
                    placed += 1;
                    // Credit every `credit_every` frames: while the
                    // forwarder waits (window frames not credited), at
                    // least window - credit_every + 1 >= 1 of them are
                    // still to be placed here, and placing them sends it.
                    if placed - credited >= self.credit_every {
                        credited = placed;
                        // Lost with the run or the host, if it is not sent.
                        let _ = self.credit.put(encode_credit(placed).to_vec()).wait();
                    }
                }
                StreamMsg::End { .. } => {
                    self.producer
                        .end()
                        .map_err(|e| NetError::Protocol(e.to_string()))?;
                    self.inner.lock().imported.insert(self.entry, placed);
                    return Ok(Ended::AsSent);
                }
                StreamMsg::Poisoned { .. } => {
                    self.producer.poison();
                    return Ok(Ended::AsSent);
                }
            }
        }
    }

    /// Copies one frame into the next slot and publishes it; false when
    /// the run stopped before a slot was free.
    fn place(
        &mut self,
        element: Primitive,
        source_seq: u64,
        timestamp_ns: u64,
        shape: &[u64],
        payload: &ZBytes,
    ) -> Result<bool, NetError> {
        let want = entry_bytes(element, shape);
        if want != Some(payload.len() as u64) {
            return Err(NetError::Protocol(format!(
                "a frame of shape {shape:?} came with {} bytes",
                payload.len()
            )));
        }
        let dims: Vec<usize> = shape
            .iter()
            .map(|&d| {
                usize::try_from(d)
                    .map_err(|_| NetError::Protocol(format!("dimension {d} is too large")))
            })
            .collect::<Result<_, _>>()?;
        loop {
            match self.producer.begin(Some(POLL)) {
                Ok(()) => break,
                Err(FioError::StreamTimeout { .. }) if !self.give_up() => {}
                Err(FioError::StreamTimeout { .. } | FioError::StreamPoisoned { .. }) => {
                    return Ok(false);
                }
                Err(e) => return Err(NetError::Protocol(e.to_string())),
            }
        }
        self.producer
            .set_shape(&dims)
            .map_err(|e| NetError::Protocol(e.to_string()))?;
        self.producer
            .set_source(source_seq, timestamp_ns)
            .map_err(|e| NetError::Protocol(e.to_string()))?;
        let slot = self
            .producer
            .bytes_mut()
            .map_err(|e| NetError::Protocol(e.to_string()))?;
        let mut at = 0usize;
        for piece in payload.slices() {
            slot[at..at + piece.len()].copy_from_slice(piece);
            at += piece.len();
        }
        self.producer
            .publish()
            .map_err(|e| NetError::Protocol(e.to_string()))?;
        Ok(true)
    }
}
