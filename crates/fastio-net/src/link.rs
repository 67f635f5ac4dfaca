//! [`ZenohLink`]: the [`HostLink`] of one host, over Eclipse Zenoh.
//!
//! Key expressions of a run (`<run>` is `fastio/<pipeline>/<run id>`):
//!
//! | key | what |
//! |---|---|
//! | `<run>/host/<host>` | liveliness token of each host's driver |
//! | `<run>/op/<host>/<operator>` | liveliness token of each running operator |
//! | `<run>/status/<host>` | the host's [`Status`] lines |
//! | `<run>/entry/<operator>/<output>` | the pieces of an entry ([`ChunkHeader`]) |
//! | `<run>/stream/<operator>/<output>/<host>` | the frames of a stream for one consuming host ([`StreamMsg`], `streams.rs`) |
//! | `<run>/credit/<operator>/<output>/<host>` | frames that host has placed in its stream (u64, little-endian) |
//!
//! Joining: a host declares its publishers, then its subscribers, then its
//! liveliness subscribers, and last its own host token; it starts when it
//! has seen every host's token. Zenoh sends one session's declarations in
//! order, so a host whose token is seen has its subscribers declared: no
//! piece is sent before its reader exists.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TrySendError, bounded, unbounded};
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

use crate::streams::{Bridge, Credit, Forwarder, Incoming};
use crate::wire::{CHUNK_BYTES, ChunkHeader, Status, StreamMsg, decode_credit, entry_bytes};

/// How long after a host's token vanished its last status lines may
/// still arrive before it is judged gone.
const GRACE: Duration = Duration::from_millis(500);

/// How one host joins a run.
#[derive(Debug, Clone)]
pub struct NetOptions {
    /// This host (a host of the pipeline's placement).
    pub host: String,
    /// Tells runs of one pipeline apart (every host of a run gives the
    /// same): the keys are `fastio/<pipeline>/<run id>/...`.
    pub run_id: String,
    /// Zenoh endpoints to connect to (`tcp/10.0.0.2:7447`).
    pub connect: Vec<String>,
    /// Zenoh endpoints to listen on.
    pub listen: Vec<String>,
    /// Longest wait for every host to join.
    pub join_timeout: Duration,
    /// Zenoh's lease: a host silent this long is gone.
    pub lease: Duration,
    /// A Zenoh configuration file (json5) to start from; the options
    /// above are set on top of it.
    pub config_file: Option<PathBuf>,
    /// Whether to scout for peers by multicast (off: only the endpoints
    /// given, or the file's).
    pub multicast_scouting: bool,
}

impl NetOptions {
    /// Options for `host`, with the defaults: run id `run`, no endpoints,
    /// 60 s to join, a 3 s lease, no multicast scouting.
    pub fn new(host: &str) -> NetOptions {
        NetOptions {
            host: host.to_owned(),
            run_id: "run".into(),
            connect: Vec::new(),
            listen: Vec::new(),
            join_timeout: Duration::from_secs(60),
            lease: Duration::from_secs(3),
            config_file: None,
            multicast_scouting: false,
        }
    }

    /// The Zenoh configuration these options make.
    pub fn zenoh_config(&self) -> Result<zenoh::Config, String> {
        let mut c = match &self.config_file {
            Some(p) => zenoh::Config::from_file(p)
                .map_err(|e| format!("zenoh configuration {}: {e}", p.display()))?,
            None => zenoh::Config::default(),
        };
        let json = |v: &[String]| {
            let items: Vec<String> = v.iter().map(|s| format!("{s:?}")).collect();
            format!("[{}]", items.join(","))
        };
        let mut set = |key: &str, value: String| {
            c.insert_json5(key, &value)
                .map_err(|e| format!("zenoh configuration {key} = {value}: {e}"))
        };
        if self.config_file.is_none() {
            set("mode", "\"peer\"".into())?;
            set(
                "scouting/multicast/enabled",
                self.multicast_scouting.to_string(),
            )?;
            // One queue instead of one per priority: large entries move
            // about a third faster (`cargo xtask bench hosts`), and every
            // message of ours is data of one priority anyway.
            set("transport/unicast/qos/enabled", "false".into())?;
            // That queue holds 16 batches (Zenoh's most; 2 by default):
            // large entries move about a fifth faster, the sender filling
            // batches while earlier ones are written (`cargo xtask bench
            // hosts`; about 1 MiB more memory a link).
            set("transport/link/tx/queue/size/data", "16".into())?;
        }
        if !self.connect.is_empty() {
            set("connect/endpoints", json(&self.connect))?;
        }
        if !self.listen.is_empty() {
            set("listen/endpoints", json(&self.listen))?;
        }
        set(
            "transport/link/tx/lease",
            self.lease.as_millis().max(100).to_string(),
        )?;
        Ok(c)
    }
}

/// The key prefix of a run: `fastio/<pipeline>/<run id>`, the pipeline's
/// name folded to lower case with every character other than `a-z 0-9 _ -`
/// as `_`.
pub fn run_prefix(pipeline: &str, run_id: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                let c = c.to_ascii_lowercase();
                if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    format!("fastio/{}/{}", clean(pipeline), clean(run_id))
}

/// Whether `s` can be a run id: 1 to 63 characters of `a-z 0-9 _ -`.
pub fn valid_run_id(s: &str) -> bool {
    fastio_pipeline::placement::valid_host_name(s)
}

/// What a liveliness subscriber calls with a token's key (after the kind's
/// prefix) and whether it appeared or vanished.
type TokenHandler = fn(&Inner, &str, SampleKind);

/// What the Zenoh callbacks and the driver's side share.
#[derive(Default)]
pub(crate) struct State {
    /// Hosts whose token is there now.
    alive: BTreeSet<String>,
    /// Hosts whose token was ever seen.
    joined: BTreeSet<String>,
    /// Operators (by `host/op`) whose token is there now.
    running: BTreeSet<String>,
    /// Operators (by `host/op`) whose token was ever there.
    started: BTreeSet<String>,
    /// Hosts that ended their part, with their root cause.
    done: BTreeMap<String, Option<Failure>>,
    /// Remote operators that said they succeeded.
    succeeded: BTreeSet<usize>,
    /// Operators that ended, here or elsewhere.
    finished: BTreeSet<usize>,
    /// Entries received and published here (streams: ended here, with
    /// the frames placed).
    pub(crate) imported: BTreeMap<usize, u64>,
    /// Hosts that have room for an announced entry, by entry.
    ready: BTreeMap<usize, BTreeSet<String>>,
    /// Remote operators already reported done to the driver.
    reported: BTreeSet<usize>,
    /// Hosts found gone before they were done.
    lost: BTreeSet<String>,
    /// Hosts whose token vanished, and when (judged after [`GRACE`]).
    vanished: BTreeMap<String, Instant>,
    /// The root cause of what failed elsewhere.
    failure: RootCause,
}

pub(crate) struct Inner {
    pub(crate) pipeline: Pipeline,
    /// This host (index into the placement's hosts).
    pub(crate) here: usize,
    prefix: String,
    state: Mutex<State>,
    /// Signalled when a host says it is ready for an entry, or is gone.
    changed: Condvar,
    pub(crate) events: Sender<LinkEvent>,
}

impl Inner {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn op_index(&self, name: &str) -> Option<usize> {
        self.pipeline
            .operators
            .iter()
            .position(|o| o.name.eq_ignore_ascii_case(name))
    }

    /// Entries of operator `op` that an operator of this host reads.
    fn consumed_here(&self, op: usize) -> Vec<usize> {
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

    /// Tells the driver that remote `op` is done once every entry of it read
    /// here has arrived (or, when it has none, once it said it succeeded).
    fn maybe_ready(&self, st: &mut State, op: usize) {
        if st.reported.contains(&op) {
            return;
        }
        let need = self.consumed_here(op);
        // An entry is only sent once its producer has succeeded: having
        // all of them is news enough (no need to wait for the status).
        let said = st.succeeded.contains(&op) || !need.is_empty();
        if said && need.iter().all(|e| st.imported.contains_key(e)) {
            st.reported.insert(op);
            let bytes = need.iter().filter_map(|e| st.imported.get(e)).sum();
            let _ = self.events.send(LinkEvent::RemoteSucceeded { op, bytes });
        }
    }

    fn on_status(&self, host: &str, status: Status) {
        let mut st = self.lock();
        match status {
            Status::Started(_) | Status::Received(_) => {}
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
                    self.maybe_ready(&mut st, op);
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
        }
    }

    fn on_host_token(&self, host: &str, kind: SampleKind) {
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
    fn check_vanished(&self) {
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
    fn blame(&self, st: &State, host: &str) -> Option<Lost> {
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
        let due = p.placement.crossings(&p.plan).into_iter().find(|c| {
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

    fn on_op_token(&self, key: &str, kind: SampleKind) {
        let mut st = self.lock();
        match kind {
            SampleKind::Put => {
                st.started.insert(key.to_owned());
                st.running.insert(key.to_owned())
            }
            SampleKind::Delete => st.running.remove(key),
        };
    }

    pub(crate) fn host_gone(&self, host: &str) -> bool {
        self.lock().lost.contains(host)
    }
}

/// One host's link to the others of a run (see the module docs for the
/// keys). Made by [`ZenohLink::new`]; the driver calls the rest
/// ([`fastio_pipeline::LocalDriver::run_on_host`]).
pub struct ZenohLink {
    opts: NetOptions,
    inner: Arc<Inner>,
    events: Receiver<LinkEvent>,
    session: Option<Session>,
    status: Option<Arc<Publisher<'static>>>,
    entry_pubs: BTreeMap<usize, Arc<Publisher<'static>>>,
    subscribers: Vec<Subscriber<()>>,
    host_token: Option<LivelinessToken>,
    op_tokens: BTreeMap<usize, LivelinessToken>,
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

/// One piece of a published entry, lent to Zenoh without a copy: it keeps
/// the read-only mapping (and so the allocation) alive until Zenoh has
/// sent it.
struct Piece {
    map: Arc<fastio::MappedPublished>,
    start: usize,
    end: usize,
}

impl AsRef<[u8]> for Piece {
    fn as_ref(&self) -> &[u8] {
        &self.map.bytes()[self.start..self.end]
    }
}

impl ZenohLink {
    /// A link for `opts.host` in a run of `pipeline` (not connected yet:
    /// the driver starts it). Fails when the host is not one of the
    /// pipeline's or the run id is not a name.
    pub fn new(pipeline: &Pipeline, opts: NetOptions) -> Result<ZenohLink, String> {
        let here = pipeline.placement.host_index(&opts.host).ok_or_else(|| {
            format!(
                "host {:?} runs no operator of this pipeline (its hosts: {})",
                opts.host,
                pipeline.placement.hosts.join(", ")
            )
        })?;
        if !valid_run_id(&opts.run_id) {
            return Err(format!(
                "run id {:?} must be 1 to 63 characters of a-z 0-9 _ -",
                opts.run_id
            ));
        }
        // Zenoh's own log, when RUST_LOG asks for it (to stderr).
        zenoh::try_init_log_from_env();
        let (tx, rx) = unbounded();
        Ok(ZenohLink {
            inner: Arc::new(Inner {
                pipeline: pipeline.clone(),
                here,
                prefix: run_prefix(&pipeline.name, &opts.run_id),
                state: Mutex::new(State::default()),
                changed: Condvar::new(),
                events: tx,
            }),
            opts,
            events: rx,
            session: None,
            status: None,
            entry_pubs: BTreeMap::new(),
            subscribers: Vec::new(),
            host_token: None,
            op_tokens: BTreeMap::new(),
            workers: Vec::new(),
            pending: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
        })
    }

    /// The key prefix of this run.
    pub fn prefix(&self) -> &str {
        &self.inner.prefix
    }

    fn say(&self, status: &Status) {
        if let Some(p) = &self.status {
            let _ = p.put(status.encode()).wait();
        }
    }

    fn join(&mut self, ctx: &Context) -> Result<(), String> {
        let inner = self.inner.clone();
        let p = &inner.pipeline;
        let prefix = inner.prefix.clone();
        let here_name = self.opts.host.clone();
        let session = zenoh::open(self.opts.zenoh_config()?)
            .wait()
            .map_err(|e| format!("zenoh: cannot open a session: {e}"))?;
        // 1. Publishers: status, and each entry produced here that another
        //    host reads.
        // Every publisher of ours: reliable, blocking when the link is
        // full (back-pressure, never a dropped piece), sent at once.
        let publisher = |key: String| {
            session
                .declare_publisher(key)
                .congestion_control(CongestionControl::Block)
                .express(true)
                .wait()
                .map(Arc::new)
                .map_err(|e| format!("zenoh: {e}"))
        };
        self.status = Some(publisher(format!("{prefix}/status/{here_name}"))?);
        let streaming = p.plan.streaming.is_some();
        if streaming {
            // Streams: their publishers, subscribers and workers.
            self.declare_streams(&session, ctx, &publisher)?;
        }
        for c in p.placement.crossings(&p.plan) {
            if c.from == inner.here && !streaming {
                let key = &p.plan.entries[c.entry].key;
                let entry = publisher(format!("{prefix}/entry/{key}"))?;
                self.entry_pubs.insert(c.entry, entry);
            }
        }
        // 2. Subscribers: every host's status, and each entry read here
        //    whose producer is elsewhere.
        let i2 = inner.clone();
        let status_prefix = format!("{prefix}/status/");
        let here2 = here_name.clone();
        let sub = session
            .declare_subscriber(format!("{prefix}/status/*"))
            .callback(move |s: Sample| {
                let Some(host) = s.key_expr().as_str().strip_prefix(&status_prefix) else {
                    return;
                };
                if host == here2 {
                    return;
                }
                if let Ok(status) = Status::decode(&s.payload().to_bytes()) {
                    i2.on_status(host, status);
                }
            })
            .wait()
            .map_err(|e| format!("zenoh: {e}"))?;
        self.subscribers.push(sub);
        for c in p.placement.crossings(&p.plan) {
            if !c.to.contains(&inner.here) || streaming {
                continue;
            }
            let (tx, rx) = bounded::<(ChunkHeader, ZBytes)>(1);
            let import = Arc::new(Import {
                inner: inner.clone(),
                ctx: ctx.clone(),
                entry: c.entry,
                from: p.placement.hosts[c.from].clone(),
                status: self.status.clone(),
                stop: self.stop.clone(),
                begun: AtomicBool::new(false),
                receiving: Mutex::new(None),
            });
            let here_import = import.clone();
            let sub = session
                .declare_subscriber(format!("{prefix}/entry/{}", p.plan.entries[c.entry].key))
                .callback(move |s: Sample| {
                    let header = s
                        .attachment()
                        .ok_or_else(|| "a piece without its header".to_owned())
                        .and_then(|a| {
                            ChunkHeader::decode(&a.to_bytes()).map_err(|e| e.to_string())
                        });
                    let h = match header {
                        Ok(h) => h,
                        // Whatever it was, the entry cannot be trusted
                        // to arrive whole: fail it rather than wait.
                        Err(why) => {
                            here_import.fail(format!("a piece with a bad header: {why}"));
                            return;
                        }
                    };
                    let payload = s.payload();
                    // A sending of one message is received here, at once;
                    // a larger one is announced to the importer's thread,
                    // which makes room, and its pieces are placed here.
                    let whole = h.offset == 0 && payload.len() as u64 == h.total;
                    if whole && !here_import.begun.swap(true, Ordering::AcqRel) {
                        if let Err(why) = here_import.whole(&h, payload) {
                            here_import.fail(why);
                        }
                    } else if h.offset == 0 && !here_import.begun.swap(true, Ordering::AcqRel) {
                        // An announcement: the importer's thread makes room.
                        let _ = tx.send((h, payload.clone()));
                    } else if let Err(why) = here_import.piece(&h, payload) {
                        here_import.fail(why);
                    }
                })
                .wait()
                .map_err(|e| format!("zenoh: {e}"))?;
            self.subscribers.push(sub);
            let worker = Importer { import, rx };
            self.workers.push(std::thread::spawn(move || worker.run()));
        }
        // 3. Liveliness: hosts and operators (with what is there already).
        let watch: [(&str, TokenHandler); 2] =
            [("host", Inner::on_host_token), ("op", Inner::on_op_token)];
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
                .map_err(|e| format!("zenoh: {e}"))?;
            self.subscribers.push(sub);
        }
        // 4. Our own token, last.
        let token = session
            .liveliness()
            .declare_token(format!("{prefix}/host/{here_name}"))
            .wait()
            .map_err(|e| format!("zenoh: {e}"))?;
        self.host_token = Some(token);
        self.session = Some(session);
        // Judges vanished hosts until the run stops.
        let (i5, stop) = (inner.clone(), self.stop.clone());
        self.workers.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                i5.check_vanished();
                std::thread::sleep(Duration::from_millis(20));
            }
        }));
        // Every host must be there before anything starts.
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
            if missing.is_empty() {
                for work in self.pending.drain(..) {
                    self.workers.push(std::thread::spawn(work));
                }
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "host {here_name}: {} of pipeline {} did not join run {} within {:.0?} (connect: {}; listen: {})",
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
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Streams that cross hosts ([`crate::streams`]): on the producing
    /// host a publisher and a credit subscriber per consuming host, on a
    /// consuming host a subscriber and a credit publisher. The local
    /// streams' handles are taken now, before any operator starts; the
    /// forwarders and bridges start once every host has joined.
    fn declare_streams(
        &mut self,
        session: &Session,
        ctx: &Context,
        publisher: &dyn Fn(String) -> Result<Arc<Publisher<'static>>, String>,
    ) -> Result<(), String> {
        let inner = self.inner.clone();
        let p = &inner.pipeline;
        let prefix = &inner.prefix;
        let here = inner.here;
        let here_name = &p.placement.hosts[here];
        let window = p
            .plan
            .streaming
            .as_ref()
            .map_or(1, |s| u64::from(s.depth.max(1)));
        for c in p.placement.crossings(&p.plan) {
            let e = &p.plan.entries[c.entry];
            let fail = |x: fastio::Error| format!("stream {}: {x}", e.name);
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
                    let credit = Arc::new(Credit::default());
                    let c2 = credit.clone();
                    let sub = session
                        .declare_subscriber(format!("{prefix}/credit/{}/{to}", e.key))
                        .callback(move |s: Sample| {
                            if let Ok(n) = decode_credit(&s.payload().to_bytes()) {
                                c2.update(n);
                            }
                        })
                        .wait()
                        .map_err(|x| format!("zenoh: {x}"))?;
                    self.subscribers.push(sub);
                    let forwarder = Forwarder {
                        inner: inner.clone(),
                        entry: c.entry,
                        publisher: publisher(format!("{prefix}/stream/{}/{to}", e.key))?,
                        to,
                        consumer,
                        credit,
                        window,
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
                let (tx, rx) = bounded::<Incoming>(window as usize + 2);
                let overrun = Arc::new(AtomicBool::new(false));
                let o2 = overrun.clone();
                let sub = session
                    .declare_subscriber(format!("{prefix}/stream/{}/{here_name}", e.key))
                    .callback(move |s: Sample| {
                        let msg = s
                            .attachment()
                            .ok_or_else(|| "a stream message without its header".to_owned())
                            .and_then(|a| {
                                StreamMsg::decode(&a.to_bytes()).map_err(|x| x.to_string())
                            });
                        let item = msg.map(|m| (m, s.payload().clone()));
                        // Never waits: the credit bounds what is queued.
                        if let Err(TrySendError::Full(_)) = tx.try_send(item) {
                            o2.store(true, Ordering::Relaxed);
                        }
                    })
                    .wait()
                    .map_err(|x| format!("zenoh: {x}"))?;
                self.subscribers.push(sub);
                let bridge = Bridge {
                    inner: inner.clone(),
                    entry: c.entry,
                    from: p.placement.hosts[c.from].clone(),
                    producer,
                    rx,
                    overrun,
                    credit: publisher(format!("{prefix}/credit/{}/{here_name}", e.key))?,
                    stop: self.stop.clone(),
                };
                self.pending.push(Box::new(move || bridge.run()));
            }
        }
        Ok(())
    }

    fn export(&mut self, ctx: &Context, entry: usize) {
        let Some(publisher) = self.entry_pubs.get(&entry).cloned() else {
            return;
        };
        // One piece goes at once, from here; more may wait for readers to
        // make room, in a thread of their own.
        let one_piece = ctx
            .get(&self.inner.pipeline.plan.entries[entry].key)
            .is_ok_and(|a| a.size() <= CHUNK_BYTES as u64);
        let inner = self.inner.clone();
        let ctx = ctx.clone();
        let status = self.status.clone();
        let stop = self.stop.clone();
        let send = move || {
            let plan = &inner.pipeline.plan;
            let e = &plan.entries[entry];
            let result = send_entry(&ctx, &inner, entry, &publisher, &stop);
            if let Err(why) = result {
                let p = &inner.pipeline.placement;
                let to = p
                    .crossings(plan)
                    .into_iter()
                    .filter(|c| c.entry == entry)
                    .flat_map(|c| c.to.into_iter().map(|h| p.hosts[h].clone()))
                    .collect();
                let failure = Failure::Transfer {
                    entry: e.name.clone(),
                    from: p.hosts[inner.here].clone(),
                    to,
                    error: why,
                };
                if let Some(p) = &status {
                    let op = inner.pipeline.operators[e.producer].name.clone();
                    let said = Status::Failed {
                        op,
                        why: failure.to_json(),
                    };
                    let _ = p.put(said.encode()).wait();
                }
                let _ = inner.events.send(LinkEvent::Failed { failure });
            }
        };
        if one_piece {
            send();
        } else {
            self.workers.push(std::thread::spawn(send));
        }
    }
}

/// Sends the published entry `entry`: its announcement, then, once every
/// consuming host is ready, its bytes as pieces of at most
/// [`CHUNK_BYTES`].
fn send_entry(
    ctx: &Context,
    inner: &Inner,
    entry: usize,
    publisher: &Publisher<'static>,
    stop: &AtomicBool,
) -> Result<(), String> {
    let p = &inner.pipeline;
    let e = &p.plan.entries[entry];
    let readers: Vec<String> = p
        .placement
        .crossings(&p.plan)
        .into_iter()
        .filter(|c| c.entry == entry)
        .flat_map(|c| c.to)
        .map(|h| p.placement.hosts[h].clone())
        .collect();
    let map = Arc::new(ctx.map(&e.key).map_err(|x| x.to_string())?);
    let total = map.bytes().len();
    let mut shape: Vec<u64> = map
        .allocation()
        .dimensions()
        .iter()
        .map(|&d| d as u64)
        .collect();
    if entry_bytes(e.element, &shape) != Some(total as u64) {
        // An allocation without a shape of its element: send it flat.
        shape = vec![(total / e.element.size().max(1)) as u64];
    }
    let transfer = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ (u64::from(std::process::id()) << 32);
    let header = |offset: usize| ChunkHeader {
        kind: e.kind,
        element: e.element,
        shape: shape.clone(),
        total: total as u64,
        offset: offset as u64,
        transfer,
    };
    let piece = |start: usize, end: usize| {
        ZBytes::from(bytes::Bytes::from_owner(Piece {
            map: map.clone(),
            start,
            end,
        }))
    };
    if total <= CHUNK_BYTES {
        // One piece: the announcement carries the bytes (making room for
        // them takes a moment).
        return publisher
            .put(piece(0, total))
            .attachment(header(0).encode())
            .wait()
            .map_err(|x| x.to_string());
    }
    publisher
        .put(ZBytes::new())
        .attachment(header(0).encode())
        .wait()
        .map_err(|x| x.to_string())?;
    // A larger entry waits until every reader has made room, so that no
    // reader blocks Zenoh's receiving thread for long.
    {
        let mut st = inner.lock();
        loop {
            if let Some(gone) = readers.iter().find(|h| st.lost.contains(*h)) {
                return Err(format!("host {gone} went away"));
            }
            let ready = st.ready.get(&entry);
            if readers.iter().all(|h| ready.is_some_and(|r| r.contains(h))) {
                break;
            }
            if stop.load(Ordering::Relaxed) {
                return Err("the run stopped".into());
            }
            st = inner
                .changed
                .wait_timeout(st, Duration::from_millis(50))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
    let mut offset = 0usize;
    while offset < total {
        if stop.load(Ordering::Relaxed) {
            return Err("the run stopped".into());
        }
        let end = (offset + CHUNK_BYTES).min(total);
        publisher
            .put(piece(offset, end))
            .attachment(header(offset).encode())
            .wait()
            .map_err(|x| x.to_string())?;
        offset = end;
    }
    Ok(())
}

/// What receiving one entry from another host needs: where it goes (a
/// fresh allocation of the local context, published under its entry name)
/// and whom to tell.
struct Import {
    inner: Arc<Inner>,
    ctx: Context,
    entry: usize,
    from: String,
    status: Option<Arc<Publisher<'static>>>,
    stop: Arc<AtomicBool>,
    /// Set once a sending has begun here (in Zenoh's callback or in the
    /// importer's thread): an entry is received once.
    begun: AtomicBool,
    /// The entry being received in pieces, once the importer's thread has
    /// made room for it.
    receiving: Mutex<Option<Receiving>>,
}

/// An entry being received in pieces: its allocation (made by the
/// importer's thread before it said ready), its announcement, and the
/// bytes placed so far.
struct Receiving {
    alloc: fastio::Allocation,
    first: ChunkHeader,
    got: u64,
}

impl Import {
    /// Tells the driver that the entry cannot arrive.
    fn fail(&self, why: String) {
        let e = &self.inner.pipeline.plan.entries[self.entry];
        let here = &self.inner.pipeline.placement.hosts[self.inner.here];
        let _ = self.inner.events.send(LinkEvent::RemoteFailed {
            op: e.producer,
            failure: Failure::Transfer {
                entry: e.name.clone(),
                from: self.from.clone(),
                to: vec![here.clone()],
                error: why,
            },
        });
    }

    /// Checks an announcement (the first piece of a sending) against the
    /// plan; the dimensions to allocate.
    fn announced(&self, first: &ChunkHeader, payload: &ZBytes) -> Result<Vec<usize>, String> {
        let e = &self.inner.pipeline.plan.entries[self.entry];
        // The announcement: offset 0, and no bytes, or all of them.
        if first.offset != 0 || !(payload.is_empty() || payload.len() as u64 == first.total) {
            return Err(format!(
                "a sending starts with its announcement (offset 0, no bytes or all), not {} bytes at {}",
                payload.len(),
                first.offset
            ));
        }
        // The piece must be what the plan says the entry is.
        if first.kind != e.kind || first.element != e.element {
            return Err(format!(
                "a {:?} of {} arrived; the plan says {:?} of {}",
                first.kind, first.element, e.kind, e.element
            ));
        }
        let fits = first.shape.len() == e.shape.len()
            && first
                .shape
                .iter()
                .zip(&e.shape)
                .all(|(&got, want)| want.is_none_or(|w| w as u64 == got));
        if !fits && e.kind != EntryKind::String {
            return Err(format!(
                "shape {:?} arrived; the plan says {:?}",
                first.shape, e.shape
            ));
        }
        // (`ChunkHeader::decode` saw that `total` is what the shape needs.)
        first
            .shape
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| format!("dimension {d} is too large")))
            .collect()
    }

    /// A fresh allocation of the local context for the announced entry.
    fn allocate(&self, dims: &[usize]) -> Result<fastio::Allocation, String> {
        let e = &self.inner.pipeline.plan.entries[self.entry];
        self.ctx
            .create_array(dtype::Type::primitive(e.element), dims)
            .map_err(|x| x.to_string())
    }

    /// Publishes the received entry and tells the driver and the sender.
    fn publish(&self, alloc: fastio::Allocation, total: u64) -> Result<(), String> {
        let e = &self.inner.pipeline.plan.entries[self.entry];
        alloc
            .publish_and_release(&e.key)
            .map_err(|x| x.to_string())?;
        {
            let mut st = self.inner.lock();
            st.imported.insert(self.entry, total);
            self.inner.maybe_ready(&mut st, e.producer);
        }
        if let Some(p) = &self.status {
            let _ = p.put(Status::Received(e.key.clone()).encode()).wait();
        }
        Ok(())
    }

    /// A sending that came whole in one message, received in Zenoh's
    /// callback (no hand-over to another thread: the bytes are at most
    /// [`CHUNK_BYTES`], one copy into the allocation).
    fn whole(&self, header: &ChunkHeader, payload: &ZBytes) -> Result<(), String> {
        let dims = self.announced(header, payload)?;
        let mut alloc = self.allocate(&dims)?;
        {
            let mut map = alloc.map_mut().map_err(|x| x.to_string())?;
            copy_piece(&mut map, header, payload)?;
        }
        self.publish(alloc, header.total)
    }

    /// A piece after the announcement, received in Zenoh's callback
    /// straight into the allocation the importer's thread made (no
    /// hand-over, no piece waiting in memory). The last one publishes the
    /// entry; a bad one drops the allocation unpublished.
    fn piece(&self, h: &ChunkHeader, bytes: &ZBytes) -> Result<(), String> {
        let mut slot = self.receiving.lock().unwrap_or_else(|p| p.into_inner());
        let placed = match slot.as_mut() {
            None => Err(format!(
                "a piece at byte {} arrived before its entry was announced and made room for",
                h.offset
            )),
            Some(r) => Self::place(r, h, bytes),
        };
        match placed {
            Ok(true) => {
                if let Some(r) = slot.take() {
                    drop(slot);
                    self.publish(r.alloc, r.first.total)?;
                }
                Ok(())
            }
            Ok(false) => Ok(()),
            Err(why) => {
                // Dropping the allocation unpublished gives its memory
                // back: a half-received entry is never published.
                *slot = None;
                Err(why)
            }
        }
    }

    /// Copies one piece into the entry being received; whether it was the
    /// last.
    fn place(r: &mut Receiving, h: &ChunkHeader, bytes: &ZBytes) -> Result<bool, String> {
        if h.transfer != r.first.transfer || h.total != r.first.total || h.shape != r.first.shape {
            return Err("pieces of two sendings mixed".into());
        }
        if h.offset != r.got {
            return Err(format!(
                "a piece at byte {} arrived where byte {} was due",
                h.offset, r.got
            ));
        }
        let mut map = r.alloc.map_mut().map_err(|x| x.to_string())?;
        r.got = copy_piece(&mut map, h, bytes)?;
        Ok(r.got == r.first.total)
    }
}

/// Copies one piece into the entry's bytes; the offset after it.
fn copy_piece(map: &mut [u8], h: &ChunkHeader, bytes: &ZBytes) -> Result<u64, String> {
    let mut at = h.offset as usize;
    for slice in bytes.slices() {
        let end = at
            .checked_add(slice.len())
            .filter(|&end| end as u64 <= h.total && end <= map.len())
            .ok_or_else(|| format!("a piece runs past the entry's {} bytes", h.total))?;
        map[at..end].copy_from_slice(slice);
        at = end;
    }
    Ok(at as u64)
}

/// Makes room, in a thread of its own, for an entry that comes as
/// several pieces (committing a large allocation takes a while, and
/// Zenoh's receiving thread must not wait for it), then says it is ready;
/// the pieces are placed in Zenoh's callback ([`Import::piece`]).
struct Importer {
    import: Arc<Import>,
    rx: Receiver<(ChunkHeader, ZBytes)>,
}

impl Importer {
    fn run(self) {
        if let Err(why) = self.receive() {
            self.import.fail(why);
        }
    }

    /// The announcement; `None` when the run stops or the sending host is
    /// gone first.
    fn next(&self) -> Option<(ChunkHeader, ZBytes)> {
        loop {
            match self.rx.recv_timeout(Duration::from_millis(100)) {
                Ok(piece) => return Some(piece),
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return None,
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                    if self.import.stop.load(Ordering::Relaxed)
                        || self.import.inner.host_gone(&self.import.from)
                    {
                        return None;
                    }
                }
            }
        }
    }

    fn receive(&self) -> Result<(), String> {
        let imp = &self.import;
        let e = &imp.inner.pipeline.plan.entries[imp.entry];
        let Some((first, payload)) = self.next() else {
            return Ok(());
        };
        let dims = imp.announced(&first, &payload)?;
        // Room is made (the context commits the allocation when it is
        // created): the bytes may come.
        let alloc = imp.allocate(&dims)?;
        *imp.receiving.lock().unwrap_or_else(|p| p.into_inner()) = Some(Receiving {
            alloc,
            first,
            got: 0,
        });
        if let Some(p) = &imp.status {
            p.put(Status::Ready(e.key.clone()).encode())
                .wait()
                .map_err(|x| x.to_string())?;
        }
        Ok(())
    }
}

/// A failure another host sent (one line of JSON), naming that host for
/// an operator's failure; one that cannot be read is that host's failure.
fn read_failure(host: &str, json: &str) -> Failure {
    match Failure::from_json(json) {
        Ok(f) => f.on_host(host),
        Err(e) => Failure::HostFailed {
            host: host.to_owned(),
            error: format!("it sent a failure that cannot be read ({e})"),
        },
    }
}

impl HostLink for ZenohLink {
    fn host(&self) -> &str {
        &self.opts.host
    }

    fn start(&mut self, ctx: &Context) -> Result<(), String> {
        self.join(ctx)
    }

    fn events(&self) -> Receiver<LinkEvent> {
        self.events.clone()
    }

    fn operator_started(&mut self, op: usize) {
        let name = self.inner.pipeline.operators[op].name.clone();
        if let Some(s) = &self.session
            && let Ok(t) = s
                .liveliness()
                .declare_token(format!(
                    "{}/op/{}/{name}",
                    self.inner.prefix, self.opts.host
                ))
                .wait()
        {
            self.op_tokens.insert(op, t);
        }
        self.say(&Status::Started(name));
    }

    fn operator_finished(&mut self, ctx: &Context, op: usize, ended: Ended<'_>) {
        let name = self.inner.pipeline.operators[op].name.clone();
        self.inner.lock().finished.insert(op);
        match ended {
            Ended::Succeeded => {
                // A stream's frames went while it ran (its end with it).
                let outputs = &self.inner.pipeline.plan.operators[op].outputs;
                for (_, e) in outputs.clone() {
                    if self.inner.pipeline.plan.streaming.is_none() {
                        self.export(ctx, e);
                    }
                }
                self.say(&Status::Succeeded(name));
            }
            Ended::Failed(failure) => self.say(&Status::Failed {
                op: name,
                why: failure.to_json(),
            }),
            // Stopped because the run stops: the cause is told elsewhere.
            Ended::Stopped => {}
        }
        self.op_tokens.remove(&op);
    }

    fn finish(&mut self, failure: Option<&Failure>, interrupted: &AtomicBool) -> Option<Failure> {
        self.session.as_ref()?;
        self.say(&Status::Done(failure.map(Failure::to_json)));
        let here = self.opts.host.clone();
        loop {
            let waiting = {
                let st = self.inner.lock();
                self.inner
                    .pipeline
                    .placement
                    .hosts
                    .iter()
                    .any(|h| *h != here && !st.done.contains_key(h) && !st.lost.contains(h))
            };
            if !waiting || interrupted.load(Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.stop.store(true, Ordering::Relaxed);
        self.inner.lock().failure.get().cloned()
    }
}

/// How long closing the session may wait for peers to hear it.
const CLOSE_TIMEOUT: Duration = Duration::from_millis(300);

impl Drop for ZenohLink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.op_tokens.clear();
        self.host_token = None;
        self.subscribers.clear();
        if let Some(s) = self.session.take() {
            // Closing says goodbye to every peer; one that is gone (a cut
            // link) never answers, and Zenoh would wait 10 s for it by
            // default: the run is over, so the host's exit does not wait.
            // Zenoh's own close timeout is not public: the close runs in a
            // thread of its own, waited for at most CLOSE_TIMEOUT (it ends
            // by itself within Zenoh's 10 s).
            let (done, closed) = crossbeam_channel::bounded::<()>(1);
            let closing = std::thread::Builder::new()
                .name("fastio-net close".into())
                .spawn(move || {
                    let _ = s.close().wait();
                    let _ = done.send(());
                });
            if closing.is_ok() {
                let _ = closed.recv_timeout(CLOSE_TIMEOUT);
            }
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
