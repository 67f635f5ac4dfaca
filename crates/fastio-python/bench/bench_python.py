"""The Python side of fastio's benchmarks: the steady-state path of the
`fastio` package and a 64 MiB handoff between two Python processes, next
to what Python offers without fastio (multiprocessing.shared_memory, and
pickling through a pipe).

Usage: python bench_python.py. Prints `<name> seconds=S min=S max=S
samples=K` lines, S the median of K samples (each the mean of a batch of
calls, after one uncounted warm-up call), timed by numpy_bench.py's
`timed`.

* `python/get_map_numpy`: `ctx.get(name)` + `map_as_numpy_array(writable=
  False)` + reading one element + deleting the array and releasing the
  reference, on a published 4 KiB allocation.
* `handoff_64MiB/<variant>`: the producer (this process) writes one byte
  per 4 KiB page of 64 MiB and hands the memory to a consumer (this script
  run as a child), which reads one byte per page and acknowledges; the
  time is the producer's round trip.
  - `fastio`: a new allocation per handoff (its block is recycled warm),
    written through `map_as_numpy_array`, published as `h`; the consumer
    `wait_for("h")`s, maps it read-only, reads, frees it and publishes a
    1-byte `ack`, which the producer `wait_for`s and frees before freeing
    its own reference. No pipe in the loop.
  - `shared_memory`: one `SharedMemory` segment with an `np.ndarray` over
    it on both sides; 1-byte "ready"/"ack" messages over the child's
    stdin/stdout.
  - `pickle_pipe`: the 64 MiB array pickled (protocol 5) into the
    child's stdin; the consumer unpickles it, reads, acks.

Children exit when their stdin closes, when a 1-byte `h` is published
(fastio), or when a wait times out (TIMEOUT); the producer kills any child
still running 10 s after that.
"""

import os
import pickle
import subprocess
import sys
from multiprocessing import resource_tracker, shared_memory

import numpy as np

import fastio

# The one batch-timing rule of `cargo xtask bench`'s Python sides.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "ndobject", "compat"))
from numpy_bench import timed  # noqa: E402

PAGE = 4096
SIZE = 64 << 20
TIMEOUT = 60.0


def report(name, fn, samples=15):
    med, lo, hi, k = timed(fn, samples)
    print(f"{name} seconds={med:.9f} min={lo:.9f} max={hi:.9f} samples={k}", flush=True)


def read_pages(arr):
    """Reads one byte per page (a strided view: no copy of the rest) and
    checks that the producer's bytes arrived."""
    if int(arr[::PAGE].sum()) != 7 * (SIZE // PAGE):
        raise RuntimeError("the consumer did not see the producer's bytes")


# ---- consumers (this script run as `child MODE [ARG]`) ----


def child_fastio(handle):
    ctx = fastio.FastIOContext.attach(handle)
    while True:
        a = ctx.wait_for("h", TIMEOUT)  # raises (and exits) after TIMEOUT
        if a.size == 1:  # the producer's `stop`
            a.free()
            return
        arr = a.map_as_numpy_array(writable=False)
        read_pages(arr)
        del arr  # unmaps
        a.free()  # `h` disappears: the next wait_for sees the next one
        ack = ctx.create(1)
        ack.publish("ack")
        ack.release()


def child_shared_memory(name):
    shm = shared_memory.SharedMemory(name=name)
    # Python < 3.13 would unlink it at our exit; the producer owns it.
    resource_tracker.unregister(shm._name, "shared_memory")
    arr = np.ndarray((SIZE,), dtype=np.uint8, buffer=shm.buf)
    try:
        while os.read(0, 1) == b"r":  # b"" when the producer is gone
            read_pages(arr)
            os.write(1, b"k")
    finally:
        del arr
        shm.close()


def child_pickle_pipe():
    inp = sys.stdin.buffer
    while True:
        try:
            arr = pickle.load(inp)
        except EOFError:
            return
        read_pages(arr)
        del arr
        os.write(1, b"k")


# ---- producer ----


def spawn(*args):
    return subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "child", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )


def finish(proc):  # closes the child's stdin, waits, kills if it hangs
    try:
        proc.stdin.close()
    except OSError:
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    proc.stdout.close()


def ack(proc):
    if proc.stdout.read(1) != b"k":
        raise RuntimeError("the consumer stopped answering")


def bench_get_map_numpy():
    ctx = fastio.FastIOContext.new(1 << 20)
    a = ctx.create(PAGE)
    a.map_as_numpy_array()[0] = 42
    a.publish("tensor")
    a.release()

    def get_map_numpy():
        a = ctx.get("tensor")
        arr = a.map_as_numpy_array(writable=False)
        arr[0]
        del arr
        a.release()

    report("python/get_map_numpy", get_map_numpy)


def bench_fastio():
    ctx = fastio.FastIOContext.new(4 * SIZE)  # named (not anonymous)
    proc = spawn("fastio", ctx.handle)

    def handoff():
        a = ctx.create(SIZE)
        arr = a.map_as_numpy_array()
        arr[::PAGE] = 7
        del arr  # unmaps: the consumer maps it next
        a.publish("h")
        ctx.wait_for("ack", TIMEOUT).free()
        a.free()

    try:
        report("handoff_64MiB/fastio", handoff, samples=10)
    finally:
        try:
            stop = ctx.create(1)
            stop.publish("h")
            stop.release()
        except fastio.Error:
            proc.kill()  # `h` still out: the consumer is stuck or gone
        finish(proc)


def bench_shared_memory():
    shm = shared_memory.SharedMemory(create=True, size=SIZE)
    try:
        arr = np.ndarray((SIZE,), dtype=np.uint8, buffer=shm.buf)
        proc = spawn("shared_memory", shm.name)

        def handoff():
            arr[::PAGE] = 7
            proc.stdin.write(b"r")
            proc.stdin.flush()
            ack(proc)

        try:
            report("handoff_64MiB/shared_memory", handoff, samples=10)
        finally:
            finish(proc)
            del arr
    finally:
        shm.close()
        shm.unlink()


def bench_pickle_pipe():
    proc = spawn("pickle_pipe")
    try:
        import fcntl  # a 1 MiB pipe (the usual limit) rather than 64 KiB

        fcntl.fcntl(proc.stdin.fileno(), fcntl.F_SETPIPE_SZ, 1 << 20)
    except (ImportError, AttributeError, OSError):
        pass
    arr = np.zeros(SIZE, dtype=np.uint8)

    def handoff():
        arr[::PAGE] = 7
        pickle.dump(arr, proc.stdin, protocol=5)
        proc.stdin.flush()
        ack(proc)

    try:
        report("handoff_64MiB/pickle_pipe", handoff, samples=10)
    finally:
        finish(proc)


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "child":
        mode = sys.argv[2]
        if mode == "fastio":
            child_fastio(sys.argv[3])
        elif mode == "shared_memory":
            child_shared_memory(sys.argv[3])
        elif mode == "pickle_pipe":
            child_pickle_pipe()
        else:
            sys.exit(f"unknown child mode {mode!r}")
        return
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}", flush=True)
    bench_get_map_numpy()
    bench_fastio()
    bench_shared_memory()
    bench_pickle_pipe()


if __name__ == "__main__":
    main()
