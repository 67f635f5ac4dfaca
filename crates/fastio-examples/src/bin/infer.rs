//! Demo operator `infer`: a small 3-D convolution (3 channels in, 1 out,
//! 3x3x3) and a ReLU over its dynamic input `cropped`, evaluated on a
//! 64x64x64 grid spanning the input, into its static output `features`.
//!
//! The weights come from a TVM-format parameter file, `weights.params` in
//! the pipeline's directory, read through `params-io`'s zero-copy memory
//! map; on the first run it is written (deterministically) with
//! `params-io`.

#![forbid(unsafe_code)]

use std::path::Path;

use dtype::Primitive;
use fastio::Operator;
use fastio_examples::Result;
use params_io::{ParamDict, ReadOptions, Tensor};

const WEIGHTS: &str = "weights.params";
const GRID: usize = 64;

fn write_weights(path: &Path) -> Result {
    let weight: Vec<u8> = (0..81)
        .map(|i| (1.0 + (i % 3) as f32 * 0.1) / 27.0)
        .flat_map(f32::to_le_bytes)
        .collect();
    let mut d = ParamDict::new();
    d.insert(
        "conv.weight",
        Tensor::new(Primitive::Float32, &[1, 3, 3, 3, 3], weight)?,
    );
    d.insert(
        "conv.bias",
        Tensor::new(Primitive::Float32, &[1], (-0.05f32).to_le_bytes().to_vec())?,
    );
    d.write_path(path)?;
    Ok(())
}

fn floats(d: &ParamDict, name: &str) -> Result<Vec<f32>> {
    let t = d
        .get(name)
        .ok_or_else(|| format!("{WEIGHTS} has no {name}"))?;
    Ok(t.to_array()?.to_contiguous()?.to_vec::<f32>()?)
}

fn main() -> Result {
    let path = Path::new(WEIGHTS);
    if !path.exists() {
        write_weights(path)?;
        println!("wrote {WEIGHTS}");
    }
    let params = ReadOptions::new().map_path(path)?;
    let (weight, bias) = (
        floats(&params, "conv.weight")?,
        floats(&params, "conv.bias")?[0],
    );
    let mut op = Operator::from_env()?;
    let input = op.input("cropped")?.map_as_ndobject()?;
    let s = input.shape().to_vec();
    let (c, d, h, w) = (s[0], s[1], s[2], s[3]);
    let data = input.to_vec::<f32>()?;
    let at = |ch: usize, z: isize, y: isize, x: isize| {
        let z = z.clamp(0, d as isize - 1) as usize;
        let y = y.clamp(0, h as isize - 1) as usize;
        let x = x.clamp(0, w as isize - 1) as usize;
        data[((ch * d + z) * h + y) * w + x]
    };
    let scale = |o: usize, n: usize| (o * (n - 1) / (GRID - 1)) as isize;
    let mut features = vec![0f32; GRID * GRID * GRID];
    for oz in 0..GRID {
        for oy in 0..GRID {
            for ox in 0..GRID {
                let (z, y, x) = (scale(oz, d), scale(oy, h), scale(ox, w));
                let mut acc = bias;
                for ch in 0..c.min(3) {
                    for k in 0..27isize {
                        let (kz, ky, kx) = (k / 9 - 1, (k / 3) % 3 - 1, k % 3 - 1);
                        acc += weight[ch * 27 + k as usize] * at(ch, z + kz, y + ky, x + kx);
                    }
                }
                features[(oz * GRID + oy) * GRID + ox] = acc.max(0.0);
            }
        }
    }
    let out = op.output("features")?;
    let mut m = out.map_mut()?;
    for (o, v) in m.chunks_exact_mut(4).zip(&features) {
        o.copy_from_slice(&v.to_ne_bytes());
    }
    println!("inferred {GRID}^3 features from {s:?} with {WEIGHTS}");
    Ok(())
}
