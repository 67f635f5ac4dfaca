//! Offsets into a segment, and the bounds check that turns one into a
//! pointer.
//!
//! Mappings of the same segment land at different addresses in different
//! processes, so nothing stored in shared memory is a pointer: it is an
//! [`Offset`] from the start of the segment. Turning an offset into a
//! pointer is always checked against the local mapping by [`check_range`].

use crate::error::Error;

/// A byte offset from the start of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[repr(transparent)]
pub struct Offset(pub u64);

impl Offset {
    /// The raw offset.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// `self + bytes`, or `None` on overflow.
    pub const fn checked_add(self, bytes: u64) -> Option<Offset> {
        match self.0.checked_add(bytes) {
            Some(v) => Some(Offset(v)),
            None => None,
        }
    }
}

impl From<u64> for Offset {
    fn from(v: u64) -> Self {
        Offset(v)
    }
}

/// Checks that `[offset, offset + len)` lies inside `[start, end)` and that
/// `offset` is a multiple of `align` (a power of two). Returns the offset as
/// a `usize` ready to add to the mapping base.
pub fn check_range(
    offset: Offset,
    len: u64,
    align: u64,
    start: u64,
    end: u64,
) -> Result<usize, Error> {
    let err = || Error::OutOfBounds {
        offset: offset.0,
        len,
        start,
        end,
    };
    if align == 0 || !align.is_power_of_two() || !offset.0.is_multiple_of(align) {
        return Err(err());
    }
    let stop = offset.0.checked_add(len).ok_or_else(err)?;
    if offset.0 < start || stop > end || start > end {
        return Err(err());
    }
    usize::try_from(stop).map_err(|_| err())?;
    usize::try_from(offset.0).map_err(|_| err())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn inside_and_edges() {
        assert_eq!(check_range(Offset(4096), 8, 8, 4096, 8192).unwrap(), 4096);
        assert_eq!(check_range(Offset(8184), 8, 8, 4096, 8192).unwrap(), 8184);
        assert!(check_range(Offset(8185), 8, 1, 4096, 8192).is_err());
        assert!(check_range(Offset(4095), 1, 1, 4096, 8192).is_err());
        assert!(check_range(Offset(4100), 8, 8, 4096, 8192).is_err());
        assert!(check_range(Offset(u64::MAX), 2, 1, 0, u64::MAX).is_err());
        assert!(check_range(Offset(0), 0, 3, 0, 10).is_err());
        assert!(check_range(Offset(8192), 0, 1, 4096, 8192).is_ok());
        assert_eq!(Offset(5).checked_add(u64::MAX), None);
        assert_eq!(Offset(5).checked_add(3), Some(Offset(8)));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: if cfg!(miri) { 8 } else { 1024 }, failure_persistence: None, ..ProptestConfig::default() })]
        #[test]
        fn accepted_ranges_are_inside(off in any::<u64>(), len in any::<u64>(), align_pow in 0u32..13, start in any::<u64>(), end in any::<u64>()) {
            let align = 1u64 << align_pow;
            if let Ok(o) = check_range(Offset(off), len, align, start, end) {
                prop_assert_eq!(o as u64, off);
                prop_assert!(off >= start);
                prop_assert!(off as u128 + len as u128 <= end as u128);
                prop_assert_eq!(off % align, 0);
            }
        }
    }
}
