//! A robust reader-writer lock that lives in shared memory.
//!
//! Layout (272 bytes): a writer word, a flags word, a "departures" futex
//! word, padding, and one reader word per participant slot.
//!
//! * Writer word: the writer's token (bits 0..29), `ACTIVE` (bit 29: the
//!   writer has drained all readers and may be writing), `DRAIN` (bit 30: a
//!   writer is waiting for readers to leave), `WAITERS` (bit 31: someone
//!   sleeps on this word).
//! * `readers[slot]`: the token of the participant in `slot` while it holds
//!   a read lock, else `0`. Because the entry carries the holder's full
//!   token (with generation), a stale entry left by a dead reader is
//!   recognisable even after its slot has been reused, and anyone can clear
//!   it with a compare-and-swap.
//!
//! A reader publishes its entry, issues a `SeqCst` fence and checks the
//! writer word; a writer claims the writer word, issues a `SeqCst` fence and
//! scans the reader entries. The fences guarantee at least one side sees
//! the other (store-buffering litmus), so a reader and a writer are never
//! inside together. Uncontended read lock/unlock and write lock/unlock make
//! no system call. Blocked lockers sleep on shared futexes for at most
//! [`LIVENESS_TICK`](crate::LIVENESS_TICK) and then probe the liveness of
//! whoever blocks them; dead writers and dead readers are cleared, and the
//! next locker is told [`owner_died`](WriteGuard::owner_died). A writer that
//! died while `ACTIVE` also sets the persistent `POISONED` flag.

use std::time::{Duration, Instant};

use crate::error::LockError;
use crate::header::MAX_PARTICIPANTS;
use crate::participant::Participant;
use crate::sync::{AtomicU32, Env, Ordering, TOKEN_MASK, fence, next_wait};

const WAITERS: u32 = 1 << 31;
const DRAIN: u32 = 1 << 30;
const ACTIVE: u32 = 1 << 29;
const POISONED: u32 = 1;

/// A cross-process reader-writer lock placed in a segment (272 bytes,
/// zero = unlocked). Obtain one with [`Segment::at`](crate::Segment::at).
///
/// Each participant may hold at most one read lock on a given `ShmRwLock`
/// at a time (a second one reports [`LockError::WouldDeadlock`]).
#[repr(C)]
#[derive(Debug)]
pub struct ShmRwLock {
    writer: AtomicU32,
    flags: AtomicU32,
    depart: AtomicU32,
    _pad: AtomicU32,
    readers: [AtomicU32; MAX_PARTICIPANTS as usize],
}

#[cfg(not(loom))]
const _: () = assert!(size_of::<ShmRwLock>() == 16 + 4 * MAX_PARTICIPANTS as usize);

impl Default for ShmRwLock {
    fn default() -> Self {
        ShmRwLock {
            writer: AtomicU32::new(0),
            flags: AtomicU32::new(0),
            depart: AtomicU32::new(0),
            _pad: AtomicU32::new(0),
            readers: std::array::from_fn(|_| AtomicU32::new(0)),
        }
    }
}

impl ShmRwLock {
    /// A new unlocked lock (for use outside shared memory, e.g. tests).
    pub fn new() -> Self {
        Self::default()
    }

    /// Tries to take a read lock without blocking.
    pub fn try_read<'a>(&'a self, p: &'a Participant) -> Result<ReadGuard<'a>, LockError> {
        self.read_guard(p, Some(p.now()), true)
    }

    /// Takes a read lock, blocking as long as needed.
    pub fn read<'a>(&'a self, p: &'a Participant) -> Result<ReadGuard<'a>, LockError> {
        self.read_guard(p, None, false)
    }

    /// Takes a read lock, giving up after `timeout`.
    pub fn read_timeout<'a>(
        &'a self,
        p: &'a Participant,
        timeout: Duration,
    ) -> Result<ReadGuard<'a>, LockError> {
        self.read_guard(p, p.now().checked_add(timeout), false)
    }

    /// Tries to take the write lock without blocking.
    pub fn try_write<'a>(&'a self, p: &'a Participant) -> Result<WriteGuard<'a>, LockError> {
        self.write_guard(p, Some(p.now()), true)
    }

    /// Takes the write lock, blocking as long as needed.
    pub fn write<'a>(&'a self, p: &'a Participant) -> Result<WriteGuard<'a>, LockError> {
        self.write_guard(p, None, false)
    }

    /// Takes the write lock, giving up after `timeout`.
    pub fn write_timeout<'a>(
        &'a self,
        p: &'a Participant,
        timeout: Duration,
    ) -> Result<WriteGuard<'a>, LockError> {
        self.write_guard(p, p.now().checked_add(timeout), false)
    }

    fn read_guard<'a>(
        &'a self,
        p: &'a Participant,
        deadline: Option<Instant>,
        try_only: bool,
    ) -> Result<ReadGuard<'a>, LockError> {
        p.check_owns(self)?;
        let owner_died = self.acquire_read(p, deadline, try_only)?;
        Ok(ReadGuard {
            lock: self,
            p,
            owner_died,
        })
    }

    fn write_guard<'a>(
        &'a self,
        p: &'a Participant,
        deadline: Option<Instant>,
        try_only: bool,
    ) -> Result<WriteGuard<'a>, LockError> {
        p.check_owns(self)?;
        let owner_died = self.acquire_write(p, deadline, try_only)?;
        Ok(WriteGuard {
            lock: self,
            p,
            owner_died,
        })
    }

    /// Whether a writer died while writing and nobody marked the state
    /// consistent since.
    pub fn is_poisoned(&self) -> bool {
        self.flags.load(Ordering::Acquire) & POISONED != 0
    }

    /// Number of reader entries currently set (racy snapshot; may include
    /// dead readers not yet cleared).
    pub fn reader_count(&self) -> usize {
        self.readers
            .iter()
            .filter(|r| r.load(Ordering::Relaxed) != 0)
            .count()
    }

    fn entry<E: Env>(&self, env: &E) -> &AtomicU32 {
        // The slot of a valid token is < 64 = readers.len().
        &self.readers[(env.slot() as usize) % self.readers.len()]
    }

    /// Clears a dead writer's word. Returns whether it was ours to clear.
    fn clear_dead_writer<E: Env>(&self, env: &E, w: u32) -> bool {
        if self
            .writer
            .compare_exchange(w, 0, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        if w & ACTIVE != 0 {
            self.flags.fetch_or(POISONED, Ordering::AcqRel);
        }
        if w & WAITERS != 0 {
            env.wake(&self.writer, u32::MAX);
        }
        true
    }

    /// Sleeps on the writer word while it still equals `w` (setting
    /// `WAITERS` first). `Err` once the deadline has passed.
    fn sleep_on_writer<E: Env>(
        &self,
        env: &E,
        w: u32,
        deadline: Option<Instant>,
    ) -> Result<(), LockError> {
        let mut w = w;
        if w & WAITERS == 0 {
            match self
                .writer
                .compare_exchange(w, w | WAITERS, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => w |= WAITERS,
                Err(_) => return Ok(()),
            }
        }
        let wait = next_wait(env.now(), deadline).ok_or(LockError::Timeout)?;
        env.wait(&self.writer, w, wait);
        Ok(())
    }

    pub(crate) fn acquire_read<E: Env>(
        &self,
        env: &E,
        deadline: Option<Instant>,
        try_only: bool,
    ) -> Result<bool, LockError> {
        let me = env.token();
        let entry = self.entry(env);
        if entry.load(Ordering::Relaxed) == me {
            return Err(LockError::WouldDeadlock);
        }
        let mut died = false;
        let mut slept = false;
        loop {
            let mut w = self.writer.load(Ordering::Acquire);
            let owner = w & TOKEN_MASK;
            if owner == me {
                return Err(LockError::WouldDeadlock);
            }
            if owner == 0 {
                entry.store(me, Ordering::Relaxed);
                fence(Ordering::SeqCst);
                w = self.writer.load(Ordering::Acquire);
                if w & TOKEN_MASK == 0 {
                    return Ok(died || self.is_poisoned());
                }
                // A writer got in first: back off and let it drain.
                self.leave_read(env);
                continue;
            }
            if try_only || slept {
                if !env.token_alive(owner) {
                    died |= self.clear_dead_writer(env, w);
                    continue;
                }
                if try_only {
                    return Err(LockError::WouldBlock);
                }
            }
            self.sleep_on_writer(env, w, deadline)?;
            slept = true;
        }
    }

    fn leave_read<E: Env>(&self, env: &E) {
        self.entry(env).store(0, Ordering::Release);
        fence(Ordering::SeqCst);
        if self.writer.load(Ordering::Relaxed) & DRAIN != 0 {
            self.depart.fetch_add(1, Ordering::Release);
            env.wake(&self.depart, u32::MAX);
        }
    }

    pub(crate) fn release_read<E: Env>(&self, env: &E) {
        debug_assert_eq!(self.entry(env).load(Ordering::Relaxed), env.token());
        self.leave_read(env);
    }

    pub(crate) fn acquire_write<E: Env>(
        &self,
        env: &E,
        deadline: Option<Instant>,
        try_only: bool,
    ) -> Result<bool, LockError> {
        let me = env.token();
        if self.entry(env).load(Ordering::Relaxed) == me {
            return Err(LockError::WouldDeadlock);
        }
        let mut died = false;
        // Phase 1: own the writer word.
        let mut slept = false;
        loop {
            let w = self.writer.load(Ordering::Relaxed);
            let owner = w & TOKEN_MASK;
            if owner == me {
                return Err(LockError::WouldDeadlock);
            }
            if owner == 0 {
                let new = me | if slept { WAITERS } else { w & WAITERS };
                if self
                    .writer
                    .compare_exchange(w, new, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    break;
                }
                continue;
            }
            if try_only || slept {
                if !env.token_alive(owner) {
                    // Take the word over directly from the dead writer.
                    let new = me | (w & WAITERS);
                    if self
                        .writer
                        .compare_exchange(w, new, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
                    {
                        if w & ACTIVE != 0 {
                            self.flags.fetch_or(POISONED, Ordering::AcqRel);
                        }
                        died = true;
                        break;
                    }
                    continue;
                }
                if try_only {
                    return Err(LockError::WouldBlock);
                }
            }
            self.sleep_on_writer(env, w, deadline)?;
            slept = true;
        }
        // Phase 2: drain readers.
        self.writer.fetch_or(DRAIN, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        let mut slept = false;
        loop {
            let seen = self.depart.load(Ordering::Acquire);
            let busy = self
                .readers
                .iter()
                .map(|r| r.load(Ordering::Acquire))
                .enumerate()
                .find(|&(_, r)| r != 0);
            let Some((j, r)) = busy else { break };
            if (try_only || slept) && !env.token_alive(r) {
                if self.readers[j]
                    .compare_exchange(r, 0, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
                {
                    died = true;
                }
                continue;
            }
            let wait = if try_only {
                None
            } else {
                next_wait(env.now(), deadline)
            };
            let Some(wait) = wait else {
                self.abandon_write(env);
                return Err(if try_only {
                    LockError::WouldBlock
                } else {
                    LockError::Timeout
                });
            };
            env.wait(&self.depart, seen, wait);
            slept = true;
        }
        // Phase 3: active.
        let _ = self
            .writer
            .fetch_update(Ordering::Acquire, Ordering::Relaxed, |w| {
                Some((w & !DRAIN) | ACTIVE)
            });
        Ok(died || self.is_poisoned())
    }

    fn abandon_write<E: Env>(&self, env: &E) {
        let prev = self.writer.swap(0, Ordering::Release);
        if prev & WAITERS != 0 {
            env.wake(&self.writer, u32::MAX);
        }
    }

    pub(crate) fn release_write<E: Env>(&self, env: &E) {
        debug_assert_eq!(
            self.writer.load(Ordering::Relaxed) & TOKEN_MASK,
            env.token()
        );
        self.abandon_write(env);
    }

    pub(crate) fn clear_poison(&self) {
        self.flags.fetch_and(!POISONED, Ordering::AcqRel);
    }
}

/// Proof of holding a read lock; releases it on drop.
#[must_use = "the lock is released when the guard is dropped"]
#[derive(Debug)]
pub struct ReadGuard<'a> {
    lock: &'a ShmRwLock,
    p: &'a Participant,
    owner_died: bool,
}

impl ReadGuard<'_> {
    /// `true` if a holder died while holding the lock (a dead writer was
    /// cleared by this acquisition, or the lock is poisoned).
    pub fn owner_died(&self) -> bool {
        self.owner_died
    }
}

impl Drop for ReadGuard<'_> {
    fn drop(&mut self) {
        self.lock.release_read(self.p);
    }
}

/// Proof of holding the write lock; releases it on drop.
#[must_use = "the lock is released when the guard is dropped"]
#[derive(Debug)]
pub struct WriteGuard<'a> {
    lock: &'a ShmRwLock,
    p: &'a Participant,
    owner_died: bool,
}

impl WriteGuard<'_> {
    /// `true` if a previous holder (writer or reader) died holding the lock
    /// and was cleared by this acquisition, or a writer died mid-write and
    /// the state has not been marked consistent since.
    pub fn owner_died(&self) -> bool {
        self.owner_died
    }

    /// Declares the protected state repaired (clears the poisoned flag).
    pub fn mark_consistent(&mut self) {
        self.lock.clear_poison();
        self.owner_died = false;
    }
}

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        self.lock.release_write(self.p);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::testenv::FakeEnv;

    #[test]
    fn readers_share_writers_exclude() {
        let l = ShmRwLock::new();
        let a = FakeEnv::new(0, 1);
        let b = FakeEnv::with_world(&a, 1, 1);
        let c = FakeEnv::with_world(&a, 2, 1);
        assert_eq!(l.acquire_read(&a, None, true), Ok(false));
        assert_eq!(l.acquire_read(&b, None, true), Ok(false));
        assert_eq!(l.reader_count(), 2);
        assert_eq!(
            l.acquire_read(&a, None, true),
            Err(LockError::WouldDeadlock)
        );
        assert_eq!(l.acquire_write(&c, None, true), Err(LockError::WouldBlock));
        assert_eq!(
            l.writer.load(Ordering::Relaxed),
            0,
            "failed try_write undone"
        );
        l.release_read(&a);
        l.release_read(&b);
        assert_eq!(l.acquire_write(&c, None, true), Ok(false));
        assert_eq!(l.acquire_read(&a, None, true), Err(LockError::WouldBlock));
        assert_eq!(l.reader_count(), 0, "backed-off reader left no entry");
        assert_eq!(l.acquire_write(&b, None, true), Err(LockError::WouldBlock));
        l.release_write(&c);
        assert_eq!(l.acquire_read(&a, None, true), Ok(false));
        l.release_read(&a);
    }

    #[test]
    fn dead_reader_is_cleared_by_writer() {
        let l = ShmRwLock::new();
        let a = FakeEnv::new(0, 1);
        let b = FakeEnv::with_world(&a, 1, 1);
        assert_eq!(l.acquire_read(&a, None, true), Ok(false));
        a.kill(a.token());
        assert_eq!(l.acquire_write(&b, None, false), Ok(true));
        assert!(!l.is_poisoned(), "a dead reader does not poison");
        l.release_write(&b);
        assert_eq!(l.reader_count(), 0);
    }

    #[test]
    fn stale_reader_entry_of_reused_slot_is_cleared() {
        let l = ShmRwLock::new();
        let old = FakeEnv::new(5, 1);
        let w = FakeEnv::with_world(&old, 1, 1);
        assert_eq!(l.acquire_read(&old, None, true), Ok(false));
        old.kill(old.token());
        // Slot 5 is now used by a new generation that does not read.
        let _new = FakeEnv::with_world(&old, 5, 2);
        assert_eq!(l.acquire_write(&w, None, true), Ok(true));
        l.release_write(&w);
    }

    #[test]
    fn dead_writer_poisons_for_readers_and_writers() {
        let l = ShmRwLock::new();
        let a = FakeEnv::new(0, 1);
        let b = FakeEnv::with_world(&a, 1, 1);
        assert_eq!(l.acquire_write(&a, None, false), Ok(false));
        a.kill(a.token());
        assert_eq!(l.acquire_read(&b, None, false), Ok(true));
        assert!(l.is_poisoned());
        l.release_read(&b);
        assert_eq!(l.acquire_write(&b, None, false), Ok(true));
        l.clear_poison();
        l.release_write(&b);
        assert_eq!(l.acquire_write(&b, None, false), Ok(false));
        l.release_write(&b);
    }

    /// Real threads: writers increment a plain counter, readers check it is
    /// never observed mid-update. Under Miri this checks for data races.
    #[test]
    fn threads_readers_and_writers() {
        struct Shared(std::cell::UnsafeCell<(u64, u64)>);
        // SAFETY: access is serialised by the lock under test.
        unsafe impl Sync for Shared {}
        let l = ShmRwLock::new();
        let data = Shared(std::cell::UnsafeCell::new((0, 0)));
        let root = FakeEnv::new(0, 1);
        let iters = if cfg!(miri) { 10 } else { 1000 };
        std::thread::scope(|s| {
            for slot in 1..5 {
                let env = FakeEnv::with_world(&root, slot, 1);
                let (l, data) = (&l, &data);
                s.spawn(move || {
                    for _ in 0..iters {
                        if slot % 2 == 0 {
                            assert_eq!(l.acquire_write(&env, None, false), Ok(false));
                            // SAFETY: the write lock is held.
                            unsafe {
                                let d = &mut *data.0.get();
                                d.0 += 1;
                                d.1 += 1;
                            }
                            l.release_write(&env);
                        } else {
                            assert_eq!(l.acquire_read(&env, None, false), Ok(false));
                            // SAFETY: a read lock is held; writers are excluded.
                            let (a, b) = unsafe { *data.0.get() };
                            assert_eq!(a, b);
                            l.release_read(&env);
                        }
                    }
                });
            }
        });
        assert_eq!(data.0.into_inner(), (2 * iters, 2 * iters));
    }

    #[test]
    fn writer_times_out_on_live_reader() {
        let l = ShmRwLock::new();
        let a = FakeEnv::new(0, 1);
        let b = FakeEnv::with_world(&a, 1, 1);
        assert_eq!(l.acquire_read(&a, None, false), Ok(false));
        let dl = b.now() + Duration::from_millis(20);
        assert_eq!(
            l.acquire_write(&b, Some(dl), false),
            Err(LockError::Timeout)
        );
        assert_eq!(l.writer.load(Ordering::Relaxed) & TOKEN_MASK, 0);
        l.release_read(&a);
    }
}
