//! `fastio top` as a person uses it: in a real terminal (tmux: start it,
//! send keys, capture the screen) beside a running streaming pipeline, and
//! its bad states with real processes: a context whose owner was
//! SIGKILLed (then collected by `fastio shm gc`), and something in
//! `/dev/shm` that is not a context. Needs tmux (`.ci/run` installs it).

mod common;

use std::path::Path;

use common::{example, fastio, hold};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The tests of this file one at a time: the live `fastio top` of one
/// opens every context it shows on each refresh, and a context open
/// anywhere is one `fastio shm gc` must (and does) leave alone, so it
/// would race the other test's collection of a dead owner's context.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn tmux(args: &[&str]) -> std::process::Output {
    Command::new("tmux").args(args).output().expect("run tmux")
}

fn tmux_present() -> bool {
    let ok = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok || std::env::var_os("CI").is_none(),
        "tmux is required in CI (bash .ci/run installs it)"
    );
    ok
}

/// The screen of tmux session `s` until `want` holds (bounded: 60 s).
fn screen_until(s: &str, want: impl Fn(&str) -> bool) -> String {
    let t0 = Instant::now();
    let mut last = String::new();
    while t0.elapsed() < Duration::from_secs(60) {
        let out = tmux(&["capture-pane", "-p", "-t", s]);
        last = String::from_utf8_lossy(&out.stdout).into_owned();
        if want(&last) {
            return last;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("the screen never showed what was wanted; last screen:\n{last}");
}

/// Kills the tmux session when dropped (also when a test fails).
struct Session(String);

impl Drop for Session {
    fn drop(&mut self) {
        let _ = tmux(&["kill-session", "-t", &self.0]);
    }
}

#[test]
fn top_in_a_terminal_shows_a_running_stream_live_and_quits_on_q() {
    let _serial = one_at_a_time();
    if !tmux_present() {
        return;
    }
    let op = example("fio-streamop");
    let dir = std::env::temp_dir().join(format!("fastio-top-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let yaml = dir.join("s.yaml");
    let array = "type: array, element-type: uint32, shape: [-1, 64]";
    std::fs::write(
        &yaml,
        format!(
            "api-version: 0.5.0\nname: toptest\noperators:\n\
             - name: camera\n  container: {{image: local, command: [{o}, source, v], variables: {{PAUSE_US: '2000'}}}}\n  output: [{{name: v, {array}}}]\n\
             - name: viewer\n  container: {{image: local, command: [{o}, sink, v]}}\n  input: [{{from: camera, name: v, {array}}}]\n\
             streaming:\n  duration: 120\n  max-shape:\n    camera/v: [8, 64]\n",
            o = op.display()
        ),
    )
    .unwrap();
    let log = dir.join("run.log");
    let mut run = Command::new(fastio())
        .args(["run", yaml.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    // The run is up once its context is (top lists pipeline runs first).
    let t0 = Instant::now();
    while !top_once().contains("operator ") {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the pipeline did not start: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let name = format!("fastio-top-{}", std::process::id());
    let session = Session(name.clone());
    let started = tmux(&[
        "new-session",
        "-d",
        "-s",
        &name,
        "-x",
        "200",
        "-y",
        "50",
        &format!("{} top --interval 0.5", fastio()),
    ]);
    assert!(started.status.success(), "{started:?}");
    // Other pipelines may be running on this machine: move the selection
    // (`j`) until it is ours, as a person would.
    let t0 = Instant::now();
    loop {
        let out = tmux(&["capture-pane", "-p", "-t", &name]);
        let s = String::from_utf8_lossy(&out.stdout);
        if s.contains("camera/v") {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "our run never showed:\n{s}"
        );
        if s.contains("operators of") {
            tmux(&["send-keys", "-t", &name, "j"]);
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let screen = screen_until(&name, |s| {
        s.contains("operators of") && s.contains("camera/v") && s.contains(" fps")
    });
    for want in [
        "fastio top",
        "contexts",
        "camera",
        "viewer",
        "fastio.stream/camera/v",
        "allocations of",
        "published",
    ] {
        assert!(screen.contains(want), "{want:?} missing:\n{screen}");
    }
    // The camera's frames out grow between refreshes.
    let frames = |s: &str| -> u64 {
        s.lines()
            .find(|l| {
                l.contains("│camera") || l.trim_start_matches(['│', ' ']).starts_with("camera ")
            })
            .and_then(|l| {
                // operator, pid, then the numbers: the largest whole one is
                // frames out (the pid, which may be larger, is skipped).
                l.split(['│', ' '])
                    .filter(|w| !w.is_empty())
                    .skip(2)
                    .filter_map(|w| w.parse::<u64>().ok())
                    .max()
            })
            .unwrap_or(0)
    };
    let first = frames(&screen);
    let later = screen_until(&name, |s| frames(s) > first);
    assert!(frames(&later) > first);
    // `s` changes the allocations' order; `q` quits.
    assert!(tmux(&["send-keys", "-t", &name, "s"]).status.success());
    screen_until(&name, |s| s.contains("sort allocations by name"));
    assert!(tmux(&["send-keys", "-t", &name, "q"]).status.success());
    let t0 = Instant::now();
    while tmux(&["has-session", "-t", &name]).status.success() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "top did not quit on q"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(session);
    // Stop the run as Ctrl-C would: the driver stops its operators.
    let _ = Command::new("kill")
        .args(["-INT", &run.id().to_string()])
        .status();
    let t0 = Instant::now();
    while run.try_wait().unwrap().is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the run did not stop on SIGINT"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn top_once() -> String {
    let out = Command::new(fastio())
        .args(["top", "--once"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn top_marks_a_dead_owner_and_a_non_context_and_gc_cleans_the_dead() {
    let _serial = one_at_a_time();
    // A named context whose owner is SIGKILLed: it stays in /dev/shm.
    // Its own prefix: no other context's creation collects it first.
    let prefix = format!("fastiotop{}", std::process::id());
    let (mut owner, name, _) = hold(&["named"], &[("PREFIX", prefix)]);
    owner.kill().unwrap();
    owner.wait().unwrap();
    // Something in /dev/shm that is no context at all.
    let junk = format!(
        "fastio-{:032x}",
        u128::from(std::process::id()) << 64 | 0xbad
    );
    let junk_path = format!("/dev/shm/{junk}");
    // Removed even when an assertion below fails.
    struct Remove(String);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let _junk_guard = Remove(junk_path.clone());
    std::fs::write(&junk_path, vec![0x5Au8; 8192]).unwrap();
    std::fs::set_permissions(
        &junk_path,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let text = top_once();
    let row = text
        .lines()
        .find(|l| l.starts_with(&name))
        .unwrap_or_else(|| panic!("{name} missing:\n{text}"));
    assert!(row.contains("owner dead"), "{row}");
    assert!(text.contains("secret"), "its allocation is listed:\n{text}");
    if let Some(junk_row) = text.lines().find(|l| l.starts_with(&junk)) {
        assert!(junk_row.contains("unreadable"), "{junk_row}");
    }
    // gc collects the dead owner's context; top no longer lists it.
    let gc = Command::new(fastio()).args(["shm", "gc"]).output().unwrap();
    assert!(
        gc.status.success(),
        "{}",
        String::from_utf8_lossy(&gc.stderr)
    );
    assert!(!Path::new(&format!("/dev/shm/{name}")).exists());
    assert!(!top_once().contains(&name));
}
