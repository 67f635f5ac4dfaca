//! Mapping to and from DLPack's `DLDataType`, as Apache TVM writes it.
//!
//! DLPack data is native-endian, so non-native types have no mapping.
//! DLPack does not record alignment, so `unaligned[T]` maps like `T`.

use crate::error::MappingError;
use crate::primitive::Primitive;
use crate::types::{Type, TypeKind};

/// DLPack's `DLDataType`: a type code, the bits per lane and the lanes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DLDataType {
    /// `kDLInt 0`, `kDLUInt 1`, `kDLFloat 2`, `kDLBfloat 4`, `kDLComplex 5`, `kDLBool 6`, ...
    pub code: u8,
    /// Bits of one lane (complex counts both parts).
    pub bits: u8,
    /// Vector lanes (1 for scalars).
    pub lanes: u16,
}

/// DLPack type codes.
pub mod code {
    /// Signed integer.
    pub const INT: u8 = 0;
    /// Unsigned integer.
    pub const UINT: u8 = 1;
    /// IEEE float.
    pub const FLOAT: u8 = 2;
    /// Opaque handle.
    pub const OPAQUE_HANDLE: u8 = 3;
    /// bfloat16.
    pub const BFLOAT: u8 = 4;
    /// Complex float.
    pub const COMPLEX: u8 = 5;
    /// Boolean (8 bits).
    pub const BOOL: u8 = 6;
}

impl DLDataType {
    /// Makes a `DLDataType`.
    pub const fn new(code: u8, bits: u8, lanes: u16) -> DLDataType {
        DLDataType { code, bits, lanes }
    }

    /// The DLDataType of a primitive (bool as TVM >= 0.25 writes it: `(6, 8, 1)`).
    pub const fn of_primitive(p: Primitive) -> DLDataType {
        let bits = (p.size() * 8) as u8;
        let code = match p {
            Primitive::Bool => code::BOOL,
            Primitive::Int8 | Primitive::Int16 | Primitive::Int32 | Primitive::Int64 => code::INT,
            Primitive::UInt8 | Primitive::UInt16 | Primitive::UInt32 | Primitive::UInt64 => {
                code::UINT
            }
            Primitive::Float16 | Primitive::Float32 | Primitive::Float64 => code::FLOAT,
            Primitive::BFloat16 => code::BFLOAT,
            Primitive::Complex64 | Primitive::Complex128 => code::COMPLEX,
        };
        DLDataType::new(code, bits, 1)
    }

    /// The primitive of a `DLDataType`. Accepts TVM's legacy boolean
    /// `(1, 1, 1)` (uint1, one byte per element) as `bool`.
    ///
    /// ```
    /// use dtype::{Primitive, dlpack::DLDataType};
    /// assert_eq!(DLDataType::new(6, 8, 1).to_primitive()?, Primitive::Bool);
    /// assert_eq!(DLDataType::new(1, 1, 1).to_primitive()?, Primitive::Bool);
    /// assert_eq!(DLDataType::new(5, 64, 1).to_primitive()?, Primitive::Complex64);
    /// assert!(DLDataType::new(2, 32, 4).to_primitive().is_err());
    /// # Ok::<(), dtype::MappingError>(())
    /// ```
    pub fn to_primitive(self) -> Result<Primitive, MappingError> {
        let invalid = |reason: &str| MappingError::Invalid {
            source_system: "DLPack",
            text: format!(
                "(code {}, bits {}, lanes {})",
                self.code, self.bits, self.lanes
            ),
            reason: reason.to_owned(),
        };
        if self.lanes != 1 {
            return Err(invalid("vector types (lanes != 1) are not supported"));
        }
        Ok(match (self.code, self.bits) {
            (code::BOOL, 8) | (code::UINT, 1) => Primitive::Bool,
            (code::INT, 8) => Primitive::Int8,
            (code::INT, 16) => Primitive::Int16,
            (code::INT, 32) => Primitive::Int32,
            (code::INT, 64) => Primitive::Int64,
            (code::UINT, 8) => Primitive::UInt8,
            (code::UINT, 16) => Primitive::UInt16,
            (code::UINT, 32) => Primitive::UInt32,
            (code::UINT, 64) => Primitive::UInt64,
            (code::FLOAT, 16) => Primitive::Float16,
            (code::FLOAT, 32) => Primitive::Float32,
            (code::FLOAT, 64) => Primitive::Float64,
            (code::BFLOAT, 16) => Primitive::BFloat16,
            (code::COMPLEX, 64) => Primitive::Complex64,
            (code::COMPLEX, 128) => Primitive::Complex128,
            (
                code::INT | code::UINT | code::FLOAT | code::BFLOAT | code::COMPLEX | code::BOOL,
                _,
            ) => {
                return Err(invalid("unsupported bit width for this type code"));
            }
            (code::OPAQUE_HANDLE, _) => return Err(invalid("opaque handles have no data type")),
            (7..=17, _) => return Err(invalid("float8/float6/float4 types are not supported")),
            _ => return Err(invalid("unknown type code")),
        })
    }
}

/// The `DLDataType` of a scalar type.
pub fn to_dlpack(ty: &Type) -> Result<DLDataType, MappingError> {
    match ty.kind() {
        TypeKind::Primitive(p) => Ok(DLDataType::of_primitive(*p)),
        TypeKind::Unaligned(inner) => to_dlpack(inner),
        _ => Err(MappingError::NoEquivalent {
            ty: ty.to_string(),
            target: "DLPack",
        }),
    }
}

/// The type of a `DLDataType`.
pub fn from_dlpack(dl: DLDataType) -> Result<Type, MappingError> {
    dl.to_primitive().map(Type::primitive)
}
