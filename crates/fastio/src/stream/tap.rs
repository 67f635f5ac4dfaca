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
}

impl Context {
    /// Observes stream `name` from its next frame on (a recorder attaching
    /// to a running pipeline), without taking a consumer's place.
    pub fn stream_tap(&self, name: &str) -> Result<StreamTap> {
        let core = self.open_stream(name)?;
        let next = core.ring().head();
        Ok(StreamTap {
            core,
            next,
            skipped: 0,
        })
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
        loop {
            let seen = data.current();
            let ring = self.core.ring();
            let head = ring.head();
            if head > self.next {
                // Frames older than the ring keeps are gone already.
                let oldest = head.saturating_sub(self.core.depth);
                if self.next < oldest {
                    self.skipped += oldest - self.next;
                    self.next = oldest;
                }
                let n = self.next;
                self.next = n.saturating_add(1);
                match self.copy(n)? {
                    Some(f) => return Ok(Some(f)),
                    None => {
                        self.skipped += 1;
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
            if !self.core.wait(data, seen, deadline) {
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
