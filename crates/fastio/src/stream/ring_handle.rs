//! The ring handle producers and consumers share ([`StreamCore`]): the
//! ring's memory and its checked geometry, waiting on its events, liveness
//! and poisoning.

use super::*;

/// What producer and consumer handles share: the ring's memory and its
/// checked geometry.
pub(super) struct StreamCore {
    pub(super) name: String,
    pub(super) ctx: Context,
    pub(super) region: RingRegion,
    pub(super) depth: u64,
    pub(super) consumers: usize,
    pub(super) overflow: Overflow,
    pub(super) flags: u64,
    pub(super) element: Primitive,
    pub(super) elem_size: usize,
    pub(super) max_shape: Vec<usize>,
    pub(super) slot_size: usize,
    /// From one slot's start to the next's (`StreamOptions::slot_stride`).
    pub(super) slot_stride: usize,
    pub(super) data_off: usize,
    pub(super) control_words: usize,
}

impl std::fmt::Debug for StreamCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("name", &self.name)
            .field("depth", &self.depth)
            .field("consumers", &self.consumers)
            .field("overflow", &self.overflow)
            .field("max_shape", &self.max_shape)
            .finish()
    }
}

impl StreamCore {
    /// Opens the ring in `region`, checking every header value against the
    /// region (ring invariant 5).
    pub(super) fn open(ctx: &Context, name: &str, region: RingRegion) -> Result<StreamCore> {
        let corrupt = |why: String| Error::corrupt(format!("stream {name}: {why}"));
        let header = region.words(ring::HEADER_WORDS)?;
        let need = ring::control_words(
            header[h::DEPTH].load(Ordering::Relaxed).min(1 << 20) as usize,
            header[h::CONSUMERS].load(Ordering::Relaxed).min(64) as usize,
            Overflow::from_code(header[h::OVERFLOW].load(Ordering::Relaxed))
                .ok_or_else(|| corrupt("unknown overflow code".into()))?,
        )
        .unwrap_or(usize::MAX);
        if need.saturating_mul(8) > region.len() {
            return Err(corrupt("the control words do not fit the region".into()));
        }
        let words = region.words(need)?;
        let (depth, consumers, overflow) = {
            let r: Ring<'_> = Ring::open(words).map_err(corrupt)?;
            (r.depth(), r.consumers(), r.overflow())
        };
        let control_words = ring::control_words(depth as usize, consumers, overflow)
            .ok_or_else(|| corrupt("control words overflow".into()))?;
        if control_words != need {
            return Err(corrupt("depth or consumers out of range".into()));
        }
        let get = |i: usize| words[i].load(Ordering::Relaxed);
        let element = i32::try_from(get(h::ELEMENT))
            .ok()
            .and_then(dtype::clara::from_code)
            .ok_or_else(|| corrupt("unknown element code".into()))?;
        let ndim = get(h::MAX_NDIM) as usize;
        let max_shape: Vec<usize> = (0..ndim)
            .map(|i| usize::try_from(get(h::MAX_SHAPE + i)))
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| corrupt("shape exceeds memory".into()))?;
        let opts = StreamOptions {
            depth: depth as usize,
            element,
            max_shape: max_shape.clone(),
            consumers,
            overflow,
            producer_may_restart: false,
            consumer_may_restart: false,
            recorder_place: false,
        };
        opts.check(name)
            .map_err(|e| corrupt(format!("header: {e}")))?;
        let slot_size = opts.slot_bytes().unwrap_or(u64::MAX);
        let total = opts.reserved_bytes().unwrap_or(u64::MAX);
        if get(h::SLOT_SIZE) != slot_size || total > region.len() as u64 {
            return Err(corrupt(format!(
                "slots of {} bytes, {total} bytes in all, for a region of {}",
                get(h::SLOT_SIZE),
                region.len()
            )));
        }
        let data_off = (control_words as u64 * 8).next_multiple_of(SLOT_ALIGN) as usize;
        Ok(StreamCore {
            name: name.to_owned(),
            ctx: ctx.clone(),
            depth,
            consumers,
            overflow,
            flags: get(h::FLAGS),
            element,
            elem_size: Type::primitive(element).data_size().unwrap_or(1),
            max_shape,
            slot_size: slot_size as usize,
            slot_stride: slot_size as usize + SLOT_STAGGER as usize,
            data_off,
            control_words,
            region,
        })
    }

    pub(super) fn ring(&self) -> Ring<'_> {
        // The geometry was checked in `open`; `words` re-checks the bound.
        let words = self
            .region
            .words(self.control_words)
            .expect("checked in StreamCore::open");
        Ring::trusted(words, self.depth, self.consumers, self.overflow)
    }

    pub(super) fn word(&self, i: usize) -> &std::sync::atomic::AtomicU64 {
        self.ring().header(i)
    }

    pub(super) fn event(&self, word: usize) -> &ShmEvent {
        self.region
            .event(word * 8)
            .expect("event words lie in the checked header")
    }

    /// Most frames a consumer may hold at once: one under `drop-oldest`
    /// (its holding word); `depth` under `block` (the producer stops at
    /// `depth` past the oldest held: one more would wait forever).
    pub(super) fn most_held(&self) -> usize {
        match self.overflow {
            Overflow::DropOldest => 1,
            Overflow::Block => self.depth as usize,
        }
    }

    /// Where slot `slot` (`< slots`, checked by the ring) starts.
    pub(super) fn slot_off(&self, slot: usize) -> usize {
        self.data_off + slot * self.slot_stride
    }

    pub(super) fn poisoned(&self, from_frame: u64, reason: impl Into<String>) -> Error {
        Error::StreamPoisoned {
            stream: self.name.clone(),
            from_frame,
            reason: reason.into(),
        }
    }

    /// The error for an end word that says the stream failed.
    pub(super) fn end_error(&self, end: u64) -> Option<Error> {
        (end & POISONED != 0)
            .then(|| self.poisoned(end & END_MASK, "its producer failed or was stopped"))
    }

    /// Marks the stream failed from frame `k` (the first of the calls
    /// wins); wakes every waiter on both sides.
    pub(super) fn poison(&self, k: u64) {
        let _ = self.word(h::END).compare_exchange(
            0,
            POISONED | (k & END_MASK),
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
        self.event(h::DATA_EVENT).notify();
        self.event(h::SPACE_EVENT).notify();
    }

    /// As [`StreamCore::wait`], sleeping at once (no spin): for observers,
    /// which must not take the pipeline's cores.
    pub(super) fn wait_without_spin(
        &self,
        event: &ShmEvent,
        seen: u32,
        deadline: Option<Instant>,
    ) -> bool {
        let tick = match deadline {
            None => LIVENESS_TICK,
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => left.min(LIVENESS_TICK),
                _ => return false,
            },
        };
        event.wait_while(seen, tick);
        true
    }

    /// Waits on `event` (spinning first for the context's spin budget)
    /// until it moves past `seen`, for at most a liveness tick or until
    /// `deadline`. `false` when the deadline passed.
    pub(super) fn wait(&self, event: &ShmEvent, seen: u32, deadline: Option<Instant>) -> bool {
        let tick = match deadline {
            None => LIVENESS_TICK,
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => left.min(LIVENESS_TICK),
                _ => return false,
            },
        };
        let spin = self.ctx.wait_spin().min(tick);
        if event.spin_while(seen, spin).is_none() {
            event.wait_while(seen, tick);
        }
        true
    }
}
