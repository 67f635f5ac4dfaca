//! Segments: creating, opening, mapping, growing and unlinking shared
//! memory, and bounds-checked access to its data region.
//!
//! A segment is one shared-memory object: a named POSIX object under
//! `/dev/shm` (created exclusively, mode `0600`, with an unguessable name) or
//! an anonymous `memfd`. Every process maps the object's whole *reservation*
//! (`max_total_len`, fixed at creation) once, so growing never moves a
//! mapping; the accessible length is tracked separately and re-checked on
//! [`Segment::refresh`].

use std::fmt;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64 as StdU64, Ordering};

use crate::error::{Error, Result};
use crate::header::{self, FLAG_GROUP_SHARED, FLAG_PERSISTENT, HeaderInfo};
use crate::mapping::{HUGE_PAGE, ReadOnlyView, ShmType};
use crate::offset::{Offset, check_range};
use crate::participant::{Participant, ParticipantInfo, SLOT_FREE};
use crate::shared::{Access, Shared, unix_ns};
use crate::sys;

/// Name prefix used when none is configured.
pub const DEFAULT_PREFIX: &str = "shmcore";
/// Random bytes in a generated name (128 bits, 32 hex characters).
const NAME_RANDOM_BYTES: usize = 16;
const MAX_PREFIX_LEN: usize = 128;

/// Parameters of a new segment.
#[derive(Debug, Clone)]
pub struct SegmentOptions {
    prefix: String,
    data_len: u64,
    max_data_len: u64,
    max_participants: u32,
    persist: bool,
    allocate: bool,
    group: Option<u32>,
}

impl SegmentOptions {
    /// A segment with `data_len` usable bytes after the header and registry.
    pub fn new(data_len: u64) -> Self {
        SegmentOptions {
            prefix: DEFAULT_PREFIX.to_owned(),
            data_len,
            max_data_len: data_len,
            max_participants: 16,
            persist: false,
            allocate: true,
            group: None,
        }
    }

    /// Name prefix (`[A-Za-z0-9_.-]`, at most 128 characters). The name is
    /// `<prefix>-<32 random hex digits>`.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Largest data length the segment may [`grow`](Segment::grow) to.
    pub fn max_data_len(mut self, max: u64) -> Self {
        self.max_data_len = max;
        self
    }

    /// Number of participant slots (1..=64; default 16).
    pub fn max_participants(mut self, n: u32) -> Self {
        self.max_participants = n;
        self
    }

    /// Keep the named object after the creator's handle is dropped (it is
    /// still removed by [`gc`](crate::reap::gc) once nobody has it open).
    pub fn persist(mut self, persist: bool) -> Self {
        self.persist = persist;
        self
    }

    /// Allocate backing memory up front with `fallocate` (default `true`).
    /// With it, exhaustion of `/dev/shm` is an error at creation instead of
    /// a `SIGBUS` at first touch; without it creation is cheaper.
    pub fn allocate(mut self, allocate: bool) -> Self {
        self.allocate = allocate;
        self
    }

    /// Share the (named) segment with the members of group `gid`: the
    /// object gets that group and mode 0660, and the header says so. Other
    /// users of the group attach with [`Segment::open_shared`] naming the
    /// same group; nobody else can open it. Without this (the default) a
    /// segment is its owner's alone (mode 0600).
    pub fn share_with_group(mut self, gid: u32) -> Self {
        self.group = Some(gid);
        self
    }

    fn layout(&self) -> Result<HeaderInfo> {
        let mut flags = if self.persist { FLAG_PERSISTENT } else { 0 };
        if self.group.is_some() {
            flags |= FLAG_GROUP_SHARED;
        }
        HeaderInfo::layout(
            self.data_len,
            self.max_data_len,
            self.max_participants,
            sys::pid(),
            sys::euid(),
            unix_ns(),
            flags,
        )
        .ok_or(Error::InvalidSize(
            "data length, max length or participant count out of range",
        ))
    }
}

/// Checks a name prefix: non-empty, at most 128 of `[A-Za-z0-9_.-]`.
pub fn validate_prefix(prefix: &str) -> Result<()> {
    let ok = !prefix.is_empty()
        && prefix.len() <= MAX_PREFIX_LEN
        && !prefix.starts_with('.')
        && prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidName(prefix.to_owned()))
    }
}

fn validate_name(name: &str) -> Result<&str> {
    let name = name.strip_prefix('/').unwrap_or(name);
    if name.len() > 255 || name.contains('/') {
        return Err(Error::InvalidName(name.to_owned()));
    }
    validate_prefix(name)?;
    Ok(name)
}

/// A handle to a mapped segment. See the [crate docs](crate).
///
/// The creator of a named segment unlinks it on drop unless
/// [`SegmentOptions::persist`] or [`Segment::set_unlink_on_drop`] said
/// otherwise; handles from [`Segment::open`] never unlink.
pub struct Segment {
    shared: Arc<Shared>,
    unlink_on_drop: bool,
}

impl fmt::Debug for Segment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Segment")
            .field("name", &self.shared.name)
            .field("access", &self.shared.access)
            .field("len", &self.len())
            .finish()
    }
}

impl Segment {
    /// Creates a new named segment under `/dev/shm`.
    pub fn create(opts: &SegmentOptions) -> Result<Segment> {
        validate_prefix(&opts.prefix)?;
        let info = opts.layout()?;
        for _ in 0..8 {
            let rand = sys::random_hex(NAME_RANDOM_BYTES).map_err(Error::sys("getrandom"))?;
            let name = format!("{}-{rand}", opts.prefix);
            let fd = match sys::shm_create_excl(&name) {
                Ok(fd) => fd,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::sys("shm_open")(e)),
            };
            let made = match opts.group {
                Some(gid) => sys::share_with_group(fd.as_fd(), gid)
                    .map_err(Error::sys("share with group"))
                    .and_then(|()| Shared::init(fd, info, Some(name.clone()), opts.allocate)),
                None => Shared::init(fd, info, Some(name.clone()), opts.allocate),
            };
            return match made {
                Ok(shared) => Ok(Segment {
                    shared: Arc::new(shared),
                    unlink_on_drop: !opts.persist,
                }),
                Err(e) => {
                    let _ = sys::shm_unlink(&name);
                    Err(e)
                }
            };
        }
        Err(Error::InvalidName(
            "could not find a free random name".to_owned(),
        ))
    }

    /// Creates an anonymous segment backed by a `memfd` (nothing appears in
    /// `/dev/shm`; the memory is freed when the last descriptor and mapping
    /// go away). Share it by passing [`Segment::as_fd`] to another process
    /// and [`Segment::from_fd`] there. Shrinking is sealed.
    pub fn anonymous(opts: &SegmentOptions) -> Result<Segment> {
        if opts.group.is_some() {
            return Err(Error::Permission("group sharing needs a named segment"));
        }
        let info = opts.layout()?;
        let fd = sys::memfd("shm-core").map_err(Error::sys("memfd_create"))?;
        let shared = Shared::init(fd, info, None, opts.allocate)?;
        sys::seal_no_shrink(shared.fd.as_fd()).map_err(Error::sys("F_ADD_SEALS"))?;
        Ok(Segment {
            shared: Arc::new(shared),
            unlink_on_drop: false,
        })
    }

    /// Opens an existing named segment read-write, validating that it is a
    /// regular object owned by the current user, not accessible to others,
    /// and that its header is complete and consistent.
    pub fn open(name: &str) -> Result<Segment> {
        Self::open_with(name, Access::ReadWrite)
    }

    /// Opens an existing named segment with a `PROT_READ` mapping.
    pub fn open_read_only(name: &str) -> Result<Segment> {
        Self::open_with(name, Access::ReadOnly)
    }

    /// Opens an existing named segment that its owner shares with group
    /// `gid` ([`SegmentOptions::share_with_group`]), as a member of that
    /// group. Only a segment whose file has that group, mode 0660 and the
    /// shared flag in its header is accepted.
    pub fn open_shared(name: &str, gid: u32) -> Result<Segment> {
        Self::open_as(name, Access::ReadWrite, Some(gid))
    }

    fn open_with(name: &str, access: Access) -> Result<Segment> {
        Self::open_as(name, access, None)
    }

    fn open_as(name: &str, access: Access, group: Option<u32>) -> Result<Segment> {
        let name = validate_name(name)?;
        let fd = sys::shm_open_existing(name, access == Access::ReadWrite).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Error::NotFound
            } else {
                Error::sys("open shm object")(e)
            }
        })?;
        let shared = Shared::attach(fd, access, Some(name.to_owned()), group)?;
        Ok(Segment {
            shared: Arc::new(shared),
            unlink_on_drop: false,
        })
    }

    /// Adopts a descriptor of a segment (e.g. a `memfd` received from
    /// another process) after the same validation as [`Segment::open`]
    /// (minus the mode check: holding the descriptor is the capability).
    pub fn from_fd(fd: OwnedFd, access: Access) -> Result<Segment> {
        let shared = Shared::attach(fd, access, None, None)?;
        Ok(Segment {
            shared: Arc::new(shared),
            unlink_on_drop: false,
        })
    }

    /// A handle another process can open with [`Segment::open_handle`]:
    /// the name of a named segment, or `fd:<n>` for an anonymous one, whose
    /// descriptor is made inheritable so that processes spawned from now on
    /// receive it.
    pub fn handle_for_children(&self) -> Result<String> {
        match self.name() {
            Some(n) => Ok(n.to_owned()),
            None => {
                sys::set_inheritable(self.shared.fd.as_fd()).map_err(Error::sys("F_SETFD"))?;
                Ok(format!("fd:{}", self.shared.fd.as_raw_fd()))
            }
        }
    }

    /// Opens a segment from a handle: a name (as [`Segment::open`]) or
    /// `fd:<n>`, a descriptor inherited from the parent process (as
    /// [`Segment::from_fd`], on a close-on-exec duplicate of it).
    pub fn open_handle(handle: &str) -> Result<Segment> {
        match handle.strip_prefix("fd:") {
            Some(n) => {
                let raw: i32 = n
                    .parse()
                    .map_err(|_| Error::InvalidName(handle.to_owned()))?;
                let fd = sys::adopt_inherited(raw).map_err(Error::sys("inherited descriptor"))?;
                Segment::from_fd(fd, Access::ReadWrite)
            }
            None => Segment::open(handle),
        }
    }

    /// Loads `image` (the bytes of a whole segment, e.g. a dump, or
    /// arbitrary fuzz input) into a fresh anonymous `memfd` and opens it
    /// with the same validation as [`Segment::open`]. Invalid images are
    /// errors, never undefined behaviour.
    pub fn from_image(image: &[u8], access: Access) -> Result<Segment> {
        let fd = sys::memfd("shm-core-image").map_err(Error::sys("memfd_create"))?;
        sys::pwrite_all(fd.as_fd(), image, 0).map_err(Error::sys("pwrite"))?;
        Self::from_fd(fd, access)
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Registers the calling process as a participant: the identity that
    /// owns locks (see [`Participant`]).
    ///
    /// Fails with [`Error::ReadOnly`] on a read-only segment and
    /// [`Error::RegistryFull`] when every slot is held by a live participant.
    pub fn join(&self) -> Result<Participant> {
        Participant::join(self)
    }

    /// The object's name under `/dev/shm` (without a leading `/`), or `None`
    /// for anonymous segments.
    pub fn name(&self) -> Option<&str> {
        self.shared.name.as_deref()
    }

    /// The descriptor of the underlying object.
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        self.shared.fd.as_fd()
    }

    /// The validated static header fields.
    pub fn info(&self) -> HeaderInfo {
        self.shared.info
    }

    /// How this handle maps the segment.
    pub fn access(&self) -> Access {
        self.shared.access
    }

    /// Currently accessible length (header + registry + data).
    pub fn len(&self) -> u64 {
        self.shared.valid_len.load(Ordering::Acquire)
    }

    /// Whether the data region is empty.
    pub fn is_empty(&self) -> bool {
        self.data_len() == 0
    }

    /// Offset of the first data byte.
    pub fn data_offset(&self) -> Offset {
        Offset(self.shared.info.data_offset)
    }

    /// Currently accessible data bytes.
    pub fn data_len(&self) -> u64 {
        self.len() - self.shared.info.data_offset
    }

    /// Grows the data region to `new_data_len` bytes (never shrinks). Other
    /// processes see the new length after [`Segment::refresh`].
    pub fn grow(&self, new_data_len: u64) -> Result<()> {
        if self.shared.access != Access::ReadWrite {
            return Err(Error::ReadOnly);
        }
        let info = &self.shared.info;
        let total = info
            .data_offset
            .checked_add(new_data_len)
            .filter(|&t| t <= info.max_total_len)
            .ok_or(Error::InvalidSize("beyond the segment's max_data_len"))?;
        let fd = self.shared.fd.as_fd();
        sys::fallocate(fd, total).map_err(Error::fallocate(fd, total))?;
        self.shared
            .header_u64(header::OFF_TOTAL_LEN)
            .fetch_max(total, Ordering::AcqRel);
        self.shared.refresh()?;
        Ok(())
    }

    /// Re-reads the current length (after another process grew it).
    pub fn refresh(&self) -> Result<u64> {
        self.shared.refresh()
    }

    /// Removes the name now (existing mappings stay valid).
    pub fn unlink(&self) -> Result<()> {
        match &self.shared.name {
            Some(n) => sys::shm_unlink(n).map_err(Error::sys("shm_unlink")),
            None => Ok(()),
        }
    }

    /// Whether dropping this handle unlinks the name.
    pub fn set_unlink_on_drop(&mut self, unlink: bool) {
        self.unlink_on_drop = unlink;
    }

    /// A shared reference to a `T` at `offset` in the data region, after
    /// checking bounds and alignment, and that the range is not lent out
    /// ([`Segment::lend_from`]). Requires a read-write mapping.
    pub fn at<T: ShmType>(&self, offset: Offset) -> Result<&T> {
        if self.shared.access != Access::ReadWrite {
            return Err(Error::ReadOnly);
        }
        self.check_not_lent(offset, size_of::<T>() as u64)?;
        let off = check_range(
            offset,
            size_of::<T>() as u64,
            align_of::<T>() as u64,
            self.shared.info.data_offset,
            self.len(),
        )?;
        // SAFETY: `off..off+size_of::<T>()` is inside the accessible part of
        // the mapping (checked above; the mapping never moves and is at
        // least `len()` long), the address is aligned for `T` (page-aligned
        // base + aligned offset), and `ShmType` guarantees any bit pattern
        // is a valid `T` that is only mutated atomically.
        Ok(unsafe { &*(self.shared.base().add(off) as *const T) })
    }

    /// `count` consecutive atomic 64-bit words at `offset` in the data
    /// region, after checking bounds, 8-byte alignment and that the range
    /// is not lent out ([`Segment::lend_from`]). This is how a
    /// layer above lays out its own control tables in a segment without
    /// any `unsafe` of its own. Requires a read-write mapping.
    pub fn words(&self, offset: Offset, count: usize) -> Result<&[StdU64]> {
        if self.shared.access != Access::ReadWrite {
            return Err(Error::ReadOnly);
        }
        let len = (count as u64)
            .checked_mul(8)
            .ok_or(Error::InvalidSize("word count overflows"))?;
        self.check_not_lent(offset, len)?;
        let off = check_range(offset, len, 8, self.shared.info.data_offset, self.len())?;
        // SAFETY: `off..off + 8 * count` is inside the accessible part of the
        // mapping (checked above; the mapping never moves and lives as long
        // as `self.shared`, which `&self` borrows), the address is 8-aligned
        // (page-aligned base, checked offset), and `AtomicU64` is valid for
        // every bit pattern and only mutated atomically, so shared
        // references from many processes are sound.
        Ok(unsafe {
            std::slice::from_raw_parts(self.shared.base().add(off) as *const StdU64, count)
        })
    }

    /// Copies the `out.len()` 64-bit words at `offset` in the data region
    /// into `out`, each with one relaxed atomic load, from a read-only or
    /// read-write mapping: how an observer reads control words it must not
    /// write (racy: words may change between loads; the caller validates).
    /// Through a read-write handle, lent-out ranges are refused as in
    /// [`Segment::words`]; a read-only handle reads them too: its
    /// `PROT_READ` mapping is its own, and nothing ever hands out a mutable
    /// reference into it, so a load through it aliases nothing.
    pub fn load_words(&self, offset: Offset, out: &mut [u64]) -> Result<()> {
        let len = (out.len() as u64)
            .checked_mul(8)
            .ok_or(Error::InvalidSize("word count overflows"))?;
        if self.shared.access == Access::ReadWrite {
            self.check_not_lent(offset, len)?;
        }
        let off = check_range(offset, len, 8, self.shared.info.data_offset, self.len())?;
        for (k, w) in out.iter_mut().enumerate() {
            // SAFETY: the word lies inside the accessible part of the
            // mapping (checked above), 8-aligned; other processes only
            // change it atomically, and a relaxed 64-bit load is allowed
            // on read-only memory on the platforms we build for (it is a
            // plain load there), so this reads, never writes.
            let a = unsafe { &*(self.shared.base().add(off + 8 * k) as *const StdU64) };
            *w = a.load(Ordering::Relaxed);
        }
        std::sync::atomic::fence(Ordering::Acquire);
        Ok(())
    }

    /// Whether the participant `token` names (slot and generation, as
    /// [`Participant::token`](crate::Participant::token) gives it) is
    /// alive. Reads only: usable from a read-only handle.
    pub fn token_alive(&self, token: u32) -> bool {
        self.shared.token_alive(token)
    }

    /// Gives `[offset, offset + len)` of the data region backing store now
    /// (`fallocate`), so that touching it later cannot raise `SIGBUS` when
    /// `/dev/shm` is full: exhaustion is reported here instead.
    ///
    /// A `memfd` segment on a system whose shared-memory huge pages are
    /// `advise` commits a range of whole 2 MiB pages by faulting it in for
    /// writing instead (`MADV_POPULATE_WRITE` on this handle's mapping,
    /// advised `MADV_HUGEPAGE`): `fallocate` would give it small pages. A
    /// fault that finds no memory is reported the same way.
    pub fn commit_range(&self, offset: Offset, len: u64) -> Result<()> {
        self.check_writable_range(offset, len)?;
        let fd = self.shared.fd.as_fd();
        if self.shared.name.is_none()
            && sys::shmem_huge() == sys::ShmemHuge::Advise
            && offset.get().is_multiple_of(HUGE_PAGE)
            && len.is_multiple_of(HUGE_PAGE)
            && len > 0
        {
            return self.populate(offset, len)?.map_err(|e| {
                // A fault that would raise SIGBUS: no memory for the range.
                if e.raw_os_error() == Some(rustix::io::Errno::FAULT.raw_os_error()) {
                    Error::NoSpace {
                        asked: len,
                        free: sys::free_bytes(fd),
                    }
                } else {
                    Error::Sys {
                        op: "madvise(MADV_POPULATE_WRITE)",
                        source: e,
                    }
                }
            });
        }
        sys::fallocate_range(fd, offset.get(), len).map_err(Error::fallocate(fd, len))
    }

    /// Faults `[offset, offset + len)` of this handle's mapping in for
    /// writing now, in one system call (`MADV_POPULATE_WRITE`), instead of
    /// one page fault per page at first touch. Contents do not change.
    /// Kernels before 5.14 refuse it (an error the caller may ignore).
    pub fn populate_range(&self, offset: Offset, len: u64) -> Result<()> {
        self.check_writable_range(offset, len)?;
        self.populate(offset, len)?
            .map_err(Error::sys("madvise(MADV_POPULATE_WRITE)"))
    }

    /// `MADV_POPULATE_WRITE` of a range the caller checked is writable:
    /// the outer error is the range's, the inner the system call's.
    fn populate(&self, offset: Offset, len: u64) -> Result<std::io::Result<()>> {
        let p = self.ptr(offset, len)?;
        let len = usize::try_from(len).map_err(|_| Error::InvalidSize("range exceeds memory"))?;
        // SAFETY: the range lies inside this handle's read-write mapping
        // (the callers checked), which stays mapped while `self` lives;
        // populating changes no content.
        Ok(unsafe { sys::populate_write(p.as_ptr().cast(), len) })
    }

    /// Returns the backing store of `[offset, offset + len)` to the system
    /// (hole punching). Mappings stay valid; the range reads as zeros
    /// afterwards, in every process.
    ///
    /// # Safety
    ///
    /// The bytes change under any reference to them: no reference to any
    /// byte of the range may be alive in this process (a layer above may
    /// lend them out, as `fastio` does), other than `UnsafeCell`-based ones
    /// (atomics).
    pub unsafe fn discard_range(&self, offset: Offset, len: u64) -> Result<()> {
        self.check_writable_range(offset, len)?;
        sys::punch_hole(self.shared.fd.as_fd(), offset.get(), len)
            .map_err(Error::sys("fallocate(PUNCH_HOLE)"))
    }

    /// Declares `[offset, end)` of the data region *lent out*: a layer above
    /// hands those bytes out as Rust references (`&[u8]`, `&mut [u8]`), so
    /// from now on [`Segment::at`] and [`Segment::words`] of **every**
    /// handle of this segment, in every process, refuse ranges that reach
    /// into it with [`Error::LentOut`]. Only raw pointers ([`Segment::ptr`],
    /// [`ReadOnlyView::ptr`]) and the `unsafe` copies reach it. The range
    /// only ever grows (a later call with a higher offset changes nothing),
    /// so no safe call can shrink what another part of the program relies
    /// on.
    pub fn lend_from(&self, offset: Offset) -> Result<()> {
        if self.shared.access != Access::ReadWrite {
            return Err(Error::ReadOnly);
        }
        check_range(offset, 0, 1, self.shared.info.data_offset, self.len())?;
        let word = self.shared.header_u64(header::OFF_LENT_FROM);
        let mut cur = word.load(Ordering::Acquire);
        loop {
            if cur != 0 && cur <= offset.get() {
                return Ok(());
            }
            match word.compare_exchange(cur, offset.get(), Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Ok(()),
                Err(now) => cur = now,
            }
        }
    }

    /// Start of the lent-out range, if any ([`Segment::lend_from`]).
    pub fn lent_from(&self) -> Option<Offset> {
        match self
            .shared
            .header_u64(header::OFF_LENT_FROM)
            .load(Ordering::Acquire)
        {
            0 => None,
            off => Some(Offset(off)),
        }
    }

    fn check_not_lent(&self, offset: Offset, len: u64) -> Result<()> {
        let Some(lent) = self.lent_from() else {
            return Ok(());
        };
        if offset.get().saturating_add(len) > lent.get() {
            return Err(Error::LentOut {
                offset: offset.get(),
                len,
                lent_from: lent.get(),
            });
        }
        Ok(())
    }

    fn check_writable_range(&self, offset: Offset, len: u64) -> Result<()> {
        if self.shared.access != Access::ReadWrite {
            return Err(Error::ReadOnly);
        }
        check_range(offset, len, 1, self.shared.info.data_offset, self.len()).map(drop)
    }

    /// A pointer to `len` bytes at `offset` in the data region, after a
    /// bounds check. Dereferencing it is up to the caller.
    pub fn ptr(&self, offset: Offset, len: u64) -> Result<NonNull<u8>> {
        let off = check_range(offset, len, 1, self.shared.info.data_offset, self.len())?;
        // SAFETY: `off` is within the mapping (checked), so the result is a
        // non-null in-bounds pointer.
        Ok(unsafe { NonNull::new_unchecked(self.shared.base().add(off)) })
    }

    /// Copies `src` into the data region at `offset`, after a bounds check.
    ///
    /// Concurrent unsynchronised writers of the same bytes in *other*
    /// processes produce torn data; use the locks to serialise them.
    ///
    /// # Safety
    ///
    /// A layer above may have lent the range out as Rust references (as
    /// `fastio` does with `&mut [u8]` of a write mapping). The caller must
    /// ensure that, in this process, no reference to any byte of
    /// `[offset, offset + src.len())` is alive other than through
    /// `UnsafeCell`-based types (atomics from [`Segment::at`] /
    /// [`Segment::words`]), and that no other thread of this process
    /// accesses the range during the call.
    pub unsafe fn write_bytes(&self, offset: Offset, src: &[u8]) -> Result<()> {
        if self.shared.access != Access::ReadWrite {
            return Err(Error::ReadOnly);
        }
        let dst = self.ptr(offset, src.len() as u64)?;
        // SAFETY: `dst..dst+src.len()` is inside the writable mapping
        // (bounds checked above, read-write access checked); `src` is a
        // separate Rust allocation so the ranges do not overlap; the caller
        // guarantees no reference in this process is invalidated.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_ptr(), src.len()) };
        Ok(())
    }

    /// Copies bytes at `offset` of the data region into `dst`, after a
    /// bounds check.
    ///
    /// # Safety
    ///
    /// The caller must ensure that, in this process, no `&mut` reference to
    /// any byte of `[offset, offset + dst.len())` is alive (a layer above
    /// may lend one out, as `fastio`'s write mappings do), and that no other
    /// thread of this process writes the range during the call.
    pub unsafe fn read_bytes(&self, offset: Offset, dst: &mut [u8]) -> Result<()> {
        let src = self.ptr(offset, dst.len() as u64)?;
        // SAFETY: the source range is inside the mapping (checked above) and
        // readable; `dst` is a distinct, exclusively borrowed buffer; the
        // caller guarantees no `&mut` in this process covers the source.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    /// A separate `PROT_READ` mapping of this segment, e.g. to hand out
    /// read-only views of inputs; writing through it faults.
    pub fn map_read_only(&self) -> Result<ReadOnlyView> {
        ReadOnlyView::new(self.shared.clone())
    }

    /// Snapshot of the participant registry.
    pub fn participants(&self) -> Vec<ParticipantInfo> {
        self.shared.participants()
    }

    /// Number of registry slots marked free (racy).
    pub fn free_slots(&self) -> u32 {
        (0..self.shared.info.max_participants)
            .filter(|&s| self.shared.slot(s).state.load(Ordering::Relaxed) == SLOT_FREE)
            .count() as u32
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        if self.unlink_on_drop {
            let _ = self.unlink();
        }
    }
}
