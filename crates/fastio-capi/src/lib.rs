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
//! Every export runs inside `catch_unwind` (`guard`, or `guard_value` for
//! the few that return no status: the releases, whose `Drop` runs inside
//! it, and the status texts): a panic never crosses into C, it becomes
//! `FASTIO_ERR_PANIC` (or the export's fallback value) and the thread's
//! last error. A unit test reads this crate's source and holds every
//! export to it. The headers are generated with cbindgen
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

// Reads files: a check of the source, not of unsafe code (Miri's isolation
// has no file system; the plain test run has it).
#[cfg(all(test, not(miri)))]
mod every_export_is_guarded {
    /// The body of every `extern "C" fn` of this crate's source calls
    /// `guard(` or `guard_value(` before anything else can panic: its
    /// first statement.
    #[test]
    fn every_export_runs_inside_catch_unwind() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut exports = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let mut rest = text.as_str();
            while let Some(at) = rest.find("extern \"C\" fn ") {
                rest = &rest[at..];
                let name: String = rest["extern \"C\" fn ".len()..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                // The body starts after the signature's `{` at the end of a
                // line.
                let open = rest.find(" {\n").expect("a body");
                let body = rest[open + 3..].trim_start();
                // Comments and a flag set inside (`let mut ended = false;`,
                // which cannot panic) may come first.
                let first = body
                    .lines()
                    .map(str::trim_start)
                    .find(|l| {
                        let flag = l.starts_with("let mut ") && l.ends_with(" = false;");
                        !(l.starts_with("//") || flag)
                    })
                    .unwrap_or("");
                let first = first.strip_prefix("let code = ").unwrap_or(first);
                assert!(
                    first.starts_with("guard(") || first.starts_with("guard_value("),
                    "{}: {name} does not start inside the guard: {first:?}",
                    path.display()
                );
                exports += 1;
                rest = &rest[open..];
            }
        }
        assert!(exports > 40, "only {exports} exports found");
    }
}
