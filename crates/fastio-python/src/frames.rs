//! A streaming operator's frame loop: `for frame in op:` (the native part
//! of `fastio.Operator.__iter__`).
//!
//! * `frame.input(name)` is a read-only numpy view of the input frame, zero
//!   copy (`PROT_READ` pages). The view **keeps its frame**: the slot goes
//!   back to the producer only when every view of it is gone. A consumer
//!   may keep up to the stream's depth of frames this way; one more makes
//!   the loop raise (`fastio.Error`, "still held"), never a dangling view.
//! * `frame.write(name, data, shape=None)` copies `data` into the output's
//!   slot (one copy, straight into shared memory).
//! * A frame's outputs are published when the loop moves to the next
//!   frame (or `frame.done()`); waiting for a frame releases the GIL.

use std::sync::Mutex;

use fastio::{Frame, Step, Steps};
use pyo3::exceptions::{PyRuntimeError, PyStopIteration, PyValueError};
use pyo3::prelude::*;

use crate::buffer::Buffer;
use crate::err;

/// The frames of a streaming operator.
#[pyclass(module = "fastio._native", name = "Frames")]
pub(crate) struct PyFrames {
    steps: Mutex<Option<Steps>>,
    current: Option<Py<PyFrame>>,
}

impl PyFrames {
    pub(crate) fn new(steps: Steps) -> PyFrames {
        PyFrames {
            steps: Mutex::new(Some(steps)),
            current: None,
        }
    }
}

#[pymethods]
impl PyFrames {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Publishes the previous frame's outputs, then waits (without the
    /// GIL) for the next frame of every input.
    fn __next__(&mut self, py: Python<'_>) -> PyResult<Py<PyFrame>> {
        if let Some(prev) = self.current.take() {
            prev.borrow_mut(py).finish();
        }
        let steps = &self.steps;
        let next = py.detach(|| {
            let mut guard = steps.lock().unwrap_or_else(|p| p.into_inner());
            let Some(s) = guard.as_mut() else {
                return Ok(None);
            };
            match s.next() {
                Some(r) => r.map(Some),
                None => {
                    *guard = None;
                    Ok(None)
                }
            }
        });
        match next.map_err(err)? {
            Some(step) => {
                let f = Py::new(py, PyFrame { step: Some(step) })?;
                self.current = Some(f.clone_ref(py));
                Ok(f)
            }
            None => Err(PyStopIteration::new_err(())),
        }
    }

    /// Ends the loop early: outputs end (downstream sees the end of the
    /// stream after the frames published so far).
    fn close(&mut self, py: Python<'_>) {
        if let Some(prev) = self.current.take() {
            prev.borrow_mut(py).finish();
        }
        let mut guard = self.steps.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(mut s) = guard.take() {
            s.end();
        }
    }
}

/// One frame of every input and a slot of every output.
#[pyclass(module = "fastio._native", name = "Frame")]
pub(crate) struct PyFrame {
    step: Option<Step>,
}

impl PyFrame {
    fn step(&self) -> PyResult<&Step> {
        self.step.as_ref().ok_or_else(|| {
            PyRuntimeError::new_err("this frame is done: its outputs were published")
        })
    }

    /// Publishes the outputs written; input views keep their frames.
    fn finish(&mut self) {
        self.step = None;
    }
}

#[pymethods]
impl PyFrame {
    /// The source frame's number.
    #[getter]
    fn seq(&self) -> PyResult<u64> {
        Ok(self.step()?.seq())
    }

    /// When the source frame was taken (ns since the Unix epoch).
    #[getter]
    fn timestamp_ns(&self) -> PyResult<u64> {
        Ok(self.step()?.timestamp_ns())
    }

    /// A read-only numpy view of input `name` (zero copy); it keeps the
    /// frame until it is gone.
    fn input<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let frame = self.step()?.input_shared(name).map_err(err)?;
        let array = Frame::shared_array(frame).map_err(err)?;
        Buffer::new(array, true).to_numpy(py)
    }

    /// The element type of output `name` (its name, `float32`, ...).
    fn output_element(&self, name: &str) -> PyResult<String> {
        let slot = self.step()?.output(name).map_err(err)?;
        Ok(slot.element().name().to_owned())
    }

    /// Copies `data` (a buffer of unsigned bytes: the frame's elements in
    /// C order, as the wrapper `Frame.write` makes them) into output
    /// `name`'s slot, as a frame of `shape`: one copy, straight into shared
    /// memory.
    fn write_bytes(
        &self,
        py: Python<'_>,
        name: &str,
        data: &Bound<'_, PyAny>,
        shape: Vec<usize>,
    ) -> PyResult<()> {
        let view = pyo3::buffer::PyBuffer::<u8>::get(data)?;
        let mut slot = self.step()?.output(name).map_err(err)?;
        slot.set_shape(&shape).map_err(err)?;
        let out = slot.bytes_mut().map_err(err)?;
        if out.len() != view.len_bytes() {
            return Err(PyValueError::new_err(format!(
                "{} bytes for an output frame of shape {shape:?} ({} bytes)",
                view.len_bytes(),
                out.len()
            )));
        }
        view.copy_to_slice(py, out)?;
        Ok(())
    }

    /// Publishes this frame's outputs now (the loop does it at the next
    /// frame otherwise).
    fn done(&mut self) {
        self.finish();
    }

    /// The frame's number and its inputs' shapes.
    fn __repr__(&self) -> String {
        match &self.step {
            Some(s) => {
                let shapes: Vec<String> = s.inputs().map(|f| format!("{:?}", f.shape())).collect();
                format!("<fastio.Frame {} inputs {}>", s.seq(), shapes.join(", "))
            }
            None => "<fastio.Frame (done)>".to_owned(),
        }
    }
}
