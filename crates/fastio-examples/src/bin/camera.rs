//! The streaming demo's source: a synthetic camera. Each frame is a
//! `uint8 [240, 320, 3]` image of a gradient and a bright disc that moves
//! with the frame number, published at `FPS` frames per second (default
//! 60) until the job's frame count or duration.

#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use fastio::Operator;
use fastio_examples::Result;

fn main() -> Result {
    let fps: f64 = std::env::var("FPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60.0);
    let period = Duration::from_secs_f64(1.0 / fps.max(0.1));
    let mut op = Operator::from_env()?;
    let start = Instant::now();
    let mut n = 0u32;
    for step in op.frames()? {
        let step = step?;
        // Paced by the clock, not by sleeping a period after each frame.
        let due = start + period * n;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let mut out = step.output("image")?;
        let shape = out.shape().to_vec();
        let (h, w) = (shape[0], shape[1]);
        let t = step.seq() as f64;
        let (cx, cy) = (
            (w as f64 / 2.0) * (1.0 + 0.8 * (t / 40.0).cos()),
            (h as f64 / 2.0) * (1.0 + 0.8 * (t / 55.0).sin()),
        );
        let px = out.bytes_mut()?;
        for y in 0..h {
            for x in 0..w {
                let d2 = (x as f64 - cx).powi(2) + (y as f64 - cy).powi(2);
                let disc = if d2 < 400.0 { 200 } else { 0 };
                let i = (y * w + x) * 3;
                px[i] = ((x * 255 / w) as u8 / 4).saturating_add(disc);
                px[i + 1] = ((y * 255 / h) as u8 / 4).saturating_add(disc);
                px[i + 2] = (step.seq() % 64) as u8;
            }
        }
        n += 1;
    }
    println!("camera: {n} frames at {fps} fps");
    Ok(())
}
