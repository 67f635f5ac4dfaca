//! `fastio shm ls` and `fastio shm gc` against real segments.

use std::process::Command;

use shm_core::{Segment, SegmentOptions};

fn fastio(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_fastio"))
        .args(args)
        .output()
        .expect("run fastio")
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
    let out = fastio(&["shm", "ls", "--prefix", "../etc"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("fastio: listing /dev/shm:"), "{err}");
}
