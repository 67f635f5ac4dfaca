//! A cross-process event counter (a shared futex word).

use std::time::{Duration, Instant};

use crate::sync::{AtomicU32, Ordering};
use crate::sys;

/// A notification word in shared memory: `notify` bumps a sequence number
/// and wakes sleepers; `wait_while` sleeps until the sequence differs from
/// the one the caller saw. Useful for "data ready" hand-offs.
#[repr(C)]
#[derive(Debug, Default)]
pub struct ShmEvent {
    seq: AtomicU32,
}

impl ShmEvent {
    /// The current sequence number.
    pub fn current(&self) -> u32 {
        self.seq.load(Ordering::Acquire)
    }

    /// Bumps the sequence and wakes every waiter (one `FUTEX_WAKE`).
    pub fn notify(&self) -> u32 {
        let s = self.seq.fetch_add(1, Ordering::AcqRel).wrapping_add(1);
        sys::futex_wake(&self.seq, u32::MAX);
        s
    }

    /// Waits until the sequence differs from `seen` or `timeout` passes.
    /// Returns the new sequence, or `None` on timeout.
    pub fn wait_while(&self, seen: u32, timeout: Duration) -> Option<u32> {
        let deadline = Instant::now().checked_add(timeout);
        loop {
            let cur = self.seq.load(Ordering::Acquire);
            if cur != seen {
                return Some(cur);
            }
            let left = match deadline {
                Some(d) => d
                    .checked_duration_since(Instant::now())
                    .filter(|l| !l.is_zero())?,
                None => Duration::from_secs(1),
            };
            sys::futex_wait(&self.seq, seen, left);
        }
    }
}
