"""Type stubs for ``fastio._native`` (crates/fastio-python/src/lib.rs).

Every class is a pyo3 class without a constructor and without the
``subclass`` option: instances come only from the static methods and
methods below (``Context()`` raises TypeError), and none can be
subclassed, hence ``@final``.
"""

import sys
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Literal, Self, final

import numpy as np

__all__ = [
    "params_load",
    "params_save",
    "dtype_parse",
    "ArrayBase",
    "Buffer",
    "Context",
    "FastIOAllocation",
    "Entry",
    "Operator",
    "Frames",
    "Frame",
    "StreamProducer",
    "StreamConsumer",
    "StreamFrame",
    "Error",
    "PoisonedError",
    "NotAllocatedError",
    "AccessError",
    "MapConflictError",
    "NotFoundError",
    "NoSpaceError",
]

class Error(Exception):
    """A fastio error."""

class PoisonedError(Error):
    """An input whose producer failed."""

class NotAllocatedError(Error):
    """An input its producer never allocated."""

class AccessError(Error):
    """An operation the entry's access forbids."""

class MapConflictError(Error):
    """Mapped elsewhere in a conflicting way."""

class NoSpaceError(Error):
    """Shared memory (/dev/shm) is full."""

class NotFoundError(Error):
    """No such name or entry."""

@final
class ArrayBase:
    """The base object of the numpy arrays over a ``Buffer``: it keeps the
    mapping alive and has no buffer protocol, so numpy refuses
    ``flags.writeable = True`` on a read-only array."""

@final
class Buffer:
    """A mapping of shared memory, exposed as numpy arrays, through the
    buffer protocol (typed: the element type's format, shape and strides,
    when the consumer asks for them) and through DLPack."""

    def __len__(self) -> int:
        """Bytes mapped."""

    @property
    def readonly(self) -> bool:
        """Whether the memory is read-only (an input)."""

    @property
    def mapped(self) -> bool:
        """Whether the mapping is still open."""

    @property
    def exports(self) -> int:
        """Live exports: numpy arrays, buffer views and DLPack capsules."""

    def numpy(self) -> np.ndarray[Any, Any]:
        """A numpy array over the mapping (zero copy; read-only unless the
        mapping is writable)."""

    def __dlpack_device__(self) -> tuple[int, int]:
        """``(kDLCPU, 0)``: shared memory is host memory."""

    def __dlpack__(
        self,
        *,
        stream: object | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> object:
        """A DLPack capsule over the mapping: versioned
        (``"dltensor_versioned"``, READ_ONLY set on read-only memory) when
        ``max_version`` allows 1.x, legacy (``"dltensor"``) when no version
        is asked for. ``copy=True`` exports a private copy."""

    def unmap(self) -> None:
        """Unmaps now; raises BufferError while exports of it exist."""

    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        _t: type[BaseException] | None,
        _v: BaseException | None,
        _tb: TracebackType | None,
    ) -> Literal[False]:
        """Unmaps (raises BufferError while views exist); never suppresses
        the exception."""
    # PEP 688: the slots behind the buffer protocol (exposed as Python
    # methods from Python 3.12). A writable request on a read-only buffer,
    # or any request after ``unmap``, raises BufferError.
    if sys.version_info >= (3, 12):
        def __buffer__(self, flags: int, /) -> memoryview: ...
        def __release_buffer__(self, buffer: memoryview, /) -> None: ...

@final
class Context:
    """A Fast I/O context."""

    @staticmethod
    def create(capacity: int, anonymous: bool = False) -> Context:
        """Creates a context with ``capacity`` bytes for allocations."""

    @staticmethod
    def attach(handle: str) -> Context:
        """Attaches to the context of ``handle`` (a name, or ``fd:<n>``)."""

    @staticmethod
    def from_env() -> Context:
        """Attaches to the context named by ``FASTIO_CONTEXT``."""

    @property
    def handle(self) -> str:
        """The handle child processes attach with."""

    def create_allocation(self, size: int) -> FastIOAllocation:
        """A new allocation of ``size`` bytes."""

    def get(self, name: str) -> FastIOAllocation:
        """A new reference to the allocation published as ``name``."""

    def wait_for(self, name: str, timeout: float) -> FastIOAllocation:
        """Waits up to ``timeout`` seconds for ``name``, then gets it
        (releases the GIL while waiting; ValueError for a timeout that is
        not a finite duration)."""

    def names(self) -> list[str]:
        """The published names."""

    def create_stream(
        self,
        name: str,
        element: str,
        max_shape: list[int],
        depth: int = 4,
        consumers: int = 1,
        overflow: str = "block",
    ) -> StreamProducer:
        """Creates stream ``name`` and returns its producer."""

    def stream_producer(self, name: str) -> StreamProducer:
        """Takes over the producer of stream ``name``."""

    def stream_consumer(self, name: str, index: int = 0) -> StreamConsumer:
        """Attaches as consumer ``index`` of stream ``name``."""

    def poison_stream(self, name: str) -> None:
        """Marks stream ``name`` failed."""

    def remove_stream(self, name: str) -> None:
        """Removes stream ``name``."""

@final
class FastIOAllocation:
    """A local reference to Fast I/O memory (seed 002). After ``release``
    or ``free`` every member raises Error (``release`` again is a no-op).
    The buffer protocol and DLPack export the open mapping, or a read-only
    mapping held by the export; a writable request needs
    ``map(writable=True)`` first."""

    @property
    def size(self) -> int:
        """Size in bytes."""

    @property
    def element_type(self) -> np.dtype[Any]:
        """The element type as a numpy dtype (default ``uint8``)."""

    @property
    def dimensions(self) -> list[int]:
        """The dimensions (default ``[size]``)."""

    def set_type_and_dimensions(self, element_type: object, dimensions: Sequence[int]) -> None:
        """Describes the memory as ``dimensions`` of ``element_type``
        (datashape text such as ``"float32"``, or a numpy dtype); the byte
        size must match."""

    def publish(self, name: str) -> None:
        """Publishes it under ``name``."""

    def map(self, writable: bool = True) -> memoryview:
        """Maps the memory (read-write and exclusive across processes
        unless ``writable`` is false) and returns it as a memoryview;
        ``unmap`` ends it. MapConflictError when already mapped."""

    def mapping(self, writable: bool = True) -> Buffer:
        """A new mapping as a ``Buffer``, for ``with``: it unmaps on exit
        (and raises there while views of it are alive). Independent of
        ``map()``."""

    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        _t: type[BaseException] | None,
        _v: BaseException | None,
        _tb: TracebackType | None,
    ) -> Literal[False]:
        """Unmaps and releases the reference; never suppresses the
        exception."""

    @property
    def buffer(self) -> memoryview | None:
        """The open mapping as a memoryview, or None."""

    def unmap(self) -> None:
        """Unmaps; raises BufferError while views of the mapping are alive."""

    def map_as_numpy_array(self, writable: bool = True) -> np.ndarray[Any, Any]:
        """A numpy array over the memory itself, of the allocation's type
        and dimensions (a new mapping that the array keeps alive;
        read-only unless ``writable``)."""

    def release(self) -> None:
        """Drops this reference (mappings and arrays made from it stay
        valid while they live)."""

    def free(self) -> None:
        """Marks the memory for deletion and drops this reference."""

    def __dlpack_device__(self) -> tuple[int, int]:
        """``(kDLCPU, 0)``."""

    def __dlpack__(
        self,
        *,
        stream: object | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> object:
        """A DLPack capsule of the open mapping, or of a read-only mapping
        the capsule holds (see ``Buffer.__dlpack__``)."""
    if sys.version_info >= (3, 12):
        def __buffer__(self, flags: int, /) -> memoryview: ...

@final
class Entry:
    """An entry of the running operator (seed 000's vocabulary)."""

    @property
    def name(self) -> str:
        """``<operator>/<output>``."""

    @property
    def writable(self) -> bool:
        """True for outputs (read-write), false for inputs (read-only)."""

    @property
    def shape(self) -> list[int]:
        """The current shape (0 in a dynamic dimension not set yet)."""

    @property
    def element_type(self) -> str:
        """The element type's name."""

    @property
    def dynamic_shape_indices(self) -> list[int]:
        """The dynamic dimensions."""

    @property
    def is_dynamic(self) -> bool:
        """Whether some dimension is dynamic."""

    @property
    def is_preallocated(self) -> bool:
        """Whether the driver allocated it before the operator started."""

    @property
    def is_allocated(self) -> bool:
        """Whether an allocation exists."""

    @property
    def size_bytes(self) -> int:
        """Bytes the current shape needs."""

    def update_shape(self, dimensions: Sequence[int], new_values: Sequence[int]) -> list[int]:
        """Sets dynamic dimensions; returns the indices it ignored."""

    def allocate(self) -> None:
        """Allocates (or reallocates, erasing) the output."""

    def map(self) -> Buffer:
        """Maps it: an input read-only (``PROT_READ``), an output
        writable."""

@final
class Operator:
    """The operator this process runs as."""

    @staticmethod
    def from_env() -> Operator:
        """Attaches as the operator named in ``FASTIO_OPERATOR``."""

    @property
    def name(self) -> str:
        """Its name."""

    @property
    def context(self) -> Context:
        """The job's context."""

    @property
    def inputs(self) -> list[Entry]:
        """The inputs, in definition order."""

    @property
    def outputs(self) -> list[Entry]:
        """The outputs, in definition order."""

    def input(self, name: str) -> Entry:
        """The input named ``name`` (local name or ``<operator>/<output>``);
        NotFoundError if none."""

    def output(self, name: str) -> Entry:
        """The output named ``name``; NotFoundError if none."""

    @property
    def frames(self) -> Frames | None:
        """The frame loop of a streaming job; ``None`` when the job does
        not stream."""

@final
class Frames:
    """The frames of a streaming operator."""

    def __iter__(self) -> Frames: ...
    def __next__(self) -> Frame:
        """Publishes the previous frame's outputs, then waits (without
        the GIL) for the next frame of every input."""

    def close(self) -> None:
        """Ends the loop early: outputs end."""

@final
class Frame:
    """One frame of every input and a slot of every output."""

    @property
    def seq(self) -> int:
        """The source frame's number."""

    @property
    def timestamp_ns(self) -> int:
        """When the source frame was taken (ns since the Unix epoch)."""

    def input(self, name: str) -> np.ndarray[Any, Any]:
        """A read-only numpy view of input ``name`` (zero copy); it keeps
        the frame until it is gone."""

    def output_element(self, name: str) -> str:
        """The element type of output ``name``."""

    def write_bytes(self, name: str, data: Buffer | memoryview | bytes, shape: list[int]) -> None:
        """Copies ``data`` (bytes of the frame's elements in C order) into
        output ``name``'s slot as a frame of ``shape``."""

    def done(self) -> None:
        """Publishes this frame's outputs now."""

@final
class StreamProducer:
    """The producer of a stream."""

    @property
    def element(self) -> str:
        """The frames' element type."""

    @property
    def max_shape(self) -> list[int]:
        """The largest shape a frame may have."""

    def send_bytes(
        self, data: Buffer | memoryview | bytes, shape: list[int], timeout: float | None = None
    ) -> int:
        """Copies ``data`` into the next free slot as a frame of ``shape``
        and publishes it (waits without the GIL); the frame's number."""

    def end(self) -> None:
        """Ends the stream."""

    def poison(self) -> None:
        """Marks the stream failed after the frames sent so far."""

@final
class StreamConsumer:
    """A consumer of a stream."""

    def __iter__(self) -> StreamConsumer: ...
    def __next__(self) -> StreamFrame:
        """The next frame (waits without the GIL)."""

    def next(self, timeout: float | None = None) -> StreamFrame | None:
        """The next frame, waiting up to ``timeout`` seconds; None after
        the last one."""

    @property
    def dropped(self) -> int:
        """Frames lost to ``drop-oldest`` so far."""

@final
class StreamFrame:
    """One received frame."""

    @property
    def seq(self) -> int:
        """The frame's number in its stream."""

    @property
    def timestamp_ns(self) -> int:
        """When its source frame was taken (ns since the Unix epoch)."""

    @property
    def shape(self) -> list[int]:
        """Its shape."""

    def array(self) -> np.ndarray[Any, Any]:
        """A read-only numpy view (zero copy) that keeps the frame."""

    def release(self) -> None:
        """Lets the frame go now (its arrays keep it while they live)."""

def params_load(path: str) -> list[tuple[str, Buffer, str, list[int]]]:
    """``(name, buffer, element type, shape)`` of every tensor of a params
    file, in file order: zero copy over one memory map (each buffer
    read-only)."""

def params_save(path: str, tensors: Sequence[tuple[str, str, Sequence[int], bytes]]) -> int:
    """Writes ``(name, element type, shape, bytes)`` tensors as a params
    file (TVM's ``save_param_dict`` layout), atomically; returns its size."""

def dtype_parse(text: str) -> tuple[str, str]:
    """The canonical datashape text and the numpy dtype string (``"<f4"``)
    of a datashape type (for scalar types)."""
