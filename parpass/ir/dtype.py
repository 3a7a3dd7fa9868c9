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
