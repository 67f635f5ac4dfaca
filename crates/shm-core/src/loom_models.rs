//! Loom models of the mutex state machine.
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
use loom::sync::atomic::AtomicBool;
use loom::thread;

use crate::ShmMutex;
use crate::sync::{AtomicU32, Env, Ordering, make_token, split_token};

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
        self.world.dead[(self.token() & crate::sync::TOKEN_SLOT_MASK) as usize]
            .store(true, Ordering::SeqCst);
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
