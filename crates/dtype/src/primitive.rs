//! Primitive (scalar) element types and byte order.

use std::fmt;

/// A primitive element type: a fixed-size scalar stored in the machine's
/// native byte order unless wrapped in [`TypeKind::NonNative`](crate::TypeKind::NonNative).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Primitive {
    /// One byte, `0` is false and `1` is true.
    Bool,
    /// Signed 8-bit integer.
    Int8,
    /// Signed 16-bit integer.
    Int16,
    /// Signed 32-bit integer.
    Int32,
    /// Signed 64-bit integer.
    Int64,
    /// Unsigned 8-bit integer.
    UInt8,
    /// Unsigned 16-bit integer.
    UInt16,
    /// Unsigned 32-bit integer.
    UInt32,
    /// Unsigned 64-bit integer.
    UInt64,
    /// IEEE 754 binary16.
    Float16,
    /// Brain floating point: the upper 16 bits of a binary32.
    BFloat16,
    /// IEEE 754 binary32.
    Float32,
    /// IEEE 754 binary64.
    Float64,
    /// A pair of `float32` (real, imaginary).
    Complex64,
    /// A pair of `float64` (real, imaginary).
    Complex128,
}

/// What kind of number a [`Primitive`] holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PrimitiveKind {
    /// `bool`.
    Bool,
    /// Signed integers.
    SignedInt,
    /// Unsigned integers.
    UnsignedInt,
    /// Real floating point (`float16`, `bfloat16`, `float32`, `float64`).
    Float,
    /// Complex floating point.
    Complex,
}

impl Primitive {
    /// Every primitive, in a stable order.
    pub const ALL: [Primitive; 15] = [
        Primitive::Bool,
        Primitive::Int8,
        Primitive::Int16,
        Primitive::Int32,
        Primitive::Int64,
        Primitive::UInt8,
        Primitive::UInt16,
        Primitive::UInt32,
        Primitive::UInt64,
        Primitive::Float16,
        Primitive::BFloat16,
        Primitive::Float32,
        Primitive::Float64,
        Primitive::Complex64,
        Primitive::Complex128,
    ];

    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            Primitive::Bool | Primitive::Int8 | Primitive::UInt8 => 1,
            Primitive::Int16 | Primitive::UInt16 | Primitive::Float16 | Primitive::BFloat16 => 2,
            Primitive::Int32 | Primitive::UInt32 | Primitive::Float32 => 4,
            Primitive::Int64 | Primitive::UInt64 | Primitive::Float64 | Primitive::Complex64 => 8,
            Primitive::Complex128 => 16,
        }
    }

    /// Required alignment in bytes (a complex number aligns like its parts).
    pub const fn alignment(self) -> usize {
        match self {
            Primitive::Complex64 => 4,
            Primitive::Complex128 => 8,
            other => other.size(),
        }
    }

    /// The size of the unit that byte order applies to: the whole value, or
    /// one part of a complex number.
    pub const fn swap_unit(self) -> usize {
        self.alignment()
    }

    /// The kind of number.
    pub const fn kind(self) -> PrimitiveKind {
        match self {
            Primitive::Bool => PrimitiveKind::Bool,
            Primitive::Int8 | Primitive::Int16 | Primitive::Int32 | Primitive::Int64 => {
                PrimitiveKind::SignedInt
            }
            Primitive::UInt8 | Primitive::UInt16 | Primitive::UInt32 | Primitive::UInt64 => {
                PrimitiveKind::UnsignedInt
            }
            Primitive::Float16 | Primitive::BFloat16 | Primitive::Float32 | Primitive::Float64 => {
                PrimitiveKind::Float
            }
            Primitive::Complex64 | Primitive::Complex128 => PrimitiveKind::Complex,
        }
    }

    /// The short name (`int32`, `complex64`, ...). Canonical datashape
    /// text prints complex types as `complex[float32]`, as Blaze does.
    pub const fn name(self) -> &'static str {
        match self {
            Primitive::Bool => "bool",
            Primitive::Int8 => "int8",
            Primitive::Int16 => "int16",
            Primitive::Int32 => "int32",
            Primitive::Int64 => "int64",
            Primitive::UInt8 => "uint8",
            Primitive::UInt16 => "uint16",
            Primitive::UInt32 => "uint32",
            Primitive::UInt64 => "uint64",
            Primitive::Float16 => "float16",
            Primitive::BFloat16 => "bfloat16",
            Primitive::Float32 => "float32",
            Primitive::Float64 => "float64",
            Primitive::Complex64 => "complex64",
            Primitive::Complex128 => "complex128",
        }
    }

    /// Looks a primitive up by its datashape name or alias: `int` (int32),
    /// `real` (float64), `complex` (complex128), `intptr` and `uintptr`
    /// (the pointer-sized integers of the target).
    pub fn from_name(name: &str) -> Option<Primitive> {
        Some(match name {
            "bool" => Primitive::Bool,
            "int8" => Primitive::Int8,
            "int16" => Primitive::Int16,
            "int32" | "int" => Primitive::Int32,
            "int64" => Primitive::Int64,
            "uint8" => Primitive::UInt8,
            "uint16" => Primitive::UInt16,
            "uint32" => Primitive::UInt32,
            "uint64" => Primitive::UInt64,
            "float16" => Primitive::Float16,
            "bfloat16" => Primitive::BFloat16,
            "float32" => Primitive::Float32,
            "float64" | "real" => Primitive::Float64,
            "complex64" => Primitive::Complex64,
            "complex128" | "complex" => Primitive::Complex128,
            "intptr" => Self::INTPTR,
            "uintptr" => Self::UINTPTR,
            _ => return None,
        })
    }

    /// The signed pointer-sized integer of the target (`intptr`).
    pub const INTPTR: Primitive = if usize::BITS == 64 {
        Primitive::Int64
    } else {
        Primitive::Int32
    };

    /// The unsigned pointer-sized integer of the target (`uintptr`).
    pub const UINTPTR: Primitive = if usize::BITS == 64 {
        Primitive::UInt64
    } else {
        Primitive::UInt32
    };
}

impl fmt::Display for Primitive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A byte order, stated absolutely (not relative to the host).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Endianness {
    /// Least significant byte first.
    Little,
    /// Most significant byte first.
    Big,
}

impl Endianness {
    /// The byte order of the machine this code runs on.
    pub const NATIVE: Endianness = if cfg!(target_endian = "little") {
        Endianness::Little
    } else {
        Endianness::Big
    };

    /// The datashape constructor name that wraps a primitive in this order.
    pub const fn constructor(self) -> &'static str {
        match self {
            Endianness::Little => "little_endian",
            Endianness::Big => "big_endian",
        }
    }
}
