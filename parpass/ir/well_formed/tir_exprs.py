"""The dtype rules of loop-level expressions: what dtype an operator gives its operands' dtypes.

A rule takes a node and the dtypes of its operands (None where unknown after a
problem) and returns the node's dtype, None when it cannot be known, or raises
:class:`DtypeProblem` saying what is wrong. Leaves (immediates, variables) and
buffer loads depend on the checker's scopes and are checked by it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from parpass.ir import tir
from parpass.ir.dtype import split_vector, vector_dtype
from parpass.ir.well_formed.common import INT_DTYPES, KNOWN_DTYPES

__all__ = ["DTYPE_RULES", "INTRINSICS", "DtypeProblem", "DtypeRule"]

#: Intrinsics a loop-level ``Call`` may name, with their arity. The reference
#: interpreter implements exactly these; all are pure and dtype-preserving.
INTRINSICS: dict[str, int] = {
    "exp": 1,
    "exp2": 1,
    "log": 1,
    "log2": 1,
    "log10": 1,
    "sqrt": 1,
    "rsqrt": 1,
    "tanh": 1,
    "sin": 1,
    "cos": 1,
    "fabs": 1,
    "abs": 1,
    "floor": 1,
    "ceil": 1,
    "round": 1,
    "trunc": 1,
    "sigmoid": 1,
    "pow": 2,
}

_ARITH = (tir.Add, tir.Sub, tir.Mul, tir.FloorDiv, tir.FloorMod, tir.Min, tir.Max)
_CMP = (tir.EQ, tir.NE, tir.LT, tir.LE, tir.GT, tir.GE)

Dtype = str | None
DtypeRule = Callable[[Any, list[Dtype]], Dtype]


class DtypeProblem(Exception):
    """An expression whose operands do not fit its operator; the message says how."""


def _operands(node: Any, kids: list[Dtype]) -> Dtype:
    """The common dtype of a binary operator's operands (None if one is unknown)."""
    a, b = kids
    if a is None or b is None:
        return None
    if a != b:
        raise DtypeProblem(f"operands of {type(node).__name__} have different dtypes: {a} and {b}")
    return a


def _arith(node: Any, kids: list[Dtype]) -> Dtype:
    dtype = _operands(node, kids)
    if dtype is not None and split_vector(dtype)[0] == "bool":
        raise DtypeProblem(f"{type(node).__name__} of bool operands")
    return dtype


def _compare(node: Any, kids: list[Dtype]) -> Dtype:
    dtype = _operands(node, kids)
    return None if dtype is None else vector_dtype("bool", split_vector(dtype)[1])


def _logical(node: Any, kids: list[Dtype]) -> Dtype:
    dtype = _operands(node, kids)
    if dtype is not None and split_vector(dtype)[0] != "bool":
        raise DtypeProblem(f"{type(node).__name__} needs bool operands, got {dtype}")
    return dtype


def _not(node: tir.Not, kids: list[Dtype]) -> Dtype:
    (a,) = kids
    if a is not None and split_vector(a)[0] != "bool":
        raise DtypeProblem(f"Not needs a bool operand, got {a}")
    return a


def _select(node: tir.Select, kids: list[Dtype]) -> Dtype:
    cond, t, f = kids
    if cond is None or t is None or f is None:
        return None
    if t != f:
        raise DtypeProblem(f"Select values have different dtypes: {t} and {f}")
    cbase, clanes = split_vector(cond)
    if cbase != "bool" or clanes not in (1, split_vector(t)[1]):
        raise DtypeProblem(f"Select condition must be bool (of the values' lanes), got {cond}")
    return t


def _cast(node: tir.Cast, kids: list[Dtype]) -> Dtype:
    (value,) = kids
    base, lanes = split_vector(node.dtype)
    if base not in KNOWN_DTYPES:
        raise DtypeProblem(f"Cast to unknown dtype {node.dtype!r}")
    if value is None:
        return None
    value_lanes = split_vector(value)[1]
    if lanes != value_lanes and lanes != 1:
        raise DtypeProblem(f"Cast of {value} to {node.dtype} changes the number of lanes")
    return vector_dtype(base, value_lanes)


def _call(node: tir.Call, kids: list[Dtype]) -> Dtype:
    arity = INTRINSICS.get(node.op)
    if arity is None:
        raise DtypeProblem(f"call of unknown intrinsic {node.op!r}; known: {', '.join(sorted(INTRINSICS))}")
    if len(kids) != arity:
        raise DtypeProblem(f"intrinsic {node.op!r} takes {arity} argument(s), got {len(kids)}")
    for k, dtype in enumerate(kids):
        if dtype is not None and dtype != node.dtype:
            raise DtypeProblem(f"argument {k} of intrinsic {node.op!r} is {dtype}, the call is {node.dtype}")
    return str(node.dtype)


def _check_lanes(node: tir.Ramp | tir.Broadcast) -> None:
    if not isinstance(node.lanes, int) or node.lanes < 1:
        raise DtypeProblem(f"{type(node).__name__} lanes must be a positive int, got {node.lanes!r}")


def _ramp(node: tir.Ramp, kids: list[Dtype]) -> Dtype:
    base, stride = kids
    _check_lanes(node)
    if base is None or stride is None:
        return None
    if base != stride or base not in INT_DTYPES:
        raise DtypeProblem(f"Ramp base and stride must be integer scalars of one dtype, got {base} and {stride}")
    return vector_dtype(base, node.lanes)


def _broadcast(node: tir.Broadcast, kids: list[Dtype]) -> Dtype:
    (value,) = kids
    _check_lanes(node)
    if value is None:
        return None
    base, lanes = split_vector(value)
    return vector_dtype(base, lanes * node.lanes)


#: The rule of each kind of (non-leaf) expression the checker computes without its scopes.
DTYPE_RULES: dict[type, DtypeRule] = {
    **dict.fromkeys(_ARITH, _arith),
    **dict.fromkeys(_CMP, _compare),
    tir.And: _logical,
    tir.Or: _logical,
    tir.Not: _not,
    tir.Select: _select,
    tir.Cast: _cast,
    tir.Call: _call,
    tir.Ramp: _ramp,
    tir.Broadcast: _broadcast,
}
