//! Listing and garbage-collecting this library's segments in `/dev/shm`.
//!
//! A segment "belongs to this library" when it is a regular object owned by
//! the current user whose first bytes are the shm-core magic. It is *alive*
//! while any handle has it open: every [`Segment`](crate::Segment) handle
//! holds a shared OFD lock on byte 0 of the object, which the kernel drops
//! when the handle's process dies. [`gc`] takes an exclusive lock on that
//! byte (so it only succeeds when no live handle exists, and blocks new
//! openers meanwhile), re-checks that the name still denotes the same
//! object, and unlinks it.

use std::os::fd::AsFd;

use crate::error::{Error, Result};
use crate::header::{self, HEADER_LEN};
use crate::participant::{ATTACH_BYTE, slot_byte};
use crate::segment::validate_prefix;
use crate::sys;

/// What [`list_segments`] reports about one segment.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SegmentInfo {
    /// Name under `/dev/shm`, printable: as [`escape_name`] writes it (the
    /// same text for every ordinary name).
    pub name: String,
    /// The name exactly as the file system has it.
    pub file_name: std::ffi::OsString,
    /// Object size in bytes.
    pub size: u64,
    /// Whether the header validated completely.
    pub valid: bool,
    /// Creator process id from the header (informational; `None` if the
    /// header is invalid).
    pub creator_pid: Option<u32>,
    /// Owner user id of the object.
    pub uid: u32,
    /// Creation time from the header, nanoseconds since the Unix epoch.
    pub created_unix_ns: Option<u64>,
    /// Whether the creator asked for persistence.
    pub persistent: bool,
    /// Whether some live process has the segment open.
    pub alive: bool,
    /// Live registered participants.
    pub live_participants: u32,
}

fn matches_prefix(name: &[u8], prefix: Option<&str>) -> bool {
    match prefix {
        None => true,
        Some(p) => name
            .strip_prefix(p.as_bytes())
            .is_some_and(|rest| rest.starts_with(b"-")),
    }
}

/// A file name as one printable line: valid UTF-8 stays as it is, except
/// a backslash (written `\\`), control characters (`\n`, `\t`, `\r`,
/// `\xNN`) and bytes that are not UTF-8 (`\xNN`). Different names give
/// different texts, so no name is hidden or mistaken for another.
pub fn escape_name(name: &std::ffi::OsStr) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for chunk in name.as_bytes().utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\r' => out.push_str("\\r"),
                c if c.is_control() => {
                    let mut b = [0u8; 4];
                    for byte in c.encode_utf8(&mut b).bytes() {
                        out.push_str(&format!("\\x{byte:02x}"));
                    }
                }
                c => out.push(c),
            }
        }
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    out
}

/// Bytes free in `/dev/shm` for this user, when it can be asked (the room
/// new segments and allocations have before [`Error::NoSpace`]).
///
/// [`Error::NoSpace`]: crate::Error::NoSpace
pub fn shm_free_bytes() -> Option<u64> {
    crate::sys::free_bytes_at(crate::sys::SHM_DIR)
}

/// Lists this library's segments in `/dev/shm` owned by the current user,
/// optionally only those named `<prefix>-…`.
pub fn list_segments(prefix: Option<&str>) -> Result<Vec<SegmentInfo>> {
    if let Some(p) = prefix {
        validate_prefix(p)?;
    }
    let dir = std::fs::read_dir(sys::SHM_DIR).map_err(Error::sys("read /dev/shm"))?;
    let mut out = Vec::new();
    for entry in dir.flatten() {
        // Every name, UTF-8 or not: a segment is never skipped for its name.
        let name = entry.file_name();
        if !matches_prefix(
            std::os::unix::ffi::OsStrExt::as_bytes(name.as_os_str()),
            prefix,
        ) {
            continue;
        }
        if let Some(info) = inspect(&name) {
            out.push(info);
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Looks at one object; `None` if it is not ours (or vanished).
fn inspect(name: &std::ffi::OsStr) -> Option<SegmentInfo> {
    let st = sys::stat_name(name).ok()?;
    if !st.regular || st.uid != sys::euid() || st.size < header::MAGIC.len() as u64 {
        return None;
    }
    let fd = sys::shm_open_existing(name, false).ok()?;
    let st = sys::fstat(fd.as_fd()).ok()?;
    let n = usize::try_from(st.size.min(HEADER_LEN as u64)).ok()?;
    let mut bytes = [0u8; HEADER_LEN];
    sys::pread_exact(fd.as_fd(), &mut bytes[..n], 0).ok()?;
    if !header::has_magic(&bytes[..n]) {
        return None;
    }
    let parsed = header::validate(&bytes[..n], st.size).ok();
    let alive = sys::ofd_is_locked(fd.as_fd(), ATTACH_BYTE).unwrap_or(true);
    let live_participants = parsed.map_or(0, |h| {
        (0..h.max_participants)
            .filter(|&s| sys::ofd_is_locked(fd.as_fd(), slot_byte(s)).unwrap_or(true))
            .count() as u32
    });
    Some(SegmentInfo {
        name: escape_name(name),
        file_name: name.to_owned(),
        size: st.size,
        valid: parsed.is_some(),
        creator_pid: parsed.map(|h| h.creator_pid),
        uid: st.uid,
        created_unix_ns: parsed.map(|h| h.created_unix_ns),
        persistent: parsed.is_some_and(|h| h.persistent()),
        alive,
        live_participants,
    })
}

/// Removes this library's segments (optionally only `<prefix>-…`) that no
/// live process has open, including half-initialised and corrupted ones.
/// Returns what was removed.
pub fn gc(prefix: Option<&str>) -> Result<Vec<SegmentInfo>> {
    let mut removed = Vec::new();
    for info in list_segments(prefix)? {
        if info.alive {
            continue;
        }
        if remove_if_dead(&info.file_name)? {
            removed.push(info);
        }
    }
    Ok(removed)
}

/// Removes the one segment named `name` (as [`escape_name`] prints it, or
/// exactly) if it is this library's, ours, and no live process has it
/// open: `Ok(None)` when there is no such segment, an error naming the
/// reason when it is alive.
pub fn gc_one(name: &str) -> Result<Option<SegmentInfo>> {
    let found = list_segments(None)?
        .into_iter()
        .find(|s| s.name == name || s.file_name == name);
    let Some(info) = found else {
        return Ok(None);
    };
    if info.alive || !remove_if_dead(&info.file_name)? {
        return Err(Error::InUse(info.name));
    }
    Ok(Some(info))
}

/// Unlinks `name` if it is ours and no live handle has it open.
fn remove_if_dead(name: &std::ffi::OsStr) -> Result<bool> {
    let Ok(fd) = sys::shm_open_existing(name, true) else {
        return Ok(false);
    };
    // Exclusive attach lock: fails while any live handle exists, and makes
    // concurrent openers fail with `Busy` until we are done.
    if !sys::ofd_try_lock(fd.as_fd(), ATTACH_BYTE, sys::LockKind::Write)
        .map_err(Error::sys("F_OFD_SETLK"))?
    {
        return Ok(false);
    }
    let st = sys::fstat(fd.as_fd()).map_err(Error::sys("fstat"))?;
    let mut magic = [0u8; 8];
    if st.uid != sys::euid()
        || sys::pread_exact(fd.as_fd(), &mut magic, 0).is_err()
        || !header::has_magic(&magic)
    {
        return Ok(false);
    }
    match sys::stat_name(name) {
        Ok(now) if now.dev == st.dev && now.ino == st.ino => {}
        _ => return Ok(false),
    }
    match sys::shm_unlink(name) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::sys("shm_unlink")(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_matching() {
        assert!(matches_prefix(b"abc-123", Some("abc")));
        assert!(!matches_prefix(b"abcd-123", Some("abc")));
        assert!(!matches_prefix(b"abc", Some("abc")));
        assert!(matches_prefix(b"anything", None));
    }

    #[test]
    fn odd_names_are_escaped_one_to_one() {
        use std::os::unix::ffi::OsStrExt;
        let esc = |b: &[u8]| escape_name(std::ffi::OsStr::from_bytes(b));
        assert_eq!(esc(b"fastio-ab12"), "fastio-ab12");
        assert_eq!(esc("grün".as_bytes()), "grün");
        assert_eq!(esc(b"a\nb\tc\rd"), "a\\nb\\tc\\rd");
        assert_eq!(esc(b"x\xffy\x01"), "x\\xffy\\x01");
        // A backslash is doubled, so `\n` written as text differs from a
        // newline.
        assert_eq!(esc(b"a\\nb"), "a\\\\nb");
        assert_ne!(esc(b"a\\nb"), esc(b"a\nb"));
    }
}
