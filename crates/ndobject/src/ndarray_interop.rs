//! Conversions between [`Array`] and `ndarray` arrays (feature `ndarray`).
//!
//! # Soundness
//!
//! An `ndarray` view is a set of Rust references to the elements, so it
//! may exist only while no one writes them (shared) or no one else reads
//! or writes them (mutable). The crate's access protocol (see the crate
//! docs) gives exactly that:
//!
//! * [`Array::as_ndarray`] lends `ArrayView<'_, T>` for as long as the
//!   array is borrowed, only for memory **no one can write**: the same
//!   check as [`Array::as_slice`] (read-only external data, a block frozen
//!   by [`Array::into_immutable`], or a finalized pool), without the
//!   contiguity requirement.
//! * [`Array::with_ndarray`] and [`Array::with_ndarray_mut`] work on any
//!   readable (writable) array: they hold the block's read (write) guard
//!   while the closure runs, and the view cannot leave the closure (its
//!   lifetime is the closure's argument's), so no write (no other access)
//!   through this crate can happen meanwhile. A closure that touches
//!   another array of the same block from the same thread blocks or
//!   panics on the lock instead of racing.
//! * The element type must be `T`'s primitive: native byte order, and
//!   aligned (plain primitive types are only given to aligned data, and
//!   strides that are not a multiple of `T`'s size are rejected). For
//!   `bool`, every byte is checked to be 0 or 1 first, under the guard.
//! * A mutable view's elements must not overlap (no zero strides across
//!   more than one element), or two `&mut T` would alias.
//!
//! `ndarray` takes strides in elements and requires non-negative strides
//! when building a view from a pointer, so an axis with a negative byte
//! stride is built from its lowest-addressed element and then inverted
//! with `invert_axis`, which gives the same elements in the same order.

use std::mem::size_of;

use ::ndarray::{ArrayBase, ArrayView, ArrayViewMut, Axis, Data, Dimension, IxDyn, ShapeBuilder};
use dtype::Type;

use crate::array::Array;
use crate::block::MemoryBlock;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::flags::AccessFlags;

/// The elements' layout in `ndarray`'s terms.
struct Layout {
    shape: Vec<usize>,
    /// Absolute element strides (0 for axes of at most one element).
    strides: Vec<usize>,
    /// Byte offset from element `[0, 0, ...]` to the lowest-addressed one.
    low: isize,
    /// Axes whose byte stride is negative.
    flipped: Vec<usize>,
}

fn shape_error(e: ::ndarray::ShapeError) -> Error {
    Error::TypeMismatch(format!("ndarray: {e}"))
}

/// A vector of elements lent to a memory block as bytes.
struct ElementBytes<T>(Vec<T>);

impl<T: Element> AsRef<[u8]> for ElementBytes<T> {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `T` is a primitive without padding, so all its
        // `len * size_of::<T>()` bytes are initialized and readable as `u8`.
        unsafe {
            std::slice::from_raw_parts(self.0.as_ptr().cast::<u8>(), self.0.len() * size_of::<T>())
        }
    }
}

impl<T: Element> AsMut<[u8]> for ElementBytes<T> {
    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for `as_ref`; the vector is never read as `T` again
        // (the block only copies bytes, and dropping a `Vec` of primitives
        // does not read them), so any bytes may be written.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.0.as_mut_ptr().cast::<u8>(),
                self.0.len() * size_of::<T>(),
            )
        }
    }
}

impl Array {
    fn layout<T: Element>(&self) -> Result<Layout> {
        let size = size_of::<T>() as isize;
        let mut layout = Layout {
            shape: self.shape.clone(),
            strides: Vec::with_capacity(self.shape.len()),
            low: 0,
            flipped: Vec::new(),
        };
        for (axis, (n, s)) in self.shape.iter().zip(&self.strides).enumerate() {
            if *n <= 1 {
                layout.strides.push(0);
                continue;
            }
            if s % size != 0 {
                return Err(Error::TypeMismatch(format!(
                    "stride {s} of axis {axis} is not a multiple of the element size {size}"
                )));
            }
            if *s < 0 {
                layout.flipped.push(axis);
                layout.low += (*n as isize - 1) * s;
            }
            layout.strides.push((s / size).unsigned_abs());
        }
        Ok(layout)
    }

    /// Checks that no two elements overlap, so each may be lent as `&mut`.
    fn check_disjoint(&self) -> Result<()> {
        if self.is_empty() {
            return Ok(());
        }
        let mut dims: Vec<(usize, usize)> = self
            .shape
            .iter()
            .zip(&self.strides)
            .filter(|(n, _)| **n > 1)
            .map(|(n, s)| (s.unsigned_abs(), *n))
            .collect();
        dims.sort_unstable();
        // Bytes spanned by the dimensions seen so far.
        let mut extent = self.elem_size();
        for (stride, n) in dims {
            if stride < extent {
                return Err(Error::TypeMismatch(
                    "a mutable ndarray view needs elements that do not overlap".into(),
                ));
            }
            extent += (n - 1) * stride;
        }
        Ok(())
    }

    /// A zero-copy `ndarray` view of the elements, for as long as `self` is
    /// borrowed: only when the element type is `T`'s primitive (aligned,
    /// native-endian) and no one can write the memory, like
    /// [`Array::as_slice`] but for any strides, negative ones included.
    /// Use [`Array::with_ndarray`] for writable arrays.
    ///
    /// ```
    /// use ndobject::{Array, Index};
    /// let a = Array::from_slice(&[1i32, 2, 3, 4, 5, 6], &[2, 3])?.into_immutable().unwrap();
    /// let v = a.view(&[Index::all(), Index::slice(None, None, -1)])?.transpose();
    /// let nd = v.as_ndarray::<i32>()?;
    /// assert_eq!(nd.shape(), [3, 2]);
    /// assert_eq!(nd.iter().copied().collect::<Vec<_>>(), v.to_vec::<i32>()?);
    /// # Ok::<(), ndobject::Error>(())
    /// ```
    pub fn as_ndarray<T: Element>(&self) -> Result<ArrayView<'_, T, IxDyn>> {
        let first = self.shared_elements::<T>()?;
        let layout = self.layout::<T>()?;
        if self.is_empty() {
            return ArrayView::from_shape(IxDyn(&self.shape), &[]).map_err(shape_error);
        }
        // SAFETY: `shared_elements` checked the type and that no one can
        // write the block while `self` (which keeps it alive) is borrowed;
        // the layout describes this array's elements, all inside the block.
        Ok(unsafe { view(first.as_ptr(), layout) })
    }

    /// Runs `f` with a zero-copy `ndarray` view of the elements, holding
    /// the block's read guard meanwhile: for any readable array whose
    /// element type is `T`'s primitive. `f` must not write arrays of the
    /// same block (their write would wait for the guard).
    pub fn with_ndarray<T: Element, R>(
        &self,
        f: impl FnOnce(ArrayView<'_, T, IxDyn>) -> R,
    ) -> Result<R> {
        self.check_native::<T>()?;
        let layout = self.layout::<T>()?;
        self.with_read(|base| {
            self.check_bools::<T>(base)?;
            if self.is_empty() {
                return Ok(f(
                    ArrayView::from_shape(IxDyn(&self.shape), &[]).map_err(shape_error)?
                ));
            }
            // SAFETY: `offset` addresses element `[0, ...]` inside the block.
            let first = unsafe { base.add(self.offset) }.cast::<T>();
            // SAFETY: the type was checked; the read guard (or the block
            // being unwritable) excludes writes while `f` runs, and the
            // view cannot outlive `f`.
            Ok(f(unsafe { view(first.as_ptr(), layout) }))
        })?
    }

    /// Runs `f` with a zero-copy mutable `ndarray` view of the elements,
    /// holding the block's write guard meanwhile: for a writable array
    /// whose element type is `T`'s primitive and whose elements do not
    /// overlap. `f` must not touch arrays of the same block.
    ///
    /// ```
    /// use ndobject::{Array, Index};
    /// let a = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
    /// let col = a.view(&[Index::slice(None, None, -1), Index::at(1)])?;
    /// col.with_ndarray_mut::<f32, _>(|mut v| v.mapv_inplace(|x| x * 10.0))?;
    /// assert_eq!(a.to_vec::<f32>()?, [1.0, 20.0, 3.0, 40.0]);
    /// # Ok::<(), ndobject::Error>(())
    /// ```
    pub fn with_ndarray_mut<T: Element, R>(
        &self,
        f: impl FnOnce(ArrayViewMut<'_, T, IxDyn>) -> R,
    ) -> Result<R> {
        self.check_native::<T>()?;
        let layout = self.layout::<T>()?;
        self.check_disjoint()?;
        self.with_write(|base| {
            self.check_bools::<T>(base)?;
            if self.is_empty() {
                return Ok(f(
                    ArrayViewMut::from_shape(IxDyn(&self.shape), &mut []).map_err(shape_error)?
                ));
            }
            // SAFETY: `offset` addresses element `[0, ...]` inside the block.
            let first = unsafe { base.add(self.offset) }.cast::<T>();
            // SAFETY: the type was checked and the elements do not overlap;
            // the write guard excludes every other access through this
            // crate while `f` runs, and the view cannot outlive `f`.
            Ok(f(unsafe { view_mut(first.as_ptr(), layout) }))
        })?
    }

    /// An array holding a copy of an `ndarray` array's elements (in logical
    /// order, from any layout).
    pub fn from_ndarray<T: Element, S: Data<Elem = T>, D: Dimension>(
        a: &ArrayBase<S, D>,
    ) -> Result<Array> {
        let values: Vec<T> = a.iter().copied().collect();
        Array::from_slice(&values, a.shape())
    }

    /// A writable array over an owned `ndarray` array's memory, without
    /// copying: the vector becomes an external block (released when the
    /// last view goes), with the array's strides, negative ones included.
    ///
    /// ```
    /// use ndobject::{Array, BlockKind};
    /// let nd = ndarray::Array::from_shape_vec((2, 3), vec![1u16, 2, 3, 4, 5, 6]).unwrap();
    /// let a = Array::from_ndarray_owned(nd.reversed_axes())?;
    /// assert_eq!(a.block().kind(), BlockKind::External);
    /// assert_eq!(a.to_vec::<u16>()?, [1, 4, 2, 5, 3, 6]);
    /// # Ok::<(), ndobject::Error>(())
    /// ```
    pub fn from_ndarray_owned<T: Element, D: Dimension>(
        a: ::ndarray::Array<T, D>,
    ) -> Result<Array> {
        let size = size_of::<T>();
        let shape = a.shape().to_vec();
        let strides = a
            .strides()
            .iter()
            .map(|s| s.checked_mul(size as isize))
            .collect::<Option<Vec<isize>>>()
            .ok_or_else(|| Error::Overflow(format!("strides of shape {shape:?}")))?;
        let (values, first) = a.into_raw_vec_and_offset();
        let offset = first.unwrap_or(0) * size;
        let block = MemoryBlock::from_owner_mut(ElementBytes(values));
        Array::build(
            block,
            offset,
            Type::primitive(T::PRIMITIVE),
            shape,
            strides,
            AccessFlags::READ_WRITE,
            Vec::new(),
        )
    }
}

/// A view over the non-empty elements that `layout` describes from `first`.
///
/// # Safety
///
/// The elements are valid, aligned `T`s inside one allocation, and no one
/// writes them during `'a`.
unsafe fn view<'a, T>(first: *const T, layout: Layout) -> ArrayView<'a, T, IxDyn> {
    let shape = IxDyn(&layout.shape).strides(IxDyn(&layout.strides));
    // SAFETY: `low` moves from element `[0, ...]` to the lowest-addressed
    // element, inside the same allocation (the caller's contract).
    let low = unsafe { first.byte_offset(layout.low) };
    // SAFETY: from `low`, the non-negative strides reach exactly the
    // elements (the caller's contract).
    let mut v = unsafe { ArrayView::from_shape_ptr(shape, low) };
    for axis in layout.flipped {
        v.invert_axis(Axis(axis));
    }
    v
}

/// A mutable view over the non-empty elements that `layout` describes.
///
/// # Safety
///
/// As for [`view`], and the elements do not overlap and no one else reads
/// or writes them during `'a`.
unsafe fn view_mut<'a, T>(first: *mut T, layout: Layout) -> ArrayViewMut<'a, T, IxDyn> {
    let shape = IxDyn(&layout.shape).strides(IxDyn(&layout.strides));
    // SAFETY: as in `view`.
    let low = unsafe { first.byte_offset(layout.low) };
    // SAFETY: as in `view`; the elements are disjoint and unaliased (the
    // caller's contract).
    let mut v = unsafe { ArrayViewMut::from_shape_ptr(shape, low) };
    for axis in layout.flipped {
        v.invert_axis(Axis(axis));
    }
    v
}

#[cfg(test)]
mod tests {
    use ::ndarray::{Array2, s};

    use crate::{Array, Error, Index, MemoryBlock};

    #[test]
    fn views_match_to_vec_for_negative_and_transposed_strides() {
        let a = Array::from_slice(&(0..12).collect::<Vec<i64>>(), &[3, 4])
            .unwrap()
            .into_immutable()
            .unwrap();
        let views = [
            a.clone(),
            a.transpose(),
            a.view(&[
                Index::slice(None, None, -1),
                Index::slice(Some(3), None, -2),
            ])
            .unwrap(),
            a.view(&[Index::slice(None, None, -2)]).unwrap().transpose(),
            a.view(&[Index::at(1)]).unwrap(),
            a.view(&[Index::slice(Some(5), None, 1)]).unwrap(),
        ];
        for v in &views {
            let nd = v.as_ndarray::<i64>().unwrap();
            assert_eq!(nd.shape(), v.shape());
            assert_eq!(
                nd.iter().copied().collect::<Vec<_>>(),
                v.to_vec::<i64>().unwrap()
            );
            let guarded = v.with_ndarray::<i64, _>(|nd| nd.sum()).unwrap();
            assert_eq!(guarded, v.to_vec::<i64>().unwrap().iter().sum::<i64>());
        }
        // Writable memory is lent only through the guarded closure.
        let w = Array::from_slice(&[1i64, 2], &[2]).unwrap();
        assert!(matches!(w.as_ndarray::<i64>(), Err(Error::NotWritable(_))));
        assert!(w.as_ndarray::<i32>().is_err());
    }

    #[test]
    fn mutable_views_write_through_any_strides() {
        let a = Array::from_slice(&(0..6).collect::<Vec<i32>>(), &[2, 3]).unwrap();
        let v = a
            .view(&[Index::slice(None, None, -1), Index::slice(None, None, -2)])
            .unwrap()
            .transpose();
        let seen = v
            .with_ndarray_mut::<i32, _>(|mut nd| {
                let seen: Vec<i32> = nd.iter().copied().collect();
                nd.mapv_inplace(|x| -x);
                seen
            })
            .unwrap();
        assert_eq!(seen, [5, 2, 3, 0]);
        assert_eq!(a.to_vec::<i32>().unwrap(), [0, 1, -2, -3, 4, -5]);
        assert!(a.read_only().with_ndarray_mut::<i32, _>(|_| ()).is_err());
        // Invalid bools are refused rather than lent as `&bool`.
        let block = MemoryBlock::from_owner(vec![0u8, 1, 2]);
        let b = Array::from_block(&block, 0, "bool".parse().unwrap(), &[3]).unwrap();
        assert!(matches!(
            b.as_ndarray::<bool>(),
            Err(Error::TypeMismatch(_))
        ));
        let ok = Array::from_block(&block, 0, "bool".parse().unwrap(), &[2]).unwrap();
        assert_eq!(
            ok.as_ndarray::<bool>()
                .unwrap()
                .iter()
                .copied()
                .collect::<Vec<_>>(),
            [false, true]
        );
    }

    #[test]
    fn from_ndarray_copies_or_owns() {
        let nd = Array2::from_shape_fn((3, 4), |(i, j)| (i * 4 + j) as f64);
        let sliced = nd.slice(s![..;-1, 1..;2]);
        let copy = Array::from_ndarray(&sliced).unwrap();
        assert_eq!(copy.shape(), [3, 2]);
        assert_eq!(
            copy.to_vec::<f64>().unwrap(),
            [9.0, 11.0, 5.0, 7.0, 1.0, 3.0]
        );
        let mut owned = nd.clone();
        owned.invert_axis(::ndarray::Axis(1));
        owned.slice_collapse(s![1.., ..]);
        let a = Array::from_ndarray_owned(owned.clone()).unwrap();
        assert_eq!(a.shape(), [2, 4]);
        assert_eq!(
            a.to_vec::<f64>().unwrap(),
            owned.iter().copied().collect::<Vec<_>>()
        );
        a.set(&[0, 0], 100.0f64).unwrap();
        assert_eq!(a.get::<f64>(&[0, 0]).unwrap(), 100.0);
        let empty = Array::from_ndarray_owned(Array2::<u8>::zeros((0, 3))).unwrap();
        assert!(empty.is_empty());
        assert_eq!(empty.with_ndarray::<u8, _>(|v| v.len()).unwrap(), 0);
    }
}
