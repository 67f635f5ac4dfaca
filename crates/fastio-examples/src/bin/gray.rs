//! The streaming demo's first stage: each `uint8 [H, W, 3]` image to a
//! `float32 [H, W]` luminance in [0, 1].

#![forbid(unsafe_code)]

use fastio::Operator;
use fastio_examples::Result;

fn main() -> Result {
    let mut op = Operator::from_env()?;
    let mut n = 0u64;
    for step in op.frames()? {
        let step = step?;
        let image = step.input("image")?;
        let (h, w) = (image.shape()[0], image.shape()[1]);
        let px = image.bytes();
        let mut out = step.output("luma")?;
        out.set_shape(&[h, w])?;
        for (o, p) in out.bytes_mut()?.chunks_exact_mut(4).zip(px.chunks_exact(3)) {
            let l = (0.299 * f32::from(p[0]) + 0.587 * f32::from(p[1]) + 0.114 * f32::from(p[2]))
                / 255.0;
            o.copy_from_slice(&l.to_ne_bytes());
        }
        n += 1;
    }
    println!("gray: {n} frames");
    Ok(())
}
