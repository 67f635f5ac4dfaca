//! The producer of a stream ([`StreamProducer`]) and the slot it writes
//! ([`SlotMut`]).

use super::*;

/// The producer of a stream: one process at a time.
#[derive(Debug)]
pub struct StreamProducer {
    pub(super) core: StreamCore,
    pub(super) next: u64,
    /// What this producer knows of the slots (ring invariant 8).
    pub(super) slots: ProducerSlots,
    /// The slot taken and not yet published.
    pub(super) begun: Option<Begun>,
    pub(super) ended: bool,
}

/// A slot a producer took.
#[derive(Debug)]
pub(super) struct Begun {
    pub(super) slot: usize,
    pub(super) off: usize,
    pub(super) shape: Vec<usize>,
    pub(super) source: Option<(u64, u64)>,
}

impl StreamProducer {
    /// The producer of `core` from frame `next` on (`head`: a producer
    /// that takes a dead one's place goes on where it stopped).
    pub(super) fn new(core: StreamCore, next: u64) -> StreamProducer {
        let slots = core.ring().producer_slots(next);
        StreamProducer {
            core,
            next,
            slots,
            begun: None,
            ended: false,
        }
    }

    /// The stream's name.
    pub fn name(&self) -> &str {
        &self.core.name
    }

    /// The number the next frame gets.
    pub fn next_seq(&self) -> u64 {
        self.next
    }

    /// The source frame of the last frame published (by this producer or
    /// one before it), if any: a producer that takes a dead one's place
    /// skips what was already delivered.
    pub fn last_source_seq(&self) -> Option<u64> {
        let last = self.next.checked_sub(1)?;
        let ring = self.core.ring();
        // The slot whose record holds that frame (any overflow mode).
        (0..ring.slots()).find_map(|k| {
            (ring.sw(k, s::SEQ).load(Ordering::Acquire) == last)
                .then(|| ring.sw(k, s::SOURCE_SEQ).load(Ordering::Relaxed))
        })
    }

    /// The element type of every frame.
    pub fn element(&self) -> Primitive {
        self.core.element
    }

    /// The largest shape of a frame.
    pub fn max_shape(&self) -> &[usize] {
        &self.core.max_shape
    }

    /// Waits (at most `timeout`; `None`: as long as it takes) until the
    /// next slot is free and returns it to be written. Under `block` that
    /// is when every consumer released the frame the slot held; a consumer
    /// that died is detached (or, with
    /// [`StreamOptions::consumer_may_restart`], waited for).
    pub fn next_slot(&mut self, timeout: Option<Duration>) -> Result<SlotMut<'_>> {
        self.begin(timeout)?;
        Ok(SlotMut { producer: self })
    }

    /// Takes the next slot (as [`next_slot`](StreamProducer::next_slot)),
    /// kept in the producer until [`publish`](StreamProducer::publish); a
    /// slot taken and not published is taken again by the next call.
    pub fn begin(&mut self, timeout: Option<Duration>) -> Result<()> {
        if self.ended {
            return Err(Error::StreamConfig {
                stream: self.core.name.clone(),
                reason: "the stream was ended".into(),
            });
        }
        if self.begun.is_some() {
            return Ok(());
        }
        let core = &self.core;
        let space = core.event(h::SPACE_EVENT);
        // Liveness probes read /proc: only once a wait has lasted a tick.
        let mut clock: Option<WaitClock> = None;
        let slot = loop {
            if let Some(e) = core.end_error(core.word(h::END).load(Ordering::SeqCst)) {
                return Err(e);
            }
            let seen = space.current();
            let ring = core.ring();
            let room = ring
                .try_begin(self.next, &mut self.slots)
                .map_err(|e| Error::corrupt(format!("stream {}: {e}", core.name)))?;
            match room {
                Space::Ready(slot) => break slot,
                Space::Wait(i) => {
                    let WaitClock { started, deadline } =
                        *clock.get_or_insert_with(|| WaitClock::start(timeout));
                    let owner = ring.cw(i, c::OWNER);
                    let o = owner.load(Ordering::SeqCst);
                    let recorder = core.flags & FLAG_RECORDER_PLACE != 0 && i + 1 == core.consumers;
                    if o != 0
                        && o & DETACHED == 0
                        && (core.flags & FLAG_CONSUMER_RESTART == 0 || recorder)
                        && started.elapsed() >= LIVENESS_TICK
                        && !core.ctx.shared.token_alive(o as u32)
                    {
                        // A dead consumer stops holding the ring.
                        let _ = owner.compare_exchange(
                            o,
                            o | DETACHED,
                            Ordering::SeqCst,
                            Ordering::SeqCst,
                        );
                        continue;
                    }
                    if !core.wait(space, seen, deadline) {
                        return Err(Error::StreamTimeout {
                            stream: core.name.clone(),
                            what: "waiting for a free slot",
                        });
                    }
                }
            }
        };
        self.begun = Some(Begun {
            slot,
            off: self.core.slot_off(slot),
            shape: self.core.max_shape.clone(),
            source: None,
        });
        Ok(())
    }

    pub(super) fn begun(&mut self) -> Result<&mut Begun> {
        let name = &self.core.name;
        self.begun.as_mut().ok_or_else(|| Error::StreamConfig {
            stream: name.clone(),
            reason: "no slot taken: call begin first".into(),
        })
    }

    /// Sets the taken frame's shape: as many dimensions as the stream's
    /// largest shape, each at most its size.
    pub fn set_shape(&mut self, shape: &[usize]) -> Result<()> {
        let max = &self.core.max_shape;
        if shape.len() != max.len() || shape.iter().zip(max).any(|(d, m)| d > m) {
            return Err(Error::StreamConfig {
                stream: self.core.name.clone(),
                reason: format!("frame shape {shape:?} exceeds the largest shape {max:?}"),
            });
        }
        self.begun()?.shape = shape.to_vec();
        Ok(())
    }

    /// The taken frame's shape.
    pub fn shape(&self) -> Option<&[usize]> {
        self.begun.as_ref().map(|b| &b.shape[..])
    }

    /// Says which source frame the taken one derives from and when that
    /// was taken (ns since the Unix epoch). By default a frame is its own
    /// source, stamped when published.
    pub fn set_source(&mut self, seq: u64, timestamp_ns: u64) -> Result<()> {
        self.begun()?.source = Some((seq, timestamp_ns));
        Ok(())
    }

    /// The taken frame's bytes (for its current shape), to write.
    pub fn bytes_mut(&mut self) -> Result<&mut [u8]> {
        let elem = self.core.elem_size;
        let b = self.begun.as_ref().ok_or_else(|| Error::StreamConfig {
            stream: self.core.name.clone(),
            reason: "no slot taken: call begin first".into(),
        })?;
        let len = b.shape.iter().product::<usize>() * elem;
        // SAFETY: ring invariants 2 to 4: `begin` gave this producer the
        // slot, no consumer holds a frame in it until it is published, and
        // the `&mut self` borrow excludes every other use of it here (one
        // producer per stream: `Context::stream_producer`). The range lies
        // inside the slot (the shape is at most the largest).
        unsafe { self.core.region.bytes_mut(b.off, len) }
    }

    /// Publishes the taken frame: consumers see it whole from now on.
    pub fn publish(&mut self) -> Result<()> {
        let b = self.begun.take().ok_or_else(|| Error::StreamConfig {
            stream: self.core.name.clone(),
            reason: "no slot taken: call begin first".into(),
        })?;
        let core = &self.core;
        let ring = core.ring();
        let seq = self.next;
        let len = (b.shape.iter().product::<usize>() * core.elem_size) as u64;
        let (source_seq, ts) = b.source.unwrap_or((seq, now_ns()));
        let k = b.slot;
        ring.sw(k, s::LEN).store(len, Ordering::Relaxed);
        ring.sw(k, s::SOURCE_SEQ)
            .store(source_seq, Ordering::Relaxed);
        ring.sw(k, s::TIMESTAMP).store(ts, Ordering::Relaxed);
        ring.sw(k, s::NDIM)
            .store(b.shape.len() as u64, Ordering::Relaxed);
        for (i, &d) in b.shape.iter().enumerate() {
            ring.sw(k, s::DIMS + i).store(d as u64, Ordering::Relaxed);
        }
        ring.publish(seq, k, &mut self.slots);
        core.event(h::DATA_EVENT).notify();
        self.next = seq.wrapping_add(1);
        Ok(())
    }

    /// Ends the stream after the frames published so far: every consumer
    /// sees the end after the last of them.
    pub fn end(&mut self) -> Result<()> {
        if !self.ended {
            self.ended = true;
            let _ = self.core.word(h::END).compare_exchange(
                0,
                ENDED | (self.next & END_MASK),
                Ordering::SeqCst,
                Ordering::SeqCst,
            );
            self.core.event(h::DATA_EVENT).notify();
        }
        Ok(())
    }

    /// Marks the stream failed from the next frame (a producer that cannot
    /// go on): consumers get [`Error::StreamPoisoned`].
    pub fn poison(&mut self) {
        self.ended = true;
        self.core.poison(self.next);
    }
}

impl Drop for StreamProducer {
    /// A producer dropped without [`end`](StreamProducer::end) ends the
    /// stream (as closing a channel does).
    fn drop(&mut self) {
        let _ = self.end();
    }
}

/// A slot being written: the next frame. [`publish`](SlotMut::publish)
/// makes it visible; dropping it unpublished leaves it to be written
/// again by the next [`StreamProducer::next_slot`].
#[derive(Debug)]
pub struct SlotMut<'a> {
    pub(super) producer: &'a mut StreamProducer,
}

impl SlotMut<'_> {
    /// The frame's number.
    pub fn seq(&self) -> u64 {
        self.producer.next
    }

    /// The frame's shape (the largest until [`set_shape`](SlotMut::set_shape)).
    pub fn shape(&self) -> &[usize] {
        self.producer.shape().unwrap_or(&[])
    }

    /// Sets the frame's shape: as many dimensions as the stream's largest
    /// shape, each at most its size.
    pub fn set_shape(&mut self, shape: &[usize]) -> Result<()> {
        self.producer.set_shape(shape)
    }

    /// Says which source frame this one derives from and when that was
    /// taken (nanoseconds since the Unix epoch). By default a frame is its
    /// own source, stamped when published.
    pub fn set_source(&mut self, seq: u64, timestamp_ns: u64) {
        let _ = self.producer.set_source(seq, timestamp_ns);
    }

    /// The frame's bytes (for its current shape), to write.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        self.producer
            .bytes_mut()
            .expect("a SlotMut exists only while its slot is taken, inside its stream")
    }

    /// Publishes the frame: consumers see it whole from now on.
    pub fn publish(self) -> Result<()> {
        self.producer.publish()
    }
}
