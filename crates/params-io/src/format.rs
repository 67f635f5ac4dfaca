//! Constants of the on-disk format and the mapping between DLPack type
//! triples and element types.

use dtype::Primitive;
use dtype::dlpack::{DLDataType, code};

/// The `u64` that opens every parameter file (`b7 9c 04 05 4f 8d e5 f7` on disk).
pub const LIST_MAGIC: u64 = 0xF7E5_8D4F_0504_9CB7;
/// The `u64` that opens every tensor record (`3f a1 b4 96 f0 40 5e dd` on disk).
pub const TENSOR_MAGIC: u64 = 0xDD5E_40F0_96B4_A13F;
/// `device_type` of a CPU tensor (`kDLCPU`), the only device writers record.
pub const DEVICE_CPU: i32 = 1;
/// The largest `ndim` the reader accepts (TVM has no limit; its C runtime stops at 6).
pub const MAX_NDIM: usize = 32;
/// Bytes of the list header: magic, reserved, name count.
pub const LIST_HEADER_LEN: u64 = 24;
/// The smallest possible tensor record (a scalar header without shape or data):
/// magic, reserved, device (2 x i32), ndim, dtype, byte size.
pub const MIN_RECORD_LEN: u64 = 8 + 8 + 4 + 4 + 4 + 4 + 8;
/// The legacy boolean tag older TVM wrote: `uint1`, one byte per element.
pub const LEGACY_BOOL: DLDataType = DLDataType::new(code::UINT, 1, 1);
/// The boolean tag of DLPack >= 0.8 and TVM >= 0.25.
pub const DLPACK_BOOL: DLDataType = DLDataType::new(code::BOOL, 8, 1);

/// Length in bytes of a tensor record's header (everything before the data).
pub const fn record_header_len(ndim: usize) -> u64 {
    MIN_RECORD_LEN + 8 * ndim as u64
}

/// Why a DLPack triple has no element type here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DtypeProblem {
    /// The type code is not a DLPack data type code we know.
    UnknownCode,
    /// The code is known, but this combination of bits and lanes is not supported.
    Unsupported(&'static str),
}

/// The element type of a DLPack triple as found in a file.
///
/// Accepts the legacy boolean `(1, 1, 1)` as `bool`. Rejects vector types
/// (lanes != 1: TVM itself writes them wrongly), sub-byte types other than
/// the legacy bool, opaque handles and the float8/6/4 codes (7..=17), which
/// the `dtype` crate has no primitive for.
pub fn primitive_of(dl: DLDataType) -> Result<Primitive, DtypeProblem> {
    let known = matches!(dl.code, 0..=17);
    if !known {
        return Err(DtypeProblem::UnknownCode);
    }
    if dl.lanes != 1 {
        return Err(DtypeProblem::Unsupported(
            "vector types (lanes != 1) are not supported",
        ));
    }
    match dl.code {
        code::OPAQUE_HANDLE => {
            return Err(DtypeProblem::Unsupported("opaque handles carry no data"));
        }
        7..=17 => {
            return Err(DtypeProblem::Unsupported(
                "float8/float6/float4 types are not supported",
            ));
        }
        _ => {}
    }
    dl.to_primitive()
        .map_err(|_| DtypeProblem::Unsupported("unsupported bit width for this type code"))
}

/// The tag written for a primitive (`bool` as `(6, 8, 1)`).
pub const fn dl_type_of(p: Primitive) -> DLDataType {
    DLDataType::of_primitive(p)
}

/// Bytes per element in the file for a tag: `ceil(bits / 8)`, as TVM >= 0.7
/// computes it (so the legacy bool takes one byte).
pub const fn file_element_size(dl: DLDataType) -> u64 {
    (dl.bits as u64).div_ceil(8)
}

/// The numpy-style name of an element type (`float32`, `bool`, ...).
pub fn type_name(p: Primitive) -> &'static str {
    p.name()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magics_have_the_documented_bytes() {
        assert_eq!(
            LIST_MAGIC.to_le_bytes(),
            [0xb7, 0x9c, 0x04, 0x05, 0x4f, 0x8d, 0xe5, 0xf7]
        );
        assert_eq!(
            TENSOR_MAGIC.to_le_bytes(),
            [0x3f, 0xa1, 0xb4, 0x96, 0xf0, 0x40, 0x5e, 0xdd]
        );
    }

    #[test]
    fn tags_map_both_ways_for_every_primitive() {
        for p in Primitive::ALL {
            let dl = dl_type_of(p);
            assert_eq!(primitive_of(dl), Ok(p), "{p}");
            assert_eq!(file_element_size(dl), p.size() as u64);
        }
        assert_eq!(primitive_of(LEGACY_BOOL), Ok(Primitive::Bool));
        assert_eq!(file_element_size(LEGACY_BOOL), 1);
    }

    #[test]
    fn unknown_and_unsupported_tags_are_told_apart() {
        assert_eq!(
            primitive_of(DLDataType::new(99, 32, 1)),
            Err(DtypeProblem::UnknownCode)
        );
        assert!(matches!(
            primitive_of(DLDataType::new(2, 32, 4)),
            Err(DtypeProblem::Unsupported(_))
        ));
        assert!(matches!(
            primitive_of(DLDataType::new(0, 4, 1)),
            Err(DtypeProblem::Unsupported(_))
        ));
        assert!(matches!(
            primitive_of(DLDataType::new(10, 8, 1)),
            Err(DtypeProblem::Unsupported(_))
        ));
        assert!(matches!(
            primitive_of(DLDataType::new(3, 64, 1)),
            Err(DtypeProblem::Unsupported(_))
        ));
    }

    #[test]
    fn record_header_length() {
        assert_eq!(MIN_RECORD_LEN, 40);
        assert_eq!(record_header_len(2), 56);
    }
}
