//! The canonical datashape printer (`Display` for [`Type`]).
//!
//! The text is the form Blaze's `datashape` package prints where it has the
//! type, and always parses back to the same [`Type`].

use std::fmt::{self, Write};

use crate::encoding::StringEncoding;
use crate::primitive::Primitive;
use crate::types::{Type, TypeKind};

/// A primitive's canonical text: its name, except that complex numbers
/// print as Blaze prints them (`complex[float32]`, `complex[float64]`).
fn primitive_text(p: Primitive) -> &'static str {
    match p {
        Primitive::Complex64 => "complex[float32]",
        Primitive::Complex128 => "complex[float64]",
        other => other.name(),
    }
}

/// Whether `name` can be printed without quotes as a record field name.
pub(crate) fn is_bare_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// Writes `text` as a single-quoted datashape string literal.
pub(crate) fn write_quoted(f: &mut impl Write, text: &str) -> fmt::Result {
    f.write_char('\'')?;
    for c in text.chars() {
        match c {
            '\'' => f.write_str("\\'")?,
            '\\' => f.write_str("\\u005c")?,
            '\n' => f.write_str("\\n")?,
            '\r' => f.write_str("\\r")?,
            '\t' => f.write_str("\\t")?,
            c if c.is_control() => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    write!(f, "\\u{unit:04x}")?;
                }
            }
            c => f.write_char(c)?,
        }
    }
    f.write_char('\'')
}

fn write_field_name(f: &mut fmt::Formatter<'_>, name: &str) -> fmt::Result {
    if is_bare_name(name) {
        f.write_str(name)
    } else {
        write_quoted(f, name)
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind() {
            TypeKind::Primitive(p) => f.write_str(primitive_text(*p)),
            TypeKind::NonNative { primitive, order } => {
                write!(f, "{}[{}]", order.constructor(), primitive_text(*primitive))
            }
            TypeKind::Unaligned(inner) => write!(f, "unaligned[{inner}]"),
            TypeKind::String(StringEncoding::Utf8) => f.write_str("string"),
            TypeKind::String(enc) => write!(f, "string['{enc}']"),
            TypeKind::FixedString {
                size,
                encoding: StringEncoding::Utf8,
            } => write!(f, "string[{size}]"),
            TypeKind::FixedString { size, encoding } => write!(f, "string[{size}, '{encoding}']"),
            TypeKind::Bytes => f.write_str("bytes"),
            TypeKind::FixedDim { size, element } => write!(f, "{size} * {element}"),
            TypeKind::StridedDim(element) => write!(f, "strided * {element}"),
            TypeKind::VarDim(element) => write!(f, "var * {element}"),
            TypeKind::Record(fields) => {
                f.write_char('{')?;
                for (i, field) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write_field_name(f, &field.name)?;
                    write!(f, ": {}", field.ty)?;
                }
                f.write_char('}')
            }
            TypeKind::Tuple(items) => {
                f.write_char('(')?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_char(')')
            }
            TypeKind::Option(inner) => write!(f, "?{inner}"),
        }
    }
}
