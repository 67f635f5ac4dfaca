//! What `fastio replay` and `fastio record --info` read (`fastio-record`'s
//! reader): arbitrary bytes as a recording. Every input is refused with an
//! error or read into frames consistent with their channel (element type,
//! largest shape, byte count); never a panic, never an allocation the
//! input's size does not bound.
#![no_main]
#![forbid(unsafe_code)]

use fastio_record::{ChannelKind, Recording};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let rec = Recording::from_bytes(data.to_vec());
    let Ok(info) = rec.info() else {
        return;
    };
    assert!(info.messages <= data.len() as u64);
    for c in info.channels.iter().filter(|c| c.kind == ChannelKind::Stream) {
        let (Some(element), Some(max)) = (c.element, c.max_shape.clone()) else {
            panic!("a stream channel without its element type or shape");
        };
        let Ok(frames) = rec.frames(&c.topic) else {
            continue;
        };
        for f in frames.flatten() {
            assert_eq!(f.header.shape.len(), max.len());
            assert!(f.header.shape.iter().zip(&max).all(|(&d, &m)| d <= m as u64));
            let n: u64 = f.header.shape.iter().product();
            assert_eq!(f.bytes.len() as u64, n * element.size() as u64);
        }
    }
    let _ = rec.entries();
});
