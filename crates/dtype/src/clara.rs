//! Mapping to and from the element types of Clara pipeline definitions:
//! `uint8 uint16 uint32 uint64 int8 int16 int32 int64 float16 float32
//! float64` and `string`.
//!
//! [`ELEMENTS`] is the one table of Clara's primitive element types in the
//! workspace: their names, the short names our definitions also accept,
//! and the codes of Clara's C API (`nvidia_clara_element_type`), which
//! `fastio`'s stream headers store too.

use crate::encoding::StringEncoding;
use crate::error::MappingError;
use crate::primitive::Primitive;
use crate::types::{Type, TypeKind};

/// One of Clara's primitive element types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaraElement {
    /// The primitive.
    pub primitive: Primitive,
    /// Clara's name (`"float32"`), the primitive's datashape name.
    pub name: &'static str,
    /// The short name pipeline definitions also accept (`"f32"`).
    pub short: &'static str,
    /// The code of Clara's C API (`NVIDIA_CLARA_ELEMENT_TYPE_FLOAT32` is
    /// 10); 0 is "unknown".
    pub code: i32,
}

const fn element(primitive: Primitive, short: &'static str, code: i32) -> ClaraElement {
    ClaraElement {
        primitive,
        name: primitive.name(),
        short,
        code,
    }
}

/// Clara's primitive element types, in the order of their C codes (1 to
/// 11).
pub const ELEMENTS: [ClaraElement; 11] = [
    element(Primitive::UInt8, "u8", 1),
    element(Primitive::UInt16, "u16", 2),
    element(Primitive::UInt32, "u32", 3),
    element(Primitive::UInt64, "u64", 4),
    element(Primitive::Int8, "i8", 5),
    element(Primitive::Int16, "i16", 6),
    element(Primitive::Int32, "i32", 7),
    element(Primitive::Int64, "i64", 8),
    element(Primitive::Float16, "f16", 9),
    element(Primitive::Float32, "f32", 10),
    element(Primitive::Float64, "f64", 11),
];

/// The entry of `p`, if it is a Clara element type.
pub fn element_of(p: Primitive) -> Option<&'static ClaraElement> {
    ELEMENTS.iter().find(|e| e.primitive == p)
}

/// The primitive of a Clara element-type name or its short name
/// (`"float32"`, `"f32"`); None for anything else (`"bool"`, aliases such
/// as `"int"`).
///
/// ```
/// use dtype::{clara, Primitive};
/// assert_eq!(clara::primitive("f32"), Some(Primitive::Float32));
/// assert_eq!(clara::primitive("bool"), None);
/// ```
pub fn primitive(name: &str) -> Option<Primitive> {
    ELEMENTS
        .iter()
        .find(|e| e.name == name || e.short == name)
        .map(|e| e.primitive)
}

/// The C API code of `p` (0, "unknown", for a primitive Clara lacks).
pub fn code(p: Primitive) -> i32 {
    element_of(p).map_or(0, |e| e.code)
}

/// The primitive of a C API code.
pub fn from_code(code: i32) -> Option<Primitive> {
    ELEMENTS
        .iter()
        .find(|e| e.code == code)
        .map(|e| e.primitive)
}

/// The Clara element type name of a type.
///
/// ```
/// use dtype::{clara, Type};
/// assert_eq!(clara::to_clara(&"float32".parse()?)?, "float32");
/// assert_eq!(clara::to_clara(&"string".parse()?)?, "string");
/// assert!(clara::to_clara(&"bool".parse()?).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn to_clara(ty: &Type) -> Result<&'static str, MappingError> {
    match ty.kind() {
        TypeKind::Primitive(p) if element_of(*p).is_some() => Ok(p.name()),
        TypeKind::String(StringEncoding::Utf8) => Ok("string"),
        _ => Err(MappingError::NoEquivalent {
            ty: ty.to_string(),
            target: "Clara",
        }),
    }
}

/// The type of a Clara element type name.
pub fn from_clara(name: &str) -> Result<Type, MappingError> {
    // Only names Clara itself defines (no aliases, no bool/complex/bfloat16).
    if name == "string" {
        return Ok(Type::string(StringEncoding::Utf8));
    }
    match ELEMENTS.iter().find(|e| e.name == name) {
        Some(e) => Ok(Type::primitive(e.primitive)),
        None => Err(MappingError::Invalid {
            source_system: "Clara",
            text: name.to_owned(),
            reason: "not a Clara element type".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_one_to_one_and_codes_are_1_to_11() {
        for (i, e) in ELEMENTS.iter().enumerate() {
            assert_eq!(e.code, i as i32 + 1);
            assert_eq!(from_code(e.code), Some(e.primitive));
            assert_eq!(code(e.primitive), e.code);
            assert_eq!(primitive(e.name), Some(e.primitive));
            assert_eq!(primitive(e.short), Some(e.primitive));
            assert_eq!(Primitive::from_name(e.name), Some(e.primitive));
            assert_eq!(from_clara(e.name).unwrap(), Type::primitive(e.primitive));
        }
        assert_eq!(code(Primitive::Bool), 0);
        assert_eq!(from_code(0), None);
        assert_eq!(from_code(12), None);
        assert!(
            from_clara("f32").is_err(),
            "short names are ours, not Clara's"
        );
    }
}
