//! Mapping to and from the element types of Clara pipeline definitions:
//! `uint8 uint16 uint32 uint64 int8 int16 int32 int64 float16 float32
//! float64` and `string`.

use crate::encoding::StringEncoding;
use crate::error::MappingError;
use crate::primitive::Primitive;
use crate::types::{Type, TypeKind};

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
        TypeKind::Primitive(
            p @ (Primitive::UInt8
            | Primitive::UInt16
            | Primitive::UInt32
            | Primitive::UInt64
            | Primitive::Int8
            | Primitive::Int16
            | Primitive::Int32
            | Primitive::Int64
            | Primitive::Float16
            | Primitive::Float32
            | Primitive::Float64),
        ) => Ok(p.name()),
        TypeKind::String(StringEncoding::Utf8) => Ok("string"),
        _ => Err(MappingError::NoEquivalent {
            ty: ty.to_string(),
            target: "Clara",
        }),
    }
}

/// The type of a Clara element type name.
pub fn from_clara(name: &str) -> Result<Type, MappingError> {
    let ty = match name {
        "string" => Type::string(StringEncoding::Utf8),
        _ => match Primitive::from_name(name) {
            Some(p) => Type::primitive(p),
            None => {
                return Err(MappingError::Invalid {
                    source_system: "Clara",
                    text: name.to_owned(),
                    reason: "not a Clara element type".into(),
                });
            }
        },
    };
    // Only names Clara itself defines (no aliases, no bool/complex/bfloat16).
    match to_clara(&ty) {
        Ok(canonical) if canonical == name => Ok(ty),
        _ => Err(MappingError::Invalid {
            source_system: "Clara",
            text: name.to_owned(),
            reason: "not a Clara element type".into(),
        }),
    }
}
