//! `shm-core`: the bottom layer of the fastio data plane — shared-memory
//! segments, crash-robust cross-process locks, participant liveness,
//! cross-process reference counts, and cleanup.
//!
//! Everything above it (zero-copy sharing, read-only inputs, reference
//! counts across processes, "resources are freed when the pipeline ends")
//! rests on four promises, kept even when a process dies at any
//! instruction:
//!
//! * **No hang.** Locks are futex words in shared memory that record their
//!   owner. A waiter re-checks the owner's liveness every
//!   [`LIVENESS_TICK`]; a dead owner's lock is taken over and the new holder
//!   is told [`owner_died`](MutexGuard::owner_died) (like `EOWNERDEAD`).
//! * **Kernel-backed liveness.** Each [`Participant`] holds an OFD lock on
//!   its registry byte; the kernel drops it at death, so PID reuse cannot
//!   fake liveness.
//! * **No permanent leak.** Reference counts are per-participant entries, so
//!   a dead participant's holds are reclaimable exactly once
//!   ([`ShmRefCount::reclaim_dead`]); [`reap::gc`] unlinks segments nobody
//!   has open any more.
//! * **No undefined behaviour from bad bytes.** Headers are validated
//!   completely before use ([`header::validate`]), offsets are bounds-checked
//!   against the mapping ([`Segment::at`]), and lock/refcount words with
//!   garbage are treated as owned by a dead participant.
//!
//! Data is addressed by [`Offset`], never by pointer, because every process
//! maps a segment at a different address.
//!
//! # Example
//!
//! ```
//! use shm_core::{Segment, SegmentOptions, ShmMutex, ShmRefCount, Released};
//! use std::sync::atomic::{AtomicU64, Ordering};
//!
//! # fn main() -> Result<(), shm_core::Error> {
//! // A named segment with 64 KiB of data; unlinked when `seg` is dropped.
//! let seg = Segment::create(&SegmentOptions::new(64 * 1024).prefix("shmcore-doc"))?;
//! let me = seg.join()?;
//!
//! // Lay out a mutex, a counter and a reference count at fixed offsets.
//! let base = seg.data_offset().get();
//! let mutex: &ShmMutex = seg.at(base.into())?;
//! let counter: &AtomicU64 = seg.at((base + 64).into())?;
//! let rc: &ShmRefCount = seg.at((base + 128).into())?;
//!
//! {
//!     let guard = mutex.lock(&me)?;        // no syscall when uncontended
//!     assert!(!guard.owner_died());
//!     counter.fetch_add(1, Ordering::Relaxed);
//! }
//!
//! rc.init(&me)?;                           // one hold, owned by `me`
//! rc.acquire(&me)?;
//! assert_eq!(rc.count(), 2);
//! assert_eq!(rc.release(&me)?, Released::StillReferenced);
//! assert_eq!(rc.release(&me)?, Released::Reclaimed); // exactly once
//!
//! // Another process would do `Segment::open(name)` with this name.
//! assert!(seg.name().unwrap().starts_with("shmcore-doc-"));
//! # Ok(())
//! # }
//! ```

pub mod error;
mod event;
pub mod header;
mod mapping;
mod mutex;
pub mod offset;
mod participant;
pub mod reap;
mod refcount;
mod rwlock;
mod segment;
mod sync;
mod sys;

#[cfg(all(test, not(loom)))]
mod testenv;

#[cfg(all(test, loom))]
mod loom_models;

pub use error::{Error, HeaderError, LockError, RefCountError, Result};
pub use event::ShmEvent;
pub use header::HeaderInfo;
pub use mapping::{ReadOnlyView, ShmType};
pub use mutex::{MutexGuard, ShmMutex};
pub use offset::Offset;
pub use participant::{Participant, ParticipantInfo};
pub use reap::{SegmentInfo, gc, list_segments};
pub use refcount::{ReclaimReport, Released, ShmRefCount};
pub use rwlock::{ReadGuard, ShmRwLock, WriteGuard};
pub use segment::{Access, DEFAULT_PREFIX, Segment, SegmentOptions, validate_prefix};
pub use sync::LIVENESS_TICK;

/// Name prefix this crate's own tests use for named segments; after the
/// test suite, `list_segments(Some(TEST_PREFIX))` must be empty.
pub const TEST_PREFIX: &str = "shmcoretest";

/// Returns the segments named `<prefix>-…` that still exist in `/dev/shm`
/// (e.g. for a CI leak check after the test suite, with [`TEST_PREFIX`]).
pub fn leaked_segments(prefix: &str) -> Result<Vec<SegmentInfo>> {
    list_segments(Some(prefix))
}
