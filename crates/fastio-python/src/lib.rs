//! The `fastio._native` Python extension module; the `fastio` package
//! (`python/fastio`) wraps it in seed 000's and seed 002's names.
//!
//! Zero copy, safely: a mapping is a `Buffer` that owns an `ndobject`
//! array over the shared memory (which holds the allocation's reference
//! and the mapping's registration). numpy arrays are made over it with the
//! buffer protocol, so the array's base keeps the mapping alive after every
//! other object is gone. An input's buffer is read-only and lies in the
//! context's `PROT_READ` view: numpy refuses `flags.writeable = True`, and
//! a write through a raw pointer faults. `unmap()` while numpy views of a
//! buffer exist raises, so no view ever dangles.

use std::ffi::{CString, c_int, c_void};
use std::time::Duration;

use fastio::{Access, Allocation, Context, ContextOptions, Entry, Operator};
use pyo3::exceptions::{PyBufferError, PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::{create_exception, ffi};

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

fn err(e: fastio::Error) -> PyErr {
    use fastio::Error as E;
    let msg = e.to_string();
    match e {
        E::Poisoned { .. } => PoisonedError::new_err(msg),
        E::NotAllocated { .. } => NotAllocatedError::new_err(msg),
        E::EntryAccess { .. } => AccessError::new_err(msg),
        E::MapConflict(_) => MapConflictError::new_err(msg),
        E::UnknownName(_) | E::UnknownEntry(_) => NotFoundError::new_err(msg),
        _ => Error::new_err(msg),
    }
}

/// A mapping of shared memory, exposed through the buffer protocol.
#[pyclass(module = "fastio._native")]
struct Buffer {
    array: Option<ndobject::Array>,
    ptr: usize,
    len: usize,
    readonly: bool,
    exports: usize,
}

impl Buffer {
    fn new(array: ndobject::Array, readonly: bool) -> Buffer {
        let elem = array.element_type().data_size().unwrap_or(1);
        Buffer {
            ptr: array.data_address(),
            len: array.len() * elem,
            array: Some(array),
            readonly,
            exports: 0,
        }
    }
}

#[pymethods]
impl Buffer {
    /// Bytes mapped.
    fn __len__(&self) -> usize {
        self.len
    }

    /// Whether the memory is read-only (an input).
    #[getter]
    fn readonly(&self) -> bool {
        self.readonly
    }

    /// Whether the mapping is still open.
    #[getter]
    fn mapped(&self) -> bool {
        self.array.is_some()
    }

    /// Unmaps now; raises while numpy views (buffer exports) of it exist.
    fn unmap(&mut self) -> PyResult<()> {
        if self.exports > 0 {
            return Err(PyBufferError::new_err(format!(
                "{} view(s) of this mapping are alive; delete them before unmapping",
                self.exports
            )));
        }
        self.array = None;
        Ok(())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &mut self,
        _t: Option<&Bound<'_, PyAny>>,
        _v: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.unmap()?;
        Ok(false)
    }

    /// # Safety
    ///
    /// Called by Python with a valid `view` to fill.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("null view"));
        }
        let (ptr, len, readonly) = {
            let mut b = slf.borrow_mut();
            if b.array.is_none() {
                return Err(PyBufferError::new_err("the mapping was unmapped"));
            }
            if b.readonly && (flags & ffi::PyBUF_WRITABLE) == ffi::PyBUF_WRITABLE {
                return Err(PyBufferError::new_err("an input is read-only"));
            }
            b.exports += 1;
            (b.ptr, b.len, b.readonly)
        };
        // SAFETY: `view` is non-null and ours to fill (the buffer protocol);
        // `ptr..ptr + len` stays mapped while `self.array` lives, which
        // `unmap` refuses while exports (counted above) exist, and the
        // view's `obj` keeps `self` alive until `__releasebuffer__`.
        unsafe {
            (*view).obj = slf.into_any().into_ptr();
            (*view).buf = ptr as *mut c_void;
            (*view).len = len as isize;
            (*view).readonly = c_int::from(readonly);
            (*view).itemsize = 1;
            (*view).format = if (flags & ffi::PyBUF_FORMAT) == ffi::PyBUF_FORMAT {
                CString::from(c"B").into_raw()
            } else {
                std::ptr::null_mut()
            };
            (*view).ndim = 1;
            (*view).shape = if (flags & ffi::PyBUF_ND) == ffi::PyBUF_ND {
                &mut (*view).len
            } else {
                std::ptr::null_mut()
            };
            (*view).strides = if (flags & ffi::PyBUF_STRIDES) == ffi::PyBUF_STRIDES {
                &mut (*view).itemsize
            } else {
                std::ptr::null_mut()
            };
            (*view).suboffsets = std::ptr::null_mut();
            (*view).internal = std::ptr::null_mut();
        }
        Ok(())
    }

    /// # Safety
    ///
    /// Called by Python with a view this object filled.
    unsafe fn __releasebuffer__(&mut self, view: *mut ffi::Py_buffer) {
        self.exports = self.exports.saturating_sub(1);
        // SAFETY: `format` is null or the `CString` made in `__getbuffer__`.
        unsafe {
            if !(*view).format.is_null() {
                drop(CString::from_raw((*view).format));
            }
        }
    }
}

/// A Fast I/O context.
#[pyclass(module = "fastio._native", name = "Context")]
struct PyContext {
    ctx: Context,
}

#[pymethods]
impl PyContext {
    /// Creates a context with `capacity` bytes for allocations.
    #[staticmethod]
    #[pyo3(signature = (capacity, anonymous = false))]
    fn create(capacity: u64, anonymous: bool) -> PyResult<PyContext> {
        let opts = ContextOptions::new()
            .capacity(capacity)
            .anonymous(anonymous);
        Ok(PyContext {
            ctx: Context::new(&opts).map_err(err)?,
        })
    }

    /// Attaches to the context of `handle` (a name, or `fd:<n>`).
    #[staticmethod]
    fn attach(handle: &str) -> PyResult<PyContext> {
        Ok(PyContext {
            ctx: Context::attach(handle).map_err(err)?,
        })
    }

    /// Attaches to the context named by `FASTIO_CONTEXT`.
    #[staticmethod]
    fn from_env() -> PyResult<PyContext> {
        Ok(PyContext {
            ctx: Context::from_env().map_err(err)?,
        })
    }

    /// The handle child processes attach with.
    #[getter]
    fn handle(&self) -> PyResult<String> {
        self.ctx.handle_for_children().map_err(err)
    }

    /// A new allocation of `size` bytes.
    fn create_allocation(&self, size: u64) -> PyResult<PyAllocation> {
        Ok(PyAllocation {
            alloc: Some(self.ctx.create(size).map_err(err)?),
        })
    }

    /// A new reference to the allocation published as `name`.
    fn get(&self, name: &str) -> PyResult<PyAllocation> {
        Ok(PyAllocation {
            alloc: Some(self.ctx.get(name).map_err(err)?),
        })
    }

    /// Waits up to `timeout` seconds for `name`, then gets it.
    fn wait_for(&self, py: Python<'_>, name: &str, timeout: f64) -> PyResult<PyAllocation> {
        let t = Duration::try_from_secs_f64(timeout.max(0.0))
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let ctx = self.ctx.clone();
        let a = py.detach(|| ctx.wait_for(name, t)).map_err(err)?;
        Ok(PyAllocation { alloc: Some(a) })
    }

    /// The published names.
    fn names(&self) -> PyResult<Vec<String>> {
        self.ctx.names().map_err(err)
    }
}

/// A local reference to an allocation.
#[pyclass(module = "fastio._native", name = "Allocation")]
struct PyAllocation {
    alloc: Option<Allocation>,
}

impl PyAllocation {
    fn get(&self) -> PyResult<&Allocation> {
        self.alloc
            .as_ref()
            .ok_or_else(|| Error::new_err("the allocation was released or freed"))
    }
}

#[pymethods]
impl PyAllocation {
    /// Size in bytes.
    #[getter]
    fn size(&self) -> PyResult<u64> {
        Ok(self.get()?.size())
    }

    /// The element type as datashape text.
    #[getter]
    fn element_type(&self) -> PyResult<String> {
        Ok(self.get()?.element_type().to_string())
    }

    /// The dimensions.
    #[getter]
    fn dimensions(&self) -> PyResult<Vec<usize>> {
        Ok(self.get()?.dimensions().to_vec())
    }

    /// Describes the memory as `dimensions` of `element_type` (datashape
    /// text such as `float32`); the byte size must match.
    fn set_type_and_dimensions(
        &mut self,
        element_type: &str,
        dimensions: Vec<usize>,
    ) -> PyResult<()> {
        let t: dtype::Type = element_type
            .parse()
            .map_err(|e| PyValueError::new_err(format!("{element_type:?}: {e}")))?;
        self.alloc
            .as_mut()
            .ok_or_else(|| Error::new_err("the allocation was released or freed"))?
            .set_type_and_dimensions(t, &dimensions)
            .map_err(err)
    }

    /// Publishes it under `name`.
    fn publish(&self, name: &str) -> PyResult<()> {
        self.get()?.publish(name).map_err(err)
    }

    /// Maps it: read-only, or writable (exclusive across processes).
    #[pyo3(signature = (writable = false))]
    fn map(&self, writable: bool) -> PyResult<Buffer> {
        let a = self.get()?;
        let array = if writable {
            a.map_as_ndobject_mut()
        } else {
            a.map_as_ndobject()
        }
        .map_err(err)?;
        Ok(Buffer::new(array, !writable))
    }

    /// Drops this reference (mappings made from it stay valid while they
    /// live).
    fn release(&mut self) -> PyResult<()> {
        match self.alloc.take() {
            Some(a) => a.release().map_err(err),
            None => Ok(()),
        }
    }

    /// Marks the memory for deletion and drops this reference.
    fn free(&mut self) -> PyResult<()> {
        match self.alloc.take() {
            Some(a) => a.free().map_err(err),
            None => Err(Error::new_err("the allocation was released or freed")),
        }
    }
}

/// An entry of the running operator (seed 000's vocabulary).
#[pyclass(module = "fastio._native", name = "Entry")]
struct PyEntry {
    entry: Entry,
}

#[pymethods]
impl PyEntry {
    /// `<operator>/<output>`.
    #[getter]
    fn name(&self) -> String {
        self.entry.name().to_owned()
    }

    /// True for outputs (read-write), false for inputs (read-only).
    #[getter]
    fn writable(&self) -> bool {
        self.entry.access() == Access::ReadWrite
    }

    /// The current shape (0 in a dynamic dimension not set yet).
    #[getter]
    fn shape(&mut self) -> Vec<usize> {
        if self.entry.access() == Access::ReadOnly {
            let _ = self.entry.refresh();
        }
        self.entry.shape().to_vec()
    }

    /// The element type's name.
    #[getter]
    fn element_type(&self) -> String {
        self.entry.element_type().to_string()
    }

    /// The dynamic dimensions.
    #[getter]
    fn dynamic_shape_indices(&self) -> Vec<usize> {
        self.entry.dynamic_indices()
    }

    /// Whether some dimension is dynamic.
    #[getter]
    fn is_dynamic(&self) -> bool {
        self.entry.is_dynamic()
    }

    /// Whether the driver allocated it before the operator started.
    #[getter]
    fn is_preallocated(&self) -> bool {
        self.entry.is_preallocated()
    }

    /// Whether an allocation exists.
    #[getter]
    fn is_allocated(&self) -> bool {
        self.entry.is_allocated()
    }

    /// Bytes the current shape needs.
    #[getter]
    fn size_bytes(&self) -> usize {
        self.entry.size_bytes()
    }

    /// Sets dynamic dimensions; returns the indices it ignored.
    fn update_shape(
        &mut self,
        dimensions: Vec<usize>,
        new_values: Vec<usize>,
    ) -> PyResult<Vec<usize>> {
        self.entry
            .update_shape(&dimensions, &new_values)
            .map_err(err)
    }

    /// Allocates (or reallocates, erasing) the output.
    fn allocate(&mut self) -> PyResult<()> {
        self.entry.allocate().map_err(err)
    }

    /// Maps it: an input read-only (`PROT_READ`), an output writable.
    fn map(&self) -> PyResult<Buffer> {
        match self.entry.access() {
            Access::ReadOnly => Ok(Buffer::new(
                self.entry.map_as_ndobject().map_err(err)?,
                true,
            )),
            Access::ReadWrite => Ok(Buffer::new(
                self.entry.map_as_ndobject_mut().map_err(err)?,
                false,
            )),
        }
    }
}

/// The operator this process runs as.
#[pyclass(module = "fastio._native", name = "Operator")]
struct PyOperator {
    name: String,
    context: Py<PyContext>,
    inputs: Vec<(String, Py<PyEntry>)>,
    outputs: Vec<(String, Py<PyEntry>)>,
}

#[pymethods]
impl PyOperator {
    /// Attaches as the operator named in `FASTIO_OPERATOR`.
    #[staticmethod]
    fn from_env(py: Python<'_>) -> PyResult<PyOperator> {
        let op = Operator::from_env().map_err(err)?;
        let name = op.name().to_owned();
        let (ctx, inputs, outputs) = op.into_parts();
        let wrap = |list: Vec<(String, Entry)>| -> PyResult<Vec<(String, Py<PyEntry>)>> {
            list.into_iter()
                .map(|(n, entry)| Ok((n, Py::new(py, PyEntry { entry })?)))
                .collect()
        };
        Ok(PyOperator {
            name,
            context: Py::new(py, PyContext { ctx })?,
            inputs: wrap(inputs)?,
            outputs: wrap(outputs)?,
        })
    }

    /// Its name.
    #[getter]
    fn name(&self) -> String {
        self.name.clone()
    }

    /// The job's context.
    #[getter]
    fn context(&self, py: Python<'_>) -> Py<PyContext> {
        self.context.clone_ref(py)
    }

    /// The inputs, in definition order.
    #[getter]
    fn inputs(&self, py: Python<'_>) -> Vec<Py<PyEntry>> {
        self.inputs.iter().map(|(_, e)| e.clone_ref(py)).collect()
    }

    /// The outputs, in definition order.
    #[getter]
    fn outputs(&self, py: Python<'_>) -> Vec<Py<PyEntry>> {
        self.outputs.iter().map(|(_, e)| e.clone_ref(py)).collect()
    }

    /// The input named `name` (local name or `<operator>/<output>`).
    fn input(&self, py: Python<'_>, name: &str) -> PyResult<Py<PyEntry>> {
        find(py, &self.inputs, name)
    }

    /// The output named `name`.
    fn output(&self, py: Python<'_>, name: &str) -> PyResult<Py<PyEntry>> {
        find(py, &self.outputs, name)
    }
}

fn find(py: Python<'_>, list: &[(String, Py<PyEntry>)], name: &str) -> PyResult<Py<PyEntry>> {
    list.iter()
        .find(|(n, e)| {
            n.eq_ignore_ascii_case(name) || e.borrow(py).entry.name().eq_ignore_ascii_case(name)
        })
        .map(|(_, e)| e.clone_ref(py))
        .ok_or_else(|| NotFoundError::new_err(format!("no entry named {name:?}")))
}

/// One loaded tensor: name, read-only buffer, element type, shape.
type LoadedTensor = (String, Buffer, String, Vec<usize>);

/// `(name, buffer, element type, shape)` of every tensor of a params file,
/// in file order: zero copy over one memory map (each buffer read-only).
#[pyfunction]
fn params_load(path: &str) -> PyResult<Vec<LoadedTensor>> {
    let d = params_io::ReadOptions::new()
        .map_path(path)
        .map_err(|e| Error::new_err(e.to_string()))?;
    d.iter()
        .map(|p| {
            let t = p.tensor();
            let array = t.to_array().map_err(|e| Error::new_err(e.to_string()))?;
            Ok((
                p.name().into_owned(),
                Buffer::new(array, true),
                t.primitive().name().to_owned(),
                t.shape().to_vec(),
            ))
        })
        .collect()
}

/// One tensor to save: name, element type, shape, bytes.
type TensorToSave = (String, String, Vec<usize>, Vec<u8>);

/// Writes `(name, element type, shape, bytes)` tensors as a params file
/// (TVM's `save_param_dict` layout), atomically; returns its size.
#[pyfunction]
fn params_save(path: &str, tensors: Vec<TensorToSave>) -> PyResult<u64> {
    let mut d = params_io::ParamDict::new();
    for (name, element, shape, bytes) in tensors {
        let p = dtype::Primitive::from_name(&element)
            .ok_or_else(|| PyValueError::new_err(format!("unknown element type {element:?}")))?;
        let t = params_io::Tensor::new(p, &shape, bytes)
            .map_err(|e| PyValueError::new_err(format!("{name}: {e}")))?;
        if d.insert(name.clone(), t).is_some() {
            return Err(PyValueError::new_err(format!("{name:?} given twice")));
        }
    }
    d.write_path(path)
        .map_err(|e| Error::new_err(e.to_string()))
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
    m.add_function(wrap_pyfunction!(params_load, m)?)?;
    m.add_function(wrap_pyfunction!(params_save, m)?)?;
    m.add_function(wrap_pyfunction!(dtype_parse, m)?)?;
    m.add_class::<Buffer>()?;
    m.add_class::<PyContext>()?;
    m.add_class::<PyAllocation>()?;
    m.add_class::<PyEntry>()?;
    m.add_class::<PyOperator>()?;
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("PoisonedError", py.get_type::<PoisonedError>())?;
    m.add("NotAllocatedError", py.get_type::<NotAllocatedError>())?;
    m.add("AccessError", py.get_type::<AccessError>())?;
    m.add("MapConflictError", py.get_type::<MapConflictError>())?;
    m.add("NotFoundError", py.get_type::<NotFoundError>())?;
    Ok(())
}
