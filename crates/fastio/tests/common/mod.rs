//! Child-process plumbing for the multi-process tests.

#![allow(dead_code)]

use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use fastio::{CONTEXT_ENV, Context, ContextOptions};

/// Environment variable that selects a child's role.
pub const ROLE: &str = "FASTIO_TEST_ROLE";

/// Segment prefix of this test process's contexts.
pub fn prefix() -> String {
    format!("fastiotest-{}", std::process::id())
}

/// A context owned by the test, with small capacities.
pub fn context(capacity: u64) -> Context {
    Context::new(&ContextOptions::new().capacity(capacity).prefix(prefix())).unwrap()
}

/// Re-runs this test binary's `entry` test as a child with `role`, attached
/// to `ctx` through the environment.
pub fn spawn(entry: &str, ctx: &Context, role: &str, vars: &[(&str, String)]) -> Guard {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", entry, "--nocapture", "--test-threads=1", "-q"])
        .env(ROLE, role)
        .env(CONTEXT_ENV, ctx.handle())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    Guard(cmd.spawn().expect("spawn child"))
}

/// A child that is killed if the test fails before reaping it.
pub struct Guard(pub Child);

impl Guard {
    /// Waits (bounded) and returns whether the child succeeded.
    pub fn success(&mut self) -> bool {
        self.wait(Duration::from_secs(60)).success()
    }

    pub fn wait(&mut self, limit: Duration) -> ExitStatus {
        let t0 = Instant::now();
        loop {
            if let Some(st) = self.0.try_wait().unwrap() {
                return st;
            }
            if t0.elapsed() > limit {
                let _ = self.0.kill();
                let _ = self.0.wait();
                panic!("child {} hung for more than {limit:?}", self.0.id());
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// SIGKILLs and reaps the child.
    pub fn kill9(&mut self) {
        self.0.kill().unwrap();
        let st = self.0.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(st.signal(), Some(9), "child should die by SIGKILL");
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Polls `cond` until it holds, for at most 30 s.
pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Waits until `name` is published in `ctx`.
pub fn wait_published(ctx: &Context, name: &str) {
    wait_for(name, || ctx.names().unwrap().iter().any(|n| n == name));
}

/// Blocks until the parent kills this child (for crash tests).
pub fn park() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// A required environment variable in a child.
pub fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("missing {name}"))
}
