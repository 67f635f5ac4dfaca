//! Seed 002's objects: the context and `FastIOAllocation`.

use std::ffi::c_int;
use std::time::Duration;

use fastio::{Allocation, Context, ContextOptions};
use numpy::PyArrayDescr;
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyMemoryView;

use crate::buffer::Buffer;
use crate::stream::{self, PyStreamConsumer, PyStreamProducer};
use crate::{Error, MapConflictError, err};

/// A Fast I/O context.
#[pyclass(module = "fastio._native", name = "Context")]
pub(crate) struct PyContext {
    pub(crate) ctx: Context,
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

    /// Creates stream `name` (frames of `element` up to `max_shape`,
    /// `depth` in flight, `consumers` consumers, `overflow` "block" or
    /// "drop-oldest") and returns its producer.
    #[pyo3(signature = (name, element, max_shape, depth = 4, consumers = 1, overflow = "block"))]
    fn create_stream(
        &self,
        name: &str,
        element: &str,
        max_shape: Vec<usize>,
        depth: usize,
        consumers: usize,
        overflow: &str,
    ) -> PyResult<PyStreamProducer> {
        stream::create_stream(
            &self.ctx, name, element, &max_shape, depth, consumers, overflow,
        )
    }

    /// Takes over the producer of stream `name` (one whose producer is
    /// gone).
    fn stream_producer(&self, name: &str) -> PyResult<PyStreamProducer> {
        stream::stream_producer(&self.ctx, name)
    }

    /// Attaches as consumer `index` of stream `name`.
    #[pyo3(signature = (name, index = 0))]
    fn stream_consumer(&self, name: &str, index: usize) -> PyResult<PyStreamConsumer> {
        stream::stream_consumer(&self.ctx, name, index)
    }

    /// Marks stream `name` failed: its consumers raise `PoisonedError`.
    fn poison_stream(&self, name: &str) -> PyResult<()> {
        self.ctx.poison_stream(name).map_err(err)
    }

    /// Removes stream `name`.
    fn remove_stream(&self, name: &str) -> PyResult<()> {
        self.ctx.remove_stream(name).map_err(err)
    }

    /// A new allocation of `size` bytes.
    fn create_allocation(&self, size: u64) -> PyResult<PyAllocation> {
        Ok(PyAllocation::new(self.ctx.create(size).map_err(err)?))
    }

    /// A new reference to the allocation published as `name`.
    fn get(&self, name: &str) -> PyResult<PyAllocation> {
        Ok(PyAllocation::new(self.ctx.get(name).map_err(err)?))
    }

    /// Waits up to `timeout` seconds for `name`, then gets it.
    fn wait_for(&self, py: Python<'_>, name: &str, timeout: f64) -> PyResult<PyAllocation> {
        let t = Duration::try_from_secs_f64(timeout.max(0.0))
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let ctx = self.ctx.clone();
        let a = py.detach(|| ctx.wait_for(name, t)).map_err(err)?;
        Ok(PyAllocation::new(a))
    }

    /// The published names.
    fn names(&self) -> PyResult<Vec<String>> {
        self.ctx.names().map_err(err)
    }
}

/// A local reference to Fast I/O memory (seed 002's `FastIOAllocation`).
///
/// Its bytes are reached through `map()` (a memoryview of the one open
/// mapping), `map_as_numpy_array()` (a new mapping the array keeps alive),
/// the buffer protocol and DLPack (the open mapping, or a read-only
/// mapping held by the export).
#[pyclass(module = "fastio._native", name = "FastIOAllocation")]
pub(crate) struct PyAllocation {
    alloc: Option<Allocation>,
    mapping: Option<Py<Buffer>>,
}

impl PyAllocation {
    fn new(alloc: Allocation) -> PyAllocation {
        PyAllocation {
            alloc: Some(alloc),
            mapping: None,
        }
    }

    fn get(&self) -> PyResult<&Allocation> {
        self.alloc
            .as_ref()
            .ok_or_else(|| Error::new_err("the allocation was released or freed"))
    }

    fn new_mapping(&self, writable: bool) -> PyResult<Buffer> {
        let a = self.get()?;
        let array = if writable {
            a.map_as_ndobject_mut()
        } else {
            a.map_as_ndobject()
        }
        .map_err(err)?;
        Ok(Buffer::new(array, !writable))
    }

    /// The open mapping, or a new read-only one.
    fn mapping_or_read_only<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, Buffer>> {
        match &self.mapping {
            Some(m) => Ok(m.bind(py).clone()),
            None => Bound::new(py, self.new_mapping(false)?),
        }
    }
}

/// The datashape type of an element type given as datashape text or as
/// anything `numpy.dtype()` accepts.
fn element_type_of(element_type: &Bound<'_, PyAny>) -> PyResult<dtype::Type> {
    if let Ok(text) = element_type.extract::<String>()
        && let Ok(t) = text.parse()
    {
        return Ok(t);
    }
    let descr = PyArrayDescr::new(element_type.py(), element_type)?;
    let np: String = descr.getattr("str")?.extract()?;
    dtype::numpy::from_numpy(&np).map_err(|e| PyValueError::new_err(format!("{np}: {e}")))
}

#[pymethods]
impl PyAllocation {
    /// Size in bytes.
    #[getter]
    fn size(&self) -> PyResult<u64> {
        Ok(self.get()?.size())
    }

    /// The element type as a numpy dtype (default `uint8`).
    #[getter]
    fn element_type<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArrayDescr>> {
        let t = self.get()?.element_type();
        let np = dtype::numpy::to_numpy(t)
            .map_err(|e| Error::new_err(format!("no numpy dtype for {t}: {e}")))?;
        PyArrayDescr::new(py, np.as_str())
    }

    /// The dimensions (default `[size]`).
    #[getter]
    fn dimensions(&self) -> PyResult<Vec<usize>> {
        Ok(self.get()?.dimensions().to_vec())
    }

    /// Describes the memory as `dimensions` of `element_type` (datashape
    /// text such as `"float32"`, or a numpy dtype); the byte size must
    /// match.
    fn set_type_and_dimensions(
        &mut self,
        element_type: &Bound<'_, PyAny>,
        dimensions: Vec<usize>,
    ) -> PyResult<()> {
        let t = element_type_of(element_type)?;
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

    /// Maps the memory (read-write and exclusive across processes unless
    /// `writable` is false) and returns it as a memoryview; `unmap` ends
    /// it. While that memoryview (or anything made from it) is alive,
    /// `unmap` raises `BufferError` and changes nothing: release it first
    /// (`m.release()`, or `with alloc.map() as m:`), so no view can outlive
    /// the mapping.
    #[pyo3(signature = (writable = true))]
    fn map<'py>(&mut self, py: Python<'py>, writable: bool) -> PyResult<Bound<'py, PyMemoryView>> {
        if self.mapping.is_some() {
            return Err(MapConflictError::new_err("already mapped; unmap first"));
        }
        let b = Bound::new(py, self.new_mapping(writable)?)?;
        let view = PyMemoryView::from(b.as_any())?;
        self.mapping = Some(b.unbind());
        Ok(view)
    }

    /// A new mapping as a `Buffer`, for `with`: it unmaps on exit (and
    /// raises there while views of it are alive). Independent of `map()`.
    #[pyo3(signature = (writable = true))]
    fn mapping(&self, writable: bool) -> PyResult<Buffer> {
        self.new_mapping(writable)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Leaving `with alloc:` unmaps and releases the reference.
    fn __exit__(
        &mut self,
        py: Python<'_>,
        _t: Option<&Bound<'_, PyAny>>,
        _v: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.unmap(py)?;
        self.release()?;
        Ok(false)
    }

    /// The open mapping as a memoryview, or None.
    #[getter]
    fn buffer<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyMemoryView>>> {
        self.mapping
            .as_ref()
            .map(|m| PyMemoryView::from(m.bind(py).as_any()))
            .transpose()
    }

    /// Unmaps; raises BufferError while views of the mapping are alive.
    fn unmap(&mut self, py: Python<'_>) -> PyResult<()> {
        if let Some(m) = &self.mapping {
            m.bind(py).borrow_mut().unmap()?;
            self.mapping = None;
        }
        Ok(())
    }

    /// A numpy array over the memory itself, of the allocation's type and
    /// dimensions (a new mapping that the array keeps alive; read-only
    /// unless `writable`).
    #[pyo3(signature = (writable = true))]
    fn map_as_numpy_array<'py>(
        &self,
        py: Python<'py>,
        writable: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.new_mapping(writable)?.to_numpy(py)
    }

    /// Drops this reference (mappings and arrays made from it stay valid
    /// while they live).
    fn release(&mut self) -> PyResult<()> {
        self.mapping = None;
        match self.alloc.take() {
            Some(a) => a.release().map_err(err),
            None => Ok(()),
        }
    }

    /// Marks the memory for deletion and drops this reference.
    fn free(&mut self) -> PyResult<()> {
        self.mapping = None;
        match self.alloc.take() {
            Some(a) => a.free().map_err(err),
            None => Err(Error::new_err("the allocation was released or freed")),
        }
    }

    /// `(kDLCPU, 0)`.
    fn __dlpack_device__(&self) -> (i32, i32) {
        (crate::dlpack::DEVICE_CPU, 0)
    }

    /// A DLPack capsule of the open mapping, or of a read-only mapping
    /// the capsule holds (see `Buffer.__dlpack__`).
    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let m = self.mapping_or_read_only(py)?;
        crate::dlpack::capsule(py, &m.borrow(), stream, max_version, dl_device, copy)
    }

    /// The buffer protocol: the open mapping, or a read-only mapping the
    /// view holds. A writable request needs a writable `map()` first.
    ///
    /// # Safety
    ///
    /// Called by Python with a valid `view` to fill.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        let m = slf.borrow().mapping_or_read_only(slf.py())?;
        if m.borrow().is_readonly() && (flags & ffi::PyBUF_WRITABLE) == ffi::PyBUF_WRITABLE {
            return Err(PyBufferError::new_err(
                "not mapped writable: call map(writable=True) first",
            ));
        }
        // SAFETY: forwarded from Python's call; the view's `obj` becomes
        // the mapping, whose `__releasebuffer__` Python calls.
        unsafe { Buffer::fill_view(m, view, flags) }
    }
}
