//! The operations on the tables, each run under the context mutex.
//!
//! The life cycle of a record (see `docs/fastio.md` for the diagram):
//!
//! ```text
//! FREE(empty) --begin_create--> CREATING --finish_create--> ACTIVE
//! FREE(cached) --create (warm)-------------------------------> ACTIVE
//! ACTIVE --free--> DOOMED
//! ACTIVE  --last hold released, no name--> FREE(cached | empty)
//! DOOMED  --last hold released-----------> FREE(cached | empty)
//! ```

use crate::error::{Error, Result};
use crate::heap::{class_of, class_of_block as heap_class, first_fit, first_fit_aligned};
use crate::layout::{MAX_TYPE_LEN, hdr};
use crate::names::{Meta, validate_name};
use crate::table::{ACTIVE, AllocId, CREATING, DOOMED, FREE, Holds, Me, Table, rec};

/// A block to give back to the system (heap offset, length), after the
/// mutex is released.
pub(crate) type Discard = (u64, u64);

/// What [`Table::begin_create`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Begun {
    /// A cached block was reused: the allocation is live.
    Warm(AllocId),
    /// A new block was placed; the caller commits its memory, then calls
    /// [`Table::finish_create`].
    Cold { id: AllocId, off: u64, cap: u64 },
}

impl Table<'_> {
    /// Starts `create(size)`. Cached blocks of other classes that must make
    /// room are appended to `discards`.
    pub(crate) fn begin_create(
        &self,
        size: u64,
        me: Me,
        discards: &mut Vec<Discard>,
    ) -> Result<Begun> {
        self.check_open()?;
        let too_big = || Error::CapacityExceeded {
            resource: "bytes",
            limit: self.l.heap_len,
        };
        let (_, cap) = class_of(size).ok_or_else(too_big)?;
        if cap > self.l.heap_len {
            return Err(too_big());
        }
        let head = self.class_head_for(cap)?;
        if let Some(idx) = self.pop(head)? {
            let (st, gen_) = self.state(idx)?;
            if st != FREE || self.block(idx)?.1 != cap {
                return Err(Error::corrupt(format!("record {idx} on a wrong free list")));
            }
            self.bump(hdr::CACHED_BYTES, -(cap as i64));
            let id = AllocId {
                idx,
                gen_: gen_.wrapping_add(1),
            };
            self.activate(id, size, me);
            return Ok(Begun::Warm(id));
        }
        let idx = match self.pop(hdr::EMPTY_HEAD)? {
            Some(idx) if self.state(idx)?.0 == FREE && self.block(idx)?.1 == 0 => idx,
            Some(idx) => {
                return Err(Error::corrupt(format!("record {idx} on the empty list")));
            }
            None => match self.evict_one(discards)? {
                Some(idx) => idx,
                None => {
                    return Err(Error::CapacityExceeded {
                        resource: "allocations",
                        limit: u64::from(self.l.max_allocs),
                    });
                }
            },
        };
        // Place the block, emptying cached blocks of other classes until
        // it fits: at most one round per record.
        let mut placed = None;
        for _ in 0..=self.l.max_allocs {
            placed = self.place(cap)?;
            if placed.is_some() {
                break;
            }
            match self.evict_one(discards)? {
                Some(other) => self.push(hdr::EMPTY_HEAD, other),
                None => break,
            }
        }
        let Some(off) = placed else {
            self.push(hdr::EMPTY_HEAD, idx);
            return Err(too_big());
        };
        let (_, gen_) = self.state(idx)?;
        let gen_ = gen_.wrapping_add(1);
        // CREATING (with its creator) before the block, so that a crash
        // cannot leave an uncommitted block that looks cached.
        self.rset(idx, rec::CREATOR, u64::from(me.token));
        self.set_state(idx, CREATING, gen_);
        self.rset(idx, rec::OFF, off);
        self.rset(idx, rec::CAP, cap);
        Ok(Begun::Cold {
            id: AllocId { idx, gen_ },
            off,
            cap,
        })
    }

    /// Completes a cold create: activates the record if the block's memory
    /// was committed, else gives the record back and returns the block to
    /// discard.
    pub(crate) fn finish_create(
        &self,
        id: AllocId,
        size: u64,
        me: Me,
        committed: bool,
    ) -> Result<Option<Discard>> {
        let (st, gen_) = self.state(id.idx)?;
        if st != CREATING
            || gen_ != id.gen_
            || self.rget(id.idx, rec::CREATOR) != u64::from(me.token)
        {
            return Err(Error::corrupt("a record being created was taken over"));
        }
        if committed {
            self.activate(id, size, me);
            return Ok(None);
        }
        let block = self.block(id.idx)?;
        self.rset(id.idx, rec::CAP, 0);
        self.set_state(id.idx, FREE, id.gen_);
        self.push(hdr::EMPTY_HEAD, id.idx);
        Ok(Some(block))
    }

    /// Makes record `id.idx` live with one hold of `me`.
    fn activate(&self, id: AllocId, size: u64, me: Me) {
        self.set_holds(
            id.idx,
            me.slot,
            Holds {
                token: me.token,
                holds: 1,
                reads: 0,
            },
        );
        self.rset(id.idx, rec::SIZE, size);
        self.rset(id.idx, rec::WRITER, 0);
        self.rset(id.idx, rec::PUBS, 0);
        self.rset(id.idx, rec::NAME_HINT, 0);
        // Miri isolates the clock: 0 there ("unknown").
        let now_ms = if cfg!(miri) {
            0
        } else {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64)
        };
        self.rset(id.idx, rec::CREATED_MS, now_ms);
        self.set_state(id.idx, ACTIVE, id.gen_);
    }

    /// First-fit position for a new block of `cap` bytes.
    fn place(&self, cap: u64) -> Result<Option<u64>> {
        let mut used = Vec::new();
        for i in 0..self.l.max_allocs {
            let (off, len) = self.block(i)?;
            if len > 0 {
                used.push((off, len));
            }
        }
        // A block of huge pages' size goes on a huge-page boundary of the
        // file when there is room (it may then be backed by huge pages:
        // shm-core's `commit_range`), anywhere it fits otherwise.
        if cap >= shm_core::HUGE_PAGE {
            let base = self.l.heap_offset;
            if let Some(at) =
                first_fit_aligned(&mut used, cap, self.l.heap_len, base, shm_core::HUGE_PAGE)
            {
                return Ok(Some(at));
            }
        }
        Ok(first_fit(&mut used, cap, self.l.heap_len))
    }

    /// Takes every cached block off its list (to discard): the bytes given
    /// back. For a create that found `/dev/shm` full.
    pub(crate) fn evict_all(&self, discards: &mut Vec<Discard>) -> Result<u64> {
        let mut released = 0;
        for _ in 0..self.l.max_allocs {
            let before = discards.len();
            match self.evict_one(discards)? {
                Some(idx) => {
                    released += discards[before..].iter().map(|d| d.1).sum::<u64>();
                    self.push(hdr::EMPTY_HEAD, idx);
                }
                None => break,
            }
        }
        Ok(released)
    }

    /// Takes one cached block off its list, drops the block (to discard)
    /// and returns its record, now empty.
    fn evict_one(&self, discards: &mut Vec<Discard>) -> Result<Option<u32>> {
        for c in (0..crate::layout::NUM_CLASSES).rev() {
            if let Some(idx) = self.pop(self.l.class_head(c))? {
                let block = self.block(idx)?;
                if self.state(idx)?.0 != FREE || heap_class(block.1) != Some(c) {
                    return Err(Error::corrupt(format!("record {idx} on cached list {c}")));
                }
                self.rset(idx, rec::CAP, 0);
                self.bump(hdr::CACHED_BYTES, -(block.1 as i64));
                discards.push(block);
                return Ok(Some(idx));
            }
        }
        Ok(None)
    }

    /// `get(name)`: a new hold for `me` on the named allocation.
    pub(crate) fn get_named<T>(
        &self,
        name: &str,
        me: Me,
        read_meta: impl FnOnce(u32, u64, &str, Vec<usize>) -> Result<T>,
    ) -> Result<(AllocId, u64, T)> {
        self.check_open()?;
        let (id, slot) = self.resolve(name)?;
        // The metadata first: a bad record fails before any hold is taken.
        let mut text = [0u8; MAX_TYPE_LEN];
        let mut dims = Vec::new();
        let type_text = self.meta_into(slot, &mut text, &mut dims)?;
        let target = u64::from(id.idx) | u64::from(id.gen_) << 32;
        let meta = read_meta(slot, target, type_text, dims)?;
        self.add_to_entry(id.idx, me, 1, 0)?;
        Ok((id, self.rget(id.idx, rec::SIZE), meta))
    }

    /// One more hold for `me` on an allocation it already holds.
    pub(crate) fn add_hold(&self, id: AllocId, me: Me) -> Result<()> {
        self.checked_state(id)?;
        self.add_to_entry(id.idx, me, 1, 0)
    }

    /// Publishes `name` for `id`.
    pub(crate) fn publish(&self, id: AllocId, name: &str, meta: &Meta) -> Result<()> {
        self.check_open()?;
        validate_name(name)?;
        if self.checked_state(id)? == DOOMED {
            return Err(Error::Freed);
        }
        self.insert_name(name, id, meta)
    }

    /// Drops one hold of `me`; reclaims the allocation if that was the
    /// last hold and nothing keeps it.
    pub(crate) fn release(&self, id: AllocId, me: Me) -> Result<Option<Discard>> {
        self.checked_state(id)?;
        self.take_from_entry(id.idx, me, 1, 0)?;
        self.reclaim_if_unused(id.idx)
    }

    /// `free()`: marks the allocation for deletion (removing its names) and
    /// drops the hold of `me`.
    pub(crate) fn free(&self, id: AllocId, me: Me) -> Result<Option<Discard>> {
        if self.checked_state(id)? == ACTIVE {
            self.set_state(id.idx, DOOMED, id.gen_);
            self.remove_names_of(id)?;
        }
        self.release(id, me)
    }

    /// Reclaims record `idx` if no hold remains and, unless it is doomed,
    /// no name refers to it. Returns a block to discard when the cache is
    /// over its limit.
    pub(crate) fn reclaim_if_unused(&self, idx: u32) -> Result<Option<Discard>> {
        let (st, gen_) = self.state(idx)?;
        let unused = match st {
            ACTIVE => self.rget(idx, rec::PUBS) == 0 && self.total_holds(idx) == 0,
            DOOMED => self.total_holds(idx) == 0,
            _ => false,
        };
        if !unused {
            return Ok(None);
        }
        self.clear_entries(idx);
        self.rset(idx, rec::PUBS, 0);
        self.set_state(idx, FREE, gen_);
        self.file_free_record(idx)
    }

    /// Puts a `FREE` record on the right list: its class list if the block
    /// stays cached, else the empty list (returning the block to discard).
    pub(crate) fn file_free_record(&self, idx: u32) -> Result<Option<Discard>> {
        let (off, cap) = self.block(idx)?;
        if cap == 0 {
            self.push(hdr::EMPTY_HEAD, idx);
            return Ok(None);
        }
        let cached = self.get(hdr::CACHED_BYTES);
        if cached.saturating_add(cap) > self.get(hdr::CACHE_LIMIT) {
            self.rset(idx, rec::CAP, 0);
            self.push(hdr::EMPTY_HEAD, idx);
            return Ok(Some((off, cap)));
        }
        self.push(self.class_head_for(cap)?, idx);
        self.set(hdr::CACHED_BYTES, cached + cap);
        Ok(None)
    }

    /// Takes the write mapping for `me`.
    pub(crate) fn map_write(&self, id: AllocId, me: Me) -> Result<()> {
        self.check_mappable(id, me)?;
        if self.any_reads(id.idx) {
            return Err(Error::MapConflict("for reading"));
        }
        self.rset(id.idx, rec::WRITER, u64::from(me.token));
        Ok(())
    }

    /// Drops the write mapping of `me`.
    pub(crate) fn unmap_write(&self, id: AllocId, me: Me) -> Result<()> {
        self.checked_state(id)?;
        if self.rget(id.idx, rec::WRITER) != u64::from(me.token) {
            return Err(Error::corrupt("write mapping not held by this process"));
        }
        self.rset(id.idx, rec::WRITER, 0);
        Ok(())
    }

    /// Adds a read mapping for `me`.
    pub(crate) fn map_read(&self, id: AllocId, me: Me) -> Result<()> {
        self.check_mappable(id, me)?;
        self.add_to_entry(id.idx, me, 0, 1)
    }

    /// Drops a read mapping of `me`.
    pub(crate) fn unmap_read(&self, id: AllocId, me: Me) -> Result<()> {
        self.checked_state(id)?;
        self.take_from_entry(id.idx, me, 0, 1)
    }

    fn check_mappable(&self, id: AllocId, me: Me) -> Result<()> {
        if self.checked_state(id)? == DOOMED {
            return Err(Error::Freed);
        }
        let e = self.holds(id.idx, me.slot);
        if e.token != me.token || e.holds == 0 {
            return Err(Error::corrupt(
                "mapping an allocation this process does not hold",
            ));
        }
        if self.rget(id.idx, rec::WRITER) != 0 {
            return Err(Error::MapConflict("for writing"));
        }
        Ok(())
    }

    /// Size, heap offset and block length of a held allocation.
    pub(crate) fn extent(&self, id: AllocId) -> Result<(u64, u64, u64)> {
        self.checked_state(id)?;
        let (off, cap) = self.block(id.idx)?;
        let size = self.rget(id.idx, rec::SIZE);
        if size > cap {
            return Err(Error::corrupt(format!(
                "record {}: size {size} exceeds its {cap}-byte block",
                id.idx
            )));
        }
        Ok((size, off, cap))
    }
}
