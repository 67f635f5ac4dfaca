//! A second Unix user on the same machine (created here; the test drops to
//! it with `setpriv`): it cannot attach to, list, read, map or `gc` our
//! contexts, named or anonymous, nor find a named one's object name; the
//! driver's private output directory is its owner's alone, and a given
//! one has the modes the umask makes. Needs root (CI is); elsewhere the
//! tests say so and pass only outside CI.

mod common;

use std::path::{Path, PathBuf};

use common::{example, fastio, hold};
use std::process::{Command, Output};

const OTHER: &str = "fastio-other";

/// Makes sure the second user exists; false when we cannot (not root).
fn other_user() -> bool {
    let exists = |_: ()| {
        Command::new("id")
            .arg(OTHER)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !exists(()) {
        let _ = Command::new("useradd")
            .args(["--no-create-home", "--shell", "/usr/sbin/nologin", OTHER])
            .output();
    }
    let ok = exists(()) && rustix_is_root();
    assert!(
        ok || std::env::var_os("CI").is_none(),
        "CI runs as root and must be able to create user {OTHER}"
    );
    if !ok {
        eprintln!("skipped: needs root to create and become another user");
    }
    ok
}

fn rustix_is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Runs `program args` as the other user.
fn as_other(program: &str, args: &[&str]) -> Output {
    Command::new("setpriv")
        .args([
            &format!("--reuid={OTHER}"),
            &format!("--regid={OTHER}"),
            "--clear-groups",
            program,
        ])
        .args(args)
        .output()
        .expect("run setpriv")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn another_user_cannot_reach_our_named_context_in_any_way() {
    if !other_user() {
        return;
    }
    let shmfill = example("fio-shmfill");
    let (mut child, name, _) = hold(&["named"], &[]);
    // Ours: attaches and reads.
    let own = Command::new(&shmfill)
        .args(["attach", &name])
        .output()
        .unwrap();
    assert!(
        text(&own).contains("read [90, 90, 90, 90, 90, 90, 90, 90]"),
        "{}",
        text(&own)
    );
    // The name carries 128 random bits: nothing to guess.
    let hex = name.rsplit('-').next().unwrap();
    assert!(
        hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()),
        "{name}"
    );
    let path = format!("/dev/shm/{name}");
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
        0o600
    );
    // Theirs: even knowing the name, no attach, no read, no map.
    let attach = as_other(shmfill.to_str().unwrap(), &["attach", &name]);
    assert_eq!(attach.status.code(), Some(1), "{}", text(&attach));
    assert!(
        text(&attach).contains("Permission denied"),
        "{}",
        text(&attach)
    );
    assert!(!text(&attach).contains("read ["));
    let cat = as_other("cat", &[&path]);
    assert!(
        !cat.status.success() && cat.stdout.is_empty(),
        "{}",
        text(&cat)
    );
    let ls = as_other(fastio(), &["shm", "ls"]);
    assert!(ls.status.success(), "{}", text(&ls));
    assert!(
        !text(&ls).contains(&name),
        "their ls shows ours: {}",
        text(&ls)
    );
    let gc = as_other(fastio(), &["shm", "gc"]);
    assert!(gc.status.success(), "{}", text(&gc));
    assert!(Path::new(&path).exists(), "their gc removed ours");
    // Ours still works after all that.
    let own = Command::new(&shmfill)
        .args(["attach", &name])
        .output()
        .unwrap();
    assert!(text(&own).contains("read [90"), "{}", text(&own));
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    assert!(!Path::new(&path).exists(), "the owner's exit removes it");
}

#[test]
fn another_user_cannot_take_our_anonymous_context_through_proc() {
    if !other_user() {
        return;
    }
    let (mut child, handle, pid) = hold(&["anonymous"], &[]);
    let fd = handle.strip_prefix("fd:").expect("an anonymous handle");
    let path = format!("/proc/{pid}/fd/{fd}");
    assert!(std::fs::File::open(&path).is_ok(), "we can open our own");
    let cat = as_other("cat", &[&path]);
    assert!(
        !cat.status.success() && cat.stdout.is_empty(),
        "{}",
        text(&cat)
    );
    assert!(text(&cat).contains("Permission denied"), "{}", text(&cat));
    let attach = as_other(
        example("fio-shmfill").to_str().unwrap(),
        &["attach", &format!("/proc/{pid}/fd/{fd}")],
    );
    assert!(!text(&attach).contains("read ["), "{}", text(&attach));
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
}

const STREAM_OUTPUT: &str = "api-version: 0.5.0\nname: files\noperators:\n\
- name: writer\n  container: {image: sh, command: [sh, -c, 'echo data > \"$FASTIO_OUTPUT/writer/files/out.txt\"; echo wrote']}\n  \
output:\n  - {name: files, type: stream, element-type: text, path: /out/files}\n";

fn mode(p: &Path) -> u32 {
    std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(p).unwrap().permissions()) & 0o777
}

#[test]
fn driver_output_directories_have_the_modes_a_user_expects() {
    if !other_user() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("other-users-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let yaml = dir.join("p.yaml");
    std::fs::write(&yaml, STREAM_OUTPUT).unwrap();
    // No --output: a private temporary directory.
    let run = Command::new("sh")
        .args([
            "-c",
            &format!("umask 022; {} run {}", fastio(), yaml.display()),
        ])
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", text(&run));
    let out = text(&run)
        .lines()
        .find_map(|l| l.strip_prefix("output: ").map(PathBuf::from))
        .expect("the run names its output directory");
    assert_eq!(mode(&out), 0o700, "{}", out.display());
    let listing = as_other("ls", &[out.to_str().unwrap()]);
    assert!(!listing.status.success(), "{}", text(&listing));
    let file = out.join("writer/files/out.txt");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "data\n");
    let _ = std::fs::remove_dir_all(&out);
    // A given --output: what the umask makes, as mkdir -p would.
    let given = dir.join("given");
    let run = Command::new("sh")
        .args([
            "-c",
            &format!(
                "umask 022; {} run {} --output {}",
                fastio(),
                yaml.display(),
                given.display()
            ),
        ])
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", text(&run));
    assert_eq!(mode(&given), 0o755);
    assert_eq!(mode(&given.join("writer/files")), 0o755);
    assert_eq!(mode(&given.join("writer/files/out.txt")), 0o644);
    let _ = std::fs::remove_dir_all(&dir);
}

const SHARE_GROUP: &str = "fastio-share";
const THIRD: &str = "fastio-third";

/// The group `fastio-share` with the other user in it, and a third user
/// outside it; the group's id.
fn share_group() -> u32 {
    let run = |cmd: &str, args: &[&str]| {
        let _ = Command::new(cmd).args(args).output();
    };
    run("groupadd", &[SHARE_GROUP]);
    run(
        "useradd",
        &["--no-create-home", "--shell", "/usr/sbin/nologin", THIRD],
    );
    run("usermod", &["-aG", SHARE_GROUP, OTHER]);
    let out = Command::new("getent")
        .args(["group", SHARE_GROUP])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split(':')
        .nth(2)
        .and_then(|g| g.trim().parse().ok())
        .expect("the share group exists")
}

/// Runs `program args` as `user` with its supplementary groups.
fn as_user(user: &str, program: &str, args: &[&str]) -> Output {
    Command::new("setpriv")
        .args([
            &format!("--reuid={user}"),
            &format!("--regid={user}"),
            "--init-groups",
            program,
        ])
        .args(args)
        .output()
        .expect("run setpriv")
}

#[test]
fn a_context_shared_with_a_group_is_open_to_its_members_who_ask_and_nobody_else() {
    if !other_user() {
        return;
    }
    let gid = share_group();
    let shmfill = example("fio-shmfill");
    let exe = shmfill.to_str().unwrap();
    let (mut child, name, _) = hold(&["shared", &gid.to_string()], &[]);
    let path = format!("/dev/shm/{name}");
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(mode(Path::new(&path)), 0o660);
    assert_eq!(std::os::unix::fs::MetadataExt::gid(&meta), gid);
    let g = gid.to_string();
    // A member that asks for the share: attaches and reads.
    let member = as_user(OTHER, exe, &["attach-shared", &name, &g]);
    assert!(
        text(&member).contains("read [90, 90, 90, 90, 90, 90, 90, 90]"),
        "{}",
        text(&member)
    );
    // A member that does not ask: refused (sharing is explicit on both sides).
    let plain = as_user(OTHER, exe, &["attach", &name]);
    assert!(
        text(&plain).contains("owned by another user"),
        "{}",
        text(&plain)
    );
    // Someone outside the group: the file system refuses.
    let third = as_user(THIRD, exe, &["attach-shared", &name, &g]);
    assert!(
        text(&third).contains("Permission denied"),
        "{}",
        text(&third)
    );
    // The owner's own plain attach still works.
    let own = Command::new(&shmfill)
        .args(["attach", &name])
        .output()
        .unwrap();
    assert!(text(&own).contains("read [90"), "{}", text(&own));
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
}

#[test]
fn an_unshared_context_made_group_readable_afterwards_is_refused() {
    if !other_user() {
        return;
    }
    let gid = share_group();
    let (mut child, name, _) = hold(&["named"], &[]);
    let path = format!("/dev/shm/{name}");
    // Someone (not the library) opens it up: mode 0660, group changed.
    let st = Command::new("chgrp")
        .args([SHARE_GROUP, &path])
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o660)).unwrap();
    let shmfill = example("fio-shmfill");
    let member = as_user(
        OTHER,
        shmfill.to_str().unwrap(),
        &["attach-shared", &name, &gid.to_string()],
    );
    assert!(
        text(&member).contains("does not say the owner shares it"),
        "{}",
        text(&member)
    );
    drop(child.stdin.take());
    let _ = child.wait();
}
