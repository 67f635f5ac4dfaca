//! Shape and stride math, in one place (as ndarray's `dimension` module):
//! element counts, byte sizes, C-order strides, and the strides of a
//! reshaped view. Every layer that turns a shape into a count or a size
//! (`ndobject`, `params-io`, `fastio`) uses these functions, so there is
//! one overflow rule: **a shape with a zero dimension has 0 elements,
//! however large the others; otherwise a count or size that does not fit
//! in `usize` (or a stride that does not fit in `isize`) is
//! [`Error::Overflow`].**
//!
//! ```
//! use ndobject::shape;
//! assert_eq!(shape::element_count(&[2, 3, 4])?, 24);
//! assert_eq!(shape::element_count(&[usize::MAX, usize::MAX, 0])?, 0);
//! assert!(shape::element_count(&[usize::MAX, 2]).is_err());
//! assert_eq!(shape::byte_size(&[2, 3], 8)?, 48);
//! assert_eq!(shape::c_strides(&[2, 3], 4)?, [12, 4]);
//! # Ok::<(), ndobject::Error>(())
//! ```

use crate::error::{Error, Result};

fn overflow(shape: &[usize]) -> Error {
    Error::Overflow(format!("shape {shape:?}"))
}

/// The number of elements of `shape` (1 for `[]`), under the module's
/// overflow rule.
pub fn element_count(shape: &[usize]) -> Result<usize> {
    if shape.contains(&0) {
        return Ok(0);
    }
    shape
        .iter()
        .try_fold(1usize, |a, n| a.checked_mul(*n))
        .ok_or_else(|| overflow(shape))
}

/// Bytes that `shape` elements of `element_size` bytes take, under the
/// module's overflow rule.
pub fn byte_size(shape: &[usize], element_size: usize) -> Result<usize> {
    element_count(shape)?
        .checked_mul(element_size)
        .ok_or_else(|| overflow(shape))
}

/// C-order (row-major) byte strides of `shape` for elements of `elem`
/// bytes. Every stride, and the total size, must fit in `isize`.
pub fn c_strides(shape: &[usize], elem: usize) -> Result<Vec<isize>> {
    let mut strides = vec![0isize; shape.len()];
    let mut acc = elem;
    for (s, n) in strides.iter_mut().zip(shape).rev() {
        *s = isize::try_from(acc).map_err(|_| overflow(shape))?;
        acc = acc
            .checked_mul(*n)
            .filter(|a| *a <= isize::MAX as usize)
            .ok_or_else(|| overflow(shape))?;
    }
    Ok(strides)
}

/// The iteration space: dimensions of size 1 dropped, neighbours merged
/// where both arrays step through them as one; the last dimension is the
/// row. Each entry is `(size, dst stride, src stride)`.
pub(crate) fn coalesce(
    shape: &[usize],
    dst: &[isize],
    src: &[isize],
) -> Vec<(usize, isize, isize)> {
    let mut dims: Vec<(usize, isize, isize)> = Vec::with_capacity(shape.len());
    for ((&n, &d), &s) in shape.iter().zip(dst).zip(src) {
        if n == 1 {
            continue;
        }
        match dims.last_mut() {
            Some(last) if last.1 == n as isize * d && last.2 == n as isize * s => {
                *last = (last.0 * n, d, s);
            }
            _ => dims.push((n, d, s)),
        }
    }
    dims
}

/// The strides that give `new_shape` the same elements, in the same C
/// order, as `shape`/`strides`, or `None` when no strides can.
///
/// Dimensions of size 1 do not matter and are dropped. The remaining old
/// and new dimensions are split into the shortest groups with equal
/// products; within each group the old dimensions must be contiguous
/// relative to each other (`stride[k] == size[k + 1] * stride[k + 1]`),
/// and the new dimensions of the group get C strides ending in the
/// group's innermost old stride. An array without elements takes any
/// shape.
pub(crate) fn reshape_strides(
    shape: &[usize],
    strides: &[isize],
    new_shape: &[usize],
    elem: usize,
) -> Result<Option<Vec<isize>>> {
    if shape.contains(&0) || new_shape.contains(&0) {
        return c_strides(new_shape, elem).map(Some);
    }
    let overflow = || Error::Overflow(format!("strides for shape {new_shape:?}"));
    let old: Vec<(usize, isize)> = shape
        .iter()
        .zip(strides)
        .filter(|(n, _)| **n != 1)
        .map(|(n, s)| (*n, *s))
        .collect();
    let mut out = vec![0isize; new_shape.len()];
    let (mut oi, mut ni) = (0, 0);
    while ni < new_shape.len() && oi < old.len() {
        let (mut nj, mut oj) = (ni + 1, oi + 1);
        let (mut np, mut op) = (new_shape[ni], old[oi].0);
        while np != op {
            if np < op {
                let Some(n) = new_shape.get(nj) else {
                    return Ok(None);
                };
                np *= n;
                nj += 1;
            } else {
                let Some((n, _)) = old.get(oj) else {
                    return Ok(None);
                };
                op *= n;
                oj += 1;
            }
        }
        // The old dimensions of the group must merge into one.
        for k in oi..oj - 1 {
            let inner = isize::try_from(old[k + 1].0)
                .ok()
                .and_then(|n| n.checked_mul(old[k + 1].1));
            if inner != Some(old[k].1) {
                return Ok(None);
            }
        }
        out[nj - 1] = old[oj - 1].1;
        for k in (ni + 1..nj).rev() {
            out[k - 1] = isize::try_from(new_shape[k])
                .ok()
                .and_then(|n| n.checked_mul(out[k]))
                .ok_or_else(overflow)?;
        }
        (ni, oi) = (nj, oj);
    }
    // Trailing dimensions of size 1 (the only ones left) take any stride.
    let last = if ni > 0 { out[ni - 1] } else { elem as isize };
    for s in &mut out[ni..] {
        *s = last;
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_only_relatively_contiguous_dimensions() {
        // A C-contiguous [2, 3, 4] of 4-byte elements.
        let c = [48isize, 16, 4];
        assert_eq!(
            reshape_strides(&[2, 3, 4], &c, &[6, 4], 4).unwrap(),
            Some(vec![16, 4])
        );
        assert_eq!(
            reshape_strides(&[2, 3, 4], &c, &[24], 4).unwrap(),
            Some(vec![4])
        );
        // Transposed to [4, 3, 2]: nothing merges, but splits and 1s work
        // (a dimension of size 1 may take any stride).
        let t = [4isize, 16, 48];
        assert_eq!(reshape_strides(&[4, 3, 2], &t, &[12, 2], 4).unwrap(), None);
        assert_eq!(
            reshape_strides(&[4, 3, 2], &t, &[2, 2, 1, 3, 2], 4).unwrap(),
            Some(vec![8, 4, 48, 16, 48])
        );
        // Every other column of a [3, 8] is every other element...
        assert_eq!(
            reshape_strides(&[3, 4], &[32, 8], &[12], 4).unwrap(),
            Some(vec![8])
        );
        // ...but of its first 6 columns it is not; splits still work.
        assert_eq!(reshape_strides(&[3, 3], &[32, 8], &[9], 4).unwrap(), None);
        assert_eq!(
            reshape_strides(&[4, 3], &[32, 8], &[2, 2, 3], 4).unwrap(),
            Some(vec![64, 32, 8])
        );
        // Negative strides merge when consistent.
        assert_eq!(
            reshape_strides(&[2, 3], &[-12, -4], &[6], 4).unwrap(),
            Some(vec![-4])
        );
        assert_eq!(
            reshape_strides(&[0, 3], &[12, 4], &[3, 0, 5], 4).unwrap(),
            Some(vec![0, 20, 4])
        );
        assert_eq!(
            reshape_strides(&[1, 1], &[4, 4], &[1], 4).unwrap(),
            Some(vec![4])
        );
    }

    #[test]
    fn coalescing_merges_contiguous_dimensions_only() {
        assert_eq!(
            coalesce(&[2, 3, 4], &[48, 16, 4], &[12, 4, 1]),
            [(24, 4, 1)]
        );
        assert_eq!(
            coalesce(&[2, 1, 4], &[16, 16, 4], &[-8, 99, 2]),
            [(2, 16, -8), (4, 4, 2)]
        );
        assert_eq!(
            coalesce(&[3, 4], &[16, 4], &[0, 4]),
            [(3, 16, 0), (4, 4, 4)]
        );
        assert!(coalesce(&[1, 1], &[0, 0], &[0, 0]).is_empty());
    }

    #[test]
    fn a_zero_dimension_wins_over_overflow() {
        assert_eq!(element_count(&[]).unwrap(), 1);
        assert_eq!(element_count(&[usize::MAX, 2, 0]).unwrap(), 0);
        assert!(element_count(&[usize::MAX, 2]).is_err());
        assert!(byte_size(&[usize::MAX / 2 + 1], 2).is_err());
        assert_eq!(byte_size(&[usize::MAX, 0], 8).unwrap(), 0);
        assert!(c_strides(&[usize::MAX / 4, 4], 1).is_err());
    }
}
