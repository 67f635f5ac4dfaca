//! The `fastio._native` Python extension module; the `fastio` package
//! (`python/fastio`) wraps it in seed 000's and seed 002's names.
//!
//! Zero copy, safely: a mapping is a `Buffer` (module `buffer`) that owns an
//! `ndobject` array over the shared memory (which holds the allocation's
//! reference and the mapping's registration). numpy arrays (made with the
//! `numpy` crate), buffer-protocol views and DLPack capsules each hold a
//! clone of that array, so an export keeps the mapping alive after every
//! other object is gone. An input's memory is read-only and lies in the
//! context's `PROT_READ` view: numpy refuses `flags.writeable = True`, and
//! a write through a raw pointer faults. `unmap()` while exports of a
//! buffer exist raises, so no view ever dangles.

mod buffer;
mod context;
mod dlpack;
mod entry;
mod frames;
mod params;
mod stream;

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;

create_exception!(fastio, Error, PyException, "A fastio error.");
create_exception!(
    fastio,
    PoisonedError,
    Error,
    "An input whose producer failed."
);
create_exception!(
    fastio,
    NotAllocatedError,
    Error,
    "An input its producer never allocated."
);
create_exception!(
    fastio,
    AccessError,
    Error,
    "An operation the entry's access forbids."
);
create_exception!(
    fastio,
    MapConflictError,
    Error,
    "Mapped elsewhere in a conflicting way."
);
create_exception!(fastio, NotFoundError, Error, "No such name or entry.");
create_exception!(
    fastio,
    NoSpaceError,
    Error,
    "Shared memory (/dev/shm) is full: the message says how much was asked and how much is free."
);

pub(crate) fn err(e: fastio::Error) -> PyErr {
    use fastio::Error as E;
    let msg = e.to_string();
    match e {
        E::Poisoned { .. } => PoisonedError::new_err(msg),
        E::NotAllocated { .. } => NotAllocatedError::new_err(msg),
        E::EntryAccess { .. } => AccessError::new_err(msg),
        E::MapConflict(_) => MapConflictError::new_err(msg),
        E::UnknownName(_) | E::UnknownEntry(_) => NotFoundError::new_err(msg),
        E::StreamPoisoned { .. } => PoisonedError::new_err(msg),
        e if e.is_no_space() => NoSpaceError::new_err(msg),
        _ => Error::new_err(msg),
    }
}

/// The canonical datashape text and the numpy dtype string (`"<f4"`) of a
/// datashape type (for scalar types).
#[pyfunction]
fn dtype_parse(text: &str) -> PyResult<(String, String)> {
    let t: dtype::Type = text
        .parse()
        .map_err(|e| PyValueError::new_err(format!("{text:?}: {e}")))?;
    let np = dtype::numpy::to_numpy(&t).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok((t.to_string(), np))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(params::params_load, m)?)?;
    m.add_function(wrap_pyfunction!(params::params_save, m)?)?;
    m.add_function(wrap_pyfunction!(dtype_parse, m)?)?;
    m.add_class::<buffer::Buffer>()?;
    m.add_class::<buffer::ArrayBase>()?;
    m.add_class::<context::PyContext>()?;
    m.add_class::<context::PyAllocation>()?;
    m.add_class::<entry::PyEntry>()?;
    m.add_class::<entry::PyOperator>()?;
    m.add_class::<frames::PyFrames>()?;
    m.add_class::<frames::PyFrame>()?;
    m.add_class::<stream::PyStreamProducer>()?;
    m.add_class::<stream::PyStreamConsumer>()?;
    m.add_class::<stream::PyStreamFrame>()?;
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("PoisonedError", py.get_type::<PoisonedError>())?;
    m.add("NotAllocatedError", py.get_type::<NotAllocatedError>())?;
    m.add("AccessError", py.get_type::<AccessError>())?;
    m.add("MapConflictError", py.get_type::<MapConflictError>())?;
    m.add("NotFoundError", py.get_type::<NotFoundError>())?;
    m.add("NoSpaceError", py.get_type::<NoSpaceError>())?;
    Ok(())
}
