//! The error type of this crate.

use thiserror::Error;

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong with a context or an allocation.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// The shared-memory layer failed (open, map, allocate, take the
    /// context lock: `shm_core::Error::Lock`, ...).
    #[error("shared memory: {0}")]
    Shm(#[from] shm_core::Error),
    /// A configured limit would be exceeded.
    #[error("context capacity exceeded: {resource} (limit {limit})")]
    CapacityExceeded {
        /// `"bytes"`, `"allocations"`, `"published names"`, `"references"`.
        resource: &'static str,
        /// The configured limit.
        limit: u64,
    },
    /// `publish` with a name that is already published.
    #[error("name {0:?} is already published in this context")]
    NameExists(String),
    /// `get` with a name that is not published (or whose allocation was
    /// freed).
    #[error("no allocation is published as {0:?}")]
    UnknownName(String),
    /// A name that cannot be published: empty, too long, or containing NUL.
    #[error("invalid name {name:?}: {reason}")]
    InvalidName {
        /// The name as given.
        name: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// The allocation was freed: it can no longer be mapped or published.
    #[error("the allocation was freed")]
    Freed,
    /// Another mapping conflicts: a write mapping excludes every other
    /// mapping, in any process.
    #[error("the allocation is already mapped {0} elsewhere")]
    MapConflict(&'static str),
    /// `set_type_and_dimensions` with a type and shape whose byte size is
    /// not the allocation's size.
    #[error(
        "element size {element_size} x {numel} elements = {required} bytes, but the allocation has {size}"
    )]
    SizeMismatch {
        /// Bytes per element.
        element_size: u64,
        /// Number of elements.
        numel: u64,
        /// Bytes the type and dimensions need (saturated on overflow).
        required: u64,
        /// Bytes in the allocation.
        size: u64,
    },
    /// An element type that cannot live in shared memory (variable-size,
    /// or holding references to other memory), or too many dimensions.
    #[error("unsupported element type or dimensions: {0}")]
    Unsupported(String),
    /// The context's owner has shut it down.
    #[error("the context was closed by its owner")]
    ContextClosed,
    /// No context handle in the environment.
    #[error("environment variable {0} is not set: no context to attach to")]
    NoContext(&'static str),
    /// The shared control data failed validation.
    #[error("corrupt context: {0}")]
    Corrupt(String),
    /// Building an `ndobject` array over the mapping failed.
    #[error("array view: {0}")]
    Array(#[from] ndobject::Error),
    /// `wait_for` gave up: the name was not published in time.
    #[error("{0:?} was not published before the timeout")]
    WaitTimeout(String),
    /// The pipeline plan in the context is missing or malformed.
    #[error("pipeline plan: {0}")]
    Plan(String),
    /// The operator has no input or output of that name.
    #[error("no entry named {0:?} for this operator")]
    UnknownEntry(String),
    /// `/dev/shm` had no room for a new block even after the context gave
    /// every cached (freed, kept) block back to the system.
    #[error("{source} (the context first gave back {}{})", shm_core::human_bytes(*released), if *released == 0 { ": it held no cached blocks" } else { " of cached blocks" })]
    NoSpace {
        /// The file system's refusal ([`shm_core::Error::NoSpace`]).
        source: shm_core::Error,
        /// Bytes of cached blocks given back before trying again.
        released: u64,
    },
    /// The name matches two of the operator's inputs (or outputs): two
    /// producers' outputs share a local name. Ask by entry name
    /// (`<operator>/<output>`) instead.
    #[error(
        "the name {name:?} matches two entries of this operator, {first:?} and {second:?}: ask for one by its entry name"
    )]
    AmbiguousEntry {
        /// The name asked for.
        name: String,
        /// The first entry it matches (`<operator>/<output>`).
        first: String,
        /// The second entry it matches.
        second: String,
    },
    /// An entry was used in a way its access or kind does not allow.
    #[error("entry {entry}: {reason}")]
    EntryAccess {
        /// The entry (`<operator>/<output>`).
        entry: String,
        /// What was wrong.
        reason: String,
    },
    /// An output's shape still has a dynamic dimension not set (0).
    #[error(
        "entry {entry}: shape {shape:?} is not well-defined; set its dynamic dimensions with update_shape first"
    )]
    ShapeNotDefined {
        /// The entry.
        entry: String,
        /// Its current shape (0 where unset).
        shape: Vec<usize>,
    },
    /// An input whose producer never allocated it.
    #[error("input {entry} was never allocated by its producer {producer}")]
    NotAllocated {
        /// The entry.
        entry: String,
        /// The producing operator.
        producer: String,
    },
    /// An input whose producer failed (died while writing it, or before it
    /// finished): its data cannot be trusted.
    #[error("input {entry} is poisoned: its producer {operator} failed before finishing it")]
    Poisoned {
        /// The entry.
        entry: String,
        /// The producing operator that failed.
        operator: String,
    },
    /// A stream failed: its producer died (or the driver stopped it)
    /// before publishing frame `from_frame`. Every frame before it was
    /// whole; none from it on will come.
    #[error("stream {stream} is poisoned from frame {from_frame}: {reason}")]
    StreamPoisoned {
        /// The stream's name.
        stream: String,
        /// The first frame that will never arrive.
        from_frame: u64,
        /// What happened.
        reason: String,
    },
    /// A stream operation did not complete before its timeout.
    #[error("stream {stream}: {what} timed out")]
    StreamTimeout {
        /// The stream's name.
        stream: String,
        /// What was waited for.
        what: &'static str,
    },
    /// Options or a frame's shape that the stream cannot take.
    #[error("stream {stream}: {reason}")]
    StreamConfig {
        /// The stream's name.
        stream: String,
        /// What was wrong.
        reason: String,
    },
    /// The producer or consumer place asked for is taken by a live
    /// process.
    #[error("stream {stream}: the {role} is attached by a live process")]
    StreamBusy {
        /// The stream's name.
        stream: String,
        /// `"producer"` or `"consumer 2"`, ...
        role: String,
    },
    /// `next` while this consumer keeps a frame so old that the next one
    /// could never come (the producer is `depth` frames ahead of it).
    #[error(
        "stream {0}: a frame `depth` frames old is still held (a kept frame or view); drop it before taking the next"
    )]
    FrameHeld(String),
}

impl From<shm_core::LockError> for Error {
    fn from(e: shm_core::LockError) -> Error {
        Error::Shm(e.into())
    }
}

impl Error {
    /// Whether this is shared memory running out: `/dev/shm` had no room
    /// for memory that had to be backed (`shm_core::Error::NoSpace`).
    pub fn is_no_space(&self) -> bool {
        matches!(
            self,
            Error::Shm(shm_core::Error::NoSpace { .. }) | Error::NoSpace { .. }
        )
    }

    pub(crate) fn corrupt(what: impl Into<String>) -> Error {
        Error::Corrupt(what.into())
    }
}
