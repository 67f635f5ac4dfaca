//! What crosses between hosts (`fastio-net`'s `wire`): arbitrary bytes as
//! an entry piece's header, a stream message's header, a credit and a
//! status line. Every input is refused with an error or read into values
//! that encode back to the same bytes; never a panic, never an allocation
//! the input's size does not bound.
#![no_main]
#![forbid(unsafe_code)]

use fastio_net::wire::{
    ChunkHeader, MAX_STATUS_BYTES, Status, StreamMsg, decode_credit, encode_credit, entry_bytes,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = ChunkHeader::decode(data) {
        // Accepted headers are consistent and round-trip exactly.
        assert!(h.offset <= h.total);
        assert_eq!(entry_bytes(h.element, &h.shape), Some(h.total));
        assert_eq!(h.encode().as_deref(), Some(data));
    }
    if let Ok(m) = StreamMsg::decode(data) {
        // A frame's bytes are bounded; every message round-trips exactly.
        if let StreamMsg::Frame { element, shape, .. } = &m {
            assert!(entry_bytes(*element, shape).is_some());
        }
        assert_eq!(m.encode(), data);
    }
    if let Ok(msgs) = StreamMsg::decode_all(data) {
        // Several headers: each as one, all round-trip exactly.
        assert!(!msgs.is_empty());
        assert_eq!(StreamMsg::encode_all(&msgs), data);
    }
    if let Ok(n) = decode_credit(data) {
        assert_eq!(encode_credit(n), data);
    }
    if let Ok(s) = Status::decode(data) {
        let line = s.encode();
        assert!(line.len() <= MAX_STATUS_BYTES + 16);
        assert_eq!(Status::decode(line.as_bytes()), Ok(s));
    }
});
