//! The bench of entries between hosts (`cargo xtask bench hosts` runs it
//! in two network namespaces joined by a veth pair):
//!
//! ```text
//! hostbench zenoh a|b --bytes N --back M --reps R ENDPOINT
//! hostbench zraw  a|b --bytes N --back M --reps R ENDPOINT
//! hostbench ztls  a|b --bytes N --back M --reps R ENDPOINT
//! hostbench zrawtls a|b --bytes N --back M --reps R ENDPOINT
//! hostbench quinn a|b --bytes N --back M --reps R ENDPOINT
//! hostbench tcp   a|b --bytes N --back M --reps R ADDR
//! ```
//!
//! Host `a` sends N bytes, host `b` answers M bytes, and `a` times each
//! exchange. `zenoh` is ours: one run of a pipeline of R round trips,
//! `p<k>` (on a) → `q<k>` (on b) → `p<k+1>` (on a) …, whose entries cross
//! through `fastio-net` as in any run (63 KiB pieces: at once up to 1 MiB,
//! received in Zenoh's callback; beyond, after an announcement and ready;
//! each published into a fresh allocation of the local context), each round
//! trip timed from `p<k>` succeeding to `q<k>`'s entry published on `a`.
//! One session carries them all, as TCP's one connection does below
//! (joining is not timed; the first round trip, on a session just joined,
//! is `time_ns 0`). `ztls` is the same over mutual TLS (`quic/`
//! endpoints; the CA and certificates in `HOSTBENCH_TLS_DIR`). `zraw` is Zenoh alone: one session, N bytes put from a
//! buffer, M bytes put back (where the time goes: Zenoh itself, or our
//! protocol on top), each in messages of at most 64 KiB less 1 KiB (the
//! low-latency transport of ours, and so of Zenoh alone here, sends no
//! fragments). `zrawtls` is Zenoh alone over the same mutual TLS as
//! `ztls` (the same `quic/` endpoints and files). `quinn` is the engine
//! under Zenoh's `quic/` link, bare: one QUIC connection made by quinn
//! with the same mutual TLS (rustls on ring, TLS 1.3, the same files),
//! quinn's transport defaults (which Zenoh's link keeps, but for stream
//! counts, MTU and segmentation offload), one bidirectional stream, N
//! bytes written from a buffer, M read back. `tcp` is the baseline: one plain TCP connection, N
//! bytes written from a buffer and read into a buffer, M bytes
//! back. Each prints `time_ns REP NS` lines (a) and
//! `anon_peak_kib KIB anon_base_kib KIB` (both): the most anonymous
//! memory (heap, staging buffers; not the entry in shared memory) the
//! process had, sampled every millisecond, and what it had before its
//! transport started (for `zenoh`/`ztls`: once the pipeline of round trips
//! is read and its context made, before the Zenoh session opens, so that
//! reading a definition of hundreds of operators is not counted as the
//! transport's memory; Zenoh's own is, as for `zraw`).

#![forbid(unsafe_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fastio::{Context, ContextOptions};
use fastio_net::{NetOptions, ZenohLink};
use fastio_pipeline::{Definition, Ended, HostLink, LinkEvent};

type Result<T = ()> = std::result::Result<T, String>;

struct Args {
    transport: String,
    role: String,
    bytes: usize,
    back: usize,
    reps: usize,
    peer: String,
}

fn args() -> Result<Args> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let mut out = Args {
        transport: a
            .first()
            .cloned()
            .ok_or("usage: hostbench zenoh|tcp a|b ...")?,
        role: a.get(1).cloned().ok_or("role a or b")?,
        bytes: 4096,
        back: 1,
        reps: 10,
        peer: String::new(),
    };
    let mut it = a.iter().skip(2);
    while let Some(x) = it.next() {
        let mut num = || -> Result<usize> {
            it.next()
                .and_then(|v| v.parse().ok())
                .ok_or(format!("{x} needs a number"))
        };
        match x.as_str() {
            "--bytes" => out.bytes = num()?,
            "--back" => out.back = num()?,
            "--reps" => out.reps = num()?,
            other => out.peer = other.to_owned(),
        }
    }
    Ok(out)
}

fn main() {
    if let Err(e) = run() {
        eprintln!("hostbench: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result {
    let a = args()?;
    // Zenoh's runtime as `fastio run --host` sizes it (for every Zenoh
    // transport here, Zenoh alone too), unless set already.
    if a.transport != "tcp"
        && a.transport != "quinn"
        && let Some(error) = fastio_net::exec_with_zenoh_runtime()
    {
        return Err(format!("cannot run again with ZENOH_RUNTIME: {error}"));
    }
    BASE.store(anon_kib(), Ordering::Relaxed);
    let peak = Arc::new(AtomicU64::new(anon_kib()));
    PEAK.set(peak.clone()).ok();
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (peak.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(anon_kib(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let result = match a.transport.as_str() {
        "zenoh" | "ztls" => zenoh(&a),
        "zraw" | "zrawtls" => zraw(&a),
        "quinn" => quinn_bare(&a),
        "tcp" => tcp(&a),
        other => Err(format!("unknown transport {other}")),
    };
    done.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    result?;
    println!(
        "anon_peak_kib {} anon_base_kib {}",
        peak.load(Ordering::Relaxed).max(anon_kib()),
        BASE.load(Ordering::Relaxed)
    );
    Ok(())
}

/// Anonymous memory before the transport started, in KiB.
static BASE: AtomicU64 = AtomicU64::new(0);
/// The most anonymous memory seen since then (the sampler's).
static PEAK: std::sync::OnceLock<Arc<AtomicU64>> = std::sync::OnceLock::new();

/// The transport starts now: memory is counted from here.
fn rebase() {
    let now = anon_kib();
    BASE.store(now, Ordering::Relaxed);
    if let Some(p) = PEAK.get() {
        p.store(now, Ordering::Relaxed);
    }
}

/// Resident anonymous memory of this process, in KiB.
fn anon_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Both Zenoh transports' options: `a` listens, `b` connects; a
/// configuration file from `HOSTBENCH_ZENOH_CONFIG` when set (to try
/// Zenoh's settings).
fn net_options(a: &Args) -> NetOptions {
    let mut o = NetOptions::new(&a.role);
    o.config_file = std::env::var_os("HOSTBENCH_ZENOH_CONFIG").map(Into::into);
    // `ztls`, `zrawtls`: mutual TLS with DIR/ca.pem, DIR/<role>.pem and .key.
    if a.transport == "ztls" || a.transport == "zrawtls" {
        o.tls = Some(tls_files(a));
    }
    if a.role == "a" {
        o.listen = vec![a.peer.clone()];
    } else {
        o.connect = vec![a.peer.clone()];
    }
    o
}

/// The CA, certificate and key of `a.role` in `HOSTBENCH_TLS_DIR`.
fn tls_files(a: &Args) -> fastio_net::TlsFiles {
    let dir = std::path::PathBuf::from(std::env::var_os("HOSTBENCH_TLS_DIR").unwrap_or_default());
    fastio_net::TlsFiles {
        ca: dir.join("ca.pem"),
        cert: dir.join(format!("{}.pem", a.role)),
        key: dir.join(format!("{}.key", a.role)),
    }
}

/// Zenoh alone: `bench/ping` with N bytes, `bench/pong` with M back.
fn zraw(a: &Args) -> Result {
    use zenoh::Wait;
    let z = |e: zenoh::Error| e.to_string();
    let o = net_options(a);
    let session = zenoh::open(o.zenoh_config().map_err(|e| e.to_string())?)
        .wait()
        .map_err(z)?;
    let buf = vec![7u8; a.bytes.max(a.back)];
    let (mine, theirs, len) = if a.role == "a" {
        ("bench/ping", "bench/pong", a.bytes)
    } else {
        ("bench/pong", "bench/ping", a.back)
    };
    let publisher = session
        .declare_publisher(mine)
        .congestion_control(zenoh::qos::CongestionControl::Block)
        .express(true)
        .wait()
        .map_err(z)?;
    let (tx, rx) = crossbeam_channel::unbounded::<usize>();
    let _sub = session
        .declare_subscriber(theirs)
        .callback(move |s| {
            let _ = tx.send(s.payload().len());
        })
        .wait()
        .map_err(z)?;
    if a.role == "a" {
        // Until b answers, say hello (b's subscriber may not be there yet).
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            publisher.put(vec![0u8; 1]).wait().map_err(z)?;
            if rx.recv_timeout(Duration::from_millis(100)).is_ok() {
                break;
            }
            if Instant::now() > deadline {
                return Err("b never answered".into());
            }
        }
        while rx.try_recv().is_ok() {}
        for rep in 0..a.reps {
            let t0 = Instant::now();
            put_pieces(&publisher, &buf[..len])?;
            let mut got = 0;
            while got < a.back {
                got += rx
                    .recv_timeout(Duration::from_secs(120))
                    .map_err(|e| e.to_string())?;
            }
            println!("time_ns {rep} {}", t0.elapsed().as_nanos());
        }
        publisher.put(vec![0u8; 0]).wait().map_err(z)?;
    } else {
        let mut got = 0;
        loop {
            let n = rx
                .recv_timeout(Duration::from_secs(120))
                .map_err(|e| e.to_string())?;
            match n {
                0 => break,
                1 if a.bytes != 1 => publisher.put(vec![0u8; 1]).wait().map_err(z)?,
                _ => {
                    got += n;
                    if got >= a.bytes {
                        got = 0;
                        put_pieces(&publisher, &buf[..len])?;
                    }
                }
            }
        }
    }
    session.close().wait().map_err(z)?;
    Ok(())
}

/// Bytes of each message of Zenoh alone: the most its low-latency
/// transport (which `fastio run`'s configuration uses, and so this bench
/// for Zenoh alone too) sends in one message, less room for its framing
/// and the key. Larger puts go as several messages, as an application of
/// that transport must send them (it sends no fragments).
const ZRAW_PIECE_BYTES: usize = 65_535 - 1024;

/// Puts `bytes` as messages of at most [`ZRAW_PIECE_BYTES`].
fn put_pieces(publisher: &zenoh::pubsub::Publisher<'_>, bytes: &[u8]) -> Result {
    use zenoh::Wait;
    for piece in bytes.chunks(ZRAW_PIECE_BYTES) {
        publisher
            .put(zenoh::bytes::ZBytes::from(piece))
            .wait()
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The bench's pipeline: `reps` round trips in one run. `p<k>` (on a)
/// makes N bytes, `q<k>` (on b) reads them and makes M bytes, which
/// `p<k+1>` reads; `end` (on a) reads the last answer.
fn definition(bytes: usize, back: usize, reps: usize) -> Result<Definition> {
    let mut yaml = String::from(
        "api-version: 0.5.0\nname: hostbench\nplacement:\n  default: a\n  hosts:\n    b: [",
    );
    let qs: Vec<String> = (0..reps).map(|k| format!("q{k}")).collect();
    yaml.push_str(&qs.join(", "));
    yaml.push_str("]\noperators:\n");
    let port = |from: Option<String>, name: &str, n: usize| {
        let from = from.map_or(String::new(), |f| format!("from: {f}, "));
        format!("  - {{{from}name: {name}, type: array, element-type: uint8, shape: [{n}]}}\n")
    };
    for k in 0..=reps {
        let name = if k == reps {
            "end".to_owned()
        } else {
            format!("p{k}")
        };
        yaml.push_str(&format!(
            "- name: {name}\n  container: {{command: [none]}}\n"
        ));
        if k > 0 {
            yaml.push_str("  input:\n");
            yaml.push_str(&port(Some(format!("q{}", k - 1)), "w", back));
        }
        if k < reps {
            yaml.push_str("  output:\n");
            yaml.push_str(&port(None, "v", bytes));
            yaml.push_str(&format!(
                "- name: q{k}\n  container: {{command: [none]}}\n  input:\n{}  output:\n{}",
                port(Some(format!("p{k}")), "v", bytes),
                port(None, "w", back)
            ));
        }
    }
    Definition::parse("hostbench.yaml", &yaml, &[])
        .map_err(|d| d.first().map(|x| x.to_string()).unwrap_or_default())
}

fn wait_for(link: &ZenohLink, want: usize) -> Result {
    let events = link.events();
    loop {
        match events.recv_timeout(Duration::from_secs(120)) {
            Ok(LinkEvent::RemoteSucceeded { op, .. }) if op == want => return Ok(()),
            Ok(LinkEvent::RemoteSucceeded { .. } | LinkEvent::EntryArriving { .. }) => {}
            Ok(other) => return Err(format!("{other:?}")),
            Err(e) => return Err(format!("no event: {e}")),
        }
    }
}

fn zenoh(a: &Args) -> Result {
    let def = definition(a.bytes, a.back, a.reps)?;
    let p = &def.pipeline;
    // Operators by name, found once (as the driver's plan has them), not
    // by a scan of the thousands of the bench's pipeline each round trip.
    let index: std::collections::HashMap<&str, usize> = p
        .operators
        .iter()
        .enumerate()
        .map(|(i, o)| (o.name.as_str(), i))
        .collect();
    let op = |name: &str| -> Result<usize> {
        index
            .get(name)
            .copied()
            .ok_or_else(|| format!("no operator {name}"))
    };
    let err = |e: fastio::Error| e.to_string();
    let ctx = Context::new(
        &ContextOptions::new()
            .capacity((a.bytes + a.back) as u64 * 2 + (64 << 20))
            .anonymous(true),
    )
    .map_err(err)?;
    let stop = AtomicBool::new(false);
    let o = net_options(a);
    rebase();
    let mut link = ZenohLink::new(p, o).map_err(|e| e.to_string())?;
    link.start(&ctx).map_err(|e| e.to_string())?;
    let u8s = || dtype::Type::primitive(dtype::Primitive::UInt8);
    for rep in 0..a.reps {
        let (pk, qk) = (format!("p{rep}"), format!("q{rep}"));
        if a.role == "a" {
            let mut v = ctx.create_array(u8s(), &[a.bytes]).map_err(err)?;
            for (i, b) in v.map_mut().map_err(err)?.iter_mut().enumerate() {
                *b = (i * 7 + rep) as u8;
            }
            v.publish_and_release(&format!("{pk}/v")).map_err(err)?;
            let t0 = Instant::now();
            link.operator_finished(&ctx, op(&pk)?, Ended::Succeeded);
            wait_for(&link, op(&qk)?)?;
            let ns = t0.elapsed().as_nanos();
            println!("time_ns {rep} {ns}");
        } else {
            wait_for(&link, op(&pk)?)?;
            {
                let input = ctx.map(&format!("{pk}/v")).map_err(err)?;
                if input.len() != a.bytes || input.first() != Some(&(rep as u8)) {
                    return Err(format!("{pk}/v arrived wrong"));
                }
                let mut w = ctx.create_array(u8s(), &[a.back]).map_err(err)?;
                w.map_mut()
                    .map_err(err)?
                    .copy_from_slice(&input[..a.back.min(input.len())]);
                w.publish_and_release(&format!("{qk}/w")).map_err(err)?;
            }
            link.operator_finished(&ctx, op(&qk)?, Ended::Succeeded);
        }
        // Both entries of the round trip are done with on both hosts.
        for name in [format!("{pk}/v"), format!("{qk}/w")] {
            ctx.get(&name).map_err(err)?.free().map_err(err)?;
        }
    }
    if a.role == "a" {
        link.operator_finished(&ctx, op("end")?, Ended::Succeeded);
    }
    if let Some(f) = link.finish(None, &stop) {
        return Err(format!("{f:?}"));
    }
    Ok(())
}

fn tcp(a: &Args) -> Result {
    let io = |e: std::io::Error| e.to_string();
    let mut buf = vec![0u8; a.bytes.max(a.back)];
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i * 7) as u8;
    }
    if a.role == "a" {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut s = loop {
            match TcpStream::connect(&a.peer) {
                Ok(s) => break s,
                Err(e) if Instant::now() > deadline => return Err(e.to_string()),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        s.set_nodelay(true).map_err(io)?;
        for rep in 0..a.reps {
            let t0 = Instant::now();
            s.write_all(&buf[..a.bytes]).map_err(io)?;
            s.read_exact(&mut buf[..a.back]).map_err(io)?;
            println!("time_ns {rep} {}", t0.elapsed().as_nanos());
        }
    } else {
        let l = TcpListener::bind(&a.peer).map_err(io)?;
        let (mut s, _) = l.accept().map_err(io)?;
        s.set_nodelay(true).map_err(io)?;
        for _ in 0..a.reps {
            s.read_exact(&mut buf[..a.bytes]).map_err(io)?;
            s.write_all(&buf[..a.back]).map_err(io)?;
        }
    }
    Ok(())
}

/// Bare quinn (see the top of the file): `a` listens at the endpoint's
/// address and sends, `b` connects (checking that the certificate names
/// host `a`) and answers. The runtime has as many workers as cores, as
/// Zenoh's own.
fn quinn_bare(a: &Args) -> Result {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(std::thread::available_parallelism().map_or(2, |n| n.get()))
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(quinn_exchange(a))
}

/// The rustls configurations of bare quinn: the same CA, certificate and
/// key files as `ztls`, TLS 1.3 on ring, a peer certificate required on
/// both sides.
fn quinn_crypto(
    a: &Args,
) -> Result<(
    quinn::crypto::rustls::QuicServerConfig,
    quinn::crypto::rustls::QuicClientConfig,
)> {
    let files = tls_files(a);
    let read = |p: &std::path::Path| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
    let certs = |p: &std::path::Path| -> Result<Vec<rustls::pki_types::CertificateDer<'static>>> {
        rustls_pemfile::certs(&mut read(p)?.as_slice())
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| format!("{}: {e}", p.display()))
    };
    let key = rustls_pemfile::private_key(&mut read(&files.key)?.as_slice())
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("{}: no key", files.key.display()))?;
    let mut roots = rustls::RootCertStore::empty();
    for ca in certs(&files.ca)? {
        roots.add(ca).map_err(|e| e.to_string())?;
    }
    let roots = Arc::new(roots);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = |e: rustls::Error| e.to_string();
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        roots.clone(),
        provider.clone(),
    )
    .build()
    .map_err(|e| e.to_string())?;
    let server = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(tls)?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs(&files.cert)?, key.clone_key())
        .map_err(tls)?;
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(tls)?
        .with_root_certificates(roots)
        .with_client_auth_cert(certs(&files.cert)?, key)
        .map_err(tls)?;
    Ok((
        server.try_into().map_err(|e| format!("{e}"))?,
        client.try_into().map_err(|e| format!("{e}"))?,
    ))
}

async fn quinn_exchange(a: &Args) -> Result {
    let s = |e: &dyn std::fmt::Display| e.to_string();
    let addr: std::net::SocketAddr = a
        .peer
        .trim_start_matches("quic/")
        .parse()
        .map_err(|e| format!("{}: {e}", a.peer))?;
    let (server, client) = quinn_crypto(a)?;
    let mut buf = vec![7u8; a.bytes.max(a.back)];
    let wait = Duration::from_secs(120);
    let timed = |what: &'static str| move |_| format!("{what}: no progress in 120 s");
    rebase();
    if a.role == "a" {
        let endpoint =
            quinn::Endpoint::server(quinn::ServerConfig::with_crypto(Arc::new(server)), addr)
                .map_err(|e| s(&e))?;
        let incoming = tokio::time::timeout(Duration::from_secs(30), endpoint.accept())
            .await
            .map_err(timed("accept"))?
            .ok_or("the endpoint closed")?;
        let conn = incoming.await.map_err(|e| s(&e))?;
        let (mut send, mut recv) = conn.accept_bi().await.map_err(|e| s(&e))?;
        let mut hello = [0u8; 1];
        recv.read_exact(&mut hello).await.map_err(|e| s(&e))?;
        for rep in 0..a.reps {
            let t0 = Instant::now();
            tokio::time::timeout(wait, async {
                send.write_all(&buf[..a.bytes]).await.map_err(|e| s(&e))?;
                recv.read_exact(&mut buf[..a.back]).await.map_err(|e| s(&e))
            })
            .await
            .map_err(timed("exchange"))??;
            println!("time_ns {rep} {}", t0.elapsed().as_nanos());
        }
        send.finish().map_err(|e| s(&e))?;
        // b closes the connection once it read the end of the stream.
        let _ = tokio::time::timeout(Duration::from_secs(10), conn.closed()).await;
        endpoint.wait_idle().await;
    } else {
        let mut endpoint = quinn::Endpoint::client((std::net::Ipv4Addr::UNSPECIFIED, 0).into())
            .map_err(|e| s(&e))?;
        endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(client)));
        // a may not listen yet: try again for up to 30 s.
        let deadline = Instant::now() + Duration::from_secs(30);
        let conn = loop {
            let attempt = endpoint.connect(addr, "a").map_err(|e| s(&e))?;
            match tokio::time::timeout(Duration::from_secs(2), attempt).await {
                Ok(Ok(c)) => break c,
                Ok(Err(_)) | Err(_) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Ok(Err(e)) => return Err(s(&e)),
                Err(_) => return Err("a never answered".into()),
            }
        };
        let (mut send, mut recv) = conn.open_bi().await.map_err(|e| s(&e))?;
        send.write_all(&[1]).await.map_err(|e| s(&e))?;
        for _ in 0..a.reps {
            tokio::time::timeout(wait, async {
                recv.read_exact(&mut buf[..a.bytes])
                    .await
                    .map_err(|e| s(&e))?;
                send.write_all(&buf[..a.back]).await.map_err(|e| s(&e))
            })
            .await
            .map_err(timed("exchange"))??;
        }
        let rest = tokio::time::timeout(Duration::from_secs(10), recv.read_to_end(1))
            .await
            .map_err(timed("end of stream"))?
            .map_err(|e| s(&e))?;
        if !rest.is_empty() {
            return Err(format!("{} bytes more than asked for", rest.len()));
        }
        conn.close(0u32.into(), b"done");
        endpoint.wait_idle().await;
    }
    Ok(())
}
