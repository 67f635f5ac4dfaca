//! Helpers shared by the multi-process tests (included with `mod common`).

#![allow(dead_code)]

use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use shm_core::{Offset, Segment};

/// Name prefix of this crate's test segments; `cargo xtask ci` checks that
/// none is left in `/dev/shm` afterwards.
pub const TEST_PREFIX: &str = "shmcoretest";

/// Environment variable that selects a child's role.
pub const ROLE: &str = "SHMCORE_TEST_ROLE";

/// Unique prefix for this test process's named segments.
pub fn prefix() -> String {
    format!("{}-{}", TEST_PREFIX, std::process::id())
}

/// Re-executes the current test binary running only `entry` with `role`.
pub fn spawn(entry: &str, role: &str, vars: &[(&str, String)]) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", entry, "--nocapture", "--test-threads=1", "-q"])
        .env(ROLE, role)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.spawn().expect("spawn child")
}

/// Re-executes `entry` with `role` on `seg` (its name in `SEG`) plus one
/// more variable; the child is killed if the test ends first.
pub fn spawn_on(
    entry: &str,
    seg: &shm_core::Segment,
    role: &str,
    var: (&str, String),
) -> KillOnDrop {
    let name = seg.name().expect("named segment").to_owned();
    KillOnDrop(spawn(entry, role, &[("SEG", name), var]))
}

/// Waits for a child with a bound; a hung child is killed and the test fails.
pub fn wait_bounded(child: &mut Child, limit: Duration) -> ExitStatus {
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("child {} hung for more than {limit:?}", child.id());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Kills (SIGKILL) and reaps a child.
pub fn kill9(child: &mut Child) {
    child.kill().unwrap();
    let st = child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(st.signal(), Some(9), "child should die by SIGKILL");
}

/// Polls `cond` until true or `limit` passes.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    cond()
}

/// Reads a required environment variable in a child.
pub fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("missing {name}"))
}

/// Kills the child if the test panics before reaping it.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// `seg.write_bytes` for tests. These tests never lend out references to
/// segment bytes (only atomics from `at`/`words`), and each copy runs on
/// one thread, which is what the unsafe method asks of its caller.
#[allow(dead_code)]
pub fn write_bytes(seg: &Segment, offset: Offset, src: &[u8]) -> shm_core::Result<()> {
    // SAFETY: see above: no reference other than atomics covers the range,
    // and no other thread of this process touches it during the copy.
    unsafe { seg.write_bytes(offset, src) }
}

/// `seg.read_bytes` for tests (see [`write_bytes`]).
#[allow(dead_code)]
pub fn read_bytes(seg: &Segment, offset: Offset, dst: &mut [u8]) -> shm_core::Result<()> {
    // SAFETY: no `&mut` to segment bytes exists in these tests, and no
    // other thread of this process writes the range during the copy.
    unsafe { seg.read_bytes(offset, dst) }
}

/// `seg.discard_range` for tests: only atomics reference segment bytes here.
#[allow(dead_code)]
pub fn discard_range(seg: &Segment, offset: Offset, len: u64) -> shm_core::Result<()> {
    // SAFETY: these tests hold no reference to segment bytes other than
    // atomics, which the method allows.
    unsafe { seg.discard_range(offset, len) }
}
