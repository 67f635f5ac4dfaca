//! Participants: processes (or threads) attached to a segment, and how
//! their liveness is established.
//!
//! The registry is an array of 32-byte slots after the header:
//! `{state, generation, pid, uid, joined_unix_ns, start_time}`. Joining takes
//! a non-blocking exclusive **OFD lock on byte `1 + slot`** of the segment
//! through a private open file description, then bumps the slot's
//! generation. The kernel releases OFD locks when the last descriptor of
//! the description is closed — in particular when the process dies, however
//! it dies — so "slot locked by someone" is a liveness fact maintained by
//! the kernel, not a PID guess: a recycled PID cannot make a dead
//! participant look alive. Owner tokens carry the generation, so a token of
//! a previous occupant of a reused slot is recognisably dead too.
//!
//! ## Liveness belongs to the process that joined, even across `fork`
//!
//! An OFD lock belongs to an open file description, and `fork` shares
//! descriptions: a child forked without `exec` keeps the parent's slot
//! lock held after the parent dies. So the lock alone would take a
//! SIGKILLed participant with a live forked child for alive, and every
//! lock or hold it had would stay taken until the child exits. The slot
//! therefore also records the joining process's PID and **start time**
//! (`/proc/<pid>/stat`, field 22), and a participant is alive only while
//! both hold: the slot lock is held *and* that PID still names a running
//! (not zombie) process started at that time. A recycled PID has another
//! start time; a dead parent is a zombie or gone.
//!
//! Consequence for forked children: a child must not use its parent's
//! `Participant` (or anything built on it). It joins anew, which gives it
//! its own slot, PID and start time. The PID is that of the joiner's PID
//! namespace, so all participants of a segment must share one.

use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32 as StdU32, AtomicU64 as StdU64, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, LockError, Result};
use crate::segment::Segment;
use crate::shared::{Access, Shared};
use crate::sync::{AtomicU32, Env, TOKEN_GEN_MASK, make_token, split_token};
use crate::sys;

/// Registry slot state: free.
pub(crate) const SLOT_FREE: u32 = 0;
/// Registry slot state: occupied (liveness is still decided by the lock).
pub(crate) const SLOT_ACTIVE: u32 = 1;

/// One registry slot as laid out in shared memory.
#[repr(C)]
pub(crate) struct Slot {
    pub(crate) state: StdU32,
    pub(crate) generation: StdU32,
    pub(crate) pid: StdU32,
    pub(crate) uid: StdU32,
    pub(crate) joined_unix_ns: StdU64,
    /// Start time of the joining process (0: unknown, lock alone decides).
    pub(crate) start_time: StdU64,
}

const _: () = assert!(size_of::<Slot>() as u64 == crate::header::SLOT_SIZE);

/// OFD lock byte that marks "some handle has this segment open".
pub(crate) const ATTACH_BYTE: u64 = 0;

/// OFD lock byte owned by the participant in `slot`.
pub(crate) const fn slot_byte(slot: u32) -> u64 {
    1 + slot as u64
}

/// A snapshot of one registry slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ParticipantInfo {
    /// Slot index.
    pub slot: u32,
    /// Generation of the latest occupant.
    pub generation: u32,
    /// Process id recorded by the latest occupant (informational).
    pub pid: u32,
    /// Whether the occupant is alive: the slot's kernel lock is held and the
    /// recorded process still runs (see the module docs on `fork`).
    pub alive: bool,
    /// Whether the slot is free: its occupant left, or was reaped after it
    /// died. A slot neither alive nor free is a dead process not yet
    /// reaped.
    pub free: bool,
}

/// A registered participant of a segment: the identity that owns locks and
/// reference-count holds.
///
/// `Participant` is `Send` but not `Sync`: one thread uses it at a time.
/// Threads that lock concurrently should join separately (each gets its own
/// slot). Dropping it frees the slot; holds it still had on reference
/// counts are then reclaimable like those of a dead process.
pub struct Participant {
    shared: Arc<Shared>,
    _lock_fd: OwnedFd,
    slot: u32,
    token: u32,
    _not_sync: PhantomData<Cell<()>>,
}

impl fmt::Debug for Participant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Participant")
            .field("slot", &self.slot)
            .field("token", &format_args!("{:#x}", self.token))
            .finish()
    }
}

impl Participant {
    /// Registers the calling process in `seg`'s registry (see
    /// [`Segment::join`]).
    pub(crate) fn join(seg: &Segment) -> Result<Participant> {
        let shared = seg.shared().clone();
        if shared.access != Access::ReadWrite {
            return Err(Error::ReadOnly);
        }
        let lock_fd = sys::reopen(shared.fd.as_fd(), true).map_err(Error::sys("reopen segment"))?;
        for slot in 0..shared.info.max_participants {
            let got = sys::ofd_try_lock(lock_fd.as_fd(), slot_byte(slot), sys::LockKind::Write)
                .map_err(Error::sys("F_OFD_SETLK"))?;
            if !got {
                continue;
            }
            let s = shared.slot(slot);
            // The process identity first, then the generation (release):
            // whoever sees our generation sees our PID and start time.
            let pid = sys::pid();
            s.pid.store(pid, Ordering::Relaxed);
            let start_time = match sys::process_state(pid) {
                sys::ProcessState::Running(t) => t,
                _ => 0,
            };
            s.start_time.store(start_time, Ordering::Relaxed);
            let generation = s.generation.fetch_add(1, Ordering::AcqRel).wrapping_add(1);
            s.uid.store(sys::euid(), Ordering::Relaxed);
            s.joined_unix_ns
                .store(crate::shared::unix_ns(), Ordering::Relaxed);
            s.state.store(SLOT_ACTIVE, Ordering::Release);
            return Ok(Participant {
                shared,
                _lock_fd: lock_fd,
                slot,
                token: make_token(slot, generation),
                _not_sync: PhantomData,
            });
        }
        Err(Error::RegistryFull)
    }

    /// This participant's slot index.
    pub fn slot(&self) -> u32 {
        self.slot
    }

    /// This participant's owner token (slot and generation), as stored in
    /// lock words.
    pub fn token(&self) -> u32 {
        self.token
    }

    /// Whether the participant identified by `token` (of this participant's
    /// segment) is alive, by the kernel-held slot lock and the generation.
    pub fn is_alive(&self, token: u32) -> bool {
        self.shared.token_alive(token)
    }

    pub(crate) fn check_owns<T>(&self, obj: &T) -> Result<(), LockError> {
        if self
            .shared
            .contains(obj as *const T as usize, size_of::<T>())
        {
            Ok(())
        } else {
            Err(LockError::ForeignLock)
        }
    }

    pub(crate) fn now(&self) -> Instant {
        Instant::now()
    }
}

impl Env for Participant {
    fn token(&self) -> u32 {
        self.token
    }
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Duration) {
        sys::futex_wait(word, expected, timeout);
    }
    fn wake(&self, word: &AtomicU32, n: u32) {
        sys::futex_wake(word, n);
    }
    fn token_alive(&self, token: u32) -> bool {
        self.shared.token_alive(token)
    }
}

impl Drop for Participant {
    fn drop(&mut self) {
        self.shared
            .slot(self.slot)
            .state
            .store(SLOT_FREE, Ordering::Release);
        // Closing `_lock_fd` (after this) releases the slot's kernel lock.
    }
}

impl Shared {
    /// Liveness of a token: valid slot, current generation, and the slot's
    /// kernel lock held by some open file description.
    pub(crate) fn token_alive(&self, token: u32) -> bool {
        let Some((slot, generation)) = split_token(token) else {
            return false;
        };
        if slot >= self.info.max_participants {
            return false;
        }
        if self.slot(slot).generation.load(Ordering::Acquire) & TOKEN_GEN_MASK != generation {
            return false;
        }
        self.slot_alive(slot)
    }

    /// Whether the occupant of `slot` is alive: its kernel lock is held by
    /// some open file description, and the process that joined still runs
    /// (a forked child can hold the lock after the joiner died).
    fn slot_alive(&self, slot: u32) -> bool {
        // A failing probe is treated as "alive": never declare a live owner
        // dead. (It cannot fail for a valid descriptor and range.)
        if !sys::ofd_is_locked(self.fd.as_fd(), slot_byte(slot)).unwrap_or(true) {
            return false;
        }
        let s = self.slot(slot);
        let start_time = s.start_time.load(Ordering::Acquire);
        if start_time == 0 {
            return true;
        }
        // Dead only on evidence: gone, a zombie, or another process under
        // the PID. When `/proc` cannot be read, the lock alone decides.
        match sys::process_state(s.pid.load(Ordering::Acquire)) {
            sys::ProcessState::Running(t) => t == start_time,
            sys::ProcessState::Dead => false,
            sys::ProcessState::Unknown => true,
        }
    }

    /// Snapshot of all registry slots that were ever used.
    pub(crate) fn participants(&self) -> Vec<ParticipantInfo> {
        (0..self.info.max_participants)
            .filter_map(|slot| {
                let s = self.slot(slot);
                let generation = s.generation.load(Ordering::Acquire);
                if generation == 0 {
                    return None;
                }
                Some(ParticipantInfo {
                    slot,
                    generation,
                    pid: s.pid.load(Ordering::Relaxed),
                    alive: self.slot_alive(slot),
                    free: s.state.load(Ordering::Acquire) == SLOT_FREE,
                })
            })
            .collect()
    }
}
