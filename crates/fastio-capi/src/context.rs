//! Contexts and allocations (seed 002's API) for C: create, attach, get,
//! publish, map, release, free — opaque handles and status codes.

use std::ffi::{c_char, c_void};
use std::time::Duration;

use fastio::{Allocation, Context, ContextOptions};
use ndobject::Array;

use crate::ptr::{cstr, handle, out, writable};
use crate::status::{
    FASTIO_ERR_CONFLICT, FASTIO_ERR_NOT_MAPPED, Failure, copy_out, guard, guard_value, result,
};

/// A Fast I/O context (opaque in C).
pub struct fastio_context {
    ctx: Context,
}

impl fastio_context {
    /// The context this handle holds.
    pub(crate) fn context(&self) -> &Context {
        &self.ctx
    }
}

/// A local reference to an allocation, with its own copy of the metadata
/// (opaque in C).
pub struct fastio_allocation {
    alloc: Option<Allocation>,
    /// The live mapping, if any.
    mapped: Option<Array>,
}

impl fastio_allocation {
    fn get(&self) -> Result<&Allocation, Failure> {
        self.alloc
            .as_ref()
            .ok_or_else(|| Failure::invalid("the allocation was freed"))
    }
}

fn new_context(ctx: Context, ctx_out: *mut *mut fastio_context) -> Result<(), Failure> {
    let p = Box::into_raw(Box::new(fastio_context { ctx }));
    // SAFETY: the export's caller guarantees `ctx_out` is writable; on a
    // null pointer the box is reclaimed.
    unsafe { out(ctx_out, p).inspect_err(|_| drop(Box::from_raw(p))) }
}

fn new_allocation(a: Allocation, out_p: *mut *mut fastio_allocation) -> Result<(), Failure> {
    let p = Box::into_raw(Box::new(fastio_allocation {
        alloc: Some(a),
        mapped: None,
    }));
    // SAFETY: as in `new_context`.
    unsafe { out(out_p, p).inspect_err(|_| drop(Box::from_raw(p))) }
}

/// Creates a context with `capacity` bytes for allocations (a named
/// segment; other processes attach with its handle).
///
/// # Safety
///
/// `ctx_out` is writable; the context is released with
/// `fastio_context_release`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_context_create(
    capacity: u64,
    ctx_out: *mut *mut fastio_context,
) -> result {
    guard(|| {
        writable(ctx_out)?;
        new_context(
            Context::new(&ContextOptions::new().capacity(capacity))?,
            ctx_out,
        )
    })
}

/// Attaches to the context whose handle is given (a name, or `fd:<n>`).
///
/// # Safety
///
/// `handle_text` is a NUL-terminated string; `ctx_out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_context_attach(
    handle_text: *const c_char,
    ctx_out: *mut *mut fastio_context,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let h = unsafe { cstr(handle_text)? };
        writable(ctx_out)?;
        new_context(Context::attach(h)?, ctx_out)
    })
}

/// Attaches to the context named by `FASTIO_CONTEXT`.
///
/// # Safety
///
/// `ctx_out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_context_from_env(ctx_out: *mut *mut fastio_context) -> result {
    guard(|| {
        writable(ctx_out)?;
        new_context(Context::from_env()?, ctx_out)
    })
}

/// The handle other processes attach with, NUL-terminated, into `buffer`.
///
/// # Safety
///
/// `ctx` is live; `buffer` is null or has `buffer_size` writable bytes;
/// `len_out` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_context_handle(
    ctx: *mut fastio_context,
    buffer: *mut c_char,
    buffer_size: usize,
    len_out: *mut usize,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { handle(ctx)? };
        let h = c.ctx.handle_for_children()?;
        // SAFETY: the caller's contract.
        unsafe { copy_out(&h, buffer, buffer_size, len_out) }
    })
}

/// Releases the handle (the owner's last handle closes the context).
/// Null is ignored.
///
/// # Safety
///
/// `ctx` is null or live, and not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_context_release(ctx: *mut fastio_context) {
    // A `Drop` runs here: inside the guard.
    guard_value((), || {
        if !ctx.is_null() {
            // SAFETY: the caller's contract: ours, released once.
            drop(unsafe { Box::from_raw(ctx) });
        }
    })
}

/// A new allocation of `size` bytes, known only to this process until
/// published (type `uint8`, dimensions `[size]`).
///
/// # Safety
///
/// `ctx` is live; `alloc_out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_context_create_allocation(
    ctx: *mut fastio_context,
    size: u64,
    alloc_out: *mut *mut fastio_allocation,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { handle(ctx)? };
        writable(alloc_out)?;
        new_allocation(c.ctx.create(size)?, alloc_out)
    })
}

/// A new reference to the allocation published as `name`.
///
/// # Safety
///
/// `ctx` is live; `name` is NUL-terminated; `alloc_out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_context_get(
    ctx: *mut fastio_context,
    name: *const c_char,
    alloc_out: *mut *mut fastio_allocation,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let (c, n) = unsafe { (handle(ctx)?, cstr(name)?) };
        writable(alloc_out)?;
        new_allocation(c.ctx.get(n)?, alloc_out)
    })
}

/// Waits up to `timeout_ms` for `name` to be published, then gets it.
///
/// # Safety
///
/// As for [`fastio_context_get`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_context_wait_for(
    ctx: *mut fastio_context,
    name: *const c_char,
    timeout_ms: u64,
    alloc_out: *mut *mut fastio_allocation,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let (c, n) = unsafe { (handle(ctx)?, cstr(name)?) };
        writable(alloc_out)?;
        new_allocation(
            c.ctx.wait_for(n, Duration::from_millis(timeout_ms))?,
            alloc_out,
        )
    })
}

/// Publishes the allocation under `name` with its current metadata.
///
/// # Safety
///
/// `alloc` is live; `name` is NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_allocation_publish(
    alloc: *mut fastio_allocation,
    name: *const c_char,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let (a, n) = unsafe { (handle(alloc)?, cstr(name)?) };
        a.get()?.publish(n)?;
        Ok(())
    })
}

/// Describes the memory as `ndim` dimensions `dims` of the element type
/// `element_type` (a datashape such as `float32`); the byte size must
/// match exactly.
///
/// # Safety
///
/// `alloc` is live; `element_type` is NUL-terminated; `dims` holds `ndim`
/// readable values (or is null when `ndim` is 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_allocation_set_type_and_dimensions(
    alloc: *mut fastio_allocation,
    element_type: *const c_char,
    dims: *const usize,
    ndim: usize,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let (a, t) = unsafe { (handle(alloc)?, cstr(element_type)?) };
        let dims = if ndim == 0 {
            &[][..]
        } else if dims.is_null() {
            return Err(Failure::invalid("null dims"));
        } else {
            // SAFETY: non-null, `ndim` readable values (the contract).
            unsafe { std::slice::from_raw_parts(dims, ndim) }
        };
        let ty: dtype::Type = t
            .parse()
            .map_err(|e| Failure::invalid(format!("element type {t:?}: {e}")))?;
        a.alloc
            .as_mut()
            .ok_or_else(|| Failure::invalid("the allocation was freed"))?
            .set_type_and_dimensions(ty, dims)?;
        Ok(())
    })
}

/// The allocation's size in bytes.
///
/// # Safety
///
/// `alloc` is live; `size_out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_allocation_size(
    alloc: *mut fastio_allocation,
    size_out: *mut u64,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(alloc)? };
        let size = a.get()?.size();
        // SAFETY: the caller's contract.
        unsafe { out(size_out, size) }
    })
}

/// The dimensions: a pointer to `*ndim_out` values, valid until the
/// metadata changes or the allocation is released.
///
/// # Safety
///
/// `alloc` is live; both outputs are writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_allocation_dimensions(
    alloc: *mut fastio_allocation,
    dims_out: *mut *const usize,
    ndim_out: *mut usize,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(alloc)? };
        writable(dims_out)?;
        writable(ndim_out)?;
        let dims = a.get()?.dimensions();
        // SAFETY: the caller's contract.
        unsafe {
            out(dims_out, dims.as_ptr())?;
            out(ndim_out, dims.len())
        }
    })
}

/// The element type as datashape text, NUL-terminated, into `buffer`.
///
/// # Safety
///
/// `alloc` is live; `buffer` is null or has `buffer_size` writable bytes;
/// `len_out` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_allocation_element_type(
    alloc: *mut fastio_allocation,
    buffer: *mut c_char,
    buffer_size: usize,
    len_out: *mut usize,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(alloc)? };
        let text = a.get()?.element_type().to_string();
        // SAFETY: the caller's contract.
        unsafe { copy_out(&text, buffer, buffer_size, len_out) }
    })
}

fn map(a: &mut fastio_allocation, write: bool) -> Result<(*mut c_void, usize), Failure> {
    if a.mapped.is_some() {
        return Err(Failure::new(FASTIO_ERR_CONFLICT, "already mapped"));
    }
    let alloc = a.get()?;
    let array = if write {
        alloc.map_as_ndobject_mut()?
    } else {
        alloc.map_as_ndobject()?
    };
    let len = usize::try_from(alloc.size()).map_err(|_| Failure::invalid("size"))?;
    let addr = array.data_address() as *mut c_void;
    a.mapped = Some(array);
    Ok((addr, len))
}

/// Maps the memory for reading: its address (read-only pages: a write
/// faults) and size. One mapping per handle at a time.
///
/// # Safety
///
/// `alloc` is live; both outputs are writable. The memory may be read
/// until `fastio_allocation_unmap`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_allocation_map(
    alloc: *mut fastio_allocation,
    data_out: *mut *const c_void,
    size_out: *mut usize,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(alloc)? };
        writable(data_out)?;
        writable(size_out)?;
        let (p, n) = map(a, false)?;
        // SAFETY: the caller's contract.
        unsafe {
            out(data_out, p.cast_const())?;
            out(size_out, n)
        }
    })
}

/// Maps the memory for reading and writing, exclusively across processes.
///
/// # Safety
///
/// As for [`fastio_allocation_map`]; the memory may be written until
/// `fastio_allocation_unmap`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_allocation_map_mut(
    alloc: *mut fastio_allocation,
    data_out: *mut *mut c_void,
    size_out: *mut usize,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(alloc)? };
        writable(data_out)?;
        writable(size_out)?;
        let (p, n) = map(a, true)?;
        // SAFETY: the caller's contract.
        unsafe {
            out(data_out, p)?;
            out(size_out, n)
        }
    })
}

/// Unmaps what a map call gave (`data` must be that address).
///
/// # Safety
///
/// `alloc` is live; no pointer into the mapping is used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_allocation_unmap(
    alloc: *mut fastio_allocation,
    data: *const c_void,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(alloc)? };
        match &a.mapped {
            Some(m) if m.data_address() == data as usize => {
                a.mapped = None;
                Ok(())
            }
            _ => Err(Failure::new(
                FASTIO_ERR_NOT_MAPPED,
                "not mapped at that address",
            )),
        }
    })
}

/// Drops this reference (and its mapping) and the handle. Null is ignored.
///
/// # Safety
///
/// `alloc` is null or live, and not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_allocation_release(alloc: *mut fastio_allocation) {
    // A `Drop` runs here: inside the guard.
    guard_value((), || {
        if !alloc.is_null() {
            // SAFETY: the caller's contract: ours, released once.
            drop(unsafe { Box::from_raw(alloc) });
        }
    })
}

/// Marks the memory for deletion (its names disappear; existing references
/// and mappings elsewhere stay valid), then drops this handle like
/// `fastio_allocation_release` (also on error).
///
/// # Safety
///
/// As for [`fastio_allocation_release`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_allocation_free(alloc: *mut fastio_allocation) -> result {
    guard(|| {
        if alloc.is_null() {
            return Err(Failure::invalid("null pointer"));
        }
        // SAFETY: the caller's contract: ours, released once.
        let mut a = unsafe { Box::from_raw(alloc) };
        a.mapped = None;
        match a.alloc.take() {
            Some(x) => Ok(x.free()?),
            None => Err(Failure::invalid("the allocation was freed")),
        }
    })
}
