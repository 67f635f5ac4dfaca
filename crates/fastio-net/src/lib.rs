//! `fastio-net`: one pipeline over several hosts, zero copies on each,
//! Eclipse Zenoh between them.
//!
//! Within a host nothing changes: one context, zero copies, read-only
//! inputs. Between hosts, every entry whose producer and consumer are
//! placed on different hosts (`placement:` in the definition, see
//! [`fastio_pipeline::Placement`]) crosses once: when its producer
//! succeeds, the producing host's driver sends its bytes, type and shape
//! on a Zenoh key of the run; each consuming host's driver copies them
//! into a fresh allocation of its local context and publishes it under
//! the same entry name. Operators cannot tell a remote input from a local
//! one. In a streaming pipeline each frame of a stream that crosses goes
//! once to each consuming host, lent to Zenoh from its slot, and is placed
//! in that host's stream; credit of the stream's depth carries
//! back-pressure over the link (`streams.rs`).
//!
//! Every host runs the same definition with `fastio run FILE --host NAME`
//! ([`ZenohLink`] is the [`fastio_pipeline::HostLink`] its driver uses).
//! Hosts find each other through Zenoh (peer mode with endpoints, or a
//! router); a run starts when every host has joined. Zenoh liveliness
//! tokens tell each host when another host's driver is gone: the run then
//! fails on every host with a message naming the host and the operator.
//!
//! Between hosts the link is plain TCP or mutual TLS ([`Transport`]):
//! over TLS each host proves its name with a certificate of the run's CA,
//! and Zenoh's access control, made from the placement, lets a peer speak
//! only as the host its certificate names ([`access_control`]).
//!
//! [`wire`] is the format of what crosses (documented for readers without
//! fastio, such as a plain Zenoh subscriber in Python).

// `unsafe` only in `link::sockets` (two socket options).
#![deny(unsafe_code)]

#[cfg(feature = "zenoh")]
mod error;
#[cfg(feature = "zenoh")]
mod link;
#[cfg(feature = "zenoh")]
mod streams;
pub mod wire;

#[cfg(feature = "zenoh")]
pub use error::NetError;
#[cfg(feature = "zenoh")]
pub use link::{
    CertificateSummary, NetOptions, Refusals, TlsFiles, Transport, ZENOH_RUNTIME_VAR, ZenohLink,
    access_control, exec_with_zenoh_runtime, read_certificate, refusals, run_prefix, valid_run_id,
    watch_refusals, zenoh_runtime_for,
};
