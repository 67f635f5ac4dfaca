//! Cross-process reference counts with per-participant accounting.
//!
//! A [`ShmRefCount`] (520 bytes) has a state word and one 64-bit hold entry
//! per participant slot: `token << 32 | count`. A participant only ever
//! changes its own entry, with a single compare-and-swap, so there is no
//! moment at which a process can die "between" updating a shared total and
//! its own bookkeeping: the entries *are* the count. The logical count is
//! the sum of all entries.
//!
//! * An entry whose token belongs to a dead participant (or to an older
//!   generation of a reused slot) is reclaimable: [`ShmRefCount::reclaim_dead`]
//!   clears it with a compare-and-swap on the exact value it saw, so each
//!   dead hold is dropped exactly once.
//! * Reaching zero: whoever drops the last hold moves the state
//!   `LIVE -> DYING|token`, re-scans the entries after a `SeqCst` fence, and
//!   then either publishes `RECLAIMED` (it alone gets
//!   [`Released::Reclaimed`]) or, if an acquirer slipped in, restores `LIVE`.
//!   Acquirers bump their entry, fence, and check the state; they wait out
//!   `DYING` and back off from `RECLAIMED`. A `DYING` state whose token is
//!   dead is finished by the next participant that looks, so the
//!   transition happens exactly once even if the reclaimer dies midway.

use crate::error::RefCountError;
use crate::header::MAX_PARTICIPANTS;
use crate::participant::Participant;
use crate::sync::{AtomicU32, AtomicU64, Env, LIVENESS_TICK, Ordering, TOKEN_MASK, fence};

const EMPTY: u32 = 0;
const LIVE: u32 = 1;
const RECLAIMED: u32 = 2;
const DYING: u32 = 1 << 31;

/// Result of dropping a hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Released {
    /// Other holds remain.
    StillReferenced,
    /// The count reached zero and this caller performed the (single)
    /// transition to reclaimed: it must free the object.
    Reclaimed,
}

/// What [`ShmRefCount::reclaim_dead`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReclaimReport {
    /// Holds of dead participants that were dropped.
    pub dead_holds: u64,
    /// Whether this call performed the transition to reclaimed.
    pub reclaimed: bool,
}

/// A reference count in shared memory. Obtain one with
/// [`Segment::at`](crate::Segment::at); zeroed memory is an *empty* count
/// that must be [`init`](Self::init)ialised before use.
#[repr(C)]
#[derive(Debug)]
pub struct ShmRefCount {
    state: AtomicU32,
    _pad: AtomicU32,
    holds: [AtomicU64; MAX_PARTICIPANTS as usize],
}

#[cfg(not(loom))]
const _: () = assert!(size_of::<ShmRefCount>() == 8 + 8 * MAX_PARTICIPANTS as usize);

fn split(e: u64) -> (u32, u32) {
    ((e >> 32) as u32, e as u32)
}
fn join(token: u32, count: u32) -> u64 {
    if count == 0 {
        0
    } else {
        (u64::from(token) << 32) | u64::from(count)
    }
}

impl Default for ShmRefCount {
    fn default() -> Self {
        ShmRefCount {
            state: AtomicU32::new(EMPTY),
            _pad: AtomicU32::new(0),
            holds: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl ShmRefCount {
    /// A new empty count (for use outside shared memory, e.g. tests).
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes an empty or reclaimed object live with one hold owned by `p`.
    pub fn init(&self, p: &Participant) -> Result<(), RefCountError> {
        self.init_with(p)
    }

    /// Adds one hold for `p`. Fails with [`RefCountError::Reclaimed`] if the
    /// object has already been reclaimed.
    pub fn acquire(&self, p: &Participant) -> Result<(), RefCountError> {
        self.acquire_with(p)
    }

    /// Drops one of `p`'s holds.
    pub fn release(&self, p: &Participant) -> Result<Released, RefCountError> {
        self.release_with(p)
    }

    /// Drops every hold of dead participants (and finishes a reclamation a
    /// dead participant left half-done). Run by any survivor, e.g. a pool's
    /// garbage collector.
    pub fn reclaim_dead(&self, p: &Participant) -> ReclaimReport {
        self.reclaim_dead_with(p)
    }

    /// Holds owned by `p`.
    pub fn held_by(&self, p: &Participant) -> u32 {
        self.held_with(p)
    }

    /// The logical count: sum of all entries (racy snapshot; includes holds
    /// of dead participants not yet reclaimed).
    pub fn count(&self) -> u64 {
        self.holds
            .iter()
            .map(|h| u64::from(split(h.load(Ordering::Acquire)).1))
            .sum()
    }

    /// Whether the object is live (initialised and not reclaimed).
    pub fn is_live(&self) -> bool {
        self.state.load(Ordering::Acquire) != EMPTY
            && self.state.load(Ordering::Acquire) != RECLAIMED
    }

    /// Whether the object has been reclaimed.
    pub fn is_reclaimed(&self) -> bool {
        self.state.load(Ordering::Acquire) == RECLAIMED
    }

    fn entry<E: Env>(&self, env: &E) -> &AtomicU64 {
        &self.holds[(env.slot() as usize) % self.holds.len()]
    }

    pub(crate) fn held_with<E: Env>(&self, env: &E) -> u32 {
        let (t, c) = split(self.entry(env).load(Ordering::Acquire));
        if t == env.token() { c } else { 0 }
    }

    pub(crate) fn init_with<E: Env>(&self, env: &E) -> Result<(), RefCountError> {
        let me = env.token();
        let dying = DYING | me;
        let s = self.state.load(Ordering::Acquire);
        if s != EMPTY && s != RECLAIMED {
            return Err(RefCountError::AlreadyLive);
        }
        self.state
            .compare_exchange(s, dying, Ordering::AcqRel, Ordering::Acquire)
            .map_err(|_| RefCountError::AlreadyLive)?;
        for h in &self.holds {
            h.store(0, Ordering::Relaxed);
        }
        self.entry(env).store(join(me, 1), Ordering::Relaxed);
        self.state.store(LIVE, Ordering::Release);
        Ok(())
    }

    pub(crate) fn acquire_with<E: Env>(&self, env: &E) -> Result<(), RefCountError> {
        let me = env.token();
        let entry = self.entry(env);
        let mut e = entry.load(Ordering::Relaxed);
        loop {
            let (t, c) = split(e);
            // A different token here is a dead predecessor's stale entry:
            // replacing it drops those holds (we add one, so no zero).
            let new = if t == me {
                join(me, c.checked_add(1).ok_or(RefCountError::Overflow)?)
            } else {
                join(me, 1)
            };
            match entry.compare_exchange_weak(e, new, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => break,
                Err(x) => e = x,
            }
        }
        fence(Ordering::SeqCst);
        loop {
            let s = self.state.load(Ordering::Acquire);
            if s == LIVE {
                return Ok(());
            }
            if s & DYING != 0 && s != DYING | me {
                let owner = s & TOKEN_MASK;
                if !env.token_alive(owner) {
                    self.finish_dying(env, s);
                } else {
                    env.wait(&self.state, s, LIVENESS_TICK);
                }
                continue;
            }
            // EMPTY, RECLAIMED or garbage: undo our hold.
            let _ = self.drop_own(env);
            return Err(RefCountError::Reclaimed);
        }
    }

    /// Removes one of our holds; returns the remaining own count.
    fn drop_own<E: Env>(&self, env: &E) -> Result<u32, RefCountError> {
        let me = env.token();
        let entry = self.entry(env);
        let mut e = entry.load(Ordering::Relaxed);
        loop {
            let (t, c) = split(e);
            if t != me || c == 0 {
                return Err(RefCountError::NotHeld);
            }
            match entry.compare_exchange_weak(
                e,
                join(me, c - 1),
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(c - 1),
                Err(x) => e = x,
            }
        }
    }

    pub(crate) fn release_with<E: Env>(&self, env: &E) -> Result<Released, RefCountError> {
        if self.drop_own(env)? > 0 {
            return Ok(Released::StillReferenced);
        }
        Ok(self.try_zero(env))
    }

    fn any_held(&self) -> bool {
        self.holds.iter().any(|h| h.load(Ordering::Acquire) != 0)
    }

    /// The zero protocol; see the module docs.
    fn try_zero<E: Env>(&self, env: &E) -> Released {
        let me = env.token();
        loop {
            fence(Ordering::SeqCst);
            if self.any_held() {
                return Released::StillReferenced;
            }
            let s = self.state.load(Ordering::Acquire);
            if s == LIVE {
                if self
                    .state
                    .compare_exchange(LIVE, DYING | me, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
                {
                    return self.decide(env);
                }
                continue;
            }
            if s & DYING != 0 {
                // Someone else is deciding; they may have scanned before our
                // release, so wait for the outcome and re-check.
                if !env.token_alive(s & TOKEN_MASK) {
                    if self.finish_dying(env, s) {
                        return Released::Reclaimed;
                    }
                } else {
                    env.wait(&self.state, s, LIVENESS_TICK);
                }
                continue;
            }
            // Already reclaimed (or empty/garbage): nothing to do.
            return Released::StillReferenced;
        }
    }

    /// With the state at `DYING|me`: re-scan and publish the outcome.
    fn decide<E: Env>(&self, env: &E) -> Released {
        fence(Ordering::SeqCst);
        let out = if self.any_held() {
            self.state.store(LIVE, Ordering::Release);
            Released::StillReferenced
        } else {
            self.state.store(RECLAIMED, Ordering::Release);
            Released::Reclaimed
        };
        env.wake(&self.state, u32::MAX);
        out
    }

    /// Takes over a `DYING` state left by a dead participant. Returns whether
    /// this call reclaimed the object.
    fn finish_dying<E: Env>(&self, env: &E, s: u32) -> bool {
        let me = env.token();
        if self
            .state
            .compare_exchange(s, DYING | me, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        self.decide(env) == Released::Reclaimed
    }

    pub(crate) fn reclaim_dead_with<E: Env>(&self, env: &E) -> ReclaimReport {
        let me = env.token();
        let mut report = ReclaimReport::default();
        for h in &self.holds {
            let e = h.load(Ordering::Acquire);
            let (t, c) = split(e);
            if e == 0 || t == me || env.token_alive(t) {
                continue;
            }
            if h.compare_exchange(e, 0, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                report.dead_holds += u64::from(c);
            }
        }
        let s = self.state.load(Ordering::Acquire);
        if s & DYING != 0 && s & TOKEN_MASK != me && !env.token_alive(s & TOKEN_MASK) {
            report.reclaimed |= self.finish_dying(env, s);
        }
        // Also covers a holder that dropped its last hold and died before
        // starting the zero protocol (count zero, state still LIVE).
        if !report.reclaimed && self.state.load(Ordering::Acquire) == LIVE {
            report.reclaimed = self.try_zero(env) == Released::Reclaimed;
        }
        report
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::testenv::FakeEnv;

    #[test]
    fn init_acquire_release_reclaim_once() {
        let r = ShmRefCount::new();
        let a = FakeEnv::new(0, 1);
        let b = FakeEnv::with_world(&a, 1, 1);
        assert_eq!(r.acquire_with(&a), Err(RefCountError::Reclaimed), "empty");
        assert_eq!(r.count(), 0);
        r.init_with(&a).unwrap();
        assert_eq!(r.init_with(&b), Err(RefCountError::AlreadyLive));
        r.acquire_with(&b).unwrap();
        r.acquire_with(&b).unwrap();
        assert_eq!(r.count(), 3);
        assert_eq!(r.held_with(&b), 2);
        assert_eq!(r.release_with(&a), Ok(Released::StillReferenced));
        assert_eq!(r.release_with(&a), Err(RefCountError::NotHeld));
        assert_eq!(r.release_with(&b), Ok(Released::StillReferenced));
        assert_eq!(r.release_with(&b), Ok(Released::Reclaimed));
        assert!(r.is_reclaimed());
        assert_eq!(r.acquire_with(&a), Err(RefCountError::Reclaimed));
        assert_eq!(r.count(), 0, "failed acquire undone");
        assert_eq!(r.release_with(&b), Err(RefCountError::NotHeld));
        // Reuse after reclamation.
        r.init_with(&b).unwrap();
        assert!(r.is_live());
        assert_eq!(r.release_with(&b), Ok(Released::Reclaimed));
    }

    #[test]
    fn dead_holds_are_reclaimed_exactly_once() {
        let r = ShmRefCount::new();
        let a = FakeEnv::new(0, 1);
        let b = FakeEnv::with_world(&a, 1, 1);
        let c = FakeEnv::with_world(&a, 2, 1);
        r.init_with(&a).unwrap();
        r.acquire_with(&b).unwrap();
        r.acquire_with(&b).unwrap();
        a.kill(b.token());
        let rep = r.reclaim_dead_with(&c);
        assert_eq!(
            rep,
            ReclaimReport {
                dead_holds: 2,
                reclaimed: false
            }
        );
        assert_eq!(r.reclaim_dead_with(&c), ReclaimReport::default());
        a.kill(a.token());
        let rep = r.reclaim_dead_with(&c);
        assert_eq!(
            rep,
            ReclaimReport {
                dead_holds: 1,
                reclaimed: true
            }
        );
        assert_eq!(r.reclaim_dead_with(&c), ReclaimReport::default());
        assert!(r.is_reclaimed());
    }

    #[test]
    fn stale_entry_of_reused_slot_is_replaced() {
        let r = ShmRefCount::new();
        let old = FakeEnv::new(3, 1);
        r.init_with(&old).unwrap();
        r.acquire_with(&old).unwrap();
        old.kill(old.token());
        let new = FakeEnv::with_world(&old, 3, 2);
        r.acquire_with(&new).unwrap();
        assert_eq!(r.count(), 1);
        assert_eq!(r.held_with(&new), 1);
        assert_eq!(r.release_with(&new), Ok(Released::Reclaimed));
    }

    #[test]
    fn dying_left_by_dead_participant_is_finished() {
        let r = ShmRefCount::new();
        let a = FakeEnv::new(0, 1);
        let b = FakeEnv::with_world(&a, 1, 1);
        r.init_with(&a).unwrap();
        // Simulate: a dropped its last hold and died after moving to DYING.
        r.holds[0].store(0, Ordering::Relaxed);
        r.state.store(DYING | a.token(), Ordering::Relaxed);
        a.kill(a.token());
        assert_eq!(
            r.reclaim_dead_with(&b),
            ReclaimReport {
                dead_holds: 0,
                reclaimed: true
            }
        );
        assert!(r.is_reclaimed());
    }

    #[test]
    fn zero_count_left_live_by_dead_releaser_is_reclaimed() {
        let r = ShmRefCount::new();
        let a = FakeEnv::new(0, 1);
        let b = FakeEnv::with_world(&a, 1, 1);
        r.init_with(&a).unwrap();
        // a dropped its last hold and died before the zero protocol.
        assert_eq!(r.drop_own(&a), Ok(0));
        a.kill(a.token());
        assert_eq!(
            r.reclaim_dead_with(&b),
            ReclaimReport {
                dead_holds: 0,
                reclaimed: true
            }
        );
    }

    #[test]
    fn garbage_entries_are_dead() {
        let r = ShmRefCount::new();
        let a = FakeEnv::new(0, 1);
        r.init_with(&a).unwrap();
        r.holds[9].store(u64::MAX, Ordering::Relaxed);
        let rep = r.reclaim_dead_with(&a);
        assert_eq!(rep.dead_holds, u64::from(u32::MAX));
        assert_eq!(r.release_with(&a), Ok(Released::Reclaimed));
    }
}
