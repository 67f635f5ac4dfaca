//! Mapping to and from numpy dtype strings (the array-interface `typestr`
//! form: byte order `<`, `>`, `|` or `=`, a kind letter, a size).
//!
//! numpy records alignment as an array flag, not in the dtype, so
//! `unaligned[T]` maps to `T`'s string; the reverse gives the aligned type.

use crate::encoding::StringEncoding;
use crate::error::MappingError;
use crate::primitive::{Endianness, Primitive};
use crate::types::{Type, TypeKind};

fn no_equivalent(ty: &Type) -> MappingError {
    MappingError::NoEquivalent {
        ty: ty.to_string(),
        target: "numpy",
    }
}

fn kind_letter(p: Primitive) -> Option<char> {
    Some(match p {
        Primitive::Bool => 'b',
        Primitive::Int8 | Primitive::Int16 | Primitive::Int32 | Primitive::Int64 => 'i',
        Primitive::UInt8 | Primitive::UInt16 | Primitive::UInt32 | Primitive::UInt64 => 'u',
        Primitive::Float16 | Primitive::Float32 | Primitive::Float64 => 'f',
        Primitive::Complex64 | Primitive::Complex128 => 'c',
        Primitive::BFloat16 => return None,
    })
}

fn order_char(order: Endianness) -> char {
    match order {
        Endianness::Little => '<',
        Endianness::Big => '>',
    }
}

fn primitive_str(ty: &Type, p: Primitive, order: Endianness) -> Result<String, MappingError> {
    let letter = kind_letter(p).ok_or_else(|| no_equivalent(ty))?;
    let order = if p.size() == 1 {
        '|'
    } else {
        order_char(order)
    };
    Ok(format!("{order}{letter}{}", p.size()))
}

/// The numpy dtype string of a scalar type.
///
/// ```
/// use dtype::{Type, numpy};
/// let t: Type = "big_endian[float64]".parse()?;
/// assert_eq!(numpy::to_numpy(&t)?, ">f8");
/// assert_eq!(numpy::to_numpy(&"string[16, 'A']".parse()?)?, "|S16");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn to_numpy(ty: &Type) -> Result<String, MappingError> {
    match ty.kind() {
        TypeKind::Primitive(p) => primitive_str(ty, *p, Endianness::NATIVE),
        TypeKind::NonNative { primitive, order } => primitive_str(ty, *primitive, *order),
        TypeKind::Unaligned(inner) => to_numpy(inner),
        TypeKind::FixedString {
            size,
            encoding: StringEncoding::Ascii,
        } => Ok(format!("|S{size}")),
        TypeKind::FixedString {
            size,
            encoding: StringEncoding::Utf32,
        } => Ok(format!("{}U{}", order_char(Endianness::NATIVE), size / 4)),
        _ => Err(no_equivalent(ty)),
    }
}

/// Parses a numpy dtype string (`'<i4'`, `'|b1'`, `'>f8'`, `'|S16'`,
/// `'<U8'`, or without the order character, which means native).
///
/// ```
/// use dtype::numpy::from_numpy;
/// assert_eq!(from_numpy("<i4")?.to_string(), "int32");
/// assert_eq!(from_numpy(">i4")?.to_string(), "big_endian[int32]");
/// assert_eq!(from_numpy("<U8")?.to_string(), "string[32, 'U32']");
/// assert!(from_numpy("<i3").is_err());
/// # Ok::<(), dtype::MappingError>(())
/// ```
pub fn from_numpy(text: &str) -> Result<Type, MappingError> {
    let invalid = |reason: &str| MappingError::Invalid {
        source_system: "numpy",
        text: text.to_owned(),
        reason: reason.to_owned(),
    };
    let (order, rest) = match text.chars().next() {
        Some('<') => (Some(Endianness::Little), &text[1..]),
        Some('>') => (Some(Endianness::Big), &text[1..]),
        Some('=') => (Some(Endianness::NATIVE), &text[1..]),
        Some('|') => (None, &text[1..]),
        Some(_) => (Some(Endianness::NATIVE), text),
        None => return Err(invalid("empty dtype string")),
    };
    let mut chars = rest.chars();
    let letter = chars.next().ok_or_else(|| invalid("missing kind letter"))?;
    let digits = chars.as_str();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid(
            "expected a kind letter followed by a size in digits",
        ));
    }
    let size: usize = digits
        .parse()
        .map_err(|_| invalid("size does not fit in usize"))?;
    let prim = match (letter, size) {
        ('b', 1) => Primitive::Bool,
        ('i', 1) => Primitive::Int8,
        ('i', 2) => Primitive::Int16,
        ('i', 4) => Primitive::Int32,
        ('i', 8) => Primitive::Int64,
        ('u', 1) => Primitive::UInt8,
        ('u', 2) => Primitive::UInt16,
        ('u', 4) => Primitive::UInt32,
        ('u', 8) => Primitive::UInt64,
        ('f', 2) => Primitive::Float16,
        ('f', 4) => Primitive::Float32,
        ('f', 8) => Primitive::Float64,
        ('c', 8) => Primitive::Complex64,
        ('c', 16) => Primitive::Complex128,
        ('S' | 'a', n) => {
            return Type::fixed_string(n, StringEncoding::Ascii)
                .map_err(|e| invalid(&e.to_string()));
        }
        ('U', n) => {
            if order.is_some_and(|o| o != Endianness::NATIVE) {
                return Err(invalid(
                    "non-native byte order of UTF-32 strings is not supported",
                ));
            }
            let bytes = n
                .checked_mul(4)
                .ok_or_else(|| invalid("string size overflows"))?;
            return Type::fixed_string(bytes, StringEncoding::Utf32)
                .map_err(|e| invalid(&e.to_string()));
        }
        ('b' | 'i' | 'u' | 'f' | 'c', _) => {
            return Err(invalid("no numpy type of that kind has that size"));
        }
        _ => return Err(invalid("unknown or unsupported kind letter")),
    };
    match order {
        None if prim.size() != 1 => Err(invalid("'|' (no byte order) is only for one-byte types")),
        None => Ok(Type::primitive(prim)),
        Some(order) => Ok(Type::with_byte_order(prim, order)),
    }
}
