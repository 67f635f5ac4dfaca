//! Loom models of the lock and reference-count state machines.
//!
//! Run with:
//! `RUSTFLAGS="--cfg loom" cargo test -p shm-core --release --target-dir target/loom --lib loom`
//!
//! Futex waits are modelled as yields; death is a flag per slot that the
//! liveness probe reads (a "dead" thread simply stops, still holding
//! whatever it held — exactly what `SIGKILL` does).

use std::time::Duration;

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, AtomicU32 as LoomU32};
use loom::thread;

use crate::refcount::Released;
use crate::sync::{AtomicU32, Env, Ordering, make_token, split_token};
use crate::{ShmMutex, ShmRefCount, ShmRwLock};

const SLOTS: usize = 4;

#[derive(Clone)]
struct World {
    dead: Arc<[AtomicBool; SLOTS]>,
}

impl World {
    fn new() -> Self {
        World {
            dead: Arc::new(std::array::from_fn(|_| AtomicBool::new(false))),
        }
    }
    fn env(&self, slot: u32) -> LoomEnv {
        LoomEnv {
            token: make_token(slot, 1),
            world: self.clone(),
        }
    }
}

struct LoomEnv {
    token: u32,
    world: World,
}

impl LoomEnv {
    fn die(&self) {
        self.world.dead[self.slot() as usize].store(true, Ordering::SeqCst);
    }
}

impl Env for LoomEnv {
    fn token(&self) -> u32 {
        self.token
    }
    fn wait(&self, _word: &AtomicU32, _expected: u32, _timeout: Duration) {
        thread::yield_now();
    }
    fn wake(&self, _word: &AtomicU32, _n: u32) {}
    fn token_alive(&self, token: u32) -> bool {
        match split_token(token) {
            Some((slot, 1)) if (slot as usize) < SLOTS => {
                !self.world.dead[slot as usize].load(Ordering::SeqCst)
            }
            _ => false,
        }
    }
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

#[test]
fn loom_mutex_excludes() {
    model(|| {
        let w = World::new();
        let m = Arc::new(ShmMutex::new());
        let data = Arc::new(UnsafeCell::new(0u32));
        let hs: Vec<_> = (1..3)
            .map(|slot| {
                let (m, data, env) = (m.clone(), data.clone(), w.env(slot));
                thread::spawn(move || {
                    assert_eq!(m.acquire(&env, None, false), Ok(false));
                    // SAFETY: the mutex is held; loom checks exclusivity.
                    data.with_mut(|p| unsafe { *p += 1 });
                    m.release(&env);
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        // SAFETY: all writers have been joined.
        assert_eq!(data.with(|p| unsafe { *p }), 2);
        assert!(!m.is_locked());
    });
}

#[test]
fn loom_mutex_owner_death_is_reported() {
    model(|| {
        let w = World::new();
        let m = Arc::new(ShmMutex::new());
        let dies = {
            let (m, env) = (m.clone(), w.env(1));
            thread::spawn(move || {
                assert_eq!(m.acquire(&env, None, false), Ok(false));
                env.die(); // killed while holding the lock
            })
        };
        let other = {
            let (m, env) = (m.clone(), w.env(2));
            thread::spawn(move || {
                let died = m.acquire(&env, None, false).unwrap();
                m.release(&env);
                died
            })
        };
        dies.join().unwrap();
        let other_saw_death = other.join().unwrap();
        let env = w.env(3);
        // Whoever comes after the death learns about it.
        assert_eq!(m.acquire(&env, None, false), Ok(true));
        // `other` either ran before the victim locked (clean) or after its
        // death (told so) — never while it held the lock.
        let _ = other_saw_death;
        m.release(&env);
    });
}

#[test]
fn loom_rwlock_readers_writer_exclusion() {
    model(|| {
        let w = World::new();
        let l = Arc::new(ShmRwLock::new());
        let data = Arc::new(UnsafeCell::new(0u32));
        let writer = {
            let (l, data, env) = (l.clone(), data.clone(), w.env(1));
            thread::spawn(move || {
                assert_eq!(l.acquire_write(&env, None, false), Ok(false));
                // SAFETY: the write lock is held; loom checks exclusivity.
                data.with_mut(|p| unsafe { *p += 1 });
                l.release_write(&env);
            })
        };
        let reader = {
            let (l, data, env) = (l.clone(), data.clone(), w.env(2));
            thread::spawn(move || {
                assert_eq!(l.acquire_read(&env, None, false), Ok(false));
                // SAFETY: a read lock is held; loom checks no writer overlaps.
                let v = data.with(|p| unsafe { *p });
                l.release_read(&env);
                v
            })
        };
        writer.join().unwrap();
        let v = reader.join().unwrap();
        assert!(v <= 1);
        assert_eq!(l.reader_count(), 0);
    });
}

#[test]
fn loom_rwlock_dead_reader_does_not_block_writer() {
    model(|| {
        let w = World::new();
        let l = Arc::new(ShmRwLock::new());
        let reader = {
            let (l, env) = (l.clone(), w.env(1));
            thread::spawn(move || {
                assert_eq!(l.acquire_read(&env, None, false), Ok(false));
                env.die();
            })
        };
        let writer = {
            let (l, env) = (l.clone(), w.env(2));
            thread::spawn(move || {
                let died = l.acquire_write(&env, None, false).unwrap();
                l.release_write(&env);
                died
            })
        };
        reader.join().unwrap();
        let _ = writer.join().unwrap();
        let env = w.env(3);
        // After the reader's death nobody is left holding it.
        assert!(l.acquire_write(&env, None, false).is_ok());
        assert_eq!(l.reader_count(), 0);
        l.release_write(&env);
    });
}

#[test]
fn loom_refcount_concurrent_last_releases_reclaim_once() {
    model(|| {
        let w = World::new();
        let r = Arc::new(ShmRefCount::new());
        let reclaims = Arc::new(LoomU32::new(0));
        let owner = w.env(0);
        r.init_with(&owner).unwrap();
        r.acquire_with(&w.env(1)).unwrap();
        r.acquire_with(&w.env(2)).unwrap();
        assert_eq!(r.release_with(&owner), Ok(Released::StillReferenced));
        let hs: Vec<_> = (1..3)
            .map(|slot| {
                let (r, n, env) = (r.clone(), reclaims.clone(), w.env(slot));
                thread::spawn(move || {
                    if r.release_with(&env).unwrap() == Released::Reclaimed {
                        n.fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(reclaims.load(Ordering::SeqCst), 1);
        assert!(r.is_reclaimed());
    });
}

#[test]
fn loom_refcount_acquire_races_last_release() {
    model(|| {
        let w = World::new();
        let r = Arc::new(ShmRefCount::new());
        let owner = w.env(1);
        r.init_with(&owner).unwrap();
        let releaser = {
            let r = r.clone();
            thread::spawn(move || r.release_with(&owner).unwrap())
        };
        let getter = {
            let (r, env) = (r.clone(), w.env(2));
            thread::spawn(move || {
                let got = r.acquire_with(&env);
                let rel = got.ok().map(|()| r.release_with(&env).unwrap());
                (got.is_ok(), rel)
            })
        };
        let first = releaser.join().unwrap();
        let (got, second) = getter.join().unwrap();
        let reclaims = [Some(first), second]
            .iter()
            .filter(|x| **x == Some(Released::Reclaimed))
            .count();
        assert_eq!(reclaims, 1, "exactly one reclamation");
        if !got {
            assert_eq!(first, Released::Reclaimed);
        }
        assert!(r.is_reclaimed());
    });
}

#[test]
fn loom_refcount_dead_holder_is_reclaimed_once() {
    model(|| {
        let w = World::new();
        let r = Arc::new(ShmRefCount::new());
        let a = w.env(1);
        r.init_with(&a).unwrap();
        r.acquire_with(&w.env(2)).unwrap();
        let victim = {
            let r = r.clone();
            thread::spawn(move || {
                // Dies in the middle of its updates.
                r.acquire_with(&a).unwrap();
                let _ = r.release_with(&a);
                a.die();
            })
        };
        let survivor = {
            let (r, env) = (r.clone(), w.env(2));
            thread::spawn(move || r.release_with(&env).unwrap() == Released::Reclaimed)
        };
        victim.join().unwrap();
        let s = survivor.join().unwrap();
        let rep = r.reclaim_dead_with(&w.env(3));
        assert_eq!(usize::from(s) + usize::from(rep.reclaimed), 1);
        assert!(r.is_reclaimed());
        assert_eq!(r.count(), 0);
    });
}
