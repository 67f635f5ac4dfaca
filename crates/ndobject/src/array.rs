//! The [`Array`]: a type, per-dimension metadata, a data offset into a
//! memory block, and access flags.

use std::ptr::NonNull;

use dtype::{Type, TypeKind};

use crate::block::{BLOCK_ALIGN, MemoryBlock};
use crate::element::{Element, Storage};
use crate::error::{Error, Result};
use crate::flags::AccessFlags;
use crate::meta::{Meta, default_meta};
use crate::shape::{c_strides, element_count};

/// An N-dimensional array: a view of typed data in a [`MemoryBlock`].
///
/// The leading dimensions are strided (their sizes and byte strides are
/// the array's metadata); the element type below them is any fixed-size
/// [`dtype::Type`], possibly with `var` dimensions (ragged rows) and
/// variable-length strings, whose metadata entries hold their own block
/// references. Leading fixed dimensions (`3 * int32`) become strided
/// dimensions of the array. Cloning, indexing, slicing, transposing and reshaping
/// make new views of the same block; the block lives while any view does.
///
/// ```
/// use ndobject::{Array, Index};
/// let a = Array::from_slice(&[1i32, 2, 3, 4, 5, 6], &[2, 3])?;
/// assert_eq!(a.dtype().to_string(), "strided * strided * int32");
/// let row = a.index(1)?;                  // a view: no copy
/// assert_eq!(row.to_vec::<i32>()?, [4, 5, 6]);
/// assert_eq!(a.block().refcount(), 2);
/// let col = a.view(&[Index::all(), Index::at(-1)])?;
/// assert_eq!(col.to_vec::<i32>()?, [3, 6]);
/// drop(a);                                // views keep the data alive
/// assert_eq!(row.get::<i32>(&[2])?, 6);
/// # Ok::<(), ndobject::Error>(())
/// ```
///
/// # Invariants
///
/// Every `Array` satisfies these. `Array::checked` checks them (the
/// checks cite the numbers) and is the only place an `Array` value is made:
/// the private `Checked` field keeps every other module from writing an
/// `Array { .. }` literal or `..other` update. `Array::build` (which
/// first turns leading fixed dimensions of the element type into
/// dimensions) and every constructor and view go through it; the only
/// changes made after it are of the flags, in this module, and they only
/// take rights away (`restricted`) or record that the data was frozen
/// (`into_immutable`).
///
/// 1. `shape.len() == strides.len()`.
/// 2. The element type has a fixed data size, and `meta` holds exactly one
///    entry per entry of its `metadata_layout()`.
/// 3. Unless a dimension is 0, every element, whole, lies inside the
///    block: with `lo`/`hi` the lowest and highest byte any index reaches
///    from `offset` (negative strides included, computed in `i128`),
///    `0 <= lo` and `hi <= block.len()`.
/// 4. If a dimension is 0, `offset <= block.len()` and no byte is touched.
/// 5. Access flags only ever lose rights in views. They cannot grant
///    writing a block that is not writable: every write takes the block's
///    write guard, which refuses, so a wrong flag is an error, never a
///    write.
#[derive(Clone)]
pub struct Array {
    pub(crate) element: Type,
    pub(crate) shape: Vec<usize>,
    pub(crate) strides: Vec<isize>,
    pub(crate) offset: usize,
    pub(crate) block: MemoryBlock,
    pub(crate) flags: AccessFlags,
    /// The element type's metadata, in the order of its
    /// `metadata_layout()`: `var` dimensions, nested strided dimensions,
    /// and the pools of strings and bytes.
    pub(crate) meta: Vec<Meta>,
    /// Made only by [`Array::checked`].
    _checked: Checked,
}

/// Proof that an [`Array`] went through [`Array::checked`] (private: no
/// other module can make one).
#[derive(Clone, Copy)]
struct Checked;

impl std::fmt::Debug for Array {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Array")
            .field("dtype", &self.dtype().to_string())
            .field("shape", &self.shape)
            .field("strides", &self.strides)
            .field("offset", &self.offset)
            .field("flags", &self.flags)
            .field("block", &self.block)
            .finish()
    }
}

fn element_size(element: &Type) -> Result<usize> {
    element
        .data_size()
        .ok_or_else(|| Error::TypeMismatch(format!("element type {element} has no fixed size")))
}

impl Array {
    /// Checks the [invariants](Array#invariants) and builds the view.
    /// Leading fixed dimensions of `element`, and strided dimensions whose
    /// metadata leads `meta`, become dimensions of the array.
    pub(crate) fn build(
        block: MemoryBlock,
        offset: usize,
        mut element: Type,
        mut shape: Vec<usize>,
        mut strides: Vec<isize>,
        flags: AccessFlags,
        mut meta: Vec<Meta>,
    ) -> Result<Array> {
        loop {
            let (size, stride, inner) = match (element.kind(), meta.first()) {
                (
                    TypeKind::FixedDim {
                        size,
                        element: inner,
                    },
                    _,
                ) => (*size, element_size(inner)? as isize, inner.clone()),
                (TypeKind::StridedDim(inner), Some(Meta::Strided { size, stride })) => {
                    let dim = (*size, *stride, inner.clone());
                    meta.remove(0);
                    dim
                }
                _ => break,
            };
            shape.push(size);
            strides.push(stride);
            element = inner;
        }
        Array::checked(block, offset, element, shape, strides, flags, meta)
    }

    /// Checks the [invariants](Array#invariants) and makes the array, with
    /// exactly these parts: the one place an `Array` is made.
    pub(crate) fn checked(
        block: MemoryBlock,
        offset: usize,
        element: Type,
        shape: Vec<usize>,
        strides: Vec<isize>,
        flags: AccessFlags,
        meta: Vec<Meta>,
    ) -> Result<Array> {
        // Invariant 1.
        if shape.len() != strides.len() {
            return Err(Error::TypeMismatch(format!(
                "{} dimensions but {} strides",
                shape.len(),
                strides.len()
            )));
        }
        // Invariant 2.
        let elem = element_size(&element)?;
        if meta.len() != element.metadata_layout().len() {
            return Err(Error::TypeMismatch(format!(
                "{element} needs {} metadata entries, got {}",
                element.metadata_layout().len(),
                meta.len()
            )));
        }
        let block_len = block.len();
        // Invariant 3.
        if !shape.contains(&0) {
            let (mut lo, mut hi) = (offset as i128, offset as i128 + elem as i128);
            for (n, s) in shape.iter().zip(&strides) {
                let span = (*n as i128 - 1) * *s as i128;
                if span < 0 {
                    lo += span;
                } else {
                    hi += span;
                }
            }
            if lo < 0 || hi > block_len as i128 {
                return Err(Error::OutOfBlock {
                    offset,
                    len: (hi - lo).max(0) as usize,
                    block_len,
                });
            }
        }
        // Invariant 4: an array without elements never touches its data;
        // keep its offset inside the block all the same.
        let offset = if shape.contains(&0) {
            offset.min(block_len)
        } else {
            offset
        };
        Ok(Array {
            element,
            shape,
            strides,
            offset,
            block,
            flags,
            meta,
            _checked: Checked,
        })
    }

    /// This array keeping only those of its rights that `keep` names
    /// (invariant 5; invariants 1–4 do not involve the flags).
    pub(crate) fn restricted(&self, keep: AccessFlags) -> Array {
        let mut a = self.clone();
        a.flags = a.flags.intersection(keep);
        a
    }

    fn flags_for(block: &MemoryBlock) -> AccessFlags {
        if block.is_frozen() {
            AccessFlags::READ_IMMUTABLE
        } else if block.is_writable() {
            AccessFlags::READ_WRITE
        } else {
            AccessFlags::READ
        }
    }

    /// A zero-filled array of `element` values and the given shape
    /// (strings are empty, `var` dimensions have no elements). Every
    /// `var` dimension and string of the element type gets its own pool.
    pub fn zeros(element: Type, shape: &[usize]) -> Result<Array> {
        let mut meta = Vec::new();
        default_meta(&element, &mut meta)?;
        Array::alloc(element, shape, meta)
    }

    /// A zero-filled, C-contiguous array in a new block with the given
    /// element metadata.
    pub(crate) fn alloc(element: Type, shape: &[usize], meta: Vec<Meta>) -> Result<Array> {
        // SAFETY: zeroed memory is initialised.
        unsafe { Array::alloc_with(element, shape, meta, true) }
    }

    /// As [`Array::alloc`] without zeroing the data.
    ///
    /// # Safety
    ///
    /// The caller must write every byte of the array's data (all of its
    /// elements, C-contiguous over the whole block) before anything reads
    /// it, and must not hand the array out before that (on error, drop it).
    pub(crate) unsafe fn alloc_for_overwrite(
        element: Type,
        shape: &[usize],
        meta: Vec<Meta>,
    ) -> Result<Array> {
        // SAFETY: forwarded to the caller.
        unsafe { Array::alloc_with(element, shape, meta, false) }
    }

    /// # Safety
    ///
    /// With `zeroed` false, as for [`Array::alloc_for_overwrite`].
    unsafe fn alloc_with(
        element: Type,
        shape: &[usize],
        meta: Vec<Meta>,
        zeroed: bool,
    ) -> Result<Array> {
        let elem = element_size(&element)?;
        let bytes = element_count(shape)?
            .checked_mul(elem)
            .ok_or_else(|| Error::Overflow(format!("shape {shape:?}")))?;
        let strides = c_strides(shape, elem)?;
        let block = if zeroed {
            MemoryBlock::zeroed(bytes)?
        } else {
            // SAFETY: forwarded to the caller.
            unsafe { MemoryBlock::pod_for_overwrite(bytes)? }
        };
        Array::build(
            block,
            0,
            element,
            shape.to_vec(),
            strides,
            AccessFlags::READ_WRITE,
            meta,
        )
    }

    /// An array over `byte_offset..` of `block`, C-contiguous, of the given
    /// element type and shape. If the data address is not aligned for
    /// `element`, the array's element type is `unaligned[element]`.
    ///
    /// ```
    /// use ndobject::{Array, MemoryBlock};
    /// let block = MemoryBlock::from_owner(vec![0u8, 1, 0, 0, 0, 2, 0, 0, 0]);
    /// let a = Array::from_block(&block, 1, "int32".parse().unwrap(), &[2])?;
    /// assert_eq!(a.element_type().to_string(), "unaligned[int32]");
    /// assert_eq!(a.to_vec::<i32>()?, [1, 2]);
    /// # Ok::<(), ndobject::Error>(())
    /// ```
    pub fn from_block(
        block: &MemoryBlock,
        byte_offset: usize,
        element: Type,
        shape: &[usize],
    ) -> Result<Array> {
        if element.has_blockref() {
            return Err(Error::TypeMismatch(format!(
                "{element} refers to other memory; raw blocks hold plain data only"
            )));
        }
        let elem = element_size(&element)?;
        let strides = c_strides(shape, elem)?;
        let (base, _) = block.data_range()?;
        let addr = (base.as_ptr() as usize).wrapping_add(byte_offset);
        let element = if !addr.is_multiple_of(element.alignment()) {
            Type::unaligned(element).map_err(|e| Error::TypeMismatch(e.to_string()))?
        } else {
            element
        };
        Array::build(
            block.clone(),
            byte_offset,
            element,
            shape.to_vec(),
            strides,
            Array::flags_for(block),
            Vec::new(),
        )
    }

    /// An owned, writable, aligned array from the raw bytes of its
    /// elements in C order (copied once).
    pub fn from_bytes(element: Type, shape: &[usize], bytes: Vec<u8>) -> Result<Array> {
        let a = Array::zeros(element.clone(), shape)?;
        if !a.meta.is_empty() {
            return Err(Error::TypeMismatch(format!(
                "{element} refers to other memory; raw bytes hold plain data only"
            )));
        }
        let expected = a.byte_span();
        if bytes.len() != expected {
            return Err(Error::SizeMismatch {
                what: format!("{shape:?} of {element}"),
                expected,
                actual: bytes.len(),
            });
        }
        a.with_write(|base| {
            // SAFETY: `a` is C-contiguous over exactly `expected` bytes
            // starting at `base` (a fresh block of that size).
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), base.as_ptr(), expected) };
        })?;
        Ok(a)
    }

    /// An owned array holding a copy of `data` with the given shape.
    pub fn from_slice<T: Element>(data: &[T], shape: &[usize]) -> Result<Array> {
        let a = Array::zeros(Type::primitive(T::PRIMITIVE), shape)?;
        if data.len() != a.len() {
            return Err(Error::SizeMismatch {
                what: format!("shape {shape:?}"),
                expected: a.len(),
                actual: data.len(),
            });
        }
        a.with_write(|base| {
            // SAFETY: the block holds `data.len()` aligned (BLOCK_ALIGN)
            // elements of `T` contiguously from `base`; `T` is a primitive
            // with no padding.
            unsafe {
                std::ptr::copy_nonoverlapping(data.as_ptr(), base.as_ptr().cast::<T>(), data.len())
            };
        })?;
        Ok(a)
    }

    /// An owned, writable array over `data` itself: no copy, the `Vec`
    /// becomes the owner of an external block (as arrow's
    /// `Buffer::from_vec`) and is dropped with the last reference to it.
    ///
    /// ```
    /// use ndobject::{Array, BlockKind};
    /// let v = vec![1.0f32, 2.0, 3.0, 4.0];
    /// let addr = v.as_ptr() as usize;
    /// let a = Array::from_vec(v, &[2, 2])?;
    /// assert_eq!((a.data_address(), a.block().kind()), (addr, BlockKind::External));
    /// assert_eq!(a.get::<f32>(&[1, 0])?, 3.0);
    /// # Ok::<(), ndobject::Error>(())
    /// ```
    pub fn from_vec<T: Element>(mut data: Vec<T>, shape: &[usize]) -> Result<Array> {
        let numel = element_count(shape)?;
        if data.len() != numel {
            return Err(Error::SizeMismatch {
                what: format!("shape {shape:?}"),
                expected: numel,
                actual: data.len(),
            });
        }
        let len = std::mem::size_of_val(data.as_slice());
        let ptr = NonNull::new(data.as_mut_ptr().cast::<u8>()).unwrap_or(NonNull::dangling());
        // SAFETY: the `Vec`'s buffer (`len` bytes at `ptr`, aligned for
        // `T`) stays where it is when the `Vec` moves into the owner box,
        // and is freed only when the owner is dropped with the block.
        // Nothing else references it: the `Vec` is only ever dropped, which
        // reads no element (every `Element` type is plain data), so bytes
        // written through the block cannot be misread as `T`.
        let block = unsafe { MemoryBlock::from_raw_parts(ptr, len, true, Box::new(data)) };
        Array::from_block(&block, 0, Type::primitive(T::PRIMITIVE), shape)
    }

    /// A 0-dimensional array holding one value (embedded in its block).
    pub fn scalar<T: Element>(value: T) -> Array {
        // One element always fits in the embedded storage.
        Array::from_slice(&[value], &[]).unwrap_or_else(|_| unreachable!("a scalar always fits"))
    }

    /// The type below the strided dimensions.
    pub fn element_type(&self) -> &Type {
        &self.element
    }

    /// The whole type: `strided *` per dimension, then the element type.
    pub fn dtype(&self) -> Type {
        self.shape
            .iter()
            .fold(self.element.clone(), |t, _| Type::strided_dim(t))
    }

    /// Sizes of the dimensions.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Byte strides of the dimensions (may be negative or zero).
    pub fn strides(&self) -> &[isize] {
        &self.strides
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The access flags.
    pub fn flags(&self) -> AccessFlags {
        self.flags
    }

    /// The memory block that owns the data.
    pub fn block(&self) -> &MemoryBlock {
        &self.block
    }

    /// The pool of the element type's first `var` dimension or string, if
    /// any (each has its own: see [`Array::metadata_blocks`]).
    pub fn pool(&self) -> Option<&MemoryBlock> {
        self.meta.iter().find_map(Meta::block)
    }

    /// Byte offset of the first element within the block.
    pub fn byte_offset(&self) -> usize {
        self.offset
    }

    /// The data pointer's address (block start + offset), for display.
    pub fn data_address(&self) -> usize {
        self.block
            .data_range()
            .map(|(p, _)| p.as_ptr() as usize + self.offset)
            .unwrap_or(0)
    }

    pub(crate) fn elem_size(&self) -> usize {
        self.element.data_size().unwrap_or(0)
    }

    pub(crate) fn byte_span(&self) -> usize {
        self.len() * self.elem_size()
    }

    /// Whether elements are laid out densely in C order.
    pub fn is_c_contiguous(&self) -> bool {
        let mut expected = self.elem_size() as isize;
        for (n, s) in self.shape.iter().zip(&self.strides).rev() {
            if *n > 1 && *s != expected {
                return false;
            }
            expected *= *n as isize;
        }
        true
    }

    /// A view that may not be written.
    pub fn read_only(&self) -> Array {
        self.restricted(AccessFlags::READ.union(AccessFlags::IMMUTABLE))
    }

    /// Makes this array's data immutable for good: succeeds only when no
    /// other view or handle shares its memory block, so no one can write
    /// it any more; string pools only this array refers to are finalized.
    /// Gives the array back unchanged on failure.
    pub fn into_immutable(self) -> std::result::Result<Array, Array> {
        if self.flags.is_immutable() {
            return Ok(self);
        }
        if !self.block.freeze_unique(0) {
            return Err(self);
        }
        for p in self.metadata_blocks() {
            if p.refcount() == 1 && !p.is_frozen() {
                let _ = p.pool_finalize();
            }
        }
        let mut a = self;
        a.flags = AccessFlags::READ_IMMUTABLE;
        Ok(a)
    }

    /// Byte offsets of all elements, in C order.
    pub(crate) fn element_offsets(&self) -> Vec<usize> {
        let n = self.len();
        let mut out = Vec::with_capacity(n);
        if n == 0 {
            return out;
        }
        let nd = self.shape.len();
        let mut idx = vec![0usize; nd];
        let mut off = self.offset as isize;
        loop {
            out.push(off as usize);
            if !self.step_index(&mut idx[..nd], &mut off) {
                return out;
            }
        }
    }

    /// Advances `idx` (an index into the first `idx.len()` dimensions) to
    /// the next position in C order, moving the byte offset `off` along.
    /// Returns `false` after the last position (`idx` wraps to zeros).
    pub(crate) fn step_index(&self, idx: &mut [usize], off: &mut isize) -> bool {
        let mut d = idx.len();
        loop {
            if d == 0 {
                return false;
            }
            d -= 1;
            idx[d] += 1;
            *off += self.strides[d];
            if idx[d] < self.shape[d] {
                return true;
            }
            *off -= self.strides[d] * self.shape[d] as isize;
            idx[d] = 0;
        }
    }

    /// Byte offset of the element at `index` (one entry per dimension).
    pub(crate) fn offset_of(&self, index: &[usize]) -> Result<usize> {
        if index.len() != self.shape.len() {
            return Err(Error::InvalidIndex(format!(
                "{} indices for {} dimensions",
                index.len(),
                self.shape.len()
            )));
        }
        let mut off = self.offset as isize;
        for (dim, ((i, n), s)) in index.iter().zip(&self.shape).zip(&self.strides).enumerate() {
            if *i >= *n {
                return Err(Error::IndexOutOfRange {
                    index: *i as isize,
                    dim,
                    size: *n,
                });
            }
            off += *i as isize * *s;
        }
        Ok(off as usize)
    }

    /// Runs `f` with the block's base pointer under the read protocol.
    pub(crate) fn with_read<R>(&self, f: impl FnOnce(NonNull<u8>) -> R) -> Result<R> {
        if !self.flags.contains(AccessFlags::READ) {
            return Err(Error::NotWritable("the array has no read access"));
        }
        let (base, _) = self.block.data_range()?;
        let _guard = self.block.read_guard();
        Ok(f(base))
    }

    /// Runs `f` with the block's base pointer under the write protocol.
    pub(crate) fn with_write<R>(&self, f: impl FnOnce(NonNull<u8>) -> R) -> Result<R> {
        if self.flags.is_immutable() {
            return Err(Error::NotWritable("the array is immutable"));
        }
        if !self.flags.is_writable() {
            return Err(Error::NotWritable("the array is read-only"));
        }
        let (base, _) = self.block.data_range()?;
        let _guard = self.block.write_guard()?;
        Ok(f(base))
    }

    /// Runs `f` with `src`'s base pointer under its read protocol and
    /// `dst`'s under its write protocol, at once. The guards are taken in
    /// the order of the blocks' addresses, so two threads assigning in
    /// opposite directions cannot deadlock. The blocks must differ.
    pub(crate) fn with_read_write<R>(
        src: &Array,
        dst: &Array,
        f: impl FnOnce(NonNull<u8>, NonNull<u8>) -> R,
    ) -> Result<R> {
        if !src.flags.contains(AccessFlags::READ) {
            return Err(Error::NotWritable("the array has no read access"));
        }
        if dst.flags.is_immutable() {
            return Err(Error::NotWritable("the array is immutable"));
        }
        if !dst.flags.is_writable() {
            return Err(Error::NotWritable("the array is read-only"));
        }
        if src.block.ptr_eq(&dst.block) {
            return Err(Error::TypeMismatch(
                "internal: reading and writing one block at once".into(),
            ));
        }
        let (sb, _) = src.block.data_range()?;
        let (db, _) = dst.block.data_range()?;
        let (_r, _w) = if src.block.address() < dst.block.address() {
            let r = src.block.read_guard();
            (r, dst.block.write_guard()?)
        } else {
            let w = dst.block.write_guard()?;
            (src.block.read_guard(), w)
        };
        Ok(f(sb, db))
    }

    pub(crate) fn storage(&self) -> Result<Storage> {
        Storage::of(&self.element)
            .ok_or_else(|| Error::TypeMismatch(format!("{} is not a primitive type", self.element)))
    }

    /// Checks that this array's data start is aligned for its element type
    /// (true for every array this crate builds).
    pub fn is_aligned(&self) -> bool {
        self.data_address()
            .is_multiple_of(self.element.alignment().min(BLOCK_ALIGN))
    }
}
