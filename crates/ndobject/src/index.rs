//! Indexing, slicing, transposition and reshaping: all O(1) views.

use dtype::TypeKind;

use crate::array::Array;
use crate::error::{Error, Result};
use crate::shape::{element_count, reshape_strides};

/// One index of a [`Array::view`]: an integer (removes the dimension) or
/// a slice with a step (keeps it). Negative values count from the end,
/// Python-style; slice bounds are clipped, integers are checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Index {
    /// One position.
    At(isize),
    /// `start..stop` by `step` (step may be negative, never zero).
    Slice {
        /// First position (default: the start for a positive step, the end for a negative one).
        start: Option<isize>,
        /// One past the last position (default: past the end in the step's direction).
        stop: Option<isize>,
        /// Distance between positions.
        step: isize,
    },
}

impl Index {
    /// One position.
    pub const fn at(i: isize) -> Index {
        Index::At(i)
    }

    /// The whole dimension (`..`).
    pub const fn all() -> Index {
        Index::Slice {
            start: None,
            stop: None,
            step: 1,
        }
    }

    /// `start..stop` by `step`.
    pub const fn slice(start: Option<isize>, stop: Option<isize>, step: isize) -> Index {
        Index::Slice { start, stop, step }
    }
}

impl From<isize> for Index {
    fn from(i: isize) -> Index {
        Index::At(i)
    }
}

impl From<std::ops::Range<isize>> for Index {
    fn from(r: std::ops::Range<isize>) -> Index {
        Index::slice(Some(r.start), Some(r.end), 1)
    }
}

impl From<std::ops::RangeFull> for Index {
    fn from(_: std::ops::RangeFull) -> Index {
        Index::all()
    }
}

/// The error for more indices than an array has dimensions.
pub(crate) fn too_many_indices(n: usize, a: &Array) -> Error {
    Error::InvalidIndex(format!("{n} indices for an array of type {}", a.dtype()))
}

/// Checks integer index `i` (negative counts from the end) against a
/// dimension of size `n`: the position it selects.
pub(crate) fn checked_position(i: isize, dim: usize, n: usize) -> Result<usize> {
    let j = if i < 0 { i + n as isize } else { i };
    if j < 0 || j >= n as isize {
        return Err(Error::IndexOutOfRange {
            index: i,
            dim,
            size: n,
        });
    }
    Ok(j as usize)
}

/// Resolves a slice against a dimension of size `n`: (first, count, step).
pub(crate) fn resolve_slice(
    start: Option<isize>,
    stop: Option<isize>,
    step: isize,
    n: usize,
) -> Result<(usize, usize, isize)> {
    if step == 0 {
        return Err(Error::InvalidIndex("slice step cannot be zero".into()));
    }
    let n = n as isize;
    let clip = |v: isize, lo: isize, hi: isize| {
        let v = if v < 0 { v + n } else { v };
        v.clamp(lo, hi)
    };
    let (first, last_excl) = if step > 0 {
        (
            start.map_or(0, |s| clip(s, 0, n)),
            stop.map_or(n, |s| clip(s, 0, n)),
        )
    } else {
        (
            start.map_or(n - 1, |s| clip(s, -1, n - 1)),
            stop.map_or(-1, |s| clip(s, -1, n - 1)),
        )
    };
    let count = if step > 0 {
        if last_excl > first {
            (last_excl - first + step - 1) / step
        } else {
            0
        }
    } else if first > last_excl {
        (first - last_excl + (-step) - 1) / (-step)
    } else {
        0
    };
    Ok((
        if count > 0 { first as usize } else { 0 },
        count as usize,
        step,
    ))
}

impl Array {
    /// The element (or sub-array) at position `i` of the first dimension.
    pub fn index(&self, i: isize) -> Result<Array> {
        self.view(&[Index::At(i)])
    }

    /// A view selected by one [`Index`] per dimension (missing trailing
    /// indices mean the whole dimension).
    ///
    /// Indices go on through `var` dimensions, DyND's way. A `var`
    /// dimension that is *leading* (every dimension before it was removed
    /// by an integer index) is dereferenced: the view points into the
    /// pool holding that row, and the dimension becomes strided. A `var`
    /// dimension below a kept dimension stays ragged: a slice is recorded
    /// in its metadata and applied to every row when the row is reached,
    /// and integers and slices of fixed dimensions below it adjust its
    /// metadata's offset and become strided metadata. An integer index
    /// into such a dimension is an error, because its result would not be
    /// strided (index the rows one at a time instead).
    ///
    /// ```
    /// use ndobject::{Array, Error, Index};
    /// let a = Array::from_ragged(&[vec![1i32, 2, 3], vec![4]])?;   // strided * var * int32
    /// assert_eq!(a.index(0)?.dtype().to_string(), "var * int32");
    /// assert_eq!(a.view(&[0.into(), 2.into()])?.get::<i32>(&[])?, 3);
    /// assert!(matches!(a.view(&[1.into(), 2.into()]), Err(Error::IndexOutOfRange { .. })));
    /// let tails = a.view(&[Index::all(), Index::slice(Some(1), None, 1)])?;
    /// assert_eq!(tails.dtype().to_string(), "strided * var * int32");
    /// assert_eq!(tails.index(0)?.var_elements()?.to_vec::<i32>()?, [2, 3]);
    /// assert_eq!(tails.index(1)?.var_elements()?.len(), 0);
    /// # Ok::<(), ndobject::Error>(())
    /// ```
    pub fn view(&self, indices: &[Index]) -> Result<Array> {
        let k = indices.len().min(self.shape.len());
        let mut a = self.strided_view(&indices[..k])?;
        let mut rest = &indices[k..];
        while !rest.is_empty() {
            if !a.shape.is_empty() {
                return a.nested_view(rest, indices.len());
            }
            if !matches!(a.element.kind(), TypeKind::VarDim(_)) {
                return Err(too_many_indices(indices.len(), self));
            }
            a = a.var_elements()?;
            let k = rest.len().min(a.shape.len());
            a = a.strided_view(&rest[..k])?;
            rest = &rest[k..];
        }
        Ok(a)
    }

    /// Applies at most one index per strided dimension.
    fn strided_view(&self, indices: &[Index]) -> Result<Array> {
        let mut shape = Vec::with_capacity(self.shape.len());
        let mut strides = Vec::with_capacity(self.shape.len());
        let mut offset = self.offset as isize;
        for (dim, (n, s)) in self.shape.iter().zip(&self.strides).enumerate() {
            match indices.get(dim).copied().unwrap_or(Index::all()) {
                Index::At(i) => offset += checked_position(i, dim, *n)? as isize * s,
                Index::Slice { start, stop, step } => {
                    let (first, count, step) = resolve_slice(start, stop, step, *n)?;
                    offset += first as isize * s;
                    shape.push(count);
                    strides.push(if count > 1 { s * step } else { *s });
                }
            }
        }
        Array::build(
            self.block.clone(),
            offset as usize,
            self.element.clone(),
            shape,
            strides,
            self.flags,
            self.meta.clone(),
        )
    }

    /// Reverses the order of the dimensions.
    pub fn transpose(&self) -> Array {
        let order: Vec<usize> = (0..self.shape.len()).rev().collect();
        // A permutation of the dimensions of a valid array is valid: the
        // same (size, stride) pairs reach the same bytes.
        self.permute(&order)
            .expect("reversed dimensions are a permutation of a valid array's")
    }

    /// Reorders the dimensions: dimension `i` of the view is dimension
    /// `order[i]` of this array.
    pub fn permute(&self, order: &[usize]) -> Result<Array> {
        let nd = self.shape.len();
        let mut seen = vec![false; nd];
        if order.len() != nd
            || order
                .iter()
                .any(|&d| d >= nd || std::mem::replace(&mut seen[d], true))
        {
            return Err(Error::InvalidIndex(format!(
                "{order:?} is not a permutation of {nd} dimensions"
            )));
        }
        Array::checked(
            self.block.clone(),
            self.offset,
            self.element.clone(),
            order.iter().map(|&d| self.shape[d]).collect(),
            order.iter().map(|&d| self.strides[d]).collect(),
            self.flags,
            self.meta.clone(),
        )
    }

    /// A view with another shape of the same number of elements, without
    /// copying, when the layout allows it (numpy's rule): dimensions merged
    /// or split must be contiguous relative to each other, so a transposed
    /// or step-sliced array can be reshaped where its dimensions are not
    /// mixed. Otherwise an [`Error::Reshape`]: copy with
    /// [`Array::to_contiguous`] first.
    ///
    /// ```
    /// use ndobject::{Array, Index};
    /// let a = Array::from_slice(&(0..24).collect::<Vec<i32>>(), &[2, 3, 4])?;
    /// let t = a.permute(&[1, 2, 0])?;                  // shape [3, 4, 2]
    /// let r = t.reshape(&[12, 2])?;                    // merges the first two
    /// assert!(r.block().ptr_eq(a.block()));
    /// assert_eq!(r.to_vec::<i32>()?, t.to_vec::<i32>()?);
    /// assert!(t.reshape(&[24]).is_err());              // would mix all three
    /// let every_other = a.view(&[Index::all(), Index::all(), Index::slice(None, None, 2)])?;
    /// assert_eq!(every_other.reshape(&[6, 2])?.strides(), [16, 8]);
    /// # Ok::<(), ndobject::Error>(())
    /// ```
    pub fn reshape(&self, shape: &[usize]) -> Result<Array> {
        let numel = element_count(shape)?;
        let err = |reason| Error::Reshape {
            from: self.shape.clone(),
            to: shape.to_vec(),
            reason,
        };
        if numel != self.len() {
            return Err(err("the number of elements differs"));
        }
        let strides = reshape_strides(&self.shape, &self.strides, shape, self.elem_size())?
            .ok_or_else(|| {
                err("the layout mixes dimensions that are not contiguous relative to each other; copy with to_contiguous() first")
            })?;
        Array::build(
            self.block.clone(),
            self.offset,
            self.element.clone(),
            shape.to_vec(),
            strides,
            self.flags,
            self.meta.clone(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::resolve_slice;

    #[test]
    fn slices_resolve_like_python() {
        assert_eq!(resolve_slice(None, None, 1, 5).unwrap(), (0, 5, 1));
        assert_eq!(resolve_slice(None, None, -1, 5).unwrap(), (4, 5, -1));
        assert_eq!(resolve_slice(Some(1), Some(4), 2, 5).unwrap(), (1, 2, 2));
        assert_eq!(resolve_slice(Some(-2), None, 1, 5).unwrap(), (3, 2, 1));
        assert_eq!(resolve_slice(Some(10), Some(20), 1, 5).unwrap(), (0, 0, 1));
        assert_eq!(resolve_slice(Some(3), Some(0), -1, 5).unwrap(), (3, 3, -1));
        assert_eq!(
            resolve_slice(Some(3), Some(-10), -2, 5).unwrap(),
            (3, 2, -2)
        );
        assert!(resolve_slice(None, None, 0, 5).is_err());
    }
}
