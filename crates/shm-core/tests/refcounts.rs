//! Multi-process tests of cross-process reference counts: children killed
//! in the middle of updates, and concurrent last releases.
#![cfg(not(loom))] // real processes and syscalls; loom models live in src/loom_models.rs

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use common::*;
use shm_core::{Offset, Released, Segment, SegmentOptions, ShmRefCount};

const OBJECTS: u64 = 4;
const OBJ_STRIDE: u64 = 576;
const PROGRESS: u64 = 4096; // one AtomicU32 per child
const READY: u64 = 4160;
const GO: u64 = 4164;
const RECLAIMS: u64 = 4168;
const ENTRY: &str = "child_entry";

fn obj(seg: &Segment, i: u64) -> &ShmRefCount {
    seg.at(Offset(seg.data_offset().get() + i * OBJ_STRIDE))
        .unwrap()
}
fn a32(seg: &Segment, rel: u64) -> &AtomicU32 {
    seg.at(Offset(seg.data_offset().get() + rel)).unwrap()
}

#[test]
fn child_entry() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let seg = Segment::open(&var("SEG")).unwrap();
    let p = seg.join().unwrap();
    let me: u64 = var("CHILD").parse().unwrap();
    match role.as_str() {
        "churn" => {
            for i in 0..OBJECTS {
                for _ in 0..3 {
                    obj(&seg, i).acquire(&p).unwrap();
                }
            }
            let progress = a32(&seg, PROGRESS + 4 * me);
            // Churn until killed (bounded in case the parent vanished).
            let t0 = std::time::Instant::now();
            while t0.elapsed() < Duration::from_secs(60) {
                for i in 0..OBJECTS {
                    let o = obj(&seg, i);
                    o.acquire(&p).unwrap();
                    o.acquire(&p).unwrap();
                    assert_eq!(o.release(&p).unwrap(), Released::StillReferenced);
                    assert_eq!(o.release(&p).unwrap(), Released::StillReferenced);
                }
                progress.fetch_add(1, Ordering::SeqCst);
            }
            std::process::exit(1);
        }
        "last" => {
            let o = obj(&seg, 0);
            o.acquire(&p).unwrap();
            a32(&seg, READY).fetch_add(1, Ordering::SeqCst);
            assert!(wait_until(Duration::from_secs(60), || a32(&seg, GO)
                .load(Ordering::SeqCst)
                == 1));
            if o.release(&p).unwrap() == Released::Reclaimed {
                a32(&seg, RECLAIMS).fetch_add(1, Ordering::SeqCst);
            }
        }
        other => panic!("unknown role {other}"),
    }
}

fn kid(seg: &Segment, role: &str, n: u64) -> KillOnDrop {
    spawn_on(ENTRY, seg, role, ("CHILD", n.to_string()))
}

#[test]
#[cfg_attr(miri, ignore = "needs real syscalls")]
fn children_killed_mid_update_are_reclaimed() {
    let seg = Segment::create(&SegmentOptions::new(8192).prefix(prefix())).unwrap();
    let p = seg.join().unwrap();
    for i in 0..OBJECTS {
        obj(&seg, i).init(&p).unwrap();
    }
    const KIDS: u64 = 3;
    let mut kids: Vec<_> = (0..KIDS).map(|n| kid(&seg, "churn", n)).collect();
    for n in 0..KIDS {
        assert!(
            wait_until(Duration::from_secs(60), || a32(&seg, PROGRESS + 4 * n)
                .load(Ordering::SeqCst)
                >= 20),
            "child {n} made no progress"
        );
    }
    for k in &mut kids {
        kill9(&mut k.0);
    }
    for i in 0..OBJECTS {
        let o = obj(&seg, i);
        let before = o.count();
        assert!(before > 3 * KIDS, "object {i}: count {before}");
        let rep = o.reclaim_dead(&p);
        assert!(!rep.reclaimed);
        assert_eq!(rep.dead_holds, before - 1, "object {i}");
        assert_eq!(o.count(), 1, "only our hold remains");
        assert_eq!(o.reclaim_dead(&p), shm_core::ReclaimReport::default());
        assert_eq!(o.release(&p).unwrap(), Released::Reclaimed);
        assert!(o.is_reclaimed());
        assert!(o.acquire(&p).is_err(), "no resurrection");
    }
}

#[test]
#[cfg_attr(miri, ignore = "needs real syscalls")]
fn concurrent_last_releases_reclaim_exactly_once() {
    let seg = Segment::create(&SegmentOptions::new(8192).prefix(prefix())).unwrap();
    let p = seg.join().unwrap();
    const KIDS: u64 = 4;
    for round in 0..3 {
        a32(&seg, READY).store(0, Ordering::SeqCst);
        a32(&seg, GO).store(0, Ordering::SeqCst);
        a32(&seg, RECLAIMS).store(0, Ordering::SeqCst);
        obj(&seg, 0).init(&p).unwrap();
        let mut kids: Vec<_> = (0..KIDS).map(|n| kid(&seg, "last", n)).collect();
        assert!(wait_until(Duration::from_secs(60), || a32(&seg, READY)
            .load(Ordering::SeqCst)
            == KIDS as u32));
        assert_eq!(obj(&seg, 0).count(), KIDS + 1);
        assert_eq!(obj(&seg, 0).release(&p).unwrap(), Released::StillReferenced);
        a32(&seg, GO).store(1, Ordering::SeqCst);
        for k in &mut kids {
            assert!(wait_bounded(&mut k.0, Duration::from_secs(60)).success());
        }
        assert_eq!(
            a32(&seg, RECLAIMS).load(Ordering::SeqCst),
            1,
            "round {round}"
        );
        assert!(obj(&seg, 0).is_reclaimed());
    }
}
