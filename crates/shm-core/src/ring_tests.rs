//! Unit tests of the frame ring's slot choice under `block` (invariant 8),
//! on `std`'s atomics in one thread: which slot each frame goes into, and
//! a random walk of producer steps, consumer takes and releases in any
//! order, and producers taking a dead one's place, checked against a
//! model of what every consumer still holds.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicU64;

use crate::ring::{Geometry, Overflow, Poll, ProducerSlots, Ring, Space, control_words};

fn words(depth: usize, consumers: usize) -> Vec<AtomicU64> {
    let n = control_words(depth, consumers, Overflow::Block).unwrap();
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

fn init(w: &[AtomicU64], depth: usize, consumers: usize) -> Ring<'_> {
    let geometry = Geometry {
        depth,
        slot_size: 8,
        consumers,
        overflow: Overflow::Block,
        flags: 0,
        element: 0,
        max_shape: &[1],
    };
    Ring::init(w, &geometry, 1).unwrap()
}

fn produce(ring: &Ring<'_>, n: u64, slots: &mut ProducerSlots) -> Option<usize> {
    match ring.try_begin(n, slots).unwrap() {
        Space::Ready(k) => {
            ring.publish(n, k, slots);
            Some(k)
        }
        Space::Wait(_) => None,
    }
}

/// The slots a ring of depth 8 uses for frames 0..100 when its one
/// consumer takes and releases each frame `lag` frames after it was
/// published (slots counted from the frame the consumer first takes).
fn slots_used_by_a_consumer_behind(lag: u64) -> BTreeSet<usize> {
    let w = words(8, 1);
    let ring = init(&w, 8, 1);
    let mut slots = ring.producer_slots(0);
    let mut slot_of = Vec::new();
    let mut used = BTreeSet::new();
    for n in 0..100 {
        slot_of.push(produce(&ring, n, &mut slots).unwrap());
        let Some(seq) = n.checked_sub(lag) else {
            continue;
        };
        assert_eq!(
            ring.poll(0, seq).unwrap(),
            Poll::Frame(seq, slot_of[seq as usize])
        );
        ring.release(0, seq);
        used.insert(slot_of[n as usize]);
    }
    used
}

/// A consumer that releases each frame before the next is produced is
/// served from one slot of a deep ring: its pages stay warm.
#[test]
fn a_consumer_that_keeps_up_is_served_from_one_slot() {
    let used = slots_used_by_a_consumer_behind(0);
    assert_eq!(used.len(), 1, "slots used: {used:?}");
}

/// One frame behind, two slots take turns.
#[test]
fn a_consumer_one_frame_behind_cycles_two_slots() {
    let used = slots_used_by_a_consumer_behind(1);
    assert_eq!(used.len(), 2, "slots used: {used:?}");
}

/// While an observer is attached every frame stays in its slot until the
/// ring needs it (the last `depth` frames can all be observed); once it
/// left, the warm slot is reused again.
#[test]
fn an_observer_keeps_frames_in_their_slots_as_long_as_the_ring_allows() {
    let w = words(4, 1);
    let ring = init(&w, 4, 1);
    let mut slots = ring.producer_slots(0);
    ring.observer_attached();
    ring.observer_attached();
    ring.observer_left();
    let mut used = BTreeSet::new();
    for n in 0..40 {
        used.insert(produce(&ring, n, &mut slots).unwrap());
        ring.poll(0, n).unwrap();
        ring.release(0, n);
        for back in 0..4.min(n + 1) {
            let k = ring.observe(n - back);
            assert!(
                k.is_some_and(|k| ring.still(n - back, k)),
                "frame {} of {n}",
                n - back
            );
        }
    }
    assert_eq!(used.len(), 4);
    ring.observer_left();
    ring.observer_left();
    used.clear();
    for n in 40..80 {
        used.insert(produce(&ring, n, &mut slots).unwrap());
        ring.poll(0, n).unwrap();
        ring.release(0, n);
    }
    assert_eq!(used.len(), 1, "slots used: {used:?}");
}

/// The producer waits exactly when a consumer is `depth` frames behind.
#[test]
fn the_producer_waits_for_the_slowest_consumer() {
    let w = words(3, 2);
    let ring = init(&w, 3, 2);
    let mut slots = ring.producer_slots(0);
    for n in 0..3 {
        produce(&ring, n, &mut slots).unwrap();
    }
    assert_eq!(ring.try_begin(3, &mut slots).unwrap(), Space::Wait(0));
    ring.release(0, 0);
    assert_eq!(ring.try_begin(3, &mut slots).unwrap(), Space::Wait(1));
    ring.release(1, 1);
    assert!(matches!(
        ring.try_begin(3, &mut slots).unwrap(),
        Space::Ready(_)
    ));
}

/// Small deterministic generator (the walk is the same every run).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// Random steps: the producer publishes (the payload of a slot is the
/// frame number written into a side table), consumers take frames and
/// release them in any order (the ring's `next` stays at the oldest held),
/// and now and then a new producer takes over from the words alone. Every
/// frame a consumer takes carries its own number, and no slot is written
/// while a consumer holds the frame in it.
#[test]
fn random_steps_never_hand_out_a_held_slot() {
    let steps = if cfg!(miri) { 400 } else { 40_000 };
    let mut rng = Lcg(0x5eed_0031);
    for depth in [1usize, 2, 3, 5] {
        let consumers = 2;
        let w = words(depth, consumers);
        let ring = init(&w, depth, consumers);
        let mut slots = ring.producer_slots(0);
        // What each slot holds (the "bytes"), and each consumer's state.
        let mut payload = vec![u64::MAX; depth];
        let mut next = vec![0u64; consumers];
        let mut held: Vec<BTreeMap<u64, usize>> = vec![BTreeMap::new(); consumers];
        let mut head = 0u64;
        for _ in 0..steps {
            match rng.below(10) {
                0..=3 => match ring.try_begin(head, &mut slots).unwrap() {
                    Space::Ready(k) => {
                        for (i, h) in held.iter().enumerate() {
                            assert!(
                                !h.values().any(|&s| s == k),
                                "depth {depth}: frame {head} into slot {k} held by consumer {i}"
                            );
                        }
                        payload[k] = head;
                        ring.publish(head, k, &mut slots);
                        head += 1;
                    }
                    Space::Wait(i) => {
                        let oldest = held[i].keys().next().copied().unwrap_or(next[i]);
                        assert!(oldest + depth as u64 <= head, "waited on consumer {i}");
                    }
                },
                4..=6 => {
                    let i = rng.below(consumers as u64) as usize;
                    if held[i].len() < depth
                        && let Poll::Frame(seq, k) = ring.poll(i, next[i]).unwrap()
                    {
                        assert_eq!(seq, next[i]);
                        assert_eq!(payload[k], seq, "consumer {i} read slot {k}");
                        held[i].insert(seq, k);
                        next[i] += 1;
                    }
                }
                7 | 8 => {
                    let i = rng.below(consumers as u64) as usize;
                    if !held[i].is_empty() {
                        let pick = rng.below(held[i].len() as u64) as usize;
                        let seq = *held[i].keys().nth(pick).unwrap();
                        held[i].remove(&seq);
                        let upto = held[i].keys().next().copied().unwrap_or(next[i]);
                        ring.release_to(i, upto);
                    }
                }
                9 if rng.below(4) == 0 => {
                    if rng.below(2) == 0 {
                        ring.observer_attached();
                    } else {
                        ring.observer_left();
                    }
                }
                _ => {
                    // A producer takes a dead one's place, sometimes after
                    // it marked a slot and died before publishing.
                    if rng.below(2) == 0
                        && let Space::Ready(k) = ring.try_begin(head, &mut slots).unwrap()
                    {
                        payload[k] = u64::MAX;
                    }
                    slots = ring.producer_slots(ring.head());
                }
            }
        }
        assert!(head > steps as u64 / 40, "depth {depth}: {head} frames");
    }
}

/// [`Ring::released`]: every frame below it is released by every attached
/// consumer; a detached consumer holds nothing back; with none attached it
/// is every frame published.
#[test]
fn released_is_the_slowest_attached_consumers_next() {
    use crate::ring::{DETACHED, c};
    use std::sync::atomic::Ordering;
    let w = words(4, 3);
    let ring = init(&w, 4, 3);
    let mut slots = ring.producer_slots(0);
    assert_eq!(ring.released(), 0);
    for n in 0..3 {
        produce(&ring, n, &mut slots).unwrap();
    }
    // Nobody took anything yet.
    assert_eq!(ring.released(), 0);
    ring.release(0, 2);
    ring.release(1, 0);
    ring.release(2, 1);
    assert_eq!(ring.released(), 1, "consumer 1 released frame 0 only");
    ring.release(1, 1);
    assert_eq!(ring.released(), 2, "now consumer 2 is the slowest");
    // Consumer 2 detached: it no longer holds the stream back.
    ring.cw(2, c::OWNER).store(DETACHED | 7, Ordering::SeqCst);
    assert_eq!(ring.released(), 2);
    ring.release(1, 2);
    assert_eq!(ring.released(), 3);
    // Never past what was published, whatever a consumer says.
    ring.release(0, 10);
    ring.release(1, 10);
    assert_eq!(ring.released(), 3);
    for i in 0..2 {
        ring.cw(i, c::OWNER).store(DETACHED | 7, Ordering::SeqCst);
    }
    produce(&ring, 3, &mut slots).unwrap();
    assert_eq!(ring.released(), 4, "no consumer attached: every frame");
}
