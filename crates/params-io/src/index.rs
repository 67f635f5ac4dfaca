//! An index of a file without its data: name, type, shape, byte size and
//! offset of every tensor. Reading it costs O(number of tensors) whatever
//! the data size (data sections are skipped with `seek`).

use std::borrow::Cow;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use dtype::dlpack::DLDataType;
use dtype::{Primitive, Type};

use crate::error::Error;
use crate::input::SeekInput;
use crate::read::{Header, ReadOptions, parse, parse_slice};
use crate::tensor::datashape;

/// What the index knows about one tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    /// The name's bytes.
    pub name: Vec<u8>,
    /// The DLPack tag as stored.
    pub dl: DLDataType,
    /// The element type.
    pub primitive: Primitive,
    /// The shape.
    pub shape: Vec<usize>,
    /// Bytes of data.
    pub nbytes: u64,
    /// File offset of the first data byte.
    pub offset: u64,
    /// File offset of the tensor record (its magic).
    pub record_offset: u64,
}

impl IndexEntry {
    pub(crate) fn from_header(h: Header) -> IndexEntry {
        IndexEntry {
            name: h.name,
            dl: h.dl,
            primitive: h.primitive,
            shape: h.shape,
            nbytes: h.nbytes,
            offset: h.data_offset,
            record_offset: h.record_offset,
        }
    }

    /// The name, with invalid UTF-8 replaced by U+FFFD.
    pub fn name(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.name)
    }

    /// numpy-style element type name (`float32`, `bool`, `bfloat16`).
    pub fn dtype_name(&self) -> &'static str {
        self.primitive.name()
    }

    /// Datashape of the whole tensor, e.g. `2 * 3 * float32`.
    pub fn datashape(&self) -> String {
        datashape(&self.shape, self.primitive)
    }

    /// The element type.
    pub fn element_type(&self) -> Type {
        Type::primitive(self.primitive)
    }

    /// Number of elements.
    pub fn len(&self) -> u64 {
        ndobject::shape::element_count(&self.shape).map_or(0, |n| n as u64)
    }

    /// Whether the tensor has no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the data offset is aligned for the element type (so a
    /// memory-mapped view is aligned: maps start on page boundaries).
    pub fn is_aligned(&self) -> bool {
        self.offset
            .is_multiple_of(self.primitive.alignment() as u64)
    }
}

/// The index of a whole file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParamIndex {
    /// The tensors in file order.
    pub entries: Vec<IndexEntry>,
    /// Length of the file in bytes.
    pub file_len: u64,
}

impl ReadOptions {
    /// Indexes a file: reads its headers only (seeking over the data).
    pub fn index_path(&self, path: impl AsRef<Path>) -> Result<ParamIndex, Error> {
        let path = path.as_ref();
        let run = || -> Result<ParamIndex, Error> {
            let file = File::open(path).map_err(|e| Error::os("open", e))?;
            let len = file.metadata().map_err(|e| Error::os("stat", e))?.len();
            let mut inp = SeekInput::new(BufReader::with_capacity(64 * 1024, file), len);
            let entries = parse(&mut inp, self)?;
            Ok(ParamIndex {
                entries: entries
                    .into_iter()
                    .map(|(h, ())| IndexEntry::from_header(h))
                    .collect(),
                file_len: len,
            })
        };
        run().map_err(|e| e.at_path(path))
    }

    /// Indexes a file held in memory.
    pub fn index_bytes(&self, buf: &[u8]) -> Result<ParamIndex, Error> {
        let entries = parse_slice(buf, self)?;
        Ok(ParamIndex {
            entries: entries
                .into_iter()
                .map(|(h, _)| IndexEntry::from_header(h))
                .collect(),
            file_len: buf.len() as u64,
        })
    }
}

impl ParamIndex {
    /// Number of tensors.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the file holds no tensor.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Total bytes of tensor data.
    pub fn data_bytes(&self) -> u64 {
        self.entries.iter().map(|e| e.nbytes).sum()
    }
}
