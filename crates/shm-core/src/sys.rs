//! Every system call the crate makes itself, in one place. (Two go
//! through libraries instead: memmap2 maps and unmaps segments for
//! `mapping.rs`, and std lists `/dev/shm` for `reap.rs`.)
//!
//! rustix is used throughout; libc only for byte-range OFD locks
//! (`F_OFD_SETLK`/`F_OFD_GETLK` on a single byte), which rustix's
//! whole-file `fcntl_lock` cannot express, and for `F_GETFD` on a
//! descriptor number that may not be open (rustix takes only descriptors
//! that are), and for `sched_setscheduler` (rustix has no scheduling
//! policies).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use rustix::fs::{Mode, OFlags};

use crate::sync::AtomicU32;

/// Directory where POSIX shared-memory objects live on Linux.
pub(crate) const SHM_DIR: &str = "/dev/shm";

fn io_err(e: rustix::io::Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}

/// `shm_open(name, O_CREAT|O_EXCL|O_RDWR, 0600)`.
pub(crate) fn shm_create_excl(name: &str) -> io::Result<OwnedFd> {
    use rustix::shm::OFlags as S;
    rustix::shm::open(
        name,
        S::CREATE | S::EXCL | S::RDWR,
        Mode::from_raw_mode(0o600),
    )
    .map_err(io_err)
}

/// Gives a new object to group `gid`, mode 0660 (read and write for the
/// owner and the group, nothing for others).
pub(crate) fn share_with_group(fd: BorrowedFd<'_>, gid: u32) -> io::Result<()> {
    rustix::fs::fchown(fd, None, Some(rustix::fs::Gid::from_raw(gid))).map_err(io_err)?;
    rustix::fs::fchmod(fd, Mode::from_raw_mode(0o660)).map_err(io_err)
}

/// Opens an existing object under `/dev/shm` without following symlinks.
pub(crate) fn shm_open_existing(
    name: impl AsRef<std::ffi::OsStr>,
    write: bool,
) -> io::Result<OwnedFd> {
    let path = std::path::Path::new(SHM_DIR).join(name.as_ref());
    let acc = if write { OFlags::RDWR } else { OFlags::RDONLY };
    rustix::fs::open(
        path,
        acc | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(io_err)
}

/// `shm_unlink(name)`.
pub(crate) fn shm_unlink(name: impl AsRef<std::ffi::OsStr>) -> io::Result<()> {
    rustix::shm::unlink(name.as_ref()).map_err(io_err)
}

/// `memfd_create` with sealing allowed.
pub(crate) fn memfd(name: &str) -> io::Result<OwnedFd> {
    use rustix::fs::MemfdFlags as M;
    rustix::fs::memfd_create(name, M::CLOEXEC | M::ALLOW_SEALING).map_err(io_err)
}

/// Forbids shrinking a memfd (growth stays allowed), so no holder can make
/// another's mapping fault with `SIGBUS` by truncating.
pub(crate) fn seal_no_shrink(fd: BorrowedFd<'_>) -> io::Result<()> {
    rustix::fs::fcntl_add_seals(
        fd,
        rustix::fs::SealFlags::SHRINK | rustix::fs::SealFlags::SEAL,
    )
    .map_err(io_err)
}

/// Opens a new open file description of the same object (for a separate
/// OFD-lock owner), via `/proc/self/fd`.
pub(crate) fn reopen(fd: BorrowedFd<'_>, write: bool) -> io::Result<OwnedFd> {
    let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let acc = if write { OFlags::RDWR } else { OFlags::RDONLY };
    rustix::fs::open(path, acc | OFlags::CLOEXEC, Mode::empty()).map_err(io_err)
}

/// What `fstat` tells us about an object.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ObjStat {
    pub(crate) regular: bool,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) mode: u32,
    pub(crate) size: u64,
    pub(crate) dev: u64,
    pub(crate) ino: u64,
}

impl From<&rustix::fs::Stat> for ObjStat {
    fn from(st: &rustix::fs::Stat) -> ObjStat {
        ObjStat {
            regular: rustix::fs::FileType::from_raw_mode(st.st_mode)
                == rustix::fs::FileType::RegularFile,
            uid: st.st_uid,
            gid: st.st_gid,
            mode: st.st_mode & 0o7777,
            size: u64::try_from(st.st_size).unwrap_or(0),
            dev: st.st_dev,
            ino: st.st_ino,
        }
    }
}

pub(crate) fn fstat(fd: BorrowedFd<'_>) -> io::Result<ObjStat> {
    let st = rustix::fs::fstat(fd).map_err(io_err)?;
    Ok(ObjStat::from(&st))
}

/// `stat` of `/dev/shm/name` without following symlinks.
pub(crate) fn stat_name(name: impl AsRef<std::ffi::OsStr>) -> io::Result<ObjStat> {
    let path = std::path::Path::new(SHM_DIR).join(name.as_ref());
    let st = rustix::fs::lstat(path).map_err(io_err)?;
    Ok(ObjStat::from(&st))
}

pub(crate) fn ftruncate(fd: BorrowedFd<'_>, len: u64) -> io::Result<()> {
    rustix::fs::ftruncate(fd, len).map_err(io_err)
}

/// Allocates backing pages for `[0, len)` and extends the size if needed
/// (never shrinks). Turns later tmpfs exhaustion into `ENOSPC` here instead
/// of `SIGBUS` on first touch.
pub(crate) fn fallocate(fd: BorrowedFd<'_>, len: u64) -> io::Result<()> {
    rustix::fs::fallocate(fd, rustix::fs::FallocateFlags::empty(), 0, len).map_err(io_err)
}

/// Bytes free (for unprivileged users) in the file system of `fd`.
pub(crate) fn free_bytes(fd: BorrowedFd<'_>) -> Option<u64> {
    let st = rustix::fs::fstatvfs(fd).ok()?;
    st.f_bavail.checked_mul(st.f_frsize)
}

/// Bytes free (for unprivileged users) in the file system at `path`.
pub(crate) fn free_bytes_at(path: &str) -> Option<u64> {
    let st = rustix::fs::statvfs(path).ok()?;
    st.f_bavail.checked_mul(st.f_frsize)
}

/// Allocates backing store for `[offset, offset + len)` without changing
/// the object's size.
pub(crate) fn fallocate_range(fd: BorrowedFd<'_>, offset: u64, len: u64) -> io::Result<()> {
    use rustix::fs::FallocateFlags;
    rustix::fs::fallocate(fd, FallocateFlags::KEEP_SIZE, offset, len).map_err(io_err)
}

/// Frees the backing store of `[offset, offset + len)`; the range reads as
/// zeros afterwards and the object keeps its size.
pub(crate) fn punch_hole(fd: BorrowedFd<'_>, offset: u64, len: u64) -> io::Result<()> {
    use rustix::fs::FallocateFlags;
    let flags = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
    rustix::fs::fallocate(fd, flags, offset, len).map_err(io_err)
}

/// Reads exactly `buf.len()` bytes at `offset` (short object = error).
pub(crate) fn pread_exact(fd: BorrowedFd<'_>, buf: &mut [u8], offset: u64) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let n = rustix::io::pread(fd, &mut buf[done..], offset + done as u64).map_err(io_err)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        done += n;
    }
    Ok(())
}

/// Writes all of `buf` at `offset`.
pub(crate) fn pwrite_all(fd: BorrowedFd<'_>, buf: &[u8], offset: u64) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let n = rustix::io::pwrite(fd, &buf[done..], offset + done as u64).map_err(io_err)?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        done += n;
    }
    Ok(())
}

/// Kind of OFD lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LockKind {
    Read,
    Write,
}

fn ofd_fcntl(
    fd: BorrowedFd<'_>,
    cmd: libc::c_int,
    ty: libc::c_short,
    byte: u64,
) -> io::Result<libc::flock> {
    // SAFETY: `flock` is a plain C struct of integers; all-zero is valid.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = ty;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start =
        libc::off_t::try_from(byte).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    fl.l_len = 1;
    fl.l_pid = 0; // required for OFD commands
    // SAFETY: `fd` is a live descriptor for the duration of the call and
    // `fl` is a valid, exclusively borrowed `struct flock`, as F_OFD_* expect.
    let r = unsafe { libc::fcntl(fd.as_raw_fd(), cmd, &mut fl as *mut libc::flock) };
    if r == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(fl)
    }
}

/// Non-blocking OFD lock of one byte. `Ok(false)` if another open file
/// description holds a conflicting lock.
pub(crate) fn ofd_try_lock(fd: BorrowedFd<'_>, byte: u64, kind: LockKind) -> io::Result<bool> {
    let ty = match kind {
        LockKind::Read => libc::F_RDLCK,
        LockKind::Write => libc::F_WRLCK,
    } as libc::c_short;
    match ofd_fcntl(fd, libc::F_OFD_SETLK, ty, byte) {
        Ok(_) => Ok(true),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EACCES)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether any *other* open file description holds a lock on `byte`
/// (`F_OFD_GETLK` with a write-lock probe). The kernel drops OFD locks when
/// the last descriptor of their description closes, i.e. at process death.
pub(crate) fn ofd_is_locked(fd: BorrowedFd<'_>, byte: u64) -> io::Result<bool> {
    let fl = ofd_fcntl(fd, libc::F_OFD_GETLK, libc::F_WRLCK as libc::c_short, byte)?;
    Ok(fl.l_type != libc::F_UNLCK as libc::c_short)
}

/// `sched_setscheduler(0, SCHED_IDLE)`: the calling thread runs only on
/// time no other thread wants; threads it starts afterwards inherit it.
#[cfg(not(miri))]
pub(crate) fn sched_idle() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid, initialised `sched_param` that outlives
    // the call; pid 0 names the calling thread; the call reads `param` and
    // touches no other memory of ours.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    if r == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Miri runs no foreign calls: a no-op there.
#[cfg(miri)]
pub(crate) fn sched_idle() -> io::Result<()> {
    Ok(())
}

/// `FUTEX_WAIT` (shared, not `FUTEX_PRIVATE`) with a relative timeout.
#[cfg(not(loom))]
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = rustix::thread::futex::Timespec {
        tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    // EAGAIN (value changed), ETIMEDOUT and EINTR all mean "re-check".
    let _ = rustix::thread::futex::wait(
        word,
        rustix::thread::futex::Flags::empty(),
        expected,
        Some(&ts),
    );
}

/// `FUTEX_WAKE` (shared): wakes at most `n` sleepers (`u32::MAX`: all).
/// The kernel reads the count as a signed `int` and stops after the first
/// sleeper when it is negative, so `u32::MAX` (-1) would wake one: the
/// count is clamped to `i32::MAX`. (Before, every notify of a stream with
/// several consumers asleep woke only one of them; the others slept on to
/// the next frame or their wait's timeout: `cargo xtask bench growth`, the
/// consumers' latency p50 1.9-4.6 ms with 2-16 consumers at a frame every
/// 2 ms, against 5 µs with one.)
#[cfg(not(loom))]
pub(crate) fn futex_wake(word: &AtomicU32, n: u32) {
    let n = n.min(i32::MAX as u32);
    let _ = rustix::thread::futex::wake(word, rustix::thread::futex::Flags::empty(), n);
}

/// Under loom, waiting is modelled as yielding.
#[cfg(loom)]
pub(crate) fn futex_wait(_word: &AtomicU32, _expected: u32, _timeout: Duration) {
    loom::thread::yield_now();
}

/// Under loom, waking is a no-op (waiters poll).
#[cfg(loom)]
pub(crate) fn futex_wake(_word: &AtomicU32, _n: u32) {}

/// `n` random bytes from `getrandom(2)`, hex encoded.
pub(crate) fn random_hex(n: usize) -> io::Result<String> {
    let mut buf = vec![0u8; n];
    let mut done = 0;
    while done < n {
        let k = rustix::rand::getrandom(&mut buf[done..], rustix::rand::GetRandomFlags::empty())
            .map_err(io_err)?;
        done += k;
    }
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

pub(crate) fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

pub(crate) fn pid() -> u32 {
    rustix::process::getpid().as_raw_nonzero().get() as u32
}

/// What `/proc/<pid>/stat` says of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProcessState {
    /// Running (not a zombie), started at this time (field 22, clock ticks
    /// after boot), which a recycled PID does not share.
    Running(u64),
    /// Gone, or a zombie (dead, not yet reaped).
    Dead,
    /// The file could not be read or parsed (no `/proc`, out of
    /// descriptors, ...): nothing is known.
    Unknown,
}

/// Looks up process `pid` in `/proc`.
pub(crate) fn process_state(pid: u32) -> ProcessState {
    match std::fs::read(format!("/proc/{pid}/stat")) {
        Ok(stat) => parse_stat(&stat),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => ProcessState::Dead,
        Err(_) => ProcessState::Unknown,
    }
}

/// The state in the text of a `/proc/<pid>/stat` file. The command name
/// (field 2) may hold spaces and parentheses, so fields are counted after
/// the last `)`.
pub(crate) fn parse_stat(stat: &[u8]) -> ProcessState {
    parse_stat_start_time(stat).unwrap_or(ProcessState::Unknown)
}

fn parse_stat_start_time(stat: &[u8]) -> Option<ProcessState> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    // Field 3 is the state; field 22 the start time.
    let state = fields.next()?;
    if matches!(state, "Z" | "X" | "x") {
        return Some(ProcessState::Dead);
    }
    Some(ProcessState::Running(fields.nth(18)?.parse().ok()?))
}

/// Lets processes spawned from now on inherit `fd` (clears `FD_CLOEXEC`).
pub(crate) fn set_inheritable(fd: BorrowedFd<'_>) -> io::Result<()> {
    rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty()).map_err(io_err)
}

/// Faults `len` bytes at `ptr` in for writing in one call
/// (`MADV_POPULATE_WRITE`), as a write touch of every page would, without
/// storing anything.
///
/// # Safety
///
/// `[ptr, ptr + len)` lies inside a read-write shared mapping that stays
/// mapped for the call.
pub(crate) unsafe fn populate_write(ptr: *mut u8, len: usize) -> io::Result<()> {
    // SAFETY: the caller's contract; MADV_POPULATE_WRITE changes no
    // content and unmaps nothing, so no reference anyone holds is
    // affected.
    unsafe { rustix::mm::madvise(ptr.cast(), len, rustix::mm::Advice::LinuxPopulateWrite) }
        .map_err(io_err)
}

/// `madvise(MADV_HUGEPAGE)`: faults in the range may take transparent
/// huge pages where the system allows them for shared memory.
///
/// # Safety
///
/// `ptr..ptr + len` must be a mapping of this process. The advice changes
/// no content and unmaps nothing.
pub(crate) unsafe fn advise_huge(ptr: *mut u8, len: usize) -> io::Result<()> {
    // SAFETY: the caller's contract; MADV_HUGEPAGE only sets a flag on the
    // mapping, no reference anyone holds is affected.
    unsafe { rustix::mm::madvise(ptr.cast(), len, rustix::mm::Advice::LinuxHugepage) }
        .map_err(io_err)
}

/// The system's transparent-huge-page policy for `memfd`s and other
/// internal shared memory (`/sys/kernel/mm/transparent_hugepage/
/// shmem_enabled`, the word in brackets), read once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShmemHuge {
    /// `never`, `deny`, or unknown: small pages only.
    Never,
    /// `advise`: huge pages for mappings advised with `MADV_HUGEPAGE`, on
    /// faults (not on `fallocate`, which has no mapping to look at).
    Advise,
    /// `always`, `within_size`, `force`: huge pages on faults and on
    /// `fallocate` alike.
    Always,
}

pub(crate) fn shmem_huge() -> ShmemHuge {
    static POLICY: std::sync::OnceLock<ShmemHuge> = std::sync::OnceLock::new();
    *POLICY.get_or_init(|| {
        let text = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/shmem_enabled")
            .unwrap_or_default();
        parse_shmem_huge(&text)
    })
}

fn parse_shmem_huge(text: &str) -> ShmemHuge {
    let chosen = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'));
    match chosen {
        Some("advise") => ShmemHuge::Advise,
        Some("always" | "within_size" | "force") => ShmemHuge::Always,
        _ => ShmemHuge::Never,
    }
}

/// A close-on-exec duplicate of descriptor number `raw`, inherited from
/// the parent process, after checking that it is open.
pub(crate) fn adopt_inherited(raw: i32) -> io::Result<OwnedFd> {
    if raw < 0 {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    // SAFETY: F_GETFD only reads the descriptor table; on a number that is
    // not open it fails with EBADF, which we report.
    if unsafe { libc::fcntl(raw, libc::F_GETFD) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is open (checked just above) and stays open for the
    // duration of the borrow, which ends with the duplicate made here; we
    // never close or otherwise take ownership of `raw` itself.
    let fd = unsafe { BorrowedFd::borrow_raw(raw) };
    rustix::io::fcntl_dupfd_cloexec(fd, 0).map_err(io_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_start_time_is_field_22_after_the_name() {
        let line = b"1234 (a) b (c)) S 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 999 23 24\n";
        assert_eq!(parse_stat(line), ProcessState::Running(999));
        let zombie = b"1234 (x) Z 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 999 23\n";
        assert_eq!(parse_stat(zombie), ProcessState::Dead);
        assert_eq!(parse_stat(b"garbage"), ProcessState::Unknown);
        assert_eq!(parse_stat(b"1 (x) S 1 2"), ProcessState::Unknown);
    }

    #[test]
    #[cfg_attr(miri, ignore = "reads /proc")]
    fn own_state_is_running_and_stable() {
        let ProcessState::Running(t) = process_state(pid()) else {
            panic!("our own /proc entry");
        };
        assert_eq!(process_state(pid()), ProcessState::Running(t));
        assert_eq!(process_state(u32::MAX), ProcessState::Dead);
    }

    /// A thread put under `SCHED_IDLE` is there (the kernel says so), and
    /// a thread it starts inherits it; the test's other threads are not
    /// touched.
    #[test]
    fn shmem_huge_policy_is_the_word_in_brackets() {
        let p = |t: &str| parse_shmem_huge(t);
        assert_eq!(
            p("always within_size advise [never] deny force\n"),
            ShmemHuge::Never
        );
        assert_eq!(
            p("always within_size [advise] never deny force\n"),
            ShmemHuge::Advise
        );
        assert_eq!(
            p("always [within_size] advise never deny force"),
            ShmemHuge::Always
        );
        assert_eq!(p("[always] within_size advise never"), ShmemHuge::Always);
        assert_eq!(
            p("always within_size advise never deny [force]"),
            ShmemHuge::Always
        );
        assert_eq!(
            p("always within_size advise never [deny] force"),
            ShmemHuge::Never
        );
        assert_eq!(p(""), ShmemHuge::Never);
    }

    #[test]
    #[cfg_attr(miri, ignore = "a foreign call")]
    fn sched_idle_holds_for_the_thread_and_its_children() {
        // SAFETY: sched_getscheduler reads no memory of ours.
        let policy = || unsafe { libc::sched_getscheduler(0) };
        let before = policy();
        let (own, child) = std::thread::spawn(move || {
            sched_idle().unwrap();
            (policy(), std::thread::spawn(policy).join().unwrap())
        })
        .join()
        .unwrap();
        assert_eq!((own, child), (libc::SCHED_IDLE, libc::SCHED_IDLE));
        assert_eq!(policy(), before);
        assert_ne!(before, libc::SCHED_IDLE);
    }
}
