//! Local references to shared memory: [`Allocation`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dtype::{Primitive, Type};

use crate::engine::Shared;
use crate::error::{Error, Result};
use crate::layout::{MAX_DIMS, MAX_TYPE_LEN};
use crate::names::Meta;
use crate::table::AllocId;

/// A local reference to a block of context memory, with this process's
/// own copy of its metadata (element type and dimensions).
///
/// The memory lives while any reference in any process lives, or while it
/// is published and not freed. Dropping an `Allocation` is
/// [`release`](Allocation::release) (errors ignored).
pub struct Allocation {
    pub(crate) shared: Arc<Shared>,
    pub(crate) id: AllocId,
    size: u64,
    element: Type,
    dims: Vec<usize>,
    held: bool,
    /// The block's heap offset while the allocation is *private*: made by
    /// this handle's `create` and never published, cloned or mapped other
    /// than by `map_mut` since. No other handle to it exists in any
    /// process, so `map_mut` needs no registration in the shared tables
    /// (module `mapping`). `NOT_PRIVATE` otherwise. Only ever goes from
    /// private to not (atomic so that `Allocation` stays `Sync`; `&self`
    /// methods clear it).
    pub(crate) private_off: AtomicU64,
}

/// `private_off` of an allocation that is not private.
const NOT_PRIVATE: u64 = u64::MAX;

impl std::fmt::Debug for Allocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Allocation")
            .field("record", &self.id.idx)
            .field("size", &self.size)
            .field("element_type", &self.element.to_string())
            .field("dimensions", &self.dims)
            .finish()
    }
}

/// Bytes that `element` x `dims` need: `(element size, element count,
/// bytes)`, by `ndobject::shape`'s one overflow rule. Fails for element
/// types that cannot live in shared memory.
pub(crate) fn required_size(element: &Type, dims: &[usize]) -> Result<(u64, u64, u64)> {
    if element.has_blockref() {
        return Err(Error::Unsupported(format!(
            "{element} refers to other memory and cannot be shared"
        )));
    }
    let elem = element
        .data_size()
        .ok_or_else(|| Error::Unsupported(format!("{element} has no fixed size")))?;
    if dims.len() > MAX_DIMS {
        return Err(Error::Unsupported(format!(
            "{} dimensions (at most {MAX_DIMS})",
            dims.len()
        )));
    }
    let numel = ndobject::shape::element_count(dims).map_or(u64::MAX, |n| n as u64);
    let bytes = ndobject::shape::byte_size(dims, elem).map_or(u64::MAX, |n| n as u64);
    Ok((elem as u64, numel, bytes))
}

/// Checks the printed length of a type that will be published.
fn check_type_text(element: &Type) -> Result<()> {
    if element.to_string().len() > MAX_TYPE_LEN {
        return Err(Error::Unsupported(format!(
            "type text longer than {MAX_TYPE_LEN} bytes"
        )));
    }
    Ok(())
}

impl Allocation {
    pub(crate) fn new(shared: Arc<Shared>, id: AllocId, size: u64) -> Allocation {
        Allocation {
            shared,
            id,
            size,
            element: Type::primitive(Primitive::UInt8),
            dims: vec![usize::try_from(size).unwrap_or(usize::MAX)],
            held: true,
            private_off: AtomicU64::new(NOT_PRIVATE),
        }
    }

    /// A new allocation that only this handle can reach (`create`), its
    /// block at heap offset `off`.
    pub(crate) fn new_private(shared: Arc<Shared>, id: AllocId, size: u64, off: u64) -> Allocation {
        let a = Allocation::new(shared, id, size);
        a.private_off.store(off, Ordering::Relaxed);
        a
    }

    /// The block's heap offset if the allocation is private (see
    /// `private_off`).
    pub(crate) fn private_off(&self) -> Option<u64> {
        Some(self.private_off.load(Ordering::Relaxed)).filter(|&o| o != NOT_PRIVATE)
    }

    /// Another handle or a publication may reach it from now on.
    pub(crate) fn end_private(&self) {
        self.private_off.store(NOT_PRIVATE, Ordering::Relaxed);
    }

    /// The reference `get` returned (its hold is taken, and with `mapped`
    /// a read mapping too), with the published metadata checked against
    /// the size; on error both are given back.
    pub(crate) fn from_published(
        shared: Arc<Shared>,
        id: AllocId,
        size: u64,
        element: Type,
        dims: Vec<usize>,
        mapped: bool,
    ) -> Result<Allocation> {
        let mut a = Allocation {
            shared,
            id,
            size,
            element,
            dims,
            held: true,
            private_off: AtomicU64::new(NOT_PRIVATE),
        };
        let check = required_size(&a.element, &a.dims).and_then(|(elem, numel, required)| {
            if required != size || (numel != 0 && required / numel != elem) {
                Err(Error::corrupt(format!(
                    "published metadata needs {required} bytes, the allocation has {size}"
                )))
            } else {
                Ok(())
            }
        });
        if let Err(e) = check {
            if mapped {
                let _ = a.unmap_and_drop(false);
            }
            // Otherwise dropping `a` releases the hold.
            return Err(e);
        }
        Ok(a)
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Element type (default `uint8`).
    pub fn element_type(&self) -> &Type {
        &self.element
    }

    /// Dimensions (default `[size]`).
    pub fn dimensions(&self) -> &[usize] {
        &self.dims
    }

    /// Describes the memory as an array of `element` with `dims`; fails
    /// unless `element size x product(dims) == size`, or if the type cannot
    /// live in shared memory (variable-size, or referring to other memory).
    /// Only this local reference changes; publications keep what they
    /// copied.
    pub fn set_type_and_dimensions(&mut self, element: Type, dims: &[usize]) -> Result<()> {
        check_type_text(&element)?;
        self.set_checked(element, dims.to_vec())
    }

    fn set_checked(&mut self, element: Type, dims: Vec<usize>) -> Result<()> {
        let (element_size, numel, required) = required_size(&element, &dims)?;
        if required != self.size || (numel != 0 && required / numel != element_size) {
            return Err(Error::SizeMismatch {
                element_size,
                numel,
                required,
                size: self.size,
            });
        }
        self.element = element;
        self.dims = dims;
        Ok(())
    }

    /// Publishes this allocation under `name`: the context keeps a
    /// reference to the memory and an immutable copy of the current
    /// metadata. The same allocation may be published under several names.
    /// Processes waiting for the name ([`Context::wait_for`]) wake up.
    ///
    /// [`Context::wait_for`]: crate::Context::wait_for
    pub fn publish(&self, name: &str) -> Result<()> {
        crate::names::refuse_reserved(name)?;
        // Processes waiting for a name (`Context::wait_for`) wake: the
        // engine bumps the publication event for every name published.
        self.publish_in_table(name, false)
    }

    /// [`publish`](Allocation::publish)es under `name` and drops this
    /// reference in one round trip of the context lock: a producer's
    /// hand-off of memory it is done writing.
    ///
    /// ```
    /// # let ctx = fastio::Context::new(&fastio::ContextOptions::new().anonymous(true)).unwrap();
    /// let mut a = ctx.create(4).unwrap();
    /// a.map_mut().unwrap().copy_from_slice(b"data");
    /// a.publish_and_release("frame").unwrap();
    /// assert_eq!(&ctx.map("frame").unwrap()[..], b"data");
    /// ```
    pub fn publish_and_release(mut self, name: &str) -> Result<()> {
        crate::names::refuse_reserved(name)?;
        self.publish_in_table(name, true)?;
        self.held = false;
        Ok(())
    }

    /// Publishes under `name` with the current metadata, and drops this
    /// reference in the same round trip of the lock when `release`.
    pub(crate) fn publish_in_table(&self, name: &str, release: bool) -> Result<()> {
        self.end_private();
        let meta = Meta {
            type_text: self.element.to_string(),
            dims: self.dims.iter().map(|&d| d as u64).collect(),
        };
        self.shared.with_table_retry(|l| {
            l.note_name(name);
            l.t.publish(self.id, name, &meta)?;
            if release {
                let d = l.t.release(self.id, l.me)?;
                l.discards.extend(d);
            }
            Ok(())
        })
    }

    /// Another local reference to the same memory, with a copy of this
    /// one's metadata.
    pub fn try_clone(&self) -> Result<Allocation> {
        self.end_private();
        self.shared.with_table(|l| l.t.add_hold(self.id, l.me))?;
        let mut a = Allocation::new(self.shared.clone(), self.id, self.size);
        a.element = self.element.clone();
        a.dims = self.dims.clone();
        Ok(a)
    }

    /// Drops this reference. The memory persists while published or
    /// referenced elsewhere.
    pub fn release(mut self) -> Result<()> {
        self.drop_hold(false, false)
    }

    /// Drops this reference and marks the memory for deletion: its names
    /// disappear, and no process can `get` or map it any more. Existing
    /// references and mappings stay valid; the memory is reclaimed when
    /// the last of them goes.
    pub fn free(mut self) -> Result<()> {
        self.drop_hold(false, true)
    }

    /// Drops a read mapping and this reference (freeing the memory when
    /// `free`) in one round trip of the context lock (for
    /// `MappedPublished`). Nothing to do when the reference is gone.
    pub(crate) fn unmap_and_drop(&mut self, free: bool) -> Result<()> {
        self.drop_hold(true, free)
    }

    /// Drops this reference (freeing the memory when `free`, and a read
    /// mapping first when `unmap_read`) in one round trip of the lock.
    /// Nothing to do when the reference is already gone.
    fn drop_hold(&mut self, unmap_read: bool, free: bool) -> Result<()> {
        if !self.held {
            return Ok(());
        }
        self.held = false;
        self.shared.with_table(|l| {
            if unmap_read {
                l.t.unmap_read(self.id, l.me)?;
            }
            let d = if free {
                l.t.free(self.id, l.me)?
            } else {
                l.t.release(self.id, l.me)?
            };
            l.discards.extend(d);
            Ok(())
        })
        // Its names went away: the engine bumped the publication event,
        // waking processes in `Context::wait_unpublished`.
    }
}

impl Drop for Allocation {
    fn drop(&mut self) {
        let _ = self.drop_hold(false, false);
    }
}
