//! # ndobject: arrays over reference-counted memory blocks
//!
//! The array layer, on top of [`dtype`]. An [`Array`] is DyND's ndobject
//! in Rust: a **type** (strided dimensions over an element
//! [`dtype::Type`]), **metadata** (size and byte stride per dimension;
//! for each `var` dimension its block, stride, offset and row slices; for
//! each variable-length string its pool), a **data offset** into a
//! **[`MemoryBlock`]** that owns the bytes, and **[`AccessFlags`]** (read,
//! write, immutable).
//!
//! Indexing, slicing (steps, negative steps), transposition and reshaping
//! are O(1) views that share the block; a view keeps the block alive after
//! its parent is gone. Blocks are pod (owned heap), embedded (small data
//! inline in the block's allocation), external (a `Vec`, a memory map, a
//! shared-memory mapping, kept alive by holding its owner) or pools
//! (append-only arenas for variable-length data).
//!
//! ```
//! use ndobject::{Array, AssignErrorMode, Index};
//!
//! let a = Array::from_slice(&[1i32, 2, 3], &[3])?;
//! let b = a.index(1)?;                       // DyND's `a[1]`
//! assert_eq!(a.block().refcount(), 2);       // the view holds the block
//! assert_eq!(b.data_address(), a.data_address() + 4);
//! let c = a.view(&[Index::slice(None, None, -1)])?;
//! let d = c.cast(&"float64".parse().unwrap(), AssignErrorMode::Inexact)?;
//! assert_eq!(d.to_vec::<f64>()?, [3.0, 2.0, 1.0]);
//! # Ok::<(), ndobject::Error>(())
//! ```
//!
//! ## Soundness: aliasing views in Rust
//!
//! Views alias on purpose, and they may be written through `&Array`, from
//! several threads. The API stays sound because **no Rust reference to
//! block memory ever exists while someone could write that memory**:
//!
//! * Bytes are read and written only through raw pointers
//!   (`ptr::copy_nonoverlapping`), never through `&T`/`&mut T`, and every
//!   access is bounds-checked against the block when the view is built.
//! * Every access to a block that can be written happens under that
//!   block's reader-writer lock: reads under a read guard, writes under the
//!   write guard, so two threads never race on the same bytes. Operations
//!   that read one array and write another take the guards one after the
//!   other (reading into a buffer first), never both at once, so they
//!   cannot deadlock.
//! * [`Array::as_slice`] hands out `&[T]` only for memory no one can write:
//!   a read-only external block, a block frozen by
//!   [`Array::into_immutable`] (which succeeds only while that array is the
//!   block's sole reference), or a finalized pool. There is no
//!   `&mut [T]` API. For `bool`, every byte is checked to be 0 or 1 first.
//! * With the `ndarray` feature, `as_ndarray` lends an `ArrayView` under
//!   the same condition as `as_slice`; `with_ndarray` and
//!   `with_ndarray_mut` lend a view (a mutable one only over elements that
//!   do not overlap) to a closure while holding the block's read or write
//!   guard, and the view cannot outlive the closure. A closure that
//!   touches another array of the same block from the same thread blocks
//!   or panics on the lock instead of racing.
//! * Unaligned data is never read as `&T`: its element type is
//!   `unaligned[T]`, and elements are copied byte-wise; non-native byte
//!   order is swapped on the copy.
//!
//! Memory another process writes (a shared-memory block) is outside what
//! Rust's model can see: the locks order this process's accesses only.
//! Layers above coordinate writers across processes (`fastio` makes inputs
//! read-only to consumers).
//!
//! ## Ragged (`var`) dimensions
//!
//! Each `var` element is an `(offset, count)` pair into its dimension's
//! pool. Indexing follows DyND: a leading `var` dimension (all dimensions
//! before it removed by integers) is dereferenced into a strided view of
//! the pool; below a kept dimension, a slice of a `var` dimension is kept
//! in its metadata and applied to every row when the row is reached, and
//! indices into fixed dimensions below it move its metadata's offset. An
//! integer index into a `var` dimension below a kept dimension is an
//! error (the result would not be strided). See [`Array::view`].
//!
//! ## Access flags
//!
//! New arrays are read-write. Views inherit their parent's flags and can
//! only drop rights ([`Array::read_only`]); immutable means nobody will
//! ever write the data, through any view; an explicit copy
//! ([`Array::to_contiguous`], [`Array::cast`]) is writable again.

#![warn(missing_docs)]

mod access;
mod array;
mod assign;
mod block;
mod cast;
mod element;
mod error;
mod flags;
mod index;
mod kernel;
mod meta;
#[cfg(feature = "ndarray")]
mod ndarray_interop;
mod repr;
pub mod shape;
mod strings;
mod var;

pub use array::Array;
pub use assign::{AssignErrorMode, convert};
pub use block::{BLOCK_ALIGN, BlockKind, EMBED_BYTES, MemoryBlock};
pub use element::{Element, Scalar};
pub use error::{Error, Result};
pub use flags::AccessFlags;
pub use index::Index;
pub use strings::{decode, encode};

pub use half::{bf16, f16};
/// The `ndarray` crate this crate converts to and from (feature `ndarray`).
#[cfg(feature = "ndarray")]
pub use ndarray;

#[cfg(test)]
mod tests;
