//! Arbitrary bytes as a stream ring's control words (`shm_core::ring`),
//! then an arbitrary script of producer and consumer steps on it: opening
//! must validate every header value, and no step may panic or index out of
//! bounds, whatever another process wrote into the words.
#![no_main]
#![forbid(unsafe_code)]

use std::sync::atomic::AtomicU64;

use libfuzzer_sys::fuzz_target;
use shm_core::ring::{Poll, Ring, Space};

fuzz_target!(|data: &[u8]| {
    let Some((&n_words, rest)) = data.split_first() else {
        return;
    };
    // Up to 255 words of control, read from the input (zero beyond it).
    let n = n_words as usize;
    let take = rest.len().min(n * 8);
    let (words_bytes, script) = rest.split_at(take);
    let words: Vec<AtomicU64> = (0..n)
        .map(|i| {
            let mut b = [0u8; 8];
            for (k, x) in b.iter_mut().enumerate() {
                *x = words_bytes.get(i * 8 + k).copied().unwrap_or(0);
            }
            AtomicU64::new(u64::from_le_bytes(b))
        })
        .collect();
    let Ok(ring) = Ring::open(&words) else {
        return;
    };
    let consumers = ring.consumers();
    // What a producer taking over would know (invariant 8), rebuilt from
    // the words now and again by the script.
    let mut slots = ring.producer_slots(ring.head());
    // Each step: an opcode and two 64-bit arguments (frame numbers and
    // consumer indexes; any value).
    for op in script.chunks(17) {
        let arg = |k: usize| {
            let mut b = [0u8; 8];
            for (j, x) in b.iter_mut().enumerate() {
                *x = op.get(1 + k * 8 + j).copied().unwrap_or(0);
            }
            u64::from_le_bytes(b)
        };
        let (a, b) = (arg(0), arg(1));
        match op[0] % 6 {
            0 => {
                if let Ok(Space::Ready(slot)) = ring.try_begin(a, &mut slots) {
                    assert!(slot < ring.slots());
                    ring.publish(a, slot, &mut slots);
                }
            }
            1 if consumers > 0 => {
                if let Ok(Poll::Frame(_, slot)) = ring.poll(a as usize % consumers, b) {
                    assert!(slot < ring.slots());
                }
            }
            2 if consumers > 0 => ring.release(a as usize % consumers, b),
            3 => slots = ring.producer_slots(b),
            4 => {
                if b % 2 == 0 {
                    ring.observer_attached();
                } else {
                    ring.observer_left();
                }
                if let Some(slot) = ring.observe(a) {
                    assert!(slot < ring.slots());
                    let _ = ring.still(a, slot);
                }
            }
            _ => {
                let _ = ring.head();
            }
        }
    }
});
