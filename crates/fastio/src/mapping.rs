//! Access to an allocation's bytes: guards for byte slices and `ndobject`
//! arrays over the shared memory itself. As in `memmap2`, `map` reads and
//! `map_mut` writes.
//!
//! Read access is a page protection, not only a type: every process maps
//! the context a second time, `PROT_READ`, when it attaches, and read
//! mappings ([`Mapped`], [`Allocation::map_as_ndobject`]) hand out
//! addresses in that view. A pointer taken from them (through C, Python or
//! a cast) faults with `SIGSEGV` when written through. The view is made
//! once per process, so mapping for reading stays free of system calls.
//!
//! With three exceptions this is the only module with `unsafe`: the
//! engine (`engine.rs`) empties reclaimed blocks (`discard_range`, under
//! the context mutex), streams (`stream/mod.rs`) take slot slices from
//! [`RingRegion`] under the ring's protocol, and the unit tests
//! (`context_tests.rs`, test builds only) scribble on a segment to test
//! recovery. The argument, used by every block below:
//!
//! * **Validity.** Every process maps the whole context segment once, for
//!   as long as any [`Shared`](crate::engine::Shared) of it exists; each
//!   pointer here comes from `Segment::ptr`, which bounds-checks the range
//!   against that mapping, and each guard or array owner keeps the
//!   `Shared` (through its `Allocation`) alive. The memory is never
//!   unmapped or shrunk while a guard exists. A block reclaimed and emptied
//!   by another process reads as zeros, it does not fault; and it cannot be
//!   reclaimed while we hold a reference to it.
//! * **Aliasing.** A write mapping is registered in the shared tables only
//!   when no other mapping of the allocation exists in any process, and no
//!   read or write mapping can be registered while it exists; read
//!   mappings exclude write mappings the same way. So while a
//!   [`MappedMut`] lives, no other reference made through this library, in
//!   any process, sees those bytes, and while a [`Mapped`] lives nobody
//!   writes them through this library. (A process that writes the shared
//!   memory without the library is outside what any mapping API can
//!   promise, as for files under `memmap2`.)
//! * **Private allocations.** [`Allocation::map_mut`] of an allocation
//!   that is still *private* (made by this handle's `create`, and since
//!   then not published, cloned or mapped any other way; `private_off`)
//!   registers nothing: no other handle to its record exists in any
//!   process (nobody can `get` it without a name, and clones and arrays
//!   would have ended the privacy first), and the guard's `&mut` borrow
//!   excludes every other use of this handle while it lives. So the
//!   aliasing argument above holds without the tables, and the handoff's
//!   producer saves two round trips of the context lock.

use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use ndobject::{Array, MemoryBlock};

use crate::allocation::Allocation;
use crate::error::{Error, Result};

/// Which kind of mapping to register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
}

/// Registers a mapping of `alloc` and returns the bytes' address: in the
/// read-only view for [`Kind::Read`], in the read-write one otherwise.
fn register(alloc: &Allocation, kind: Kind) -> Result<(NonNull<u8>, usize)> {
    alloc.end_private();
    let id = alloc.id;
    let (off, size) = alloc.shared.with_table_retry(|l| {
        match kind {
            Kind::Read => l.t.map_read(id, l.me)?,
            Kind::Write => l.t.map_write(id, l.me)?,
        }
        let (size, off, _) = l.t.extent(id)?;
        Ok((off, size))
    })?;
    let undo = |e: Error| {
        unregister(alloc, kind);
        e
    };
    let len = usize::try_from(size).map_err(|_| undo(Error::corrupt("size exceeds memory")))?;
    let ptr = alloc
        .shared
        .heap_ptr(off, size, kind == Kind::Write)
        .map_err(undo)?;
    Ok((ptr, len))
}

fn unregister(alloc: &Allocation, kind: Kind) {
    let id = alloc.id;
    let _ = alloc.shared.with_table(|l| match kind {
        Kind::Read => l.t.unmap_read(id, l.me),
        Kind::Write => l.t.unmap_write(id, l.me),
    });
}

/// Read access to an allocation's bytes; unmaps on drop. No process can
/// map the allocation for writing while this exists.
pub struct Mapped<'a> {
    alloc: &'a Allocation,
    ptr: NonNull<u8>,
    len: usize,
}

/// Read-write access to an allocation's bytes; unmaps on drop. No other
/// mapping of the allocation exists in any process while this exists.
pub struct MappedMut<'a> {
    alloc: &'a mut Allocation,
    ptr: NonNull<u8>,
    len: usize,
    /// Whether the mapping is in the shared tables (not for a private
    /// allocation: module docs).
    registered: bool,
}

/// A read mapping of a published allocation that owns its reference:
/// [`Context::map`](crate::Context::map) takes both in one round trip of the
/// context lock, and dropping it gives both back in one. The bytes are in
/// the `PROT_READ` view, as for [`Mapped`].
pub struct MappedPublished {
    alloc: Allocation,
    ptr: NonNull<u8>,
    len: usize,
}

impl MappedPublished {
    pub(crate) fn new(alloc: Allocation, off: u64, size: u64) -> Result<MappedPublished> {
        let unmap = |alloc: Allocation, e: Error| {
            unregister(&alloc, Kind::Read);
            e
        };
        let len = match usize::try_from(size) {
            Ok(len) => len,
            Err(_) => return Err(unmap(alloc, Error::corrupt("size exceeds memory"))),
        };
        let ptr = match alloc.shared.heap_ptr(off, size, false) {
            Ok(ptr) => ptr,
            Err(e) => return Err(unmap(alloc, e)),
        };
        Ok(MappedPublished { alloc, ptr, len })
    }

    /// The allocation's bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: as for `Mapped::bytes`: the range is inside the live
        // mapping while `self.alloc` (and so the segment) lives, and the
        // read registration excludes writers in every process.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The reference this mapping holds (its element type, dimensions,
    /// size; its `map_as_ndobject` for an array view).
    pub fn allocation(&self) -> &Allocation {
        &self.alloc
    }
}

impl Deref for MappedPublished {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.bytes()
    }
}

impl MappedPublished {
    /// Unmaps and [`free`](Allocation::free)s the allocation in one round
    /// trip of the context lock: the consumer's "done" (its names go, and
    /// a producer in [`Context::wait_unpublished`] wakes up).
    ///
    /// [`Context::wait_unpublished`]: crate::Context::wait_unpublished
    pub fn free(mut self) -> Result<()> {
        self.alloc.unmap_and_drop(true)
    }
}

impl Drop for MappedPublished {
    fn drop(&mut self) {
        let _ = self.alloc.unmap_and_drop(false);
    }
}

// SAFETY: as for `Mapped`: only `&[u8]` is handed out, over memory owned
// by the (Send + Sync) context.
unsafe impl Send for MappedPublished {}
// SAFETY: as above.
unsafe impl Sync for MappedPublished {}

impl Allocation {
    /// Maps the memory for reading, from this process's `PROT_READ` view of
    /// the context (writing through the address faults). Fails with
    /// [`Error::MapConflict`] while any process has it mapped for writing,
    /// and with [`Error::Freed`] after it was freed. No system call.
    pub fn map(&self) -> Result<Mapped<'_>> {
        let (ptr, len) = register(self, Kind::Read)?;
        Ok(Mapped {
            alloc: self,
            ptr,
            len,
        })
    }

    /// Maps the memory for reading and writing, exclusively: fails fast
    /// with [`Error::MapConflict`] while any other mapping exists anywhere.
    pub fn map_mut(&mut self) -> Result<MappedMut<'_>> {
        if let Some(off) = self.private_off() {
            // Private: nothing to register (module docs).
            let len =
                usize::try_from(self.size()).map_err(|_| Error::corrupt("size exceeds memory"))?;
            let ptr = self.shared.heap_ptr(off, self.size(), true)?;
            return Ok(MappedMut {
                alloc: self,
                ptr,
                len,
                registered: false,
            });
        }
        let (ptr, len) = register(self, Kind::Write)?;
        Ok(MappedMut {
            alloc: self,
            ptr,
            len,
            registered: true,
        })
    }

    /// A read-only `ndobject` array of this allocation's type and
    /// dimensions whose data is the shared memory itself, in the
    /// `PROT_READ` view, shared like [`map`](Allocation::map). Its memory
    /// block holds its own reference and the mapping, so the array (and its
    /// views) outlive `self`.
    pub fn map_as_ndobject(&self) -> Result<Array> {
        self.array(Kind::Read)
    }

    /// As [`map_as_ndobject`](Allocation::map_as_ndobject), writable and
    /// exclusive like [`map_mut`](Allocation::map_mut).
    pub fn map_as_ndobject_mut(&self) -> Result<Array> {
        self.array(Kind::Write)
    }

    fn array(&self, kind: Kind) -> Result<Array> {
        let alloc = self.try_clone()?;
        let (ptr, len) = register(&alloc, kind)?;
        let element = alloc.element_type().clone();
        let shape = alloc.dimensions().to_vec();
        let owner = ArrayOwner { alloc, kind };
        // SAFETY: `ptr..ptr + len` is inside the context mapping (checked by
        // `heap_ptr`) and stays mapped while `owner` lives, because `owner`
        // holds an `Allocation`, which keeps the segment's `Shared` (and so
        // the mapping) and a reference to the memory (so it is never
        // reclaimed or reused). The block drops `owner` when its last user
        // goes, which unregisters the mapping. Aliasing is excluded by the
        // registration (module docs): with `Kind::Write` no other mapping
        // exists anywhere; with `Kind::Read` the block is read-only and no
        // writer can exist.
        let block =
            unsafe { MemoryBlock::from_raw_parts(ptr, len, kind == Kind::Write, Box::new(owner)) };
        Ok(Array::from_block(&block, 0, element, &shape)?)
    }
}

/// What an array's memory block owns: a reference and a mapping.
struct ArrayOwner {
    alloc: Allocation,
    kind: Kind,
}

impl Drop for ArrayOwner {
    fn drop(&mut self) {
        unregister(&self.alloc, self.kind);
    }
}

impl Mapped<'_> {
    /// The allocation's bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: see the module docs: the range is inside the live mapping
        // for as long as `self.alloc` is borrowed, and no writer exists
        // while this read mapping is registered.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// Unmaps (the same as dropping the guard).
    pub fn unmap(self) {}
}

impl MappedMut<'_> {
    /// The allocation's bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: as in `bytes_mut`; a shared borrow of the guard only
        // hands out shared access.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The allocation's bytes, writable.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: the range is inside the live mapping (module docs), the
        // write registration excludes every other mapping in every process,
        // and `&mut self` makes this the only slice made from this guard.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// Unmaps (the same as dropping the guard).
    pub fn unmap(self) {}
}

impl Deref for Mapped<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.bytes()
    }
}

impl Deref for MappedMut<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.bytes()
    }
}

impl DerefMut for MappedMut<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.bytes_mut()
    }
}

impl Drop for Mapped<'_> {
    fn drop(&mut self) {
        unregister(self.alloc, Kind::Read);
    }
}

impl Drop for MappedMut<'_> {
    fn drop(&mut self) {
        if self.registered {
            unregister(self.alloc, Kind::Write);
        }
    }
}

// SAFETY: the guards hand out slices with the same thread-safety as
// `&[u8]` / `&mut [u8]`; the pointer is into shared memory owned by the
// (Send + Sync) context.
unsafe impl Send for Mapped<'_> {}
// SAFETY: as above; `&Mapped` only yields `&[u8]`.
unsafe impl Sync for Mapped<'_> {}
// SAFETY: as above; `MappedMut` is the unique accessor of its bytes.
unsafe impl Send for MappedMut<'_> {}
// SAFETY: as above; `&MappedMut` only yields `&[u8]`.
unsafe impl Sync for MappedMut<'_> {}

impl std::fmt::Debug for Mapped<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mapped").field("len", &self.len).finish()
    }
}

impl std::fmt::Debug for MappedMut<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedMut").field("len", &self.len).finish()
    }
}

impl std::fmt::Debug for MappedPublished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedPublished")
            .field("allocation", &self.alloc)
            .field("len", &self.len)
            .finish()
    }
}

/// The memory of a stream's ring (module `stream`): a read mapping
/// registered in the shared tables, so that no process can map the
/// allocation for writing through the table API while any stream handle
/// exists, with the addresses of the bytes in both views. Who may write
/// which bytes of it is decided by the ring's own protocol
/// (`shm_core::ring`, invariants 1 to 4), not by the tables; the stream's
/// name lies in a namespace that `Context::get` and `map` refuse, so no
/// other handle can reach it.
pub(crate) struct RingRegion {
    alloc: Allocation,
    rw: NonNull<u8>,
    ro: NonNull<u8>,
    len: usize,
}

impl RingRegion {
    /// Registers the read mapping of `alloc` (a stream's allocation).
    pub(crate) fn new(alloc: Allocation) -> Result<RingRegion> {
        alloc.end_private();
        let id = alloc.id;
        let (off, size) = alloc.shared.with_table_retry(|l| {
            l.t.map_read(id, l.me)?;
            let (size, off, _) = l.t.extent(id)?;
            Ok((off, size))
        })?;
        let pointers = (|| {
            let len = usize::try_from(size).map_err(|_| Error::corrupt("size exceeds memory"))?;
            let rw = alloc.shared.heap_ptr(off, size, true)?;
            let ro = alloc.shared.heap_ptr(off, size, false)?;
            if rw.as_ptr().align_offset(8) != 0 {
                return Err(Error::corrupt("a stream's memory is not 8-byte aligned"));
            }
            Ok((rw, ro, len))
        })();
        match pointers {
            Ok((rw, ro, len)) => Ok(RingRegion { alloc, rw, ro, len }),
            Err(e) => {
                unregister(&alloc, Kind::Read);
                Err(e)
            }
        }
    }

    /// The region's length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The first `n` 64-bit words, as atomics (the ring's control words).
    pub(crate) fn words(&self, n: usize) -> Result<&[std::sync::atomic::AtomicU64]> {
        if n.checked_mul(8).is_none_or(|b| b > self.len) {
            return Err(Error::corrupt("stream control words exceed its memory"));
        }
        // SAFETY: `rw..rw + 8n` is inside the live read-write mapping of
        // the segment (checked above and by `heap_ptr`), 8-byte aligned
        // (checked in `new`), and stays mapped while `self.alloc` keeps
        // the segment's `Shared`. Every process touches these words only
        // as atomics, which may alias across processes.
        Ok(unsafe {
            std::slice::from_raw_parts(self.rw.as_ptr().cast::<std::sync::atomic::AtomicU64>(), n)
        })
    }

    /// The event at byte `off` (8-byte aligned, two 32-bit words).
    pub(crate) fn event(&self, off: usize) -> Result<&shm_core::ShmEvent> {
        if !off.is_multiple_of(8) || off.checked_add(8).is_none_or(|e| e > self.len) {
            return Err(Error::corrupt("stream event outside its memory"));
        }
        // SAFETY: in bounds and aligned (checked), inside the live mapping
        // as in `words`; `ShmEvent` is two atomics (`repr(C)`), shared by
        // design.
        Ok(unsafe { &*self.rw.as_ptr().add(off).cast::<shm_core::ShmEvent>() })
    }

    /// Copies `len` bytes at `off` that the stream's producer may be
    /// writing meanwhile (an observer's copy, ring invariant 6: the caller
    /// checks afterwards that the slot still held its frame, and drops
    /// the copy otherwise). Read as relaxed atomics, never as a `&[u8]`.
    pub(crate) fn copy_racy(&self, off: usize, len: usize) -> Result<Vec<u8>> {
        use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
        let end = off
            .checked_add(len)
            .filter(|&e| e <= self.len)
            .ok_or_else(|| Error::corrupt("frame outside its stream's memory"))?;
        let mut out = Vec::with_capacity(len);
        let mut at = off;
        // Every load below: `at..end` lies inside the live read-write
        // mapping (checked above; kept mapped by `self.alloc`). Atomics may
        // alias what another process writes; no reference to plain bytes
        // is made. The 8-byte loads are aligned: the region is (checked in
        // `new`) and `at` is advanced to a multiple of 8 first.
        while at < end && !at.is_multiple_of(8) {
            // SAFETY: in bounds (above); a byte needs no alignment.
            let b = unsafe { &*self.rw.as_ptr().add(at).cast::<AtomicU8>() };
            out.push(b.load(Ordering::Relaxed));
            at += 1;
        }
        let words = (end - at) / 8;
        let start = out.len();
        out.resize(start + words * 8, 0);
        for chunk in out[start..].chunks_exact_mut(8) {
            // SAFETY: in bounds (`at + 8 <= end`: `words` whole words fit
            // before `end`) and 8-byte aligned (above).
            let w = unsafe { &*self.rw.as_ptr().add(at).cast::<AtomicU64>() };
            chunk.copy_from_slice(&w.load(Ordering::Relaxed).to_ne_bytes());
            at += 8;
        }
        while at < end {
            // SAFETY: in bounds (`at < end`); a byte needs no alignment.
            let b = unsafe { &*self.rw.as_ptr().add(at).cast::<AtomicU8>() };
            out.push(b.load(Ordering::Relaxed));
            at += 1;
        }
        Ok(out)
    }

    /// `len` bytes at `off` in the `PROT_READ` view.
    ///
    /// # Safety
    ///
    /// No `&mut` to these bytes may exist while the slice lives: the
    /// ring's protocol must have given the caller a frame in them
    /// (`shm_core::ring`, invariants 3 and 4).
    pub(crate) unsafe fn bytes(&self, off: usize, len: usize) -> Result<&[u8]> {
        if off.checked_add(len).is_none_or(|e| e > self.len) {
            return Err(Error::corrupt("frame outside its stream's memory"));
        }
        // SAFETY: in bounds of the live read-only view; aliasing is the
        // caller's contract.
        Ok(unsafe { std::slice::from_raw_parts(self.ro.as_ptr().add(off), len) })
    }

    /// `len` bytes at `off` in the read-write view.
    ///
    /// # Safety
    ///
    /// No other reference to these bytes may exist while the slice lives,
    /// in any process: the ring's protocol must have given the caller the
    /// slot to write (`shm_core::ring`, invariants 2 to 4).
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn bytes_mut(&self, off: usize, len: usize) -> Result<&mut [u8]> {
        if off.checked_add(len).is_none_or(|e| e > self.len) {
            return Err(Error::corrupt("slot outside its stream's memory"));
        }
        // SAFETY: in bounds of the live read-write mapping; exclusivity is
        // the caller's contract.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.rw.as_ptr().add(off), len) })
    }

    /// The allocation behind the region.
    pub(crate) fn allocation(&self) -> &Allocation {
        &self.alloc
    }
}

impl Drop for RingRegion {
    fn drop(&mut self) {
        unregister(&self.alloc, Kind::Read);
    }
}

// SAFETY: the region hands out atomics and, under the ring's protocol,
// byte slices over memory owned by the (Send + Sync) context.
unsafe impl Send for RingRegion {}
// SAFETY: as above.
unsafe impl Sync for RingRegion {}
