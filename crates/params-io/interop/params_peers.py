#!/usr/bin/env python3
"""Parameter files beside their peers, every operation in a fresh process.

    params_peers.py run DIR INTEROP REPEAT
        DIR holds large.params (`interop make-bench-file`) and model.params
        (`interop make-model-file`). Writes the same tensors as DIR/*.npz
        (numpy's np.savez, uncompressed), then runs every variant REPEAT
        times, each run a fresh child process whose peak RSS is read with
        wait4 (ru_maxrss) by `INTEROP measure`, INTEROP being the built Rust
        `interop` example.
        Prints one line per file and variant:
        `params file=F variant=V bytes=B samples=N median=S min=S max=S
         start_kib=K peak_kib=K` (medians over the runs; start = the
        child's peak RSS before it touched any tensor, after its imports).
    params_peers.py child OP PATH [OUT]
        One Python operation (tvm_load, tvm_save, npz_load, npz_save),
        printed like the Rust child: `start_kib= before_kib= seconds= check=`.

Writes do not fsync (neither ours, nor TVM's file write, nor np.savez).
The files are in the page cache throughout (just written, and read by
every run): this measures the libraries, not the disk.
"""

import os
import statistics
import subprocess
import sys
import time


def hwm_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def child(op, path, out=None):
    if op.startswith("tvm"):
        import tvm
    import numpy as np

    start = hwm_kib()
    before = start
    if op == "tvm_load":
        t = time.perf_counter()
        d = tvm.runtime.load_param_dict_from_file(path)
        secs = time.perf_counter() - t
        check = len(d)
    elif op == "npz_load":
        t = time.perf_counter()
        with np.load(path) as z:
            d = {k: z[k] for k in z.files}
        secs = time.perf_counter() - t
        check = sum(a.nbytes for a in d.values())
    elif op == "tvm_save":
        d = tvm.runtime.load_param_dict_from_file(path)
        before = hwm_kib()
        t = time.perf_counter()
        blob = tvm.runtime.save_param_dict(d)
        with open(out, "wb") as f:
            f.write(blob)
        secs = time.perf_counter() - t
        check = len(blob)
    elif op == "npz_save":
        with np.load(path) as z:
            d = {k: z[k] for k in z.files}
        before = hwm_kib()
        t = time.perf_counter()
        np.savez(out, **d)
        secs = time.perf_counter() - t
        check = len(d)
    else:
        print(f"unknown operation {op!r}", file=sys.stderr)
        return 2
    print(f"start_kib={start} before_kib={before} seconds={secs:.6f} check={check}")
    return 0


def make_npz(params, npz):
    import numpy as np
    import tvm

    d = tvm.runtime.load_param_dict_from_file(params)
    np.savez(npz, **{k: v.numpy() for k, v in d.items()})


def measure(interop, cmd, out):
    """Runs `cmd` (one operation) under `interop measure`, a small launcher
    that reads the child's peak RSS with wait4 (from this big process,
    ru_maxrss would start at our own RSS: Linux counts the parent's memory
    image that exec replaces), and returns the printed fields."""
    p = subprocess.run([interop, "measure", *cmd], capture_output=True, text=True)
    if out and os.path.exists(out):
        os.unlink(out)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    return dict(kv.split("=", 1) for kv in p.stdout.split() if "=" in kv)


def run(directory, interop, repeat):
    me = [sys.executable, os.path.abspath(__file__), "child"]
    for name in ["large", "model"]:
        params = os.path.join(directory, f"{name}.params")
        npz = os.path.join(directory, f"{name}.npz")
        make_npz(params, npz)
        out = os.path.join(directory, f"{name}.out")
        variants = {
            "ours_mmap_open": [interop, "child", "mmap_open", params],
            "ours_mmap_touch": [interop, "child", "mmap_touch", params],
            "ours_read_full": [interop, "child", "read_full", params],
            "tvm_load": me + ["tvm_load", params],
            "numpy_npz_load": me + ["npz_load", npz],
            "ours_write": [interop, "child", "write", params, out],
            "tvm_save": me + ["tvm_save", params, out],
            "numpy_npz_save": me + ["npz_save", npz, out + ".npz"],
        }
        size = os.path.getsize(params)
        for variant, cmd in variants.items():
            target = cmd[-1] if variant.endswith(("write", "save")) else None
            runs = [measure(interop, cmd, target) for _ in range(repeat)]
            secs = [float(r["seconds"]) for r in runs]
            med = lambda key: int(statistics.median(int(r[key]) for r in runs))
            print(
                f"params file={name} variant={variant} bytes={size} samples={repeat} "
                f"median={statistics.median(secs):.6f} min={min(secs):.6f} "
                f"max={max(secs):.6f} start_kib={med('start_kib')} "
                f"before_kib={med('before_kib')} peak_kib={med('peak_kib')}",
                flush=True,
            )
        os.unlink(npz)
    return 0


def main(argv):
    if len(argv) == 4 and argv[0] == "run":
        return run(argv[1], argv[2], int(argv[3]))
    if len(argv) in (3, 4) and argv[0] == "child":
        return child(*argv[1:])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
