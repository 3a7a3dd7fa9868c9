"""The dataflow function kind: :class:`Function`, in A-normal form like TVM Relax.

A function has typed parameters, a body :class:`SeqExpr` (an ordered list of
``var = value`` :class:`Binding`s and a returned expression). Values are calls of
registered operators or of other functions of the module, constants, tuples,
tuple projections, variables, and ``If`` with nested binding blocks.

Variables are identified by their function-local ``vid``; ``name_hint`` is only
for printing. Types live on parameters and bindings, not on variable uses, so a
use of a variable is always the same value wherever it was decoded.
"""

from __future__ import annotations

from typing import Any, Union

import msgspec

from parpass.ir.node import Attrs, BaseFunc, GlobalVar, Node, Op, freeze_field
from parpass.ir.types import Type


class Var(Node, frozen=True, gc=False, tag="Var"):
    """A variable: a function-local id plus a name hint."""

    vid: int
    name_hint: str


class Constant(Node, frozen=True, gc=False, tag="Constant"):
    """A tensor constant: little-endian, C-order ``data`` of ``dtype`` and ``shape``.

    ``data`` is immutable ``bytes`` (as decoding gives it; :func:`~parpass.ir.well_formed` reports
    anything else, which a pass could change in place) and :meth:`numpy` is a read-only view of it.
    """

    data: bytes
    dtype: str
    shape: tuple[int, ...]

    @staticmethod
    def from_value(value: Any, dtype: str | None = None) -> Constant:
        """A constant holding ``value`` (a number, nested list or numpy array)."""
        import numpy as np

        from parpass.ir.dtype import dtype_name

        arr = np.asarray(value, dtype=dtype)
        little = arr.dtype.newbyteorder("<") if arr.dtype.byteorder not in "|" else arr.dtype
        data = np.ascontiguousarray(arr, dtype=little).tobytes()
        return Constant(data, dtype_name(arr.dtype), tuple(int(d) for d in arr.shape))

    def numpy(self) -> Any:
        """The value as a (read-only) numpy array."""
        import numpy as np

        dt = np.dtype(self.dtype)
        if dt.byteorder not in "|":
            dt = dt.newbyteorder("<")
        return np.frombuffer(self.data, dtype=dt).reshape(self.shape)


class Tuple(Node, frozen=True, gc=False, tag="Tuple"):
    """A tuple of expressions."""

    fields: tuple[Expr, ...]

    __child_fields__ = ("fields",)


class TupleGetItem(Node, frozen=True, gc=False, tag="TupleGetItem"):
    """Field ``index`` of the tuple ``tuple_value``."""

    tuple_value: Expr
    index: int

    __child_fields__ = ("tuple_value",)


class Call(Node, frozen=True, gc=False, tag="Call"):
    """A call of a registered operator (:class:`Op`) or of a module function (:class:`GlobalVar`)."""

    op: Op | GlobalVar
    args: tuple[Expr, ...]
    attrs: Attrs = {}

    __child_fields__ = ("op", "args")

    def __post_init__(self) -> None:
        freeze_field(self, "attrs")


class Binding(Node, frozen=True, gc=False, tag="Binding"):
    """``var = value``; ``ty`` is the type of ``var`` when known (filled in by InferType)."""

    var: Var
    value: Expr
    ty: Type | None = None

    __child_fields__ = ("var", "value", "ty")


class SeqExpr(Node, frozen=True, gc=False, tag="SeqExpr"):
    """A block of bindings, evaluated in order, followed by the expression it yields."""

    bindings: tuple[Binding, ...]
    body: Expr

    __child_fields__ = ("bindings", "body")


class If(Node, frozen=True, gc=False, tag="If"):
    """Evaluates ``then_branch`` if ``cond`` (a boolean scalar) is true, else ``else_branch``."""

    cond: Expr
    then_branch: SeqExpr
    else_branch: SeqExpr

    __child_fields__ = ("cond", "then_branch", "else_branch")


class Param(Node, frozen=True, gc=False, tag="Param"):
    """A function parameter: a variable and its type."""

    var: Var
    ty: Type

    __child_fields__ = ("var", "ty")


Expr = Union[Var, Constant, Tuple, TupleGetItem, Call, If, GlobalVar]


class Function(BaseFunc, frozen=True, gc=False, tag="Function"):
    """A dataflow function: parameters, a body block, an optional return type, attributes."""

    params: tuple[Param, ...]
    body: SeqExpr
    ret_type: Type | None = None

    __child_fields__ = ("params", "body", "ret_type")

    @property
    def bindings(self) -> tuple[Binding, ...]:
        """The top-level bindings of the body."""
        return self.body.bindings

    def with_body(self, body: SeqExpr) -> Function:
        """This function with another body (the same object if ``body`` is unchanged)."""
        if body is self.body:
            return self
        return msgspec.structs.replace(self, body=body)


__all__ = [
    "Binding",
    "Call",
    "Constant",
    "Expr",
    "Function",
    "If",
    "Param",
    "SeqExpr",
    "Tuple",
    "TupleGetItem",
    "Var",
]
