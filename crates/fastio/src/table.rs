//! The control tables of a context, as words in shared memory.
//!
//! Every mutation of the tables happens while holding the context's robust
//! mutex, so the tables are a sequential data structure; what makes them
//! subtle is that a process may die after any single store. The rules
//! that make that survivable:
//!
//! * **Records are the truth; lists are derived.** An allocation record's
//!   state word, block, size and per-participant hold entries say
//!   everything; the free lists, name counts and cached-byte totals are
//!   caches that [`Table::recover`](crate::recover) rebuilds.
//! * **One store commits.** Each operation writes its new content first and
//!   flips a single state word last (a name becomes visible with one store;
//!   a record becomes active with one store), so a crash leaves either the
//!   old or the new state, plus garbage in words nobody reads.
//! * **Holds name their owner.** A hold entry is `token << 32 | holds << 16
//!   | read_maps`, one word per participant slot; the token (slot and
//!   generation) tells whether the owner is alive, so a dead process's holds
//!   and mappings are dropped exactly once.
//!
//! Every word read is validated before it is used as an index, an offset
//! or a length: a corrupted context gives [`Error::Corrupt`], never an
//! out-of-bounds access.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};
use crate::heap::class_of_block;
use crate::layout::{FLAG_CLOSED, Layout, MAGIC, PAGE, VERSION, hdr};

/// Record state: no allocation (the record may keep a cached block).
pub(crate) const FREE: u32 = 0;
/// Record state: a block is being committed by its creator.
pub(crate) const CREATING: u32 = 1;
/// Record state: a live allocation.
pub(crate) const ACTIVE: u32 = 2;
/// Record state: freed; no new gets or maps; reclaimed at the last hold.
pub(crate) const DOOMED: u32 = 3;

/// Record word offsets.
pub(crate) mod rec {
    /// `state | generation << 32`.
    pub(crate) const STATE: usize = 0;
    /// Block offset from the heap start.
    pub(crate) const OFF: usize = 1;
    /// Block length (a class size), 0 for none.
    pub(crate) const CAP: usize = 2;
    /// Requested size in bytes.
    pub(crate) const SIZE: usize = 3;
    /// Token of the write mapping's owner, or 0.
    pub(crate) const WRITER: usize = 4;
    /// Number of names published for this allocation (derived).
    pub(crate) const PUBS: usize = 5;
    /// Next record in a free list, index + 1 (derived).
    pub(crate) const NEXT: usize = 6;
    /// Token of the creator while `CREATING`.
    pub(crate) const CREATOR: usize = 7;
    /// A name slot + 1 that probably names this allocation (a hint).
    pub(crate) const NAME_HINT: usize = 8;
    /// When the allocation was made (ms since the Unix epoch), for
    /// observers; 0 when unknown.
    pub(crate) const CREATED_MS: usize = 9;
    /// First per-participant hold entry.
    pub(crate) const HOLDS: usize = 10;
}

/// Identity of a live allocation: record index and generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct AllocId {
    pub(crate) idx: u32,
    pub(crate) gen_: u32,
}

/// The caller's identity in the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Me {
    pub(crate) token: u32,
    pub(crate) slot: u32,
}

/// One participant's hold word of an allocation record, split into its
/// fields: its token, its holds and its read mappings (not a pipeline
/// entry, which is `crate::Entry`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Holds {
    pub(crate) token: u32,
    pub(crate) holds: u32,
    pub(crate) reads: u32,
}

impl Holds {
    pub(crate) fn split(w: u64) -> Holds {
        Holds {
            token: (w >> 32) as u32,
            holds: (w >> 16) as u32 & 0xFFFF,
            reads: w as u32 & 0xFFFF,
        }
    }
    pub(crate) fn join(self) -> u64 {
        if self.holds == 0 && self.reads == 0 {
            0
        } else {
            u64::from(self.token) << 32 | u64::from(self.holds) << 16 | u64::from(self.reads)
        }
    }
}

/// Most holds (or read mappings) one participant may have on one
/// allocation.
pub(crate) const MAX_PER_ENTRY: u32 = 0xFFFF;

/// A view of a context's control words.
pub(crate) struct Table<'a> {
    w: &'a [AtomicU64],
    pub(crate) l: Layout,
    /// Set by every change a waiter watches for (a name published or
    /// removed, the context closed): the engine then bumps the
    /// publication event before it lets go of the lock.
    watched_changed: std::cell::Cell<bool>,
}

impl<'a> Table<'a> {
    /// Wraps `words`, which must be exactly the layout's control words.
    pub(crate) fn new(w: &'a [AtomicU64], l: Layout) -> Result<Table<'a>> {
        if w.len() != l.words {
            return Err(Error::corrupt("control area has the wrong length"));
        }
        Ok(Table {
            w,
            l,
            watched_changed: std::cell::Cell::new(false),
        })
    }

    /// Reads word `i` (an index computed from the layout, so in bounds).
    pub(crate) fn get(&self, i: usize) -> u64 {
        self.w[i].load(Ordering::Acquire)
    }

    /// Writes word `i`. Under test, this is where a simulated crash can
    /// strike (see `crash` below).
    pub(crate) fn set(&self, i: usize, v: u64) {
        #[cfg(test)]
        crash::point();
        self.w[i].store(v, Ordering::Release);
    }

    /// Initialises fresh (zeroed) control words: header, every record on
    /// the empty list, and the magic last.
    pub(crate) fn init(&self, cache_limit: u64) {
        for (i, v) in self.l.header_words() {
            self.set(i, v);
        }
        self.set(hdr::CACHE_LIMIT, cache_limit);
        for idx in (0..self.l.max_allocs).rev() {
            self.push(hdr::EMPTY_HEAD, idx);
        }
        self.set(hdr::VERSION_FLAGS, VERSION);
        self.set(hdr::MAGIC, MAGIC);
    }

    pub(crate) fn is_closed(&self) -> bool {
        (self.get(hdr::VERSION_FLAGS) >> 32) & FLAG_CLOSED != 0
    }

    pub(crate) fn close(&self) {
        let v = self.get(hdr::VERSION_FLAGS);
        self.set(hdr::VERSION_FLAGS, v | FLAG_CLOSED << 32);
        self.watched_changed();
    }

    /// Notes a change that waiters watch for (see `watched_changed`).
    pub(crate) fn watched_changed(&self) {
        self.watched_changed.set(true);
    }

    /// Whether a change that waiters watch for was made through this view.
    pub(crate) fn has_watched_change(&self) -> bool {
        self.watched_changed.get()
    }

    /// Fails with [`Error::ContextClosed`] once the owner closed the context.
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.is_closed() {
            Err(Error::ContextClosed)
        } else {
            Ok(())
        }
    }

    // ---- records -------------------------------------------------------

    pub(crate) fn rw(&self, idx: u32, field: usize) -> usize {
        self.l.rec(idx) + field
    }

    pub(crate) fn rget(&self, idx: u32, field: usize) -> u64 {
        self.get(self.rw(idx, field))
    }

    pub(crate) fn rset(&self, idx: u32, field: usize, v: u64) {
        self.set(self.rw(idx, field), v)
    }

    /// `(state, generation)` of record `idx`, validated.
    pub(crate) fn state(&self, idx: u32) -> Result<(u32, u32)> {
        let w = self.rget(idx, rec::STATE);
        let st = w as u32;
        if st > DOOMED {
            return Err(Error::corrupt(format!("record {idx} has state {st}")));
        }
        Ok((st, (w >> 32) as u32))
    }

    pub(crate) fn set_state(&self, idx: u32, st: u32, gen_: u32) {
        self.rset(idx, rec::STATE, u64::from(st) | u64::from(gen_) << 32)
    }

    /// The block `(offset, len)` of record `idx`, validated against the
    /// heap; `len == 0` means none.
    pub(crate) fn block(&self, idx: u32) -> Result<(u64, u64)> {
        let off = self.rget(idx, rec::OFF);
        let cap = self.rget(idx, rec::CAP);
        if cap == 0 {
            return Ok((off, 0));
        }
        let fits = off.is_multiple_of(PAGE)
            && class_of_block(cap).is_some()
            && off.checked_add(cap).is_some_and(|e| e <= self.l.heap_len);
        if !fits {
            return Err(Error::corrupt(format!(
                "record {idx} has block ({off}, {cap}) outside the {}-byte heap",
                self.l.heap_len
            )));
        }
        Ok((off, cap))
    }

    /// The record of a live handle's allocation, checked to be that
    /// allocation: returns its state.
    pub(crate) fn checked_state(&self, id: AllocId) -> Result<u32> {
        if id.idx >= self.l.max_allocs {
            return Err(Error::corrupt("allocation index out of range"));
        }
        let (st, gen_) = self.state(id.idx)?;
        if gen_ != id.gen_ || !(st == ACTIVE || st == DOOMED) {
            return Err(Error::corrupt(format!(
                "record {} no longer holds this allocation",
                id.idx
            )));
        }
        Ok(st)
    }

    pub(crate) fn holds(&self, idx: u32, slot: u32) -> Holds {
        Holds::split(self.rget(idx, rec::HOLDS + slot as usize))
    }

    pub(crate) fn set_holds(&self, idx: u32, slot: u32, e: Holds) {
        self.rset(idx, rec::HOLDS + slot as usize, e.join())
    }

    /// Adds holds and read mappings for `me`. An entry left by a dead
    /// earlier occupant of the slot is overwritten (its holds were dead).
    pub(crate) fn add_to_entry(&self, idx: u32, me: Me, holds: u32, reads: u32) -> Result<()> {
        let mut e = self.holds(idx, me.slot);
        if e.token != me.token {
            e = Holds {
                token: me.token,
                holds: 0,
                reads: 0,
            };
        }
        e.holds += holds;
        e.reads += reads;
        if e.holds > MAX_PER_ENTRY || e.reads > MAX_PER_ENTRY {
            return Err(Error::CapacityExceeded {
                resource: "references per process",
                limit: u64::from(MAX_PER_ENTRY),
            });
        }
        self.set_holds(idx, me.slot, e);
        Ok(())
    }

    /// Removes holds and read mappings of `me`; they must exist.
    pub(crate) fn take_from_entry(&self, idx: u32, me: Me, holds: u32, reads: u32) -> Result<()> {
        let mut e = self.holds(idx, me.slot);
        if e.token != me.token || e.holds < holds || e.reads < reads {
            return Err(Error::corrupt(format!(
                "record {idx}: this process holds no such reference"
            )));
        }
        e.holds -= holds;
        e.reads -= reads;
        self.set_holds(idx, me.slot, e);
        Ok(())
    }

    /// Zeroes every hold entry and the writer of record `idx`.
    pub(crate) fn clear_entries(&self, idx: u32) {
        for s in 0..self.l.participants {
            if self.rget(idx, rec::HOLDS + s as usize) != 0 {
                self.rset(idx, rec::HOLDS + s as usize, 0);
            }
        }
        if self.rget(idx, rec::WRITER) != 0 {
            self.rset(idx, rec::WRITER, 0);
        }
    }

    /// Sum of holds over all entries (dead ones included until recovery).
    pub(crate) fn total_holds(&self, idx: u32) -> u64 {
        (0..self.l.participants)
            .map(|s| u64::from(self.holds(idx, s).holds))
            .sum()
    }

    /// Whether any participant has a read mapping.
    pub(crate) fn any_reads(&self, idx: u32) -> bool {
        (0..self.l.participants).any(|s| self.holds(idx, s).reads > 0)
    }

    // ---- free lists (derived) --------------------------------------------

    /// Pushes record `idx` on the list whose head is word `head`.
    pub(crate) fn push(&self, head: usize, idx: u32) {
        self.rset(idx, rec::NEXT, self.get(head));
        self.set(head, u64::from(idx) + 1);
    }

    /// Pops a record from the list whose head is word `head`.
    pub(crate) fn pop(&self, head: usize) -> Result<Option<u32>> {
        let h = self.get(head);
        if h == 0 {
            return Ok(None);
        }
        let idx = self.list_index(h)?;
        let next = self.rget(idx, rec::NEXT);
        if next != 0 {
            self.list_index(next)?;
        }
        self.set(head, next);
        Ok(Some(idx))
    }

    fn list_index(&self, link: u64) -> Result<u32> {
        match u32::try_from(link - 1) {
            Ok(i) if i < self.l.max_allocs => Ok(i),
            _ => Err(Error::corrupt(format!(
                "free-list link {link} out of range"
            ))),
        }
    }

    /// Head word of the list of cached blocks of `cap` bytes.
    pub(crate) fn class_head_for(&self, cap: u64) -> Result<usize> {
        class_of_block(cap)
            .map(|c| self.l.class_head(c))
            .ok_or_else(|| Error::corrupt(format!("{cap} is not a block size")))
    }

    /// Adds `delta` (wrapping) to header word `i`.
    pub(crate) fn bump(&self, i: usize, delta: i64) {
        self.set(i, self.get(i).wrapping_add_signed(delta));
    }
}

/// Simulated crashes for the exhaustive tests: a store budget per thread;
/// when it runs out, the store panics with [`crash::Crash`] instead of
/// happening, which the tests catch as "the process died here".
#[cfg(test)]
pub(crate) mod crash {
    use std::cell::Cell;

    /// Panic payload of a simulated crash.
    pub(crate) struct Crash;

    thread_local! {
        static BUDGET: Cell<Option<usize>> = const { Cell::new(None) };
        static STORES: Cell<usize> = const { Cell::new(0) };
    }

    pub(crate) fn point() {
        STORES.with(|s| s.set(s.get() + 1));
        BUDGET.with(|b| match b.get() {
            Some(0) => std::panic::panic_any(Crash),
            Some(n) => b.set(Some(n - 1)),
            None => {}
        });
    }

    /// Allows `n` more stores, then crashes (`None`: never).
    pub(crate) fn arm(n: Option<usize>) {
        BUDGET.with(|b| b.set(n));
    }

    /// Stores performed by this thread so far.
    pub(crate) fn stores() -> usize {
        STORES.with(|s| s.get())
    }
}
