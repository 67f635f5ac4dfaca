//! Consumer half of the example pair (started by `producer`): attaches to
//! the context named by `FASTIO_CONTEXT`, maps the published `volume` as an
//! `ndobject` array over the shared memory, computes its mean, and frees it.

#![forbid(unsafe_code)]

use fastio::Context;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ctx = Context::from_env()?;
    let volume = ctx.get("volume")?;
    let array = volume.map_as_ndobject()?;
    let values: &[f32] = array.as_slice()?;
    let mean = values.iter().map(|&v| f64::from(v)).sum::<f64>() / values.len() as f64;
    println!(
        "consumer: `volume` is {} {:?}; mean {mean:.6}",
        volume.element_type(),
        array.shape()
    );
    drop(array);
    volume.free()?;
    Ok(())
}
