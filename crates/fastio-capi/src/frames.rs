//! A streaming C operator's frame loop:
//!
//! ```c
//! fastio_frame *f;
//! while (fastio_operator_next_frame(op, &f) == FASTIO_OK) {
//!     const void *in; size_t in_bytes; const size_t *shape; size_t ndim;
//!     fastio_frame_input(f, "image", &in, &in_bytes, &shape, &ndim);
//!     void *out; size_t out_bytes;
//!     fastio_frame_output(f, "mask", shape, ndim, &out, &out_bytes);
//!     /* ... */
//!     fastio_frame_done(f);          /* publishes the outputs */
//! }
//! ```
//!
//! `fastio_operator_next_frame` gives `FASTIO_END_OF_STREAM` after the
//! last frame, `FASTIO_ERR_POISONED` when an input failed. An input's
//! bytes are read-only (`PROT_READ`) and valid until `fastio_frame_done`;
//! an output's bytes are writable until then. One frame at a time.

use std::ffi::{c_char, c_void};

use fastio::Step;

use crate::entry::fastio_operator;
use crate::ptr::{cstr, handle, out, writable};
use crate::status::{Failure, copy_out, end_of_stream_or, guard, result};

/// One frame of a streaming operator (opaque in C): from
/// `fastio_operator_next_frame` until `fastio_frame_done`.
pub struct fastio_frame {
    step: Step,
    /// Where `fastio_frame_input` put the last input's shape.
    shape: Vec<usize>,
}

/// The next frame of every input (and a slot of every output), waiting as
/// long as it takes; `FASTIO_END_OF_STREAM` after the last one. The
/// previous frame must be done.
///
/// # Safety
///
/// `op` is a live operator; `frame_out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_operator_next_frame(
    op: *mut fastio_operator,
    frame_out: *mut *mut fastio_frame,
) -> result {
    let mut ended = false;
    let code = guard(|| {
        // SAFETY: the caller's contract.
        let op = unsafe { handle(op)? };
        writable(frame_out)?;
        let steps = op
            .steps
            .as_mut()
            .ok_or_else(|| Failure::invalid("the job does not stream (no `streaming:` section)"))?;
        match steps.next() {
            Some(Ok(step)) => {
                let f = Box::into_raw(Box::new(fastio_frame {
                    step,
                    shape: Vec::new(),
                }));
                // SAFETY: checked writable above.
                unsafe { out(frame_out, f) }
            }
            Some(Err(e)) => Err(e.into()),
            None => {
                ended = true;
                Ok(())
            }
        }
    });
    end_of_stream_or(code, ended)
}

/// The source frame's number and timestamp (ns since the Unix epoch);
/// either output may be null.
///
/// # Safety
///
/// `frame` is live; the outputs are null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_frame_seq(
    frame: *mut fastio_frame,
    seq_out: *mut u64,
    timestamp_ns_out: *mut u64,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let f = unsafe { handle(frame)? };
        if !seq_out.is_null() {
            // SAFETY: non-null and writable (the contract).
            unsafe { out(seq_out, f.step.seq())? };
        }
        if !timestamp_ns_out.is_null() {
            // SAFETY: as above.
            unsafe { out(timestamp_ns_out, f.step.timestamp_ns())? };
        }
        Ok(())
    })
}

/// Input `name`'s frame: its read-only bytes and their count, and its
/// shape (`*ndim_out` sizes, valid until the next call on this frame).
///
/// # Safety
///
/// `frame` is live, `name` NUL-terminated, every output writable. The
/// bytes may be read until `fastio_frame_done`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_frame_input(
    frame: *mut fastio_frame,
    name: *const c_char,
    data_out: *mut *const c_void,
    size_out: *mut usize,
    shape_out: *mut *const usize,
    ndim_out: *mut usize,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let (f, name) = unsafe { (handle(frame)?, cstr(name)?) };
        writable(data_out)?;
        writable(size_out)?;
        writable(shape_out)?;
        writable(ndim_out)?;
        let input = f.step.input(name)?;
        let bytes = input.bytes();
        f.shape = input.shape().to_vec();
        // SAFETY: all four checked writable above.
        unsafe {
            out(data_out, bytes.as_ptr().cast::<c_void>())?;
            out(size_out, bytes.len())?;
            out(shape_out, f.shape.as_ptr())?;
            out(ndim_out, f.shape.len())
        }
    })
}

/// The element type (a primitive type name such as `float32`) of input
/// or output `name` of this frame, NUL-terminated, into `buffer`; its
/// length (without the NUL) into `len_out`. Takes no output slot.
///
/// # Safety
///
/// `frame` is live, `name` NUL-terminated; `buffer` is null or has
/// `buffer_size` writable bytes; `len_out` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_frame_element_type(
    frame: *mut fastio_frame,
    name: *const c_char,
    buffer: *mut c_char,
    buffer_size: usize,
    len_out: *mut usize,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let (f, name) = unsafe { (handle(frame)?, cstr(name)?) };
        let element = match f.step.input(name) {
            Ok(input) => input.element(),
            Err(fastio::Error::UnknownEntry(_)) => f.step.output_element(name)?,
            Err(e) => return Err(e.into()),
        };
        // SAFETY: the caller's contract.
        unsafe { copy_out(element.name(), buffer, buffer_size, len_out) }
    })
}

/// Output `name`'s slot for this frame, as a frame of `shape` (`ndim`
/// sizes; null and 0 for the largest shape): its writable bytes and their
/// count. Waits for a free slot the first time (back-pressure).
///
/// # Safety
///
/// `frame` is live, `name` NUL-terminated, `shape` null or `ndim`
/// readable sizes, both outputs writable. The bytes may be written until
/// `fastio_frame_done`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_frame_output(
    frame: *mut fastio_frame,
    name: *const c_char,
    shape: *const usize,
    ndim: usize,
    data_out: *mut *mut c_void,
    size_out: *mut usize,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let (f, name) = unsafe { (handle(frame)?, cstr(name)?) };
        writable(data_out)?;
        writable(size_out)?;
        let dims = if ndim == 0 {
            None
        } else if shape.is_null() {
            return Err(Failure::invalid("null shape"));
        } else {
            // SAFETY: non-null, `ndim` readable sizes (the contract).
            Some(unsafe { std::slice::from_raw_parts(shape, ndim) }.to_vec())
        };
        let mut slot = f.step.output(name)?;
        if let Some(d) = dims {
            slot.set_shape(&d)?;
        }
        let bytes = slot.bytes_mut()?;
        let (p, n) = (bytes.as_mut_ptr().cast::<c_void>(), bytes.len());
        drop(slot);
        // SAFETY: both checked writable above.
        unsafe {
            out(data_out, p)?;
            out(size_out, n)
        }
    })
}

/// Publishes the frame's outputs and releases its inputs; the handle is
/// gone afterwards. Null is an error.
///
/// # Safety
///
/// `frame` came from `fastio_operator_next_frame` and is not used
/// afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_frame_done(frame: *mut fastio_frame) -> result {
    guard(|| {
        if frame.is_null() {
            return Err(Failure::invalid("null frame"));
        }
        // SAFETY: the caller's contract: ours, done once.
        drop(unsafe { Box::from_raw(frame) });
        Ok(())
    })
}

/// Releases the frame's inputs without publishing its outputs (a frame
/// given up half-written, as when a C++ operator's exception unwinds
/// through it); the handle is gone afterwards. Null is an error.
///
/// # Safety
///
/// `frame` came from `fastio_operator_next_frame` and is not used
/// afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_frame_abandon(frame: *mut fastio_frame) -> result {
    guard(|| {
        if frame.is_null() {
            return Err(Failure::invalid("null frame"));
        }
        // SAFETY: the caller's contract: ours, given up once.
        unsafe { Box::from_raw(frame) }.step.abandon();
        Ok(())
    })
}
