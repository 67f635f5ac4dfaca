//! The driver's system calls (the only module of this crate with
//! `unsafe`; the crate root denies it elsewhere): reaping an operator with
//! its resource usage, signalling an operator's process group, tying an
//! operator's life to the driver's, and the clock tick of `/proc`'s CPU
//! times.

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

/// Makes the operator `cmd` spawns die (`SIGKILL`) when the driver's
/// thread that spawned it ends, however it ends: a driver killed with
/// `SIGKILL` leaves no operator running on behind it. (Linux ties the
/// signal to the spawning thread; the driver spawns from the thread that
/// runs the pipeline, which outlives every operator it waits for. The
/// operator's own children are not covered: it may do the same for them.)
pub(crate) fn die_with_driver(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: `getpid` reads our own pid.
    let driver = unsafe { libc::getpid() };
    // SAFETY: the closure runs in the child between fork and exec. It
    // makes three system calls (prctl, getppid, and errno's read), all
    // async-signal-safe, allocates nothing and takes no lock, so it cannot
    // deadlock on state another thread of the driver held at the fork.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The driver may have died before the call above: then no
            // signal will come, and the operator must not start.
            if libc::getppid() != driver {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// 64 random bits from the kernel (`/dev/urandom`).
pub(crate) fn random_u64() -> std::io::Result<u64> {
    use std::io::Read;
    let mut b = [0u8; 8];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}
