//! Demo operator `crop`: finds the bounding box of the voxels of channel 0
//! above a threshold in its input `volume`, and writes that box (every
//! channel) to its dynamic output `cropped`, whose shape it decides from
//! the data. The input is read through a zero-copy `ndobject` view of the
//! `PROT_READ` shared memory; the box is copied once by the typed kernels.

#![forbid(unsafe_code)]

use fastio::Operator;
use fastio_examples::Result;
use ndobject::{AssignErrorMode, Index};

const THRESHOLD: f32 = 0.1;

fn main() -> Result {
    let mut op = Operator::from_env()?;
    let volume = op.input("volume")?.map_as_ndobject()?;
    let shape = volume.shape().to_vec();
    let (d, h, w) = (shape[1], shape[2], shape[3]);
    let channel0 = volume.index(0)?.to_vec::<f32>()?;
    let (mut lo, mut hi) = ([usize::MAX; 3], [0usize; 3]);
    for z in 0..d {
        for y in 0..h {
            for x in 0..w {
                if channel0[(z * h + y) * w + x] > THRESHOLD {
                    for (k, v) in [z, y, x].into_iter().enumerate() {
                        lo[k] = lo[k].min(v);
                        hi[k] = hi[k].max(v + 1);
                    }
                }
            }
        }
    }
    if lo[0] == usize::MAX {
        return Err("no voxel above the threshold".into());
    }
    let view = volume.view(&[
        Index::all(),
        Index::slice(Some(lo[0] as isize), Some(hi[0] as isize), 1),
        Index::slice(Some(lo[1] as isize), Some(hi[1] as isize), 1),
        Index::slice(Some(lo[2] as isize), Some(hi[2] as isize), 1),
    ])?;
    let out = op.output("cropped")?;
    let new_shape = view.shape().to_vec();
    out.update_shape(&[0, 1, 2, 3], &new_shape)?;
    out.allocate()?;
    out.map_as_ndobject_mut()?
        .assign(&view, AssignErrorMode::None)?;
    println!("cropped {shape:?} to {new_shape:?} (box {lo:?}..{hi:?})");
    Ok(())
}
