//! Pipelines across hosts, with real hosts on one machine: each host is a
//! network namespace joined to the others through a bridge in a namespace
//! of its own (veth pairs, addresses this test assigns in 10.77.0.0/24;
//! no packet leaves the namespaces the test made), and each runs its
//! driver in its own mount namespace with a private tmpfs on `/dev/shm`,
//! so no shared memory can pass between "hosts". Every host runs
//! `fastio run FILE --host NAME`; the tests compare checksums printed on
//! the producing and the consuming hosts, kill drivers and operators with
//! SIGKILL and cut links at seeded random points, and check that every
//! host's `/dev/shm` is empty afterwards. Needs root (CI is); elsewhere
//! the cases say so and pass only outside CI.

mod common;
/// Mutual TLS between the namespace hosts, and peers that should not join.
#[path = "hosts/tls.rs"]
mod tls;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{example, fastio, write};

/// Longest any host's run may take in these tests.
const RUN_LIMIT: Duration = Duration::from_secs(180);

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn ip_ok(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What one host's run gave.
#[derive(Debug)]
struct HostRun {
    /// `fastio`'s exit status (128 + n for signal n).
    rc: i32,
    stdout: String,
    stderr: String,
    /// What was left in the host's `/dev/shm`.
    shm_left: Vec<String>,
    /// When the test saw the host's `fastio` exit (polled every 20 ms).
    exited_at: Instant,
}

impl HostRun {
    /// The `checksum NAME HEX SHAPE` lines an operator printed.
    fn checksum(&self, name: &str) -> Option<String> {
        self.stdout.lines().find_map(|l| {
            let rest = l.split_once("] checksum ")?.1;
            let (n, value) = rest.split_once(' ')?;
            (n == name).then(|| value.to_owned())
        })
    }
}

/// `n` hosts `h0..` on a bridge, each with its own `/dev/shm`.
struct Hosts {
    prefix: String,
    n: usize,
    dir: PathBuf,
    running: Vec<(Child, PathBuf)>,
}

impl Hosts {
    /// Makes the namespaces; `None` when this machine cannot (not root).
    fn new(tag: &str, n: usize) -> Option<Hosts> {
        let prefix = format!("fio{}{tag}", std::process::id());
        let dir = std::env::temp_dir().join(format!("{prefix}-dir"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let hosts = Hosts {
            prefix,
            n,
            dir,
            running: Vec::new(),
        };
        let sw = hosts.sw();
        if !ip(&["netns", "add", &sw]) {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must be able to make network namespaces (root)"
            );
            eprintln!("skipped: cannot make a network namespace here (not root)");
            return None;
        }
        ip_ok(&["-n", &sw, "link", "add", "br0", "type", "bridge"]);
        ip_ok(&["-n", &sw, "link", "set", "br0", "up"]);
        for i in 0..n {
            let ns = hosts.ns(i);
            let port = format!("p{i}");
            ip_ok(&["netns", "add", &ns]);
            ip_ok(&[
                "-n", &ns, "link", "add", "eth0", "type", "veth", "peer", "name", &port, "netns",
                &sw,
            ]);
            ip_ok(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{}/24", addr(i)),
                "dev",
                "eth0",
            ]);
            ip_ok(&["-n", &ns, "link", "set", "eth0", "up"]);
            ip_ok(&["-n", &ns, "link", "set", "lo", "up"]);
            ip_ok(&["-n", &sw, "link", "set", &port, "master", "br0"]);
            ip_ok(&["-n", &sw, "link", "set", &port, "up"]);
        }
        Some(hosts)
    }

    fn sw(&self) -> String {
        format!("{}sw", self.prefix)
    }

    fn ns(&self, i: usize) -> String {
        format!("{}h{i}", self.prefix)
    }

    /// The endpoints host `i` listens on and connects to (every host
    /// before it), on `port`.
    fn net_args(&self, i: usize, port: u16) -> Vec<String> {
        let mut a = vec!["--listen".to_owned(), format!("tcp/{}:{port}", addr(i))];
        for j in 0..i {
            a.push("--connect".into());
            a.push(format!("tcp/{}:{port}", addr(j)));
        }
        a
    }

    /// Starts `fastio ARGS` on host `i` (in its namespaces); its index
    /// among the running.
    fn start(&mut self, i: usize, args: &[String]) -> usize {
        self.start_program(i, Path::new(fastio()), args)
    }

    /// Starts `PROGRAM ARGS` on host `i`, as [`Hosts::start`] does.
    fn start_program(&mut self, i: usize, program: &Path, args: &[String]) -> usize {
        let k = self.running.len();
        let pidfile = self.dir.join(format!("pid{k}"));
        let script = "mount -t tmpfs -o size=4g tmpfs /dev/shm || exit 97\n\
             \"$@\" &\n\
             pid=$!\n\
             echo $pid > \"$PIDFILE\"\n\
             wait $pid\n\
             rc=$?\n\
             echo \"__RC__ $rc\"\n\
             echo __LEFT__\n\
             ls -A /dev/shm\n";
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns(i)])
            .args(["unshare", "--mount", "--propagation", "private"])
            .args(["sh", "-c", script, "sh"])
            .arg(program)
            .args(args)
            .env("PIDFILE", &pidfile)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run ip netns exec");
        self.running.push((child, pidfile));
        k
    }

    /// The pid of the `fastio` of run `k`.
    fn pid(&self, k: usize) -> i32 {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(t) = std::fs::read_to_string(&self.running[k].1)
                && let Ok(pid) = t.trim().parse()
            {
                return pid;
            }
            assert!(Instant::now() < deadline, "run {k} never started");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits for runs `ks` together (at most [`RUN_LIMIT`]), each one's
    /// exit time taken as it happens.
    fn wait_all(&mut self, ks: &[usize]) -> Vec<HostRun> {
        let deadline = Instant::now() + RUN_LIMIT;
        let mut exited: Vec<Option<Instant>> = vec![None; ks.len()];
        while exited.iter().any(Option::is_none) {
            for (j, &k) in ks.iter().enumerate() {
                if exited[j].is_none() {
                    // The host's script exits right after its `fastio`.
                    if self.running[k].0.try_wait().unwrap().is_some() {
                        exited[j] = Some(Instant::now());
                    }
                }
            }
            if Instant::now() >= deadline {
                panic!("runs {ks:?} hung\n{}", self.stacks());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        ks.iter()
            .zip(exited)
            .map(|(&k, at)| {
                let mut r = self.wait(k);
                r.exited_at = at.unwrap();
                r
            })
            .collect()
    }

    /// Waits for run `k` (at most [`RUN_LIMIT`]).
    fn wait(&mut self, k: usize) -> HostRun {
        let child = &mut self.running[k].0;
        let mut out = child.stdout.take().unwrap();
        let mut err = child.stderr.take().unwrap();
        let t_err = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        let t_out = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        });
        let deadline = Instant::now() + RUN_LIMIT;
        loop {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            if Instant::now() > deadline {
                // What every host's driver and operators were doing (when
                // gdb is installed), before they go.
                let stacks = self.stacks();
                // The driver and its operators go, so the pipes close.
                if let Ok(pid) = std::fs::read_to_string(&self.running[k].1) {
                    let pid = pid.trim();
                    let _ = Command::new("pkill").args(["-9", "-P", pid]).status();
                    let _ = Command::new("kill").args(["-9", pid]).status();
                }
                let child = &mut self.running[k].0;
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "run {k} hung: killed after {RUN_LIMIT:?}\n{}\n{}\n{stacks}",
                    t_out.join().unwrap(),
                    t_err.join().unwrap()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let stdout = t_out.join().unwrap();
        let stderr = t_err.join().unwrap();
        let (before, after) = stdout
            .split_once("__LEFT__\n")
            .unwrap_or_else(|| panic!("the host's script did not finish:\n{stdout}\n{stderr}"));
        let rc_line = before.lines().rev().find_map(|l| l.strip_prefix("__RC__ "));
        HostRun {
            rc: rc_line.and_then(|r| r.trim().parse().ok()).unwrap_or(-1),
            stdout: before.to_owned(),
            stderr,
            shm_left: after.lines().map(str::to_owned).collect(),
            exited_at: Instant::now(),
        }
    }

    /// The threads' stacks of every process in every host (`gdb -batch`),
    /// for a run that hung; empty without gdb.
    fn stacks(&self) -> String {
        let mut out = String::new();
        for i in 0..self.n {
            let Ok(pids) = Command::new("ip")
                .args(["netns", "pids", &self.ns(i)])
                .output()
            else {
                continue;
            };
            for pid in String::from_utf8_lossy(&pids.stdout).split_whitespace() {
                let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
                if !cmd.contains("fastio") && !cmd.contains("fio-") {
                    continue;
                }
                let Ok(bt) = Command::new("timeout")
                    .args([
                        "20",
                        "gdb",
                        "-p",
                        pid,
                        "-batch",
                        "-ex",
                        "thread apply all bt 30",
                    ])
                    .output()
                else {
                    return out;
                };
                out.push_str(&format!("===== host {i}, pid {pid}: {cmd}\n"));
                for line in String::from_utf8_lossy(&bt.stdout).lines() {
                    if line.starts_with('#') || line.starts_with("Thread ") {
                        out.push_str(line);
                        out.push('\n');
                    }
                }
            }
        }
        out
    }

    /// Cuts host `i` off the bridge.
    fn cut(&self, i: usize) {
        ip_ok(&["-n", &self.sw(), "link", "set", &format!("p{i}"), "down"]);
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for (c, _) in &mut self.running {
            let _ = c.kill();
            let _ = c.wait();
        }
        for i in 0..self.n {
            // Anything still running in a host (an orphaned operator of a
            // killed driver) goes with it.
            if let Ok(out) = Command::new("ip")
                .args(["netns", "pids", &self.ns(i)])
                .output()
            {
                for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                    let _ = Command::new("kill").args(["-9", pid]).status();
                }
            }
            ip(&["netns", "del", &self.ns(i)]);
        }
        ip(&["netns", "del", &self.sw()]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn addr(i: usize) -> String {
    format!("10.77.0.{}", i + 1)
}

/// `fastio run FILE --host HOST` with the network arguments of host `i`
/// and `extra`.
fn run_args(file: &Path, host: &str, net: Vec<String>, extra: &[&str]) -> Vec<String> {
    let mut a = vec![
        "run".to_owned(),
        file.display().to_string(),
        "--host".into(),
        host.into(),
        "--join-timeout".into(),
        "30".into(),
        "--lease".into(),
        "2".into(),
    ];
    a.extend(net);
    a.extend(extra.iter().map(|s| (*s).to_owned()));
    a
}

fn testop() -> String {
    example("fio-testop").display().to_string()
}

fn op(name: &str, args: &str, io: &str) -> String {
    format!(
        "- name: {name}\n  container: {{image: t, command: [{}, {args}]}}\n{io}",
        testop()
    )
}

fn assert_clean(who: &str, r: &HostRun) {
    assert!(
        r.shm_left.is_empty(),
        "{who}: /dev/shm not clean: {:?}",
        r.shm_left
    );
}

fn assert_ok(who: &str, r: &HostRun) {
    assert_eq!(r.rc, 0, "{who} failed:\n{}\n{}", r.stdout, r.stderr);
    assert_clean(who, r);
}

/// A small deterministic generator for the random points.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[test]
fn a_chain_with_every_entry_kind_crosses_two_hosts_and_back() {
    let Some(mut hosts) = Hosts::new("kinds", 2) else {
        return;
    };
    let yaml = format!(
        "api-version: 0.5.0\nname: kinds\nplacement:\n  default: a\n  hosts:\n    b: [stage, sink, here]\noperators:\n{}{}{}{}{}{}{}{}",
        op(
            "stat",
            "pattern, s, '11'",
            "  output:\n  - {name: s, type: array, element-type: float32, shape: [1500, 999]}\n"
        ),
        op(
            "dyn",
            "pattern, d, '12'",
            "  output:\n  - {name: d, type: array, element-type: int16, shape: [-1, 3]}\n"
        )
        .replace("command: [", "variables: {FILL_SHAPE: '777,3'}, command: ["),
        op(
            "txt",
            "pattern, t, '13'",
            "  output:\n  - {name: t, type: string}\n"
        )
        .replace(
            "command: [",
            "variables: {PATTERN_TEXT: 'über die Grenze'}, command: ["
        ),
        op(
            "scal",
            "pattern, x, '14'",
            "  output:\n  - {name: x, type: float64}\n"
        ),
        op(
            "sink",
            "checksum, s, d, t, x",
            "  input:\n  - {from: stat, name: s, type: array, element-type: float32, shape: [1500, 999]}\n  - {from: dyn, name: d, type: array, element-type: int16, shape: [-1, 3]}\n  - {from: txt, name: t, type: string}\n  - {from: scal, name: x, type: float64}\n"
        ),
        op(
            "stage",
            "add, s, s2, '1.5'",
            "  input:\n  - {from: stat, name: s, type: array, element-type: float32, shape: [1500, 999]}\n  output:\n  - {name: s2, type: array, element-type: float32, shape: [1500, 999]}\n"
        ),
        op(
            "here",
            "checksum, s2",
            "  input:\n  - {from: stage, name: s2, type: array, element-type: float32, shape: [1500, 999]}\n"
        ),
        op(
            "back",
            "checksum, s2",
            "  input:\n  - {from: stage, name: s2, type: array, element-type: float32, shape: [1500, 999]}\n"
        ),
    );
    let file = write(&hosts.dir, "kinds.yaml", &yaml);
    // The plan shows what crosses, and how much.
    let plan = Command::new(fastio())
        .args(["pipeline", "plan"])
        .arg(&file)
        .output()
        .unwrap();
    let plan_text = String::from_utf8_lossy(&plan.stdout);
    assert!(plan.status.success(), "{plan_text}");
    assert!(
        plan_text.contains("stat/s  a -> b  5994000 bytes"),
        "{plan_text}"
    );
    assert!(plan_text.contains("dyn/d  a -> b  dynamic"), "{plan_text}");
    assert!(plan_text.contains("stage/s2  b -> a"), "{plan_text}");
    let a = hosts.start(0, &run_args(&file, "a", hosts.net_args(0, 7447), &[]));
    let b = hosts.start(1, &run_args(&file, "b", hosts.net_args(1, 7447), &[]));
    let rb = hosts.wait(b);
    let ra = hosts.wait(a);
    assert_ok("host a", &ra);
    assert_ok("host b", &rb);
    for name in ["s", "d", "t", "x"] {
        let sent = ra
            .checksum(name)
            .unwrap_or_else(|| panic!("a: no {name}\n{}", ra.stdout));
        let got = rb
            .checksum(name)
            .unwrap_or_else(|| panic!("b: no {name}\n{}", rb.stdout));
        assert_eq!(sent, got, "entry {name} changed on the way");
    }
    assert!(
        rb.checksum("d").unwrap().ends_with("[777, 3]"),
        "{}",
        rb.stdout
    );
    assert_eq!(
        ra.checksum("s2"),
        rb.checksum("s2"),
        "the way back: {}\n{}",
        ra.stdout,
        rb.stdout
    );
    // Each host's summary lists the other's operators as elsewhere.
    assert!(ra.stdout.contains("on host b"), "{}", ra.stdout);
}

#[test]
fn a_fan_out_to_two_hosts_and_a_diamond_across_three() {
    let Some(mut hosts) = Hosts::new("dia", 3) else {
        return;
    };
    let f32s = |n: &str, from: &str| {
        format!(
            "  - {{from: {from}, name: {n}, type: array, element-type: float32, shape: [3, 1048576]}}\n"
        )
    };
    let out = |n: &str| {
        format!(
            "  output:\n  - {{name: {n}, type: array, element-type: float32, shape: [3, 1048576]}}\n"
        )
    };
    let yaml = format!(
        "api-version: 0.5.0\nname: diamond\nplacement:\n  default: a\n  hosts:\n    b: [left, lcheck]\n    c: [right, rcheck]\noperators:\n{}{}{}{}{}{}",
        op("top", "pattern, v, '5'", &out("v")),
        op(
            "left",
            "add, v, l, '1'",
            &format!("  input:\n{}{}", f32s("v", "top"), out("l"))
        ),
        op(
            "right",
            "add, v, r, '2'",
            &format!("  input:\n{}{}", f32s("v", "top"), out("r"))
        ),
        op(
            "lcheck",
            "checksum, v, l",
            &format!("  input:\n{}{}", f32s("v", "top"), f32s("l", "left"))
        ),
        op(
            "rcheck",
            "checksum, v, r",
            &format!("  input:\n{}{}", f32s("v", "top"), f32s("r", "right"))
        ),
        op(
            "join",
            "checksum, l, r",
            &format!("  input:\n{}{}", f32s("l", "left"), f32s("r", "right"))
        ),
    );
    let file = write(&hosts.dir, "diamond.yaml", &yaml);
    let runs: Vec<usize> = ["a", "b", "c"]
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let args = run_args(&file, h, hosts.net_args(i, 7447), &[]);
            hosts.start(i, &args)
        })
        .collect();
    let r: Vec<HostRun> = runs.into_iter().map(|k| hosts.wait(k)).collect();
    for (h, run) in ["a", "b", "c"].iter().zip(&r) {
        assert_ok(&format!("host {h}"), run);
    }
    // The fan-out: top's 12 MiB (three pieces or more) reached b and c.
    let v = r[0].checksum("v").expect("top's checksum");
    assert_eq!(r[1].checksum("v").as_ref(), Some(&v), "b");
    assert_eq!(r[2].checksum("v").as_ref(), Some(&v), "c");
    // The diamond: l and r came back to a intact.
    assert_eq!(r[0].checksum("l"), r[1].checksum("l"));
    assert_eq!(r[0].checksum("r"), r[2].checksum("r"));
    assert_ne!(r[0].checksum("l"), r[0].checksum("r"));
}

#[test]
fn a_two_gib_entry_crosses_intact() {
    let Some(mut hosts) = Hosts::new("big", 2) else {
        return;
    };
    // 2^29 float32: 2 GiB, twice Zenoh's default message limit.
    let shape = "shape: [536870912]";
    let yaml = format!(
        "api-version: 0.5.0\nname: big\nplacement:\n  hosts:\n    b: [sink]\noperators:\n{}{}",
        op(
            "src",
            "pattern, v, '99'",
            &format!("  output:\n  - {{name: v, type: array, element-type: float32, {shape}}}\n")
        ),
        op(
            "sink",
            "checksum, v",
            &format!(
                "  input:\n  - {{from: src, name: v, type: array, element-type: float32, {shape}}}\n"
            )
        ),
    );
    let file = write(&hosts.dir, "big.yaml", &yaml);
    let a = hosts.start(0, &run_args(&file, "main", hosts.net_args(0, 7447), &[]));
    let b = hosts.start(1, &run_args(&file, "b", hosts.net_args(1, 7447), &[]));
    let rb = hosts.wait(b);
    let ra = hosts.wait(a);
    assert_ok("host main", &ra);
    assert_ok("host b", &rb);
    let sent = ra.checksum("v").expect("src's checksum");
    assert!(sent.ends_with("[536870912]"), "{sent}");
    assert_eq!(rb.checksum("v"), Some(sent));
}

/// A producer on `a` whose 1 GiB output a consumer on `b` waits for.
fn transfer_yaml(dir: &Path, name: &str) -> PathBuf {
    let shape = "shape: [268435456]";
    let yaml = format!(
        "api-version: 0.5.0\nname: {name}\nplacement:\n  default: a\n  hosts:\n    b: [sink]\noperators:\n{}{}",
        op(
            "src",
            "pattern, v, '${{ seed }}'",
            &format!("  output:\n  - {{name: v, type: array, element-type: float32, {shape}}}\n")
        ),
        op(
            "sink",
            "checksum, v",
            &format!(
                "  input:\n  - {{from: src, name: v, type: array, element-type: float32, {shape}}}\n"
            )
        ),
    );
    let yaml = yaml.replacen("operators:", "parameters:\n  seed: '1'\noperators:", 1);
    write(dir, &format!("{name}.yaml"), &yaml)
}

/// The pid of the first operator the driver `driver` starts (its child),
/// once there is one.
fn operator_of(driver: i32) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let children = std::fs::read_to_string(format!("/proc/{driver}/task/{driver}/children"))
            .unwrap_or_default();
        if let Some(p) = children.split_whitespace().next() {
            return p.to_owned();
        }
        assert!(Instant::now() < deadline, "the operator never started");
        sleep_ms(10);
    }
}

fn sleep_ms(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

#[test]
fn a_producer_host_killed_mid_transfer_fails_every_host_with_its_name() {
    let Some(mut hosts) = Hosts::new("kill", 2) else {
        return;
    };
    let file = transfer_yaml(&hosts.dir, "killed");
    let mut rng = Rng(0x5eed_0001);
    for round in 0..2 {
        let port = 7450 + round;
        let a = hosts.start(0, &run_args(&file, "a", hosts.net_args(0, port), &[]));
        let b = hosts.start(1, &run_args(&file, "b", hosts.net_args(1, port), &[]));
        let pid = hosts.pid(a);
        // Round 0 kills while the producer fills its 1 GiB (every host
        // has joined); round 1 once it has exited, while the entry is on
        // its way (seconds, for the debug-built driver): at a random point
        // of each span.
        let op = operator_of(pid);
        if round == 1 {
            let deadline = Instant::now() + Duration::from_secs(60);
            while std::fs::read_to_string(format!("/proc/{op}/stat"))
                .is_ok_and(|s| !s.contains(") Z "))
            {
                assert!(Instant::now() < deadline, "the producer never ended");
                sleep_ms(5);
            }
        }
        sleep_ms(rng.below(300));
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        let t = Instant::now();
        let rb = hosts.wait(b);
        let ra = hosts.wait(a);
        assert_eq!(ra.rc, 137, "a was killed: {}", ra.stderr);
        assert_clean("host a", &ra);
        assert_ne!(rb.rc, 0, "b must fail: {}\n{}", rb.stdout, rb.stderr);
        assert_clean("host b", &rb);
        assert!(
            rb.stderr.contains("host a") && rb.stderr.contains("src"),
            "b's message names the host and the operator: {}",
            rb.stderr
        );
        assert!(rb.checksum("v").is_none(), "no half entry was consumed");
        let what = if round == 0 {
            "while src was running"
        } else {
            "src/v"
        };
        assert!(rb.stderr.contains(what), "round {round}: {}", rb.stderr);
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "b took {:?}",
            t.elapsed()
        );
    }
}

#[test]
fn a_remote_operator_killed_fails_every_host_with_its_name() {
    let Some(mut hosts) = Hosts::new("opk", 2) else {
        return;
    };
    let yaml = format!(
        "api-version: 0.5.0\nname: opkill\nplacement:\n  default: a\n  hosts:\n    b: [sink]\noperators:\n{}{}",
        op(
            "slow",
            "sleep, '60'",
            "  output:\n  - {name: v, type: array, element-type: float32, shape: [4]}\n"
        ),
        op(
            "sink",
            "checksum, v",
            "  input:\n  - {from: slow, name: v, type: array, element-type: float32, shape: [4]}\n"
        ),
    );
    let file = write(&hosts.dir, "opkill.yaml", &yaml);
    let a = hosts.start(0, &run_args(&file, "a", hosts.net_args(0, 7447), &[]));
    let b = hosts.start(1, &run_args(&file, "b", hosts.net_args(1, 7447), &[]));
    let op_pid = operator_of(hosts.pid(a));
    sleep_ms(Rng(7).below(500));
    let _ = Command::new("kill").args(["-9", &op_pid]).status();
    let ra = hosts.wait(a);
    let rb = hosts.wait(b);
    for (h, r) in [("a", &ra), ("b", &rb)] {
        assert_eq!(r.rc, 1, "host {h}: {}\n{}", r.stdout, r.stderr);
        assert_clean(h, r);
        assert!(
            r.stderr.contains("slow") && r.stderr.contains("signal 9"),
            "host {h}'s message names the operator: {}",
            r.stderr
        );
    }
    assert!(rb.stderr.contains("on host a"), "{}", rb.stderr);
}

#[test]
fn a_cut_link_fails_both_hosts_without_a_hang() {
    let Some(mut hosts) = Hosts::new("cut", 2) else {
        return;
    };
    // The producer runs long (a minute): the cut always comes while the
    // run is under way, at a random point of its first two seconds.
    let yaml = format!(
        "api-version: 0.5.0\nname: cut\nplacement:\n  default: a\n  hosts:\n    b: [sink]\noperators:\n{}{}",
        op(
            "src",
            "sleep, '60'",
            "  output:\n  - {name: v, type: array, element-type: float32, shape: [4]}\n"
        ),
        op(
            "sink",
            "checksum, v",
            "  input:\n  - {from: src, name: v, type: array, element-type: float32, shape: [4]}\n"
        ),
    );
    let file = write(&hosts.dir, "cut.yaml", &yaml);
    let a = hosts.start(0, &run_args(&file, "a", hosts.net_args(0, 7447), &[]));
    let b = hosts.start(1, &run_args(&file, "b", hosts.net_args(1, 7447), &[]));
    operator_of(hosts.pid(a));
    sleep_ms(Rng(0xc0ffee).below(2000));
    hosts.cut(0);
    let t = Instant::now();
    let mut both = hosts.wait_all(&[a, b]).into_iter();
    let (ra, rb) = (both.next().unwrap(), both.next().unwrap());
    assert!(
        t.elapsed() < Duration::from_secs(40),
        "took {:?}",
        t.elapsed()
    );
    // Issue 28: a host exits as soon as its summary is out: neither
    // lingers seconds after the other (both learn of the cut from the same
    // lease).
    let apart = if ra.exited_at > rb.exited_at {
        ra.exited_at - rb.exited_at
    } else {
        rb.exited_at - ra.exited_at
    };
    assert!(
        apart < Duration::from_secs(3),
        "the hosts exited {apart:?} apart (a after {:?}, b after {:?})",
        ra.exited_at - t,
        rb.exited_at - t
    );
    for (h, other, r) in [("a", "b", &ra), ("b", "a", &rb)] {
        assert_eq!(r.rc, 1, "host {h}: {}\n{}", r.stdout, r.stderr);
        assert_clean(h, r);
        assert!(
            r.stderr.contains(&format!("host {other}")),
            "host {h} names host {other}: {}",
            r.stderr
        );
    }
    assert!(rb.checksum("v").is_none());
}

/// Issue 28: `--report json` on the host an entry crossed to gives its
/// bytes (what that host received), as the producing host's does.
#[test]
fn the_report_of_a_receiving_host_gives_the_bytes_of_an_entry_that_crossed() {
    let Some(mut hosts) = Hosts::new("bytes", 2) else {
        return;
    };
    let yaml = format!(
        "api-version: 0.5.0\nname: bytes\nplacement:\n  default: a\n  hosts:\n    b: [sink]\noperators:\n{}{}",
        op(
            "src",
            "pattern, v, '7'",
            "  output:\n  - {name: v, type: array, element-type: float32, shape: [1000, 3]}\n"
        ),
        op(
            "sink",
            "checksum, v",
            "  input:\n  - {from: src, name: v, type: array, element-type: float32, shape: [1000, 3]}\n"
        ),
    );
    let file = write(&hosts.dir, "bytes.yaml", &yaml);
    let json = ["--report", "json"];
    let a = hosts.start(0, &run_args(&file, "a", hosts.net_args(0, 7447), &json));
    let b = hosts.start(1, &run_args(&file, "b", hosts.net_args(1, 7447), &json));
    for (h, r) in [("b", hosts.wait(b)), ("a", hosts.wait(a))] {
        assert_ok(h, &r);
        let text = r.stdout.split("__RC__").next().unwrap();
        let report: serde_json::Value =
            serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("host {h}: {e}: {text}"));
        let edge = report["edges"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["entry"] == "src/v")
            .unwrap_or_else(|| panic!("host {h}: {report}"));
        assert_eq!(edge["bytes"], 12000, "host {h}: {edge}");
    }
}

#[test]
fn two_runs_on_the_same_hosts_stay_apart_and_a_missing_host_is_named() {
    let Some(mut hosts) = Hosts::new("two", 2) else {
        return;
    };
    let file = transfer_yaml(&hosts.dir, "twice");
    let mut runs = Vec::new();
    for (id, seed, port) in [("r1", "101", 7447u16), ("r2", "202", 7448)] {
        let extra = ["--run-id", id, "--param", &format!("seed={seed}")];
        let a = hosts.start(0, &run_args(&file, "a", hosts.net_args(0, port), &extra));
        let b = hosts.start(1, &run_args(&file, "b", hosts.net_args(1, port), &extra));
        runs.push((a, b));
    }
    let mut sums = Vec::new();
    for (a, b) in runs {
        let rb = hosts.wait(b);
        let ra = hosts.wait(a);
        assert_ok("a", &ra);
        assert_ok("b", &rb);
        assert_eq!(ra.checksum("v"), rb.checksum("v"));
        sums.push(rb.checksum("v").unwrap());
    }
    assert_ne!(sums[0], sums[1], "each run got its own entry");
    // A host that never comes: a clear error naming it, in time.
    let t = Instant::now();
    let mut args = run_args(&file, "a", hosts.net_args(0, 7449), &[]);
    let at = args.iter().position(|a| a == "--join-timeout").unwrap();
    args[at + 1] = "2".into();
    let k = hosts.start(0, &args);
    let r = hosts.wait(k);
    assert_eq!(r.rc, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("host b") && r.stderr.contains("did not join"),
        "{}",
        r.stderr
    );
    assert!(t.elapsed() < Duration::from_secs(20));
    assert_clean("a", &r);
}

/// The Python of the virtual environment with `eclipse-zenoh` that
/// `cargo xtask ci` makes (`FASTIO_ZENOH_PYTHON`, else
/// `target/venv-zenoh`); `None` outside CI when there is none.
fn zenoh_python() -> Option<PathBuf> {
    let p = std::env::var_os("FASTIO_ZENOH_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/venv-zenoh/bin/python")
        });
    if p.exists() {
        return Some(p);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI makes target/venv-zenoh (cargo xtask ci) before the tests"
    );
    eprintln!("skipped: no Python with eclipse-zenoh (cargo xtask ci makes one)");
    None
}

#[test]
fn a_plain_python_zenoh_subscriber_reads_an_edge() {
    let Some(python) = zenoh_python() else {
        return;
    };
    let Some(mut hosts) = Hosts::new("py", 3) else {
        return;
    };
    let yaml = format!(
        "api-version: 0.5.0\nname: pyedge\nplacement:\n  hosts:\n    b: [sink]\noperators:\n{}{}",
        op(
            "src",
            "pattern, v, '42'",
            "  output:\n  - {name: v, type: array, element-type: int32, shape: [5, -1]}\n"
        )
        .replace(
            "command: [",
            "variables: {FILL_SHAPE: '5,70001'}, command: ["
        ),
        op(
            "sink",
            "checksum, v",
            "  input:\n  - {from: src, name: v, type: array, element-type: int32, shape: [5, -1]}\n"
        ),
    );
    let file = write(&hosts.dir, "pyedge.yaml", &yaml);
    // The producing host first (it waits for b to join), then the Python
    // reader on a third host, then b.
    let a = hosts.start(0, &run_args(&file, "main", hosts.net_args(0, 7447), &[]));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/hosts/read_edge.py");
    let mut reader = Command::new("ip")
        .args(["netns", "exec", &hosts.ns(2)])
        .arg(&python)
        .arg(&script)
        .args([
            &format!("tcp/{}:7447", addr(0)),
            "pyedge",
            "--timeout",
            "60",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the Python reader");
    let mut out = std::io::BufReader::new(reader.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert!(
        line.starts_with("subscribed fastio/pyedge/run/entry/**"),
        "{line}"
    );
    // The reader says "subscribed" once host a answered it: a has its
    // subscription then.
    let b = hosts.start(1, &run_args(&file, "b", hosts.net_args(1, 7447), &[]));
    let rb = hosts.wait(b);
    let ra = hosts.wait(a);
    assert_ok("host main", &ra);
    assert_ok("host b", &rb);
    let mut rest = String::new();
    let _ = out.read_to_string(&mut rest);
    let status = reader.wait().unwrap();
    let mut err = String::new();
    let _ = reader.stderr.take().unwrap().read_to_string(&mut err);
    assert!(status.success(), "the Python reader: {rest}\n{err}");
    let sent = ra.checksum("v").expect("src's checksum");
    let (sum, shape) = sent.split_once(' ').unwrap();
    assert_eq!(shape, "[5, 70001]");
    assert_eq!(
        rest.trim(),
        format!("entry src/v int32 [5, 70001] 1400020 {sum}"),
        "{err}"
    );
}

#[test]
fn the_volume_demo_runs_on_two_hosts_as_the_readme_says() {
    let Some(mut hosts) = Hosts::new("vol", 2) else {
        return;
    };
    volume_demo(&mut hosts, &|h: &Hosts, i, _| h.net_args(i, 7447));
}

/// The README's two-host volume demo on `hosts` (0: scanner, 1: gpu),
/// each host with the network arguments `net(hosts, i, name)` gives.
fn volume_demo(hosts: &mut Hosts, net: &dyn Fn(&Hosts, usize, &str) -> Vec<String>) {
    // The README's definition, with the operators this test built instead
    // of `cargo run` (as the one-host demo test does).
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/pipelines/volume/two-hosts.yaml"),
    )
    .unwrap();
    let mut yaml = String::new();
    for line in text.lines() {
        match line.find("command: [cargo, run") {
            Some(k) => {
                let bin = line.rsplit(", ").next().unwrap().trim_end_matches(']');
                yaml.push_str(&format!(
                    "{}command: [{}]\n",
                    &line[..k],
                    example(bin).display()
                ));
            }
            None => {
                yaml.push_str(line);
                yaml.push('\n');
            }
        }
    }
    let file = write(&hosts.dir, "two-hosts.yaml", &yaml);
    let out = hosts.dir.join("out");
    let scanner = hosts.start(
        0,
        &run_args(&file, "scanner", net(hosts, 0, "scanner"), &[]),
    );
    let gpu = hosts.start(
        1,
        &run_args(
            &file,
            "gpu",
            net(hosts, 1, "gpu"),
            &["--output", &out.display().to_string()],
        ),
    );
    let rg = hosts.wait(gpu);
    let rs = hosts.wait(scanner);
    assert_ok("scanner", &rs);
    assert_ok("gpu", &rg);
    assert!(
        rs.stdout
            .contains("[crop] cropped [3, 224, 255, 127] to [3, "),
        "{}",
        rs.stdout
    );
    assert!(
        rg.stdout.contains("stats/summary: {") && rg.stdout.contains("\"voxels\": 262144"),
        "{}",
        rg.stdout
    );
    let png = std::fs::read(out.join("render/image/mip.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
}

fn streamop() -> String {
    example("fio-streamop").display().to_string()
}

/// A streaming pipeline over two hosts: `camera` (on a) → `stage` (on b,
/// `slow_us` per frame) → `sink` (on a, with every camera frame too), and
/// `watch` (on b) reading the camera beside `stage`: the camera's stream
/// crosses to b once for two consumers, the stage's comes back. Frames
/// change shape (rows) from one to the next; every word is checked. With
/// `frames`, the sources stop after that many and the sinks exit 5 unless
/// exactly that many arrived, in order; else they run for 90 s. The camera
/// pauses `pause_us` between frames.
fn stream_yaml(
    dir: &Path,
    name: &str,
    frames: Option<u64>,
    slow_us: u64,
    overflow: &str,
    pause_us: u64,
) -> PathBuf {
    let array = "type: array, element-type: uint32, shape: [-1, 64]";
    let o = streamop();
    let (limit, vars) = match frames {
        Some(n) => (
            format!("frames: {n}"),
            format!(", variables: {{EXPECT_FRAMES: '{n}'}}"),
        ),
        None => ("duration: 90".to_owned(), String::new()),
    };
    let yaml = format!(
        "api-version: 0.5.0\nname: {name}\nplacement:\n  default: a\n  hosts:\n    b: [stage, watch]\noperators:\n\
         - name: camera\n  container: {{image: t, command: [{o}, source, v], variables: {{PAUSE_US: '{pause_us}'}}}}\n  output: [{{name: v, {array}}}]\n\
         - name: stage\n  container: {{image: t, command: [{o}, stage, v, w], variables: {{SLOW_US: '{slow_us}'}}}}\n  input: [{{from: camera, name: v, {array}}}]\n  output: [{{name: w, {array}}}]\n\
         - name: sink\n  container: {{image: t, command: [{o}, sink, w, v]{vars}}}\n  input:\n  - {{from: stage, name: w, {array}}}\n  - {{from: camera, name: v, {array}}}\n\
         - name: watch\n  container: {{image: t, command: [{o}, sink, v]{vars}}}\n  input: [{{from: camera, name: v, {array}}}]\n\
         streaming:\n  {limit}\n  overflow: {overflow}\n  depth: 2\n  max-shape:\n    camera/v: [8, 64]\n    stage/w: [8, 64]\n"
    );
    write(dir, &format!("{name}.yaml"), &yaml)
}

/// Every frame of a [`stream_yaml`] run, in order, each word checked
/// (its sinks' EXPECT_FRAMES: exactly that many, in order), on both
/// hosts: `sink` on a, `stage` and `watch` on b.
fn assert_every_frame(ra: &HostRun, rb: &HostRun, frames: u64) {
    let want = format!("[sink] sink: {frames} frames");
    assert!(ra.stdout.contains(&want), "{want}:\n{}", ra.stdout);
    for (who, role) in [("stage", "stage"), ("watch", "sink")] {
        let want = format!("[{who}] {role}: {frames} frames");
        assert!(rb.stdout.contains(&want), "{want}:\n{}", rb.stdout);
    }
}

/// The median step time (ms) of operator `op` in a run's frame table.
fn step_p50_ms(stdout: &str, op: &str) -> f64 {
    stdout
        .lines()
        .filter(|l| l.split_whitespace().next() == Some(op))
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.get(5)?.strip_suffix("ms")?.parse().ok()
        })
        .unwrap_or_else(|| panic!("no frame row for {op}:\n{stdout}"))
}

#[test]
fn a_stream_crosses_two_hosts_and_back_in_order_with_back_pressure() {
    let Some(mut hosts) = Hosts::new("str", 2) else {
        return;
    };
    let frames = 150;
    let slow_us = 10_000;
    let file = stream_yaml(&hosts.dir, "streams", Some(frames), slow_us, "block", 0);
    let a = hosts.start(0, &run_args(&file, "a", hosts.net_args(0, 7447), &[]));
    let b = hosts.start(1, &run_args(&file, "b", hosts.net_args(1, 7447), &[]));
    let ra = hosts.wait(a);
    let rb = hosts.wait(b);
    assert_ok("host a", &ra);
    assert_ok("host b", &rb);
    assert_every_frame(&ra, &rb, frames);
    // Back-pressure across the link: the camera (no pause of its own)
    // waits for the slow stage on the other host, frame after frame.
    let camera = step_p50_ms(&ra.stdout, "camera");
    assert!(
        camera >= 0.5 * slow_us as f64 / 1000.0,
        "the camera's median step is {camera} ms; the stage takes {} ms a frame:\n{}",
        slow_us / 1000,
        ra.stdout
    );
}

#[test]
fn large_frames_at_full_speed_cross_both_ways_without_a_stall() {
    // The chain bench across hosts: 1 MiB frames, no pause anywhere, the
    // source and the sink on a, the stage on b: the source's stream fills
    // the link a → b while the stage's fills it b → a. Each host must
    // keep reading while its own sends wait for the link (a host that
    // waited for its link inside Zenoh's receiving callback stalled both
    // until their leases ran out), three times over.
    let Some(mut hosts) = Hosts::new("big", 2) else {
        return;
    };
    let c = example("fio-chainop").display().to_string();
    let frames = 600;
    let port = |from: &str| {
        format!("  - {{{from}name: frame, type: array, element-type: uint8, shape: [1048576]}}\n")
    };
    for round in 0..3 {
        let result = hosts.dir.join(format!("big{round}.txt"));
        let yaml = format!(
            "api-version: 0.5.0\nname: bigframes\nplacement:\n  default: a\n  hosts:\n    b: [stage]\noperators:\n\
             - name: source\n  container:\n    image: t\n    command: [{c:?}, source]\n    variables: {{SIZE: '1048576', PAUSE_US: '0'}}\n  output:\n{}\
             - name: stage\n  container:\n    image: t\n    command: [{c:?}, stage]\n  input:\n{}  output:\n{}\
             - name: sink\n  container:\n    image: t\n    command: [{c:?}, sink]\n    variables: {{RESULT: {:?}}}\n  input:\n{}\
             streaming:\n  depth: 4\n  frames: {frames}\n",
            port(""),
            port("from: source, "),
            port(""),
            result.display().to_string(),
            port("from: stage, "),
        );
        let file = write(&hosts.dir, &format!("big{round}.yaml"), &yaml);
        let t = Instant::now();
        let p = 7447 + round;
        let a = hosts.start(0, &run_args(&file, "a", hosts.net_args(0, p), &[]));
        let b = hosts.start(1, &run_args(&file, "b", hosts.net_args(1, p), &[]));
        let ra = hosts.wait(a);
        let rb = hosts.wait(b);
        assert!(
            ra.rc == 0 && rb.rc == 0,
            "round {round}: host a ended {}, host b {}:\n{}{}\n{}{}",
            ra.rc,
            rb.rc,
            ra.stdout,
            ra.stderr,
            rb.stdout,
            rb.stderr
        );
        assert_ok("host a", &ra);
        assert_ok("host b", &rb);
        let got = std::fs::read_to_string(&result).unwrap();
        for want in [
            format!("count {frames}\n"),
            "disorder 0\n".into(),
            "torn 0\n".into(),
        ] {
            assert!(got.contains(&want), "round {round}: {want:?} in\n{got}");
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "round {round}: {frames} frames took {:?}",
            t.elapsed()
        );
    }
}

/// A host frozen (its driver SIGSTOPped) while 16 MiB frames stream to
/// it: the sending host's puts find the link full and wait on it, and
/// Zenoh closes the link at the lease under them. The sending host judges
/// the frozen one gone and ends within the bound with that root cause,
/// the freeze at a random moment of the stream.
#[test]
fn a_frozen_host_never_holds_the_host_sending_to_it() {
    let Some(mut hosts) = Hosts::new("frz", 2) else {
        return;
    };
    let c = example("fio-chainop").display().to_string();
    let port = |from: &str| {
        format!("  - {{{from}name: frame, type: array, element-type: uint8, shape: [16777216]}}\n")
    };
    let result = hosts.dir.join("frozen.txt");
    let yaml = format!(
        "api-version: 0.5.0\nname: frozen\nplacement:\n  default: a\n  hosts:\n    b: [sink]\noperators:\n\
         - name: source\n  container:\n    image: t\n    command: [{c:?}, source]\n    variables: {{SIZE: '16777216', PAUSE_US: '0'}}\n  output:\n{}\
         - name: sink\n  container:\n    image: t\n    command: [{c:?}, sink]\n    variables: {{RESULT: {:?}}}\n  input:\n{}\
         streaming:\n  depth: 4\n  frames: 100000\n",
        port(""),
        result.display().to_string(),
        port("from: source, "),
    );
    let file = write(&hosts.dir, "frozen.yaml", &yaml);
    let mut rng = Rng(env_seed("FASTIO_FREEZE_SEED", 0x0f2e_e2e5) | 1);
    for round in 0..2u16 {
        let p = 7600 + round;
        let a = hosts.start(0, &run_args(&file, "a", hosts.net_args(0, p), &[]));
        let b = hosts.start(1, &run_args(&file, "b", hosts.net_args(1, p), &[]));
        // Streaming for 1.5-3 s (the hosts join within about a second).
        std::thread::sleep(Duration::from_millis(1500 + rng.below(1500)));
        let frozen = hosts.pid(b);
        assert!(
            Command::new("kill")
                .args(["-STOP", &frozen.to_string()])
                .status()
                .unwrap()
                .success()
        );
        let at = Instant::now();
        let (r, stuck) = wait_within(&mut hosts, &[a], CUT_BOUND + Duration::from_secs(10));
        let ra = &r[0];
        let _ = Command::new("kill")
            .args(["-CONT", &frozen.to_string()])
            .status();
        let rb = hosts.wait(b);
        assert!(
            stuck.is_empty(),
            "round {round}: host a still ran {:?} after b froze:\n{}{}",
            at.elapsed(),
            ra.stdout,
            ra.stderr
        );
        let after = ra.exited_at.saturating_duration_since(at);
        assert_eq!(ra.rc, 1, "round {round}:\n{}{}", ra.stdout, ra.stderr);
        assert!(
            ra.stderr
                .contains("host b is gone (its driver died or the link to it was cut)"),
            "round {round}: host a's root cause:\n{}",
            ra.stderr
        );
        // The lease (or, a put being stuck, two leases and a second),
        // then the bound docs/hosts.md gives after a host is gone.
        assert!(
            after <= CUT_BOUND + Duration::from_secs(3),
            "round {round}: host a ended {after:?} after b froze:\n{}",
            ra.stderr
        );
        assert_ne!(
            rb.rc, 0,
            "round {round}: host b, woken, goes on alone?\n{}",
            rb.stderr
        );
        eprintln!("round {round}: a ended {after:.1?} after b froze");
    }
}

/// The frames operator `op` took in, from its row of the frame table.
fn frames_in(stdout: &str, op: &str) -> u64 {
    stdout
        .lines()
        .filter(|l| l.split_whitespace().next() == Some(op))
        .find_map(|l| l.split_whitespace().nth(2)?.parse().ok())
        .unwrap_or_else(|| panic!("no frame row for {op}:\n{stdout}"))
}

#[test]
fn under_drop_oldest_a_slow_remote_consumer_loses_frames_but_never_holds_the_camera() {
    let Some(mut hosts) = Hosts::new("sdr", 2) else {
        return;
    };
    let (frames, slow_us) = (300u64, 20_000u64);
    // The camera: a frame a millisecond (0.3 s in all), 20 times faster
    // than the stage; `watch` keeps up with it (as far as the link does).
    let file = stream_yaml(&hosts.dir, "sdrop", None, slow_us, "drop-oldest", 1_000);
    // The camera stops after `frames`.
    let limit = frames.to_string();
    let a = hosts.start(
        0,
        &run_args(&file, "a", hosts.net_args(0, 7447), &["--frames", &limit]),
    );
    let b = hosts.start(1, &run_args(&file, "b", hosts.net_args(1, 7447), &[]));
    let ra = hosts.wait(a);
    let rb = hosts.wait(b);
    assert_ok("host a", &ra);
    assert_ok("host b", &rb);
    // The end crossed after the last frame; the slow stage took some
    // frames, not all, and every one it took was whole (each word checked).
    let staged = frames_in(&rb.stdout, "stage");
    assert!(
        (1..frames).contains(&staged),
        "the stage took {staged} of {frames} frames:\n{}",
        rb.stdout
    );
    // `watch` reads the same crossing stream on b at full speed.
    let watched = frames_in(&rb.stdout, "watch");
    eprintln!("of {frames} frames: stage {staged}, watch {watched}");
    assert!(watched > staged, "{}", rb.stdout);
    let camera = step_p50_ms(&ra.stdout, "camera");
    assert!(
        camera < 0.25 * slow_us as f64 / 1000.0,
        "the camera waited ({camera} ms a frame) for a stage that may drop frames:\n{}",
        ra.stdout
    );
}

#[test]
fn a_stream_across_hosts_fails_everywhere_when_a_host_dies_an_operator_is_killed_or_the_link_is_cut()
 {
    let Some(mut hosts) = Hosts::new("sfl", 2) else {
        return;
    };
    let file = stream_yaml(&hosts.dir, "sfail", None, 5_000, "block", 0);
    let mut rng = Rng(0x57ea_4001);
    for (round, what) in ["driver", "operator", "link"].into_iter().enumerate() {
        let port = 7460 + round as u16;
        let run_id = format!("r{round}");
        let extra = ["--run-id", run_id.as_str()];
        let a = hosts.start(0, &run_args(&file, "a", hosts.net_args(0, port), &extra));
        let b = hosts.start(1, &run_args(&file, "b", hosts.net_args(1, port), &extra));
        let (pa, pb) = (hosts.pid(a), hosts.pid(b));
        // Frames flow once the stage runs; then a random point of 2 s.
        let stage = operator_of(pb);
        sleep_ms(500 + rng.below(2000));
        let t = Instant::now();
        match what {
            "driver" => {
                let _ = Command::new("kill").args(["-9", &pa.to_string()]).status();
            }
            "operator" => {
                let _ = Command::new("kill").args(["-9", &stage]).status();
            }
            _ => hosts.cut(0),
        }
        let rb = hosts.wait(b);
        let ra = hosts.wait(a);
        assert!(
            t.elapsed() < Duration::from_secs(40),
            "{what}: took {:?}",
            t.elapsed()
        );
        assert_clean("host a", &ra);
        assert_clean("host b", &rb);
        match what {
            "driver" => {
                assert_eq!(ra.rc, 137, "a was killed: {}", ra.stderr);
                assert_eq!(rb.rc, 1, "{}\n{}", rb.stdout, rb.stderr);
                assert!(
                    rb.stderr.contains(
                        "fastio: host a is gone (its driver died or the link to it was cut) while camera was running"
                    ),
                    "b names the host and the operator: {}",
                    rb.stderr
                );
            }
            "operator" => {
                for (h, r) in [("a", &ra), ("b", &rb)] {
                    assert_eq!(r.rc, 1, "host {h}: {}\n{}", r.stdout, r.stderr);
                    assert!(
                        r.stderr.contains("operator stage")
                            && r.stderr.contains("killed by signal 9"),
                        "host {h} names the operator: {}",
                        r.stderr
                    );
                }
                assert!(ra.stderr.contains("stage on host b"), "{}", ra.stderr);
            }
            _ => {
                for (h, other, r) in [("a", "b", &ra), ("b", "a", &rb)] {
                    assert_eq!(r.rc, 1, "host {h}: {}\n{}", r.stdout, r.stderr);
                    assert!(
                        r.stderr.contains(&format!("host {other}")),
                        "host {h} names host {other}: {}",
                        r.stderr
                    );
                }
            }
        }
        // No consumer took a failure for the end of its stream.
        for (h, r) in [("a", &ra), ("b", &rb)] {
            assert!(
                !r.stdout.contains("sink: ") || r.rc != 0,
                "host {h}: {}",
                r.stdout
            );
        }
    }
}

/// A stream over three hosts: `camera` (on a) → `stage` (on b) → `sink`
/// (on c), the sink reading the camera's frames too; until stopped.
fn three_hosts_yaml(dir: &Path) -> PathBuf {
    let array = "type: array, element-type: uint32, shape: [-1, 64]";
    let o = streamop();
    let yaml = format!(
        "api-version: 0.5.0\nname: three\nplacement:\n  default: a\n  hosts:\n    b: [stage]\n    c: [sink]\noperators:\n\
         - name: camera\n  container: {{image: t, command: [{o}, source, v], variables: {{PAUSE_US: '2000'}}}}\n  output: [{{name: v, {array}}}]\n\
         - name: stage\n  container: {{image: t, command: [{o}, stage, v, w]}}\n  input: [{{from: camera, name: v, {array}}}]\n  output: [{{name: w, {array}}}]\n\
         - name: sink\n  container: {{image: t, command: [{o}, sink, w, v], variables: {{ERRORS_ON_STDOUT: '1'}}}}\n  input:\n  - {{from: stage, name: w, {array}}}\n  - {{from: camera, name: v, {array}}}\n\
         streaming:\n  duration: 90\n  depth: 2\n  max-shape:\n    camera/v: [8, 64]\n    stage/w: [8, 64]\n"
    );
    write(dir, "three.yaml", &yaml)
}

/// The `failure` of a host's `--report json`, with its exit status.
fn failure_of(h: &str, r: &HostRun) -> serde_json::Value {
    let text = r.stdout.split("__RC__").next().unwrap_or("");
    let report: serde_json::Value = serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("host {h}: {e}:\n{}\n{}", r.stdout, r.stderr));
    assert_eq!(r.rc, 1, "host {h}: {}", r.stderr);
    report["failure"].clone()
}

/// Issue 29: the middle host of three loses its driver (SIGKILL), its
/// link (cut), or its operator (SIGKILL), at a random moment of a running
/// stream, three times each: every host names the same root cause, as a typed
/// value, every time; a consequence (a stream poisoned because of it) is
/// never taken for it, whatever order the news arrives in.
#[test]
fn faults_on_the_middle_of_three_hosts_give_the_same_root_cause_on_every_host() {
    let Some(mut hosts) = Hosts::new("root", 3) else {
        return;
    };
    let file = three_hosts_yaml(&hosts.dir);
    let mut rng = Rng(0x2929_0003);
    let mut port = 7470u16;
    for round in 0..3 {
        for what in ["driver", "link", "operator"] {
            port += 1;
            let id = format!("r{port}");
            let extra = ["--run-id", id.as_str(), "--report", "json"];
            let runs: Vec<usize> = ["a", "b", "c"]
                .iter()
                .enumerate()
                .map(|(i, h)| hosts.start(i, &run_args(&file, h, hosts.net_args(i, port), &extra)))
                .collect();
            let pb = hosts.pid(runs[1]);
            let stage = operator_of(pb);
            sleep_ms(400 + rng.below(1500));
            match what {
                "driver" => {
                    let _ = Command::new("kill").args(["-9", &pb.to_string()]).status();
                }
                "link" => hosts.cut(1),
                _ => {
                    let _ = Command::new("kill").args(["-9", &stage]).status();
                }
            }
            let r = hosts.wait_all(&runs);
            for (h, run) in ["a", "b", "c"].iter().zip(&r) {
                assert_clean(h, run);
            }
            let gone_b_line = "host b is gone (its driver died or the link to it was cut) while stage was running";
            let gone_b = serde_json::json!({
                "kind": "host-gone", "host": "b", "operator": "stage",
                "lost": {"what": "running", "operator": "stage"},
                "what": gone_b_line,
                "text": gone_b_line
            });
            let (fa, fc) = (failure_of("a", &r[0]), failure_of("c", &r[2]));
            match what {
                "driver" => {
                    assert_eq!(r[1].rc, 137, "{round} {what}: b was killed");
                    assert_eq!(fa, gone_b, "{round} {what}: a: {}", r[0].stderr);
                    assert_eq!(fc, gone_b, "{round} {what}: c: {}", r[2].stderr);
                }
                "link" => {
                    assert_eq!(fa, gone_b, "{round} {what}: a: {}", r[0].stderr);
                    assert_eq!(fc, gone_b, "{round} {what}: c: {}", r[2].stderr);
                    // b, cut off, sees the others gone.
                    let fb = failure_of("b", &r[1]);
                    assert_eq!(fb["kind"], "host-gone", "{fb}");
                    assert!(fb["host"] == "a" || fb["host"] == "c", "{fb}");
                }
                _ => {
                    let fb = failure_of("b", &r[1]);
                    assert_eq!(
                        (&fb["kind"], &fb["operator"], &fb["host"], &fb["signal"]),
                        (
                            &serde_json::json!("signaled"),
                            &serde_json::json!("stage"),
                            &serde_json::json!("b"),
                            &serde_json::json!(9)
                        ),
                        "{round} {what}: b: {}",
                        r[1].stderr
                    );
                    assert!(fb["frame"].as_u64().is_some(), "{fb}");
                    assert_eq!(fa, fb, "{round} {what}: a: {}", r[0].stderr);
                    assert_eq!(fc, fb, "{round} {what}: c: {}", r[2].stderr);
                }
            }
            // Each host's line is the failure's text.
            for (h, run) in ["a", "c"].iter().zip([&r[0], &r[2]]) {
                let f = failure_of(h, run);
                let line = format!("fastio: {}", f["text"].as_str().unwrap());
                assert!(run.stderr.contains(&line), "host {h}: {}", run.stderr);
            }
            if what == "link" {
                // Put host b back on the bridge for the next round.
                ip_ok(&["-n", &hosts.sw(), "link", "set", "p1", "up"]);
            }
        }
    }
}

/// Issue 50, item 7: camera (a) → stage (b) → sink (c, 2 ms a frame),
/// depth 4 under `block`, frames of up to 16 KiB; the sink reads the
/// camera too. Until stopped, or `frames` frames (the sink then exits 5
/// unless exactly that many arrived, in order).
fn cut_rounds_yaml(dir: &Path, frames: Option<u64>) -> PathBuf {
    let array = "type: array, element-type: uint32, shape: [-1, 64]";
    let o = streamop();
    let (limit, expect) = match frames {
        Some(n) => (format!("frames: {n}"), format!(", EXPECT_FRAMES: '{n}'")),
        None => ("duration: 90".to_owned(), String::new()),
    };
    let yaml = format!(
        "api-version: 0.5.0\nname: cuts\nplacement:\n  default: a\n  hosts:\n    b: [stage]\n    c: [sink]\noperators:\n\
         - name: camera\n  container: {{image: t, command: [{o}, source, v]}}\n  output: [{{name: v, {array}}}]\n\
         - name: stage\n  container: {{image: t, command: [{o}, stage, v, w]}}\n  input: [{{from: camera, name: v, {array}}}]\n  output: [{{name: w, {array}}}]\n\
         - name: sink\n  container: {{image: t, command: [{o}, sink, w, v], variables: {{SLOW_US: '2000', ERRORS_ON_STDOUT: '1'{expect}}}}}\n  input:\n  - {{from: stage, name: w, {array}}}\n  - {{from: camera, name: v, {array}}}\n\
         streaming:\n  {limit}\n  depth: 4\n  overflow: block\n  max-shape:\n    camera/v: [64, 64]\n    stage/w: [64, 64]\n"
    );
    write(dir, "cuts.yaml", &yaml)
}

/// A seed from the environment variable `name` (decimal, or hexadecimal
/// after `0x`), else `default`.
fn env_seed(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| match v.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => v.parse().ok(),
        })
        .unwrap_or(default)
}

/// The `fastio: …` lines a host may end with when host b is cut off at
/// any moment (a cut while joining is said before the run started, a cut
/// before a host saw b is its join timeout): on a and c, b gone with what
/// it took (the stage running, an entry of it due, the stage not started
/// yet); on b, one of the others gone.
fn cut_causes(h: &str) -> Vec<String> {
    let gone = |host: &str, lost: &str| {
        format!("fastio: host {host} is gone (its driver died or the link to it was cut) {lost}")
    };
    match h {
        // a takes c's cause when c's `done-failed` comes first.
        "a" | "c" => vec![
            gone("b", "while stage was running"),
            gone("b", "before stage/w of stage arrived"),
            gone("b", "before stage finished"),
        ],
        _ => vec![
            gone("a", "while camera was running"),
            gone("a", "before camera/v of camera arrived"),
            gone("a", "before camera finished"),
            gone("c", "while sink was running"),
            gone("c", "before sink finished"),
        ],
    }
}

/// Issue 50, item 7: three hosts stream camera@a → stage@b → sink@c and
/// host b's link is cut at a seeded random moment of the run's first
/// 3.5 s (while the hosts join, in the stream's first second, or later),
/// round after round, either way (b's own `eth0` down, or its port of
/// the bridge): every host ends within the documented bound (the lease
/// and the grace after it, the operators' stop, the others' `all-done`:
/// [`CUT_BOUND`] after the cut; a host that never saw b join ends at its
/// join timeout) and names the root cause as documented. Rounds:
/// `FASTIO_CUT_ROUNDS` (4 by default), seed `FASTIO_CUT_SEED`.
#[test]
fn a_link_cut_at_any_moment_ends_every_host_within_the_bound() {
    let Some(mut hosts) = Hosts::new("cutr", 3) else {
        return;
    };
    let rounds: u64 = std::env::var("FASTIO_CUT_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let seed = env_seed("FASTIO_CUT_SEED", 0x0050_0007);
    let file = cut_rounds_yaml(&hosts.dir, None);
    let mut rng = Rng(seed | 1);
    let (mut slowest, mut hung) = (Duration::ZERO, Vec::new());
    // Hosts that ended at their join timeout (they never saw b), and the
    // latest of them after its start.
    let (mut at_join_timeout, mut latest_join) = (0, Duration::ZERO);
    for round in 0..rounds {
        let port = 7500 + (round % 400) as u16;
        let id = format!("r{round}");
        let extra = ["--run-id", id.as_str(), "--report", "json"];
        let t0 = Instant::now();
        let runs: Vec<usize> = ["a", "b", "c"]
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let mut args = run_args(&file, h, hosts.net_args(i, port), &extra);
                let k = args.iter().position(|a| a == "--join-timeout").unwrap();
                args[k + 1] = CUT_JOIN_TIMEOUT.as_secs().to_string();
                hosts.start(i, &args)
            })
            .collect();
        let at = Duration::from_millis(rng.below(3500));
        let own_eth0 = rng.below(2) == 0;
        std::thread::sleep(at.saturating_sub(t0.elapsed()));
        if own_eth0 {
            ip_ok(&["-n", &hosts.ns(1), "link", "set", "eth0", "down"]);
        } else {
            hosts.cut(1);
        }
        let cut = Instant::now();
        let (r, stuck) = wait_within(
            &mut hosts,
            &runs,
            CUT_JOIN_TIMEOUT + CUT_BOUND + Duration::from_secs(20),
        );
        let how = if own_eth0 {
            "b's eth0 down"
        } else {
            "b's bridge port down"
        };
        let mut line = format!("round {round}: cut at {at:?} ({how}):");
        for (h, run) in ["a", "b", "c"].iter().zip(&r) {
            let after = run.exited_at.saturating_duration_since(cut);
            line += &format!(" {h} after {after:.1?},");
        }
        eprintln!("{line}");
        if !stuck.is_empty() {
            for (h, run) in ["a", "b", "c"].iter().zip(&r) {
                eprintln!("host {h}:\n{}{}", run.stdout, run.stderr);
            }
            hung.push(format!("{line} hung: {stuck:?}"));
        }
        for (h, run) in ["a", "b", "c"].iter().zip(&r) {
            if stuck.contains(&h.to_string()) {
                continue;
            }
            assert_clean(h, run);
            assert_eq!(run.rc, 1, "round {round} host {h}: {}", run.stderr);
            let after = run.exited_at.saturating_duration_since(cut);
            let others: &[&str] = if *h == "b" { &["a", "c"] } else { &["b"] };
            let before_start = |x: &str| {
                format!(
                    "fastio: {}: host {h}: run {id} failed before it started: host {x} is gone (its driver died or the link to it was cut) ",
                    file.display()
                )
            };
            let gave_up = |x: &str| {
                format!(
                    "fastio: {}: host {h}: run {id} failed before it started: host {x} failed: host b of pipeline cuts did not join run {id} within ",
                    file.display()
                )
            };
            if ["a", "c"]
                .iter()
                .any(|x| run.stderr.lines().any(|l| l.starts_with(&gave_up(x))))
            {
                // Another host gave up joining (it never saw b) and said
                // so: the join timeout ends this one too.
                assert!(
                    run.exited_at.saturating_duration_since(t0) <= CUT_JOIN_TIMEOUT + CUT_BOUND,
                    "round {round}: host {h} gave up joining after {:?}",
                    run.exited_at - t0
                );
                at_join_timeout += 1;
                latest_join = latest_join.max(run.exited_at - t0);
                continue;
            }
            if run.stderr.contains(" did not join run ") {
                // Cut off before it saw the other host's token: its join
                // timeout ends it.
                let not_joined = format!("fastio: {}: host {h}: host", file.display());
                let within = format!(" of pipeline cuts did not join run {id} within ");
                assert!(
                    run.stderr
                        .lines()
                        .any(|l| l.starts_with(&not_joined) && l.contains(&within)),
                    "round {round}: host {h}:\n{}",
                    run.stderr
                );
                assert!(
                    run.exited_at.saturating_duration_since(t0) <= CUT_JOIN_TIMEOUT + CUT_BOUND,
                    "round {round}: host {h} gave up joining after {:?}",
                    run.exited_at - t0
                );
                at_join_timeout += 1;
                latest_join = latest_join.max(run.exited_at - t0);
                continue;
            }
            assert!(
                after <= CUT_BOUND,
                "round {round}: host {h} ended {after:?} after the cut:\n{}",
                run.stderr
            );
            slowest = slowest.max(after);
            if run.stderr.contains(" failed before it started: ") {
                // Cut while joining: the host gone, as it was lost.
                assert!(
                    others.iter().any(|x| run.stderr.lines().any(|l| l
                        .strip_prefix(&before_start(x))
                        .is_some_and(|lost| cut_causes(h).contains(&format!(
                            "fastio: host {x} is gone (its driver died or the link to it was cut) {lost}"
                        ))))),
                    "round {round}: host {h}:\n{}",
                    run.stderr
                );
            } else {
                let f = failure_of(h, run);
                let line = format!("fastio: {}", f["text"].as_str().unwrap_or(""));
                assert!(
                    cut_causes(h).contains(&line) && run.stderr.lines().any(|l| l == line),
                    "round {round}: host {h} ends with {line:?}:\n{}",
                    run.stderr
                );
            }
        }
        if own_eth0 {
            ip_ok(&["-n", &hosts.ns(1), "link", "set", "eth0", "up"]);
        } else {
            ip_ok(&["-n", &hosts.sw(), "link", "set", "p1", "up"]);
        }
    }
    eprintln!(
        "{rounds} rounds: {} hung; the slowest host ended {slowest:.1?} after its cut (bound {CUT_BOUND:?}); {at_join_timeout} ended at their join timeout ({CUT_JOIN_TIMEOUT:?}), at the latest {latest_join:.1?} after they started",
        hung.len()
    );
    assert!(hung.is_empty(), "hosts hung:\n{}", hung.join("\n"));
}

/// How long a host may take to end after host b is cut off (docs/hosts.md,
/// *How long the others take to end*): `--lease` (2 s here) + `--grace`
/// (3 s, the default) + 6 s.
const CUT_BOUND: Duration = Duration::from_secs(2 + 3 + 6);

/// The join timeout of [`a_link_cut_at_any_moment_ends_every_host_within_the_bound`].
const CUT_JOIN_TIMEOUT: Duration = Duration::from_secs(8);

/// Waits for runs `ks` at most `limit`; a run still going then is killed
/// (named in the second list) and its output kept.
fn wait_within(hosts: &mut Hosts, ks: &[usize], limit: Duration) -> (Vec<HostRun>, Vec<String>) {
    let deadline = Instant::now() + limit;
    let mut exited: Vec<Option<Instant>> = vec![None; ks.len()];
    while exited.iter().any(Option::is_none) && Instant::now() < deadline {
        for (j, &k) in ks.iter().enumerate() {
            if exited[j].is_none() && hosts.running[k].0.try_wait().unwrap().is_some() {
                exited[j] = Some(Instant::now());
            }
        }
        sleep_ms(20);
    }
    let stuck: Vec<(String, i32)> = ks
        .iter()
        .enumerate()
        .filter(|&(j, _)| exited[j].is_none())
        .map(|(j, &k)| {
            (
                ["a", "b", "c"].get(j).unwrap_or(&"?").to_string(),
                hosts.pid(k),
            )
        })
        .collect();
    // Where each waits: the drivers' and their operators' threads (when
    // gdb is here), all taken before any is killed (a host may end once
    // another is gone).
    for (host, pid) in &stuck {
        let children =
            std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        for p in
            std::iter::once(pid.to_string()).chain(children.split_whitespace().map(str::to_owned))
        {
            let exe = format!("/proc/{p}/exe");
            if let Ok(out) = Command::new("timeout")
                .args([
                    "30",
                    "gdb",
                    &exe,
                    "-p",
                    &p,
                    "-batch",
                    "-ex",
                    "thread apply all bt",
                ])
                .stdin(Stdio::null())
                .output()
            {
                eprintln!(
                    "stacks of host {host} process {p}:\n{}",
                    String::from_utf8_lossy(&out.stdout)
                );
            }
        }
    }
    for (_, pid) in &stuck {
        let _ = Command::new("pkill")
            .args(["-9", "-P", &pid.to_string()])
            .status();
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    let stuck: Vec<String> = stuck.into_iter().map(|(h, _)| h).collect();
    let runs = ks
        .iter()
        .zip(exited)
        .map(|(&k, at)| {
            let mut r = hosts.wait(k);
            r.exited_at = at.unwrap_or(r.exited_at);
            r
        })
        .collect();
    (runs, stuck)
}

/// A fault of [`soak_rounds_of_random_faults_on_three_hosts`].
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    /// SIGKILL of the host's driver.
    DriverKill,
    /// The host's `eth0` down for the rest of the round.
    LinkCut,
    /// The host's `eth0` down this long, then up.
    LinkFlap(Duration),
    /// SIGKILL of the host's operator (once it runs).
    OperatorKill,
    /// SIGSTOP of the host's driver, SIGCONT [`SOAK_STOP`] later.
    Stop,
}

impl Fault {
    fn name(self) -> &'static str {
        match self {
            Fault::DriverKill => "driver-kill",
            Fault::LinkCut => "link-cut",
            Fault::LinkFlap(_) => "link-flap",
            Fault::OperatorKill => "operator-kill",
            Fault::Stop => "sigstop",
        }
    }
}

/// How long the soak keeps a host's driver stopped.
const SOAK_STOP: Duration = Duration::from_secs(5);

/// The frames of a soak round's stream (the sink takes 2 ms a frame: at
/// least 3 s of stream after the join).
const SOAK_FRAMES: u64 = 1500;

/// The `--tls-*` arguments of hosts a, b and c, whose CA and certificates
/// the `openssl` lines of docs/hosts.md make in `dir` (as `Pki::make` of
/// hosts/tls.rs does; that module keeps it to itself).
fn soak_tls(dir: &Path) -> impl Fn(&str) -> Vec<String> + use<> {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/hosts.md"))
            .unwrap();
    let block = doc
        .split_once("<!-- tls-certificates -->\n```sh\n")
        .expect("docs/hosts.md has the certificates block")
        .1;
    let (first, rest) = block
        .split_once("\n```")
        .unwrap()
        .0
        .split_once('\n')
        .unwrap();
    assert!(first.starts_with("HOSTS="), "{first}");
    std::fs::create_dir_all(dir).unwrap();
    let out = Command::new("sh")
        .args(["-c", &format!("set -e\nHOSTS=\"a b c\"\n{rest}\n")])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = dir.to_owned();
    move |h: &str| {
        let file = |name: String| dir.join(name).display().to_string();
        vec![
            "--tls-ca".into(),
            file("ca.pem".into()),
            "--tls-cert".into(),
            file(format!("{h}.pem")),
            "--tls-key".into(),
            file(format!("{h}.key")),
        ]
    }
}

/// How a host of a soak round ended, as one token: `ok`; `killed` (its
/// driver SIGKILLed); `join-timeout:X` (host X never joined: its own join
/// timeout, or another host's it was told of); `early-gone:X` (failed
/// before the run started: host X gone); the `failure` of its `--report
/// json` as `KIND:HOST[:OPERATOR][:LOST]`; else `rc=N`. With that
/// failure.
/// Whether a host's end in a flap round names some host gone (another
/// than the flapped one: a mesh the flap split, where each side judged the
/// other gone) or frames lost on a link (one that went down and came back
/// within the lease, its messages in flight lost with it: the receiving
/// host fails the stream at the gap).
fn flap_split(fault: Fault, token: &str) -> bool {
    matches!(fault, Fault::LinkFlap(_))
        && ["host-gone:", "early-gone:", "join-timeout:", "transfer:"]
            .iter()
            .any(|p| token.starts_with(p))
}

fn soak_end(run: &HostRun) -> (String, Option<serde_json::Value>) {
    match run.rc {
        0 => return ("ok".into(), None),
        137 => return ("killed".into(), None),
        _ => {}
    }
    for l in run.stderr.lines() {
        if let Some((before, _)) = l.split_once(" of pipeline cuts did not join run ")
            && let Some((_, x)) = before.rsplit_once("host ")
        {
            return (format!("join-timeout:{x}"), None);
        }
        if let Some((_, rest)) = l.split_once(" failed before it started: host ")
            && let Some((x, _)) = rest.split_once(" is gone ")
        {
            return (format!("early-gone:{x}"), None);
        }
    }
    let text = run.stdout.split("__RC__").next().unwrap_or("");
    let failure = serde_json::from_str::<serde_json::Value>(text.trim())
        .ok()
        .map(|r| r["failure"].clone())
        .filter(serde_json::Value::is_object);
    let Some(f) = failure else {
        return (format!("rc={}", run.rc), None);
    };
    let mut token = format!(
        "{}:{}",
        f["kind"].as_str().unwrap_or("?"),
        f["host"].as_str().unwrap_or("?")
    );
    for part in [&f["operator"], &f["lost"]["what"]] {
        if let Some(p) = part.as_str() {
            token = format!("{token}:{p}");
        }
    }
    (token, Some(f))
}

/// What a host's operators said of a wrong frame (fio-streamop exits 4, 5
/// or 6 then), and an operator's failure with one of those statuses.
fn wrong_frames(run: &HostRun, failure: Option<&serde_json::Value>) -> Vec<String> {
    let mut said: Vec<String> = run
        .stdout
        .lines()
        .chain(run.stderr.lines())
        .filter(|l| {
            [
                "[stage] frame ",
                "[sink] frame ",
                "[sink] expected ",
                "[sink] input ",
            ]
            .iter()
            .any(|p| l.starts_with(p))
        })
        .map(str::to_owned)
        .collect();
    if let Some(f) = failure
        && f["kind"] == "exited"
        && matches!(f["code"].as_i64(), Some(4..=6))
    {
        said.push(f.to_string());
    }
    said
}

/// The processes in network namespace `ns`.
fn netns_pids(ns: &str) -> Vec<String> {
    Command::new("ip")
        .args(["netns", "pids", ns])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Issue 51, part 3: faults by the hundred. Three hosts stream camera@a
/// → stage@b → sink@c ([`cut_rounds_yaml`], [`SOAK_FRAMES`] frames, each
/// word and the order checked by the sink), over plain TCP or mutual TLS
/// (QUIC), and each round one fault, chosen at random, hits a random host
/// at a random moment of the first 3.5 s (while the hosts join, in the
/// stream's first second, or later): its driver SIGKILLed, its `eth0`
/// down (cut), its `eth0` down for 0.2–3 s and up again (flap), its
/// operator SIGKILLed, or its driver stopped (SIGSTOP) for 5 s. Each
/// round checks: every host ends within the bound of docs/hosts.md
/// ([`CUT_BOUND`] after the fault, the stopped host's after its SIGCONT;
/// [`CUT_JOIN_TIMEOUT`] + [`CUT_BOUND`] after the start for a host that
/// never saw the faulty one join), or the run succeeds (a flap or a stop
/// it survives, a fault after the stream) and the sink got every frame;
/// the typed root cause is the same on every host that can know it (the
/// others than the faulty host; every host for an operator killed); no
/// frame wrong or out of order; every host's `/dev/shm` empty; no process
/// left in any host. One line per round (`soak round=K fault=… host=…
/// at_ms=… tls=… outcome=… slowest_exit_ms=… … cause=…`), then a summary
/// line: `cargo xtask soak hosts` reads them. `FASTIO_SOAK_ROUNDS` (10 by
/// default), `FASTIO_SOAK_SEED`, `FASTIO_SOAK_TLS` (`1` every round, `0`
/// none, else every other round), `FASTIO_SOAK_FIRST` (the first round to
/// run, 0 by default: rounds before it draw their faults and are skipped,
/// so round K is the same as in a whole run of the same seed; then
/// `FASTIO_SOAK_ROUNDS` rounds run from it). A host
/// still running at the round's limit has its stacks printed (gdb) before
/// it is killed.
#[test]
fn soak_rounds_of_random_faults_on_three_hosts() {
    let rounds: u64 = std::env::var("FASTIO_SOAK_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let seed = env_seed("FASTIO_SOAK_SEED", 0x0051_0003);
    let first: u64 = std::env::var("FASTIO_SOAK_FIRST")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let tls_mode = std::env::var("FASTIO_SOAK_TLS").unwrap_or_default();
    soak("soak", seed, first..first.saturating_add(rounds), &tls_mode);
}

/// Round 164 of the soak's default seed, three times: host c's link down
/// for 1.25 s while the stream runs (plain TCP). Frames and credit were on
/// their way; after the link came back, c's credit messages (said again
/// ten times a second) never reached the producing hosts, which waited
/// for credit while c waited for frames: all three hosts hung in 7 of 10
/// runs. The producing host now says how many frames it sent while it
/// waits (fastio-net's `Sent` message), answered with the grant, and
/// credit flows again: the run ends within the bound, with every frame or
/// the same cause on every host.
#[test]
fn a_flap_while_credit_is_on_its_way_never_leaves_the_hosts_waiting() {
    for _ in 0..3 {
        soak("flap", 0x0051_0003, 164..165, "mixed");
    }
}

/// Runs rounds `rounds` of [`soak_rounds_of_random_faults_on_three_hosts`]
/// (the rounds before them draw their faults and are skipped), on three
/// hosts named after `name`.
fn soak(name: &str, seed: u64, rounds: std::ops::Range<u64>, tls_mode: &str) {
    let Some(mut hosts) = Hosts::new(name, 3) else {
        return;
    };
    let first = rounds.start;
    let ran = rounds.end.saturating_sub(rounds.start);
    let rounds = rounds.end;
    let file = cut_rounds_yaml(&hosts.dir, Some(SOAK_FRAMES));
    let tls_args = soak_tls(&hosts.dir.join("pki"));
    let names = ["a", "b", "c"];
    let operators = ["camera", "stage", "sink"];
    let mut rng = Rng(seed | 1);
    let mut problems: Vec<String> = Vec::new();
    // hangs, out of bound, wrong causes, wrong frames, leaks, processes
    // left (hosts, each round).
    let mut totals = [0usize; 6];
    let mut split_total = 0usize;
    let mut slowest = Duration::ZERO;
    for round in 0..rounds {
        let tls = match tls_mode {
            "1" => true,
            "0" => false,
            _ => round % 2 == 1,
        };
        let fault = match rng.below(5) {
            0 => Fault::DriverKill,
            1 => Fault::LinkCut,
            2 => Fault::LinkFlap(Duration::from_millis(200 + rng.below(2801))),
            3 => Fault::OperatorKill,
            _ => Fault::Stop,
        };
        let x = rng.below(3) as usize;
        let at = Duration::from_millis(rng.below(3500));
        if round < first {
            continue;
        }
        let port = 7600 + (round % 400) as u16;
        let id = format!("s{round}");
        let extra = ["--run-id", id.as_str(), "--report", "json"];
        let t0 = Instant::now();
        let runs: Vec<usize> = names
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let mut net = hosts.net_args(i, port);
                if tls {
                    net = net
                        .into_iter()
                        .map(|a| a.replace("tcp/", "quic/"))
                        .collect();
                    net.extend(tls_args(h));
                }
                let mut args = run_args(&file, h, net, &extra);
                let k = args.iter().position(|a| a == "--join-timeout").unwrap();
                args[k + 1] = CUT_JOIN_TIMEOUT.as_secs().to_string();
                hosts.start(i, &args)
            })
            .collect();
        let driver = hosts.pid(runs[x]);
        std::thread::sleep(at.saturating_sub(t0.elapsed()));
        let ns = hosts.ns(x);
        let kill = |signal: &str, pid: &str| {
            let _ = Command::new("kill").args([signal, pid]).status();
        };
        let mut later = None;
        let mut missed = false;
        match fault {
            Fault::DriverKill => kill("-KILL", &driver.to_string()),
            Fault::LinkCut => ip_ok(&["-n", &ns, "link", "set", "eth0", "down"]),
            Fault::LinkFlap(down) => {
                ip_ok(&["-n", &ns, "link", "set", "eth0", "down"]);
                let ns = ns.clone();
                later = Some(std::thread::spawn(move || {
                    std::thread::sleep(down);
                    ip_ok(&["-n", &ns, "link", "set", "eth0", "up"]);
                    Instant::now()
                }));
            }
            Fault::OperatorKill => {
                // Once the operator runs (not before the hosts joined);
                // none if the driver ends first.
                let op = loop {
                    let children =
                        std::fs::read_to_string(format!("/proc/{driver}/task/{driver}/children"))
                            .unwrap_or_default();
                    if let Some(p) = children.split_whitespace().next() {
                        break Some(p.to_owned());
                    }
                    if std::fs::read_to_string(format!("/proc/{driver}/stat"))
                        .map_or(true, |s| s.contains(") Z "))
                    {
                        break None;
                    }
                    sleep_ms(2);
                };
                match op {
                    Some(op) => kill("-KILL", &op),
                    None => missed = true,
                }
            }
            Fault::Stop => {
                kill("-STOP", &driver.to_string());
                later = Some(std::thread::spawn(move || {
                    std::thread::sleep(SOAK_STOP);
                    let _ = Command::new("kill")
                        .args(["-CONT", &driver.to_string()])
                        .status();
                    Instant::now()
                }));
            }
        }
        let fault_at = Instant::now();
        let at_ms = (fault_at - t0).as_millis();
        let (r, stuck) = wait_within(
            &mut hosts,
            &runs,
            CUT_JOIN_TIMEOUT + CUT_BOUND + SOAK_STOP + Duration::from_secs(20),
        );
        let back_at = later.map(|t| t.join().unwrap());
        if fault == Fault::LinkCut {
            ip_ok(&["-n", &ns, "link", "set", "eth0", "up"]);
        }
        // Every process of every host gone (at most 3 s after the last
        // host's end); any left is named and killed.
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut left: Vec<String> = (0..3).flat_map(|i| netns_pids(&hosts.ns(i))).collect();
        while !left.is_empty() && Instant::now() < deadline {
            sleep_ms(50);
            left = (0..3).flat_map(|i| netns_pids(&hosts.ns(i))).collect();
        }
        let left: Vec<String> = left
            .into_iter()
            .map(|pid| {
                let cmd = std::fs::read(format!("/proc/{pid}/cmdline"))
                    .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
                    .unwrap_or_default();
                let _ = Command::new("kill").args(["-9", &pid]).status();
                format!("{pid} {}", cmd.trim())
            })
            .collect();
        let ends: Vec<(String, Option<serde_json::Value>)> = r.iter().map(soak_end).collect();
        let ok = ends.iter().all(|(t, _)| t == "ok");
        let mut notes: Vec<String> = Vec::new();
        let mut counts = [stuck.len(), 0, 0, 0, 0, left.len()];
        // Flaps that split the mesh (some links closed, others kept): the
        // hosts on each side name the other gone (a known limit, counted
        // and shown, not a pass: docs/hosts.md, "Faults by the hundred").
        let mut splits: Vec<String> = Vec::new();
        if !left.is_empty() {
            notes.push(format!("left running: {left:?}"));
        }
        if !stuck.is_empty() {
            notes.push(format!("hung: {stuck:?}"));
        }
        let mut round_slowest = Duration::ZERO;
        for (i, (run, (token, failure))) in r.iter().zip(&ends).enumerate() {
            let h = names[i];
            if !run.shm_left.is_empty() {
                counts[4] += 1;
                notes.push(format!("host {h}: /dev/shm left {:?}", run.shm_left));
            }
            let wrong = wrong_frames(run, failure.as_ref());
            if !wrong.is_empty() {
                counts[3] += 1;
                notes.push(format!("host {h}: wrong frames: {wrong:?}"));
            }
            if stuck.iter().any(|s| s == h) || token == "ok" || token == "killed" {
                continue;
            }
            // The stopped host could act only once woken.
            let frozen = fault == Fault::Stop && i == x;
            let (from, grace) = if frozen {
                (back_at.unwrap_or(fault_at), SOAK_STOP)
            } else {
                (fault_at, Duration::ZERO)
            };
            if token.starts_with("join-timeout:") {
                let after = run.exited_at.saturating_duration_since(t0);
                if after > CUT_JOIN_TIMEOUT + CUT_BOUND + grace {
                    counts[1] += 1;
                    notes.push(format!(
                        "host {h} ended {after:?} after the start ({token})"
                    ));
                }
                continue;
            }
            let after = run.exited_at.saturating_duration_since(from);
            round_slowest = round_slowest.max(after);
            if after > CUT_BOUND {
                counts[1] += 1;
                notes.push(format!(
                    "host {h} ended {after:?} after the fault ({token})"
                ));
            }
        }
        // The root cause, on every host that can know it.
        let fx = names[x];
        let witness = |t: &str| {
            t.starts_with(&format!("host-gone:{fx}:"))
                || t == format!("early-gone:{fx}")
                || t == format!("join-timeout:{fx}")
        };
        // The faulty host (cut, flapped, stopped) names another host it
        // judged gone, or itself when the others' word reached it once
        // its link was back.
        let itself = |t: &str| {
            ["host-gone:", "early-gone:", "join-timeout:"]
                .iter()
                .any(|p| t.starts_with(p))
        };
        let mut typed: Vec<(&str, &serde_json::Value)> = Vec::new();
        for (i, (token, failure)) in ends.iter().enumerate() {
            let h = names[i];
            if stuck.iter().any(|s| s == h) || token == "ok" {
                continue;
            }
            let right = match fault {
                _ if missed => false,
                Fault::OperatorKill => {
                    token.starts_with(&format!("signaled:{fx}:{}", operators[x]))
                        && failure.as_ref().is_some_and(|f| f["signal"] == 9)
                }
                Fault::DriverKill if i == x => token == "killed",
                _ if i == x => itself(token),
                _ => witness(token),
            };
            if !right && flap_split(fault, token) {
                splits.push(format!("host {h} ends with {token}"));
            } else if !right {
                counts[2] += 1;
                notes.push(format!("host {h} ends with {token}"));
            }
            if let Some(f) = failure
                && (fault == Fault::OperatorKill || i != x)
            {
                typed.push((h, f));
            }
        }
        // An operator's failure is the same value everywhere (frame
        // included); a host gone is the same host, while what was lost
        // there may differ by host (docs/hosts.md: an entry of it due
        // *here*, when the hosts had not all seen its operator run).
        let same = |f: &serde_json::Value, g: &serde_json::Value| {
            if fault == Fault::OperatorKill {
                f == g
            } else {
                (&f["kind"], &f["host"]) == (&g["kind"], &g["host"])
            }
        };
        if let Some((h0, f0)) = typed.first()
            && let Some((h, f)) = typed.iter().find(|(_, f)| !same(f, f0))
        {
            let what = format!("causes differ: host {h0} {f0}, host {h} {f}");
            if matches!(fault, Fault::LinkFlap(_))
                && (f["kind"] == "host-gone" || f["kind"] == "transfer")
            {
                splits.push(what);
            } else {
                counts[2] += 1;
                notes.push(what);
            }
        }
        if ok
            && !r[2]
                .stderr
                .contains(&format!("[sink] sink: {SOAK_FRAMES} frames"))
        {
            counts[3] += 1;
            notes.push("the run succeeded without every frame at the sink".into());
        }
        let cause = ends
            .iter()
            .enumerate()
            .find(|(i, (t, _))| (*i != x || fault == Fault::OperatorKill) && t != "ok")
            .or_else(|| ends.iter().enumerate().find(|(_, (t, _))| t != "ok"))
            .map_or("none", |(_, (t, _))| t.as_str());
        let outcome = if !stuck.is_empty() {
            "hung"
        } else if ok {
            "ok"
        } else {
            "failed"
        };
        let flap = match fault {
            Fault::LinkFlap(d) => format!(" down_ms={}", d.as_millis()),
            _ => String::new(),
        };
        slowest = slowest.max(round_slowest);
        for (t, c) in totals.iter_mut().zip(counts) {
            *t += c;
        }
        eprintln!(
            "soak round={round} fault={} host={fx} at_ms={at_ms}{flap} tls={} outcome={outcome} slowest_exit_ms={} hangs={} out_of_bound={} wrong_causes={} wrong_frames={} leaks={} processes_left={} missed={} split_causes={} cause={cause}",
            fault.name(),
            u8::from(tls),
            round_slowest.as_millis(),
            counts[0],
            counts[1],
            counts[2],
            counts[3],
            counts[4],
            counts[5],
            u8::from(missed),
            splits.len(),
        );
        split_total += splits.len();
        for w in &splits {
            eprintln!("soak round {round}: a split mesh: {w}");
        }
        if !notes.is_empty() {
            for (h, run) in names.iter().zip(&r) {
                let tail: Vec<&str> = run.stderr.lines().rev().take(30).collect();
                eprintln!(
                    "soak round {round} host {h} (rc {}), its stderr's end:\n{}",
                    run.rc,
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
            }
            problems.push(format!(
                "round {round} (seed {seed:#x}, {} on {fx} at {at_ms} ms, tls {tls}): {}",
                fault.name(),
                notes.join("; ")
            ));
        }
    }
    eprintln!(
        "soak summary rounds={ran} seed={seed:#x} hangs={} out_of_bound={} wrong_causes={} wrong_frames={} leaks={} processes_left={} split_causes={split_total} slowest_exit_ms={}",
        totals[0],
        totals[1],
        totals[2],
        totals[3],
        totals[4],
        totals[5],
        slowest.as_millis()
    );
    assert!(problems.is_empty(), "soak:\n{}", problems.join("\n"));
}

/// The thread names of process `pid` once it has Zenoh's application
/// threads and they stay the same for 200 ms (at most 10 s).
fn zenoh_threads(pid: u32) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last: Vec<String> = Vec::new();
    loop {
        let mut names: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|d| {
                d.flatten()
                    .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                    .map(|n| n.trim().to_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        let settled = names == last && names.iter().any(|n| n.starts_with("app-"));
        if settled || Instant::now() > deadline {
            return names;
        }
        last = names;
        sleep_ms(200);
    }
}

#[test]
fn a_host_sizes_zenohs_threads_for_the_machine_unless_told() {
    let dir = std::env::temp_dir().join(format!("fio-zrt-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = transfer_yaml(&dir, "zrt");
    let start = |runtime: Option<&str>| {
        let mut c = Command::new(fastio());
        c.arg("run")
            .arg(&file)
            .args(["--host", "b", "--listen", "tcp/127.0.0.1:0"])
            .args(["--join-timeout", "3"])
            .env_remove("ZENOH_RUNTIME")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(r) = runtime {
            c.env("ZENOH_RUNTIME", r);
        }
        c.spawn().unwrap()
    };
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    // Chosen: receiving, accepting and networking handed to `app`, whose
    // workers are the cores (up to four). The process is the same one.
    let mut chosen = start(None);
    let names = zenoh_threads(chosen.id());
    let _ = chosen.kill();
    let _ = chosen.wait();
    let app = names.iter().filter(|n| n.starts_with("app-")).count();
    assert_eq!(app, cores.clamp(1, 4), "{names:?}");
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with("rx-") || n.starts_with("acc-") || n.starts_with("net-")),
        "{names:?}"
    );
    // Told: Zenoh's own sizes, as the variable says.
    let mut told = start(Some("()"));
    let names = zenoh_threads(told.id());
    let _ = told.kill();
    let _ = told.wait();
    assert!(names.iter().any(|n| n.starts_with("acc-")), "{names:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The median age (µs) of a phased sink's frames before, during and after
/// its slow phase, and its median cycle (from one frame to the next)
/// during it (fio-streamop's `sink: latency p50 us ...` line).
fn phase_latency_us(stdout: &str) -> [u64; 4] {
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("sink: latency p50 us ").map(|(_, r)| r))
        .unwrap_or_else(|| panic!("no latency line:\n{stdout}"));
    let f: Vec<&str> = line.split_whitespace().collect();
    let at = |k: &str| -> u64 {
        let i = f.iter().position(|w| *w == k).unwrap();
        f[i + 1].parse().unwrap()
    };
    [at("before"), at("during"), at("after"), at("cycle")]
}

/// Issue 51, part 1: back-pressure across hosts holds what the pipeline
/// asked for. camera@a → stage@b → sink@c, `block`, depth 4, frames of up
/// to 32 KiB, the camera unpaced; the sink takes 4 ms a frame for frames
/// 300..600 only. While it is slow its frames wait at most (3 × depth + 4)
/// frames of its cycle, 64 ms, beyond what a frame takes to cross the
/// chain with no queue (credit by what the consumers released, the window
/// shrunk to the depth: before, each crossing queued up to 4 × depth more,
/// 46 frames, 183 ms); before and after, with the sink fast, they are far
/// younger (the window grew back: the link, not the consumer, is the
/// limit). Every frame arrives, in order, each word checked. The crossing
/// time is the fast phases' median age (at most two frames' worth),
/// measured in the same run: on a
/// quiet machine about 1.3 ms (`cargo xtask bench hosts latency` holds the
/// whole age to 64 ms there), with two busy loops beside the test up to
/// 8 ms, which a bound in frames alone would count as queue.
#[test]
fn a_slow_consumer_on_a_third_host_holds_the_chain_to_the_depth_asked_for() {
    let Some(mut hosts) = Hosts::new("lat", 3) else {
        return;
    };
    let array = "type: array, element-type: uint32, shape: [-1, 64]";
    let o = streamop();
    let frames = 900;
    let yaml = format!(
        "api-version: 0.5.0\nname: latency\nplacement:\n  default: a\n  hosts:\n    b: [stage]\n    c: [sink]\noperators:\n\
         - name: camera\n  container: {{image: t, command: [{o}, source, v]}}\n  output: [{{name: v, {array}}}]\n\
         - name: stage\n  container: {{image: t, command: [{o}, stage, v, w]}}\n  input: [{{from: camera, name: v, {array}}}]\n  output: [{{name: w, {array}}}]\n\
         - name: sink\n  container: {{image: t, command: [{o}, sink, w], variables: {{SLOW_US: '4000', SLOW_FROM: '300', SLOW_UNTIL: '600', EXPECT_FRAMES: '{frames}'}}}}\n  input: [{{from: stage, name: w, {array}}}]\n\
         streaming:\n  frames: {frames}\n  depth: 4\n  overflow: block\n  max-shape:\n    camera/v: [128, 64]\n    stage/w: [128, 64]\n"
    );
    let file = write(&hosts.dir, "latency.yaml", &yaml);
    let ks: Vec<usize> = ["a", "b", "c"]
        .iter()
        .enumerate()
        .map(|(i, h)| hosts.start(i, &run_args(&file, h, hosts.net_args(i, 7447), &[])))
        .collect();
    let r = hosts.wait_all(&ks);
    for (h, run) in ["a", "b", "c"].iter().zip(&r) {
        assert_ok(&format!("host {h}"), run);
    }
    let want = format!("[sink] sink: {frames} frames");
    assert!(r[2].stdout.contains(&want), "{want}:\n{}", r[2].stdout);
    let [before, during, after, cycle] = phase_latency_us(&r[2].stdout);
    eprintln!(
        "sink's median age: before {before} µs, during {during} µs, after {after} µs; its cycle \
         while slow {cycle} µs"
    );
    // (3 × depth + 4) frames of the sink's own time per frame: 4 ms and
    // what checking a frame's words takes (this build is unoptimised).
    assert!(
        (4_000..8_000).contains(&cycle),
        "the slow sink's cycle is {cycle} µs"
    );
    // What a frame takes to cross the chain when nothing queues: the
    // smaller of the fast phases' median ages, counted as at most two
    // frames of the cycle (more would be queue, not crossing).
    let crossing = before.min(after).min(2 * cycle);
    let bound_us = (3 * 4 + 4) * cycle + crossing;
    assert!(
        during <= bound_us,
        "while the sink is slow its frames are {during} µs old at the median (at most {bound_us}: \
         16 frames of {cycle} µs and the {crossing} µs a frame takes to cross without a queue)"
    );
    for (phase, p50) in [("before", before), ("after", after)] {
        assert!(
            p50 * 2 <= during,
            "{phase} the slow phase the fast sink's frames are {p50} µs old, {during} µs during it"
        );
    }
}
