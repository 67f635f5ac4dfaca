//! # dtype: a datashape type system
//!
//! The bottom layer of the typed-data stack: it says *what* bytes mean,
//! never *where* they live. A [`Type`] describes one value — a primitive,
//! a string, a record, a tuple, an option — possibly under array
//! dimensions (`3 * strided * var * int32`), in the datashape notation of
//! Blaze and DyND.
//!
//! For every type the crate knows the data size and alignment (C layout for
//! records and tuples, with field offsets), whether the type is fixed-size
//! and plain old data, and which metadata an array of it carries (a
//! `strided` dimension: stride and size; a `var` dimension: a memory-block
//! reference, a stride and an offset; a `string`: a memory-block
//! reference). The array layer (`ndobject`) builds on these facts.
//!
//! ```
//! use dtype::{MetadataKind, Type};
//!
//! let t: Type = "strided * {id: int64, name: string, pos: (float32, float32)}".parse()?;
//! assert_eq!(t.ndim(), 1);
//! let rec = t.element_type();
//! assert_eq!(rec.data_size(), Some(32));
//! assert_eq!(rec.field_offsets(), Some(&[0, 8, 24][..]));
//! assert!(!rec.is_pod()); // the string refers to another memory block
//! let md: Vec<_> = t.metadata_layout().iter().map(|e| e.kind).collect();
//! assert_eq!(md, [MetadataKind::StridedDim, MetadataKind::String]);
//! // Printing gives one canonical text, which parses back to the same type.
//! assert_eq!(t.to_string().parse::<Type>()?, t);
//! # Ok::<(), dtype::ParseError>(())
//! ```
//!
//! ## Layout rules
//!
//! * Primitives have their natural size and alignment; `complex64` and
//!   `complex128` align like their parts (4 and 8).
//! * `N * T` stores `N` elements inline (`T` must have a fixed size);
//!   `strided * T` has no fixed size (its size and stride live in the
//!   array's metadata); `var * T` stores a `(u64 offset, u64 size)` pair.
//! * `string` and `bytes` store a `(u64 offset, u64 length)` pair into the
//!   memory block named in the metadata: offsets, never pointers, so the
//!   data can live in shared memory mapped at different addresses.
//! * `string[N, 'enc']` is **N bytes** (Blaze datashape's convention, not
//!   DyND's code units), NUL-padded, aligned to the code unit;
//!   `N` must be a multiple of the code unit.
//! * `?T` is a presence byte followed by `T` at `T`'s alignment.
//! * `unaligned[T]` has `T`'s size and alignment 1; `big_endian[T]` and
//!   `little_endian[T]` store a primitive in that byte order (the native
//!   order prints as the bare primitive).
//!
//! ## Text
//!
//! [`parse`] reads datashape text; `Display` prints the one canonical form.
//! `parse(t.to_string()) == t` holds for every type, and the canonical text
//! is what Blaze's `datashape` package prints for the types it has
//! (checked against that package by `cargo xtask blaze`). `strided`,
//! `unaligned[...]`, byte order, `bfloat16`, `bytes` and `'ucs2'` are ours
//! alone; Blaze rejects them. Parse
//! errors carry a byte offset, what was expected and a caret line.
//!
//! ## Mappings
//!
//! [`numpy`], [`dlpack`] and [`clara`] convert scalar types to and from
//! numpy dtype strings, DLPack `DLDataType` and Clara element-type names,
//! with a [`MappingError`] where no counterpart exists.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod clara;
pub mod dlpack;
mod encoding;
mod error;
pub mod numpy;
mod parse;
mod primitive;
mod print;
mod types;

pub use encoding::StringEncoding;
pub use error::{MappingError, TypeError};
pub use parse::{MAX_DEPTH, ParseError, ParseErrorKind, parse};
pub use primitive::{Endianness, Primitive, PrimitiveKind};
pub use types::{Field, FieldLayout, MetadataEntry, MetadataKind, Type, TypeKind};
