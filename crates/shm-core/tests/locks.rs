//! Multi-process tests of the mutex, including holders killed with
//! `SIGKILL`.
#![cfg(not(loom))] // real processes and syscalls; loom models live in src/loom_models.rs

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use common::*;
use shm_core::{Offset, Segment, SegmentOptions, ShmMutex};

const MUTEX: u64 = 0;
const COUNTER: u64 = 64;
const FLAG: u64 = 524;
const FORKED_PID: u64 = 532;
const ENTRY: &str = "child_entry";

fn off(seg: &Segment, rel: u64) -> Offset {
    Offset(seg.data_offset().get() + rel)
}
fn a32(seg: &Segment, rel: u64) -> &AtomicU32 {
    seg.at(off(seg, rel)).unwrap()
}
fn bump_counter(seg: &Segment) {
    let mut b = [0u8; 8];
    read_bytes(seg, off(seg, COUNTER), &mut b).unwrap();
    let v = u64::from_le_bytes(b) + 1;
    std::hint::black_box(&v);
    write_bytes(seg, off(seg, COUNTER), &v.to_le_bytes()).unwrap();
}
fn read_counter(seg: &Segment) -> u64 {
    let mut b = [0u8; 8];
    read_bytes(seg, off(seg, COUNTER), &mut b).unwrap();
    u64::from_le_bytes(b)
}

fn new_segment() -> Segment {
    Segment::create(&SegmentOptions::new(8192).prefix(prefix())).unwrap()
}

/// Child side of every test in this file; a no-op unless `ROLE` is set.
#[test]
fn child_entry() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let seg = Segment::open(&var("SEG")).unwrap();
    let p = seg.join().unwrap();
    let mutex: &ShmMutex = seg.at(off(&seg, MUTEX)).unwrap();
    let iters: u64 = std::env::var("ITERS")
        .map(|v| v.parse().unwrap())
        .unwrap_or(0);
    let hold_forever = || {
        a32(&seg, FLAG).fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_secs(60));
        std::process::exit(1); // the parent should have killed us
    };
    match role.as_str() {
        "count" => {
            for _ in 0..iters {
                let g = mutex.lock(&p).unwrap();
                bump_counter(&seg);
                drop(g);
            }
        }
        "hold_mutex" => {
            let _g = mutex.lock(&p).unwrap();
            hold_forever();
        }
        // Holds the mutex, then forks a child (no exec) that inherits the
        // participant's open file description and so its slot lock.
        "hold_mutex_and_fork" => {
            let _g = mutex.lock(&p).unwrap();
            // SAFETY: the forked child calls only async-signal-safe
            // functions (getpid, sleep, _exit) and touches the segment
            // through an atomic store.
            let pid = unsafe { libc::fork() };
            assert!(pid >= 0, "fork failed");
            if pid == 0 {
                // SAFETY: async-signal-safe calls only (see above).
                unsafe {
                    a32(&seg, FORKED_PID).store(libc::getpid() as u32, Ordering::SeqCst);
                    for _ in 0..120 {
                        libc::sleep(1);
                    }
                    libc::_exit(0);
                }
            }
            wait_until(Duration::from_secs(30), || {
                a32(&seg, FORKED_PID).load(Ordering::SeqCst) != 0
            });
            hold_forever();
        }
        other => panic!("unknown role {other}"),
    }
}

fn child(seg: &Segment, role: &str, iters: u64) -> KillOnDrop {
    spawn_on(ENTRY, seg, role, ("ITERS", iters.to_string()))
}

#[test]
#[cfg_attr(miri, ignore = "needs real syscalls")]
fn n_processes_increment_under_mutex_exactly() {
    let seg = new_segment();
    const N: usize = 4;
    const ITERS: u64 = 2000;
    let mut kids: Vec<_> = (0..N).map(|_| child(&seg, "count", ITERS)).collect();
    for k in &mut kids {
        assert!(wait_bounded(&mut k.0, Duration::from_secs(120)).success());
    }
    assert_eq!(read_counter(&seg), N as u64 * ITERS);
    let mutex: &ShmMutex = seg.at(off(&seg, MUTEX)).unwrap();
    assert!(!mutex.is_locked());
    assert!(!mutex.is_poisoned());
}

fn spawn_holder(seg: &Segment, role: &str) -> KillOnDrop {
    let before = a32(seg, FLAG).load(Ordering::SeqCst);
    let k = child(seg, role, 0);
    assert!(
        wait_until(Duration::from_secs(30), || a32(seg, FLAG)
            .load(Ordering::SeqCst)
            > before),
        "holder never took the lock"
    );
    k
}

#[test]
#[cfg_attr(miri, ignore = "needs real syscalls")]
fn mutex_holder_killed_waiter_released_with_owner_died() {
    let seg = new_segment();
    let mut holder = spawn_holder(&seg, "hold_mutex");
    let mutex: &ShmMutex = seg.at(off(&seg, MUTEX)).unwrap();
    let p = seg.join().unwrap();
    assert!(matches!(
        mutex.try_lock(&p),
        Err(shm_core::LockError::WouldBlock)
    ));
    assert!(matches!(
        mutex.lock_timeout(&p, Duration::from_millis(50)),
        Err(shm_core::LockError::Timeout)
    ));
    let killed_at = std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let p = seg.join().unwrap();
            let g = mutex.lock_timeout(&p, Duration::from_secs(60)).unwrap();
            (g.owner_died(), Instant::now())
        });
        std::thread::sleep(Duration::from_millis(100));
        kill9(&mut holder.0);
        let killed_at = Instant::now();
        let (died, got_at) = waiter.join().unwrap();
        assert!(died, "waiter must see owner-died");
        let delay = got_at.saturating_duration_since(killed_at);
        assert!(
            delay < Duration::from_secs(5),
            "waiter released after {delay:?}"
        );
        killed_at
    });
    let _ = killed_at;
    // Still poisoned until someone marks it consistent.
    let mut g = mutex.try_lock(&p).unwrap();
    assert!(g.owner_died());
    g.mark_consistent();
    drop(g);
    assert!(!mutex.lock(&p).unwrap().owner_died());
}

/// Kills a process that is not our child (a forked grandchild) on drop.
struct KillPidOnDrop(u32);

impl Drop for KillPidOnDrop {
    fn drop(&mut self) {
        if self.0 != 0 {
            // SAFETY: kill(2) with a PID we read from the child; at worst
            // it names no process any more.
            unsafe { libc::kill(self.0 as libc::pid_t, libc::SIGKILL) };
        }
    }
}

#[test]
#[cfg_attr(miri, ignore = "needs real syscalls")]
fn killed_holder_with_a_live_forked_child_is_dead() {
    let seg = new_segment();
    let mut holder = spawn_holder(&seg, "hold_mutex_and_fork");
    assert!(wait_until(Duration::from_secs(30), || {
        a32(&seg, FORKED_PID).load(Ordering::SeqCst) != 0
    }));
    let forked = KillPidOnDrop(a32(&seg, FORKED_PID).load(Ordering::SeqCst));
    let mutex: &ShmMutex = seg.at(off(&seg, MUTEX)).unwrap();
    let p = seg.join().unwrap();
    assert!(matches!(
        mutex.try_lock(&p),
        Err(shm_core::LockError::WouldBlock)
    ));
    kill9(&mut holder.0);
    // The forked child still holds the slot's OFD lock, but the process
    // that joined is gone: the lock is taken over at once.
    assert!(
        std::path::Path::new(&format!("/proc/{}", forked.0)).exists(),
        "the forked child must outlive its parent for this test"
    );
    let g = mutex.lock_timeout(&p, Duration::from_secs(5)).unwrap();
    assert!(g.owner_died());
    let dead: Vec<_> = seg
        .participants()
        .into_iter()
        .filter(|i| !i.alive)
        .collect();
    assert_eq!(dead.len(), 1, "the killed holder's slot reads dead");
    drop(g);
    drop(forked);
}

#[test]
#[cfg_attr(miri, ignore = "needs real syscalls")]
fn pid_reuse_does_not_make_a_dead_owner_alive() {
    use std::os::unix::fs::FileExt;
    let seg = new_segment();
    let mut holder = spawn_holder(&seg, "hold_mutex");
    let p = seg.join().unwrap();
    let dead_slot = seg
        .participants()
        .into_iter()
        .find(|i| i.alive && i.slot != p.slot())
        .unwrap()
        .slot;
    kill9(&mut holder.0);
    // Pretend the dead holder's PID was recycled: write a live PID (ours)
    // into its registry slot, behind the library's back.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/dev/shm/{}", seg.name().unwrap()))
        .unwrap();
    let pid_field = seg.info().registry_offset + u64::from(dead_slot) * 32 + 8;
    f.write_all_at(&std::process::id().to_le_bytes(), pid_field)
        .unwrap();
    let info = seg
        .participants()
        .into_iter()
        .find(|i| i.slot == dead_slot)
        .unwrap();
    assert_eq!(info.pid, std::process::id());
    assert!(!info.alive, "a recycled pid must not look alive");
    let mutex: &ShmMutex = seg.at(off(&seg, MUTEX)).unwrap();
    assert!(mutex.try_lock(&p).unwrap().owner_died());
}
