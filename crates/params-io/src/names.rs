//! File-safe names for tensors: an injective mapping from any name (any
//! bytes) to a portable file-name stem.
//!
//! Bytes `a-z`, `0-9`, `_`, `-` and `.` are kept; every other byte
//! (including upper-case letters, so that names differing only in case
//! stay distinct on case-insensitive file systems, and `%` itself) becomes
//! `%XX` with upper-case hex digits. The empty name becomes `%`, which no
//! other name can give (every other `%` is followed by two hex digits). A
//! stem whose part before the first `.` is a reserved Windows device name
//! (`con`, `nul`, `com1`, ...) gets its first byte escaped. Decoding
//! ([`decode_file_stem`]) gives the name back, which proves injectivity.

/// Bytes kept as they are.
fn is_plain(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'-' | b'.')
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

fn is_reserved_device(stem: &str) -> bool {
    let base = stem.split('.').next().unwrap_or("");
    matches!(base, "con" | "prn" | "aux" | "nul")
        || (base.len() == 4
            && (base.starts_with("com") || base.starts_with("lpt"))
            && base.as_bytes()[3].is_ascii_digit())
}

fn escape(out: &mut String, b: u8) {
    out.push('%');
    out.push(HEX[usize::from(b >> 4)] as char);
    out.push(HEX[usize::from(b & 15)] as char);
}

/// The file-name stem of a tensor name (add `.npy` for the file).
///
/// ```
/// use params_io::names::{decode_file_stem, file_stem};
/// assert_eq!(file_stem(b"conv1_weight"), "conv1_weight");
/// assert_eq!(file_stem(b"layer/0.Bias"), "layer%2F0.%42ias");
/// assert_eq!(file_stem(b""), "%");
/// assert_eq!(file_stem(b"nul"), "%6Eul");
/// assert_eq!(decode_file_stem("layer%2F0.%42ias").as_deref(), Some(&b"layer/0.Bias"[..]));
/// ```
pub fn file_stem(name: &[u8]) -> String {
    if name.is_empty() {
        return "%".to_owned();
    }
    let mut out = String::with_capacity(name.len());
    for &b in name {
        if is_plain(b) {
            out.push(b as char);
        } else {
            escape(&mut out, b);
        }
    }
    if is_reserved_device(&out) {
        let mut fixed = String::with_capacity(out.len() + 2);
        escape(&mut fixed, name[0]);
        fixed.push_str(&out[1..]);
        return fixed;
    }
    out
}

/// The name a stem was made from, or `None` if no name gives this stem
/// (every stem [`file_stem`] makes decodes; some decodable texts are not
/// canonical, which this also rejects).
pub fn decode_file_stem(stem: &str) -> Option<Vec<u8>> {
    if stem == "%" {
        return Some(Vec::new());
    }
    let bytes = stem.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let hex = stem.get(i + 1..i + 3)?;
            if !hex
                .bytes()
                .all(|h| h.is_ascii_digit() || (b'A'..=b'F').contains(&h))
            {
                return None;
            }
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else if is_plain(b) {
            out.push(b);
            i += 1;
        } else {
            return None;
        }
    }
    if out.is_empty() || file_stem(&out) != stem {
        return None;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_names_give_distinct_stems() {
        let names: [&[u8]; 12] = [
            b"",
            b"%",
            b"%25",
            b"a",
            b"A",
            b"a/b",
            b"a%2Fb",
            b"..",
            b"con",
            b"con.x",
            b"\xff",
            "日本".as_bytes(),
        ];
        let stems: Vec<String> = names.iter().map(|n| file_stem(n)).collect();
        for (i, a) in stems.iter().enumerate() {
            assert!(
                !a.contains('/') && !a.contains('\\') && !a.contains('\0'),
                "{a}"
            );
            assert_eq!(decode_file_stem(a).as_deref(), Some(names[i]), "{a}");
            for b in &stems[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(file_stem(b"con.x"), "%63on.x");
        assert_eq!(file_stem(b"com1"), "%63om1");
        assert_eq!(file_stem(b"com"), "com");
    }

    #[test]
    fn non_canonical_stems_are_rejected() {
        assert_eq!(decode_file_stem("%6e"), None);
        assert_eq!(decode_file_stem("%61"), None);
        assert_eq!(decode_file_stem("A"), None);
        assert_eq!(decode_file_stem("%4"), None);
        assert_eq!(decode_file_stem("nul"), None);
    }
}
