//! Where everything lives in a context segment, and the checks that make
//! a segment's own description of that trustworthy.
//!
//! ```text
//! segment:  [shm-core header + registry][mutex][control words ...][pad][heap ...]
//! control:  header (16 words) | class heads (NUM_CLASSES) |
//!           allocation records (max_allocations x (10 + P)) |
//!           name records (name_slots x NAME_WORDS)
//! ```
//!
//! Every position is a word index computed from four numbers stored in the
//! header (allocation and name capacities, participant count, heap size),
//! which are checked against the segment before any other word is read.

use crate::error::{Error, Result};

/// `"FASTIOC1"`: marks an initialised context.
pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"FASTIOC1");
/// Layout version written by this crate (2: the publication event on a
/// cache line of its own, the control words 128 bytes after the mutex).
pub(crate) const VERSION: u64 = 2;
/// Where the control words start, in bytes after the mutex: the mutex's
/// cache line, then the publication event's.
pub(crate) const CONTROL_AFTER_MUTEX: u64 = 128;
/// Page size of the heap; every block is a multiple of it.
pub(crate) const PAGE: u64 = 4096;
/// Size classes (see [`crate::heap::class_of`]).
pub(crate) const NUM_CLASSES: usize = 256;
/// Header words.
pub(crate) const HEADER_WORDS: usize = 16;
/// Fixed words of an allocation record, before the per-participant entries.
pub(crate) const REC_FIXED: usize = 10;
/// Longest published name, in bytes.
pub const MAX_NAME_LEN: usize = 255;
/// Longest element-type text (canonical datashape), in bytes.
pub const MAX_TYPE_LEN: usize = 127;
/// Most dimensions an allocation's metadata may have.
pub const MAX_DIMS: usize = 32;
/// Words of a name record: state, target, hash, lengths, then the name,
/// the type text and the dimensions.
pub(crate) const NAME_WORDS: usize = 4 + 32 + 16 + MAX_DIMS;
/// Largest allocation and name capacities accepted.
pub(crate) const MAX_TABLE: u32 = 1 << 16;
/// Largest heap accepted (16 TiB).
pub(crate) const MAX_HEAP: u64 = 1 << 44;

/// Header word indices.
pub(crate) mod hdr {
    pub(crate) const MAGIC: usize = 0;
    /// `version | flags << 32`.
    pub(crate) const VERSION_FLAGS: usize = 1;
    /// `max_allocations | max_names << 32`.
    pub(crate) const CAPACITY: usize = 2;
    /// `participants | name_slots << 32`.
    pub(crate) const SHAPE: usize = 3;
    pub(crate) const HEAP_OFFSET: usize = 4;
    pub(crate) const HEAP_LEN: usize = 5;
    /// Head of the list of records without a block (index + 1; derived).
    pub(crate) const EMPTY_HEAD: usize = 6;
    /// Number of published names (derived).
    pub(crate) const PUBLISHED: usize = 7;
    /// Bytes held in cached (reclaimed, kept) blocks (derived).
    pub(crate) const CACHED_BYTES: usize = 8;
    /// Most bytes kept in cached blocks.
    pub(crate) const CACHE_LIMIT: usize = 9;
    /// Number of recoveries run (statistics).
    pub(crate) const RECOVERIES: usize = 10;
}

/// Flag in the high half of `VERSION_FLAGS`: the owner closed the context.
pub(crate) const FLAG_CLOSED: u64 = 1;

/// The computed positions of a context's tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    pub(crate) max_allocs: u32,
    pub(crate) max_names: u32,
    pub(crate) name_slots: u32,
    pub(crate) participants: u32,
    /// Segment offset of the control words.
    pub(crate) control_offset: u64,
    pub(crate) words: usize,
    /// Segment offset of the heap (page aligned).
    pub(crate) heap_offset: u64,
    pub(crate) heap_len: u64,
}

impl Layout {
    /// The layout for these capacities, with the mutex at `mutex_offset`
    /// (the segment's data offset).
    pub(crate) fn compute(
        mutex_offset: u64,
        max_allocs: u32,
        max_names: u32,
        participants: u32,
        heap_len: u64,
    ) -> Result<Layout> {
        if !(1..=MAX_TABLE).contains(&max_allocs) || !(1..=MAX_TABLE).contains(&max_names) {
            return Err(Error::Unsupported(format!(
                "capacities must be 1..={MAX_TABLE} allocations and names"
            )));
        }
        if !(1..=64).contains(&participants) {
            return Err(Error::Unsupported("1..=64 participants".into()));
        }
        if heap_len == 0 || heap_len > MAX_HEAP || !heap_len.is_multiple_of(PAGE) {
            return Err(Error::Unsupported(format!(
                "heap size must be a positive multiple of {PAGE} up to {MAX_HEAP}"
            )));
        }
        let name_slots = (2 * max_names).next_power_of_two();
        let rec_words = REC_FIXED + participants as usize;
        let words = HEADER_WORDS
            + NUM_CLASSES
            + max_allocs as usize * rec_words
            + name_slots as usize * NAME_WORDS;
        let control_offset = mutex_offset + CONTROL_AFTER_MUTEX;
        let control_end = control_offset + 8 * words as u64;
        let heap_offset = control_end.next_multiple_of(PAGE);
        Ok(Layout {
            max_allocs,
            max_names,
            name_slots,
            participants,
            control_offset,
            words,
            heap_offset,
            heap_len,
        })
    }

    /// Bytes of the segment's data region this layout needs.
    pub(crate) fn data_len(&self, data_offset: u64) -> u64 {
        self.heap_offset + self.heap_len - data_offset
    }

    /// Words per allocation record.
    pub(crate) fn rec_words(&self) -> usize {
        REC_FIXED + self.participants as usize
    }

    /// First word of class list head `c`.
    pub(crate) fn class_head(&self, c: usize) -> usize {
        HEADER_WORDS + c
    }

    /// First word of allocation record `i`.
    pub(crate) fn rec(&self, i: u32) -> usize {
        HEADER_WORDS + NUM_CLASSES + i as usize * self.rec_words()
    }

    /// First word of name record `j`.
    pub(crate) fn name(&self, j: u32) -> usize {
        self.rec(self.max_allocs) + j as usize * NAME_WORDS
    }

    /// The header words that describe this layout.
    pub(crate) fn header_words(&self) -> [(usize, u64); 4] {
        [
            (
                hdr::CAPACITY,
                u64::from(self.max_allocs) | u64::from(self.max_names) << 32,
            ),
            (
                hdr::SHAPE,
                u64::from(self.participants) | u64::from(self.name_slots) << 32,
            ),
            (hdr::HEAP_OFFSET, self.heap_offset),
            (hdr::HEAP_LEN, self.heap_len),
        ]
    }

    /// Rebuilds the layout from header words read out of shared memory and
    /// checks that it is the one those capacities imply and that it fits in
    /// a segment whose data region is `[data_offset, seg_len)` with
    /// `seg_participants` registry slots.
    pub(crate) fn from_header(
        header: &[u64; HEADER_WORDS],
        data_offset: u64,
        seg_len: u64,
        seg_participants: u32,
    ) -> Result<Layout> {
        if header[hdr::MAGIC] != MAGIC {
            return Err(Error::corrupt("not a fastio context (bad magic)"));
        }
        if header[hdr::VERSION_FLAGS] as u32 as u64 != VERSION {
            return Err(Error::corrupt(format!(
                "layout version {} (this library reads {VERSION})",
                header[hdr::VERSION_FLAGS] as u32
            )));
        }
        let cap = header[hdr::CAPACITY];
        let shape = header[hdr::SHAPE];
        let participants = shape as u32;
        if participants != seg_participants {
            return Err(Error::corrupt(format!(
                "{participants} participants recorded, the segment has {seg_participants}"
            )));
        }
        let layout = Layout::compute(
            data_offset,
            cap as u32,
            (cap >> 32) as u32,
            participants,
            header[hdr::HEAP_LEN],
        )
        .map_err(|e| Error::corrupt(format!("header capacities: {e}")))?;
        if layout.name_slots != (shape >> 32) as u32
            || layout.heap_offset != header[hdr::HEAP_OFFSET]
        {
            return Err(Error::corrupt("header layout fields disagree"));
        }
        if layout.heap_offset + layout.heap_len > seg_len {
            return Err(Error::corrupt(format!(
                "heap ends at {} but the segment has {seg_len} bytes",
                layout.heap_offset + layout.heap_len
            )));
        }
        Ok(layout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_do_not_overlap_and_heap_is_page_aligned() {
        let l = Layout::compute(4096, 3, 5, 4, 16 * PAGE).unwrap();
        assert_eq!(l.name_slots, 16);
        assert!(l.class_head(NUM_CLASSES - 1) < l.rec(0));
        assert_eq!(l.rec(1) - l.rec(0), 10 + 4);
        assert!(l.rec(2) + l.rec_words() <= l.name(0));
        assert_eq!(l.name(15) + NAME_WORDS, l.words);
        assert!(l.heap_offset.is_multiple_of(PAGE));
        assert!(l.heap_offset >= l.control_offset + 8 * l.words as u64);
    }

    #[test]
    fn header_round_trip_and_rejections() {
        let l = Layout::compute(4096, 8, 8, 16, 64 * PAGE).unwrap();
        let mut h = [0u64; HEADER_WORDS];
        h[hdr::MAGIC] = MAGIC;
        h[hdr::VERSION_FLAGS] = VERSION;
        for (i, v) in l.header_words() {
            h[i] = v;
        }
        let seg_len = l.heap_offset + l.heap_len;
        assert_eq!(Layout::from_header(&h, 4096, seg_len, 16).unwrap(), l);
        // Too short a segment, wrong participants, bad magic, bad capacities.
        assert!(Layout::from_header(&h, 4096, seg_len - 1, 16).is_err());
        assert!(Layout::from_header(&h, 4096, seg_len, 15).is_err());
        let mut bad = h;
        bad[hdr::MAGIC] ^= 1;
        assert!(Layout::from_header(&bad, 4096, seg_len, 16).is_err());
        let mut bad = h;
        bad[hdr::CAPACITY] = u64::MAX;
        assert!(Layout::from_header(&bad, 4096, seg_len, 16).is_err());
        let mut bad = h;
        bad[hdr::HEAP_OFFSET] += 8;
        assert!(Layout::from_header(&bad, 4096, seg_len, 16).is_err());
    }
}
