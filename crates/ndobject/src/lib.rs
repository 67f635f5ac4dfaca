//! # ndobject: arrays over reference-counted memory blocks
//!
//! The array layer, on top of [`dtype`]. An [`Array`] is DyND's ndobject
//! in Rust: a **type** (strided dimensions over an element
//! [`dtype::Type`]), **metadata** (size and byte stride per dimension, the
//! pool block that holds string bytes and `var` elements), a **data
//! offset** into a **[`MemoryBlock`]** that owns the bytes, and
//! **[`AccessFlags`]** (read, write, immutable).
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
//!   a read-only external block, or a block frozen by
//!   [`Array::into_immutable`], which succeeds only while that array is the
//!   block's sole reference. There is no `&mut [T]` API.
//! * Unaligned data is never read as `&T`: its element type is
//!   `unaligned[T]`, and elements are copied byte-wise; non-native byte
//!   order is swapped on the copy.
//!
//! Memory another process writes (a shared-memory block) is outside what
//! Rust's model can see: the locks order this process's accesses only.
//! Layers above coordinate writers across processes (`fastio` makes inputs
//! read-only to consumers).
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
mod element;
mod error;
mod flags;
mod index;
mod repr;
mod strings;

pub use array::Array;
pub use assign::{AssignErrorMode, convert};
pub use block::{BLOCK_ALIGN, BlockKind, EMBED_BYTES, MemoryBlock};
pub use element::{Element, Scalar};
pub use error::{Error, Result};
pub use flags::AccessFlags;
pub use index::Index;
pub use strings::{decode, encode};

pub use half::{bf16, f16};

#[cfg(test)]
mod tests;
