//! The fan-out bench, iceoryx2's side: the peer of
//! `crates/fastio/benches/fanout.rs`, following the same rules
//! (`fanout_common`): one publish–subscribe service of `[u8]` slices with
//! `n` subscriber processes, loaned zero-copy samples, and an event service
//! beside it whose notification wakes every listener; each subscriber's
//! buffer holds `DEPTH - 2` samples (with the publisher's loan and the
//! subscriber's borrow, `DEPTH` in flight, as ours). The producer's cost:
//! loan, write, send, notify. Each consumer sleeps on its listener until
//! notified, then takes every sample there.

#[path = "../../../crates/fastio/benches/fanout_common/mod.rs"]
mod fanout_common;
#[path = "run_files/mod.rs"]
mod run_files;

use std::mem::MaybeUninit;

use fanout_common::{
    COUNTS, Consumers, DEPTH, FRAMES, Figures, SIZES, WAIT, WARMUP, child_spec, consume, pace,
    produce, say_latencies, say_ready,
};
use iceoryx2::prelude::*;
use run_files::{PREFIX_ENV, node, prefix, remove_leftovers};

fn service_name(size: usize, n: usize, what: &str) -> ServiceName {
    format!("fastio-peer-fanout/{}/{size}/{n}/{what}", prefix("fanout"))
        .as_str()
        .try_into()
        .unwrap()
}

/// The consumer: opens the services, says ready, takes every frame, gives
/// its latencies.
fn child(index: usize, size: usize) {
    let node = node(&prefix("fanout"));
    let n: usize = std::env::var("FANOUT_N").unwrap().parse().unwrap();
    let data = node
        .service_builder(&service_name(size, n, "data"))
        .publish_subscribe::<[u8]>()
        .open()
        .unwrap();
    let event = node
        .service_builder(&service_name(size, n, "event"))
        .event()
        .open()
        .unwrap();
    let sub = data.subscriber_builder().create().unwrap();
    let listener = event.listener_builder().create().unwrap();
    say_ready();
    let mut lat = Vec::with_capacity(FRAMES as usize);
    let mut expect = 0;
    while expect < FRAMES {
        match sub.receive().unwrap() {
            Some(sample) => {
                let (seq, l) = consume(sample.payload());
                assert_eq!(seq, expect, "consumer {index}: frames in order");
                lat.push(l);
                expect += 1;
            }
            None => {
                listener.timed_wait(|_| {}, WAIT).unwrap();
            }
        }
    }
    say_latencies(&lat);
}

fn main() {
    set_log_level(LogLevel::Error);
    if let Some((index, size)) = child_spec() {
        child(index, size);
        return;
    }
    let node = node(&prefix("fanout"));
    for (size, label) in SIZES {
        for n in COUNTS {
            let data = node
                .service_builder(&service_name(size, n, "data"))
                .publish_subscribe::<[u8]>()
                .max_publishers(1)
                .max_subscribers(n)
                .history_size(0)
                .subscriber_max_buffer_size(DEPTH - 2)
                .subscriber_max_borrowed_samples(1)
                .enable_safe_overflow(false)
                .create()
                .unwrap();
            let event = node
                .service_builder(&service_name(size, n, "event"))
                .event()
                .max_listeners(n)
                .max_notifiers(1)
                .create()
                .unwrap();
            let publisher = data
                .publisher_builder()
                .initial_max_slice_len(size)
                .max_loaned_samples(1)
                .backpressure_strategy(BackpressureStrategy::RetryUntilDelivered)
                .create()
                .unwrap();
            let notifier = event.notifier_builder().create().unwrap();
            let consumers = Consumers::start(
                n,
                size,
                &[(PREFIX_ENV, prefix("fanout")), ("FANOUT_N", n.to_string())],
            );
            let mut producer = Vec::with_capacity(FRAMES as usize);
            let start = std::time::Instant::now();
            for seq in 0..FRAMES {
                let t0 = std::time::Instant::now();
                let mut sample = publisher.loan_slice_uninit(size).unwrap();
                // SAFETY: `u8` has no invalid values and the slice lies in a
                // shared memory mapping, whose bytes the kernel zero-fills
                // on first touch (later they hold an earlier payload): every
                // byte is initialised memory; the producer writes one byte
                // per page and the header, as ours does.
                let bytes = unsafe {
                    &mut *(std::ptr::from_mut::<[MaybeUninit<u8>]>(sample.payload_mut())
                        as *mut [u8])
                };
                produce(bytes, seq);
                // SAFETY: as above, every byte of the payload is initialised.
                let sample = unsafe { sample.assume_init() };
                sample.send().unwrap();
                notifier.notify().unwrap();
                if seq >= WARMUP {
                    producer.push(t0.elapsed().as_nanos() as u64);
                }
                pace(start, seq);
            }
            let latencies = consumers.finish();
            println!(
                "{}",
                Figures {
                    producer,
                    latencies
                }
                .line("iceoryx2", label)
            );
        }
    }
    drop(node);
    remove_leftovers(&prefix("fanout"));
}
