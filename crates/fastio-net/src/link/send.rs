//! Sending an entry to the hosts that consume it, lent to Zenoh without
//! a copy.

use super::*;

/// One piece of a published entry, lent to Zenoh without a copy: it keeps
/// the read-only mapping (and so the allocation) alive until Zenoh has
/// sent it.
pub(super) struct Piece {
    pub(super) map: Arc<fastio::MappedPublished>,
    pub(super) start: usize,
    pub(super) end: usize,
}

impl AsRef<[u8]> for Piece {
    fn as_ref(&self) -> &[u8] {
        &self.map.bytes()[self.start..self.end]
    }
}

impl ZenohLink {
    pub(super) fn export(&mut self, ctx: &Context, entry: usize) {
        let Some(publisher) = self.entry_pubs.get(&entry).cloned() else {
            return;
        };
        // One piece goes at once, from here; more may wait for readers to
        // make room, in a thread of their own.
        let one_piece = ctx
            .get(&self.inner.pipeline.plan.entries[entry].key)
            .is_ok_and(|a| a.size() <= CHUNK_BYTES as u64);
        let inner = self.inner.clone();
        let ctx = ctx.clone();
        let status = self.status.clone();
        let stop = self.stop.clone();
        let send = move || {
            let plan = &inner.pipeline.plan;
            let e = &plan.entries[entry];
            let result = send_entry(&ctx, &inner, entry, &publisher, &stop);
            if let Err(why) = result {
                let p = &inner.pipeline.placement;
                let to = p
                    .crossings(plan)
                    .into_iter()
                    .filter(|c| c.entry == entry)
                    .flat_map(|c| c.to.into_iter().map(|h| p.hosts[h].clone()))
                    .collect();
                let failure = Failure::Transfer {
                    entry: e.name.clone(),
                    from: p.hosts[inner.here].clone(),
                    to,
                    error: why.to_string(),
                };
                if let Some(p) = &status {
                    let op = inner.pipeline.operators[e.producer].name.clone();
                    let said = Status::Failed {
                        op,
                        why: failure.to_json(),
                    };
                    let _ = p.put(said.encode()).wait();
                }
                let _ = inner.events.send(LinkEvent::Failed { failure });
            }
        };
        if one_piece {
            send();
        } else {
            self.workers.push(std::thread::spawn(send));
        }
    }
}

/// Sends the published entry `entry`: its announcement, then, once every
/// consuming host is ready, its bytes as pieces of at most
/// [`CHUNK_BYTES`].
pub(super) fn send_entry(
    ctx: &Context,
    inner: &Inner,
    entry: usize,
    publisher: &Publisher<'static>,
    stop: &AtomicBool,
) -> Result<(), NetError> {
    let p = &inner.pipeline;
    let e = &p.plan.entries[entry];
    let readers: Vec<String> = p
        .placement
        .crossings(&p.plan)
        .into_iter()
        .filter(|c| c.entry == entry)
        .flat_map(|c| c.to)
        .map(|h| p.placement.hosts[h].clone())
        .collect();
    let map = Arc::new(
        ctx.map(&e.key)
            .map_err(|x| NetError::Protocol(x.to_string()))?,
    );
    let total = map.bytes().len();
    let mut shape: Vec<u64> = map
        .allocation()
        .dimensions()
        .iter()
        .map(|&d| d as u64)
        .collect();
    if entry_bytes(e.element, &shape) != Some(total as u64) {
        // An allocation without a shape of its element: send it flat.
        shape = vec![(total / e.element.size().max(1)) as u64];
    }
    let transfer = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ (u64::from(std::process::id()) << 32);
    let header = |offset: usize| ChunkHeader {
        kind: e.kind,
        element: e.element,
        shape: shape.clone(),
        total: total as u64,
        offset: offset as u64,
        transfer,
    };
    let piece = |start: usize, end: usize| {
        ZBytes::from(bytes::Bytes::from_owner(Piece {
            map: map.clone(),
            start,
            end,
        }))
    };
    if total <= CHUNK_BYTES {
        // One piece: the announcement carries the bytes (making room for
        // them takes a moment).
        return publisher
            .put(piece(0, total))
            .attachment(header(0).encode())
            .wait()
            .map_err(|x| NetError::Protocol(x.to_string()));
    }
    publisher
        .put(ZBytes::new())
        .attachment(header(0).encode())
        .wait()
        .map_err(|x| NetError::Protocol(x.to_string()))?;
    // A larger entry waits until every reader has made room, so that no
    // reader blocks Zenoh's receiving thread for long.
    {
        let mut st = inner.lock();
        loop {
            if let Some(gone) = readers.iter().find(|h| st.lost.contains(*h)) {
                return Err(NetError::Protocol(format!("host {gone} went away")));
            }
            let ready = st.ready.get(&entry);
            if readers.iter().all(|h| ready.is_some_and(|r| r.contains(h))) {
                break;
            }
            if stop.load(Ordering::Relaxed) {
                return Err(NetError::Protocol("the run stopped".into()));
            }
            st = inner
                .changed
                .wait_timeout(st, Duration::from_millis(50))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
    let mut offset = 0usize;
    while offset < total {
        if stop.load(Ordering::Relaxed) {
            return Err(NetError::Protocol("the run stopped".into()));
        }
        let end = (offset + CHUNK_BYTES).min(total);
        publisher
            .put(piece(offset, end))
            .attachment(header(offset).encode())
            .wait()
            .map_err(|x| NetError::Protocol(x.to_string()))?;
        offset = end;
    }
    Ok(())
}
