//! Cleanup: a segment whose creator was killed is listed as dead and
//! removed by `gc`; and after the suite no test segment remains.
//! (Named `zz_` so cargo runs it after the other integration tests.)
#![cfg(not(loom))] // real processes and syscalls; loom models live in src/loom_models.rs

mod common;

use std::time::Duration;

use common::*;
use shm_core::{Segment, SegmentOptions};

#[test]
fn child_entry() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    assert_eq!(role, "create_and_die");
    let seg = Segment::create(&SegmentOptions::new(4096).prefix(var("PREFIX"))).unwrap();
    let _p = seg.join().unwrap();
    std::thread::sleep(Duration::from_secs(60));
    std::process::exit(1);
}

#[test]
#[cfg_attr(miri, ignore = "needs real syscalls")]
fn killed_creator_is_reaped_and_nothing_leaks() {
    let pre = format!("{}-gc", prefix());
    let mut k = KillOnDrop(spawn(
        "child_entry",
        "create_and_die",
        &[("PREFIX", pre.clone())],
    ));
    assert!(wait_until(Duration::from_secs(60), || {
        shm_core::list_segments(Some(&pre))
            .unwrap()
            .iter()
            .any(|s| s.live_participants == 1)
    }));
    let listed = shm_core::list_segments(Some(&pre)).unwrap();
    assert_eq!(listed.len(), 1);
    assert!(listed[0].alive && listed[0].valid);
    assert_eq!(listed[0].creator_pid, Some(k.0.id()));
    assert!(
        shm_core::gc(Some(&pre)).unwrap().is_empty(),
        "alive segments are kept"
    );

    kill9(&mut k.0);
    let listed = shm_core::list_segments(Some(&pre)).unwrap();
    assert_eq!(listed.len(), 1, "a killed creator leaks its name until gc");
    assert!(!listed[0].alive);
    assert_eq!(listed[0].live_participants, 0);
    let removed = shm_core::gc(Some(&pre)).unwrap();
    assert_eq!(removed.len(), 1);
    assert_eq!(removed[0].name, listed[0].name);
    assert!(shm_core::list_segments(Some(&pre)).unwrap().is_empty());

    // A persisted segment with no handle left is garbage too.
    let mut seg =
        Segment::create(&SegmentOptions::new(4096).prefix(pre.clone()).persist(true)).unwrap();
    seg.set_unlink_on_drop(false);
    drop(seg);
    let listed = shm_core::list_segments(Some(&pre)).unwrap();
    assert!(listed.len() == 1 && listed[0].persistent && !listed[0].alive);
    assert_eq!(shm_core::gc(Some(&pre)).unwrap().len(), 1);

    // Nothing created by any test of this crate is left behind. (Other
    // test binaries ran before this one; the lib's unit tests create no
    // named segments.)
    let leaked = shm_core::list_segments(Some(TEST_PREFIX)).unwrap();
    assert!(leaked.is_empty(), "leaked test segments: {leaked:?}");
}
