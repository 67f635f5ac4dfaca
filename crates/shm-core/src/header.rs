//! The segment header: layout, encoding and complete validation.
//!
//! Every segment starts with a fixed 128-byte little-endian header. The first
//! 72 bytes are static (written once by the creator) and covered by a
//! checksum; the rest holds two fields that change after creation (the
//! "ready" stamp and the current total length) plus reserved zero bytes.
//!
//! [`validate`] is a pure function over a byte slice: it is what `open` runs
//! on a copy of the header read with `pread`, what the fuzz target exercises,
//! and it runs under Miri.

use crate::error::HeaderError;

/// Magic bytes at offset 0 of every segment.
pub const MAGIC: [u8; 8] = *b"SHMCORE\0";
/// Layout version written by this build.
pub const LAYOUT_VERSION: u32 = 1;
/// Size of the header in bytes.
pub const HEADER_LEN: usize = 128;
/// Size of one participant registry slot in bytes.
pub const SLOT_SIZE: u64 = 32;
/// Largest number of participants a segment can have (token slot bits).
pub const MAX_PARTICIPANTS: u32 = 64;
/// Alignment of the data region (and of every region boundary).
pub const DATA_ALIGN: u64 = 4096;
/// Largest segment this library will create or open (1 TiB).
pub const MAX_SEGMENT_LEN: u64 = 1 << 40;
/// Value of the `ready` field once the creator finished initialisation.
pub const READY: u32 = 0x5245_4459;

pub(crate) const OFF_MAGIC: usize = 0;
pub(crate) const OFF_VERSION: usize = 8;
pub(crate) const OFF_HEADER_LEN: usize = 12;
pub(crate) const OFF_REGISTRY_OFFSET: usize = 16;
pub(crate) const OFF_REGISTRY_LEN: usize = 24;
pub(crate) const OFF_DATA_OFFSET: usize = 32;
pub(crate) const OFF_CREATOR_PID: usize = 40;
pub(crate) const OFF_CREATOR_UID: usize = 44;
pub(crate) const OFF_CREATED_NS: usize = 48;
pub(crate) const OFF_MAX_PARTICIPANTS: usize = 56;
pub(crate) const OFF_FLAGS: usize = 60;
pub(crate) const OFF_MAX_TOTAL_LEN: usize = 64;
pub(crate) const OFF_CHECKSUM: usize = 72;
/// Offset of the `ready` stamp (an `AtomicU32` in the mapping).
pub(crate) const OFF_READY: usize = 80;
pub(crate) const OFF_PAD: usize = 84;
/// Offset of the current total length (an `AtomicU64` in the mapping).
pub(crate) const OFF_TOTAL_LEN: usize = 88;
/// Offset of the start of the lent-out data range (an `AtomicU64`; 0 for
/// none): see `Segment::lend_from`.
pub(crate) const OFF_LENT_FROM: usize = 96;
pub(crate) const OFF_RESERVED: usize = 104;
const STATIC_LEN: usize = 72;

/// Header flag: the creator asked for the segment to outlive it.
pub const FLAG_PERSISTENT: u32 = 1;
/// Header flag: the creator shares the segment with a group (mode 0660);
/// only [`Segment::open_shared`](crate::Segment::open_shared) accepts it
/// from another user.
pub const FLAG_GROUP_SHARED: u32 = 2;
const KNOWN_FLAGS: u32 = FLAG_PERSISTENT | FLAG_GROUP_SHARED;

/// The decoded, validated contents of a segment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct HeaderInfo {
    /// Layout version.
    pub version: u32,
    /// Offset of the participant registry.
    pub registry_offset: u64,
    /// Length of the participant registry.
    pub registry_len: u64,
    /// Offset of the data region (page aligned).
    pub data_offset: u64,
    /// Process id of the creator (informational: pids are reused).
    pub creator_pid: u32,
    /// User id of the creator.
    pub creator_uid: u32,
    /// Creation time, nanoseconds since the Unix epoch.
    pub created_unix_ns: u64,
    /// Number of participant slots.
    pub max_participants: u32,
    /// Header flags ([`FLAG_PERSISTENT`]).
    pub flags: u32,
    /// Largest total length the segment may grow to (its address
    /// reservation in every process).
    pub max_total_len: u64,
    /// Current total length of the segment (header + registry + data).
    pub total_len: u64,
}

impl HeaderInfo {
    /// Computes a fresh layout for a segment with `data_len` usable bytes.
    pub fn layout(
        data_len: u64,
        max_data_len: u64,
        max_participants: u32,
        creator_pid: u32,
        creator_uid: u32,
        created_unix_ns: u64,
        flags: u32,
    ) -> Option<HeaderInfo> {
        if max_participants == 0 || max_participants > MAX_PARTICIPANTS {
            return None;
        }
        let registry_offset = HEADER_LEN as u64;
        let registry_len = u64::from(max_participants) * SLOT_SIZE;
        let data_offset = align_up(registry_offset + registry_len, DATA_ALIGN)?;
        let total_len = data_offset.checked_add(data_len)?;
        let max_total_len = data_offset.checked_add(max_data_len.max(data_len))?;
        if max_total_len > MAX_SEGMENT_LEN || flags & !KNOWN_FLAGS != 0 {
            return None;
        }
        Some(HeaderInfo {
            version: LAYOUT_VERSION,
            registry_offset,
            registry_len,
            data_offset,
            creator_pid,
            creator_uid,
            created_unix_ns,
            max_participants,
            flags,
            max_total_len,
            total_len,
        })
    }

    /// Encodes the header. The `ready` stamp is left at zero: the creator
    /// publishes it separately once everything else is in place.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[OFF_MAGIC..OFF_MAGIC + 8].copy_from_slice(&MAGIC);
        put_u32(&mut b, OFF_VERSION, self.version);
        put_u32(&mut b, OFF_HEADER_LEN, HEADER_LEN as u32);
        put_u64(&mut b, OFF_REGISTRY_OFFSET, self.registry_offset);
        put_u64(&mut b, OFF_REGISTRY_LEN, self.registry_len);
        put_u64(&mut b, OFF_DATA_OFFSET, self.data_offset);
        put_u32(&mut b, OFF_CREATOR_PID, self.creator_pid);
        put_u32(&mut b, OFF_CREATOR_UID, self.creator_uid);
        put_u64(&mut b, OFF_CREATED_NS, self.created_unix_ns);
        put_u32(&mut b, OFF_MAX_PARTICIPANTS, self.max_participants);
        put_u32(&mut b, OFF_FLAGS, self.flags);
        put_u64(&mut b, OFF_MAX_TOTAL_LEN, self.max_total_len);
        let sum = checksum(&b[..STATIC_LEN]);
        put_u64(&mut b, OFF_CHECKSUM, sum);
        put_u64(&mut b, OFF_TOTAL_LEN, self.total_len);
        b
    }

    /// Whether the creator asked for the segment to persist.
    pub fn persistent(&self) -> bool {
        self.flags & FLAG_PERSISTENT != 0
    }

    /// Whether the creator shares the segment with a group.
    pub fn group_shared(&self) -> bool {
        self.flags & FLAG_GROUP_SHARED != 0
    }
}

/// FNV-1a (64-bit) over `bytes`: detects corruption, not an adversary.
pub fn checksum(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Whether `bytes` start with this library's magic (a cheap "is it ours").
pub fn has_magic(bytes: &[u8]) -> bool {
    bytes.len() >= MAGIC.len() && bytes[..MAGIC.len()] == MAGIC
}

/// Validates a header completely.
///
/// `bytes` must hold at least the first [`HEADER_LEN`] bytes of the segment;
/// `file_len` is the size of the underlying object. Every field is checked
/// (magic, version, lengths, alignment, ranges, checksum, ready stamp,
/// reserved bytes) with overflow-checked arithmetic, so arbitrary input
/// yields an error, never a panic.
pub fn validate(bytes: &[u8], file_len: u64) -> Result<HeaderInfo, HeaderError> {
    if bytes.len() < HEADER_LEN || file_len < HEADER_LEN as u64 {
        return Err(HeaderError::TooSmall {
            len: file_len.min(bytes.len() as u64),
            need: HEADER_LEN as u64,
        });
    }
    let b = &bytes[..HEADER_LEN];
    if !has_magic(b) {
        return Err(HeaderError::BadMagic);
    }
    let version = get_u32(b, OFF_VERSION);
    if version != LAYOUT_VERSION {
        return Err(HeaderError::UnsupportedVersion(version));
    }
    if get_u32(b, OFF_HEADER_LEN) != HEADER_LEN as u32 {
        return Err(bad("header_len", "must equal 128"));
    }
    if checksum(&b[..STATIC_LEN]) != get_u64(b, OFF_CHECKSUM) {
        return Err(HeaderError::BadChecksum);
    }
    if get_u32(b, OFF_READY) != READY {
        return Err(HeaderError::NotReady);
    }
    if get_u32(b, OFF_PAD) != 0 || b[OFF_RESERVED..].iter().any(|&x| x != 0) {
        return Err(bad("reserved", "must be zero"));
    }
    let max_participants = get_u32(b, OFF_MAX_PARTICIPANTS);
    if max_participants == 0 || max_participants > MAX_PARTICIPANTS {
        return Err(bad("max_participants", "must be in 1..=64"));
    }
    let flags = get_u32(b, OFF_FLAGS);
    if flags & !KNOWN_FLAGS != 0 {
        return Err(bad("flags", "unknown flag bits"));
    }
    let registry_offset = get_u64(b, OFF_REGISTRY_OFFSET);
    let registry_len = get_u64(b, OFF_REGISTRY_LEN);
    if registry_offset != HEADER_LEN as u64 {
        return Err(bad("registry_offset", "must follow the header"));
    }
    if registry_len != u64::from(max_participants) * SLOT_SIZE {
        return Err(bad("registry_len", "must be max_participants * slot size"));
    }
    let data_offset = get_u64(b, OFF_DATA_OFFSET);
    let registry_end = registry_offset + registry_len; // both small: no overflow
    if data_offset < registry_end || !data_offset.is_multiple_of(DATA_ALIGN) {
        return Err(bad(
            "data_offset",
            "must be page aligned after the registry",
        ));
    }
    let max_total_len = get_u64(b, OFF_MAX_TOTAL_LEN);
    if max_total_len < data_offset || max_total_len > MAX_SEGMENT_LEN {
        return Err(bad("max_total_len", "outside data_offset..=1 TiB"));
    }
    let total_len = get_u64(b, OFF_TOTAL_LEN);
    if total_len > max_total_len {
        return Err(bad("total_len", "larger than max_total_len"));
    }
    if total_len < data_offset {
        return Err(bad("total_len", "smaller than the data offset"));
    }
    if total_len > MAX_SEGMENT_LEN {
        return Err(bad("total_len", "larger than the 1 TiB limit"));
    }
    if total_len > file_len {
        return Err(bad(
            "total_len",
            "larger than the object (truncated segment)",
        ));
    }
    Ok(HeaderInfo {
        version,
        registry_offset,
        registry_len,
        data_offset,
        creator_pid: get_u32(b, OFF_CREATOR_PID),
        creator_uid: get_u32(b, OFF_CREATOR_UID),
        created_unix_ns: get_u64(b, OFF_CREATED_NS),
        max_participants,
        flags,
        max_total_len,
        total_len,
    })
}

fn bad(field: &'static str, reason: &'static str) -> HeaderError {
    HeaderError::BadField { field, reason }
}

/// Rounds `v` up to a multiple of `align` (a power of two).
pub(crate) fn align_up(v: u64, align: u64) -> Option<u64> {
    debug_assert!(align.is_power_of_two());
    Some(v.checked_add(align - 1)? & !(align - 1))
}

fn put_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}
fn put_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
}
fn get_u32(b: &[u8], off: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[off..off + 4]);
    u32::from_le_bytes(a)
}
fn get_u64(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(a)
}

#[cfg(test)]
pub(crate) fn ready_bytes(info: &HeaderInfo) -> [u8; HEADER_LEN] {
    let mut b = info.encode();
    put_u32(&mut b, OFF_READY, READY);
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> HeaderInfo {
        HeaderInfo::layout(1 << 20, 1 << 21, 8, 1234, 1000, 42, 0).unwrap()
    }

    #[test]
    fn round_trip() {
        let h = sample();
        let b = ready_bytes(&h);
        assert_eq!(validate(&b, h.total_len), Ok(h));
        assert_eq!(h.data_offset, 4096);
        assert!(!h.persistent());
    }

    #[test]
    fn not_ready_is_rejected() {
        let h = sample();
        assert_eq!(
            validate(&h.encode(), h.total_len),
            Err(HeaderError::NotReady)
        );
    }

    #[test]
    fn truncated_is_rejected() {
        let h = sample();
        let b = ready_bytes(&h);
        assert!(matches!(
            validate(&b[..100], h.total_len),
            Err(HeaderError::TooSmall { .. })
        ));
        assert!(matches!(
            validate(&b, h.total_len - 1),
            Err(HeaderError::BadField {
                field: "total_len",
                ..
            })
        ));
    }

    #[test]
    fn every_static_byte_flip_is_rejected() {
        let h = sample();
        let good = ready_bytes(&h);
        for i in 0..STATIC_LEN + 8 {
            let mut b = good;
            b[i] ^= 0x40;
            assert!(
                validate(&b, h.total_len).is_err(),
                "flip at byte {i} accepted"
            );
        }
        for i in OFF_PAD..HEADER_LEN {
            // The dynamic words (total length, lent-out start) may hold
            // any value.
            if (OFF_TOTAL_LEN..OFF_LENT_FROM + 8).contains(&i) {
                continue;
            }
            let mut b = good;
            b[i] ^= 1;
            assert!(
                validate(&b, h.total_len).is_err(),
                "flip at byte {i} accepted"
            );
        }
    }

    #[test]
    fn layout_rejects_bad_params() {
        assert!(HeaderInfo::layout(0, 0, 0, 1, 1, 0, 0).is_none());
        assert!(HeaderInfo::layout(0, 0, 65, 1, 1, 0, 0).is_none());
        assert!(HeaderInfo::layout(u64::MAX, 0, 4, 1, 1, 0, 0).is_none());
        assert!(HeaderInfo::layout(MAX_SEGMENT_LEN, 0, 4, 1, 1, 0, 0).is_none());
        assert!(HeaderInfo::layout(0, MAX_SEGMENT_LEN, 4, 1, 1, 0, 0).is_none());
        assert!(HeaderInfo::layout(0, 0, 4, 1, 1, 0, 0x80).is_none());
        let h = HeaderInfo::layout(10, 5, 4, 1, 1, 0, 0).unwrap();
        assert_eq!(h.max_total_len, h.total_len);
    }

    fn config() -> ProptestConfig {
        ProptestConfig {
            cases: if cfg!(miri) { 8 } else { 512 },
            failure_persistence: None,
            ..ProptestConfig::default()
        }
    }

    proptest! {
        #![proptest_config(config())]
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300), len in any::<u64>()) {
            let _ = validate(&bytes, len);
        }

        #[test]
        fn mutated_headers_are_valid_only_if_consistent(pos in 0usize..HEADER_LEN, val in any::<u8>(), len_delta in 0u64..3) {
            let h = sample();
            let mut b = ready_bytes(&h);
            b[pos] = val;
            if let Ok(info) = validate(&b, h.total_len + len_delta) {
                // Anything accepted must be internally consistent.
                prop_assert!(info.total_len <= h.total_len + len_delta);
                prop_assert!(info.data_offset >= info.registry_offset + info.registry_len);
                prop_assert!(info.max_participants >= 1 && info.max_participants <= MAX_PARTICIPANTS);
            }
        }
    }
}
