//! [`ZenohLink`]: the [`HostLink`] of one host, over Eclipse Zenoh.
//!
//! Key expressions of a run (`<run>` is `fastio/<pipeline>/<run id>`):
//!
//! | key | what |
//! |---|---|
//! | `<run>/host/<host>` | liveliness token of each host's driver |
//! | `<run>/status/<host>` | the host's [`Status`] lines |
//! | `<run>/entry/<from>/<to>` | the pieces of the entries host `from` sends host `to` ([`ChunkHeader`] names the entry) |
//! | `<run>/stream/<operator>/<output>/<host>` | the frames of a stream for one consuming host ([`StreamMsg`], `streams.rs`) |
//! | `<run>/credit/<operator>/<output>/<host>` | the limit that host grants: frames numbered below it may be sent (`wire::encode_credit`) |
//!
//! Joining: a host declares its publishers, then its subscribers, then its
//! liveliness subscribers, and last its own host token. It goes on when
//! it has seen every host's token and each of its publishers has a
//! subscriber of another host (Zenoh does not order a peer's declarations
//! of different kinds, so a token seen does not mean its subscribers are
//! known): no piece is sent before its reader exists. Last the hosts say
//! the batch of their links (`batch` status lines, said again until every
//! host's is heard) and the run starts.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, unbounded};
use fastio::Context;
use fastio::plan::EntryKind;
use fastio_pipeline::{Ended, Failure, HostLink, LinkEvent, Lost, Pipeline, RootCause};
use zenoh::Wait;
use zenoh::bytes::ZBytes;
use zenoh::liveliness::LivelinessToken;
use zenoh::pubsub::{Publisher, Subscriber};
use zenoh::qos::CongestionControl;
use zenoh::sample::{Sample, SampleKind};
use zenoh::session::Session;

use crate::error::NetError;
use crate::streams::{
    Batch, Bridge, Credit, Forwarder, Placer, Window, crossing_window, messages_per_frame,
};
use crate::wire::{
    ChunkHeader, EAGER_BYTES, Status, StreamMsg, check_piece, decode_credit, entry_bytes,
    piece_bytes,
};

mod host_link;
mod in_flight;
mod join;
mod keys;
mod members;
mod options;
mod receive;
mod runtime;
mod send;
mod sockets;
mod trust;

pub use keys::{run_prefix, valid_run_id};
pub(crate) use members::Inner;
pub use options::{NetOptions, Transport};
pub use runtime::{ZENOH_RUNTIME_VAR, exec_with_zenoh_runtime, zenoh_runtime_for};
pub use trust::{
    CertificateSummary, Refusals, TlsFiles, access_control, read_certificate, refusals,
    watch_refusals,
};

use members::*;
use receive::*;

/// One host's link to the others of a run (see the module docs for the
/// keys). Made by [`ZenohLink::new`]; the driver calls the rest
/// ([`fastio_pipeline::LocalDriver::run_on_host`]).
pub struct ZenohLink {
    opts: NetOptions,
    inner: Arc<Inner>,
    events: Receiver<LinkEvent>,
    session: Option<Session>,
    status: Option<Arc<Publisher<'static>>>,
    /// The entries sent from here, one publisher per consuming host (by
    /// host index).
    entry_pubs: BTreeMap<usize, Arc<Publisher<'static>>>,
    subscribers: Vec<Subscriber<()>>,
    host_token: Option<LivelinessToken>,
    /// Notes peers whose certificates this run cannot accept (TLS only).
    link_watch: Option<zenoh::session::LinkEventsListener<()>>,
    workers: Vec<JoinHandle<()>>,
    /// Forwarders and bridges of streams, started once every host joined.
    pending: Vec<Box<dyn FnOnce() + Send>>,
    stop: Arc<AtomicBool>,
}

impl std::fmt::Debug for ZenohLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZenohLink")
            .field("host", &self.opts.host)
            .field("prefix", &self.inner.prefix)
            .finish()
    }
}

impl ZenohLink {
    /// A link for `opts.host` in a run of `pipeline` (not connected yet:
    /// the driver starts it). Fails when the host is not one of the
    /// pipeline's or the run id is not a name.
    pub fn new(pipeline: &Pipeline, opts: NetOptions) -> Result<ZenohLink, NetError> {
        let here =
            pipeline
                .placement
                .host_index(&opts.host)
                .ok_or_else(|| NetError::UnknownHost {
                    host: opts.host.clone(),
                    hosts: pipeline.placement.hosts.join(", "),
                })?;
        if !valid_run_id(&opts.run_id) {
            return Err(NetError::RunId(opts.run_id.clone()));
        }
        // Zenoh's own log, when RUST_LOG asks for it (to stderr), and the
        // TLS handshakes it refuses.
        watch_refusals();
        let (tx, rx) = unbounded();
        Ok(ZenohLink {
            inner: Arc::new(Inner::new(
                pipeline,
                here,
                run_prefix(&pipeline.name, &opts.run_id),
                tx,
            )),
            opts,
            events: rx,
            session: None,
            status: None,
            entry_pubs: BTreeMap::new(),
            subscribers: Vec::new(),
            host_token: None,
            link_watch: None,
            workers: Vec::new(),
            pending: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
        })
    }

    /// The key prefix of this run.
    pub fn prefix(&self) -> &str {
        &self.inner.prefix
    }

    /// Puts a status line to every host, waiting for the put at most
    /// [`in_flight::stuck_after`] the lease: the driver's thread says
    /// these, and a put stuck in Zenoh (see [`in_flight`]) must not hold
    /// it (the put's own thread is left to the process's exit).
    fn say(&self, status: &Status) {
        let (Some(p), Some(line)) = (&self.status, status.line()) else {
            return;
        };
        let (p, inner) = (p.clone(), self.inner.clone());
        let (done, finished) = crossbeam_channel::bounded::<()>(1);
        let putting = std::thread::Builder::new()
            .name("fastio-net status".into())
            .spawn(move || {
                let _sending = inner.sending(None);
                let _ = p.put(line).wait();
                let _ = done.send(());
            });
        if putting.is_ok() {
            let _ = finished.recv_timeout(in_flight::stuck_after(self.opts.lease));
        }
    }
}
