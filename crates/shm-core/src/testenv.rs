//! An in-memory [`Env`] for unit tests (runs under Miri): liveness is a
//! table of killed tokens, waiting is a short sleep.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::sync::{AtomicU32, Env, make_token, split_token};

#[derive(Default)]
struct World {
    live: HashSet<u32>,
    dead: HashSet<u32>,
    wakes: usize,
}

/// A fake participant.
pub(crate) struct FakeEnv {
    token: u32,
    world: Arc<Mutex<World>>,
}

impl FakeEnv {
    pub(crate) fn new(slot: u32, generation: u32) -> Self {
        Self::join(Arc::default(), slot, generation)
    }
    pub(crate) fn with_world(other: &FakeEnv, slot: u32, generation: u32) -> Self {
        Self::join(other.world.clone(), slot, generation)
    }
    fn join(world: Arc<Mutex<World>>, slot: u32, generation: u32) -> Self {
        let token = make_token(slot, generation);
        world.lock().unwrap().live.insert(token);
        FakeEnv { token, world }
    }
    pub(crate) fn kill(&self, token: u32) {
        self.world.lock().unwrap().dead.insert(token);
    }
    pub(crate) fn wakes(&self) -> usize {
        self.world.lock().unwrap().wakes
    }
}

impl Env for FakeEnv {
    fn token(&self) -> u32 {
        self.token
    }
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Duration) {
        if word.load(crate::sync::Ordering::Relaxed) == expected {
            std::thread::sleep(timeout.min(Duration::from_millis(1)));
        }
    }
    fn wake(&self, _word: &AtomicU32, _n: u32) {
        self.world.lock().unwrap().wakes += 1;
    }
    fn token_alive(&self, token: u32) -> bool {
        if split_token(token).is_none() {
            return false;
        }
        let w = self.world.lock().unwrap();
        w.live.contains(&token) && !w.dead.contains(&token)
    }
}
