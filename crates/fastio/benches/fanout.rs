//! The fan-out bench, our side (`cargo bench -p fastio --bench fanout`):
//! one stream of this crate with 1 … 16 consumer processes, paced frames
//! of 4 KiB and 1 MiB, the producer's cost per frame and every consumer's
//! latency (`fanout_common` has the rules both sides follow; iceoryx2's
//! side is `peers/iceoryx2/benches/fanout.rs`). Prints one `fanout …` line
//! per size and count.
//!
//! Ours: a stream of depth [`DEPTH`] declared for `n` consumers under
//! `block` in an anonymous context the consumers inherit; the producer
//! takes a slot, writes it, publishes (one publish wakes every consumer
//! that sleeps on the stream); each consumer sleeps in `next` until a frame
//! is there and releases it by dropping it.

#[path = "fanout_common/mod.rs"]
mod fanout_common;

use dtype::Primitive;
use fanout_common::{
    COUNTS, Consumers, DEPTH, FRAMES, Figures, SIZES, WAIT, WARMUP, child_spec, consume, pace,
    produce, say_latencies, say_ready,
};
use fastio::{Context, ContextOptions, StreamOptions};

/// The stream's name in each count's context.
const STREAM: &str = "fanout";

/// The consumer: attaches, says ready, reads every frame, gives its
/// latencies.
fn child(index: usize) {
    let ctx = Context::attach(&std::env::var("FANOUT_CONTEXT").unwrap()).unwrap();
    let mut rx = ctx.stream_consumer(STREAM, index).unwrap();
    say_ready();
    let mut lat = Vec::with_capacity(FRAMES as usize);
    for expect in 0..FRAMES {
        let frame = rx.next(Some(WAIT)).unwrap().expect("a frame, not the end");
        let (seq, l) = consume(&frame);
        assert_eq!(seq, expect, "consumer {index}: frames in order");
        lat.push(l);
    }
    say_latencies(&lat);
}

fn main() {
    if let Some((index, _)) = child_spec() {
        child(index);
        return;
    }
    for (size, label) in SIZES {
        for n in COUNTS {
            let ctx = Context::new(
                &ContextOptions::new()
                    .capacity((DEPTH * size) as u64 + (4 << 20))
                    .anonymous(true),
            )
            .unwrap();
            let opts = StreamOptions::new(Primitive::UInt8, &[size])
                .depth(DEPTH)
                .consumers(n);
            let mut tx = ctx.create_stream(STREAM, &opts).unwrap();
            let consumers = Consumers::start(
                n,
                size,
                &[("FANOUT_CONTEXT", ctx.handle_for_children().unwrap())],
            );
            let mut producer = Vec::with_capacity(FRAMES as usize);
            let start = std::time::Instant::now();
            for seq in 0..FRAMES {
                let t0 = std::time::Instant::now();
                let mut slot = tx.next_slot(Some(WAIT)).unwrap();
                produce(slot.bytes_mut(), seq);
                slot.publish().unwrap();
                if seq >= WARMUP {
                    producer.push(t0.elapsed().as_nanos() as u64);
                }
                pace(start, seq);
            }
            tx.end().unwrap();
            let latencies = consumers.finish();
            println!(
                "{}",
                Figures {
                    producer,
                    latencies
                }
                .line("fastio", label)
            );
        }
    }
}
