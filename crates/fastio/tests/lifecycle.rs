//! Context life cycle across processes: attaching through the environment,
//! capacity limits, the owner ending (cleanly or by `SIGKILL`), and
//! corrupted control data.

mod common;

use std::process::{Command, Stdio};

use common::{ROLE, park, prefix, spawn, var, wait_for};
use fastio::{CONTEXT_ENV, Context, ContextOptions, Error};

const ENTRY: &str = "child_entry";

/// Child side of every test in this file; a no-op unless `ROLE` is set.
#[test]
fn child_entry() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    match role.as_str() {
        // An operator hitting each capacity limit of a small context.
        "limits" => {
            let ctx = Context::from_env().unwrap();
            let err = ctx.create(64 * 4096 + 1).unwrap_err();
            assert!(
                matches!(
                    err,
                    Error::CapacityExceeded {
                        resource: "bytes",
                        ..
                    }
                ),
                "{err}"
            );
            let mut kept = Vec::new();
            let err = loop {
                match ctx.create(1) {
                    Ok(a) => kept.push(a),
                    Err(e) => break e,
                }
            };
            assert!(
                matches!(
                    err,
                    Error::CapacityExceeded {
                        resource: "allocations",
                        limit: 8
                    }
                ),
                "{err}"
            );
            for (i, a) in kept.iter().enumerate().take(4) {
                a.publish(&format!("n{i}")).unwrap();
            }
            let err = kept[4].publish("n4").unwrap_err();
            assert!(
                matches!(
                    err,
                    Error::CapacityExceeded {
                        resource: "published names",
                        limit: 4
                    }
                ),
                "{err}"
            );
        }
        // A job owner: creates a context, publishes, reports its handle,
        // then either ends or waits to be killed.
        "owner" => {
            let ctx = Context::new(
                &ContextOptions::new()
                    .capacity(1 << 20)
                    .prefix(var("PREFIX")),
            )
            .unwrap();
            let a = ctx.create(4096).unwrap();
            a.publish("data").unwrap();
            std::fs::write(var("HANDLE_FILE"), ctx.handle()).unwrap();
            if var("MODE") == "park" {
                park();
            }
            wait_for("go", || std::fs::metadata(var("GO_FILE")).is_ok());
        }
        other => panic!("unknown role {other}"),
    }
}

#[test]
fn capacities_are_enforced_for_attached_operators() {
    let ctx = Context::new(
        &ContextOptions::new()
            .capacity(64 * 4096)
            .max_allocations(8)
            .max_names(4)
            .prefix(prefix()),
    )
    .unwrap();
    assert!(spawn(ENTRY, &ctx, "limits", &[]).success());
    // The operator's references died with it; its names stay published.
    assert_eq!(ctx.names().unwrap().len(), 4);
    let s = ctx.stats().unwrap();
    assert_eq!(s.live_allocations, 4);
    ctx.check().unwrap();
}

#[test]
fn attaching_without_a_handle_is_a_clear_error() {
    let err = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", ENTRY, "-q"])
        .env(ROLE, "limits")
        .env_remove(CONTEXT_ENV)
        .output()
        .unwrap();
    assert!(!err.status.success());
    // libtest reports the child's panic on stdout.
    let text = String::from_utf8_lossy(&err.stdout);
    assert!(text.contains("FASTIO_CONTEXT"), "{text}");
    let err = Context::attach("fastiotest-no-such-context").unwrap_err();
    assert!(
        matches!(err, Error::Shm(shm_core::Error::NotFound)),
        "{err}"
    );
}

fn spawn_owner(mode: &str, dir: &std::path::Path, pfx: &str) -> (common::Guard, String) {
    let handle_file = dir.join("handle");
    let go = dir.join("go");
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", ENTRY, "--nocapture", "-q"])
        .env(ROLE, "owner")
        .env("PREFIX", pfx)
        .env("MODE", mode)
        .env("HANDLE_FILE", &handle_file)
        .env("GO_FILE", &go)
        .stdout(Stdio::null());
    let child = common::Guard(cmd.spawn().unwrap());
    wait_for("handle", || {
        std::fs::metadata(&handle_file).is_ok_and(|m| m.len() > 0)
    });
    (child, std::fs::read_to_string(&handle_file).unwrap())
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("fastio-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn owner_ending_closes_the_context_and_leaves_nothing_in_dev_shm() {
    let dir = scratch("owner-ends");
    let pfx = format!("{}-a", prefix());
    let (mut owner, handle) = spawn_owner("end", &dir, &pfx);
    let op = Context::attach(&handle).unwrap();
    let data = op.get("data").unwrap();
    std::fs::write(dir.join("go"), b"").unwrap();
    assert!(owner.success());
    // Closed for new work; what is held stays valid.
    assert!(matches!(op.create(10), Err(Error::ContextClosed)));
    assert!(matches!(op.get("data"), Err(Error::ContextClosed)));
    assert_eq!(data.map().unwrap().len(), 4096);
    assert!(
        shm_core::list_segments(Some(&pfx)).unwrap().is_empty(),
        "unlinked by the owner"
    );
    drop(data);
    drop(op);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn killed_owner_is_collected_once_every_participant_is_gone() {
    let dir = scratch("owner-killed");
    let pfx = format!("{}-b", prefix());
    let (mut owner, handle) = spawn_owner("park", &dir, &pfx);
    let op = Context::attach(&handle).unwrap();
    owner.kill9();
    // The operator keeps working in the orphaned context.
    let a = op.get("data").unwrap();
    assert_eq!(a.map().unwrap().len(), 4096);
    assert_eq!(shm_core::list_segments(Some(&pfx)).unwrap().len(), 1);
    assert!(
        shm_core::gc(Some(&pfx)).unwrap().is_empty(),
        "in use: not collected"
    );
    drop(a);
    drop(op);
    // Nobody has it open: the next context created with the prefix (or
    // `fastio shm gc`) removes it.
    let next = Context::new(&ContextOptions::new().capacity(4096).prefix(pfx.clone())).unwrap();
    let left = shm_core::list_segments(Some(&pfx)).unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].name, next.handle());
    drop(next);
    assert!(shm_core::list_segments(Some(&pfx)).unwrap().is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn another_handle_of_the_segment_cannot_reference_the_heap() {
    let ctx = Context::new(&ContextOptions::new().capacity(1 << 20).prefix(prefix())).unwrap();
    let mut a = ctx.create(4096).unwrap();
    let mut m = a.map_mut().unwrap();
    m[0] = 7;
    // Safe code opening the same object again gets no typed reference
    // into the heap that `m` lends out (only the raw pointer API).
    let seg = shm_core::Segment::open(ctx.handle()).unwrap();
    let last = shm_core::Offset(seg.len() - 8);
    assert!(matches!(
        seg.words(last, 1),
        Err(shm_core::Error::LentOut { .. })
    ));
    assert!(matches!(
        seg.at::<std::sync::atomic::AtomicU64>(last),
        Err(shm_core::Error::LentOut { .. })
    ));
    assert_eq!(m[0], 7);
}
