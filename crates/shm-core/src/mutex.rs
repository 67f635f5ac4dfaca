//! A robust, futex-based mutex that lives in shared memory.
//!
//! Lock word protocol (one `u32`):
//!
//! * `0` — unlocked;
//! * bits 0..29 — the owner's token (valid bit, generation, slot);
//! * bit 31 (`WAITERS`) — someone may be sleeping on the word.
//!
//! `lock` is a single compare-and-swap `0 -> token` when uncontended, and
//! `unlock` a single swap to `0` (a `FUTEX_WAKE` only if `WAITERS` was set),
//! so the uncontended path makes no system call. A contended locker sets
//! `WAITERS` and sleeps on the shared futex for at most
//! [`LIVENESS_TICK`](crate::LIVENESS_TICK); each time it wakes with the same
//! owner still recorded, it asks the kernel-backed liveness probe whether the
//! owner is alive. If not, it swaps the dead owner's token for its own with a
//! compare-and-swap on the exact word it observed (so exactly one waiter
//! wins), sets the `POISONED` flag and returns the lock with
//! [`owner_died`](MutexGuard::owner_died) set, like `EOWNERDEAD`.
//! The flag stays set until a holder calls
//! [`mark_consistent`](MutexGuard::mark_consistent).

use std::time::{Duration, Instant};

use crate::error::LockError;
use crate::participant::Participant;
use crate::sync::{AtomicU32, Env, Ordering, TOKEN_MASK, next_wait};

const WAITERS: u32 = 1 << 31;
/// How many times a contended `lock` re-reads the word, pausing between
/// reads, before it sleeps. Critical sections in shared memory are short
/// (a table update), so a holder on another core usually releases within
/// this spin, and both sides save a futex sleep and wake-up. None under
/// loom: the model checks the sleeping path.
const SPIN_READS: u32 = if cfg!(loom) { 0 } else { 200 };
const POISONED: u32 = 1;

/// A cross-process mutex placed in a segment (8 bytes, zero = unlocked).
///
/// It protects no data by itself: the data it guards lives at offsets the
/// application chooses. Obtain one with
/// [`Segment::at`](crate::Segment::at); fresh (zeroed) memory is an unlocked,
/// consistent mutex.
#[repr(C)]
#[derive(Debug, Default)]
pub struct ShmMutex {
    word: AtomicU32,
    flags: AtomicU32,
}

#[cfg(not(loom))]
const _: () = assert!(size_of::<ShmMutex>() == 8 && align_of::<ShmMutex>() == 4);

/// Outcome of a successful raw acquisition: whether the owner died.
pub(crate) type Acquired = bool;

impl ShmMutex {
    /// A new unlocked mutex (for use outside shared memory, e.g. tests).
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        ShmMutex {
            word: AtomicU32::new(0),
            flags: AtomicU32::new(0),
        }
    }

    /// A new unlocked mutex.
    #[cfg(loom)]
    pub fn new() -> Self {
        ShmMutex {
            word: AtomicU32::new(0),
            flags: AtomicU32::new(0),
        }
    }

    /// Tries to take the lock without blocking.
    ///
    /// Fails with [`LockError::WouldBlock`] if a live participant holds it.
    /// If the holder is dead, the lock is taken over and the guard reports
    /// [`owner_died`](MutexGuard::owner_died).
    pub fn try_lock<'a>(&'a self, p: &'a Participant) -> Result<MutexGuard<'a>, LockError> {
        p.check_owns(self)?;
        let died = self.acquire(p, Some(p.now()), true)?;
        Ok(MutexGuard::new(self, p, died))
    }

    /// Takes the lock, blocking as long as needed.
    ///
    /// A dead holder is detected within about one
    /// [`LIVENESS_TICK`](crate::LIVENESS_TICK) of its death.
    pub fn lock<'a>(&'a self, p: &'a Participant) -> Result<MutexGuard<'a>, LockError> {
        p.check_owns(self)?;
        let died = self.acquire(p, None, false)?;
        Ok(MutexGuard::new(self, p, died))
    }

    /// Takes the lock, giving up with [`LockError::Timeout`] after `timeout`.
    pub fn lock_timeout<'a>(
        &'a self,
        p: &'a Participant,
        timeout: Duration,
    ) -> Result<MutexGuard<'a>, LockError> {
        p.check_owns(self)?;
        let deadline = p.now().checked_add(timeout);
        let died = self.acquire(p, deadline, false)?;
        Ok(MutexGuard::new(self, p, died))
    }

    /// Whether the mutex is marked poisoned (a holder died and nobody has
    /// marked the state consistent since).
    pub fn is_poisoned(&self) -> bool {
        self.flags.load(Ordering::Acquire) & POISONED != 0
    }

    /// Whether some participant currently holds the lock (racy snapshot).
    pub fn is_locked(&self) -> bool {
        self.word.load(Ordering::Relaxed) & TOKEN_MASK != 0
    }

    /// The raw acquisition algorithm. `deadline` of `None` waits forever;
    /// `try_only` never sleeps.
    pub(crate) fn acquire<E: Env>(
        &self,
        env: &E,
        deadline: Option<Instant>,
        try_only: bool,
    ) -> Result<Acquired, LockError> {
        let me = env.token();
        // Fast path: one CAS, no syscall.
        let mut cur = match self
            .word
            .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => return Ok(self.is_poisoned()),
            Err(cur) => cur,
        };
        let mut slept = false;
        let mut spun = false;
        loop {
            let owner = cur & TOKEN_MASK;
            if owner == 0 {
                // Free (possibly with a stale WAITERS bit). After sleeping we
                // keep WAITERS set so our unlock wakes the others.
                let new = me | if slept { WAITERS } else { cur & WAITERS };
                match self
                    .word
                    .compare_exchange(cur, new, Ordering::Acquire, Ordering::Relaxed)
                {
                    Ok(_) => return Ok(self.is_poisoned()),
                    Err(c) => {
                        cur = c;
                        continue;
                    }
                }
            }
            if owner == me {
                return Err(LockError::WouldDeadlock);
            }
            if try_only || slept {
                // Check the owner (anything not a valid live token is dead).
                if !env.token_alive(owner) {
                    let new = me | (cur & WAITERS);
                    match self
                        .word
                        .compare_exchange(cur, new, Ordering::Acquire, Ordering::Relaxed)
                    {
                        Ok(_) => {
                            self.flags.fetch_or(POISONED, Ordering::AcqRel);
                            return Ok(true);
                        }
                        Err(c) => {
                            cur = c;
                            continue;
                        }
                    }
                }
                if try_only {
                    return Err(LockError::WouldBlock);
                }
            }
            if !spun {
                spun = true;
                for _ in 0..SPIN_READS {
                    std::hint::spin_loop();
                    cur = self.word.load(Ordering::Relaxed);
                    if cur & TOKEN_MASK == 0 {
                        break;
                    }
                }
                if cur & TOKEN_MASK == 0 {
                    continue;
                }
            }
            if cur & WAITERS == 0 {
                if let Err(c) = self.word.compare_exchange(
                    cur,
                    cur | WAITERS,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    cur = c;
                    continue;
                }
                cur |= WAITERS;
            }
            let Some(wait) = next_wait(env.now(), deadline) else {
                return Err(LockError::Timeout);
            };
            env.wait(&self.word, cur, wait);
            slept = true;
            cur = self.word.load(Ordering::Relaxed);
        }
    }

    /// The raw release algorithm.
    pub(crate) fn release<E: Env>(&self, env: &E) {
        let prev = self.word.swap(0, Ordering::Release);
        debug_assert_eq!(prev & TOKEN_MASK, env.token(), "unlock by a non-owner");
        if prev & WAITERS != 0 {
            env.wake(&self.word, 1);
        }
    }

    pub(crate) fn clear_poison(&self) {
        self.flags.fetch_and(!POISONED, Ordering::AcqRel);
    }
}

/// Proof of holding a [`ShmMutex`]; unlocks on drop.
#[must_use = "the lock is released when the guard is dropped"]
#[derive(Debug)]
pub struct MutexGuard<'a> {
    mutex: &'a ShmMutex,
    p: &'a Participant,
    owner_died: bool,
}

impl<'a> MutexGuard<'a> {
    fn new(mutex: &'a ShmMutex, p: &'a Participant, owner_died: bool) -> Self {
        MutexGuard {
            mutex,
            p,
            owner_died,
        }
    }

    /// `true` if a previous holder died while holding the lock and the
    /// protected state has not been marked consistent since: the data may be
    /// half-written (the `EOWNERDEAD` case).
    pub fn owner_died(&self) -> bool {
        self.owner_died
    }

    /// Declares the protected state repaired: clears the poisoned flag so
    /// later lockers no longer see [`owner_died`](Self::owner_died).
    pub fn mark_consistent(&mut self) {
        self.mutex.clear_poison();
        self.owner_died = false;
    }
}

impl Drop for MutexGuard<'_> {
    fn drop(&mut self) {
        self.mutex.release(self.p);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::testenv::FakeEnv;

    #[test]
    fn uncontended_and_reentrancy() {
        let m = ShmMutex::new();
        let a = FakeEnv::new(0, 1);
        assert_eq!(m.acquire(&a, None, false), Ok(false));
        assert!(m.is_locked());
        assert_eq!(m.acquire(&a, None, true), Err(LockError::WouldDeadlock));
        let b = FakeEnv::with_world(&a, 1, 1);
        assert_eq!(m.acquire(&b, None, true), Err(LockError::WouldBlock));
        m.release(&a);
        assert!(!m.is_locked());
        assert_eq!(m.acquire(&b, None, true), Ok(false));
        m.release(&b);
        assert_eq!(a.wakes(), 0, "no wake-up without waiters");
    }

    #[test]
    fn dead_owner_is_taken_over_and_poisons() {
        let m = ShmMutex::new();
        let a = FakeEnv::new(0, 1);
        let b = FakeEnv::with_world(&a, 1, 1);
        assert_eq!(m.acquire(&a, None, false), Ok(false));
        a.kill(a.token());
        assert_eq!(m.acquire(&b, None, true), Ok(true));
        assert!(m.is_poisoned());
        m.release(&b);
        // Still poisoned for the next locker until marked consistent.
        assert_eq!(m.acquire(&b, None, true), Ok(true));
        m.clear_poison();
        m.release(&b);
        assert_eq!(m.acquire(&b, None, true), Ok(false));
        m.release(&b);
    }

    #[test]
    fn blocking_lock_recovers_from_dead_owner_and_times_out_on_live_one() {
        let m = ShmMutex::new();
        let a = FakeEnv::new(0, 1);
        let b = FakeEnv::with_world(&a, 1, 1);
        assert_eq!(m.acquire(&a, None, false), Ok(false));
        let t0 = b.now();
        assert_eq!(
            m.acquire(&b, Some(t0 + Duration::from_millis(30)), false),
            Err(LockError::Timeout)
        );
        a.kill(a.token());
        assert_eq!(m.acquire(&b, None, false), Ok(true));
        m.release(&b);
        assert!(b.wakes() >= 1, "waiters bit set while b slept");
    }

    /// Real threads contending; under Miri this also checks for data races
    /// on the (non-atomic) protected counter.
    #[test]
    fn threads_contend_and_count_exactly() {
        struct Shared(std::cell::UnsafeCell<u64>);
        // SAFETY: access to the cell is serialised by the mutex under test.
        unsafe impl Sync for Shared {}
        let m = ShmMutex::new();
        let data = Shared(std::cell::UnsafeCell::new(0));
        let root = FakeEnv::new(0, 1);
        let iters = if cfg!(miri) { 20 } else { 2000 };
        std::thread::scope(|s| {
            for slot in 1..4 {
                let env = FakeEnv::with_world(&root, slot, 1);
                let (m, data) = (&m, &data);
                s.spawn(move || {
                    for _ in 0..iters {
                        assert_eq!(m.acquire(&env, None, false), Ok(false));
                        // SAFETY: the mutex is held.
                        unsafe { *data.0.get() += 1 };
                        m.release(&env);
                    }
                });
            }
        });
        assert_eq!(data.0.into_inner(), 3 * iters);
    }

    #[test]
    fn garbage_word_is_treated_as_dead_owner() {
        let m = ShmMutex::new();
        m.word.store(0x7fff_ffff, Ordering::Relaxed);
        let a = FakeEnv::new(3, 9);
        assert_eq!(m.acquire(&a, None, true), Ok(true));
        m.release(&a);
    }
}
