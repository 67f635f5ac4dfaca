//! Access flags.

use std::fmt;

/// What an array allows: reading, writing, and whether its data is
/// immutable (nobody, through any view, will ever write it).
///
/// Views inherit their parent's flags and can only drop rights
/// ([`Array::read_only`](crate::Array::read_only)); a copy gets fresh,
/// writable flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AccessFlags(u8);

impl AccessFlags {
    /// The data may be read.
    pub const READ: AccessFlags = AccessFlags(1);
    /// The data may be written through this array.
    pub const WRITE: AccessFlags = AccessFlags(2);
    /// No one will ever write the data.
    pub const IMMUTABLE: AccessFlags = AccessFlags(4);
    /// Read and write: the flags of a new array.
    pub const READ_WRITE: AccessFlags = AccessFlags(3);
    /// Read-only, immutable.
    pub const READ_IMMUTABLE: AccessFlags = AccessFlags(5);

    /// The raw bits (1 read, 2 write, 4 immutable), as DyND prints them.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Whether all of `other`'s bits are set.
    pub const fn contains(self, other: AccessFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether writes are allowed.
    pub const fn is_writable(self) -> bool {
        self.contains(AccessFlags::WRITE)
    }

    /// Whether the data is immutable.
    pub const fn is_immutable(self) -> bool {
        self.contains(AccessFlags::IMMUTABLE)
    }

    /// The bits set in both.
    pub(crate) const fn intersection(self, other: AccessFlags) -> AccessFlags {
        AccessFlags(self.0 & other.0)
    }

    /// The bits set in either.
    pub(crate) const fn union(self, other: AccessFlags) -> AccessFlags {
        AccessFlags(self.0 | other.0)
    }
}

impl fmt::Display for AccessFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (", self.0)?;
        for (flag, name) in [
            (AccessFlags::READ, "read_access"),
            (AccessFlags::WRITE, "write_access"),
            (AccessFlags::IMMUTABLE, "immutable"),
        ] {
            if self.contains(flag) {
                write!(f, "{name} ")?;
            }
        }
        f.write_str(")")
    }
}
