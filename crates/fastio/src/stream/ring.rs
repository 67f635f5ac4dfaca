//! The stream ring's protocol: the control words in shared memory and every
//! step a producer or consumer takes on them, without waiting and without
//! a lock. Waiting (spin, then futex), liveness and the bytes of the
//! frames belong to the facade in `stream/mod.rs`; this module is the part
//! that `loom` checks (`stream/loom_models.rs`), on `loom`'s atomics.
//!
//! # Layout (64-bit words)
//!
//! | words | what |
//! |---|---|
//! | `0..32` | header: magic, depth, slot size, consumer count, overflow, flags, element, maximum shape, `head`, producer token, end word, events |
//! | `32..32+8C` | one record of 8 words per consumer: owner, next, holding, dropped |
//! | then `16D` | one record of 16 words per slot: sequence, length, source sequence, timestamp, ndim, dimensions |
//!
//! # Invariants (numbered; the code cites them)
//!
//! 1. Frame `s` lives in slot `s % depth`. It is readable when
//!    `head > s` and the slot's sequence word equals `s`; the producer
//!    stores the slot's metadata, then the sequence (release), then `head`
//!    (release), so a consumer that sees either sees a whole frame.
//! 2. While the producer writes frame `n` the slot's sequence word is
//!    `WRITING | n`: never equal to a frame number, so a frame being
//!    written is never taken for a complete one, even after a crash.
//! 3. A consumer's `next` only grows; every frame below it is released by
//!    that consumer. Under `block` the producer starts frame `n` only when
//!    every consumer that is not detached has `next + depth > n`: frame
//!    `n - depth`, the slot's previous content, was released by all.
//! 4. Under `drop-oldest` the producer does not wait for `next`; instead a
//!    consumer announces the frame it takes in `holding` (`s + 1`, 0 for
//!    none) *before* it checks the slot's sequence, and the producer marks
//!    the slot `WRITING` *before* it checks every `holding`, all four
//!    sequentially consistent (Dekker): either the consumer sees the mark
//!    and gives the frame up as dropped, or the producer sees the holding
//!    and waits for its release. A held frame is never overwritten.
//! 5. Every value read from shared memory is checked before use: the
//!    header against the region's length when a handle is made, slot
//!    lengths and shapes against the header when a frame is read.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};

/// "FIOSTRM1".
pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"FIOSTRM1");
/// Words of the header.
pub(crate) const HEADER_WORDS: usize = 32;
/// Words of one consumer record.
pub(crate) const CONSUMER_WORDS: usize = 8;
/// Words of one slot record.
pub(crate) const SLOT_WORDS: usize = 16;
/// Dimensions a frame may have.
pub const MAX_FRAME_DIMS: usize = 8;
/// Marks a slot whose frame is being written (invariant 2).
pub(crate) const WRITING: u64 = 1 << 63;
/// A slot that never held a frame.
pub(crate) const NEVER: u64 = u64::MAX;
/// Owner word of a consumer record that left (or died and was detached):
/// it no longer holds the producer back.
pub(crate) const DETACHED: u64 = 1 << 62;

/// Header word indexes.
pub(crate) mod h {
    pub(crate) const MAGIC: usize = 0;
    pub(crate) const DEPTH: usize = 1;
    pub(crate) const SLOT_SIZE: usize = 2;
    pub(crate) const CONSUMERS: usize = 3;
    pub(crate) const OVERFLOW: usize = 4;
    /// Bit 0: a dead producer may be restarted (consumers wait for it);
    /// bit 1: a dead consumer may be restarted (the producer waits).
    pub(crate) const FLAGS: usize = 5;
    /// The element type, as `dtype::Primitive`'s index in `ELEMENTS`.
    pub(crate) const ELEMENT: usize = 6;
    pub(crate) const MAX_NDIM: usize = 7;
    /// `8..16`: the largest shape.
    pub(crate) const MAX_SHAPE: usize = 8;
    /// Frames published: the next frame's number.
    pub(crate) const HEAD: usize = 16;
    /// The producer's participant token (0: none yet).
    pub(crate) const PRODUCER: usize = 17;
    /// 0 while the stream runs; `ENDED | n` after the producer ended it
    /// with `n` frames; `POISONED | k` once it failed from frame `k`.
    pub(crate) const END: usize = 18;
    /// The data event (two 32-bit words): bumped by every publish.
    pub(crate) const DATA_EVENT: usize = 20;
    /// The space event: bumped by every release.
    pub(crate) const SPACE_EVENT: usize = 21;
}

/// Consumer record word indexes.
pub(crate) mod c {
    /// 0: reserved, not attached yet (holds the producer back, so that a
    /// consumer that starts late still sees frame 0); a participant token;
    /// or `DETACHED | token`.
    pub(crate) const OWNER: usize = 0;
    /// The next frame this consumer reads (invariant 3).
    pub(crate) const NEXT: usize = 1;
    /// `s + 1` while frame `s` is held, else 0 (invariant 4).
    pub(crate) const HOLDING: usize = 2;
    /// Frames it lost to `drop-oldest`.
    pub(crate) const DROPPED: usize = 3;
}

/// Slot record word indexes.
pub(crate) mod s {
    pub(crate) const SEQ: usize = 0;
    /// Bytes of the frame.
    pub(crate) const LEN: usize = 1;
    /// The frame number of the source frame it derives from.
    pub(crate) const SOURCE_SEQ: usize = 2;
    /// Nanoseconds since the Unix epoch at the source.
    pub(crate) const TIMESTAMP: usize = 3;
    pub(crate) const NDIM: usize = 4;
    /// `5..13`: the shape.
    pub(crate) const DIMS: usize = 5;
}

/// End word: ended normally.
pub(crate) const ENDED: u64 = 1 << 62;
/// End word: failed.
pub(crate) const POISONED: u64 = 1 << 61;
/// End word: the frame count or frame number below the two flags.
pub(crate) const END_MASK: u64 = POISONED - 1;

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
    pub(crate) fn code(self) -> u64 {
        match self {
            Overflow::Block => 0,
            Overflow::DropOldest => 1,
        }
    }

    pub(crate) fn from_code(c: u64) -> Option<Overflow> {
        match c {
            0 => Some(Overflow::Block),
            1 => Some(Overflow::DropOldest),
            _ => None,
        }
    }
}

/// Words of control for `depth` slots and `consumers` consumers.
pub(crate) fn control_words(depth: usize, consumers: usize) -> Option<usize> {
    HEADER_WORDS
        .checked_add(consumers.checked_mul(CONSUMER_WORDS)?)?
        .checked_add(depth.checked_mul(SLOT_WORDS)?)
}

/// The ring's control words, checked (invariant 5).
#[derive(Clone, Copy)]
pub(crate) struct Ring<'a> {
    w: &'a [AtomicU64],
    depth: u64,
    consumers: usize,
    overflow: Overflow,
}

/// What the producer may do about frame `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Space {
    /// The slot is its to write.
    Ready,
    /// Consumer `i` still needs the slot.
    Wait(usize),
}

/// What a consumer found at its next frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Poll {
    /// Frame `s` is held (announced in `holding`): read it, then release.
    Frame(u64),
    /// Nothing new yet.
    Empty,
    /// Frames were overwritten (`drop-oldest`): the consumer now reads
    /// from this frame on.
    Skipped(u64),
}

/// Why a header was refused.
pub(crate) type Invalid = String;

impl<'a> Ring<'a> {
    /// Writes a fresh header into `w` (zeroed memory that nobody else can
    /// reach yet).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn init(
        w: &'a [AtomicU64],
        depth: usize,
        slot_size: u64,
        consumers: usize,
        overflow: Overflow,
        flags: u64,
        element: u64,
        max_shape: &[usize],
        producer: u64,
    ) -> Result<Ring<'a>, Invalid> {
        let need = control_words(depth, consumers).ok_or("too many slots")?;
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
        let ring = Ring {
            w,
            depth: depth as u64,
            consumers,
            overflow,
        };
        for i in 0..consumers {
            for k in 0..CONSUMER_WORDS {
                ring.cw(i, k).store(0, Ordering::Relaxed);
            }
        }
        for slot in 0..depth {
            ring.sw(slot as u64, s::SEQ).store(NEVER, Ordering::Relaxed);
        }
        // Last, with release: whoever validates the magic sees the rest.
        w[h::MAGIC].store(MAGIC, Ordering::Release);
        Ok(ring)
    }

    /// Checks a header written by [`Ring::init`] (invariant 5).
    pub(crate) fn open(w: &'a [AtomicU64]) -> Result<Ring<'a>, Invalid> {
        if w.len() < HEADER_WORDS || w[h::MAGIC].load(Ordering::Acquire) != MAGIC {
            return Err("not a stream (bad magic)".into());
        }
        let get = |i: usize| w[i].load(Ordering::Relaxed);
        let depth = get(h::DEPTH);
        let consumers = get(h::CONSUMERS);
        let overflow = Overflow::from_code(get(h::OVERFLOW)).ok_or("unknown overflow code")?;
        if depth == 0 || depth > u32::MAX as u64 || consumers > u16::MAX as u64 {
            return Err(format!("depth {depth}, {consumers} consumers"));
        }
        let need = control_words(depth as usize, consumers as usize).ok_or("too many slots")?;
        if w.len() < need || get(h::MAX_NDIM) > MAX_FRAME_DIMS as u64 {
            return Err("the control words do not fit the region".into());
        }
        Ok(Ring {
            w,
            depth,
            consumers: consumers as usize,
            overflow,
        })
    }

    /// A ring over words that [`Ring::open`] already checked, with the
    /// geometry it found (no header loads on the hot path).
    pub(crate) fn trusted(
        w: &'a [AtomicU64],
        depth: u64,
        consumers: usize,
        overflow: Overflow,
    ) -> Ring<'a> {
        debug_assert!(control_words(depth as usize, consumers).is_some_and(|n| n <= w.len()));
        Ring {
            w,
            depth,
            consumers,
            overflow,
        }
    }

    pub(crate) fn header(&self, i: usize) -> &'a AtomicU64 {
        &self.w[i]
    }

    /// Word `k` of consumer record `i` (`i < consumers`, checked by callers).
    pub(crate) fn cw(&self, i: usize, k: usize) -> &'a AtomicU64 {
        &self.w[HEADER_WORDS + i * CONSUMER_WORDS + k]
    }

    /// Word `k` of the record of the slot that frame `seq` uses.
    pub(crate) fn sw(&self, seq: u64, k: usize) -> &'a AtomicU64 {
        let slot = (seq % self.depth) as usize;
        &self.w[HEADER_WORDS + self.consumers * CONSUMER_WORDS + slot * SLOT_WORDS + k]
    }

    pub(crate) fn depth(&self) -> u64 {
        self.depth
    }

    pub(crate) fn consumers(&self) -> usize {
        self.consumers
    }

    pub(crate) fn overflow(&self) -> Overflow {
        self.overflow
    }

    /// Frames published so far.
    pub(crate) fn head(&self) -> u64 {
        self.w[h::HEAD].load(Ordering::Acquire)
    }

    /// May the producer write frame `n` now? Marks the slot `WRITING`
    /// when it may (invariants 2 to 4). `detached(owner)` says whether a
    /// consumer record no longer holds the producer back.
    pub(crate) fn try_begin(&self, n: u64) -> Space {
        match self.overflow {
            Overflow::Block => {
                for i in 0..self.consumers {
                    if self.cw(i, c::OWNER).load(Ordering::Acquire) & DETACHED != 0 {
                        continue;
                    }
                    // Invariant 3.
                    let next = self.cw(i, c::NEXT).load(Ordering::Acquire);
                    if next.saturating_add(self.depth) <= n {
                        return Space::Wait(i);
                    }
                }
                self.sw(n, s::SEQ).store(WRITING | n, Ordering::SeqCst);
                Space::Ready
            }
            Overflow::DropOldest => {
                // Invariant 4: mark first, then look at every holding.
                self.sw(n, s::SEQ).store(WRITING | n, Ordering::SeqCst);
                let slot = n % self.depth;
                for i in 0..self.consumers {
                    if self.cw(i, c::OWNER).load(Ordering::SeqCst) & DETACHED != 0 {
                        continue;
                    }
                    let held = self.cw(i, c::HOLDING).load(Ordering::SeqCst);
                    if held != 0 && (held - 1) % self.depth == slot && held - 1 < n {
                        return Space::Wait(i);
                    }
                }
                Space::Ready
            }
        }
    }

    /// Publishes frame `n`, whose bytes and metadata the producer wrote
    /// (invariant 1).
    pub(crate) fn publish(&self, n: u64) {
        self.sw(n, s::SEQ).store(n, Ordering::Release);
        self.w[h::HEAD].store(n + 1, Ordering::SeqCst);
    }

    /// Consumer `i` looks at its next frame `next`.
    pub(crate) fn poll(&self, i: usize, next: u64) -> Result<Poll, Invalid> {
        let head = self.w[h::HEAD].load(Ordering::SeqCst);
        if head <= next {
            return Ok(Poll::Empty);
        }
        let holding = self.cw(i, c::HOLDING);
        holding.store(next + 1, Ordering::SeqCst);
        let seq = self.sw(next, s::SEQ).load(Ordering::SeqCst);
        if seq == next {
            return Ok(Poll::Frame(next));
        }
        holding.store(0, Ordering::SeqCst);
        if self.overflow == Overflow::Block {
            // Invariant 3 forbids this: the slot was rewritten while this
            // consumer had not released it.
            return Err(format!(
                "frame {next}: its slot holds {seq:#x} under block (corrupt ring)"
            ));
        }
        // Frames below head - depth + 1 are overwritten or being
        // overwritten; the consumer goes on from the oldest that may not be.
        let to = (head + 1).saturating_sub(self.depth).max(next + 1);
        self.cw(i, c::DROPPED).fetch_add(to - next, Ordering::Relaxed);
        self.cw(i, c::NEXT).store(to, Ordering::Release);
        Ok(Poll::Skipped(to))
    }

    /// Consumer `i` is done with frame `seq` (invariants 3 and 4).
    pub(crate) fn release(&self, i: usize, seq: u64) {
        self.cw(i, c::NEXT).store(seq + 1, Ordering::SeqCst);
        self.cw(i, c::HOLDING).store(0, Ordering::SeqCst);
    }
}
