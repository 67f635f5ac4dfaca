//! Atomics and the waiting/liveness environment the lock algorithms run on.
//!
//! Under `cfg(loom)` the atomics come from `loom` so the lock state machine
//! can be model-checked; otherwise they are `std`'s.
//! The algorithms never call the kernel directly: they go through [`Env`],
//! which the real [`Participant`](crate::Participant) implements with shared
//! futexes and OFD-lock liveness probes, and test/loom models implement with
//! yields and an in-memory "who is dead" table.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU32, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU32, Ordering};

use std::time::{Duration, Instant};

/// How long a blocked waiter sleeps before it re-checks the owner's liveness.
///
/// This bounds how long a waiter stays blocked on a dead owner (plus the
/// cost of one liveness probe).
pub const LIVENESS_TICK: Duration = Duration::from_millis(10);

/// Bit 28 marks a valid owner token, so a token is never zero.
pub(crate) const TOKEN_VALID: u32 = 1 << 28;
/// Participant slot bits of a token (`0..64`).
pub(crate) const TOKEN_SLOT_BITS: u32 = 6;
/// Mask of the slot part of a token.
pub(crate) const TOKEN_SLOT_MASK: u32 = (1 << TOKEN_SLOT_BITS) - 1;
/// Mask of the generation part of a token, after shifting.
pub(crate) const TOKEN_GEN_MASK: u32 = (1 << 22) - 1;
/// Mask of all token bits (valid bit + generation + slot).
pub(crate) const TOKEN_MASK: u32 = (1 << 29) - 1;

/// Builds the owner token of participant `slot` at `generation`.
pub(crate) const fn make_token(slot: u32, generation: u32) -> u32 {
    TOKEN_VALID | ((generation & TOKEN_GEN_MASK) << TOKEN_SLOT_BITS) | (slot & TOKEN_SLOT_MASK)
}

/// Splits a token into `(slot, generation)`; `None` if it is not a valid token.
pub(crate) const fn split_token(token: u32) -> Option<(u32, u32)> {
    if token & !TOKEN_MASK != 0 || token & TOKEN_VALID == 0 {
        return None;
    }
    Some((
        token & TOKEN_SLOT_MASK,
        (token >> TOKEN_SLOT_BITS) & TOKEN_GEN_MASK,
    ))
}

/// What the lock algorithms need from their surroundings.
pub(crate) trait Env {
    /// This participant's owner token (valid, nonzero).
    fn token(&self) -> u32;
    /// Blocks while `*word == expected`, for at most `timeout` (spurious
    /// wake-ups allowed).
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Duration);
    /// Wakes up to `n` waiters blocked on `word`.
    fn wake(&self, word: &AtomicU32, n: u32);
    /// Whether the participant identified by `token` is still alive.
    ///
    /// Must return `false` for invalid tokens and for tokens whose slot has
    /// been reused by a newer generation. May (rarely) report a dead
    /// participant alive for a short while, never an alive one dead.
    fn token_alive(&self, token: u32) -> bool;
    /// The current time (used only for deadlines).
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// Remaining time until `deadline`, capped at [`LIVENESS_TICK`];
/// `None` when the deadline has passed.
pub(crate) fn next_wait(now: Instant, deadline: Option<Instant>) -> Option<Duration> {
    match deadline {
        None => Some(LIVENESS_TICK),
        Some(d) if now >= d => None,
        Some(d) => Some((d - now).min(LIVENESS_TICK)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_round_trip() {
        for slot in [0, 1, 31, 63] {
            for generation in [0, 1, 77, TOKEN_GEN_MASK] {
                let t = make_token(slot, generation);
                assert_ne!(t, 0);
                assert_eq!(split_token(t), Some((slot, generation)));
            }
        }
        assert_eq!(split_token(0), None);
        assert_eq!(split_token(1 << 31), None);
        assert_eq!(split_token(5), None);
    }

    #[test]
    fn next_wait_caps_and_expires() {
        let now = Instant::now();
        assert_eq!(next_wait(now, None), Some(LIVENESS_TICK));
        assert_eq!(next_wait(now, Some(now)), None);
        let w = next_wait(now, Some(now + Duration::from_millis(2))).unwrap();
        assert!(w <= Duration::from_millis(2));
        let w = next_wait(now, Some(now + Duration::from_secs(5))).unwrap();
        assert_eq!(w, LIVENESS_TICK);
    }
}
