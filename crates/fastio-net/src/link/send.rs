//! Sending an entry to the hosts that consume it, lent to Zenoh without
//! a copy.

use super::*;
use crate::wire::{MESSAGE_BYTES, MIN_PIECE_BYTES};

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
        // The publisher of each host that reads it.
        let publishers: Vec<Arc<Publisher<'static>>> = self
            .inner
            .crossing(entry)
            .filter(|c| c.from == self.inner.here)
            .map(|c| {
                c.to.iter()
                    .filter_map(|h| self.entry_pubs.get(h).cloned())
                    .collect()
            })
            .unwrap_or_default();
        if publishers.is_empty() {
            return;
        }
        // An entry of at most EAGER_BYTES goes at once, from here; a
        // larger one waits for its readers to make room, in a thread of
        // its own.
        let map = ctx
            .map(&self.inner.pipeline.plan.entries[entry].key)
            .map(Arc::new)
            .map_err(|x| NetError::Protocol(x.to_string()));
        let at_once = map.as_ref().is_ok_and(|m| m.bytes().len() <= EAGER_BYTES);
        let inner = self.inner.clone();
        let status = self.status.clone();
        let stop = self.stop.clone();
        let send = move || {
            let plan = &inner.pipeline.plan;
            let e = &plan.entries[entry];
            let result = map.and_then(|map| send_entry(map, &inner, entry, &publishers, &stop));
            if let Err(why) = result {
                let p = &inner.pipeline.placement;
                let to = inner
                    .crossing(entry)
                    .map(|c| c.to.iter().map(|&h| p.hosts[h].clone()).collect())
                    .unwrap_or_default();
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
                    if let Some(line) = said.line() {
                        let _sending = inner.sending(None);
                        let _ = p.put(line).wait();
                    }
                }
                let _ = inner.events.send(LinkEvent::Failed { failure });
            }
        };
        if at_once {
            send();
        } else {
            self.workers.push(std::thread::spawn(send));
        }
    }
}

/// Sends the published entry `entry` (`map`: its read-only mapping) to
/// each consuming host (one publisher each) as pieces that fit the link
/// to each ([`piece_bytes`]): at once when it has at most [`EAGER_BYTES`], else
/// after its announcement, once every consuming host is ready.
pub(super) fn send_entry(
    map: Arc<fastio::MappedPublished>,
    inner: &Inner,
    entry: usize,
    publishers: &[Arc<Publisher<'static>>],
    stop: &AtomicBool,
) -> Result<(), NetError> {
    let e = &inner.pipeline.plan.entries[entry];
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
    let mut header = ChunkHeader {
        entry: e.key.clone(),
        kind: e.kind,
        element: e.element,
        shape,
        total: total as u64,
        offset: 0,
        transfer,
    };
    let piece = |start: usize, end: usize| {
        ZBytes::from(bytes::Bytes::from_owner(Piece {
            map: map.clone(),
            start,
            end,
        }))
    };
    if total > EAGER_BYTES {
        put_each(inner, publishers, ZBytes::new, &header)?;
        wait_for_room(inner, entry, stop)?;
    }
    // Pieces that fit the link to every reader; every piece but the last
    // of that size; an empty entry is one empty piece.
    let size = inner
        .crossing(entry)
        .map(|c| {
            c.to.iter()
                .map(|&h| inner.message_bytes_to(h))
                .min()
                .unwrap_or(MESSAGE_BYTES)
        })
        .map_or(MIN_PIECE_BYTES, piece_bytes);
    let mut offset = 0usize;
    loop {
        let end = (offset + size).min(total);
        header.offset = offset as u64;
        put_each(inner, publishers, || piece(offset, end), &header)?;
        offset = end;
        if offset >= total {
            return Ok(());
        }
        if stop.load(Ordering::Relaxed) {
            return Err(NetError::Protocol("the run stopped".into()));
        }
    }
}

/// Waits until every reader of announced entry `entry` has made room for
/// it, so that no reader blocks Zenoh's receiving thread for long.
fn wait_for_room(inner: &Inner, entry: usize, stop: &AtomicBool) -> Result<(), NetError> {
    let hosts = &inner.pipeline.placement.hosts;
    let readers: Vec<&String> = inner
        .crossing(entry)
        .map(|c| c.to.iter().map(|&h| &hosts[h]).collect())
        .unwrap_or_default();
    let mut st = inner.lock();
    loop {
        if let Some(gone) = readers.iter().find(|h| st.lost.contains(**h)) {
            return Err(NetError::Protocol(format!("host {gone} went away")));
        }
        let ready = st.ready.get(&entry);
        if readers
            .iter()
            .all(|h| ready.is_some_and(|r| r.contains(*h)))
        {
            return Ok(());
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

/// Puts one piece (`payload` makes it: a lent view of the entry, no copy)
/// with its header on each host's publisher.
fn put_each(
    inner: &Inner,
    publishers: &[Arc<Publisher<'static>>],
    payload: impl Fn() -> ZBytes,
    header: &ChunkHeader,
) -> Result<(), NetError> {
    let attachment = header.encode().ok_or_else(|| {
        NetError::Protocol(format!(
            "entry key {:?} is longer than a header carries ({} bytes)",
            header.entry,
            crate::wire::MAX_KEY_BYTES
        ))
    })?;
    for publisher in publishers {
        // `<run>/entry/<from>/<to>`: the last word names the host.
        let to = publisher.key_expr().as_str().rsplit('/').next();
        let _sending = inner.sending(to);
        publisher
            .put(payload())
            .attachment(attachment.clone())
            .wait()
            .map_err(|x| NetError::Protocol(x.to_string()))?;
    }
    Ok(())
}
