"""TVM/CVM parameter files.

``load(path)`` maps the file once and gives every tensor as a read-only
numpy array over the map, in file order (zero copy: pages are read when
touched; TVM's loader copies everything). ``save(path, mapping)`` writes
the layout of TVM's ``save_param_dict``, byte for byte, atomically.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from . import _native


def load(path) -> dict[str, np.ndarray]:
    """Every tensor of the file at ``path`` as a read-only numpy view."""
    out: dict[str, np.ndarray] = {}
    for name, buf, _element, _shape in _native.params_load(str(path)):
        out[name] = buf.numpy()
    return out


def save(path, mapping: Mapping[str, np.ndarray]) -> int:
    """Writes ``mapping`` (names to arrays, in its order) to ``path``;
    returns the file's size."""
    tensors = []
    for name, value in mapping.items():
        arr = np.asarray(value)  # keeps 0-d arrays 0-d (ascontiguousarray does not)
        if not arr.flags.c_contiguous:
            arr = arr.copy(order="C")
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        tensors.append((str(name), arr.dtype.name, list(arr.shape), arr.tobytes()))
    return _native.params_save(str(path), tensors)
