//! iceoryx2, the peer of `crates/fastio/benches/handoff.rs`: the same
//! payloads, rules and function names (`handoff_common`), measured with
//! iceoryx2's Rust crate: publish–subscribe of `[u8]` slices with loaned
//! zero-copy samples, one service per payload size (its publisher sized for
//! that payload).
//!
//! * `handoff/<size>` (latency):
//!   - `iceoryx2_<touch>`: the producer loans a sample, writes one byte per
//!     page, sends it and notifies an event service; the consumer waits on
//!     its listener, receives, reads, drops the sample and answers with a
//!     `u64` sample and a notification, which the producer waits for the
//!     same way. This is the like-for-like peer of `fastio_warm_<touch>`
//!     (both sleep until woken);
//!   - `iceoryx2_poll_page`: the same with both sides spinning on `receive`
//!     instead of sleeping (the style of iceoryx2's own benchmarks): it
//!     shows what busy-waiting buys on this machine.
//! * `stream/<size>` (throughput): `iceoryx2_page`, samples sent back to
//!   back, the subscriber's buffer holding `STREAM_DEPTH - 2` of them (with
//!   the publisher's loan and the subscriber's borrow, `STREAM_DEPTH` in
//!   flight, as ours), the
//!   publisher retrying until delivered when it is full, the subscriber
//!   sleeping on its listener; `iceoryx2_poll_page`, the same with the
//!   subscriber spinning on `receive` (and no notifications). Each has an
//!   `_all` twin (every byte written and read), and the subscriber counts
//!   how often it waited for a sample (`Regime`).

#[path = "../../../crates/fastio/benches/handoff_common/mod.rs"]
mod handoff_common;
#[path = "run_files/mod.rs"]
mod run_files;

use std::hint::black_box;
use std::mem::MaybeUninit;
use std::time::{Duration, Instant};

use criterion::{BenchmarkGroup, BenchmarkId, Criterion, Throughput, measurement::WallTime};
use handoff_common::{
    Batch, CHILD_ENV, Consumer, Regime, SIZES, STREAM_DEPTH, STREAM_SIZES, Touch, configure,
    connect,
};
use iceoryx2::port::listener::Listener;
use iceoryx2::port::notifier::Notifier;
use iceoryx2::port::publisher::Publisher;
use iceoryx2::port::subscriber::Subscriber;
use iceoryx2::prelude::*;
use run_files::{PREFIX_ENV, node, prefix, remove_leftovers};

const WAIT: Duration = Duration::from_secs(60);

type Data = [u8];
type S = ipc::Service;

fn service_name(owner: u32, size: usize, what: &str) -> ServiceName {
    format!("fastio-peer-bench/{owner}/{size}/{what}")
        .as_str()
        .try_into()
        .unwrap()
}

/// The four services of one payload size: data and acknowledgement, each
/// a publish–subscribe service with an event service beside it.
struct Services {
    data: iceoryx2::service::port_factory::publish_subscribe::PortFactory<S, Data, ()>,
    data_event: iceoryx2::service::port_factory::event::PortFactory<S>,
    ack: iceoryx2::service::port_factory::publish_subscribe::PortFactory<S, u64, ()>,
    ack_event: iceoryx2::service::port_factory::event::PortFactory<S>,
}

impl Services {
    fn create(node: &Node<S>, owner: u32, size: usize) -> Services {
        Services {
            data: node
                .service_builder(&service_name(owner, size, "data"))
                .publish_subscribe::<Data>()
                .max_publishers(1)
                .max_subscribers(1)
                .history_size(0)
                // With the one sample the publisher loans and the one the
                // subscriber borrows: `STREAM_DEPTH` in flight, as ours.
                .subscriber_max_buffer_size(STREAM_DEPTH - 2)
                .subscriber_max_borrowed_samples(1)
                .enable_safe_overflow(false)
                .create()
                .unwrap(),
            data_event: node
                .service_builder(&service_name(owner, size, "data-event"))
                .event()
                .create()
                .unwrap(),
            ack: node
                .service_builder(&service_name(owner, size, "ack"))
                .publish_subscribe::<u64>()
                .max_publishers(1)
                .max_subscribers(1)
                .history_size(0)
                .subscriber_max_buffer_size(STREAM_DEPTH)
                .enable_safe_overflow(true)
                .create()
                .unwrap(),
            ack_event: node
                .service_builder(&service_name(owner, size, "ack-event"))
                .event()
                .create()
                .unwrap(),
        }
    }

    fn open(node: &Node<S>, owner: u32, size: usize) -> Services {
        Services {
            data: node
                .service_builder(&service_name(owner, size, "data"))
                .publish_subscribe::<Data>()
                .open()
                .unwrap(),
            data_event: node
                .service_builder(&service_name(owner, size, "data-event"))
                .event()
                .open()
                .unwrap(),
            ack: node
                .service_builder(&service_name(owner, size, "ack"))
                .publish_subscribe::<u64>()
                .open()
                .unwrap(),
            ack_event: node
                .service_builder(&service_name(owner, size, "ack-event"))
                .event()
                .open()
                .unwrap(),
        }
    }
}

/// Waits for the next sample `receive` gives: sleeping on `listener`, or
/// spinning; counts in `regime` whether it had to wait.
fn next<R>(
    mut receive: impl FnMut() -> Option<R>,
    listener: &Listener<S>,
    sleep: bool,
    regime: &mut Regime,
) -> R {
    let mut first = true;
    loop {
        if let Some(s) = receive() {
            regime.frame(!first);
            return s;
        }
        first = false;
        if sleep {
            listener.timed_wait(|_| {}, WAIT).unwrap();
        } else {
            std::hint::spin_loop();
        }
    }
}

/// The producer's ports for one size.
struct Producer {
    _services: Services,
    publisher: Publisher<S, Data, ()>,
    notifier: Notifier<S>,
    ack: Subscriber<S, u64, ()>,
    ack_listener: Listener<S>,
}

impl Producer {
    fn new(node: &Node<S>, size: usize, consumer: &mut Consumer) -> Producer {
        let services = Services::create(node, std::process::id(), size);
        let publisher = services
            .data
            .publisher_builder()
            .initial_max_slice_len(size)
            .max_loaned_samples(1)
            .backpressure_strategy(BackpressureStrategy::RetryUntilDelivered)
            .create()
            .unwrap();
        let notifier = services.data_event.notifier_builder().create().unwrap();
        let ack = services.ack.subscriber_builder().create().unwrap();
        let ack_listener = services.ack_event.listener_builder().create().unwrap();
        // The consumer opens the services and connects before any sample.
        consumer.begin(Batch {
            cmd: b'o',
            touch: Touch::Page,
            size,
            iters: u64::from(std::process::id()),
        });
        consumer.wait_ack();
        Producer {
            _services: services,
            publisher,
            notifier,
            ack,
            ack_listener,
        }
    }

    fn send(&self, size: usize, touch: Touch, seq: u64, notify: bool) {
        let mut sample = self.publisher.loan_slice_uninit(size).unwrap();
        // SAFETY: `u8` has no invalid values and the slice lies in a shared
        // memory mapping, whose bytes the kernel zero-fills on first touch
        // (later they hold an earlier payload), so every byte is
        // initialised memory; the producer writes one byte per page, as
        // every producer of this bench does, instead of filling the slice.
        let bytes = unsafe {
            &mut *(std::ptr::from_mut::<[MaybeUninit<u8>]>(sample.payload_mut()) as *mut [u8])
        };
        touch.produce(bytes, seq);
        // SAFETY: as above, every byte of the payload is initialised.
        let sample = unsafe { sample.assume_init() };
        sample.send().unwrap();
        if notify {
            self.notifier.notify().unwrap();
        }
    }

    fn latency(&self, consumer: &mut Consumer, batch: Batch, sleep: bool) -> Duration {
        consumer.begin(batch);
        let t0 = Instant::now();
        for seq in 0..batch.iters {
            self.send(batch.size, Touch::Page, seq, sleep);
            let ack = next(
                || self.ack.receive().unwrap(),
                &self.ack_listener,
                sleep,
                &mut Regime::new("acknowledgement"),
            );
            assert_eq!(*ack.payload(), seq);
        }
        let elapsed = t0.elapsed();
        consumer.wait_ack();
        elapsed
    }

    fn stream(&self, consumer: &mut Consumer, batch: Batch) -> Duration {
        let t0 = Instant::now();
        consumer.begin(batch);
        let notify = batch.cmd != b'P';
        for seq in 0..batch.iters {
            self.send(batch.size, batch.touch, seq, notify);
        }
        consumer.wait_ack();
        t0.elapsed()
    }
}

fn latency(g: &mut BenchmarkGroup<'_, WallTime>, node: &Node<S>, consumer: &mut Consumer) {
    for (size, label) in SIZES {
        g.throughput(Throughput::Bytes(size as u64));
        let p = Producer::new(node, size, consumer);
        let batch = |cmd, touch, iters| Batch {
            cmd,
            touch,
            size,
            iters,
        };
        for touch in Touch::BOTH {
            let name = format!("iceoryx2_{}", touch.suffix());
            g.bench_function(BenchmarkId::new(name, label), |b| {
                b.iter_custom(|iters| p.latency(consumer, batch(b'e', touch, iters), true))
            });
        }
        g.bench_function(BenchmarkId::new("iceoryx2_poll_page", label), |b| {
            b.iter_custom(|iters| p.latency(consumer, batch(b'p', Touch::Page, iters), false))
        });
    }
}

fn stream(g: &mut BenchmarkGroup<'_, WallTime>, node: &Node<S>, consumer: &mut Consumer) {
    for (size, label) in STREAM_SIZES {
        g.throughput(Throughput::Bytes(size as u64));
        let p = Producer::new(node, size, consumer);
        for touch in Touch::BOTH {
            for (name, cmd) in [("iceoryx2", b's'), ("iceoryx2_poll", b'P')] {
                let name = format!("{name}_{}", touch.suffix());
                g.bench_function(BenchmarkId::new(name, label), |b| {
                    b.iter_custom(|iters| {
                        p.stream(
                            consumer,
                            Batch {
                                cmd,
                                touch,
                                size,
                                iters,
                            },
                        )
                    })
                });
            }
        }
    }
}

/// The consumer's ports for one size.
struct ConsumerPorts {
    _services: Services,
    sub: Subscriber<S, Data, ()>,
    listener: Listener<S>,
    ack: Publisher<S, u64, ()>,
    ack_notifier: Notifier<S>,
}

/// The consumer process: serves batches until told to quit.
fn child(path: &str) {
    let node = node(&prefix("bench"));
    let mut sock = connect(path);
    let mut ports: Option<ConsumerPorts> = None;
    let mut sum = 0u64;
    let mut regime = Regime::new("consumer");
    while let Some(batch) = Batch::recv(&mut sock) {
        if batch.cmd == b'o' {
            // A new size: drop the old ports first, then open the new ones.
            drop(ports.take());
            let services = Services::open(&node, batch.iters as u32, batch.size);
            ports = Some(ConsumerPorts {
                sub: services.data.subscriber_builder().create().unwrap(),
                listener: services.data_event.listener_builder().create().unwrap(),
                ack: services.ack.publisher_builder().create().unwrap(),
                ack_notifier: services.ack_event.notifier_builder().create().unwrap(),
                _services: services,
            });
            std::io::Write::write_all(&mut sock, b"k").unwrap();
            continue;
        }
        let p = ports.as_ref().expect("a size was opened");
        let sleep = !matches!(batch.cmd, b'p' | b'P');
        for seq in 0..batch.iters {
            let sample = next(|| p.sub.receive().unwrap(), &p.listener, sleep, &mut regime);
            assert_eq!(sample.payload().len(), batch.size);
            sum = sum.wrapping_add(batch.touch.consume(sample.payload()));
            drop(sample);
            if !matches!(batch.cmd, b's' | b'P') {
                p.ack.send_copy(seq).unwrap();
                if sleep {
                    p.ack_notifier.notify().unwrap();
                }
            }
        }
        if matches!(batch.cmd, b's' | b'P') {
            regime.flush();
        } else {
            // Round trips wait every time: not a stream's regime.
            regime = Regime::new("consumer");
        }
        black_box(sum);
        std::io::Write::write_all(&mut sock, b"k").unwrap();
    }
}

fn main() {
    set_log_level(LogLevel::Error);
    if let Ok(path) = std::env::var(CHILD_ENV) {
        child(&path);
        return;
    }
    let node = node(&prefix("bench"));
    let mut consumer = Consumer::start(&[(PREFIX_ENV, prefix("bench"))]);
    let mut c = Criterion::default().configure_from_args();
    let mut g = c.benchmark_group("handoff");
    configure(&mut g);
    latency(&mut g, &node, &mut consumer);
    g.finish();
    let mut g = c.benchmark_group("stream");
    configure(&mut g);
    stream(&mut g, &node, &mut consumer);
    g.finish();
    drop(consumer);
    drop(node);
    remove_leftovers(&prefix("bench"));
    c.final_summary();
}
