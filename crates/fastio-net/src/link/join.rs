//! Joining a run: publishers, subscribers, liveliness, the streams that
//! cross hosts, and waiting for every host.

use super::*;

impl ZenohLink {
    pub(super) fn join(&mut self, ctx: &Context) -> Result<(), NetError> {
        let inner = self.inner.clone();
        let p = &inner.pipeline;
        let prefix = inner.prefix.clone();
        let here_name = self.opts.host.clone();
        let mut config = self.opts.run_config(p.plan.streaming.is_some())?;
        let transport = self.opts.transport()?;
        let tls = matches!(transport, Transport::MutualTls(_));
        if let Transport::MutualTls(files) = &transport {
            files.check(&here_name)?;
            let acl = trust::access_control(p, &prefix);
            config
                .insert_json5("access_control", &acl)
                .map_err(|e| NetError::Config {
                    what: "access_control".into(),
                    why: e.to_string(),
                })?;
        }
        // The batch our links may have at most, as configured.
        let configured_batch = config
            .get_json("transport/link/tx/batch_size")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(crate::wire::LARGEST_BATCH);
        let session = zenoh::open(config)
            .wait()
            .map_err(|e| NetError::Zenoh(format!("cannot open a session: {e}")))?;
        if tls {
            // With the links there already (history): from a runtime.
            self.link_watch = Some(in_runtime(|| watch_links(&session, p, &here_name))?);
        }
        // 1. Publishers: status, and each entry produced here that another
        //    host reads.
        // Every publisher of ours: reliable, blocking when the link is
        // full (back-pressure, never a dropped piece), sent at once.
        // Each is awaited below until a subscriber of another host
        // matches it: what is put before that is dropped by Zenoh.
        let declared: std::cell::RefCell<Vec<Arc<Publisher<'static>>>> = Default::default();
        let publisher = |key: String| {
            let p = session
                .declare_publisher(key)
                .congestion_control(CongestionControl::Block)
                .express(true)
                .wait()
                .map(Arc::new)
                .map_err(|e| NetError::Zenoh(e.to_string()))?;
            declared.borrow_mut().push(p.clone());
            Ok(p)
        };
        self.status = Some(publisher(format!("{prefix}/status/{here_name}"))?);
        let streaming = p.plan.streaming.is_some();
        if streaming {
            // Streams: their publishers, subscribers and workers.
            self.declare_streams(&session, ctx, &publisher)?;
        }
        // One publisher for each host that reads an entry made here.
        if !streaming {
            let readers: BTreeSet<usize> = inner
                .crossings
                .iter()
                .filter(|c| c.from == inner.here)
                .flat_map(|c| c.to.iter().copied())
                .collect();
            for h in readers {
                let to = &p.placement.hosts[h];
                let entry = publisher(format!("{prefix}/entry/{here_name}/{to}"))?;
                self.entry_pubs.insert(h, entry);
            }
        }
        // 2. Subscribers: every other host's status, and each entry read
        //    here whose producer is elsewhere. Each on an exact key (see
        //    the entries' below): a status key of a host not in the run
        //    reaches no subscriber at all.
        for host in p.placement.hosts.iter().filter(|h| **h != here_name) {
            let (i2, from) = (inner.clone(), host.clone());
            let sub = session
                .declare_subscriber(format!("{prefix}/status/{host}"))
                .callback(move |s: Sample| {
                    if let Ok(status) = Status::decode(&s.payload().to_bytes()) {
                        i2.on_status(&from, status);
                    }
                })
                .wait()
                .map_err(|e| NetError::Zenoh(e.to_string()))?;
            self.subscribers.push(sub);
        }
        // One subscriber for each host that sends entries here, on the
        // exact key of what it sends here: the header names the entry.
        // (Zenoh keeps the route of a key that a subscriber names
        // exactly; a key that only matches a wildcard it routes afresh
        // for every sample, on both hosts. One key per entry would cost
        // a run of many entries on every sample.)
        let mut imports: BTreeMap<String, HashMap<String, Arc<Import>>> = BTreeMap::new();
        for c in inner
            .crossings
            .iter()
            .filter(|c| c.to.contains(&inner.here) && !streaming)
        {
            let from = p.placement.hosts[c.from].clone();
            let import = Arc::new(Import {
                inner: inner.clone(),
                ctx: ctx.clone(),
                entry: c.entry,
                from: from.clone(),
                status: self.status.clone(),
                stop: self.stop.clone(),
                begun: AtomicBool::new(false),
                arriving: AtomicBool::new(false),
                receiving: Mutex::new(None),
            });
            imports
                .entry(from)
                .or_default()
                .insert(p.plan.entries[c.entry].key.clone(), import);
        }
        for (from, imports) in imports {
            let key = format!("{prefix}/entry/{from}/{here_name}");
            let sub = session
                .declare_subscriber(key)
                .callback(move |s: Sample| on_entry_sample(&imports, &from, &s))
                .wait()
                .map_err(|e| NetError::Zenoh(e.to_string()))?;
            self.subscribers.push(sub);
        }
        // 3. Liveliness: hosts (with what is there already). Operators
        // say their start in a status line: nothing is declared after
        // the join (see `in_flight`).
        let watch: [(&str, TokenHandler); 1] = [("host", Inner::on_host_token)];
        for (kind, on) in watch {
            let i3 = inner.clone();
            let under = format!("{prefix}/{kind}/");
            let sub = session
                .liveliness()
                .declare_subscriber(format!("{under}**"))
                .history(true)
                .callback(move |s: Sample| {
                    if let Some(k) = s.key_expr().as_str().strip_prefix(&under) {
                        on(&i3, k, s.kind());
                    }
                })
                .wait()
                .map_err(|e| NetError::Zenoh(e.to_string()))?;
            self.subscribers.push(sub);
        }
        // 4. Our own token, last.
        let token = session
            .liveliness()
            .declare_token(format!("{prefix}/host/{here_name}"))
            .wait()
            .map_err(|e| NetError::Zenoh(e.to_string()))?;
        self.host_token = Some(token);
        self.session = Some(session);
        // Judges vanished hosts until the run stops; and bounds, by the
        // lease, how long a send to a peer that acknowledges nothing may
        // wait, on every link as it comes (`sockets.rs`: else a link cut
        // under a full send buffer hangs this host past the lease).
        // Also finds a put stuck on a link that no longer moves and
        // judges its host gone (`in_flight`); should the host still not
        // have ended a lease and the stop's bound later (its driver's own
        // thread stuck in Zenoh too), it exits with that root cause.
        let (i5, stop, lease) = (inner.clone(), self.stop.clone(), self.opts.lease);
        self.workers.push(std::thread::spawn(move || {
            let mut bounded = Instant::now();
            let stuck = in_flight::stuck_after(lease);
            let mut judged: Option<Instant> = None;
            sockets::bound_unacknowledged_sends(lease);
            while !stop.load(Ordering::Relaxed) {
                i5.check_vanished();
                if i5.check_stuck_sends(stuck) {
                    judged.get_or_insert_with(Instant::now);
                }
                if judged.is_some_and(|at| at.elapsed() > in_flight::exit_after(lease)) {
                    i5.exit_stuck(stuck);
                }
                if bounded.elapsed() >= Duration::from_millis(250) {
                    sockets::bound_unacknowledged_sends(lease);
                    bounded = Instant::now();
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }));
        // Every host must be there before anything starts (a host alone
        // in its run has no one to wait for).
        let alone = p.placement.hosts.len() == 1;
        let deadline = Instant::now() + self.opts.join_timeout;
        loop {
            let missing: Vec<String> = {
                let st = inner.lock();
                p.placement
                    .hosts
                    .iter()
                    .filter(|h| **h != here_name && !st.joined.contains(*h))
                    .cloned()
                    .collect()
            };
            // Every host's token is seen; its subscribers may still be
            // on their way (Zenoh does not order a peer's declarations
            // of different kinds): each publisher waits for its match,
            // a subscriber of another host.
            let unmatched: Vec<String> = declared
                .borrow()
                .iter()
                .filter(|_| !alone)
                .filter(|p| !p.matching_status().wait().is_ok_and(|m| m.matching()))
                .map(|p| p.key_expr().as_str().to_owned())
                .collect();
            let failed = inner.lock().failure.get().cloned();
            if let Some(f) = failed {
                return Err(self.failed_before_start(f));
            }
            if missing.is_empty() && unmatched.is_empty() {
                self.agree_on_batches(configured_batch)?;
                // Every link is up: bounded before the first frame goes.
                sockets::bound_unacknowledged_sends(self.opts.lease);
                for work in self.pending.drain(..) {
                    self.workers.push(std::thread::spawn(work));
                }
                return Ok(());
            }
            if Instant::now() >= deadline && missing.is_empty() {
                return Err(NetError::NotJoined(format!(
                    "host {here_name}: every host of pipeline {} joined run {}, but within {:.0?} none subscribed to {}",
                    p.name,
                    self.opts.run_id,
                    self.opts.join_timeout,
                    unmatched.join(", ")
                )));
            }
            if Instant::now() >= deadline {
                let refused = refusals().all();
                return Err(NetError::NotJoined(format!(
                    "host {here_name}: {} of pipeline {} did not join run {} within {:.0?} (connect: {}; listen: {}){}",
                    if missing.len() == 1 {
                        format!("host {}", missing[0])
                    } else {
                        format!("hosts {}", missing.join(", "))
                    },
                    p.name,
                    self.opts.run_id,
                    self.opts.join_timeout,
                    if self.opts.connect.is_empty() {
                        "-".into()
                    } else {
                        self.opts.connect.join(" ")
                    },
                    if self.opts.listen.is_empty() {
                        "-".into()
                    } else {
                        self.opts.listen.join(" ")
                    },
                    if refused.is_empty() {
                        String::new()
                    } else {
                        format!("; refused meanwhile: {}", refused.join("; "))
                    },
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Says the smallest batch of this host's Zenoh links (every host's
    /// link is up: their tokens came over them) and waits until every
    /// other host has said its own, so that nothing this host sends
    /// another outgrows the batch of the link between them
    /// ([`Inner::message_bytes_to`]).
    fn agree_on_batches(&self, configured: usize) -> Result<(), NetError> {
        let inner = &self.inner;
        let hosts = &inner.pipeline.placement.hosts;
        let here = &hosts[inner.here];
        let session = self
            .session
            .as_ref()
            .ok_or_else(|| NetError::Zenoh("no session".into()))?;
        let own = in_runtime(|| {
            session
                .info()
                .links()
                .wait()
                .map(|l| usize::from(l.mtu()))
                .min()
        })
        .unwrap_or(crate::wire::LARGEST_BATCH)
        .min(configured);
        inner.lock().batch.insert(here.clone(), own);
        // A publisher's match means that some other host subscribed, not
        // every one: a host whose subscriber came late may miss a line.
        // So the line is said again each time another host's is heard
        // for the first time (that host's own line came after its
        // subscriber: one session's messages keep their order, so the
        // line said back reaches it), and every RESAY while a host is
        // still silent here.
        const RESAY: Duration = Duration::from_millis(100);
        let deadline = Instant::now() + self.opts.join_timeout;
        let (mut heard, mut said) = (0, None::<Instant>);
        let mut st = inner.lock();
        loop {
            let silent: Vec<&str> = hosts
                .iter()
                .filter(|h| !st.batch.contains_key(*h))
                .map(String::as_str)
                .collect();
            if st.batch.len() > heard
                || said.is_none_or(|t| t.elapsed() >= RESAY && !silent.is_empty())
            {
                heard = st.batch.len();
                drop(st);
                self.say(&Status::Batch(own as u32));
                said = Some(Instant::now());
                st = inner.lock();
            }
            if silent.is_empty() {
                inner.batches_agreed(&st);
                return Ok(());
            }
            if let Some(f) = st.failure.get().cloned() {
                drop(st);
                return Err(self.failed_before_start(f));
            }
            if Instant::now() >= deadline {
                return Err(NetError::NotJoined(format!(
                    "host {here}: every host of pipeline {} joined run {}, but within {:.0?} {} did not say the batch size of its links",
                    inner.pipeline.name,
                    self.opts.run_id,
                    self.opts.join_timeout,
                    silent.join(", ")
                )));
            }
            st = inner
                .changed
                .wait_timeout(st, Duration::from_millis(20))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// The run failed while this host still waits for it to start (a
    /// host that joined was found gone, [`Inner::check_vanished`], or
    /// another host said so): the join fails at once, within the lease,
    /// not at the join timeout ([`ZenohLink::start`] says why to the
    /// hosts still there).
    fn failed_before_start(&self, failure: Failure) -> NetError {
        NetError::NotJoined(format!(
            "host {}: run {} failed before it started: {failure}",
            self.opts.host, self.opts.run_id
        ))
    }

    /// Streams that cross hosts ([`crate::streams`]): on the producing
    /// host a publisher and a credit subscriber per consuming host, on a
    /// consuming host a subscriber and a credit publisher. The local
    /// streams' handles are taken now, before any operator starts; the
    /// forwarders and bridges start once every host has joined.
    pub(super) fn declare_streams(
        &mut self,
        session: &Session,
        ctx: &Context,
        publisher: &dyn Fn(String) -> Result<Arc<Publisher<'static>>, NetError>,
    ) -> Result<(), NetError> {
        let inner = self.inner.clone();
        let p = &inner.pipeline;
        let prefix = &inner.prefix;
        let here = inner.here;
        let here_name = &p.placement.hosts[here];
        for c in &inner.crossings {
            let e = &p.plan.entries[c.entry];
            // The largest frame, and the frames in flight on this
            // crossing (`streams::crossing_window`).
            let largest = p
                .plan
                .streaming
                .as_ref()
                .and_then(|s| s.max_shapes.get(c.entry));
            let frame_bytes = largest.map_or(0, |shape| {
                let shape: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
                entry_bytes(e.element, &shape).unwrap_or(u64::MAX)
            });
            let (depth, drop_oldest) = p
                .plan
                .streaming
                .as_ref()
                .map_or((1, false), |s| (s.depth, s.drop_oldest));
            let window = crossing_window(depth, drop_oldest, frame_bytes);
            let per_frame = messages_per_frame(frame_bytes, largest.map_or(0, Vec::len));
            let fail = |source: fastio::Error| NetError::Local {
                what: format!("stream {}", e.name),
                source,
            };
            // Consumer indices of the stream whose operator is on host h.
            let indices_on = |h: usize| -> Vec<usize> {
                (0..e.consumers.len())
                    .filter(|&k| p.placement.host_of[e.consumers[k]] == h)
                    .collect()
            };
            if c.from == here {
                for &h in &c.to {
                    let to = p.placement.hosts[h].clone();
                    let indices = indices_on(h);
                    let Some((&first, rest)) = indices.split_first() else {
                        continue;
                    };
                    let consumer = ctx.stream_consumer(&e.key, first).map_err(fail)?;
                    // The frame crosses once: that host's other indices
                    // are detached here (its bridge feeds them there).
                    for &k in rest {
                        drop(ctx.stream_consumer(&e.key, k).map_err(fail)?);
                    }
                    // Until the consuming host says more: the window's most.
                    let credit = Arc::new(Credit::new(window));
                    let c2 = credit.clone();
                    let sub = session
                        .declare_subscriber(format!("{prefix}/credit/{}/{to}", e.key))
                        .callback(move |s: Sample| {
                            match decode_credit(&s.payload().to_bytes()) {
                                Ok(limit) => c2.update(limit),
                                // A peer of another version: said, never
                                // waited for in silence.
                                Err(why) => c2.refuse(why.to_string()),
                            }
                        })
                        .wait()
                        .map_err(|x| NetError::Zenoh(x.to_string()))?;
                    self.subscribers.push(sub);
                    let forwarder = Forwarder {
                        inner: inner.clone(),
                        entry: c.entry,
                        publisher: publisher(format!("{prefix}/stream/{}/{to}", e.key))?,
                        to,
                        consumer,
                        credit,
                        stop: self.stop.clone(),
                    };
                    self.pending.push(Box::new(move || forwarder.run()));
                }
            } else if c.to.contains(&here) {
                let producer = ctx.stream_producer(&e.key).map_err(fail)?;
                // Consumers placed elsewhere are fed there.
                for k in 0..e.consumers.len() {
                    if p.placement.host_of[e.consumers[k]] != here {
                        drop(ctx.stream_consumer(&e.key, k).map_err(fail)?);
                    }
                }
                let bridge = Arc::new(Bridge::new(
                    Placer {
                        inner: inner.clone(),
                        entry: c.entry,
                        from: p.placement.hosts[c.from].clone(),
                        producer,
                        releases: Arc::new(ctx.stream_releases(&e.key).map_err(fail)?),
                        credit: publisher(format!("{prefix}/credit/{}/{here_name}", e.key))?,
                        window: Window::new(depth, window),
                        drop_oldest,
                        waited: false,
                        stop: self.stop.clone(),
                        placed: 0,
                        skipped: 0,
                        probed: false,
                        granted: window,
                        last: None,
                        partial: None,
                        ended: false,
                    },
                    window,
                    per_frame,
                ));
                let arrived = bridge.clone();
                let sub = session
                    .declare_subscriber(format!("{prefix}/stream/{}/{here_name}", e.key))
                    .callback(move |s: Sample| {
                        let msg = s
                            .attachment()
                            .ok_or_else(|| {
                                NetError::Protocol("a stream message without its header".into())
                            })
                            .and_then(|a| {
                                StreamMsg::decode_all(&a.to_bytes())
                                    .map_err(|x| NetError::Protocol(x.to_string()))
                            });
                        arrived.arrived(msg.map(|m| Batch::new(m, s.payload().clone())));
                    })
                    .wait()
                    .map_err(|x| NetError::Zenoh(x.to_string()))?;
                self.subscribers.push(sub);
                self.pending.push(Box::new(move || bridge.run()));
            }
        }
        Ok(())
    }
}

/// Notes in [`refusals`] every link whose certificate names no host this
/// host can accept: a name outside the run, this host's own name, or a
/// host that is linked already from another peer. The access control
/// drops whatever such a peer says; this only tells why.
fn watch_links(
    session: &Session,
    p: &Pipeline,
    here: &str,
) -> Result<zenoh::session::LinkEventsListener<()>, NetError> {
    let hosts = p.placement.hosts.clone();
    let here = here.to_owned();
    // Peer id → the name its certificate gives.
    let named: Mutex<BTreeMap<String, String>> = Mutex::new(BTreeMap::new());
    session
        .info()
        .link_events_listener()
        .history(true)
        .callback(move |ev: zenoh::session::LinkEvent| {
            let link = ev.link();
            let peer = link.zid().to_string();
            let mut named = named.lock().unwrap_or_else(|e| e.into_inner());
            if ev.kind() == SampleKind::Delete {
                named.remove(&peer);
                return;
            }
            let at = link.dst().to_string();
            let Some(name) = link.auth_identifier().map(str::to_owned) else {
                refusals().note(format!("a peer at {at} without a certificate name"));
                return;
            };
            if !hosts.contains(&name) {
                refusals().note(format!(
                    "a peer at {at} with a certificate for {name:?}, not a host of this run (hosts: {})",
                    hosts.join(", ")
                ));
            } else if name == here {
                refusals().note(format!(
                    "a peer at {at} with the certificate of this host ({name:?}): it may speak only as {name}"
                ));
            } else if named.iter().any(|(z, n)| *n == name && *z != peer) {
                refusals().note(format!(
                    "a second peer at {at} with the certificate of host {name:?}: it may speak only as {name}"
                ));
            }
            named.insert(peer, name);
        })
        .wait()
        .map_err(|e| NetError::Zenoh(e.to_string()))
}

/// Runs `f` on this thread with Zenoh's own network runtime entered.
/// Zenoh's low-latency transport lists its links only from within a
/// Tokio runtime (zenoh-transport 1.10, `TransportUnicastLowlatency::get_links`
/// takes the current runtime's handle, and panics outside one; Zenoh's
/// session calls `block_in_place`, which refuses a current-thread
/// runtime): asking for a session's links from the driver's thread must
/// go through this.
///
/// Entering a runtime's handle starts no thread: a runtime of our own
/// would (its thread left its stack and allocator arena behind, some
/// 60 KiB a host). Zenoh's `Net` runtime is the one its own call blocks
/// on, running already (with fastio-net's sizes, [`super::zenoh_runtime_for`],
/// it is handed over to Zenoh's application runtime).
fn in_runtime<T>(f: impl FnOnce() -> T) -> T {
    let _entered = zenoh_runtime::ZRuntime::Net.enter();
    f()
}
