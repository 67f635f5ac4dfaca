//! A single-producer, multi-consumer ring of frames in shared memory: the
//! control words and every step a producer or consumer takes on them,
//! without waiting and without a lock. Waiting (spin, then futex),
//! liveness and the frames' bytes belong to the user of this module
//! (`fastio`'s streams); this part is what `loom` checks
//! (`ring_loom.rs`), on `loom`'s atomics.
//!
//! # Layout (64-bit words)
//!
//! | words | what |
//! |---|---|
//! | `0..32` | header: magic, depth, slot size, consumer count, overflow, flags, element, maximum shape, `head`, producer token, end word, events |
//! | `32..32+8C` | one record of 8 words per consumer: owner, next, holding, dropped |
//! | then `D` | positions: which slot holds each of the last `D` frames |
//! | then `16S` | one record of 16 words per slot: sequence, length, source sequence, timestamp, ndim, dimensions |
//!
//! Under `block` there are `S = D` slots and frame `s` goes into the slot
//! freed most recently (invariant 8).
//! Under `drop-oldest` there are `S = D + C + 1` slots: the last `D`
//! frames sit in the positions, each consumer may hold one more, and one
//! is always free, so the producer never waits.
//!
//! # Invariants (numbered; the code cites them)
//!
//! 1. A frame is readable when `head` is past it and its position names
//!    its slot; the producer stores the slot's metadata, then its sequence
//!    word and the position (release), then `head`, so a consumer that sees
//!    any of them sees a whole frame.
//! 2. Under `block`, while the producer writes frame `n` the slot's
//!    sequence word is `WRITING | n`: never equal to a frame number, so a
//!    frame being written is never taken for a complete one, even after a
//!    crash.
//! 3. A consumer's `next` only grows; every frame below it is released by
//!    that consumer. Under `block` the producer starts frame `n` only when
//!    every consumer that is not detached has `next + depth > n`: frame
//!    `n - depth`, the slot's previous content, was released by all.
//! 4. Under `drop-oldest` the producer writes only a slot that no position
//!    names and no consumer holds. A consumer announces the position entry
//!    it takes in `holding` *before* it checks that the position still
//!    names it, and the producer replaces a position *before* it later
//!    reads the holdings to choose a slot, with a sequentially consistent
//!    fence between the store and the load on both sides (Dekker): either the consumer sees the replacement and gives the
//!    frame up as dropped, or the producer sees the holding and leaves the
//!    slot alone. A held frame is never overwritten, and the producer never
//!    waits.
//! 5. Every value read from shared memory is checked before use (and
//!    frame numbers, which another process may have scribbled, only ever
//!    meet wrapping or saturating arithmetic here): the
//!    header against the region's length when a handle is made, slot
//!    indexes, lengths and shapes against the header when a frame is read.
//! 6. An *observer* (a recorder that is no consumer) reads a frame without
//!    holding it, as a sequence lock: it finds the frame's slot
//!    ([`Ring::observe`]), copies the slot, then, after an acquire fence,
//!    checks that the slot still holds that frame ([`Ring::still`]). Under
//!    `block` the producer marks a slot `WRITING` and then (after a release
//!    fence) writes it; under `drop-oldest` it replaces the position that
//!    names a slot, then (after the fence of invariant 4) chooses and writes
//!    it. So an observer whose copy saw any byte of a newer frame sees the
//!    slot's mark or the replaced position, and drops the copy. The only
//!    word it writes is the count of observers, when it comes and goes:
//!    the producer never waits for it.
//! 7. Only the Dekker pairs need sequential consistency: a consumer's
//!    holding against the producer's replaced position under
//!    `drop-oldest` (invariant 4, with its fences) and the events' words
//!    (`ShmEvent`). Everything else is one release store read by one
//!    acquire load: `head` (invariant 1), a consumer's `next` and holding
//!    on release (invariant 3), the slot's `WRITING` mark (invariant 6,
//!    through the release fence after it). A frame on the spinning path
//!    so costs the producer one read-modify-write (its data event's bump)
//!    and the consumer one (its space event's bump); on x86-64 every other
//!    step is a plain load or store.
//! 8. Under `block` a slot is free when the frame it holds is below every
//!    attached consumer's `next` (invariant 3), and frame `n` goes into
//!    the free slot whose frame was published last: the producer keeps
//!    that order in its own memory ([`ProducerSlots`], rebuilt from the
//!    sequence words when a producer takes a dead one's place). Position
//!    `n % D` names the slot; it is rewritten only for frame `n + D`,
//!    which waits until every consumer passed `n`, so a consumer finds
//!    its next frame there while it is due. Of the `D` frames before `n`
//!    fewer than `D` are unreleased, so a free slot always exists; a
//!    stream whose consumers keep up cycles through two slots (their
//!    pages and page-table entries stay warm) however deep the ring is.
//!    While an observer is attached (`OBSERVERS`, invariant 6) the
//!    producer takes the slot freed *first* instead: every frame then
//!    stays in its slot as long as the ring allows, for the observer to
//!    copy (the order of a ring that writes slot `n % D`). An observer
//!    killed while attached leaves that order on: it costs warmth, never
//!    a frame.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

/// A 64-bit atomic word: `std`'s in shared memory, `loom`'s in the model
/// checks (`ring_loom.rs`).
pub trait Word {
    /// `load`.
    fn load(&self, order: Ordering) -> u64;
    /// `store`.
    fn store(&self, v: u64, order: Ordering);
    /// `fetch_add`.
    fn fetch_add(&self, v: u64, order: Ordering) -> u64;
    /// `compare_exchange` (relaxed on failure).
    fn compare_exchange(&self, old: u64, new: u64, order: Ordering) -> Result<u64, u64>;
    /// A sequentially consistent fence (`std::sync::atomic::fence`, or
    /// `loom`'s, which models store-load ordering only through fences).
    fn fence();
    /// A release fence (invariant 6: a slot's mark before its bytes).
    fn release_fence();
    /// An acquire fence (invariant 6: an observer's copy before its check).
    fn acquire_fence();
}

impl Word for AtomicU64 {
    fn load(&self, order: Ordering) -> u64 {
        AtomicU64::load(self, order)
    }
    fn store(&self, v: u64, order: Ordering) {
        AtomicU64::store(self, v, order)
    }
    fn fetch_add(&self, v: u64, order: Ordering) -> u64 {
        AtomicU64::fetch_add(self, v, order)
    }
    fn compare_exchange(&self, old: u64, new: u64, order: Ordering) -> Result<u64, u64> {
        AtomicU64::compare_exchange(self, old, new, order, Ordering::Relaxed)
    }
    fn fence() {
        std::sync::atomic::fence(Ordering::SeqCst)
    }
    fn release_fence() {
        std::sync::atomic::fence(Ordering::Release)
    }
    fn acquire_fence() {
        std::sync::atomic::fence(Ordering::Acquire)
    }
}

#[cfg(loom)]
impl Word for loom::sync::atomic::AtomicU64 {
    fn load(&self, order: Ordering) -> u64 {
        loom::sync::atomic::AtomicU64::load(self, order)
    }
    fn store(&self, v: u64, order: Ordering) {
        loom::sync::atomic::AtomicU64::store(self, v, order)
    }
    fn fetch_add(&self, v: u64, order: Ordering) -> u64 {
        loom::sync::atomic::AtomicU64::fetch_add(self, v, order)
    }
    fn compare_exchange(&self, old: u64, new: u64, order: Ordering) -> Result<u64, u64> {
        loom::sync::atomic::AtomicU64::compare_exchange(self, old, new, order, Ordering::Relaxed)
    }
    fn fence() {
        loom::sync::atomic::fence(Ordering::SeqCst)
    }
    fn release_fence() {
        loom::sync::atomic::fence(Ordering::Release)
    }
    fn acquire_fence() {
        loom::sync::atomic::fence(Ordering::Acquire)
    }
}

/// "FIOSTRM3" (version 2: the space event on a cache line of its own;
/// version 3: the slots that follow the control words start a cache line
/// apart within their pages, so a reader of version 2 must not take them).
pub const MAGIC: u64 = u64::from_le_bytes(*b"FIOSTRM3");
/// Words of the header.
pub const HEADER_WORDS: usize = 32;
/// Words of one consumer record.
pub const CONSUMER_WORDS: usize = 8;
/// Words of one slot record.
pub const SLOT_WORDS: usize = 16;
/// Dimensions a frame may have.
pub const MAX_FRAME_DIMS: usize = 8;
/// Marks a slot whose frame is being written (invariant 2).
pub const WRITING: u64 = 1 << 63;
/// A slot that never held a frame.
pub const NEVER: u64 = u64::MAX;
/// Owner word of a consumer record that left (or died and was detached):
/// it no longer holds the producer back.
pub const DETACHED: u64 = 1 << 62;

/// Header word indexes.
pub mod h {
    /// [`MAGIC`](super::MAGIC) once the header is written.
    pub const MAGIC: usize = 0;
    /// Frames in flight.
    pub const DEPTH: usize = 1;
    /// Bytes of one slot.
    pub const SLOT_SIZE: usize = 2;
    /// Consumer records.
    pub const CONSUMERS: usize = 3;
    /// `Overflow::code`.
    pub const OVERFLOW: usize = 4;
    /// Bit 0: a dead producer may be restarted (consumers wait for it);
    /// bit 1: a dead consumer may be restarted (the producer waits).
    pub const FLAGS: usize = 5;
    /// The element type's code (the user's table; `fastio` stores Clara's C
    /// codes, `dtype::clara::ELEMENTS`).
    pub const ELEMENT: usize = 6;
    /// Dimensions of every frame.
    pub const MAX_NDIM: usize = 7;
    /// `8..16`: the largest shape.
    pub const MAX_SHAPE: usize = 8;
    /// Frames published: the next frame's number.
    pub const HEAD: usize = 16;
    /// The producer's participant token (0: none yet).
    pub const PRODUCER: usize = 17;
    /// 0 while the stream runs; `ENDED | n` after the producer ended it
    /// with `n` frames; `POISONED | k` once it failed from frame `k`.
    pub const END: usize = 18;
    /// The data event (two 32-bit words): bumped by every publish. Words
    /// 16 to 23 (one cache line) are the producer's: it writes them on
    /// every frame, consumers only read them.
    pub const DATA_EVENT: usize = 20;
    /// The space event: bumped by every release. Words 24 to 31 (one
    /// cache line) are the consumers': a release does not take the line
    /// the producer's `head` lives on away from it.
    pub const SPACE_EVENT: usize = 24;
    /// Observers attached (invariant 8): while there are any, a slot is
    /// reused as late as possible instead of as soon as possible.
    pub const OBSERVERS: usize = 25;
}

/// Consumer record word indexes.
pub mod c {
    /// 0: reserved, not attached yet (holds the producer back, so that a
    /// consumer that starts late still sees frame 0); a participant token;
    /// or `DETACHED | token`.
    pub const OWNER: usize = 0;
    /// The next frame this consumer reads (invariant 3).
    pub const NEXT: usize = 1;
    /// `s + 1` while frame `s` is held, else 0 (invariant 4).
    pub const HOLDING: usize = 2;
    /// Frames it lost to `drop-oldest`.
    pub const DROPPED: usize = 3;
}

/// Slot record word indexes.
pub mod s {
    /// Sequence word of the slot's frame (`WRITING | n` while written).
    pub const SEQ: usize = 0;
    /// Bytes of the frame.
    pub const LEN: usize = 1;
    /// The frame number of the source frame it derives from.
    pub const SOURCE_SEQ: usize = 2;
    /// Nanoseconds since the Unix epoch at the source.
    pub const TIMESTAMP: usize = 3;
    /// Dimensions of the frame.
    pub const NDIM: usize = 4;
    /// `5..13`: the shape.
    pub const DIMS: usize = 5;
}

/// End word: ended normally.
pub const ENDED: u64 = 1 << 62;
/// End word: failed.
pub const POISONED: u64 = 1 << 61;
/// End word: the frame count or frame number below the two flags.
pub const END_MASK: u64 = POISONED - 1;

/// What a full edge does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overflow {
    /// The producer waits until every consumer released the slot it
    /// needs: nothing is lost (the default).
    #[default]
    Block,
    /// The producer overwrites the oldest frame no consumer holds;
    /// consumers see the gap in the frame numbers.
    DropOldest,
}

impl Overflow {
    /// The code stored in the header.
    pub fn code(self) -> u64 {
        match self {
            Overflow::Block => 0,
            Overflow::DropOldest => 1,
        }
    }

    /// The overflow of a header code.
    pub fn from_code(c: u64) -> Option<Overflow> {
        match c {
            0 => Some(Overflow::Block),
            1 => Some(Overflow::DropOldest),
            _ => None,
        }
    }
}

/// Slots of a ring of `depth` frames in flight and `consumers` consumers.
pub fn slot_count(depth: usize, consumers: usize, overflow: Overflow) -> Option<usize> {
    match overflow {
        Overflow::Block => Some(depth),
        Overflow::DropOldest => depth.checked_add(consumers)?.checked_add(1),
    }
}

/// Words of control for `depth` frames in flight and `consumers`
/// consumers.
pub fn control_words(depth: usize, consumers: usize, overflow: Overflow) -> Option<usize> {
    HEADER_WORDS
        .checked_add(consumers.checked_mul(CONSUMER_WORDS)?)?
        .checked_add(depth)?
        .checked_add(slot_count(depth, consumers, overflow)?.checked_mul(SLOT_WORDS)?)
}

/// A position entry: frame `seq` in slot `slot` (0: none).
fn entry(seq: u64, slot: usize) -> u64 {
    (seq.wrapping_add(1) << 16) | slot as u64
}

/// The frame and slot of a position entry.
fn split(e: u64) -> Option<(u64, usize)> {
    (e >> 16)
        .checked_sub(1)
        .map(|seq| (seq, (e & 0xffff) as usize))
}

/// What a ring's header says of it ([`Ring::init`]).
#[derive(Debug, Clone, Copy)]
pub struct Geometry<'s> {
    /// Frames in flight.
    pub depth: usize,
    /// Bytes of one slot.
    pub slot_size: u64,
    /// Consumers.
    pub consumers: usize,
    /// What a full ring does.
    pub overflow: Overflow,
    /// The user's flags word.
    pub flags: u64,
    /// The user's element code.
    pub element: u64,
    /// The largest shape of a frame.
    pub max_shape: &'s [usize],
}

/// The ring's control words, checked (invariant 5).
pub struct Ring<'a, W = AtomicU64> {
    w: &'a [W],
    depth: u64,
    consumers: usize,
    slots: usize,
    overflow: Overflow,
}

/// What the producer may do about frame `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Space {
    /// This slot is its to write.
    Ready(usize),
    /// Consumer `i` still needs the slot.
    Wait(usize),
}

/// What a consumer found at its next frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Poll {
    /// Frame `s` in slot `k` is held (announced in `holding`): read it,
    /// then release.
    Frame(u64, usize),
    /// Nothing new yet.
    Empty,
    /// Frames were overwritten (`drop-oldest`): the consumer now reads
    /// from this frame on.
    Skipped(u64),
}

/// Why a header was refused.
pub type Invalid = String;

/// What a producer knows of the slots, in its own memory (invariant 8):
/// under `block` the frames it published that may still be unreleased,
/// oldest first, and the free slots, the one freed last on top; under
/// `drop-oldest` the slot of its last frame (the search for a free one
/// starts after it).
#[derive(Debug, Clone, Default)]
pub struct ProducerSlots {
    in_flight: VecDeque<(u64, usize)>,
    free: VecDeque<usize>,
    last: usize,
}

impl<W> Clone for Ring<'_, W> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<W> Copy for Ring<'_, W> {}

impl<'a, W: Word> Ring<'a, W> {
    /// Writes a fresh header for `geometry` into `w` (zeroed memory that
    /// nobody else can reach yet), with `producer` as its producer's word.
    pub fn init(
        w: &'a [W],
        geometry: &Geometry<'_>,
        producer: u64,
    ) -> Result<Ring<'a, W>, Invalid> {
        let Geometry {
            depth,
            slot_size,
            consumers,
            overflow,
            flags,
            element,
            max_shape,
        } = *geometry;
        let need = control_words(depth, consumers, overflow).ok_or("too many slots")?;
        if depth == 0 || w.len() < need || max_shape.len() > MAX_FRAME_DIMS {
            return Err(format!(
                "depth {depth}, {} dimensions, {} control words for {need}",
                max_shape.len(),
                w.len()
            ));
        }
        let set = |i: usize, v: u64| w[i].store(v, Ordering::Relaxed);
        set(h::DEPTH, depth as u64);
        set(h::SLOT_SIZE, slot_size);
        set(h::CONSUMERS, consumers as u64);
        set(h::OVERFLOW, overflow.code());
        set(h::FLAGS, flags);
        set(h::ELEMENT, element);
        set(h::MAX_NDIM, max_shape.len() as u64);
        for (i, &d) in max_shape.iter().enumerate() {
            set(h::MAX_SHAPE + i, d as u64);
        }
        set(h::HEAD, 0);
        set(h::PRODUCER, producer);
        set(h::END, 0);
        set(h::OBSERVERS, 0);
        let ring = Ring::trusted(w, depth as u64, consumers, overflow);
        for i in 0..consumers {
            for k in 0..CONSUMER_WORDS {
                ring.cw(i, k).store(0, Ordering::Relaxed);
            }
        }
        for p in 0..depth {
            ring.position(p as u64).store(0, Ordering::Relaxed);
        }
        for slot in 0..ring.slots {
            ring.sw(slot, s::SEQ).store(NEVER, Ordering::Relaxed);
        }
        // Last, with release: whoever validates the magic sees the rest.
        w[h::MAGIC].store(MAGIC, Ordering::Release);
        Ok(ring)
    }

    /// Checks a header written by [`Ring::init`] (invariant 5).
    pub fn open(w: &'a [W]) -> Result<Ring<'a, W>, Invalid> {
        if w.len() < HEADER_WORDS || w[h::MAGIC].load(Ordering::Acquire) != MAGIC {
            return Err("not a stream (bad magic)".into());
        }
        let get = |i: usize| w[i].load(Ordering::Relaxed);
        let depth = get(h::DEPTH);
        let consumers = get(h::CONSUMERS);
        let overflow = Overflow::from_code(get(h::OVERFLOW)).ok_or("unknown overflow code")?;
        if depth == 0 || depth > 1 << 20 || consumers > 64 {
            return Err(format!("depth {depth}, {consumers} consumers"));
        }
        let need =
            control_words(depth as usize, consumers as usize, overflow).ok_or("too many slots")?;
        if w.len() < need || get(h::MAX_NDIM) > MAX_FRAME_DIMS as u64 {
            return Err("the control words do not fit the region".into());
        }
        Ok(Ring::trusted(w, depth, consumers as usize, overflow))
    }

    /// A ring over words that [`Ring::open`] already checked, with the
    /// geometry it found (no header loads on the hot path).
    pub fn trusted(w: &'a [W], depth: u64, consumers: usize, overflow: Overflow) -> Ring<'a, W> {
        let slots = slot_count(depth as usize, consumers, overflow).unwrap_or(0);
        debug_assert!(
            control_words(depth as usize, consumers, overflow).is_some_and(|n| n <= w.len())
        );
        Ring {
            w,
            depth,
            consumers,
            slots,
            overflow,
        }
    }

    /// Header word `i` (`i < HEADER_WORDS`).
    pub fn header(&self, i: usize) -> &'a W {
        &self.w[i]
    }

    /// Word `k` of consumer record `i` (`i < consumers`, checked by callers).
    pub fn cw(&self, i: usize, k: usize) -> &'a W {
        &self.w[HEADER_WORDS + i * CONSUMER_WORDS + k]
    }

    /// The position of frame `seq` (`drop-oldest`).
    fn position(&self, seq: u64) -> &'a W {
        let p = (seq % self.depth) as usize;
        &self.w[HEADER_WORDS + self.consumers * CONSUMER_WORDS + p]
    }

    /// Word `k` of the record of slot `slot` (`slot < slots`).
    pub fn sw(&self, slot: usize, k: usize) -> &'a W {
        let base = HEADER_WORDS + self.consumers * CONSUMER_WORDS + self.depth as usize;
        &self.w[base + slot * SLOT_WORDS + k]
    }

    /// Frames in flight.
    pub fn depth(&self) -> u64 {
        self.depth
    }

    /// Consumer records.
    pub fn consumers(&self) -> usize {
        self.consumers
    }

    /// Slots.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// What a full ring does.
    pub fn overflow(&self) -> Overflow {
        self.overflow
    }

    /// Frames published so far.
    pub fn head(&self) -> u64 {
        self.w[h::HEAD].load(Ordering::Acquire)
    }

    /// Frames every attached consumer has let go of: each frame below the
    /// number returned was released by all (invariant 3), and it is at
    /// most `head` (every published frame, when no consumer is attached).
    /// What a producer on the far side of a link may be allowed to send
    /// beyond.
    pub fn released(&self) -> u64 {
        let head = self.head();
        (0..self.consumers)
            .filter(|&i| !self.detached(i))
            .map(|i| self.cw(i, c::NEXT).load(Ordering::Acquire))
            .fold(head, u64::min)
    }

    fn detached(&self, i: usize) -> bool {
        self.cw(i, c::OWNER).load(Ordering::SeqCst) & DETACHED != 0
    }

    /// What a producer that starts with `head` frames published knows of
    /// the slots (invariant 8): under `block`, a slot whose sequence word
    /// names one of the last `depth` frames may be unreleased; any other
    /// (never used, marked `WRITING` by a producer that died before it
    /// published, or holding an older frame) is free, oldest first.
    pub fn producer_slots(&self, head: u64) -> ProducerSlots {
        let mut slots = ProducerSlots {
            in_flight: VecDeque::with_capacity(self.slots),
            free: VecDeque::with_capacity(self.slots),
            last: 0,
        };
        if self.overflow == Overflow::Block {
            let oldest = head.saturating_sub(self.depth);
            let mut held: Vec<(u64, usize)> = Vec::with_capacity(self.slots);
            let mut free: Vec<(u64, usize)> = Vec::with_capacity(self.slots);
            for k in 0..self.slots {
                let seq = self.sw(k, s::SEQ).load(Ordering::Acquire);
                if (oldest..head).contains(&seq) {
                    held.push((seq, k));
                } else {
                    // Never used, being written, or older: first to go
                    // under the frames released since.
                    let order = if seq < head { seq } else { 0 };
                    free.push((order, k));
                }
            }
            held.sort_unstable();
            free.sort_unstable();
            slots.in_flight.extend(held);
            slots.free.extend(free.into_iter().map(|(_, k)| k));
        }
        slots
    }

    /// May the producer write frame `n` now, and into which slot? Under
    /// `block` that is the free slot freed last (invariant 8), once every
    /// consumer released frame `n - depth` (invariant 3); the slot is then
    /// marked `WRITING` (invariant 2). Under `drop-oldest` it is any slot
    /// that no position names and no consumer holds, starting after the
    /// last one (invariant 4); there always is one. An error only when
    /// `slots` is not this ring's.
    pub fn try_begin(&self, n: u64, slots: &mut ProducerSlots) -> Result<Space, Invalid> {
        match self.overflow {
            Overflow::Block => {
                let mut released = n;
                for i in 0..self.consumers {
                    if self.detached(i) {
                        continue;
                    }
                    // Invariant 3.
                    let next = self.cw(i, c::NEXT).load(Ordering::Acquire);
                    if next.saturating_add(self.depth) <= n {
                        return Ok(Space::Wait(i));
                    }
                    released = released.min(next);
                }
                // Invariant 8: frames below every `next` free their slots,
                // the newest last (on top).
                while let Some(&(seq, k)) = slots.in_flight.front() {
                    if seq >= released {
                        break;
                    }
                    slots.in_flight.pop_front();
                    slots.free.push_back(k);
                }
                let observed = self.w[h::OBSERVERS].load(Ordering::Relaxed) != 0;
                let slot = match if observed {
                    slots.free.pop_front()
                } else {
                    slots.free.pop_back()
                } {
                    Some(k) if k < self.slots => k,
                    _ => {
                        return Err(format!(
                            "frame {n}: no free slot of {} ({} in flight)",
                            self.slots,
                            slots.in_flight.len()
                        ));
                    }
                };
                // Invariant 6: the mark, then a release fence, before any
                // byte of the new frame. The fence orders the mark before
                // every later store, which is all an observer's acquire
                // fence needs (invariant 7): no full barrier here, and the
                // fence is free on x86-64 (a compiler barrier).
                self.sw(slot, s::SEQ).store(WRITING | n, Ordering::Relaxed);
                W::release_fence();
                Ok(Space::Ready(slot))
            }
            Overflow::DropOldest => {
                // Invariant 4: every position this producer replaced, then
                // the fence, then the holdings.
                W::fence();
                for step in 1..=self.slots {
                    let k = (slots.last + step) % self.slots;
                    if !self.named_or_held(k) {
                        return Ok(Space::Ready(k));
                    }
                }
                // Only a corrupt ring gets here: D positions and C
                // holdings name at most D + C of the D + C + 1 slots.
                Err(format!("frame {n}: every slot named or held"))
            }
        }
    }

    /// Whether a position names slot `k` or a consumer holds it
    /// (invariant 4: read after every position this producer replaced).
    fn named_or_held(&self, k: usize) -> bool {
        (0..self.depth)
            .any(|p| split(self.position(p).load(Ordering::SeqCst)).is_some_and(|(_, s)| s == k))
            || (0..self.consumers).any(|i| {
                !self.detached(i)
                    && split(self.cw(i, c::HOLDING).load(Ordering::SeqCst))
                        .is_some_and(|(_, s)| s == k)
            })
    }

    /// Publishes frame `n` from `slot` (which [`Ring::try_begin`] gave
    /// for it), whose bytes and metadata the producer wrote (invariant 1).
    pub fn publish(&self, n: u64, slot: usize, slots: &mut ProducerSlots) {
        self.sw(slot, s::SEQ).store(n, Ordering::Release);
        match self.overflow {
            Overflow::Block => {
                // Invariant 8: the position names the slot.
                self.position(n).store(entry(n, slot), Ordering::Release);
                slots.in_flight.push_back((n, slot));
            }
            Overflow::DropOldest => {
                // Invariant 4: the replaced position takes part in the
                // Dekker pair with a consumer's holding.
                self.position(n).store(entry(n, slot), Ordering::SeqCst);
                slots.last = slot;
            }
        }
        // Invariant 7: a release store; a consumer's acquire load of
        // `head` then sees the whole frame (invariant 1).
        self.w[h::HEAD].store(n.wrapping_add(1), Ordering::Release);
    }

    /// Consumer `i` looks at its next frame `next`.
    pub fn poll(&self, i: usize, next: u64) -> Result<Poll, Invalid> {
        let head = self.w[h::HEAD].load(Ordering::Acquire);
        if head <= next {
            return Ok(Poll::Empty);
        }
        let holding = self.cw(i, c::HOLDING);
        match self.overflow {
            Overflow::Block => {
                // Invariant 8: the position names the frame's slot while
                // this consumer has not passed it.
                let e = self.position(next).load(Ordering::Acquire);
                let slot = match split(e) {
                    Some((seq, slot)) if seq == next && slot < self.slots => slot,
                    _ => {
                        return Err(format!(
                            "frame {next}: its position holds {e:#x} under block (corrupt ring)"
                        ));
                    }
                };
                // Under `block` the producer never reads holdings (it
                // waits on `next`, invariant 3): the word is only said,
                // for those who look at the ring (invariant 7).
                holding.store(entry(next, slot), Ordering::Relaxed);
                let seq = self.sw(slot, s::SEQ).load(Ordering::Acquire);
                if seq == next {
                    return Ok(Poll::Frame(next, slot));
                }
                holding.store(0, Ordering::Relaxed);
                // Invariant 3 forbids this: the slot was rewritten while
                // this consumer had not released it.
                Err(format!(
                    "frame {next}: its slot holds {seq:#x} under block (corrupt ring)"
                ))
            }
            Overflow::DropOldest => {
                let pos = self.position(next);
                let e = pos.load(Ordering::SeqCst);
                if let Some((seq, slot)) = split(e)
                    && seq == next
                {
                    if slot >= self.slots {
                        return Err(format!("frame {next}: slot {slot} of {}", self.slots));
                    }
                    // Invariant 4: announce, fence, then check again.
                    holding.store(e, Ordering::SeqCst);
                    W::fence();
                    if pos.load(Ordering::SeqCst) == e {
                        return Ok(Poll::Frame(next, slot));
                    }
                    holding.store(0, Ordering::SeqCst);
                }
                // Overwritten: go on from the oldest frame still in the
                // positions.
                let head = self.w[h::HEAD].load(Ordering::SeqCst);
                let to = head.saturating_sub(self.depth).max(next.saturating_add(1));
                self.cw(i, c::DROPPED)
                    .fetch_add(to.wrapping_sub(next), Ordering::Relaxed);
                self.cw(i, c::NEXT).store(to, Ordering::Release);
                Ok(Poll::Skipped(to))
            }
        }
    }

    /// An observer comes (invariants 6 and 8): until it goes, slots are
    /// reused as late as the ring allows.
    pub fn observer_attached(&self) {
        self.w[h::OBSERVERS].fetch_add(1, Ordering::Relaxed);
    }

    /// An observer goes (see [`Ring::observer_attached`]).
    pub fn observer_left(&self) {
        let word = &self.w[h::OBSERVERS];
        let mut seen = word.load(Ordering::Relaxed);
        // Never below zero (another process may have scribbled it).
        while seen != 0 {
            match word.compare_exchange(seen, seen - 1, Ordering::Relaxed) {
                Ok(_) => break,
                Err(now) => seen = now,
            }
        }
    }

    /// An observer looks for frame `n` (invariant 6): its slot, while the
    /// frame is there.
    pub fn observe(&self, n: u64) -> Option<usize> {
        if self.w[h::HEAD].load(Ordering::Acquire) <= n {
            return None;
        }
        let (seq, slot) = split(self.position(n).load(Ordering::Acquire))?;
        if seq != n || slot >= self.slots {
            return None;
        }
        (self.sw(slot, s::SEQ).load(Ordering::Acquire) == n).then_some(slot)
    }

    /// Whether frame `n` is still in `slot` after the observer copied it:
    /// an acquire fence, then the position and the slot's sequence word as
    /// [`Ring::observe`] saw them.
    pub fn still(&self, n: u64, slot: usize) -> bool {
        W::acquire_fence();
        let named = split(self.position(n).load(Ordering::Relaxed))
            .is_some_and(|(seq, s)| seq == n && s == slot);
        named && self.sw(slot, s::SEQ).load(Ordering::Relaxed) == n
    }

    /// Consumer `i` is done with frame `seq` and every one before it
    /// (invariants 3 and 4).
    pub fn release(&self, i: usize, seq: u64) {
        self.release_to(i, seq.saturating_add(1));
    }

    /// Consumer `i` is done with every frame below `next` (a consumer that
    /// holds several frames under `block` releases up to the oldest it
    /// still holds; invariant 3).
    pub fn release_to(&self, i: usize, next: u64) {
        // Invariant 7: release stores. Every read of the frames below
        // `next` comes before them; a producer that sees either may write
        // those slots. One that still sees the old words waits or, under
        // `drop-oldest`, leaves the slot alone: never unsafe.
        self.cw(i, c::NEXT).store(next, Ordering::Release);
        self.cw(i, c::HOLDING).store(0, Ordering::Release);
    }
}
