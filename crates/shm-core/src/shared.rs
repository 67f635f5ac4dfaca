//! The state every handle of one mapped segment shares: the descriptor,
//! the mapping, the validated header, and the typed access to the header
//! and the participant registry. The segment handle (`segment.rs`) and
//! views (`mapping.rs`) build on it; it uses the header codec, the one
//! mapping call (`mapping::map`), the participant registry's slot layout
//! (`participant::Slot`, whose handles in turn use this state) and the
//! system calls (`sys.rs`).

use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU32 as StdU32, AtomicU64 as StdU64, Ordering};

use memmap2::MmapRaw;

use crate::error::{Error, HeaderError, Result};
use crate::header::{self, HEADER_LEN, HeaderInfo};
use crate::mapping::map;
use crate::participant::{ATTACH_BYTE, Slot};
use crate::sys;

/// What a holder may do with memory: how a segment is mapped, and (in
/// `fastio`) what an operator may do with an entry (Clara's `IOAccess`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// `PROT_READ | PROT_WRITE`.
    ReadWrite,
    /// `PROT_READ` only: writes through the mapping fault.
    ReadOnly,
}

/// Nanoseconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// State shared by a segment handle and its participants.
pub(crate) struct Shared {
    pub(crate) fd: OwnedFd,
    map: MmapRaw,
    pub(crate) access: Access,
    pub(crate) info: HeaderInfo,
    pub(crate) name: Option<String>,
    pub(crate) valid_len: StdU64,
}

impl Shared {
    pub(crate) fn base(&self) -> *mut u8 {
        self.map.as_mut_ptr()
    }

    pub(crate) fn contains(&self, addr: usize, len: usize) -> bool {
        let base = self.base() as usize;
        addr >= base
            && addr
                .checked_add(len)
                .is_some_and(|end| end <= base + self.map.len())
    }

    pub(crate) fn header_u32(&self, off: usize) -> &StdU32 {
        debug_assert!(off + 4 <= HEADER_LEN && off.is_multiple_of(4));
        // SAFETY: the header lies inside the mapping (validated/created with
        // total_len >= data_offset > HEADER_LEN), `off` is a 4-aligned offset
        // inside it and the page-aligned base keeps that alignment. Any bit
        // pattern is a valid AtomicU32, and all access is atomic.
        unsafe { &*(self.base().add(off) as *const StdU32) }
    }

    pub(crate) fn header_u64(&self, off: usize) -> &StdU64 {
        debug_assert!(off + 8 <= HEADER_LEN && off.is_multiple_of(8));
        // SAFETY: as for `header_u32`, with 8-byte alignment.
        unsafe { &*(self.base().add(off) as *const StdU64) }
    }

    pub(crate) fn slot(&self, slot: u32) -> &Slot {
        assert!(slot < self.info.max_participants, "slot index out of range");
        let off = self.info.registry_offset + u64::from(slot) * header::SLOT_SIZE;
        // SAFETY: the validated header guarantees the registry
        // [registry_offset, registry_offset + max_participants * 32) lies
        // before data_offset <= total_len <= mapping length; `off` is 32-byte
        // aligned (registry_offset = 128). `Slot` is all atomics, valid for
        // any bit pattern.
        unsafe { &*(self.base().add(off as usize) as *const Slot) }
    }

    /// Creates the shared state for a freshly created object `fd`.
    pub(crate) fn init(
        fd: OwnedFd,
        info: HeaderInfo,
        name: Option<String>,
        allocate: bool,
    ) -> Result<Shared> {
        if !sys::ofd_try_lock(fd.as_fd(), ATTACH_BYTE, sys::LockKind::Read)
            .map_err(Error::sys("F_OFD_SETLK"))?
        {
            return Err(Error::Busy);
        }
        if allocate {
            sys::fallocate(fd.as_fd(), info.total_len)
                .map_err(Error::fallocate(fd.as_fd(), info.total_len))?;
        } else {
            sys::ftruncate(fd.as_fd(), info.total_len).map_err(Error::sys("ftruncate"))?;
            // The header and the registry are written now: back them first,
            // so that a full /dev/shm is an error here, not SIGBUS below.
            sys::fallocate_range(fd.as_fd(), 0, info.data_offset)
                .map_err(Error::fallocate(fd.as_fd(), info.data_offset))?;
        }
        let map = map(&fd, info.max_total_len, Access::ReadWrite)?;
        let bytes = info.encode();
        // SAFETY: the mapping is at least max_total_len >= HEADER_LEN bytes,
        // the object was just sized to total_len >= HEADER_LEN, and nobody
        // else can know the object yet (fresh O_EXCL name or memfd).
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), map.as_mut_ptr(), HEADER_LEN) };
        let shared = Shared {
            fd,
            map,
            access: Access::ReadWrite,
            info,
            name,
            valid_len: StdU64::new(info.total_len),
        };
        shared
            .header_u32(header::OFF_READY)
            .store(header::READY, Ordering::Release);
        Ok(shared)
    }

    /// Validates and maps an existing object. With `group`, the caller
    /// accepts an object its owner shares with that group (file group
    /// `group`, mode 0660, the header's shared flag); otherwise only its
    /// own objects, accessible to nobody else.
    pub(crate) fn attach(
        fd: OwnedFd,
        access: Access,
        name: Option<String>,
        group: Option<u32>,
    ) -> Result<Shared> {
        let st = sys::fstat(fd.as_fd()).map_err(Error::sys("fstat"))?;
        if !st.regular {
            return Err(Error::NotRegularFile);
        }
        // Mode 0660 is a group share (its header must say so, below);
        // any other access for group or others is refused.
        let group_mode = st.mode & 0o777 == 0o660;
        let via_group = group.is_some_and(|g| st.gid == g) && group_mode;
        if group.is_some() && !via_group {
            return Err(Error::Permission(
                "object is not shared with that group (group and mode 0660)",
            ));
        }
        if st.uid != sys::euid() && !via_group {
            return Err(Error::Permission("object is owned by another user"));
        }
        if name.is_some() && st.mode & 0o077 != 0 && !group_mode {
            return Err(Error::Permission("object is accessible to group or others"));
        }
        let mut bytes = [0u8; HEADER_LEN];
        if st.size < HEADER_LEN as u64 {
            return Err(HeaderError::TooSmall {
                len: st.size,
                need: HEADER_LEN as u64,
            }
            .into());
        }
        sys::pread_exact(fd.as_fd(), &mut bytes, 0).map_err(Error::sys("pread header"))?;
        let info = header::validate(&bytes, st.size)?;
        if name.is_some() && group_mode && !info.group_shared() {
            return Err(Error::Permission(
                "the header does not say the owner shares it with a group",
            ));
        }
        if info.creator_uid != st.uid {
            return Err(Error::Permission(
                "header creator uid differs from the owner",
            ));
        }
        if !sys::ofd_try_lock(fd.as_fd(), ATTACH_BYTE, sys::LockKind::Read)
            .map_err(Error::sys("F_OFD_SETLK"))?
        {
            return Err(Error::Busy);
        }
        if let Some(n) = &name {
            // A garbage collector may have unlinked the name between our
            // open and our attach lock: make sure the name still is us.
            match sys::stat_name(n) {
                Ok(now) if now.dev == st.dev && now.ino == st.ino => {}
                _ => return Err(Error::NotFound),
            }
        }
        let map = map(&fd, info.max_total_len, access)?;
        let shared = Shared {
            fd,
            map,
            access,
            info,
            name,
            valid_len: StdU64::new(info.data_offset),
        };
        shared.refresh()?;
        Ok(shared)
    }

    /// Recomputes the accessible length from the header and the object size.
    pub(crate) fn refresh(&self) -> Result<u64> {
        let st = sys::fstat(self.fd.as_fd()).map_err(Error::sys("fstat"))?;
        let total = self
            .header_u64(header::OFF_TOTAL_LEN)
            .load(Ordering::Acquire);
        let len = total.min(st.size).min(self.info.max_total_len);
        if len < self.info.data_offset {
            return Err(HeaderError::BadField {
                field: "total_len",
                reason: "object shrank below the data offset",
            }
            .into());
        }
        self.valid_len.store(len, Ordering::Release);
        Ok(len)
    }
}
