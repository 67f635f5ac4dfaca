//! `debug_repr`: the array's structure laid out as DyND printed it.

use std::fmt::Write;

use dtype::MetadataKind;

use crate::array::Array;
use crate::block::BlockKind;

impl Array {
    /// A multi-line description of the array: its address and reference
    /// count, its type, flags, per-dimension metadata, data pointer and
    /// the memory block the data lives in.
    ///
    /// ```
    /// let a = ndobject::Array::from_slice(&[1i32, 2, 3], &[3])?;
    /// let b = a.index(1)?;
    /// let text = b.debug_repr();
    /// assert!(text.contains(" type: int32\n"));
    /// assert!(text.contains("  reference count: 2\n"));
    /// # Ok::<(), ndobject::Error>(())
    /// ```
    pub fn debug_repr(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "------ ndobject");
        let _ = writeln!(s, " address: {:016x}", self as *const Array as usize);
        let _ = writeln!(
            s,
            " refcount: {} (references to the memory block)",
            self.block.refcount()
        );
        let _ = writeln!(s, " dtype:");
        let _ = writeln!(s, "  type: {}", self.dtype());
        let _ = writeln!(s, " metadata:");
        let _ = writeln!(s, "  flags: {}", self.flags);
        let md = self.dtype().metadata_layout();
        if !md.is_empty() {
            let _ = writeln!(s, "  dtype-specific metadata:");
        }
        let mut dim = 0;
        for (depth, entry) in md.iter().enumerate() {
            let pad = " ".repeat(3 + depth);
            let _ = writeln!(s, "{pad}{} metadata ({})", entry.kind.name(), entry.path);
            match entry.kind {
                MetadataKind::StridedDim if dim < self.shape.len() => {
                    let _ = writeln!(s, "{pad} stride: {}", self.strides[dim]);
                    let _ = writeln!(s, "{pad} size: {}", self.shape[dim]);
                    dim += 1;
                }
                MetadataKind::VarDim => {
                    let size = self
                        .element
                        .dim_element()
                        .and_then(|t| t.data_size())
                        .unwrap_or(0);
                    let _ = writeln!(s, "{pad} stride: {size}");
                    let _ = writeln!(s, "{pad} offset: 0");
                    if let Some(p) = &self.pool {
                        s.push_str(&p.debug_repr(pad.len() + 1));
                    }
                }
                MetadataKind::String | MetadataKind::Bytes => {
                    if let Some(p) = &self.pool {
                        s.push_str(&p.debug_repr(pad.len() + 1));
                    }
                }
                MetadataKind::StridedDim => {}
            }
        }
        let _ = writeln!(s, " data:");
        let _ = writeln!(s, "   pointer: {:016x}", self.data_address());
        if self.block.kind() == BlockKind::Embedded {
            let _ = writeln!(
                s,
                "   reference: {:016x} (embedded in the block's own allocation)",
                self.block.address()
            );
        } else {
            let _ = writeln!(s, "   reference: {:016x}", self.block.address());
        }
        s.push_str(&self.block.debug_repr(4));
        let _ = writeln!(s, "------");
        s
    }
}
