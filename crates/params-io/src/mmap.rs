//! Zero-copy opening: the file is memory-mapped, only the headers are
//! parsed (O(number of tensors), independent of the data size) and every
//! tensor is a view into the map, which stays alive as long as any view.
//!
//! This module holds the crate's only `unsafe` block.

use std::fs::File;
use std::path::Path;

use memmap2::Mmap;
use ndobject::MemoryBlock;

use crate::error::Error;
use crate::read::ReadOptions;
use crate::tensor::ParamDict;

/// Maps a whole file read-only, as a read-only `ndobject` block that owns
/// the map. Empty files are not mapped (a zero-length mapping is an error
/// on Linux); they give an empty block.
pub(crate) fn map_file(file: &File) -> std::io::Result<MemoryBlock> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(MemoryBlock::from_owner(Vec::<u8>::new()));
    }
    // SAFETY: `Mmap::map` is unsafe because the mapped bytes can change
    // under us if another process modifies or truncates the file while it
    // is mapped (Rust's `&[u8]` promises immutability; truncation raises
    // SIGBUS). The mapping is read-only and private to this process; this
    // crate never writes through it and every access is bounds-checked
    // against the length observed at mapping time. Parameter files are
    // written by replacing them atomically (new inode, see `write.rs`),
    // which leaves existing maps intact. Modifying a file in place while
    // it is mapped is documented as unsupported on `ReadOptions::map_path`.
    let map = unsafe { Mmap::map(file)? };
    Ok(MemoryBlock::from_owner(map))
}

impl ReadOptions {
    /// Opens a file by memory-mapping it: parses only the headers and gives
    /// each tensor as a zero-copy view into the map (data pages are read
    /// by the OS when first touched). Views keep the map alive after the
    /// dictionary is dropped. A view's data may be unaligned for its type
    /// ([`Tensor::is_aligned`](crate::Tensor::is_aligned)); copy it with
    /// [`Tensor::to_owned_copy`](crate::Tensor::to_owned_copy) if needed.
    ///
    /// The file must not be modified in place or truncated while mapped
    /// (replace it atomically instead, as [`ParamDict::write_path`] does).
    pub fn map_path(&self, path: impl AsRef<Path>) -> Result<ParamDict, Error> {
        let path = path.as_ref();
        let run = || -> Result<ParamDict, Error> {
            let file = File::open(path).map_err(|e| Error::os("open", e))?;
            let block = map_file(&file).map_err(|e| Error::os("mmap", e))?;
            self.read_block(block)
        };
        run().map_err(|e| e.at_path(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "Miri cannot mmap files")]
    fn maps_files_and_views_outlive_the_dict() {
        let dir = std::env::temp_dir().join(format!("params-io-mmap-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.params");
        let mut d = ParamDict::new();
        let t = crate::Tensor::new(dtype::Primitive::UInt8, &[3], vec![1, 2, 3]).unwrap();
        d.insert("a", t.clone());
        d.write_path(&path).unwrap();
        let m = ReadOptions::new().map_path(&path).unwrap();
        let view = m.get("a").unwrap().clone();
        drop(m);
        assert!(view.is_view());
        assert_eq!(view, t);
        let empty = dir.join("empty");
        std::fs::write(&empty, b"").unwrap();
        let block = map_file(&File::open(&empty).unwrap()).unwrap();
        assert!(block.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
