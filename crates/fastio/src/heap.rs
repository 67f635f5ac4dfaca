//! Block sizes and placement in the heap.
//!
//! Blocks are whole pages. Requests are rounded up to a *size class*: every
//! page count up to 16, then eight classes per doubling, so at most 1/8 of
//! a block is unused. A reclaimed block is kept, still backed by memory and
//! still mapped in every process that touched it, on its class's list;
//! the next request of that class reuses it without a system call or a
//! page fault. New blocks are placed first-fit in the gaps between the
//! blocks that exist, so the heap needs no free list of its own that a
//! crash could corrupt: the allocation records are the only truth.

use crate::layout::{NUM_CLASSES, PAGE};

/// The class index and the block size (bytes) for a request of `size`
/// bytes, or `None` if no class is that large.
pub(crate) fn class_of(size: u64) -> Option<(usize, u64)> {
    let pages = size.div_ceil(PAGE).max(1);
    if pages <= 16 {
        return Some((pages as usize - 1, pages * PAGE));
    }
    let b = 63 - u64::from(pages.leading_zeros()); // 2^b <= pages < 2^(b+1), b >= 4
    let step = 1u64 << (b - 3);
    let steps = pages.div_ceil(step); // 8..=16
    let (b, steps) = if steps == 16 { (b + 1, 8) } else { (b, steps) };
    let index = 16 + (b as usize - 4) * 8 + (steps as usize - 8);
    if index >= NUM_CLASSES {
        return None;
    }
    let block_pages = steps.checked_mul(1u64 << (b - 3))?;
    Some((index, block_pages.checked_mul(PAGE)?))
}

/// The class whose block size is exactly `cap`, if `cap` is a class size.
pub(crate) fn class_of_block(cap: u64) -> Option<usize> {
    match class_of(cap) {
        Some((c, size)) if size == cap => Some(c),
        _ => None,
    }
}

/// First-fit placement of `len` bytes in `[0, heap_len)` around the
/// existing blocks `used` (`(offset, len)`, any order, non-overlapping).
pub(crate) fn first_fit(used: &mut [(u64, u64)], len: u64, heap_len: u64) -> Option<u64> {
    first_fit_aligned(used, len, heap_len, 0, 1)
}

/// [`first_fit`] of a block that must start where `base + offset` is a
/// multiple of `align` (a power of two): a large block on a huge-page
/// boundary of the file, `base` being the heap's offset in it.
pub(crate) fn first_fit_aligned(
    used: &mut [(u64, u64)],
    len: u64,
    heap_len: u64,
    base: u64,
    align: u64,
) -> Option<u64> {
    debug_assert!(align.is_power_of_two());
    let up = |cursor: u64| -> Option<u64> {
        let at = base.checked_add(cursor)?.checked_next_multiple_of(align)?;
        Some(at - base)
    };
    used.sort_unstable();
    let mut cursor = 0u64;
    for &(off, l) in used.iter() {
        let start = up(cursor)?;
        if off >= start && off - start >= len {
            return Some(start);
        }
        cursor = cursor.max(off.saturating_add(l));
    }
    let start = up(cursor)?;
    (heap_len >= start && heap_len - start >= len).then_some(start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn aligned_fit_skips_to_the_boundary_or_the_next_gap() {
        const M: u64 = 1 << 20;
        // The heap starts 12 KiB into the file: the first 2 MiB boundary is
        // at heap offset 2 MiB - 12 KiB.
        let base = 12 << 10;
        let first = 2 * M - base;
        assert_eq!(
            first_fit_aligned(&mut [], 2 * M, 16 * M, base, 2 * M),
            Some(first)
        );
        // A block before the boundary: still there.
        let mut used = [(0, 4096)];
        assert_eq!(
            first_fit_aligned(&mut used, 2 * M, 16 * M, base, 2 * M),
            Some(first)
        );
        // A block across it: the next boundary.
        let mut used = [(first - 4096, 8192)];
        assert_eq!(
            first_fit_aligned(&mut used, 2 * M, 16 * M, base, 2 * M),
            Some(first + 2 * M)
        );
        // No aligned room although unaligned room exists.
        assert_eq!(first_fit_aligned(&mut [], 4 * M, 4 * M, base, 2 * M), None);
        assert_eq!(first_fit(&mut [], 4 * M, 4 * M), Some(0));
    }

    #[test]
    fn small_classes_are_page_counts() {
        assert_eq!(class_of(0), Some((0, PAGE)));
        assert_eq!(class_of(1), Some((0, PAGE)));
        assert_eq!(class_of(PAGE), Some((0, PAGE)));
        assert_eq!(class_of(PAGE + 1), Some((1, 2 * PAGE)));
        assert_eq!(class_of(16 * PAGE), Some((15, 16 * PAGE)));
        assert_eq!(class_of(16 * PAGE + 1), Some((17, 18 * PAGE)));
        // 256 MiB is a class boundary.
        let (_, cap) = class_of(256 << 20).unwrap();
        assert_eq!(cap, 256 << 20);
        assert_eq!(class_of(u64::MAX), None);
    }

    #[test]
    fn first_fit_finds_gaps_and_the_tail() {
        let mut used = vec![(8192, 4096), (0, 4096)];
        assert_eq!(first_fit(&mut used, 4096, 16384), Some(4096));
        assert_eq!(first_fit(&mut used, 8192, 16384), None);
        assert_eq!(first_fit(&mut used, 4096, 16384), Some(4096));
        let mut used = vec![(0, 4096), (4096, 4096)];
        assert_eq!(first_fit(&mut used, 8192, 16384), Some(8192));
        assert_eq!(first_fit(&mut [], 16384, 16384), Some(0));
        assert_eq!(first_fit(&mut [], 16385, 16384), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: if cfg!(miri) { 16 } else { 2000 }, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn classes_cover_the_request_with_little_waste(size in 0u64..(1 << 40)) {
            let (c, cap) = class_of(size).unwrap();
            prop_assert!(cap >= size.max(1));
            prop_assert!(cap.is_multiple_of(PAGE));
            let pages = size.div_ceil(PAGE).max(1);
            prop_assert!(cap / PAGE - pages <= pages / 8, "waste {} of {}", cap / PAGE - pages, pages);
            prop_assert_eq!(class_of_block(cap), Some(c));
            // Classes are monotonic in size.
            if let Some((c2, cap2)) = class_of(cap + 1) {
                prop_assert!(c2 > c && cap2 > cap);
            }
        }

        #[test]
        fn first_fit_never_overlaps(
            blocks in proptest::collection::vec((0u64..64, 1u64..8), 0..12),
            want in 1u64..16,
        ) {
            // Build non-overlapping used blocks from random candidates.
            let mut used: Vec<(u64, u64)> = Vec::new();
            for (off, len) in blocks {
                if used.iter().all(|&(o, l)| off + len <= o || o + l <= off) && off + len <= 64 {
                    used.push((off, len));
                }
            }
            let got = first_fit(&mut used.clone(), want, 64);
            match got {
                Some(at) => {
                    prop_assert!(at + want <= 64);
                    prop_assert!(used.iter().all(|&(o, l)| at + want <= o || o + l <= at));
                }
                None => {
                    // No position fits.
                    for at in 0..=64u64.saturating_sub(want) {
                        prop_assert!(!used.iter().all(|&(o, l)| at + want <= o || o + l <= at));
                    }
                }
            }
        }

        /// The aligned fit is the lowest aligned position where the block
        /// fits without overlap, or none exists.
        #[test]
        fn aligned_fit_is_the_lowest_aligned_gap(
            blocks in proptest::collection::vec((0u64..64, 1u64..8), 0..12),
            want in 1u64..16,
            base in 0u64..8,
            shift in 0u32..4,
        ) {
            let align = 1u64 << shift;
            let mut used: Vec<(u64, u64)> = Vec::new();
            for (off, len) in blocks {
                if used.iter().all(|&(o, l)| off + len <= o || o + l <= off) && off + len <= 64 {
                    used.push((off, len));
                }
            }
            let free = |at: u64| at + want <= 64 && used.iter().all(|&(o, l)| at + want <= o || o + l <= at);
            let lowest = (0..=64u64).find(|&at| (base + at).is_multiple_of(align) && free(at));
            prop_assert_eq!(first_fit_aligned(&mut used.clone(), want, 64, base, align), lowest);
        }
    }
}
