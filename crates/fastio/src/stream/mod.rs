//! Streams: frames flowing from one producer to a fixed set of consumers
//! through a ring of slots in a context, zero-copy and without a lock.
//!
//! A stream is made once ([`Context::create_stream`], or
//! [`Context::declare_stream`] by a driver that starts the processes
//! later), with its depth (frames in flight), the element type and the
//! largest shape of a frame (so each slot is sized once), the number of
//! consumers and what a full ring does ([`Overflow`]). Then, in any
//! process of the context:
//!
//! * the **producer** ([`StreamProducer`]) takes the next slot
//!   ([`StreamProducer::next_slot`]), writes the frame into it and
//!   publishes it ([`SlotMut::publish`]); [`StreamProducer::end`] ends the
//!   stream;
//! * each **consumer** ([`StreamConsumer`], one per index) takes frames in
//!   order ([`StreamConsumer::next`], or iterates over
//!   [`StreamConsumer::frames`]); a [`Frame`] is a read-only view of the
//!   slot (`PROT_READ` pages) and gives the slot back when dropped.
//!
//! ```
//! use fastio::{Context, ContextOptions, StreamOptions};
//! use dtype::Primitive;
//! # use std::time::Duration;
//! let ctx = Context::new(&ContextOptions::new().anonymous(true)).unwrap();
//! let mut tx = ctx
//!     .create_stream("video", &StreamOptions::new(Primitive::UInt8, &[4, 4]).depth(2))
//!     .unwrap();
//! let mut rx = ctx.stream_consumer("video", 0).unwrap();
//! let mut slot = tx.next_slot(None).unwrap();
//! slot.bytes_mut().fill(7);
//! slot.publish().unwrap();
//! tx.end().unwrap();
//! let frame = rx.next(Some(Duration::from_secs(1))).unwrap().unwrap();
//! assert_eq!((frame.seq(), frame.shape(), frame.bytes()[15]), (0, &[4usize, 4][..], 7));
//! drop(frame);
//! assert!(rx.next(None).unwrap().is_none()); // the end, after the last frame
//! ```
//!
//! # What a stream guarantees
//!
//! * **Order and fan-out.** Every consumer sees every frame in order; under
//!   [`Overflow::DropOldest`] it may see a gap in [`Frame::seq`] (and
//!   [`StreamConsumer::dropped`] counts it), never a frame twice or out of
//!   order. A slot is written again only when every consumer is done with
//!   it (under `block`), or when no consumer holds it (under
//!   `drop-oldest`): a frame being read is never overwritten.
//! * **No torn frame.** A frame becomes visible only after its producer
//!   published it whole; a producer that dies while writing leaves the
//!   frame invisible.
//! * **Crashes.** A producer that dies makes every consumer's `next` fail
//!   with [`Error::StreamPoisoned`] naming the first frame that will not
//!   come — or, when the stream allows a restart
//!   ([`StreamOptions::producer_may_restart`]), wait for a new producer
//!   ([`Context::stream_producer`]), which continues at that frame. A
//!   consumer that dies stops holding the producer back (its place is
//!   detached), or, when [`StreamOptions::consumer_may_restart`], holds it
//!   back until a new consumer takes its place and resumes at the frame
//!   the dead one had not finished. No process waits forever: every wait
//!   has a timeout, and liveness is checked every
//!   [`shm_core::LIVENESS_TICK`].
//! * **Steady state.** Publishing, taking and releasing a frame take no
//!   lock and make no system call, except one `FUTEX_WAKE` when the other
//!   side sleeps; the slots are made once, so there is no allocation and
//!   no page fault per frame after the first round.
//!
//! The ring's protocol and its numbered invariants are in
//! [`shm_core::ring`]; this module adds the slots' bytes, waiting and
//! liveness.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dtype::{Primitive, Type};
use ndobject::{Array, MemoryBlock};
use shm_core::ring;
use shm_core::{LIVENESS_TICK, ShmEvent};

use crate::context::Context;
use crate::error::{Error, Result};
use crate::mapping::RingRegion;

use ring::{DETACHED, END_MASK, ENDED, POISONED, Poll, Ring, Space, c, h, s};
pub use ring::{MAX_FRAME_DIMS, Overflow};

/// Names of streams' allocations start with this; the table API
/// ([`Context::get`], [`Context::map`], `publish`) refuses them, so only
/// stream handles reach a ring.
pub const STREAM_PREFIX: &str = "fastio.stream/";

/// The error for a name in the streams' namespace, used by the table API.
pub(crate) fn refuse_reserved(name: &str) -> Result<()> {
    if name.starts_with(STREAM_PREFIX) {
        return Err(Error::InvalidName {
            name: name.to_owned(),
            reason: "names starting with \"fastio.stream/\" belong to streams",
        });
    }
    Ok(())
}

/// Slots start on this boundary (a page, so a frame's first touch costs
/// no neighbour's page).
const SLOT_ALIGN: u64 = 4096;

/// Flags word: a dead producer may be restarted.
const FLAG_PRODUCER_RESTART: u64 = 1;
/// Flags word: a dead consumer may be restarted.
const FLAG_CONSUMER_RESTART: u64 = 2;

/// How to make a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamOptions {
    depth: usize,
    element: Primitive,
    max_shape: Vec<usize>,
    consumers: usize,
    overflow: Overflow,
    producer_may_restart: bool,
    consumer_may_restart: bool,
}

impl StreamOptions {
    /// Frames of `element` values and at most `max_shape` (every frame's
    /// shape has this many dimensions, each at most the given size); depth
    /// 4, one consumer, [`Overflow::Block`].
    pub fn new(element: Primitive, max_shape: &[usize]) -> StreamOptions {
        StreamOptions {
            depth: 4,
            element,
            max_shape: max_shape.to_vec(),
            consumers: 1,
            overflow: Overflow::Block,
            producer_may_restart: false,
            consumer_may_restart: false,
        }
    }

    /// Frames in flight: slots in the ring (at least 1).
    pub fn depth(mut self, depth: usize) -> Self {
        self.depth = depth;
        self
    }

    /// Number of consumers (indexes `0..n`); every one sees every frame.
    pub fn consumers(mut self, n: usize) -> Self {
        self.consumers = n;
        self
    }

    /// What a full ring does.
    pub fn overflow(mut self, overflow: Overflow) -> Self {
        self.overflow = overflow;
        self
    }

    /// When the producer dies, consumers wait for a new one (that attaches
    /// with [`Context::stream_producer`]) instead of failing.
    pub fn producer_may_restart(mut self, yes: bool) -> Self {
        self.producer_may_restart = yes;
        self
    }

    /// When a consumer dies, the producer keeps its frames for a new one
    /// (back-pressure) instead of detaching it.
    pub fn consumer_may_restart(mut self, yes: bool) -> Self {
        self.consumer_may_restart = yes;
        self
    }

    /// Bytes of one slot: the largest frame, rounded up to
    /// a page (4096 bytes).
    pub fn slot_bytes(&self) -> Option<u64> {
        let elem = Type::primitive(self.element).data_size()? as u64;
        let n = self
            .max_shape
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d as u64))?;
        n.checked_mul(elem)?
            .max(1)
            .checked_next_multiple_of(SLOT_ALIGN)
    }

    /// Bytes the stream takes in its context: control words and slots.
    pub fn reserved_bytes(&self) -> Option<u64> {
        let control = ring::control_words(self.depth, self.consumers, self.overflow)? as u64 * 8;
        let slots = ring::slot_count(self.depth, self.consumers, self.overflow)? as u64;
        control
            .checked_next_multiple_of(SLOT_ALIGN)?
            .checked_add(self.slot_bytes()?.checked_mul(slots)?)
    }

    fn check(&self, stream: &str) -> Result<()> {
        let bad = |reason: String| Error::StreamConfig {
            stream: stream.to_owned(),
            reason,
        };
        if self.depth == 0 || self.depth > 1 << 20 {
            return Err(bad(format!("depth {} (1 to 2^20)", self.depth)));
        }
        if self.consumers > 64 {
            return Err(bad(format!("{} consumers (at most 64)", self.consumers)));
        }
        if self.max_shape.is_empty() || self.max_shape.len() > MAX_FRAME_DIMS {
            return Err(bad(format!(
                "{} dimensions (1 to {MAX_FRAME_DIMS})",
                self.max_shape.len()
            )));
        }
        if self.max_shape.contains(&0) {
            return Err(bad(format!(
                "largest shape {:?} has a 0 dimension",
                self.max_shape
            )));
        }
        if dtype::clara::element_of(self.element).is_none() {
            return Err(bad(format!("element type {:?}", self.element)));
        }
        if self.reserved_bytes().is_none() {
            return Err(bad("the stream's size overflows".into()));
        }
        Ok(())
    }
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// What producer and consumer handles share: the ring's memory and its
/// checked geometry.
struct StreamCore {
    name: String,
    ctx: Context,
    region: RingRegion,
    depth: u64,
    consumers: usize,
    overflow: Overflow,
    flags: u64,
    element: Primitive,
    elem_size: usize,
    max_shape: Vec<usize>,
    slot_size: usize,
    data_off: usize,
    control_words: usize,
}

impl std::fmt::Debug for StreamCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("name", &self.name)
            .field("depth", &self.depth)
            .field("consumers", &self.consumers)
            .field("overflow", &self.overflow)
            .field("max_shape", &self.max_shape)
            .finish()
    }
}

impl StreamCore {
    /// Opens the ring in `region`, checking every header value against the
    /// region (ring invariant 5).
    fn open(ctx: &Context, name: &str, region: RingRegion) -> Result<StreamCore> {
        let corrupt = |why: String| Error::corrupt(format!("stream {name}: {why}"));
        let header = region.words(ring::HEADER_WORDS)?;
        let need = ring::control_words(
            header[h::DEPTH].load(Ordering::Relaxed).min(1 << 20) as usize,
            header[h::CONSUMERS].load(Ordering::Relaxed).min(64) as usize,
            Overflow::from_code(header[h::OVERFLOW].load(Ordering::Relaxed))
                .ok_or_else(|| corrupt("unknown overflow code".into()))?,
        )
        .unwrap_or(usize::MAX);
        if need.saturating_mul(8) > region.len() {
            return Err(corrupt("the control words do not fit the region".into()));
        }
        let words = region.words(need)?;
        let (depth, consumers, overflow) = {
            let r: Ring<'_> = Ring::open(words).map_err(corrupt)?;
            (r.depth(), r.consumers(), r.overflow())
        };
        let control_words = ring::control_words(depth as usize, consumers, overflow)
            .ok_or_else(|| corrupt("control words overflow".into()))?;
        if control_words != need {
            return Err(corrupt("depth or consumers out of range".into()));
        }
        let get = |i: usize| words[i].load(Ordering::Relaxed);
        let element = i32::try_from(get(h::ELEMENT))
            .ok()
            .and_then(dtype::clara::from_code)
            .ok_or_else(|| corrupt("unknown element code".into()))?;
        let ndim = get(h::MAX_NDIM) as usize;
        let max_shape: Vec<usize> = (0..ndim)
            .map(|i| usize::try_from(get(h::MAX_SHAPE + i)))
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| corrupt("shape exceeds memory".into()))?;
        let opts = StreamOptions {
            depth: depth as usize,
            element,
            max_shape: max_shape.clone(),
            consumers,
            overflow,
            producer_may_restart: false,
            consumer_may_restart: false,
        };
        opts.check(name)
            .map_err(|e| corrupt(format!("header: {e}")))?;
        let slot_size = opts.slot_bytes().unwrap_or(u64::MAX);
        let total = opts.reserved_bytes().unwrap_or(u64::MAX);
        if get(h::SLOT_SIZE) != slot_size || total > region.len() as u64 {
            return Err(corrupt(format!(
                "slots of {} bytes, {total} bytes in all, for a region of {}",
                get(h::SLOT_SIZE),
                region.len()
            )));
        }
        let data_off = (control_words as u64 * 8).next_multiple_of(SLOT_ALIGN) as usize;
        Ok(StreamCore {
            name: name.to_owned(),
            ctx: ctx.clone(),
            depth,
            consumers,
            overflow,
            flags: get(h::FLAGS),
            element,
            elem_size: Type::primitive(element).data_size().unwrap_or(1),
            max_shape,
            slot_size: slot_size as usize,
            data_off,
            control_words,
            region,
        })
    }

    fn ring(&self) -> Ring<'_> {
        // The geometry was checked in `open`; `words` re-checks the bound.
        let words = self
            .region
            .words(self.control_words)
            .expect("checked in StreamCore::open");
        Ring::trusted(words, self.depth, self.consumers, self.overflow)
    }

    fn word(&self, i: usize) -> &std::sync::atomic::AtomicU64 {
        self.ring().header(i)
    }

    fn event(&self, word: usize) -> &ShmEvent {
        self.region
            .event(word * 8)
            .expect("event words lie in the checked header")
    }

    /// Where slot `slot` (`< slots`, checked by the ring) starts.
    fn slot_off(&self, slot: usize) -> usize {
        self.data_off + slot * self.slot_size
    }

    fn poisoned(&self, from_frame: u64, reason: impl Into<String>) -> Error {
        Error::StreamPoisoned {
            stream: self.name.clone(),
            from_frame,
            reason: reason.into(),
        }
    }

    /// The error for an end word that says the stream failed.
    fn end_error(&self, end: u64) -> Option<Error> {
        (end & POISONED != 0)
            .then(|| self.poisoned(end & END_MASK, "its producer failed or was stopped"))
    }

    /// Marks the stream failed from frame `k` (the first of the calls
    /// wins); wakes every waiter on both sides.
    fn poison(&self, k: u64) {
        let _ = self.word(h::END).compare_exchange(
            0,
            POISONED | (k & END_MASK),
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
        self.event(h::DATA_EVENT).notify();
        self.event(h::SPACE_EVENT).notify();
    }

    /// Waits on `event` (spinning first for the context's spin budget)
    /// until it moves past `seen`, for at most a liveness tick or until
    /// `deadline`. `false` when the deadline passed.
    fn wait(&self, event: &ShmEvent, seen: u32, deadline: Option<Instant>) -> bool {
        let tick = match deadline {
            None => LIVENESS_TICK,
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => left.min(LIVENESS_TICK),
                _ => return false,
            },
        };
        let spin = self.ctx.wait_spin().min(tick);
        if event.spin_while(seen, spin).is_none() {
            event.wait_while(seen, tick);
        }
        true
    }
}

fn deadline(timeout: Option<Duration>) -> Option<Instant> {
    timeout.and_then(|t| Instant::now().checked_add(t))
}

/// The allocation name of stream `name`.
fn alloc_name(name: &str) -> String {
    format!("{STREAM_PREFIX}{name}")
}

impl Context {
    /// Makes the stream `name` and returns its producer (this process).
    /// Consumers attach with [`Context::stream_consumer`]; until a
    /// consumer index is attached, the producer keeps its frames for it
    /// (under `block`), so a consumer that starts late still sees frame 0.
    pub fn create_stream(&self, name: &str, opts: &StreamOptions) -> Result<StreamProducer> {
        let token = u64::from(self.shared.token());
        let core = self.make_stream(name, opts, token)?;
        Ok(StreamProducer::new(core, 0))
    }

    /// Makes the stream `name` with no producer yet (a driver's side: the
    /// producer attaches later with [`Context::stream_producer`]). It
    /// lives while the name is published: [`Context::remove_stream`]
    /// ends it.
    pub fn declare_stream(&self, name: &str, opts: &StreamOptions) -> Result<()> {
        self.make_stream(name, opts, 0).map(drop)
    }

    fn make_stream(&self, name: &str, opts: &StreamOptions, producer: u64) -> Result<StreamCore> {
        opts.check(name)?;
        let bytes = opts.reserved_bytes().unwrap_or(u64::MAX);
        let alloc = self.create(bytes)?;
        let region = RingRegion::new(alloc)?;
        let control_words =
            ring::control_words(opts.depth, opts.consumers, opts.overflow).unwrap_or(usize::MAX);
        let words = region.words(control_words)?;
        // Checked by `opts.check` above: a Clara element type (code 1 to 11).
        let element = dtype::clara::code(opts.element) as u64;
        let flags = if opts.producer_may_restart {
            FLAG_PRODUCER_RESTART
        } else {
            0
        } | if opts.consumer_may_restart {
            FLAG_CONSUMER_RESTART
        } else {
            0
        };
        for w in &words[h::DATA_EVENT..=h::SPACE_EVENT] {
            w.store(0, Ordering::Relaxed);
        }
        let geometry = ring::Geometry {
            depth: opts.depth,
            slot_size: opts.slot_bytes().unwrap_or(0),
            consumers: opts.consumers,
            overflow: opts.overflow,
            flags,
            element,
            max_shape: &opts.max_shape,
        };
        Ring::init(words, &geometry, producer).map_err(Error::corrupt)?;
        region
            .allocation()
            .publish_in_table(&alloc_name(name), false)?;
        StreamCore::open(self, name, region)
    }

    fn open_stream(&self, name: &str) -> Result<StreamCore> {
        let alloc = match self.get_any(&alloc_name(name)) {
            Ok(a) => a,
            Err(Error::UnknownName(_)) => return Err(Error::UnknownName(name.to_owned())),
            Err(e) => return Err(e),
        };
        StreamCore::open(self, name, RingRegion::new(alloc)?)
    }

    /// Attaches as the producer of stream `name`: of a declared stream, or
    /// in place of a producer that died (it goes on at the first frame the
    /// dead one did not publish). [`Error::StreamBusy`] while a live
    /// process is the producer.
    pub fn stream_producer(&self, name: &str) -> Result<StreamProducer> {
        let core = self.open_stream(name)?;
        let me = u64::from(self.shared.token());
        let word = core.word(h::PRODUCER);
        let old = word.load(Ordering::SeqCst);
        let free = old == 0 || !self.shared.token_alive(old as u32);
        if !free
            || word
                .compare_exchange(old, me, Ordering::SeqCst, Ordering::SeqCst)
                .is_err()
        {
            return Err(Error::StreamBusy {
                stream: name.to_owned(),
                role: "producer".into(),
            });
        }
        if let Some(e) = core.end_error(core.word(h::END).load(Ordering::SeqCst)) {
            word.store(old, Ordering::SeqCst);
            return Err(e);
        }
        let head = core.ring().head();
        Ok(StreamProducer::new(core, head))
    }

    /// Attaches as consumer `index` of stream `name`. A fresh index reads
    /// from frame 0; the index of a consumer that died and was kept for a
    /// restart resumes at the frame it had not finished; one that was
    /// detached resumes at the next frame published (the frames between
    /// count as dropped).
    pub fn stream_consumer(&self, name: &str, index: usize) -> Result<StreamConsumer> {
        let core = self.open_stream(name)?;
        if index >= core.consumers {
            return Err(Error::StreamConfig {
                stream: name.to_owned(),
                reason: format!("consumer {index} of {}", core.consumers),
            });
        }
        let me = u64::from(self.shared.token());
        let ring = core.ring();
        let owner = ring.cw(index, c::OWNER);
        let old = owner.load(Ordering::SeqCst);
        let token = (old & 0xffff_ffff) as u32;
        if old != 0 && old & DETACHED == 0 && self.shared.token_alive(token) {
            return Err(Error::StreamBusy {
                stream: name.to_owned(),
                role: format!("consumer {index}"),
            });
        }
        if owner
            .compare_exchange(old, me, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return Err(Error::StreamBusy {
                stream: name.to_owned(),
                role: format!("consumer {index}"),
            });
        }
        ring.cw(index, c::HOLDING).store(0, Ordering::SeqCst);
        if old & DETACHED != 0 {
            // Frames published while detached were not kept for it.
            let next = ring.cw(index, c::NEXT).load(Ordering::SeqCst);
            let head = ring.head();
            if head > next {
                ring.cw(index, c::DROPPED)
                    .fetch_add(head - next, Ordering::Relaxed);
                ring.cw(index, c::NEXT).store(head, Ordering::SeqCst);
            }
        }
        let next = ring.cw(index, c::NEXT).load(Ordering::SeqCst);
        Ok(StreamConsumer {
            shared: Arc::new(ConsumerShared {
                core,
                index,
                token: me,
                held: Mutex::new(BTreeSet::new()),
                read: AtomicU64::new(next),
            }),
        })
    }

    /// Marks stream `name` failed from its next frame (a driver stopping a
    /// pipeline): every consumer's and the producer's waits end with
    /// [`Error::StreamPoisoned`].
    pub fn poison_stream(&self, name: &str) -> Result<()> {
        let core = self.open_stream(name)?;
        let head = core.ring().head();
        core.poison(head);
        Ok(())
    }

    /// Unpublishes stream `name`; its memory goes when the last handle
    /// does.
    pub fn remove_stream(&self, name: &str) -> Result<()> {
        self.get_any(&alloc_name(name))?.free()
    }

    /// What stream `name` looks like now, read without taking part in it.
    pub fn stream_status(&self, name: &str) -> Result<StreamStatus> {
        let core = self.open_stream(name)?;
        let ring = core.ring();
        let end = core.word(h::END).load(Ordering::SeqCst);
        let consumers = (0..core.consumers)
            .map(|i| {
                let owner = ring.cw(i, c::OWNER).load(Ordering::SeqCst);
                ConsumerStatus {
                    attached: owner != 0 && owner & DETACHED == 0,
                    alive: owner != 0
                        && owner & DETACHED == 0
                        && self.shared.token_alive(owner as u32),
                    next: ring.cw(i, c::NEXT).load(Ordering::SeqCst),
                    dropped: ring.cw(i, c::DROPPED).load(Ordering::SeqCst),
                }
            })
            .collect();
        let producer = core.word(h::PRODUCER).load(Ordering::SeqCst);
        Ok(StreamStatus {
            depth: core.depth as usize,
            slots: ring.slots(),
            slot_bytes: core.slot_size,
            head: ring.head(),
            ended: (end & ENDED != 0).then_some(end & END_MASK),
            poisoned_from: (end & POISONED != 0).then_some(end & END_MASK),
            producer_alive: producer != 0 && self.shared.token_alive(producer as u32),
            consumers,
        })
    }
}

/// A snapshot of a stream ([`Context::stream_status`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StreamStatus {
    /// Frames in flight.
    pub depth: usize,
    /// Slots in the ring (the depth under `block`; depth + consumers + 1
    /// under `drop-oldest`, so that held frames never stop the producer).
    pub slots: usize,
    /// Bytes of one slot.
    pub slot_bytes: usize,
    /// Frames published.
    pub head: u64,
    /// The frame count, once the producer ended the stream.
    pub ended: Option<u64>,
    /// The first frame that will not come, once the stream failed.
    pub poisoned_from: Option<u64>,
    /// Whether a live process is the producer.
    pub producer_alive: bool,
    /// Each consumer index.
    pub consumers: Vec<ConsumerStatus>,
}

/// One consumer of a [`StreamStatus`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumerStatus {
    /// A process took this index and did not leave.
    pub attached: bool,
    /// That process is alive.
    pub alive: bool,
    /// The next frame it reads.
    pub next: u64,
    /// Frames it lost to `drop-oldest`.
    pub dropped: u64,
}

/// The producer of a stream: one process at a time.
#[derive(Debug)]
pub struct StreamProducer {
    core: StreamCore,
    next: u64,
    /// The slot of the last frame (`drop-oldest` looks for a free one
    /// after it).
    last: usize,
    /// The slot taken and not yet published.
    begun: Option<Begun>,
    ended: bool,
}

/// A slot a producer took.
#[derive(Debug)]
struct Begun {
    slot: usize,
    off: usize,
    shape: Vec<usize>,
    source: Option<(u64, u64)>,
}

impl StreamProducer {
    fn new(core: StreamCore, next: u64) -> StreamProducer {
        StreamProducer {
            core,
            next,
            last: 0,
            begun: None,
            ended: false,
        }
    }

    /// The stream's name.
    pub fn name(&self) -> &str {
        &self.core.name
    }

    /// The number the next frame gets.
    pub fn next_seq(&self) -> u64 {
        self.next
    }

    /// The source frame of the last frame published (by this producer or
    /// one before it), if any: a producer that takes a dead one's place
    /// skips what was already delivered.
    pub fn last_source_seq(&self) -> Option<u64> {
        let last = self.next.checked_sub(1)?;
        let ring = self.core.ring();
        // The slot whose record holds that frame (any overflow mode).
        (0..ring.slots()).find_map(|k| {
            (ring.sw(k, s::SEQ).load(Ordering::Acquire) == last)
                .then(|| ring.sw(k, s::SOURCE_SEQ).load(Ordering::Relaxed))
        })
    }

    /// The element type of every frame.
    pub fn element(&self) -> Primitive {
        self.core.element
    }

    /// The largest shape of a frame.
    pub fn max_shape(&self) -> &[usize] {
        &self.core.max_shape
    }

    /// Waits (at most `timeout`; `None`: as long as it takes) until the
    /// next slot is free and returns it to be written. Under `block` that
    /// is when every consumer released the frame the slot held; a consumer
    /// that died is detached (or, with
    /// [`StreamOptions::consumer_may_restart`], waited for).
    pub fn next_slot(&mut self, timeout: Option<Duration>) -> Result<SlotMut<'_>> {
        self.begin(timeout)?;
        Ok(SlotMut { producer: self })
    }

    /// Takes the next slot (as [`next_slot`](StreamProducer::next_slot)),
    /// kept in the producer until [`publish`](StreamProducer::publish); a
    /// slot taken and not published is taken again by the next call.
    pub fn begin(&mut self, timeout: Option<Duration>) -> Result<()> {
        if self.ended {
            return Err(Error::StreamConfig {
                stream: self.core.name.clone(),
                reason: "the stream was ended".into(),
            });
        }
        if self.begun.is_some() {
            return Ok(());
        }
        let deadline = deadline(timeout);
        let core = &self.core;
        let space = core.event(h::SPACE_EVENT);
        // Liveness probes read /proc: only once a wait has lasted a tick.
        let started = Instant::now();
        let slot = loop {
            if let Some(e) = core.end_error(core.word(h::END).load(Ordering::SeqCst)) {
                return Err(e);
            }
            let seen = space.current();
            let ring = core.ring();
            match ring.try_begin(self.next, self.last) {
                Space::Ready(slot) => break slot,
                Space::Wait(i) => {
                    let owner = ring.cw(i, c::OWNER);
                    let o = owner.load(Ordering::SeqCst);
                    if o != 0
                        && o & DETACHED == 0
                        && core.flags & FLAG_CONSUMER_RESTART == 0
                        && started.elapsed() >= LIVENESS_TICK
                        && !core.ctx.shared.token_alive(o as u32)
                    {
                        // A dead consumer stops holding the ring.
                        let _ = owner.compare_exchange(
                            o,
                            o | DETACHED,
                            Ordering::SeqCst,
                            Ordering::SeqCst,
                        );
                        continue;
                    }
                    if !core.wait(space, seen, deadline) {
                        return Err(Error::StreamTimeout {
                            stream: core.name.clone(),
                            what: "waiting for a free slot",
                        });
                    }
                }
            }
        };
        self.begun = Some(Begun {
            slot,
            off: self.core.slot_off(slot),
            shape: self.core.max_shape.clone(),
            source: None,
        });
        Ok(())
    }

    fn begun(&mut self) -> Result<&mut Begun> {
        let name = &self.core.name;
        self.begun.as_mut().ok_or_else(|| Error::StreamConfig {
            stream: name.clone(),
            reason: "no slot taken: call begin first".into(),
        })
    }

    /// Sets the taken frame's shape: as many dimensions as the stream's
    /// largest shape, each at most its size.
    pub fn set_shape(&mut self, shape: &[usize]) -> Result<()> {
        let max = &self.core.max_shape;
        if shape.len() != max.len() || shape.iter().zip(max).any(|(d, m)| d > m) {
            return Err(Error::StreamConfig {
                stream: self.core.name.clone(),
                reason: format!("frame shape {shape:?} exceeds the largest shape {max:?}"),
            });
        }
        self.begun()?.shape = shape.to_vec();
        Ok(())
    }

    /// The taken frame's shape.
    pub fn shape(&self) -> Option<&[usize]> {
        self.begun.as_ref().map(|b| &b.shape[..])
    }

    /// Says which source frame the taken one derives from and when that
    /// was taken (ns since the Unix epoch). By default a frame is its own
    /// source, stamped when published.
    pub fn set_source(&mut self, seq: u64, timestamp_ns: u64) -> Result<()> {
        self.begun()?.source = Some((seq, timestamp_ns));
        Ok(())
    }

    /// The taken frame's bytes (for its current shape), to write.
    pub fn bytes_mut(&mut self) -> Result<&mut [u8]> {
        let elem = self.core.elem_size;
        let b = self.begun.as_ref().ok_or_else(|| Error::StreamConfig {
            stream: self.core.name.clone(),
            reason: "no slot taken: call begin first".into(),
        })?;
        let len = b.shape.iter().product::<usize>() * elem;
        // SAFETY: ring invariants 2 to 4: `begin` gave this producer the
        // slot, no consumer holds a frame in it until it is published, and
        // the `&mut self` borrow excludes every other use of it here (one
        // producer per stream: `Context::stream_producer`). The range lies
        // inside the slot (the shape is at most the largest).
        unsafe { self.core.region.bytes_mut(b.off, len) }
    }

    /// Publishes the taken frame: consumers see it whole from now on.
    pub fn publish(&mut self) -> Result<()> {
        let b = self.begun.take().ok_or_else(|| Error::StreamConfig {
            stream: self.core.name.clone(),
            reason: "no slot taken: call begin first".into(),
        })?;
        let core = &self.core;
        let ring = core.ring();
        let seq = self.next;
        let len = (b.shape.iter().product::<usize>() * core.elem_size) as u64;
        let (source_seq, ts) = b.source.unwrap_or((seq, now_ns()));
        let k = b.slot;
        ring.sw(k, s::LEN).store(len, Ordering::Relaxed);
        ring.sw(k, s::SOURCE_SEQ)
            .store(source_seq, Ordering::Relaxed);
        ring.sw(k, s::TIMESTAMP).store(ts, Ordering::Relaxed);
        ring.sw(k, s::NDIM)
            .store(b.shape.len() as u64, Ordering::Relaxed);
        for (i, &d) in b.shape.iter().enumerate() {
            ring.sw(k, s::DIMS + i).store(d as u64, Ordering::Relaxed);
        }
        ring.publish(seq, k);
        core.event(h::DATA_EVENT).notify();
        self.next = seq.wrapping_add(1);
        self.last = k;
        Ok(())
    }

    /// Ends the stream after the frames published so far: every consumer
    /// sees the end after the last of them.
    pub fn end(&mut self) -> Result<()> {
        if !self.ended {
            self.ended = true;
            let _ = self.core.word(h::END).compare_exchange(
                0,
                ENDED | (self.next & END_MASK),
                Ordering::SeqCst,
                Ordering::SeqCst,
            );
            self.core.event(h::DATA_EVENT).notify();
        }
        Ok(())
    }

    /// Marks the stream failed from the next frame (a producer that cannot
    /// go on): consumers get [`Error::StreamPoisoned`].
    pub fn poison(&mut self) {
        self.ended = true;
        self.core.poison(self.next);
    }
}

impl Drop for StreamProducer {
    /// A producer dropped without [`end`](StreamProducer::end) ends the
    /// stream (as closing a channel does).
    fn drop(&mut self) {
        let _ = self.end();
    }
}

/// A slot being written: the next frame. [`publish`](SlotMut::publish)
/// makes it visible; dropping it unpublished leaves it to be written
/// again by the next [`StreamProducer::next_slot`].
#[derive(Debug)]
pub struct SlotMut<'a> {
    producer: &'a mut StreamProducer,
}

impl SlotMut<'_> {
    /// The frame's number.
    pub fn seq(&self) -> u64 {
        self.producer.next
    }

    /// The frame's shape (the largest until [`set_shape`](SlotMut::set_shape)).
    pub fn shape(&self) -> &[usize] {
        self.producer.shape().unwrap_or(&[])
    }

    /// Sets the frame's shape: as many dimensions as the stream's largest
    /// shape, each at most its size.
    pub fn set_shape(&mut self, shape: &[usize]) -> Result<()> {
        self.producer.set_shape(shape)
    }

    /// Says which source frame this one derives from and when that was
    /// taken (nanoseconds since the Unix epoch). By default a frame is its
    /// own source, stamped when published.
    pub fn set_source(&mut self, seq: u64, timestamp_ns: u64) {
        let _ = self.producer.set_source(seq, timestamp_ns);
    }

    /// The frame's bytes (for its current shape), to write.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        self.producer
            .bytes_mut()
            .expect("a SlotMut exists only while its slot is taken, inside its stream")
    }

    /// Publishes the frame: consumers see it whole from now on.
    pub fn publish(self) -> Result<()> {
        self.producer.publish()
    }
}

/// What a consumer and the frames it took share.
#[derive(Debug)]
struct ConsumerShared {
    core: StreamCore,
    index: usize,
    /// This process's token, as in the record's owner word.
    token: u64,
    /// The frames of this consumer that are alive (several under `block`:
    /// released out of order, the shared cursor stays at the oldest).
    held: Mutex<BTreeSet<u64>>,
    /// The next frame `next` takes.
    read: AtomicU64,
}

impl ConsumerShared {
    fn held(&self) -> MutexGuard<'_, BTreeSet<u64>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for ConsumerShared {
    /// When the consumer and every frame (and array) it gave out are gone,
    /// its index is detached: the producer stops keeping frames for it.
    /// Not before: a live frame's slot must not be written.
    fn drop(&mut self) {
        let owner = self.core.ring().cw(self.index, c::OWNER);
        let _ = owner.compare_exchange(
            self.token,
            self.token | DETACHED,
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
        self.core.event(h::SPACE_EVENT).notify();
    }
}

/// A consumer of a stream: it sees every frame in order.
#[derive(Debug)]
pub struct StreamConsumer {
    shared: Arc<ConsumerShared>,
}

impl StreamConsumer {
    /// The stream's name.
    pub fn name(&self) -> &str {
        &self.shared.core.name
    }

    /// This consumer's index.
    pub fn index(&self) -> usize {
        self.shared.index
    }

    /// The number of the next frame it reads.
    pub fn next_seq(&self) -> u64 {
        self.shared.read.load(Ordering::Acquire)
    }

    /// Frames it lost to `drop-oldest` so far.
    pub fn dropped(&self) -> u64 {
        self.shared
            .core
            .ring()
            .cw(self.shared.index, c::DROPPED)
            .load(Ordering::Relaxed)
    }

    /// The next frame, waiting at most `timeout` (`None`: as long as it
    /// takes). `Ok(None)` once the producer ended the stream and every
    /// frame was read. [`Error::StreamPoisoned`] when the producer died
    /// (and may not restart) or the stream was stopped;
    /// [`Error::FrameHeld`] when the next frame could never come while this
    /// consumer keeps the frames it holds: under `drop-oldest` it may hold
    /// one, under `block` any frames within `depth` of the oldest it holds
    /// (frames may be dropped in any order; the slot of each goes back once
    /// every older one did).
    pub fn next(&mut self, timeout: Option<Duration>) -> Result<Option<Frame>> {
        let sh = &self.shared;
        let core = &sh.core;
        {
            let held = sh.held();
            // Under `drop-oldest` a consumer holds one frame (its holding
            // word); under `block` fewer than `depth` (the producer stops
            // at `depth` past the oldest: one more would wait forever).
            let most = match core.overflow {
                Overflow::DropOldest => 1,
                Overflow::Block => core.depth as usize,
            };
            // The producer writes frame `n` only once every frame up to
            // `n - depth` is released: past that, the wait would never end.
            let read = sh.read.load(Ordering::Acquire);
            let pinned = held
                .first()
                .is_some_and(|&oldest| read >= oldest.saturating_add(core.depth));
            if held.len() >= most || pinned {
                return Err(Error::FrameHeld(core.name.clone()));
            }
        }
        let deadline = deadline(timeout);
        let data = core.event(h::DATA_EVENT);
        // Liveness probes read /proc: only once a wait has lasted a tick.
        let started = Instant::now();
        loop {
            let seen = data.current();
            let ring = core.ring();
            let next = sh.read.load(Ordering::Acquire);
            match ring
                .poll(sh.index, next)
                .map_err(|e| Error::corrupt(format!("stream {}: {e}", core.name)))?
            {
                Poll::Frame(seq, slot) => {
                    let mut held = sh.held();
                    let frame = match Frame::read(sh, seq, slot) {
                        Ok(f) => f,
                        Err(e) => {
                            ring.release_to(
                                sh.index,
                                held.first().copied().unwrap_or(seq.saturating_add(1)),
                            );
                            sh.read.store(seq.saturating_add(1), Ordering::Release);
                            return Err(e);
                        }
                    };
                    held.insert(seq);
                    sh.read.store(seq.saturating_add(1), Ordering::Release);
                    return Ok(Some(frame));
                }
                Poll::Skipped(to) => {
                    sh.read.store(to, Ordering::Release);
                    // The producer may wait on the holding we gave up.
                    core.event(h::SPACE_EVENT).notify();
                    continue;
                }
                Poll::Empty => {}
            }
            let end = core.word(h::END).load(Ordering::SeqCst);
            if end & ENDED != 0 && next >= end & END_MASK {
                return Ok(None);
            }
            if let Some(e) = core.end_error(end) {
                return Err(e);
            }
            let producer = core.word(h::PRODUCER).load(Ordering::SeqCst);
            if producer != 0
                && started.elapsed() >= LIVENESS_TICK
                && !core.ctx.shared.token_alive(producer as u32)
            {
                // Published before it died? Look once more, then decide.
                if ring.head() > next {
                    continue;
                }
                if core.flags & FLAG_PRODUCER_RESTART == 0 {
                    core.poison(next);
                    return Err(core.poisoned(next, "its producer died"));
                }
            }
            if !core.wait(data, seen, deadline) {
                return Err(Error::StreamTimeout {
                    stream: core.name.clone(),
                    what: "waiting for a frame",
                });
            }
        }
    }

    /// The frames until the end of the stream, each waited for as long as
    /// it takes: `for frame in consumer.frames() { let frame = frame?; … }`.
    /// Frames kept past their iteration count against the limit of
    /// [`next`](StreamConsumer::next).
    pub fn frames(&mut self) -> Frames<'_> {
        Frames {
            consumer: self,
            timeout: None,
            done: false,
        }
    }
}

/// The frames of a consumer ([`StreamConsumer::frames`]).
#[derive(Debug)]
pub struct Frames<'a> {
    consumer: &'a mut StreamConsumer,
    timeout: Option<Duration>,
    done: bool,
}

impl Frames<'_> {
    /// Each wait for a frame ends with [`Error::StreamTimeout`] after
    /// `timeout`.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

impl Iterator for Frames<'_> {
    type Item = Result<Frame>;

    fn next(&mut self) -> Option<Result<Frame>> {
        if self.done {
            return None;
        }
        match self.consumer.next(self.timeout) {
            Ok(Some(f)) => Some(Ok(f)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                if !matches!(e, Error::FrameHeld(_) | Error::StreamTimeout { .. }) {
                    self.done = true;
                }
                Some(Err(e))
            }
        }
    }
}

/// A frame taken by a consumer: read-only bytes in the slot (`PROT_READ`
/// pages) with its number, source and shape. The slot is given back when
/// the frame (and every array made from it) is dropped.
#[derive(Debug)]
pub struct Frame {
    shared: Arc<ConsumerShared>,
    seq: u64,
    source_seq: u64,
    timestamp_ns: u64,
    shape: Vec<usize>,
    off: usize,
    len: usize,
}

impl Frame {
    /// Reads frame `seq`'s metadata, checking it against the stream (ring
    /// invariant 5).
    fn read(sh: &Arc<ConsumerShared>, seq: u64, slot: usize) -> Result<Frame> {
        let core = &sh.core;
        let ring = core.ring();
        let get = |k: usize| ring.sw(slot, k).load(Ordering::Relaxed);
        let ndim = get(s::NDIM) as usize;
        let len = get(s::LEN);
        let bad = |why: String| Error::corrupt(format!("stream {} frame {seq}: {why}", core.name));
        if get(s::SEQ) != seq {
            return Err(bad(format!("its slot {slot} holds {:#x}", get(s::SEQ))));
        }
        if ndim != core.max_shape.len() {
            return Err(bad(format!("{ndim} dimensions")));
        }
        let shape: Vec<usize> = (0..ndim).map(|i| get(s::DIMS + i) as usize).collect();
        if shape.iter().zip(&core.max_shape).any(|(d, m)| d > m) {
            return Err(bad(format!("shape {shape:?} over {:?}", core.max_shape)));
        }
        let want = shape.iter().product::<usize>() * core.elem_size;
        if len != want as u64 {
            return Err(bad(format!("{len} bytes for shape {shape:?}")));
        }
        Ok(Frame {
            shared: sh.clone(),
            seq,
            source_seq: get(s::SOURCE_SEQ),
            timestamp_ns: get(s::TIMESTAMP),
            shape,
            off: core.slot_off(slot),
            len: want,
        })
    }

    /// The frame's number in its stream.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The number of the source frame it derives from.
    pub fn source_seq(&self) -> u64 {
        self.source_seq
    }

    /// When the source frame was taken (ns since the Unix epoch).
    pub fn timestamp_ns(&self) -> u64 {
        self.timestamp_ns
    }

    /// The frame's shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The element type.
    pub fn element(&self) -> Primitive {
        self.shared.core.element
    }

    /// The frame's bytes, read-only.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: ring invariants 3 and 4: the consumer holds this frame
        // (it is released only when `self` drops), so the producer does not
        // write the slot while the slice lives; the range was checked
        // against the slot when the frame was read.
        unsafe { self.shared.core.region.bytes(self.off, self.len) }
            .expect("a frame lies inside its stream (checked when read)")
    }

    /// A read-only `ndobject` array over the frame that keeps the frame
    /// (and so its slot) until the array and its views are gone.
    pub fn into_array(self) -> Result<Array> {
        let element = Type::primitive(self.shared.core.element);
        let shape = self.shape.clone();
        let block = MemoryBlock::from_owner(self);
        Ok(Array::from_block(&block, 0, element, &shape)?)
    }
}

impl Frame {
    /// A read-only `ndobject` array over a shared frame: it keeps the frame
    /// (and so its slot) until the array and its views are gone.
    pub fn shared_array(frame: &Arc<Frame>) -> Result<Array> {
        let element = Type::primitive(frame.shared.core.element);
        let shape = frame.shape.clone();
        let block = MemoryBlock::from_owner(SharedFrame(frame.clone()));
        Ok(Array::from_block(&block, 0, element, &shape)?)
    }
}

/// A shared frame as the owner of an array's memory.
struct SharedFrame(Arc<Frame>);

impl AsRef<[u8]> for SharedFrame {
    fn as_ref(&self) -> &[u8] {
        self.0.bytes()
    }
}

impl AsRef<[u8]> for Frame {
    fn as_ref(&self) -> &[u8] {
        self.bytes()
    }
}

impl std::ops::Deref for Frame {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.bytes()
    }
}

impl Drop for Frame {
    /// Releases the frame: the shared cursor moves to the oldest frame this
    /// consumer still holds, or to the next it will take.
    fn drop(&mut self) {
        let sh = &self.shared;
        let mut held = sh.held();
        held.remove(&self.seq);
        let upto = held
            .first()
            .copied()
            .unwrap_or_else(|| sh.read.load(Ordering::Acquire));
        sh.core.ring().release_to(sh.index, upto);
        drop(held);
        sh.core.event(h::SPACE_EVENT).notify();
    }
}
