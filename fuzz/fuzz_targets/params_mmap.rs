//! Arbitrary bytes as a file, opened through the memory-map path and the
//! seeking index: they must agree with the in-memory reader, never panic,
//! and every view must lie inside the mapped file.

#![no_main]
#![forbid(unsafe_code)]

use std::io::Write;

use libfuzzer_sys::fuzz_target;
use params_io::ReadOptions;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("params_mmap_fuzz_{}.params", std::process::id()));
    {
        let mut f = std::fs::File::create(&path).expect("temp file");
        f.write_all(data).expect("write temp file");
    }
    let opts = ReadOptions::tvm_compatible();
    let mapped = opts.map_path(&path);
    let index = opts.index_path(&path);
    let memory = opts.read_bytes(data);
    assert_eq!(mapped.is_ok(), memory.is_ok());
    assert_eq!(index.is_ok(), memory.is_ok());
    if let (Ok(m), Ok(r), Ok(i)) = (mapped, memory, index) {
        assert_eq!(m, r);
        for (p, e) in m.iter().zip(&i.entries) {
            let t = p.tensor();
            assert!(t.is_view());
            assert!(e.offset + e.nbytes <= data.len() as u64);
            assert_eq!(&data[e.offset as usize..(e.offset + e.nbytes) as usize], t.data());
            // ndobject may refuse shapes whose strides overflow (e.g. 0 x 2^62 x 2^62).
            let _ = t.to_array();
        }
    }
    let _ = std::fs::remove_file(&path);
});
