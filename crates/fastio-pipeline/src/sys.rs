//! The driver's system calls (the only module of this crate with
//! `unsafe`; the crate root denies it elsewhere): reaping an operator with
//! its resource usage, signalling an operator's process group, and the
//! clock tick of `/proc`'s CPU times.

/// Waits for our child `pid` to exit (retrying on `EINTR`): its wait
/// status and resource usage, or None when it cannot be waited for (not
/// our child, or already reaped).
pub(crate) fn wait_child(pid: i32) -> Option<(i32, libc::rusage)> {
    let mut status = 0;
    let mut usage = no_usage();
    loop {
        // SAFETY: wait4 with valid pointers to locals; the caller owns the
        // child (nothing else waits for it), so the pid is reaped once.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            return Some((status, usage));
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return None;
        }
    }
}

/// A resource usage of all zeros.
pub(crate) fn no_usage() -> libc::rusage {
    // SAFETY: an all-zero `rusage` is a valid value of the plain C struct.
    unsafe { std::mem::zeroed() }
}

/// Sends `sig` to the process group led by `pid`.
pub(crate) fn signal_group(pid: i32, sig: i32) {
    // SAFETY: kill(2) with a negative pid signals that process group and
    // touches no memory of ours; at worst the group no longer exists
    // (ESRCH), which is ignored.
    unsafe { libc::kill(-pid, sig) };
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`, the unit of CPU times
/// in `/proc/<pid>/stat`); 100 when it cannot be asked.
pub(crate) fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf reads a system constant; no memory of ours is involved.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(t).ok().filter(|&t| t > 0).unwrap_or(100)
}
