//! Demo operator `render`: a maximum-intensity projection of its input
//! `features` along the first axis, written as a PNG into its stream
//! output's directory.

#![forbid(unsafe_code)]

use fastio::Operator;
use fastio_examples::{Result, png_gray8};

const SCALE: usize = 4;

fn main() -> Result {
    let op = Operator::from_env()?;
    let features = op.input("features")?.map_as_ndobject()?;
    let s = features.shape().to_vec();
    let (d, h, w) = (s[0], s[1], s[2]);
    let v = features.to_vec::<f32>()?;
    let mut mip = vec![0f32; h * w];
    for z in 0..d {
        for (k, m) in mip.iter_mut().enumerate() {
            *m = m.max(v[z * h * w + k]);
        }
    }
    let max = mip.iter().copied().fold(f32::MIN_POSITIVE, f32::max);
    let (ph, pw) = (h * SCALE, w * SCALE);
    let pixels: Vec<u8> = (0..ph * pw)
        .map(|i| {
            let (y, x) = (i / pw / SCALE, i % pw / SCALE);
            (mip[y * w + x] / max * 255.0).round().clamp(0.0, 255.0) as u8
        })
        .collect();
    let dir = std::env::var(fastio::plan::stream_env("render", "image"))
        .map_err(|_| "no directory for the image stream")?;
    let path = std::path::Path::new(&dir).join("mip.png");
    std::fs::write(&path, png_gray8(pw as u32, ph as u32, &pixels))?;
    println!("wrote {}", path.display());
    Ok(())
}
