//! A stream's observer ([`StreamTap`]): a recorder that is none of its
//! consumers. It copies frames as they pass and never holds one, so the
//! producer never waits for it; a frame overwritten before it could be
//! copied is counted as skipped (ring invariant 6).

use super::*;

/// A frame copied out of a stream by a [`StreamTap`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopiedFrame {
    /// Its number in the stream.
    pub seq: u64,
    /// The number of the source frame it derives from.
    pub source_seq: u64,
    /// When the source frame was taken (ns since the Unix epoch).
    pub timestamp_ns: u64,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// Reads a stream without being one of its consumers: lossy, and never a
/// weight on the producer ([`Context::stream_tap`]).
#[derive(Debug)]
pub struct StreamTap {
    core: StreamCore,
    next: u64,
    skipped: u64,
    /// The last frame it copied came after frames it had to skip: it
    /// cannot keep up, so it rests for [`POLL`] before it looks again.
    behind: bool,
}

/// How long an observer that fell behind rests after each copy. An
/// observer that keeps up sleeps on the stream's data event and copies
/// every frame (the producer then makes a wake-up call per frame). One
/// that lost frames (the producer went round the ring past it) cannot
/// keep up: it takes a sample every `POLL` instead, from the newest frame,
/// and never sleeps on the event, so the producer makes no call for it and
/// it takes no more of the machine's spare cores and memory bandwidth.
/// (The bench measured an observer looking every 250 µs, or copying
/// without rest, slowing the source by a fifth to a third.)
const POLL: Duration = Duration::from_millis(10);

impl Context {
    /// Observes stream `name` from its next frame on (a recorder attaching
    /// to a running pipeline), without taking a consumer's place.
    pub fn stream_tap(&self, name: &str) -> Result<StreamTap> {
        let core = self.open_stream(name)?;
        let ring = core.ring();
        ring.observer_attached();
        let next = ring.head();
        Ok(StreamTap {
            core,
            next,
            skipped: 0,
            behind: false,
        })
    }
}

impl Drop for StreamTap {
    /// Frames go back to being kept warm rather than kept long (ring
    /// invariant 8).
    fn drop(&mut self) {
        self.core.ring().observer_left();
    }
}

impl StreamTap {
    /// The stream's name.
    pub fn name(&self) -> &str {
        &self.core.name
    }

    /// The element type of its frames.
    pub fn element(&self) -> Primitive {
        self.core.element
    }

    /// The largest shape of its frames.
    pub fn max_shape(&self) -> &[usize] {
        &self.core.max_shape
    }

    /// Frames published since it attached that it could not copy.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// The next frame it could copy, waiting at most `timeout` (`None`: as
    /// long as it takes). `Ok(None)` once the stream ended and every frame
    /// was seen; [`Error::StreamPoisoned`] when it failed;
    /// [`Error::StreamTimeout`] after `timeout`.
    pub fn next(&mut self, timeout: Option<Duration>) -> Result<Option<CopiedFrame>> {
        let deadline = deadline(timeout);
        let data = self.core.event(h::DATA_EVENT);
        if std::mem::take(&mut self.behind) {
            let nap = match deadline {
                None => POLL,
                Some(d) => d.saturating_duration_since(Instant::now()).min(POLL),
            };
            std::thread::sleep(nap);
        }
        loop {
            let seen = data.current();
            let ring = self.core.ring();
            let head = ring.head();
            if head > self.next {
                // Frames the ring keeps are copied in order. Once frames
                // were lost (it fell behind by more than the ring), it goes
                // on from the newest: the frame with the most time left
                // before it is overwritten (a copy of the oldest would race
                // the producer), the frames between are skipped.
                let oldest = head.saturating_sub(self.core.depth);
                if self.next < oldest {
                    let newest = head - 1;
                    self.skipped += newest - self.next;
                    self.next = newest;
                    self.behind = true;
                }
                let n = self.next;
                self.next = n.saturating_add(1);
                match self.copy(n)? {
                    Some(f) => return Ok(Some(f)),
                    None => {
                        self.skipped += 1;
                        self.behind = true;
                        continue;
                    }
                }
            }
            let end = self.core.word(h::END).load(Ordering::SeqCst);
            if end & ENDED != 0 && self.next >= end & END_MASK {
                return Ok(None);
            }
            if let Some(e) = self.core.end_error(end) {
                return Err(e);
            }
            // An observer never spins: the cores are the pipeline's.
            if !self.core.wait_without_spin(data, seen, deadline) {
                return Err(Error::StreamTimeout {
                    stream: self.core.name.clone(),
                    what: "waiting for a frame to record",
                });
            }
        }
    }

    /// Frame `n`, copied and checked (invariant 6), or `None` when it was
    /// overwritten meanwhile.
    fn copy(&self, n: u64) -> Result<Option<CopiedFrame>> {
        let ring = self.core.ring();
        let Some(slot) = ring.observe(n) else {
            return Ok(None);
        };
        let get = |k: usize| ring.sw(slot, k).load(Ordering::Relaxed);
        let ndim = get(s::NDIM) as usize;
        if ndim != self.core.max_shape.len() {
            return Ok(None);
        }
        let shape: Vec<usize> = (0..ndim).map(|i| get(s::DIMS + i) as usize).collect();
        let (source_seq, timestamp_ns, len) = (get(s::SOURCE_SEQ), get(s::TIMESTAMP), get(s::LEN));
        let want = shape
            .iter()
            .zip(&self.core.max_shape)
            .all(|(d, m)| d <= m)
            .then(|| shape.iter().product::<usize>() * self.core.elem_size);
        // A torn read of the metadata is refused by the check below, or by
        // the sequence word afterwards (invariant 5 for what is used).
        let Some(want) = want.filter(|&w| w as u64 == len) else {
            return Ok(None);
        };
        let bytes = self.core.region.copy_racy(self.core.slot_off(slot), want)?;
        if !ring.still(n, slot) {
            return Ok(None);
        }
        Ok(Some(CopiedFrame {
            seq: n,
            source_seq,
            timestamp_ns,
            shape,
            bytes,
        }))
    }
}

#[cfg(test)]
mod tests {
    use crate::{Context, ContextOptions, Overflow, StreamOptions};
    use dtype::Primitive;
    use std::time::Duration;

    /// A tap copies every frame a slow consumer lets it, counts what the
    /// ring overwrote before it looked, and never holds the producer back
    /// (the producer here runs `depth` frames ahead of the tap and never
    /// waits for it).
    #[test]
    #[cfg_attr(miri, ignore = "needs real shared memory")]
    fn a_tap_copies_what_it_can_and_counts_what_it_missed() {
        for overflow in [Overflow::Block, Overflow::DropOldest] {
            let ctx = Context::new(&ContextOptions::new().anonymous(true)).unwrap();
            let opts = StreamOptions::new(Primitive::UInt32, &[3, 5])
                .depth(2)
                .overflow(overflow);
            let mut tx = ctx.create_stream("s", &opts).unwrap();
            let mut rx = ctx.stream_consumer("s", 0).unwrap();
            let mut tap = ctx.stream_tap("s").unwrap();
            assert_eq!(
                (tap.element(), tap.max_shape()),
                (Primitive::UInt32, &[3usize, 5][..])
            );
            let send = |tx: &mut crate::StreamProducer, k: u32| {
                let mut slot = tx.next_slot(Some(Duration::from_secs(5))).unwrap();
                slot.set_shape(&[1 + k as usize % 3, 5]).unwrap();
                for (i, w) in slot.bytes_mut().chunks_exact_mut(4).enumerate() {
                    w.copy_from_slice(&(k * 100 + i as u32).to_ne_bytes());
                }
                slot.publish().unwrap();
            };
            // Frame 0, copied at once.
            send(&mut tx, 0);
            let f = tap.next(Some(Duration::from_secs(1))).unwrap().unwrap();
            assert_eq!((f.seq, f.shape.clone()), (0, vec![1, 5]));
            assert_eq!(&f.bytes[4..8], &1u32.to_ne_bytes());
            drop(rx.next(None).unwrap());
            // Frames 1..=6 while the tap does not look: the consumer keeps
            // up, the ring (depth 2) keeps only the last ones.
            for k in 1..=6 {
                send(&mut tx, k);
                drop(rx.next(None).unwrap());
            }
            tx.end().unwrap();
            let mut seen = Vec::new();
            while let Some(f) = tap.next(Some(Duration::from_secs(1))).unwrap() {
                let k = f.seq as u32;
                assert_eq!(f.shape, vec![1 + k as usize % 3, 5]);
                for (i, w) in f.bytes.chunks_exact(4).enumerate() {
                    assert_eq!(w, (k * 100 + i as u32).to_ne_bytes());
                }
                seen.push(f.seq);
            }
            assert!(
                !seen.is_empty() && seen.windows(2).all(|w| w[0] < w[1]),
                "{seen:?}"
            );
            assert_eq!(*seen.last().unwrap(), 6, "{overflow:?}: {seen:?}");
            assert_eq!(
                tap.skipped() + seen.len() as u64,
                6,
                "{overflow:?}: {seen:?}"
            );
        }
    }
}
