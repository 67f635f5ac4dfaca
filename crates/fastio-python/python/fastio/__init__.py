"""fastio: typed N-dimensional data between processes, zero copies.

Clara's Python APIs under their names:

* ``FastIOContext`` / ``FastIOAllocation`` (seed 002): ``create``, ``get``,
  ``publish``, ``release``, ``free``, ``map``/``unmap``,
  ``set_type_and_dimensions``, ``map_as_numpy_array``, ``size``,
  ``element_type``, ``dimensions``;
* pipeline entries (seed 000), reached through ``Operator.from_env()``:
  ``name``, ``is_preallocated``, ``is_allocated``, ``access``, ``shape``,
  ``element_type``, ``dynamic_shape_indices``, ``is_dynamic``,
  ``update_shape`` (allocates once every dimension is set), ``get_bytes``,
  ``get_numpy``, ``set_values``, and our zero-copy ``map()``;
* streams without a pipeline: ``FastIOContext.create_stream`` gives a
  ``StreamProducer`` (``send`` copies a frame into the next free slot),
  ``FastIOContext.stream_consumer`` a ``StreamConsumer``
  (``for frame in consumer:``, ``frame.array()`` a read-only zero-copy view
  that keeps its frame).

An input's array is a numpy view of the shared memory with ``WRITEABLE``
cleared, over a read-only buffer in the context's ``PROT_READ`` view: numpy
refuses ``arr.flags.writeable = True`` and a write through a raw pointer
faults. The array's base keeps the mapping (and the reference) alive, so it
stays valid after every other fastio object is gone.
"""

from __future__ import annotations

import enum
from typing import Iterator, Optional, Sequence

import numpy as np

from . import _native, dtype, params
from ._native import (
    AccessError,
    Error,
    FastIOAllocation,
    MapConflictError,
    NotAllocatedError,
    NoSpaceError,
    NotFoundError,
    PoisonedError,
    StreamConsumer,
    StreamFrame,
)

__all__ = [
    "AccessError",
    "Entry",
    "Frame",
    "Frames",
    "Error",
    "FastIOAllocation",
    "FastIOContext",
    "IOAccess",
    "MapConflictError",
    "NotAllocatedError",
    "NoSpaceError",
    "NotFoundError",
    "Operator",
    "PoisonedError",
    "StreamConsumer",
    "StreamFrame",
    "StreamProducer",
    "dtype",
    "params",
]


class IOAccess(enum.Enum):
    """Access to an entry (Clara's ``IOAccess``)."""

    ReadOnly = 1
    ReadWrite = 2


def _dtype(element_type: str) -> np.dtype:
    """The numpy dtype of a datashape primitive name."""
    try:
        return np.dtype(element_type)
    except TypeError as e:  # pragma: no cover - every Clara primitive maps
        raise Error(f"no numpy dtype for {element_type!r}") from e


class FastIOContext:
    """A Fast I/O context (seed 002)."""

    def __init__(self, native: _native.Context):
        self._c = native

    @classmethod
    def new(cls, capacity: int = 1 << 30, anonymous: bool = False) -> "FastIOContext":
        """Creates a context with ``capacity`` bytes for allocations."""
        return cls(_native.Context.create(capacity, anonymous))

    @classmethod
    def attach(cls, handle: str) -> "FastIOContext":
        """Attaches to the context of ``handle``."""
        return cls(_native.Context.attach(handle))

    @classmethod
    def from_env(cls) -> "FastIOContext":
        """Attaches to the context named by ``FASTIO_CONTEXT``."""
        return cls(_native.Context.from_env())

    @property
    def handle(self) -> str:
        """The handle child processes attach with."""
        return self._c.handle

    def create(self, size: int) -> FastIOAllocation:
        """A new allocation of ``size`` bytes."""
        return self._c.create_allocation(size)

    def get(self, name: str) -> FastIOAllocation:
        """A new reference to the allocation published as ``name``."""
        return self._c.get(name)

    def wait_for(self, name: str, timeout: float) -> FastIOAllocation:
        """Waits up to ``timeout`` seconds for ``name``, then gets it."""
        return self._c.wait_for(name, timeout)

    def publish(self, allocation: FastIOAllocation, name: str) -> None:
        """``allocation.publish(name)``."""
        allocation.publish(name)

    def release(self, allocation: FastIOAllocation) -> None:
        """``allocation.release()``."""
        allocation.release()

    def free(self, allocation: FastIOAllocation) -> None:
        """``allocation.free()``."""
        allocation.free()

    def names(self) -> list[str]:
        """The published names."""
        return list(self._c.names())

    def create_stream(
        self,
        name: str,
        element: str,
        max_shape: Sequence[int],
        depth: int = 4,
        consumers: int = 1,
        overflow: str = "block",
    ) -> "StreamProducer":
        """Creates stream ``name``: frames of ``element`` (a primitive type
        name such as ``"float32"``) of at most ``max_shape``, ``depth``
        frames in flight, ``consumers`` consumers, ``overflow`` ``"block"``
        (a full stream makes ``send`` wait) or ``"drop-oldest"``. Returns
        its producer."""
        return StreamProducer(
            self._c.create_stream(
                name, element, [int(d) for d in max_shape], depth, consumers, overflow
            )
        )

    def stream_producer(self, name: str) -> "StreamProducer":
        """Takes over the producer of stream ``name`` (one whose producer
        is gone)."""
        return StreamProducer(self._c.stream_producer(name))

    def stream_consumer(self, name: str, index: int = 0) -> StreamConsumer:
        """Attaches as consumer ``index`` of stream ``name``:
        ``for frame in consumer:``, each frame's ``array()`` a read-only
        zero-copy view that keeps the frame while it lives."""
        return self._c.stream_consumer(name, index)

    def poison_stream(self, name: str) -> None:
        """Marks stream ``name`` failed: its consumers raise
        ``PoisonedError``."""
        self._c.poison_stream(name)

    def remove_stream(self, name: str) -> None:
        """Removes stream ``name``."""
        self._c.remove_stream(name)


class StreamProducer:
    """The producer of a stream. As a context manager it ends the stream
    on exit, or poisons it when the block raised."""

    def __init__(self, native: _native.StreamProducer):
        self._p = native

    element = property(lambda self: self._p.element, doc="The frames' element type.")
    max_shape = property(lambda self: self._p.max_shape, doc="The largest frame shape.")

    def send(self, data, shape: Optional[Sequence[int]] = None, timeout: Optional[float] = None) -> int:
        """Copies ``data`` (converted to the stream's element type) into the
        next free slot as a frame of ``shape`` (default: the data's) and
        publishes it; waits (without the GIL) up to ``timeout`` seconds for
        a free slot. Returns the frame's number."""
        arr = np.ascontiguousarray(np.asarray(data), dtype=_dtype(self._p.element))
        dims = [int(d) for d in (shape if shape is not None else arr.shape)]
        if arr.ndim == 0:
            arr = arr.reshape(1)
        return self._p.send_bytes(memoryview(arr.reshape(-1)).cast("B"), dims, timeout)

    def end(self) -> None:
        """Ends the stream: consumers stop after the frames sent so far."""
        self._p.end()

    def poison(self) -> None:
        """Marks the stream failed after the frames sent so far: consumers
        raise ``PoisonedError``."""
        self._p.poison()

    def __enter__(self) -> "StreamProducer":
        return self

    def __exit__(self, kind, value, tb) -> None:
        if kind is None:
            self.end()
        else:
            self.poison()


class Entry:
    """A pipeline entry of the running operator (seed 000)."""

    def __init__(self, native: _native.Entry):
        self._e = native

    name = property(lambda self: self._e.name, doc="``<operator>/<output>``.")
    is_preallocated = property(lambda self: self._e.is_preallocated)
    is_allocated = property(lambda self: self._e.is_allocated)
    is_dynamic = property(lambda self: self._e.is_dynamic)
    size_bytes = property(
        lambda self: self._e.size_bytes,
        doc="Bytes the current shape needs: for an allocated entry, the bytes ``map()`` gives.",
    )
    dynamic_shape_indices = property(lambda self: tuple(self._e.dynamic_shape_indices))

    @property
    def access(self) -> IOAccess:
        """``IOAccess.ReadWrite`` for outputs, ``ReadOnly`` for inputs."""
        return IOAccess.ReadWrite if self._e.writable else IOAccess.ReadOnly

    @property
    def shape(self) -> tuple:
        """The current shape (-1 in a dynamic dimension not set yet)."""
        dyn = set(self._e.dynamic_shape_indices)
        return tuple(-1 if (d == 0 and i in dyn) else d for i, d in enumerate(self._e.shape))

    @property
    def element_type(self) -> np.dtype:
        """The element type as a numpy dtype."""
        return _dtype(self._e.element_type)

    def update_shape(self, dimensions: Sequence[int], new_values: Sequence[int]) -> tuple:
        """Sets dynamic dimensions (others are ignored, as in Clara) and
        allocates once every dimension is set; returns the new shape.
        A pre-allocated entry's shape is fixed (seed 000): AccessError."""
        if self._e.is_preallocated:
            raise AccessError(f"{self.name} is pre-allocated: its shape cannot be updated")
        self._e.update_shape([int(d) for d in dimensions], [int(v) for v in new_values])
        if all(d > 0 for d in self._e.shape) and not self._e.is_allocated:
            self._e.allocate()
        return self.shape

    def map(self) -> np.ndarray:
        """Zero copy: a numpy view of the shared memory (read-only for
        inputs); it keeps the mapping alive."""
        return self._e.map().numpy()

    def __dlpack_device__(self) -> tuple[int, int]:
        """``(kDLCPU, 0)``."""
        return (1, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule over the entry's memory: versioned with
        READ_ONLY set for an input when ``max_version`` allows 1.x, legacy
        when no version is asked for (an input's pages are ``PROT_READ``
        either way)."""
        return self._e.map().__dlpack__(
            stream=stream, max_version=max_version, dl_device=dl_device, copy=copy
        )

    def get_bytes(self) -> bytes:
        """A read-only copy of the bytes."""
        return bytes(memoryview(self._e.map()))

    def get_numpy(self) -> np.ndarray:
        """A copy as a numpy array (changes do not reach shared memory)."""
        arr = self.map().copy()
        arr.flags.writeable = False
        return arr

    def set_values(self, new_values) -> None:
        """Writes an output: an ndarray is converted to the entry's element
        type first; any other buffer is copied as is."""
        if self.access is not IOAccess.ReadWrite:
            raise AccessError(f"{self.name} is an input: read-only")
        target = self.map()
        if isinstance(new_values, np.ndarray):
            target[...] = new_values.astype(target.dtype, copy=False).reshape(target.shape)
        else:
            raw = memoryview(new_values).cast("B")
            flat = target.reshape(-1).view(np.uint8)
            if len(raw) != flat.nbytes:
                raise Error(f"{len(raw)} bytes for an entry of {flat.nbytes}")
            flat[...] = np.frombuffer(raw, dtype=np.uint8)


class Operator:
    """The operator this process runs as, with its entries."""

    def __init__(self, native: _native.Operator):
        self._o = native

    @classmethod
    def from_env(cls) -> "Operator":
        """Attaches as the operator named in ``FASTIO_OPERATOR``."""
        return cls(_native.Operator.from_env())

    name = property(lambda self: self._o.name)

    @property
    def context(self) -> FastIOContext:
        return FastIOContext(self._o.context)

    @property
    def inputs(self) -> list[Entry]:
        return [Entry(e) for e in self._o.inputs]

    @property
    def outputs(self) -> list[Entry]:
        return [Entry(e) for e in self._o.outputs]

    def input(self, name: str) -> Entry:
        return Entry(self._o.input(name))

    def output(self, name: str) -> Entry:
        return Entry(self._o.output(name))

    def __iter__(self) -> Iterator["Frame"]:
        """The frames of a streaming job: ``for frame in op:`` (the same as
        ``for frame in op.frames:``). Each frame holds one frame of every
        input (aligned by source frame) and a slot of every output; its
        outputs are published when the loop moves on. Waiting for a frame
        releases the GIL. Raises ``Error`` when the job does not stream,
        ``PoisonedError`` when an input failed."""
        return iter(self.frames)

    @property
    def frames(self) -> "Frames":
        """The frame loop of a streaming job (``Error`` when the job does
        not stream): iterate it, and ``op.frames.close()`` ends the outputs
        on purpose (downstream sees the end of the stream after the frames
        published so far), where leaving the loop any other way fails them."""
        native = self._o.frames
        if native is None:
            raise Error("the job does not stream (no `streaming:` section)")
        return Frames(native)


class Frames:
    """A streaming operator's frame loop (``op.frames``)."""

    def __init__(self, native: _native.Frames):
        self._n = native

    def __iter__(self) -> Iterator["Frame"]:
        for native in self._n:
            yield Frame(native)

    def close(self) -> None:
        """Ends the loop before its inputs end: publishes the current
        frame's outputs, then ends every output, as at the end of the
        stream. A source stops its stream this way; the loop yields no more
        frames afterwards."""
        self._n.close()


class Frame:
    """One frame of a streaming operator's inputs and outputs."""

    def __init__(self, native: _native.Frame):
        self._f = native

    seq = property(lambda self: self._f.seq, doc="The source frame's number.")
    timestamp_ns = property(
        lambda self: self._f.timestamp_ns,
        doc="When the source frame was taken (ns since the Unix epoch).",
    )

    def input(self, name: str) -> np.ndarray:
        """A read-only numpy view of input ``name``, zero copy. The view
        keeps its frame: the slot goes back to the producer when every view
        of it is gone (a consumer may keep up to the stream's depth of
        frames; one more raises ``Error``, never a dangling view)."""
        return self._f.input(name)

    def write(self, name: str, data, shape: Optional[Sequence[int]] = None) -> None:
        """Copies ``data`` into output ``name``'s slot, converted to the
        output's element type, with ``shape`` (default: the data's)."""
        dtype = _dtype(self._f.output_element(name))
        arr = np.ascontiguousarray(np.asarray(data), dtype=dtype)
        dims = tuple(int(d) for d in (shape if shape is not None else arr.shape))
        if arr.ndim == 0:
            arr = arr.reshape(1)
        self._f.write_bytes(name, memoryview(arr.reshape(-1)).cast("B"), list(dims))

    def done(self) -> None:
        """Publishes the outputs now (the loop does it at the next frame)."""
        self._f.done()

    def __repr__(self) -> str:
        return repr(self._f)
