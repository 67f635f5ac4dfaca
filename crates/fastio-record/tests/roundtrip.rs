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
        assert!(!info.complete || cut == full.len(), "cut at {cut}");
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
        assert!(rec.info().is_err() || !rec.info().unwrap().complete);
        assert!(rec.frames("op/v").unwrap().all(|f| f.is_err()));
    }
}
