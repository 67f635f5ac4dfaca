//! `shm-core`: the bottom layer of the fastio data plane — shared-memory
//! segments, crash-robust cross-process locks and events, participant
//! liveness, and cleanup.
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
//!   its registry byte, which the kernel drops at death, and its slot
//!   records the joining process's PID and start time, so neither PID reuse
//!   nor a forked child that inherited the lock can fake liveness.
//! * **No permanent leak.** Whatever a dead participant owned is
//!   recognisable by its owner token, so a layer above can reclaim it
//!   exactly once (fastio's allocation tables do); [`gc`] unlinks
//!   segments nobody has open any more.
//! * **No undefined behaviour from bad bytes or from aliasing.** Headers
//!   are validated completely before use ([`header::validate`]), offsets are
//!   bounds-checked against the mapping ([`Segment::at`]), lock words with
//!   garbage are treated as owned by a dead participant, and typed
//!   references never reach the range a layer above lends out
//!   ([`Segment::lend_from`]).
//!
//! Data is addressed by [`Offset`], never by pointer, because every process
//! maps a segment at a different address.
//!
//! # Example
//!
//! ```
//! use shm_core::{Segment, SegmentOptions, ShmMutex};
//! use std::sync::atomic::{AtomicU64, Ordering};
//!
//! # fn main() -> Result<(), shm_core::Error> {
//! // A named segment with 64 KiB of data; unlinked when `seg` is dropped.
//! let seg = Segment::create(&SegmentOptions::new(64 * 1024).prefix("shmcore-doc"))?;
//! let me = seg.join()?;
//!
//! // Lay out a mutex and a counter at fixed offsets.
//! let base = seg.data_offset().get();
//! let mutex: &ShmMutex = seg.at(base.into())?;
//! let counter: &AtomicU64 = seg.at((base + 64).into())?;
//!
//! {
//!     let guard = mutex.lock(&me)?;        // no syscall when uncontended
//!     assert!(!guard.owner_died());
//!     counter.fetch_add(1, Ordering::Relaxed);
//! }
//! assert_eq!(counter.load(Ordering::Relaxed), 1);
//!
//! // Another process would do `Segment::open(name)` with this name.
//! assert!(seg.name().unwrap().starts_with("shmcore-doc-"));
//! # Ok(())
//! # }
//! ```

mod error;
mod event;
pub mod header;
mod mapping;
mod mutex;
mod offset;
mod participant;
mod reap;
pub mod ring;
mod segment;
mod shared;
mod sync;
mod sys;

#[cfg(all(test, not(loom)))]
mod testenv;

#[cfg(all(test, loom))]
mod loom_models;
#[cfg(all(test, loom))]
mod ring_loom;
#[cfg(all(test, not(loom)))]
mod ring_tests;

pub use error::{Error, HeaderError, LockError, Result, human_bytes};
pub use event::ShmEvent;
pub use mapping::{HUGE_PAGE, ReadOnlyView, ShmType};
pub use mutex::{MutexGuard, ShmMutex};
pub use offset::Offset;
pub use participant::{Participant, ParticipantInfo};
pub use reap::{SegmentInfo, escape_name, gc, gc_one, list_segments, shm_free_bytes};
pub use segment::{DEFAULT_PREFIX, Segment, SegmentOptions, validate_prefix};
pub use shared::Access;
pub use sync::LIVENESS_TICK;

/// Puts the calling thread under Linux's `SCHED_IDLE` policy: it then runs
/// only on CPU time no other thread of the machine wants, and threads it
/// starts afterwards inherit the policy. For work beside a pipeline that
/// must never take its cores, such as a lossy recorder or a monitor.
/// Undone only by a privileged thread.
pub fn run_only_when_idle() -> std::io::Result<()> {
    sys::sched_idle()
}
