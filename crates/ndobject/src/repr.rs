//! `debug_repr`: the array's structure laid out as DyND printed it.

use std::fmt::Write;

use dtype::MetadataKind;

use crate::array::Array;
use crate::block::BlockKind;
use crate::meta::Meta;

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
        let nd = self.shape.len();
        for (depth, entry) in md.iter().enumerate() {
            let pad = " ".repeat(3 + depth);
            let _ = writeln!(s, "{pad}{} metadata ({})", entry.kind.name(), entry.path);
            let (stride, size) = match (depth.checked_sub(nd), entry.kind) {
                (None, _) => (self.strides[depth], self.shape[depth]),
                (Some(k), MetadataKind::StridedDim) => match self.meta.get(k) {
                    Some(Meta::Strided { size, stride }) => (*stride, *size),
                    _ => continue,
                },
                (Some(k), _) => {
                    match self.meta.get(k) {
                        Some(Meta::Var(v)) => {
                            let _ = writeln!(s, "{pad} stride: {}", v.stride);
                            let _ = writeln!(s, "{pad} offset: {}", v.offset);
                            if !v.slices.is_empty() {
                                let slices: Vec<String> =
                                    v.slices.iter().map(ToString::to_string).collect();
                                let _ = writeln!(s, "{pad} row slices: [{}]", slices.join(", "));
                            }
                            s.push_str(&v.block.debug_repr(pad.len() + 1));
                        }
                        Some(Meta::Blockref(b)) => s.push_str(&b.debug_repr(pad.len() + 1)),
                        _ => {}
                    }
                    continue;
                }
            };
            let _ = writeln!(s, "{pad} stride: {stride}");
            let _ = writeln!(s, "{pad} size: {size}");
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
