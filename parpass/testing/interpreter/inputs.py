"""Deterministic random arguments for a function: the same seed gives the same values on every machine."""

from __future__ import annotations

from typing import Any

import numpy as np

from parpass.ir import relax, tir
from parpass.ir.builtin_ops import format_type
from parpass.ir.node import BaseFunc
from parpass.ir.types import PrimType, TensorType, TupleType, Type
from parpass.testing.interpreter.prim_exprs import PrimExprEvaluator
from parpass.testing.interpreter.values import freeze


def _random_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: str, scalar_int: bool = False) -> Any:
    """Deterministic values: floats in [-2, 2), ints in [-8, 8] ([1, 8] for loop-level scalars), bools."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind == "u":
        return rng.integers(0, 16, size=shape).astype(dt)
    if dt.kind == "i":
        low = 1 if scalar_int else -8
        return rng.integers(low, 9, size=shape).astype(dt)
    if dt.kind == "f":
        return rng.uniform(-2.0, 2.0, size=shape).astype(dt)
    raise ValueError(f"random_inputs: unsupported dtype {dtype!r}")


def random_inputs(func: BaseFunc, seed: int = 0) -> list[Any]:
    """Deterministic random arguments for ``func`` (same seed, same values on every machine).

    For a :class:`~parpass.ir.Function`: one value per parameter (arrays; tuples for
    tuple types; 0-d arrays for ``PrimType``). For a :class:`~parpass.ir.PrimFunc`:
    a Python number per scalar parameter (integers in [1, 8], so they are safe as
    extents and divisors) and an array per buffer (its shape evaluated with those
    scalars). Floats are in [-2, 2), integers in [-8, 8], unsigned in [0, 16).
    """
    rng = np.random.default_rng(seed)
    if isinstance(func, relax.Function):
        return [_random_value(rng, fparam.ty) for fparam in func.params]
    if isinstance(func, tir.PrimFunc):
        return _random_prim_inputs(rng, func)
    raise TypeError(f"random_inputs expects a Function or PrimFunc, got {type(func).__name__}")


def _random_prim_inputs(rng: np.random.Generator, func: tir.PrimFunc) -> list[Any]:
    """The scalars first (buffer shapes may depend on them), then the buffers, each in parameter order."""
    machine = PrimExprEvaluator(func, "<random_inputs>")
    values: list[Any] = [None] * len(func.params)
    for k, param in enumerate(func.params):
        if isinstance(param, tir.Var):
            scalar = _random_array(rng, (), param.dtype, scalar_int=True)[()]
            machine.env[param.vid] = scalar
            values[k] = scalar.item()
    for k, param in enumerate(func.params):
        if isinstance(param, tir.Buffer):
            values[k] = _random_array(rng, machine.shape_of(param), param.dtype)
    return values


def _random_value(rng: np.random.Generator, ty: Type) -> Any:
    """A random value of ``ty``; a tuple type's fields are drawn in order."""
    out: list[Any] = [None]
    stack: list[tuple[Type, list[Any], int]] = [(ty, out, 0)]
    while stack:
        t, holder, slot = stack.pop()
        if isinstance(t, TupleType):
            fields: list[Any] = [None] * len(t.fields)
            holder[slot] = fields
            # Fields in order, so the draws do not depend on stack order.
            for k in range(len(t.fields) - 1, -1, -1):
                stack.append((t.fields[k], fields, k))
        elif isinstance(t, TensorType):
            holder[slot] = _random_array(rng, tuple(t.shape), t.dtype)
        elif isinstance(t, PrimType):
            holder[slot] = np.asarray(_random_array(rng, (), t.dtype))
        else:
            raise TypeError(f"random_inputs: parameter type {format_type(t)} is not a type")
    return freeze(out[0])
