//! Demo operator `generate`: fills its static output `volume`, a float32
//! `[3, 224, 255, 127]` volume (83 MiB), with three Gaussian blobs, one per
//! channel, written straight into the shared memory the driver
//! pre-allocated.

#![forbid(unsafe_code)]

use fastio::Operator;
use fastio_examples::Result;

fn main() -> Result {
    let mut op = Operator::from_env()?;
    let out = op.output("volume")?;
    let shape = out.shape().to_vec();
    let (c, d, h, w) = (shape[0], shape[1], shape[2], shape[3]);
    let mut m = out.map_mut()?;
    let centers = [(0.35, 0.4, 0.5), (0.6, 0.55, 0.45), (0.5, 0.3, 0.6)];
    let mut k = 0;
    for (ch, &(cz, cy, cx)) in centers.iter().enumerate().take(c) {
        for z in 0..d {
            let dz = z as f32 / d as f32 - cz;
            for y in 0..h {
                let dy = y as f32 / h as f32 - cy;
                for x in 0..w {
                    let dx = x as f32 / w as f32 - cx;
                    let r2 = dz * dz + dy * dy + dx * dx;
                    let v = (-r2 / 0.01).exp() * (1.0 + ch as f32 * 0.25);
                    m[k..k + 4].copy_from_slice(&v.to_ne_bytes());
                    k += 4;
                }
            }
        }
    }
    println!("generated {shape:?} float32 ({} MiB)", m.len() >> 20);
    Ok(())
}
