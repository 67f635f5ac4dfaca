"""The `fastio` Python package: contexts, allocations, zero-copy numpy views
that can neither dangle nor write inputs, and Python operators in a
pipeline run by `fastio run` beside Rust operators.

Run by `cargo xtask python` (which builds the package with maturin into a
virtual environment and sets FASTIO_CLI and FASTIO_TESTOP to the built
`fastio` and `fio-testop` binaries).
"""

import ctypes
import gc
import io
import json
import os
import pickle
import subprocess
import sys
import textwrap
import time
import zlib

import numpy as np
import pytest

import fastio


@pytest.fixture
def ctx():
    return fastio.FastIOContext.new(1 << 20)


def published(ctx, name="x"):
    a = ctx.create(24)
    a.set_type_and_dimensions(np.float32, [2, 3])
    arr = a.map_as_numpy_array()
    arr[...] = np.arange(6, dtype=np.float32).reshape(2, 3) * 1.5
    del arr
    a.publish(name)
    return a


def test_allocation_metadata_and_numpy_round_trip(ctx):
    a = published(ctx)
    assert (a.size, a.dimensions, a.element_type) == (24, [2, 3], np.float32)
    b = ctx.get("x")
    assert b.dimensions == [2, 3]
    v = b.map_as_numpy_array(writable=False)
    assert v.shape == (2, 3) and v.dtype == np.float32
    assert v[1, 2] == 7.5
    assert "x" in ctx.names()
    with pytest.raises(fastio.Error):
        a.set_type_and_dimensions(np.float64, [2, 3])  # 48 bytes != 24


def test_read_only_views_refuse_writes(ctx):
    published(ctx)
    v = ctx.get("x").map_as_numpy_array(writable=False)
    assert not v.flags.writeable
    with pytest.raises(ValueError):
        v[0, 0] = 1
    with pytest.raises(ValueError):
        v.flags.writeable = True


def test_views_keep_their_mapping_alive_after_everything_else_is_gone():
    c = fastio.FastIOContext.new(1 << 20)
    published(c)
    v = c.get("x").map_as_numpy_array(writable=False)
    expected = np.arange(6, dtype=np.float32).reshape(2, 3) * 1.5
    del c
    gc.collect()
    assert np.array_equal(v, expected)
    w = v[1:]  # a view of the view: still the same mapping
    del v
    gc.collect()
    assert np.array_equal(w, expected[1:])


def test_unmap_while_views_live_raises_and_never_dangles(ctx):
    a = published(ctx)
    mv = a.map(writable=False)
    arr = np.frombuffer(a.buffer, dtype=np.float32)
    with pytest.raises(BufferError):
        a.unmap()
    del arr, mv
    gc.collect()
    a.unmap()
    assert a.buffer is None


def test_unmap_raises_buffer_error_until_the_memoryview_of_map_is_released(ctx):
    """Issue 28: `map()` returns a memoryview; `unmap()` raises BufferError
    while it lives (nothing changes) and works once it is released."""
    a = ctx.create(24)
    m = a.map()
    assert isinstance(m, memoryview) and len(m) == 24
    m[0] = 7
    with pytest.raises(BufferError):
        a.unmap()
    assert m[0] == 7                      # still mapped, still usable
    m.release()
    a.unmap()
    with a.map() as m2:
        assert m2[0] == 7
    a.unmap()                             # released by `with`


def test_mappings_and_allocations_are_context_managers(ctx):
    published(ctx)
    with ctx.get("x") as b:
        with b.mapping(writable=False) as m:
            arr = m.numpy()
            assert arr.sum() == 22.5 and m.exports == 1
            with pytest.raises(BufferError):
                m.__exit__(None, None, None)  # a view is alive: no unmap
            del arr
        assert not m.mapped
        mv = b.map(writable=False)
        del mv
    with pytest.raises(fastio.Error, match="released"):
        b.size  # left `with`: unmapped and released
    with ctx.get("x") as c:
        w = c.mapping()  # writable, exclusive, until unmapped
        with pytest.raises(fastio.MapConflictError):
            c.mapping()
        w.unmap()
        c.mapping(writable=False).unmap()


def test_a_writer_excludes_readers_and_errors_are_typed(ctx):
    a = published(ctx)
    w = a.map_as_numpy_array()  # writable, exclusive
    with pytest.raises(fastio.MapConflictError):
        ctx.get("x").map_as_numpy_array(writable=False)
    del w
    gc.collect()
    assert ctx.get("x").map_as_numpy_array(writable=False)[0, 1] == 1.5
    with pytest.raises(fastio.NotFoundError) as missing:
        ctx.get("nope")
    # Errors name their public module and survive pickling (as across
    # multiprocessing) with type and message intact.
    assert fastio.NotFoundError.__module__ == "fastio"
    again = pickle.loads(pickle.dumps(missing.value))
    assert type(again) is fastio.NotFoundError
    assert str(again) == str(missing.value) and "nope" in str(again)
    assert issubclass(fastio.PoisonedError, fastio.Error)
    with pytest.raises(fastio.Error):
        ctx.wait_for("nope", 0.01)
    a.free()
    with pytest.raises(fastio.NotFoundError):
        ctx.get("x")


def test_a_write_through_a_raw_pointer_to_an_input_faults(ctx):
    published(ctx)
    code = textwrap.dedent(
        f"""
        import ctypes, fastio
        ctx = fastio.FastIOContext.attach({ctx.handle!r})
        v = ctx.get("x").map_as_numpy_array(writable=False)
        ctypes.memset(v.ctypes.data, 0x41, 4)
        print("wrote")
        """
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == -11, (p.returncode, p.stdout, p.stderr)
    assert "wrote" not in p.stdout
    v = ctx.get("x").map_as_numpy_array(writable=False)
    assert v[0, 0] == 0.0  # untouched


PYTHON_OPERATOR = """
import sys
import numpy as np
import fastio

op = fastio.Operator.from_env()
v = op.input("v")
assert v.access is fastio.IOAccess.ReadOnly
data = v.map()                      # zero copy, read-only
assert not data.flags.writeable
via_dlpack = np.from_dlpack(v)      # our own versioned capsule: READ_ONLY
assert not via_dlpack.flags.writeable
assert via_dlpack.ctypes.data == data.ctypes.data and np.array_equal(via_dlpack, data)
assert v.get_bytes() == data.tobytes()
w = op.output("w")
assert w.access is fastio.IOAccess.ReadWrite and w.is_dynamic
assert w.shape == (-1,)
assert w.update_shape([0], [data.size]) == (data.size,)   # allocates
w.set_values(data.reshape(-1) * 2)
z = op.output("z")                  # static: the driver allocated it
assert z.is_preallocated and z.is_allocated
try:
    z.update_shape([0], [8])
    sys.exit("updated the shape of a pre-allocated entry")
except fastio.AccessError as e:
    assert "pre-allocated" in str(e), e
print("doubled", data.size, "values")
"""


def compile_c_operator(tmp_path, name="summer"):
    """Compiles the C operator `tests/c/<name>.c` of the C API."""
    capi = os.environ["FASTIO_CAPI_DIR"]
    exe = tmp_path / name
    subprocess.run(
        ["cc", "-std=c11", "-Wall", "-Werror", "-I", f"{capi}/include", "-I", f"{capi}/tests/c",
         f"{capi}/tests/c/{name}.c", os.environ["FASTIO_CAPI_LIB"],
         "-lpthread", "-ldl", "-lm", "-lrt", "-lutil", "-o", str(exe)],
        check=True,
    )
    return exe


def compile_cpp_operator(tmp_path, name="scale"):
    """Compiles README's C++ operator `examples/cpp/<name>.cpp` over the
    C++ header, with the C API's static library."""
    capi = os.environ["FASTIO_CAPI_DIR"]
    exe = tmp_path / f"cpp-{name}"
    subprocess.run(
        ["c++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-I", f"{capi}/include",
         f"{capi}/../../examples/cpp/{name}.cpp", os.environ["FASTIO_CAPI_LIB"],
         "-lpthread", "-ldl", "-lm", "-lrt", "-lutil", "-o", str(exe)],
        check=True,
    )
    return exe


def test_rust_python_c_and_cpp_operators_in_one_pipeline(tmp_path):
    cli, testop = os.environ.get("FASTIO_CLI"), os.environ.get("FASTIO_TESTOP")
    if not (cli and testop and os.environ.get("FASTIO_CAPI_LIB")):
        pytest.skip("binaries not given (run through cargo xtask python)")
    c_op = compile_c_operator(tmp_path)
    cpp_op = compile_cpp_operator(tmp_path)
    (tmp_path / "double.py").write_text(PYTHON_OPERATOR)
    yaml = f"""
api-version: 0.5.0
name: four-languages
operators:
- name: make
  container: {{image: rust, command: [{testop}, fill, v, '1.5']}}
  output: [{{name: v, type: array, element-type: float32, shape: [2, 4]}}]
- name: double
  container: {{image: python, command: [{sys.executable}, ./double.py]}}
  input: [{{from: make, name: v, type: array, element-type: float32, shape: [2, 4]}}]
  output:
  - {{name: w, type: array, element-type: float32, shape: [-1]}}
  - {{name: z, type: array, element-type: uint8, shape: [4]}}
- name: scale
  container: {{image: cpp, command: [{cpp_op}]}}
  input: [{{from: make, name: v, type: array, element-type: float32, shape: [2, 4]}}]
  output: [{{name: w, type: array, element-type: float32, shape: [-1]}}]
- name: total
  container: {{image: rust, command: [{testop}, sum, s, w]}}
  input: [{{from: double, name: w, type: array, element-type: float32, shape: [-1]}}]
  output: [{{name: s, type: float64}}]
- name: c-total
  container: {{image: c, command: [{c_op}]}}
  input: [{{from: double, name: w, type: array, element-type: float32, shape: [-1]}}]
- name: cpp-total
  container: {{image: rust, command: [{testop}, sum, s, w]}}
  input: [{{from: scale, name: w, type: array, element-type: float32, shape: [-1]}}]
  output: [{{name: s, type: float64}}]
"""
    (tmp_path / "p.yaml").write_text(yaml)
    p = subprocess.run(
        [cli, "run", str(tmp_path / "p.yaml"), "--report", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, (p.stdout, p.stderr)
    # With --report json, stdout is the report alone; lines go to stderr.
    assert "[double] doubled 8 values" in p.stderr
    assert "[scale] scaled 8 values" in p.stderr
    assert "[total] sum 24" in p.stderr
    assert "[c-total] c sum 24" in p.stderr
    assert "[cpp-total] sum 24" in p.stderr
    report = json.loads(p.stdout)
    assert report["succeeded"]


PYTHON_INPUTS_OPERATOR = """
import numpy as np
import fastio

op = fastio.Operator.from_env()
expect = {
    "s": ((2, 3), np.float32, 24, True),
    "d": ((3, 5), np.int32, 60, False),
    "t": ((14,), np.uint8, 14, False),
    "k": ((1,), np.float64, 8, True),
}
for name, (shape, dtype, size, pre) in expect.items():
    e = op.input(name)
    got = (e.shape, e.element_type, e.size_bytes, e.is_allocated, e.is_preallocated)
    assert got == (shape, np.dtype(dtype), size, True, pre), (name, got)
    data = e.map()
    assert data.nbytes == size and data.shape == shape, (name, data.shape)
    if name != "t":
        seed = {"s": 1, "d": 2, "k": 3}[name]  # entries_producer.c's fill
        want = ((np.arange(size) * 7 + seed) % 256).astype(np.uint8)
        assert np.array_equal(data.view(np.uint8).reshape(-1), want), name
assert op.input("t").get_bytes() == b"hello, entries"
print("python saw every input as published")
"""


def test_inputs_of_every_kind_are_what_a_c_producer_published(tmp_path):
    """Issue 22: a Python consumer of a C producer's static, dynamic, string
    and scalar outputs sees their published shape, type, size and
    pre-allocation."""
    cli = os.environ.get("FASTIO_CLI")
    if not (cli and os.environ.get("FASTIO_CAPI_LIB")):
        pytest.skip("binaries not given (run through cargo xtask python)")
    maker = compile_c_operator(tmp_path, "entries_producer")
    (tmp_path / "inputs.py").write_text(PYTHON_INPUTS_OPERATOR)
    yaml = f"""
api-version: 0.5.0
name: python-inputs
operators:
- name: maker
  container: {{image: c, command: [{maker}]}}
  output:
  - {{name: s, type: array, element-type: float32, shape: [2, 3]}}
  - {{name: d, type: array, element-type: int32, shape: [3, -1]}}
  - {{name: t, type: string}}
  - {{name: k, type: float64}}
- name: taker
  container: {{image: python, command: [{sys.executable}, ./inputs.py]}}
  input:
  - {{from: maker, name: s, type: array, element-type: float32, shape: [2, 3]}}
  - {{from: maker, name: d, type: array, element-type: int32, shape: [3, -1]}}
  - {{from: maker, name: t, type: string}}
  - {{from: maker, name: k, type: float64}}
"""
    (tmp_path / "p.yaml").write_text(yaml)
    p = subprocess.run([cli, "run", str(tmp_path / "p.yaml")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert "[taker] python saw every input as published" in p.stdout


def test_params_save_is_byte_identical_to_tvm_and_load_is_zero_copy(tmp_path):
    import tvm  # installed by `cargo xtask python`

    arrays = {
        "dense/w": np.arange(12, dtype=np.float32).reshape(3, 4) * 0.25,
        "bias": np.array([1, -2, 3], dtype=np.int8),
        "scale": np.array(2.5, dtype=np.float64),
        "名前": np.zeros((2, 0), dtype=np.int32),
    }
    ours = tmp_path / "ours.params"
    size = fastio.params.save(ours, arrays)
    theirs = bytes(tvm.runtime.save_param_dict(arrays))
    assert ours.read_bytes() == theirs and size == len(theirs)
    (tmp_path / "theirs.params").write_bytes(theirs)
    loaded = fastio.params.load(tmp_path / "theirs.params")
    assert list(loaded) == list(arrays)
    for name, value in arrays.items():
        got = loaded[name]
        assert got.dtype == value.dtype and got.shape == value.shape
        assert np.array_equal(got, value)
        assert not got.flags.writeable
    # TVM's own loader cannot read an empty tensor it wrote (its reader
    # treats a 0-byte read as a failure), so it loads a file without one.
    nonempty = {k: v for k, v in arrays.items() if v.size}
    fastio.params.save(tmp_path / "nonempty.params", nonempty)
    back = tvm.runtime.load_param_dict_from_file(str(tmp_path / "nonempty.params"))
    assert list(back.keys()) == list(nonempty)
    for name, value in nonempty.items():
        assert np.array_equal(back[name].numpy(), value)


RSS_CHILD = """
import sys, numpy as np, fastio
def rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
before = rss()
p = fastio.params.load(sys.argv[1])
after_load = rss()
total = sum(int(a.sum(dtype=np.float64)) for a in p.values())
after_touch = rss()
print(before, after_load, after_touch, total)
"""


def test_loading_a_large_params_file_maps_it_without_reading_it(tmp_path):
    path = tmp_path / "big.params"
    n = 1 << 30  # bytes of data: 1 GiB of float32
    big = np.ones(n // 4, dtype=np.float32)
    fastio.params.save(path, {"big": big})
    del big
    p = subprocess.run(
        [sys.executable, "-c", RSS_CHILD, str(path)], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    before, after_load, after_touch, total = map(int, p.stdout.split())
    assert total == n // 4
    assert after_load - before < 0.05 * n, (before, after_load)
    assert after_touch - before > 0.9 * n, "touching the pages reads the file"
    path.unlink()


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


def capsule_name(capsule):
    get = ctypes.pythonapi.PyCapsule_GetName
    get.restype = ctypes.c_char_p
    get.argtypes = [ctypes.py_object]
    return get(capsule).decode()


def capsule_tensor(capsule):
    """The managed tensor in a DLPack capsule (read, not taken)."""
    name = capsule_name(capsule)
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    kind = DLManagedTensorVersioned if name == "dltensor_versioned" else DLManagedTensor
    return kind.from_address(get(capsule, name.encode()))


def describe(t: DLTensor):
    shape = [t.shape[i] for i in range(t.ndim)]
    strides = [t.strides[i] for i in range(t.ndim)]
    dt = (t.dtype.code, t.dtype.bits, t.dtype.lanes)
    return t.data, (t.device.device_type, t.device.device_id), shape, strides, dt


READ_ONLY, IS_COPIED = 1, 2


def test_dlpack_of_an_input_is_versioned_read_only_or_legacy_and_keeps_its_mapping(ctx):
    published(ctx)
    b = ctx.get("x")
    view = b.map(writable=False)
    address = np.frombuffer(view, dtype=np.uint8).ctypes.data
    assert b.__dlpack_device__() == (1, 0)  # kDLCPU
    cap = b.__dlpack__(max_version=(1, 1))
    assert capsule_name(cap) == "dltensor_versioned"
    m = capsule_tensor(cap)
    assert (m.major, m.flags & READ_ONLY, m.flags & IS_COPIED) == (1, READ_ONLY, 0)
    assert describe(m.dl_tensor) == (address, (1, 0), [2, 3], [3, 1], (2, 32, 1))
    # No version asked for: a legacy capsule over the same bytes.
    legacy = b.__dlpack__()
    assert capsule_name(legacy) == "dltensor"
    assert describe(capsule_tensor(legacy).dl_tensor) == describe(m.dl_tensor)
    # Untaken capsules are exports: the mapping cannot go while they live.
    del view
    gc.collect()
    with pytest.raises(BufferError):
        b.unmap()
    del cap, legacy, m
    gc.collect()
    b.unmap()
    # numpy takes our capsule: zero copy, read-only, alive after the rest.
    arr = np.from_dlpack(b)
    assert not arr.flags.writeable and arr.shape == (2, 3)
    with pytest.raises(ValueError):
        arr.flags.writeable = True
    del b, ctx
    gc.collect()
    assert np.array_equal(arr, np.arange(6, dtype=np.float32).reshape(2, 3) * 1.5)


def test_jax_takes_an_input_zero_copy_and_never_writable(ctx):
    """Issue 32: JAX (CPU) as a DLPack consumer of an input's read-only
    mapping. JAX asks for a legacy capsule (no flags to carry READ_ONLY)
    and aliases the memory as an immutable jax.Array: zero copy, no
    writable path to it (numpy views of it are read-only), alive after
    our handles are gone."""
    import jax.numpy as jnp  # installed by `cargo xtask python`

    published(ctx)
    b = ctx.get("x")
    view = b.map(writable=False)
    address = np.frombuffer(view, dtype=np.uint8).ctypes.data
    del view
    b.unmap()
    j = jnp.from_dlpack(b)
    assert j.dtype == jnp.float32 and j.shape == (2, 3)
    assert j.unsafe_buffer_pointer() == address  # the input's own memory
    host = np.asarray(j)
    assert not host.flags.writeable
    with pytest.raises(ValueError):
        host[0, 0] = 9.0
    with pytest.raises(ValueError):
        host.flags.writeable = True
    del host, b, ctx
    gc.collect()
    assert np.array_equal(np.asarray(j), np.arange(6, dtype=np.float32).reshape(2, 3) * 1.5)
    assert float(jnp.sum(j * 2)) == 45.0


def test_dlpack_copies_on_request_and_refuses_other_devices_and_streams(ctx):
    a = published(ctx)
    a.map()  # writable
    zero_copy = a.__dlpack__(max_version=(1, 0))
    m = capsule_tensor(zero_copy)
    assert m.flags == 0  # writable memory, not a copy
    assert m.dl_tensor.data == np.frombuffer(a.buffer, dtype=np.uint8).ctypes.data
    cap = a.__dlpack__(max_version=(1, 0), copy=True)
    c = capsule_tensor(cap)
    assert c.flags == IS_COPIED and c.dl_tensor.data != m.dl_tensor.data
    copied = np.from_dlpack(a, copy=True)
    copied[0, 0] = 99.0
    assert np.asarray(a)[0, 0] == 0.0
    shared = np.from_dlpack(a)
    assert shared.flags.writeable
    shared[0, 0] = 5.0
    assert np.asarray(a)[0, 0] == 5.0
    with pytest.raises(BufferError):
        a.__dlpack__(dl_device=(2, 0))
    with pytest.raises(ValueError):
        a.__dlpack__(stream=1)
    del shared, cap, zero_copy, m, c
    gc.collect()
    a.unmap()


def test_an_allocation_speaks_the_buffer_protocol_typed(ctx):
    a = published(ctx)
    b = ctx.get("x")
    mv = memoryview(b)  # not mapped: a read-only mapping the view holds
    assert (mv.format, mv.shape, mv.strides, mv.itemsize) == ("f", (2, 3), (12, 4), 4)
    assert mv.readonly and mv.tolist()[1] == [4.5, 6.0, 7.5]
    # A writable request is refused (Python reports it as TypeError)...
    with pytest.raises(TypeError, match="read-write"):
        io.BytesIO(bytes(24)).readinto(b)
    # ...and a consumer that checks the view's flag sees read-only.
    with pytest.raises(TypeError, match="not writable"):
        ctypes.c_char.from_buffer(b)
    arr = np.asarray(b)
    assert arr.dtype == np.float32 and not arr.flags.writeable and arr[1, 2] == 7.5
    del mv, arr
    gc.collect()
    # Mapped writable, the allocation exports writable memory.
    a.map()
    w = memoryview(a)
    assert not w.readonly and w.format == "f"
    ctypes.c_float.from_buffer(a).value = -1.0
    assert w[0, 0] == -1.0
    del w
    gc.collect()
    a.unmap()
    assert np.asarray(b)[0, 0] == -1.0


PYTHON_STAGE = """
import threading, time
import numpy as np
import fastio

op = fastio.Operator.from_env()
ticks = [0]
stop = threading.Event()

def spin():
    while not stop.is_set():
        ticks[0] += 1
        time.sleep(0.0005)

t = threading.Thread(target=spin)
t.start()
kept = []
n = 0
for frame in op:
    v = frame.input("v")
    assert not v.flags.writeable and v.dtype == np.uint32
    try:
        v[0, 0] = 1
        raise SystemExit("wrote into an input frame")
    except ValueError:
        pass
    frame.write("w", v + 1)          # one stage further (fio-streamop's rule)
    n += 1
    # A view kept past its frame keeps the frame (here for two more frames,
    # within the depth of 4): still intact later.
    if n % 50 == 0:
        kept.append((frame.seq, v, v.copy()))
    elif kept and frame.seq - kept[0][0] >= 3:
        kept.clear()
    # (A generator: a loop variable would keep the last view alive.)
    assert all(np.array_equal(view, copy) for _, view, copy in kept), "a kept frame changed"
stop.set()
t.join()
# Waiting for frames released the GIL: the other thread kept running.
assert ticks[0] > 20, ticks[0]
print(f"python stage: {n} frames, {ticks[0]} ticks")
"""


def binaries():
    """The `fastio` and `fio-streamop` binaries `cargo xtask python` gives
    (FASTIO_CLI, FASTIO_STREAMOP); the test is skipped without them."""
    cli, streamop = os.environ.get("FASTIO_CLI"), os.environ.get("FASTIO_STREAMOP")
    if not (cli and streamop):
        pytest.skip("binaries not given (run through cargo xtask python)")
    return cli, streamop


def run_definition(cli, tmp_path, yaml, *args):
    """Writes `yaml` as `p.yaml` in `tmp_path` and runs `fastio run` on it
    there (the operators' scripts are beside it)."""
    (tmp_path / "p.yaml").write_text(yaml)
    return subprocess.run([cli, "run", str(tmp_path / "p.yaml"), *args],
                          capture_output=True, text=True, timeout=180)


def test_a_recording_reads_bit_exact_with_the_mcap_package(tmp_path):
    """Issue 33: a streaming run recorded with `streaming.record`, read by
    Foxglove's `mcap` package (PyPI): its summary (channels, schemas,
    counts), every frame rebuilt from the message alone (header, element
    type from the channel) and bit-exact, every image also as a
    foxglove.RawImage with the same pixels."""
    import base64

    from mcap.reader import make_reader  # installed by `cargo xtask python`

    cli, streamop = binaries()
    bins = os.path.dirname(streamop)
    arr = "type: array, element-type: uint32, shape: [-1, 64]"
    yaml = f"""
api-version: 0.5.0
name: recorded
operators:
- name: src
  container: {{image: rust, command: [{streamop}, source, v]}}
  output: [{{name: v, {arr}}}]
- name: sink
  container: {{image: rust, command: [{streamop}, sink, v], variables: {{EXPECT_FRAMES: 300}}}}
  input: [{{from: src, name: v, {arr}}}]
- name: camera
  container: {{image: rust, command: [{bins}/camera], variables: {{FPS: 2000}}}}
  output: [{{name: image, type: array, element-type: uint8, shape: [240, 320, 3]}}]
- name: gray
  container: {{image: rust, command: [{bins}/gray]}}
  input: [{{from: camera, name: image, type: array, element-type: uint8, shape: [240, 320, 3]}}]
  output: [{{name: luma, type: array, element-type: float32, shape: [-1, -1]}}]
streaming:
  frames: 300
  record: rec.mcap
  max-shape:
    src/v: [16, 64]
    gray/luma: [240, 320]
"""
    p = run_definition(cli, tmp_path, yaml)
    assert p.returncode == 0, (p.stdout, p.stderr)
    with open(tmp_path / "rec.mcap", "rb") as f:
        reader = make_reader(f)
        header = reader.get_header()
        assert header.profile == "fastio"
        summary = reader.get_summary()
        topics = {c.topic: c for c in summary.channels.values()}
        assert set(topics) == {"src/v", "camera/image", "camera/image/image", "gray/luma"}
        counts = {summary.channels[k].topic: n
                  for k, n in summary.statistics.channel_message_counts.items()}
        assert counts == {t: 300 for t in topics}, counts
        schema = {t: summary.schemas[c.schema_id].name for t, c in topics.items()}
        assert schema["src/v"] == "fastio.Frame" and schema["gray/luma"] == "fastio.Frame"
        assert schema["camera/image/image"] == "foxglove.RawImage"
        assert topics["gray/luma"].metadata["fastio.element"] == "float32"
        assert json.loads(topics["gray/luma"].metadata["fastio.max_shape"]) == [240, 320]

        # Streams are written as they flow: messages of different channels
        # interleave in any order.
        images, raw, lumas, seen = {}, {}, {}, {t: 0 for t in topics}
        for sch, channel, message in reader.iter_messages():
            seen[channel.topic] += 1
            if sch.name == "foxglove.RawImage":
                m = json.loads(message.data)
                assert (m["encoding"], m["width"], m["height"], m["step"]) == ("rgb8", 320, 240, 960)
                raw[message.sequence] = base64.b64decode(m["data"])
                continue
            n = int.from_bytes(message.data[:4], "little")
            h = json.loads(message.data[4:4 + n])
            payload = message.data[4 + n:]
            # The checksum, as docs/recording.md says to check it: CRC-32
            # of the topic and the message with its 8 digits as zeros.
            assert channel.metadata["fastio.checksum"] == "crc32"
            assert message.data[4:14] == b'{"crc32":"'
            zeroed = message.data[:14] + b"00000000" + message.data[22:]
            seq = h["frame"]
            assert h["crc32"] == f"{zlib.crc32(channel.topic.encode() + zeroed):08x}", seq
            a = np.frombuffer(payload, dtype=channel.metadata["fastio.element"]).reshape(h["shape"])
            assert message.sequence == h["frame"] and h["source_frame"] == h["frame"]
            if channel.topic == "src/v":
                # fio-streamop's frames: rows 1 + seq % 16, word i the rule.
                assert a.shape == (1 + seq % 16, 64)
                words = a.reshape(-1).astype(np.uint64)
                want = (seq * 2654435761 + np.arange(words.size, dtype=np.uint64)) % 2**32
                want[0] = 0
                assert np.array_equal(words, want), seq
            elif channel.topic == "camera/image":
                assert a.shape == (240, 320, 3)
                images[seq] = payload
            elif channel.topic == "gray/luma":
                lumas[seq] = a
        assert seen == counts
        assert raw == images and sorted(images) == list(range(300))
        for seq, a in lumas.items():
            rgb = np.frombuffer(images[seq], dtype=np.uint8).reshape(240, 320, 3).astype(np.float32)
            luma = (np.float32(0.299) * rgb[..., 0] + np.float32(0.587) * rgb[..., 1]
                    + np.float32(0.114) * rgb[..., 2]) / np.float32(255.0)
            assert np.array_equal(a, luma), seq


def test_a_killed_live_recorder_leaves_a_file_mcap_reads_to_its_last_message(tmp_path):
    """Issue 33: `fastio record` attached to a running run and SIGKILLed
    mid-run: the run goes on unharmed; Foxglove's `mcap` stream reader
    reads every complete message (each frame bit-exact, in order) and then
    stops at the cut (EndOfFile)."""
    from mcap.exceptions import EndOfFile
    from mcap.records import Channel, Message
    from mcap.stream_reader import StreamReader

    cli, streamop = binaries()
    arr = "type: array, element-type: uint32, shape: [-1, 64]"
    yaml = f"""
api-version: 0.5.0
name: py-live
operators:
- name: src
  container: {{image: rust, command: [{streamop}, source, v], variables: {{PAUSE_US: 1500}}}}
  output: [{{name: v, {arr}}}]
- name: sink
  container: {{image: rust, command: [{streamop}, sink, v], variables: {{EXPECT_FRAMES: 1200}}}}
  input: [{{from: src, name: v, {arr}}}]
streaming:
  frames: 1200
  max-shape:
    src/v: [16, 64]
"""
    (tmp_path / "p.yaml").write_text(yaml)
    run = subprocess.Popen([cli, "run", "p.yaml"], cwd=tmp_path,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.3)
    rec = subprocess.Popen([cli, "record", "-o", "live.mcap", "--pipeline", "py-live"],
                           cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(0.8)
    rec.kill()
    rec.wait(timeout=30)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 0, (out, err)
    assert "[sink] sink: 1200 frames" in out
    channels, frames, cut = {}, [], False
    with open(tmp_path / "live.mcap", "rb") as f:
        try:
            for r in StreamReader(f).records:
                if isinstance(r, Channel):
                    channels[r.id] = r
                elif isinstance(r, Message):
                    frames.append((channels[r.channel_id].topic, r.data))
        except EndOfFile:
            cut = True
    assert cut, "a killed recorder leaves no footer"
    assert frames, "nothing recorded before the kill"
    last = -1
    for topic, data in frames:
        assert topic == "src/v"
        n = int.from_bytes(data[:4], "little")
        h = json.loads(data[4:4 + n])
        seq = h["frame"]
        assert seq > last
        last = seq
        words = np.frombuffer(data[4 + n:], dtype=np.uint32).astype(np.uint64)
        assert words.size == (1 + seq % 16) * 64
        want = (seq * 2654435761 + np.arange(words.size, dtype=np.uint64)) % 2**32
        want[0] = 0
        assert np.array_equal(words, want), seq
    # `fastio record --info` reads the same file up to the same message.
    info = subprocess.run([cli, "record", "--info", "live.mcap", "--json"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert info.returncode == 0, info.stderr
    report = json.loads(info.stdout)
    assert not report["complete"] and report["cut"]
    assert report["messages"] == len(frames)


def test_python_stage_in_a_streaming_pipeline(tmp_path):
    """Issue 18: `for frame in op:` between Rust operators that check every
    word; input views are read-only and keep their frames; the GIL is
    released while waiting."""
    cli, streamop = binaries()
    (tmp_path / "stage.py").write_text(PYTHON_STAGE)
    arr = "type: array, element-type: uint32, shape: [-1, 64]"
    yaml = f"""
api-version: 0.5.0
name: py-stream
operators:
- name: src
  container: {{image: rust, command: [{streamop}, source, v], variables: {{PAUSE_US: 300}}}}
  output: [{{name: v, {arr}}}]
- name: py
  container: {{image: python, command: [{sys.executable}, ./stage.py]}}
  input: [{{from: src, name: v, {arr}}}]
  output: [{{name: w, {arr}}}]
- name: sink
  container: {{image: rust, command: [{streamop}, sink, w], variables: {{EXPECT_FRAMES: 1000}}}}
  input: [{{from: py, name: w, {arr}}}]
streaming:
  depth: 4
  frames: 1000
  max-shape:
    src/v: [16, 64]
    py/w: [16, 64]
"""
    p = run_definition(cli, tmp_path, yaml, "--report", "json")
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert "[py] python stage: 1000 frames" in p.stderr, p.stderr
    assert "[sink] sink: 1000 frames" in p.stderr
    report = json.loads(p.stdout)
    py = next(o for o in report["operators"] if o["name"] == "py")
    assert py["frames"]["in"] == [1000] and py["frames"]["out"] == [1000]


PYTHON_TWO_INPUTS_SINK = """
import fastio

op = fastio.Operator.from_env()
n = 0
for frame in op:
    try:
        frame.input("out")
        raise SystemExit("a name two inputs share gave one of them")
    except fastio.Error as e:
        assert '"m1/out"' in str(e) and '"m2/out"' in str(e), str(e)
        if n == 0:
            print("python sink:", e)
    assert frame.input("m2/out")[0, 0] == 1    # one stage: m2's frame
    assert frame.input("M1/OUT")[0, 0] == 0    # the source's own frame
    n += 1
print(f"python sink: {n} frames")
"""


def test_a_python_sink_asking_for_a_name_two_inputs_share_gets_an_error_naming_both(tmp_path):
    """Issue 28: two producers' outputs are both called `out`; `out` is an
    error naming both entries, and each entry name gives its own producer's
    frames (word 0 counts the stages a frame went through)."""
    cli, streamop = binaries()
    (tmp_path / "sink.py").write_text(PYTHON_TWO_INPUTS_SINK)
    arr = "type: array, element-type: uint32, shape: [-1, 64]"
    yaml = f"""
api-version: 0.5.0
name: py-two-outs
operators:
- name: m1
  container: {{image: rust, command: [{streamop}, source, out]}}
  output: [{{name: out, {arr}}}]
- name: m2
  container: {{image: rust, command: [{streamop}, stage, out, out]}}
  input: [{{from: m1, name: out, {arr}}}]
  output: [{{name: out, {arr}}}]
- name: sink
  container: {{image: python, command: [{sys.executable}, ./sink.py]}}
  input: [{{from: m1, name: out, {arr}}}, {{from: m2, name: out, {arr}}}]
streaming:
  frames: 40
  max-shape:
    m1/out: [16, 64]
    m2/out: [16, 64]
"""
    p = run_definition(cli, tmp_path, yaml)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert "[sink] python sink: 40 frames" in p.stdout, p.stdout
    assert '[sink] python sink: the name "out" matches two entries' in p.stdout, p.stdout


PYTHON_SOURCE_THAT_CLOSES = """
import numpy as np
import fastio

op = fastio.Operator.from_env()
words = np.arange(1, 64, dtype=np.uint64)
n = 0
for frame in op.frames:
    row = np.zeros((1, 64), dtype=np.uint32)
    # fio-streamop's rule: word i of source frame s is s * 2654435761 + i.
    row[0, 1:] = ((frame.seq * 2654435761 + words) % (1 << 32)).astype(np.uint32)
    frame.write("v", row)
    n += 1
    if n == 30:
        op.frames.close()
        break
assert list(op.frames) == [], "a closed loop gave more frames"
print(f"python source: closed after {n} frames")
"""


def test_a_python_source_ends_its_stream_on_purpose_with_frames_close(tmp_path):
    """Issue 28: `op.frames.close()` ends a Python source's outputs: the sink
    sees exactly the frames published before it and the end of the stream,
    not a poisoned input, and the run succeeds."""
    cli, streamop = binaries()
    (tmp_path / "src.py").write_text(PYTHON_SOURCE_THAT_CLOSES)
    arr = "type: array, element-type: uint32, shape: [-1, 64]"
    yaml = f"""
api-version: 0.5.0
name: py-close
operators:
- name: src
  container: {{image: python, command: [{sys.executable}, ./src.py]}}
  output: [{{name: v, {arr}}}]
- name: sink
  container: {{image: rust, command: [{streamop}, sink, v], variables: {{EXPECT_FRAMES: 30}}}}
  input: [{{from: src, name: v, {arr}}}]
streaming:
  frames: 1000
  max-shape:
    src/v: [4, 64]
"""
    p = run_definition(cli, tmp_path, yaml)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert "[src] python source: closed after 30 frames" in p.stdout, p.stdout
    assert "[sink] sink: 30 frames" in p.stdout, p.stdout


PYTHON_SOURCE_THAT_RAISES = """
import os
import numpy as np
import fastio

fail_at = int(os.environ["FAIL_AT"])
words = np.arange(1, 64, dtype=np.uint64)
for frame in fastio.Operator.from_env():
    if frame.seq == fail_at:
        raise RuntimeError(f"raising on purpose at frame {frame.seq}")
    row = np.zeros((1, 64), dtype=np.uint32)
    row[0, 1:] = ((frame.seq * 2654435761 + words) % (1 << 32)).astype(np.uint32)
    frame.write("v", row)
"""


def raising_source_yaml(streamop, k, placement=""):
    """A Python source (`./src.py`, PYTHON_SOURCE_THAT_RAISES) raising at
    frame `k`, its frames to a `fio-streamop` sink that prints its errors
    on stdout; `placement` as a section of the definition."""
    arr = "type: array, element-type: uint32, shape: [-1, 64]"
    return f"""
api-version: 0.5.0
name: py-raises
{placement}operators:
- name: src
  container: {{image: python, command: [{sys.executable}, ./src.py], variables: {{FAIL_AT: '{k}'}}}}
  output: [{{name: v, {arr}}}]
- name: sink
  container: {{image: rust, command: [{streamop}, sink, v], variables: {{ERRORS_ON_STDOUT: '1'}}}}
  input: [{{from: src, name: v, {arr}}}]
streaming:
  frames: 100000
  max-shape:
    src/v: [4, 64]
"""


def test_a_python_source_that_raises_is_the_root_cause_not_its_sink(tmp_path):
    """Issue 29: a Python source raises at a random frame; its sink, which
    prints its poisoned input on stdout, is never blamed: the CLI's line
    and `--report json` name the source and the frame, every time."""
    cli, streamop = binaries()
    (tmp_path / "src.py").write_text(PYTHON_SOURCE_THAT_RAISES)
    import random
    rng = random.Random(29)
    for _ in range(4):
        k = rng.randrange(3, 400)
        p = run_definition(cli, tmp_path, raising_source_yaml(streamop, k), "--report", "json")
        assert p.returncode == 1, (p.stdout, p.stderr)
        failure = json.loads(p.stdout)["failure"]
        want = {"kind": "exited", "operator": "src", "host": None, "code": 1, "frame": k}
        assert {key: failure[key] for key in want} == want, (k, failure, p.stderr)
        text = f"operator src exited with status 1 at frame {k}"
        assert failure["text"] == text
        assert f"fastio: {text}" in p.stderr, p.stderr
        assert "raising on purpose" in p.stderr   # shown, never read


STREAM_CONSUMER = """
import sys, zlib
import numpy as np
import fastio

ctx = fastio.FastIOContext.attach(sys.argv[1])
consumer = ctx.stream_consumer("video", int(sys.argv[2]))
n = 0
for frame in consumer:
    a = frame.array()
    assert frame.seq == n, (frame.seq, n)
    assert a.dtype == np.float32 and a.shape == (1 + n % 5, 7), a.shape
    assert not a.flags.writeable
    want = (np.arange(a.size, dtype=np.float32) + n).reshape(a.shape)
    assert np.array_equal(a, want), n
    n += 1
print(n)
"""


def test_a_stream_without_a_pipeline_to_two_consumer_processes():
    ctx = fastio.FastIOContext.new(8 << 20)
    with ctx.create_stream("video", "float32", [5, 7], depth=3, consumers=2) as producer:
        assert producer.element == "float32" and producer.max_shape == [5, 7]
        kids = [
            subprocess.Popen(
                [sys.executable, "-c", STREAM_CONSUMER, ctx.handle, str(i)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(2)
        ]
        for n in range(500):
            rows = 1 + n % 5
            frame = (np.arange(rows * 7, dtype=np.float32) + n).reshape(rows, 7)
            assert producer.send(frame, timeout=30) == n
    for k in kids:
        out, err = k.communicate(timeout=60)
        assert k.returncode == 0, err
        assert out.strip() == "500"


def test_stream_views_keep_their_frames_and_the_producer_waits_for_them(ctx):
    producer = ctx.create_stream("s", "int32", [4], depth=2)
    consumer = ctx.stream_consumer("s")
    producer.send([1, 2, 3, 4])
    producer.send([5, 6, 7, 8])
    frame = next(consumer)
    kept = frame.array()
    with pytest.raises(ValueError):
        kept[0] = 9
    # DLPack: the same read-only memory, no copy.
    via = np.from_dlpack(kept)
    assert not via.flags.writeable and via.ctypes.data == kept.ctypes.data
    del via
    # Both slots are taken (one held by the view, one unread): the producer
    # waits, then gives up.
    with pytest.raises(fastio.Error, match="(?i)timed out|timeout"):
        producer.send([0, 0, 0, 0], timeout=0.2)
    second = next(consumer)
    assert second.seq == 1 and second.array().tolist() == [5, 6, 7, 8]
    with pytest.raises(RuntimeError):
        frame.seq  # the loop moved on: the frame object is done
    assert kept.tolist() == [1, 2, 3, 4]  # the view still holds its frame
    del kept, second
    gc.collect()
    assert producer.send([9, 9, 9, 9], timeout=5) == 2
    producer.end()
    assert next(consumer).array().tolist() == [9, 9, 9, 9]
    assert consumer.next(timeout=1) is None


def test_stream_drop_oldest_poison_and_bad_arguments(ctx):
    producer = ctx.create_stream("d", "uint8", [3], depth=2, overflow="drop-oldest")
    consumer = ctx.stream_consumer("d")
    for i in range(6):
        producer.send(np.full(3, i, np.uint8))
    f = consumer.next(timeout=1)
    assert f.seq == 4 and consumer.dropped == 4
    assert f.array().tolist() == [4, 4, 4]
    producer.poison()
    with pytest.raises(fastio.PoisonedError):
        consumer.next(timeout=1)
        consumer.next(timeout=1)
    with pytest.raises(ValueError, match="primitive"):
        ctx.create_stream("e", "no such type", [3])
    with pytest.raises(ValueError, match="overflow"):
        ctx.create_stream("e", "uint8", [3], overflow="sometimes")
    with pytest.raises(fastio.Error):
        ctx.create_stream("e", "uint8", [3], depth=0)
    with pytest.raises(fastio.NotFoundError):
        ctx.stream_consumer("no such stream")
    p = ctx.create_stream("f", "uint8", [2])
    with pytest.raises(fastio.Error):
        p.send(np.zeros(3, np.uint8))  # larger than the largest frame


def test_waiting_for_a_stream_frame_releases_the_gil(ctx):
    import threading
    import time

    producer = ctx.create_stream("g", "uint8", [1])
    consumer = ctx.stream_consumer("g")
    ticks = []

    def tick():
        for _ in range(20):
            ticks.append(time.monotonic())
            time.sleep(0.01)
        producer.send([7])

    t = threading.Thread(target=tick)
    t.start()
    f = consumer.next(timeout=10)
    t.join()
    assert f.array().tolist() == [7]
    assert len(ticks) == 20


NO_SPACE = """
import fastio
ctx = fastio.FastIOContext.new(1 << 30, anonymous=False)
try:
    ctx.create(64 << 20)
    print("created")
except fastio.NoSpaceError as e:
    print("NoSpaceError:", e)
a = ctx.create(1 << 20)
a.free()
print("after: ok")
"""


def test_a_full_dev_shm_raises_no_space_error(tmp_path):
    """With a 16 MiB tmpfs on /dev/shm (a private mount namespace; needs
    root, as CI is), an allocation that does not fit raises NoSpaceError
    saying how much was asked; nothing is left behind."""
    if os.geteuid() != 0:
        assert "CI" not in os.environ, "CI runs as root"
        pytest.skip("needs root for a mount namespace")
    script = tmp_path / "nospace.py"
    script.write_text(NO_SPACE)
    p = subprocess.run(
        [
            "unshare", "--mount", "--propagation", "private", "sh", "-c",
            f"mount -t tmpfs -o size=16m tmpfs /dev/shm && {sys.executable} {script}; ls -A /dev/shm",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = p.stdout.splitlines()
    assert lines[0].startswith("NoSpaceError: ") and "/dev/shm is full: 64.0 MiB asked" in lines[0], p
    assert lines[1:] == ["after: ok"], p


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def test_a_python_source_that_raises_on_one_host_is_the_root_cause_on_both(tmp_path):
    """Issue 29: two hosts (network namespaces on a veth pair, each with its
    own /dev/shm); a Python source on host a raises at a random frame while
    its frames stream to a sink on host b. Both hosts name the same typed
    root cause (the source, its host and frame), never b's sink, every
    time."""
    cli, streamop = binaries()
    tag = f"fpy{os.getpid() % 100000}"
    na, nb = f"{tag}a", f"{tag}b"
    if _ip("netns", "add", na, check=False).returncode != 0:
        assert not os.environ.get("CI"), "CI must be able to make network namespaces (root)"
        pytest.skip("cannot make a network namespace here (not root)")
    try:
        _ip("netns", "add", nb)
        _ip("-n", na, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", nb)
        for ns, addr in ((na, "10.78.0.1/24"), (nb, "10.78.0.2/24")):
            _ip("-n", ns, "addr", "add", addr, "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        (tmp_path / "src.py").write_text(PYTHON_SOURCE_THAT_RAISES)
        import random
        rng = random.Random(2929)
        placement = "placement:\n  default: a\n  hosts:\n    b: [sink]\n"
        for round_ in range(3):
            k = rng.randrange(20, 300)
            (tmp_path / "p.yaml").write_text(raising_source_yaml(streamop, k, placement))
            port = 7490 + round_
            script = 'mount -t tmpfs -o size=1g tmpfs /dev/shm && exec "$@"'
            runs = []
            for ns, host, net in (
                (na, "a", ["--listen", f"tcp/10.78.0.1:{port}"]),
                (nb, "b", ["--listen", f"tcp/10.78.0.2:{port}", "--connect", f"tcp/10.78.0.1:{port}"]),
            ):
                runs.append(subprocess.Popen(
                    ["ip", "netns", "exec", ns, "unshare", "--mount", "--propagation", "private",
                     "sh", "-c", script, "sh", cli, "run", str(tmp_path / "p.yaml"), "--host", host,
                     "--run-id", f"r{round_}", "--join-timeout", "30", "--lease", "2",
                     "--report", "json", *net],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path))
            failures = []
            for host, p in zip("ab", runs):
                out, err = p.communicate(timeout=120)
                assert p.returncode == 1, (host, out, err)
                failures.append(json.loads(out)["failure"])
                assert f"fastio: operator src on host a exited with status 1 at frame {k}" in err, (host, err)
            want = {"kind": "exited", "operator": "src", "host": "a", "code": 1, "frame": k}
            for host, f in zip("ab", failures):
                assert {key: f[key] for key in want} == want, (round_, host, f)
            assert failures[0] == failures[1]
            print("round", round_, "k", k, failures[0]["text"])
    finally:
        _ip("netns", "del", na, check=False)
        _ip("netns", "del", nb, check=False)
