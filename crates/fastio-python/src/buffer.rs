//! [`Buffer`]: one mapping of shared memory (or of a params file), and
//! every way Python reaches its bytes: numpy arrays (built with the
//! `numpy` crate), the buffer protocol and DLPack capsules.
//!
//! Every export holds its own clone of the mapping's `ndobject::Array`, so
//! the bytes stay mapped while any export lives, whatever happens to the
//! `Buffer` and the objects it came from. The `Buffer` counts its live
//! exports (one shared counter, decremented by whichever export ends), and
//! `unmap` raises while the count is not zero: no view ever dangles, and a
//! mapping the owner wants gone is never kept silently.

use std::ffi::{CString, c_int, c_void};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use numpy::npyffi::{self, NPY_ARRAY_WRITEABLE, PY_ARRAY_API, npy_intp};
use numpy::{PyArrayDescr, PyArrayDescrMethods};
use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;

use crate::dlpack;

/// The typed layout of a mapping: what numpy, the buffer protocol and
/// DLPack are told.
#[derive(Clone, Debug)]
pub(crate) struct Layout {
    /// numpy's dtype string (`"<f4"`), or None when the element type has
    /// no numpy equivalent (exported as bytes).
    pub(crate) numpy: Option<String>,
    /// The buffer protocol's format (`"f"`, `">i"`), or None (bytes).
    pub(crate) format: Option<&'static str>,
    /// DLPack's data type, or None when DLPack has no equivalent.
    pub(crate) dlpack: Option<dtype::dlpack::DLDataType>,
    /// Bytes per element.
    pub(crate) itemsize: usize,
    /// Dimensions.
    pub(crate) shape: Vec<usize>,
    /// Byte strides (C order: the mappings are contiguous).
    pub(crate) strides: Vec<isize>,
}

impl Layout {
    fn of(array: &ndobject::Array) -> Layout {
        let ty = array.element_type();
        let numpy = dtype::numpy::to_numpy(ty).ok();
        let format = numpy.as_deref().and_then(buffer_format);
        let dlpack = dtype::dlpack::to_dlpack(ty).ok();
        let itemsize = ty.data_size().unwrap_or(1);
        if numpy.is_none() {
            // Bytes: one dimension of every byte.
            let len = array.len() * itemsize;
            return Layout {
                numpy: None,
                format: None,
                dlpack: None,
                itemsize: 1,
                shape: vec![len],
                strides: vec![1],
            };
        }
        Layout {
            numpy,
            format,
            dlpack,
            itemsize,
            shape: array.shape().to_vec(),
            strides: array.strides().to_vec(),
        }
    }

    /// Total bytes.
    pub(crate) fn bytes(&self) -> usize {
        self.shape.iter().product::<usize>() * self.itemsize
    }
}

/// The buffer protocol's format of a numpy dtype string: the `struct`
/// module's codes, native order written without a prefix.
fn buffer_format(numpy: &str) -> Option<&'static str> {
    let (order, code) = numpy.split_at(1);
    let native = order == "|" || (order == "<") == cfg!(target_endian = "little");
    let f = match (native, code) {
        (_, "b1") => "?",
        (_, "i1") => "b",
        (_, "u1") => "B",
        (true, "i2") => "h",
        (true, "u2") => "H",
        (true, "i4") => "i",
        (true, "u4") => "I",
        (true, "i8") => "q",
        (true, "u8") => "Q",
        (true, "f2") => "e",
        (true, "f4") => "f",
        (true, "f8") => "d",
        (true, "c8") => "Zf",
        (true, "c16") => "Zd",
        (false, "i2") => ">h",
        (false, "u2") => ">H",
        (false, "i4") => ">i",
        (false, "u4") => ">I",
        (false, "i8") => ">q",
        (false, "u8") => ">Q",
        (false, "f2") => ">e",
        (false, "f4") => ">f",
        (false, "f8") => ">d",
        _ => return None,
    };
    Some(f)
}

/// What an export keeps: the mapped array (so the bytes stay mapped) and
/// the owner's export count, decremented when the export ends.
pub(crate) struct ExportGuard {
    /// Keeps the mapping (and the allocation's reference) alive.
    pub(crate) array: ndobject::Array,
    exports: Arc<AtomicUsize>,
}

impl ExportGuard {
    /// A guard of a private array (a copy) that no buffer counts.
    pub(crate) fn private(array: ndobject::Array) -> ExportGuard {
        ExportGuard {
            array,
            exports: Arc::new(AtomicUsize::new(1)),
        }
    }
}

impl Drop for ExportGuard {
    fn drop(&mut self) {
        self.exports.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The base object of the numpy arrays made over a [`Buffer`]: it has no
/// buffer protocol of its own, so numpy refuses `flags.writeable = True`
/// on a read-only array (numpy asks the base for a writable buffer).
#[pyclass(module = "fastio._native", frozen)]
pub(crate) struct ArrayBase {
    _guard: ExportGuard,
}

/// A mapping of shared memory, exposed through numpy, the buffer protocol
/// and DLPack.
#[pyclass(module = "fastio._native")]
pub(crate) struct Buffer {
    array: Option<ndobject::Array>,
    layout: Layout,
    readonly: bool,
    exports: Arc<AtomicUsize>,
}

impl Buffer {
    /// A buffer over `array` (a contiguous mapping); `readonly` for
    /// inputs and read-only mappings.
    pub(crate) fn new(array: ndobject::Array, readonly: bool) -> Buffer {
        Buffer {
            layout: Layout::of(&array),
            array: Some(array),
            readonly,
            exports: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// A new export: a clone of the mapped array, counted until dropped.
    pub(crate) fn export(&self) -> PyResult<ExportGuard> {
        let array = self
            .array
            .clone()
            .ok_or_else(|| PyBufferError::new_err("the mapping was unmapped"))?;
        self.exports.fetch_add(1, Ordering::AcqRel);
        Ok(ExportGuard {
            array,
            exports: Arc::clone(&self.exports),
        })
    }

    /// The layout.
    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Whether it is read-only.
    pub(crate) fn is_readonly(&self) -> bool {
        self.readonly
    }

    /// A numpy array over the mapping (zero copy), writable only when the
    /// buffer is; its base keeps the mapping alive.
    pub(crate) fn to_numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let guard = self.export()?;
        let data = guard.array.data_address() as *mut c_void;
        let (descr, mut dims, mut strides) = match &self.layout.numpy {
            Some(np) => (
                PyArrayDescr::new(py, np.as_str())?,
                self.layout.shape.iter().map(|&d| d as npy_intp).collect(),
                self.layout.strides.iter().map(|&s| s as npy_intp).collect(),
            ),
            None => (
                PyArrayDescr::new(py, "|u1")?,
                vec![self.layout.bytes() as npy_intp],
                vec![1 as npy_intp],
            ),
        };
        let flags = if self.readonly {
            0
        } else {
            NPY_ARRAY_WRITEABLE
        };
        let base = Bound::new(py, ArrayBase { _guard: guard })?;
        // SAFETY: numpy's C API, called with the GIL (`py`). `descr` is a
        // new reference the call steals; `dims` and `strides` hold `ndim`
        // entries each and are copied by numpy; `data` points at the
        // mapping, which `base` (an export guard holding the mapped
        // array) keeps alive, and every byte the shape and strides reach
        // lies in it (ndobject's invariant 3). `PyArray_SetBaseObject`
        // steals the reference to `base` even when it fails.
        unsafe {
            let arr = PY_ARRAY_API.PyArray_NewFromDescr(
                py,
                npyffi::get_type_object(py, npyffi::NpyTypes::PyArray_Type),
                descr.into_dtype_ptr(),
                dims.len() as c_int,
                dims.as_mut_ptr(),
                strides.as_mut_ptr(),
                data,
                flags,
                std::ptr::null_mut(),
            );
            let arr = Bound::from_owned_ptr_or_err(py, arr)?;
            if PY_ARRAY_API.PyArray_SetBaseObject(py, arr.as_ptr().cast(), base.into_ptr()) != 0 {
                return Err(PyErr::fetch(py));
            }
            Ok(arr)
        }
    }

    /// Fills a buffer-protocol `view` of `slf` (the `bf_getbuffer` slot,
    /// also used by the allocations, whose views belong to a buffer).
    ///
    /// # Safety
    ///
    /// `view` is null or a `Py_buffer` the caller lets us fill.
    pub(crate) unsafe fn fill_view(
        slf: Bound<'_, Buffer>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("null view"));
        }
        let b = slf.borrow();
        if b.readonly && (flags & ffi::PyBUF_WRITABLE) == ffi::PyBUF_WRITABLE {
            return Err(PyBufferError::new_err(
                "read-only memory (an input or a read-only mapping)",
            ));
        }
        let guard = b.export()?;
        let layout = &b.layout;
        // Typed (shape, strides and format of the elements) when the
        // consumer asks for a shape and a format and the type has one;
        // otherwise one dimension of bytes.
        let with_shape = (flags & ffi::PyBUF_ND) == ffi::PyBUF_ND;
        let with_format = (flags & ffi::PyBUF_FORMAT) == ffi::PyBUF_FORMAT;
        let typed = with_shape && with_format && layout.format.is_some();
        let format = match (with_format, typed) {
            (false, _) => None,
            (true, true) => layout.format,
            (true, false) => Some("B"),
        };
        // Shape and strides live as long as the view: boxed with it in
        // `internal`, freed by `release_view`.
        let mut hold = Box::new(ViewHold {
            _guard: guard,
            shape: layout.shape.iter().map(|&d| d as isize).collect(),
            strides: layout.strides.clone(),
            format: format.map(|f| CString::new(f).expect("formats have no NUL")),
        });
        let (itemsize, ndim) = if typed {
            (layout.itemsize, layout.shape.len())
        } else {
            hold.shape = vec![layout.bytes() as isize];
            hold.strides = vec![1];
            (1, 1)
        };
        let data = hold._guard.array.data_address();
        let len = layout.bytes();
        let readonly = b.readonly;
        drop(b);
        // SAFETY: `view` is non-null and ours to fill (the buffer protocol);
        // `data..data + len` stays mapped while the guard in `hold` lives,
        // which is until `release_view` frees `internal`; `shape`,
        // `strides` and `format` point into `hold`, whose heap data does
        // not move; `obj` is a new reference to `slf`, released by Python.
        unsafe {
            (*view).obj = slf.into_any().into_ptr();
            (*view).buf = data as *mut c_void;
            (*view).len = len as isize;
            (*view).readonly = c_int::from(readonly);
            (*view).itemsize = itemsize as isize;
            (*view).format = hold
                .format
                .as_ref()
                .map_or(std::ptr::null_mut(), |f| f.as_ptr().cast_mut());
            (*view).ndim = ndim as c_int;
            (*view).shape = if with_shape {
                hold.shape.as_mut_ptr()
            } else {
                std::ptr::null_mut()
            };
            (*view).strides = if (flags & ffi::PyBUF_STRIDES) == ffi::PyBUF_STRIDES {
                hold.strides.as_mut_ptr()
            } else {
                std::ptr::null_mut()
            };
            (*view).suboffsets = std::ptr::null_mut();
            (*view).internal = Box::into_raw(hold).cast();
        }
        Ok(())
    }
}

/// What a buffer-protocol view holds until released.
struct ViewHold {
    _guard: ExportGuard,
    shape: Vec<isize>,
    strides: Vec<isize>,
    format: Option<CString>,
}

#[pymethods]
impl Buffer {
    /// Bytes mapped.
    fn __len__(&self) -> usize {
        self.layout.bytes()
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

    /// Live exports: numpy arrays, buffer views and DLPack capsules.
    #[getter]
    fn exports(&self) -> usize {
        self.exports.load(Ordering::Acquire)
    }

    /// A numpy array over the mapping (zero copy; read-only unless the
    /// mapping is writable).
    fn numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.to_numpy(py)
    }

    /// Unmaps now; raises while exports of it exist.
    pub(crate) fn unmap(&mut self) -> PyResult<()> {
        let n = self.exports.load(Ordering::Acquire);
        if n > 0 {
            return Err(PyBufferError::new_err(format!(
                "{n} view(s) of this mapping are alive; delete them before unmapping"
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

    /// `(kDLCPU, 0)`: shared memory is host memory.
    fn __dlpack_device__(&self) -> (i32, i32) {
        (dlpack::DEVICE_CPU, 0)
    }

    /// A DLPack capsule over the mapping: versioned (`"dltensor_versioned"`,
    /// READ_ONLY set on read-only memory) when `max_version` allows 1.x,
    /// legacy (`"dltensor"`) when no version is asked for. `copy=True`
    /// exports a private copy.
    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        dlpack::capsule(py, self, stream, max_version, dl_device, copy)
    }

    /// # Safety
    ///
    /// Called by Python with a valid `view` to fill.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        // SAFETY: forwarded from Python's call.
        unsafe { Buffer::fill_view(slf, view, flags) }
    }

    /// # Safety
    ///
    /// Called by Python with a view `fill_view` filled.
    unsafe fn __releasebuffer__(&mut self, view: *mut ffi::Py_buffer) {
        // SAFETY: `internal` is the `ViewHold` that `fill_view` leaked
        // (or null); taking it back frees shape, strides and format and
        // ends the export.
        unsafe {
            let hold = (*view).internal.cast::<ViewHold>();
            if !hold.is_null() {
                (*view).internal = std::ptr::null_mut();
                drop(Box::from_raw(hold));
            }
        }
    }
}
