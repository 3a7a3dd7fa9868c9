"""Runtime values of the interpreter: how they are described, checked against types, copied and keyed.

A value is a numpy array (0-d for a ``PrimType``), or a tuple of values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from parpass.ir.builtin_ops import format_type  # importing it registers the standard ops
from parpass.ir.dtype import dtype_name
from parpass.ir.types import PrimType, TensorType, TupleType, Type

Value = Any  # a numpy array, or a tuple of values

#: Marks a variable with no value in an environment lookup (distinct from every runtime value).
MISSING = object()

# A work item of the coercion: (value, type, path, container list, slot in container).
_CoerceItem = tuple[Value, Type, str, list[Value], int]


def describe(value: Value) -> str:
    """A short description of a runtime value for error messages."""
    if isinstance(value, tuple):
        return f"a tuple of {len(value)} fields"
    if isinstance(value, np.ndarray):
        return f"an array of shape {tuple(value.shape)} and dtype {value.dtype}"
    if isinstance(value, np.generic):
        return f"a numpy {value.dtype} scalar"
    text = repr(value)
    return f"a {type(value).__name__} ({text if len(text) <= 60 else text[:57] + '...'})"


def coerce(value: Value, ty: Type, what: str) -> tuple[Value, str | None]:
    """``value`` checked against ``ty`` and converted to the interpreter's form.

    Returns ``(converted, None)`` or ``(None, problem)``. Arrays are copied and made
    read-only, so an evaluation rule can never change the caller's data.
    """
    out: list[Value] = [None]
    stack: list[_CoerceItem] = [(value, ty, what, out, 0)]
    while stack:
        val, t, path, holder, slot = stack.pop()
        if isinstance(t, TupleType):
            problem = _open_tuple(val, t, path, holder, slot, stack)
        else:
            holder[slot], problem = _coerce_leaf(val, t, path)
        if problem is not None:
            return None, problem
    return freeze(out[0]), None


def _open_tuple(
    val: Value, t: TupleType, path: str, holder: list[Value], slot: int, stack: list[_CoerceItem]
) -> str | None:
    """Check ``val`` is a tuple of ``t``'s arity; put a list for its fields in the slot and queue the fields."""
    if isinstance(val, list):
        val = tuple(val)
    if not isinstance(val, tuple):
        return f"{path}: expected a tuple of {len(t.fields)} fields for {format_type(t)}, got {describe(val)}"
    if len(val) != len(t.fields):
        return f"{path}: expected a tuple of {len(t.fields)} fields for {format_type(t)}, got {len(val)}"
    fields: list[Value] = [None] * len(val)
    holder[slot] = fields  # converted to a tuple by freeze
    for k in range(len(val) - 1, -1, -1):
        stack.append((val[k], t.fields[k], f"{path}[{k}]", fields, k))
    return None


def _coerce_leaf(val: Value, t: Type, path: str) -> tuple[Value, str | None]:
    """A tensor or scalar value checked against ``t``: a read-only copy, or a problem."""
    if isinstance(t, PrimType):
        shape: tuple[int, ...] = ()
    elif isinstance(t, TensorType):
        shape = tuple(t.shape)
    else:
        return None, f"{path}: parameter type {format_type(t)} is not a type"
    if isinstance(val, (bool, int, float)) and not isinstance(val, np.generic) and isinstance(t, PrimType):
        val, problem = _python_scalar(val, t, path)
        if problem is not None:
            return None, problem
    elif isinstance(val, np.generic):
        val = np.array(val)
    if not isinstance(val, np.ndarray):
        return None, f"{path}: expected a numpy array for {format_type(t)}, got {describe(val)}"
    if dtype_name(val.dtype) != t.dtype or tuple(val.shape) != shape:
        return None, f"{path}: expected {format_type(t)}, got {describe(val)}"
    arr = np.array(val, copy=True)
    arr.flags.writeable = False
    return arr, None


def _python_scalar(val: bool | int | float, t: PrimType, path: str) -> tuple[Value, str | None]:
    """A Python number as a 0-d array of ``t``'s dtype, or a problem (a float for an integer, out of range)."""
    want = np.dtype(t.dtype)
    if isinstance(val, float) and want.kind in "biu":
        return None, f"{path}: expected {format_type(t)}, got the float {val!r}"
    try:
        return np.array(val, dtype=want), None
    except (OverflowError, ValueError) as exc:
        return None, f"{path}: {val!r} does not fit {format_type(t)} ({exc})"


def freeze(value: Value) -> Value:
    """Nested lists (from :func:`coerce`) as nested tuples, without recursion."""
    if not isinstance(value, list):
        return value
    # Post-order: convert the innermost lists first.
    order: list[list[Value]] = []
    stack = [value]
    while stack:
        item = stack.pop()
        order.append(item)
        stack.extend(v for v in item if isinstance(v, list))
    done: dict[int, tuple[Value, ...]] = {}
    for item in reversed(order):
        done[id(item)] = tuple(done[id(v)] if isinstance(v, list) else v for v in item)
    return done[id(value)]


def is_bool_scalar(value: Value) -> bool:
    """Whether ``value`` is a boolean scalar (an ``If`` condition)."""
    return isinstance(value, (np.ndarray, np.generic)) and value.shape == () and value.dtype == np.bool_


def value_key(values: Sequence[Value]) -> tuple[Any, ...]:
    """A hashable key of runtime values: dtype, shape and bytes of every array, tuples kept as tuples."""
    out: list[Any] = []
    stack: list[Any] = list(reversed(values))
    while stack:
        value = stack.pop()
        if isinstance(value, tuple):
            out.append(("(", len(value)))
            stack.extend(reversed(value))
        else:
            arr = np.asarray(value)
            out.append((arr.dtype.str, arr.shape, arr.tobytes()))
    return tuple(out)


def copy_value(value: Any) -> Any:
    """A copy of an argument value whose arrays the callee may change without touching ``value``'s."""
    if isinstance(value, tuple):
        return tuple(copy_value(v) for v in value)  # tuple parameters are shallow
    if isinstance(value, np.ndarray):
        return value.copy()
    return value
