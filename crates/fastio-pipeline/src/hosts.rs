//! What the driver of one host of a multi-host run needs from the link to
//! the other hosts ([`HostLink`]). The driver stays the same local driver:
//! it runs the operators placed on its host in its own context; the link
//! (crate `fastio-net`, over Eclipse Zenoh) carries the entries (in a
//! streaming run, the frames of the streams) that cross hosts and tells the
//! driver what happened elsewhere. This crate knows
//! nothing of the network.

use std::sync::atomic::AtomicBool;

use crossbeam_channel::Receiver;
use fastio::Context;

/// Something that happened on another host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkEvent {
    /// Remote operator `op` succeeded, and every output of it that this
    /// host consumes has been received and published in the local context
    /// under its entry name (`bytes` in all).
    RemoteSucceeded {
        /// The operator (index in the pipeline).
        op: usize,
        /// Bytes received for it.
        bytes: u64,
    },
    /// Remote operator `op` failed (or its host is gone while this host
    /// still waited for it): `why` names the host and what happened.
    RemoteFailed {
        /// The operator.
        op: usize,
        /// The host it was placed on.
        host: String,
        /// What happened, in one line.
        why: String,
    },
    /// The link failed as a whole (a host gone, an entry that could not be
    /// sent or received): the run stops.
    Failed {
        /// The host concerned.
        host: String,
        /// What happened, in one line.
        why: String,
    },
}

/// The link between the driver of this host and the other hosts of the
/// run. Every method returns at once except [`HostLink::finish`]; what
/// happens elsewhere arrives on [`HostLink::events`].
pub trait HostLink {
    /// The host this driver runs (a name of the pipeline's placement).
    fn host(&self) -> &str;

    /// Starts the link with the local context the run uses (incoming
    /// entries are allocated and published there). Called once, before
    /// any operator starts; in a streaming run after the streams of this
    /// host's operators are declared (the link takes the producer's place
    /// in those fed from elsewhere, and a consumer's in those read
    /// elsewhere).
    fn start(&mut self, ctx: &Context) -> Result<(), String>;

    /// Where the link's events arrive.
    fn events(&self) -> Receiver<LinkEvent>;

    /// Local operator `op` has started.
    fn operator_started(&mut self, op: usize);

    /// Local operator `op` has ended: `Ok` when it succeeded (its outputs
    /// that other hosts consume are published in `ctx` and are sent now;
    /// a stream's frames went while it ran), else what happened, in one
    /// line.
    fn operator_finished(&mut self, ctx: &Context, op: usize, result: Result<(), String>);

    /// This host's part is over (`failure` is the first failure this host
    /// saw, if any). Waits until every other host has ended its part or
    /// is gone, or until `interrupted`, and gives the first failure that
    /// happened elsewhere.
    fn finish(
        &mut self,
        failure: Option<&(String, String)>,
        interrupted: &AtomicBool,
    ) -> Option<(String, String)>;
}
