//! [`HostLink`] for [`ZenohLink`]: what the driver calls, and closing.

use super::*;

impl HostLink for ZenohLink {
    fn host(&self) -> &str {
        &self.opts.host
    }

    fn start(&mut self, ctx: &Context) -> Result<(), fastio_pipeline::hosts::LinkError> {
        let joined = self.join(ctx);
        if let Err(NetError::NotJoined(why)) = &joined {
            // The hosts still joining learn why this one gave up (else
            // they would find it gone, and name it): the root cause it
            // took, or its own failure to join.
            let cause = self.inner.lock().failure.get().cloned();
            let cause = cause.unwrap_or_else(|| Failure::HostFailed {
                host: self.opts.host.clone(),
                error: why
                    .strip_prefix(&format!("host {}: ", self.opts.host))
                    .unwrap_or(why)
                    .to_owned(),
            });
            self.say(&Status::Done(Some(cause.to_json())));
        }
        Ok(joined?)
    }

    fn events(&self) -> Receiver<LinkEvent> {
        self.events.clone()
    }

    fn operator_started(&mut self, op: usize) {
        // A status line, not a liveliness token: declaring one while
        // streams cross can deadlock Zenoh's low-latency transport (the
        // other hosts' routing tables are written as it arrives, while a
        // put of theirs holds them and waits on a full link; see
        // `in_flight`). Nothing is declared after the join.
        let name = self.inner.pipeline.operators[op].name.clone();
        self.say(&Status::Started(name));
    }

    fn operator_finished(&mut self, ctx: &Context, op: usize, ended: Ended<'_>) {
        let inner = self.inner.clone();
        let name = || inner.pipeline.operators[op].name.clone();
        inner.lock().finished.insert(op);
        match ended {
            Ended::Succeeded => {
                // A stream's frames went while it ran (its end with it).
                if inner.pipeline.plan.streaming.is_none() {
                    for &(_, e) in &inner.pipeline.plan.operators[op].outputs {
                        self.export(ctx, e);
                    }
                }
                // A host that reads an entry of it learns that it
                // succeeded from the entry (entries are sent only on
                // success): the line goes only when another host reads
                // none, one message less on the way of every entry.
                if !inner.every_host_reads_from(op) {
                    self.say(&Status::Succeeded(name()));
                }
            }
            Ended::Failed(failure) => self.say(&Status::Failed {
                op: name(),
                why: failure.to_json(),
            }),
            // Stopped because the run stops: the cause is told elsewhere.
            Ended::Stopped => {}
        }
    }

    fn finish(&mut self, failure: Option<&Failure>, interrupted: &AtomicBool) -> Option<Failure> {
        self.session.as_ref()?;
        self.say(&Status::Done(failure.map(Failure::to_json)));
        let here = &self.opts.host;
        let others: Vec<String> = self
            .inner
            .pipeline
            .placement
            .hosts
            .iter()
            .filter(|h| *h != here)
            .cloned()
            .collect();
        // 1. Every other host's `done` (or found gone).
        self.wait_for(interrupted, None, |st| {
            others
                .iter()
                .all(|h| st.done.contains_key(h) || st.lost.contains(h))
        });
        // 2. Closing the session may lose what is still on its way (QUIC
        //    drops a connection's unacknowledged data when it closes), so
        //    this host closes only once every other host has its `done`:
        //    each says `all-done` once it has every host's, and a host
        //    whose token vanished after its `done` has closed already.
        //    Bounded: the others say it within a message's time.
        if !interrupted.load(Ordering::Relaxed) {
            self.say(&Status::AllDone);
            self.wait_for(interrupted, Some(ALL_DONE_TIMEOUT), |st| {
                others.iter().all(|h| {
                    st.all_done.contains(h) || st.lost.contains(h) || !st.alive.contains(h)
                })
            });
        }
        self.stop.store(true, Ordering::Relaxed);
        self.inner.lock().failure.get().cloned()
    }
}

impl ZenohLink {
    /// Waits until `settled` holds of the shared state, the run is
    /// interrupted, or `timeout` passed.
    fn wait_for(
        &self,
        interrupted: &AtomicBool,
        timeout: Option<Duration>,
        settled: impl Fn(&members::State) -> bool,
    ) {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            if settled(&self.inner.lock())
                || interrupted.load(Ordering::Relaxed)
                || deadline.is_some_and(|d| Instant::now() >= d)
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// How long a host that has every `done` waits for the others to say they
/// have theirs before it closes anyway.
pub(super) const ALL_DONE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long closing the session may wait for peers to hear it.
pub(super) const CLOSE_TIMEOUT: Duration = Duration::from_millis(300);

impl Drop for ZenohLink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Undeclaring tokens and subscribers takes the session's locks, as
        // closing does: all of it happens in a thread of its own, waited
        // for at most CLOSE_TIMEOUT (a session stuck in Zenoh, see
        // `in_flight`, would otherwise hold the host's exit for good).
        let host_token = self.host_token.take();
        let subscribers = std::mem::take(&mut self.subscribers);
        let link_watch = self.link_watch.take();
        let publishers = (self.status.take(), std::mem::take(&mut self.entry_pubs));
        let session = self.session.take();
        let (done, closed) = crossbeam_channel::bounded::<()>(1);
        let closing = std::thread::Builder::new()
            .name("fastio-net close".into())
            .spawn(move || {
                drop(host_token);
                drop(subscribers);
                drop(link_watch);
                drop(publishers);
                // Closing says goodbye to every peer; one that is gone (a
                // cut link) never answers, and Zenoh would wait 10 s for
                // it by default: the run is over, so the host's exit does
                // not wait (Zenoh's own close timeout is not public; the
                // close ends by itself within Zenoh's 10 s).
                if let Some(s) = session {
                    let _ = s.close().wait();
                }
                let _ = done.send(());
            });
        if closing.is_ok() {
            let _ = closed.recv_timeout(CLOSE_TIMEOUT);
        }
        // Workers see the stop, or their channel close, within 100 ms;
        // a sender blocked on a gone host is released by the close.
        let deadline = Instant::now() + Duration::from_secs(5);
        for w in self.workers.drain(..) {
            while !w.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if w.is_finished() {
                let _ = w.join();
            }
        }
    }
}
