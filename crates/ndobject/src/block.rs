//! Reference-counted memory blocks: the owners of array data.
//!
//! A [`MemoryBlock`] is an `Arc` around one of four kinds of storage:
//!
//! * **pod**: an aligned, zero-initialised heap allocation owned by the block;
//! * **embedded**: up to [`EMBED_BYTES`] bytes stored inline in the block's
//!   own allocation (scalars and small arrays: one allocation, not two);
//! * **external**: memory owned by something else (a `Vec`, a memory map, a
//!   shared-memory mapping), kept alive by holding its owner;
//! * **pool**: an append-only arena for the bytes of variable-length
//!   strings and `var` dimensions, addressed by offsets; it can be
//!   finalized, after which it never changes.
//!
//! # Access protocol
//!
//! Bytes of a block that can be written are only touched under the block's
//! reader-writer lock (a read guard to read, a write guard to write), and
//! only through raw pointers, never through references that outlive the
//! guard. A block nobody can write (read-only external memory, or a block
//! frozen by [`Array::into_immutable`](crate::Array::into_immutable)) needs
//! no lock, and only then may a `&[T]` into it be handed out.

use std::alloc::Layout;
use std::any::Any;
use std::cell::UnsafeCell;
use std::fmt::Write as _;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::error::{Error, Result};

/// Data of at most this many bytes is embedded in the block's allocation.
pub const EMBED_BYTES: usize = 64;
/// The alignment every block's data start has.
pub const BLOCK_ALIGN: usize = 16;

/// The kind of a [`MemoryBlock`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BlockKind {
    /// An owned heap allocation.
    Pod,
    /// Data inline in the block's own allocation.
    Embedded,
    /// Memory owned by another object.
    External,
    /// An append-only arena for variable-length data.
    Pool,
}

impl BlockKind {
    /// The kind's name as `debug_repr` prints it.
    pub const fn name(self) -> &'static str {
        match self {
            BlockKind::Pod => "pod",
            BlockKind::Embedded => "embedded",
            BlockKind::External => "external",
            BlockKind::Pool => "pool",
        }
    }
}

#[repr(C, align(16))]
struct Inline([u8; EMBED_BYTES]);

struct PoolData {
    words: Vec<u128>,
    len: usize,
}

enum Storage {
    Pod {
        ptr: NonNull<u8>,
        len: usize,
        layout: Layout,
    },
    Embedded {
        data: UnsafeCell<Inline>,
        len: usize,
    },
    External {
        ptr: NonNull<u8>,
        len: usize,
        /// Dropped (releasing the memory) when the block goes.
        _owner: Box<dyn Any + Send + Sync>,
        label: &'static str,
    },
    Pool(RwLock<PoolData>),
}

pub(crate) struct Block {
    storage: Storage,
    writable: bool,
    frozen: AtomicBool,
    lock: RwLock<()>,
}

// SAFETY: the raw pointers in `Storage` point at memory owned by the block
// (or by its boxed `Send + Sync` owner) for the block's whole life. All
// access to bytes that can be written goes through `lock` (see the module
// docs), so sharing the block between threads creates no data race.
unsafe impl Send for Block {}
// SAFETY: as for `Send`: shared access is serialised by `lock`.
unsafe impl Sync for Block {}

impl Drop for Block {
    fn drop(&mut self) {
        if let Storage::Pod { ptr, layout, .. } = &self.storage
            && layout.size() != 0
        {
            // SAFETY: `ptr` was returned by `alloc_zeroed(layout)` in
            // `MemoryBlock::pod` and is freed exactly once, here.
            unsafe { std::alloc::dealloc(ptr.as_ptr(), *layout) };
        }
    }
}

/// A reference-counted owner of array data. Cloning adds a reference.
#[derive(Clone)]
pub struct MemoryBlock(pub(crate) Arc<Block>);

impl std::fmt::Debug for MemoryBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBlock")
            .field("kind", &self.kind())
            .field("len", &self.len())
            .field("refcount", &self.refcount())
            .finish()
    }
}

impl MemoryBlock {
    fn new(storage: Storage, writable: bool) -> MemoryBlock {
        MemoryBlock(Arc::new(Block {
            storage,
            writable,
            frozen: AtomicBool::new(false),
            lock: RwLock::new(()),
        }))
    }

    /// A zero-filled, writable block of `len` bytes aligned to
    /// [`BLOCK_ALIGN`]: embedded when small, a heap allocation otherwise.
    pub fn zeroed(len: usize) -> Result<MemoryBlock> {
        if len <= EMBED_BYTES {
            return Ok(MemoryBlock::new(
                Storage::Embedded {
                    data: UnsafeCell::new(Inline([0; EMBED_BYTES])),
                    len,
                },
                true,
            ));
        }
        MemoryBlock::pod(len)
    }

    /// A zero-filled, writable heap block of `len` bytes (kind `pod`).
    pub fn pod(len: usize) -> Result<MemoryBlock> {
        // SAFETY: zeroed memory is initialised.
        unsafe { MemoryBlock::pod_with(len, true) }
    }

    /// A writable heap block of `len` bytes whose contents are not
    /// initialised, for a copy that overwrites all of it (no zeroing pass,
    /// which costs as much as the copy).
    ///
    /// # Safety
    ///
    /// Every byte must be written before any is read, and the block must
    /// not be handed to anyone before that.
    pub(crate) unsafe fn pod_for_overwrite(len: usize) -> Result<MemoryBlock> {
        if len <= EMBED_BYTES {
            return MemoryBlock::zeroed(len);
        }
        // SAFETY: the caller writes every byte before any read.
        unsafe { MemoryBlock::pod_with(len, false) }
    }

    /// # Safety
    ///
    /// With `zeroed` false, as for [`MemoryBlock::pod_for_overwrite`].
    unsafe fn pod_with(len: usize, zeroed: bool) -> Result<MemoryBlock> {
        let layout = Layout::from_size_align(len, BLOCK_ALIGN)
            .map_err(|_| Error::Overflow(format!("a block of {len} bytes")))?;
        let ptr = if len == 0 {
            NonNull::<Inline>::dangling().cast::<u8>()
        } else {
            // SAFETY: `layout` has a non-zero size (checked above).
            let raw = unsafe {
                if zeroed {
                    std::alloc::alloc_zeroed(layout)
                } else {
                    std::alloc::alloc(layout)
                }
            };
            NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout))
        };
        Ok(MemoryBlock::new(Storage::Pod { ptr, len, layout }, true))
    }

    /// A read-only external block over the bytes `owner` holds (a `Vec<u8>`,
    /// a `memmap2::Mmap`, ...). No copy; the owner is dropped when the
    /// last reference to the block goes.
    ///
    /// ```
    /// use ndobject::{BlockKind, MemoryBlock};
    /// let block = MemoryBlock::from_owner(vec![1u8, 2, 3]);
    /// assert_eq!((block.kind(), block.len(), block.is_writable()), (BlockKind::External, 3, false));
    /// ```
    pub fn from_owner<O: AsRef<[u8]> + Send + Sync + 'static>(owner: O) -> MemoryBlock {
        let owner = Box::new(owner);
        let bytes: &[u8] = (*owner).as_ref();
        let (ptr, len) = (NonNull::from(bytes).cast::<u8>(), bytes.len());
        MemoryBlock::external(ptr, len, owner, std::any::type_name::<O>(), false)
    }

    /// A writable external block over the bytes `owner` holds (a
    /// `Vec<u8>`, a `memmap2::MmapMut`, a shared-memory mapping).
    pub fn from_owner_mut<O: AsMut<[u8]> + Send + Sync + 'static>(owner: O) -> MemoryBlock {
        let mut owner = Box::new(owner);
        let bytes: &mut [u8] = (*owner).as_mut();
        let len = bytes.len();
        let ptr = NonNull::from(bytes).cast::<u8>();
        MemoryBlock::external(ptr, len, owner, std::any::type_name::<O>(), true)
    }

    /// A writable external block over memory this crate does not own,
    /// such as a mapping of shared memory made by another layer.
    ///
    /// # Safety
    ///
    /// `ptr..ptr + len` must be valid for reads (and, if `writable`, for
    /// writes) until `owner` is dropped, which happens when the last
    /// reference to the block goes. While the block exists, no `&mut` to
    /// that memory may be live elsewhere, and for a `writable` block no
    /// reference at all (shared `&[u8]` elsewhere are fine for a read-only
    /// block, as nobody writes through it).
    pub unsafe fn from_raw_parts(
        ptr: NonNull<u8>,
        len: usize,
        writable: bool,
        owner: Box<dyn Any + Send + Sync>,
    ) -> MemoryBlock {
        MemoryBlock::external(ptr, len, owner, "raw parts", writable)
    }

    fn external(
        ptr: NonNull<u8>,
        len: usize,
        owner: Box<dyn Any + Send + Sync>,
        label: &'static str,
        writable: bool,
    ) -> MemoryBlock {
        MemoryBlock::new(
            Storage::External {
                ptr,
                len,
                _owner: owner,
                label,
            },
            writable,
        )
    }

    /// An empty pool for variable-length data.
    pub fn pool() -> MemoryBlock {
        MemoryBlock::new(
            Storage::Pool(RwLock::new(PoolData {
                words: Vec::new(),
                len: 0,
            })),
            true,
        )
    }

    /// The block's kind.
    pub fn kind(&self) -> BlockKind {
        match self.0.storage {
            Storage::Pod { .. } => BlockKind::Pod,
            Storage::Embedded { .. } => BlockKind::Embedded,
            Storage::External { .. } => BlockKind::External,
            Storage::Pool(_) => BlockKind::Pool,
        }
    }

    /// Number of references to this block (arrays and block handles).
    pub fn refcount(&self) -> usize {
        Arc::strong_count(&self.0)
    }

    /// Size of the data in bytes.
    pub fn len(&self) -> usize {
        match &self.0.storage {
            Storage::Pod { len, .. }
            | Storage::Embedded { len, .. }
            | Storage::External { len, .. } => *len,
            Storage::Pool(p) => p.read().unwrap_or_else(PoisonError::into_inner).len,
        }
    }

    /// Whether the block holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether anyone may write the block's bytes.
    pub fn is_writable(&self) -> bool {
        self.0.writable && !self.is_frozen()
    }

    /// The block's bytes as a slice, when no one can write them: a
    /// read-only block (such as [`MemoryBlock::from_owner`] of a `Vec` or a
    /// memory map) or a frozen one. `None` for a writable block, whose
    /// bytes could change under the slice.
    ///
    /// ```
    /// use ndobject::MemoryBlock;
    /// assert_eq!(MemoryBlock::from_owner(vec![1u8, 2]).bytes(), Some(&[1u8, 2][..]));
    /// assert_eq!(MemoryBlock::zeroed(100)?.bytes(), None);
    /// # Ok::<(), ndobject::Error>(())
    /// ```
    pub fn bytes(&self) -> Option<&[u8]> {
        if self.is_writable() {
            return None;
        }
        let (base, len) = self.data_range().ok()?;
        // SAFETY: `base..base + len` is the block's data, valid while the
        // block (borrowed by `&self`) lives; nobody can write it (a
        // read-only or frozen block refuses write guards, and the contract
        // of `from_raw_parts` excludes writers elsewhere).
        Some(unsafe { std::slice::from_raw_parts(base.as_ptr(), len) })
    }

    /// Whether the block was frozen (made immutable for good).
    pub fn is_frozen(&self) -> bool {
        self.0.frozen.load(Ordering::Acquire)
    }

    /// Whether two handles refer to the same block.
    pub fn ptr_eq(&self, other: &MemoryBlock) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The block's address (for `debug_repr`).
    pub fn address(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// Makes the block immutable for good. Succeeds only when this is the
    /// only reference, so no writable view can exist.
    pub(crate) fn freeze_unique(&self, other_refs: usize) -> bool {
        if Arc::strong_count(&self.0) > 1 + other_refs {
            return false;
        }
        self.0.frozen.store(true, Ordering::Release);
        true
    }

    /// Start and length of the block's bytes. Pools must be finalized.
    pub(crate) fn data_range(&self) -> Result<(NonNull<u8>, usize)> {
        match &self.0.storage {
            Storage::Pod { ptr, len, .. } | Storage::External { ptr, len, .. } => Ok((*ptr, *len)),
            Storage::Embedded { data, len } => Ok((
                NonNull::new(data.get().cast::<u8>()).unwrap_or(NonNull::dangling()),
                *len,
            )),
            Storage::Pool(p) => {
                if !self.is_frozen() {
                    return Err(Error::Pool(
                        "not finalized; views into it need a finalized pool",
                    ));
                }
                let p = p.read().unwrap_or_else(PoisonError::into_inner);
                let ptr = NonNull::new(p.words.as_ptr().cast_mut().cast::<u8>())
                    .unwrap_or(NonNull::dangling());
                Ok((ptr, p.len))
            }
        }
    }

    /// A guard to hold while reading the block's bytes, or `None` when no
    /// one can write them.
    pub(crate) fn read_guard(&self) -> Option<RwLockReadGuard<'_, ()>> {
        if self.is_writable() {
            Some(self.0.lock.read().unwrap_or_else(PoisonError::into_inner))
        } else {
            None
        }
    }

    /// The guard to hold while writing the block's bytes.
    pub(crate) fn write_guard(&self) -> Result<RwLockWriteGuard<'_, ()>> {
        if !self.0.writable {
            return Err(Error::NotWritable("the memory block is read-only"));
        }
        if self.is_frozen() {
            return Err(Error::NotWritable("the memory block is immutable"));
        }
        Ok(self.0.lock.write().unwrap_or_else(PoisonError::into_inner))
    }

    /// Appends `bytes` to a pool at the given alignment (at most 16) and
    /// returns their offset.
    pub fn pool_append(&self, bytes: &[u8], align: usize) -> Result<u64> {
        let Storage::Pool(pool) = &self.0.storage else {
            return Err(Error::Pool("not a pool"));
        };
        if self.is_frozen() {
            return Err(Error::Pool("finalized; it cannot grow"));
        }
        let mut p = pool.write().unwrap_or_else(PoisonError::into_inner);
        let start = p
            .len
            .checked_next_multiple_of(align.clamp(1, 16))
            .ok_or_else(|| Error::Overflow("pool offset".into()))?;
        let end = start
            .checked_add(bytes.len())
            .ok_or_else(|| Error::Overflow("pool size".into()))?;
        let words = end.div_ceil(16);
        if words > p.words.len() {
            let grow = words.max(p.words.len() * 2);
            p.words.resize(grow, 0);
        }
        let base = p.words.as_mut_ptr().cast::<u8>();
        // SAFETY: `words` holds at least `end` bytes (resized above), the
        // destination range `start..end` lies inside it, and the source is
        // a separate slice; we hold the pool's write lock.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), base.add(start), bytes.len()) };
        p.len = end;
        Ok(start as u64)
    }

    /// Finalizes a pool: it can no longer grow, and views may point into it.
    pub fn pool_finalize(&self) -> Result<()> {
        match &self.0.storage {
            Storage::Pool(p) => {
                let mut p = p.write().unwrap_or_else(PoisonError::into_inner);
                let words = p.len.div_ceil(16);
                p.words.truncate(words);
                p.words.shrink_to_fit();
                self.0.frozen.store(true, Ordering::Release);
                Ok(())
            }
            _ => Err(Error::Pool("not a pool")),
        }
    }

    /// Copies `len` bytes at `offset` out of the block, bounds-checked.
    pub fn read_bytes(&self, offset: u64, len: u64) -> Result<Vec<u8>> {
        let block_len = self.len();
        let out_of = || Error::OutOfBlock {
            offset: offset as usize,
            len: len as usize,
            block_len,
        };
        let start = usize::try_from(offset).map_err(|_| out_of())?;
        let n = usize::try_from(len).map_err(|_| out_of())?;
        let end = start
            .checked_add(n)
            .filter(|e| *e <= block_len)
            .ok_or_else(out_of)?;
        let mut out = vec![0u8; end - start];
        if let Storage::Pool(p) = &self.0.storage {
            let p = p.read().unwrap_or_else(PoisonError::into_inner);
            // SAFETY: `start..end` is within `p.len`, which never exceeds
            // the bytes in `p.words`; we hold the pool's read lock.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    p.words.as_ptr().cast::<u8>().add(start),
                    out.as_mut_ptr(),
                    n,
                )
            };
            return Ok(out);
        }
        let (ptr, _) = self.data_range()?;
        let _guard = self.read_guard();
        // SAFETY: `start..end` is within the block (checked above); the read
        // guard (or the block being unwritable) excludes concurrent writes.
        unsafe { std::ptr::copy_nonoverlapping(ptr.as_ptr().add(start), out.as_mut_ptr(), n) };
        Ok(out)
    }

    /// The block's `debug_repr` lines, indented by `indent` spaces.
    pub fn debug_repr(&self, indent: usize) -> String {
        let pad = " ".repeat(indent);
        let mut s = String::new();
        let _ = writeln!(s, "{pad}------ memory_block at {:016x}", self.address());
        let _ = writeln!(s, "{pad} reference count: {}", self.refcount());
        let _ = writeln!(s, "{pad} type: {}", self.kind().name());
        match &self.0.storage {
            Storage::External { ptr, label, .. } => {
                let _ = writeln!(s, "{pad} object pointer: {:016x}", ptr.as_ptr() as usize);
                let _ = writeln!(s, "{pad} owner: {label}");
                let _ = writeln!(s, "{pad} size: {}", self.len());
            }
            Storage::Pool(_) => {
                let state = if self.is_frozen() {
                    "finalized"
                } else {
                    "allocated"
                };
                let _ = writeln!(s, "{pad} {state}: {}", self.len());
            }
            _ => {
                let _ = writeln!(s, "{pad} size: {}", self.len());
            }
        }
        if self.is_frozen() {
            let _ = writeln!(s, "{pad} immutable");
        }
        let _ = writeln!(s, "{pad}------");
        s
    }
}
