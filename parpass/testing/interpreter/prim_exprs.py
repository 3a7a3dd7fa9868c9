"""The state of one PrimFunc run (scalars, buffer memory) and how PrimExprs evaluate in it.

Each expression node kind has a handler in :data:`_COMPUTE`, given the node and the
values of its operands; buffer layout (strides, bounds) lives here too, because a
``BufferLoad`` is an expression.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from parpass.ir import tir
from parpass.ir.well_formed import INTRINSICS
from parpass.testing.interpreter.errors import DivisionByZeroError, InterpreterError
from parpass.testing.interpreter.prim_values import (
    INTRINSIC_IMPL,
    float_floordiv,
    float_floormod,
    np_element_dtype,
    same_dtype,
    show,
    value_dtype,
)
from parpass.testing.interpreter.values import MISSING


class PrimExprEvaluator:
    """One PrimFunc's run state: scalar environment, buffer memory, the current place (for errors)."""

    def __init__(self, func: tir.PrimFunc, name: str) -> None:
        self.func = func
        self.name = name
        self.env: dict[int, Any] = {}
        self.memory: dict[int, np.ndarray] = {}
        self.layouts: dict[int, tuple[tir.Buffer, tuple[int, ...]]] = {}
        self.loc: Any = None
        self.stmt: Any = None

    # ------------------------------------------------------------ errors

    def error(self, message: str, cls: type[InterpreterError] = InterpreterError) -> InterpreterError:
        """An error naming the PrimFunc and the statement being run."""
        return cls(f"in PrimFunc {self.name!r}{self._place()}: {message}")

    def _place(self) -> str:
        parts: list[str] = []
        if self.stmt is not None:
            parts.append(tir.stmt_label(self.stmt))
        loc = self.loc
        while loc is not None:
            parent, container, k = loc
            parts.append(_container_label(container, k))
            loc = parent
        return ", at " + " > ".join(reversed(parts)) if parts else ""

    def check_same(self, node: Any, a: Any, b: Any) -> None:
        """Both operands of ``node`` have the same dtype, lanes included."""
        if not same_dtype(a, b):
            raise self.error(
                f"operands of {type(node).__name__} have different dtypes: {value_dtype(a)} and {value_dtype(b)}"
            )

    def check_bool(self, node: Any, value: Any) -> None:
        """An operand of ``node`` that must be boolean is."""
        if value.dtype != np.bool_:
            raise self.error(f"{type(node).__name__} needs a bool operand, got {value_dtype(value)}")

    # ------------------------------------------------------------ expressions

    def eval(self, root: Any) -> Any:
        """The value of PrimExpr ``root``: post-order on an explicit stack, memoized per node."""
        if isinstance(root, tir.LEAF_EXPRS):
            return self._leaf(root)
        memo: dict[int, Any] = {}
        stack = [root]
        compute = _COMPUTE
        while stack:
            node = stack[-1]
            key = id(node)
            if key in memo:
                stack.pop()
                continue
            if isinstance(node, tir.LEAF_EXPRS):
                memo[key] = self._leaf(node)
                stack.pop()
                continue
            kids = tir.operands_or_none(node)
            pending = [k for k in kids if id(k) not in memo]
            if pending:
                stack.extend(reversed(pending))
                continue
            stack.pop()
            memo[key] = compute.get(type(node), _cannot_compute)(self, node, [memo[id(k)] for k in kids])
        return memo[id(root)]

    def _leaf(self, node: Any) -> Any:
        if type(node) is tir.Var:
            value = self.env.get(node.vid, MISSING)
            if value is MISSING:
                raise self.error(
                    f"variable {node.name_hint} (vid {node.vid}) is used outside the scope of its definition"
                )
            return value
        try:
            return np_element_dtype(node.dtype).type(node.value)
        except (OverflowError, ValueError, TypeError) as exc:
            raise self.error(f"immediate {node.value!r} does not fit dtype {node.dtype!r}: {exc}") from None

    # ------------------------------------------------------------ memory

    def strides_of(self, buffer: tir.Buffer) -> tuple[int, ...]:
        """Element strides of ``buffer``: its ``strides``, or row-major ones from its ``shape``."""
        cached = self.layouts.get(id(buffer))
        if cached is not None and cached[0] is buffer:
            return cached[1]
        constant = all(type(e) is tir.IntImm for e in buffer.shape) and all(
            type(e) is tir.IntImm for e in buffer.strides
        )
        if buffer.strides:
            strides = tuple(self._int(e, f"stride {k} of buffer {buffer.name}") for k, e in enumerate(buffer.strides))
            if len(strides) != len(buffer.shape):
                raise self.error(f"buffer {buffer.name} has {len(buffer.shape)} dimensions but {len(strides)} strides")
        else:
            strides = _row_major(self.shape_of(buffer))
        if constant:
            self.layouts[id(buffer)] = (buffer, strides)
        return strides

    def shape_of(self, buffer: tir.Buffer) -> tuple[int, ...]:
        """The shape of ``buffer``, its dimensions evaluated (none negative)."""
        shape = tuple(self._int(e, f"dimension {k} of buffer {buffer.name}") for k, e in enumerate(buffer.shape))
        for k, dim in enumerate(shape):
            if dim < 0:
                raise self.error(f"dimension {k} of buffer {buffer.name} is negative ({dim})")
        return shape

    def memory_size(self, buffer: tir.Buffer) -> int:
        """Elements of memory ``buffer`` needs: its shape's product, or the extent its strides reach."""
        shape = self.shape_of(buffer)
        if any(d == 0 for d in shape):
            return 0
        if not buffer.strides:
            size = 1
            for d in shape:
                size *= d
            return size
        strides = self.strides_of(buffer)
        if any(s < 0 for s in strides):
            raise self.error(f"buffer {buffer.name} has negative strides {strides}")
        return 1 + sum((d - 1) * s for d, s in zip(shape, strides, strict=True))

    def _int(self, expr: Any, what: str) -> int:
        value = self.eval(expr)
        if isinstance(value, np.ndarray) or value.dtype.kind not in "iu":
            raise self.error(f"{what} must be an integer scalar, got {value_dtype(value)}")
        return int(value)

    def offsets(self, buffer: tir.Buffer, indices: Sequence[Any], access: str) -> Any:
        """The element offset (an int, or an int64 array for a vector access) of ``buffer[indices]``."""
        strides = self.strides_of(buffer)
        if len(indices) != len(strides):
            raise self.error(
                f"{access} of buffer {buffer.name} has {len(indices)} indices but the buffer has "
                f"{len(strides)} dimensions"
            )
        offset, lanes = self._sum_offsets(buffer, indices, strides, access)
        memory = self._memory_of(buffer, access)
        size = memory.shape[0]
        low, high = (int(offset.min()), int(offset.max())) if lanes is not None else (offset, offset)
        if lanes == 0 or low < 0 or high >= size:
            shown = ", ".join(show(i) for i in indices)
            raise self.error(
                f"{access} of buffer {buffer.name}[{shown}] is out of bounds: element offset "
                f"{show(offset)} outside [0, {size})"
            )
        return offset

    def _sum_offsets(
        self, buffer: tir.Buffer, indices: Sequence[Any], strides: tuple[int, ...], access: str
    ) -> tuple[Any, int | None]:
        """``sum(index_k * stride_k)``, and the lanes of a vector access (None for a scalar one)."""
        lanes = None
        offset: Any = 0
        for k, (index, stride) in enumerate(zip(indices, strides, strict=True)):
            if index.dtype.kind not in "iu":
                raise self.error(
                    f"index {k} of {access} of buffer {buffer.name} is {value_dtype(index)}, not an integer"
                )
            if isinstance(index, np.ndarray):
                if lanes is not None and len(index) != lanes:
                    raise self.error(f"vector indices of {access} of buffer {buffer.name} have different lanes")
                lanes = len(index)
                offset = offset + index.astype(np.int64) * stride
            else:
                offset = offset + int(index) * stride
        return offset, lanes

    def _memory_of(self, buffer: tir.Buffer, access: str) -> np.ndarray:
        """The memory ``buffer`` accesses: a parameter's or an enclosing ``Allocate``'s, of its element dtype."""
        memory = self.memory.get(buffer.vid)
        if memory is None:
            raise self.error(
                f"{access} of buffer {buffer.name} (vid {buffer.vid}): the buffer is not a parameter and not "
                f"allocated by an enclosing Allocate"
            )
        if memory.dtype != np_element_dtype(buffer.dtype):
            raise self.error(f"{access} of buffer {buffer.name} as {buffer.dtype}, but its memory holds {memory.dtype}")
        return memory


def _row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The element strides of a dense row-major array of ``shape``."""
    acc = 1
    rev: list[int] = []
    for dim in reversed(shape):
        rev.append(acc)
        acc *= dim
    return tuple(reversed(rev))


def _container_label(container: Any, k: Any) -> str:
    """The ``k``-th part (index or branch) of an enclosing statement, as a place in an error message."""
    if type(container) is tir.SeqStmt:
        return f"SeqStmt[{k}]"
    if type(container) is tir.IfThenElse:
        return f"IfThenElse ({k})"
    return tir.stmt_label(container)


# ====================================================================== expression handlers

#: A handler computes a node's value from its operands' values.
_Handler = Callable[[PrimExprEvaluator, Any, list[Any]], Any]


def _binary(fn: Callable[..., Any]) -> _Handler:
    """A handler applying numpy's ``fn`` to two operands of the same dtype."""

    def compute(ev: PrimExprEvaluator, node: Any, vals: list[Any]) -> Any:
        a, b = vals
        ev.check_same(node, a, b)
        return fn(a, b)

    return compute


def _floor_div_mod(ev: PrimExprEvaluator, node: Any, vals: list[Any]) -> Any:
    a, b = vals
    ev.check_same(node, a, b)
    is_div = type(node) is tir.FloorDiv
    if np.any(b == 0):
        raise ev.error(
            f"{type(node).__name__} by zero ({show(a)} {'//' if is_div else '%'} 0)",
            DivisionByZeroError,
        )
    if a.dtype.kind == "f":
        return float_floordiv(a, b) if is_div else float_floormod(a, b)
    return np.floor_divide(a, b) if is_div else np.remainder(a, b)


def _logical(fn: Callable[..., Any]) -> _Handler:
    """A handler applying numpy's logical ``fn`` to two boolean operands of the same lanes."""

    def compute(ev: PrimExprEvaluator, node: Any, vals: list[Any]) -> Any:
        a, b = vals
        ev.check_same(node, a, b)
        ev.check_bool(node, a)
        return fn(a, b)

    return compute


def _not(ev: PrimExprEvaluator, node: Any, vals: list[Any]) -> Any:
    ev.check_bool(node, vals[0])
    return np.logical_not(vals[0])


def _load(ev: PrimExprEvaluator, node: tir.BufferLoad, indices: list[Any]) -> Any:
    offset = ev.offsets(node.buffer, indices, "load")
    value = ev.memory[node.buffer.vid][offset]
    return value.copy() if isinstance(value, np.ndarray) else value


def _select(ev: PrimExprEvaluator, node: Any, vals: list[Any]) -> Any:
    cond, t, f = vals
    ev.check_same(node, t, f)
    ev.check_bool(node, cond)
    if isinstance(cond, np.ndarray) or isinstance(t, np.ndarray):
        if np.shape(cond) != np.shape(t) and np.ndim(cond) != 0:
            raise ev.error(f"Select condition has {value_dtype(cond)} lanes but values are {value_dtype(t)}")
        return np.where(cond, t, f).astype(t.dtype)
    return t if cond else f


def _cast(ev: PrimExprEvaluator, node: Any, vals: list[Any]) -> Any:
    return vals[0].astype(np_element_dtype(node.dtype))


def _ramp(ev: PrimExprEvaluator, node: Any, vals: list[Any]) -> Any:
    base, stride = vals
    ev.check_same(node, base, stride)
    if isinstance(base, np.ndarray):
        raise ev.error(f"Ramp base must be a scalar, got {value_dtype(base)}")
    if node.lanes < 1:
        raise ev.error(f"Ramp lanes must be positive, got {node.lanes}")
    lanes = np.arange(node.lanes).astype(base.dtype)
    return (base + stride * lanes).astype(base.dtype)


def _broadcast(ev: PrimExprEvaluator, node: Any, vals: list[Any]) -> Any:
    if node.lanes < 1:
        raise ev.error(f"Broadcast lanes must be positive, got {node.lanes}")
    value = vals[0]
    if isinstance(value, np.ndarray):
        return np.tile(value, node.lanes)
    return np.full(node.lanes, value, dtype=value.dtype)


def _intrinsic(ev: PrimExprEvaluator, node: tir.Call, vals: list[Any]) -> Any:
    arity = INTRINSICS.get(node.op)
    if arity is None:
        raise ev.error(f"unknown intrinsic {node.op!r}; known: {', '.join(sorted(INTRINSICS))}")
    if len(vals) != arity:
        raise ev.error(f"intrinsic {node.op!r} takes {arity} argument(s), got {len(vals)}")
    want = node.dtype
    for k, v in enumerate(vals):
        if value_dtype(v) != want:
            raise ev.error(f"argument {k} of intrinsic {node.op!r} is {value_dtype(v)}, the call is {want}")
    out = INTRINSIC_IMPL[node.op](*vals)
    return out.astype(np_element_dtype(want))


def _cannot_compute(ev: PrimExprEvaluator, node: Any, vals: list[Any]) -> Any:
    raise ev.error(f"cannot evaluate a {type(node).__name__} node as an expression")


_COMPUTE: dict[type, _Handler] = {
    tir.Add: _binary(np.add),
    tir.Sub: _binary(np.subtract),
    tir.Mul: _binary(np.multiply),
    tir.Min: _binary(np.minimum),
    tir.Max: _binary(np.maximum),
    tir.EQ: _binary(np.equal),
    tir.NE: _binary(np.not_equal),
    tir.LT: _binary(np.less),
    tir.LE: _binary(np.less_equal),
    tir.GT: _binary(np.greater),
    tir.GE: _binary(np.greater_equal),
    tir.FloorDiv: _floor_div_mod,
    tir.FloorMod: _floor_div_mod,
    tir.And: _logical(np.logical_and),
    tir.Or: _logical(np.logical_or),
    tir.Not: _not,
    tir.BufferLoad: _load,
    tir.Select: _select,
    tir.Cast: _cast,
    tir.Ramp: _ramp,
    tir.Broadcast: _broadcast,
    tir.Call: _intrinsic,
}
