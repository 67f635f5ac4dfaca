//! Clara's Fast I/O entry functions (seed 001), with the same names and
//! signatures, on `fastio` entries; and `fastio_operator_*`, which gives a
//! C operator its entries.

use std::ffi::{c_char, c_int, c_void};

use dtype::{Primitive, TypeKind};
use fastio::{Access, Entry, Operator};
use ndobject::Array;

use crate::ptr::{cstr, handle, out, writable};
use crate::status::{FASTIO_ERR_NOT_MAPPED, Failure, copy_out, guard, guard_value, result};

/// A Clara element type (`nvidia_clara_element_type`).
#[allow(non_camel_case_types)]
pub type nvidia_clara_element_type = c_int;

/// Unknown or not a Clara primitive.
pub const NVIDIA_CLARA_ELEMENT_TYPE_UNKNOWN: nvidia_clara_element_type = 0;
/// `uint8` (also Clara's "byte").
pub const NVIDIA_CLARA_ELEMENT_TYPE_UINT8: nvidia_clara_element_type = 1;
/// `uint16`.
pub const NVIDIA_CLARA_ELEMENT_TYPE_UINT16: nvidia_clara_element_type = 2;
/// `uint32`.
pub const NVIDIA_CLARA_ELEMENT_TYPE_UINT32: nvidia_clara_element_type = 3;
/// `uint64`.
pub const NVIDIA_CLARA_ELEMENT_TYPE_UINT64: nvidia_clara_element_type = 4;
/// `int8`.
pub const NVIDIA_CLARA_ELEMENT_TYPE_INT8: nvidia_clara_element_type = 5;
/// `int16`.
pub const NVIDIA_CLARA_ELEMENT_TYPE_INT16: nvidia_clara_element_type = 6;
/// `int32`.
pub const NVIDIA_CLARA_ELEMENT_TYPE_INT32: nvidia_clara_element_type = 7;
/// `int64`.
pub const NVIDIA_CLARA_ELEMENT_TYPE_INT64: nvidia_clara_element_type = 8;
/// `float16`.
pub const NVIDIA_CLARA_ELEMENT_TYPE_FLOAT16: nvidia_clara_element_type = 9;
/// `float32`.
pub const NVIDIA_CLARA_ELEMENT_TYPE_FLOAT32: nvidia_clara_element_type = 10;
/// `float64`.
pub const NVIDIA_CLARA_ELEMENT_TYPE_FLOAT64: nvidia_clara_element_type = 11;
/// Clara's name for bytes: the same as `uint8`.
pub const NVIDIA_CLARA_ELEMENT_TYPE_BYTE: nvidia_clara_element_type = 1;

/// `IOAccess` read-only (inputs).
pub const NVIDIA_CLARA_IO_ACCESS_READ_ONLY: c_int = 1;
/// `IOAccess` read/write (outputs).
pub const NVIDIA_CLARA_IO_ACCESS_READ_WRITE: c_int = 2;

/// The C code of `p` (the one Clara table, `dtype::clara::ELEMENTS`).
fn clara_element(p: Primitive) -> nvidia_clara_element_type {
    dtype::clara::code(p)
}

/// A Fast I/O entry of the running operator (opaque in C). Owned by its
/// `fastio_operator`; valid until that is released.
pub struct nvidia_clara_fastio_entry {
    entry: Entry,
    /// What `__shape` and `__dynamic_indices` point into.
    shape: Vec<c_int>,
    dynamic: Vec<c_int>,
    /// The live mapping, if any.
    mapped: Option<Array>,
}

/// The operator a C process runs as, with its entries (opaque in C).
pub struct fastio_operator {
    name: String,
    /// The frame loop of a streaming job.
    pub(crate) steps: Option<fastio::Steps>,
    inputs: Vec<(String, Box<nvidia_clara_fastio_entry>)>,
    outputs: Vec<(String, Box<nvidia_clara_fastio_entry>)>,
}

fn wrap(list: Vec<(String, Entry)>) -> Vec<(String, Box<nvidia_clara_fastio_entry>)> {
    list.into_iter()
        .map(|(n, entry)| {
            (
                n,
                Box::new(nvidia_clara_fastio_entry {
                    entry,
                    shape: Vec::new(),
                    dynamic: Vec::new(),
                    mapped: None,
                }),
            )
        })
        .collect()
}

fn to_int(v: usize, what: &str) -> Result<c_int, Failure> {
    c_int::try_from(v).map_err(|_| Failure::invalid(format!("{what} {v} does not fit in an int")))
}

/// Attaches as the operator named in `FASTIO_OPERATOR`, to the context in
/// `FASTIO_CONTEXT`, and gives its entries.
///
/// # Safety
///
/// `op_out` is writable; on success it receives an operator to release
/// with `fastio_operator_release`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_operator_from_env(op_out: *mut *mut fastio_operator) -> result {
    guard(|| {
        writable(op_out)?;
        let mut op = Operator::from_env()?;
        let name = op.name().to_owned();
        let steps = if op.plan().0.streaming.is_some() {
            Some(op.frames()?)
        } else {
            None
        };
        let (_, inputs, outputs) = op.into_parts();
        let op = Box::new(fastio_operator {
            name,
            steps,
            inputs: wrap(inputs),
            outputs: wrap(outputs),
        });
        // SAFETY: the caller's contract.
        unsafe { out(op_out, Box::into_raw(op)) }
    })
}

/// Releases an operator and its entries (mappings still open are
/// unmapped). Null is ignored.
///
/// # Safety
///
/// `op` is null or came from `fastio_operator_from_env` and was not
/// released yet; no entry of it is used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_operator_release(op: *mut fastio_operator) {
    // A `Drop` runs here: inside the guard.
    guard_value((), || {
        if !op.is_null() {
            // SAFETY: the caller's contract: `op` is ours and released once.
            drop(unsafe { Box::from_raw(op) });
        }
    })
}

fn find<'a>(
    list: &'a mut [(String, Box<nvidia_clara_fastio_entry>)],
    name: &str,
) -> Result<&'a mut nvidia_clara_fastio_entry, Failure> {
    let i = fastio::lookup_entry(list, name, |(n, e)| (n, e.entry.name()))?;
    Ok(&mut *list[i].1)
}

/// The operator's name, NUL-terminated, into `buffer`.
///
/// # Safety
///
/// `op` is a live operator; `buffer` is null or has `buffer_size` writable
/// bytes; `len_out` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_operator_name(
    op: *mut fastio_operator,
    buffer: *mut c_char,
    buffer_size: usize,
    len_out: *mut usize,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let op = unsafe { handle(op)? };
        // SAFETY: the caller's contract.
        unsafe { copy_out(&op.name, buffer, buffer_size, len_out) }
    })
}

/// The input named `name` (its local name or `<operator>/<output>`).
///
/// # Safety
///
/// `op` is a live operator, `name` a NUL-terminated string, `entry_out`
/// writable. The entry stays valid until the operator is released.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_operator_input(
    op: *mut fastio_operator,
    name: *const c_char,
    entry_out: *mut *mut nvidia_clara_fastio_entry,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let (op, name) = unsafe { (handle(op)?, cstr(name)?) };
        writable(entry_out)?;
        let e: *mut nvidia_clara_fastio_entry = find(&mut op.inputs, name)?;
        // SAFETY: the caller's contract.
        unsafe { out(entry_out, e) }
    })
}

/// The output named `name`.
///
/// # Safety
///
/// As for [`fastio_operator_input`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_operator_output(
    op: *mut fastio_operator,
    name: *const c_char,
    entry_out: *mut *mut nvidia_clara_fastio_entry,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let (op, name) = unsafe { (handle(op)?, cstr(name)?) };
        writable(entry_out)?;
        let e: *mut nvidia_clara_fastio_entry = find(&mut op.outputs, name)?;
        // SAFETY: the caller's contract.
        unsafe { out(entry_out, e) }
    })
}

/// The entry's name, `<operator>/<output>`, NUL-terminated, into `buffer`
/// (`buffer_size` bytes); its length (without the NUL) into `len_out`.
///
/// # Safety
///
/// `entry` is live; `buffer` is null or has `buffer_size` writable bytes;
/// `len_out` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvidia_clara_fastio_entry__name(
    entry: *mut nvidia_clara_fastio_entry,
    buffer: *mut c_char,
    buffer_size: c_int,
    len_out: *mut usize,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { handle(entry)? };
        let size =
            usize::try_from(buffer_size).map_err(|_| Failure::invalid("negative buffer_size"))?;
        // SAFETY: the caller's contract.
        unsafe { copy_out(e.entry.name(), buffer, size, len_out) }
    })
}

/// The current shape: a pointer to `*length_out` ints (0 in a dynamic
/// dimension not set yet), valid until the next call that changes it.
///
/// # Safety
///
/// `entry` is live; `shape_out` and `length_out` are writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvidia_clara_fastio_entry__shape(
    entry: *mut nvidia_clara_fastio_entry,
    shape_out: *mut *mut c_int,
    length_out: *mut usize,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { handle(entry)? };
        writable(shape_out)?;
        writable(length_out)?;
        e.shape = e
            .entry
            .shape()
            .iter()
            .map(|&d| to_int(d, "dimension"))
            .collect::<Result<_, _>>()?;
        // SAFETY: the caller's contract.
        unsafe {
            out(shape_out, e.shape.as_mut_ptr())?;
            out(length_out, e.shape.len())
        }
    })
}

/// The element type.
///
/// # Safety
///
/// `entry` is live; `element_type_out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvidia_clara_fastio_entry__element_type(
    entry: *mut nvidia_clara_fastio_entry,
    element_type_out: *mut nvidia_clara_element_type,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { handle(entry)? };
        let t = match e.entry.element_type().kind() {
            TypeKind::Primitive(p) => clara_element(*p),
            _ => NVIDIA_CLARA_ELEMENT_TYPE_UNKNOWN,
        };
        // SAFETY: the caller's contract.
        unsafe { out(element_type_out, t) }
    })
}

/// The element type as datashape text (`float32`, `bool`, `string`,
/// ...), NUL-terminated, into `buffer`; its length (without the NUL) into
/// `len_out`. Ours: Clara's enum has no code for `bool`, `bfloat16` or
/// the complex types.
///
/// # Safety
///
/// `entry` is live; `buffer` is null or has `buffer_size` writable bytes;
/// `len_out` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_entry_element_type(
    entry: *mut nvidia_clara_fastio_entry,
    buffer: *mut c_char,
    buffer_size: usize,
    len_out: *mut usize,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { handle(entry)? };
        let text = match e.entry.element_type().kind() {
            TypeKind::Primitive(p) => p.name().to_owned(),
            _ => e.entry.element_type().to_string(),
        };
        // SAFETY: the caller's contract.
        unsafe { copy_out(&text, buffer, buffer_size, len_out) }
    })
}

/// Bytes the current shape needs (0 while it is not well-defined).
///
/// # Safety
///
/// `entry` is live; `size_bytes_out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvidia_clara_fastio_entry__size_bytes(
    entry: *mut nvidia_clara_fastio_entry,
    size_bytes_out: *mut usize,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { handle(entry)? };
        // SAFETY: the caller's contract.
        unsafe { out(size_bytes_out, e.entry.size_bytes()) }
    })
}

/// The dynamic dimensions: a pointer to `*dynamic_indices_length_out` ints,
/// valid while the entry lives.
///
/// # Safety
///
/// `entry` is live; both outputs are writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvidia_clara_fastio_entry__dynamic_indices(
    entry: *mut nvidia_clara_fastio_entry,
    dynamic_indices_out: *mut *mut c_int,
    dynamic_indices_length_out: *mut c_int,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { handle(entry)? };
        writable(dynamic_indices_out)?;
        writable(dynamic_indices_length_out)?;
        e.dynamic = e
            .entry
            .dynamic_indices()
            .into_iter()
            .map(|d| to_int(d, "index"))
            .collect::<Result<_, _>>()?;
        let len = to_int(e.dynamic.len(), "count")?;
        // SAFETY: the caller's contract.
        unsafe {
            out(dynamic_indices_out, e.dynamic.as_mut_ptr())?;
            out(dynamic_indices_length_out, len)
        }
    })
}

/// 1 when some dimension is dynamic (or it is a string), else 0.
///
/// # Safety
///
/// `entry` is live; `is_dynamic_out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvidia_clara_fastio_entry__is_dynamic(
    entry: *mut nvidia_clara_fastio_entry,
    is_dynamic_out: *mut c_int,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { handle(entry)? };
        // SAFETY: the caller's contract.
        unsafe { out(is_dynamic_out, c_int::from(e.entry.is_dynamic())) }
    })
}

/// Sets dynamic dimensions `dimensions_to_update[k]` to
/// `values_to_update[k]` for `k < *length`. As in Clara, non-dynamic
/// indices are ignored. Outputs only; does not allocate.
///
/// # Safety
///
/// `entry` is live; `length` points to a count `n >= 0`; the two arrays
/// hold `n` readable ints each (or are null when `n == 0`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvidia_clara_fastio_entry__update_shape(
    entry: *mut nvidia_clara_fastio_entry,
    dimensions_to_update: *mut c_int,
    values_to_update: *mut c_int,
    length: *mut c_int,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let (e, n) = unsafe { (handle(entry)?, *handle(length)?) };
        let n = usize::try_from(n).map_err(|_| Failure::invalid("negative length"))?;
        let (dims, values) = if n == 0 {
            (&[][..], &[][..])
        } else {
            if dimensions_to_update.is_null() || values_to_update.is_null() {
                return Err(Failure::invalid("null array"));
            }
            // SAFETY: non-null, `n` readable ints each (the caller's
            // contract).
            unsafe {
                (
                    std::slice::from_raw_parts(dimensions_to_update, n),
                    std::slice::from_raw_parts(values_to_update, n),
                )
            }
        };
        let as_usize = |v: &[c_int], what: &str| {
            v.iter()
                .map(|&x| {
                    usize::try_from(x).map_err(|_| Failure::invalid(format!("negative {what} {x}")))
                })
                .collect::<Result<Vec<usize>, _>>()
        };
        e.entry
            .update_shape(&as_usize(dims, "dimension")?, &as_usize(values, "value")?)?;
        Ok(())
    })
}

/// `NVIDIA_CLARA_IO_ACCESS_READ_ONLY` (1) for inputs,
/// `NVIDIA_CLARA_IO_ACCESS_READ_WRITE` (2) for outputs.
///
/// # Safety
///
/// `entry` is live; `access_out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvidia_clara_fastio_entry__access(
    entry: *mut nvidia_clara_fastio_entry,
    access_out: *mut c_int,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { handle(entry)? };
        let a = match e.entry.access() {
            Access::ReadOnly => NVIDIA_CLARA_IO_ACCESS_READ_ONLY,
            Access::ReadWrite => NVIDIA_CLARA_IO_ACCESS_READ_WRITE,
        };
        // SAFETY: the caller's contract.
        unsafe { out(access_out, a) }
    })
}

/// Allocates the output for its current shape (reallocating, and erasing,
/// an allocated one, as Clara). Fails while a dimension is not set.
///
/// # Safety
///
/// `entry` is live and not mapped.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvidia_clara_fastio_entry__allocate(
    entry: *mut nvidia_clara_fastio_entry,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { handle(entry)? };
        if e.mapped.is_some() {
            return Err(Failure::new(
                crate::status::FASTIO_ERR_CONFLICT,
                "unmap the entry before allocating it again",
            ));
        }
        e.entry.allocate()?;
        Ok(())
    })
}

/// 1 when an allocation exists (for an input: its producer allocated it).
///
/// # Safety
///
/// `entry` is live; `is_allocated_out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvidia_clara_fastio_entry__is_allocated(
    entry: *mut nvidia_clara_fastio_entry,
    is_allocated_out: *mut c_int,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { handle(entry)? };
        // SAFETY: the caller's contract.
        unsafe { out(is_allocated_out, c_int::from(e.entry.is_allocated())) }
    })
}

/// 1 when the driver allocated the entry before the operator started (its
/// shape and element type are well defined in the definition), for an
/// input as for its output; else 0. Not in seed 001's list: ours, after
/// seed 000's `is_preallocated`.
///
/// # Safety
///
/// `entry` is live; `is_preallocated_out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvidia_clara_fastio_entry__is_preallocated(
    entry: *mut nvidia_clara_fastio_entry,
    is_preallocated_out: *mut c_int,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { handle(entry)? };
        // SAFETY: the caller's contract.
        unsafe { out(is_preallocated_out, c_int::from(e.entry.is_preallocated())) }
    })
}

/// Maps the allocation: its address into `allocation_out` and its size in
/// bytes into `alloc_byte_size_out`. An input's memory is read-only (a
/// write faults); an output's is writable and exclusive. One mapping per
/// entry at a time.
///
/// Clara's signature gives the size as an `int`: an allocation of 2 GiB or
/// more is `FASTIO_ERR_TOO_LARGE`, nothing is mapped and neither output is
/// written (never a truncated size).
/// `nvidia_clara_fastio_entry__map_allocation64` takes a `size_t`.
///
/// # Safety
///
/// `entry` is live; both outputs are writable. The memory may be used
/// until `__unmap_allocation` (or the operator's release).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvidia_clara_fastio_entry__map_allocation(
    entry: *mut nvidia_clara_fastio_entry,
    allocation_out: *mut *mut c_void,
    alloc_byte_size_out: *mut c_int,
) -> result {
    guard(|| {
        writable(alloc_byte_size_out)?;
        // SAFETY: the caller's contract.
        let (addr, bytes) = unsafe {
            map_entry(entry, allocation_out, |bytes| {
                c_int::try_from(bytes).map_err(|_| {
                    Failure::new(
                        crate::status::FASTIO_ERR_TOO_LARGE,
                        format!(
                            "the allocation has {bytes} bytes, more than an int holds: use nvidia_clara_fastio_entry__map_allocation64"
                        ),
                    )
                })
            })?
        };
        // SAFETY: the caller's contract.
        unsafe {
            out(allocation_out, addr)?;
            out(alloc_byte_size_out, bytes)
        }
    })
}

/// As `nvidia_clara_fastio_entry__map_allocation`, with the size as a
/// `size_t`: for allocations of any size (2 GiB and more).
///
/// # Safety
///
/// `entry` is live; both outputs are writable. The memory may be used
/// until `__unmap_allocation` (or the operator's release).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvidia_clara_fastio_entry__map_allocation64(
    entry: *mut nvidia_clara_fastio_entry,
    allocation_out: *mut *mut c_void,
    alloc_byte_size_out: *mut usize,
) -> result {
    guard(|| {
        writable(alloc_byte_size_out)?;
        // SAFETY: the caller's contract.
        let (addr, bytes) = unsafe { map_entry(entry, allocation_out, Ok)? };
        // SAFETY: the caller's contract.
        unsafe {
            out(allocation_out, addr)?;
            out(alloc_byte_size_out, bytes)
        }
    })
}

/// Maps `entry` (read-only for an input, writable for an output) and
/// records the mapping once `size` accepted its byte count: every check
/// comes before, so a refusal leaves the entry as it was.
///
/// # Safety
///
/// `entry` is live; `allocation_out` is writable.
unsafe fn map_entry<T>(
    entry: *mut nvidia_clara_fastio_entry,
    allocation_out: *mut *mut c_void,
    size: impl FnOnce(usize) -> Result<T, Failure>,
) -> Result<(*mut c_void, T), Failure> {
    // SAFETY: the caller's contract.
    let e = unsafe { handle(entry)? };
    writable(allocation_out)?;
    if e.mapped.is_some() {
        return Err(Failure::new(
            crate::status::FASTIO_ERR_CONFLICT,
            "the entry is already mapped",
        ));
    }
    let array = match e.entry.access() {
        Access::ReadOnly => e.entry.map_as_ndobject()?,
        Access::ReadWrite => e.entry.map_as_ndobject_mut()?,
    };
    let elem = array.element_type().data_size().unwrap_or(1);
    let bytes = size(array.len() * elem)?;
    let addr = array.data_address() as *mut c_void;
    // Recorded last: every check above left the entry as it was.
    e.mapped = Some(array);
    Ok((addr, bytes))
}

/// Unmaps what `__map_allocation` gave (`allocation` must be that address).
///
/// # Safety
///
/// `entry` is live; no pointer into the mapping is used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvidia_clara_fastio_entry__unmap_allocation(
    entry: *mut nvidia_clara_fastio_entry,
    allocation: *mut c_void,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { handle(entry)? };
        match &e.mapped {
            Some(a) if a.data_address() == allocation as usize => {
                e.mapped = None;
                Ok(())
            }
            _ => Err(Failure::new(
                FASTIO_ERR_NOT_MAPPED,
                "not the address this entry's mapping gave",
            )),
        }
    })
}

#[cfg(test)]
mod clara_codes {
    use super::*;

    /// The header's constants are the codes of the one Clara table.
    #[test]
    fn header_constants_are_the_dtype_table() {
        let constants = [
            (Primitive::UInt8, NVIDIA_CLARA_ELEMENT_TYPE_UINT8),
            (Primitive::UInt16, NVIDIA_CLARA_ELEMENT_TYPE_UINT16),
            (Primitive::UInt32, NVIDIA_CLARA_ELEMENT_TYPE_UINT32),
            (Primitive::UInt64, NVIDIA_CLARA_ELEMENT_TYPE_UINT64),
            (Primitive::Int8, NVIDIA_CLARA_ELEMENT_TYPE_INT8),
            (Primitive::Int16, NVIDIA_CLARA_ELEMENT_TYPE_INT16),
            (Primitive::Int32, NVIDIA_CLARA_ELEMENT_TYPE_INT32),
            (Primitive::Int64, NVIDIA_CLARA_ELEMENT_TYPE_INT64),
            (Primitive::Float16, NVIDIA_CLARA_ELEMENT_TYPE_FLOAT16),
            (Primitive::Float32, NVIDIA_CLARA_ELEMENT_TYPE_FLOAT32),
            (Primitive::Float64, NVIDIA_CLARA_ELEMENT_TYPE_FLOAT64),
        ];
        assert_eq!(constants.len(), dtype::clara::ELEMENTS.len());
        for (p, c) in constants {
            assert_eq!(clara_element(p), c, "{p:?}");
        }
        assert_eq!(
            clara_element(Primitive::Bool),
            NVIDIA_CLARA_ELEMENT_TYPE_UNKNOWN
        );
        assert_eq!(
            NVIDIA_CLARA_ELEMENT_TYPE_BYTE,
            NVIDIA_CLARA_ELEMENT_TYPE_UINT8
        );
    }
}
