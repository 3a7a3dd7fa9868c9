"""Whether a pass kept a program's meaning: reference runs, and the first difference between two outputs."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from parpass.ir import tir
from parpass.ir.module import IRModule
from parpass.ir.node import BaseFunc
from parpass.testing.interpreter.dataflow import run_function
from parpass.testing.interpreter.errors import InterpreterError, lookup
from parpass.testing.interpreter.inputs import random_inputs
from parpass.testing.interpreter.prim_exprs import PrimExprEvaluator
from parpass.testing.interpreter.prim_values import np_element_dtype
from parpass.testing.interpreter.values import Value, copy_value, describe


class Reference(NamedTuple):
    """What a function computes on its :func:`random_inputs`: the inputs, and the outputs before any pass."""

    kind: type[BaseFunc]
    inputs: list[Any]
    outputs: Value


def reference_run(mod: IRModule, name: str, seed: int = 0) -> Reference:
    """Run function ``name`` of ``mod`` on its :func:`random_inputs` for ``seed``, keeping inputs and outputs.

    Raises :class:`InterpreterError` when the function fails on those inputs.
    """
    func = lookup(mod, name, "in the module")
    inputs = random_inputs(func, seed)
    return Reference(type(func), inputs, run_function(mod, name, *[copy_value(v) for v in inputs]))


def meaning_difference(
    ref: Reference, after: IRModule, name: str, rtol: float = 0.0, atol: float = 0.0, seed: int = 0
) -> str | None:
    """How function ``name`` of ``after`` departs from ``ref`` (what it computed before), or None.

    The rules of :func:`assert_same_meaning`; ``seed`` only names the inputs in the message.
    """
    f_after = lookup(after, name, "in the module after the pass")
    if type(f_after) is not ref.kind:
        return _kind_change(name, ref.kind, type(f_after))
    after_inputs = [copy_value(v) for v in ref.inputs]
    if isinstance(f_after, tir.PrimFunc):
        after_inputs = _adapt_buffers(f_after, after_inputs)
    try:
        out_after = run_function(after, name, *after_inputs)
    except InterpreterError as exc:
        return f"function {name!r} runs before the pass but fails after it (seed {seed}): {exc}"
    problem = _first_difference(name, ref.outputs, out_after, rtol, atol)
    return None if problem is None else f"meaning changed (seed {seed}): {problem}"


def assert_same_meaning(
    before: IRModule,
    after: IRModule,
    name: str | None = None,
    seed: int = 0,
    rtol: float = 0.0,
    atol: float = 0.0,
    *,
    allow_failing_before: bool = False,
) -> list[str]:
    """Assert that function ``name`` computes the same in ``before`` and ``after``.

    Both run (in the interpreter) on copies of :func:`random_inputs` of ``before``'s
    function for ``seed``; outputs (for a PrimFunc, every buffer after the run) must
    be equal: exactly by default (NaN equals NaN), or within ``rtol``/``atol`` for
    floating-point outputs when a pass may reassociate arithmetic. A buffer whose
    shape changed but not its size (a flattened buffer) is compared element by
    element in memory order; its input is reshaped the same way.

    ``name=None`` checks every function of ``before`` that is still in ``after``.
    If ``before`` itself fails on the inputs, this raises an AssertionError saying
    so, unless ``allow_failing_before`` (then the function is skipped: a failing
    program has no meaning to preserve). Returns the names compared.
    """
    names = [name] if name is not None else [n for n in before.names() if n in after]
    compared: list[str] = []
    for fname in names:
        f_before = lookup(before, fname, "in the module before the pass")
        f_after = lookup(after, fname, "in the module after the pass")
        if type(f_before) is not type(f_after):
            raise AssertionError(_kind_change(fname, type(f_before), type(f_after)))
        try:
            ref = reference_run(before, fname, seed)
        except InterpreterError as exc:
            if allow_failing_before:
                continue
            raise AssertionError(
                f"function {fname!r} fails before the pass on the inputs of seed {seed}, so its meaning cannot be "
                f"compared: {exc}"
            ) from exc
        problem = meaning_difference(ref, after, fname, rtol, atol, seed)
        if problem is not None:
            raise AssertionError(problem)
        compared.append(fname)
    return compared


def _kind_change(name: str, before: type[BaseFunc], after: type[BaseFunc]) -> str:
    return f"function {name!r} is a {before.__name__} before and a {after.__name__} after"


def _adapt_buffers(func: tir.PrimFunc, inputs: list[Any]) -> list[Any]:
    """Reshape array inputs to ``func``'s buffer shapes where only the shape (not the size) differs."""
    if len(inputs) != len(func.params):
        return inputs
    machine = PrimExprEvaluator(func, "<assert_same_meaning>")
    for param, value in zip(func.params, inputs, strict=True):
        if isinstance(param, tir.Var) and isinstance(value, (bool, int, float, np.generic)):
            machine.env[param.vid] = np_element_dtype(param.dtype).type(value)
    out = list(inputs)
    for k, (param, value) in enumerate(zip(func.params, inputs, strict=True)):
        if isinstance(param, tir.Buffer) and isinstance(value, np.ndarray):
            try:
                shape = machine.shape_of(param)
            except InterpreterError:
                continue
            if shape != value.shape and int(np.prod(shape)) == value.size:
                out[k] = value.reshape(shape).copy()
    return out


# ====================================================================== the first difference


def _first_difference(name: str, before: Any, after: Any, rtol: float, atol: float) -> str | None:
    """A description of the first place where ``before`` and ``after`` differ, or None."""
    stack: list[tuple[Any, Any, str]] = [(before, after, "")]
    while stack:
        a, b, path = stack.pop()
        where = f"function {name!r}: output{path}"
        if isinstance(a, tuple) or isinstance(b, tuple):
            if not (isinstance(a, tuple) and isinstance(b, tuple)) or len(a) != len(b):
                return f"{where}: before is {describe(a)}, after is {describe(b)}"
            for k in range(len(a) - 1, -1, -1):
                stack.append((a[k], b[k], f"{path}[{k}]"))
            continue
        problem = _array_difference(where, np.asarray(a), np.asarray(b), rtol, atol)
        if problem is not None:
            return problem
    return None


def _array_difference(where: str, a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> str | None:
    """How array ``b`` differs from ``a`` (dtype, shape, or elements beyond the tolerance), or None."""
    if a.dtype != b.dtype:
        return f"{where}: dtype {a.dtype} before, {b.dtype} after"
    if a.shape != b.shape:
        if a.size != b.size:
            return f"{where}: shape {a.shape} before, {b.shape} after"
        a, b = a.reshape(-1), b.reshape(-1)  # a flattened buffer: the same memory in another shape
    floating = a.dtype.kind in "fc"
    if (rtol == 0 and atol == 0) or not floating:
        same = a == b
        if floating:
            same |= np.isnan(a) & np.isnan(b)
    else:
        same = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
    if np.all(same):
        return None
    return _elements_differ(where, a, b, np.argwhere(~np.asarray(same)), rtol, atol)


def _elements_differ(where: str, a: np.ndarray, b: np.ndarray, bad: np.ndarray, rtol: float, atol: float) -> str:
    """The message for elements at indices ``bad`` that differ: how many, the first, the largest difference."""
    first = tuple(int(i) for i in bad[0])
    text = (
        f"{where}: {len(bad)} of {a.size} element(s) differ; first at index {first}: "
        f"before {a[first]!r}, after {b[first]!r}"
    )
    if a.dtype.kind in "fc":
        with np.errstate(all="ignore"):
            diff = np.nanmax(np.abs(a.astype(np.float64) - b.astype(np.float64)))
        text += f"; max abs difference {diff!r}"
    if rtol or atol:
        text += f" (rtol={rtol}, atol={atol})"
    return text
