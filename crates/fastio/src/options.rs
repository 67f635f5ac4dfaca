//! [`ContextOptions`]: the capacities and naming of a new context.

#[cfg(doc)]
use crate::Context;

/// Name prefix of context segments under `/dev/shm`.
pub const DEFAULT_PREFIX: &str = "fastio";

/// Capacities of a new context.
#[derive(Debug, Clone)]
pub struct ContextOptions {
    pub(crate) capacity: u64,
    pub(crate) max_allocations: u32,
    pub(crate) max_names: u32,
    pub(crate) max_participants: u32,
    pub(crate) cache_limit: Option<u64>,
    pub(crate) prefix: String,
    pub(crate) anonymous: bool,
    pub(crate) persist: bool,
    pub(crate) group: Option<u32>,
}

impl Default for ContextOptions {
    fn default() -> Self {
        ContextOptions {
            capacity: 1 << 30,
            max_allocations: 1024,
            max_names: 1024,
            max_participants: 64,
            cache_limit: None,
            prefix: DEFAULT_PREFIX.to_owned(),
            anonymous: false,
            persist: false,
            group: None,
        }
    }
}

impl ContextOptions {
    /// Defaults: 1 GiB of allocation memory, 1024 allocations, 1024
    /// published names, 64 processes.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes available to allocations (rounded up to whole pages). Memory
    /// is only committed as blocks are first used. Each allocation takes a
    /// block of its size class: whole pages, and at most 1/8 more than
    /// requested.
    pub fn capacity(mut self, bytes: u64) -> Self {
        self.capacity = bytes;
        self
    }

    /// Most allocations alive at once (including freed ones still mapped).
    pub fn max_allocations(mut self, n: u32) -> Self {
        self.max_allocations = n;
        self
    }

    /// Most names published at once.
    pub fn max_names(mut self, n: u32) -> Self {
        self.max_names = n;
        self
    }

    /// Most processes attached at once (1..=64).
    pub fn max_participants(mut self, n: u32) -> Self {
        self.max_participants = n;
        self
    }

    /// Most bytes of reclaimed blocks kept committed for reuse (default:
    /// the whole capacity). Reused blocks are already faulted in, which is
    /// what makes a warm handoff cheap; blocks beyond the limit go back to
    /// the system at once.
    pub fn cache_limit(mut self, bytes: u64) -> Self {
        self.cache_limit = Some(bytes);
        self
    }

    /// Name prefix of the segment under `/dev/shm` (default `fastio`).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Back the context with an anonymous `memfd` instead of a named
    /// segment: nothing appears in `/dev/shm`, and other processes reach it
    /// only through its descriptor (`Segment::from_fd` on a copy of it,
    /// then [`Context::from_segment`]); its
    /// [`handle`](Context::handle) is empty.
    pub fn anonymous(mut self, anonymous: bool) -> Self {
        self.anonymous = anonymous;
        self
    }

    /// Keep a named context's segment in `/dev/shm` after the owner's
    /// handle is dropped (closed, but there to inspect, e.g. with
    /// `fastio shm ls`); `fastio shm gc` or the next `Context::new` with
    /// the same prefix removes it once nobody has it open.
    pub fn persist(mut self, persist: bool) -> Self {
        self.persist = persist;
        self
    }

    /// Share a named context with the members of group `gid` (its file in
    /// `/dev/shm` gets that group and mode 0660). They attach with
    /// [`Context::attach_shared`](crate::Context::attach_shared) naming
    /// the same group; nobody else can. Without it (the default) a context
    /// is its owner's alone.
    pub fn share_with_group(mut self, gid: u32) -> Self {
        self.group = Some(gid);
        self
    }
}
