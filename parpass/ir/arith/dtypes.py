"""Dtypes as the arithmetic analyzer sees them: integer widths and ranges, wrapping, and node dtypes.

Integer arithmetic wraps like C (two's complement), so the analyzer needs each
integer dtype's width and range; :data:`STEP_DTYPE` gives a node's dtype from
its operands' dtypes during the analyzer's bottom-up walk.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from parpass.ir.dtype import INT_BITS, INT_RANGE, split_vector, vector_dtype
from parpass.ir.tir import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    Broadcast,
    BufferLoad,
    Call,
    Cast,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    Not,
    Or,
    Ramp,
    Select,
    Sub,
    Var,
)

__all__ = [
    "BINARIES",
    "BINARY_SET",
    "COMPARES",
    "FLOAT_DTYPES",
    "INT_BITS",
    "INT_RANGE",
    "STEP_DTYPE",
    "Interval",
    "is_vector",
    "not_loop_level",
    "wrap",
]

#: Inclusive bounds ``(lo, hi)`` of an integer value.
Interval = tuple[int, int]

FLOAT_DTYPES = frozenset({"float16", "float32", "float64"})

COMPARES = (EQ, NE, LT, LE, GT, GE)
BINARIES = (Add, Sub, Mul, FloorDiv, FloorMod, Min, Max, EQ, NE, LT, LE, GT, GE, And, Or)
BINARY_SET = frozenset(BINARIES)


def wrap(value: int, dtype: str) -> int:
    """``value`` reduced into the range of integer ``dtype`` (two's complement)."""
    bits, signed = INT_BITS[dtype]
    v = value & ((1 << bits) - 1)
    if signed and v >> (bits - 1):
        v -= 1 << bits
    return v


def is_vector(dtype: str) -> bool:
    """Whether ``dtype`` names lanes, one lane included (the analyzer's Ramp and Broadcast dtypes keep ``x1``)."""
    return "x" in dtype


# One step of the dtype of each kind of node, from the node and its operands' dtypes.


def _own_dtype(node: Any, kid_dtypes: list[str]) -> str:
    return str(node.dtype)


def _first_operand(node: Any, kid_dtypes: list[str]) -> str:
    return kid_dtypes[0]


def _compare_dtype(node: Any, kid_dtypes: list[str]) -> str:
    return vector_dtype("bool", split_vector(kid_dtypes[0])[1])


def _select_dtype(node: Any, kid_dtypes: list[str]) -> str:
    return kid_dtypes[1]


def _cast_dtype(node: Any, kid_dtypes: list[str]) -> str:
    base, lanes = split_vector(node.dtype)
    return vector_dtype(base, max(lanes, split_vector(kid_dtypes[0])[1]))


def _ramp_dtype(node: Any, kid_dtypes: list[str]) -> str:
    return f"{kid_dtypes[0]}x{node.lanes}"


def _broadcast_dtype(node: Any, kid_dtypes: list[str]) -> str:
    base, lanes = split_vector(kid_dtypes[0])
    return f"{base}x{lanes * node.lanes}"


def _load_dtype(node: Any, kid_dtypes: list[str]) -> str:
    lanes = 1
    for d in kid_dtypes:
        lanes = max(lanes, split_vector(d)[1])
    return vector_dtype(node.buffer.dtype, lanes)


#: The dtype of a node from the node and its operands' dtypes, by kind of node.
STEP_DTYPE: dict[type, Callable[[Any, list[str]], str]] = {
    IntImm: _own_dtype,
    FloatImm: _own_dtype,
    Var: _own_dtype,
    Call: _own_dtype,
    **{kind: _first_operand for kind in BINARIES},
    **{kind: _compare_dtype for kind in COMPARES},
    Not: _first_operand,
    Select: _select_dtype,
    Cast: _cast_dtype,
    Ramp: _ramp_dtype,
    Broadcast: _broadcast_dtype,
    BufferLoad: _load_dtype,
}


def not_loop_level(node: Any) -> TypeError:
    """The error for a node the analyzer does not know (it has no dtype step)."""
    return TypeError(f"Simplify: {type(node).__name__} is not a loop-level expression")
