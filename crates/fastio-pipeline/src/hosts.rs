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

use crate::failure::Failure;

/// Something that happened on another host.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
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
    /// Remote operator `op` failed, or is lost with its host: `failure`
    /// says how (as the host it ran on saw it, or [`Failure::HostGone`]).
    RemoteFailed {
        /// The operator.
        op: usize,
        /// What happened.
        failure: Failure,
    },
    /// The run failed elsewhere (another host's root cause, a host gone
    /// with no operator of it lost here, the link): the run stops.
    Failed {
        /// What happened.
        failure: Failure,
    },
    /// A piece that says it completes entry `entry` (index in the plan)
    /// reached this host from another. The link says so before it checks,
    /// places and publishes that piece, so that a driver asleep wakes
    /// while the link does that work rather than after: on a machine whose
    /// idle cores halt, a wake-up takes tens of microseconds, as long as
    /// placing a small entry or the last piece of a large one. What became
    /// of the entry is told by the events after it (its producer's
    /// [`LinkEvent::RemoteSucceeded`] once every entry of it read here is
    /// in, or a failure); nothing is to be inferred from this one. A
    /// driver needs to do nothing with it.
    EntryArriving {
        /// The entry (index in the plan).
        entry: usize,
    },
}

/// Why a link could not start (its own error type, boxed: this crate
/// knows nothing of the network).
pub type LinkError = Box<dyn std::error::Error + Send + Sync>;

/// How a local operator ended, as the other hosts are told
/// ([`HostLink::operator_finished`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended<'a> {
    /// It succeeded: its outputs other hosts consume are published in the
    /// context, and are sent now (a stream's frames went while it ran).
    Succeeded,
    /// The driver stopped it (the run was stopping): no failure of its
    /// own.
    Stopped,
    /// It failed.
    Failed(&'a Failure),
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
    fn start(&mut self, ctx: &Context) -> Result<(), LinkError>;

    /// Where the link's events arrive.
    fn events(&self) -> Receiver<LinkEvent>;

    /// Local operator `op` has started.
    fn operator_started(&mut self, op: usize);

    /// Local operator `op` has ended, as `ended` says.
    fn operator_finished(&mut self, ctx: &Context, op: usize, ended: Ended<'_>);

    /// This host's part is over (`failure` is this host's root cause, if
    /// any). Waits until every other host has ended its part or is gone,
    /// or until `interrupted`, and gives the root cause of what happened
    /// elsewhere, if anything failed there.
    fn finish(&mut self, failure: Option<&Failure>, interrupted: &AtomicBool) -> Option<Failure>;
}
