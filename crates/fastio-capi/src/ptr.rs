//! Checked conversions of the pointers C passes in.

use std::ffi::{CStr, c_char};

use crate::status::Failure;

/// `&mut *p`, or an error for null.
///
/// # Safety
///
/// `p` is null or points to a live, properly aligned `T` that nothing else
/// accesses for `'a`.
pub(crate) unsafe fn handle<'a, T>(p: *mut T) -> Result<&'a mut T, Failure> {
    // SAFETY: the caller's contract; null is rejected by `as_mut`.
    unsafe { p.as_mut() }.ok_or_else(|| Failure::invalid("null pointer"))
}

/// A NUL-terminated UTF-8 string, or an error.
///
/// # Safety
///
/// `p` is null or points to a NUL-terminated string that stays unchanged
/// for `'a`.
pub(crate) unsafe fn cstr<'a>(p: *const c_char) -> Result<&'a str, Failure> {
    if p.is_null() {
        return Err(Failure::invalid("null string"));
    }
    // SAFETY: non-null and NUL-terminated (the caller's contract).
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| Failure::invalid("the string is not UTF-8"))
}

/// An error for a null output pointer. Every function checks all of its
/// output pointers with this before it changes any state, so a call that
/// fails leaves its handles exactly as they were.
pub(crate) fn writable<T>(p: *mut T) -> Result<(), Failure> {
    if p.is_null() {
        return Err(Failure::invalid("null output pointer"));
    }
    Ok(())
}

/// Writes `v` through an output pointer, or an error for null.
///
/// # Safety
///
/// `p` is null or valid for a write of a `T`.
pub(crate) unsafe fn out<T>(p: *mut T, v: T) -> Result<(), Failure> {
    if p.is_null() {
        return Err(Failure::invalid("null output pointer"));
    }
    // SAFETY: non-null and writable (the caller's contract).
    unsafe { p.write(v) };
    Ok(())
}
