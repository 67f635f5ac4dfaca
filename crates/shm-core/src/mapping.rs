//! Mappings: the `mmap` call, the read-only view, and the [`ShmType`]
//! marker for what may be referenced inside a segment.

use std::fmt;
use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use memmap2::{MmapOptions, MmapRaw};

use crate::error::{Error, Result};
use crate::offset::{Offset, check_range};
use crate::shared::{Access, Shared};

/// Maps `len` bytes of `fd` shared, read-write or read-only.
pub(crate) fn map(fd: &OwnedFd, len: u64, access: Access) -> Result<MmapRaw> {
    let len = usize::try_from(len)
        .map_err(|_| Error::InvalidSize("reservation exceeds address space"))?;
    let mut opts = MmapOptions::new();
    opts.len(len);
    let raw = fd.as_raw_fd();
    let map = match access {
        Access::ReadWrite => opts.map_raw(raw),
        Access::ReadOnly => opts.map_raw_read_only(raw),
    }
    .map_err(Error::sys("mmap"))?;
    if len >= HUGE_PAGE as usize && crate::sys::shmem_huge() != crate::sys::ShmemHuge::Never {
        // Best effort: where the system gives shared memory huge pages
        // (`advise` asks for this), large blocks are committed and faulted
        // in 2 MiB at a time (fastio places them on 2 MiB boundaries).
        // SAFETY: the whole range is the mapping just made.
        let _ = unsafe { crate::sys::advise_huge(map.as_mut_ptr(), len) };
    }
    Ok(map)
}

/// The transparent huge page size of x86-64 and most aarch64 kernels:
/// blocks that are multiples of it, placed on its boundaries, can be
/// backed by huge pages where the system allows them for shared memory.
pub const HUGE_PAGE: u64 = 2 << 20;

/// Types that may be placed in a segment and referenced from several
/// processes at once.
///
/// # Safety
///
/// Implementors must be valid for every bit pattern (zero in particular),
/// have no `Drop` glue, and only be mutated through atomic operations
/// (shared references from many processes must be sound).
pub unsafe trait ShmType: Sync {}

// SAFETY: all fields are atomics; any bit pattern is a valid (possibly
// "owned by a dead/invalid token") state that the algorithms handle.
#[cfg(not(loom))]
unsafe impl ShmType for crate::ShmMutex {}
// SAFETY: as above.
#[cfg(not(loom))]
unsafe impl ShmType for crate::ShmEvent {}
// SAFETY: atomics are valid for any bit pattern.
unsafe impl ShmType for std::sync::atomic::AtomicU32 {}
// SAFETY: atomics are valid for any bit pattern.
unsafe impl ShmType for std::sync::atomic::AtomicU64 {}
// SAFETY: atomics are valid for any bit pattern.
unsafe impl ShmType for std::sync::atomic::AtomicI64 {}

/// A read-only (`PROT_READ`) mapping of a segment.
pub struct ReadOnlyView {
    map: MmapRaw,
    shared: Arc<Shared>,
}

impl fmt::Debug for ReadOnlyView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadOnlyView")
            .field("len", &self.map.len())
            .finish()
    }
}

impl ReadOnlyView {
    pub(crate) fn new(shared: Arc<Shared>) -> Result<ReadOnlyView> {
        Ok(ReadOnlyView {
            map: map(&shared.fd, shared.info.max_total_len, Access::ReadOnly)?,
            shared,
        })
    }

    /// Bounds-checked pointer to `len` bytes at `offset` of the data region.
    /// Writing through it faults (`SIGSEGV`).
    pub fn ptr(&self, offset: Offset, len: u64) -> Result<NonNull<u8>> {
        let end = self.shared.valid_len.load(Ordering::Acquire);
        let off = check_range(offset, len, 1, self.shared.info.data_offset, end)?;
        // SAFETY: `off` is inside this mapping (same reservation length as
        // the shared one, bounds checked against the accessible length).
        Ok(unsafe { NonNull::new_unchecked(self.map.as_mut_ptr().add(off)) })
    }
}
