//! String arrays: construction from text, reading back, and transcoding
//! between encodings with errors for characters a target cannot hold.

use dtype::{StringEncoding, Type, TypeKind};

use crate::array::Array;
use crate::block::MemoryBlock;
use crate::error::{Error, Result};
use crate::meta::Meta;

/// Encodes `text` in `encoding` (native byte order for 16/32-bit units).
pub fn encode(text: &str, encoding: StringEncoding) -> Result<Vec<u8>> {
    let bad = |c: char| {
        Error::Encoding(format!(
            "{c:?} cannot be represented in {}",
            encoding.canonical_name()
        ))
    };
    Ok(match encoding {
        StringEncoding::Utf8 => text.as_bytes().to_vec(),
        StringEncoding::Ascii => {
            if let Some(c) = text.chars().find(|c| !c.is_ascii()) {
                return Err(bad(c));
            }
            text.as_bytes().to_vec()
        }
        StringEncoding::Utf16 => text.encode_utf16().flat_map(u16::to_ne_bytes).collect(),
        StringEncoding::Ucs2 => {
            if let Some(c) = text.chars().find(|c| u32::from(*c) > 0xFFFF) {
                return Err(bad(c));
            }
            text.encode_utf16().flat_map(u16::to_ne_bytes).collect()
        }
        StringEncoding::Utf32 => text
            .chars()
            .flat_map(|c| u32::from(c).to_ne_bytes())
            .collect(),
    })
}

/// Decodes `bytes` in `encoding`; invalid data is an error.
pub fn decode(bytes: &[u8], encoding: StringEncoding) -> Result<String> {
    let invalid = |what: &str| {
        Error::Encoding(format!(
            "invalid {} data: {what}",
            encoding.canonical_name()
        ))
    };
    let unit = encoding.unit_size();
    if !bytes.len().is_multiple_of(unit) {
        return Err(invalid("length is not a whole number of code units"));
    }
    match encoding {
        StringEncoding::Utf8 => {
            String::from_utf8(bytes.to_vec()).map_err(|e| invalid(&e.to_string()))
        }
        StringEncoding::Ascii => {
            if bytes.iter().any(|b| !b.is_ascii()) {
                return Err(invalid("byte above 127"));
            }
            Ok(bytes.iter().map(|b| char::from(*b)).collect())
        }
        StringEncoding::Utf16 | StringEncoding::Ucs2 => {
            let units: Vec<u16> = bytes
                .chunks_exact(2)
                .map(|c| u16::from_ne_bytes([c[0], c[1]]))
                .collect();
            if encoding == StringEncoding::Ucs2
                && units.iter().any(|u| (0xD800..0xE000).contains(u))
            {
                return Err(invalid("surrogate code unit"));
            }
            char::decode_utf16(units)
                .collect::<std::result::Result<String, _>>()
                .map_err(|e| invalid(&e.to_string()))
        }
        StringEncoding::Utf32 => bytes
            .chunks_exact(4)
            .map(|c| {
                char::from_u32(u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
                    .ok_or_else(|| invalid("not a code point"))
            })
            .collect(),
    }
}

/// The encoding and fixed size (`None`: variable) of a string type, seen
/// through `unaligned[...]` (string elements are always copied out).
pub(crate) fn string_encoding(ty: &Type) -> Option<(StringEncoding, Option<usize>)> {
    match ty.kind() {
        TypeKind::Unaligned(inner) => string_encoding(inner),
        TypeKind::String(e) => Some((*e, None)),
        TypeKind::FixedString { size, encoding } => Some((*encoding, Some(*size))),
        _ => None,
    }
}

impl Array {
    /// A 1-dimensional array of variable-length strings in `encoding`,
    /// copied into a string pool.
    ///
    /// ```
    /// use dtype::StringEncoding;
    /// use ndobject::Array;
    /// let a = Array::from_strings(&["This", "is", "unicode: é"], StringEncoding::Ucs2)?;
    /// assert_eq!(a.dtype().to_string(), "strided * string['ucs2']");
    /// assert_eq!(a.get_string(&[2])?, "unicode: é");
    /// assert!(Array::from_strings(&["é"], StringEncoding::Ascii).is_err());
    /// # Ok::<(), ndobject::Error>(())
    /// ```
    pub fn from_strings<S: AsRef<str>>(items: &[S], encoding: StringEncoding) -> Result<Array> {
        let a = Array::zeros(Type::string(encoding), &[items.len()])?;
        for (i, s) in items.iter().enumerate() {
            a.set_string(&[i], s.as_ref())?;
        }
        Ok(a)
    }

    /// The string at `index` of a string array (variable or fixed size).
    pub fn get_string(&self, index: &[usize]) -> Result<String> {
        let off = self.offset_of(index)?;
        self.string_at(off)
    }

    /// The pool of a variable-length string element.
    fn string_pool(&self) -> Result<&MemoryBlock> {
        match self.meta.first() {
            Some(Meta::Blockref(pool)) => Ok(pool),
            _ => Err(Error::Pool("missing for a string array")),
        }
    }

    fn string_at(&self, off: usize) -> Result<String> {
        let (encoding, fixed) = string_encoding(&self.element)
            .ok_or_else(|| Error::TypeMismatch(format!("{} is not a string type", self.element)))?;
        let size = fixed.unwrap_or(16);
        let mut raw = vec![0u8; size];
        self.with_read(|base| {
            // SAFETY: an element of `size` bytes at `off`, inside the block.
            unsafe { std::ptr::copy_nonoverlapping(base.as_ptr().add(off), raw.as_mut_ptr(), size) }
        })?;
        let bytes = match fixed {
            Some(_) => {
                let unit = encoding.unit_size();
                let mut end = raw.len();
                while end >= unit && raw[end - unit..end].iter().all(|b| *b == 0) {
                    end -= unit;
                }
                raw.truncate(end);
                raw
            }
            None => {
                let start = u64::from_ne_bytes(raw[..8].try_into().unwrap_or_default());
                let len = u64::from_ne_bytes(raw[8..16].try_into().unwrap_or_default());
                self.string_pool()?.read_bytes(start, len)?
            }
        };
        decode(&bytes, encoding)
    }

    /// Stores `text` at `index` of a string array, encoded in the element
    /// type's encoding. A fixed-size string that is too long is an error.
    pub fn set_string(&self, index: &[usize], text: &str) -> Result<()> {
        let off = self.offset_of(index)?;
        self.store_string(off, text)
    }

    fn store_string(&self, off: usize, text: &str) -> Result<()> {
        let (encoding, fixed) = string_encoding(&self.element)
            .ok_or_else(|| Error::TypeMismatch(format!("{} is not a string type", self.element)))?;
        let bytes = encode(text, encoding)?;
        let element: Vec<u8> = match fixed {
            Some(size) => {
                if bytes.len() > size {
                    return Err(Error::Encoding(format!(
                        "{text:?} needs {} bytes; {} holds {size}",
                        bytes.len(),
                        self.element
                    )));
                }
                let mut e = bytes;
                e.resize(size, 0);
                e
            }
            None => {
                // Check writability before growing the pool.
                if !self.flags.is_writable() || self.flags.is_immutable() {
                    return Err(Error::NotWritable("the array is read-only"));
                }
                let start = self
                    .string_pool()?
                    .pool_append(&bytes, encoding.unit_size())?;
                let mut e = start.to_ne_bytes().to_vec();
                e.extend_from_slice(&(bytes.len() as u64).to_ne_bytes());
                e
            }
        };
        self.with_write(|base| {
            // SAFETY: the element at `off` has `element.len()` bytes inside
            // the block; we hold the write guard.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    element.as_ptr(),
                    base.as_ptr().add(off),
                    element.len(),
                )
            }
        })
    }

    /// All strings in C order.
    pub fn to_strings(&self) -> Result<Vec<String>> {
        self.element_offsets()
            .into_iter()
            .map(|off| self.string_at(off))
            .collect()
    }

    /// String-to-string assignment with transcoding (see [`Array::assign`]).
    pub(crate) fn assign_strings(&self, src: &Array, src_strides: &[isize]) -> Result<()> {
        let src_view = Array::checked(
            src.block.clone(),
            src.offset,
            src.element.clone(),
            self.shape.clone(),
            src_strides.to_vec(),
            src.flags,
            src.meta.clone(),
        )?;
        let texts: Vec<String> = src_view
            .element_offsets()
            .into_iter()
            .map(|off| src.string_at(off))
            .collect::<Result<_>>()?;
        for (off, text) in self.element_offsets().into_iter().zip(texts) {
            self.store_string(off, &text)?;
        }
        Ok(())
    }
}
