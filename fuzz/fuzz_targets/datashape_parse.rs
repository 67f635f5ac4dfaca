//! Arbitrary text into the datashape parser: it must return a type or an
//! error, never panic, and a parsed type must print to text that parses
//! back to the same type.

#![no_main]
#![forbid(unsafe_code)]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match dtype::parse(text) {
        Ok(ty) => {
            let printed = ty.to_string();
            let back = dtype::parse(&printed)
                .unwrap_or_else(|e| panic!("canonical text {printed:?} does not parse: {e}"));
            assert_eq!(back, ty, "round trip of {printed:?}");
            let _ = ty.metadata_layout();
            let _ = ty.field_layout();
        }
        Err(e) => {
            assert!(e.offset() <= text.len());
            let _ = e.to_string();
        }
    }
});
