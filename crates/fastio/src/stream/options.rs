//! How a stream is made: [`StreamOptions`] (depth, consumers, overflow,
//! restarts, the largest frame) and the bytes it reserves.

use super::*;

/// How to make a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamOptions {
    pub(super) depth: usize,
    pub(super) element: Primitive,
    pub(super) max_shape: Vec<usize>,
    pub(super) consumers: usize,
    pub(super) overflow: Overflow,
    pub(super) producer_may_restart: bool,
    pub(super) consumer_may_restart: bool,
    pub(super) recorder_place: bool,
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
            recorder_place: false,
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

    /// Keeps the last consumer index (`consumers - 1`) as a recorder's
    /// place: it starts detached, so it holds the producer back only once
    /// a recorder attaches there ([`crate::Context::stream_consumer`]) to
    /// record losslessly; a recorder that dies there is detached at once,
    /// even when consumers may restart, so killing it never stalls the
    /// stream. Count the place in [`StreamOptions::consumers`].
    pub fn recorder_place(mut self, yes: bool) -> Self {
        self.recorder_place = yes;
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

    /// Bytes from one slot's start to the next's: a slot and a cache
    /// line, so that the slots start at different offsets within a page
    /// (see `SLOT_STAGGER`).
    pub fn slot_stride(&self) -> Option<u64> {
        self.slot_bytes()?.checked_add(SLOT_STAGGER)
    }

    /// Bytes the stream takes in its context: control words and slots.
    pub fn reserved_bytes(&self) -> Option<u64> {
        let control = ring::control_words(self.depth, self.consumers, self.overflow)? as u64 * 8;
        let slots = ring::slot_count(self.depth, self.consumers, self.overflow)? as u64;
        control
            .checked_next_multiple_of(SLOT_ALIGN)?
            .checked_add(self.slot_stride()?.checked_mul(slots)?)
    }

    pub(super) fn check(&self, stream: &str) -> Result<()> {
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
