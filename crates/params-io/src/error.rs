//! Typed errors. Every problem found in a file is a [`FormatError`] that
//! names the [`Field`] and the byte offset where that field starts.

use std::fmt;
use std::io;
use std::path::PathBuf;

use thiserror::Error;

use crate::profile::Profile;

/// A field of the file, as named in errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Field {
    /// The whole file (size limits of a profile).
    File,
    /// The list magic at offset 0.
    ListMagic,
    /// The reserved `u64` after the list magic.
    ListReserved,
    /// The number of names.
    NameCount,
    /// The byte length of name `index`.
    NameLength {
        /// Index of the name (0-based).
        index: u64,
    },
    /// The bytes of name `index`.
    Name {
        /// Index of the name (0-based).
        index: u64,
    },
    /// The number of tensors.
    TensorCount,
    /// The magic of tensor record `tensor`.
    TensorMagic {
        /// Index of the tensor (0-based).
        tensor: u64,
    },
    /// The reserved `u64` of a tensor record.
    TensorReserved {
        /// Index of the tensor.
        tensor: u64,
    },
    /// The `i32` device type.
    DeviceType {
        /// Index of the tensor.
        tensor: u64,
    },
    /// The `i32` device id.
    DeviceId {
        /// Index of the tensor.
        tensor: u64,
    },
    /// The `i32` number of dimensions.
    Ndim {
        /// Index of the tensor.
        tensor: u64,
    },
    /// The `(u8 code, u8 bits, u16 lanes)` data type.
    Dtype {
        /// Index of the tensor.
        tensor: u64,
    },
    /// One `i64` of the shape.
    Shape {
        /// Index of the tensor.
        tensor: u64,
        /// The dimension.
        dim: u32,
    },
    /// The `i64` data byte size.
    ByteSize {
        /// Index of the tensor.
        tensor: u64,
    },
    /// The element data.
    Data {
        /// Index of the tensor.
        tensor: u64,
    },
    /// What follows the last tensor.
    Trailing,
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Field::File => f.write_str("file"),
            Field::ListMagic => f.write_str("list magic"),
            Field::ListReserved => f.write_str("list reserved word"),
            Field::NameCount => f.write_str("name count"),
            Field::NameLength { index } => write!(f, "name[{index}] length"),
            Field::Name { index } => write!(f, "name[{index}]"),
            Field::TensorCount => f.write_str("tensor count"),
            Field::TensorMagic { tensor } => write!(f, "tensor[{tensor}] magic"),
            Field::TensorReserved { tensor } => write!(f, "tensor[{tensor}] reserved word"),
            Field::DeviceType { tensor } => write!(f, "tensor[{tensor}] device type"),
            Field::DeviceId { tensor } => write!(f, "tensor[{tensor}] device id"),
            Field::Ndim { tensor } => write!(f, "tensor[{tensor}] ndim"),
            Field::Dtype { tensor } => write!(f, "tensor[{tensor}] dtype"),
            Field::Shape { tensor, dim } => write!(f, "tensor[{tensor}] shape[{dim}]"),
            Field::ByteSize { tensor } => write!(f, "tensor[{tensor}] byte size"),
            Field::Data { tensor } => write!(f, "tensor[{tensor}] data"),
            Field::Trailing => f.write_str("end of file"),
        }
    }
}

/// What is wrong with a field.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum FormatErrorKind {
    /// The file does not start with the list magic.
    #[error("bad list magic {found:#018x} (expected 0xf7e58d4f05049cb7)")]
    BadListMagic {
        /// The `u64` found.
        found: u64,
    },
    /// A tensor record does not start with the tensor magic.
    #[error("bad tensor magic {found:#018x} (expected 0xdd5e40f096b4a13f)")]
    BadTensorMagic {
        /// The `u64` found.
        found: u64,
    },
    /// The input ends inside the field.
    #[error("truncated: needs {needed} bytes, {available} available")]
    Truncated {
        /// Bytes the field needs.
        needed: u64,
        /// Bytes that were left.
        available: u64,
    },
    /// A count cannot fit in the bytes that remain (each entry needs at least `min_each` bytes).
    #[error(
        "count {count} cannot fit: each needs at least {min_each} bytes, {remaining} bytes remain"
    )]
    CountTooLarge {
        /// The count read.
        count: u64,
        /// The smallest encoding of one entry.
        min_each: u64,
        /// Bytes left after the count.
        remaining: u64,
    },
    /// The number of tensors differs from the number of names.
    #[error("{tensors} tensors for {names} names")]
    CountMismatch {
        /// Names in the file.
        names: u64,
        /// Tensors in the file.
        tensors: u64,
    },
    /// A name is longer than what remains of the file.
    #[error("name length {length} exceeds the {remaining} bytes that remain")]
    NameTooLong {
        /// The length read.
        length: u64,
        /// Bytes left after the length.
        remaining: u64,
    },
    /// A name is not UTF-8 (and raw names were not requested).
    #[error("name is not valid UTF-8 (byte {valid_up_to} of the name)")]
    NonUtf8Name {
        /// Length of the valid UTF-8 prefix.
        valid_up_to: usize,
    },
    /// The same name appears twice (and duplicates are errors).
    #[error("duplicate name {name:?} (first at name[{first}])")]
    DuplicateName {
        /// The name, lossily decoded.
        name: String,
        /// Index of the first occurrence.
        first: u64,
    },
    /// Device type not CPU, or device id not 0.
    #[error("device ({device_type}, {device_id}) is not the CPU device (1, 0)")]
    Device {
        /// `device_type` read.
        device_type: i32,
        /// `device_id` read.
        device_id: i32,
    },
    /// `ndim` is negative or above [`MAX_NDIM`](crate::format::MAX_NDIM).
    #[error("ndim {ndim} is out of range 0..=32")]
    Ndim {
        /// The value read.
        ndim: i32,
    },
    /// The type code is unknown.
    #[error("unknown dtype (code {code}, bits {bits}, lanes {lanes})")]
    UnknownDtype {
        /// Type code.
        code: u8,
        /// Bits.
        bits: u8,
        /// Lanes.
        lanes: u16,
    },
    /// A known type code with bits or lanes this reader does not support.
    #[error("unsupported dtype (code {code}, bits {bits}, lanes {lanes}): {reason}")]
    UnsupportedDtype {
        /// Type code.
        code: u8,
        /// Bits.
        bits: u8,
        /// Lanes.
        lanes: u16,
        /// Why.
        reason: &'static str,
    },
    /// A dimension is negative.
    #[error("negative dimension {value}")]
    NegativeDim {
        /// The value read.
        value: i64,
    },
    /// The product of the shape, or the byte size, overflows 64 bits / the address space.
    #[error("shape product or byte size overflows")]
    SizeOverflow,
    /// The stored byte size is not elements x element size.
    #[error("byte size {found} does not match {elements} elements x {element_size} bytes")]
    ByteSizeMismatch {
        /// The `i64` read.
        found: i64,
        /// Number of elements of the shape.
        elements: u64,
        /// Bytes per element.
        element_size: u64,
    },
    /// Bytes follow the last tensor (and trailing bytes are errors).
    #[error("{count} trailing bytes after the last tensor")]
    TrailingBytes {
        /// How many (`1` means "at least one" for streams of unknown length).
        count: u64,
    },
    /// A `bool` element is neither 0 nor 1 (checked by [`verify`](crate::files::verify)).
    #[error("bool element holds {value} (expected 0 or 1)")]
    BadBool {
        /// The byte found.
        value: u8,
    },
    /// The file is valid but breaks a rule of the chosen profile.
    #[error("not loadable by {profile}: {rule}")]
    Profile {
        /// The profile.
        profile: Profile,
        /// The rule broken.
        rule: String,
    },
}

/// A problem in a parameter file, at a field and byte offset.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("invalid params file at byte {offset} ({field}): {kind}")]
pub struct FormatError {
    /// Byte offset (from the start of the file) of the field.
    pub offset: u64,
    /// The field.
    pub field: Field,
    /// What is wrong.
    pub kind: FormatErrorKind,
}

impl FormatError {
    pub(crate) fn new(offset: u64, field: Field, kind: FormatErrorKind) -> FormatError {
        FormatError {
            offset,
            field,
            kind,
        }
    }
}

/// Problems of `.npy` files.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum NpyError {
    /// Not an `.npy` file, or a version we do not read.
    #[error("not an NPY file: {0}")]
    NotNpy(String),
    /// The header dictionary is malformed.
    #[error("bad NPY header at byte {offset}: {reason}")]
    Header {
        /// Byte offset in the file.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// The dtype has no counterpart in the params format.
    #[error("unsupported NPY dtype {0:?}")]
    Dtype(String),
    /// The data is shorter than the header says.
    #[error("NPY data truncated: needs {needed} bytes, {available} available")]
    Truncated {
        /// Bytes the data needs.
        needed: u64,
        /// Bytes in the file after the header.
        available: u64,
    },
}

/// Any error of this crate.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// The file violates the format (or a profile).
    #[error(transparent)]
    Format(#[from] FormatError),
    /// An I/O error other than a short read, at a byte offset of the stream.
    #[error("I/O error at byte {offset}: {source}")]
    Io {
        /// Offset in the stream.
        offset: u64,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// An I/O error on a path.
    #[error("{path}: {source}")]
    Path {
        /// The path.
        path: PathBuf,
        /// The error.
        #[source]
        source: Box<Error>,
    },
    /// An I/O error not tied to a stream offset (open, rename, create).
    #[error("{context}: {source}")]
    Os {
        /// What was being done.
        context: String,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// A tensor cannot be written (type, size or profile).
    #[error("cannot write tensor {name:?}: {reason}")]
    Unwritable {
        /// The tensor's name, lossily decoded.
        name: String,
        /// Why.
        reason: String,
    },
    /// A tensor's bytes do not match its type and shape.
    #[error("data length {found} does not match the {expected} bytes of the shape and type")]
    DataLength {
        /// Bytes given.
        found: usize,
        /// Bytes needed.
        expected: u64,
    },
    /// A `.npy` problem.
    #[error(transparent)]
    Npy(#[from] NpyError),
    /// An `ndobject` array could not be made.
    #[error("array: {0}")]
    Array(#[from] ndobject::Error),
    /// A name looked up is not in the dictionary.
    #[error("no tensor named {0:?}")]
    NotFound(String),
    /// `Tensor::from_block` with a block that can be written: a tensor's
    /// bytes must not change.
    #[error("a tensor needs a read-only memory block")]
    WritableBlock,
}

impl Error {
    /// The format error inside, if this is one (also through [`Error::Path`]).
    pub fn format_error(&self) -> Option<&FormatError> {
        match self {
            Error::Format(e) => Some(e),
            Error::Path { source, .. } => source.format_error(),
            _ => None,
        }
    }

    /// The byte offset the error refers to, if any.
    pub fn offset(&self) -> Option<u64> {
        match self {
            Error::Format(e) => Some(e.offset),
            Error::Io { offset, .. } => Some(*offset),
            Error::Path { source, .. } => source.offset(),
            _ => None,
        }
    }

    pub(crate) fn at_path(self, path: &std::path::Path) -> Error {
        Error::Path {
            path: path.to_owned(),
            source: Box::new(self),
        }
    }

    pub(crate) fn os(context: impl Into<String>, source: io::Error) -> Error {
        Error::Os {
            context: context.into(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_errors_print_offset_and_field() {
        let e = FormatError::new(
            97,
            Field::Shape { tensor: 2, dim: 1 },
            FormatErrorKind::NegativeDim { value: -3 },
        );
        assert_eq!(
            e.to_string(),
            "invalid params file at byte 97 (tensor[2] shape[1]): negative dimension -3"
        );
        let wrapped = Error::from(e.clone()).at_path(std::path::Path::new("a.params"));
        assert_eq!(wrapped.offset(), Some(97));
        assert_eq!(wrapped.format_error(), Some(&e));
        assert!(
            wrapped
                .to_string()
                .starts_with("a.params: invalid params file at byte 97")
        );
    }
}
