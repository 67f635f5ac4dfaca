//! Indexing, slicing, transposition and reshaping: all O(1) views.

use dtype::TypeKind;

use crate::array::{Array, c_strides, checked_numel};
use crate::error::{Error, Result};

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

/// Resolves a slice against a dimension of size `n`: (first, count, step).
fn resolve_slice(
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

    /// A view selected by one [`Index`] per leading dimension (missing
    /// trailing indices mean the whole dimension). On a 0-dimensional
    /// array of a `var * T` element, the indices apply to the ragged
    /// dimension, which becomes a strided dimension of the view.
    pub fn view(&self, indices: &[Index]) -> Result<Array> {
        if indices.len() > self.shape.len() {
            if self.shape.is_empty() && matches!(self.element.kind(), TypeKind::VarDim(_)) {
                return self.var_elements()?.view(indices);
            }
            // Consume the strided dimensions first, then continue into a var element.
            let (head, tail) = indices.split_at(self.shape.len());
            let inner = self.view(head)?;
            if inner.shape.is_empty() && matches!(inner.element.kind(), TypeKind::VarDim(_)) {
                return inner.var_elements()?.view(tail);
            }
            return Err(Error::InvalidIndex(format!(
                "{} indices for {} dimensions",
                indices.len(),
                self.shape.len()
            )));
        }
        let mut shape = Vec::with_capacity(self.shape.len());
        let mut strides = Vec::with_capacity(self.shape.len());
        let mut offset = self.offset as isize;
        for (dim, (n, s)) in self.shape.iter().zip(&self.strides).enumerate() {
            match indices.get(dim).copied().unwrap_or(Index::all()) {
                Index::At(i) => {
                    let j = if i < 0 { i + *n as isize } else { i };
                    if j < 0 || j >= *n as isize {
                        return Err(Error::IndexOutOfRange {
                            index: i,
                            dim,
                            size: *n,
                        });
                    }
                    offset += j * s;
                }
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
            self.pool.clone(),
        )
    }

    /// The elements of a 0-dimensional `var * T` array as a 1-dimensional
    /// view of `T` into the (finalized) pool that holds them.
    pub fn var_elements(&self) -> Result<Array> {
        let TypeKind::VarDim(inner) = self.element.kind() else {
            return Err(Error::TypeMismatch(format!(
                "{} is not a var dimension",
                self.element
            )));
        };
        if !self.shape.is_empty() {
            return Err(Error::InvalidIndex(
                "var_elements needs a 0-dimensional array".into(),
            ));
        }
        let pool = self
            .pool
            .clone()
            .ok_or(Error::Pool("missing for a var element"))?;
        let mut pair = [0u8; 16];
        self.with_read(|base| {
            // SAFETY: a `var` element is 16 bytes at `offset`, inside the
            // block (checked when the view was built).
            unsafe {
                std::ptr::copy_nonoverlapping(base.as_ptr().add(self.offset), pair.as_mut_ptr(), 16)
            }
        })?;
        let start = u64::from_ne_bytes(pair[..8].try_into().unwrap_or_default());
        let count = u64::from_ne_bytes(pair[8..].try_into().unwrap_or_default());
        let elem = inner.data_size().unwrap_or(0);
        let bad = || Error::OutOfBlock {
            offset: start as usize,
            len: count as usize,
            block_len: pool.len(),
        };
        let start = usize::try_from(start).map_err(|_| bad())?;
        let count = usize::try_from(count).map_err(|_| bad())?;
        let strides = c_strides(&[count], elem)?;
        let nested = inner.has_blockref().then(|| pool.clone());
        Array::build(
            pool.clone(),
            start,
            inner.clone(),
            vec![count],
            strides,
            self.flags.without_write(),
            nested,
        )
    }

    /// Reverses the order of the dimensions.
    pub fn transpose(&self) -> Array {
        let mut a = self.clone();
        a.shape.reverse();
        a.strides.reverse();
        a
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
        let mut a = self.clone();
        a.shape = order.iter().map(|&d| self.shape[d]).collect();
        a.strides = order.iter().map(|&d| self.strides[d]).collect();
        Ok(a)
    }

    /// A view with another shape of the same number of elements, when the
    /// array is C-contiguous; otherwise an error (copy with
    /// [`Array::to_contiguous`] first).
    pub fn reshape(&self, shape: &[usize]) -> Result<Array> {
        let numel = checked_numel(shape)?;
        let err = |reason| Error::Reshape {
            from: self.shape.clone(),
            to: shape.to_vec(),
            reason,
        };
        if numel != self.len() {
            return Err(err("the number of elements differs"));
        }
        if !self.is_c_contiguous() {
            return Err(err("the layout is not C-contiguous; copy first"));
        }
        let strides = c_strides(shape, self.elem_size())?;
        Array::build(
            self.block.clone(),
            self.offset,
            self.element.clone(),
            shape.to_vec(),
            strides,
            self.flags,
            self.pool.clone(),
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
