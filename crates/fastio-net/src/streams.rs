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
//!   `<run>/stream/<entry>/<host>` ([`StreamMsg`]): the frames waiting
//!   together, as many as fit one message, and a frame too large for one
//!   in parts ([`plan_messages`]);
//! * on each consuming host a [`Bridge`] is the local stream's producer
//!   (the indices of consumers placed elsewhere are detached): it copies
//!   each frame (part by part, as they come) into the next slot,
//!   publishes it with the frame's shape,
//!   source number and time, and grants credit on
//!   `<run>/credit/<entry>/<host>`.
//!
//! Credit: a forwarder sends frame `n` only when `n` is below the newest
//! limit the bridge granted. Under `block` the limit is what the local
//! consumers have *released* plus the crossing's window `W`: the consuming
//! host never holds more than `W` frames its consumers have not finished
//! with (in its stream and on their way). `W` adapts ([`Window`]): it
//! starts at [`crossing_window`] (the stream's depth, more for small
//! frames, at most [`MAX_WINDOW_DEPTHS`] × depth), halves towards the
//! depth whenever a frame had to wait for a slot (the consumer, not the
//! link, holds the stream back: a standing queue), and doubles back when
//! every frame granted had arrived and was consumed already (the link, or
//! the credit's round trip, is the limit). So a slow consumer holds its
//! producer on the other host `depth` (its stream there) plus `depth`
//! frames (here) back, and a fast one gets the window a link of small
//! frames needs. Under `drop-oldest` the limit is what was placed plus
//! the depth (each side drops instead of waiting). Zenoh's receiving
//! thread never waits: at most a window of frames (plus the end) is ever
//! queued for a bridge.
//!
//! The end of a stream crosses as an end message after its last frame; a
//! poisoned stream as a poison. Nothing is lost unseen when a link goes
//! down and comes back (Zenoh drops what was on its way): a gap in the
//! frames fails the stream on the consuming host; a forwarder waiting for
//! credit says every [`SAY_AGAIN`] how many frames it sent
//! ([`StreamMsg::Sent`]): frames lost at the tail are found, and the bridge
//! answers with its grant (after a flap the bridge's own grants, said again
//! when nothing comes, were seen never to arrive until the producing host
//! wrote on the link); and it says the end (or poison) again every
//! [`SAY_AGAIN`] until the consuming host is done. A bridge that stops for
//! any other reason (its run stopping, the producing host gone, a frame
//! that is not what the stream takes) poisons its local stream: a consumer
//! never mistakes a failure for the end.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use dtype::Primitive;
use fastio::{Error as FioError, Frame, StreamConsumer, StreamProducer};
use fastio_pipeline::{Failure, LinkEvent};
use zenoh::Wait;
use zenoh::bytes::ZBytes;
use zenoh::pubsub::Publisher;

use crate::error::NetError;
use crate::link::Inner;
use crate::wire::{MESSAGE_BYTES, STREAM_FIXED_BYTES, StreamMsg, encode_credit, entry_bytes};

/// How long a forwarder or bridge waits before looking at the run's stop
/// and the other host's liveness again.
const POLL: Duration = Duration::from_millis(100);

/// How often a forwarder waiting for credit says how many frames it sent,
/// and a forwarder whose stream ended says its end again.
const SAY_AGAIN: Duration = Duration::from_millis(250);

/// What waiting for credit came to ([`Credit::wait_for`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Waited {
    /// The frame may go.
    Granted,
    /// The run stops, or the consuming host is gone.
    Stopped,
    /// No credit came for the time allowed.
    Silent,
}

/// What a message queued for a bridge is: its frames (or end, or poison)
/// and their bytes, or why the sample could not be read.
pub(crate) type Incoming = Result<Batch, NetError>;

/// One stream message: one or more frames (their bytes one after another
/// in the payload), or an end, or a poison; and how far placing it got.
pub(crate) struct Batch {
    msgs: Vec<StreamMsg>,
    payload: ZBytes,
    /// The first message not placed yet.
    next: usize,
    /// Where its bytes begin in the payload.
    at: usize,
}

impl Batch {
    /// A message as it arrived.
    pub(crate) fn new(msgs: Vec<StreamMsg>, payload: ZBytes) -> Batch {
        Batch {
            msgs,
            payload,
            next: 0,
            at: 0,
        }
    }
}

/// The limit a consuming host granted, as it last said: frames numbered
/// below it may be sent.
pub(crate) struct Credit {
    limit: Mutex<u64>,
    changed: Condvar,
    /// A credit message that is not one this build reads (a peer of
    /// another version): the forwarder stops with it.
    refused: Mutex<Option<String>>,
}

impl Credit {
    /// Credit before the consuming host said anything: `limit`, the
    /// crossing's first window (both hosts compute it from the plan).
    pub(crate) fn new(limit: u64) -> Credit {
        Credit {
            limit: Mutex::new(limit),
            changed: Condvar::new(),
            refused: Mutex::new(None),
        }
    }

    /// A credit message arrived (they may overtake each other, and a
    /// shrinking window may grant less than before: the largest limit
    /// wins).
    pub(crate) fn update(&self, limit: u64) {
        let mut l = self.limit.lock().unwrap_or_else(|e| e.into_inner());
        if limit > *l {
            *l = limit;
            self.changed.notify_all();
        }
    }

    /// A credit message this build does not read: why.
    pub(crate) fn refuse(&self, why: String) {
        let mut r = self.refused.lock().unwrap_or_else(|e| e.into_inner());
        r.get_or_insert(why);
        drop(r);
        let _l = self.limit.lock().unwrap_or_else(|e| e.into_inner());
        self.changed.notify_all();
    }

    fn refused(&self) -> Result<(), NetError> {
        match &*self.refused.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(why) => Err(NetError::Protocol(format!("its credit: {why}"))),
            None => Ok(()),
        }
    }

    /// How many more frames may go now, `sent` sent.
    fn room(&self, sent: u64) -> u64 {
        let l = self.limit.lock().unwrap_or_else(|e| e.into_inner());
        l.saturating_sub(sent)
    }

    /// Waits until frame `sent` may go, at most `silence`; an error when a
    /// credit message was refused.
    fn wait_for(
        &self,
        sent: u64,
        give_up: &dyn Fn() -> bool,
        silence: Duration,
    ) -> Result<Waited, NetError> {
        let until = Instant::now() + silence;
        let mut l = self.limit.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            self.refused()?;
            if sent < *l {
                return Ok(Waited::Granted);
            }
            if give_up() {
                return Ok(Waited::Stopped);
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Waited::Silent);
            }
            l = self
                .changed
                .wait_timeout(l, left.min(POLL))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// A crossing's window on the consuming host: frames it lets the producing
/// host send beyond what its consumers released, between the stream's
/// depth and [`crossing_window`]'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    /// Now.
    pub(crate) now: u64,
    /// The least: the stream's depth.
    pub(crate) least: u64,
    /// The most: [`crossing_window`].
    pub(crate) most: u64,
    /// Grants to go before the window may grow again: a shrink sets it
    /// (to twice the most), each grant lowers it. A consumer that holds
    /// the stream back but now and then empties its stream (it waits on
    /// something else: its own output) looks link-bound for a moment;
    /// growing then only queues frames for it again.
    pub(crate) calm: u64,
}

impl Window {
    /// A window from `most` ([`crossing_window`]) down to `depth`,
    /// starting at its most.
    pub(crate) fn new(depth: u32, most: u64) -> Window {
        let least = u64::from(depth.max(1)).min(most.max(1));
        Window {
            now: most.max(least),
            least,
            most: most.max(least),
            calm: 0,
        }
    }

    /// A frame waited for a slot: the consumer holds the stream back, the
    /// window halves towards the depth.
    pub(crate) fn shrink(&mut self) {
        self.now = (self.now / 2).max(self.least);
        self.calm = self.most.saturating_mul(2);
    }

    /// Every frame granted had arrived and been consumed when more was
    /// granted: the link is the limit, the window doubles (unless a
    /// shrink was too recent, [`Window::calm`]).
    pub(crate) fn grow(&mut self) {
        if self.calm == 0 {
            self.now = self.now.saturating_mul(2).min(self.most);
        }
    }

    /// A grant went out.
    pub(crate) fn granted(&mut self) {
        self.calm = self.calm.saturating_sub(1);
    }
}

/// Bytes a crossing of a `block` stream keeps in flight at least (its
/// window, in frames, is at least this many bytes of its largest frame):
/// the link's bandwidth-delay product on a LAN. A window of `depth`
/// frames alone starves a link of small frames: the credit's round trip
/// (placed there, credit sent, forwarder woken, frame sent, placed) takes
/// some 200–300 µs here, and four frames of 64 KiB in flight per round
/// trip move about 1.2 GB/s on a link that carries 2–3.
pub(crate) const WINDOW_BYTES: u64 = 1 << 20;

/// A crossing's window is at most this many times its stream's depth:
/// frames in flight are frames a `block` producer may run ahead of a slow
/// consumer on another host (its depth here, the window, the depth
/// there), so the link's own buffering stays a small multiple of what the
/// pipeline asked for.
pub(crate) const MAX_WINDOW_DEPTHS: u64 = 4;

/// The crossing's window: how many frames a forwarder may have sent and
/// not yet seen placed. The stream's `depth`, raised for a `block` stream
/// of small frames to [`WINDOW_BYTES`] of its largest frame
/// (`frame_bytes`), up to [`MAX_WINDOW_DEPTHS`] × `depth`. A
/// `drop-oldest` stream keeps `depth`: a frame in flight cannot be
/// dropped, so a larger window would only hand its consumer older frames.
/// Both hosts compute it from the same plan (a bridge that receives more
/// than the window fails the stream).
pub(crate) fn crossing_window(depth: u32, drop_oldest: bool, frame_bytes: u64) -> u64 {
    let depth = u64::from(depth.max(1));
    if drop_oldest {
        return depth;
    }
    WINDOW_BYTES
        .div_ceil(frame_bytes.max(1))
        .clamp(depth, depth.saturating_mul(MAX_WINDOW_DEPTHS))
}

/// One message a forwarder sends for the frames it took (by their index
/// in what it took; see [`plan_messages`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outgoing {
    /// Whole frames: their headers and all their bytes.
    Frames(std::ops::Range<usize>),
    /// The header of one frame too large for a message, with its bytes
    /// up to `end`.
    First { frame: usize, end: usize },
    /// More bytes of that frame, `start..end`, under a part header.
    Part {
        frame: usize,
        start: usize,
        end: usize,
    },
}

/// The messages that carry frames of (header bytes, frame bytes) `sizes`,
/// in order, each within [`MESSAGE_BYTES`] (`limit`): frames that fit go
/// together, as many as fit; a frame that does not fit alone goes in
/// parts. No frame waits for another: these are the frames taken already.
pub(crate) fn plan_messages(sizes: &[(usize, usize)], limit: usize) -> Vec<Outgoing> {
    let mut out = Vec::new();
    let mut group = 0..0;
    let mut used = 0usize;
    for (i, &(header, bytes)) in sizes.iter().enumerate() {
        let whole = header + bytes;
        if whole <= limit {
            if used + whole > limit {
                out.push(Outgoing::Frames(group.clone()));
                group = i..i;
                used = 0;
            }
            group.end = i + 1;
            used += whole;
            continue;
        }
        if !group.is_empty() {
            out.push(Outgoing::Frames(group.clone()));
        }
        group = i + 1..i + 1;
        used = 0;
        // A header is far smaller than a message: the first part has
        // bytes, every part after it too.
        let first = limit.saturating_sub(header).max(1);
        out.push(Outgoing::First {
            frame: i,
            end: first,
        });
        let part = limit.saturating_sub(STREAM_FIXED_BYTES).max(1);
        let mut start = first;
        while start < bytes {
            let end = (start + part).min(bytes);
            out.push(Outgoing::Part {
                frame: i,
                start,
                end,
            });
            start = end;
        }
    }
    if !group.is_empty() {
        out.push(Outgoing::Frames(group));
    }
    out
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

    fn send(&self, msgs: &[StreamMsg], payload: ZBytes) -> Result<(), NetError> {
        let _sending = self.inner.sending(Some(&self.to));
        self.publisher
            .put(payload)
            .attachment(StreamMsg::encode_all(msgs))
            .wait()
            .map_err(|e| NetError::Protocol(e.to_string()))
    }

    /// Sends the stream's end (or poison), then says it again every
    /// [`SAY_AGAIN`] until the consuming host is done (it cannot be before
    /// its operators had the end), gone, or the run stops: an end lost
    /// with a link that went down and came back would leave that host
    /// waiting for it. A second end is ignored there (and let go while
    /// one is queued: [`Bridge::arrived`]).
    fn last_word(&self, msg: StreamMsg) -> Result<(), NetError> {
        self.send(std::slice::from_ref(&msg), ZBytes::new())?;
        loop {
            let until = Instant::now() + SAY_AGAIN;
            while Instant::now() < until {
                if self.give_up() || self.inner.host_done(&self.to) {
                    return Ok(());
                }
                std::thread::sleep(POLL.min(until.saturating_duration_since(Instant::now())));
            }
            // Errors here are the link's going: the first send's result
            // is the stream's.
            let _ = self.send(std::slice::from_ref(&msg), ZBytes::new());
        }
    }

    fn forward(&mut self) -> Result<(), NetError> {
        let element = self.inner.pipeline.plan.entries[self.entry].element;
        // Every host has said its batch (forwarders start once all did).
        let limit = self
            .inner
            .pipeline
            .placement
            .host_index(&self.to)
            .map_or(MESSAGE_BYTES, |h| self.inner.message_bytes_to(h));
        let mut sent = 0u64;
        loop {
            if self.give_up() {
                // The run stops (each driver poisons its own streams), or
                // the host is gone (judged by the link's liveliness).
                return Ok(());
            }
            // Credit first: a frame is taken only when it may go at once,
            // so this consumer never holds more frames than are in flight
            // (fewer than the depth, within `next`'s limit). While none
            // comes, the consuming host hears how many frames were sent:
            // should the last of them have been lost with the link, it
            // would otherwise wait for them, and this for its credit.
            match self.credit.wait_for(sent, &|| self.give_up(), SAY_AGAIN)? {
                Waited::Granted => {}
                Waited::Stopped => return Ok(()),
                Waited::Silent => {
                    let said = StreamMsg::Sent {
                        element,
                        frames: sent,
                    };
                    self.send(&[said], ZBytes::new())?;
                    continue;
                }
            }
            match self.consumer.next(Some(POLL)) {
                Ok(Some(frame)) => {
                    // The frames already waiting go with it, as one
                    // message, as far as the credit allows; none is
                    // waited for (no frame waits for another).
                    let room = self.credit.room(sent).max(1);
                    let mut frames = vec![frame];
                    while (frames.len() as u64) < room {
                        match self.consumer.next(Some(Duration::ZERO)) {
                            Ok(Some(f)) => frames.push(f),
                            // The end, a poison, or nothing more now:
                            // the next turn of the loop says which.
                            _ => break,
                        }
                    }
                    let msgs: Vec<StreamMsg> = frames
                        .iter()
                        .map(|f| StreamMsg::Frame {
                            element,
                            seq: f.seq(),
                            source_seq: f.source_seq(),
                            timestamp_ns: f.timestamp_ns(),
                            shape: f.shape().iter().map(|&d| d as u64).collect(),
                        })
                        .collect();
                    let seqs: Vec<u64> = frames.iter().map(Frame::seq).collect();
                    let bytes: Vec<bytes::Bytes> = frames
                        .into_iter()
                        .map(|f| bytes::Bytes::from_owner(Lent(f)))
                        .collect();
                    let sizes: Vec<(usize, usize)> = msgs
                        .iter()
                        .zip(&bytes)
                        .map(|(m, b)| (m.encoded_len(), b.len()))
                        .collect();
                    for out in plan_messages(&sizes, limit) {
                        match out {
                            Outgoing::Frames(range) => {
                                let mut payload = ZBytes::writer();
                                for b in &bytes[range.clone()] {
                                    payload.append(ZBytes::from(b.clone()));
                                }
                                self.send(&msgs[range], payload.finish())?;
                            }
                            Outgoing::First { frame, end } => {
                                let first = ZBytes::from(bytes[frame].slice(..end));
                                self.send(&msgs[frame..=frame], first)?;
                            }
                            Outgoing::Part { frame, start, end } => {
                                let part = StreamMsg::Part {
                                    element,
                                    seq: seqs[frame],
                                    offset: start as u64,
                                };
                                let rest = ZBytes::from(bytes[frame].slice(start..end));
                                self.send(&[part], rest)?;
                            }
                        }
                    }
                    sent += msgs.len() as u64;
                }
                Ok(None) => {
                    let frames = self.consumer.next_seq();
                    return self.last_word(StreamMsg::End { element, frames });
                }
                Err(FioError::StreamPoisoned { from_frame, .. }) => {
                    return self.last_word(StreamMsg::Poisoned {
                        element,
                        from: from_frame,
                    });
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// The producer ended or poisoned the stream, and so did the bridge.
    AsSent,
    /// The run stopped or the producing host is gone: the local stream
    /// is poisoned.
    Stopped,
}

/// What placing one message came to.
enum Handled {
    /// Placed (a frame), or nothing to do.
    Placed,
    /// No slot was free and the caller may not wait: the message, back.
    NoSlot(Incoming),
    /// The bridge ended.
    Ended(Ended),
}

/// Places the frames of one stream, sent by the producing host, in the
/// local stream. A frame is placed in Zenoh's callback when a slot is
/// free and nothing is waiting before it (no hand-over to another thread,
/// and Zenoh's receive buffer goes back at once); otherwise it is handed
/// to the bridge's thread, which waits for the slot. Zenoh's receiving
/// thread never waits: the callback only tries the lock the thread holds
/// while it waits, and at most the messages of the window's frames (plus
/// the end) are ever handed over.
pub(crate) struct Bridge {
    pub(crate) placer: Mutex<Placer>,
    /// Messages handed to the thread and not yet handled (lowered under
    /// `placer`'s lock once handled: the callback, holding the lock,
    /// places a frame itself only when it is 0).
    queued: std::sync::atomic::AtomicUsize,
    /// The most messages ever handed over: those of a window of the
    /// largest frames, and the end.
    most_queued: usize,
    tx: crossbeam_channel::Sender<Work>,
    rx: Receiver<Work>,
    /// Set when more arrived than the credit allows.
    overrun: AtomicBool,
    /// An end (or poison) is queued: one said again meanwhile is let go,
    /// so the queue holds at most one.
    end_queued: AtomicBool,
    /// A [`Work::Credit`] is on its way to the thread: no other is sent
    /// (the thread may be waiting for releases, not reading its queue).
    credit_queued: AtomicBool,
}

/// What the bridge's thread is handed.
enum Work {
    /// A message to place (waiting for slots).
    Message(Incoming),
    /// Credit is due, or every frame granted is placed: frames were
    /// placed in Zenoh's callback, which must not put (a put may wait for
    /// the link, and the link for this host's reading: two hosts
    /// streaming to each other would each wait for the other) nor wait for
    /// the consumers' releases.
    Credit,
}

/// The bridge's side of the local stream, behind its lock.
pub(crate) struct Placer {
    pub(crate) inner: Arc<Inner>,
    pub(crate) entry: usize,
    /// The producing host.
    pub(crate) from: String,
    pub(crate) producer: StreamProducer,
    /// How far the local stream's consumers have come.
    pub(crate) releases: Arc<fastio::StreamReleases>,
    pub(crate) credit: Arc<Publisher<'static>>,
    /// The crossing's window (adapted as frames wait for slots or the
    /// forwarder waits for credit).
    pub(crate) window: Window,
    /// Under `drop-oldest`: credit by frames placed, not released.
    pub(crate) drop_oldest: bool,
    /// A frame waited for a slot since the last grant.
    pub(crate) waited: bool,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) placed: u64,
    /// Under `drop-oldest`: frames the producing host said it sent that
    /// never arrived (lost with a link that went down and came back; the
    /// policy lets them go). Counted as placed for the credit.
    pub(crate) skipped: u64,
    /// The producing host said how many frames it sent ([`StreamMsg::Sent`])
    /// since the last credit went out: it waits for credit, and is
    /// answered with the grant even if no new one is due.
    pub(crate) probed: bool,
    /// The limit granted last (the forwarder's first is the window's
    /// most).
    pub(crate) granted: u64,
    pub(crate) last: Option<u64>,
    /// The frame whose first part is placed and whose other parts are
    /// still to come (its slot taken).
    pub(crate) partial: Option<Partial>,
    /// Set once the bridge ended: nothing more is placed.
    pub(crate) ended: bool,
}

/// A frame arriving in parts: its number, its bytes, and how many of them
/// are placed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Partial {
    seq: u64,
    len: usize,
    got: usize,
}

/// How many messages the largest frame of `frame_bytes` bytes (with
/// `ndim` dimensions) crosses in at most ([`plan_messages`] in the
/// smallest messages, [`MESSAGE_BYTES`]).
pub(crate) fn messages_per_frame(frame_bytes: u64, ndim: usize) -> usize {
    let header = STREAM_FIXED_BYTES + 8 * ndim;
    let bytes = usize::try_from(frame_bytes).unwrap_or(usize::MAX);
    if header.saturating_add(bytes) <= MESSAGE_BYTES {
        return 1;
    }
    let first = MESSAGE_BYTES - header;
    1 + (bytes - first).div_ceil(MESSAGE_BYTES - STREAM_FIXED_BYTES)
}

impl Bridge {
    /// A bridge for `placer`, with room for the messages of `window`
    /// frames of `per_frame` messages each (plus the end) handed to its
    /// thread.
    pub(crate) fn new(placer: Placer, window: u64, per_frame: usize) -> Bridge {
        // Unbounded: what may be queued is bounded by `most_queued`
        // (a window of frames, and the end: one, [`Bridge::end_queued`]),
        // and credit calls are one at a time ([`Bridge::credit_queued`]).
        let (tx, rx) = crossbeam_channel::unbounded::<Work>();
        let window = usize::try_from(window).unwrap_or(usize::MAX);
        Bridge {
            placer: Mutex::new(placer),
            queued: std::sync::atomic::AtomicUsize::new(0),
            most_queued: window.saturating_mul(per_frame.max(1)).saturating_add(2),
            tx,
            rx,
            overrun: AtomicBool::new(false),
            end_queued: AtomicBool::new(false),
            credit_queued: AtomicBool::new(false),
        }
    }

    /// A message arrived (in Zenoh's callback): placed here when it can
    /// be at once, else handed to the thread ([`Bridge::run`]).
    pub(crate) fn arrived(&self, item: Incoming) {
        // A forwarder's count of frames sent is said again while it waits,
        // and its end until this host is done: a count that cannot be
        // handled at once (messages before it still queued) is let go, an
        // end while one is queued too; neither ever fills the queue.
        let msgs = item.as_ref().map_or(&[][..], |b| b.msgs.as_slice());
        let said_sent = matches!(msgs, [StreamMsg::Sent { .. }]);
        let said_end = matches!(msgs, [StreamMsg::End { .. } | StreamMsg::Poisoned { .. }]);
        let item = match self.placer.try_lock() {
            Ok(mut p) if self.queued.load(Ordering::Acquire) == 0 => {
                if p.ended {
                    return;
                }
                match p.handle(item, false) {
                    Ok(Handled::Placed) => {
                        // Credit due, or every frame granted here: the
                        // thread sends it, or waits for the consumers'
                        // releases to grant more (full: it is busy, and
                        // sends credit after what it handles).
                        if (p.credit_due() || p.arrived() >= p.granted || p.probed)
                            && !self.credit_queued.swap(true, Ordering::AcqRel)
                        {
                            let _ = self.tx.try_send(Work::Credit);
                        }
                        return;
                    }
                    Ok(Handled::Ended(how)) => return p.end(Ok(how)),
                    Err(why) => return p.end(Err(why)),
                    Ok(Handled::NoSlot(item)) => item,
                }
            }
            _ if said_sent => return,
            _ if said_end && self.end_queued.swap(true, Ordering::AcqRel) => return,
            _ => item,
        };
        if self.queued.fetch_add(1, Ordering::AcqRel) >= self.most_queued {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            // The thread sees it on its next message, or within POLL.
            self.overrun.store(true, Ordering::Relaxed);
            return;
        }
        let _ = self.tx.send(Work::Message(item));
    }

    /// Sends the credit due, if any, without holding the placer's lock
    /// (the callback may place frames meanwhile).
    fn send_credit(&self) {
        let due = {
            let mut p = self.placer.lock().unwrap_or_else(|e| e.into_inner());
            // The producing host said it waits: the grant is said again if
            // no new one is due (it may not have the last).
            let probed = std::mem::take(&mut p.probed);
            p.grant()
                .or((probed && !p.ended).then_some(p.granted))
                .map(|limit| (limit, p.credit.clone(), p.inner.clone(), p.from.clone()))
        };
        if let Some((limit, publisher, inner, from)) = due {
            // Lost with the run or the host, if it is not sent.
            let _sending = inner.sending(Some(&from));
            let _ = publisher.put(encode_credit(limit).to_vec()).wait();
        }
    }

    /// What the local consumers released, when the forwarder has sent
    /// every frame granted, all are placed and no more credit is due: the
    /// bridge then waits for a consumer to let go of a frame (no frame
    /// can come before it grants more).
    fn starved(&self) -> Option<u64> {
        let p = self.placer.lock().unwrap_or_else(|e| e.into_inner());
        if p.ended || p.drop_oldest || self.queued.load(Ordering::Acquire) != 0 {
            return None;
        }
        let released = p.releases.released();
        (p.placed >= p.granted && p.limit(released) <= p.granted).then_some(released)
    }

    /// The bridge's thread: places what was handed to it, waiting for
    /// slots; ends the local stream when the run stops or the producing
    /// host is gone.
    pub(crate) fn run(&self) {
        let releases = self
            .placer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .releases
            .clone();
        loop {
            // Credit a release made due (none is sent from the consumers'
            // side: only here, or after a frame is placed).
            self.send_credit();
            if let Some(released) = self.starved() {
                // An end or a poison meanwhile is placed by the callback
                // (the placer's lock is free while this waits).
                releases.wait_past(released, POLL);
                let mut p = self.placer.lock().unwrap_or_else(|e| e.into_inner());
                if p.ended {
                    return;
                }
                if p.give_up() {
                    return p.end(Ok(Ended::Stopped));
                }
                drop(p);
                self.send_credit();
                continue;
            }
            let got = match self.rx.recv_timeout(POLL) {
                Ok(Work::Credit) => {
                    self.credit_queued.store(false, Ordering::Release);
                    self.send_credit();
                    continue;
                }
                Ok(Work::Message(item)) => Ok(item),
                Err(e) => Err(e),
            };
            let mut p = self.placer.lock().unwrap_or_else(|e| e.into_inner());
            if p.ended {
                return;
            }
            if self.overrun.load(Ordering::Relaxed) {
                return p.end(Err(NetError::Protocol(
                    "more frames arrived than the credit allows".into(),
                )));
            }
            let handled = match got {
                Ok(item) => {
                    let h = p.handle(item, true);
                    self.queued.fetch_sub(1, Ordering::AcqRel);
                    h
                }
                Err(RecvTimeoutError::Timeout) if !p.give_up() => {
                    // Nothing came for a while, though frames are granted:
                    // the grant is said again (a credit message lost with
                    // a link that went down and came back would otherwise
                    // leave both sides waiting).
                    if p.arrived() < p.granted {
                        let (limit, publisher) = (p.granted, p.credit.clone());
                        let (inner, from) = (p.inner.clone(), p.from.clone());
                        drop(p);
                        let _sending = inner.sending(Some(&from));
                        let _ = publisher.put(encode_credit(limit).to_vec()).wait();
                    }
                    continue;
                }
                Err(_) => Ok(Handled::Ended(Ended::Stopped)),
            };
            match handled {
                Ok(Handled::Placed) => {
                    drop(p);
                    self.send_credit();
                }
                // (Not returned when the caller may wait.)
                Ok(Handled::NoSlot(_)) => return p.end(Ok(Ended::Stopped)),
                Ok(Handled::Ended(how)) => return p.end(Ok(how)),
                Err(why) => return p.end(Err(why)),
            }
        }
    }
}

impl Placer {
    fn give_up(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.inner.host_gone(&self.from)
    }

    /// The bridge ends: a stop poisons the local stream, a failure too,
    /// and tells the driver why.
    fn end(&mut self, how: Result<Ended, NetError>) {
        self.ended = true;
        match how {
            Ok(Ended::AsSent) => {}
            Ok(Ended::Stopped) => self.producer.poison(),
            Err(why) => {
                self.producer.poison();
                self.inner.cannot_receive(self.entry, &self.from, &why);
            }
        }
    }

    /// Handles one message: its frames are placed in order (waiting for
    /// each slot when `may_wait`; otherwise the message is given back,
    /// from the first frame not placed, when no slot is free), an end or
    /// poison ends the bridge.
    fn handle(&mut self, item: Incoming, may_wait: bool) -> Result<Handled, NetError> {
        let element = self.inner.pipeline.plan.entries[self.entry].element;
        let mut batch = item?;
        if batch.next == 0 {
            check_batch(element, &batch)?;
        }
        while batch.next < batch.msgs.len() {
            let msg = &batch.msgs[batch.next];
            if let Some(p) = self.partial
                && !matches!(msg, StreamMsg::Part { .. })
            {
                return Err(NetError::Protocol(format!(
                    "frame {} stopped after {} of its {} bytes",
                    p.seq, p.got, p.len
                )));
            }
            match msg {
                StreamMsg::Part { seq, offset, .. } => {
                    let p = self.partial.take().ok_or_else(|| {
                        NetError::Protocol(format!("a part of frame {seq} that never began"))
                    })?;
                    if p.seq != *seq || p.got as u64 != *offset {
                        return Err(NetError::Protocol(format!(
                            "bytes of frame {seq} at {offset} arrived where frame {}'s at {} were due",
                            p.seq, p.got
                        )));
                    }
                    let n = batch.payload.len();
                    self.copy_in(&batch.payload, 0, p.got, n)?;
                    let got = p.got + n;
                    if got < p.len {
                        self.partial = Some(Partial { got, ..p });
                    } else {
                        self.publish()?;
                        self.placed += 1;
                    }
                    batch.next += 1;
                }
                StreamMsg::Frame {
                    seq,
                    source_seq,
                    timestamp_ns,
                    shape,
                    ..
                } => {
                    let (seq, source_seq, timestamp_ns) = (*seq, *source_seq, *timestamp_ns);
                    if self.last.is_some_and(|l| seq <= l) {
                        return Err(NetError::Protocol(format!(
                            "frame {seq} arrived after frame {:?}",
                            self.last
                        )));
                    }
                    // Under `block` every frame crosses, numbered one
                    // after another: a gap is frames lost with a link that
                    // went down and came back, never passed on as a
                    // stream that looks whole (frame `seq` says `seq`
                    // frames came before it; an earlier one was refused
                    // above).
                    if !self.drop_oldest {
                        check_sent(self.last, seq)?;
                    }
                    let dims = frame_dims(shape)?;
                    let len = entry_bytes(element, shape).unwrap_or(0) as usize;
                    match self.slot(may_wait)? {
                        Some(true) => {}
                        Some(false) => return Ok(Handled::Ended(Ended::Stopped)),
                        None => return Ok(Handled::NoSlot(Ok(batch))),
                    }
                    self.last = Some(seq);
                    // All of it here, or (alone in its message) its first
                    // part.
                    let here = len.min(batch.payload.len() - batch.at);
                    self.begin_frame(&dims, source_seq, timestamp_ns)?;
                    self.copy_in(&batch.payload, batch.at, 0, here)?;
                    batch.next += 1;
                    batch.at += here;
                    if here < len {
                        self.partial = Some(Partial {
                            seq,
                            len,
                            got: here,
                        });
                    } else {
                        self.publish()?;
                        self.placed += 1;
                    }
                }
                StreamMsg::End { frames, .. } => {
                    // Under `block` every frame crosses: an end after fewer
                    // (the last frames lost with the link, the end said
                    // again) is never passed on as a whole stream.
                    if !self.drop_oldest {
                        check_sent(self.last, *frames)?;
                    }
                    self.producer
                        .end()
                        .map_err(|e| NetError::Protocol(e.to_string()))?;
                    self.inner.lock().imported.insert(self.entry, self.placed);
                    return Ok(Handled::Ended(Ended::AsSent));
                }
                StreamMsg::Poisoned { .. } => {
                    self.producer.poison();
                    return Ok(Handled::Ended(Ended::AsSent));
                }
                StreamMsg::Sent { frames, .. } => {
                    self.sent(*frames)?;
                    batch.next += 1;
                }
            }
        }
        Ok(Handled::Placed)
    }

    /// The producing host said it sent `frames` frames and waits for
    /// credit (every message before it, in order, was handled): any of
    /// them not here was lost on the link. Under `block` that fails the
    /// stream, as a gap does; under `drop-oldest` they are let go and
    /// counted as placed, so credit goes on.
    fn sent(&mut self, frames: u64) -> Result<(), NetError> {
        self.probed = true;
        if self.drop_oldest {
            let here = self.placed + self.skipped;
            self.skipped += frames.saturating_sub(here);
            return Ok(());
        }
        check_sent(self.last, frames)
    }

    /// Frames here: placed, and under `drop-oldest` those lost on the
    /// link too ([`Placer::skipped`]).
    fn arrived(&self) -> u64 {
        self.placed + self.skipped
    }

    /// The limit the bridge would grant now, its consumers having
    /// released every frame below `released`: that plus the window (under
    /// `drop-oldest`, frames placed plus the window).
    fn limit(&self, released: u64) -> u64 {
        let from = if self.drop_oldest {
            self.arrived()
        } else {
            released
        };
        from.saturating_add(self.window.now)
    }

    /// Whether credit is due: the limit grew by half a window (so the
    /// link carries about two credit messages per window of frames while
    /// the forwarder still always has frames to send), or by anything
    /// once every frame granted is here (the forwarder waits for it).
    fn credit_due(&self) -> bool {
        self.due(self.limit(self.releases.released()))
    }

    /// Whether granting `limit` is due (see [`Placer::credit_due`]).
    fn due(&self, limit: u64) -> bool {
        limit > self.granted
            && (limit - self.granted >= self.window.now.div_ceil(2)
                || self.arrived() >= self.granted)
    }

    /// Adapts the window, then the limit to send, if credit is due
    /// ([`Placer::credit_due`]). The window halves when a frame waited for
    /// a slot since the last grant; it doubles when every frame granted
    /// was here and consumed already (the forwarder waited on the link's
    /// round trip, not on the consumer).
    fn grant(&mut self) -> Option<u64> {
        let released = self.releases.released();
        if !self.drop_oldest {
            if std::mem::take(&mut self.waited) {
                self.window.shrink();
            } else if self.placed >= self.granted && released >= self.placed {
                self.window.grow();
            }
        }
        let limit = self.limit(released);
        if !self.due(limit) {
            return None;
        }
        self.granted = limit;
        self.window.granted();
        Some(limit)
    }

    /// Takes the next slot: `Some(true)` taken, `Some(false)` the run
    /// stopped (or the stream was poisoned) first, `None` none free now
    /// and `may_wait` is false.
    fn slot(&mut self, may_wait: bool) -> Result<Option<bool>, NetError> {
        let timeout = if may_wait { POLL } else { Duration::ZERO };
        // A frame that finds no free slot: the consumer holds the stream
        // back (the window shrinks at the next grant).
        match self.producer.begin(Some(Duration::ZERO)) {
            Ok(()) => return Ok(Some(true)),
            Err(FioError::StreamTimeout { .. }) => self.waited = true,
            Err(FioError::StreamPoisoned { .. }) => return Ok(Some(false)),
            Err(e) => return Err(NetError::Protocol(e.to_string())),
        }
        loop {
            match self.producer.begin(Some(timeout)) {
                Ok(()) => return Ok(Some(true)),
                Err(FioError::StreamTimeout { .. }) if !may_wait => return Ok(None),
                Err(FioError::StreamTimeout { .. }) if !self.give_up() => {}
                Err(FioError::StreamTimeout { .. } | FioError::StreamPoisoned { .. }) => {
                    return Ok(Some(false));
                }
                Err(e) => return Err(NetError::Protocol(e.to_string())),
            }
        }
    }

    /// Gives the slot taken the frame's shape and source.
    fn begin_frame(
        &mut self,
        dims: &[usize],
        source_seq: u64,
        timestamp_ns: u64,
    ) -> Result<(), NetError> {
        self.producer
            .set_shape(dims)
            .map_err(|e| NetError::Protocol(e.to_string()))?;
        self.producer
            .set_source(source_seq, timestamp_ns)
            .map_err(|e| NetError::Protocol(e.to_string()))
    }

    /// Copies `len` bytes of `payload` from `at` into the slot taken, from
    /// byte `to` of the frame (a frame's shape is set first: its bytes are
    /// the slot's).
    fn copy_in(
        &mut self,
        payload: &ZBytes,
        at: usize,
        to: usize,
        len: usize,
    ) -> Result<(), NetError> {
        let slot = self
            .producer
            .bytes_mut()
            .map_err(|e| NetError::Protocol(e.to_string()))?;
        let slot = to
            .checked_add(len)
            .and_then(|end| slot.get_mut(to..end))
            .ok_or_else(|| NetError::Protocol(format!("bytes {to}..+{len} run past the frame")))?;
        // The bytes may span several of the payload's slices.
        let (mut skip, mut done) = (at, 0usize);
        for piece in payload.slices() {
            if done == len {
                break;
            }
            if skip >= piece.len() {
                skip -= piece.len();
                continue;
            }
            let take = (piece.len() - skip).min(len - done);
            slot[done..done + take].copy_from_slice(&piece[skip..skip + take]);
            done += take;
            skip = 0;
        }
        Ok(())
    }

    /// Publishes the frame in the slot taken.
    fn publish(&mut self) -> Result<(), NetError> {
        self.producer
            .publish()
            .map_err(|e| NetError::Protocol(e.to_string()))
    }
}

/// Checks a message before any of it is placed: every header of the
/// stream's element type, and the payload exactly the frames' bytes (a
/// frame alone in its message may bring fewer, some: its first part; a
/// part brings some, and the frame's own checks say whether they fit).
fn check_batch(element: Primitive, batch: &Batch) -> Result<(), NetError> {
    check_element(element, &batch.msgs)?;
    let got = batch.payload.len() as u64;
    match batch.msgs.as_slice() {
        [StreamMsg::Frame { shape, .. }]
            if entry_bytes(element, shape).is_some_and(|len| got > 0 && got < len) =>
        {
            return Ok(());
        }
        [StreamMsg::Part { .. }] if got > 0 => return Ok(()),
        [StreamMsg::Part { .. }] => {
            return Err(NetError::Protocol("a part of a frame with no bytes".into()));
        }
        _ => {}
    }
    let mut bytes = 0u64;
    for msg in &batch.msgs {
        let len = match msg {
            StreamMsg::Frame { shape, .. } => entry_bytes(element, shape),
            _ => Some(0),
        };
        bytes = len
            .and_then(|l| bytes.checked_add(l))
            .ok_or_else(|| NetError::Protocol("frames whose bytes overflow".into()))?;
    }
    if bytes != batch.payload.len() as u64 {
        return Err(NetError::Protocol(format!(
            "frames of {bytes} bytes came with {}",
            batch.payload.len()
        )));
    }
    Ok(())
}

/// Under `block`, `frames` frames were sent before now (a *sent* count, an
/// end's count, or a frame's own number), the last here being `last`:
/// every one of them must be here.
fn check_sent(last: Option<u64>, frames: u64) -> Result<(), NetError> {
    let next = last.map_or(0, |l| l.saturating_add(1));
    match next.cmp(&frames) {
        std::cmp::Ordering::Equal => Ok(()),
        std::cmp::Ordering::Less => Err(NetError::Protocol(format!(
            "frames {next} to {} never arrived (lost on the link)",
            frames - 1
        ))),
        std::cmp::Ordering::Greater => Err(NetError::Protocol(format!(
            "{frames} frames said sent after frame {} arrived",
            next - 1
        ))),
    }
}

/// Every header of a message is of the stream's element type.
fn check_element(element: Primitive, msgs: &[StreamMsg]) -> Result<(), NetError> {
    for msg in msgs {
        let (StreamMsg::Frame {
            element: sent_as, ..
        }
        | StreamMsg::End {
            element: sent_as, ..
        }
        | StreamMsg::Poisoned {
            element: sent_as, ..
        }
        | StreamMsg::Part {
            element: sent_as, ..
        }
        | StreamMsg::Sent {
            element: sent_as, ..
        }) = msg;
        if *sent_as != element {
            return Err(NetError::Protocol(format!(
                "frames of {sent_as} arrived; the plan says {element}"
            )));
        }
    }
    Ok(())
}

/// A frame's dimensions.
fn frame_dims(shape: &[u64]) -> Result<Vec<usize>, NetError> {
    shape
        .iter()
        .map(|&d| {
            usize::try_from(d)
                .map_err(|_| NetError::Protocol(format!("dimension {d} is too large")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_stream_of_small_frames_keeps_a_megabyte_in_flight_within_four_depths() {
        // 64 KiB frames, depth 4: 16 frames make the megabyte (4 depths).
        assert_eq!(crossing_window(4, false, 64 << 10), 16);
        // 256 KiB frames: 4 frames make it, the depth already.
        assert_eq!(crossing_window(4, false, 256 << 10), 4);
        // 100 KiB frames: 11 frames (rounded up) make it.
        assert_eq!(crossing_window(4, false, 100 << 10), 11);
        // Tiny frames: at most four depths, never a hidden queue of
        // thousands of frames behind a slow consumer.
        assert_eq!(crossing_window(2, false, 2048), 8);
        assert_eq!(crossing_window(4, false, 1), 16);
        // Frames of a megabyte and more: the depth.
        assert_eq!(crossing_window(4, false, 1 << 20), 4);
        assert_eq!(crossing_window(3, false, 16 << 20), 3);
    }

    /// Every frame's bytes, in order, exactly once, from the messages
    /// planned; and no message over the limit.
    fn check_plan(sizes: &[(usize, usize)], limit: usize) -> Vec<Outgoing> {
        let plan = plan_messages(sizes, limit);
        let mut next = (0usize, 0usize); // (frame, bytes of it sent)
        for m in &plan {
            match m {
                Outgoing::Frames(r) => {
                    assert_eq!((r.start, 0), next, "{plan:?}");
                    assert!(!r.is_empty());
                    let total: usize = sizes[r.clone()].iter().map(|(h, b)| h + b).sum();
                    assert!(total <= limit, "{m:?} has {total} bytes");
                    next = (r.end, 0);
                }
                Outgoing::First { frame, end } => {
                    assert_eq!((*frame, 0), next, "{plan:?}");
                    assert!(*end > 0 && sizes[*frame].0 + end <= limit, "{m:?}");
                    assert!(
                        *end < sizes[*frame].1,
                        "{m:?}: a first part that is all of it"
                    );
                    next = (*frame, *end);
                }
                Outgoing::Part { frame, start, end } => {
                    assert_eq!((*frame, *start), next, "{plan:?}");
                    assert!(end > start && STREAM_FIXED_BYTES + end - start <= limit);
                    next = if *end == sizes[*frame].1 {
                        (frame + 1, 0)
                    } else {
                        (*frame, *end)
                    };
                }
            }
        }
        assert_eq!(next, (sizes.len(), 0), "{plan:?}");
        plan
    }

    #[test]
    fn frames_that_fit_go_together_and_large_ones_in_parts() {
        let h = STREAM_FIXED_BYTES + 8;
        // Small frames: as many in a message as fit.
        let small = vec![(h, 4096); 40];
        let plan = check_plan(&small, MESSAGE_BYTES);
        let per = MESSAGE_BYTES / (h + 4096);
        assert_eq!(plan.len(), 40usize.div_ceil(per));
        // A 64 KiB frame: its header and first bytes, then two parts.
        let plan = check_plan(&[(h, 64 << 10)], MESSAGE_BYTES);
        assert_eq!(plan.len(), 3);
        assert_eq!(plan.len(), messages_per_frame(64 << 10, 1));
        // 1 MiB: as many messages as `messages_per_frame` says (the
        // bridge's bound on what it queues).
        let plan = check_plan(&[(h, 1 << 20)], MESSAGE_BYTES);
        assert_eq!(plan.len(), messages_per_frame(1 << 20, 1));
        assert_eq!(plan.len(), 34);
        // Mixed, in order: a large frame ends the group before it.
        let plan = check_plan(&[(h, 100), (h, 200), (h, 70_000), (h, 100)], MESSAGE_BYTES);
        assert_eq!(plan[0], Outgoing::Frames(0..2));
        assert!(matches!(plan[1], Outgoing::First { frame: 2, .. }));
        assert_eq!(plan.last(), Some(&Outgoing::Frames(3..4)));
        // Frames of no bytes, and one exactly at the limit.
        check_plan(&[(h, 0), (h, 0)], MESSAGE_BYTES);
        let plan = check_plan(&[(h, MESSAGE_BYTES - h), (h, 1)], MESSAGE_BYTES);
        assert_eq!(plan, vec![Outgoing::Frames(0..1), Outgoing::Frames(1..2)]);
        assert_eq!(messages_per_frame((MESSAGE_BYTES - h) as u64, 1), 1);
        assert_eq!(messages_per_frame((MESSAGE_BYTES - h + 1) as u64, 1), 2);
    }

    #[test]
    fn random_frames_are_planned_whole_in_order_within_the_limit() {
        // Fixed seed, thousands of cases: sizes around the limit's edges.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for _ in 0..5_000 {
            let limit = 200 + next(5_000) as usize;
            let count = 1 + next(12) as usize;
            let sizes: Vec<(usize, usize)> = (0..count)
                .map(|_| {
                    let h = STREAM_FIXED_BYTES + 8 * next(4) as usize;
                    let b = match next(4) {
                        0 => next(50) as usize,
                        1 => limit - h + next(3) as usize - 1,
                        2 => next(limit as u64 * 5) as usize,
                        _ => next(limit as u64) as usize,
                    };
                    (h, b)
                })
                .collect();
            check_plan(&sizes, limit);
        }
    }

    #[test]
    fn a_window_halves_to_the_depth_and_doubles_back_to_its_most() {
        // 32 KiB frames, depth 4: at most 16 frames, at least 4.
        let mut w = Window::new(4, crossing_window(4, false, 32 << 10));
        assert_eq!((w.now, w.least, w.most), (16, 4, 16));
        w.shrink();
        assert_eq!(w.now, 8);
        w.shrink();
        w.shrink();
        assert_eq!(w.now, 4, "never below the depth");
        // Not straight after a shrink: after twice the most grants.
        w.grow();
        assert_eq!(w.now, 4);
        for _ in 0..31 {
            w.granted();
        }
        w.grow();
        assert_eq!(w.now, 4, "one grant to go");
        w.granted();
        w.grow();
        assert_eq!(w.now, 8);
        w.grow();
        w.grow();
        assert_eq!(w.now, 16, "never above its most");
        // Large frames: the depth is the most too.
        let mut w = Window::new(4, crossing_window(4, false, 1 << 20));
        w.grow();
        assert_eq!((w.now, w.least, w.most), (4, 4, 4));
        // Odd windows: a depth of 3 from 12.
        let mut w = Window::new(3, 12);
        w.shrink();
        w.shrink();
        assert_eq!(w.now, 3);
        for _ in 0..24 {
            w.granted();
        }
        w.grow();
        w.grow();
        assert_eq!(w.now, 12);
    }

    #[test]
    fn frames_said_sent_must_all_be_here() {
        assert!(check_sent(None, 0).is_ok(), "nothing sent, nothing here");
        assert!(check_sent(Some(1_440), 1_441).is_ok());
        let lost = check_sent(Some(1_436), 1_441).unwrap_err().to_string();
        assert!(
            lost.contains("frames 1437 to 1440 never arrived (lost on the link)"),
            "{lost}"
        );
        let first = check_sent(None, 2).unwrap_err().to_string();
        assert!(first.contains("frames 0 to 1 never arrived"), "{first}");
        let ahead = check_sent(Some(9), 5).unwrap_err().to_string();
        assert!(
            ahead.contains("5 frames said sent after frame 9 arrived"),
            "{ahead}"
        );
    }

    #[test]
    fn waiting_for_credit_ends_granted_stopped_or_silent() {
        let credit = Arc::new(Credit::new(4));
        let never = || false;
        let wait = |c: &Credit, sent, give_up: &dyn Fn() -> bool, ms| {
            c.wait_for(sent, give_up, Duration::from_millis(ms))
                .unwrap()
        };
        assert_eq!(wait(&credit, 3, &never, 0), Waited::Granted);
        let t = Instant::now();
        assert_eq!(wait(&credit, 4, &never, 150), Waited::Silent);
        assert!(t.elapsed() >= Duration::from_millis(150));
        assert_eq!(wait(&credit, 4, &|| true, 5_000), Waited::Stopped);
        // A grant from another thread ends the wait at once.
        let c2 = credit.clone();
        let granter = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            c2.update(6);
        });
        let t = Instant::now();
        assert_eq!(wait(&credit, 5, &never, 5_000), Waited::Granted);
        assert!(t.elapsed() < Duration::from_secs(5));
        granter.join().unwrap();
        // A smaller limit said later changes nothing.
        credit.update(2);
        assert_eq!(wait(&credit, 5, &never, 0), Waited::Granted);
        credit.refuse("an 8-byte credit".into());
        assert!(credit.wait_for(9, &never, Duration::ZERO).is_err());
    }

    #[test]
    fn a_drop_oldest_stream_keeps_its_depth() {
        assert_eq!(crossing_window(4, true, 64 << 10), 4);
        assert_eq!(crossing_window(1, true, 1), 1);
    }

    #[test]
    fn odd_plans_still_give_a_window_of_at_least_one() {
        // A depth of 0 is taken as 1; a frame of no bytes as one byte;
        // the largest depth a pipeline may ask for, and beyond, without
        // overflow.
        assert_eq!(crossing_window(0, false, 0), 4);
        assert_eq!(crossing_window(0, true, 0), 1);
        assert_eq!(crossing_window(4096, false, 1), 4 * 4096);
        assert_eq!(crossing_window(u32::MAX, false, 1), u64::from(u32::MAX));
        assert_eq!(
            crossing_window(u32::MAX, false, u64::MAX),
            u64::from(u32::MAX)
        );
    }
}
