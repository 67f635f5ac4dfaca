//! Streams for C programs without a pipeline definition: one producer
//! and up to N consumers of a named stream on a context (the Rust
//! `fastio::stream` API).
//!
//! ```c
//! size_t max[2] = {480, 640};
//! fastio_stream_producer *p;
//! fastio_stream_create(ctx, "video", "uint8", max, 2, 4, 1, FASTIO_OVERFLOW_BLOCK, &p);
//! void *slot; size_t bytes;
//! fastio_stream_begin(p, max, 2, -1, &slot, &bytes);   /* zero copy */
//! /* write `bytes` bytes at `slot` */
//! fastio_stream_publish(p, NULL);
//! fastio_stream_end(p);
//!
//! fastio_stream_consumer *c;                           /* another process */
//! fastio_stream_consumer_attach(ctx, "video", 0, &c);
//! fastio_stream_frame *f;
//! while (fastio_stream_next(c, -1, &f) == FASTIO_OK) {
//!     const void *data; size_t n;
//!     fastio_stream_frame_bytes(f, &data, &n);          /* read-only */
//!     fastio_stream_frame_release(f);
//! }                                                     /* FASTIO_END_OF_STREAM */
//! ```
//!
//! A frame's bytes are mapped read-only and valid until its release; a
//! slot's bytes are writable until `fastio_stream_publish`. A consumer may
//! hold up to the stream's depth of frames under `block` (one under
//! `drop-oldest`); one more is `FASTIO_ERR_CONFLICT`, never a reused slot.
//! Timeouts are in milliseconds; negative waits as long as it takes.

use std::ffi::{c_char, c_void};
use std::time::Duration;

use dtype::Primitive;
use fastio::{Frame, Overflow, StreamConsumer, StreamOptions, StreamProducer};

use crate::context::fastio_context;
use crate::ptr::{cstr, handle, out, writable};
use crate::status::{Failure, copy_out, end_of_stream_or, guard, guard_value, result};

/// `overflow` of `fastio_stream_create`: a full stream makes the producer
/// wait (nothing is lost).
pub const FASTIO_OVERFLOW_BLOCK: i32 = 0;
/// `overflow` of `fastio_stream_create`: a full stream overwrites the
/// oldest frame no consumer holds (consumers see the gap in `seq`).
pub const FASTIO_OVERFLOW_DROP_OLDEST: i32 = 1;

/// The producer of a stream (opaque in C).
pub struct fastio_stream_producer {
    producer: StreamProducer,
}

/// A consumer of a stream (opaque in C).
pub struct fastio_stream_consumer {
    consumer: StreamConsumer,
}

/// One received frame (opaque in C), until `fastio_stream_frame_release`.
pub struct fastio_stream_frame {
    frame: Frame,
}

fn timeout(ms: i64) -> Option<Duration> {
    u64::try_from(ms).ok().map(Duration::from_millis)
}

/// `n` values at `p` (null when `n` is 0).
///
/// # Safety
///
/// `p` is null or points to `n` readable values.
unsafe fn slice<'a>(p: *const usize, n: usize, what: &str) -> Result<&'a [usize], Failure> {
    if n == 0 {
        Ok(&[])
    } else if p.is_null() {
        Err(Failure::invalid(format!("null {what}")))
    } else {
        // SAFETY: non-null with `n` readable values (the contract).
        Ok(unsafe { std::slice::from_raw_parts(p, n) })
    }
}

fn boxed<T>(v: T, p: *mut *mut T) -> Result<(), Failure> {
    let raw = Box::into_raw(Box::new(v));
    // SAFETY: the export's caller made `p` writable (checked first by every
    // export); on failure the box is reclaimed.
    unsafe { out(p, raw).inspect_err(|_| drop(Box::from_raw(raw))) }
}

/// Creates stream `name` on `ctx` — frames of `element` (a primitive
/// type name such as `float32`) of at most `max_shape` (`ndim` sizes),
/// `depth` frames in flight, `consumers` consumers, `overflow` one of
/// `FASTIO_OVERFLOW_*` — and returns its producer.
///
/// # Safety
///
/// `ctx` is live; `name` and `element` NUL-terminated; `max_shape` holds
/// `ndim` values; `producer_out` writable. Free the producer with
/// `fastio_stream_producer_free`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn fastio_stream_create(
    ctx: *mut fastio_context,
    name: *const c_char,
    element: *const c_char,
    max_shape: *const usize,
    ndim: usize,
    depth: usize,
    consumers: usize,
    overflow: i32,
    producer_out: *mut *mut fastio_stream_producer,
) -> result {
    guard(|| {
        writable(producer_out)?;
        // SAFETY: the caller's contract.
        let (c, name, element, max_shape) = unsafe {
            (
                handle(ctx)?,
                cstr(name)?,
                cstr(element)?,
                slice(max_shape, ndim, "max_shape")?,
            )
        };
        let element = Primitive::from_name(element).ok_or_else(|| {
            Failure::invalid(format!("element type {element:?} is not a primitive type"))
        })?;
        let overflow = match overflow {
            FASTIO_OVERFLOW_BLOCK => Overflow::Block,
            FASTIO_OVERFLOW_DROP_OLDEST => Overflow::DropOldest,
            other => {
                return Err(Failure::invalid(format!(
                    "overflow {other} (0 block, 1 drop-oldest)"
                )));
            }
        };
        let opts = StreamOptions::new(element, max_shape)
            .depth(depth)
            .consumers(consumers)
            .overflow(overflow);
        let producer = c.context().create_stream(name, &opts)?;
        boxed(fastio_stream_producer { producer }, producer_out)
    })
}

/// Takes over the producer of stream `name` (one whose producer is gone).
///
/// # Safety
///
/// As `fastio_stream_create`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_stream_producer_attach(
    ctx: *mut fastio_context,
    name: *const c_char,
    producer_out: *mut *mut fastio_stream_producer,
) -> result {
    guard(|| {
        writable(producer_out)?;
        // SAFETY: the caller's contract.
        let (c, name) = unsafe { (handle(ctx)?, cstr(name)?) };
        let producer = c.context().stream_producer(name)?;
        boxed(fastio_stream_producer { producer }, producer_out)
    })
}

/// Waits (up to `timeout_ms`) for the next free slot and gives its
/// writable bytes for a frame of `shape` (`ndim` sizes within the maximum).
///
/// # Safety
///
/// `p` is live; `shape` holds `ndim` values; the outputs are writable. The
/// bytes may be written until `fastio_stream_publish`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_stream_begin(
    p: *mut fastio_stream_producer,
    shape: *const usize,
    ndim: usize,
    timeout_ms: i64,
    data_out: *mut *mut c_void,
    size_out: *mut usize,
) -> result {
    guard(|| {
        writable(data_out)?;
        writable(size_out)?;
        // SAFETY: the caller's contract.
        let (p, shape) = unsafe { (handle(p)?, slice(shape, ndim, "shape")?) };
        let shape = shape.to_vec();
        // Refuse a shape beyond the largest before taking (or waiting
        // for) a slot: a failed call changes nothing.
        let max = p.producer.max_shape();
        if shape.len() != max.len() || shape.iter().zip(max).any(|(d, m)| d > m) {
            return Err(Failure::invalid(format!(
                "frame shape {shape:?} beyond the stream's largest {max:?}"
            )));
        }
        p.producer.begin(timeout(timeout_ms))?;
        p.producer.set_shape(&shape)?;
        let bytes = p.producer.bytes_mut()?;
        // SAFETY: both checked writable above.
        unsafe {
            out(data_out, bytes.as_mut_ptr().cast::<c_void>())?;
            out(size_out, bytes.len())
        }
    })
}

/// The stream's element type (a primitive type name such as `float32`),
/// NUL-terminated, into `buffer`; its length (without the NUL) into
/// `len_out`.
///
/// # Safety
///
/// `p` is live; `buffer` is null or has `buffer_size` writable bytes;
/// `len_out` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_stream_producer_element_type(
    p: *mut fastio_stream_producer,
    buffer: *mut c_char,
    buffer_size: usize,
    len_out: *mut usize,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { handle(p)? };
        // SAFETY: the caller's contract.
        unsafe { copy_out(p.producer.element().name(), buffer, buffer_size, len_out) }
    })
}

/// Publishes the begun frame; its number into `seq_out` (may be null).
///
/// # Safety
///
/// `p` is live; `seq_out` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_stream_publish(
    p: *mut fastio_stream_producer,
    seq_out: *mut u64,
) -> result {
    guard(|| {
        if !seq_out.is_null() {
            writable(seq_out)?;
        }
        // SAFETY: the caller's contract.
        let p = unsafe { handle(p)? };
        let seq = p.producer.next_seq();
        p.producer.publish()?;
        if !seq_out.is_null() {
            // SAFETY: non-null and writable (the contract).
            unsafe { out(seq_out, seq)? };
        }
        Ok(())
    })
}

/// Ends the stream: consumers get `FASTIO_END_OF_STREAM` after the last
/// frame.
///
/// # Safety
///
/// `p` is live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_stream_end(p: *mut fastio_stream_producer) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { handle(p)? };
        p.producer.end()?;
        Ok(())
    })
}

/// Marks the stream failed after the frames published so far: consumers
/// get `FASTIO_ERR_POISONED` after the last of them (a producer that
/// cannot go on).
///
/// # Safety
///
/// `p` is live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_stream_poison(p: *mut fastio_stream_producer) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { handle(p)? };
        p.producer.poison();
        Ok(())
    })
}

/// Frees a producer (null is a no-op). A stream neither ended nor
/// poisoned is ended, as closing a pipe does; a producer process that
/// dies instead poisons it (the stream's liveness check).
///
/// # Safety
///
/// `p` is null or live, and not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_stream_producer_free(p: *mut fastio_stream_producer) {
    // A `Drop` runs here: inside the guard.
    guard_value((), || {
        if !p.is_null() {
            // SAFETY: made by `Box::into_raw` here; not used afterwards.
            drop(unsafe { Box::from_raw(p) });
        }
    })
}

/// Attaches as consumer `index` (0 to consumers - 1) of stream `name`.
///
/// # Safety
///
/// `ctx` is live; `name` NUL-terminated; `consumer_out` writable. Free it
/// with `fastio_stream_consumer_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_stream_consumer_attach(
    ctx: *mut fastio_context,
    name: *const c_char,
    index: usize,
    consumer_out: *mut *mut fastio_stream_consumer,
) -> result {
    guard(|| {
        writable(consumer_out)?;
        // SAFETY: the caller's contract.
        let (c, name) = unsafe { (handle(ctx)?, cstr(name)?) };
        let consumer = c.context().stream_consumer(name, index)?;
        boxed(fastio_stream_consumer { consumer }, consumer_out)
    })
}

/// Waits (up to `timeout_ms`) for the next frame: `FASTIO_OK` and the
/// frame, `FASTIO_END_OF_STREAM` after the last one, `FASTIO_ERR_POISONED`
/// when the producer failed, `FASTIO_ERR_TIMEOUT`.
///
/// # Safety
///
/// `c` is live; `frame_out` writable. Release each frame with
/// `fastio_stream_frame_release`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_stream_next(
    c: *mut fastio_stream_consumer,
    timeout_ms: i64,
    frame_out: *mut *mut fastio_stream_frame,
) -> result {
    let mut ended = false;
    let code = guard(|| {
        writable(frame_out)?;
        // SAFETY: the caller's contract.
        let c = unsafe { handle(c)? };
        match c.consumer.next(timeout(timeout_ms))? {
            Some(frame) => boxed(fastio_stream_frame { frame }, frame_out),
            None => {
                ended = true;
                Ok(())
            }
        }
    });
    end_of_stream_or(code, ended)
}

/// Frames this consumer lost to `drop-oldest` so far.
///
/// # Safety
///
/// `c` is live; `dropped_out` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_stream_dropped(
    c: *mut fastio_stream_consumer,
    dropped_out: *mut u64,
) -> result {
    guard(|| {
        writable(dropped_out)?;
        // SAFETY: the caller's contract.
        let c = unsafe { handle(c)? };
        // SAFETY: checked writable above.
        unsafe { out(dropped_out, c.consumer.dropped()) }
    })
}

/// Frees a consumer (null is a no-op); its frames stay valid until
/// released.
///
/// # Safety
///
/// `c` is null or live, and not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_stream_consumer_free(c: *mut fastio_stream_consumer) {
    // A `Drop` runs here: inside the guard.
    guard_value((), || {
        if !c.is_null() {
            // SAFETY: made by `Box::into_raw` here; not used afterwards.
            drop(unsafe { Box::from_raw(c) });
        }
    })
}

/// A frame's read-only bytes and their count.
///
/// # Safety
///
/// `f` is live; the outputs writable. The bytes may be read until the
/// frame is released.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_stream_frame_bytes(
    f: *mut fastio_stream_frame,
    data_out: *mut *const c_void,
    size_out: *mut usize,
) -> result {
    guard(|| {
        writable(data_out)?;
        writable(size_out)?;
        // SAFETY: the caller's contract.
        let f = unsafe { handle(f)? };
        let bytes = f.frame.bytes();
        // SAFETY: both checked writable above.
        unsafe {
            out(data_out, bytes.as_ptr().cast::<c_void>())?;
            out(size_out, bytes.len())
        }
    })
}

/// A frame's element type (a primitive type name such as `float32`),
/// NUL-terminated, into `buffer`; its length (without the NUL) into
/// `len_out`.
///
/// # Safety
///
/// `f` is live; `buffer` is null or has `buffer_size` writable bytes;
/// `len_out` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_stream_frame_element_type(
    f: *mut fastio_stream_frame,
    buffer: *mut c_char,
    buffer_size: usize,
    len_out: *mut usize,
) -> result {
    guard(|| {
        // SAFETY: the caller's contract.
        let f = unsafe { handle(f)? };
        // SAFETY: the caller's contract.
        unsafe { copy_out(f.frame.element().name(), buffer, buffer_size, len_out) }
    })
}

/// A frame's shape (`*ndim_out` sizes, valid until its release).
///
/// # Safety
///
/// `f` is live; the outputs writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_stream_frame_shape(
    f: *mut fastio_stream_frame,
    shape_out: *mut *const usize,
    ndim_out: *mut usize,
) -> result {
    guard(|| {
        writable(shape_out)?;
        writable(ndim_out)?;
        // SAFETY: the caller's contract.
        let f = unsafe { handle(f)? };
        let shape = f.frame.shape();
        // SAFETY: both checked writable above.
        unsafe {
            out(shape_out, shape.as_ptr())?;
            out(ndim_out, shape.len())
        }
    })
}

/// A frame's number in this stream and its source timestamp (ns since
/// the Unix epoch); either output may be null.
///
/// # Safety
///
/// `f` is live; the outputs null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_stream_frame_seq(
    f: *mut fastio_stream_frame,
    seq_out: *mut u64,
    timestamp_ns_out: *mut u64,
) -> result {
    guard(|| {
        for p in [seq_out, timestamp_ns_out] {
            if !p.is_null() {
                writable(p)?;
            }
        }
        // SAFETY: the caller's contract.
        let f = unsafe { handle(f)? };
        if !seq_out.is_null() {
            // SAFETY: non-null and writable (checked above).
            unsafe { out(seq_out, f.frame.seq())? };
        }
        if !timestamp_ns_out.is_null() {
            // SAFETY: as above.
            unsafe { out(timestamp_ns_out, f.frame.timestamp_ns())? };
        }
        Ok(())
    })
}

/// Releases a frame (null is a no-op): its slot goes back to the producer
/// once every consumer released it.
///
/// # Safety
///
/// `f` is null or live, and neither it nor its bytes are used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_stream_frame_release(f: *mut fastio_stream_frame) {
    // A `Drop` runs here: inside the guard.
    guard_value((), || {
        if !f.is_null() {
            // SAFETY: made by `Box::into_raw` here; not used afterwards.
            drop(unsafe { Box::from_raw(f) });
        }
    })
}
