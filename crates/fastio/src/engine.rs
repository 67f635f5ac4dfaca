//! The lock engine under the [`Context`](crate::Context) facade: what a
//! context handle shares with its allocations (the segment, this process's
//! `PROT_READ` view and participant), the context mutex around the shared
//! tables (`with_table`, with recovery when the previous holder died), the
//! cache of parsed published types, and bounds-checked heap pointers.
//! `allocation`, `mapping` and `ops` build on it and none of them imports
//! the facade's module. `stream` does, on purpose: a stream handle keeps
//! its [`Context`](crate::Context) alive, and the facade's stream methods
//! live with the streams (`stream/context.rs`, every `impl Context` for
//! streams); it reaches the tables only through this engine.

use std::sync::{Mutex, PoisonError};

use dtype::Type;
use shm_core::{Offset, Participant, ReadOnlyView, Segment, ShmEvent, ShmMutex};

use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::ops::Discard;
use crate::recover::Recovery;
use crate::table::{Me, Table};

/// Offset of the publication event from the context mutex: a cache line
/// of its own (the mutex takes the line before it, the control words
/// start at 128), so a waiter spinning on the event does not take the
/// lock's line away from the process that holds the lock.
const PUBLICATION_EVENT: u64 = 64;

/// What a context handle shares with its allocations.
pub(crate) struct Shared {
    pub(crate) segment: Segment,
    /// This process's `PROT_READ` view of the segment: read mappings point
    /// into it.
    read_view: ReadOnlyView,
    /// Published type texts already parsed by this process.
    /// This process's participant and its cache of parsed types, behind
    /// one lock (every table operation of the process takes it).
    local: Mutex<Local>,
    pub(crate) layout: Layout,
    mutex_offset: Offset,
    owner: bool,
    /// How long this process's waits spin before they sleep, in
    /// nanoseconds ([`Context::set_wait_spin`](crate::Context::set_wait_spin)).
    pub(crate) wait_spin_ns: std::sync::atomic::AtomicU64,
}

/// What one process keeps per context.
struct Local {
    p: Participant,
    types: TypeCache,
    memo: NameMemo,
}

/// What this process last learnt for certain about one name: whether it
/// was published when the publication event showed a given sequence.
///
/// Every change a waiter watches for (a name published or removed, the
/// context closed) bumps the publication event while the context lock is
/// held (`Shared::with_table`), so the event's sequences order those
/// changes one after another: while the event still shows the sequence of
/// this process's own last change, no change has been made since, and a
/// name published (or not) then still is (or is not). A wait for that
/// name to appear (or to go) can then start waiting at once instead of
/// taking the lock to look ([`Context::map_wait`](crate::Context::map_wait),
/// [`Context::wait_unpublished`](crate::Context::wait_unpublished)): the
/// consumer that just freed a frame, the producer that just published one.
/// (A sequence wraps only after 2³² changes.)
#[derive(Default)]
pub(crate) struct NameMemo {
    /// The name this process last published or looked up.
    name: String,
    /// Whether `name` was published at the sequence this process's last
    /// change of the names gave the event.
    known: Option<(bool, u32)>,
}

/// Published types this process already parsed, by name slot: `get` on a
/// name seen before costs a comparison of the type text, not a parse. An
/// entry is used only when both the publication (name slot and target
/// record with its generation) and the text read under the lock match.
#[derive(Default)]
pub(crate) struct TypeCache(Vec<Option<CachedType>>);

/// One entry of a [`TypeCache`]: name slot, target record, text, type.
type CachedType = (u32, u64, Box<str>, Type);

impl TypeCache {
    /// The type published in name slot `slot` for record `target` as
    /// `text`, parsed once.
    pub(crate) fn parse(&mut self, slot: u32, target: u64, text: &str) -> Result<Type> {
        let i = slot as usize;
        if let Some(Some((s, t, cached, ty))) = self.0.get(i)
            && *s == slot
            && *t == target
            && **cached == *text
        {
            return Ok(ty.clone());
        }
        let ty = dtype::parse(text)
            .map_err(|e| Error::corrupt(format!("published type {text:?}: {e}")))?;
        // `slot` is a validated name slot index, so the cache has at most
        // one entry per slot of the table.
        if self.0.len() <= i {
            self.0.resize(i + 1, None);
        }
        self.0[i] = Some((slot, target, text.into(), ty.clone()));
        Ok(ty)
    }
}

/// The tables while the context mutex is held, with the caller's identity
/// and the blocks to give back before unlocking.
pub(crate) struct Locked<'a> {
    pub(crate) t: Table<'a>,
    pub(crate) me: Me,
    pub(crate) discards: Vec<Discard>,
    pub(crate) types: &'a mut TypeCache,
    memo: &'a mut NameMemo,
    p: &'a Participant,
}

impl Locked<'_> {
    /// Notes `name` as the one this process last published or looked up:
    /// the next change of the names this process makes records whether
    /// it is published then (see [`NameMemo`]).
    pub(crate) fn note_name(&mut self, name: &str) {
        if self.memo.name != name {
            self.memo.name.clear();
            self.memo.name.push_str(name);
            self.memo.known = None;
        }
    }

    /// Repairs the tables (see [`Table::recover`]).
    pub(crate) fn recover(&mut self) -> Result<Recovery> {
        let p = self.p;
        let (report, d) = self.t.recover(&mut |token| p.is_alive(token))?;
        self.discards.extend(d);
        Ok(report)
    }
}

impl Shared {
    /// Runs `f` on the tables under the context mutex, repairing them first
    /// if the previous holder died; blocks in `discards` are returned to
    /// the system before the mutex is released (so none can be reused
    /// before it is emptied).
    pub(crate) fn with_table<R>(&self, f: impl FnOnce(&mut Locked<'_>) -> Result<R>) -> Result<R> {
        let mut local = self.local.lock().unwrap_or_else(PoisonError::into_inner);
        let Local { p, types, memo } = &mut *local;
        let p = &*p;
        let mutex: &ShmMutex = self.segment.at(self.mutex_offset)?;
        let mut guard = mutex.lock(p)?;
        let words = self
            .segment
            .words(Offset(self.layout.control_offset), self.layout.words)?;
        let mut locked = Locked {
            t: Table::new(words, self.layout)?,
            me: Me {
                token: p.token(),
                slot: p.slot(),
            },
            discards: Vec::new(),
            types,
            memo,
            p,
        };
        let result = if guard.owner_died() {
            locked.recover().map(|_| guard.mark_consistent())
        } else {
            Ok(())
        };
        let result = result.and_then(|()| f(&mut locked));
        // A change waiters watch for bumps the event under the lock (so
        // its sequences order the changes); sleepers are woken once the
        // lock is free.
        let mut bumped = None;
        if locked.t.has_watched_change()
            && let Ok(event) = self.publications()
        {
            let seq = event.bump();
            let memo = &mut *locked.memo;
            memo.known = match memo.name.as_str() {
                "" => None,
                name => locked
                    .t
                    .find_name(name)
                    .ok()
                    .map(|found| (found.is_some(), seq)),
            };
            bumped = Some(event);
        }
        for (off, len) in locked.discards {
            // Best effort: a block that cannot be emptied is only memory
            // that stays committed.
            // SAFETY: a block is discarded only once reclaimed: no hold and
            // no mapping of it is left in any process (the tables say so,
            // under the mutex we still hold), so no guard or array of this
            // process references its bytes, and none can be made before the
            // mutex is released.
            let _ = unsafe {
                self.segment
                    .discard_range(Offset(self.layout.heap_offset + off), len)
            };
        }
        drop(guard);
        if let Some(event) = bumped {
            event.wake_waiters();
        }
        result
    }

    /// Whether `name` is published, when this process knows it without
    /// looking: the name it last published or looked up, while the
    /// publication event still shows the sequence of this process's last
    /// change of the names (see [`NameMemo`]).
    pub(crate) fn known_published(&self, name: &str) -> Option<bool> {
        let local = self.local.lock().unwrap_or_else(PoisonError::into_inner);
        let (published, seq) = local.memo.known?;
        (local.memo.name == name && self.publications().ok()?.current() == seq).then_some(published)
    }

    /// Like [`Shared::with_table`], but when `f` fails for lack of
    /// capacity or a mapping conflict, recovers what dead processes held
    /// and, if that changed anything, tries once more.
    pub(crate) fn with_table_retry<R>(
        &self,
        f: impl Fn(&mut Locked<'_>) -> Result<R>,
    ) -> Result<R> {
        match self.with_table(&f) {
            Err(e @ (Error::CapacityExceeded { .. } | Error::MapConflict(_))) => {
                if self.with_table(|l| l.recover())? == Recovery::default() {
                    Err(e)
                } else {
                    self.with_table(f)
                }
            }
            other => other,
        }
    }

    /// This process's participant token (what a stream records as its
    /// producer's or a consumer's owner).
    pub(crate) fn token(&self) -> u32 {
        let local = self.local.lock().unwrap_or_else(PoisonError::into_inner);
        local.p.token()
    }

    /// Whether the participant with `token` is alive (kernel-held slot
    /// lock, generation, PID and start time: `shm_core::Participant`).
    pub(crate) fn token_alive(&self, token: u32) -> bool {
        let local = self.local.lock().unwrap_or_else(PoisonError::into_inner);
        local.p.is_alive(token)
    }

    /// The publication event: bumped under the lock by every change a
    /// waiter watches (see `with_table`), waited on by `wait_for`,
    /// `map_wait` and `wait_unpublished`. It sits after the context
    /// mutex, before the control words.
    pub(crate) fn publications(&self) -> Result<&ShmEvent> {
        Ok(self
            .segment
            .at(Offset(self.mutex_offset.get() + PUBLICATION_EVENT))?)
    }

    /// A bounds-checked pointer to `len` heap bytes at `off`, in the
    /// read-write mapping when `writable`, else in the `PROT_READ` view.
    pub(crate) fn heap_ptr(
        &self,
        off: u64,
        len: u64,
        writable: bool,
    ) -> Result<std::ptr::NonNull<u8>> {
        let at = Offset(self.layout.heap_offset + off);
        Ok(if writable {
            self.segment.ptr(at, len)?
        } else {
            self.read_view.ptr(at, len)?
        })
    }
}

impl Shared {
    /// The handle's shared part over `segment` (validated by the caller),
    /// with this process's participant and `PROT_READ` view.
    pub(crate) fn new(
        segment: Segment,
        read_view: ReadOnlyView,
        p: Participant,
        layout: Layout,
        mutex_offset: Offset,
        owner: bool,
    ) -> Shared {
        Shared {
            segment,
            read_view,
            local: Mutex::new(Local {
                p,
                types: TypeCache::default(),
                memo: NameMemo::default(),
            }),
            layout,
            mutex_offset,
            owner,
            wait_spin_ns: Default::default(),
        }
    }

    /// Whether this handle created the context (it closes it when the
    /// last clone goes).
    pub(crate) fn is_owner(&self) -> bool {
        self.owner
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if self.owner {
            let _ = self.with_table(|l| {
                l.t.close();
                Ok(())
            });
        }
    }
}
