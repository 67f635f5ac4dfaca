//! Operators as processes: the command an operator runs with (its
//! environment, working directory, process group, death with the driver),
//! starting it with its output lines forwarded as events and its exit
//! reaped once (with `wait4`'s resource usage), stopping it (SIGTERM, then
//! SIGKILL), and the run's directories.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use fastio::plan::stream_env;
use fastio::{CONTEXT_ENV, OPERATOR_ENV};

use crate::driver::{DriverError, LocalDriver, OUTPUT_ENV, PAYLOAD_ENV, io_err};
use crate::pipeline::{IoType, Pipeline};
use crate::report::{OperatorReport, Outcome, Progress};
use crate::sys;

/// How long an exited operator's output is drained before its exit is
/// reported.
const OUTPUT_DRAIN: Duration = Duration::from_millis(500);

/// Lines of a failed operator's stderr kept for the error message.
const STDERR_TAIL: usize = 10;

/// What an operator's process did.
pub(crate) enum Event {
    Line(usize, bool, String),
    Exited(usize, i32, libc::rusage),
}

pub(crate) struct Running {
    pub(crate) pid: i32,
    pub(crate) started: Instant,
    pub(crate) term_sent: Option<Instant>,
    pub(crate) timed_out: bool,
    pub(crate) stopped: bool,
}

impl Running {
    /// An operator started just now as `pid`.
    pub(crate) fn new(pid: i32) -> Running {
        Running {
            pid,
            started: Instant::now(),
            term_sent: None,
            timed_out: false,
            stopped: false,
        }
    }
}

/// Passes on a line of an operator, keeping the last stderr lines in its
/// report (for the failure message).
pub(crate) fn line(
    progress: &mut dyn FnMut(Progress),
    rep: &mut OperatorReport,
    stderr: bool,
    text: String,
) {
    if stderr {
        rep.stderr_tail.push(text.clone());
        if rep.stderr_tail.len() > STDERR_TAIL {
            rep.stderr_tail.remove(0);
        }
    }
    progress(Progress::Line {
        operator: rep.name.clone(),
        stderr,
        text,
    });
}

/// Passes on the lines the last children printed after they exited.
pub(crate) fn late_lines(
    rx: &Receiver<Event>,
    progress: &mut dyn FnMut(Progress),
    reports: &mut [OperatorReport],
) {
    while let Ok(Event::Line(i, stderr, text)) = rx.try_recv() {
        line(progress, &mut reports[i], stderr, text);
    }
}

impl LocalDriver {
    fn command(&self, op: usize, ctx_handle: &str, dirs: &Dirs) -> Result<Command, DriverError> {
        let def = &self.pipeline.operators[op];
        let (program, args) = def
            .command
            .split_first()
            .ok_or_else(|| DriverError::NoCommand(def.name.clone()))?;
        let program = if program.contains('/') && Path::new(program).is_relative() {
            // Absolute: the child starts in the definition's directory, so
            // a path relative to ours would be resolved from there again.
            let p = self.opts.base_dir.join(program);
            std::path::absolute(&p).unwrap_or(p)
        } else {
            PathBuf::from(program)
        };
        let mut cmd = Command::new(program);
        cmd.args(args)
            .current_dir(&self.opts.base_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .env(CONTEXT_ENV, ctx_handle)
            .env(OPERATOR_ENV, &def.name)
            .env(OUTPUT_ENV, &dirs.output);
        if let Some(input) = &self.opts.input {
            cmd.env(
                PAYLOAD_ENV,
                std::path::absolute(input).unwrap_or_else(|_| input.clone()),
            );
        }
        for (k, v) in &self.opts.env {
            cmd.env(k, v);
        }
        for (k, v) in &def.variables {
            cmd.env(k, v);
        }
        // Killed with the driver: never an orphaned operator.
        crate::sys::die_with_driver(&mut cmd);
        for (name, dir) in dirs.streams.iter() {
            cmd.env(name, dir);
        }
        Ok(cmd)
    }

    /// Timeouts and the SIGTERM → SIGKILL escalation of a run that is
    /// `stopping`; true when a timeout starts the stop.
    pub(crate) fn escalate(&self, running: &mut BTreeMap<usize, Running>, stopping: bool) -> bool {
        let mut timed_out = false;
        for r in running.values_mut() {
            if let Some(limit) = self.opts.timeout
                && !r.timed_out
                && r.term_sent.is_none()
                && r.started.elapsed() > limit
            {
                r.timed_out = true;
                timed_out = true;
                signal_group(r.pid, libc::SIGTERM);
                r.term_sent = Some(Instant::now());
            }
        }
        if stopping || timed_out {
            for r in running.values_mut() {
                match r.term_sent {
                    None => {
                        r.stopped = !r.timed_out;
                        signal_group(r.pid, libc::SIGTERM);
                        r.term_sent = Some(Instant::now());
                    }
                    Some(at) if at.elapsed() > self.opts.grace => {
                        signal_group(r.pid, libc::SIGKILL);
                    }
                    Some(_) => {}
                }
            }
        }
        timed_out
    }

    pub(crate) fn spawn(
        &self,
        i: usize,
        handle: &str,
        dirs: &Dirs,
        tx: &Sender<Event>,
    ) -> Result<i32, DriverError> {
        let mut cmd = self.command(i, handle, dirs)?;
        let mut child = cmd.spawn().map_err(|e| DriverError::Io {
            path: PathBuf::from(&self.pipeline.operators[i].command[0]),
            source: e,
        })?;
        let pid = child.id() as i32;
        let mut closed = Vec::new();
        if let Some(out) = child.stdout.take() {
            closed.push(lines(out, i, false, tx.clone()));
        }
        if let Some(err) = child.stderr.take() {
            closed.push(lines(err, i, true, tx.clone()));
        }
        let tx = tx.clone();
        std::thread::spawn(move || {
            // `child` is never waited on by std (it is leaked below), so
            // the pid is reaped exactly once, here.
            let (status, usage) = sys::wait_child(pid).unwrap_or_else(|| {
                // Not waitable: report it as killed, with no usage.
                (libc::SIGKILL, sys::no_usage())
            });
            // Let the readers pass on the last lines first (the exit report
            // quotes stderr), but not forever: a descendant may keep the
            // pipes open.
            let deadline = Instant::now() + OUTPUT_DRAIN;
            for c in closed {
                let _ = c.recv_deadline(deadline);
            }
            let _ = tx.send(Event::Exited(i, status, usage));
            // Reaped above: std must not wait for it again.
            std::mem::forget(child);
        });
        Ok(pid)
    }
}

/// Fills in how operator `r` ended from its wait status and usage.
pub(crate) fn account(rep: &mut OperatorReport, r: &Running, status: i32, usage: &libc::rusage) {
    rep.wall = r.started.elapsed();
    // Summed over every run of the operator (restarts included).
    rep.cpu += tv(usage.ru_utime) + tv(usage.ru_stime);
    rep.peak_rss_kib = rep.peak_rss_kib.max(usage.ru_maxrss.max(0) as u64);
    rep.outcome = if r.timed_out {
        Outcome::TimedOut
    } else if r.stopped {
        Outcome::Stopped
    } else if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        Outcome::Succeeded
    } else if libc::WIFEXITED(status) {
        Outcome::Failed(libc::WEXITSTATUS(status))
    } else {
        Outcome::Signaled(libc::WTERMSIG(status))
    };
}

fn tv(t: libc::timeval) -> Duration {
    Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
}

/// Sends `sig` to the process group of `pid` (each operator leads its own).
fn signal_group(pid: i32, sig: i32) {
    sys::signal_group(pid, sig);
}

/// A new directory `fastio-run-<pid>-<16 random hex digits>` in the
/// temporary directory, mode 0700, made with `mkdir` so that nothing
/// already there (another user's directory or symbolic link) is ever used,
/// under a name another user cannot prepare for.
pub(crate) fn private_temp_dir() -> Result<PathBuf, DriverError> {
    use std::os::unix::fs::DirBuilderExt;
    let base = std::env::temp_dir();
    let mut last = None;
    for _ in 0..64u32 {
        let dir = base.join(format!(
            "fastio-run-{}-{:016x}",
            std::process::id(),
            sys::random_u64().map_err(io_err(&base))?
        ));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(dir),
            Err(e) => return Err(io_err(&dir)(e)),
        }
    }
    let dir = last.unwrap_or(base);
    Err(io_err(&dir)(std::io::Error::from(
        std::io::ErrorKind::AlreadyExists,
    )))
}

/// Forwards the lines of `stream` as events until it closes; the returned
/// channel disconnects then.
fn lines(
    stream: impl Read + Send + 'static,
    i: usize,
    stderr: bool,
    tx: Sender<Event>,
) -> Receiver<()> {
    let (done, closed) = crossbeam_channel::bounded::<()>(0);
    std::thread::spawn(move || {
        let _done = done;
        let mut r = BufReader::new(stream);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match r.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let text = String::from_utf8_lossy(&buf)
                        .trim_end_matches(['\n', '\r'])
                        .to_owned();
                    if tx.send(Event::Line(i, stderr, text)).is_err() {
                        break;
                    }
                }
            }
        }
    });
    closed
}

/// The directories of a run: the output root and one per stream output.
pub(crate) struct Dirs {
    pub(crate) output: PathBuf,
    streams: Vec<(String, PathBuf)>,
}

impl Dirs {
    pub(crate) fn make(p: &Pipeline, output: Option<&Path>) -> Result<Dirs, DriverError> {
        // Operators run in the definition's directory: give them absolute
        // paths.
        let output = match output {
            Some(o) => {
                let o = std::path::absolute(o).map_err(io_err(o))?;
                std::fs::create_dir_all(&o).map_err(io_err(&o))?;
                o
            }
            // Always a new directory: operators may write there even when
            // the definition has no disk stream output. Private to this
            // user, under a name nobody can guess, as mkdtemp makes it.
            None => private_temp_dir()?,
        };
        let mut streams = Vec::new();
        for op in &p.operators {
            for out in &op.outputs {
                if matches!(out.ty, IoType::Stream { .. }) {
                    let dir = output.join(&op.name).join(&out.name);
                    std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
                    streams.push((stream_env(&op.name, &out.name), dir));
                }
            }
        }
        Ok(Dirs { output, streams })
    }
}
