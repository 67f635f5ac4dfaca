"""numpy's side of `cargo xtask bench`: the same copies and casts as
crates/ndobject/benches/assign.rs, on the same element counts, timed in the
same run so that the ratios printed beside our numbers compare like with
like.

Usage: python numpy_bench.py N
Prints one line per operation: `<criterion group>/<function> seconds=S
min=S max=S samples=K`, S being the median of K samples (each the mean of
a batch of calls, after one warm-up batch that is not counted).
"""

import statistics
import sys
import time

import numpy as np


def timed(fn, samples=15, min_batch_seconds=0.02):
    fn()  # warm-up: first-touch page faults, caches
    batch = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        dt = time.perf_counter() - t0
        if dt >= min_batch_seconds or batch >= 1 << 16:
            break
        batch *= 2
    results = []
    for _ in range(samples):
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        results.append((time.perf_counter() - t0) / batch)
    return statistics.median(results), min(results), max(results), samples


def main():
    n = int(sys.argv[1])
    a = np.arange(n, dtype=np.float32)
    dst = np.zeros(n, dtype=np.float32)
    wide = np.zeros(2 * n, dtype=np.float32)
    raw = np.zeros(4 * n + 1, dtype=np.uint8)
    unaligned = np.frombuffer(raw.data, dtype=np.float32, count=n, offset=1)
    assert not unaligned.flags.aligned
    swapped = a.astype(">f4")
    cases = {
        "ndobject/assign_f32/assign_contiguous": lambda: np.copyto(dst, a),
        "ndobject/cast_f32_to_f64/cast_contiguous": lambda: a.astype(np.float64),
        "ndobject/copy_f32/strided_step2": lambda: wide[::2].copy(),
        "ndobject/copy_f32/negative_stride": lambda: a[::-1].copy(),
        "ndobject/copy_f32/unaligned": lambda: unaligned.copy(),
        "ndobject/copy_f32/byteswapped": lambda: swapped.astype(np.float32),
    }
    print(f"numpy {np.__version__}, {n} elements")
    for name, fn in cases.items():
        med, lo, hi, k = timed(fn)
        print(f"{name} seconds={med:.9f} min={lo:.9f} max={hi:.9f} samples={k}")


if __name__ == "__main__":
    main()
