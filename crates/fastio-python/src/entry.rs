//! Seed 000's pipeline entries and the operator that owns them.

use fastio::{Access, Entry, Operator};
use pyo3::prelude::*;

use crate::buffer::Buffer;
use crate::context::PyContext;
use crate::err;
use crate::frames::PyFrames;

/// An entry of the running operator (seed 000's vocabulary).
#[pyclass(module = "fastio._native", name = "Entry")]
pub(crate) struct PyEntry {
    entry: Entry,
}

#[pymethods]
impl PyEntry {
    /// `<operator>/<output>`.
    #[getter]
    fn name(&self) -> String {
        self.entry.name().to_owned()
    }

    /// True for outputs (read-write), false for inputs (read-only).
    #[getter]
    fn writable(&self) -> bool {
        self.entry.access() == Access::ReadWrite
    }

    /// The current shape (0 in a dynamic dimension not set yet).
    #[getter]
    fn shape(&mut self) -> Vec<usize> {
        if self.entry.access() == Access::ReadOnly {
            let _ = self.entry.refresh();
        }
        self.entry.shape().to_vec()
    }

    /// The element type's name.
    #[getter]
    fn element_type(&self) -> String {
        self.entry.element_type().to_string()
    }

    /// The dynamic dimensions.
    #[getter]
    fn dynamic_shape_indices(&self) -> Vec<usize> {
        self.entry.dynamic_indices()
    }

    /// Whether some dimension is dynamic.
    #[getter]
    fn is_dynamic(&self) -> bool {
        self.entry.is_dynamic()
    }

    /// Whether the driver allocated it before the operator started.
    #[getter]
    fn is_preallocated(&self) -> bool {
        self.entry.is_preallocated()
    }

    /// Whether an allocation exists.
    #[getter]
    fn is_allocated(&self) -> bool {
        self.entry.is_allocated()
    }

    /// Bytes the current shape needs.
    #[getter]
    fn size_bytes(&self) -> usize {
        self.entry.size_bytes()
    }

    /// Sets dynamic dimensions; returns the indices it ignored.
    fn update_shape(
        &mut self,
        dimensions: Vec<usize>,
        new_values: Vec<usize>,
    ) -> PyResult<Vec<usize>> {
        self.entry
            .update_shape(&dimensions, &new_values)
            .map_err(err)
    }

    /// Allocates (or reallocates, erasing) the output.
    fn allocate(&mut self) -> PyResult<()> {
        self.entry.allocate().map_err(err)
    }

    /// Maps it: an input read-only (`PROT_READ`), an output writable.
    fn map(&self) -> PyResult<Buffer> {
        match self.entry.access() {
            Access::ReadOnly => Ok(Buffer::new(
                self.entry.map_as_ndobject().map_err(err)?,
                true,
            )),
            Access::ReadWrite => Ok(Buffer::new(
                self.entry.map_as_ndobject_mut().map_err(err)?,
                false,
            )),
        }
    }
}

/// The operator this process runs as.
#[pyclass(module = "fastio._native", name = "Operator")]
pub(crate) struct PyOperator {
    name: String,
    context: Py<PyContext>,
    inputs: Vec<(String, Py<PyEntry>)>,
    outputs: Vec<(String, Py<PyEntry>)>,
    /// The frame loop, in a streaming job.
    frames: Option<Py<PyFrames>>,
}

#[pymethods]
impl PyOperator {
    /// Attaches as the operator named in `FASTIO_OPERATOR`.
    #[staticmethod]
    fn from_env(py: Python<'_>) -> PyResult<PyOperator> {
        let mut op = Operator::from_env().map_err(err)?;
        let name = op.name().to_owned();
        let frames = if op.plan().0.streaming.is_some() {
            Some(Py::new(py, PyFrames::new(op.frames().map_err(err)?))?)
        } else {
            None
        };
        let (ctx, inputs, outputs) = op.into_parts();
        let wrap = |list: Vec<(String, Entry)>| -> PyResult<Vec<(String, Py<PyEntry>)>> {
            list.into_iter()
                .map(|(n, entry)| Ok((n, Py::new(py, PyEntry { entry })?)))
                .collect()
        };
        Ok(PyOperator {
            name,
            context: Py::new(py, PyContext { ctx })?,
            inputs: wrap(inputs)?,
            outputs: wrap(outputs)?,
            frames,
        })
    }

    /// The frame loop of a streaming job (`for frame in op:`); `None` when
    /// the job does not stream.
    #[getter]
    fn frames(&self, py: Python<'_>) -> Option<Py<PyFrames>> {
        self.frames.as_ref().map(|f| f.clone_ref(py))
    }

    /// Its name.
    #[getter]
    fn name(&self) -> String {
        self.name.clone()
    }

    /// The job's context.
    #[getter]
    fn context(&self, py: Python<'_>) -> Py<PyContext> {
        self.context.clone_ref(py)
    }

    /// The inputs, in definition order.
    #[getter]
    fn inputs(&self, py: Python<'_>) -> Vec<Py<PyEntry>> {
        self.inputs.iter().map(|(_, e)| e.clone_ref(py)).collect()
    }

    /// The outputs, in definition order.
    #[getter]
    fn outputs(&self, py: Python<'_>) -> Vec<Py<PyEntry>> {
        self.outputs.iter().map(|(_, e)| e.clone_ref(py)).collect()
    }

    /// The input named `name` (local name or `<operator>/<output>`).
    fn input(&self, py: Python<'_>, name: &str) -> PyResult<Py<PyEntry>> {
        find(py, &self.inputs, name)
    }

    /// The output named `name`.
    fn output(&self, py: Python<'_>, name: &str) -> PyResult<Py<PyEntry>> {
        find(py, &self.outputs, name)
    }
}

fn find(py: Python<'_>, list: &[(String, Py<PyEntry>)], name: &str) -> PyResult<Py<PyEntry>> {
    let names: Vec<(&str, String)> = list
        .iter()
        .map(|(n, e)| (n.as_str(), e.borrow(py).entry.name().to_owned()))
        .collect();
    let i = fastio::lookup_entry(&names, name, |(n, e)| (n, e)).map_err(err)?;
    Ok(list[i].1.clone_ref(py))
}
