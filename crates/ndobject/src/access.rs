//! Typed element access and bulk reads: get/set, `to_vec`, `as_slice`,
//! C-order byte streams and contiguous copies.

use dtype::TypeKind;

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
        if !matches!(self.element.kind(), TypeKind::Primitive(p) if *p == T::PRIMITIVE) {
            return Err(Error::TypeMismatch(format!(
                "as_slice::<{}> needs aligned native {} elements, not {}",
                T::PRIMITIVE,
                T::PRIMITIVE,
                self.element
            )));
        }
        if !self.is_c_contiguous() {
            return Err(Error::TypeMismatch(
                "as_slice needs a C-contiguous array".into(),
            ));
        }
        if self.block.is_writable() {
            return Err(Error::NotWritable(
                "as_slice needs memory no one can write; use into_immutable() or to_vec()",
            ));
        }
        let (base, _) = self.block.data_range()?;
        // SAFETY: the element type is `T`'s primitive, aligned (a plain
        // primitive type is only given to aligned data), contiguous over
        // `len()` elements inside the block; the block cannot be written by
        // anyone (checked above) and lives as long as `self`.
        Ok(unsafe {
            std::slice::from_raw_parts(base.as_ptr().add(self.offset).cast::<T>(), self.len())
        })
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

    /// The raw bytes of the elements in C order.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.byte_span());
        // Writing to a Vec cannot fail; a read-access error gives no bytes.
        let _ = self.write_c_order(&mut out);
        out
    }

    /// A C-contiguous, aligned, writable copy in a new block. An
    /// `unaligned[T]` element type becomes `T`.
    pub fn to_contiguous(&self) -> Array {
        let element = match self.element.kind() {
            TypeKind::Unaligned(inner) => inner.clone(),
            _ => self.element.clone(),
        };
        let bytes = self.to_bytes();
        let mut copy = Array::zeros(element.clone(), &self.shape)
            .unwrap_or_else(|_| unreachable!("the source's shape and element fit"));
        copy.pool = self.pool.clone();
        let _ = copy.with_write(|base| {
            // SAFETY: the new block holds exactly `bytes.len()` bytes.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), base.as_ptr(), bytes.len()) }
        });
        copy
    }
}
