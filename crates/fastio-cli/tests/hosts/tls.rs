//! Mutual TLS between the namespace hosts (docs/hosts.md, *Transports*):
//! the certificates are made by the very `openssl` lines of the docs; the
//! volume demo and a stream run over TLS; and peers that should not be in
//! a run (no certificate, a plain Zenoh client, another CA's, an expired
//! one, a valid one for a name outside the run, a valid one of another
//! host) cannot join, cannot get a piece or a frame accepted, and read
//! nothing, while the run's hosts say why in one line. Over QUIC, whose
//! close drops what it has not sent, a host closes only once the others
//! have its `done`.

use super::*;

/// A CA and certificates made by the docs' `openssl` lines.
struct Pki {
    dir: PathBuf,
}

impl Pki {
    /// Runs the block after `<!-- tls-certificates -->` in docs/hosts.md in
    /// `dir`, for `names` (its `HOSTS=` line given these instead).
    fn make(dir: &Path, names: &str) -> Pki {
        let doc = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/hosts.md"),
        )
        .unwrap();
        let after = doc
            .split_once("<!-- tls-certificates -->\n```sh\n")
            .expect("docs/hosts.md has the certificates block")
            .1;
        let block = after.split_once("\n```").unwrap().0;
        let (first, rest) = block.split_once('\n').unwrap();
        assert!(first.starts_with("HOSTS="), "{first}");
        std::fs::create_dir_all(dir).unwrap();
        sh(dir, &format!("HOSTS=\"{names}\"\n{rest}\n"));
        Pki {
            dir: dir.to_owned(),
        }
    }

    fn file(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// `--tls-ca --tls-cert --tls-key` for `host`.
    fn args(&self, host: &str) -> Vec<String> {
        vec![
            "--tls-ca".into(),
            self.file("ca.pem"),
            "--tls-cert".into(),
            self.file(&format!("{host}.pem")),
            "--tls-key".into(),
            self.file(&format!("{host}.key")),
        ]
    }

    /// A certificate for `host` signed by this CA that was valid for one
    /// day, 2025-01-01 (`NAME.pem`, `NAME.key`): expired as a real one
    /// is. (`openssl x509 -days -1` would make one that ends before it
    /// begins, which rustls calls `Expired` without the times; OpenSSL
    /// 3.0's `x509` takes no dates, its `ca` does.)
    fn expired(&self, host: &str, name: &str) {
        let script = format!(
            "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout {name}.key -out {name}.csr -subj /CN={host}\n\
             printf 'subjectAltName=DNS:{host}\\nbasicConstraints=CA:FALSE\\nkeyUsage=digitalSignature\\nextendedKeyUsage=serverAuth,clientAuth\\n' > {name}.ext\n\
             mkdir -p {name}-ca/new && : > {name}-ca/index.txt && echo 01 > {name}-ca/serial\n\
             printf '[ca]\\ndefault_ca = d\\n[d]\\ndatabase = {name}-ca/index.txt\\nnew_certs_dir = {name}-ca/new\\nserial = {name}-ca/serial\\ndefault_md = sha256\\npolicy = p\\nunique_subject = no\\n[p]\\ncommonName = supplied\\n' > {name}-ca.cnf\n\
             openssl ca -batch -notext -config {name}-ca.cnf -cert ca.pem -keyfile ca.key -in {name}.csr -out {name}.pem -startdate 20250101000000Z -enddate 20250102000000Z -extfile {name}.ext\n"
        );
        sh(&self.dir, &script);
    }
}

/// Runs `script` (`set -e`) in `dir`; its stderr if it fails.
fn sh(dir: &Path, script: &str) {
    let out = Command::new("sh")
        .args(["-c", &format!("set -e\n{script}")])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script}\nfailed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Host `i`'s endpoints over mutual TLS (as [`Hosts::net_args`],
/// `quic/`).
fn tls_net(hosts: &Hosts, i: usize) -> Vec<String> {
    hosts
        .net_args(i, 7447)
        .into_iter()
        .map(|a| a.replace("tcp/", "quic/"))
        .collect()
}

fn intruder() -> PathBuf {
    // In the profile of the `fastio` it runs beside (a `--release` run
    // found a stale release intruder otherwise); built before the tests
    // under xtask, once by hand runs (`common::prebuilt`).
    common::prebuilt(
        &["-p", "fastio-net", "--example", "intruder"],
        Path::new(fastio())
            .parent()
            .unwrap()
            .join("examples/intruder"),
    )
}

/// What an intruder's credentials are.
#[derive(Debug, Clone, Copy)]
enum Credentials {
    /// A Zenoh client with no TLS settings at all.
    Plain,
    /// TLS, trusting the CA, without a certificate of its own.
    NoCertificate,
    /// A certificate for the host it claims, from another CA (of the same
    /// name).
    OtherCa,
    /// A certificate for the host it claims, from the CA, expired.
    Expired,
    /// A valid certificate of the CA for `mallory`, no host of the run.
    Stranger,
    /// A valid certificate of the CA for this run's host `name`.
    HostOf(&'static str),
}

/// The intruder's arguments: connect to host `to`'s endpoint with
/// `cred`, claim to be `claims`, forge `entry` and `stream`.
fn intruder_args(
    to: usize,
    pki: &Pki,
    other: &Pki,
    cred: Credentials,
    claims: &str,
    forge: &[&str],
    seconds: f64,
) -> Vec<String> {
    let mut a = vec![
        "--connect".to_owned(),
        format!("quic/{}:7447", addr(to)),
        "--as".into(),
        claims.into(),
        "--seconds".into(),
        seconds.to_string(),
    ];
    a.extend(forge.iter().map(|s| (*s).to_owned()));
    let mut tls = |ca: String, cert: String, key: String| {
        a.extend([
            "--ca".into(),
            ca,
            "--cert".into(),
            cert,
            "--key".into(),
            key,
        ]);
    };
    match cred {
        Credentials::Plain => {}
        Credentials::NoCertificate => {
            a.extend(["--ca".into(), pki.file("ca.pem")]);
        }
        Credentials::OtherCa => tls(
            other.file("ca.pem"),
            other.file(&format!("{claims}.pem")),
            other.file(&format!("{claims}.key")),
        ),
        Credentials::Expired => tls(pki.file("ca.pem"), pki.file("old.pem"), pki.file("old.key")),
        Credentials::Stranger => tls(
            pki.file("ca.pem"),
            pki.file("mallory.pem"),
            pki.file("mallory.key"),
        ),
        Credentials::HostOf(h) => tls(
            pki.file("ca.pem"),
            pki.file(&format!("{h}.pem")),
            pki.file(&format!("{h}.key")),
        ),
    }
    a
}

/// `intruder: received N samples, M tokens: KEYS` → (N, M, KEYS).
fn intruder_saw(r: &HostRun) -> (u64, u64, String) {
    let line = r
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("intruder: received "))
        .unwrap_or_else(|| panic!("the intruder did not finish:\n{}\n{}", r.stdout, r.stderr));
    let (n, rest) = line.split_once(" samples, ").unwrap();
    let (m, keys) = rest.split_once(" tokens:").unwrap();
    (
        n.parse().unwrap(),
        m.parse().unwrap(),
        keys.trim().to_owned(),
    )
}

/// scanner's `src` makes `v` (after `delay_ms`); gpu's `sink` prints its
/// checksum.
fn one_shot_yaml(dir: &Path, delay_ms: u64) -> PathBuf {
    let shape = "shape: [4096, 64]";
    let yaml = format!(
        "api-version: 0.5.0\nname: trusted\nplacement:\n  default: scanner\n  hosts:\n    gpu: [sink]\noperators:\n{}{}",
        op(
            "src",
            "pattern, v, '7'",
            &format!("  output:\n  - {{name: v, type: array, element-type: int32, {shape}}}\n")
        )
        .replace(
            "command: [",
            &format!("variables: {{START_DELAY_MS: '{delay_ms}'}}, command: [")
        ),
        op(
            "sink",
            "checksum, v",
            &format!(
                "  input:\n  - {{from: src, name: v, type: array, element-type: int32, {shape}}}\n"
            )
        ),
    );
    write(dir, "trusted.yaml", &yaml)
}

#[test]
fn the_volume_demo_runs_over_mutual_tls() {
    let Some(mut hosts) = Hosts::new("tlsvol", 2) else {
        return;
    };
    let pki = Pki::make(&hosts.dir.join("pki"), "scanner gpu");
    volume_demo(&mut hosts, &|h: &Hosts, i, name| {
        let mut a = tls_net(h, i);
        a.extend(pki.args(name));
        a
    });
}

#[test]
fn a_stream_crosses_two_hosts_over_mutual_tls_and_each_host_says_so() {
    let Some(mut hosts) = Hosts::new("tlsstr", 2) else {
        return;
    };
    let pki = Pki::make(&hosts.dir.join("pki"), "a b");
    let frames = 100;
    let file = stream_yaml(&hosts.dir, "tlsstreams", Some(frames), 2000, "block", 0);
    // Host a with the options, host b with a Zenoh configuration file
    // that says the same by Zenoh's own keys.
    let mut na = tls_net(&hosts, 0);
    na.extend(pki.args("a"));
    let config = format!(
        "{{ mode: \"peer\", scouting: {{ multicast: {{ enabled: false }} }},\n\
           connect: {{ endpoints: [\"quic/{a}:7447\"] }}, listen: {{ endpoints: [\"quic/{b}:7447\"] }},\n\
           transport: {{ link: {{ tls: {{ root_ca_certificate: {ca:?}, listen_certificate: {cert:?}, listen_private_key: {key:?}, enable_mtls: true }} }} }} }}\n",
        a = addr(0),
        b = addr(1),
        ca = pki.file("ca.pem"),
        cert = pki.file("b.pem"),
        key = pki.file("b.key"),
    );
    let config = write(&hosts.dir, "b.json5", &config);
    let nb = vec!["--zenoh-config".to_owned(), config.display().to_string()];
    let a = hosts.start(0, &run_args(&file, "a", na, &[]));
    let b = hosts.start(1, &run_args(&file, "b", nb, &[]));
    let ra = hosts.wait(a);
    let rb = hosts.wait(b);
    assert_ok("host a", &ra);
    assert_ok("host b", &rb);
    assert_every_frame(&ra, &rb, frames);
    for (h, r) in [("a", &ra), ("b", &rb)] {
        let said = format!(
            "fastio: host {h} joins run run over mutual TLS over QUIC (CA {}, certificate {})",
            pki.file("ca.pem"),
            pki.file(&format!("{h}.pem"))
        );
        assert!(r.stderr.contains(&said), "{said}:\n{}", r.stderr);
    }
}

#[test]
fn a_host_refuses_a_certificate_that_is_not_its_own_or_a_tls_endpoint_without_one() {
    let dir = std::env::temp_dir().join(format!("fio-tlsown-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let pki = Pki::make(&dir.join("pki"), "scanner gpu");
    pki.expired("gpu", "old");
    let file = one_shot_yaml(&dir, 0);
    let run = |extra: Vec<String>| {
        let out = Command::new(fastio())
            .args(["run"])
            .arg(&file)
            .args(["--host", "gpu", "--join-timeout", "2"])
            .args(extra)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(
            err.lines().filter(|l| l.starts_with("fastio: ")).count(),
            1,
            "one line, and no run begun:\n{err}"
        );
        err
    };
    // scanner's certificate on host gpu.
    let mut args = vec!["--listen".to_owned(), "quic/127.0.0.1:0".into()];
    args.extend(pki.args("scanner"));
    let err = run(args);
    assert!(
        err.contains(&format!(
            "tls --tls-cert {}: its common name is \"scanner\", not this host's name \"gpu\"",
            pki.file("scanner.pem")
        )),
        "{err}"
    );
    // An expired certificate of its own.
    let args = vec![
        "--listen".to_owned(),
        "quic/127.0.0.1:0".into(),
        "--tls-ca".into(),
        pki.file("ca.pem"),
        "--tls-cert".into(),
        pki.file("old.pem"),
        "--tls-key".into(),
        pki.file("old.key"),
    ];
    let err = run(args);
    assert!(
        err.contains(&format!("tls --tls-cert {}: expired ", pki.file("old.pem"))),
        "{err}"
    );
    // A quic/ endpoint without certificates; a tcp/ one beside them;
    // Zenoh's tls/ link at all.
    let err = run(vec!["--listen".into(), "quic/127.0.0.1:0".into()]);
    assert!(
        err.contains(
            "tls quic/127.0.0.1:0: a quic/ endpoint needs --tls-ca, --tls-cert and --tls-key"
        ),
        "{err}"
    );
    let mut args = vec!["--listen".to_owned(), "tcp/127.0.0.1:0".into()];
    args.extend(pki.args("gpu"));
    let err = run(args);
    assert!(
        err.contains("tls tcp/127.0.0.1:0: a run over mutual TLS takes quic/ endpoints only"),
        "{err}"
    );
    let mut args = vec!["--listen".to_owned(), "tls/127.0.0.1:0".into()];
    args.extend(pki.args("gpu"));
    let err = run(args);
    assert!(
        err.contains("tls tls/127.0.0.1:0: tls/ endpoints are not built: ")
            && err.contains("eclipse-zenoh/zenoh#2557"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn peers_without_the_right_certificate_cannot_join_and_the_host_says_why() {
    let Some(probe) = Hosts::new("tlsprobe", 1) else {
        return;
    };
    let base = probe.dir.clone();
    let pki = Pki::make(&base.join("pki"), "scanner gpu mallory");
    pki.expired("scanner", "old");
    let other = Pki::make(&base.join("other"), "scanner gpu");
    let file = one_shot_yaml(&base, 0);
    // Built before any host starts: the intruder must come while gpu
    // waits.
    let intruder = intruder();
    let cases = [
        (
            Credentials::Plain,
            // A client without TLS settings trusts the web's CAs only.
            "a TLS connection refused by the peer: invalid peer certificate: UnknownIssuer",
        ),
        (
            Credentials::NoCertificate,
            "a TLS connection refused: peer sent no certificates",
        ),
        (
            Credentials::OtherCa,
            // Both CAs are "fastio run CA": the issuer is found by name,
            // its signature is not the CA's. The intruder trusts only its
            // own CA: it refuses gpu's certificate first.
            "a TLS connection refused by the peer: invalid peer certificate: BadSignature",
        ),
        (
            Credentials::Expired,
            // rustls's text, with the time it verified at (the intruder
            // tries again each second: the newest only).
            "a TLS connection refused: invalid peer certificate: certificate expired: verification time ",
        ),
        (
            Credentials::Stranger,
            "with a certificate for \"mallory\", not a host of this run (hosts: gpu, scanner)",
        ),
        (
            Credentials::HostOf("gpu"),
            "with the certificate of this host (\"gpu\"): it may speak only as gpu",
        ),
    ];
    let mut rng = Rng(0x7153_2026);
    for round in 0..2 {
        for (k, (cred, why)) in cases.iter().enumerate() {
            let Some(mut hosts) = Hosts::new(&format!("tls{round}{k}"), 2) else {
                return;
            };
            let mut net = tls_net(&hosts, 0);
            net.extend(pki.args("gpu"));
            let mut args = run_args(&file, "gpu", net, &[]);
            // Shorter than the test's usual wait: nobody will join.
            let t = args.iter().position(|a| a == "--join-timeout").unwrap();
            args[t + 1] = "3".into();
            let gpu = hosts.start(0, &args);
            // The intruder comes at a random moment of the wait.
            sleep_ms(rng.below(1000));
            let forge = [
                "--prefix",
                "fastio/trusted/run",
                "--entry",
                "src/v/gpu",
                "--stream",
                "src/v/gpu",
            ];
            let ia = intruder_args(0, &pki, &other, *cred, "scanner", &forge, 4.5);
            let i = hosts.start_program(1, &intruder, &ia);
            let rg = hosts.wait(gpu);
            let ri = hosts.wait(i);
            let who = format!("round {round}, {cred:?}");
            assert_eq!(rg.rc, 1, "{who}: gpu:\n{}\n{}", rg.stdout, rg.stderr);
            let line = rg
                .stderr
                .lines()
                .find(|l| l.starts_with("fastio: ") && !l.contains(" joins run "))
                .unwrap_or_else(|| panic!("{who}: no error line:\n{}", rg.stderr));
            assert!(
                line.contains(
                    "host gpu: host scanner of pipeline trusted did not join run run within 3s"
                ) && line.contains("; refused meanwhile: ")
                    && line.contains(why),
                "{who}: {why}:\n{line}"
            );
            if let Credentials::Expired = cred {
                // 1735776000: 2025-01-02, when `old.pem` ended.
                let (_, rest) = line.split_once(why).unwrap();
                let (_, rest) = rest
                    .split_once(" (UNIX), but certificate is not valid after 1735776000 (")
                    .unwrap_or_else(|| panic!("{who}:\n{line}"));
                assert!(rest.ends_with(" seconds ago)"), "{who}:\n{line}");
                assert_eq!(
                    line.matches("certificate expired").count(),
                    1,
                    "{who}:\n{line}"
                );
            }
            // Nothing of the intruder's was taken for scanner's: the sink
            // never ran.
            assert!(rg.checksum("v").is_none(), "{who}:\n{}", rg.stdout);
            assert_clean("gpu", &rg);
            let (samples, tokens, keys) = intruder_saw(&ri);
            match cred {
                // gpu's own certificate may read what gpu says of itself,
                // and nothing else.
                Credentials::HostOf(_) => assert!(
                    keys.split_whitespace()
                        .all(|k| k.starts_with("fastio/trusted/run/host/gpu")
                            || k.starts_with("fastio/trusted/run/status/gpu")),
                    "{who}: {keys}"
                ),
                _ => assert_eq!((samples, tokens), (0, 0), "{who}: the intruder read {keys}"),
            }
        }
    }
}

#[test]
fn a_valid_certificate_cannot_take_another_hosts_part_and_strangers_read_nothing() {
    let Some(mut hosts) = Hosts::new("tlsimp", 5) else {
        return;
    };
    let pki = Pki::make(&hosts.dir.join("pki"), "scanner gpu mallory a b");
    let other = Pki::make(&hosts.dir.join("other"), "scanner gpu");
    // One-shot: scanner's entry comes after 3 s; meanwhile intruders with
    // gpu's certificate and with a stranger's forge it as scanner, and a
    // plain client listens.
    let file = one_shot_yaml(&hosts.dir, 3000);
    let intruder = intruder();
    let net = |i: usize, h: &str| {
        let mut a = tls_net(&hosts, i);
        a.extend(pki.args(h));
        run_args(&file, h, a, &[])
    };
    let (ns, ng) = (net(0, "scanner"), net(1, "gpu"));
    let scanner = hosts.start(0, &ns);
    let gpu = hosts.start(1, &ng);
    let forge = ["--prefix", "fastio/trusted/run", "--entry", "src/v/gpu"];
    let mut intruders = Vec::new();
    for (j, cred) in [
        Credentials::HostOf("gpu"),
        Credentials::Stranger,
        Credentials::Plain,
    ]
    .into_iter()
    .enumerate()
    {
        let ia = intruder_args(1, &pki, &other, cred, "scanner", &forge, 6.0);
        intruders.push((cred, hosts.start_program(2 + j, &intruder, &ia)));
    }
    let rs = hosts.wait(scanner);
    let rg = hosts.wait(gpu);
    assert_ok("scanner", &rs);
    assert_ok("gpu", &rg);
    let sent = rs.checksum("v").expect("scanner's checksum");
    assert_eq!(
        rg.checksum("v").as_deref(),
        Some(sent.as_str()),
        "gpu took a forged entry:\n{}",
        rg.stdout
    );
    for (cred, k) in intruders {
        let r = hosts.wait(k);
        let (samples, tokens, keys) = intruder_saw(&r);
        if !matches!(cred, Credentials::HostOf(_)) {
            assert_eq!((samples, tokens), (0, 0), "{cred:?} read {keys}");
        }
    }
}

#[test]
fn forged_frames_of_another_host_are_never_placed_in_a_stream() {
    let Some(mut hosts) = Hosts::new("tlsfrm", 5) else {
        return;
    };
    let pki = Pki::make(&hosts.dir.join("pki"), "a b mallory");
    let other = Pki::make(&hosts.dir.join("other"), "a b");
    let frames = 100;
    // The camera pauses 20 ms a frame: about two seconds of frames, with
    // forged ones arriving every 50 ms.
    let file = stream_yaml(
        &hosts.dir,
        "trustedstreams",
        Some(frames),
        0,
        "block",
        20_000,
    );
    let intruder = intruder();
    let net = |i: usize, h: &str| {
        let mut a = tls_net(&hosts, i);
        a.extend(pki.args(h));
        run_args(&file, h, a, &[])
    };
    let (na, nb) = (net(0, "a"), net(1, "b"));
    // b's certificate claims a's part: frames of camera/v for b, and its
    // end; a stranger does the same and listens.
    let forge = [
        "--prefix",
        "fastio/trustedstreams/run",
        "--stream",
        "camera/v/b",
    ];
    let mut intruders = Vec::new();
    for (j, cred) in [Credentials::HostOf("b"), Credentials::Stranger]
        .into_iter()
        .enumerate()
    {
        let ia = intruder_args(1, &pki, &other, cred, "a", &forge, 8.0);
        intruders.push((cred, hosts.start_program(2 + j, &intruder, &ia)));
    }
    // A second peer with b's certificate, at host a, reading the run's
    // keys: not refused (docs/hosts.md): it is b to host a, and may do
    // only what b may.
    let mut ia = intruder_args(0, &pki, &other, Credentials::HostOf("b"), "a", &forge, 8.0);
    ia.extend(["--read".into(), "fastio/trustedstreams/run/**".into()]);
    let second_b = hosts.start_program(4, &intruder, &ia);
    sleep_ms(500);
    let a = hosts.start(0, &na);
    let b = hosts.start(1, &nb);
    let ra = hosts.wait(a);
    let rb = hosts.wait(b);
    assert_ok("host a", &ra);
    assert_ok("host b", &rb);
    // Exactly the camera's frames, in order, every word checked.
    assert_every_frame(&ra, &rb, frames);
    for (cred, k) in intruders {
        let r = hosts.wait(k);
        let (samples, tokens, keys) = intruder_saw(&r);
        if matches!(cred, Credentials::Stranger) {
            assert_eq!((samples, tokens), (0, 0), "the stranger read {keys}");
        }
    }
    // The second b kept its link and read what host a sends b (the
    // camera's frames for b) and a's status lines; its forged frames of
    // a's were dropped (every frame above is the camera's). (Operators
    // have no liveliness tokens any more: the tokens it sees are the
    // hosts' at most.)
    let (samples, tokens, keys) = intruder_saw(&hosts.wait(second_b));
    assert!(samples > 0, "{samples} {tokens}: {keys}");
    let keys: Vec<&str> = keys.split_whitespace().collect();
    assert!(
        keys.contains(&"fastio/trustedstreams/run/stream/camera/v/b")
            && keys.contains(&"fastio/trustedstreams/run/status/a"),
        "{keys:?}"
    );
}

/// Issue 50, item 4: a private key that cannot serve is told at start,
/// before joining, in one line naming the option and the file: a
/// directory, an empty file, junk, another host's key (by the options and
/// by a Zenoh configuration file's keys).
#[test]
fn a_bad_private_key_is_told_at_start_in_one_line() {
    let dir = std::env::temp_dir().join(format!("fio-tlskey-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let pki = Pki::make(&dir.join("pki"), "scanner gpu");
    let file = one_shot_yaml(&dir, 0);
    let keys = dir.join("keys");
    std::fs::create_dir_all(keys.join("a-directory")).unwrap();
    std::fs::write(keys.join("empty.key"), b"").unwrap();
    std::fs::write(keys.join("junk.key"), b"not a key at all\n").unwrap();
    let not_pem = "not a PEM private key (no BEGIN PRIVATE KEY, BEGIN EC PRIVATE KEY or BEGIN RSA PRIVATE KEY block)";
    let cases = [
        (
            keys.join("a-directory").display().to_string(),
            "a directory, not a PEM private key".to_owned(),
        ),
        (
            keys.join("empty.key").display().to_string(),
            "an empty file, not a PEM private key".to_owned(),
        ),
        (
            keys.join("junk.key").display().to_string(),
            not_pem.to_owned(),
        ),
        (
            pki.file("scanner.key"),
            format!(
                "not the key of --tls-cert {} (their public keys differ)",
                pki.file("gpu.pem")
            ),
        ),
    ];
    // One line, exit 2, at once: the join timeout (30 s) never begins.
    let run = |extra: Vec<String>| {
        let t0 = Instant::now();
        let out = Command::new(fastio())
            .args(["run"])
            .arg(&file)
            .args(["--host", "gpu", "--join-timeout", "30"])
            .args(extra)
            .output()
            .unwrap();
        let took = t0.elapsed();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(took < Duration::from_secs(5), "{took:?}: {err}");
        err
    };
    for (key, why) in &cases {
        let mut args = vec!["--listen".to_owned(), "quic/127.0.0.1:0".into()];
        args.extend([
            "--tls-ca".into(),
            pki.file("ca.pem"),
            "--tls-cert".into(),
            pki.file("gpu.pem"),
            "--tls-key".into(),
            key.clone(),
        ]);
        let err = run(args);
        assert_eq!(
            err,
            format!("fastio: {}: tls --tls-key {key}: {why}\n", file.display()),
            "{key}"
        );
    }
    // The same files by a Zenoh configuration file: its key is named.
    let (key, why) = &cases[3];
    let config = format!(
        "{{ mode: \"peer\", scouting: {{ multicast: {{ enabled: false }} }}, listen: {{ endpoints: [\"quic/127.0.0.1:0\"] }},\n\
           transport: {{ link: {{ tls: {{ root_ca_certificate: {ca:?}, listen_certificate: {cert:?}, listen_private_key: {key:?}, enable_mtls: true }} }} }} }}\n",
        ca = pki.file("ca.pem"),
        cert = pki.file("gpu.pem"),
    );
    let config = write(&dir, "gpu.json5", &config);
    let err = run(vec!["--zenoh-config".into(), config.display().to_string()]);
    let why = why.replace("--tls-cert", "transport/link/tls/listen_certificate");
    assert_eq!(
        err,
        format!(
            "fastio: {}: tls transport/link/tls/listen_private_key {key}: {why}\n",
            file.display()
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 50, item 6: a host whose files are of another CA connects to a
/// host of the run: it refuses that host's certificate, that host learns
/// it was refused, and both name the refusal in their lines. A host whose
/// certificate is of another CA than its own `--tls-ca` (which every
/// other host shares) is told so at start, in one line.
#[test]
fn a_certificate_of_another_ca_is_named_on_both_sides() {
    let Some(mut hosts) = Hosts::new("tlsca", 2) else {
        return;
    };
    let pki = Pki::make(&hosts.dir.join("pki"), "scanner gpu");
    // Another CA of the same name: the issuer is found, its signature
    // is not the CA's.
    let other = Pki::make(&hosts.dir.join("other"), "scanner gpu");
    let file = one_shot_yaml(&hosts.dir, 0);
    let bad = "invalid peer certificate: BadSignature";
    let (a0, a1) = (addr(0), addr(1));
    for (round, gpu_ca) in [other.file("ca.pem"), pki.file("ca.pem")]
        .into_iter()
        .enumerate()
    {
        let port = 7470 + round as u16;
        let with_port = |net: Vec<String>| -> Vec<String> {
            net.into_iter()
                .map(|a| a.replace(":7447", &format!(":{port}")))
                .collect()
        };
        let mut ns = with_port(tls_net(&hosts, 0));
        ns.extend(pki.args("scanner"));
        let mut ng = with_port(tls_net(&hosts, 1));
        ng.extend([
            "--tls-ca".into(),
            gpu_ca.clone(),
            "--tls-cert".into(),
            other.file("gpu.pem"),
            "--tls-key".into(),
            other.file("gpu.key"),
        ]);
        let short = |mut a: Vec<String>| {
            let t = a.iter().position(|a| a == "--join-timeout").unwrap();
            a[t + 1] = "4".into();
            a
        };
        let s = hosts.start(0, &short(run_args(&file, "scanner", ns, &[])));
        sleep_ms(300);
        let g = hosts.start(1, &short(run_args(&file, "gpu", ng, &[])));
        let rs = hosts.wait(s);
        let rg = hosts.wait(g);
        let line = |r: &HostRun| {
            r.stderr
                .lines()
                .find(|l| l.starts_with("fastio: ") && !l.contains(" joins run "))
                .unwrap_or_else(|| panic!("round {round}: no error line:\n{}", r.stderr))
                .to_owned()
        };
        let not_joined = format!(
            "fastio: {}: host scanner: host gpu of pipeline trusted did not join run run within 4s (connect: -; listen: quic/{a0}:{port})",
            file.display()
        );
        assert_eq!(rs.rc, 1, "round {round}: scanner:\n{}", rs.stderr);
        if round == 0 {
            // gpu trusts only the other CA: it refuses scanner's
            // certificate, and scanner hears it refused by its peer.
            assert_eq!(rg.rc, 1, "round {round}: gpu:\n{}", rg.stderr);
            assert_eq!(
                line(&rs),
                format!(
                    "{not_joined}; refused meanwhile: a TLS connection refused by the peer: {bad}"
                ),
                "round {round}: {}",
                rs.stderr
            );
            assert_eq!(
                line(&rg),
                format!(
                    "fastio: {}: host gpu: host scanner of pipeline trusted did not join run run within 4s (connect: quic/{a0}:{port}; listen: quic/{a1}:{port}); refused meanwhile: a TLS connection to quic/{a0}:{port} refused: {bad}",
                    file.display()
                ),
                "round {round}: {}",
                rg.stderr
            );
        } else {
            // gpu has the run's CA but a certificate of another: told at
            // start (every other host would refuse it), never connected.
            assert_eq!(rg.rc, 2, "round {round}: gpu:\n{}", rg.stderr);
            assert_eq!(
                rg.stderr,
                format!(
                    "fastio: {}: tls --tls-cert {}: not a certificate of --tls-ca {gpu_ca} ({bad}): every other host would refuse it\n",
                    file.display(),
                    other.file("gpu.pem")
                )
            );
            assert_eq!(line(&rs), not_joined, "round {round}: {}", rs.stderr);
        }
    }
}

/// Issue 50, item 5: Zenoh's low-latency transport closes a link twice
/// when both ends close together, and with `close_link_on_expiration` the
/// second close panicked ("handle should be set", zenoh-link-commons
/// 1.10.2 tls.rs:192) on one to three of the three hosts of most runs
/// (7 panics in 6 runs before the fix). Twenty three-host stream runs over
/// mutual TLS: every host succeeds and none panics.
#[test]
fn three_hosts_over_mutual_tls_end_without_a_panic_twenty_times() {
    let Some(mut hosts) = Hosts::new("tlsend", 3) else {
        return;
    };
    let pki = Pki::make(&hosts.dir.join("pki"), "a b c");
    let array = "type: array, element-type: uint32, shape: [-1, 64]";
    let o = streamop();
    let yaml = format!(
        "api-version: 0.5.0\nname: tlsend\nplacement:\n  default: a\n  hosts:\n    b: [stage]\n    c: [sink]\noperators:\n\
         - name: camera\n  container: {{image: t, command: [{o}, source, v], variables: {{PAUSE_US: '1000'}}}}\n  output: [{{name: v, {array}}}]\n\
         - name: stage\n  container: {{image: t, command: [{o}, stage, v, w]}}\n  input: [{{from: camera, name: v, {array}}}]\n  output: [{{name: w, {array}}}]\n\
         - name: sink\n  container: {{image: t, command: [{o}, sink, w, v], variables: {{EXPECT_FRAMES: '50'}}}}\n  input:\n  - {{from: stage, name: w, {array}}}\n  - {{from: camera, name: v, {array}}}\n\
         streaming:\n  frames: 50\n  depth: 2\n  max-shape:\n    camera/v: [8, 64]\n    stage/w: [8, 64]\n"
    );
    let file = write(&hosts.dir, "tlsend.yaml", &yaml);
    for round in 0..20u16 {
        let ks: Vec<usize> = ["a", "b", "c"]
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let net = hosts
                    .net_args(i, 7500 + round)
                    .into_iter()
                    .map(|a| a.replace("tcp/", "quic/"))
                    .collect();
                let mut args = run_args(&file, h, net, &[]);
                args.extend(pki.args(h));
                hosts.start(i, &args)
            })
            .collect();
        let runs = hosts.wait_all(&ks);
        for (h, r) in ["a", "b", "c"].iter().zip(&runs) {
            let who = format!("round {round}: host {h}");
            assert_ok(&who, r);
            assert!(!r.stderr.contains("panicked"), "{who}:\n{}", r.stderr);
        }
        assert!(
            runs[2].stdout.contains("[sink] sink: 50 frames"),
            "round {round}:\n{}",
            runs[2].stdout
        );
    }
}

/// The pids of driver `driver`'s children (its operators) now.
fn children_of(driver: i32) -> Vec<String> {
    std::fs::read_to_string(format!("/proc/{driver}/task/{driver}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_host_closes_only_once_the_others_have_its_done_even_when_one_is_frozen() {
    // QUIC drops what a connection has not delivered when it closes: a
    // host that closed right after its `done` (its peers' already in)
    // lost it whenever a peer was slow to read, and that peer blamed it
    // ("host a is gone ... before it said it was done", seen in CI). Here
    // host b is frozen (SIGSTOP) once its part is over, before host a's
    // ends, and woken a moment after host a's part ended: host a is still
    // there when b wakes (it waits for b's `all-done`), and both succeed.
    let Some(mut hosts) = Hosts::new("tlsfrz", 2) else {
        return;
    };
    let pki = Pki::make(&hosts.dir.join("pki"), "a b");
    let mut rng = Rng(0x5eed_f402);
    for round in 0..2 {
        // Each operator the test watches waits for the test's word (a file)
        // instead of lasting a time the test must act within: the sink
        // until the test has seen it among b's children, a's slow operator
        // until b is frozen.
        let sink_go = hosts.dir.join(format!("frozen-{round}-sink-go"));
        let slow_go = hosts.dir.join(format!("frozen-{round}-slow-go"));
        let gate = |f: &Path| {
            format!(
                "i=0; until [ -e '{}' ]; do i=$((i+1)); [ $i -gt 6000 ] && exit 9; sleep 0.05; done",
                f.display()
            )
        };
        let yaml = format!(
            "api-version: 0.5.0\nname: frozen\nplacement:\n  default: a\n  hosts:\n    b: [sink]\noperators:\n{}\
             - name: sink\n  container: {{image: t, command: [sh, -c, \"{}; exec '{}' checksum v\"]}}\n  \
             input:\n  - {{from: src, name: v, type: array, element-type: int32, shape: [1024]}}\n\
             - name: slow\n  container: {{image: t, command: [sh, -c, \"{}\"]}}\n",
            op(
                "src",
                "pattern, v, '3'",
                "  output:\n  - {name: v, type: array, element-type: int32, shape: [1024]}\n"
            ),
            gate(&sink_go),
            testop(),
            gate(&slow_go),
        );
        let file = write(&hosts.dir, &format!("frozen-{round}.yaml"), &yaml);
        // A lease longer than the freeze: b is slow, not gone.
        let args = |i: usize, h: &str| {
            let net = hosts.net_args(i, 7460 + round);
            let net = net
                .into_iter()
                .map(|a| a.replace("tcp/", "quic/"))
                .collect();
            let mut a = run_args(&file, h, net, &[]);
            let lease = a.iter().position(|a| a == "--lease").unwrap() + 1;
            a[lease] = "20".into();
            a.extend(pki.args(h));
            a
        };
        let (args_a, args_b) = (args(0, "a"), args(1, "b"));
        let a = hosts.start(0, &args_a);
        let b = hosts.start(1, &args_b);
        let (pa, pb) = (hosts.pid(a), hosts.pid(b));
        // b's part is over once its one operator has come and gone.
        let sink = operator_of(pb);
        std::fs::write(&sink_go, b"go").unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::fs::read_to_string(format!("/proc/{sink}/stat"))
            .is_ok_and(|s| !s.contains(") Z "))
        {
            assert!(Instant::now() < deadline, "the sink never ended");
            sleep_ms(5);
        }
        // Time for b to say `done` (its driver reaps the sink first).
        sleep_ms(300 + rng.below(200));
        let _ = Command::new("kill")
            .args(["-STOP", &pb.to_string()])
            .status();
        // a's part ends with its slow operator; a moment later, b wakes.
        std::fs::write(&slow_go, b"go").unwrap();
        while !children_of(pa).is_empty() {
            assert!(Instant::now() < deadline, "host a's operators never ended");
            sleep_ms(10);
        }
        sleep_ms(1000 + rng.below(1000));
        // b, frozen, has not heard a's `done`: a must not have closed.
        let a_open =
            std::fs::read_to_string(format!("/proc/{pa}/stat")).is_ok_and(|s| !s.contains(") Z "));
        let _ = Command::new("kill")
            .args(["-CONT", &pb.to_string()])
            .status();
        let ra = hosts.wait(a);
        let rb = hosts.wait(b);
        assert_ok(&format!("round {round}: host a"), &ra);
        assert_ok(&format!("round {round}: host b"), &rb);
        assert!(
            a_open,
            "round {round}: host a closed before host b could hear its done"
        );
        assert!(rb.stdout.contains("sink"), "{}", rb.stdout);
    }
}
