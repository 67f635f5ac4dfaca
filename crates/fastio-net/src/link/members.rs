//! Membership and blame: what the Zenoh callbacks and the driver's side
//! share ([`Inner`], its [`State`]), the other hosts' status lines and
//! liveliness tokens, and who is gone with what (the root cause a vanished
//! host is).

use super::*;

/// How long after a host's token vanished its last status lines may
/// still arrive before it is judged gone.
pub(super) const GRACE: Duration = Duration::from_millis(500);

/// What a liveliness subscriber calls with a token's key (after the kind's
/// prefix) and whether it appeared or vanished.
pub(super) type TokenHandler = fn(&Inner, &str, SampleKind);

/// What the Zenoh callbacks and the driver's side share.
#[derive(Default)]
pub(crate) struct State {
    /// Hosts whose token is there now.
    pub(super) alive: BTreeSet<String>,
    /// Hosts whose token was ever seen.
    pub(super) joined: BTreeSet<String>,
    /// Operators (by `host/op`) that said they started.
    pub(super) started: BTreeSet<String>,
    /// Hosts that ended their part, with their root cause.
    pub(super) done: BTreeMap<String, Option<Failure>>,
    /// Hosts that said they have every host's `done` ([`Status::AllDone`]).
    pub(super) all_done: BTreeSet<String>,
    /// Remote operators that said they succeeded.
    pub(super) succeeded: BTreeSet<usize>,
    /// Operators that ended, here or elsewhere.
    pub(super) finished: BTreeSet<usize>,
    /// Entries received and published here (streams: ended here, with
    /// the frames placed).
    pub(crate) imported: BTreeMap<usize, u64>,
    /// Hosts that have room for an announced entry, by entry.
    pub(super) ready: BTreeMap<usize, BTreeSet<String>>,
    /// Remote operators already reported done to the driver.
    pub(super) reported: BTreeSet<usize>,
    /// Hosts found gone before they were done.
    pub(super) lost: BTreeSet<String>,
    /// Hosts whose token vanished, and when (judged after [`GRACE`]).
    pub(super) vanished: BTreeMap<String, Instant>,
    /// The root cause of what failed elsewhere.
    pub(super) failure: RootCause,
    /// The smallest batch of each host's Zenoh links, as it said
    /// (this host's own too, once known).
    pub(super) batch: BTreeMap<String, usize>,
}

pub(crate) struct Inner {
    pub(crate) pipeline: Pipeline,
    /// This host (index into the placement's hosts).
    pub(crate) here: usize,
    pub(super) prefix: String,
    pub(super) state: Mutex<State>,
    /// Signalled when a host says it is ready for an entry, or is gone.
    pub(super) changed: Condvar,
    pub(crate) events: Sender<LinkEvent>,
    /// The placement's crossings, made once (the plan does not change),
    /// in the plan's entry order.
    pub(crate) crossings: Vec<fastio_pipeline::Crossing>,
    /// Operator index by lower-case name (status lines name operators).
    pub(super) op_by_name: std::collections::HashMap<String, usize>,
    /// [`Inner::consumed_here`] of each operator (made once: the
    /// receiving of every entry asks).
    consumed: Vec<Vec<usize>>,
    /// [`Inner::every_host_reads_from`] of each operator (made once: the
    /// end of every operator asks).
    read_everywhere: Vec<bool>,
    /// Bytes of a message to each host (by index), once every host has
    /// said its batch ([`Inner::batches_agreed`]).
    message_bytes: std::sync::OnceLock<Vec<usize>>,
    /// Our puts in flight ([`Inner::sending`]).
    pub(super) sends: super::in_flight::Sends,
}

impl Inner {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What [`Inner::new`] fills in: everything but the state.
    pub(super) fn new(
        pipeline: &Pipeline,
        here: usize,
        prefix: String,
        events: Sender<LinkEvent>,
    ) -> Inner {
        let mut inner = Inner {
            crossings: pipeline.placement.crossings(&pipeline.plan),
            op_by_name: pipeline
                .operators
                .iter()
                .enumerate()
                .rev() // the first of names equal but for case wins
                .map(|(i, o)| (o.name.to_ascii_lowercase(), i))
                .collect(),
            pipeline: pipeline.clone(),
            here,
            prefix,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            events,
            consumed: Vec::new(),
            read_everywhere: Vec::new(),
            message_bytes: std::sync::OnceLock::new(),
            sends: Default::default(),
        };
        let ops = 0..inner.pipeline.operators.len();
        inner.consumed = ops
            .clone()
            .map(|op| inner.works_out_consumed_here(op))
            .collect();
        inner.read_everywhere = ops.map(|op| inner.works_out_read_everywhere(op)).collect();
        inner
    }

    pub(super) fn op_index(&self, name: &str) -> Option<usize> {
        self.op_by_name.get(&name.to_ascii_lowercase()).copied()
    }

    /// Most bytes of payload and attachment in one message from this host
    /// to host `to` (by index): what fits the smallest batch of either's
    /// links; the smallest any link may have while either has not said.
    /// Once every host has said ([`Inner::batches_agreed`]), read without
    /// the state's lock.
    pub(crate) fn message_bytes_to(&self, to: usize) -> usize {
        match self.message_bytes.get().and_then(|m| m.get(to)) {
            Some(bytes) => *bytes,
            None => self.message_bytes_said(&self.lock(), to),
        }
    }

    /// [`Inner::message_bytes_to`] from the batches said so far (`st`).
    fn message_bytes_said(&self, st: &State, to: usize) -> usize {
        let hosts = &self.pipeline.placement.hosts;
        let said = |h: usize| hosts.get(h).and_then(|n| st.batch.get(n)).copied();
        match (said(self.here), said(to)) {
            (Some(a), Some(b)) => crate::wire::message_bytes(a, b),
            _ => crate::wire::MESSAGE_BYTES,
        }
    }

    /// Every host has said its batch (`st` holds them all): the bytes of a
    /// message to each host are fixed from now on, and kept.
    pub(super) fn batches_agreed(&self, st: &State) {
        let hosts = self.pipeline.placement.hosts.len();
        let bytes = (0..hosts)
            .map(|to| self.message_bytes_said(st, to))
            .collect();
        let _ = self.message_bytes.set(bytes);
    }

    /// A sending of entry `entry` began here: its producer succeeded
    /// (entries are sent only then), whether or not its status line comes
    /// (see [`Inner::every_host_reads_from`]). Should its host vanish
    /// now, what is lost is the entry, not a running operator.
    pub(super) fn producer_succeeded(&self, entry: usize) {
        Self::mark_succeeded(&mut self.lock(), self.pipeline.plan.entries[entry].producer);
    }

    /// Notes that remote operator `op` succeeded (and so ended).
    pub(super) fn mark_succeeded(st: &mut State, op: usize) {
        st.succeeded.insert(op);
        st.finished.insert(op);
    }

    /// Whether every other host reads an entry that operator `op` sends
    /// from here (not streams: their frames say nothing of the end).
    pub(super) fn every_host_reads_from(&self, op: usize) -> bool {
        self.read_everywhere.get(op).copied().unwrap_or(false)
    }

    /// [`Inner::every_host_reads_from`], worked out (once, in
    /// [`Inner::new`]).
    fn works_out_read_everywhere(&self, op: usize) -> bool {
        if self.pipeline.plan.streaming.is_some() {
            return false;
        }
        let outputs = &self.pipeline.plan.operators[op].outputs;
        (0..self.pipeline.placement.hosts.len())
            .filter(|&h| h != self.here)
            .all(|h| {
                outputs.iter().any(|(_, e)| {
                    self.crossing(*e)
                        .is_some_and(|c| c.from == self.here && c.to.contains(&h))
                })
            })
    }

    /// The crossing of entry `entry`, if it crosses.
    pub(crate) fn crossing(&self, entry: usize) -> Option<&fastio_pipeline::Crossing> {
        // `Placement::crossings` lists them in the plan's entry order.
        self.crossings
            .binary_search_by_key(&entry, |c| c.entry)
            .ok()
            .map(|i| &self.crossings[i])
    }

    /// Entries of operator `op` that an operator of this host reads.
    pub(super) fn consumed_here(&self, op: usize) -> &[usize] {
        self.consumed.get(op).map_or(&[], Vec::as_slice)
    }

    /// [`Inner::consumed_here`], worked out (once, in [`Inner::new`]).
    fn works_out_consumed_here(&self, op: usize) -> Vec<usize> {
        let p = &self.pipeline;
        p.plan.operators[op]
            .outputs
            .iter()
            .map(|(_, e)| *e)
            .filter(|&e| {
                p.plan.entries[e]
                    .consumers
                    .iter()
                    .any(|&c| p.placement.host_of[c] == self.here)
            })
            .collect()
    }

    /// What tells the driver that remote `op` is done, once every entry
    /// of it read here has arrived (or, when it has none, once it said it
    /// succeeded); the caller sends it (after unlocking the state, where
    /// it can: the driver's thread wakes to it and should not find the
    /// lock held).
    #[must_use]
    pub(super) fn maybe_ready(&self, st: &mut State, op: usize) -> Option<LinkEvent> {
        if st.reported.contains(&op) {
            return None;
        }
        let need = self.consumed_here(op);
        // An entry is only sent once its producer has succeeded: having
        // all of them is news enough (no need to wait for the status).
        let said = st.succeeded.contains(&op) || !need.is_empty();
        if said && need.iter().all(|e| st.imported.contains_key(e)) {
            st.reported.insert(op);
            // Its entries came: it succeeded, whether or not its status
            // line is sent (see `ZenohLink::operator_finished`).
            st.succeeded.insert(op);
            st.finished.insert(op);
            let bytes = need.iter().filter_map(|e| st.imported.get(e)).sum();
            return Some(LinkEvent::RemoteSucceeded { op, bytes });
        }
        None
    }

    pub(super) fn on_status(&self, host: &str, status: Status) {
        let mut st = self.lock();
        match status {
            // Said as the operator starts (no liveliness token: a
            // declaration while streams cross can deadlock Zenoh's
            // low-latency transport, see `in_flight`).
            Status::Started(name) => {
                st.started.insert(format!("{host}/{name}"));
            }
            Status::Ready(key) => {
                if let Some(e) = self.pipeline.plan.entries.iter().position(|e| e.key == key) {
                    st.ready.entry(e).or_default().insert(host.to_owned());
                    self.changed.notify_all();
                }
            }
            Status::Succeeded(name) => {
                if let Some(op) = self.op_index(&name) {
                    st.succeeded.insert(op);
                    st.finished.insert(op);
                    if let Some(event) = self.maybe_ready(&mut st, op) {
                        let _ = self.events.send(event);
                    }
                }
            }
            Status::Failed { op: name, why } => {
                if let Some(op) = self.op_index(&name) {
                    st.finished.insert(op);
                    let failure = read_failure(host, &why);
                    st.failure.note(failure.clone());
                    let _ = self.events.send(LinkEvent::RemoteFailed { op, failure });
                }
            }
            Status::Batch(bytes) => {
                st.batch.insert(host.to_owned(), bytes as usize);
                self.changed.notify_all();
            }
            Status::Done(outcome) => {
                let outcome = outcome.map(|why| read_failure(host, &why));
                if let Some(failure) = &outcome {
                    // The run failed there: stop here too.
                    st.failure.note(failure.clone());
                    let _ = self.events.send(LinkEvent::Failed {
                        failure: failure.clone(),
                    });
                }
                st.done.insert(host.to_owned(), outcome);
            }
            Status::AllDone => {
                st.all_done.insert(host.to_owned());
            }
        }
    }

    pub(super) fn on_host_token(&self, host: &str, kind: SampleKind) {
        let mut st = self.lock();
        match kind {
            SampleKind::Put => {
                st.alive.insert(host.to_owned());
                st.joined.insert(host.to_owned());
                st.vanished.remove(host);
            }
            SampleKind::Delete => {
                st.alive.remove(host);
                if host != self.pipeline.placement.hosts[self.here] {
                    // Its last status lines may still be on the way (a
                    // token's end travels ahead of data): judge it after
                    // a grace period ([`Inner::check_vanished`]).
                    st.vanished.insert(host.to_owned(), Instant::now());
                }
            }
        }
    }

    /// Hosts whose token vanished more than [`GRACE`] ago: gone, unless
    /// they said they were done and nothing of theirs is still due here.
    pub(super) fn check_vanished(&self) {
        let mut st = self.lock();
        let due: Vec<String> = st
            .vanished
            .iter()
            .filter(|(_, at)| at.elapsed() >= GRACE)
            .map(|(h, _)| h.clone())
            .collect();
        for host in due {
            st.vanished.remove(&host);
            if let Some(lost) = self.blame(&st, &host) {
                st.lost.insert(host.clone());
                self.changed.notify_all();
                let op = lost.operator().and_then(|n| self.op_index(n));
                let failure = Failure::HostGone {
                    host: host.clone(),
                    lost,
                };
                st.failure.note(failure.clone());
                if let Some(op) = op {
                    st.finished.insert(op);
                    let _ = self.events.send(LinkEvent::RemoteFailed { op, failure });
                } else {
                    let _ = self.events.send(LinkEvent::Failed { failure });
                }
            }
        }
    }

    /// What this host loses with `host` gone: `None` when nothing (it said
    /// it was done and nothing of it is still due here), else the first of:
    /// an operator of it still running (started, never said how it ended),
    /// an entry of it still due here, an operator of it not finished.
    pub(super) fn blame(&self, st: &State, host: &str) -> Option<Lost> {
        let p = &self.pipeline;
        let on_host = |i: usize| p.placement.host_name(i) == host;
        let name = |i: usize| p.operators[i].name.clone();
        let running = (0..p.operators.len()).find(|&i| {
            on_host(i)
                && !st.finished.contains(&i)
                && st
                    .started
                    .contains(&format!("{host}/{}", p.operators[i].name))
        });
        if let Some(i) = running {
            return Some(Lost::Running { operator: name(i) });
        }
        let due = self.crossings.iter().find(|c| {
            p.placement.hosts[c.from] == host
                && c.to.contains(&self.here)
                && !st.imported.contains_key(&c.entry)
        });
        if let Some(c) = due {
            let e = &p.plan.entries[c.entry];
            return Some(Lost::Entry {
                operator: name(e.producer),
                entry: e.name.clone(),
            });
        }
        if st.done.contains_key(host) {
            return None;
        }
        Some(
            match (0..p.operators.len()).find(|&i| on_host(i) && !st.finished.contains(&i)) {
                Some(i) => Lost::Unfinished { operator: name(i) },
                None => Lost::Nothing,
            },
        )
    }

    /// Tells the driver that entry `entry` (an entry, or a stream's
    /// frames) cannot arrive here from host `from`, and why: the failure
    /// of its producer's crossing.
    pub(crate) fn cannot_receive(&self, entry: usize, from: &str, why: &NetError) {
        let e = &self.pipeline.plan.entries[entry];
        let _ = self.events.send(LinkEvent::RemoteFailed {
            op: e.producer,
            failure: Failure::Transfer {
                entry: e.name.clone(),
                from: from.to_owned(),
                to: vec![self.pipeline.placement.hosts[self.here].clone()],
                error: why.to_string(),
            },
        });
    }

    pub(crate) fn host_gone(&self, host: &str) -> bool {
        self.lock().lost.contains(host)
    }

    /// Whether `host` said it is done (its run there ended).
    pub(crate) fn host_done(&self, host: &str) -> bool {
        self.lock().done.contains_key(host)
    }
}

/// A failure another host sent (one line of JSON), naming that host for
/// an operator's failure; one that cannot be read is that host's failure.
pub(super) fn read_failure(host: &str, json: &str) -> Failure {
    match Failure::from_json(json) {
        Ok(f) => f.on_host(host),
        Err(e) => Failure::HostFailed {
            host: host.to_owned(),
            error: format!("it sent a failure that cannot be read ({e})"),
        },
    }
}
