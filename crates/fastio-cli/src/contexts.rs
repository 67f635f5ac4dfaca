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
