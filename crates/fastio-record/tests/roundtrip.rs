//! Recordings written and read back: every frame and entry bit-exact, the
//! counts and the summary; a file cut at every kind of place reads up to
//! its last complete message; bit flips and hostile sizes are errors,
//! never a panic or an allocation beyond the file.

use std::path::{Path, PathBuf};

use dtype::Primitive;
use fastio_record::{ChannelKind, EntryHeader, Error, FrameHeader, Recorder, Recording, RunInfo};

fn tmp(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fastio-record");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Frame `k` of the float stream: shape `[1 + k % 2, 3]`, values from `k`.
fn floats(k: u64) -> (Vec<u64>, Vec<u8>) {
    let rows = 1 + k % 2;
    let bytes = (0..rows * 3)
        .flat_map(|i| (k as f32 * 10.0 + i as f32).to_le_bytes())
        .collect();
    (vec![rows, 3], bytes)
}

/// Frame `k` of the image stream: `[2, 4, 3]` uint8.
fn image(k: u64) -> Vec<u8> {
    (0..24).map(|i| (k * 7 + i) as u8).collect()
}

const FRAMES: u64 = 50;

fn write_sample(path: &Path) {
    let mut r = Recorder::create(
        path,
        &RunInfo {
            pipeline: "sample".into(),
            run: "r1".into(),
        },
    )
    .unwrap();
    let f = r.add_stream("op/v", Primitive::Float32, &[2, 3]).unwrap();
    let im = r
        .add_stream("cam/image", Primitive::UInt8, &[2, 4, 3])
        .unwrap();
    for k in 0..FRAMES {
        let (shape, bytes) = floats(k);
        let h = FrameHeader {
            frame: k,
            source_frame: k,
            timestamp_ns: 1_000 + k,
            shape,
        };
        r.write_frame(f, &h, &bytes).unwrap();
        let h = FrameHeader {
            frame: k,
            source_frame: k,
            timestamp_ns: 1_000 + k,
            shape: vec![2, 4, 3],
        };
        r.write_frame(im, &h, &image(k)).unwrap();
    }
    r.skipped(im, 3).unwrap();
    r.write_entry(
        &EntryHeader {
            entry: "make/v".into(),
            operator: "make".into(),
            element_type: "int16".into(),
            shape: vec![2],
            recorded_ns: 5,
        },
        &[1, 0, 2, 0],
    )
    .unwrap();
    let totals = r.finish().unwrap();
    assert_eq!(
        (totals[0].frames, totals[1].frames, totals[1].skipped),
        (FRAMES, FRAMES, 3)
    );
}

#[test]
fn every_frame_and_entry_reads_back_bit_exact_with_its_summary() {
    let path = tmp("sample.mcap");
    write_sample(&path);
    let rec = Recording::open(&path).unwrap();
    let info = rec.info().unwrap();
    assert!(info.complete && info.cut.is_none(), "{info:?}");
    assert_eq!(info.profile, "fastio");
    assert_eq!(info.run.get("pipeline").map(String::as_str), Some("sample"));
    assert_eq!(
        info.counts.get("cam/image.skipped").map(String::as_str),
        Some("3")
    );
    let by_topic = |t: &str| info.channels.iter().find(|c| c.topic == t).unwrap();
    let v = by_topic("op/v");
    assert_eq!(
        (v.kind, v.element, v.max_shape.clone(), v.messages),
        (
            ChannelKind::Stream,
            Some(Primitive::Float32),
            Some(vec![2, 3]),
            FRAMES
        )
    );
    assert_eq!(by_topic("cam/image/image").kind, ChannelKind::Image);
    assert_eq!(by_topic("cam/image/image").messages, FRAMES);
    assert_eq!(by_topic("fastio/entries").kind, ChannelKind::Entries);
    assert_eq!(info.messages, 2 * FRAMES * 2 - FRAMES + 1);

    let frames: Vec<_> = rec.frames("op/v").unwrap().map(Result::unwrap).collect();
    assert_eq!(frames.len() as u64, FRAMES);
    for (k, f) in frames.iter().enumerate() {
        let (shape, bytes) = floats(k as u64);
        assert_eq!(
            (f.header.frame, &f.header.shape, &f.bytes),
            (k as u64, &shape, &bytes)
        );
        assert_eq!(f.header.timestamp_ns, 1_000 + k as u64);
    }
    let images: Vec<_> = rec
        .frames("cam/image")
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(
        images
            .iter()
            .enumerate()
            .all(|(k, f)| f.bytes == image(k as u64))
    );
    let entries = rec.entries().unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(
        (entries[0].header.entry.as_str(), &entries[0].bytes[..]),
        ("make/v", &[1u8, 0, 2, 0][..])
    );
    assert!(rec.frames("nope").unwrap().next().is_none());
    assert!(matches!(
        rec.stream_channel(Some("nope")),
        Err(Error::NoChannel { .. })
    ));
    assert!(
        rec.stream_channel(None).is_err(),
        "two streams: one must be named"
    );
}

#[test]
fn a_file_cut_anywhere_reads_up_to_its_last_complete_message() {
    let path = tmp("cut-source.mcap");
    write_sample(&path);
    let full = std::fs::read(&path).unwrap();
    let whole = Recording::open(&path).unwrap().info().unwrap();
    let mut rng = Rng(0x33c0_ffee);
    let mut last_messages = 0;
    let mut cuts: Vec<usize> = (0..200)
        .map(|_| rng.below(full.len() as u64) as usize)
        .collect();
    cuts.sort_unstable();
    for cut in cuts {
        let p = tmp("cut.mcap");
        std::fs::write(&p, &full[..cut]).unwrap();
        let rec = Recording::open(&p).unwrap();
        let info = match rec.info() {
            Ok(i) => i,
            // Before the first records: the magic or header is cut.
            Err(e) => {
                assert!(cut < 200, "cut at {cut}: {e}");
                continue;
            }
        };
        // Complete once the footer is read (only the end magic may be
        // missing).
        assert!(!info.complete || cut >= full.len() - 8, "cut at {cut}");
        assert!(info.messages <= whole.messages);
        // Cutting later never loses a message an earlier cut had.
        assert!(info.messages >= last_messages, "cut at {cut}");
        last_messages = info.messages;
        if !info.complete {
            assert!(
                info.cut.as_deref().unwrap_or("").contains("cut off after"),
                "{info:?}"
            );
        }
        // The frames before the cut are every frame, in order, then one
        // error says where the file stops.
        let mut n = 0u64;
        for f in rec.frames("op/v").unwrap() {
            match f {
                Ok(f) => {
                    assert_eq!(f.bytes, floats(n).1);
                    n += 1;
                }
                Err(e) => {
                    assert!(matches!(e, Error::Truncated { .. }), "cut at {cut}: {e}");
                    break;
                }
            }
        }
        assert!(n <= FRAMES);
    }
}

#[test]
fn bit_flips_and_hostile_sizes_are_errors_never_a_panic() {
    let path = tmp("flip-source.mcap");
    write_sample(&path);
    let full = std::fs::read(&path).unwrap();
    let mut rng = Rng(0xf11b);
    let p = tmp("flip.mcap");
    for round in 0..2_000 {
        let mut bytes = full.clone();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(bytes.len() as u64) as usize;
            match round % 3 {
                0 => bytes[at] ^= 1 << rng.below(8),
                1 => bytes[at] = 0xff,
                _ => {
                    // A length field made huge.
                    let end = (at + 8).min(bytes.len());
                    bytes[at..end].fill(0x7f);
                }
            }
        }
        std::fs::write(&p, &bytes).unwrap();
        let rec = Recording::open(&p).unwrap();
        let _ = rec.info();
        if let Ok(frames) = rec.frames("op/v") {
            for f in frames.take(FRAMES as usize + 1).flatten() {
                // Whatever is given out is consistent with its header.
                let n: u64 = f.header.shape.iter().product::<u64>() * 4;
                assert_eq!(f.bytes.len() as u64, n);
            }
        }
        let _ = rec.entries();
    }
    // Not an MCAP file at all, and an empty one.
    for junk in [&b""[..], b"hello, not an mcap file", &[0x89; 64]] {
        std::fs::write(&p, junk).unwrap();
        let rec = Recording::open(&p).unwrap();
        // Not a recording: an error, not a cut one of 0 messages.
        assert!(rec.info().is_err(), "{:?}", rec.info());
        assert!(rec.frames("op/v").unwrap().all(|f| f.is_err()));
    }
}

/// Everything a reader gives out of a recording: each stream's frames and
/// the entries (the first error ends a list).
fn contents(
    rec: &Recording,
) -> (
    Vec<fastio_record::RecordedFrame>,
    Vec<fastio_record::RecordedFrame>,
) {
    let take = |topic: &str| -> Vec<fastio_record::RecordedFrame> {
        rec.frames(topic)
            .map(|it| it.map_while(Result::ok).collect())
            .unwrap_or_default()
    };
    (take("op/v"), take("cam/image"))
}

/// Issue 50, item 2: one-bit flips anywhere in a recording (frame bytes,
/// message headers, MCAP's records, metadata, channels, the summary): each
/// is detected ([`Recording::verified_info`] refuses the file, `info` lists
/// it) or harmless (everything reads back as written); and no reader ever
/// gives out a frame or entry other than the one written.
#[test]
fn every_flipped_bit_is_detected_or_harmless_and_never_given_out() {
    let path = tmp("flip1-source.mcap");
    write_sample(&path);
    let full = std::fs::read(&path).unwrap();
    let original = Recording::from_bytes(full.clone());
    let (v0, im0) = contents(&original);
    let entries0 = original.entries().unwrap();
    assert_eq!((v0.len(), im0.len()), (FRAMES as usize, FRAMES as usize));
    assert!(original.verified_info().is_ok());

    let mut rng = Rng(0xb17f_11b5);
    let (mut detected, mut harmless) = (0, 0);
    for _ in 0..400 {
        let at = rng.below(full.len() as u64) as usize;
        let mut bytes = full.clone();
        bytes[at] ^= 1 << rng.below(8);
        let rec = Recording::from_bytes(bytes);
        // Whatever a reader gives out is what was written, in order: each
        // frame's header and bytes (its `log_time`, when it was recorded,
        // is MCAP's record field, not the frame's: only MCAP's data CRC
        // covers it).
        let (v, im) = contents(&rec);
        let same = |a: &[fastio_record::RecordedFrame], b: &[fastio_record::RecordedFrame]| {
            a.len() <= b.len()
                && a.iter()
                    .zip(b)
                    .all(|(x, y)| (&x.header, &x.bytes) == (&y.header, &y.bytes))
        };
        assert!(same(&v, &v0), "flip at {at}");
        assert!(same(&im, &im0), "flip at {at}");
        if let Ok(e) = rec.entries() {
            assert_eq!(e, entries0, "flip at {at}");
        }
        match rec.verified_info() {
            Err(_) => {
                detected += 1;
                // `info` lists it (or cannot read the file at all).
                if let Ok(info) = rec.info() {
                    assert!(
                        info.problem_count > 0 || info.cut.is_some(),
                        "flip at {at}: {info:?}"
                    );
                }
            }
            Ok(info) => {
                // Harmless: all of it reads back as written.
                harmless += 1;
                assert!(info.complete, "flip at {at}: {info:?}");
                assert_eq!((v.len(), im.len()), (v0.len(), im0.len()), "flip at {at}");
                assert!(rec.entries().is_ok(), "flip at {at}");
            }
        }
    }
    // MCAP's data and summary CRCs cover nearly every byte; the per-message
    // checksum names the message.
    assert!(detected >= 390, "{detected} detected, {harmless} harmless");
}

/// A flip inside a frame message is refused by the reader on its own (the
/// message's checksum), also in a file cut before MCAP's data CRC: the
/// error names the stream and the message's number in the stream and in
/// the file.
#[test]
fn a_flip_in_a_message_is_named_even_in_a_cut_file() {
    let path = tmp("flip2-source.mcap");
    write_sample(&path);
    let full = std::fs::read(&path).unwrap();
    // Frame 7 of op/v: its header, then its bytes.
    let marker = b"\"frame\":7,";
    let at = full
        .windows(marker.len())
        .position(|w| w == marker)
        .unwrap();
    let mut rng = Rng(0x0ddba11);
    for _ in 0..100 {
        // Cut well after the message, before the end: no data CRC to help.
        let mut bytes = full[..full.len() * 3 / 4].to_vec();
        let flip = at - 20 + rng.below(60) as usize;
        bytes[flip] ^= 1 << rng.below(8);
        let rec = Recording::from_bytes(bytes);
        let frames: Vec<_> = rec.frames("op/v").unwrap().collect();
        let bad = frames.iter().position(Result::is_err).expect("an error");
        // Frames 0..7 are good (the flip may hit frame 7's image message,
        // which comes after op/v's frame 7 in the file).
        assert!(bad >= 7, "flip at {flip}: {:?}", frames[bad]);
        for (k, f) in frames[..bad].iter().enumerate() {
            assert_eq!(f.as_ref().unwrap().bytes, floats(k as u64).1);
        }
        let text = frames[bad].as_ref().unwrap_err().to_string();
        if bad == 7 {
            assert!(
                text.contains("op/v, message 8 of the channel (") && text.contains(" of the file)"),
                "{text}"
            );
        }
        let info = rec.info().unwrap();
        assert!(info.problem_count >= 1 && info.cut.is_some(), "{info:?}");
        assert!(rec.verified_info().is_err());
    }
}

/// A file written before checksums (no `crc32` in its headers, no
/// `fastio.checksum` on its channels) reads as it did: its frames checked
/// for size and shape; MCAP's data CRC still refuses a flip in a file that
/// was closed well. A message that lost its checksum on a channel that says
/// every message has one is refused.
#[test]
fn a_file_from_before_checksums_is_read_and_still_guarded_by_mcap_crcs() {
    use std::collections::BTreeMap;
    let mut out = std::io::Cursor::new(Vec::new());
    {
        let mut w = mcap::WriteOptions::new()
            .profile("fastio")
            .use_chunks(false)
            .compression(None)
            .create(&mut out)
            .unwrap();
        let schema = w
            .add_schema(fastio_record::FRAME_SCHEMA, fastio_record::ENCODING, b"{}")
            .unwrap();
        let meta = BTreeMap::from([
            ("fastio.kind".to_owned(), "stream".to_owned()),
            ("fastio.element".to_owned(), "float32".to_owned()),
            ("fastio.max_shape".to_owned(), "[2, 3]".to_owned()),
        ]);
        let ch = w
            .add_channel(schema, "op/v", fastio_record::ENCODING, &meta)
            .unwrap();
        for k in 0..10u64 {
            let (shape, bytes) = floats(k);
            let mut data = fastio_record::encode_header(&FrameHeader {
                frame: k,
                source_frame: k,
                timestamp_ns: 1_000 + k,
                shape,
            });
            data.extend_from_slice(&bytes);
            w.write_to_known_channel(
                &mcap::records::MessageHeader {
                    channel_id: ch,
                    sequence: k as u32,
                    log_time: 1_000 + k,
                    publish_time: 1_000 + k,
                },
                &data,
            )
            .unwrap();
        }
        w.finish().unwrap();
    }
    let old = out.into_inner();
    let rec = Recording::from_bytes(old.clone());
    let info = rec.verified_info().unwrap();
    assert!(!info.channels[0].checksum, "{info:?}");
    let frames: Vec<_> = rec.frames("op/v").unwrap().map(Result::unwrap).collect();
    assert_eq!(frames.len(), 10);
    assert!(
        frames
            .iter()
            .enumerate()
            .all(|(k, f)| f.bytes == floats(k as u64).1)
    );

    // A flipped frame byte: MCAP's data CRC (the file was closed well).
    let marker = b"\"frame\":4,";
    let at = old.windows(marker.len()).position(|w| w == marker).unwrap();
    let payload = at + old[at..].windows(2).position(|w| w == b"]}").unwrap() + 2;
    let mut flipped = old.clone();
    flipped[payload + 1] ^= 0x10;
    let flipped = Recording::from_bytes(flipped);
    assert!(
        matches!(
            flipped.frames("op/v").unwrap().last(),
            Some(Err(Error::Crc {
                section: "data section",
                ..
            }))
        ),
        "the reader of every frame meets the data section's CRC at its end"
    );
    let err = flipped.verified_info().unwrap_err().to_string();
    assert!(
        err.contains("the MCAP data section's CRC does not match"),
        "{err}"
    );

    // Today's file whose message lost its checksum: refused.
    let path = tmp("unsealed.mcap");
    write_sample(&path);
    let mut bytes = std::fs::read(&path).unwrap();
    let open = b"{\"crc32\":\"";
    let at = bytes.windows(open.len()).position(|w| w == open).unwrap();
    // `"crc32"` -> `"crc33"`: an unknown member, where the first must be
    // the checksum.
    bytes[at + 6] = b'3';
    let info = Recording::from_bytes(bytes).info().unwrap();
    assert!(
        info.problems.iter().any(|p| p.contains("no checksum")),
        "{info:?}"
    );
}
