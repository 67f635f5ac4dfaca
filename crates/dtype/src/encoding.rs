//! Text encodings of string types.

use std::fmt;

/// The encoding of a string type's code units.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StringEncoding {
    /// 7-bit ASCII, one byte per character.
    Ascii,
    /// UTF-8 (the default).
    Utf8,
    /// UTF-16 in native byte order, surrogate pairs allowed.
    Utf16,
    /// UCS-2: UTF-16 code units without surrogate pairs (BMP only).
    Ucs2,
    /// UTF-32 in native byte order.
    Utf32,
}

impl StringEncoding {
    /// Every encoding, in a stable order.
    pub const ALL: [StringEncoding; 5] = [
        StringEncoding::Ascii,
        StringEncoding::Utf8,
        StringEncoding::Utf16,
        StringEncoding::Ucs2,
        StringEncoding::Utf32,
    ];

    /// Bytes per code unit (also the alignment of a fixed string).
    pub const fn unit_size(self) -> usize {
        match self {
            StringEncoding::Ascii | StringEncoding::Utf8 => 1,
            StringEncoding::Utf16 | StringEncoding::Ucs2 => 2,
            StringEncoding::Utf32 => 4,
        }
    }

    /// The name printed in canonical datashape text. These are the canonical
    /// names of Blaze's `datashape` package (`A`, `U8`, `U16`, `U32`); UCS-2,
    /// which Blaze does not know, prints as `ucs2`.
    pub const fn canonical_name(self) -> &'static str {
        match self {
            StringEncoding::Ascii => "A",
            StringEncoding::Utf8 => "U8",
            StringEncoding::Utf16 => "U16",
            StringEncoding::Ucs2 => "ucs2",
            StringEncoding::Utf32 => "U32",
        }
    }

    /// Parses an encoding name: the long names `ascii`, `utf8`, `utf16`,
    /// `ucs2`, `utf32` (also with `-` or `_`, e.g. `utf-8`, `ucs_2`,
    /// `us-ascii`) and datashape's short names `A`, `U8`, `U16`, `U32`.
    pub fn from_name(name: &str) -> Option<StringEncoding> {
        Some(match name {
            "A" | "ascii" | "us-ascii" => StringEncoding::Ascii,
            "U8" | "utf8" | "utf-8" | "utf_8" => StringEncoding::Utf8,
            "U16" | "utf16" | "utf-16" | "utf_16" => StringEncoding::Utf16,
            "ucs2" | "ucs-2" | "ucs_2" => StringEncoding::Ucs2,
            "U32" | "utf32" | "utf-32" | "utf_32" => StringEncoding::Utf32,
            _ => return None,
        })
    }
}

impl fmt::Display for StringEncoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.canonical_name())
    }
}
