//! Typed element access and bulk reads: get/set, `to_vec`, `as_slice`,
//! C-order byte streams and contiguous copies.

use std::ptr::NonNull;

use dtype::{Primitive, TypeKind};

use crate::array::Array;
use crate::element::{Element, Scalar};
use crate::error::{Error, Result};

impl Array {
    /// The element at `index`, widened to a [`Scalar`].
    pub fn get_scalar(&self, index: &[usize]) -> Result<Scalar> {
        let storage = self.storage()?;
        let off = self.offset_of(index)?;
        let mut buf = [0u8; 16];
        let n = storage.primitive.size();
        self.with_read(|base| {
            // SAFETY: `off..off + n` is inside the block (checked when the
            // view was built, and `offset_of` bounds-checks the index).
            unsafe { std::ptr::copy_nonoverlapping(base.as_ptr().add(off), buf.as_mut_ptr(), n) }
        })?;
        Ok(storage.decode(&buf))
    }

    /// The element at `index` as a `T`, whose primitive must be the
    /// element type's (seen through byte order and alignment).
    pub fn get<T: Element>(&self, index: &[usize]) -> Result<T> {
        self.check_primitive::<T>()?;
        Ok(T::from_scalar(self.get_scalar(index)?))
    }

    /// Stores `value` at `index`.
    pub fn set<T: Element>(&self, index: &[usize], value: T) -> Result<()> {
        self.check_primitive::<T>()?;
        let storage = self.storage()?;
        let off = self.offset_of(index)?;
        let mut buf = [0u8; 16];
        storage.encode(value.to_scalar(), &mut buf);
        let n = storage.primitive.size();
        self.with_write(|base| {
            // SAFETY: `off..off + n` is inside the block (see `get_scalar`);
            // we hold the block's write guard.
            unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), base.as_ptr().add(off), n) }
        })
    }

    fn check_primitive<T: Element>(&self) -> Result<()> {
        match self.storage()?.primitive {
            p if p == T::PRIMITIVE => Ok(()),
            p => Err(Error::TypeMismatch(format!(
                "elements are {p}, not {}",
                T::PRIMITIVE
            ))),
        }
    }

    /// All elements in C order, from any layout.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.check_primitive::<T>()?;
        let storage = self.storage()?;
        let n = storage.primitive.size();
        let offsets = self.element_offsets();
        let mut buf = [0u8; 16];
        self.with_read(|base| {
            offsets
                .iter()
                .map(|off| {
                    // SAFETY: every offset from `element_offsets` addresses
                    // an element inside the block (checked at build time).
                    unsafe {
                        std::ptr::copy_nonoverlapping(base.as_ptr().add(*off), buf.as_mut_ptr(), n)
                    };
                    T::from_scalar(storage.decode(&buf))
                })
                .collect()
        })
    }

    /// The elements as a slice: only when the array is C-contiguous,
    /// aligned, native-endian, of primitive `T`, and no one can write the
    /// memory (immutable or read-only external data).
    pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
        let first = self.shared_elements::<T>()?;
        if !self.is_c_contiguous() {
            return Err(Error::TypeMismatch(
                "as_slice needs a C-contiguous array".into(),
            ));
        }
        if self.is_empty() {
            return Ok(&[]);
        }
        // SAFETY: `shared_elements` checked that `T` may be read from
        // these elements and that no one can write them while `self`
        // lives; they are `len()` contiguous, aligned `T`s from `first`.
        Ok(unsafe { std::slice::from_raw_parts(first.as_ptr(), self.len()) })
    }

    /// Checks that the elements may be read as `T` through shared
    /// references that live as long as `self`, and returns the pointer to
    /// element `[0, 0, ...]`: the element type is `T`'s primitive (so
    /// native-endian and aligned: a plain primitive type is only given to
    /// aligned data), no one can write the block (read-only external data,
    /// or frozen by `into_immutable` or a finalized pool), and for `bool`
    /// every byte is 0 or 1.
    pub(crate) fn shared_elements<T: Element>(&self) -> Result<NonNull<T>> {
        self.check_native::<T>()?;
        if self.block.is_writable() {
            return Err(Error::NotWritable(
                "borrowing elements needs memory no one can write; use into_immutable() or to_vec()",
            ));
        }
        let (base, _) = self.block.data_range()?;
        // Nobody can write the block, so the bytes checked stay valid.
        self.check_bools::<T>(base)?;
        // SAFETY: `offset` lies inside the block (checked when the view was
        // built; an empty view's offset is at most the block's length).
        Ok(unsafe { base.add(self.offset) }.cast::<T>())
    }

    /// Checks that the element type is `T`'s primitive: aligned and in
    /// native byte order.
    pub(crate) fn check_native<T: Element>(&self) -> Result<()> {
        if matches!(self.element.kind(), TypeKind::Primitive(p) if *p == T::PRIMITIVE) {
            return Ok(());
        }
        Err(Error::TypeMismatch(format!(
            "borrowing needs aligned native {} elements, not {}",
            T::PRIMITIVE,
            self.element
        )))
    }

    /// For `T = bool`, checks that every element's byte is 0 or 1 (any
    /// other byte is not a valid `bool`). The caller makes sure nobody
    /// writes the block meanwhile.
    pub(crate) fn check_bools<T: Element>(&self, base: NonNull<u8>) -> Result<()> {
        if T::PRIMITIVE != Primitive::Bool {
            return Ok(());
        }
        for off in self.element_offsets() {
            // SAFETY: every offset from `element_offsets` addresses an
            // element inside the block; nobody writes it (see above).
            if unsafe { base.add(off).read() } > 1 {
                return Err(Error::TypeMismatch(format!(
                    "the byte at offset {off} is not a valid bool"
                )));
            }
        }
        Ok(())
    }

    /// Writes the raw bytes of the elements in C order to `w`, in bounded
    /// chunks (no full copy in memory).
    pub fn write_c_order<W: std::io::Write>(&self, w: &mut W) -> std::io::Result<()> {
        const CHUNK: usize = 1 << 16;
        let elem = self.elem_size();
        let io = |e: Error| std::io::Error::other(e.to_string());
        if self.is_c_contiguous() {
            let total = self.byte_span();
            let mut buf = vec![0u8; CHUNK.min(total)];
            let mut done = 0;
            while done < total {
                let n = CHUNK.min(total - done);
                self.with_read(|base| {
                    // SAFETY: `offset + done .. + n` lies in the contiguous
                    // span of the array, inside the block.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            base.as_ptr().add(self.offset + done),
                            buf.as_mut_ptr(),
                            n,
                        )
                    }
                })
                .map_err(io)?;
                w.write_all(&buf[..n])?;
                done += n;
            }
            return Ok(());
        }
        let offsets = self.element_offsets();
        let per = (CHUNK / elem.max(1)).max(1);
        let mut buf = Vec::with_capacity(per * elem);
        for chunk in offsets.chunks(per) {
            buf.clear();
            buf.resize(chunk.len() * elem, 0);
            self.with_read(|base| {
                for (i, off) in chunk.iter().enumerate() {
                    // SAFETY: each offset addresses an element inside the block.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            base.as_ptr().add(*off),
                            buf.as_mut_ptr().add(i * elem),
                            elem,
                        )
                    }
                }
            })
            .map_err(io)?;
            w.write_all(&buf)?;
        }
        Ok(())
    }

    /// The raw bytes of the elements in C order. An array without read
    /// access is an error.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut out = vec![0u8; self.byte_span()];
        // SAFETY: `out` has room for `byte_span()` bytes and is not in the
        // block; `gather` runs under the read protocol.
        self.with_read(|base| unsafe { self.gather(base, out.as_mut_ptr()) })?;
        Ok(out)
    }

    /// A C-contiguous, aligned, writable copy in a new block. An
    /// `unaligned[T]` element type becomes `T`. An array without read
    /// access is an error.
    pub fn to_contiguous(&self) -> Result<Array> {
        let element = match self.element.kind() {
            TypeKind::Unaligned(inner) => inner.clone(),
            _ => self.element.clone(),
        };
        // SAFETY: `gather` below writes all `byte_span()` bytes, the whole
        // block, before `copy` is returned; on error it is dropped unread.
        let copy = unsafe { Array::alloc_for_overwrite(element, &self.shape, self.meta.clone())? };
        // `copy` is new: no other handle reaches its block, so holding its
        // write guard inside this array's read guard cannot deadlock.
        self.with_read(|src| {
            copy.with_write(|dst| {
                // SAFETY: the new block holds exactly `byte_span()` bytes
                // and is not this array's block; we hold both guards.
                unsafe { self.gather(src, dst.as_ptr()) }
            })
        })??;
        Ok(copy)
    }

    /// Copies the elements' bytes in C order to `dst`, a row of the last
    /// dimension at a time.
    ///
    /// # Safety
    ///
    /// `base` is the start of this array's block, read under the read
    /// protocol ([`Array::with_read`]); `dst` is valid for `byte_span()`
    /// bytes of writes and does not overlap the block.
    pub(crate) unsafe fn gather(&self, base: NonNull<u8>, dst: *mut u8) {
        let elem = self.elem_size();
        if self.is_empty() {
            return;
        }
        if self.is_c_contiguous() {
            // SAFETY: the elements are the `byte_span()` bytes from
            // `offset`, inside the block (checked when the view was built).
            unsafe {
                std::ptr::copy_nonoverlapping(base.as_ptr().add(self.offset), dst, self.byte_span())
            };
            return;
        }
        let nd = self.shape.len();
        // Not contiguous, so there is at least one dimension.
        let (n, stride) = (self.shape[nd - 1], self.strides[nd - 1]);
        let mut idx = vec![0usize; nd - 1];
        let mut off = self.offset as isize;
        let mut out = dst;
        loop {
            // SAFETY: `off` is the offset of the first element of a row and
            // the row's `n` elements lie `stride` bytes apart inside the
            // block (bounds-checked when the view was built); `out` has
            // room for the row, as `dst` has for all rows in C order.
            unsafe {
                let src = base.as_ptr().offset(off);
                match elem {
                    _ if stride == elem as isize => {
                        std::ptr::copy_nonoverlapping(src, out, n * elem)
                    }
                    1 => copy_row::<1>(src, stride, n, out),
                    2 => copy_row::<2>(src, stride, n, out),
                    4 => copy_row::<4>(src, stride, n, out),
                    8 => copy_row::<8>(src, stride, n, out),
                    16 => copy_row::<16>(src, stride, n, out),
                    _ => {
                        for i in 0..n {
                            std::ptr::copy_nonoverlapping(
                                src.offset(i as isize * stride),
                                out.add(i * elem),
                                elem,
                            );
                        }
                    }
                }
                out = out.add(n * elem);
            }
            // Next row: advance the index of the outer dimensions.
            if !self.step_index(&mut idx[..nd - 1], &mut off) {
                return;
            }
        }
    }
}

/// Copies `n` elements of `N` bytes, `stride` bytes apart from `src`, to
/// consecutive places from `dst`.
///
/// # Safety
///
/// `src + i * stride` is readable for `N` bytes for each `i < n`, and so is
/// every byte between two of those elements (they lie in one memory
/// block); `dst` is writable for `n * N` bytes; the two do not overlap.
unsafe fn copy_row<const N: usize>(src: *const u8, stride: isize, n: usize, dst: *mut u8) {
    let mut done = 0;
    if stride == 2 * N as isize {
        // Every other element (`a[::2]`): whole runs of 8 source elements
        // in one load, 4 kept, which the compiler turns into shuffles.
        // `done + 4 < n`: element `done + 4` exists, so the 8 * N bytes read
        // from element `done` (which end just before it) are in the row.
        while done + 4 < n {
            // SAFETY: see the loop condition; `dst` has room for the 4
            // elements `done..done + 4` (the caller's contract).
            unsafe {
                let run = src
                    .offset(done as isize * stride)
                    .cast::<[[u8; N]; 8]>()
                    .read_unaligned();
                dst.add(done * N)
                    .cast::<[[u8; N]; 4]>()
                    .write_unaligned([run[0], run[2], run[4], run[6]]);
            }
            done += 4;
        }
    }
    for i in done..n {
        // SAFETY: the caller's contract; unaligned reads and writes of a
        // byte array need no alignment.
        unsafe {
            let v = src
                .offset(i as isize * stride)
                .cast::<[u8; N]>()
                .read_unaligned();
            dst.add(i * N).cast::<[u8; N]>().write_unaligned(v);
        }
    }
}
