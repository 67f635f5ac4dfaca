//! DLPack export of a [`Buffer`]: `DLManagedTensorVersioned` (DLPack 1.x,
//! capsule `"dltensor_versioned"`, with the READ_ONLY flag on read-only
//! memory) or the legacy `DLManagedTensor` (capsule `"dltensor"`) for
//! consumers that ask for no version.
//!
//! A legacy capsule cannot say "read-only". We still give one for an
//! input when asked: its pages lie in the context's `PROT_READ` view, so a
//! consumer that writes anyway faults instead of changing the input.
//!
//! The capsule's tensor owns an export guard (the mapped array and the
//! buffer's export count); the consumer's call of `deleter` frees it, or
//! the capsule's destructor does when no consumer ever took it (capsule
//! name not yet changed to `"used_dltensor…"`).

use std::ffi::{CStr, c_void};

use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;

use crate::buffer::{Buffer, ExportGuard};

/// `kDLCPU`.
pub(crate) const DEVICE_CPU: i32 = 1;
/// `DLPACK_FLAG_BITMASK_READ_ONLY`.
const FLAG_READ_ONLY: u64 = 1 << 0;
/// `DLPACK_FLAG_BITMASK_IS_COPIED`.
const FLAG_IS_COPIED: u64 = 1 << 1;

const VERSIONED: &CStr = c"dltensor_versioned";
const LEGACY: &CStr = c"dltensor";

#[repr(C)]
struct DLDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DLPackVersion {
    major: u32,
    minor: u32,
}

#[repr(C)]
struct DLManagedTensorVersioned {
    version: DLPackVersion,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    flags: u64,
    dl_tensor: DLTensor,
}

#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// A managed tensor and what it points into, in one allocation: the
/// managed tensor first, so a pointer to it is a pointer to the whole.
#[repr(C)]
struct Exported<M> {
    managed: M,
    _guard: ExportGuard,
    shape: Vec<i64>,
    strides: Vec<i64>,
}

unsafe extern "C" fn delete_versioned(m: *mut DLManagedTensorVersioned) {
    if !m.is_null() {
        // SAFETY: `m` came from `Box::into_raw` of an
        // `Exported<DLManagedTensorVersioned>` (`managed` is its first
        // field of a `repr(C)` struct), and DLPack calls the deleter once.
        drop(unsafe { Box::from_raw(m.cast::<Exported<DLManagedTensorVersioned>>()) });
    }
}

unsafe extern "C" fn delete_legacy(m: *mut DLManagedTensor) {
    if !m.is_null() {
        // SAFETY: as in `delete_versioned`, for `Exported<DLManagedTensor>`.
        drop(unsafe { Box::from_raw(m.cast::<Exported<DLManagedTensor>>()) });
    }
}

/// The capsule destructor: frees a tensor no consumer took.
unsafe extern "C" fn capsule_destructor(capsule: *mut ffi::PyObject) {
    // SAFETY: Python calls this with the capsule being destroyed (and
    // the GIL). Only a capsule still under our name holds an untaken
    // tensor; a consumer renames it when it takes ownership. The
    // pointers are the ones `export` stored under those names.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, VERSIONED.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(capsule, VERSIONED.as_ptr());
            delete_versioned(m.cast());
        } else if ffi::PyCapsule_IsValid(capsule, LEGACY.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(capsule, LEGACY.as_ptr());
            delete_legacy(m.cast());
        }
    }
}

/// `__dlpack__` of `buffer`, with the array API's arguments: versioned
/// when `max_version` allows 1.x, legacy when no version is asked for;
/// host memory only; a private copy when `copy` is true.
pub(crate) fn capsule<'py>(
    py: Python<'py>,
    buffer: &Buffer,
    stream: Option<&Bound<'py, PyAny>>,
    max_version: Option<(u32, u32)>,
    dl_device: Option<(i32, i32)>,
    copy: Option<bool>,
) -> PyResult<Bound<'py, PyAny>> {
    if stream.is_some_and(|s| !s.is_none()) {
        return Err(PyValueError::new_err("stream must be None for host memory"));
    }
    if dl_device.is_some_and(|d| d != (DEVICE_CPU, 0)) {
        return Err(PyBufferError::new_err(
            "only the CPU device (1, 0) is supported",
        ));
    }
    let versioned = max_version.is_some_and(|(major, _)| major >= 1);
    export(py, buffer, versioned, copy == Some(true))
}

/// A DLPack capsule of `buffer`: zero copy unless `copy`.
fn export<'py>(
    py: Python<'py>,
    buffer: &Buffer,
    versioned: bool,
    copy: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let layout = buffer.layout();
    let dt = layout.dlpack.ok_or_else(|| {
        PyBufferError::new_err(format!(
            "DLPack has no data type for this element type ({})",
            layout.numpy.as_deref().unwrap_or("not a numpy type")
        ))
    })?;
    let mut guard = buffer.export()?;
    let mut readonly = buffer.is_readonly();
    if copy {
        let private = guard
            .array
            .to_contiguous()
            .map_err(|e| PyBufferError::new_err(e.to_string()))?;
        guard = ExportGuard::private(private);
        readonly = false;
    }
    let shape: Vec<i64> = layout.shape.iter().map(|&d| d as i64).collect();
    let itemsize = layout.itemsize as isize;
    let strides: Vec<i64> = layout
        .strides
        .iter()
        .map(|&s| (s / itemsize.max(1)) as i64)
        .collect();
    let tensor = DLTensor {
        data: guard.array.data_address() as *mut c_void,
        device: DLDevice {
            device_type: DEVICE_CPU,
            device_id: 0,
        },
        ndim: shape.len() as i32,
        dtype: DLDataType {
            code: dt.code,
            bits: dt.bits,
            lanes: dt.lanes,
        },
        shape: std::ptr::null_mut(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    };
    let (ptr, name): (*mut c_void, &CStr) = if versioned {
        let mut flags = 0;
        if readonly {
            flags |= FLAG_READ_ONLY;
        }
        if copy {
            flags |= FLAG_IS_COPIED;
        }
        let managed = DLManagedTensorVersioned {
            version: DLPackVersion { major: 1, minor: 0 },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_versioned),
            flags,
            dl_tensor: tensor,
        };
        (
            Exported::leak(managed, guard, shape, strides, |m| &mut m.dl_tensor),
            VERSIONED,
        )
    } else {
        let managed = DLManagedTensor {
            dl_tensor: tensor,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_legacy),
        };
        (
            Exported::leak(managed, guard, shape, strides, |m| &mut m.dl_tensor),
            LEGACY,
        )
    };
    // SAFETY: `ptr` is a leaked `Exported` under `name` (a static C
    // string); on failure nothing took it, so it is freed here.
    unsafe {
        let capsule = ffi::PyCapsule_New(ptr, name.as_ptr(), Some(capsule_destructor));
        if capsule.is_null() {
            if versioned {
                delete_versioned(ptr.cast());
            } else {
                delete_legacy(ptr.cast());
            }
            return Err(PyErr::fetch(py));
        }
        Ok(Bound::from_owned_ptr(py, capsule))
    }
}

impl<M> Exported<M> {
    /// Boxes the tensor with its guard, shape and strides, points the
    /// tensor at them, and leaks it (the deleter frees it).
    fn leak(
        managed: M,
        guard: ExportGuard,
        shape: Vec<i64>,
        strides: Vec<i64>,
        tensor: impl Fn(&mut M) -> &mut DLTensor,
    ) -> *mut c_void {
        let mut b = Box::new(Exported {
            managed,
            _guard: guard,
            shape,
            strides,
        });
        let (shape, strides) = (b.shape.as_mut_ptr(), b.strides.as_mut_ptr());
        let t = tensor(&mut b.managed);
        t.shape = shape;
        t.strides = strides;
        Box::into_raw(b).cast()
    }
}
