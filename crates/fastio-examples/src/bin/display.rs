//! The streaming demo's sink: for each `float32 [H, W]` edge map, the mean
//! and the position of the strongest edge; a line every `EVERY` frames
//! (default 60) with the frame's age since the camera took it.

#![forbid(unsafe_code)]

use std::time::{SystemTime, UNIX_EPOCH};

use fastio::Operator;
use fastio_examples::Result;

fn main() -> Result {
    let every: u64 = std::env::var("EVERY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let mut op = Operator::from_env()?;
    let mut n = 0u64;
    for step in op.frames()? {
        let step = step?;
        let edges = step.input("edges")?;
        let w = edges.shape()[1];
        let (mut sum, mut best, mut at) = (0f64, f32::MIN, 0usize);
        for (i, c) in edges.bytes().chunks_exact(4).enumerate() {
            let v = f32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
            sum += f64::from(v);
            if v > best {
                (best, at) = (v, i);
            }
        }
        if step.seq() % every == 0 {
            let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos() as u64;
            let age = now.saturating_sub(step.timestamp_ns()) as f64 / 1e6;
            println!(
                "frame {}: mean edge {:.4}, strongest at ({}, {}), {age:.2} ms after the camera",
                step.seq(),
                sum / (edges.len() / 4) as f64,
                at / w,
                at % w
            );
        }
        n += 1;
    }
    println!("display: {n} frames");
    Ok(())
}
