//! Streams across real processes: ordering and fan-out at different
//! speeds under `block` and `drop-oldest`, back-pressure, end of stream,
//! every frame checked end to end, and real `SIGKILL`s of producers and
//! consumers (with and without restart). Each test runs this binary again
//! as children (roles below), attached through `FASTIO_CONTEXT`.

mod common;

use std::time::{Duration, Instant};

use common::{ROLE, context, park, spawn, var};
use dtype::Primitive;
use fastio::{Context, Error, Overflow, StreamOptions};

const ENTRY: &str = "child_entry";
/// Largest frame: 16 x 64 `uint32`.
const MAX: [usize; 2] = [16, 64];
const LONG: Option<Duration> = Some(Duration::from_secs(60));

/// Value `i` of frame `seq`: every frame differs, every word is checked.
fn value(seq: u64, i: usize) -> u32 {
    (seq as u32).wrapping_mul(1_000_003).wrapping_add(i as u32)
}

/// The shape of frame `seq`: its row count varies.
fn shape(seq: u64) -> [usize; 2] {
    [1 + (seq % 16) as usize, 64]
}

fn opts() -> StreamOptions {
    StreamOptions::new(Primitive::UInt32, &MAX)
}

/// Writes frames `from..n` (the producer's side); pauses `PAUSE_US` per
/// frame when set.
fn produce(ctx: &Context, name: &str, n: u64) {
    let mut tx = ctx.stream_producer(name).unwrap();
    let pause = std::env::var("PAUSE_US")
        .ok()
        .map(|v| Duration::from_micros(v.parse().unwrap()));
    let half_at: Option<u64> = std::env::var("HALF_AT").ok().map(|v| v.parse().unwrap());
    while tx.next_seq() < n {
        let seq = tx.next_seq();
        let mut slot = tx.next_slot(LONG).unwrap();
        slot.set_shape(&shape(seq)).unwrap();
        let bytes = slot.bytes_mut();
        if half_at == Some(seq) {
            // Dies mid-write: half the frame written, never published.
            let half = bytes.len() / 2;
            bytes[..half].fill(0xEE);
            ctx.create(1).unwrap().publish("mid-write").unwrap();
            park();
        }
        for (i, w) in bytes.chunks_exact_mut(4).enumerate() {
            w.copy_from_slice(&value(seq, i).to_le_bytes());
        }
        slot.publish().unwrap();
        if let Some(p) = pause {
            std::thread::sleep(p);
        }
    }
    tx.end().unwrap();
}

/// Checks one frame's shape and every word.
fn check(frame: &fastio::Frame) {
    let seq = frame.seq();
    assert_eq!(frame.shape(), &shape(seq), "frame {seq}");
    for (i, w) in frame.chunks_exact(4).enumerate() {
        let got = u32::from_le_bytes(w.try_into().unwrap());
        assert_eq!(got, value(seq, i), "frame {seq} word {i}: torn or wrong");
    }
}

/// Child side of every test in this file; a no-op unless `ROLE` is set.
#[test]
fn child_entry() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let ctx = Context::from_env().expect("attach");
    let name = var("STREAM");
    match role.as_str() {
        "producer" => produce(&ctx, &name, var("FRAMES").parse().unwrap()),
        // Reads every frame to the end, checks each, and expects the
        // count `EXPECT` (under block) or increasing numbers (drop-oldest);
        // `SLOW_US` per frame; `HOLD_AT`: parks holding that frame.
        "consumer" => {
            let index: usize = var("INDEX").parse().unwrap();
            let slow = std::env::var("SLOW_US")
                .ok()
                .map(|v| Duration::from_micros(v.parse().unwrap()));
            let hold_at: Option<u64> = std::env::var("HOLD_AT").ok().map(|v| v.parse().unwrap());
            let expect_from: u64 = std::env::var("FROM").map_or(0, |v| v.parse().unwrap());
            let mut rx = ctx.stream_consumer(&name, index).unwrap();
            assert_eq!(rx.next_seq(), expect_from, "resumes where expected");
            let mut last = None;
            let mut count = 0u64;
            for frame in rx.frames().timeout(Duration::from_secs(60)) {
                let frame = frame.unwrap();
                check(&frame);
                if let Some(l) = last {
                    assert!(frame.seq() > l, "out of order: {} after {l}", frame.seq());
                }
                last = Some(frame.seq());
                count += 1;
                if hold_at == Some(frame.seq()) {
                    ctx.create(1)
                        .unwrap()
                        .publish(&format!("holding-{name}-{index}"))
                        .unwrap();
                    park();
                }
                if let Some(d) = slow {
                    std::thread::sleep(d);
                }
            }
            let dropped = rx.dropped();
            if let Ok(n) = std::env::var("EXPECT") {
                let n: u64 = n.parse().unwrap();
                assert_eq!((count, dropped), (n - expect_from, 0), "lost frames");
                // A consumer restarted after its predecessor read the
                // last frame (and was killed before exiting) resumes at
                // the end and sees none.
                let want_last = if expect_from < n { Some(n - 1) } else { None };
                assert_eq!(last, want_last, "last frame (resumed at {expect_from})");
            } else {
                assert!(count + dropped >= var("FRAMES").parse::<u64>().unwrap() - expect_from);
            }
            println!("consumer {index}: {count} frames, {dropped} dropped");
        }
        // Reads until the stream fails, checking every frame before.
        "until-poisoned" => {
            let mut rx = ctx
                .stream_consumer(&name, var("INDEX").parse().unwrap())
                .unwrap();
            let mut seen = 0u64;
            let err = loop {
                match rx.next(LONG) {
                    Ok(Some(f)) => {
                        check(&f);
                        assert_eq!(f.seq(), seen);
                        seen += 1;
                    }
                    Ok(None) => panic!("the stream ended instead of failing"),
                    Err(e) => break e,
                }
            };
            let k: u64 = var("POISONED_FROM").parse().unwrap();
            match err {
                Error::StreamPoisoned { from_frame, .. } => {
                    assert_eq!((from_frame, seen), (k, k), "{err}")
                }
                e => panic!("expected StreamPoisoned, got {e}"),
            }
        }
        // Reads `FRAMES` frames; its resident set after 10,000 and at
        // the end must not differ by more than 1 MiB (no per-frame leak).
        "rss" => {
            let mut rx = ctx.stream_consumer(&name, 0).unwrap();
            let n: u64 = var("FRAMES").parse().unwrap();
            let mut at_10k = 0;
            for i in 0..n {
                let f = rx.next(LONG).unwrap().unwrap();
                assert_eq!(f.seq(), i);
                std::hint::black_box(f.bytes()[f.len() / 2]);
                drop(f);
                if i == 10_000 {
                    at_10k = rss_kib();
                }
            }
            let end = rss_kib();
            assert!(
                end <= at_10k + 1024,
                "consumer RSS grew from {at_10k} KiB to {end} KiB over {n} frames"
            );
            println!("rss: {at_10k} KiB -> {end} KiB");
        }
        other => panic!("unknown role {other}"),
    }
}

/// This process's resident set (KiB), from `/proc/self/status`.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

fn env(pairs: &[(&str, &str)]) -> Vec<(&'static str, String)> {
    pairs
        .iter()
        .map(|(k, v)| {
            (
                Box::leak(k.to_string().into_boxed_str()) as &str,
                v.to_string(),
            )
        })
        .collect()
}

fn wait_name(ctx: &Context, name: &str) {
    let t0 = Instant::now();
    while !ctx.names().unwrap().iter().any(|n| n == name) {
        assert!(t0.elapsed() < Duration::from_secs(30), "no {name}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn three_consumers_at_different_speeds_see_every_frame_in_order_under_block() {
    let ctx = context(64 << 20);
    ctx.declare_stream("s", &opts().depth(4).consumers(3))
        .unwrap();
    let n = "3000";
    let mut kids = vec![spawn(
        ENTRY,
        &ctx,
        "producer",
        &env(&[("STREAM", "s"), ("FRAMES", n)]),
    )];
    for (i, slow) in [("0", "0"), ("1", "20"), ("2", "200")] {
        kids.push(spawn(
            ENTRY,
            &ctx,
            "consumer",
            &env(&[
                ("STREAM", "s"),
                ("INDEX", i),
                ("SLOW_US", slow),
                ("EXPECT", n),
                ("FRAMES", n),
            ]),
        ));
    }
    for k in &mut kids {
        assert!(k.success());
    }
    let st = ctx.stream_status("s").unwrap();
    assert_eq!((st.head, st.ended), (3000, Some(3000)));
    assert!(
        st.consumers
            .iter()
            .all(|c| c.next == 3000 && c.dropped == 0)
    );
}

#[test]
fn a_slow_sink_back_pressures_the_source_and_nothing_is_lost() {
    let ctx = context(64 << 20);
    ctx.declare_stream("bp", &opts().depth(2)).unwrap();
    let mut tx = spawn(
        ENTRY,
        &ctx,
        "producer",
        &env(&[("STREAM", "bp"), ("FRAMES", "200")]),
    );
    // No consumer yet: the producer stops after `depth` frames (it gets
    // there when it gets there, under load too; then a moment more shows
    // it stays there).
    common::wait_for("the producer's first 2 frames", || {
        ctx.stream_status("bp").unwrap().head >= 2
    });
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(ctx.stream_status("bp").unwrap().head, 2);
    let t0 = Instant::now();
    let mut rx = spawn(
        ENTRY,
        &ctx,
        "consumer",
        &env(&[
            ("STREAM", "bp"),
            ("INDEX", "0"),
            ("SLOW_US", "1000"),
            ("EXPECT", "200"),
        ]),
    );
    assert!(rx.success() && tx.success());
    // 200 frames at >= 1 ms each: the sink set the pace.
    assert!(t0.elapsed() >= Duration::from_millis(200));
}

#[test]
fn drop_oldest_lets_a_slow_consumer_skip_but_never_tears_a_frame() {
    let ctx = context(64 << 20);
    ctx.declare_stream(
        "d",
        &opts().depth(3).consumers(2).overflow(Overflow::DropOldest),
    )
    .unwrap();
    let n = "4000";
    let mut kids = vec![
        spawn(
            ENTRY,
            &ctx,
            "consumer",
            &env(&[
                ("STREAM", "d"),
                ("INDEX", "1"),
                ("SLOW_US", "500"),
                ("FRAMES", n),
            ]),
        ),
        spawn(
            ENTRY,
            &ctx,
            "producer",
            &env(&[("STREAM", "d"), ("FRAMES", n), ("PAUSE_US", "20")]),
        ),
    ];
    for k in &mut kids {
        assert!(k.success());
    }
    let st = ctx.stream_status("d").unwrap();
    assert_eq!(st.head, 4000);
    assert!(
        st.consumers[1].dropped > 0,
        "the slow consumer should have lost frames: {st:?}"
    );
    // Consumer 0 never attached: under drop-oldest nothing waits for it.
    assert!(!st.consumers[0].attached);
}

#[test]
fn a_producer_killed_mid_frame_poisons_the_stream_from_that_frame() {
    let ctx = context(64 << 20);
    ctx.declare_stream("k", &opts().depth(4).consumers(2))
        .unwrap();
    let mut consumers: Vec<_> = ["0", "1"]
        .iter()
        .map(|i| {
            spawn(
                ENTRY,
                &ctx,
                "until-poisoned",
                &env(&[("STREAM", "k"), ("INDEX", i), ("POISONED_FROM", "37")]),
            )
        })
        .collect();
    let mut tx = spawn(
        ENTRY,
        &ctx,
        "producer",
        &env(&[("STREAM", "k"), ("FRAMES", "100"), ("HALF_AT", "37")]),
    );
    wait_name(&ctx, "mid-write");
    tx.kill9();
    for c in &mut consumers {
        assert!(c.success());
    }
    let st = ctx.stream_status("k").unwrap();
    assert_eq!((st.head, st.poisoned_from), (37, Some(37)));
}

#[test]
fn a_restarted_producer_goes_on_at_the_frame_the_dead_one_did_not_publish() {
    let ctx = context(64 << 20);
    ctx.declare_stream("r", &opts().depth(4).producer_may_restart(true))
        .unwrap();
    let mut rx = spawn(
        ENTRY,
        &ctx,
        "consumer",
        &env(&[("STREAM", "r"), ("INDEX", "0"), ("EXPECT", "500")]),
    );
    let mut tx = spawn(
        ENTRY,
        &ctx,
        "producer",
        &env(&[("STREAM", "r"), ("FRAMES", "500"), ("HALF_AT", "123")]),
    );
    wait_name(&ctx, "mid-write");
    tx.kill9();
    // The consumer waits (no poison) while no producer runs.
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(ctx.stream_status("r").unwrap().poisoned_from, None);
    let mut again = spawn(
        ENTRY,
        &ctx,
        "producer",
        &env(&[("STREAM", "r"), ("FRAMES", "500")]),
    );
    assert!(again.success() && rx.success());
}

#[test]
fn a_consumer_killed_holding_a_frame_is_detached_or_restarted() {
    // Without restart: the producer goes on, the other consumer sees all.
    let ctx = context(64 << 20);
    ctx.declare_stream("c", &opts().depth(2).consumers(2))
        .unwrap();
    let mut victim = spawn(
        ENTRY,
        &ctx,
        "consumer",
        &env(&[
            ("STREAM", "c"),
            ("INDEX", "0"),
            ("HOLD_AT", "5"),
            ("FRAMES", "300"),
        ]),
    );
    let mut other = spawn(
        ENTRY,
        &ctx,
        "consumer",
        &env(&[("STREAM", "c"), ("INDEX", "1"), ("EXPECT", "300")]),
    );
    let mut tx = spawn(
        ENTRY,
        &ctx,
        "producer",
        &env(&[("STREAM", "c"), ("FRAMES", "300")]),
    );
    wait_name(&ctx, "holding-c-0");
    victim.kill9();
    assert!(tx.success() && other.success());
    let st = ctx.stream_status("c").unwrap();
    assert!(!st.consumers[0].attached);

    // With restart: the producer waits; the new consumer resumes at the
    // frame the dead one held.
    ctx.declare_stream("c2", &opts().depth(2).consumer_may_restart(true))
        .unwrap();
    let mut victim = spawn(
        ENTRY,
        &ctx,
        "consumer",
        &env(&[
            ("STREAM", "c2"),
            ("INDEX", "0"),
            ("HOLD_AT", "9"),
            ("FRAMES", "300"),
        ]),
    );
    let mut tx = spawn(
        ENTRY,
        &ctx,
        "producer",
        &env(&[("STREAM", "c2"), ("FRAMES", "300")]),
    );
    wait_name(&ctx, "holding-c2-0");
    victim.kill9();
    std::thread::sleep(Duration::from_millis(100));
    // Back-pressured: frame 9's slot is kept, so at most 9 + depth frames.
    assert!(ctx.stream_status("c2").unwrap().head <= 11);
    let mut again = spawn(
        ENTRY,
        &ctx,
        "consumer",
        &env(&[
            ("STREAM", "c2"),
            ("INDEX", "0"),
            ("FROM", "9"),
            ("EXPECT", "300"),
        ]),
    );
    assert!(again.success() && tx.success());
}

/// Random SIGKILLs of the producer and of consumers at random moments,
/// with restart on: every frame that arrives is whole and in order, no
/// process hangs, and the stream reaches its end.
#[test]
fn a_kill_storm_never_hangs_and_never_tears_a_frame() {
    let ctx = context(64 << 20);
    ctx.declare_stream(
        "storm",
        &opts()
            .depth(3)
            .consumers(2)
            .producer_may_restart(true)
            .consumer_may_restart(true),
    )
    .unwrap();
    let frames = "1500";
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let producer = |ctx: &Context| {
        spawn(
            ENTRY,
            ctx,
            "producer",
            &env(&[("STREAM", "storm"), ("FRAMES", frames), ("PAUSE_US", "200")]),
        )
    };
    let consumer = |ctx: &Context, i: usize| {
        let from = ctx.stream_status("storm").unwrap().consumers[i].next;
        spawn(
            ENTRY,
            ctx,
            "consumer",
            &env(&[
                ("STREAM", "storm"),
                ("INDEX", &i.to_string()),
                ("FROM", &from.to_string()),
                ("EXPECT", frames),
                ("SLOW_US", "100"),
            ]),
        )
    };
    let mut tx = producer(&ctx);
    let mut rx: Vec<_> = (0..2).map(|i| consumer(&ctx, i)).collect();
    let t0 = Instant::now();
    let mut kills = 0;
    while kills < 40 && t0.elapsed() < Duration::from_secs(40) {
        std::thread::sleep(Duration::from_millis(next() % 30));
        if ctx.stream_status("storm").unwrap().ended.is_some() {
            break;
        }
        let victim = (next() % 3) as usize;
        if victim == 2 {
            if tx.0.try_wait().unwrap().is_none() {
                tx.kill9();
                kills += 1;
            }
            tx = producer(&ctx);
        } else {
            if rx[victim].0.try_wait().unwrap().is_none() {
                rx[victim].kill9();
                kills += 1;
            }
            // Wait until the dead consumer's token reads dead before
            // taking its place (the kernel releases its slot lock).
            std::thread::sleep(Duration::from_millis(5));
            rx[victim] = consumer(&ctx, victim);
        }
    }
    eprintln!("storm: {kills} kills in {:?}", t0.elapsed());
    assert!(kills > 5, "only {kills} kills");
    assert!(tx.success());
    for r in &mut rx {
        assert!(r.success());
    }
    let st = ctx.stream_status("storm").unwrap();
    assert_eq!(st.ended, Some(1500));
    // A consumer that takes the place of one killed after its last frame
    // resumes at the end, sees no frame and ends cleanly.
    assert_eq!(st.consumers[0].next, 1500);
    assert!(consumer(&ctx, 0).success());
}

#[test]
fn stream_names_are_not_reachable_through_the_table_api() {
    let ctx = context(1 << 20);
    ctx.declare_stream("x", &opts()).unwrap();
    for r in [
        ctx.get("fastio.stream/x").map(drop),
        ctx.map("fastio.stream/x").map(drop),
        ctx.create(8).unwrap().publish("fastio.stream/y"),
    ] {
        assert!(matches!(r, Err(Error::InvalidName { .. })), "{r:?}");
    }
    assert!(matches!(
        ctx.declare_stream("x", &opts()),
        Err(Error::NameExists(_))
    ));
    ctx.remove_stream("x").unwrap();
    assert!(matches!(
        ctx.stream_consumer("x", 0),
        Err(Error::UnknownName(_))
    ));
}

#[test]
fn a_consumer_may_keep_up_to_depth_frames_under_block_and_one_under_drop_oldest() {
    let ctx = context(8 << 20);
    let mut tx = ctx.create_stream("held", &opts().depth(3)).unwrap();
    let mut rx = ctx.stream_consumer("held", 0).unwrap();
    for _ in 0..3 {
        let mut s = tx.next_slot(LONG).unwrap();
        let seq = s.seq();
        s.set_shape(&shape(seq)).unwrap();
        for (i, w) in s.bytes_mut().chunks_exact_mut(4).enumerate() {
            w.copy_from_slice(&value(seq, i).to_le_bytes());
        }
        s.publish().unwrap();
    }
    let f: Vec<_> = (0..3).map(|_| rx.next(LONG).unwrap().unwrap()).collect();
    f.iter().for_each(check);
    // A fourth could never come (the producer waits for frame 0): refused.
    assert!(matches!(rx.next(LONG), Err(Error::FrameHeld(_))));
    let [f0, f1, f2]: [fastio::Frame; 3] = f.try_into().unwrap();
    drop(f1);
    // Frame 0 is still held: the shared cursor stays, the producer waits.
    assert_eq!(ctx.stream_status("held").unwrap().consumers[0].next, 0);
    assert!(matches!(
        tx.next_slot(Some(Duration::from_millis(50))),
        Err(Error::StreamTimeout { .. })
    ));
    drop(f0);
    // 0 and 1 are done: two slots free.
    assert_eq!(ctx.stream_status("held").unwrap().consumers[0].next, 2);
    check(&f2);
    tx.next_slot(LONG).unwrap().publish().unwrap();
    tx.next_slot(LONG).unwrap().publish().unwrap();
    assert!(matches!(
        tx.next_slot(Some(Duration::from_millis(50))),
        Err(Error::StreamTimeout { .. })
    ));
    drop(f2);

    let mut tx = ctx
        .create_stream("one", &opts().overflow(Overflow::DropOldest))
        .unwrap();
    let mut rx = ctx.stream_consumer("one", 0).unwrap();
    tx.next_slot(LONG).unwrap().publish().unwrap();
    tx.next_slot(LONG).unwrap().publish().unwrap();
    let a = rx.next(LONG).unwrap().unwrap();
    assert!(matches!(rx.next(LONG), Err(Error::FrameHeld(_))));
    drop(a);
    assert_eq!(rx.next(LONG).unwrap().unwrap().seq(), 1);
}

#[test]
fn a_frame_kept_depth_frames_long_makes_next_an_error_not_a_hang() {
    let ctx = context(8 << 20);
    let mut tx = ctx.create_stream("pin", &opts().depth(2)).unwrap();
    let mut rx = ctx.stream_consumer("pin", 0).unwrap();
    for _ in 0..2 {
        tx.next_slot(LONG).unwrap().publish().unwrap();
    }
    let kept = rx.next(LONG).unwrap().unwrap();
    drop(rx.next(LONG).unwrap().unwrap()); // frame 1, released at once
    // Frame 2 needs frame 0's slot, which `kept` pins: an error at once.
    let t0 = Instant::now();
    assert!(matches!(rx.next(LONG), Err(Error::FrameHeld(_))));
    assert!(t0.elapsed() < Duration::from_secs(1));
    drop(kept);
    tx.next_slot(LONG).unwrap().publish().unwrap();
    assert_eq!(rx.next(LONG).unwrap().unwrap().seq(), 2);
}

#[test]
fn a_consumer_stays_flat_over_100000_frames() {
    let ctx = context(8 << 20);
    ctx.declare_stream("flat", &opts().depth(4)).unwrap();
    let mut rx = spawn(
        ENTRY,
        &ctx,
        "rss",
        &env(&[("STREAM", "flat"), ("FRAMES", "100000")]),
    );
    let mut tx = ctx.stream_producer("flat").unwrap();
    for _ in 0..100_000 {
        let mut s = tx.next_slot(LONG).unwrap();
        s.bytes_mut()[0] = 1;
        s.publish().unwrap();
    }
    tx.end().unwrap();
    assert!(rx.success());
}

/// `Context::stream_releases`: how far every consumer has come, and a
/// wait that a consumer's release ends (a bridge across hosts grants
/// credit by it).
#[test]
fn releases_follow_the_slowest_consumer_and_wake_a_waiter() {
    let ctx = Context::new(&fastio::ContextOptions::new().anonymous(true)).unwrap();
    let mut tx = ctx
        .create_stream("r", &opts().depth(4).consumers(2))
        .unwrap();
    let mut fast = ctx.stream_consumer("r", 0).unwrap();
    let mut slow = ctx.stream_consumer("r", 1).unwrap();
    let releases = ctx.stream_releases("r").unwrap();
    for seq in 0..3 {
        let mut slot = tx.next_slot(LONG).unwrap();
        slot.set_shape(&shape(seq)).unwrap();
        slot.publish().unwrap();
    }
    assert_eq!(releases.released(), 0);
    for _ in 0..3 {
        drop(fast.next(LONG).unwrap().unwrap());
    }
    drop(slow.next(LONG).unwrap().unwrap());
    assert_eq!(
        releases.released(),
        1,
        "the slow consumer let go of frame 0"
    );
    // Nothing moves: the wait ends at its timeout with what it was.
    let t0 = Instant::now();
    assert_eq!(releases.wait_past(1, Duration::from_millis(50)), 1);
    assert!(t0.elapsed() >= Duration::from_millis(50));
    // A release wakes a waiter at once.
    let waiter = std::thread::spawn(move || {
        let t0 = Instant::now();
        (releases.wait_past(1, Duration::from_secs(60)), t0.elapsed())
    });
    std::thread::sleep(Duration::from_millis(20));
    drop(slow.next(LONG).unwrap().unwrap());
    let (released, waited) = waiter.join().unwrap();
    assert_eq!(released, 2);
    assert!(waited < Duration::from_secs(30), "woken by the release");
}

/// The slots of a ring start at different offsets within their pages (a
/// cache line apart), each on a 64-byte boundary, and a frame's bytes never
/// reach the next slot: a producer writing one slot does not evict, set
/// for set, the same offsets of the slot a consumer reads.
#[test]
fn the_slots_start_a_cache_line_apart_within_their_pages() {
    let ctx = context(64 << 20);
    let depth = 6;
    let frame = 1 << 20;
    let opts = StreamOptions::new(Primitive::UInt8, &[frame]).depth(depth);
    assert_eq!(opts.slot_stride(), Some(frame as u64 + 64));
    let mut tx = ctx.create_stream("stagger", &opts).unwrap();
    // No consumer takes a frame: the producer fills every slot once.
    let mut starts = Vec::new();
    for seq in 0..depth {
        let mut slot = tx.next_slot(Some(Duration::from_secs(5))).unwrap();
        let bytes = slot.bytes_mut();
        assert_eq!(bytes.len(), frame);
        bytes.fill(seq as u8);
        starts.push(bytes.as_ptr() as usize);
        slot.publish().unwrap();
    }
    let mut offsets: Vec<usize> = starts.iter().map(|a| a % 4096).collect();
    assert!(offsets.iter().all(|o| o % 64 == 0), "{offsets:?}");
    offsets.sort_unstable();
    offsets.dedup();
    assert_eq!(
        offsets.len(),
        depth,
        "slots share a page offset: {starts:x?}"
    );
    starts.sort_unstable();
    assert!(starts.windows(2).all(|w| w[1] - w[0] >= frame));
    // Every frame is still whole: no slot's write reached another's.
    let mut rx = ctx.stream_consumer("stagger", 0).unwrap();
    for seq in 0..depth {
        let f = rx.next(Some(Duration::from_secs(5))).unwrap().unwrap();
        assert!(f.iter().all(|&b| b == seq as u8), "frame {seq}");
    }
}
