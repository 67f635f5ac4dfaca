//! The context: one shared-memory segment holding the control tables and
//! the heap of a pipeline job, created by the job's owner and attached to
//! by its operators.

use std::sync::Arc;

use dtype::{Type, TypeKind};
use ndobject::{Array, AssignErrorMode};

use shm_core::header::HeaderInfo;
use shm_core::{Offset, Segment, SegmentOptions};

use crate::allocation::Allocation;
use crate::engine::Shared;
use crate::error::{Error, Result};
use crate::layout::{HEADER_WORDS, Layout, hdr};
use crate::mapping::MappedPublished;
use crate::names::validate_name;
use crate::ops::Begun;
use crate::options::ContextOptions;
use crate::recover::Recovery;
use crate::table::{ACTIVE, CREATING, DOOMED, FREE, Table};

/// Environment variable that carries a context's handle to operators.
pub const CONTEXT_ENV: &str = "FASTIO_CONTEXT";

/// Counts describing a context's use, from one consistent snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Allocations alive (referenced or published), freed ones included.
    pub live_allocations: u64,
    /// Allocations freed but still referenced somewhere.
    pub freed_allocations: u64,
    /// Reclaimed blocks kept for reuse.
    pub cached_blocks: u64,
    /// Bytes in blocks of live allocations and creations in progress.
    pub used_bytes: u64,
    /// Bytes in cached blocks.
    pub cached_bytes: u64,
    /// Bytes available to allocations in all.
    pub capacity: u64,
    /// Names currently published.
    pub published_names: u64,
    /// Recoveries run since the context was created.
    pub recoveries: u64,
}

/// A Fast I/O context: named, published, reference-counted shared-memory
/// allocations of one pipeline job. See the [crate docs](crate).
///
/// The owner creates it with [`Context::new`] and passes
/// [`handle`](Context::handle) to operators (in [`CONTEXT_ENV`]), which
/// [`attach`](Context::attach). Clones share one attachment. When the
/// owner's last clone and last `Allocation` are dropped, the context is
/// closed and its segment unlinked (call [`close`](Context::close) to close
/// it earlier); its memory goes back to the system when the last process
/// unmaps it.
#[derive(Clone)]
pub struct Context {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("handle", &self.handle())
            .field("owner", &self.shared.is_owner())
            .finish()
    }
}

/// `ty` with native byte order and alignment (the layout of a fresh
/// allocation).
fn native(ty: &Type) -> Type {
    match ty.kind() {
        TypeKind::Unaligned(inner) => native(inner),
        TypeKind::NonNative { primitive, .. } => Type::primitive(*primitive),
        _ => ty.clone(),
    }
}

/// Offset of the first data byte of a segment with `participants` slots.
fn data_offset(participants: u32) -> Result<u64> {
    HeaderInfo::layout(0, 0, participants, 0, 0, 0, 0)
        .map(|h| h.data_offset)
        .ok_or_else(|| Error::Unsupported(format!("{participants} participants")))
}

impl Context {
    /// Creates a context (the job owner's side). Contexts with the same
    /// prefix left behind by crashed owners, which no process has open any
    /// more, are removed first.
    pub fn new(opts: &ContextOptions) -> Result<Context> {
        if !opts.anonymous {
            let _ = shm_core::gc(Some(&opts.prefix));
        }
        let data_offset = data_offset(opts.max_participants)?;
        let heap_len = opts.capacity.div_ceil(crate::layout::PAGE) * crate::layout::PAGE;
        let layout = Layout::compute(
            data_offset,
            opts.max_allocations,
            opts.max_names,
            opts.max_participants,
            heap_len,
        )?;
        let mut seg_opts = SegmentOptions::new(layout.data_len(data_offset))
            .prefix(opts.prefix.clone())
            .max_participants(opts.max_participants)
            .persist(opts.persist)
            .allocate(false);
        if let Some(gid) = opts.group {
            seg_opts = seg_opts.share_with_group(gid);
        }
        let segment = if opts.anonymous {
            Segment::anonymous(&seg_opts)?
        } else {
            Segment::create(&seg_opts)?
        };
        if segment.data_offset().get() != data_offset {
            return Err(Error::corrupt(
                "segment layout differs from the computed one",
            ));
        }
        segment.commit_range(Offset(data_offset), layout.heap_offset - data_offset)?;
        // The heap is lent out as `&[u8]` / `&mut [u8]` by mappings: no
        // handle of the segment, here or in another process, may form
        // typed references into it.
        segment.lend_from(Offset(layout.heap_offset))?;
        let words = segment.words(Offset(layout.control_offset), layout.words)?;
        Table::new(words, layout)?.init(opts.cache_limit.unwrap_or(heap_len));
        let participant = segment.join()?;
        let read_view = segment.map_read_only()?;
        Ok(Context {
            shared: Arc::new(Shared::new(
                segment,
                read_view,
                participant,
                layout,
                Offset(data_offset),
                true,
            )),
        })
    }

    /// Attaches to the context whose [`handle`](Context::handle) is given,
    /// after validating its segment and tables; holds of processes that
    /// died are collected on the way.
    pub fn attach(handle: &str) -> Result<Context> {
        Self::from_segment(Segment::open_handle(handle)?)
    }

    /// Attaches to the named context `name` that another user shares with
    /// group `gid` ([`ContextOptions::share_with_group`]), as a member of
    /// that group.
    pub fn attach_shared(name: &str, gid: u32) -> Result<Context> {
        Self::from_segment(Segment::open_shared(name, gid)?)
    }

    /// Attaches to the context named by the [`CONTEXT_ENV`] variable.
    pub fn from_env() -> Result<Context> {
        let handle = std::env::var(CONTEXT_ENV).map_err(|_| Error::NoContext(CONTEXT_ENV))?;
        Self::attach(&handle)
    }

    /// Attaches to a context in an already opened segment (for example a
    /// `memfd` received from another process).
    pub fn from_segment(segment: Segment) -> Result<Context> {
        let data_offset = segment.data_offset().get();
        let words = segment.words(
            Offset(data_offset + crate::layout::CONTROL_AFTER_MUTEX),
            HEADER_WORDS,
        )?;
        let header: [u64; HEADER_WORDS] =
            std::array::from_fn(|i| words[i].load(std::sync::atomic::Ordering::Acquire));
        let layout = Layout::from_header(
            &header,
            data_offset,
            segment.len(),
            segment.info().max_participants,
        )?;
        segment.lend_from(Offset(layout.heap_offset))?;
        let participant = segment.join()?;
        let read_view = segment.map_read_only()?;
        let ctx = Context {
            shared: Arc::new(Shared::new(
                segment,
                read_view,
                participant,
                layout,
                Offset(data_offset),
                false,
            )),
        };
        ctx.shared.with_table(|l| l.t.check_open())?;
        ctx.recover()?;
        Ok(ctx)
    }

    /// The handle operators attach with (the segment's name; empty for an
    /// anonymous context, see [`Context::handle_for_children`]).
    pub fn handle(&self) -> &str {
        self.shared.segment.name().unwrap_or("")
    }

    /// A handle for processes this one spawns from now on: the name of a
    /// named context, or `fd:<n>` for an anonymous one (its `memfd` is made
    /// inheritable). [`Context::attach`] and [`Context::from_env`] accept
    /// both.
    pub fn handle_for_children(&self) -> Result<String> {
        Ok(self.shared.segment.handle_for_children()?)
    }

    /// The descriptor of the context's shared-memory object, e.g. to pass
    /// an anonymous context to a child process, which adopts it with
    /// `shm_core::Segment::from_fd` and [`Context::from_segment`].
    pub fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.shared.segment.as_fd()
    }

    /// Processes attached to the context now: (alive, dead but not yet
    /// reaped).
    pub fn participants(&self) -> (u64, u64) {
        let all = self.shared.segment.participants();
        let alive = all.iter().filter(|p| p.alive).count() as u64;
        let dead = all.iter().filter(|p| !p.alive && !p.free).count() as u64;
        (alive, dead)
    }

    /// Whether this handle created the context.
    pub fn is_owner(&self) -> bool {
        self.shared.is_owner()
    }

    /// Segment offset and length of the control tables. Not public API:
    /// for this crate's tests and, with the `fuzzing` feature, the fuzz
    /// target, which overwrites them.
    #[cfg(any(test, feature = "fuzzing"))]
    #[doc(hidden)]
    pub fn control_region(&self) -> (Offset, u64) {
        let l = &self.shared.layout;
        (Offset(l.control_offset), 8 * l.words as u64)
    }

    /// The underlying segment. Not public API (see
    /// [`control_region`](Context::control_region)): safe code holding it
    /// could reach bytes that mappings lend out.
    #[cfg(any(test, feature = "fuzzing"))]
    #[doc(hidden)]
    pub fn segment(&self) -> &Segment {
        &self.shared.segment
    }

    /// Allocates `size` bytes of shared memory, visible to this process
    /// only until [`Allocation::publish`]ed. Its type is `uint8` and its
    /// dimensions `[size]` until set otherwise.
    ///
    /// A reclaimed block of the same size class is reused when there is
    /// one (no system call, memory already faulted in); otherwise a new
    /// block is committed with `fallocate`, outside the context lock.
    pub fn create(&self, size: u64) -> Result<Allocation> {
        let begun = self.shared.with_table_retry(|l| {
            let begun = l.t.begin_create(size, l.me, &mut l.discards)?;
            let warm_off = match begun {
                Begun::Warm(id) => Some(l.t.extent(id)?.1),
                Begun::Cold { .. } => None,
            };
            Ok((begun, warm_off))
        })?;
        let (id, off) = match begun {
            (Begun::Warm(id), Some(off)) => (id, off),
            (Begun::Warm(_), None) => return Err(Error::corrupt("a reused block has no extent")),
            (Begun::Cold { id, off, cap }, _) => {
                let at = Offset(self.shared.layout.heap_offset + off);
                let mut committed = self
                    .shared
                    .segment
                    .commit_range(at, cap)
                    .map_err(Error::from);
                if committed.as_ref().is_err_and(Error::is_no_space) {
                    // /dev/shm is full: give the cached blocks back to the
                    // system (they are only kept for speed), then try once
                    // more; the error says what was given back.
                    let released = self
                        .shared
                        .with_table(|l| l.t.evict_all(&mut l.discards))
                        .unwrap_or(0);
                    committed = self
                        .shared
                        .segment
                        .commit_range(at, cap)
                        .map_err(|e| match e {
                            source @ shm_core::Error::NoSpace { .. } => {
                                Error::NoSpace { source, released }
                            }
                            e => Error::from(e),
                        });
                }
                if committed.is_ok() {
                    // The creator writes the block next: fault it in with
                    // one call rather than a fault per page (best effort).
                    let _ = self.shared.segment.populate_range(at, cap);
                }
                self.shared.with_table(|l| {
                    let d = l.t.finish_create(id, size, l.me, committed.is_ok())?;
                    l.discards.extend(d);
                    Ok(())
                })?;
                committed?;
                (id, off)
            }
        };
        Ok(Allocation::new_private(self.shared.clone(), id, size, off))
    }

    /// Allocates an array of `element` with `shape`: [`create`] of the
    /// exact byte size, then [`set_type_and_dimensions`].
    ///
    /// [`create`]: Context::create
    /// [`set_type_and_dimensions`]: Allocation::set_type_and_dimensions
    pub fn create_array(&self, element: Type, shape: &[usize]) -> Result<Allocation> {
        let (_, _, bytes) = crate::allocation::required_size(&element, shape)?;
        if bytes == u64::MAX {
            return Err(Error::Unsupported(format!(
                "{shape:?} elements of {element} overflow"
            )));
        }
        let mut a = self.create(bytes)?;
        a.set_type_and_dimensions(element, shape)?;
        Ok(a)
    }

    /// Puts any `ndobject` array into the context under `name`, with
    /// exactly one copy: a new allocation of its shape (in native byte
    /// order, aligned), filled by `ndobject`'s typed kernels straight from
    /// the array's memory (any strides, alignment or byte order, e.g. a
    /// memory-mapped params-file tensor), then published. The returned
    /// reference may be released; the publication keeps the memory.
    pub fn publish_array(&self, name: &str, array: &Array) -> Result<Allocation> {
        let a = self.create_array(native(array.element_type()), array.shape())?;
        a.map_as_ndobject_mut()?
            .assign(array, AssignErrorMode::None)?;
        a.publish(name)?;
        Ok(a)
    }

    /// A new local reference to the allocation published as `name`, with
    /// a copy of the published type and dimensions.
    pub fn get(&self, name: &str) -> Result<Allocation> {
        crate::names::refuse_reserved(name)?;
        self.get_any(name)
    }

    /// [`get`](Context::get) without the check for names that only the
    /// library's own handles may reach (streams).
    pub(crate) fn get_any(&self, name: &str) -> Result<Allocation> {
        let (id, size, (element, dims)) = self.shared.with_table(|l| {
            l.note_name(name);
            let types = &mut *l.types;
            l.t.get_named(name, l.me, |slot, target, text, dims| {
                Ok((types.parse(slot, target, text)?, dims))
            })
        })?;
        Allocation::from_published(self.shared.clone(), id, size, element, dims, false)
    }

    /// `get(name)` and `map()` in one: a read mapping of the allocation
    /// published as `name` that owns its reference, taken in one round trip
    /// of the context lock and given back in one when dropped (the
    /// steady-state path of an operator reading an input).
    pub fn map(&self, name: &str) -> Result<MappedPublished> {
        crate::names::refuse_reserved(name)?;
        let (id, size, (element, dims), off) = self.shared.with_table_retry(|l| {
            l.note_name(name);
            let types = &mut *l.types;
            let (id, size, meta) = l.t.get_named(name, l.me, |slot, target, text, dims| {
                Ok((types.parse(slot, target, text)?, dims))
            })?;
            match l.t.extent(id).and_then(|(_, off, _)| {
                l.t.map_read(id, l.me)?;
                Ok(off)
            }) {
                Ok(off) => Ok((id, size, meta, off)),
                Err(e) => {
                    // Give the hold back (the record stays published).
                    let d = l.t.release(id, l.me)?;
                    l.discards.extend(d);
                    Err(e)
                }
            }
        })?;
        let alloc = Allocation::from_published(self.shared.clone(), id, size, element, dims, true)?;
        MappedPublished::new(alloc, off, size)
    }

    /// Whether `name` is published now.
    pub fn is_published(&self, name: &str) -> Result<bool> {
        validate_name(name)?;
        self.shared
            .with_table(|l| Ok(l.t.find_name(name)?.is_some()))
    }

    /// The names currently published.
    pub fn names(&self) -> Result<Vec<String>> {
        self.shared
            .with_table(|l| Ok(l.t.all_names()?.into_iter().map(|p| p.name).collect()))
    }

    /// Usage counts.
    pub fn stats(&self) -> Result<Stats> {
        self.shared.with_table(|l| {
            let t = &l.t;
            let mut s = Stats {
                capacity: t.l.heap_len,
                published_names: t.get(hdr::PUBLISHED),
                cached_bytes: t.get(hdr::CACHED_BYTES),
                recoveries: t.get(hdr::RECOVERIES),
                ..Stats::default()
            };
            for i in 0..t.l.max_allocs {
                let (st, _) = t.state(i)?;
                let (_, cap) = t.block(i)?;
                match st {
                    FREE if cap > 0 => s.cached_blocks += 1,
                    FREE => {}
                    CREATING => s.used_bytes += cap,
                    ACTIVE | DOOMED => {
                        s.live_allocations += 1;
                        s.freed_allocations += u64::from(st == DOOMED);
                        s.used_bytes += cap;
                    }
                    _ => {}
                }
            }
            Ok(s)
        })
    }

    /// Drops every hold and mapping of processes that died, reclaims what
    /// nothing keeps any more and rebuilds the derived tables.
    pub fn recover(&self) -> Result<Recovery> {
        self.shared.with_table(|l| l.recover())
    }

    /// Checks every invariant of the control tables; a violation is
    /// [`Error::Corrupt`].
    pub fn check(&self) -> Result<()> {
        self.shared
            .with_table(|l| l.t.check().map_err(Error::Corrupt))
    }

    /// Closes the context: further creates, gets and publishes fail with
    /// [`Error::ContextClosed`] in every process. Existing allocations and
    /// mappings stay valid. Dropping the owner's handle closes it too.
    pub fn close(&self) -> Result<()> {
        self.shared.with_table(|l| {
            l.t.close();
            Ok(())
        })
    }
}
