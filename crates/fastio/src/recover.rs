//! Recovery: making the tables consistent after a participant died, and
//! the invariant check the tests hold every state to.
//!
//! Recovery runs under the context mutex when the mutex reports that its
//! previous owner died (the tables may be mid-operation), when a process
//! attaches, when a request would fail for lack of capacity or because of
//! a mapping conflict, and on demand. It only trusts records and names,
//! drops what dead participants held, and rebuilds everything derived. It
//! is idempotent, and a crash during recovery is repaired by the next one.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::heap::class_of_block;
use crate::layout::{NUM_CLASSES, hdr};
use crate::names::{PUBLISHED, TOMB};
use crate::ops::Discard;
use crate::table::{ACTIVE, CREATING, DOOMED, FREE, Holds, Table, rec};

/// What a recovery did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Recovery {
    /// Holds (references) of dead processes that were dropped.
    pub dead_holds: u64,
    /// Read or write mappings of dead processes that were dropped.
    pub dead_mappings: u64,
    /// Allocations whose memory was reclaimed as a result.
    pub reclaimed: u64,
    /// Creations a dead process left half done, rolled back.
    pub abandoned_creates: u64,
    /// Names that referred to no live allocation, removed.
    pub stale_names: u64,
}

impl Table<'_> {
    /// Repairs the tables; `alive(token)` says whether a participant lives.
    /// Returns what was done and the blocks to discard.
    pub(crate) fn recover(
        &self,
        alive: &mut dyn FnMut(u32) -> bool,
    ) -> Result<(Recovery, Vec<Discard>)> {
        let mut report = Recovery::default();
        let mut discards = Vec::new();
        let mut cache: HashMap<u32, bool> = HashMap::new();
        let mut is_alive = |t: u32| *cache.entry(t).or_insert_with(|| alive(t));

        // 1. Records: drop dead holds, mappings and creations.
        for i in 0..self.l.max_allocs {
            let (st, gen_) = self.state(i)?;
            let (off, cap) = self.block(i)?;
            match st {
                FREE => self.clear_entries(i),
                CREATING => {
                    let creator = self.rget(i, rec::CREATOR) as u32;
                    if !is_alive(creator) {
                        if cap > 0 {
                            discards.push((off, cap));
                        }
                        self.rset(i, rec::CAP, 0);
                        self.set_state(i, FREE, gen_);
                        self.clear_entries(i);
                        report.abandoned_creates += 1;
                    }
                }
                _ => {
                    if cap == 0 {
                        return Err(Error::corrupt(format!("live record {i} has no block")));
                    }
                    for s in 0..self.l.participants {
                        let e = self.holds(i, s);
                        if e != Holds::split(0) && !is_alive(e.token) {
                            report.dead_holds += u64::from(e.holds);
                            report.dead_mappings += u64::from(e.reads);
                            self.set_holds(i, s, Holds::split(0));
                        }
                    }
                    let w = self.rget(i, rec::WRITER) as u32;
                    if w != 0 && !is_alive(w) {
                        report.dead_mappings += 1;
                        self.rset(i, rec::WRITER, 0);
                    }
                }
            }
        }

        // 2. Names: keep those of live allocations, recount.
        let mut pubs: HashMap<u32, u64> = HashMap::new();
        for j in 0..self.l.name_slots {
            let (st, _) = self.name_state(j)?;
            if st != PUBLISHED {
                continue;
            }
            let p = self.published(j)?;
            let (tst, tgen) = self.state(p.target.idx)?;
            if tst == ACTIVE && tgen == p.target.gen_ {
                self.meta(j)?;
                *pubs.entry(p.target.idx).or_default() += 1;
            } else {
                self.remove_name_slot(j)?;
                report.stale_names += 1;
            }
        }
        for j in 0..self.l.name_slots {
            if self.name_state(j)?.0 == TOMB {
                self.sweep_tombstones(j)?;
            }
        }
        let published: u64 = pubs.values().sum();
        self.set(hdr::PUBLISHED, published);
        for i in 0..self.l.max_allocs {
            let n = pubs.get(&i).copied().unwrap_or(0);
            if self.rget(i, rec::PUBS) != n {
                self.rset(i, rec::PUBS, n);
            }
        }

        // 3. Blocks must not overlap.
        let mut blocks = Vec::new();
        for i in 0..self.l.max_allocs {
            let (off, cap) = self.block(i)?;
            if cap > 0 {
                blocks.push((off, cap, i));
            }
        }
        blocks.sort_unstable();
        for pair in blocks.windows(2) {
            if pair[0].0 + pair[0].1 > pair[1].0 {
                return Err(Error::corrupt(format!(
                    "blocks of records {} and {} overlap",
                    pair[0].2, pair[1].2
                )));
            }
        }

        // 4. Rebuild the lists, then reclaim what nothing keeps.
        self.set(hdr::EMPTY_HEAD, 0);
        for c in 0..NUM_CLASSES {
            self.set(self.l.class_head(c), 0);
        }
        self.set(hdr::CACHED_BYTES, 0);
        for i in 0..self.l.max_allocs {
            if self.state(i)?.0 == FREE {
                discards.extend(self.file_free_record(i)?);
            }
        }
        for i in 0..self.l.max_allocs {
            let (st, _) = self.state(i)?;
            if st == ACTIVE || st == DOOMED {
                discards.extend(self.reclaim_if_unused(i)?);
                if self.state(i)?.0 == FREE {
                    report.reclaimed += 1;
                }
            }
        }
        self.bump(hdr::RECOVERIES, 1);
        Ok((report, discards))
    }

    /// Checks every invariant of a consistent table (used by tests and by
    /// `Context::check`). Returns the first violation.
    pub(crate) fn check(&self) -> Result<(), String> {
        let e = |m: String| Err::<(), String>(m);
        let mut listed = vec![0u32; self.l.max_allocs as usize];
        let mut cached = 0u64;
        for c in 0..=NUM_CLASSES {
            let head = if c == NUM_CLASSES {
                hdr::EMPTY_HEAD
            } else {
                self.l.class_head(c)
            };
            let mut link = self.get(head);
            let mut steps = 0;
            while link != 0 {
                let i = (link - 1) as u32;
                if i >= self.l.max_allocs || steps > self.l.max_allocs {
                    return e(format!("bad list link {link}"));
                }
                listed[i as usize] += 1;
                let (_, cap) = self.block(i).map_err(|x| x.to_string())?;
                let want = if c == NUM_CLASSES { None } else { Some(c) };
                if (cap == 0 && want.is_some()) || (cap > 0 && class_of_block(cap) != want) {
                    return e(format!("record {i} on list {c} with block {cap}"));
                }
                cached += cap;
                link = self.rget(i, rec::NEXT);
                steps += 1;
            }
        }
        if cached != self.get(hdr::CACHED_BYTES) {
            return e(format!(
                "cached bytes {} != {cached}",
                self.get(hdr::CACHED_BYTES)
            ));
        }
        let mut names_of: HashMap<u32, u64> = HashMap::new();
        let mut seen = std::collections::HashSet::new();
        for j in 0..self.l.name_slots {
            let (st, _) = self.name_state(j).map_err(|x| x.to_string())?;
            if st != PUBLISHED {
                continue;
            }
            let p = self.published(j).map_err(|x| x.to_string())?;
            if self.find_name(&p.name).map_err(|x| x.to_string())? != Some(j) {
                return e(format!("name {:?} in slot {j} is not reachable", p.name));
            }
            if !seen.insert(p.name.clone()) {
                return e(format!("name {:?} published twice", p.name));
            }
            let (tst, tgen) = self.state(p.target.idx).map_err(|x| x.to_string())?;
            if tst != ACTIVE || tgen != p.target.gen_ {
                return e(format!("name {:?} targets a dead record", p.name));
            }
            *names_of.entry(p.target.idx).or_default() += 1;
        }
        if seen.len() as u64 != self.get(hdr::PUBLISHED) {
            return e(format!(
                "published count {} != {}",
                self.get(hdr::PUBLISHED),
                seen.len()
            ));
        }
        let mut blocks = Vec::new();
        for i in 0..self.l.max_allocs {
            let (st, _) = self.state(i).map_err(|x| x.to_string())?;
            let (off, cap) = self.block(i).map_err(|x| x.to_string())?;
            let holds = self.total_holds(i);
            let pubs = self.rget(i, rec::PUBS);
            if pubs != names_of.get(&i).copied().unwrap_or(0) {
                return e(format!("record {i}: pubs {pubs} disagrees with the names"));
            }
            let ok = match st {
                FREE => listed[i as usize] == 1 && holds == 0 && !self.any_reads(i),
                CREATING => listed[i as usize] == 0 && cap > 0,
                ACTIVE => listed[i as usize] == 0 && cap > 0 && (holds > 0 || pubs > 0),
                _ => listed[i as usize] == 0 && cap > 0 && holds > 0 && pubs == 0,
            };
            if !ok {
                return e(format!(
                    "record {i}: state {st}, listed {}, holds {holds}, pubs {pubs}, cap {cap}",
                    listed[i as usize]
                ));
            }
            if cap > 0 {
                blocks.push((off, cap));
            }
        }
        blocks.sort_unstable();
        if blocks.windows(2).any(|p| p[0].0 + p[0].1 > p[1].0) {
            return e("blocks overlap".into());
        }
        Ok(())
    }

    /// Whether `id` is still a live record (for tests and the model).
    #[cfg(test)]
    pub(crate) fn is_live(&self, id: crate::table::AllocId) -> bool {
        matches!(self.state(id.idx), Ok((st, g)) if g == id.gen_ && (st == ACTIVE || st == DOOMED))
    }
}
