//! NumPy `.npy` files (format versions 1.0, 2.0 and 3.0 read; 1.0 or 2.0
//! written, byte-identical to `numpy.save` for the same array).
//!
//! A file is the magic `\x93NUMPY`, a version, a header length, a Python
//! dict literal `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`
//! padded with spaces and a newline so that the data starts on a multiple
//! of 64 bytes, then the data.
//!
//! `bfloat16` has no numpy type: it is written as `<u2` (the raw bits;
//! `ml_dtypes.bfloat16` views them back).

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use dtype::{Endianness, Primitive, TypeKind};

use crate::error::{Error, NpyError};
use crate::tensor::{Tensor, element_count};
use crate::write::TensorSource;

/// The 6 bytes every `.npy` file starts with.
pub const MAGIC: &[u8; 6] = b"\x93NUMPY";
/// The largest header this reader accepts (numpy's own default limit is 10 000).
pub const MAX_HEADER_LEN: u64 = 1 << 20;
const ALIGN: usize = 64;
const GROWTH_AXIS_MAX_DIGITS: usize = 21;

/// The numpy `descr` written for a primitive (little-endian; `bfloat16` as `<u2`).
pub fn descr(p: Primitive) -> &'static str {
    match p {
        Primitive::Bool => "|b1",
        Primitive::Int8 => "|i1",
        Primitive::Int16 => "<i2",
        Primitive::Int32 => "<i4",
        Primitive::Int64 => "<i8",
        Primitive::UInt8 => "|u1",
        Primitive::UInt16 | Primitive::BFloat16 => "<u2",
        Primitive::UInt32 => "<u4",
        Primitive::UInt64 => "<u8",
        Primitive::Float16 => "<f2",
        Primitive::Float32 => "<f4",
        Primitive::Float64 => "<f8",
        Primitive::Complex64 => "<c8",
        Primitive::Complex128 => "<c16",
    }
}

/// The complete preamble (magic, version, length, padded header) for an
/// array, exactly as `numpy.save` writes it.
pub fn header_bytes(descr: &str, fortran_order: bool, shape: &[usize]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    let shape_repr = match dims.len() {
        0 => "()".to_owned(),
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let fortran = if fortran_order { "True" } else { "False" };
    let mut header =
        format!("{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape_repr}, }}");
    let growth = if fortran_order {
        dims.last()
    } else {
        dims.first()
    };
    if let Some(d) = growth {
        header.push_str(&" ".repeat(GROWTH_AXIS_MAX_DIGITS.saturating_sub(d.len())));
    }
    let hlen = header.len() + 1;
    let (version, len_size) = if 8 + 2 + hlen + ALIGN <= u16::MAX as usize {
        (1u8, 2)
    } else {
        (2u8, 4)
    };
    let pad = ALIGN - ((8 + len_size + hlen) % ALIGN);
    let total_len = hlen + pad;
    let mut out = Vec::with_capacity(8 + len_size + total_len);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[version, 0]);
    if len_size == 2 {
        out.extend_from_slice(&(total_len as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(total_len as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    out.resize(out.len() + pad, b' ');
    out.push(b'\n');
    out
}

/// Writes a tensor as `.npy` (C order, little-endian); returns the bytes written.
pub fn write_npy<W: Write>(w: &mut W, t: &Tensor) -> io::Result<u64> {
    let head = header_bytes(descr(t.primitive()), false, t.shape());
    w.write_all(&head)?;
    w.write_all(t.data())?;
    Ok((head.len() + t.nbytes()) as u64)
}

/// What a `.npy` header says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpyHeader {
    /// The `descr` text.
    pub descr: String,
    /// The element type.
    pub primitive: Primitive,
    /// Byte order of the data.
    pub byte_order: Endianness,
    /// Whether the data is in Fortran (column-major) order.
    pub fortran_order: bool,
    /// The shape.
    pub shape: Vec<usize>,
    /// File offset of the data.
    pub data_offset: u64,
    /// Bytes of data.
    pub nbytes: u64,
}

fn header_err(offset: u64, reason: impl Into<String>) -> NpyError {
    NpyError::Header {
        offset,
        reason: reason.into(),
    }
}

/// A value of the header's Python literal.
#[derive(Debug, PartialEq)]
enum Lit {
    Str(String),
    Bool(bool),
    Int(u64),
    Seq(Vec<Lit>),
    Dict(Vec<(Lit, Lit)>),
    None,
}

struct LitParser<'a> {
    s: &'a [u8],
    i: usize,
    base: u64,
}

impl LitParser<'_> {
    fn err(&self, reason: &str) -> NpyError {
        header_err(self.base + self.i as u64, reason)
    }

    fn ws(&mut self) {
        while self.s.get(self.i).is_some_and(|b| b.is_ascii_whitespace()) {
            self.i += 1;
        }
    }

    fn eat(&mut self, b: u8) -> bool {
        self.ws();
        if self.s.get(self.i) == Some(&b) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: u32) -> Result<Lit, NpyError> {
        if depth > 8 {
            return Err(self.err("nested too deeply"));
        }
        self.ws();
        let Some(&c) = self.s.get(self.i) else {
            return Err(self.err("unexpected end of header"));
        };
        match c {
            b'\'' | b'"' => {
                let start = self.i + 1;
                let len = self.s[start..].iter().position(|&b| b == c || b == b'\\');
                match len {
                    Some(n) if self.s[start + n] == c => {
                        self.i = start + n + 1;
                        let text = std::str::from_utf8(&self.s[start..start + n])
                            .map_err(|_| self.err("string is not UTF-8"))?;
                        Ok(Lit::Str(text.to_owned()))
                    }
                    _ => Err(self.err("unterminated or escaped string")),
                }
            }
            b'(' | b'[' => {
                let close = if c == b'(' { b')' } else { b']' };
                self.i += 1;
                let mut items = Vec::new();
                loop {
                    if self.eat(close) {
                        return Ok(Lit::Seq(items));
                    }
                    items.push(self.value(depth + 1)?);
                    if !self.eat(b',') {
                        if self.eat(close) {
                            return Ok(Lit::Seq(items));
                        }
                        return Err(self.err("expected ',' or a closing bracket"));
                    }
                }
            }
            b'{' => {
                self.i += 1;
                let mut items = Vec::new();
                loop {
                    if self.eat(b'}') {
                        return Ok(Lit::Dict(items));
                    }
                    let k = self.value(depth + 1)?;
                    if !self.eat(b':') {
                        return Err(self.err("expected ':'"));
                    }
                    let v = self.value(depth + 1)?;
                    items.push((k, v));
                    if !self.eat(b',') {
                        if self.eat(b'}') {
                            return Ok(Lit::Dict(items));
                        }
                        return Err(self.err("expected ',' or '}'"));
                    }
                }
            }
            b'0'..=b'9' => {
                let start = self.i;
                while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
                    self.i += 1;
                }
                let text = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
                let v = text
                    .parse::<u64>()
                    .map_err(|_| self.err("integer too large"))?;
                if self.s.get(self.i) == Some(&b'L') {
                    self.i += 1;
                }
                Ok(Lit::Int(v))
            }
            _ => {
                for (word, lit) in [
                    ("True", Lit::Bool(true)),
                    ("False", Lit::Bool(false)),
                    ("None", Lit::None),
                ] {
                    if self.s[self.i..].starts_with(word.as_bytes()) {
                        self.i += word.len();
                        return Ok(lit);
                    }
                }
                Err(self.err("unexpected character"))
            }
        }
    }
}

fn primitive_of_descr(descr: &str) -> Result<(Primitive, Endianness), NpyError> {
    let ty = dtype::numpy::from_numpy(descr).map_err(|_| NpyError::Dtype(descr.to_owned()))?;
    match ty.kind() {
        TypeKind::Primitive(p) => Ok((*p, Endianness::NATIVE)),
        TypeKind::NonNative { primitive, order } => Ok((*primitive, *order)),
        _ => Err(NpyError::Dtype(descr.to_owned())),
    }
}

/// Reads and checks a header. `file_len`, when known, bounds the header
/// and the data.
pub fn read_header<R: Read>(r: &mut R, file_len: Option<u64>) -> Result<NpyHeader, Error> {
    let mut pre = [0u8; 8];
    r.read_exact(&mut pre)
        .map_err(|_| NpyError::NotNpy("shorter than the magic".to_owned()))?;
    if &pre[..6] != MAGIC {
        return Err(NpyError::NotNpy("bad magic".to_owned()).into());
    }
    let len_size: u64 = match pre[6] {
        1 => 2,
        2 | 3 => 4,
        v => return Err(NpyError::NotNpy(format!("unsupported version {v}.{}", pre[7])).into()),
    };
    let mut lb = [0u8; 4];
    r.read_exact(&mut lb[..len_size as usize])
        .map_err(|_| header_err(8, "truncated header length"))?;
    let hlen = u64::from(u32::from_le_bytes(lb));
    let start = 8 + len_size;
    if hlen > MAX_HEADER_LEN || file_len.is_some_and(|l| start + hlen > l) {
        return Err(header_err(
            8,
            format!("header length {hlen} exceeds the file or the {MAX_HEADER_LEN}-byte limit"),
        )
        .into());
    }
    let mut text = Vec::with_capacity(hlen as usize);
    Read::take(&mut *r, hlen)
        .read_to_end(&mut text)
        .map_err(|e| Error::Io {
            offset: start,
            source: e,
        })?;
    if (text.len() as u64) < hlen {
        return Err(header_err(start, "truncated header").into());
    }
    let mut p = LitParser {
        s: &text,
        i: 0,
        base: start,
    };
    let Lit::Dict(items) = p.value(0)? else {
        return Err(header_err(start, "header is not a dict").into());
    };
    p.ws();
    if p.i != text.len() {
        return Err(p.err("text after the header dict").into());
    }
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    for (k, v) in items {
        match (k, v) {
            (Lit::Str(k), Lit::Str(d)) if k == "descr" && descr.is_none() => descr = Some(d),
            (Lit::Str(k), Lit::Bool(f)) if k == "fortran_order" && fortran.is_none() => {
                fortran = Some(f)
            }
            (Lit::Str(k), Lit::Seq(dims)) if k == "shape" && shape.is_none() => {
                let dims =
                    dims.into_iter()
                        .map(|d| match d {
                            Lit::Int(n) => usize::try_from(n)
                                .map_err(|_| header_err(start, "dimension too large")),
                            _ => Err(header_err(start, "shape must hold integers")),
                        })
                        .collect::<Result<Vec<usize>, NpyError>>()?;
                shape = Some(dims);
            }
            (k, _) => {
                return Err(header_err(start, format!("unexpected or repeated key {k:?}")).into());
            }
        }
    }
    let (Some(descr), Some(fortran_order), Some(shape)) = (descr, fortran, shape) else {
        return Err(header_err(start, "header needs 'descr', 'fortran_order' and 'shape'").into());
    };
    let (primitive, byte_order) = primitive_of_descr(&descr)?;
    let nbytes = element_count(&shape)
        .and_then(|n| n.checked_mul(primitive.size()))
        .ok_or_else(|| header_err(start, "array size overflows"))? as u64;
    let data_offset = start + hlen;
    if let Some(l) = file_len
        && data_offset + nbytes > l
    {
        return Err(NpyError::Truncated {
            needed: nbytes,
            available: l - data_offset,
        }
        .into());
    }
    Ok(NpyHeader {
        descr,
        primitive,
        byte_order,
        fortran_order,
        shape,
        data_offset,
        nbytes,
    })
}

/// Converts raw `.npy` data to C order, little-endian, in place or by copy.
fn normalize(h: &NpyHeader, mut data: Vec<u8>) -> Vec<u8> {
    let unit = h.primitive.swap_unit();
    if h.byte_order != Endianness::Little && unit > 1 {
        for c in data.chunks_exact_mut(unit) {
            c.reverse();
        }
    }
    if h.fortran_order && h.shape.len() > 1 {
        data = fortran_to_c(&data, &h.shape, h.primitive.size());
    }
    data
}

/// Reorders Fortran-order elements into C order.
fn fortran_to_c(data: &[u8], shape: &[usize], size: usize) -> Vec<u8> {
    let n = element_count(shape).unwrap_or(0);
    let mut out = Vec::with_capacity(data.len());
    if n == 0 {
        return out;
    }
    let mut fstride = Vec::with_capacity(shape.len());
    let mut acc = 1;
    for &d in shape {
        fstride.push(acc);
        acc *= d;
    }
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..n {
        let f: usize = idx.iter().zip(&fstride).map(|(i, s)| i * s).sum();
        out.extend_from_slice(&data[f * size..(f + 1) * size]);
        for k in (0..shape.len()).rev() {
            idx[k] += 1;
            if idx[k] < shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    out
}

/// Reads a whole `.npy` file held in memory as a tensor (C order, little-endian).
pub fn read_npy_bytes(buf: &[u8]) -> Result<Tensor, Error> {
    let mut r = buf;
    let h = read_header(&mut r, Some(buf.len() as u64))?;
    let start = h.data_offset as usize;
    let data = buf[start..start + h.nbytes as usize].to_vec();
    let data = normalize(&h, data);
    Tensor::new(h.primitive, &h.shape, data)
}

/// Reads a `.npy` file as a tensor.
pub fn read_npy(path: impl AsRef<Path>) -> Result<Tensor, Error> {
    let path = path.as_ref();
    let src = NpyFile::open(path)?;
    let mut data = Vec::with_capacity(src.header.nbytes as usize);
    src.write_data(&mut data)
        .map_err(|e| Error::os("read", e).at_path(path))?;
    Tensor::new(src.header.primitive, &src.header.shape, data)
}

/// A `.npy` file on disk as a [`TensorSource`]: its data is streamed (and
/// byte-swapped if big-endian) when written; Fortran-order arrays with two
/// or more dimensions are reordered in memory.
#[derive(Clone, Debug)]
pub struct NpyFile {
    /// The file.
    pub path: PathBuf,
    /// Its header.
    pub header: NpyHeader,
}

impl NpyFile {
    /// Opens a file and reads its header.
    pub fn open(path: impl AsRef<Path>) -> Result<NpyFile, Error> {
        let path = path.as_ref();
        let run = || -> Result<NpyHeader, Error> {
            let mut f = File::open(path).map_err(|e| Error::os("open", e))?;
            let len = f.metadata().map_err(|e| Error::os("stat", e))?.len();
            read_header(&mut io::BufReader::new(&mut f), Some(len))
        };
        let header = run().map_err(|e| e.at_path(path))?;
        Ok(NpyFile {
            path: path.to_owned(),
            header,
        })
    }
}

impl TensorSource for NpyFile {
    fn primitive(&self) -> Primitive {
        self.header.primitive
    }

    fn shape(&self) -> &[usize] {
        &self.header.shape
    }

    fn write_data(&self, w: &mut dyn Write) -> io::Result<()> {
        let h = &self.header;
        let mut f = File::open(&self.path)?;
        f.seek(SeekFrom::Start(h.data_offset))?;
        let mut f = f.take(h.nbytes);
        let unit = h.primitive.swap_unit();
        if h.fortran_order && h.shape.len() > 1 {
            let mut data = Vec::with_capacity(h.nbytes as usize);
            f.read_to_end(&mut data)?;
            if (data.len() as u64) != h.nbytes {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            return w.write_all(&normalize(h, data));
        }
        let swap = h.byte_order != Endianness::Little && unit > 1;
        let mut buf = vec![0u8; 1 << 20];
        let mut left = h.nbytes;
        while left > 0 {
            let n = (left.min(buf.len() as u64)) as usize;
            f.read_exact(&mut buf[..n])?;
            if swap {
                for c in buf[..n].chunks_exact_mut(unit) {
                    c.reverse();
                }
            }
            w.write_all(&buf[..n])?;
            left -= n as u64;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_matches_numpy_save() {
        // np.save of np.zeros((2, 3), '<f4'): 128-byte preamble.
        let h = header_bytes("<f4", false, &[2, 3]);
        assert_eq!(h.len() % 64, 0);
        let text = std::str::from_utf8(&h[10..]).unwrap();
        assert!(text.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"));
        assert!(text.ends_with(" \n"));
        assert_eq!(&h[..8], b"\x93NUMPY\x01\x00");
        let h0 = header_bytes("|b1", false, &[]);
        assert!(
            std::str::from_utf8(&h0[10..])
                .unwrap()
                .contains("'shape': (), }")
        );
        let h1 = header_bytes("<i8", false, &[5]);
        assert!(
            std::str::from_utf8(&h1[10..])
                .unwrap()
                .contains("'shape': (5,), }")
        );
    }

    #[test]
    fn round_trip_every_primitive() {
        for p in Primitive::ALL {
            let data: Vec<u8> = (0..p.size() * 6).map(|i| i as u8).collect();
            let t = Tensor::new(p, &[2, 3], data).unwrap();
            let mut buf = Vec::new();
            write_npy(&mut buf, &t).unwrap();
            let back = read_npy_bytes(&buf).unwrap();
            let expect = if p == Primitive::BFloat16 {
                Primitive::UInt16
            } else {
                p
            };
            assert_eq!(back.primitive(), expect);
            assert_eq!(back.shape(), t.shape());
            assert_eq!(back.data(), t.data());
        }
    }

    #[test]
    fn big_endian_and_fortran_are_normalized() {
        let mut buf = header_bytes(">i2", true, &[2, 3]);
        // Fortran order of [[1,2,3],[4,5,6]] is 1,4,2,5,3,6.
        for v in [1i16, 4, 2, 5, 3, 6] {
            buf.extend_from_slice(&v.to_be_bytes());
        }
        let t = read_npy_bytes(&buf).unwrap();
        let vals: Vec<i16> = t
            .data()
            .chunks(2)
            .map(|c| i16::from_le_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(vals, [1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn hostile_headers_are_errors() {
        let good = header_bytes("<f4", false, &[2]);
        let mut with_data = good.clone();
        with_data.extend_from_slice(&[0; 8]);
        assert!(read_npy_bytes(&with_data).is_ok());
        assert!(read_npy_bytes(&good).is_err(), "data missing");
        for cut in 0..good.len() {
            assert!(read_npy_bytes(&good[..cut]).is_err());
        }
        let mut huge = good.clone();
        huge[8..10].copy_from_slice(&u16::MAX.to_le_bytes());
        assert!(read_npy_bytes(&huge).is_err());
        for text in [
            "{'descr': '<f4', 'fortran_order': False}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}",
            "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': ((((((((((1,),),),),),),),),),)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
            "{'descr': '|S4', 'fortran_order': False, 'shape': (1,)}",
        ] {
            let mut b = MAGIC.to_vec();
            b.extend_from_slice(&[1, 0]);
            b.extend_from_slice(&(text.len() as u16).to_le_bytes());
            b.extend_from_slice(text.as_bytes());
            b.extend_from_slice(&[0; 64]);
            assert!(read_npy_bytes(&b).is_err(), "{text}");
        }
    }
}
