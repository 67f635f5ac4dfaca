//! How far a stream's consumers have come ([`StreamReleases`]): for a
//! producer that grants credit to a sender elsewhere by what its
//! consumers have finished with (`fastio-net`'s bridges).

use super::*;

/// A handle on a stream that reads, and waits for, how many frames every
/// attached consumer has released (ring invariant 3). It takes no role:
/// no producer's or consumer's place, no slot; any number may exist.
#[derive(Debug)]
pub struct StreamReleases {
    core: StreamCore,
}

impl StreamReleases {
    /// Frames below this number are released by every attached consumer
    /// (at most the frames published).
    pub fn released(&self) -> u64 {
        self.core.ring().released()
    }

    /// Waits until [`released`](StreamReleases::released) is past `seen`
    /// (a consumer let go of a frame), or the stream ends or fails, or
    /// `timeout` passes; returns what it is then. Sleeps on the stream's
    /// space event (the one a waiting producer sleeps on: every release
    /// bumps it).
    pub fn wait_past(&self, seen: u64, timeout: Duration) -> u64 {
        let deadline = deadline(Some(timeout));
        let space = self.core.event(h::SPACE_EVENT);
        loop {
            let bump = space.current();
            let now = self.released();
            let end = self.core.word(h::END).load(Ordering::SeqCst);
            if now > seen || end != 0 {
                return now;
            }
            if !self.core.wait_without_spin(space, bump, deadline) {
                return self.released();
            }
        }
    }
}

impl Context {
    /// A [`StreamReleases`] of stream `name`: how far its consumers have
    /// come, without taking any place in it.
    pub fn stream_releases(&self, name: &str) -> Result<StreamReleases> {
        Ok(StreamReleases {
            core: self.open_stream(name)?,
        })
    }
}
