//! Streams for Python programs without a pipeline definition (the native
//! part of `FastIOContext.create_stream` / `stream_consumer`):
//!
//! * `StreamProducer.send_bytes(data, shape)` copies a frame into the next
//!   free slot and publishes it (one copy, straight into shared memory),
//!   waiting without the GIL while the stream is full;
//! * `for frame in consumer:` gives `StreamFrame`s; `frame.array()` is a
//!   read-only numpy view of the slot, zero copy, that **keeps its
//!   frame**: the slot goes back to the producer when the loop moved on
//!   and every view of it is gone. Holding more frames than the stream
//!   allows raises (`fastio.Error`, "still held"), never a reused slot.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dtype::Primitive;
use fastio::{Context, Frame, Overflow, StreamConsumer, StreamOptions, StreamProducer};
use pyo3::exceptions::{PyRuntimeError, PyStopIteration, PyValueError};
use pyo3::prelude::*;

use crate::buffer::Buffer;
use crate::err;

fn timeout(secs: Option<f64>) -> PyResult<Option<Duration>> {
    secs.map(|s| {
        Duration::try_from_secs_f64(s)
            .map_err(|_| PyValueError::new_err(format!("timeout {s} (seconds, not negative)")))
    })
    .transpose()
}

/// `Context.create_stream`: creates stream `name`; its producer.
pub(crate) fn create_stream(
    ctx: &Context,
    name: &str,
    element: &str,
    max_shape: &[usize],
    depth: usize,
    consumers: usize,
    overflow: &str,
) -> PyResult<PyStreamProducer> {
    let element = Primitive::from_name(element).ok_or_else(|| {
        PyValueError::new_err(format!("element type {element:?} is not a primitive type"))
    })?;
    let overflow = match overflow {
        "block" => Overflow::Block,
        "drop-oldest" => Overflow::DropOldest,
        other => {
            return Err(PyValueError::new_err(format!(
                "overflow {other:?} (\"block\" or \"drop-oldest\")"
            )));
        }
    };
    let opts = StreamOptions::new(element, max_shape)
        .depth(depth)
        .consumers(consumers)
        .overflow(overflow);
    let producer = ctx.create_stream(name, &opts).map_err(err)?;
    Ok(PyStreamProducer::new(producer))
}

/// `Context.stream_producer`: takes over the producer of stream `name`.
pub(crate) fn stream_producer(ctx: &Context, name: &str) -> PyResult<PyStreamProducer> {
    let producer = ctx.stream_producer(name).map_err(err)?;
    Ok(PyStreamProducer::new(producer))
}

/// `Context.stream_consumer`: attaches as consumer `index` of `name`.
pub(crate) fn stream_consumer(
    ctx: &Context,
    name: &str,
    index: usize,
) -> PyResult<PyStreamConsumer> {
    let consumer = ctx.stream_consumer(name, index).map_err(err)?;
    Ok(PyStreamConsumer {
        consumer: Arc::new(Mutex::new(consumer)),
        current: None,
    })
}

/// The producer of a stream.
#[pyclass(module = "fastio._native", name = "StreamProducer")]
pub(crate) struct PyStreamProducer {
    producer: Arc<Mutex<StreamProducer>>,
    element: String,
    max_shape: Vec<usize>,
}

impl PyStreamProducer {
    fn new(producer: StreamProducer) -> PyStreamProducer {
        PyStreamProducer {
            element: producer.element().name().to_owned(),
            max_shape: producer.max_shape().to_vec(),
            producer: Arc::new(Mutex::new(producer)),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[pymethods]
impl PyStreamProducer {
    /// The frames' element type (its name, `float32`, ...).
    #[getter]
    fn element(&self) -> String {
        self.element.clone()
    }

    /// The largest shape a frame may have.
    #[getter]
    fn max_shape(&self) -> Vec<usize> {
        self.max_shape.clone()
    }

    /// Copies `data` (unsigned bytes: the frame's elements in C order, as
    /// the wrapper `StreamProducer.send` makes them) into the next free
    /// slot as a frame of `shape`, and publishes it; waits (without the
    /// GIL) up to `timeout` seconds for a free slot. Returns the frame's
    /// number.
    #[pyo3(signature = (data, shape, timeout = None))]
    fn send_bytes(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        shape: Vec<usize>,
        timeout: Option<f64>,
    ) -> PyResult<u64> {
        let view = pyo3::buffer::PyBuffer::<u8>::get(data)?;
        let wait = self::timeout(timeout)?;
        let producer = &self.producer;
        py.detach(|| lock(producer).begin(wait)).map_err(err)?;
        let mut p = lock(&self.producer);
        p.set_shape(&shape).map_err(err)?;
        let out = p.bytes_mut().map_err(err)?;
        if out.len() != view.len_bytes() {
            return Err(PyValueError::new_err(format!(
                "{} bytes for a frame of shape {shape:?} ({} bytes)",
                view.len_bytes(),
                out.len()
            )));
        }
        view.copy_to_slice(py, out)?;
        let seq = p.next_seq();
        p.publish().map_err(err)?;
        Ok(seq)
    }

    /// Ends the stream: consumers stop after the frames sent so far.
    /// (Without the GIL: another thread may hold the producer while it
    /// waits for a slot that a consumer thread frees.)
    fn end(&self, py: Python<'_>) -> PyResult<()> {
        let producer = &self.producer;
        py.detach(|| lock(producer).end()).map_err(err)
    }

    /// Marks the stream failed after the frames sent so far: consumers
    /// raise `PoisonedError`.
    fn poison(&self, py: Python<'_>) {
        let producer = &self.producer;
        py.detach(|| lock(producer).poison());
    }
}

/// A consumer of a stream: iterate it for its frames.
#[pyclass(module = "fastio._native", name = "StreamConsumer")]
pub(crate) struct PyStreamConsumer {
    consumer: Arc<Mutex<StreamConsumer>>,
    current: Option<Py<PyStreamFrame>>,
}

impl PyStreamConsumer {
    /// Lets the previous frame go (its views keep it), then waits without
    /// the GIL.
    fn next_frame(
        &mut self,
        py: Python<'_>,
        wait: Option<Duration>,
    ) -> PyResult<Option<Py<PyStreamFrame>>> {
        if let Some(prev) = self.current.take() {
            prev.borrow_mut(py).frame = None;
        }
        let consumer = &self.consumer;
        let next = py.detach(|| lock(consumer).next(wait)).map_err(err)?;
        match next {
            Some(frame) => {
                let f = Py::new(
                    py,
                    PyStreamFrame {
                        frame: Some(Arc::new(frame)),
                    },
                )?;
                self.current = Some(f.clone_ref(py));
                Ok(Some(f))
            }
            None => Ok(None),
        }
    }
}

#[pymethods]
impl PyStreamConsumer {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next frame, waiting as long as it takes.
    fn __next__(&mut self, py: Python<'_>) -> PyResult<Py<PyStreamFrame>> {
        self.next_frame(py, None)?
            .ok_or_else(|| PyStopIteration::new_err(()))
    }

    /// The next frame, waiting up to `timeout` seconds (`fastio.Error` when
    /// none came); None after the last one.
    #[pyo3(signature = (timeout = None))]
    fn next(
        &mut self,
        py: Python<'_>,
        timeout: Option<f64>,
    ) -> PyResult<Option<Py<PyStreamFrame>>> {
        let wait = self::timeout(timeout)?;
        self.next_frame(py, wait)
    }

    /// Frames lost to `drop-oldest` so far.
    #[getter]
    fn dropped(&self) -> u64 {
        lock(&self.consumer).dropped()
    }
}

/// One received frame.
#[pyclass(module = "fastio._native", name = "StreamFrame")]
pub(crate) struct PyStreamFrame {
    frame: Option<Arc<Frame>>,
}

impl PyStreamFrame {
    fn frame(&self) -> PyResult<&Arc<Frame>> {
        self.frame.as_ref().ok_or_else(|| {
            PyRuntimeError::new_err("this frame is done: the loop moved on (its arrays stay valid)")
        })
    }
}

#[pymethods]
impl PyStreamFrame {
    /// The frame's number in its stream.
    #[getter]
    fn seq(&self) -> PyResult<u64> {
        Ok(self.frame()?.seq())
    }

    /// When its source frame was taken (ns since the Unix epoch).
    #[getter]
    fn timestamp_ns(&self) -> PyResult<u64> {
        Ok(self.frame()?.timestamp_ns())
    }

    /// Its shape.
    #[getter]
    fn shape(&self) -> PyResult<Vec<usize>> {
        Ok(self.frame()?.shape().to_vec())
    }

    /// A read-only numpy view of the frame (zero copy) that keeps it until
    /// the view is gone.
    fn array<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let array = Frame::shared_array(self.frame()?).map_err(err)?;
        Buffer::new(array, true).to_numpy(py)
    }

    /// Lets the frame go now (its arrays keep it while they live).
    fn release(&mut self) {
        self.frame = None;
    }

    fn __repr__(&self) -> String {
        match &self.frame {
            Some(f) => format!("<fastio.StreamFrame {} shape {:?}>", f.seq(), f.shape()),
            None => "<fastio.StreamFrame (done)>".to_owned(),
        }
    }
}
