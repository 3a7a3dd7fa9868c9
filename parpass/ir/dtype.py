"""Dtype names: numpy's names cached, vector dtypes, and the integer dtypes' widths and ranges.

``str(arr.dtype)`` is computed in Python by numpy on every call, which is a
noticeable share of constant folding and interpretation; dtype objects are
hashable and few, so their names are cached here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: The integer dtypes of the IR (numpy names), signed then unsigned.
INT_DTYPE_NAMES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
#: Integer dtype -> (bits, signed).
INT_BITS: dict[str, tuple[int, bool]] = {d: (np.iinfo(d).bits, np.iinfo(d).min < 0) for d in INT_DTYPE_NAMES}
#: Integer dtype -> the inclusive range ``(lo, hi)`` of its values.
INT_RANGE: dict[str, tuple[int, int]] = {d: (int(np.iinfo(d).min), int(np.iinfo(d).max)) for d in INT_DTYPE_NAMES}

_NAMES: dict[Any, str] = {}


def dtype_name(dtype: Any) -> str:
    """``str(dtype)`` of a numpy dtype (``"float32"``), from a cache."""
    try:
        return _NAMES[dtype]
    except KeyError:
        name = _NAMES[dtype] = str(dtype)
        return name


def split_vector(dtype: str) -> tuple[str, int]:
    """``"int32x4"`` -> ``("int32", 4)``; a scalar dtype -> ``(dtype, 1)`` (so does one whose lanes are not
    a number: well-formedness and the parser reject it by its unknown base)."""
    base, sep, lanes = dtype.partition("x")
    if sep and lanes.isascii() and lanes.isdigit():
        return base, int(lanes)
    return dtype, 1


def element_dtype(dtype: str) -> str:
    """The scalar dtype of the elements of ``dtype`` (``"int32x4"`` -> ``"int32"``)."""
    return split_vector(dtype)[0]


def lanes_of(dtype: str) -> int:
    """The number of lanes of ``dtype`` (1 for a scalar)."""
    return split_vector(dtype)[1]


def vector_dtype(base: str, lanes: int) -> str:
    """The dtype of ``lanes`` elements of scalar dtype ``base`` (``base`` itself for one lane)."""
    return base if lanes == 1 else f"{base}x{lanes}"
