//! A consumer of a stream ([`StreamConsumer`]) and its frames
//! ([`Frames`]).

use super::*;

/// What a consumer and the frames it took share.
#[derive(Debug)]
pub(super) struct ConsumerShared {
    pub(super) core: StreamCore,
    pub(super) index: usize,
    /// This process's token, as in the record's owner word.
    pub(super) token: u64,
    /// The frames of this consumer that are alive (several under `block`:
    /// released out of order, the shared cursor stays at the oldest).
    pub(super) held: Mutex<Held>,
    /// The next frame `next` takes.
    pub(super) read: AtomicU64,
}

impl ConsumerShared {
    pub(super) fn held(&self) -> MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The numbers of the frames a consumer holds, in order: at most the
/// stream's depth (`StreamConsumer::next` refuses one more), in room
/// reserved when the consumer attaches, so taking and dropping a frame
/// never allocates.
#[derive(Debug)]
pub(super) struct Held(Vec<u64>);

impl Held {
    /// Room for `most` frames.
    pub(super) fn with_room(most: usize) -> Held {
        Held(Vec::with_capacity(most))
    }

    /// Frames held.
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    /// The oldest frame held.
    pub(super) fn first(&self) -> Option<u64> {
        self.0.first().copied()
    }

    /// Frame `seq` is held (frames are taken in order: it goes last).
    pub(super) fn insert(&mut self, seq: u64) {
        let at = self.0.partition_point(|&s| s < seq);
        if self.0.get(at) != Some(&seq) {
            self.0.insert(at, seq);
        }
    }

    /// Frame `seq` is no longer held.
    pub(super) fn remove(&mut self, seq: u64) {
        if let Ok(at) = self.0.binary_search(&seq) {
            self.0.remove(at);
        }
    }
}

impl Drop for ConsumerShared {
    /// When the consumer and every frame (and array) it gave out are gone,
    /// its index is detached: the producer stops keeping frames for it.
    /// Not before: a live frame's slot must not be written.
    fn drop(&mut self) {
        let owner = self.core.ring().cw(self.index, c::OWNER);
        let _ = owner.compare_exchange(
            self.token,
            self.token | DETACHED,
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
        self.core.event(h::SPACE_EVENT).notify();
    }
}

/// A consumer of a stream: it sees every frame in order.
#[derive(Debug)]
pub struct StreamConsumer {
    pub(super) shared: Arc<ConsumerShared>,
}

impl StreamConsumer {
    /// The stream's name.
    pub fn name(&self) -> &str {
        &self.shared.core.name
    }

    /// This consumer's index.
    pub fn index(&self) -> usize {
        self.shared.index
    }

    /// The number of the next frame it reads.
    pub fn next_seq(&self) -> u64 {
        self.shared.read.load(Ordering::Acquire)
    }

    /// Frames it lost to `drop-oldest` so far.
    pub fn dropped(&self) -> u64 {
        self.shared
            .core
            .ring()
            .cw(self.shared.index, c::DROPPED)
            .load(Ordering::Relaxed)
    }

    /// The next frame, waiting at most `timeout` (`None`: as long as it
    /// takes). `Ok(None)` once the producer ended the stream and every
    /// frame was read. [`Error::StreamPoisoned`] when the producer died
    /// (and may not restart) or the stream was stopped;
    /// [`Error::FrameHeld`] when the next frame could never come while this
    /// consumer keeps the frames it holds: under `drop-oldest` it may hold
    /// one, under `block` any frames within `depth` of the oldest it holds
    /// (frames may be dropped in any order; the slot of each goes back once
    /// every older one did).
    pub fn next(&mut self, timeout: Option<Duration>) -> Result<Option<Frame>> {
        let sh = &self.shared;
        let core = &sh.core;
        {
            let held = sh.held();
            let most = core.most_held();
            // The producer writes frame `n` only once every frame up to
            // `n - depth` is released: past that, the wait would never end.
            let read = sh.read.load(Ordering::Acquire);
            let pinned = held
                .first()
                .is_some_and(|oldest| read >= oldest.saturating_add(core.depth));
            if held.len() >= most || pinned {
                return Err(Error::FrameHeld(core.name.clone()));
            }
        }
        let data = core.event(h::DATA_EVENT);
        // Liveness probes read /proc: only once a wait has lasted a tick.
        let mut clock: Option<WaitClock> = None;
        loop {
            let seen = data.current();
            let ring = core.ring();
            let next = sh.read.load(Ordering::Acquire);
            match ring
                .poll(sh.index, next)
                .map_err(|e| Error::corrupt(format!("stream {}: {e}", core.name)))?
            {
                Poll::Frame(seq, slot) => {
                    let mut held = sh.held();
                    let frame = match Frame::read(sh, seq, slot) {
                        Ok(f) => f,
                        Err(e) => {
                            ring.release_to(
                                sh.index,
                                held.first().unwrap_or(seq.saturating_add(1)),
                            );
                            sh.read.store(seq.saturating_add(1), Ordering::Release);
                            return Err(e);
                        }
                    };
                    held.insert(seq);
                    sh.read.store(seq.saturating_add(1), Ordering::Release);
                    return Ok(Some(frame));
                }
                Poll::Skipped(to) => {
                    sh.read.store(to, Ordering::Release);
                    // The producer may wait on the holding we gave up.
                    core.event(h::SPACE_EVENT).notify();
                    continue;
                }
                Poll::Empty => {}
            }
            let WaitClock { started, deadline } =
                *clock.get_or_insert_with(|| WaitClock::start(timeout));
            let end = core.word(h::END).load(Ordering::SeqCst);
            if end & ENDED != 0 && next >= end & END_MASK {
                return Ok(None);
            }
            if let Some(e) = core.end_error(end) {
                return Err(e);
            }
            let producer = core.word(h::PRODUCER).load(Ordering::SeqCst);
            if producer != 0
                && started.elapsed() >= LIVENESS_TICK
                && !core.ctx.shared.token_alive(producer as u32)
            {
                // Published before it died? Look once more, then decide.
                if ring.head() > next {
                    continue;
                }
                if core.flags & FLAG_PRODUCER_RESTART == 0 {
                    core.poison(next);
                    return Err(core.poisoned(next, "its producer died"));
                }
            }
            if !core.wait(data, seen, deadline) {
                return Err(Error::StreamTimeout {
                    stream: core.name.clone(),
                    what: "waiting for a frame",
                });
            }
        }
    }

    /// The frames until the end of the stream, each waited for as long as
    /// it takes: `for frame in consumer.frames() { let frame = frame?; … }`.
    /// Frames kept past their iteration count against the limit of
    /// [`next`](StreamConsumer::next).
    pub fn frames(&mut self) -> Frames<'_> {
        Frames {
            consumer: self,
            timeout: None,
            done: false,
        }
    }
}

/// The frames of a consumer ([`StreamConsumer::frames`]).
#[derive(Debug)]
pub struct Frames<'a> {
    pub(super) consumer: &'a mut StreamConsumer,
    pub(super) timeout: Option<Duration>,
    pub(super) done: bool,
}

impl Frames<'_> {
    /// Each wait for a frame ends with [`Error::StreamTimeout`] after
    /// `timeout`.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

impl Iterator for Frames<'_> {
    type Item = Result<Frame>;

    fn next(&mut self) -> Option<Result<Frame>> {
        if self.done {
            return None;
        }
        match self.consumer.next(self.timeout) {
            Ok(Some(f)) => Some(Ok(f)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                if !matches!(e, Error::FrameHeld(_) | Error::StreamTimeout { .. }) {
                    self.done = true;
                }
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Held;

    /// Frames dropped in any order leave the oldest still held first, and
    /// the room reserved at attach is never outgrown.
    #[test]
    fn held_frames_stay_in_order_without_growing() {
        let mut h = Held::with_room(4);
        let room = h.0.capacity();
        for s in [5, 6, 7, 8] {
            h.insert(s);
        }
        h.insert(6);
        assert_eq!(h.len(), 4, "a frame held twice counts once");
        h.remove(6);
        assert_eq!((h.first(), h.len()), (Some(5), 3));
        h.remove(5);
        assert_eq!(h.first(), Some(7));
        h.remove(42);
        assert_eq!(h.len(), 2);
        h.insert(9);
        h.insert(3);
        assert_eq!(h.0, vec![3, 7, 8, 9]);
        assert_eq!(h.0.capacity(), room);
        h.remove(3);
        h.remove(7);
        h.remove(8);
        h.remove(9);
        assert_eq!(h.first(), None);
    }
}
