#!/usr/bin/env python3
"""Case generator of ndobject's differential test against numpy.

    numpy_diff.py [--seed S] [--cases N] [--out FILE]

Writes N cases (JSON Lines, one case per line; default 3000, seed 20240531,
stdout when FILE is missing), deterministic for a given seed. The expected
results are computed with numpy (array views and casts) and Python's codecs
(fixed-size string transcodes). The Rust side is
`cargo run --release -p ndobject --example numpy_diff -- FILE`, driven by
`cargo xtask numpy`.

Case kinds (all byte strings are lowercase hex):

  {"id", "kind": "array",
   "element": "int16" | "big_endian[float64]" | ...   the source element type,
              plain even for misaligned data (ndobject's Array::from_block
              itself makes it unaligned[...] at a misaligned address),
   "shape": [...], "misalign": k,   the array starts k bytes after a 16-byte
              aligned address (0, or an offset that breaks the alignment),
   "data": hex,     the source's bytes in C order, in its byte order,
   "ops": [...],    applied in order:
       {"op": "index", "i": k}                          numpy a[k, ...]
       {"op": "view", "indices": [{"at": i} | {"slice": [start|null, stop|null, step]}, ...]}
                                                        numpy a[(..., Ellipsis)]
       {"op": "transpose"}                              numpy a.T
       {"op": "permute", "order": [...]}                np.transpose(a, order)
       {"op": "reshape", "shape": [...]}                v = a.view(); v.shape = shape
   "cast": null | a primitive name (native byte order, aligned target),
   "expect": {"shape", "strides", "bytes"} | {"error": "index" | "reshape"}}

  "shape" and "strides" are numpy's for the final view, before the cast.
  numpy's strides of dimensions of size 0 or 1 (and of arrays without
  elements) address no element and are an implementation choice; the
  checker compares strides of dimensions of size > 1 of non-empty arrays.
  "bytes" is the final view in C order: after the cast when there is one,
  else in the source's byte order (what ndobject's to_bytes gives).

  {"id", "kind": "string", "from": "string[8, 'utf32']", "to": "string[6, 'utf8']",
   "misalign": k, "shape": [n], "data": hex,
   "expect": {"bytes": hex} | {"error": "encoding"}}

  ndobject's rules for fixed-size strings (strings.rs): an element is read
  by dropping trailing all-zero code units and decoding strictly; it is
  written encoded, zero-padded, and text that does not fit is an error
  (never truncated), as is a character the target cannot represent.
  The expectation applies those rules with Python's codecs (utf-16/32 in
  little-endian order, the host's; ucs2 is utf-16 without surrogates).

Values avoided on purpose, because numpy's result is platform-defined
(C's undefined float -> integer conversion):
  * float -> integer casts never see NaN, infinities or values whose
    truncation is outside the target's range (they are replaced by values
    in range); complex -> integer likewise on the real part;
  * bool sources hold only the bytes 0 and 1: other bytes are not valid
    numpy bools (numpy reads them as True when casting to another type but
    copies them unchanged in a bool -> bool cast);
  * NaNs are the canonical quiet NaN (either sign), not random payloads.
"""

import argparse
import json
import random
import sys
import warnings

import numpy as np

PRIMITIVES = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128",
]
# ndobject's alignment (dtype::Primitive::alignment).
ALIGN = {
    "bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2,
    "int32": 4, "uint32": 4, "float32": 4, "complex64": 4,
    "int64": 8, "uint64": 8, "float64": 8, "complex128": 8,
}
FLOAT_OF_COMPLEX = {"complex64": "float32", "complex128": "float64"}

ENCODINGS = ["ascii", "utf8", "utf16", "ucs2", "utf32"]
UNIT = {"ascii": 1, "utf8": 1, "utf16": 2, "ucs2": 2, "utf32": 4}
CODEC = {"ascii": "ascii", "utf8": "utf-8", "utf16": "utf-16-le", "ucs2": "utf-16-le",
         "utf32": "utf-32-le"}
CHARS_ASCII = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:-_!?'\"\t\x01\x7f"
CHARS_BMP = "\u00e9\u00fc\u00df\u00f1\u00bf\u03a9\u0436\u0905\u4e2d\u6587\ud55c\u20ac\uffee\u00a0"
CHARS_ASTRAL = "\U0001f600\U0001d11e\U00010348\U0001f004\U0010fffd"


def is_int(p):
    return p.startswith(("int", "uint"))


def is_float(p):
    return p.startswith("float")


def is_complex(p):
    return p.startswith("complex")


# ---------------------------------------------------------------- values


def float_candidates(ftype, n, rr, nrg, ties=None):
    """n values representable in float type `ftype` (a numpy dtype name):
    specials, random bit patterns, ordinary numbers and values next to the
    rounding ties of narrower float types (of `ties` more often, when
    given: the type a cast narrows to)."""
    dt = np.dtype(ftype)
    fi = np.finfo(dt)
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.0, -1.0, 0.5, -0.5, 1.5,
                2.5, -2.5, float(fi.max), -float(fi.max), float(fi.tiny), -float(fi.tiny),
                float(fi.smallest_subnormal), -float(fi.smallest_subnormal),
                float(fi.tiny) / 2, 65504.0, 65519.0, 65520.0, -65520.0, 2049.0]
    bits = nrg.integers(0, 256, size=n * dt.itemsize, dtype=np.uint8).view(dt)
    out = []
    for i in range(n):
        r = rr.random()
        if r < 0.2:
            v = rr.choice(specials)
        elif r < 0.45:
            v = float(bits[i])
        elif r < 0.65:
            v = rr.uniform(-1000, 1000) if rr.random() < 0.7 else rr.uniform(-1, 1)
        elif r < 0.75 - (0.25 if ties else 0):
            v = rr.choice([-1, 1]) * 2.0 ** rr.uniform(-30, 70)
        else:
            v = tie_value(ftype, rr, ties)
        out.append(v)
    with np.errstate(all="ignore"):
        a = np.array(out, dtype=np.float64).astype(dt)
    # Canonical quiet NaNs, keeping the sign.
    nan = np.isnan(a)
    a[nan] = np.where(np.signbit(a[nan]), -np.nan, np.nan).astype(dt)
    return a


def tie_value(ftype, rr, narrow=None):
    """A value at, just below or just above a rounding tie of float16 (or,
    for a float64 source, float32), in `ftype`'s precision."""
    if narrow is None or rr.random() < 0.2:
        narrow = "float32" if ftype == "float64" and rr.random() < 0.4 else "float16"
    if narrow == "float16":
        h = rr.randrange(0, 0x7BFF)
        lo = float(np.array([h], np.uint16).view(np.float16)[0])
        hi = float(np.array([h + 1], np.uint16).view(np.float16)[0])
    else:
        h = rr.randrange(0, 0x7F7FFFFF)
        lo = float(np.array([h], np.uint32).view(np.float32)[0])
        hi = float(np.array([h + 1], np.uint32).view(np.float32)[0])
    with np.errstate(all="ignore"):
        t = np.array([(lo + hi) / 2], np.dtype(ftype))[0]
    step = rr.choice([0, 1, -1, 1, -1, 2])
    for _ in range(abs(step)):
        t = np.nextafter(t, np.inf if step > 0 else -np.inf)
    return float(t) * rr.choice([1, -1])


def int_range(p):
    ii = np.iinfo(np.dtype(p))
    return int(ii.min), int(ii.max)


def fit_for_int(a, target, rr):
    """Replaces values of float array `a` whose conversion to integer type
    `target` is platform-defined in numpy (NaN, infinities, truncation out
    of range) by values whose truncation is in range."""
    lo, hi = int_range(target)
    fmax = float(np.finfo(a.dtype).max)
    near = [lo - 0.75, hi + 0.75, lo + 0.5, hi - 0.5, -0.75, 0.999, -0.999, 0.0]
    with np.errstate(all="ignore"):
        for i in range(len(a)):
            v = float(a[i])
            while not (np.isfinite(v) and lo <= int(np.trunc(v)) <= hi):
                if rr.random() < 0.5:
                    c = rr.choice(near)
                else:
                    c = rr.uniform(max(lo, -fmax), min(hi, fmax))
                v = float(np.array([c], a.dtype)[0])
            a[i] = v
    return a


def f32_tie_int(p, rr):
    """A 64-bit integer just above a float32 tie, by less than half a
    float64 step: converting through float64 first rounds it onto the tie
    and then to even, which is wrong when the lower neighbour is even."""
    smax = 39 if p == "int64" else 40
    s = rr.randrange(31, smax + 1)
    m = rr.randrange(1 << 23, 1 << 24)
    small = rr.randrange(1, 1 << (s - 30))
    v = (m << s) | (1 << (s - 1)) | small
    if p == "int64" and rr.random() < 0.5:
        v = -v
    return v


def int_values(p, n, rr, nrg, narrow_target=False):
    dt = np.dtype(p)
    a = nrg.integers(0, 256, size=n * dt.itemsize, dtype=np.uint8).view(dt).copy()
    lo, hi = int_range(p)
    specials = [0, 1, lo, hi, 65504, 65519, 65520, 2049, 16777217, (1 << 53) + 1,
                (1 << 60) + (1 << 36) + 1, -1, -2049, -65520]
    specials = [v for v in specials if lo <= v <= hi]
    for i in range(n):
        r = rr.random()
        if r < 0.25:
            a[i] = rr.choice(specials)
        elif r < (0.6 if narrow_target else 0.4) and dt.itemsize == 8:
            a[i] = f32_tie_int(p, rr)
        elif r < 0.55:
            a[i] = rr.randint(max(lo, -300), min(hi, 300))
    return a


def values(p, n, target, rr, nrg):
    """n values of primitive p (native order) for a cast to `target`."""
    if p == "bool":
        return nrg.integers(0, 2, size=n).astype(np.bool_)
    narrow = {"float16": "float16", "float32": "float32", "complex64": "float32"}.get(target)
    if narrow == "float32" and p in ("float32", "complex64"):
        narrow = None
    if is_int(p):
        return int_values(p, n, rr, nrg, narrow == "float32")
    if is_float(p):
        a = float_candidates(p, n, rr, nrg, narrow)
        if target is not None and is_int(target):
            a = fit_for_int(a, target, rr)
        return a
    part = FLOAT_OF_COMPLEX[p]
    re = float_candidates(part, n, rr, nrg, narrow)
    im = float_candidates(part, n, rr, nrg, narrow)
    if target is not None and is_int(target):
        re = fit_for_int(re, target, rr)
    if target == "bool":
        # numpy: true if either part is non-zero.
        for i in range(n):
            if rr.random() < 0.3:
                re[i] = rr.choice([0.0, -0.0])
    a = np.empty(n, np.dtype(p))
    a.real = re
    a.imag = im
    return a


# ---------------------------------------------------------------- array cases


def rand_shape(rr):
    nd = rr.choices([0, 1, 2, 3, 4], weights=[1, 3, 3, 2, 1])[0]
    while True:
        shape = [0 if rr.random() < 0.04 else rr.randint(1, 6) for _ in range(nd)]
        if int(np.prod(shape)) <= 160:
            return shape


def rand_misalign(p, rr):
    a = ALIGN[p]
    r = rr.random()
    if r < 0.45:
        return 0
    if r < 0.55:
        return 16 * rr.randint(1, 2)  # aligned, non-zero
    if a == 1:
        return rr.randint(1, 7)
    return rr.choice([k for k in range(1, 2 * a) if k % a])


def factor_shape(total, rr):
    """A random shape with `total` elements (with some 1s)."""
    if total == 0:
        shape = [rr.randint(1, 4) for _ in range(rr.randint(0, 2))]
        shape.insert(rr.randint(0, len(shape)), 0)
        return shape
    primes, n, d = [], total, 2
    while n > 1:
        while n % d == 0:
            primes.append(d)
            n //= d
        d += 1
    rr.shuffle(primes)
    shape = []
    for f in primes:
        if shape and rr.random() < 0.5:
            shape[-1] *= f
        else:
            shape.append(f)
    for _ in range(rr.choice([0, 0, 1, 2])):
        shape.insert(rr.randint(0, len(shape)), 1)
    return shape


def rand_bound(n, rr):
    if rr.random() < 0.25:
        return None
    return rr.randint(-n - 3, n + 3)


def rand_op(a, rr):
    nd = a.ndim
    weights = [2, 5, 1, 2, 3] if nd else [0.1, 0.2, 1, 1, 3]
    kind = rr.choices(["index", "view", "transpose", "permute", "reshape"], weights)[0]
    if kind == "index":
        n = a.shape[0] if nd else 0
        if rr.random() < 0.85 and n > 0:
            i = rr.randint(-n, n - 1)
        else:
            i = rr.choice([n, n + 1, -n - 1, -n - 3, 7])
        return {"op": "index", "i": i}
    if kind == "view":
        k = rr.randint(0, nd) if rr.random() < 0.95 else nd + 1
        idx = []
        for d in range(k):
            n = a.shape[d] if d < nd else 1
            if rr.random() < 0.3:
                i = rr.randint(-n, n - 1) if n and rr.random() < 0.9 else rr.choice([n, -n - 1])
                idx.append({"at": i})
            else:
                step = rr.choice([1, 1, 1, 2, 3, -1, -1, -2, -3, 5])
                if rr.random() < 0.01:
                    step = 0
                idx.append({"slice": [rand_bound(n, rr), rand_bound(n, rr), step]})
        return {"op": "view", "indices": idx}
    if kind == "transpose":
        return {"op": "transpose"}
    if kind == "permute":
        order = list(range(nd))
        rr.shuffle(order)
        r = rr.random()
        if r < 0.04 and nd > 0:
            order[rr.randrange(nd)] = nd  # out of range
        elif r < 0.08 and nd > 1:
            order[0] = order[1]  # repeated
        elif r < 0.1:
            order.append(nd)  # too long
        return {"op": "permute", "order": order}
    total = int(np.prod(a.shape))
    if rr.random() < 0.07:
        total += rr.randint(1, 3)
    return {"op": "reshape", "shape": factor_shape(total, rr)}


def apply_op(a, op):
    """numpy's result of `op`; raises KeyError("<category>") on an error."""
    kind = op["op"]
    try:
        if kind == "index":
            return a[op["i"], ...]
        if kind == "view":
            idx = tuple(x["at"] if "at" in x else slice(*x["slice"]) for x in op["indices"])
            return a[idx + (Ellipsis,)]
        if kind == "transpose":
            return a.T
        if kind == "permute":
            return np.transpose(a, op["order"])
        v = a.view()
        v.shape = tuple(op["shape"])
        return v
    except (IndexError, ValueError, TypeError, AttributeError):
        raise KeyError("reshape" if kind == "reshape" else "index")


def element_text(p, big):
    if big and np.dtype(p).itemsize > 1:
        return f"big_endian[{p}]"
    return p


def array_case(cid, rr, nrg, pairs):
    """An array case (even ids); casts take the next (source, target) pair
    of `pairs`, so that every pair comes up about equally often."""
    if rr.random() < 0.75:
        p, cast = pairs[(cid // 2) % len(pairs)]
    else:
        p, cast = rr.choice(PRIMITIVES), None
    big = rr.random() < 0.5 and np.dtype(p).itemsize > 1
    shape = rand_shape(rr)
    n = int(np.prod(shape))
    native = values(p, n, cast, rr, nrg)
    dt = np.dtype(p).newbyteorder(">") if big else np.dtype(p)
    data = native.astype(dt).tobytes()
    misalign = rand_misalign(p, rr)
    buf = bytes(misalign) + data
    if n:
        a = np.frombuffer(buf, dtype=dt, count=n, offset=misalign).reshape(shape)
    else:
        a = np.zeros(shape, dt)
    ops, expect = [], None
    for _ in range(rr.choice([0, 1, 1, 2, 2, 3, 4])):
        op = rand_op(a, rr)
        ops.append(op)
        try:
            a = apply_op(a, op)
        except KeyError as e:
            expect = {"error": e.args[0]}
            break
    if expect is None:
        out = a
        if cast is not None:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                out = a.astype(np.dtype(cast), casting="unsafe")
        expect = {"shape": list(a.shape), "strides": list(a.strides),
                  "bytes": out.tobytes(order="C").hex()}
    return {"id": cid, "kind": "array", "element": element_text(p, big), "shape": shape,
            "misalign": misalign, "data": data.hex(), "ops": ops, "cast": cast,
            "expect": expect}


# ---------------------------------------------------------------- string cases


class Bad(Exception):
    """A string the rules reject (category "encoding")."""


def strip_units(raw, unit):
    end = len(raw)
    while end >= unit and raw[end - unit:end] == bytes(unit):
        end -= unit
    return raw[:end]


def decode(raw, enc):
    raw = strip_units(raw, UNIT[enc])
    if enc == "ucs2":
        units = [int.from_bytes(raw[i:i + 2], "little") for i in range(0, len(raw), 2)]
        if any(0xD800 <= u < 0xE000 for u in units):
            raise Bad("surrogate in ucs2")
    try:
        return raw.decode(CODEC[enc])
    except UnicodeDecodeError as e:
        raise Bad(str(e))


def encode(text, enc, size):
    if enc == "ucs2" and any(ord(c) > 0xFFFF for c in text):
        raise Bad("not in the BMP")
    try:
        b = text.encode(CODEC[enc])
    except UnicodeEncodeError as e:
        raise Bad(str(e))
    if size is None:
        return b
    if len(b) > size:
        raise Bad("does not fit")
    return b + bytes(size - len(b))


def rand_text(rr, units):
    r = rr.random()
    pool = CHARS_ASCII
    if r > 0.35:
        pool += CHARS_BMP
    if r > 0.7:
        pool += CHARS_ASTRAL
    text = "".join(rr.choice(pool) for _ in range(rr.randint(0, units)))
    if len(text) > 2 and rr.random() < 0.05:
        i = rr.randrange(1, len(text) - 1)
        text = text[:i] + "\0" + text[i + 1:]
    return text


def source_element(enc, size, rr):
    """The bytes of one valid source element (text that fits)."""
    text = rand_text(rr, size // UNIT[enc] + 1)
    while True:
        text = text.rstrip("\0")
        try:
            return encode(text, enc, size)
        except Bad:
            text = text[:-1] if rr.random() < 0.7 else "".join(
                c for c in text if c in CHARS_ASCII)


def invalid_element(enc, size, rr):
    """Bytes that are not valid text in `enc`, in an element of `size` bytes."""
    bad = {
        "ascii": [b"\x80", b"\xff", b"a\xe9"],
        "utf8": [b"\xff", b"\xc0\x80", b"\xe4\xb8", b"\x80", b"\xed\xa0\x80", b"a\xf4\x90\x80\x80"],
        "utf16": [b"\x00\xd8", b"\x00\xdc", b"\x00\xd8a\x00"],
        "ucs2": [b"\x00\xd8", b"\x3d\xd8\x00\xde", b"\x00\xdc"],
        "utf32": [b"\x00\x00\x11\x00", b"\x00\xd8\x00\x00", b"\xff\xff\xff\xff"],
    }[enc]
    b = [x for x in bad if len(x) <= size]
    if not b:
        return None
    return rr.choice(b).ljust(size, b"\0")


def string_type(size, enc):
    return f"string[{size}, '{enc}']"


def string_case(cid, rr):
    e1, e2 = rr.choice(ENCODINGS), rr.choice(ENCODINGS)
    s1 = UNIT[e1] * rr.randint(1, 10)
    n = rr.choice([0, 1, 2, 3, 4, 5, 6])
    elems = [source_element(e1, s1, rr) for _ in range(n)]
    if n and rr.random() < 0.1:
        bad = invalid_element(e1, s1, rr)
        if bad is not None:
            elems[rr.randrange(n)] = bad
    # Mostly a target size the text fits in (exactly, or with room).
    s2 = UNIT[e2] * rr.randint(1, 10)
    if rr.random() < 0.75:
        try:
            need = max([len(encode(decode(e, e1), e2, None)) for e in elems], default=0)
            s2 = max(UNIT[e2], need) + UNIT[e2] * rr.choice([0, 0, 1, 3])
        except Bad:
            pass
    r = rr.random()
    if r < 0.5:
        misalign = 0
    elif UNIT[e1] == 1:
        misalign = rr.randint(1, 7)
    else:
        misalign = rr.choice([k for k in range(1, 2 * UNIT[e1]) if k % UNIT[e1]])
    try:
        out = b"".join(encode(decode(e, e1), e2, s2) for e in elems)
        expect = {"bytes": out.hex()}
    except Bad:
        expect = {"error": "encoding"}
    return {"id": cid, "kind": "string", "from": string_type(s1, e1),
            "to": string_type(s2, e2), "misalign": misalign, "shape": [n],
            "data": b"".join(elems).hex(), "expect": expect}


# ---------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=20240531)
    ap.add_argument("--cases", type=int, default=3000)
    ap.add_argument("--out", default="-")
    args = ap.parse_args()
    if sys.byteorder != "little":
        sys.exit("numpy_diff.py: the expectations assume a little-endian host")
    rr = random.Random(args.seed)
    nrg = np.random.default_rng(args.seed)
    out = sys.stdout if args.out == "-" else open(args.out, "w", encoding="utf-8")
    pairs = [(p, t) for p in PRIMITIVES for t in PRIMITIVES]
    rr.shuffle(pairs)
    kinds = {"array": 0, "string": 0}
    errors = 0
    for cid in range(args.cases):
        # Alternate kinds: an even spread.
        if cid % 2 == 0:
            case = array_case(cid, rr, nrg, pairs)
        else:
            case = string_case(cid, rr)
        kinds[case["kind"]] += 1
        errors += "error" in case["expect"]
        out.write(json.dumps(case, separators=(",", ":")) + "\n")
    if out is not sys.stdout:
        out.close()
    print(f"numpy_diff.py: {args.cases} cases (seed {args.seed}, numpy {np.__version__}): "
          f"{kinds['array']} array, {kinds['string']} string, {errors} expecting an error",
          file=sys.stderr)


if __name__ == "__main__":
    main()
