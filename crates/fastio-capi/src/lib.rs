//! `fastio-capi`: fastio for C operators.
//!
//! * `include/clara_fastio.h`: Clara's Fast I/O entry functions, from
//!   seed 001, with the same names and signatures
//!   (`nvidia_clara_fastio_entry__*`, `result`,
//!   `nvidia_clara_element_type`), and `fastio_operator_*`, which gives a
//!   C operator its entries. A Clara C operator compiles against it
//!   unchanged once it has its entries.
//! * `include/fastio.h`: contexts and allocations (seed 002's API):
//!   opaque handles, `int` status codes (0 is success) named by
//!   `fastio_status_string`, and a thread-local last error copied into a
//!   caller's buffer by `fastio_last_error_message`; and streams between
//!   a program's own processes without a pipeline definition
//!   (`fastio_stream_*`: a producer, consumers, frames).
//!
//! Every export runs inside `catch_unwind`: a panic never crosses into C,
//! it becomes `FASTIO_ERR_PANIC`. The headers are generated with cbindgen
//! (`cargo xtask headers`) and committed; `cargo xtask ci` fails when they
//! are stale.

#![allow(non_camel_case_types)]

mod context;
mod entry;
mod frames;
mod ptr;
mod status;
mod stream;

pub use context::*;
pub use entry::*;
pub use frames::*;
pub use status::*;
pub use stream::*;
