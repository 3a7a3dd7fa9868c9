"""Dtype names of numpy arrays, cached.

``str(arr.dtype)`` is computed in Python by numpy on every call, which is a
noticeable share of constant folding and interpretation; dtype objects are
hashable and few, so their names are cached here.
"""

from __future__ import annotations

from typing import Any

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
