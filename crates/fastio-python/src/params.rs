//! Parameter files: zero-copy load and TVM-compatible save.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::Error;
use crate::buffer::Buffer;

/// One loaded tensor: name, read-only buffer, element type, shape.
type LoadedTensor = (String, Buffer, String, Vec<usize>);

/// `(name, buffer, element type, shape)` of every tensor of a params file,
/// in file order: zero copy over one memory map (each buffer read-only).
#[pyfunction]
pub(crate) fn params_load(path: &str) -> PyResult<Vec<LoadedTensor>> {
    let d = params_io::ReadOptions::new()
        .map_path(path)
        .map_err(|e| Error::new_err(e.to_string()))?;
    d.iter()
        .map(|p| {
            let t = p.tensor();
            let array = t.to_array().map_err(|e| Error::new_err(e.to_string()))?;
            Ok((
                p.name().into_owned(),
                Buffer::new(array, true),
                t.primitive().name().to_owned(),
                t.shape().to_vec(),
            ))
        })
        .collect()
}

/// One tensor to save: name, element type, shape, bytes.
type TensorToSave = (String, String, Vec<usize>, Vec<u8>);

/// Writes `(name, element type, shape, bytes)` tensors as a params file
/// (TVM's `save_param_dict` layout), atomically; returns its size.
#[pyfunction]
pub(crate) fn params_save(path: &str, tensors: Vec<TensorToSave>) -> PyResult<u64> {
    let mut d = params_io::ParamDict::new();
    for (name, element, shape, bytes) in tensors {
        let p = dtype::Primitive::from_name(&element)
            .ok_or_else(|| PyValueError::new_err(format!("unknown element type {element:?}")))?;
        let t = params_io::Tensor::new(p, &shape, bytes)
            .map_err(|e| PyValueError::new_err(format!("{name}: {e}")))?;
        if d.insert(name.clone(), t).is_some() {
            return Err(PyValueError::new_err(format!("{name:?} given twice")));
        }
    }
    d.write_path(path)
        .map_err(|e| Error::new_err(e.to_string()))
}
