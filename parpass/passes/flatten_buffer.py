"""``FlattenBuffer``: multi-dimensional buffer accesses become one-dimensional (TVM's ``FlattenBuffer``).

Every buffer with more or fewer than one dimension, or with explicit strides,
becomes a one-dimensional buffer with the same id, name and dtype, wherever it
appears: parameters, ``Allocate``, loads and stores. An access
``A[i_0, ..., i_k]`` becomes ``A[i_0 * s_0 + ... + i_k * s_k]``, where the
strides ``s`` are the buffer's ``strides`` or, when it has none, the row-major
strides of its shape (``s_k = shape[k+1] * ... * shape[-1]``).

The flat buffer has shape ``(prod(shape),)`` for a compact buffer and
``(1 + sum((shape_k - 1) * s_k),)`` (the elements its strides reach) for a
strided one; a 0-d buffer becomes ``(1,)`` and is accessed at ``0``. So the
flattened function reads and writes the same elements of the same memory: a
caller passes the same data, reshaped to one dimension (for a compact buffer,
``arr.reshape(-1)``). The symbolic size of a strided buffer assumes every
dimension is at least 1.

Constants in the new index expressions are folded (``i * 1`` is ``i``, products
of constant dimensions are one immediate); other simplification is left to
``Simplify``. Vector accesses (``Ramp`` or other vector indices, as left by
``VectorizeLoop``) stay vector accesses: a single ``Ramp`` index keeps a ``Ramp``
(``A[i, ramp(j, 1, 4)]`` -> ``A[ramp(i * 8 + j, 1, 4)]``). Index arithmetic uses
the dtype of the indices (``int64`` if they differ); a function whose flat
offsets do not fit that dtype would wrap, as it would in TVM.

The pass is idempotent (one-dimensional compact buffers are left alone) and
returns the same function object when there is nothing to flatten.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from parpass.ir.dtype import element_dtype, lanes_of, vector_dtype
from parpass.ir.module import IRModule
from parpass.ir.stmt_functor import StmtExprMutator
from parpass.ir.tir import (
    Add,
    Broadcast,
    Buffer,
    BufferLoad,
    BufferStore,
    Cast,
    IntImm,
    Mul,
    PrimExpr,
    PrimFunc,
    Ramp,
    Stmt,
    Sub,
    expr_dtype,
)
from parpass.transform import PassContext, PrimFuncTransform, Statistic

__all__ = ["FlattenBuffer", "flatten_prim_func", "flattened_layout"]

FLATTENED = Statistic("FlattenBuffer", "flattened", "buffers flattened to one dimension")

_INT_LIMITS = {
    f"{s}int{b}": (0 if s else -(1 << (b - 1)), (1 << b) - 1 if s else (1 << (b - 1)) - 1)
    for b in (8, 16, 32, 64)
    for s in ("", "u")
}


def _const(dtype: str, value: int) -> IntImm | None:
    """``IntImm(dtype, value)`` if the value fits the dtype, else None (never fold into a wrap)."""
    lo, hi = _INT_LIMITS.get(dtype, (value, value))
    return IntImm(dtype, value) if lo <= value <= hi else None


def _add(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """``a + b`` with constants folded."""
    if type(b) is IntImm and b.value == 0:
        return a
    if type(a) is IntImm and a.value == 0:
        return b
    if type(a) is IntImm and type(b) is IntImm:
        folded = _const(a.dtype, a.value + b.value)
        if folded is not None:
            return folded
    return Add(a, b)


def _mul(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """``a * b`` with constants folded."""
    if type(b) is IntImm and b.value == 1:
        return a
    if type(a) is IntImm and a.value == 1:
        return b
    if type(a) is IntImm and type(b) is IntImm:
        folded = _const(a.dtype, a.value * b.value)
        if folded is not None:
            return folded
    return Mul(a, b)


def _as(expr: PrimExpr, dtype: str) -> PrimExpr:
    """``expr`` (a scalar) in integer ``dtype``."""
    if expr_dtype(expr) == dtype:
        return expr
    if type(expr) is IntImm:
        folded = _const(dtype, expr.value)
        if folded is not None:
            return folded
    return Cast(dtype, expr)


def flattened_layout(buf: Buffer) -> tuple[Buffer, tuple[PrimExpr, ...]] | None:
    """The one-dimensional buffer replacing ``buf`` and the element strides of its dimensions.

    None when ``buf`` is already one-dimensional and compact.
    """
    if len(buf.shape) == 1 and not buf.strides:
        return None
    dtype = expr_dtype(buf.shape[0]) if buf.shape else "int32"
    shape = tuple(_as(d, dtype) for d in buf.shape)
    if buf.strides:
        strides = tuple(_as(s, dtype) for s in buf.strides)
        size: PrimExpr = IntImm(dtype, 1)
        if any(type(d) is IntImm and d.value == 0 for d in shape):
            size = IntImm(dtype, 0)
        else:
            for d, s in zip(shape, strides, strict=True):
                size = _add(
                    size, _mul(_add(d, IntImm(dtype, -1)) if type(d) is IntImm else Sub(d, IntImm(dtype, 1)), s)
                )
    else:
        rev: list[PrimExpr] = []
        acc: PrimExpr = IntImm(dtype, 1)
        for d in reversed(shape):
            rev.append(acc)
            acc = _mul(acc, d)
        strides = tuple(reversed(rev))
        size = acc
    return Buffer(buf.vid, buf.name, buf.dtype, (size,)), strides


def _flat_index(indices: tuple[PrimExpr, ...], strides: tuple[PrimExpr, ...]) -> PrimExpr:
    """``sum(index_k * stride_k)``; vector indices give a vector (a Ramp when they are Ramps)."""
    if not indices:
        return IntImm("int32", 0)
    dtypes = [expr_dtype(i) for i in indices]
    bases = {element_dtype(d) for d in dtypes}
    dtype = bases.pop() if len(bases) == 1 else "int64"
    lanes = max(lanes_of(d) for d in dtypes)
    scalar: PrimExpr = IntImm(dtype, 0)
    ramp_base: PrimExpr = IntImm(dtype, 0)
    ramp_stride: PrimExpr = IntImm(dtype, 0)
    vectors: list[PrimExpr] = []
    for index, stride, idt in zip(indices, strides, dtypes, strict=True):
        stride = _as(stride, dtype)
        if lanes_of(idt) == 1:
            scalar = _add(scalar, _mul(_as(index, dtype), stride))
        elif type(index) is Ramp:
            ramp_base = _add(ramp_base, _mul(_as(index.base, dtype), stride))
            ramp_stride = _add(ramp_stride, _mul(_as(index.stride, dtype), stride))
        else:
            vectors.append(_scaled_vector(index, element_dtype(idt), stride, dtype, lanes))
    if lanes == 1:
        return scalar
    return _vector_sum(scalar, ramp_base, ramp_stride, vectors, lanes)


def _scaled_vector(index: PrimExpr, index_dtype: str, stride: PrimExpr, dtype: str, lanes: int) -> PrimExpr:
    """``index * stride`` in ``dtype``, for a vector ``index`` that is not a Ramp (elements of ``index_dtype``)."""
    vec = index if index_dtype == dtype else Cast(vector_dtype(dtype, lanes), index)
    return vec if type(stride) is IntImm and stride.value == 1 else Mul(vec, Broadcast(stride, lanes))


def _vector_sum(
    scalar: PrimExpr, ramp_base: PrimExpr, ramp_stride: PrimExpr, vectors: list[PrimExpr], lanes: int
) -> PrimExpr:
    """The flat vector index: the ``vectors``, plus ``ramp(ramp_base, ramp_stride)`` (the Ramp indices' terms),
    plus the ``scalar`` indices' terms broadcast; a single Ramp when all vector indices are Ramps."""
    if not vectors:
        return Ramp(_add(scalar, ramp_base), ramp_stride, lanes)
    out = vectors[0]
    for v in vectors[1:]:
        out = Add(out, v)
    if not (type(ramp_stride) is IntImm and ramp_stride.value == 0 and type(ramp_base) is IntImm):
        out = Add(out, Ramp(ramp_base, ramp_stride, lanes))
    elif ramp_base.value != 0:
        scalar = _add(scalar, ramp_base)
    if not (type(scalar) is IntImm and scalar.value == 0):
        out = Add(out, Broadcast(scalar, lanes))
    return out


class _Flattener(StmtExprMutator):
    """Replaces every multi-dimensional buffer by its flat version, and its accesses by flat accesses.

    ``flattened`` holds the ids (``vid``) of the buffers flattened: a buffer counts once, however many
    objects stand for it.
    """

    def __init__(self) -> None:
        super().__init__()
        self._layouts: dict[int, tuple[Buffer, tuple[PrimExpr, ...]] | None] = {}
        self._held: list[Buffer] = []  # keeps ids in _layouts unique
        self.flattened: set[int] = set()

    def layout(self, buf: Buffer) -> tuple[Buffer, tuple[PrimExpr, ...]] | None:
        key = id(buf)
        if key not in self._layouts:
            layout = self._layouts[key] = flattened_layout(buf)
            self._held.append(buf)
            if layout is not None:
                self.flattened.add(buf.vid)
        return self._layouts[key]

    def visit_buffer(self, buf: Buffer) -> Buffer:
        layout = self.layout(buf)
        return buf if layout is None else layout[0]

    def visit_buffer_load_(self, op: BufferLoad) -> PrimExpr:
        layout = self.layout(op.buffer)
        if layout is None:
            return super().visit_buffer_load_(op)
        indices = tuple(self.visit_expr(i) for i in op.indices)
        return BufferLoad(layout[0], (_flat_index(indices, layout[1]),))

    def visit_buffer_store_(self, op: BufferStore) -> Stmt:
        layout = self.layout(op.buffer)
        if layout is None:
            return super().visit_buffer_store_(op)
        indices = tuple(self.visit_expr(i) for i in op.indices)
        return BufferStore(layout[0], self.visit_expr(op.value), (_flat_index(indices, layout[1]),))


def flatten_prim_func(func: PrimFunc) -> PrimFunc:
    """``func`` with every buffer flattened to one dimension; the same object if all already are."""
    flattener = _Flattener()
    out = flattener.visit_prim_func(func)
    if flattener.flattened:
        FLATTENED.add(len(flattener.flattened))
    return out


@dataclass(frozen=True)
class FlattenBuffer(PrimFuncTransform):
    """Flatten multi-dimensional buffers of every PrimFunc (see :mod:`parpass.passes.flatten_buffer`)."""

    name: ClassVar[str] = "FlattenBuffer"
    opt_level: ClassVar[int] = 0

    def transform_function(self, func: PrimFunc, mod: IRModule, ctx: PassContext) -> PrimFunc:
        return flatten_prim_func(func)
