//! `fastio view` (a running streaming run, live in Foxglove) and the
//! viewer of `fastio run --view ADDR` (crate `fastio-view`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use clap::Args;
use fastio::observe::{Observer, Snapshot};
use fastio_pipeline::snapshot::{OperatorState, RunSnapshot};
use fastio_pipeline::{Progress, RunReport};
use fastio_view::{LogLevel, OperatorNumbers, RunEnd, ViewOptions, Viewer};

use crate::Failure;
use crate::contexts::{FoundRun, RunSelector, find_run};

/// `fastio view`.
#[derive(Args)]
pub(crate) struct ViewArgs {
    /// The run's context: its name in /dev/shm (`--named-context` runs)
    /// or a memfd as `/proc/PID/fd/N` (`fastio top` lists both). Default:
    /// the only streaming run of this user (of --pipeline, if given).
    #[arg(long, value_name = "CONTEXT")]
    context: Option<String>,
    /// The pipeline whose run to show.
    #[arg(long, value_name = "NAME")]
    pipeline: Option<String>,
    /// Where Foxglove connects (`ws://ADDR`; Foxglove: Open connection →
    /// Foxglove WebSocket). The protocol has no authentication: beyond
    /// loopback, use an SSH tunnel (docs/observing.md).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8765")]
    listen: String,
    /// Most messages a second per channel (frames per stream, log lines).
    #[arg(long, value_name = "N", default_value_t = fastio_view::DEFAULT_RATE)]
    rate: f64,
    /// Most messages queued for one client; a client that reads slower
    /// loses the oldest. A client that stops reading holds at most this
    /// many messages, each at most the largest frame: lower it for large
    /// images (docs/observing.md).
    #[arg(long, value_name = "N", default_value_t = fastio_view::DEFAULT_BACKLOG,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    backlog: usize,
    /// Wait up to this many seconds for the run to start (default: it must
    /// be running already).
    #[arg(long, value_name = "SECS")]
    wait: Option<f64>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Starts a viewer on `listen` (`flag` names the option in errors),
/// saying where it is, and warning when it listens beyond loopback.
fn start(
    listen: &str,
    rate: f64,
    backlog: usize,
    name: &str,
    flag: &str,
) -> Result<Viewer, Failure> {
    let addr: SocketAddr = listen.parse().map_err(|_| Failure {
        message: format!("{flag} {listen:?}: expected IP:PORT (127.0.0.1:8765)"),
        code: 2,
    })?;
    let mut opts = ViewOptions::new(addr, name);
    opts.rate = rate;
    opts.backlog = backlog;
    let say: Arc<dyn Fn(String) + Send + Sync> = Arc::new(|line| eprintln!("{line}"));
    let viewer = Viewer::start(&opts, say).map_err(|e| Failure {
        message: format!("{flag} {listen}: {e}"),
        code: 2,
    })?;
    let at = viewer.local_addr();
    if !at.ip().is_loopback() {
        eprintln!(
            "fastio: warning: the viewer listens on {at}, beyond this machine, and Foxglove's \
             protocol has no authentication: whoever reaches it sees the run (an SSH tunnel \
             keeps it on loopback: docs/observing.md)"
        );
    }
    eprintln!(
        "fastio: viewer of {name} at ws://{at} (Foxglove: Open connection → Foxglove WebSocket)"
    );
    Ok(viewer)
}

/// Shows every stream of `found` (an observer each, opened while a client
/// subscribes).
fn add_streams(viewer: &mut Viewer, found: &FoundRun) -> Result<(), Failure> {
    let max_shapes = found
        .plan
        .streaming
        .as_ref()
        .map(|s| s.max_shapes.clone())
        .unwrap_or_default();
    for (e, entry) in found.plan.entries.iter().enumerate() {
        let ctx = found.ctx.clone();
        let key = entry.key.clone();
        let max = max_shapes.get(e).cloned().unwrap_or_default();
        viewer
            .add_stream(&entry.name, entry.element, &max, move || {
                ctx.stream_tap(&key)
            })
            .map_err(|e| Failure {
                message: format!("view: {e}"),
                code: 1,
            })?;
    }
    Ok(())
}

/// Each operator's numbers from an observer's snapshot, as `fastio top`
/// reads them (restarts are known to the driver only).
fn numbers_observed(s: &Snapshot) -> Vec<OperatorNumbers> {
    let Some(plan) = &s.plan else {
        return Vec::new();
    };
    let pids = crate::top::operator_pids(s);
    plan.operators
        .iter()
        .map(|o| {
            let found = pids.get(&o.name.to_lowercase()).copied();
            let usage = found.and_then(|(pid, _)| {
                fastio_pipeline::snapshot::process_usage(i32::try_from(pid).ok()?)
            });
            OperatorNumbers {
                name: o.name.clone(),
                state: match found {
                    Some((_, true)) => "running".into(),
                    Some((_, false)) => "dead".into(),
                    None => "not attached".into(),
                },
                pid: found.map(|(pid, _)| pid),
                cpu_seconds: usage.map(|(cpu, _)| cpu.as_secs_f64()),
                rss_bytes: usage.map(|(_, rss)| rss),
                restarts: None,
                stats: s
                    .operator_stats
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case(&o.name))
                    .map(|(_, st)| st.clone()),
            }
        })
        .collect()
}

/// Each operator's numbers from the driver's snapshot.
fn numbers_of_run(s: &RunSnapshot) -> Vec<OperatorNumbers> {
    s.operators
        .iter()
        .map(|o| OperatorNumbers {
            name: o.name.clone(),
            state: match &o.state {
                OperatorState::Waiting => "waiting".into(),
                OperatorState::Running => "running".into(),
                OperatorState::Finished(outcome) => crate::run_cmd::outcome_text(outcome),
            },
            pid: o.pid.and_then(|p| u32::try_from(p).ok()),
            cpu_seconds: Some(o.cpu.as_secs_f64()),
            rss_bytes: Some(o.rss_bytes),
            restarts: Some(o.restarts),
            stats: o.stats.clone(),
        })
        .collect()
}

/// `fastio view`: a running run's streams, operators and end, until the
/// run ends or Ctrl-C (the run goes on).
pub(crate) fn view(args: ViewArgs) -> Result<(), Failure> {
    // Not under SCHED_IDLE, as the lossy recorder is: on a busy machine a
    // viewer there got no CPU time for seconds, and its clients nothing.
    // Its cost is bounded by the rate instead (docs/observing.md).
    let sel = RunSelector {
        context: args.context.as_deref(),
        pipeline: args.pipeline.as_deref(),
        created_by: None,
    };
    let wait = args.wait.unwrap_or(0.0);
    if !(wait >= 0.0 && wait.is_finite()) {
        return Err(Failure {
            message: format!("--wait {wait}: expected a number of seconds"),
            code: 2,
        });
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).map_err(|e| Failure {
            message: format!("view: signal handler: {e}"),
            code: 1,
        })?;
    }
    let until = Instant::now() + Duration::from_secs_f64(wait.min(86_400.0));
    let found = loop {
        match find_run(&sel, "view") {
            Ok(found) => break found,
            Err(e) if Instant::now() >= until || stop.load(Ordering::Relaxed) => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    let pipeline = found.plan.pipeline.clone();
    let mut viewer = start(&args.listen, args.rate, args.backlog, &pipeline, "--listen")?;
    add_streams(&mut viewer, &found)?;
    // Looked at through our own descriptor of it: the process it was found
    // in may let go of its own before the run ends.
    let target = match &found.file {
        Some(f) => format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(f)),
        None => found.target.clone(),
    };
    let mut poisoned: Vec<String> = Vec::new();
    let ended = loop {
        if stop.load(Ordering::Relaxed) {
            break false;
        }
        let snapshot = Observer::open(&target).and_then(|o| o.snapshot());
        match snapshot {
            Ok(s) if !s.context.closed && s.context.creator_alive => {
                viewer.operators(&numbers_observed(&s));
                poisoned = s.poisoned.clone();
            }
            // Closed, its driver gone, or no more to open: the run is over.
            _ => break true,
        }
        // A second, in steps that see Ctrl-C.
        for _ in 0..10 {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    if ended {
        let end = if poisoned.is_empty() {
            RunEnd {
                succeeded: None,
                text: "the run ended (seen from outside its driver: how, `fastio run` says)".into(),
                failure: None,
            }
        } else {
            RunEnd {
                succeeded: Some(false),
                text: format!("the run failed: poisoned {}", poisoned.join(", ")),
                failure: None,
            }
        };
        viewer.end(&pipeline, &end);
        eprintln!("fastio: view: {}", end.text);
    } else {
        eprintln!("fastio: view: stopped (the run goes on)");
    }
    viewer.finish(Duration::from_secs(2));
    drop(found);
    Ok(())
}

/// The viewer of `fastio run --view ADDR`: its own run's streams (found
/// by a thread once the driver made them), the driver's snapshots and
/// lines, and the run's end.
pub(crate) struct RunView {
    viewer: Arc<Mutex<Option<Viewer>>>,
    pipeline: String,
    stop: Arc<AtomicBool>,
    attach: Option<std::thread::JoinHandle<Option<FoundRun>>>,
}

impl RunView {
    /// Listens on `listen`; a thread finds the run's context once the
    /// driver made it and adds its streams.
    pub(crate) fn start(
        listen: &str,
        rate: f64,
        backlog: usize,
        pipeline: &str,
    ) -> Result<RunView, Failure> {
        let (listen, name) = (listen.to_owned(), pipeline.to_owned());
        let (tx, rx) = std::sync::mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let viewer: Arc<Mutex<Option<Viewer>>> = Arc::new(Mutex::new(None));
        let (v, s) = (viewer.clone(), stop.clone());
        let attach = std::thread::spawn(move || {
            match start(&listen, rate, backlog, &name, "--view") {
                Ok(started) => {
                    *lock(&v) = Some(started);
                    let _ = tx.send(Ok(()));
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return None;
                }
            }
            let me = std::process::id();
            let sel = RunSelector {
                context: None,
                pipeline: None,
                created_by: Some(me),
            };
            // Until the driver made the streams, or the run ended.
            let mut last = String::new();
            while !s.load(Ordering::Relaxed) {
                match find_run(&sel, "--view") {
                    Ok(found) => {
                        let added = lock(&v).as_mut().map(|v| add_streams(v, &found));
                        if let Some(Err(e)) = added {
                            eprintln!("fastio: {}", e.message);
                        }
                        return Some(found);
                    }
                    Err(e) => last = e.message,
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            if !last.is_empty() && !s.load(Ordering::Relaxed) {
                eprintln!("fastio: {last}");
            }
            None
        });
        match rx.recv() {
            Ok(Ok(())) => Ok(RunView {
                viewer,
                pipeline: pipeline.to_owned(),
                stop,
                attach: Some(attach),
            }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Failure {
                message: "--view: the viewer's thread ended".into(),
                code: 1,
            }),
        }
    }

    fn with(&self, f: impl FnOnce(&Viewer)) {
        if let Some(v) = lock(&self.viewer).as_ref() {
            f(v);
        }
    }

    /// What the driver says, shown: snapshots as operator numbers, lines
    /// as logs.
    pub(crate) fn progress(&self, p: &Progress) {
        match p {
            Progress::Snapshot(s) => self.with(|v| v.operators(&numbers_of_run(s))),
            Progress::Line {
                operator,
                stderr,
                text,
            } => {
                let level = if *stderr {
                    LogLevel::Warning
                } else {
                    LogLevel::Info
                };
                self.with(|v| v.log(level, operator, text));
            }
            Progress::Started(op) => self.with(|v| v.log(LogLevel::Info, op, "started")),
            Progress::Finished(op, outcome) => {
                let level = if matches!(outcome, fastio_pipeline::Outcome::Succeeded) {
                    LogLevel::Info
                } else {
                    LogLevel::Error
                };
                let text = format!("ended: {}", crate::run_cmd::outcome_text(outcome));
                self.with(|v| v.log(level, op, &text));
            }
            Progress::Streams(_) => {}
        }
    }

    /// One of the driver's own lines (`streams: ...`).
    pub(crate) fn driver_line(&self, line: &str) {
        self.with(|v| v.log(LogLevel::Info, "fastio", line));
    }

    /// The run's end, then the viewer stops (clients get up to two seconds
    /// to take what is queued).
    pub(crate) fn end(mut self, report: Result<&RunReport, String>) {
        let end = match report {
            Ok(r) => match &r.failure {
                None if !r.interrupted => RunEnd {
                    succeeded: Some(true),
                    text: "succeeded".into(),
                    failure: None,
                },
                None => RunEnd {
                    succeeded: Some(false),
                    text: "interrupted".into(),
                    failure: None,
                },
                Some(f) => RunEnd {
                    succeeded: Some(false),
                    text: f.to_string(),
                    failure: Some(crate::run_cmd::failure_json(f)),
                },
            },
            Err(e) => RunEnd {
                succeeded: Some(false),
                text: e,
                failure: None,
            },
        };
        self.stop.store(true, Ordering::Relaxed);
        let found = self.attach.take().and_then(|t| t.join().ok()).flatten();
        if let Some(v) = lock(&self.viewer).take() {
            v.end(&self.pipeline, &end);
            v.finish(Duration::from_secs(2));
        }
        drop(found);
    }
}
