//! Producer half of the example pair: owns a Fast I/O context, writes a
//! float32 volume of shape `[3, 224, 255, 127]` into shared memory,
//! publishes it as `volume`, and runs the `consumer` example as a separate
//! process that computes its mean without copying it.
//!
//! ```text
//! cargo build --release -p fastio --examples
//! target/release/examples/producer
//! ```

#![forbid(unsafe_code)]

use std::process::Command;

use dtype::{Primitive, Type};
use fastio::{CONTEXT_ENV, Context, ContextOptions};

const SHAPE: [usize; 4] = [3, 224, 255, 127];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let numel: usize = SHAPE.iter().product();
    let bytes = numel as u64 * 4;
    let ctx = Context::new(
        &ContextOptions::new()
            .capacity(bytes + bytes / 8)
            .prefix("fastio-example"),
    )?;

    let volume = ctx.create_array(Type::primitive(Primitive::Float32), &SHAPE)?;
    {
        // Fill through an ndobject view of the shared memory: value = the
        // channel index (0, 1, 2) plus a small ramp over the last axis.
        let array = volume.map_as_ndobject_mut()?;
        let data = array.shape().to_vec();
        let mut values = Vec::with_capacity(numel);
        for c in 0..data[0] {
            for _ in 0..data[1] * data[2] {
                values.extend((0..data[3]).map(|k| c as f32 + k as f32 / 1000.0));
            }
        }
        let src = ndobject::Array::from_vec(values, &data)?;
        array.assign(&src, ndobject::AssignErrorMode::Inexact)?;
    }
    volume.publish("volume")?;
    volume.release()?; // the publication keeps the memory

    // Expected mean: channels average 1.0, the ramp averages 0.063.
    let expected = 1.0 + (SHAPE[3] - 1) as f64 / 2.0 / 1000.0;
    println!(
        "producer: published `volume` {SHAPE:?} float32 ({} MiB) in context {}; expected mean {expected:.6}",
        bytes >> 20,
        ctx.handle()
    );

    let consumer = std::env::current_exe()?.with_file_name("consumer");
    let status = Command::new(&consumer)
        .env(CONTEXT_ENV, ctx.handle())
        .status()
        .map_err(|e| {
            format!(
                "cannot run {}: {e} (build it with --example consumer)",
                consumer.display()
            )
        })?;
    if !status.success() {
        return Err(format!("consumer failed: {status}").into());
    }
    Ok(())
}
