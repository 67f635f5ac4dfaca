//! A frame a consumer took ([`Frame`]): read-only bytes in its slot that
//! give the slot back when dropped.

use super::*;

/// A frame taken by a consumer: read-only bytes in the slot (`PROT_READ`
/// pages) with its number, source and shape. The slot is given back when
/// the frame (and every array made from it) is dropped.
#[derive(Debug)]
pub struct Frame {
    pub(super) shared: Arc<ConsumerShared>,
    pub(super) seq: u64,
    pub(super) source_seq: u64,
    pub(super) timestamp_ns: u64,
    /// The shape's dimensions are `dims[..ndim]` (inline: no allocation
    /// per frame).
    pub(super) dims: [usize; MAX_FRAME_DIMS],
    pub(super) ndim: usize,
    pub(super) off: usize,
    pub(super) len: usize,
}

impl Frame {
    /// Reads frame `seq`'s metadata, checking it against the stream (ring
    /// invariant 5).
    pub(super) fn read(sh: &Arc<ConsumerShared>, seq: u64, slot: usize) -> Result<Frame> {
        let core = &sh.core;
        let ring = core.ring();
        let get = |k: usize| ring.sw(slot, k).load(Ordering::Relaxed);
        let ndim = get(s::NDIM) as usize;
        let len = get(s::LEN);
        let bad = |why: String| Error::corrupt(format!("stream {} frame {seq}: {why}", core.name));
        if get(s::SEQ) != seq {
            return Err(bad(format!("its slot {slot} holds {:#x}", get(s::SEQ))));
        }
        if ndim != core.max_shape.len() {
            return Err(bad(format!("{ndim} dimensions")));
        }
        let mut dims = [0usize; MAX_FRAME_DIMS];
        for (i, d) in dims[..ndim].iter_mut().enumerate() {
            *d = get(s::DIMS + i) as usize;
        }
        let shape = &dims[..ndim];
        if shape.iter().zip(&core.max_shape).any(|(d, m)| d > m) {
            return Err(bad(format!("shape {shape:?} over {:?}", core.max_shape)));
        }
        let want = shape.iter().product::<usize>() * core.elem_size;
        if len != want as u64 {
            return Err(bad(format!("{len} bytes for shape {shape:?}")));
        }
        Ok(Frame {
            shared: sh.clone(),
            seq,
            source_seq: get(s::SOURCE_SEQ),
            timestamp_ns: get(s::TIMESTAMP),
            dims,
            ndim,
            off: core.slot_off(slot),
            len: want,
        })
    }

    /// The frame's number in its stream.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The number of the source frame it derives from.
    pub fn source_seq(&self) -> u64 {
        self.source_seq
    }

    /// When the source frame was taken (ns since the Unix epoch).
    pub fn timestamp_ns(&self) -> u64 {
        self.timestamp_ns
    }

    /// The frame's shape.
    pub fn shape(&self) -> &[usize] {
        &self.dims[..self.ndim]
    }

    /// The element type.
    pub fn element(&self) -> Primitive {
        self.shared.core.element
    }

    /// The frame's bytes, read-only.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: ring invariants 3 and 4: the consumer holds this frame
        // (it is released only when `self` drops), so the producer does not
        // write the slot while the slice lives; the range was checked
        // against the slot when the frame was read.
        unsafe { self.shared.core.region.bytes(self.off, self.len) }
            .expect("a frame lies inside its stream (checked when read)")
    }

    /// A read-only `ndobject` array over the frame that keeps the frame
    /// (and so its slot) until the array and its views are gone.
    pub fn into_array(self) -> Result<Array> {
        let element = Type::primitive(self.shared.core.element);
        let shape = self.shape().to_vec();
        let block = MemoryBlock::from_owner(self);
        Ok(Array::from_block(&block, 0, element, &shape)?)
    }
}

impl Frame {
    /// A read-only `ndobject` array over a shared frame: it keeps the frame
    /// (and so its slot) until the array and its views are gone.
    pub fn shared_array(frame: &Arc<Frame>) -> Result<Array> {
        let element = Type::primitive(frame.shared.core.element);
        let shape = frame.shape().to_vec();
        let block = MemoryBlock::from_owner(SharedFrame(frame.clone()));
        Ok(Array::from_block(&block, 0, element, &shape)?)
    }
}

/// A shared frame as the owner of an array's memory.
pub(super) struct SharedFrame(Arc<Frame>);

impl AsRef<[u8]> for SharedFrame {
    fn as_ref(&self) -> &[u8] {
        self.0.bytes()
    }
}

impl AsRef<[u8]> for Frame {
    fn as_ref(&self) -> &[u8] {
        self.bytes()
    }
}

impl std::ops::Deref for Frame {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.bytes()
    }
}

impl Drop for Frame {
    /// Releases the frame: the shared cursor moves to the oldest frame this
    /// consumer still holds, or to the next it will take.
    fn drop(&mut self) {
        let sh = &self.shared;
        let mut held = sh.held();
        held.remove(self.seq);
        let upto = held
            .first()
            .unwrap_or_else(|| sh.read.load(Ordering::Acquire));
        sh.core.ring().release_to(sh.index, upto);
        drop(held);
        sh.core.event(h::SPACE_EVENT).notify();
    }
}
