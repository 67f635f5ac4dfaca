"""The `fastio` Python package: contexts, allocations, zero-copy numpy views
that can neither dangle nor write inputs, and Python operators in a
pipeline run by `fastio run` beside Rust operators.

Run by `cargo xtask python` (which builds the package with maturin into a
virtual environment and sets FASTIO_CLI and FASTIO_TESTOP to the built
`fastio` and `fio-testop` binaries).
"""

import gc
import json
import os
import subprocess
import sys
import textwrap

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


def test_a_writer_excludes_readers_and_errors_are_typed(ctx):
    a = published(ctx)
    w = a.map_as_numpy_array()  # writable, exclusive
    with pytest.raises(fastio.MapConflictError):
        ctx.get("x").map_as_numpy_array(writable=False)
    del w
    gc.collect()
    assert ctx.get("x").map_as_numpy_array(writable=False)[0, 1] == 1.5
    with pytest.raises(fastio.NotFoundError):
        ctx.get("nope")
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
assert v.get_bytes() == data.tobytes()
w = op.output("w")
assert w.access is fastio.IOAccess.ReadWrite and w.is_dynamic
assert w.shape == (-1,)
assert w.update_shape([0], [data.size]) == (data.size,)   # allocates
w.set_values(data.reshape(-1) * 2)
print("doubled", data.size, "values")
"""


def test_python_operator_between_rust_operators(tmp_path):
    cli, testop = os.environ.get("FASTIO_CLI"), os.environ.get("FASTIO_TESTOP")
    if not (cli and testop):
        pytest.skip("FASTIO_CLI/FASTIO_TESTOP not set (run through cargo xtask python)")
    (tmp_path / "double.py").write_text(PYTHON_OPERATOR)
    yaml = f"""
api-version: 0.5.0
name: three-languages
operators:
- name: make
  container: {{image: rust, command: [{testop}, fill, v, '1.5']}}
  output: [{{name: v, type: array, element-type: float32, shape: [2, 4]}}]
- name: double
  container: {{image: python, command: [{sys.executable}, ./double.py]}}
  input: [{{from: make, name: v, type: array, element-type: float32, shape: [2, 4]}}]
  output: [{{name: w, type: array, element-type: float32, shape: [-1]}}]
- name: total
  container: {{image: rust, command: [{testop}, sum, s, w]}}
  input: [{{from: double, name: w, type: array, element-type: float32, shape: [-1]}}]
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
    assert "[double] doubled 8 values" in p.stdout
    assert "[total] sum 24" in p.stdout
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert report["succeeded"]
