//! Glue to `ndobject`: tensors as arrays (zero-copy over the file or map),
//! and arrays as tensors to write (streamed with `write_c_order`).

use std::io::{self, Write};
use std::path::Path;

use dtype::{Endianness, Primitive, TypeKind};
use ndobject::Array;

use crate::error::Error;
use crate::tensor::{ParamDict, Tensor};
use crate::write::{Entry, TensorSource, WriteOptions, write_params, write_params_to_path};

impl Tensor {
    /// The tensor as a read-only `ndobject` array over its memory block:
    /// O(1), no copy, for mapped and owned tensors alike. The array keeps
    /// the block (and so a map) alive; its element type is `unaligned[T]`
    /// when the data offset is not aligned for `T` (`Array::to_contiguous`
    /// makes an aligned copy).
    pub fn to_array(&self) -> Result<Array, Error> {
        let (block, offset) = self.block();
        Ok(Array::from_block(
            block,
            offset,
            self.element_type(),
            self.shape(),
        )?)
    }

    /// A tensor holding a copy of an array's elements (C order).
    pub fn from_array(a: &Array) -> Result<Tensor, Error> {
        let p = array_primitive(a)?;
        Tensor::new(p, a.shape(), a.to_bytes()?)
    }
}

impl ParamDict {
    /// Every tensor as an array, in order (see [`Tensor::to_array`]); the
    /// arrays of one file share its memory block.
    pub fn to_arrays(&self) -> Result<Vec<(String, Array)>, Error> {
        self.iter()
            .map(|p| Ok((p.name().into_owned(), p.tensor().to_array()?)))
            .collect()
    }

    /// A dictionary holding copies of named arrays.
    pub fn from_arrays<'a, N: AsRef<[u8]> + 'a>(
        arrays: impl IntoIterator<Item = (N, &'a Array)>,
    ) -> Result<ParamDict, Error> {
        let mut d = ParamDict::new();
        for (name, a) in arrays {
            d.insert(name.as_ref().to_vec(), Tensor::from_array(a)?);
        }
        Ok(d)
    }
}

fn array_primitive(a: &Array) -> Result<Primitive, Error> {
    let ty = a.element_type();
    let native_or_little = match ty.kind() {
        TypeKind::Unaligned(inner) => !matches!(
            inner.kind(),
            TypeKind::NonNative {
                order: Endianness::Big,
                ..
            }
        ),
        TypeKind::NonNative { order, .. } => *order == Endianness::Little,
        _ => true,
    };
    match ty.as_primitive() {
        Some(p)
            if native_or_little && (Endianness::NATIVE == Endianness::Little || p.size() == 1) =>
        {
            Ok(p)
        }
        _ => Err(Error::Unwritable {
            name: String::new(),
            reason: format!("element type {ty} is not a little-endian primitive"),
        }),
    }
}

/// An array ready to be written as a tensor record: its data is streamed
/// with `Array::write_c_order` (no full copy).
pub struct ArraySource<'a> {
    array: &'a Array,
    primitive: Primitive,
}

impl<'a> ArraySource<'a> {
    /// Checks that the array's element type can be written.
    pub fn new(array: &'a Array) -> Result<ArraySource<'a>, Error> {
        Ok(ArraySource {
            array,
            primitive: array_primitive(array)?,
        })
    }
}

impl TensorSource for ArraySource<'_> {
    fn primitive(&self) -> Primitive {
        self.primitive
    }
    fn shape(&self) -> &[usize] {
        self.array.shape()
    }
    fn write_data(&self, mut w: &mut dyn Write) -> io::Result<()> {
        self.array.write_c_order(&mut w)
    }
}

fn sources<'a, N: AsRef<[u8]>>(
    arrays: &'a [(N, &'a Array)],
) -> Result<Vec<(&'a [u8], ArraySource<'a>)>, Error> {
    arrays
        .iter()
        .map(|(n, a)| Ok((n.as_ref(), ArraySource::new(a)?)))
        .collect()
}

/// Runs `f` with the writer entries of `arrays`.
fn with_entries<N: AsRef<[u8]>, R>(
    arrays: &[(N, &Array)],
    f: impl FnOnce(&[Entry<'_>]) -> Result<R, Error>,
) -> Result<R, Error> {
    let src = sources(arrays)?;
    let entries: Vec<Entry<'_>> = src
        .iter()
        .map(|(n, s)| (*n, s as &dyn TensorSource))
        .collect();
    f(&entries)
}

/// Writes named arrays as a parameter file, streaming each (strided views
/// are written in C order without a full copy).
pub fn write_arrays<W: Write, N: AsRef<[u8]>>(
    w: W,
    arrays: &[(N, &Array)],
    opts: &WriteOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, Error> {
    with_entries(arrays, |entries| write_params(w, entries, opts, progress))
}

/// [`write_arrays`] to a path, atomically.
pub fn write_arrays_to_path<N: AsRef<[u8]>>(
    path: impl AsRef<Path>,
    arrays: &[(N, &Array)],
    opts: &WriteOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, Error> {
    with_entries(arrays, |entries| {
        write_params_to_path(path, entries, opts, progress)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::ReadOptions;
    use ndobject::MemoryBlock;

    fn sample() -> ParamDict {
        let mut d = ParamDict::new();
        let v: Vec<u8> = (0..6i32).flat_map(i32::to_le_bytes).collect();
        d.insert("a", Tensor::new(Primitive::Int8, &[1], vec![5]).unwrap());
        d.insert("x", Tensor::new(Primitive::Int32, &[2, 3], v).unwrap());
        d
    }

    #[test]
    fn views_become_zero_copy_arrays_that_outlive_the_dict() {
        /// File bytes placed so that "x"'s data (byte 103 of the file) is
        /// not 4-aligned, whatever address the allocator (or Miri) picks.
        struct Shifted(Vec<u8>, usize);
        impl AsRef<[u8]> for Shifted {
            fn as_ref(&self) -> &[u8] {
                &self.0[self.1..]
            }
        }
        let file = sample().to_bytes().unwrap();
        let mut buf = Vec::with_capacity(4 + file.len()); // no reallocation below
        let base = buf.as_ptr() as usize;
        let start = (0..4)
            .find(|s| !(base + s + 103).is_multiple_of(4))
            .unwrap();
        buf.resize(start, 0);
        buf.extend_from_slice(&file);
        let d = ReadOptions::new()
            .read_block(MemoryBlock::from_owner(Shifted(buf, start)))
            .unwrap();
        let arrays = d.to_arrays().unwrap();
        let x_ptr = d.get("x").unwrap().data().as_ptr();
        drop(d);
        let (name, x) = &arrays[1];
        assert_eq!(name, "x");
        assert_eq!(x.shape(), &[2, 3]);
        // "x" data starts at byte 103 of the file: not 4-aligned.
        assert_eq!(x.element_type().to_string(), "unaligned[int32]");
        assert_eq!(x.data_address(), x_ptr as usize, "zero-copy");
        assert!(x.block().ptr_eq(arrays[0].1.block()), "one block per file");
        assert!(!x.block().is_writable());
        assert_eq!(
            x.to_contiguous().unwrap().to_vec::<i32>().unwrap(),
            [0, 1, 2, 3, 4, 5]
        );
    }

    #[test]
    fn arrays_write_the_same_bytes_as_tensors() {
        let d = sample();
        let arrays = d.to_arrays().unwrap();
        let named: Vec<(&str, &Array)> = arrays.iter().map(|(n, a)| (n.as_str(), a)).collect();
        let mut out = Vec::new();
        write_arrays(&mut out, &named, &WriteOptions::default(), &mut |_| {}).unwrap();
        assert_eq!(out, d.to_bytes().unwrap());
        assert_eq!(ParamDict::from_arrays(named).unwrap(), d);
    }
}
