//! `fastio pipeline check | plan` and `fastio run` as a user runs them:
//! exit codes, the error lines with file, line and column, the plan table,
//! the summary, and `--report json`.

mod common;

use std::path::PathBuf;
use std::process::Command;

fn fastio() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fastio"))
}

fn write(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fastio-cli-pipeline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

const SHELL: &str = "\
api-version: 0.5.0
name: shell
parameters:
  code: '4'
operators:
- name: hello
  container: {image: sh, command: [sh, -c, 'echo hello; echo to-stderr >&2']}
- name: sometimes
  container: {image: sh, command: [sh, -c, 'echo oops >&2; exit ${{ code }}']}
  output:
  - {name: note, type: string}
";

#[test]
fn check_exits_0_with_warnings_or_2_with_every_error() {
    let ok = write("ok.yaml", SHELL);
    let out = fastio()
        .args(["pipeline", "check"])
        .arg(&ok)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("ok (2 operators, 1 shared-memory entries)")
    );

    let bad = write(
        "bad.yaml",
        &SHELL
            .replace("name: sometimes", "name: some times")
            .replace("type: string}", "type: strng}"),
    );
    let out = fastio()
        .args(["pipeline", "check"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let file = bad.display().to_string();
    assert!(
        err.contains(&format!("{file}:8:9: error: operators[1].name:")),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "{file}:11:24: error: operators[1].output[0].type:"
        )),
        "{err}"
    );
    assert!(err.contains("2 errors"), "{err}");

    let out = fastio()
        .args(["pipeline", "check", "--param", "nope=1"])
        .arg(&ok)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--param nope: no such parameter"));
}

#[test]
fn plan_prints_entries_and_schedule() {
    let ok = write("plan.yaml", SHELL);
    let out = fastio()
        .args(["pipeline", "plan"])
        .arg(&ok)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("sometimes/note  string  dynamic"), "{text}");
    assert!(text.contains("1: hello, sometimes"), "{text}");
}

#[test]
fn run_reports_success_and_failure() {
    let ok = write("run.yaml", SHELL);
    let out = fastio()
        .args(["run", "--param", "code=0", "--report", "json"])
        .arg(&ok)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // With --report json, stdout is the report alone; every operator line
    // goes to stderr.
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["succeeded"], true);
    assert_eq!(json["operators"].as_array().unwrap().len(), 2);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("[hello] hello"), "{stderr}");
    assert!(stderr.contains("[hello] to-stderr"), "{stderr}");

    let out = fastio().arg("run").arg(&ok).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "fastio: operator sometimes exited with status 4; its last stderr lines:\n  oops"
        ),
        "{err}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("sometimes            exit 4"), "{stdout}");
}

/// The state letter of `/proc/<pid>/stat` and the parent pid; None when
/// the process is gone.
fn proc_state(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command's name (in parentheses, which may hold spaces).
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut w = rest.split_whitespace();
    let state = w.next()?.chars().next()?;
    let ppid = w.next()?.parse().ok()?;
    Some((state, ppid))
}

#[test]
fn a_driver_killed_with_sigkill_takes_its_running_operators_with_it() {
    let file = write(
        "sleeper.yaml",
        "api-version: 0.5.0
name: sleeper
operators:
- name: sleeper
  container: {image: sh, command: [sleep, '60']}
",
    );
    let mut driver = fastio()
        .arg("run")
        .arg(&file)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The operator: the driver's child running `sleep`.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let op = loop {
        let found = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .find(|&pid| {
                proc_state(pid).is_some_and(|(s, ppid)| ppid == driver.id() && s != 'Z')
                    && std::fs::read_to_string(format!("/proc/{pid}/comm"))
                        .is_ok_and(|c| c.trim() == "sleep")
            });
        if let Some(pid) = found {
            break pid;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the operator never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    driver.kill().unwrap();
    driver.wait().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let gone = loop {
        // Gone, or dead and waiting for whoever adopted it to reap it.
        match proc_state(op) {
            None | Some(('Z', _)) => break true,
            Some(_) if std::time::Instant::now() > deadline => break false,
            Some(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    };
    if !gone {
        let _ = Command::new("kill").args(["-9", &op.to_string()]).status();
    }
    assert!(gone, "operator {op} ran on after its driver was killed");
}

/// Issue 28: with no `--output` and no disk stream output, operators still
/// get a directory that exists, is private (0700) and has a fresh,
/// unguessable name; one another user made first under the old name
/// `fastio-run-<pid>` is never it.
#[test]
fn without_output_every_run_gets_a_fresh_private_directory_that_exists() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = std::env::temp_dir().join(format!("fastio-cli-tmpdir-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let yaml = write(
        "writes-output.yaml",
        "api-version: 0.5.0\nname: writes\noperators:\n\
- name: writer\n  container: {image: sh, command: [sh, -c, 'echo data > \"$FASTIO_OUTPUT/note.txt\" && echo \"dir=$FASTIO_OUTPUT\"']}\n",
    );
    let mut dirs = Vec::new();
    for _ in 0..2 {
        let out = fastio()
            .args(["run", yaml.to_str().unwrap()])
            .env("TMPDIR", &tmp)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{text}");
        let dir = text
            .lines()
            .find_map(|l| l.strip_prefix("[writer] dir="))
            .map(PathBuf::from)
            .unwrap_or_else(|| panic!("{text}"));
        assert_eq!(dir.parent(), Some(tmp.as_path()), "{text}");
        let name = dir.file_name().unwrap().to_str().unwrap().to_owned();
        let random = name.rsplit('-').next().unwrap();
        assert!(
            name.starts_with("fastio-run-")
                && random.len() == 16
                && random.chars().all(|c| c.is_ascii_hexdigit()),
            "{name}"
        );
        let meta = std::fs::metadata(&dir).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o700);
        assert_eq!(
            std::fs::read_to_string(dir.join("note.txt")).unwrap(),
            "data\n"
        );
        dirs.push(dir);
    }
    assert_ne!(dirs[0], dirs[1]);
    let _ = std::fs::remove_dir_all(&tmp);
}

/// Issue 28: a closed standard output (`fastio ... | head`) ends every
/// command quietly, as in other Unix tools: no panic, no backtrace, the
/// status a shell gives a process ended by SIGPIPE.
#[test]
fn a_closed_stdout_ends_commands_quietly() {
    let yaml = write("closed-stdout.yaml", SHELL);
    let y = yaml.to_str().unwrap();
    let commands: [&[&str]; 4] = [
        &["pipeline", "plan", y, "--format", "json"],
        &["pipeline", "plan", y, "--format", "dot"],
        &["pipeline", "plan", y],
        &["dtype", "show", "3 * 4 * float32"],
    ];
    for args in commands {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader); // closed before the command writes anything
        let out = fastio()
            .args(args)
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !err.contains("panicked") && !err.contains("backtrace"),
            "{args:?}: {err}"
        );
        assert_eq!(out.status.code(), Some(141), "{args:?}: {err}");
    }
}

/// `fastio run FILE ARGS` twice: with `--report json` (its `failure`) and
/// without (its error line). Asserts they are the same failure.
fn failure_both_ways(file: &std::path::Path, args: &[&str]) -> serde_json::Value {
    let json_run = fastio()
        .arg("run")
        .arg(file)
        .args(args)
        .args(["--report", "json"])
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&json_run.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&json_run.stdout)));
    let failure = report["failure"].clone();
    assert!(failure.is_object(), "{report}");
    let text_run = fastio().arg("run").arg(file).args(args).output().unwrap();
    assert_eq!(json_run.status.code(), text_run.status.code());
    let err = String::from_utf8_lossy(&text_run.stderr);
    let line = err
        .lines()
        .find_map(|l| l.strip_prefix("fastio: "))
        .unwrap_or_else(|| panic!("no error line: {err}"));
    assert!(
        line.starts_with(failure["text"].as_str().unwrap()),
        "{line}\n{failure}"
    );
    // `what`, the report's first field, is the same line.
    assert_eq!(failure["what"], failure["text"], "{failure}");
    // The same failure in the report's operator entry.
    if let Some(op) = failure["operator"].as_str() {
        let o = report["operators"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["name"] == op)
            .unwrap();
        assert_eq!(o["failure"], failure);
    }
    failure
}

/// Issue 29: each failure kind, made by a real process, is one typed value
/// in `--report json` and the CLI's line (the same text), never decoded
/// from what an operator printed.
#[test]
fn each_failure_kind_is_the_same_typed_value_in_the_report_and_the_line() {
    let op = |name: &str, script: &str| {
        format!("- name: {name}\n  container: {{image: sh, command: [sh, -c, '{script}']}}\n")
    };
    let one = |script: &str| {
        format!(
            "api-version: 0.5.0\nname: kinds\noperators:\n{}",
            op("x", script)
        )
    };
    let f = failure_both_ways(
        &write("exit.yaml", &one("echo the operator is fine >&2; exit 3")),
        &[],
    );
    assert_eq!(
        (
            f["kind"].as_str(),
            f["operator"].as_str(),
            f["code"].as_i64()
        ),
        (Some("exited"), Some("x"), Some(3)),
        "{f}"
    );
    assert_eq!(f["text"], "operator x exited with status 3");
    let f = failure_both_ways(&write("signal.yaml", &one("kill -9 $$")), &[]);
    assert_eq!(
        (f["kind"].as_str(), f["signal"].as_i64()),
        (Some("signaled"), Some(9)),
        "{f}"
    );
    let f = failure_both_ways(
        &write("timeout.yaml", &one("sleep 30")),
        &["--timeout", "0.3"],
    );
    assert_eq!(f["kind"], "timed-out", "{f}");
    assert_eq!(f["text"], "operator x timed out");
    // A streaming stage fails; its sink's own failure is the consequence.
    let streamop = common::example("fio-streamop").display().to_string();
    let arr = "type: array, element-type: uint32, shape: [-1, 64]";
    let yaml = format!(
        "api-version: 0.5.0\nname: poison\noperators:\n\
- name: src\n  container: {{image: t, command: [{streamop}, source, v]}}\n  output: [{{name: v, {arr}}}]\n\
- name: mid\n  container: {{image: t, command: [{streamop}, stage, v, w], variables: {{FAIL_AT: '17'}}}}\n  input: [{{from: src, name: v, {arr}}}]\n  output: [{{name: w, {arr}}}]\n\
- name: sink\n  container: {{image: t, command: [{streamop}, sink, w], variables: {{ERRORS_ON_STDOUT: '1'}}}}\n  input: [{{from: mid, name: w, {arr}}}]\n\
streaming:\n  frames: 100000\n  max-shape:\n    src/v: [4, 64]\n    mid/w: [4, 64]\n"
    );
    let file = write("poison.yaml", &yaml);
    let f = failure_both_ways(&file, &[]);
    assert_eq!(
        (
            f["kind"].as_str(),
            f["operator"].as_str(),
            f["frame"].as_u64()
        ),
        (Some("exited"), Some("mid"), Some(17)),
        "{f}"
    );
    let out = fastio()
        .arg("run")
        .arg(&file)
        .args(["--report", "json"])
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sink = report["operators"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "sink")
        .unwrap();
    assert_eq!(sink["outcome"], "stopped", "{sink}");
    assert_eq!(
        sink["failure"],
        serde_json::json!({"kind": "poisoned", "operator": "sink", "host": null,
            "entry": "mid/w", "frame": 17,
            "what": "operator sink stopped: stream mid/w is poisoned from frame 17",
            "text": "operator sink stopped: stream mid/w is poisoned from frame 17"}),
        "{sink}"
    );
}

/// The kernel's CPU wake-up latency target now (PM QoS), or `None` where
/// it cannot be read (not root).
fn cpu_latency_target() -> Option<i32> {
    let b = std::fs::read("/dev/cpu_dma_latency").ok()?;
    Some(i32::from_ne_bytes(b.get(..4)?.try_into().ok()?))
}

#[test]
fn cpu_latency_us_holds_the_kernels_target_for_the_run_and_no_longer() {
    let Some(before) = cpu_latency_target() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs as root: /dev/cpu_dma_latency must be readable"
        );
        eprintln!("skipped: /dev/cpu_dma_latency cannot be read here (not root)");
        return;
    };
    // A value no other request on this machine is likely to hold.
    let want = 7_331;
    assert!(
        before > want,
        "a stricter request is already held: {before}"
    );
    // The operator runs until the test has seen the target (or given up:
    // bounded, 300 s), not for a time the test must look within.
    let go = write("latency-go", "");
    std::fs::remove_file(&go).unwrap();
    let file = write(
        "latency.yaml",
        &format!(
            "api-version: 0.5.0\nname: latency\noperators:\n- name: nap\n  container: {{image: sh, command: [sh, -c, \"i=0; until [ -e '{}' ]; do i=$((i+1)); [ $i -gt 6000 ] && exit 9; sleep 0.05; done\"]}}\n",
            go.display()
        ),
    );
    let mut run = fastio()
        .arg("run")
        .arg(&file)
        .args(["--cpu-latency-us", &want.to_string()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let mut seen = false;
    while run.try_wait().unwrap().is_none() {
        seen |= cpu_latency_target() == Some(want);
        if seen {
            std::fs::write(&go, b"go").unwrap();
        }
        if std::time::Instant::now() > deadline {
            let _ = run.kill();
            panic!("the run hung (the target seen: {seen})");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = run.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(seen, "the target was never {want} while the run lasted");
    assert_eq!(
        cpu_latency_target(),
        Some(before),
        "the request outlived the run"
    );
    // A value the kernel cannot take: one line, exit 2, nothing run.
    let out = fastio()
        .arg("run")
        .arg(&file)
        .args(["--cpu-latency-us", "3000000000"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("--cpu-latency-us 3000000000: at most 2147483647"),
        "{err}"
    );
}
