"""Values of the loop-level machine: numpy scalars of their dtype, and 1-D lane arrays for vectors.

Their dtype names, how they show in messages, and the numeric rules TIR defines
beyond numpy's (floor division of floats, the intrinsics).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from parpass.ir.dtype import dtype_name, element_dtype
from parpass.ir.well_formed import INTRINSICS

_NP_DTYPES: dict[str, np.dtype[Any]] = {}


def np_element_dtype(dtype: str) -> np.dtype[Any]:
    """The numpy dtype of the elements of IR dtype ``dtype`` (``"int32x4"`` -> int32), from a cache."""
    try:
        return _NP_DTYPES[dtype]
    except KeyError:
        found = _NP_DTYPES[dtype] = np.dtype(element_dtype(dtype))
        return found


def value_dtype(value: Any) -> str:
    """The IR dtype of a runtime value: ``"int32"`` for a scalar, ``"int32x4"`` for a lane array.

    A 1-lane array is ``"int32x1"``, not ``"int32"`` (which :func:`parpass.ir.dtype.vector_dtype`
    would give): a 1-lane vector is not a scalar to this machine's checks.
    """
    if isinstance(value, np.ndarray):
        return f"{dtype_name(value.dtype)}x{value.shape[0]}"
    return dtype_name(value.dtype)


def same_dtype(a: Any, b: Any) -> bool:
    """Whether two operands have the same dtype, lanes included."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return bool(a.dtype == b.dtype and a.shape == b.shape)
    return True


def show(value: Any) -> str:
    """A value as a message shows it: ``3``, ``[0, 1, 2, 3]``."""
    if isinstance(value, np.ndarray):
        return "[" + ", ".join(str(v) for v in value.tolist()) + "]"
    if isinstance(value, np.generic):
        return str(value.item())
    return str(value)


def float_floordiv(a: Any, b: Any) -> Any:
    """TVM's ``FloorDiv`` of floats: ``floor(a / b)``."""
    return np.floor(a / b)


def float_floormod(a: Any, b: Any) -> Any:
    """TVM's ``FloorMod`` of floats: ``a - floor(a / b) * b``."""
    return a - np.floor(a / b) * b


def _sigmoid(x: Any) -> Any:
    one = x.dtype.type(1)
    return one / (one + np.exp(-x))


def _rsqrt(x: Any) -> Any:
    return x.dtype.type(1) / np.sqrt(x)


#: Implementations of :data:`~parpass.ir.well_formed.INTRINSICS`, on numpy scalars or lane arrays.
INTRINSIC_IMPL: dict[str, Callable[..., Any]] = {
    "exp": np.exp,
    "exp2": np.exp2,
    "log": np.log,
    "log2": np.log2,
    "log10": np.log10,
    "sqrt": np.sqrt,
    "rsqrt": _rsqrt,
    "tanh": np.tanh,
    "sin": np.sin,
    "cos": np.cos,
    "fabs": np.abs,
    "abs": np.abs,
    "floor": np.floor,
    "ceil": np.ceil,
    "round": np.rint,
    "trunc": np.trunc,
    "sigmoid": _sigmoid,
    "pow": np.power,
}
assert set(INTRINSIC_IMPL) == set(INTRINSICS), "every known intrinsic needs an implementation"
