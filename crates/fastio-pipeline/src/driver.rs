//! The local driver, Clara's "Pod Manager" on one machine: the facade
//! ([`LocalDriver`]: [`LocalDriver::run`], [`LocalDriver::run_on_host`])
//! and what both kinds of run share before any operator starts: the
//! job's context sized for the plan, the published plan with the static
//! outputs pre-allocated and pre-faulted, and SIGINT/SIGTERM handling.
//!
//! The run itself is a value ([`crate::run`]): one-shot runs are scheduled
//! by `schedule.rs` (an operator starts as soon as the operators it reads
//! from have succeeded, in parallel up to `jobs`), streaming runs
//! supervised by `supervise.rs` (every operator up at once, restarts).
//! Operators are processes (`process.rs`). The context is anonymous by
//! default (a `memfd` the children inherit), so even a driver killed with
//! SIGKILL leaves nothing in `/dev/shm`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// Places in a run's context beyond its operators and the driver, for the
/// processes that watch it (`fastio record`, `fastio view`, several at
/// once), each attached as a participant (`fastio top` only reads).
pub const OBSERVER_PLACES: u32 = 8;

use fastio::plan::{EntryKind, POISON_PREFIX};
use fastio::{Context, ContextOptions};

use crate::hosts::HostLink;
use crate::pipeline::Pipeline;
use crate::report::{Progress, RunReport};
use crate::run::Run;

/// Environment variable naming the pipeline payload directory (`--input`).
pub const PAYLOAD_ENV: &str = "FASTIO_PAYLOAD";
/// Environment variable naming the job's output directory (`--output`).
pub const OUTPUT_ENV: &str = "FASTIO_OUTPUT";

/// Errors of the driver itself (operator failures are in the report).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DriverError {
    /// The context could not be created or prepared.
    #[error("context: {0}")]
    Context(#[from] fastio::Error),
    /// The recording (`--record`) could not be made.
    #[error("recording: {0}")]
    Record(#[from] fastio_record::Error),
    /// Recording was asked for where it is not supported.
    #[error("{0}")]
    RecordNotSupported(String),
    /// A recording to replay does not fit the pipeline.
    #[error("replay: {0}")]
    Replay(String),
    /// An operator has no command to run.
    #[error("operator {0} has no container command")]
    NoCommand(String),
    /// A directory could not be created.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A signal handler could not be installed.
    #[error("signal handler: {0}")]
    Signal(std::io::Error),
    /// The link to the other hosts of a multi-host run failed before any
    /// operator started (a host that did not join in time, say).
    #[error("{0}")]
    Link(#[source] crate::hosts::LinkError),
    /// `--host` names no host of the pipeline's placement.
    #[error("host {host:?} runs no operator of this pipeline (its hosts: {})", hosts.join(", "))]
    UnknownHost {
        /// The host asked for.
        host: String,
        /// The pipeline's hosts.
        hosts: Vec<String>,
    },
    /// `/dev/shm` cannot hold what the pipeline needs before its operators
    /// start (checked first: no operator is started).
    #[error(
        "the pipeline's {} need {} of shared memory, but /dev/shm has {} free; no operator was started (raise its size: `docker run --shm-size=2g`, a Kubernetes emptyDir with `medium: Memory`, or `mount -o remount,size=2G /dev/shm`)",
        if *streaming { "streams" } else { "static entries" },
        fastio::human_bytes(*need),
        fastio::human_bytes(*free)
    )]
    NoRoom {
        /// Bytes needed.
        need: u64,
        /// Bytes free.
        free: u64,
        /// Whether the need is the streams' slots (else static entries).
        streaming: bool,
    },
}

/// How to run a pipeline.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The payload directory (inputs without `from`).
    pub input: Option<PathBuf>,
    /// Where stream outputs go (a directory per output under it); a
    /// temporary directory when absent.
    pub output: Option<PathBuf>,
    /// Most operators running at once.
    pub jobs: usize,
    /// Longest an operator may run.
    pub timeout: Option<Duration>,
    /// Between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// Extra context bytes beyond the static entries (for dynamic ones).
    pub headroom: u64,
    /// A named context under `/dev/shm` (for operators started outside the
    /// driver) instead of an anonymous one.
    pub named_context: bool,
    /// Keep the (named) context's segment after the run, to inspect.
    pub keep_context: bool,
    /// Where relative command paths are resolved (the definition's
    /// directory).
    pub base_dir: PathBuf,
    /// Environment variables for every operator, beside the definition's.
    pub env: Vec<(String, String)>,
    /// Record the run to this MCAP file (`fastio-record`): every stream,
    /// losslessly (the recorder is one more consumer of each), or every
    /// entry a one-shot job published. Overrides `streaming.record`.
    pub record: Option<PathBuf>,
    /// A one-shot run's recording (`--record`) to feed the run from: every
    /// operator whose outputs are all in it is not run; its entries are
    /// published from the file, so the rest runs on the recorded data.
    pub replay: Option<PathBuf>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            input: None,
            output: None,
            jobs: std::thread::available_parallelism().map_or(2, |n| n.get()),
            timeout: None,
            grace: Duration::from_secs(3),
            headroom: 256 << 20,
            named_context: false,
            keep_context: false,
            base_dir: PathBuf::from("."),
            env: Vec::new(),
            record: None,
            replay: None,
        }
    }
}

/// Runs a validated pipeline on this machine.
#[derive(Debug)]
pub struct LocalDriver {
    pub(crate) pipeline: Pipeline,
    pub(crate) opts: RunOptions,
}

pub(crate) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> DriverError + '_ {
    move |source| DriverError::Io {
        path: path.to_owned(),
        source,
    }
}

impl LocalDriver {
    /// A driver for `pipeline`.
    pub fn new(pipeline: Pipeline, opts: RunOptions) -> LocalDriver {
        LocalDriver { pipeline, opts }
    }

    pub(crate) fn context(&self) -> Result<Context, DriverError> {
        let mut bytes = 0u64;
        // What must be backed before any operator starts: every stream's
        // slots, or every static entry.
        let mut needed = 0u64;
        if let Some(st) = &self.pipeline.plan.streaming {
            let _ = st;
            for e in 0..self.pipeline.plan.entries.len() {
                let o = self.stream_options(e)?;
                let reserved = o.reserved_bytes().unwrap_or(u64::MAX / 4);
                needed = needed.saturating_add(reserved);
                bytes += reserved + 4096;
            }
        }
        let streaming = self.pipeline.plan.streaming.is_some();
        for e in self
            .pipeline
            .plan
            .entries
            .iter()
            .filter(|e| e.is_static() && !streaming)
        {
            let elem = e.element.size() as u64;
            let n: u64 = e.shape.iter().map(|d| d.unwrap_or(0) as u64).product();
            needed = needed.saturating_add(n * elem);
            // Size classes round up by at most 1/8, plus a page.
            bytes += n * elem + n * elem / 8 + 4096;
        }
        // A named context lives in /dev/shm, whose size bounds it (64 MiB
        // in a default Docker container); an anonymous one is a memfd,
        // bounded by memory, not by /dev/shm.
        let named = self.opts.named_context || self.opts.keep_context;
        if let Some(free) = fastio::shm_free_bytes().filter(|_| named)
            && needed > free
        {
            return Err(DriverError::NoRoom {
                need: needed,
                free,
                streaming: self.pipeline.plan.streaming.is_some(),
            });
        }
        let entries = self.pipeline.plan.entries.len() as u32;
        let opts = ContextOptions::new()
            .capacity(bytes + self.opts.headroom)
            .max_allocations(4 * entries + 64)
            .max_names(2 * entries + 64)
            .max_participants(
                (self.pipeline.operators.len() as u32 + 1 + OBSERVER_PLACES).clamp(4, 64),
            )
            .anonymous(!(self.opts.named_context || self.opts.keep_context))
            .persist(self.opts.keep_context);
        Ok(Context::new(&opts)?)
    }

    /// Publishes the plan and pre-allocates (and pre-faults) every static
    /// output under its entry name.
    pub(crate) fn prepare(
        &self,
        ctx: &Context,
        local: &dyn Fn(usize) -> bool,
    ) -> Result<(), DriverError> {
        self.pipeline.plan.publish(ctx)?;
        // Entries produced on another host arrive in fresh allocations
        // (the link publishes them); only ours are pre-allocated.
        for e in self
            .pipeline
            .plan
            .entries
            .iter()
            .filter(|e| e.is_static() && local(e.producer))
        {
            let element = dtype::Type::primitive(e.element);
            let shape: Vec<usize> = e.shape.iter().map(|d| d.unwrap_or(0)).collect();
            let mut a = ctx.create_array(element, &shape)?;
            a.map_mut()?.fill(0);
            a.publish(&e.key)?;
            a.release()?;
        }
        Ok(())
    }

    /// Runs the pipeline; `progress` sees starts, output lines and ends.
    pub fn run(&self, mut progress: impl FnMut(Progress)) -> Result<RunReport, DriverError> {
        with_signals(|interrupted| self.run_with(None, interrupted, &mut progress))
    }

    /// Runs this host's part of a pipeline placed on several hosts: the
    /// operators placed on `link.host()`, in a local context, with the
    /// entries (and the frames of streams) that cross hosts carried by
    /// `link`. The report lists the other hosts' operators as
    /// [`crate::Outcome::Elsewhere`]; a failure on any host is the run's failure.
    pub fn run_on_host(
        &self,
        link: &mut dyn HostLink,
        mut progress: impl FnMut(Progress),
    ) -> Result<RunReport, DriverError> {
        let placement = &self.pipeline.placement;
        if placement.host_index(link.host()).is_none() {
            return Err(DriverError::UnknownHost {
                host: link.host().to_owned(),
                hosts: placement.hosts.clone(),
            });
        }
        if self.record_path().is_some() || self.opts.replay.is_some() {
            return Err(DriverError::RecordNotSupported(
                "recording a run across hosts is not supported: record on one host, or \
                 record its streams with `fastio record`"
                    .into(),
            ));
        }
        with_signals(|interrupted| self.run_with(Some(link), interrupted, &mut progress))
    }

    /// One run under the policy its plan asks for: the streaming
    /// supervisor or the one-shot scheduler.
    fn run_with<'d>(
        &'d self,
        link: Option<&'d mut dyn HostLink>,
        interrupted: &'d AtomicBool,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<RunReport, DriverError> {
        let mut run = Run::new(self, link, interrupted, Instant::now())?;
        if self.pipeline.plan.streaming.is_some() {
            self.supervise(run, progress)
        } else {
            self.schedule(&mut run, progress)?;
            Ok(run.finish(progress))
        }
    }

    /// Bytes of the shared-memory outputs operator `i` produced.
    pub(crate) fn bytes_of(&self, ctx: &Context, i: usize) -> u64 {
        self.pipeline.plan.operators[i]
            .outputs
            .iter()
            .filter_map(|(_, e)| ctx.get(&self.pipeline.plan.entries[*e].key).ok())
            .map(|a| a.size())
            .sum()
    }

    /// Marks every output of the failed operator `i` poisoned and withdraws
    /// its allocation, so no consumer maps torn data.
    pub(crate) fn poison(&self, ctx: &Context, i: usize) {
        let name = &self.pipeline.operators[i].name;
        for (_, e) in &self.pipeline.plan.operators[i].outputs {
            let key = &self.pipeline.plan.entries[*e].key;
            if let Ok(a) = ctx.get(key) {
                let _ = a.free();
            }
            if let Ok(mut m) = ctx.create(name.len().max(1) as u64) {
                if let Ok(mut w) = m.map_mut() {
                    w[..name.len()].copy_from_slice(name.as_bytes());
                }
                let _ = m.publish(&format!("{POISON_PREFIX}{key}"));
            }
        }
    }

    /// The text of every string entry nobody consumes.
    pub(crate) fn results(&self, ctx: &Context) -> Vec<(String, String)> {
        self.pipeline
            .plan
            .entries
            .iter()
            .filter(|e| e.kind == EntryKind::String && e.consumers.is_empty())
            .filter_map(|e| {
                let m = ctx.map(&e.key).ok()?;
                let end = m.iter().rposition(|&b| b != 0).map_or(0, |k| k + 1);
                Some((
                    e.name.clone(),
                    String::from_utf8_lossy(&m[..end]).into_owned(),
                ))
            })
            .collect()
    }
}

/// Runs `f` with SIGINT and SIGTERM setting the flag it is given (the run
/// then stops every operator), and the handlers removed afterwards.
fn with_signals(
    f: impl FnOnce(&AtomicBool) -> Result<RunReport, DriverError>,
) -> Result<RunReport, DriverError> {
    let interrupted = Arc::new(AtomicBool::new(false));
    let mut sig_ids = Vec::new();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        match signal_hook::flag::register(sig, interrupted.clone()) {
            Ok(id) => sig_ids.push(id),
            Err(e) => {
                for id in sig_ids {
                    signal_hook::low_level::unregister(id);
                }
                return Err(DriverError::Signal(e));
            }
        }
    }
    let result = f(&interrupted);
    for id in sig_ids {
        signal_hook::low_level::unregister(id);
    }
    result
}
