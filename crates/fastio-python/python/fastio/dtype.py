"""Datashape types (the `dtype` crate) and their numpy dtypes."""

from __future__ import annotations

import numpy as np

from . import _native


def parse(text: str) -> str:
    """The canonical datashape text of ``text`` (raises ValueError)."""
    return _native.dtype_parse(text)[0]


def to_numpy(text: str) -> np.dtype:
    """The numpy dtype of a scalar datashape type (``big_endian[int32]``
    gives ``>i4``)."""
    return np.dtype(_native.dtype_parse(text)[1])
