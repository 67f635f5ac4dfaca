//! Waits that start without a look (what a process knows of the name it
//! changed last, `engine::NameMemo`), and the changes that wake waiters.

use std::time::{Duration, Instant};

use crate::{Context, ContextOptions, Error};

fn context() -> Context {
    let prefix = format!("fastiotest-wait-{}", std::process::id());
    Context::new(&ContextOptions::new().capacity(4 << 20).prefix(prefix)).unwrap()
}

#[test]
#[cfg_attr(miri, ignore = "needs real shared memory")]
fn a_process_knows_the_name_it_changed_last_until_anyone_changes_the_names() {
    let ctx = context();
    // Another handle: another participant, with its own memo.
    let other = Context::attach(ctx.handle()).unwrap();
    ctx.create(16)
        .unwrap()
        .publish_and_release("frame")
        .unwrap();
    assert_eq!(ctx.shared.known_published("frame"), Some(true));
    assert_eq!(ctx.shared.known_published("other"), None);
    assert_eq!(other.shared.known_published("frame"), None);
    // A look by another process changes no name: still known.
    let m = other.map("frame").unwrap();
    assert_eq!(ctx.shared.known_published("frame"), Some(true));
    // Its free does: the publisher no longer knows, the one that freed
    // knows the name is gone.
    m.free().unwrap();
    assert_eq!(ctx.shared.known_published("frame"), None);
    assert_eq!(other.shared.known_published("frame"), Some(false));
    // A name published under another name by anyone makes it stale.
    ctx.create(16).unwrap().publish_and_release("x").unwrap();
    assert_eq!(other.shared.known_published("frame"), None);
    assert_eq!(ctx.shared.known_published("x"), Some(true));
    // A failed publication changes nothing and knows nothing new.
    let dup = ctx.create(16).unwrap();
    assert!(matches!(dup.publish("x"), Err(Error::NameExists(_))));
    assert_eq!(ctx.shared.known_published("x"), Some(true));
    // Closing is a change too (the names stay).
    other.close().unwrap();
    assert_eq!(ctx.shared.known_published("x"), None);
    assert!(ctx.is_published("x").unwrap());
}

#[test]
#[cfg_attr(miri, ignore = "needs real shared memory")]
fn closing_the_context_wakes_its_waiters() {
    let ctx = context();
    let other = Context::attach(ctx.handle()).unwrap();
    let waiter = std::thread::spawn(move || {
        let t0 = Instant::now();
        let r = other.map_wait("never", Duration::from_secs(60));
        (r.err(), t0.elapsed())
    });
    std::thread::sleep(Duration::from_millis(100));
    ctx.close().unwrap();
    let (err, took) = waiter.join().unwrap();
    assert!(matches!(err, Some(Error::ContextClosed)), "{err:?}");
    assert!(took < Duration::from_secs(30), "{took:?}");
}

/// Handoffs of one name between two handles, each side starting its wait
/// from what it knows (the producer just published, the consumer just
/// freed): a wait that skipped a look it needed would time out here.
fn handoffs(spin: Duration) {
    const ROUNDS: u64 = 2_000;
    let ctx = context();
    let other = Context::attach(ctx.handle()).unwrap();
    ctx.set_wait_spin(spin);
    other.set_wait_spin(spin);
    let wait = Duration::from_secs(20);
    let consumer = std::thread::spawn(move || {
        for seq in 0..ROUNDS {
            let m = other.map_wait("handoff", wait).unwrap();
            assert_eq!(m[..8], seq.to_le_bytes());
            m.free().unwrap();
            // Freed by this handle: known gone, so the next wait starts
            // without a look.
            assert_ne!(other.shared.known_published("handoff"), Some(true));
        }
    });
    for seq in 0..ROUNDS {
        let mut a = ctx.create(4096).unwrap();
        a.map_mut().unwrap()[..8].copy_from_slice(&seq.to_le_bytes());
        a.publish_and_release("handoff").unwrap();
        ctx.wait_unpublished("handoff", wait).unwrap();
    }
    consumer.join().unwrap();
    assert!(!ctx.is_published("handoff").unwrap());
}

#[test]
#[cfg_attr(miri, ignore = "needs real shared memory")]
fn handoffs_with_sleeping_waits_never_miss_a_change() {
    handoffs(Duration::ZERO);
}

#[test]
#[cfg_attr(miri, ignore = "needs real shared memory")]
fn handoffs_with_spinning_waits_never_miss_a_change() {
    handoffs(Duration::from_millis(5));
}
