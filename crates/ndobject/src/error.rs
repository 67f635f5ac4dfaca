//! The error type of array operations.

use thiserror::Error;

/// Why an array operation failed.
#[derive(Clone, Debug, PartialEq, Error)]
#[non_exhaustive]
pub enum Error {
    /// The array may not be written (no write flag, or immutable).
    #[error("array is not writable ({0})")]
    NotWritable(&'static str),
    /// A byte length does not match the type and shape.
    #[error("expected {expected} bytes for {what}, got {actual}")]
    SizeMismatch {
        /// What was being built.
        what: String,
        /// Bytes required.
        expected: usize,
        /// Bytes given.
        actual: usize,
    },
    /// A view would reach outside its memory block.
    #[error("view of {len} bytes at offset {offset} is outside the {block_len}-byte memory block")]
    OutOfBlock {
        /// Byte offset of the view's first byte.
        offset: usize,
        /// Bytes the view spans.
        len: usize,
        /// Size of the block.
        block_len: usize,
    },
    /// An index is out of range for its dimension.
    #[error("index {index} is out of range for dimension {dim} of size {size}")]
    IndexOutOfRange {
        /// The index as given.
        index: isize,
        /// The dimension.
        dim: usize,
        /// Its size.
        size: usize,
    },
    /// More indices than dimensions, a zero step, a bad permutation, ...
    #[error("invalid indexing: {0}")]
    InvalidIndex(String),
    /// The requested shape does not have the same number of elements, or
    /// the layout does not allow a view.
    #[error("cannot reshape {from:?} into {to:?}: {reason}")]
    Reshape {
        /// The current shape.
        from: Vec<usize>,
        /// The requested shape.
        to: Vec<usize>,
        /// Why.
        reason: &'static str,
    },
    /// The element type is not what the operation needs.
    #[error("type mismatch: {0}")]
    TypeMismatch(String),
    /// A value cannot be assigned under the chosen error mode.
    #[error("cannot assign {value} to {target}: {reason}")]
    Assign {
        /// The value, printed.
        value: String,
        /// The target type.
        target: String,
        /// overflow, fractional part lost, inexact, ...
        reason: &'static str,
    },
    /// A character cannot be represented in the target encoding, or the
    /// source text is not valid in its encoding.
    #[error("string error: {0}")]
    Encoding(String),
    /// A size computation overflowed.
    #[error("size overflow: {0}")]
    Overflow(String),
    /// A shape's broadcast does not fit.
    #[error("cannot broadcast shape {from:?} to {to:?}")]
    Broadcast {
        /// Source shape.
        from: Vec<usize>,
        /// Destination shape.
        to: Vec<usize>,
    },
    /// Views into a string/variable-data pool require it to be finalized.
    #[error("the memory pool is {0}")]
    Pool(&'static str),
}

/// Result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;
