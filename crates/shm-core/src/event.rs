//! A cross-process event counter (a shared futex word).

use std::time::{Duration, Instant};

use crate::sync::{AtomicU32, Ordering};
use crate::sys;

/// A notification word in shared memory: `notify` bumps a sequence number
/// and wakes sleepers; `wait_while` sleeps until the sequence differs from
/// the one the caller saw. Useful for "data ready" hand-offs.
///
/// A second word counts sleepers, so `notify` makes a system call only
/// when someone waits: a waiter counts itself before it re-checks the
/// sequence, a notifier bumps the sequence before it checks the count,
/// both with sequentially consistent atomics, so at least one of them sees
/// the other (a wake-up is never lost). A waiter that dies while counted
/// only costs later notifiers a useless `FUTEX_WAKE`.
#[repr(C)]
#[derive(Debug, Default)]
pub struct ShmEvent {
    seq: AtomicU32,
    waiters: AtomicU32,
}

impl ShmEvent {
    /// The current sequence number.
    pub fn current(&self) -> u32 {
        self.seq.load(Ordering::Acquire)
    }

    /// Bumps the sequence and wakes every waiter (one `FUTEX_WAKE`, only
    /// when someone waits).
    pub fn notify(&self) -> u32 {
        let s = self.bump();
        self.wake_waiters();
        s
    }

    /// The first half of [`notify`](ShmEvent::notify): bumps the sequence
    /// and returns the new one, without waking anyone. A caller that bumps
    /// while it holds a lock (so that the sequence orders its change
    /// against every other bump) calls [`wake_waiters`](ShmEvent::wake_waiters)
    /// once it let go: a sleeper is still never lost, since the count is
    /// read after the bump, whenever that is.
    pub fn bump(&self) -> u32 {
        self.seq.fetch_add(1, Ordering::SeqCst).wrapping_add(1)
    }

    /// The second half of [`notify`](ShmEvent::notify), after a
    /// [`bump`](ShmEvent::bump): wakes every waiter (one `FUTEX_WAKE`,
    /// only when someone waits).
    pub fn wake_waiters(&self) {
        if self.waiters.load(Ordering::SeqCst) != 0 {
            sys::futex_wake(&self.seq, u32::MAX);
        }
    }

    /// Spins (no system call, no sleep) until the sequence differs from
    /// `seen` or `budget` passes. Returns the new sequence, or `None` when
    /// the budget ran out (a zero budget returns at once). A waiter that
    /// expects a notification within microseconds spins first and then
    /// sleeps with [`wait_while`](ShmEvent::wait_while): it trades a core's
    /// time for not paying a futex wake-up on either side (a notifier only
    /// makes the system call when someone sleeps).
    pub fn spin_while(&self, seen: u32, budget: Duration) -> Option<u32> {
        if budget.is_zero() {
            return None;
        }
        let start = Instant::now();
        loop {
            for _ in 0..64 {
                let cur = self.seq.load(Ordering::Acquire);
                if cur != seen {
                    return Some(cur);
                }
                std::hint::spin_loop();
            }
            if start.elapsed() >= budget {
                return None;
            }
        }
    }

    /// Waits until the sequence differs from `seen` or `timeout` passes.
    /// Returns the new sequence, or `None` on timeout.
    pub fn wait_while(&self, seen: u32, timeout: Duration) -> Option<u32> {
        let deadline = Instant::now().checked_add(timeout);
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let result = loop {
            let cur = self.seq.load(Ordering::SeqCst);
            if cur != seen {
                break Some(cur);
            }
            let left = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(l) if !l.is_zero() => l,
                    _ => break None,
                },
                None => Duration::from_secs(1),
            };
            sys::futex_wait(&self.seq, seen, left);
        };
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        result
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// One notify wakes every sleeper, not one of them: each of four
    /// threads asleep on the event returns the new sequence long before its
    /// 20 s timeout (with the count the kernel read as -1, three of them
    /// slept until it).
    #[test]
    #[cfg_attr(miri, ignore = "futex system calls")]
    fn one_notify_wakes_every_sleeper() {
        let event = std::sync::Arc::new(ShmEvent::default());
        let seen = event.current();
        let sleepers: Vec<_> = (0..4)
            .map(|_| {
                let e = event.clone();
                std::thread::spawn(move || {
                    let t0 = Instant::now();
                    (e.wait_while(seen, Duration::from_secs(20)), t0.elapsed())
                })
            })
            .collect();
        // Every sleeper counted (so asleep, or about to re-check).
        let t0 = Instant::now();
        while event.waiters.load(Ordering::SeqCst) < 4 {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the sleepers never slept"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // Give each time to enter the futex wait.
        std::thread::sleep(Duration::from_millis(50));
        let new = event.notify();
        for s in sleepers {
            let (got, took) = s.join().unwrap();
            assert_eq!(got, Some(new), "a sleeper was not woken");
            assert!(took < Duration::from_secs(10), "a sleeper slept {took:?}");
        }
    }
}
