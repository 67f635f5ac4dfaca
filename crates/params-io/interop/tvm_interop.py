#!/usr/bin/env python3
"""The Apache TVM side of params-io's interop check.

    tvm_interop.py gen DIR      TVM writes DIR/tvm/*.params with manifest.json and the raw
                                bytes of every tensor (DIR/tvm/*.bin) for the Rust reader
    tvm_interop.py check DIR    TVM loads DIR/ours/*.params (written by params-io), compares
                                every tensor with DIR/ours/*.bin, and checks that TVM saving
                                the loaded dict gives our bytes exactly

Needs `apache-tvm` (0.27.0.post1 tested) and numpy. `gen` and `check` print
`N passed, M failed` and exit 1 on any failure.
"""

import json
import os
import sys

import numpy as np
import tvm

try:
    import ml_dtypes
except ImportError:  # pragma: no cover
    ml_dtypes = None


def np_dtype(name):
    if name == "bfloat16":
        return ml_dtypes.bfloat16
    return np.dtype(name)


def sample(dtype, shape, seed):
    n = int(np.prod(shape)) if shape else 1
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        a = rng.integers(0, 2, n).astype(bool)
    elif dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        a = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    elif dtype.startswith("complex"):
        a = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype)
    else:
        a = rng.standard_normal(n).astype(np_dtype(dtype))
    return a.reshape(shape)


def gen(dirname):
    out = os.path.join(dirname, "tvm")
    os.makedirs(out, exist_ok=True)
    cases = {}
    cases["basic"] = {"x": np.arange(6, dtype="int32").reshape(2, 3)}
    dtypes = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
              "uint64", "float16", "float32", "float64", "bfloat16", "complex64", "complex128"]
    cases["dtypes"] = {f"t_{d}": sample(d, (2, 3), i) for i, d in enumerate(dtypes)}
    cases["shapes"] = {
        "scalar": np.array(3.5, dtype="float32"),
        "empty": np.zeros((0,), dtype="float32"),
        "empty_mid": np.zeros((2, 0, 3), dtype="int8"),
        "five_d": sample("int16", (2, 1, 3, 1, 2), 9),
    }
    cases["names"] = {"": np.ones(1, "int8"), "名前/ü": np.ones(2, "uint8"),
                      "a.b/c:d": np.ones(1, "int32")}
    cases["order_40"] = {f"p{39 - i}": np.array([i], "int32") for i in range(40)}
    cases["big_64mib"] = {"big": sample("float32", (16 << 20,), 5)}
    cases["empty_dict"] = {}
    manifest, skipped = [], []
    for case, params in cases.items():
        usable = {}
        for name, arr in params.items():
            try:
                tvm.runtime.save_param_dict({name: arr})
                usable[name] = arr
            except Exception as e:  # a dtype this TVM build cannot hold
                skipped.append(f"{case}/{name} ({arr.dtype}): {type(e).__name__}: {e}")
        path = os.path.join(out, f"{case}.params")
        tvm.runtime.save_param_dict_to_file(usable, path)
        tensors = []
        for i, (name, arr) in enumerate(usable.items()):
            binname = f"{case}_{i}.bin"
            with open(os.path.join(out, binname), "wb") as f:
                f.write(np.ascontiguousarray(arr).tobytes())
            tensors.append({"name": name, "dtype": str(arr.dtype), "shape": list(arr.shape),
                            "bin": binname})
        manifest.append({"file": f"{case}.params", "tensors": tensors})
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, ensure_ascii=False)
    for s in skipped:
        print("skipped", s)
    print(f"wrote {len(manifest)} TVM fixtures to {out}")
    return 0


def check(dirname):
    d = os.path.join(dirname, "ours")
    with open(os.path.join(d, "manifest.json")) as f:
        manifest = json.load(f)
    passed = failed = 0
    for case in manifest:
        path = os.path.join(d, case["file"])
        problems = []
        try:
            loaded = tvm.runtime.load_param_dict_from_file(path)
        except Exception as e:
            problems.append(f"TVM failed to load: {type(e).__name__}: {e}")
            loaded = None
        if loaded is not None:
            names = list(loaded.keys())
            want = [t["name"] for t in case["tensors"]]
            if names != want:
                problems.append(f"names/order {names[:5]}... != {want[:5]}...")
            for t in case["tensors"]:
                if t["name"] not in loaded:
                    continue
                try:
                    got = loaded[t["name"]].numpy()
                except Exception as e:
                    problems.append(f"{t['name']}: {type(e).__name__}: {e}")
                    continue
                with open(os.path.join(d, t["bin"]), "rb") as f:
                    raw = f.read()
                if str(got.dtype) != t["dtype"]:
                    problems.append(f"{t['name']}: dtype {got.dtype} != {t['dtype']}")
                if list(got.shape) != t["shape"]:
                    problems.append(f"{t['name']}: shape {got.shape} != {t['shape']}")
                if np.ascontiguousarray(got).tobytes() != raw:
                    problems.append(f"{t['name']}: data differs")
            try:
                again = bytes(tvm.runtime.save_param_dict(loaded))
                with open(path, "rb") as f:
                    ours = f.read()
                if again != ours:
                    at = next((i for i, (a, b) in enumerate(zip(again, ours)) if a != b),
                              min(len(again), len(ours)))
                    note = "expected: TVM writes bool as (6,8,1)" if "legacy" in case["file"] else ""
                    problems.append(f"TVM re-save differs at byte {at} {note}".strip())
            except Exception as e:
                problems.append(f"TVM re-save failed: {e}")
        limitation = case.get("tvm_limitation") or ""
        if problems and limitation:
            print(f"xfail tvm-loads {case['file']} ({limitation}): " + "; ".join(problems))
        elif problems:
            failed += 1
            print(f"FAIL tvm-loads {case['file']}: " + "; ".join(problems))
        else:
            passed += 1
            print(f"ok   tvm-loads {case['file']}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def main(argv):
    if len(argv) >= 2 and argv[0] == "gen":
        return gen(argv[1])
    if len(argv) >= 2 and argv[0] == "check":
        return check(argv[1])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
