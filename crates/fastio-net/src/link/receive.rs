//! Receiving an entry from another host: into a fresh allocation of the
//! local context, checked piece by piece.

use super::*;

/// What receiving one entry from another host needs: where it goes (a
/// fresh allocation of the local context, published under its entry name)
/// and whom to tell.
pub(super) struct Import {
    pub(super) inner: Arc<Inner>,
    pub(super) ctx: Context,
    pub(super) entry: usize,
    pub(super) from: String,
    pub(super) status: Option<Arc<Publisher<'static>>>,
    pub(super) stop: Arc<AtomicBool>,
    /// Set once a sending has begun here (in Zenoh's callback or in the
    /// importer's thread): an entry is received once.
    pub(super) begun: AtomicBool,
    /// Set once the driver was told that the entry's last bytes arrived
    /// ([`LinkEvent::EntryArriving`]).
    pub(super) arriving: AtomicBool,
    /// The entry being received in pieces, once the importer's thread has
    /// made room for it.
    pub(super) receiving: Mutex<Option<Receiving>>,
}

/// An entry being received in pieces: its allocation (made by the
/// importer's thread before it said ready), its announcement, and the
/// bytes placed so far.
pub(super) struct Receiving {
    pub(super) alloc: fastio::Allocation,
    pub(super) first: ChunkHeader,
    pub(super) got: u64,
}

impl Import {
    /// One piece of this entry (in Zenoh's callback). The first piece of
    /// a sending (offset 0) starts it: an announcement (no bytes, a large
    /// entry) has a thread make room ([`Importer`]); the first bytes of an
    /// entry of at most [`EAGER_BYTES`] have it allocated here and now.
    /// Every later piece is placed here, straight into the allocation.
    pub(super) fn on_piece(self: &Arc<Self>, h: ChunkHeader, payload: &ZBytes) {
        // The piece that completes the entry wakes the driver before it is
        // placed and published (see `LinkEvent::EntryArriving`): once per
        // entry, whatever its pieces claim.
        let last = h.offset.checked_add(payload.len() as u64) == Some(h.total);
        if last && !self.arriving.swap(true, Ordering::AcqRel) {
            let _ = self
                .inner
                .events
                .send(LinkEvent::EntryArriving { entry: self.entry });
        }
        if h.offset == 0 && !self.begun.swap(true, Ordering::AcqRel) {
            // Its producer succeeded (see `Inner::producer_succeeded`):
            // noted now, or with the entry when this piece is all of it.
            if payload.is_empty() && h.total > 0 {
                self.inner.producer_succeeded(self.entry);
                Importer::start(self.clone(), h, payload.clone());
            } else if let Err(why) = self.eager(h, payload) {
                self.inner.producer_succeeded(self.entry);
                self.fail(&why);
            }
        } else if let Err(why) = self.piece(&h, payload) {
            self.fail(&why);
        }
    }

    /// The first piece of an entry sent at once: allocates the entry,
    /// places the piece, and publishes the entry when that was all of it
    /// (which notes its producer's success); otherwise notes that success.
    fn eager(&self, first: ChunkHeader, payload: &ZBytes) -> Result<(), NetError> {
        if first.total > EAGER_BYTES as u64 {
            return Err(NetError::Protocol(format!(
                "an entry of {} bytes came without waiting for room (at most {EAGER_BYTES} may)",
                first.total
            )));
        }
        let dims = self.announced(&first, payload)?;
        let mut r = Receiving {
            alloc: self.allocate(&dims)?,
            got: 0,
            first,
        };
        // The first piece: its header is `r.first` itself.
        if Self::fill(&mut r, payload)? {
            return self.publish(r.alloc, r.first.total);
        }
        self.inner.producer_succeeded(self.entry);
        *self.receiving.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
        Ok(())
    }

    /// Tells the driver that the entry cannot arrive.
    pub(super) fn fail(&self, why: &NetError) {
        self.inner.cannot_receive(self.entry, &self.from, why);
    }

    /// Checks an announcement (the first piece of a sending) against the
    /// plan; the dimensions to allocate.
    pub(super) fn announced(
        &self,
        first: &ChunkHeader,
        payload: &ZBytes,
    ) -> Result<Vec<usize>, NetError> {
        let e = &self.inner.pipeline.plan.entries[self.entry];
        // Offset 0, and no bytes (an announcement) or the first piece.
        let n = payload.len() as u64;
        let piece = if n == 0 && first.total > 0 {
            Ok(())
        } else {
            check_piece(0, n, first.total)
        };
        if first.offset != 0 || piece.is_err() {
            return Err(NetError::Protocol(format!(
                "a sending starts at byte 0 with no bytes (an announcement) or its first piece, not {n} bytes at {}{}",
                first.offset,
                piece.err().map_or(String::new(), |why| format!(" ({why})"))
            )));
        }
        // The piece must be what the plan says the entry is.
        if first.kind != e.kind || first.element != e.element {
            return Err(NetError::Protocol(format!(
                "a {:?} of {} arrived; the plan says {:?} of {}",
                first.kind, first.element, e.kind, e.element
            )));
        }
        let fits = first.shape.len() == e.shape.len()
            && first
                .shape
                .iter()
                .zip(&e.shape)
                .all(|(&got, want)| want.is_none_or(|w| w as u64 == got));
        if !fits && e.kind != EntryKind::String {
            return Err(NetError::Protocol(format!(
                "shape {:?} arrived; the plan says {:?}",
                first.shape, e.shape
            )));
        }
        // (`ChunkHeader::decode` saw that `total` is what the shape needs.)
        first
            .shape
            .iter()
            .map(|&d| {
                usize::try_from(d)
                    .map_err(|_| NetError::Protocol(format!("dimension {d} is too large")))
            })
            .collect()
    }

    /// A fresh allocation of the local context for the announced entry.
    pub(super) fn allocate(&self, dims: &[usize]) -> Result<fastio::Allocation, NetError> {
        let e = &self.inner.pipeline.plan.entries[self.entry];
        self.ctx
            .create_array(dtype::Type::primitive(e.element), dims)
            .map_err(|x| NetError::Protocol(x.to_string()))
    }

    /// Publishes the received entry and tells the driver (its producer
    /// succeeded, noted in the same hold of the state's lock).
    pub(super) fn publish(&self, alloc: fastio::Allocation, total: u64) -> Result<(), NetError> {
        let e = &self.inner.pipeline.plan.entries[self.entry];
        alloc
            .publish_and_release(&e.key)
            .map_err(|x| NetError::Protocol(x.to_string()))?;
        let event = {
            let mut st = self.inner.lock();
            Inner::mark_succeeded(&mut st, e.producer);
            st.imported.insert(self.entry, total);
            self.inner.maybe_ready(&mut st, e.producer)
        };
        if let Some(event) = event {
            let _ = self.inner.events.send(event);
        }
        Ok(())
    }

    /// A piece after the first of a sending, received in Zenoh's
    /// callback straight into the allocation (made by the importer's
    /// thread, or on the first piece: no hand-over, no piece waiting in
    /// memory). The last one publishes the entry; a bad one drops the
    /// allocation unpublished.
    pub(super) fn piece(&self, h: &ChunkHeader, bytes: &ZBytes) -> Result<(), NetError> {
        let mut slot = self.receiving.lock().unwrap_or_else(|p| p.into_inner());
        let placed = match slot.as_mut() {
            None => Err(NetError::Protocol(format!(
                "a piece at byte {} arrived before its entry was announced and made room for",
                h.offset
            ))),
            Some(r) => Self::place(r, h, bytes),
        };
        match placed {
            Ok(true) => {
                if let Some(r) = slot.take() {
                    drop(slot);
                    self.publish(r.alloc, r.first.total)?;
                }
                Ok(())
            }
            Ok(false) => Ok(()),
            Err(why) => {
                // Dropping the allocation unpublished gives its memory
                // back: a half-received entry is never published.
                *slot = None;
                Err(why)
            }
        }
    }

    /// Copies one piece after the first into the entry being received
    /// (checked against the first's header); whether it was the last.
    pub(super) fn place(
        r: &mut Receiving,
        h: &ChunkHeader,
        bytes: &ZBytes,
    ) -> Result<bool, NetError> {
        if h.transfer != r.first.transfer || h.total != r.first.total || h.shape != r.first.shape {
            return Err(NetError::Protocol("pieces of two sendings mixed".into()));
        }
        if h.offset != r.got {
            return Err(NetError::Protocol(format!(
                "a piece at byte {} arrived where byte {} was due",
                h.offset, r.got
            )));
        }
        Self::fill(r, bytes)
    }

    /// Copies the piece due next (at `r.got`) into the entry; whether it
    /// was the last.
    fn fill(r: &mut Receiving, bytes: &ZBytes) -> Result<bool, NetError> {
        let total = r.first.total;
        // Every piece but the last has at least MIN_PIECE_BYTES.
        check_piece(r.got, bytes.len() as u64, total).map_err(NetError::Protocol)?;
        let mut map = r
            .alloc
            .map_mut()
            .map_err(|x| NetError::Protocol(x.to_string()))?;
        r.got = copy_piece(&mut map, r.got, total, bytes)?;
        Ok(r.got == total)
    }
}

/// A sample on `<run>/entry/<from>/<this host>` (in Zenoh's callback):
/// the piece goes to the entry its header names. A piece that cannot be
/// placed so (no header, a header that does not read, an entry `from`
/// does not send here) means that what `from` sends here cannot be
/// trusted to arrive whole: the first entry still due from `from` fails
/// with the reason rather than wait (under mutual TLS only `from` itself
/// can put on its key).
pub(super) fn on_entry_sample(imports: &HashMap<String, Arc<Import>>, from: &str, s: &Sample) {
    let header = s
        .attachment()
        .ok_or_else(|| NetError::Protocol("a piece without its header".into()))
        .and_then(|a| {
            ChunkHeader::decode(&a.to_bytes())
                .map_err(|e| NetError::Protocol(format!("a piece with a bad header: {e}")))
        });
    let why = match header {
        Ok(h) => match imports.get(&h.entry).filter(|i| i.from == from) {
            Some(import) => return import.on_piece(h, s.payload()),
            None => NetError::Protocol(format!(
                "a piece of entry {:?}, which host {from} does not send here",
                h.entry
            )),
        },
        Err(why) => why,
    };
    let due = imports
        .values()
        .filter(|i| i.from == from)
        .filter(|i| !i.inner.lock().imported.contains_key(&i.entry))
        .min_by_key(|i| i.entry);
    if let Some(import) = due {
        import.fail(&why);
    }
}

/// Copies one piece, whose bytes go at `offset` of an entry of `total`
/// bytes, into the entry's bytes; the offset after it.
pub(super) fn copy_piece(
    map: &mut [u8],
    offset: u64,
    total: u64,
    bytes: &ZBytes,
) -> Result<u64, NetError> {
    let mut at = usize::try_from(offset)
        .map_err(|_| NetError::Protocol(format!("a piece at byte {offset} is out of reach")))?;
    for slice in bytes.slices() {
        let end = at
            .checked_add(slice.len())
            .filter(|&end| end as u64 <= total && end <= map.len())
            .ok_or_else(|| {
                NetError::Protocol(format!("a piece runs past the entry's {total} bytes"))
            })?;
        map[at..end].copy_from_slice(slice);
        at = end;
    }
    Ok(at as u64)
}

/// Makes room, in a thread of its own started for the announcement of
/// an entry that comes as several pieces (committing a large allocation
/// takes a while, and Zenoh's receiving thread must not wait for it),
/// then says it is ready; the pieces are placed in Zenoh's callback
/// ([`Import::piece`]). No thread waits for entries that have not been
/// announced: a run of many entries costs no idle threads.
pub(super) struct Importer {
    pub(super) import: Arc<Import>,
    /// The announcement.
    pub(super) first: ChunkHeader,
    pub(super) payload: ZBytes,
}

impl Importer {
    /// Starts making room for an announced entry; a thread that cannot
    /// start fails the entry.
    pub(super) fn start(import: Arc<Import>, first: ChunkHeader, payload: ZBytes) {
        let failed = import.clone();
        let importer = Importer {
            import,
            first,
            payload,
        };
        let started = std::thread::Builder::new()
            .name("fastio-net room".into())
            .spawn(move || importer.run());
        if let Err(e) = started {
            failed.fail(&NetError::Protocol(format!(
                "cannot start a thread to make room for the entry: {e}"
            )));
        }
    }

    fn run(self) {
        if let Err(why) = self.receive() {
            self.import.fail(&why);
        }
    }

    fn receive(&self) -> Result<(), NetError> {
        let imp = &self.import;
        let e = &imp.inner.pipeline.plan.entries[imp.entry];
        if imp.stop.load(Ordering::Relaxed) || imp.inner.host_gone(&imp.from) {
            return Ok(());
        }
        let dims = imp.announced(&self.first, &self.payload)?;
        // Room is made (the context commits the allocation when it is
        // created): the bytes may come.
        let alloc = imp.allocate(&dims)?;
        *imp.receiving.lock().unwrap_or_else(|p| p.into_inner()) = Some(Receiving {
            alloc,
            first: self.first.clone(),
            got: 0,
        });
        if let Some(p) = &imp.status {
            p.put(Status::Ready(e.key.clone()).encode())
                .wait()
                .map_err(|x| NetError::Protocol(x.to_string()))?;
        }
        Ok(())
    }
}
