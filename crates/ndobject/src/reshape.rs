//! Strides for a reshaped view without copying (numpy's rule).

use crate::array::c_strides;
use crate::error::{Error, Result};

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
    use super::reshape_strides;

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
}
