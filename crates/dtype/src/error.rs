//! Errors of type construction and of the mappings to other type systems.

use thiserror::Error;

/// Why a type could not be constructed.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum TypeError {
    /// A record has two fields of the same name.
    #[error("duplicate field name {0:?} in record")]
    DuplicateField(String),
    /// Records and tuples need at least one field (datashape has no `{}` or `()`).
    #[error("a {0} needs at least one field")]
    Empty(&'static str),
    /// The element must have a fixed data size (e.g. a fixed dimension of a
    /// `strided` dimension, or a record field of type `strided * T`).
    #[error("{context} needs an element of fixed data size, but `{element}` has none")]
    NotFixedSize {
        /// Where the element appeared.
        context: &'static str,
        /// The canonical text of the offending element.
        element: String,
    },
    /// The data size does not fit in `isize`.
    #[error("data size of {0} overflows the address space")]
    SizeOverflow(String),
    /// A fixed string size is not a whole number of code units.
    #[error(
        "fixed string size {size} is not a multiple of the {unit}-byte code unit of '{encoding}'"
    )]
    FixedStringSize {
        /// The size in bytes.
        size: usize,
        /// Bytes per code unit.
        unit: usize,
        /// The encoding's canonical name.
        encoding: &'static str,
    },
    /// `??T`: an option of an option has no datashape meaning.
    #[error("an option of an option (`??T`) is not a type")]
    NestedOption,
    /// Byte order applies only to primitives.
    #[error("byte order applies only to primitive types, not `{0}`")]
    ByteOrderNotPrimitive(String),
}

/// Why a type has no counterpart in another type system, or a foreign type
/// description has none here.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum MappingError {
    /// The type exists here but not in the target system.
    #[error("`{ty}` has no {target} equivalent")]
    NoEquivalent {
        /// Canonical datashape text of the type.
        ty: String,
        /// The target system (`numpy`, `DLPack`, `Clara`).
        target: &'static str,
    },
    /// The foreign description is malformed or names a type we do not have.
    #[error("invalid {source_system} type {text:?}: {reason}")]
    Invalid {
        /// The source system.
        source_system: &'static str,
        /// The foreign description as given.
        text: String,
        /// What is wrong with it.
        reason: String,
    },
}
