//! Demo operator `stats`: statistics of its input `features` as JSON, in
//! its `string` output `summary` (the driver prints strings nobody
//! consumes).

#![forbid(unsafe_code)]

use fastio::Operator;
use fastio_examples::Result;

fn main() -> Result {
    let mut op = Operator::from_env()?;
    let v = op.input("features")?.map_as_ndobject()?.to_vec::<f32>()?;
    let n = v.len().max(1) as f64;
    let mean = v.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
    let max = v.iter().copied().fold(f32::MIN, f32::max);
    let min = v.iter().copied().fold(f32::MAX, f32::min);
    let nonzero = v.iter().filter(|&&x| x > 0.0).count();
    let json = format!(
        "{{\"voxels\": {}, \"mean\": {mean:.6}, \"min\": {min:.6}, \"max\": {max:.6}, \"nonzero\": {nonzero}}}",
        v.len()
    );
    op.output("summary")?.set_string(&json)?;
    println!("{json}");
    Ok(())
}
