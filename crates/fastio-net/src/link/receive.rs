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
        // The announcement: offset 0, and no bytes, or all of them.
        if first.offset != 0 || !(payload.is_empty() || payload.len() as u64 == first.total) {
            return Err(NetError::Protocol(format!(
                "a sending starts with its announcement (offset 0, no bytes or all), not {} bytes at {}",
                payload.len(),
                first.offset
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

    /// Publishes the received entry and tells the driver and the sender.
    pub(super) fn publish(&self, alloc: fastio::Allocation, total: u64) -> Result<(), NetError> {
        let e = &self.inner.pipeline.plan.entries[self.entry];
        alloc
            .publish_and_release(&e.key)
            .map_err(|x| NetError::Protocol(x.to_string()))?;
        {
            let mut st = self.inner.lock();
            st.imported.insert(self.entry, total);
            self.inner.maybe_ready(&mut st, e.producer);
        }
        if let Some(p) = &self.status {
            let _ = p.put(Status::Received(e.key.clone()).encode()).wait();
        }
        Ok(())
    }

    /// A sending that came whole in one message, received in Zenoh's
    /// callback (no hand-over to another thread: the bytes are at most
    /// [`CHUNK_BYTES`], one copy into the allocation).
    pub(super) fn whole(&self, header: &ChunkHeader, payload: &ZBytes) -> Result<(), NetError> {
        let dims = self.announced(header, payload)?;
        let mut alloc = self.allocate(&dims)?;
        {
            let mut map = alloc
                .map_mut()
                .map_err(|x| NetError::Protocol(x.to_string()))?;
            copy_piece(&mut map, header, payload)?;
        }
        self.publish(alloc, header.total)
    }

    /// A piece after the announcement, received in Zenoh's callback
    /// straight into the allocation the importer's thread made (no
    /// hand-over, no piece waiting in memory). The last one publishes the
    /// entry; a bad one drops the allocation unpublished.
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

    /// Copies one piece into the entry being received; whether it was the
    /// last.
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
        let mut map = r
            .alloc
            .map_mut()
            .map_err(|x| NetError::Protocol(x.to_string()))?;
        r.got = copy_piece(&mut map, h, bytes)?;
        Ok(r.got == r.first.total)
    }
}

/// Copies one piece into the entry's bytes; the offset after it.
pub(super) fn copy_piece(map: &mut [u8], h: &ChunkHeader, bytes: &ZBytes) -> Result<u64, NetError> {
    let mut at = h.offset as usize;
    for slice in bytes.slices() {
        let end = at
            .checked_add(slice.len())
            .filter(|&end| end as u64 <= h.total && end <= map.len())
            .ok_or_else(|| {
                NetError::Protocol(format!("a piece runs past the entry's {} bytes", h.total))
            })?;
        map[at..end].copy_from_slice(slice);
        at = end;
    }
    Ok(at as u64)
}

/// Makes room, in a thread of its own, for an entry that comes as
/// several pieces (committing a large allocation takes a while, and
/// Zenoh's receiving thread must not wait for it), then says it is ready;
/// the pieces are placed in Zenoh's callback ([`Import::piece`]).
pub(super) struct Importer {
    pub(super) import: Arc<Import>,
    pub(super) rx: Receiver<(ChunkHeader, ZBytes)>,
}

impl Importer {
    pub(super) fn run(self) {
        if let Err(why) = self.receive() {
            self.import.fail(&why);
        }
    }

    /// The announcement; `None` when the run stops or the sending host is
    /// gone first.
    pub(super) fn next(&self) -> Option<(ChunkHeader, ZBytes)> {
        loop {
            match self.rx.recv_timeout(Duration::from_millis(100)) {
                Ok(piece) => return Some(piece),
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return None,
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                    if self.import.stop.load(Ordering::Relaxed)
                        || self.import.inner.host_gone(&self.import.from)
                    {
                        return None;
                    }
                }
            }
        }
    }

    pub(super) fn receive(&self) -> Result<(), NetError> {
        let imp = &self.import;
        let e = &imp.inner.pipeline.plan.entries[imp.entry];
        let Some((first, payload)) = self.next() else {
            return Ok(());
        };
        let dims = imp.announced(&first, &payload)?;
        // Room is made (the context commits the allocation when it is
        // created): the bytes may come.
        let alloc = imp.allocate(&dims)?;
        *imp.receiving.lock().unwrap_or_else(|p| p.into_inner()) = Some(Receiving {
            alloc,
            first,
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
