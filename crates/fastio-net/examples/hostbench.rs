//! The bench of entries between hosts (`cargo xtask bench hosts` runs it
//! in two network namespaces joined by a veth pair):
//!
//! ```text
//! hostbench zenoh a|b --bytes N --back M --reps R ENDPOINT
//! hostbench zraw  a|b --bytes N --back M --reps R ENDPOINT
//! hostbench tcp   a|b --bytes N --back M --reps R ADDR
//! ```
//!
//! Host `a` sends N bytes, host `b` answers M bytes, and `a` times each
//! exchange. `zenoh` is ours: a pipeline `ping` (on a) → `pong` (on b) →
//! `back` (on a) whose entries cross through `fastio-net` as in a run
//! (announcement, ready, 4 MiB pieces, published into a fresh allocation
//! of the local context); each repetition is a run of its own, timed from
//! `ping` succeeding to `pong`'s entry published on `a` (joining is not
//! timed). `zraw` is Zenoh alone: one session, N bytes put from a buffer,
//! M bytes put back from the subscriber's callback (where the time goes:
//! Zenoh itself, or our protocol on top). `tcp` is the baseline: one plain
//! TCP connection, N bytes written from a buffer and read into a buffer, M
//! bytes back. Each prints `time_ns REP NS` lines (a) and
//! `anon_peak_kib KIB anon_base_kib KIB` (both): the most anonymous
//! memory (heap, staging buffers; not the entry in shared memory) the
//! process had, sampled every millisecond, and what it had at the start.

#![forbid(unsafe_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fastio::{Context, ContextOptions};
use fastio_net::{NetOptions, ZenohLink};
use fastio_pipeline::{Definition, HostLink, LinkEvent};

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
    let base = anon_kib();
    let peak = Arc::new(AtomicU64::new(base));
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
        "zenoh" => zenoh(&a),
        "zraw" => zraw(&a),
        "tcp" => tcp(&a),
        other => Err(format!("unknown transport {other}")),
    };
    done.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    result?;
    println!(
        "anon_peak_kib {} anon_base_kib {base}",
        peak.load(Ordering::Relaxed).max(anon_kib())
    );
    Ok(())
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

/// Zenoh alone: `bench/ping` with N bytes, `bench/pong` with M back.
fn zraw(a: &Args) -> Result {
    use zenoh::Wait;
    let z = |e: zenoh::Error| e.to_string();
    let mut o = NetOptions::new(&a.role);
    if a.role == "a" {
        o.listen = vec![a.peer.clone()];
    } else {
        o.connect = vec![a.peer.clone()];
    }
    let session = zenoh::open(o.zenoh_config()?).wait().map_err(z)?;
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
            publisher
                .put(zenoh::bytes::ZBytes::from(&buf[..len]))
                .wait()
                .map_err(z)?;
            rx.recv_timeout(Duration::from_secs(120))
                .map_err(|e| e.to_string())?;
            println!("time_ns {rep} {}", t0.elapsed().as_nanos());
        }
        publisher.put(vec![0u8; 0]).wait().map_err(z)?;
    } else {
        loop {
            let n = rx
                .recv_timeout(Duration::from_secs(120))
                .map_err(|e| e.to_string())?;
            match n {
                0 => break,
                1 if a.bytes != 1 => publisher.put(vec![0u8; 1]).wait().map_err(z)?,
                _ => publisher
                    .put(zenoh::bytes::ZBytes::from(&buf[..len]))
                    .wait()
                    .map_err(z)?,
            }
        }
    }
    session.close().wait().map_err(z)?;
    Ok(())
}

fn definition(bytes: usize, back: usize) -> Result<Definition> {
    let yaml = format!(
        "api-version: 0.5.0
name: hostbench
placement:
  default: a
  hosts:
    b: [pong]
operators:
- name: ping
  container: {{command: [none]}}
  output:
  - {{name: v, type: array, element-type: uint8, shape: [{bytes}]}}
- name: pong
  container: {{command: [none]}}
  input:
  - {{from: ping, name: v, type: array, element-type: uint8, shape: [{bytes}]}}
  output:
  - {{name: w, type: array, element-type: uint8, shape: [{back}]}}
- name: back
  container: {{command: [none]}}
  input:
  - {{from: pong, name: w, type: array, element-type: uint8, shape: [{back}]}}
"
    );
    Definition::parse("hostbench.yaml", &yaml, &[])
        .map_err(|d| d.first().map(|x| x.to_string()).unwrap_or_default())
}

fn wait_for(link: &ZenohLink, want: usize) -> Result {
    let events = link.events();
    loop {
        match events.recv_timeout(Duration::from_secs(120)) {
            Ok(LinkEvent::RemoteSucceeded { op, .. }) if op == want => return Ok(()),
            Ok(LinkEvent::RemoteSucceeded { .. }) => {}
            Ok(other) => return Err(format!("{other:?}")),
            Err(e) => return Err(format!("no event: {e}")),
        }
    }
}

const PING: usize = 0;
const PONG: usize = 1;

fn zenoh(a: &Args) -> Result {
    let def = definition(a.bytes, a.back)?;
    let p = &def.pipeline;
    let err = |e: fastio::Error| e.to_string();
    let ctx = Context::new(
        &ContextOptions::new()
            .capacity((a.bytes + a.back) as u64 * 2 + (64 << 20))
            .anonymous(true),
    )
    .map_err(err)?;
    let stop = AtomicBool::new(false);
    for rep in 0..a.reps {
        let mut o = NetOptions::new(&a.role);
        o.config_file = std::env::var_os("HOSTBENCH_ZENOH_CONFIG").map(Into::into);
        o.run_id = format!("r{rep}");
        if a.role == "a" {
            o.listen = vec![a.peer.clone()];
        } else {
            o.connect = vec![a.peer.clone()];
        }
        let mut link = ZenohLink::new(p, o)?;
        if a.role == "a" {
            let mut v = ctx
                .create_array(dtype::Type::primitive(dtype::Primitive::UInt8), &[a.bytes])
                .map_err(err)?;
            for (i, b) in v.map_mut().map_err(err)?.iter_mut().enumerate() {
                *b = (i * 7 + rep) as u8;
            }
            v.publish_and_release("ping/v").map_err(err)?;
            link.start(&ctx)?;
            let t0 = Instant::now();
            link.operator_finished(&ctx, PING, Ok(()));
            wait_for(&link, PONG)?;
            let ns = t0.elapsed().as_nanos();
            println!("time_ns {rep} {ns}");
            link.operator_finished(&ctx, 2, Ok(()));
            if let Some(f) = link.finish(None, &stop) {
                return Err(format!("{f:?}"));
            }
            ctx.get("ping/v").map_err(err)?.free().map_err(err)?;
            ctx.get("pong/w").map_err(err)?.free().map_err(err)?;
        } else {
            link.start(&ctx)?;
            wait_for(&link, PING)?;
            {
                let input = ctx.map("ping/v").map_err(err)?;
                let mut w = ctx
                    .create_array(dtype::Type::primitive(dtype::Primitive::UInt8), &[a.back])
                    .map_err(err)?;
                w.map_mut()
                    .map_err(err)?
                    .copy_from_slice(&input[..a.back.min(input.len())]);
                w.publish_and_release("pong/w").map_err(err)?;
            }
            link.operator_finished(&ctx, PONG, Ok(()));
            if let Some(f) = link.finish(None, &stop) {
                return Err(format!("{f:?}"));
            }
            ctx.get("ping/v").map_err(err)?.free().map_err(err)?;
            ctx.get("pong/w").map_err(err)?.free().map_err(err)?;
        }
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
