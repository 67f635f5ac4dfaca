//! Feeds arbitrary bytes to shm-core as a segment header and as a whole
//! segment image: every input must be rejected or accepted cleanly, never
//! panic or fault.
#![no_main]
#![forbid(unsafe_code)]

use libfuzzer_sys::fuzz_target;
use shm_core::{Access, Segment, header};

fuzz_target!(|data: &[u8]| {
    // Pure validation on the bytes, with the real length and a shorter one.
    let _ = header::validate(data, data.len() as u64);
    let _ = header::validate(data, (data.len() as u64) / 2);
    // The same bytes as a whole object in a memfd, through the real open path.
    if let Ok(seg) = Segment::from_image(data, Access::ReadWrite) {
        let _ = seg.participants();
        let _ = seg.at::<shm_core::ShmMutex>(seg.data_offset());
    }
});
