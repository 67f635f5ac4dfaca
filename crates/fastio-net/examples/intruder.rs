//! A peer that should not be in a run: it connects to a host with
//! whatever credentials it is given (none, another CA's, an expired
//! certificate, a valid one for another name), claims to be a host of the
//! run, forges what that host would send, and listens to everything.
//! The TLS tests (`fastio-cli/tests/hosts/tls.rs`) run it beside real
//! hosts and check that nothing it sends is accepted and nothing reaches
//! it.
//!
//! ```text
//! intruder --connect ENDPOINT [--ca F] [--cert F --key F]
//!          --prefix fastio/<pipeline>/<run> --as HOST
//!          [--entry OP/OUTPUT/TO] [--stream OP/OUTPUT/TO] [--read KEYS]
//!          --seconds S
//! ```
//!
//! Every 50 ms it says `ready`, `started` and `succeeded` as HOST, puts a
//! whole forged entry OP/OUTPUT (int32 `[4]`, every byte 0xEE) on
//! `<prefix>/entry/HOST/TO` and a forged frame (uint32 `[1, 64]`, every
//! byte 0xEE, sequence numbers from 0) on `<prefix>/stream/OP/OUTPUT/TO`,
//! with a liveliness token `<prefix>/host/HOST` declared throughout.
//! It prints `intruder: received N samples, M tokens: KEYS` at the end,
//! the keys of what reached it from other peers (not its own puts and
//! token). It subscribes to `**` (everything), or to `--read KEYS`.

#![forbid(unsafe_code)]

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dtype::Primitive;
use fastio::plan::EntryKind;
use fastio_net::wire::{ChunkHeader, Status, StreamMsg};
use zenoh::Wait;
use zenoh::bytes::ZBytes;
use zenoh::sample::Sample;

fn main() {
    if let Err(e) = run() {
        eprintln!("intruder: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let (mut connect, mut ca, mut cert, mut key) = (None, None, None, None);
    let (mut prefix, mut host, mut entry, mut stream, mut seconds) =
        (None, None, None, None, 5.0_f64);
    let mut read = "**".to_owned();
    while let Some(a) = args.next() {
        let mut v = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--connect" => connect = Some(v()?),
            "--ca" => ca = Some(v()?),
            "--cert" => cert = Some(v()?),
            "--key" => key = Some(v()?),
            "--prefix" => prefix = Some(v()?),
            "--as" => host = Some(v()?),
            "--entry" => entry = Some(v()?),
            "--stream" => stream = Some(v()?),
            "--read" => read = v()?,
            "--seconds" => seconds = v()?.parse().map_err(|e| format!("--seconds: {e}"))?,
            _ => return Err(format!("unknown argument {a}")),
        }
    }
    let connect = connect.ok_or("--connect is needed")?;
    let prefix = prefix.ok_or("--prefix is needed")?;
    let host = host.ok_or("--as is needed")?;
    let mut c = zenoh::Config::default();
    let mut set = |k: &str, v: String| {
        c.insert_json5(k, &v)
            .map_err(|e| format!("zenoh configuration {k} = {v}: {e}"))
    };
    set("mode", "\"peer\"".into())?;
    set("scouting/multicast/enabled", "false".into())?;
    set("connect/endpoints", format!("[{connect:?}]"))?;
    // Only the host it attacks: no listener, no gossip (two intruders of
    // one test would otherwise find and feed each other).
    set("listen/endpoints", "[]".into())?;
    set("scouting/gossip/enabled", "false".into())?;
    if let Some(ca) = &ca {
        set("transport/link/tls/root_ca_certificate", format!("{ca:?}"))?;
        set("transport/link/tls/verify_name_on_connect", "false".into())?;
    }
    if let (Some(cert), Some(key)) = (&cert, &key) {
        set("transport/link/tls/enable_mtls", "true".into())?;
        for side in ["listen", "connect"] {
            set(
                &format!("transport/link/tls/{side}_certificate"),
                format!("{cert:?}"),
            )?;
            set(
                &format!("transport/link/tls/{side}_private_key"),
                format!("{key:?}"),
            )?;
        }
    }
    let session = zenoh::open(c)
        .wait()
        .map_err(|e| format!("cannot open a session: {e}"))?;
    let received: Arc<Mutex<(u64, u64, BTreeSet<String>)>> = Arc::default();
    let r1 = received.clone();
    let _all = session
        .declare_subscriber(read.clone())
        .allowed_origin(zenoh::sample::Locality::Remote)
        .callback(move |s: Sample| {
            let mut r = r1.lock().unwrap();
            r.0 += 1;
            r.2.insert(s.key_expr().as_str().to_owned());
        })
        .wait()
        .map_err(|e| e.to_string())?;
    let r2 = received.clone();
    let own_token = format!("{prefix}/host/{host}");
    let _tokens = session
        .liveliness()
        .declare_subscriber(read)
        .history(true)
        .callback(move |s: Sample| {
            if s.key_expr().as_str() == own_token {
                return;
            }
            let mut r = r2.lock().unwrap();
            r.1 += 1;
            r.2.insert(s.key_expr().as_str().to_owned());
        })
        .wait()
        .map_err(|e| e.to_string())?;
    let _token = session
        .liveliness()
        .declare_token(format!("{prefix}/host/{host}"))
        .wait()
        .map_err(|e| e.to_string())?;
    let status = format!("{prefix}/status/{host}");
    // `--entry OP/OUTPUT/TO`: the entry, on the key of what HOST sends TO.
    let entry = match &entry {
        Some(e) => {
            let (key, to) = e.rsplit_once('/').ok_or("--entry takes OP/OUTPUT/TO")?;
            Some((key.to_owned(), format!("{prefix}/entry/{host}/{to}")))
        }
        None => None,
    };
    let piece = ChunkHeader {
        entry: entry.as_ref().map_or("x/y".into(), |(k, _)| k.clone()),
        kind: EntryKind::Array,
        element: Primitive::Int32,
        shape: vec![4],
        total: 16,
        offset: 0,
        transfer: 1,
    };
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let mut seq = 0u64;
    while Instant::now() < deadline {
        for line in [
            Status::Started(format!("forged-by-{host}")),
            Status::Succeeded(format!("forged-by-{host}")),
        ] {
            let _ = session.put(&status, line.encode()).wait();
        }
        if let Some((_, on)) = &entry {
            let _ = session
                .put(on, ZBytes::from(vec![0xEE_u8; 16]))
                .attachment(ZBytes::from(piece.encode().unwrap_or_default()))
                .wait();
        }
        if let Some(s) = &stream {
            let frame = StreamMsg::Frame {
                element: Primitive::UInt32,
                seq,
                source_seq: seq,
                timestamp_ns: 1,
                shape: vec![1, 64],
            };
            let _ = session
                .put(
                    format!("{prefix}/stream/{s}"),
                    ZBytes::from(vec![0xEE_u8; 256]),
                )
                .attachment(ZBytes::from(frame.encode()))
                .wait();
            seq += 1;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = received.lock().unwrap();
    println!(
        "intruder: received {} samples, {} tokens: {}",
        r.0,
        r.1,
        r.2.iter().cloned().collect::<Vec<_>>().join(" ")
    );
    Ok(())
}
