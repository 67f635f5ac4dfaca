//! The live contexts of this user on the machine: named ones in
//! `/dev/shm` and anonymous ones (memfds) held open by this user's
//! processes (`fastio top` watches them, `fastio record` records one).

use std::os::unix::fs::MetadataExt;

/// A context found on the machine.
pub(crate) struct Found {
    /// What to show: its name, or `memfd of pid P`.
    pub(crate) label: String,
    /// What `Observer::open` takes.
    pub(crate) target: String,
}

/// Named contexts in `/dev/shm` and anonymous ones (memfds) held open by
/// this user's processes, each once.
pub(crate) fn discover() -> Vec<Found> {
    let mut out = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for s in shm_core::list_segments(None).unwrap_or_default() {
        if let Ok(m) = std::fs::metadata(format!("/dev/shm/{}", s.name)) {
            seen.insert((m.dev(), m.ino()));
        }
        out.push(Found {
            label: s.name.clone(),
            target: s.name,
        });
    }
    let uid = rustix_uid();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    let mut pids: Vec<u32> = procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    pids.sort_unstable();
    for pid in pids {
        if std::fs::metadata(format!("/proc/{pid}"))
            .map(|m| m.uid())
            .ok()
            != Some(uid)
        {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let link = std::fs::read_link(fd.path()).unwrap_or_default();
            if !link.to_string_lossy().starts_with("/memfd:shm-core") {
                continue;
            }
            let Ok(m) = std::fs::metadata(fd.path()) else {
                continue;
            };
            if seen.insert((m.dev(), m.ino())) {
                out.push(Found {
                    label: format!(
                        "memfd of pid {pid} (fd {})",
                        fd.file_name().to_string_lossy()
                    ),
                    target: fd.path().display().to_string(),
                });
            }
        }
    }
    out
}

fn rustix_uid() -> u32 {
    std::fs::metadata("/proc/self").map_or(u32::MAX, |m| m.uid())
}

/// Which streaming run to find ([`find_run`]).
pub(crate) struct RunSelector<'a> {
    /// Its context, as `fastio top` lists it (a name in /dev/shm or a
    /// memfd as `/proc/PID/fd/N`); default: look through [`discover`].
    pub(crate) context: Option<&'a str>,
    /// Only a run of this pipeline.
    pub(crate) pipeline: Option<&'a str>,
    /// Only a context this process created (`fastio run --view` finds its
    /// own run).
    pub(crate) created_by: Option<u32>,
}

/// A streaming run found and attached.
pub(crate) struct FoundRun {
    /// Its context, attached.
    pub(crate) ctx: fastio::Context,
    /// The memfd opened to attach, kept open while attached.
    pub(crate) file: Option<std::fs::File>,
    /// Its published plan.
    pub(crate) plan: fastio::plan::Plan,
    /// What to call it.
    pub(crate) label: String,
    /// What `Observer::open` takes to look at it again.
    pub(crate) target: String,
}

/// The one streaming run of this user `sel` selects, attached (`fastio
/// record` and `fastio view`; `cmd` begins the error lines).
pub(crate) fn find_run(sel: &RunSelector<'_>, cmd: &str) -> Result<FoundRun, crate::Failure> {
    use std::os::fd::AsRawFd;

    use fastio::Context;
    use fastio::observe::Observer;

    let fail = |message: String| crate::Failure { message, code: 1 };
    let candidates: Vec<(String, String)> = match sel.context {
        Some(c) => vec![(c.to_owned(), c.to_owned())],
        None => discover()
            .into_iter()
            .map(|f| (f.label, f.target))
            .collect(),
    };
    let mut runs = Vec::new();
    for (label, target) in candidates {
        let Ok(snapshot) = Observer::open(&target).and_then(|o| o.snapshot()) else {
            if sel.context.is_some() {
                return Err(fail(format!("{cmd}: {target}: not a live context")));
            }
            continue;
        };
        if sel
            .created_by
            .is_some_and(|pid| snapshot.context.creator_pid != pid)
        {
            continue;
        }
        // A run that ended, still held open by someone (a viewer or a
        // recorder that has not let go yet), is no run to find.
        if sel.context.is_none() && (snapshot.context.closed || !snapshot.context.creator_alive) {
            continue;
        }
        let Some(plan) = snapshot.plan.filter(|p| p.streaming.is_some()) else {
            if sel.context.is_some() {
                return Err(fail(format!(
                    "{cmd}: {target}: not a streaming run (no plan with `streaming:`)"
                )));
            }
            continue;
        };
        if sel.pipeline.is_some_and(|p| p != plan.pipeline) {
            continue;
        }
        runs.push((label, target, plan));
    }
    let (label, target, plan) = match runs.len() {
        1 => runs.remove(0),
        0 => {
            return Err(fail(format!(
                "{cmd}: no streaming run{} of this user is running (`fastio top` lists contexts)",
                sel.pipeline
                    .map(|p| format!(" of pipeline {p:?}"))
                    .unwrap_or_default()
            )));
        }
        n => {
            let names: Vec<String> = runs
                .iter()
                .map(|(l, _, p)| format!("{} ({l})", p.pipeline))
                .collect();
            return Err(fail(format!(
                "{cmd}: {n} streaming runs: {}; choose with --context or --pipeline",
                names.join(", ")
            )));
        }
    };
    // A memfd of another process: open it here, attach by descriptor.
    let (ctx, file) = if target.starts_with('/') {
        let f = std::fs::File::options()
            .read(true)
            .write(true)
            .open(&target)
            .map_err(|e| fail(format!("{cmd}: {target}: {e}")))?;
        let ctx = Context::attach(&format!("fd:{}", f.as_raw_fd()))
            .map_err(|e| fail(format!("{cmd}: {label}: {e}")))?;
        (ctx, Some(f))
    } else {
        let ctx = Context::attach(&target).map_err(|e| fail(format!("{cmd}: {label}: {e}")))?;
        (ctx, None)
    };
    // The driver publishes its plan, then declares the streams.
    if let Some(e) = plan
        .entries
        .iter()
        .find(|e| ctx.stream_status(&e.key).is_err())
    {
        return Err(fail(format!(
            "{cmd}: {label}: stream {} is not there (yet)",
            e.name
        )));
    }
    Ok(FoundRun {
        ctx,
        file,
        plan,
        label,
        target,
    })
}
