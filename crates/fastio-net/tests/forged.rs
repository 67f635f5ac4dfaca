//! A sender that does not keep the protocol: every piece a host receives
//! is checked against the plan before a byte of it is published, and a bad
//! one fails the entry with a reason (never a panic, never a published
//! half-entry). The sender here is a bare Zenoh session on loopback that
//! joins the run as host `a` and puts forged pieces on the key of what `a`
//! sends `b`.

#![cfg(feature = "zenoh")]

use std::time::{Duration, Instant};

use dtype::Primitive;
use fastio::plan::EntryKind;
use fastio::{Context, ContextOptions};
use fastio_net::wire::{ChunkHeader, EAGER_BYTES, PIECE_BYTES, Status};
use fastio_net::{NetOptions, ZenohLink, run_prefix};
use fastio_pipeline::{Definition, Failure, HostLink, LinkEvent};
use zenoh::Wait;
use zenoh::bytes::ZBytes;

/// The pipeline: `ping` on a makes `v` (uint8, `[n]`), `pong` on b reads it.
fn yaml(n: usize) -> String {
    format!(
        "api-version: 0.5.0
name: forged
placement:
  default: a
  hosts:
    b: [pong]
operators:
- name: ping
  container: {{command: [none]}}
  output:
  - {{name: v, type: array, element-type: uint8, shape: [{n}]}}
- name: pong
  container: {{command: [none]}}
  input:
  - {{from: ping, name: v, type: array, element-type: uint8, shape: [{n}]}}
"
    )
}

/// A piece's header (`.encode()` it for the attachment).
fn header(element: Primitive, shape: &[u64], total: u64, offset: u64) -> ChunkHeader {
    ChunkHeader {
        entry: "ping/v".into(),
        kind: EntryKind::Array,
        element,
        shape: shape.to_vec(),
        total,
        offset,
        transfer: 7,
    }
}

/// A piece: its encoded header and `len` bytes of ones.
fn piece(
    element: Primitive,
    shape: &[u64],
    total: u64,
    offset: u64,
    len: usize,
) -> (Vec<u8>, Vec<u8>) {
    (
        header(element, shape, total, offset)
            .encode()
            .expect("header"),
        vec![1; len],
    )
}

/// Runs host b, sends `pieces` as host a, and returns b's first event
/// that says what became of the entry (not a wake-up ahead of it,
/// `LinkEvent::EntryArriving`) and whether `ping/v` was published on b.
fn receive(case: u16, pieces: Vec<(Vec<u8>, Vec<u8>)>) -> (LinkEvent, Option<Vec<u8>>) {
    receive_n(case, 4096, pieces)
}

/// [`receive`] with an entry of `n` bytes.
fn receive_n(case: u16, n: usize, pieces: Vec<(Vec<u8>, Vec<u8>)>) -> (LinkEvent, Option<Vec<u8>>) {
    receive_after(case, n, &[], pieces)
}

/// [`receive_n`], with status lines put first on `<run>/status/<host>`
/// for each `(host, line)` of `lines`.
fn receive_after(
    case: u16,
    n: usize,
    lines: &[(&str, Status)],
    pieces: Vec<(Vec<u8>, Vec<u8>)>,
) -> (LinkEvent, Option<Vec<u8>>) {
    let (mut events, published) = receive_events(case, n, lines, pieces, 1);
    (events.pop().expect("an event"), published)
}

/// [`receive_after`], with b's events up to the `told`th that says what
/// became of the entry (with the wake-ups ahead of them).
fn receive_events(
    case: u16,
    n: usize,
    lines: &[(&str, Status)],
    pieces: Vec<(Vec<u8>, Vec<u8>)>,
    told: usize,
) -> (Vec<LinkEvent>, Option<Vec<u8>>) {
    let def = Definition::parse("forged.yaml", &yaml(n), &[]).expect("definition");
    let pipeline = &def.pipeline;
    let run_id = format!("forged{case}");
    let port = 20000 + (std::process::id() % 20000) as u16 + case;
    let endpoint = format!("tcp/127.0.0.1:{port}");
    // Host a: a bare session, its host token, listening.
    let mut a = NetOptions::new("a");
    a.listen = vec![endpoint.clone()];
    let session = zenoh::open(a.zenoh_config().expect("config"))
        .wait()
        .expect("session a");
    let prefix = run_prefix(&pipeline.name, &run_id);
    let _token = session
        .liveliness()
        .declare_token(format!("{prefix}/host/a"))
        .wait()
        .expect("token");
    let publisher = session
        .declare_publisher(format!("{prefix}/entry/a/b"))
        .wait()
        .expect("publisher");
    // As every host of a run, a listens to the others' status lines (b
    // waits until someone of the run does).
    let _status = session
        .declare_subscriber(format!("{prefix}/status/b"))
        .callback(|_| {})
        .wait()
        .expect("subscriber");
    // Host a says the batch of its links (as every host does once all
    // joined), again and again until b has joined: b waits for it.
    let said = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sayer = {
        let (session, said) = (session.clone(), said.clone());
        let key = format!("{prefix}/status/a");
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(30);
            while !said.load(std::sync::atomic::Ordering::Relaxed) && Instant::now() < deadline {
                let _ = session.put(&key, Status::Batch(65_535).encode()).wait();
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    // Host b: ours.
    let ctx =
        Context::new(&ContextOptions::new().capacity(16 << 20).anonymous(true)).expect("context");
    let mut b = NetOptions::new("b");
    b.run_id = run_id;
    b.connect = vec![endpoint];
    b.join_timeout = Duration::from_secs(20);
    let mut link = ZenohLink::new(pipeline, b).expect("link");
    link.start(&ctx).expect("b joins");
    said.store(true, std::sync::atomic::Ordering::Relaxed);
    sayer.join().expect("sayer");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !publisher
        .matching_status()
        .wait()
        .expect("matching")
        .matching()
    {
        assert!(Instant::now() < deadline, "b's subscriber never showed");
        std::thread::sleep(Duration::from_millis(10));
    }
    for (host, line) in lines {
        session
            .put(format!("{prefix}/status/{host}"), line.encode())
            .wait()
            .expect("status");
    }
    for (attachment, bytes) in pieces {
        let put = publisher.put(ZBytes::from(bytes));
        if attachment.is_empty() {
            put.wait()
        } else {
            put.attachment(attachment).wait()
        }
        .expect("put");
    }
    let mut events = Vec::new();
    let woken = |e: &LinkEvent| matches!(e, LinkEvent::EntryArriving { .. });
    while events.iter().filter(|e| !woken(e)).count() < told {
        assert!(events.len() < 100, "b only wakes its driver: {events:?}");
        events.push(
            link.events()
                .recv_timeout(Duration::from_secs(20))
                .expect("b says what became of the entry"),
        );
    }
    let published = ctx.map("ping/v").ok().map(|m| m.to_vec());
    (events, published)
}

fn failed_with(case: u16, pieces: Vec<(Vec<u8>, Vec<u8>)>, why: &str) {
    failed_with_n(case, 4096, pieces, why)
}

fn failed_with_n(case: u16, n: usize, pieces: Vec<(Vec<u8>, Vec<u8>)>, why: &str) {
    let (event, published) = receive_n(case, n, pieces);
    match event {
        LinkEvent::RemoteFailed {
            op,
            failure:
                Failure::Transfer {
                    entry,
                    from,
                    to,
                    error: got,
                },
        } => {
            assert_eq!(
                (op, entry.as_str(), from.as_str(), to),
                (0, "ping/v", "a", vec!["b".to_owned()])
            );
            assert!(got.contains(why), "wanted {why:?} in {got:?}");
        }
        other => panic!("wanted a failure with {why:?}, got {other:?}"),
    }
    assert!(published.is_none(), "a bad sending was published");
}

#[test]
fn a_whole_entry_in_one_message_is_published_as_sent() {
    let bytes: Vec<u8> = (0..4096u32).map(|i| (i * 31 % 251) as u8).collect();
    let (event, published) = receive(0, whole(&bytes));
    published_as_sent(&event, published, &bytes);
}

/// The 4,096 bytes of `ping/v` in one piece.
fn whole(bytes: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    vec![(
        header(Primitive::UInt8, &[4096], 4096, 0)
            .encode()
            .expect("header"),
        bytes.to_vec(),
    )]
}

/// `event` says the 4,096-byte entry arrived, and `published` is `bytes`.
fn published_as_sent(event: &LinkEvent, published: Option<Vec<u8>>, bytes: &[u8]) {
    assert!(
        matches!(event, LinkEvent::RemoteSucceeded { op: 0, bytes: 4096 }),
        "{event:?}"
    );
    assert_eq!(published.as_deref(), Some(bytes));
}

#[test]
fn another_element_type_than_the_plan_says_fails_the_entry() {
    failed_with(
        1,
        vec![piece(Primitive::Float32, &[1024], 4096, 0, 4096)],
        "the plan says",
    );
}

#[test]
fn another_shape_than_the_plan_says_fails_the_entry() {
    failed_with(
        2,
        vec![piece(Primitive::UInt8, &[2048], 2048, 0, 2048)],
        "shape [2048] arrived",
    );
}

#[test]
fn more_bytes_announced_than_the_shape_holds_fail_the_entry() {
    failed_with(
        3,
        vec![piece(Primitive::UInt8, &[4096], 8192, 0, 8192)],
        "a piece with a bad header: ",
    );
}

#[test]
fn a_piece_without_a_header_fails_the_entry() {
    failed_with(
        7,
        vec![(Vec::new(), vec![1; 4096])],
        "a piece without its header",
    );
}

#[test]
fn a_header_of_something_else_fails_the_entry() {
    let mut h = header(Primitive::UInt8, &[4096], 4096, 0)
        .encode()
        .expect("header");
    h[0] = b'X';
    failed_with(8, vec![(h, vec![1; 4096])], "a piece with a bad header: ");
}

#[test]
fn a_first_piece_that_is_neither_announcement_nor_a_full_piece_fails_the_entry() {
    failed_with(
        4,
        vec![piece(Primitive::UInt8, &[4096], 4096, 0, 100)],
        "or its first piece, not 100 bytes at 0 (a piece of 100 bytes at byte 0; 4096 were due)",
    );
}

#[test]
fn a_piece_out_of_order_fails_the_entry() {
    // The announcement has the importer's thread make room; the piece
    // after it is placed (or refused) in Zenoh's callback. Which of the
    // two refusals comes depends on whether the room was made before the
    // piece arrived; either way the entry fails and nothing is published.
    let (event, published) = receive(
        5,
        vec![
            piece(Primitive::UInt8, &[4096], 4096, 0, 0),
            piece(Primitive::UInt8, &[4096], 4096, 4000, 96),
        ],
    );
    match event {
        LinkEvent::RemoteFailed {
            failure: Failure::Transfer { error: why, .. },
            ..
        } => assert!(
            why.contains("a piece at byte 4000 arrived where byte 0 was due")
                || why.contains("a piece at byte 4000 arrived before its entry was announced"),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
    assert!(published.is_none(), "a bad sending was published");
}

#[test]
fn a_piece_without_its_announcement_fails_the_entry() {
    failed_with(
        9,
        vec![piece(Primitive::UInt8, &[4096], 4096, 1024, 1024)],
        "a piece at byte 1024 arrived before its entry was announced",
    );
}

#[test]
fn status_lines_of_a_host_not_in_the_run_reach_no_host() {
    // A failure and a failed end said in the name of `intruder`: b never
    // hears them (it listens to each host of the run on its own key), so
    // the entry that comes after them is what b reports.
    let why = r#"{"kind":"exited","operator":"pong","code":1}"#;
    let said = [
        (
            "intruder",
            Status::Failed {
                op: "pong".into(),
                why: why.into(),
            },
        ),
        ("intruder", Status::Done(Some(why.into()))),
    ];
    let bytes = vec![5u8; 4096];
    let (event, published) = receive_after(14, 4096, &said, whole(&bytes));
    published_as_sent(&event, published, &bytes);
}

#[test]
fn a_piece_of_an_entry_the_host_does_not_send_fails_what_it_does() {
    // `pong/v` is made on b, not sent by a: the piece cannot be placed,
    // and what a sends b (ping/v) can no longer be trusted to arrive.
    let h = ChunkHeader {
        entry: "pong/v".into(),
        ..header(Primitive::UInt8, &[4096], 4096, 0)
    };
    failed_with(
        10,
        vec![(h.encode().expect("header"), vec![1; 4096])],
        "a piece of entry \"pong/v\", which host a does not send here",
    );
}

/// An entry of `n` bytes (`n` ≤ EAGER_BYTES) cut into pieces as a sender
/// does: every piece but the last of PIECE_BYTES, sent at once.
fn eager_pieces(bytes: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let n = bytes.len() as u64;
    bytes
        .chunks(PIECE_BYTES)
        .enumerate()
        .map(|(k, c)| {
            let h = header(Primitive::UInt8, &[n], n, (k * PIECE_BYTES) as u64);
            (h.encode().expect("header"), c.to_vec())
        })
        .collect()
}

#[test]
fn an_entry_of_several_pieces_sent_at_once_is_published_as_sent() {
    let n = 3 * PIECE_BYTES + 1000;
    let bytes: Vec<u8> = (0..n).map(|i| (i * 13 % 253) as u8).collect();
    let (event, published) = receive_n(11, n, eager_pieces(&bytes));
    assert!(
        matches!(event, LinkEvent::RemoteSucceeded { op: 0, bytes } if bytes == n as u64),
        "{event:?}"
    );
    assert_eq!(published.as_deref(), Some(&bytes[..]));
}

#[test]
fn the_last_piece_wakes_the_driver_once_before_the_entry_is_told_of() {
    // Four pieces, then one.
    let n = 3 * PIECE_BYTES + 1000;
    let bytes: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
    let mut pieces = eager_pieces(&bytes);
    let (events, published) = receive_events(15, n, &[], pieces.clone(), 1);
    let arrived = |bytes: usize| {
        [
            LinkEvent::EntryArriving { entry: 0 },
            LinkEvent::RemoteSucceeded {
                op: 0,
                bytes: bytes as u64,
            },
        ]
    };
    assert_eq!(events, arrived(n));
    assert_eq!(published.as_deref(), Some(&bytes[..]));
    let small: Vec<u8> = (0..4096u32).map(|i| (i * 3 % 241) as u8).collect();
    let (events, published) = receive_events(16, 4096, &[], whole(&small), 1);
    assert_eq!(events, arrived(4096));
    assert_eq!(published.as_deref(), Some(&small[..]));
    // The last piece again, after the entry: no second wake-up, and the
    // piece is refused (nothing of that entry is due any more).
    let last = pieces.last().cloned().expect("pieces");
    pieces.push(last);
    let (events, published) = receive_events(17, n, &[], pieces, 2);
    assert_eq!(events[..2], arrived(n));
    assert!(
        matches!(
            &events[2..],
            [LinkEvent::RemoteFailed {
                op: 0,
                failure: Failure::Transfer { error, .. }
            }] if error.contains("arrived before its entry was announced")
        ),
        "{events:?}"
    );
    assert_eq!(published.as_deref(), Some(&bytes[..]));
}

#[test]
fn a_piece_of_another_size_than_due_fails_the_entry() {
    // The second piece is cut short: every piece but the last has at
    // least MIN_PIECE_BYTES (PIECE_BYTES is that).
    let n = 2 * PIECE_BYTES + 10;
    let mut pieces = eager_pieces(&vec![5u8; n]);
    pieces[1].1.truncate(PIECE_BYTES - 1);
    let (event, published) = receive_n(12, n, pieces);
    match event {
        LinkEvent::RemoteFailed {
            failure: Failure::Transfer { error, .. },
            ..
        } => assert!(
            error.contains(&format!(
                "a piece of {} bytes at byte {PIECE_BYTES}; {PIECE_BYTES} to {} were due",
                PIECE_BYTES - 1,
                PIECE_BYTES + 10
            )),
            "{error}"
        ),
        other => panic!("{other:?}"),
    }
    assert!(published.is_none(), "a bad sending was published");
}

#[test]
fn a_large_entry_sent_without_waiting_for_room_fails() {
    // Above EAGER_BYTES an entry must be announced first.
    let n = EAGER_BYTES + 1;
    let h = header(Primitive::UInt8, &[n as u64], n as u64, 0);
    failed_with_n(
        13,
        n,
        vec![(h.encode().expect("header"), vec![1; PIECE_BYTES])],
        "came without waiting for room",
    );
}
