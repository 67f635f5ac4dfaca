//! Status codes, the thread-local last error, and the guard every export
//! runs in: a Rust error becomes a status code plus a message, and a panic
//! never crosses into C.

use std::cell::RefCell;
use std::ffi::{c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// A status code: 0 is success (Clara's `result`).
#[allow(non_camel_case_types)]
pub type result = c_int;

/// Success.
pub const FASTIO_OK: result = 0;
/// A null pointer, a bad length, text that is not UTF-8.
pub const FASTIO_ERR_INVALID_ARGUMENT: result = 1;
/// No such name, entry or operator.
pub const FASTIO_ERR_NOT_FOUND: result = 2;
/// An input written to, or an operation its access does not allow.
pub const FASTIO_ERR_ACCESS: result = 3;
/// The shape is not well-defined yet (a dynamic dimension is 0).
pub const FASTIO_ERR_SHAPE: result = 4;
/// An input its producer never allocated.
pub const FASTIO_ERR_NOT_ALLOCATED: result = 5;
/// An input whose producer failed.
pub const FASTIO_ERR_POISONED: result = 6;
/// Mapped elsewhere in a conflicting way (a writer excludes everyone).
pub const FASTIO_ERR_CONFLICT: result = 7;
/// A capacity of the context is exhausted.
pub const FASTIO_ERR_CAPACITY: result = 8;
/// A caller's buffer is too small (the needed length is reported).
pub const FASTIO_ERR_BUFFER_TOO_SMALL: result = 9;
/// Not mapped (unmap without map, or another pointer).
pub const FASTIO_ERR_NOT_MAPPED: result = 10;
/// No context to attach to (`FASTIO_CONTEXT` / `FASTIO_OPERATOR` unset).
pub const FASTIO_ERR_NO_CONTEXT: result = 11;
/// A waited-for name was not published in time.
pub const FASTIO_ERR_TIMEOUT: result = 12;
/// Any other failure (system call, corrupt context, ...).
pub const FASTIO_ERR_OTHER: result = 13;
/// A bug: the library panicked (caught at the boundary).
pub const FASTIO_ERR_PANIC: result = 14;
/// Not an error: the stream ended (`fastio_operator_next_frame`).
pub const FASTIO_END_OF_STREAM: result = 15;
/// Shared memory is full: `/dev/shm` had no room for memory that must be
/// backed now (the message says how much was asked and how much is free).
pub const FASTIO_ERR_NO_SPACE: result = 16;
/// A size does not fit the `int` of Clara's signature (2 GiB or more): the
/// call changed nothing; `nvidia_clara_fastio_entry__map_allocation64`
/// gives the size as a `size_t`.
pub const FASTIO_ERR_TOO_LARGE: result = 17;

/// The status of a call that waits for a frame: `code`, or
/// `FASTIO_END_OF_STREAM` when it succeeded because the stream `ended`.
pub(crate) fn end_of_stream_or(code: result, ended: bool) -> result {
    if code == FASTIO_OK && ended {
        FASTIO_END_OF_STREAM
    } else {
        code
    }
}

/// A failure inside an export: its code and message.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: result,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(code: result, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Failure {
        Failure::new(FASTIO_ERR_INVALID_ARGUMENT, message)
    }
}

impl From<fastio::Error> for Failure {
    fn from(e: fastio::Error) -> Failure {
        use fastio::Error as E;
        let code = match &e {
            E::UnknownName(_) | E::UnknownEntry(_) => FASTIO_ERR_NOT_FOUND,
            E::EntryAccess { .. } => FASTIO_ERR_ACCESS,
            E::ShapeNotDefined { .. } => FASTIO_ERR_SHAPE,
            E::NotAllocated { .. } => FASTIO_ERR_NOT_ALLOCATED,
            E::Poisoned { .. } | E::StreamPoisoned { .. } => FASTIO_ERR_POISONED,
            E::StreamTimeout { .. } => FASTIO_ERR_TIMEOUT,
            E::FrameHeld(_) | E::StreamBusy { .. } => FASTIO_ERR_CONFLICT,
            E::StreamConfig { .. } | E::AmbiguousEntry { .. } => FASTIO_ERR_INVALID_ARGUMENT,
            E::MapConflict(_) => FASTIO_ERR_CONFLICT,
            e if e.is_no_space() => FASTIO_ERR_NO_SPACE,
            E::CapacityExceeded { .. } => FASTIO_ERR_CAPACITY,
            E::NoContext(_) => FASTIO_ERR_NO_CONTEXT,
            E::WaitTimeout(_) => FASTIO_ERR_TIMEOUT,
            E::InvalidName { .. } | E::SizeMismatch { .. } | E::Unsupported(_) => {
                FASTIO_ERR_INVALID_ARGUMENT
            }
            _ => FASTIO_ERR_OTHER,
        };
        Failure::new(code, e.to_string())
    }
}

impl From<ndobject::Error> for Failure {
    fn from(e: ndobject::Error) -> Failure {
        Failure::new(FASTIO_ERR_OTHER, e.to_string())
    }
}

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Runs `f`, turning an error or a panic into a status code and the
/// thread's last error message.
pub(crate) fn guard(f: impl FnOnce() -> Result<(), Failure>) -> result {
    let outcome = catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|panic| Err(Failure::new(FASTIO_ERR_PANIC, panic_message(&*panic))));
    match outcome {
        Ok(()) => {
            LAST_ERROR.with(|l| l.borrow_mut().clear());
            FASTIO_OK
        }
        Err(f) => {
            LAST_ERROR.with(|l| *l.borrow_mut() = f.message);
            f.code
        }
    }
}

/// What a caught panic said.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned());
    format!("internal error: {what}")
}

/// Runs an export that gives a value and no status (a release, whose
/// `Drop` may run any code; a status string) inside `catch_unwind`: a
/// panic becomes `fallback` and the thread's last error, never an unwind
/// into C.
pub(crate) fn guard_value<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let message = panic_message(&*panic);
        let _ = LAST_ERROR.try_with(|l| {
            if let Ok(mut l) = l.try_borrow_mut() {
                *l = message;
            }
        });
        fallback
    })
}

/// The name of a status code, as a static NUL-terminated string.
#[unsafe(no_mangle)]
pub extern "C" fn fastio_status_string(code: result) -> *const c_char {
    guard_value(c"internal error".as_ptr(), || status_text(code))
}

fn status_text(code: result) -> *const c_char {
    let s: &'static [u8] = match code {
        FASTIO_OK => b"ok\0",
        FASTIO_ERR_INVALID_ARGUMENT => b"invalid argument\0",
        FASTIO_ERR_NOT_FOUND => b"not found\0",
        FASTIO_ERR_ACCESS => b"access denied (inputs are read-only)\0",
        FASTIO_ERR_SHAPE => b"shape not well-defined\0",
        FASTIO_ERR_NOT_ALLOCATED => b"input never allocated by its producer\0",
        FASTIO_ERR_POISONED => b"input poisoned: its producer failed\0",
        FASTIO_ERR_CONFLICT => b"mapping conflict\0",
        FASTIO_ERR_CAPACITY => b"context capacity exceeded\0",
        FASTIO_ERR_BUFFER_TOO_SMALL => b"buffer too small\0",
        FASTIO_ERR_NOT_MAPPED => b"not mapped\0",
        FASTIO_ERR_NO_CONTEXT => b"no context in the environment\0",
        FASTIO_ERR_TIMEOUT => b"timed out\0",
        FASTIO_ERR_OTHER => b"error\0",
        FASTIO_ERR_PANIC => b"internal error\0",
        FASTIO_END_OF_STREAM => b"end of stream\0",
        FASTIO_ERR_NO_SPACE => b"shared memory (/dev/shm) is full\0",
        FASTIO_ERR_TOO_LARGE => b"size too large for an int (use the 64-bit call)\0",
        _ => b"unknown status code\0",
    };
    s.as_ptr().cast()
}

/// Copies the calling thread's last error message (empty after a success)
/// into `buffer` (`buffer_size` bytes, NUL-terminated, truncated to fit)
/// and returns the message's full length in bytes (without the NUL).
///
/// # Safety
///
/// `buffer` is null (nothing is copied) or valid for `buffer_size` bytes
/// of writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fastio_last_error_message(
    buffer: *mut c_char,
    buffer_size: usize,
) -> usize {
    guard_value(0, || {
        // SAFETY: the caller's contract, passed on.
        unsafe { last_error_into(buffer, buffer_size) }
    })
}

/// [`fastio_last_error_message`]'s work.
///
/// # Safety
///
/// As for [`fastio_last_error_message`].
unsafe fn last_error_into(buffer: *mut c_char, buffer_size: usize) -> usize {
    LAST_ERROR.with(|l| {
        let msg = l.borrow();
        if !buffer.is_null() && buffer_size > 0 {
            let n = msg.len().min(buffer_size - 1);
            // SAFETY: the caller guarantees `buffer_size` writable bytes;
            // we write `n + 1 <= buffer_size` of them.
            unsafe {
                std::ptr::copy_nonoverlapping(msg.as_ptr(), buffer.cast::<u8>(), n);
                *buffer.add(n) = 0;
            }
        }
        msg.len()
    })
}

/// Writes `text` into a caller's buffer as C expects (NUL-terminated),
/// reporting its length; `FASTIO_ERR_BUFFER_TOO_SMALL` when it does not fit.
///
/// # Safety
///
/// As for [`fastio_last_error_message`]; `len_out` is null or writable.
pub(crate) unsafe fn copy_out(
    text: &str,
    buffer: *mut c_char,
    buffer_size: usize,
    len_out: *mut usize,
) -> Result<(), Failure> {
    if !len_out.is_null() {
        // SAFETY: non-null and writable (the caller's contract).
        unsafe { *len_out = text.len() };
    }
    if buffer.is_null() || buffer_size <= text.len() {
        return Err(Failure::new(
            FASTIO_ERR_BUFFER_TOO_SMALL,
            format!(
                "{} bytes needed (with the NUL), {buffer_size} given",
                text.len() + 1
            ),
        ));
    }
    // SAFETY: `buffer_size > text.len()` writable bytes (the caller's
    // contract); we write `text.len() + 1`.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buffer.cast::<u8>(), text.len());
        *buffer.add(text.len()) = 0;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last_error() -> String {
        let mut buf = [0 as c_char; 64];
        // SAFETY: a writable buffer of the given size.
        let n = unsafe { fastio_last_error_message(buf.as_mut_ptr(), buf.len()) };
        // SAFETY: the function NUL-terminated the buffer.
        let s = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
        assert_eq!(n, s.to_bytes().len().max(n));
        s.to_string_lossy().into_owned()
    }

    #[test]
    fn errors_and_panics_become_codes_and_messages() {
        assert_eq!(guard(|| Ok(())), FASTIO_OK);
        assert_eq!(last_error(), "");
        assert_eq!(
            guard(|| Err(Failure::invalid("bad thing"))),
            FASTIO_ERR_INVALID_ARGUMENT
        );
        assert_eq!(last_error(), "bad thing");
        let code = guard(|| panic!("boom"));
        assert_eq!(code, FASTIO_ERR_PANIC);
        assert_eq!(last_error(), "internal error: boom");
        // A small buffer gets a truncated, NUL-terminated prefix; the full
        // length is returned.
        let mut small = [1 as c_char; 4];
        // SAFETY: a writable buffer of the given size.
        let n = unsafe { fastio_last_error_message(small.as_mut_ptr(), small.len()) };
        assert_eq!((n, small[3]), ("internal error: boom".len(), 0));
        // SAFETY: null buffers copy nothing.
        let full = unsafe { fastio_last_error_message(std::ptr::null_mut(), 0) };
        assert_eq!(full, n);
    }

    #[test]
    fn copy_out_reports_lengths_and_small_buffers() {
        let mut buf = [0 as c_char; 8];
        let mut len = 0usize;
        // SAFETY: valid buffer and length pointer.
        unsafe { copy_out("abc", buf.as_mut_ptr(), buf.len(), &mut len) }.unwrap();
        assert_eq!((len, buf[3]), (3, 0));
        // SAFETY: as above.
        let e = unsafe { copy_out("abcdefgh", buf.as_mut_ptr(), buf.len(), &mut len) }.unwrap_err();
        assert_eq!((e.code, len), (FASTIO_ERR_BUFFER_TOO_SMALL, 8));
        // SAFETY: the returned pointer is a static NUL-terminated string.
        let s = unsafe { std::ffi::CStr::from_ptr(fastio_status_string(FASTIO_ERR_SHAPE)) };
        assert_eq!(s.to_str().unwrap(), "shape not well-defined");
    }
}
