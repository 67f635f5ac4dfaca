//! Type-specific metadata of an array's element type: one entry per `var`
//! dimension, per `strided` dimension nested below a `var` dimension, and
//! per variable-length string or bytes value, in the order of
//! [`dtype::Type::metadata_layout`]. As in DyND, every `var`, string and
//! bytes entry holds its own reference to the memory block with its data.

use dtype::{Type, TypeKind};

use crate::array::Array;
use crate::block::MemoryBlock;
use crate::error::{Error, Result};
use crate::index::resolve_slice;

/// One metadata entry of the element type.
#[derive(Clone, Debug)]
pub(crate) enum Meta {
    /// A `strided` dimension below a `var` dimension: element count and
    /// byte stride.
    Strided { size: usize, stride: isize },
    /// A `var` dimension.
    Var(VarMeta),
    /// A variable-length string or bytes value: the pool holding the data.
    Blockref(MemoryBlock),
}

impl Meta {
    /// The memory block the entry refers to, if any.
    pub(crate) fn block(&self) -> Option<&MemoryBlock> {
        match self {
            Meta::Strided { .. } => None,
            Meta::Var(v) => Some(&v.block),
            Meta::Blockref(b) => Some(b),
        }
    }
}

/// A slice applied to every row of a `var` dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RowSlice {
    pub(crate) start: Option<isize>,
    pub(crate) stop: Option<isize>,
    pub(crate) step: isize,
}

impl std::fmt::Display for RowSlice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let part = |v: Option<isize>| v.map(|v| v.to_string()).unwrap_or_default();
        write!(f, "{}:{}:{}", part(self.start), part(self.stop), self.step)
    }
}

/// DyND's `var_dim` metadata: the block holding the rows, the byte stride
/// between a row's elements and a byte offset added to each element's
/// address (from indexing into dimensions below), plus the slices taken
/// of every row. Each row's length lives in the data, so a slice of a
/// `var` dimension that is not leading is kept here and resolved against
/// each row when the row is reached (xnd's "slice stack").
#[derive(Clone, Debug)]
pub(crate) struct VarMeta {
    pub(crate) block: MemoryBlock,
    pub(crate) stride: isize,
    pub(crate) offset: isize,
    pub(crate) slices: Vec<RowSlice>,
}

impl VarMeta {
    /// A fresh entry over `block` for elements of `stride` bytes.
    pub(crate) fn new(block: MemoryBlock, stride: usize) -> Result<VarMeta> {
        let stride = isize::try_from(stride)
            .map_err(|_| Error::Overflow(format!("a var stride of {stride} bytes")))?;
        Ok(VarMeta {
            block,
            stride,
            offset: 0,
            slices: Vec::new(),
        })
    }

    /// Resolves the slices against a row of `n` elements: the stored
    /// position of the first selected element, the number selected and
    /// the step between them (in stored positions).
    pub(crate) fn resolve(&self, n: usize) -> Result<(usize, usize, isize)> {
        let (mut first, mut count, mut step) = (0usize, n, 1isize);
        for s in &self.slices {
            let (f, c, st) = resolve_slice(s.start, s.stop, s.step, count)?;
            // Position `f` of the current selection, in stored positions.
            first = first.wrapping_add_signed(f as isize * step);
            step *= st;
            count = c;
        }
        Ok((if count == 0 { 0 } else { first }, count, step))
    }
}

/// Fresh metadata for values of `ty`: a new, finalized (empty) pool for
/// every `var` dimension and a new, growable pool for every string or
/// bytes value.
pub(crate) fn default_meta(ty: &Type, out: &mut Vec<Meta>) -> Result<()> {
    match ty.kind() {
        TypeKind::String(_) | TypeKind::Bytes => out.push(Meta::Blockref(MemoryBlock::pool())),
        TypeKind::Unaligned(inner)
        | TypeKind::Option(inner)
        | TypeKind::FixedDim { element: inner, .. } => default_meta(inner, out)?,
        TypeKind::VarDim(element) => {
            let size = element.data_size().ok_or_else(|| {
                Error::TypeMismatch(format!("a var dimension of {element} needs metadata"))
            })?;
            let pool = MemoryBlock::pool();
            pool.pool_finalize()?;
            out.push(Meta::Var(VarMeta::new(pool, size)?));
            default_meta(element, out)?;
        }
        TypeKind::StridedDim(_) => {
            return Err(Error::TypeMismatch(format!(
                "{ty}: a strided dimension inside an element type needs metadata; use a fixed dimension"
            )));
        }
        TypeKind::Record(fields) => {
            for f in fields {
                default_meta(&f.ty, out)?;
            }
        }
        TypeKind::Tuple(items) => {
            for t in items {
                default_meta(t, out)?;
            }
        }
        _ => {}
    }
    Ok(())
}

impl Array {
    /// The memory blocks the element type's metadata refers to: one per
    /// `var` dimension and per variable-length string or bytes value, in
    /// the order of [`dtype::Type::metadata_layout`].
    ///
    /// ```
    /// use ndobject::{Array, BlockKind};
    /// let a = Array::zeros("{name: string, rows: var * int32}".parse().unwrap(), &[2])?;
    /// let blocks = a.metadata_blocks();
    /// assert_eq!(blocks.len(), 2);
    /// assert!(blocks.iter().all(|b| b.kind() == BlockKind::Pool));
    /// assert!(!blocks[0].ptr_eq(blocks[1]));
    /// # Ok::<(), ndobject::Error>(())
    /// ```
    pub fn metadata_blocks(&self) -> Vec<&MemoryBlock> {
        self.meta.iter().filter_map(Meta::block).collect()
    }

    /// Reads the `(u64, u64)` pair of a string or `var` element at byte
    /// `off` of the block.
    pub(crate) fn read_pair(&self, off: usize) -> Result<(u64, u64)> {
        let mut pair = [0u8; 16];
        self.with_read(|base| {
            // SAFETY: callers pass the offset of a 16-byte string or `var`
            // element of this array, inside the block (checked when the
            // view was built).
            unsafe { std::ptr::copy_nonoverlapping(base.as_ptr().add(off), pair.as_mut_ptr(), 16) }
        })?;
        let (lo, hi) = pair.split_at(8);
        let word = |b: &[u8]| u64::from_ne_bytes(b.try_into().unwrap_or_default());
        Ok((word(lo), word(hi)))
    }
}
