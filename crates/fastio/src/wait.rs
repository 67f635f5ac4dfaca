//! Waiting for the names to change: [`Context::wait_for`] and
//! [`Context::map_wait`] (a name appears), [`Context::wait_unpublished`]
//! (a name goes), on the context's publication event (a futex word in the
//! segment, shm-core's `ShmEvent`, bumped by every publish and free),
//! optionally spinning first.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::Allocation;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::mapping::MappedPublished;

impl Context {
    /// Waits until `name` is published (or `timeout` passes) and gets it:
    /// a futex wait in the context, woken by every publication, so the
    /// waiter learns of the name without polling or a message. A
    /// publisher that dies never blocks the waiter beyond `timeout`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let ctx = fastio::Context::new(&fastio::ContextOptions::new().anonymous(true)).unwrap();
    /// let a = ctx.create(16).unwrap();
    /// a.publish("ready").unwrap();
    /// let got = ctx.wait_for("ready", Duration::from_secs(1)).unwrap();
    /// assert_eq!(got.size(), 16);
    /// assert!(matches!(
    ///     ctx.wait_for("never", Duration::from_millis(1)),
    ///     Err(fastio::Error::WaitTimeout(_))
    /// ));
    /// ```
    pub fn wait_for(&self, name: &str, timeout: Duration) -> Result<Allocation> {
        self.until(name, timeout, false, |n| self.get(n))
    }

    /// [`wait_for`](Context::wait_for) and [`map`](Context::map): waits
    /// until `name` is published, then maps it for reading.
    pub fn map_wait(&self, name: &str, timeout: Duration) -> Result<MappedPublished> {
        self.until(name, timeout, false, |n| self.map(n))
    }

    /// Waits until `name` is no longer published (or `timeout` passes):
    /// the producer's side of a handoff whose consumer
    /// [`free`](crate::Allocation::free)s what it took (or
    /// [`MappedPublished::free`]), on the same event as
    /// [`wait_for`](Context::wait_for), so no acknowledgement needs to be
    /// published.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let ctx = fastio::Context::new(&fastio::ContextOptions::new().anonymous(true)).unwrap();
    /// let a = ctx.create(16).unwrap();
    /// a.publish("frame").unwrap();
    /// assert!(matches!(
    ///     ctx.wait_unpublished("frame", Duration::from_millis(1)),
    ///     Err(fastio::Error::WaitTimeout(_))
    /// ));
    /// ctx.map("frame").unwrap().free().unwrap(); // the consumer is done
    /// ctx.wait_unpublished("frame", Duration::from_secs(1)).unwrap();
    /// ```
    pub fn wait_unpublished(&self, name: &str, timeout: Duration) -> Result<()> {
        self.until(name, timeout, true, |n| {
            if self.is_published(n)? {
                Err(Error::UnknownName(n.to_owned()))
            } else {
                Ok(())
            }
        })
    }

    /// How long [`wait_for`](Context::wait_for) and
    /// [`map_wait`](Context::map_wait) of this process (every clone of
    /// this handle) spin, watching the publication event without a system
    /// call, before they sleep on it. Zero, the default, sleeps at once.
    ///
    /// Sleeping costs a futex wake-up on each side of a handoff (tens of
    /// microseconds on a small VM); spinning costs a core while it lasts.
    /// Spin when a publication is expected within the budget and the
    /// machine has a core to spare for each spinning waiter.
    pub fn set_wait_spin(&self, budget: Duration) {
        let ns = u64::try_from(budget.as_nanos()).unwrap_or(u64::MAX);
        self.shared.wait_spin_ns.store(ns, Ordering::Relaxed);
    }

    /// The spin budget [`set_wait_spin`](Context::set_wait_spin) set.
    pub fn wait_spin(&self) -> Duration {
        Duration::from_nanos(self.shared.wait_spin_ns.load(Ordering::Relaxed))
    }

    /// Runs `look(name)` until it stops failing with `UnknownName`
    /// ("not yet"), spinning and then sleeping on the publication event
    /// between tries, for at most `timeout`. `not_yet` is whether the
    /// name is published while the wait goes on (false: waiting for it
    /// to appear): when this process knows, without looking, that
    /// the name is so (it made the last change of the names itself and
    /// nobody changed them since), the first look is skipped and the wait
    /// starts at once: the lock stays with the process about to publish
    /// (or free) instead.
    fn until<T>(
        &self,
        name: &str,
        timeout: Duration,
        not_yet: bool,
        look: impl Fn(&str) -> Result<T>,
    ) -> Result<T> {
        let deadline = Instant::now() + timeout;
        let event = self.shared.publications()?;
        let spin = self.wait_spin();
        let mut first = true;
        loop {
            let seen = event.current();
            let skip = first
                && self.shared.known_published(name) == Some(not_yet)
                // The sequence the memo is of is the one waited from.
                && event.current() == seen;
            first = false;
            if !skip {
                match look(name) {
                    Err(Error::UnknownName(_)) => {}
                    other => return other,
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::WaitTimeout(name.to_owned()));
            }
            if event.spin_while(seen, spin.min(left)).is_none() {
                event.wait_while(seen, left);
            }
        }
    }
}
