//! A snapshot of a stream ([`StreamStatus`], [`ConsumerStatus`]).

/// A snapshot of a stream ([`Context::stream_status`](crate::Context::stream_status)).
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
