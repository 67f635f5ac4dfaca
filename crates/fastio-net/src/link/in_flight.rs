//! Sends in flight, and the watch that finds one stuck.
//!
//! Every put of ours that may wait for a peer (a stream's frames and
//! credit, an entry's pieces, the status lines) is registered while it
//! runs ([`Inner::sending`]). A put waits only while the link is full,
//! and a peer's receiving never waits (its callbacks only queue), so a put
//! that has not returned for [`stuck_after`] means the link to that host
//! no longer moves. Zenoh's low-latency transport can leave one there for
//! good: a link it closes (its lease ran out) while one of our threads
//! writes on it holds the link's lock in the close, which waits for the
//! routing tables' write lock, which waits for our put, which holds their
//! read lock and waits for the link's lock — every later put and every
//! declaration of the session waits behind them, and the host's other
//! hosts and tokens are never heard again. The watch judges that host gone
//! (as a vanished token would be), so the run ends with that root cause
//! instead of hanging; the session's teardown never waits on Zenoh for
//! more than a bounded time (see the link's `Drop`).

use super::*;

/// One put in flight: since when, and to which host (`None`: every host).
pub(super) struct InFlight {
    since: Instant,
    to: Option<String>,
}

/// The puts in flight, by number.
#[derive(Default)]
pub(crate) struct Sends {
    next: std::sync::atomic::AtomicU64,
    open: Mutex<BTreeMap<u64, InFlight>>,
}

/// A put registered while it runs (unregistered when dropped).
pub(crate) struct Sending<'a> {
    sends: &'a Sends,
    id: u64,
}

impl Drop for Sending<'_> {
    fn drop(&mut self) {
        self.sends
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.id);
    }
}

/// The hosts of `hosts` (this one: `here`) a put in `open` has waited on
/// longer than `limit`.
fn stuck(
    open: &BTreeMap<u64, InFlight>,
    hosts: &[String],
    here: usize,
    limit: Duration,
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for f in open.values().filter(|f| f.since.elapsed() > limit) {
        match &f.to {
            Some(h) => {
                out.insert(h.clone());
            }
            None => out.extend(
                hosts
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != here)
                    .map(|(_, h)| h.clone()),
            ),
        }
    }
    out
}

/// How long a put may wait before its link is judged stuck: two leases
/// and a second (a live peer reads its link at once, and Zenoh judges a
/// silent one gone after one lease).
pub(crate) fn stuck_after(lease: Duration) -> Duration {
    lease * 2 + Duration::from_secs(1)
}

impl Inner {
    /// Registers a put to host `to` (`None`: a status line to every host)
    /// until the returned guard is dropped.
    pub(crate) fn sending(&self, to: Option<&str>) -> Sending<'_> {
        let id = self.sends.next.fetch_add(1, Ordering::Relaxed);
        self.sends
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                id,
                InFlight {
                    since: Instant::now(),
                    to: to.map(str::to_owned),
                },
            );
        Sending {
            sends: &self.sends,
            id,
        }
    }

    /// The hosts a put to has waited longer than `limit` (every other
    /// host for a status line), each once.
    fn stuck_hosts(&self, limit: Duration) -> BTreeSet<String> {
        let open = self.sends.open.lock().unwrap_or_else(|p| p.into_inner());
        stuck(&open, &self.pipeline.placement.hosts, self.here, limit)
    }

    /// Judges every host a put to has waited on longer than `limit` as
    /// vanished now (and so gone at once, as [`Inner::check_vanished`]
    /// blames it), and says so on stderr, once per host. Whether any put
    /// is stuck.
    pub(super) fn check_stuck_sends(&self, limit: Duration) -> bool {
        let stuck = self.stuck_hosts(limit);
        if stuck.is_empty() {
            return false;
        }
        let mut st = self.lock();
        for host in stuck {
            if st.lost.contains(&host) || st.vanished.contains_key(&host) {
                continue;
            }
            eprintln!(
                "fastio: host {}: a send to host {host} has not returned in {limit:.1?}: the \
                 link to it no longer moves; host {host} is judged gone",
                self.pipeline.placement.hosts[self.here]
            );
            let past = Instant::now()
                .checked_sub(members::GRACE)
                .unwrap_or_else(Instant::now);
            st.vanished.insert(host, past);
        }
        drop(st);
        self.check_vanished();
        true
    }

    /// The last resort, when a put is still stuck [`exit_after`] after its
    /// host was judged gone and the run has not ended: the driver's own
    /// thread waits in Zenoh too. Says so and exits (status 1; the
    /// operators, children of the driver, die with it: their parent-death
    /// signal). Returns when no put is stuck any more.
    pub(super) fn exit_stuck(&self, limit: Duration) {
        let hosts: Vec<String> = self.stuck_hosts(limit).into_iter().collect();
        if hosts.is_empty() {
            return;
        }
        let failure = self.lock().failure.get().cloned();
        eprintln!(
            "fastio: host {}: the run could not end: a send to host {} is stuck in Zenoh; \
             exiting{}",
            self.pipeline.placement.hosts[self.here],
            hosts.join(", "),
            failure.map_or(String::new(), |f| format!(" (root cause: {f})"))
        );
        std::process::exit(1)
    }
}

/// How long after a stuck put judged its host gone the run may still take
/// to end before the host exits ([`Inner::exit_stuck`]): the bound a run
/// takes to end after a host is gone (docs/hosts.md: the grace, the
/// operators' stop, the others' `all-done`, the close), with a lease to
/// spare.
pub(crate) fn exit_after(lease: Duration) -> Duration {
    lease + Duration::from_secs(10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_put_is_stuck_only_past_the_limit_and_only_while_it_runs() {
        let hosts = ["a", "b", "c"].map(String::from);
        let sends = Sends::default();
        let ago = |secs| {
            Instant::now()
                .checked_sub(Duration::from_secs(secs))
                .unwrap()
        };
        let limit = stuck_after(Duration::from_secs(2));
        assert_eq!(limit, Duration::from_secs(5));
        let open = |id, since, to: Option<&str>| {
            sends.open.lock().unwrap().insert(
                id,
                InFlight {
                    since,
                    to: to.map(String::from),
                },
            );
            Sending { sends: &sends, id }
        };
        let recent = open(0, Instant::now(), Some("b"));
        let old_to_c = open(1, ago(10), Some("c"));
        let seen = |s: &Sends| stuck(&s.open.lock().unwrap(), &hosts, 0, limit);
        assert_eq!(seen(&sends), BTreeSet::from(["c".to_owned()]));
        drop(old_to_c);
        assert!(seen(&sends).is_empty(), "a put that returned is forgotten");
        // A status line to every host, stuck: every other host.
        let status = open(2, ago(6), None);
        assert_eq!(
            seen(&sends),
            BTreeSet::from(["b".to_owned(), "c".to_owned()])
        );
        drop((recent, status));
        assert!(sends.open.lock().unwrap().is_empty());
    }
}
