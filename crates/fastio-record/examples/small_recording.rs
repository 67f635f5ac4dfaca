//! Writes a small recording with the API, then reads it back:
//! `cargo run -p fastio-record --example small_recording -- OUT.mcap
//! [--plain]`. Two streams (one of images, so a viewer shows it), three
//! frames each of varying shape, and one entry; with `--plain` only the
//! first stream, under 4 KiB: the fuzz target `mcap_replay`'s seed
//! (`fuzz/seeds/mcap_replay/small.mcap`, within libFuzzer's `-max_len`).

use std::path::PathBuf;

use dtype::Primitive;
use fastio_record::{EntryHeader, FrameHeader, Recorder, Recording, RunInfo};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = PathBuf::from(
        std::env::args()
            .nth(1)
            .ok_or("usage: small_recording OUT.mcap")?,
    );
    let plain = std::env::args().any(|a| a == "--plain");
    let run = RunInfo {
        pipeline: "small".into(),
        run: "example".into(),
    };
    let mut r = Recorder::create(&out, &run)?;
    let v = r.add_stream("src/v", Primitive::UInt32, &[2, 2])?;
    let cam = if plain {
        None
    } else {
        Some(r.add_stream("cam/image", Primitive::UInt8, &[2, 2, 3])?)
    };
    for k in 0..3u64 {
        let rows = 1 + k % 2;
        let words: Vec<u8> = (0..rows * 2)
            .flat_map(|i| (k as u32 * 100 + i as u32).to_le_bytes())
            .collect();
        let header = |shape: Vec<u64>| FrameHeader {
            frame: k,
            source_frame: k,
            timestamp_ns: 1_000_000 * k,
            shape,
        };
        r.write_frame(v, &header(vec![rows, 2]), &words)?;
        if let Some(cam) = cam {
            let pixels: Vec<u8> = (0..12).map(|i| (k * 40 + i) as u8).collect();
            r.write_frame(cam, &header(vec![2, 2, 3]), &pixels)?;
        }
    }
    if !plain {
        r.write_entry(
            &EntryHeader {
                entry: "make/v".into(),
                operator: "make".into(),
                element_type: "float32".into(),
                shape: vec![1],
                recorded_ns: 5,
            },
            &1.5f32.to_le_bytes(),
        )?;
    }
    let totals = r.finish()?;
    let info = Recording::open(&out)?.info()?;
    println!(
        "{}: {} messages, {} channels, {:?}",
        out.display(),
        info.messages,
        info.channels.len(),
        totals
    );
    Ok(())
}
