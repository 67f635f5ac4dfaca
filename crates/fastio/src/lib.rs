//! `fastio`: Fast I/O contexts — typed N-dimensional data handed between
//! the operator processes of a pipeline job without copies.
//!
//! The job's owner creates a [`Context`]: one shared-memory segment (from
//! `shm-core`) holding control tables and a heap. Operators attach to it
//! with a handle passed in [`CONTEXT_ENV`]. Then, as in NVIDIA Clara's
//! Fast I/O:
//!
//! * [`Context::create`] gives a local [`Allocation`]: a reference to new
//!   shared memory that only this process knows about;
//! * [`Allocation::publish`] puts a reference and an immutable copy of its
//!   metadata (a `dtype` element type and dimensions) in the context under
//!   a unique name, and [`Context::get`] turns that name into a new local
//!   reference in any process;
//! * the memory lives while any reference in any process lives, or while
//!   it is published; [`Allocation::free`] withdraws it from the job
//!   (existing references and mappings stay valid until they go);
//! * [`Allocation::map_mut`] / [`Allocation::map`] give byte access
//!   through guards (a write mapping is exclusive across processes), and
//!   [`Allocation::map_as_ndobject_mut`] an `ndobject` array whose data is the
//!   shared memory itself.
//!
//! # Performance
//!
//! Every process maps the whole context once, and records address memory
//! by offset, so `get` + `map_mut` makes no system call. Reclaimed blocks are
//! kept, still committed and faulted in, and reused for the next request
//! of their size class: a warm handoff touches no new page.
//!
//! # Crashes
//!
//! The tables change only under a robust mutex, each operation commits
//! with one store, and every hold, mapping and half-done creation names
//! its owner by a kernel-checked liveness token. When a process dies —
//! even while holding the lock — the next one to look drops what it held
//! and rebuilds the derived tables ([`Context::recover`], run
//! automatically). Everything read from shared memory is validated: a
//! corrupted context gives [`Error::Corrupt`], never undefined behaviour.
//!
//! # Example
//!
//! ```
//! use fastio::{Context, ContextOptions};
//! use dtype::{Primitive, Type};
//!
//! # fn main() -> Result<(), fastio::Error> {
//! let ctx = Context::new(&ContextOptions::new().capacity(1 << 20).prefix("fastio-doc"))?;
//!
//! // Producer: create, fill, describe, publish.
//! let mut a = ctx.create(2 * 3 * 4)?;
//! a.map_mut()?.copy_from_slice(&[1u8; 24]);
//! a.set_type_and_dimensions(Type::primitive(Primitive::Float32), &[2, 3])?;
//! a.publish("volume")?;
//! a.release()?;
//!
//! // Consumer (normally another process: `Context::attach(handle)`).
//! let b = ctx.get("volume")?;
//! assert_eq!(b.dimensions(), &[2, 3]);
//! assert_eq!(b.element_type().to_string(), "float32");
//! let array = b.map_as_ndobject()?;
//! assert_eq!(array.shape(), &[2, 3]);
//! drop(array);
//! b.free()?; // the name is gone and the memory reclaimed
//! assert!(ctx.get("volume").is_err());
//! # Ok(())
//! # }
//! ```

mod allocation;
mod context;
mod engine;
mod entry;
mod error;
mod heap;
mod layout;
mod mapping;
mod names;
pub mod observe;
mod ops;
mod options;
pub mod plan;
mod recover;
mod steps;
mod stream;
mod table;
mod wait;

#[cfg(test)]
mod context_tests;
#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod wait_tests;

pub use allocation::Allocation;
pub use context::{CONTEXT_ENV, Context, Stats};
pub use entry::{Access, Entry, OPERATOR_ENV, Operator, lookup_entry};
pub use error::{Error, Result};
pub use layout::{MAX_DIMS, MAX_NAME_LEN, MAX_TYPE_LEN};
pub use mapping::{Mapped, MappedMut, MappedPublished};
pub use options::{ContextOptions, DEFAULT_PREFIX};
pub use recover::Recovery;
pub use shm_core::{human_bytes, shm_free_bytes};
pub use steps::{
    END_PREFIX, LATENCY_BUCKETS_NS, LoopEnd, OperatorStats, OutputSlot, STATS_EVERY, STATS_PREFIX,
    Step, Steps,
};
pub use stream::{
    ConsumerStatus, CopiedFrame, Frame, Frames, MAX_FRAME_DIMS, Overflow, STREAM_PREFIX, SlotMut,
    StreamConsumer, StreamOptions, StreamProducer, StreamReleases, StreamStatus, StreamTap,
};
