//! Looking at a live context without taking part in it (`fastio top`):
//! an [`Observer`] opens the segment read-only (`PROT_READ`), never joins
//! its participants, never takes its lock and never writes; a
//! [`Snapshot`] copies the control words with one relaxed load each and
//! decodes the copy with the same table code the engine uses. Because
//! nothing stops the context from changing during the copy, a snapshot
//! may catch a record mid-change: such records are counted in
//! [`Snapshot::unsettled`] and left out, never trusted, and a context that
//! is corrupt or gone is an error, never a crash.

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use shm_core::{Access, Offset, Segment};

use crate::context::Stats;
use crate::error::{Error, Result};
use crate::layout::{HEADER_WORDS, Layout, hdr};
use crate::names::PUBLISHED;
use crate::plan::{PLAN_NAME, POISON_PREFIX, Plan};
use crate::steps::{OperatorStats, STATS_PREFIX};
use crate::table::{ACTIVE, CREATING, DOOMED, FREE, Holds, Table, rec};

/// A read-only view of a context.
pub struct Observer {
    segment: Segment,
    layout: Layout,
}

/// How an allocation's record stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocState {
    /// Its creator is committing its block.
    Creating,
    /// Live.
    Active,
    /// Freed; reclaimed once its last holder lets go.
    Doomed,
}

/// A participant slot's part in an allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The registry slot.
    pub slot: u32,
    /// The process recorded in the slot.
    pub pid: u32,
    /// Whether that process is alive (a dead holder's part is reclaimed at
    /// the next recovery).
    pub alive: bool,
    /// References it holds.
    pub holds: u32,
    /// Read mappings it has open.
    pub read_maps: u32,
}

/// A name an allocation is published under, with the type and shape
/// published with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameInfo {
    /// The name.
    pub name: String,
    /// The element type (datashape text).
    pub type_text: String,
    /// The dimensions.
    pub dims: Vec<u64>,
}

/// One allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocInfo {
    /// Its record.
    pub record: u32,
    /// How it stands.
    pub state: AllocState,
    /// Bytes asked for.
    pub size: u64,
    /// Bytes of its block.
    pub block: u64,
    /// Names it is published under (none: anonymous, private to a holder).
    pub names: Vec<NameInfo>,
    /// Who holds it.
    pub holders: Vec<Holder>,
    /// The slot mapping it for writing, and whether that process is alive.
    pub writer: Option<(u32, bool)>,
    /// When it was made (ms since the Unix epoch), when known.
    pub created_unix_ms: Option<u64>,
}

/// The context as a whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextInfo {
    /// The process that created it.
    pub creator_pid: u32,
    /// Whether that process is alive.
    pub creator_alive: bool,
    /// When it was created (ns since the Unix epoch).
    pub created_unix_ns: u64,
    /// Whether its owner closed it.
    pub closed: bool,
    /// Bytes of the segment.
    pub segment_bytes: u64,
    /// Processes attached: alive, and dead but not yet reaped.
    pub participants: (u64, u64),
    /// Their process ids, and whether each is alive.
    pub processes: Vec<(u32, bool)>,
    /// Usage counts, computed from the records (not the derived counters).
    pub stats: Stats,
}

/// A context at one moment.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The context.
    pub context: ContextInfo,
    /// Every allocation (creating, live or freed but held).
    pub allocations: Vec<AllocInfo>,
    /// Entries whose producer failed: the entry name (the marker's name
    /// without [`POISON_PREFIX`]).
    pub poisoned: Vec<String>,
    /// Records and names that changed while they were read, left out.
    pub unsettled: u32,
    /// The pipeline plan of a job run in this context, if one is published.
    pub plan: Option<Plan>,
    /// The statistics each streaming operator published, by operator name.
    pub operator_stats: Vec<(String, OperatorStats)>,
}

impl Observer {
    /// Opens the context behind `target`: a named context's name, or a
    /// path such as `/proc/<pid>/fd/<n>` to an anonymous one (opened
    /// read-only; the kernel checks that the caller may).
    pub fn open(target: &str) -> Result<Observer> {
        let segment = if target.starts_with('/') {
            // Only a regular file (a memfd or a file in /dev/shm): opening
            // a FIFO that took a closed descriptor's number would block.
            let is_file = std::fs::metadata(target).is_ok_and(|m| m.is_file());
            if !is_file {
                return Err(Error::Shm(shm_core::Error::NotRegularFile));
            }
            let file = std::fs::File::open(target).map_err(|e| {
                Error::Shm(shm_core::Error::Sys {
                    op: "open",
                    source: e,
                })
            })?;
            Segment::from_fd(file.into(), Access::ReadOnly)?
        } else {
            Segment::open_read_only(target)?
        };
        Observer::from_segment(segment)
    }

    /// Observes a segment opened read-only (`Segment::open_read_only`, or
    /// `Segment::from_fd` with `Access::ReadOnly`): only such a handle may
    /// read the heap, which the context's users lend out.
    pub fn from_segment(segment: Segment) -> Result<Observer> {
        if segment.access() != Access::ReadOnly {
            return Err(Error::Unsupported(
                "an observer reads through a read-only handle".into(),
            ));
        }
        let data_offset = segment.data_offset().get();
        let mut header = [0u64; HEADER_WORDS];
        segment.load_words(
            Offset(data_offset + crate::layout::CONTROL_AFTER_MUTEX),
            &mut header,
        )?;
        let layout = Layout::from_header(
            &header,
            data_offset,
            segment.len(),
            segment.info().max_participants,
        )?;
        Ok(Observer { segment, layout })
    }

    /// The segment's name (empty for an anonymous context).
    pub fn name(&self) -> &str {
        self.segment.name().unwrap_or("")
    }

    /// Reads the context now.
    pub fn snapshot(&self) -> Result<Snapshot> {
        let l = self.layout;
        let mut copy = vec![0u64; l.words];
        self.segment
            .load_words(Offset(l.control_offset), &mut copy)?;
        let words: Vec<AtomicU64> = copy.into_iter().map(AtomicU64::new).collect();
        let t = Table::new(&words, l)?;
        let registry = self.segment.participants();
        // The process a token names: its slot's occupant, if the slot's
        // generation is still the token's (else 0: it was taken since).
        let pid_of = |token: u32| {
            let (slot, generation) = (token & 63, (token >> 6) & 0x3F_FFFF);
            registry
                .iter()
                .find(|p| p.slot == slot && p.generation & 0x3F_FFFF == generation)
                .map_or(0, |p| p.pid)
        };
        let mut unsettled = 0u32;
        let mut stats = Stats {
            capacity: l.heap_len,
            recoveries: t.get(hdr::RECOVERIES),
            ..Stats::default()
        };
        let mut allocations = Vec::new();
        for i in 0..l.max_allocs {
            let (Ok((st, _)), Ok((_, cap))) = (t.state(i), t.block(i)) else {
                unsettled += 1;
                continue;
            };
            let state = match st {
                FREE => {
                    if cap > 0 {
                        stats.cached_blocks += 1;
                        stats.cached_bytes += cap;
                    }
                    continue;
                }
                CREATING => AllocState::Creating,
                ACTIVE => AllocState::Active,
                DOOMED => AllocState::Doomed,
                _ => {
                    unsettled += 1;
                    continue;
                }
            };
            stats.used_bytes += cap;
            if state != AllocState::Creating {
                stats.live_allocations += 1;
                stats.freed_allocations += u64::from(state == AllocState::Doomed);
            }
            let holders = (0..l.participants)
                .filter_map(|s| {
                    let h = t.holds(i, s);
                    (h != Holds::split(0)).then(|| Holder {
                        slot: s,
                        pid: pid_of(h.token),
                        alive: self.segment.token_alive(h.token),
                        holds: h.holds,
                        read_maps: h.reads,
                    })
                })
                .collect();
            let writer = match t.rget(i, rec::WRITER) as u32 {
                0 => None,
                token => Some((token & 63, self.segment.token_alive(token))),
            };
            allocations.push(AllocInfo {
                record: i,
                state,
                size: t.rget(i, rec::SIZE),
                block: cap,
                names: Vec::new(),
                holders,
                writer,
                created_unix_ms: Some(t.rget(i, rec::CREATED_MS)).filter(|&ms| ms > 0),
            });
        }
        let mut poisoned = Vec::new();
        let mut plan_at = None;
        let mut stats_at = Vec::new();
        for j in 0..l.name_slots {
            match t.name_state(j) {
                Ok((PUBLISHED, _)) => {}
                Ok(_) => continue,
                Err(_) => {
                    unsettled += 1;
                    continue;
                }
            }
            let (Ok(p), Ok(meta)) = (t.published(j), t.meta(j)) else {
                unsettled += 1;
                continue;
            };
            let live = t.state(p.target.idx).ok();
            let Some(a) = allocations.iter_mut().find(|a| {
                a.record == p.target.idx && live.is_some_and(|(_, g)| g == p.target.gen_)
            }) else {
                unsettled += 1;
                continue;
            };
            stats.published_names += 1;
            if let Some(entry) = p.name.strip_prefix(POISON_PREFIX) {
                poisoned.push(entry.to_owned());
            }
            if p.name == PLAN_NAME {
                plan_at = Some(p.target.idx);
            }
            if let Some(op) = p.name.strip_prefix(STATS_PREFIX) {
                stats_at.push((op.to_owned(), p.target.idx));
            }
            a.names.push(NameInfo {
                name: p.name,
                type_text: meta.type_text,
                dims: meta.dims,
            });
        }
        // Heap bytes are read after the control words: keep them only if
        // the record still holds the same allocation afterwards.
        let bytes_of = |idx: u32| -> Option<Vec<u8>> {
            let a = allocations.iter().find(|a| a.record == idx)?;
            let (off, _) = t.block(idx).ok()?;
            let bytes = self.heap_bytes(off, a.size).ok()?;
            let mut now = [0u64];
            let word = l.control_offset + 8 * (l.rec(idx) + rec::STATE) as u64;
            self.segment.load_words(Offset(word), &mut now).ok()?;
            (now[0] == t.rget(idx, rec::STATE)).then_some(bytes)
        };
        let plan = plan_at.and_then(|i| Plan::decode(&bytes_of(i)?).ok());
        let operator_stats = stats_at
            .into_iter()
            .filter_map(|(op, i)| Some((op, postcard::from_bytes(&bytes_of(i)?).ok()?)))
            .collect();
        let info = self.segment.info();
        let alive = registry.iter().filter(|p| p.alive).count() as u64;
        let dead = registry.iter().filter(|p| !p.alive && !p.free).count() as u64;
        Ok(Snapshot {
            context: ContextInfo {
                creator_pid: info.creator_pid,
                creator_alive: std::path::Path::new(&format!("/proc/{}", info.creator_pid))
                    .exists(),
                created_unix_ns: info.created_unix_ns,
                closed: t.is_closed(),
                segment_bytes: self.segment.len(),
                participants: (alive, dead),
                processes: registry
                    .iter()
                    .filter(|p| !p.free)
                    .map(|p| (p.pid, p.alive))
                    .collect(),
                stats,
            },
            allocations,
            poisoned,
            unsettled,
            plan,
            operator_stats,
        })
    }

    /// `len` bytes at heap offset `off`, read word by word (at most 16 MiB:
    /// plans and statistics are small).
    fn heap_bytes(&self, off: u64, len: u64) -> Result<Vec<u8>> {
        if len > 16 << 20 {
            return Err(Error::Unsupported("more than 16 MiB to observe".into()));
        }
        let mut words = vec![0u64; len.div_ceil(8) as usize];
        self.segment
            .load_words(Offset(self.layout.heap_offset + off), &mut words)?;
        let mut bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        bytes.truncate(len as usize);
        Ok(bytes)
    }

    /// How long ago the context was created.
    pub fn age(&self) -> Duration {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Duration::from_nanos(now.saturating_sub(self.segment.info().created_unix_ns))
    }
}
