//! The published-name table: open addressing with linear probing over
//! `name_slots` records (at most half full), each holding a name, the
//! allocation it refers to and a copy of the published metadata.
//!
//! A name becomes visible with a single store of its state word, after its
//! content is written. Removal leaves a tombstone, and tombstones directly
//! before an empty slot turn back into empty slots, so probe chains stay
//! short under churn; every step is one store and safe to interrupt.

use crate::error::{Error, Result};
use crate::layout::{MAX_DIMS, MAX_NAME_LEN, MAX_TYPE_LEN, hdr};
use crate::table::{ACTIVE, AllocId, Table, rec};

/// Names of streams' allocations start with this; the table API
/// ([`Context::get`](crate::Context::get), [`Context::map`](crate::Context::map), `publish`) refuses them, so only
/// stream handles reach a ring.
pub const STREAM_PREFIX: &str = "fastio.stream/";

/// The error for a name in the streams' namespace, used by the table API.
pub(crate) fn refuse_reserved(name: &str) -> Result<()> {
    if name.starts_with(STREAM_PREFIX) {
        return Err(Error::InvalidName {
            name: name.to_owned(),
            reason: "names starting with \"fastio.stream/\" belong to streams",
        });
    }
    Ok(())
}

/// Name slot state: never used since the last cleanup (ends probes).
pub(crate) const EMPTY: u32 = 0;
/// Name slot state: a visible name.
pub(crate) const PUBLISHED: u32 = 2;
/// Name slot state: removed (probes continue past it).
pub(crate) const TOMB: u32 = 3;

/// Name record word offsets.
mod nw {
    /// `state | name_len << 32`.
    pub(crate) const STATE: usize = 0;
    /// `record index | generation << 32`.
    pub(crate) const TARGET: usize = 1;
    pub(crate) const HASH: usize = 2;
    /// `type_len | ndim << 32`.
    pub(crate) const LENS: usize = 3;
    pub(crate) const NAME: usize = 4;
    pub(crate) const TYPE: usize = 36;
    pub(crate) const DIMS: usize = 52;
}

/// Published metadata: element type (canonical datashape text) and
/// dimensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Meta {
    pub(crate) type_text: String,
    pub(crate) dims: Vec<u64>,
}

/// A published name as found in the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Published {
    pub(crate) slot: u32,
    pub(crate) name: String,
    pub(crate) target: AllocId,
}

/// FNV-1a, 64 bit.
pub(crate) fn hash(name: &[u8]) -> u64 {
    name.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Checks a name given by a user.
pub(crate) fn validate_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        "empty"
    } else if name.len() > MAX_NAME_LEN {
        "longer than 255 bytes"
    } else if name.contains('\0') {
        "contains NUL"
    } else {
        return Ok(());
    };
    Err(Error::InvalidName {
        name: name.to_owned(),
        reason,
    })
}

fn pack(t: &Table<'_>, first: usize, bytes: &[u8]) {
    for (k, chunk) in bytes.chunks(8).enumerate() {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        t.set(first + k, u64::from_le_bytes(w));
    }
}

/// Whether the words from `first` hold `bytes` as [`pack`] writes them
/// (zero-padded), compared a word at a time without copying. Garbage in
/// the padding of a corrupted table makes the answer "no", never a wrong
/// "yes".
fn packed_eq(t: &Table<'_>, first: usize, bytes: &[u8]) -> bool {
    bytes.chunks(8).enumerate().all(|(k, chunk)| {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        t.get(first + k) == u64::from_le_bytes(w)
    })
}

/// Copies `len <= out.len()` bytes packed from word `first` into `out`.
fn unpack_into<'b>(t: &Table<'_>, first: usize, len: usize, out: &'b mut [u8]) -> &'b [u8] {
    for (k, chunk) in out[..len].chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&t.get(first + k).to_le_bytes()[..chunk.len()]);
    }
    &out[..len]
}

fn unpack(t: &Table<'_>, first: usize, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    for k in 0..len.div_ceil(8) {
        out.extend_from_slice(&t.get(first + k).to_le_bytes());
    }
    out.truncate(len);
    out
}

impl Table<'_> {
    fn nword(&self, j: u32, field: usize) -> usize {
        self.l.name(j) + field
    }

    /// `(state, name length)` of name slot `j`, validated.
    pub(crate) fn name_state(&self, j: u32) -> Result<(u32, usize)> {
        let w = self.get(self.nword(j, nw::STATE));
        let (st, len) = (w as u32, (w >> 32) as usize);
        if !matches!(st, EMPTY | PUBLISHED | TOMB) || (st == PUBLISHED && len > MAX_NAME_LEN) {
            return Err(Error::corrupt(format!(
                "name slot {j} has state word {w:#x}"
            )));
        }
        Ok((st, len))
    }

    /// The name and target in slot `j` (which must be `PUBLISHED`).
    pub(crate) fn published(&self, j: u32) -> Result<Published> {
        let (_, len) = self.name_state(j)?;
        let name = String::from_utf8(unpack(self, self.nword(j, nw::NAME), len))
            .map_err(|_| Error::corrupt(format!("name slot {j} is not UTF-8")))?;
        let target = self.target(j, &name)?;
        Ok(Published {
            slot: j,
            name,
            target,
        })
    }

    /// The metadata published in slot `j`.
    pub(crate) fn meta(&self, j: u32) -> Result<Meta> {
        let lens = self.get(self.nword(j, nw::LENS));
        let (tlen, ndim) = (lens as u32 as usize, (lens >> 32) as usize);
        if tlen > MAX_TYPE_LEN || ndim > MAX_DIMS {
            return Err(Error::corrupt(format!(
                "name slot {j} has lengths {lens:#x}"
            )));
        }
        let type_text = String::from_utf8(unpack(self, self.nword(j, nw::TYPE), tlen))
            .map_err(|_| Error::corrupt(format!("name slot {j}: type text is not UTF-8")))?;
        let dims = (0..ndim)
            .map(|k| self.get(self.nword(j, nw::DIMS + k)))
            .collect();
        Ok(Meta { type_text, dims })
    }

    /// The slot publishing `name`, if any. Probing visits at most every
    /// slot once.
    pub(crate) fn find_name(&self, name: &str) -> Result<Option<u32>> {
        Ok(self.probe(name)?.0)
    }

    /// `(slot holding name, first reusable slot on its probe path)`.
    fn probe(&self, name: &str) -> Result<(Option<u32>, Option<u32>)> {
        let h = hash(name.as_bytes());
        let mask = self.l.name_slots - 1;
        let mut reusable = None;
        for k in 0..self.l.name_slots {
            let j = (h as u32).wrapping_add(k) & mask;
            let (st, len) = self.name_state(j)?;
            match st {
                EMPTY => return Ok((None, reusable.or(Some(j)))),
                TOMB => {
                    reusable.get_or_insert(j);
                }
                _ => {
                    if len == name.len()
                        && self.get(self.nword(j, nw::HASH)) == h
                        && packed_eq(self, self.nword(j, nw::NAME), name.as_bytes())
                    {
                        return Ok((Some(j), reusable));
                    }
                }
            }
        }
        Ok((None, reusable))
    }

    /// Publishes `name` for allocation `id` with `meta`.
    pub(crate) fn insert_name(&self, name: &str, id: AllocId, meta: &Meta) -> Result<()> {
        let (found, free) = self.probe(name)?;
        if found.is_some() {
            return Err(Error::NameExists(name.to_owned()));
        }
        let published = self.get(hdr::PUBLISHED);
        if published >= u64::from(self.l.max_names) {
            return Err(Error::CapacityExceeded {
                resource: "published names",
                limit: u64::from(self.l.max_names),
            });
        }
        let j = free.ok_or_else(|| Error::corrupt("name table has no free slot"))?;
        // Content first, while the slot is still invisible.
        self.set(
            self.nword(j, nw::TARGET),
            u64::from(id.idx) | u64::from(id.gen_) << 32,
        );
        self.set(self.nword(j, nw::HASH), hash(name.as_bytes()));
        self.set(
            self.nword(j, nw::LENS),
            meta.type_text.len() as u64 | (meta.dims.len() as u64) << 32,
        );
        pack(self, self.nword(j, nw::NAME), name.as_bytes());
        pack(self, self.nword(j, nw::TYPE), meta.type_text.as_bytes());
        for (k, &d) in meta.dims.iter().enumerate() {
            self.set(self.nword(j, nw::DIMS + k), d);
        }
        // The commit: one store.
        self.set(
            self.nword(j, nw::STATE),
            u64::from(PUBLISHED) | (name.len() as u64) << 32,
        );
        self.watched_changed();
        // Derived counters.
        self.set(hdr::PUBLISHED, published + 1);
        self.rset(id.idx, rec::PUBS, self.rget(id.idx, rec::PUBS) + 1);
        if self.rget(id.idx, rec::NAME_HINT) == 0 {
            self.rset(id.idx, rec::NAME_HINT, u64::from(j) + 1);
        }
        Ok(())
    }

    /// Removes the name in slot `j` (tombstone, then cleanup). Does not
    /// touch counters.
    pub(crate) fn remove_name_slot(&self, j: u32) -> Result<()> {
        self.set(self.nword(j, nw::STATE), u64::from(TOMB));
        self.watched_changed();
        self.sweep_tombstones(j)
    }

    /// Turns the run of tombstones ending at `j` back into empty slots if
    /// the slot after `j` is empty (nothing probes past an empty slot).
    pub(crate) fn sweep_tombstones(&self, j: u32) -> Result<()> {
        let mask = self.l.name_slots - 1;
        if self.name_state((j + 1) & mask)?.0 != EMPTY {
            return Ok(());
        }
        let mut k = j;
        for _ in 0..self.l.name_slots {
            if self.name_state(k)?.0 != TOMB {
                break;
            }
            self.set(self.nword(k, nw::STATE), u64::from(EMPTY));
            k = k.wrapping_sub(1) & mask;
        }
        Ok(())
    }

    /// Removes every name of allocation `id` (as many as its record
    /// counts, trying its name hint first); fixes the counters.
    pub(crate) fn remove_names_of(&self, id: AllocId) -> Result<()> {
        let mut left = self.rget(id.idx, rec::PUBS);
        let hint = self.rget(id.idx, rec::NAME_HINT);
        let hinted = u32::try_from(hint.wrapping_sub(1))
            .ok()
            .filter(|&j| j < self.l.name_slots);
        let slots = hinted.into_iter().chain(0..self.l.name_slots);
        for j in slots {
            if left == 0 {
                break;
            }
            if self.name_state(j)?.0 == PUBLISHED && self.published(j)?.target == id {
                self.remove_name_slot(j)?;
                left -= 1;
                self.rset(id.idx, rec::PUBS, left);
                self.bump(hdr::PUBLISHED, -1);
            }
        }
        self.rset(id.idx, rec::NAME_HINT, 0);
        Ok(())
    }

    /// Every published name, in slot order.
    pub(crate) fn all_names(&self) -> Result<Vec<Published>> {
        let mut out = Vec::new();
        for j in 0..self.l.name_slots {
            if self.name_state(j)?.0 == PUBLISHED {
                out.push(self.published(j)?);
            }
        }
        Ok(out)
    }

    /// The record name slot `j` (holding `name`) points at, checked to be
    /// inside the table.
    fn target(&self, j: u32, name: &str) -> Result<AllocId> {
        let word = self.get(self.nword(j, nw::TARGET));
        let target = AllocId {
            idx: word as u32,
            gen_: (word >> 32) as u32,
        };
        if target.idx >= self.l.max_allocs {
            return Err(Error::corrupt(format!(
                "name {name:?} targets a bad record"
            )));
        }
        Ok(target)
    }

    /// Looks `name` up and checks that it names a live allocation.
    pub(crate) fn resolve(&self, name: &str) -> Result<(AllocId, u32)> {
        let j = self
            .find_name(name)?
            .ok_or_else(|| Error::UnknownName(name.to_owned()))?;
        let target = self.target(j, name)?;
        let (st, gen_) = self.state(target.idx)?;
        if st != ACTIVE || gen_ != target.gen_ {
            return Err(Error::corrupt(format!(
                "name {name:?} refers to a record that is not live"
            )));
        }
        Ok((target, j))
    }

    /// The metadata published in slot `j`, without allocating: the type
    /// text (in `buf`) and the dimensions (appended to `dims`).
    pub(crate) fn meta_into<'b>(
        &self,
        j: u32,
        buf: &'b mut [u8; MAX_TYPE_LEN],
        dims: &mut Vec<usize>,
    ) -> Result<&'b str> {
        let lens = self.get(self.nword(j, nw::LENS));
        let (tlen, ndim) = (lens as u32 as usize, (lens >> 32) as usize);
        if tlen > MAX_TYPE_LEN || ndim > MAX_DIMS {
            return Err(Error::corrupt(format!(
                "name slot {j} has lengths {lens:#x}"
            )));
        }
        for k in 0..ndim {
            let d = self.get(self.nword(j, nw::DIMS + k));
            dims.push(
                usize::try_from(d)
                    .map_err(|_| Error::corrupt("published dimension exceeds usize"))?,
            );
        }
        std::str::from_utf8(unpack_into(self, self.nword(j, nw::TYPE), tlen, buf))
            .map_err(|_| Error::corrupt(format!("name slot {j}: type text is not UTF-8")))
    }
}
