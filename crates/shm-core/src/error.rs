//! Typed errors of the crate.

use std::io;

/// Why a segment header (or a segment as a whole) was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// Fewer bytes than a header needs.
    #[error("segment too small for a header: {len} bytes, need {need}")]
    TooSmall {
        /// Bytes available.
        len: u64,
        /// Bytes needed.
        need: u64,
    },
    /// The magic bytes do not match: not a segment of this library.
    #[error("bad magic: not a shm-core segment")]
    BadMagic,
    /// A layout version this build does not understand.
    #[error("unsupported layout version {0}")]
    UnsupportedVersion(u32),
    /// The header checksum does not match its contents.
    #[error("header checksum mismatch")]
    BadChecksum,
    /// The creator has not finished initialising the segment.
    #[error("segment is not initialised yet")]
    NotReady,
    /// A header field is out of range or inconsistent with another.
    #[error("invalid header field `{field}`: {reason}")]
    BadField {
        /// Field name.
        field: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// Errors of segment, participant, lock and reference-count operations.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A system call failed.
    #[error("{op}: {source}")]
    Sys {
        /// What was being done.
        op: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The segment header is invalid (truncated, corrupted, or foreign).
    #[error("invalid segment header: {0}")]
    Header(#[from] HeaderError),
    /// The shared-memory object is not a regular file.
    #[error("not a regular shared-memory object")]
    NotRegularFile,
    /// The object is owned by another user or accessible to group/others.
    #[error("permission model violated: {0}")]
    Permission(&'static str),
    /// A name or prefix contains forbidden characters or is too long.
    #[error("invalid segment name or prefix: {0:?}")]
    InvalidName(String),
    /// A requested size is zero, too large, or not representable.
    #[error("invalid size: {0}")]
    InvalidSize(&'static str),
    /// An offset/length pair falls outside the usable data region, or is
    /// misaligned for the requested type.
    #[error("offset {offset:#x}+{len} out of bounds or misaligned (data {start:#x}..{end:#x})")]
    OutOfBounds {
        /// Requested offset.
        offset: u64,
        /// Requested length.
        len: u64,
        /// Start of the data region.
        start: u64,
        /// End of the usable data region.
        end: u64,
    },
    /// The range reaches into the part of the data region that a layer
    /// above lends out as Rust references (see `Segment::lend_from`):
    /// typed references into it are refused.
    #[error("offset {offset:#x}+{len} reaches into the lent-out range from {lent_from:#x}")]
    LentOut {
        /// Requested offset.
        offset: u64,
        /// Requested length.
        len: u64,
        /// Start of the lent-out range.
        lent_from: u64,
    },
    /// The segment was opened read-only and the operation writes.
    #[error("segment is mapped read-only")]
    ReadOnly,
    /// All participant slots of the segment are taken by live processes.
    #[error("participant registry is full")]
    RegistryFull,
    /// The segment is being removed by a garbage collector.
    #[error("segment is being removed")]
    Busy,
    /// A segment asked to be collected is open in a live process.
    #[error("segment {0} is open in a live process: only dead segments are collected")]
    InUse(String),
    /// The named segment no longer exists (e.g. removed while opening).
    #[error("segment not found")]
    NotFound,
    /// A lock operation failed.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// The file system behind the segment (`/dev/shm`, a tmpfs) has no room
    /// for memory that must be backed now (`fallocate` gave `ENOSPC`).
    #[error(
        "/dev/shm is full: {} asked, {} free (raise its size: `docker run --shm-size=2g`, a Kubernetes emptyDir with `medium: Memory`, or `mount -o remount,size=2G /dev/shm`)",
        human_bytes(*asked),
        free.map_or("unknown".to_owned(), human_bytes)
    )]
    NoSpace {
        /// Bytes that had to be backed.
        asked: u64,
        /// Bytes free in the file system then, when known.
        free: Option<u64>,
    },
}

/// `1536` as "1.5 KiB": binary units, one decimal.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if b < 1024 {
        return format!("{b} bytes");
    }
    let mut v = b as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

impl Error {
    pub(crate) fn sys(op: &'static str) -> impl FnOnce(io::Error) -> Error {
        move |source| Error::Sys { op, source }
    }

    /// A failed `fallocate` of `asked` bytes on `fd`: [`Error::NoSpace`]
    /// (with the free space of `fd`'s file system) when it was `ENOSPC`.
    pub(crate) fn fallocate(
        fd: std::os::fd::BorrowedFd<'_>,
        asked: u64,
    ) -> impl FnOnce(io::Error) -> Error + '_ {
        move |source| {
            if source.raw_os_error() == Some(rustix::io::Errno::NOSPC.raw_os_error()) {
                Error::NoSpace {
                    asked,
                    free: crate::sys::free_bytes(fd),
                }
            } else {
                Error::Sys {
                    op: "fallocate",
                    source,
                }
            }
        }
    }
}

/// Errors of lock operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// The lock is held by a live owner (`try_lock`).
    #[error("lock is held")]
    WouldBlock,
    /// The deadline passed before the lock was acquired.
    #[error("timed out waiting for the lock")]
    Timeout,
    /// This participant already holds the lock; locking again would deadlock.
    #[error("lock already held by this participant")]
    WouldDeadlock,
    /// The lock belongs to a different segment than the participant.
    #[error("lock is not inside the participant's segment")]
    ForeignLock,
}

/// Crate result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
