//! Arbitrary bytes into every params reader (buffer, stream, shared
//! views, index): each must return a dictionary or a typed error, never
//! panic or allocate beyond the input; the readers must agree; and an
//! accepted file must write back to bytes that read to the same dict.

#![no_main]
#![forbid(unsafe_code)]

use libfuzzer_sys::fuzz_target;
use params_io::ReadOptions;

fuzz_target!(|data: &[u8]| {
    for opts in [ReadOptions::default(), ReadOptions::tvm_compatible()] {
        let a = opts.read_bytes(data);
        let b = opts.read(data);
        let c = opts.read_block(ndobject::MemoryBlock::from_owner(data.to_vec()));
        let i = opts.index_bytes(data);
        assert_eq!(a.is_ok(), b.is_ok());
        assert_eq!(a.is_ok(), c.is_ok());
        assert_eq!(a.is_ok(), i.is_ok());
        match (a, b, c, i) {
            (Ok(a), Ok(b), Ok(c), Ok(i)) => {
                assert_eq!(a, b);
                assert_eq!(a, c);
                assert_eq!(i.len(), a.len());
                let bytes = a.to_bytes().expect("a read dict writes");
                let again = opts.read_bytes(&bytes).expect("written bytes read");
                assert_eq!(again, a);
                assert_eq!(again.to_bytes().expect("writes"), bytes);
            }
            (Err(e), ..) => {
                if let Some(f) = e.format_error() {
                    assert!(f.offset <= data.len() as u64, "{f}");
                }
                let _ = e.to_string();
            }
            _ => unreachable!(),
        }
    }
});
