//! `fastio shm ls` and `fastio shm gc` against real segments.

use std::process::Command;

use shm_core::{Segment, SegmentOptions};

fn fastio(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_fastio"))
        .args(args)
        .output()
        .expect("run fastio")
}

/// Held by every test of this file for its whole length. A segment is
/// alive while any handle of it is open, and a process another test thread
/// forks to run `fastio` holds a copy of every descriptor this process
/// has until it execs: a segment dropped meanwhile still reads as alive
/// (`cargo xtask flake --load 2` caught one). No test here forks while
/// another looks at liveness.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn listed(prefix: &str) -> Vec<serde_json::Value> {
    let out = fastio(&["shm", "ls", "--prefix", prefix, "--json"]);
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice::<serde_json::Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn lists_alive_then_collects_dead_segments() {
    let _serial = one_at_a_time();
    // Our own prefix, so parallel tests and other users' segments are untouched.
    let prefix = format!("shmcoretest-cli{}", std::process::id());
    let seg = Segment::create(
        &SegmentOptions::new(8192)
            .prefix(prefix.clone())
            .persist(true),
    )
    .unwrap();
    let rows = listed(&prefix);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["alive"], true);
    assert_eq!(rows[0]["valid"], true);
    assert_eq!(rows[0]["creator_pid"], std::process::id());
    // gc leaves a segment that a live process has open.
    let out = fastio(&["shm", "gc", "--prefix", &prefix]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("0 segment(s) removed"),
        "{out:?}"
    );
    drop(seg); // persisted: it stays, now with no one attached
    let rows = listed(&prefix);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["alive"], false);
    let table = String::from_utf8(fastio(&["shm", "ls", "--prefix", &prefix]).stdout).unwrap();
    assert!(
        table.lines().nth(1).is_some_and(|l| l.ends_with("dead")),
        "{table}"
    );
    let out = fastio(&["shm", "gc", "--prefix", &prefix]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("1 segment(s) removed"),
        "{out:?}"
    );
    assert!(listed(&prefix).is_empty());
}

#[test]
fn bad_prefix_is_one_line_and_non_zero() {
    let _serial = one_at_a_time();
    let out = fastio(&["shm", "ls", "--prefix", "../etc"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("fastio: listing /dev/shm:"), "{err}");
}

/// A dead, persisted segment of `prefix`: its name.
fn dead_segment(prefix: &str) -> String {
    let seg = Segment::create(
        &SegmentOptions::new(8192)
            .prefix(prefix.to_owned())
            .persist(true),
    )
    .unwrap();
    let name = seg.name().unwrap().to_owned();
    drop(seg);
    name
}

/// Issue 28: `fastio shm gc NAME` collects that one segment (and refuses a
/// live one by name), `--run PID` the dead ones that process created, and
/// a name with a newline or bytes that are not UTF-8 is listed escaped and
/// collected by that text, never skipped.
#[test]
fn gc_collects_one_segment_by_name_or_one_runs_and_odd_names_are_escaped() {
    let _serial = one_at_a_time();
    use std::os::unix::ffi::OsStringExt;
    let prefix = format!("shmcoretest-one{}", std::process::id());
    let (a, b) = (dead_segment(&prefix), dead_segment(&prefix));
    let live = Segment::create(&SegmentOptions::new(8192).prefix(prefix.clone())).unwrap();
    let live_name = live.name().unwrap().to_owned();

    let out = fastio(&["shm", "gc", &a]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 segment(s) removed"));
    let names: Vec<String> = listed(&prefix)
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(!names.contains(&a) && names.contains(&b) && names.contains(&live_name));

    let out = fastio(&["shm", "gc", &live_name]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("open in a live process"), "{err}");
    let out = fastio(&["shm", "gc", &format!("{prefix}-nonesuch")]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");

    // A copy of b under a name with a newline and a byte that is not UTF-8.
    let odd =
        std::ffi::OsString::from_vec([format!("{prefix}-we\nird").as_bytes(), &[0xff]].concat());
    std::fs::copy(
        format!("/dev/shm/{b}"),
        std::path::Path::new("/dev/shm").join(&odd),
    )
    .unwrap();
    let escaped = format!("{prefix}-we\\nird\\xff");
    let table = String::from_utf8(fastio(&["shm", "ls", "--prefix", &prefix]).stdout).unwrap();
    assert!(table.lines().any(|l| l.starts_with(&escaped)), "{table}");
    assert_eq!(
        table.lines().count(),
        4,
        "header, b, the odd one, live:\n{table}"
    );
    let out = fastio(&["shm", "gc", &escaped]);
    assert!(out.status.success(), "{out:?}");
    assert!(!std::path::Path::new("/dev/shm").join(&odd).exists());

    // --run: the dead segments a process created (ours), not another's.
    let out = fastio(&["shm", "gc", "--prefix", &prefix, "--run", "1"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("0 segment(s) removed"));
    let me = std::process::id().to_string();
    let out = fastio(&["shm", "gc", "--prefix", &prefix, "--run", &me]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("1 segment(s) removed"),
        "{out:?}"
    );
    let left: Vec<_> = listed(&prefix);
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0]["name"], live_name.as_str());
    drop(live);
}
