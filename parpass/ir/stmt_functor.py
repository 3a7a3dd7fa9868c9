"""Visitors and mutators of the loop-level IR: :class:`StmtExprVisitor` and :class:`StmtExprMutator`.

They follow TVM's ``tir.PyStmtExprVisitor`` / ``PyStmtExprMutator``:
``visit_stmt(stmt)`` and ``visit_expr(expr)`` dispatch on the node's type to one
handler per node class:

- statements: ``visit_for_``, ``visit_seq_stmt_``, ``visit_buffer_store_``,
  ``visit_if_then_else_``, ``visit_let_stmt_``, ``visit_allocate_``,
  ``visit_evaluate_``;
- expressions: ``visit_int_imm_``, ``visit_float_imm_``, ``visit_var_``,
  ``visit_add_``, ``visit_sub_``, ``visit_mul_``, ``visit_floor_div_``,
  ``visit_floor_mod_``, ``visit_min_``, ``visit_max_``, ``visit_eq_``,
  ``visit_ne_``, ``visit_lt_``, ``visit_le_``, ``visit_gt_``, ``visit_ge_``,
  ``visit_and_``, ``visit_or_`` (the binary ones share one default),
  ``visit_not_``, ``visit_select_``, ``visit_cast_``, ``visit_call_``,
  ``visit_ramp_``, ``visit_broadcast_``, ``visit_buffer_load_``;

plus ``visit_buffer(buf)`` (the buffer of a load, store, allocation or
parameter) and ``visit_prim_func(func)``. Also :func:`post_order_visit` and
:func:`substitute`, as in TVM's ``tir.stmt_functor``.

The traversal is the one described in :mod:`parpass.ir.expr_functor`: the
composite nodes under a node (statements and expressions alike) are visited
first, iteratively, in post-order and left to right, each once; then the
node's handler runs and finds its children's results memoized. So a no-op
visitor walks a 5,000-deep expression or a 2,000-deep loop nest without
recursion. ``For``, ``IfThenElse``, ``LetStmt`` and ``Allocate`` are scoped
kinds: a subclass's override of their handler runs *before* their children
are visited and visits them when it asks (TVM's semantics, so it can record a
loop range or a bound variable first), in a fresh memo; use
:func:`~parpass.ir.expr_functor.post_order` on such an override when it needs no
context and the nest may be deep.

Definitions are not visited, as in TVM: ``For.loop_var``, ``LetStmt.var`` and
scalar parameters never reach ``visit_var_``; only uses do. A buffer reaches
``visit_buffer`` wherever it appears (parameters, ``Allocate``, loads, stores),
memoized per buffer object, and the default visits its shape and strides.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, Union, cast

import msgspec

from parpass.ir import tir
from parpass.ir.expr_functor import _MISSING, _default, _describe, _FunctorBase, _make_entry, _visit_each, post_order
from parpass.ir.tir import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    Allocate,
    And,
    Broadcast,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Cast,
    Evaluate,
    FloatImm,
    FloorDiv,
    FloorMod,
    For,
    IfThenElse,
    IntImm,
    LetStmt,
    Max,
    Min,
    Mul,
    Not,
    Or,
    PrimExpr,
    PrimFunc,
    Ramp,
    Select,
    SeqStmt,
    Stmt,
    Sub,
    Var,
)

__all__ = ["StmtExprMutator", "StmtExprVisitor", "post_order", "post_order_visit", "substitute"]

_BINARY_NAMES: dict[type, str] = {
    Add: "visit_add_",
    Sub: "visit_sub_",
    Mul: "visit_mul_",
    FloorDiv: "visit_floor_div_",
    FloorMod: "visit_floor_mod_",
    Min: "visit_min_",
    Max: "visit_max_",
    EQ: "visit_eq_",
    NE: "visit_ne_",
    LT: "visit_lt_",
    LE: "visit_le_",
    GT: "visit_gt_",
    GE: "visit_ge_",
    And: "visit_and_",
    Or: "visit_or_",
}


def _binary_kids(n: Any) -> tuple[Any, ...]:
    return (n.b, n.a)


_VISIT_STMT_DOC = """Visit ``stmt`` and return its handler's result (memoized per node object).

Dispatches on the node type to ``visit_<kind>_``; see :mod:`parpass.ir.stmt_functor`
for the order in which handlers run.
"""

_VISIT_EXPR_DOC = """Visit ``expr`` and return its handler's result (memoized per composite node).

Dispatches on the node type to ``visit_<kind>_``. Override it to intercept every
request for an expression's result.
"""


class _TirFunctor(_FunctorBase):
    """Dispatch configuration of the loop-level IR."""

    _HANDLER_NAMES = {
        **_BINARY_NAMES,
        Not: "visit_not_",
        Select: "visit_select_",
        Cast: "visit_cast_",
        Call: "visit_call_",
        Ramp: "visit_ramp_",
        Broadcast: "visit_broadcast_",
        BufferLoad: "visit_buffer_load_",
        For: "visit_for_",
        SeqStmt: "visit_seq_stmt_",
        BufferStore: "visit_buffer_store_",
        IfThenElse: "visit_if_then_else_",
        LetStmt: "visit_let_stmt_",
        Allocate: "visit_allocate_",
        Evaluate: "visit_evaluate_",
    }
    _LEAF_NAMES = {IntImm: "visit_int_imm_", FloatImm: "visit_float_imm_", Var: "visit_var_"}
    _KIDS_OF = {
        **{kind: _binary_kids for kind in _BINARY_NAMES},
        Not: lambda n: (n.a,),
        Select: lambda n: (n.false_value, n.true_value, n.condition),
        Cast: lambda n: (n.value,),
        Call: lambda n: n.args[::-1],
        Ramp: lambda n: (n.stride, n.base),
        Broadcast: lambda n: (n.value,),
        BufferLoad: lambda n: n.indices[::-1],
        For: lambda n: (n.body, n.extent, n.min),
        SeqStmt: lambda n: n.seq[::-1],
        BufferStore: lambda n: (*n.indices[::-1], n.value),
        IfThenElse: lambda n: (n.else_case, n.then_case, n.condition),
        LetStmt: lambda n: (n.body, n.value),
        Allocate: lambda n: (n.body,),
        Evaluate: lambda n: (n.value,),
    }
    _SCOPED_KINDS = frozenset({For, IfThenElse, LetStmt, Allocate})

    if TYPE_CHECKING:

        def visit_stmt(self, stmt: Stmt) -> Any: ...

        def visit_expr(self, expr: PrimExpr) -> Any: ...

    else:
        visit_stmt = _make_entry("visit_stmt", _VISIT_STMT_DOC)
        visit_expr = _make_entry("visit_expr", _VISIT_EXPR_DOC)

    if TYPE_CHECKING:

        def visit_buffer(self, buf: Buffer) -> Any: ...

    def _buffer(self, buf: Buffer) -> Any:
        """``visit_buffer(buf)``, memoized per buffer object (loads of one buffer share its object)."""
        memo = self._memo
        r = memo.get(id(buf), _MISSING)
        if r is _MISSING:
            r = self.visit_buffer(buf)
            memo[id(buf)] = r
            self._keep.append(buf)
        return r


class StmtExprVisitor(_TirFunctor):
    """Walks loop-level IR without changing it (TVM's ``tir.StmtExprVisitor``).

    Handlers return nothing; the defaults visit every child. Entry points:
    :meth:`visit_prim_func`, :meth:`visit_stmt`, :meth:`visit_expr`,
    :meth:`visit_buffer`.

    Example: collect the ids of the variables a statement uses::

        class UsedVars(StmtExprVisitor):
            def __init__(self) -> None:
                self.used: set[int] = set()

            def visit_var_(self, op: Var) -> None:
                self.used.add(op.vid)
    """

    # ---------------------------------------------------------------- expressions

    @_default
    def visit_int_imm_(self, op: IntImm) -> None:
        pass

    @_default
    def visit_float_imm_(self, op: FloatImm) -> None:
        pass

    @_default
    def visit_var_(self, op: Var) -> None:
        """A use of a scalar variable."""

    @_default
    def _visit_binary(self, op: Any) -> None:
        self.visit_expr(op.a)
        self.visit_expr(op.b)

    visit_add_ = visit_sub_ = visit_mul_ = visit_floor_div_ = visit_floor_mod_ = _visit_binary
    visit_min_ = visit_max_ = visit_eq_ = visit_ne_ = visit_lt_ = visit_le_ = _visit_binary
    visit_gt_ = visit_ge_ = visit_and_ = visit_or_ = _visit_binary

    @_default
    def visit_not_(self, op: Not) -> None:
        self.visit_expr(op.a)

    @_default
    def visit_select_(self, op: Select) -> None:
        self.visit_expr(op.condition)
        self.visit_expr(op.true_value)
        self.visit_expr(op.false_value)

    @_default
    def visit_cast_(self, op: Cast) -> None:
        self.visit_expr(op.value)

    @_default
    def visit_call_(self, op: Call) -> None:
        visit = self.visit_expr
        for a in op.args:
            visit(a)

    @_default
    def visit_ramp_(self, op: Ramp) -> None:
        self.visit_expr(op.base)
        self.visit_expr(op.stride)

    @_default
    def visit_broadcast_(self, op: Broadcast) -> None:
        self.visit_expr(op.value)

    @_default
    def visit_buffer_load_(self, op: BufferLoad) -> None:
        self._buffer(op.buffer)
        visit = self.visit_expr
        for i in op.indices:
            visit(i)

    # ---------------------------------------------------------------- statements

    @_default
    def visit_for_(self, op: For) -> None:
        self.visit_expr(op.min)
        self.visit_expr(op.extent)
        self.visit_stmt(op.body)

    @_default
    def visit_seq_stmt_(self, op: SeqStmt) -> None:
        visit = self.visit_stmt
        for s in op.seq:
            visit(s)

    @_default
    def visit_buffer_store_(self, op: BufferStore) -> None:
        self._buffer(op.buffer)
        self.visit_expr(op.value)
        visit = self.visit_expr
        for i in op.indices:
            visit(i)

    @_default
    def visit_if_then_else_(self, op: IfThenElse) -> None:
        self.visit_expr(op.condition)
        self.visit_stmt(op.then_case)
        if op.else_case is not None:
            self.visit_stmt(op.else_case)

    @_default
    def visit_let_stmt_(self, op: LetStmt) -> None:
        self.visit_expr(op.value)
        self.visit_stmt(op.body)

    @_default
    def visit_allocate_(self, op: Allocate) -> None:
        self._buffer(op.buffer)
        self.visit_stmt(op.body)

    @_default
    def visit_evaluate_(self, op: Evaluate) -> None:
        self.visit_expr(op.value)

    # ---------------------------------------------------------------- buffers and functions

    @_default
    def visit_buffer(self, buf: Buffer) -> None:
        """A buffer (memoized per object): visits its shape and strides."""
        visit = self.visit_expr
        for d in buf.shape:
            visit(d)
        for s in buf.strides:
            visit(s)

    @_default
    def visit_prim_func(self, func: PrimFunc) -> None:
        """A function: its buffer parameters, then its body; in a fresh memo."""
        self._in_new_scope(self._visit_prim_func_parts, func)

    def _visit_prim_func_parts(self, func: PrimFunc) -> None:
        for p in func.params:
            if type(p) is Buffer:
                self._buffer(p)
        self.visit_stmt(func.body)


class StmtExprMutator(_TirFunctor):
    """Rewrites loop-level IR (TVM's ``tir.StmtExprMutator``), preserving identity.

    Every handler returns the rewritten node, or the very same object when
    nothing under it changed; only the path from a change to the root is
    rebuilt. Entry points: :meth:`visit_prim_func`, :meth:`visit_stmt`,
    :meth:`visit_expr`, :meth:`visit_buffer`.

    ``var_remap`` maps a variable id to the expression replacing its uses
    (definitions such as loop variables are left alone), and ``buffer_remap``
    maps a buffer id to the buffer replacing it wherever it appears; both are
    returned as they are, not visited again. :func:`substitute` is this mutator
    with ``var_remap`` filled in.

    Example: fold ``x * 1`` into ``x``::

        class MulOne(StmtExprMutator):
            def visit_mul_(self, op: Mul) -> PrimExpr:
                op = super().visit_mul_(op)  # operands rewritten first
                if isinstance(op, Mul) and isinstance(op.b, IntImm) and op.b.value == 1:
                    return op.a
                return op
    """

    var_remap: dict[int, PrimExpr]
    buffer_remap: dict[int, Buffer]

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        self = super().__new__(cls, *args, **kwargs)
        self.var_remap = {}
        self.buffer_remap = {}
        return self

    def __init__(
        self,
        var_remap: Mapping[int, PrimExpr] | None = None,
        buffer_remap: Mapping[int, Buffer] | None = None,
    ) -> None:
        if var_remap is not None:
            self.var_remap = dict(var_remap)
        if buffer_remap is not None:
            self.buffer_remap = dict(buffer_remap)

    if TYPE_CHECKING:

        def visit_stmt(self, stmt: Stmt) -> Stmt: ...

        def visit_expr(self, expr: PrimExpr) -> PrimExpr: ...

    # ---------------------------------------------------------------- expressions

    @_default
    def visit_int_imm_(self, op: IntImm) -> PrimExpr:
        return op

    @_default
    def visit_float_imm_(self, op: FloatImm) -> PrimExpr:
        return op

    @_default
    def visit_var_(self, op: Var) -> PrimExpr:
        """A use of a variable: its ``var_remap`` replacement, if any, else itself."""
        remap = self.var_remap
        if remap:
            new = remap.get(op.vid)
            if new is not None:
                return new
        return op

    @_default
    def _mutate_binary(self, op: Any) -> PrimExpr:
        a = self.visit_expr(op.a)
        b = self.visit_expr(op.b)
        if a is op.a and b is op.b:
            return cast(PrimExpr, op)
        return cast(PrimExpr, type(op)(a, b))

    visit_add_ = visit_sub_ = visit_mul_ = visit_floor_div_ = visit_floor_mod_ = _mutate_binary
    visit_min_ = visit_max_ = visit_eq_ = visit_ne_ = visit_lt_ = visit_le_ = _mutate_binary
    visit_gt_ = visit_ge_ = visit_and_ = visit_or_ = _mutate_binary

    @_default
    def visit_not_(self, op: Not) -> PrimExpr:
        a = self.visit_expr(op.a)
        return op if a is op.a else Not(a)

    @_default
    def visit_select_(self, op: Select) -> PrimExpr:
        c = self.visit_expr(op.condition)
        t = self.visit_expr(op.true_value)
        f = self.visit_expr(op.false_value)
        if c is op.condition and t is op.true_value and f is op.false_value:
            return op
        return Select(c, t, f)

    @_default
    def visit_cast_(self, op: Cast) -> PrimExpr:
        v = self.visit_expr(op.value)
        return op if v is op.value else Cast(op.dtype, v)

    @_default
    def visit_call_(self, op: Call) -> PrimExpr:
        args = _visit_each(self.visit_expr, op.args)
        return op if args is op.args else Call(op.dtype, op.op, args)

    @_default
    def visit_ramp_(self, op: Ramp) -> PrimExpr:
        base = self.visit_expr(op.base)
        stride = self.visit_expr(op.stride)
        if base is op.base and stride is op.stride:
            return op
        return Ramp(base, stride, op.lanes)

    @_default
    def visit_broadcast_(self, op: Broadcast) -> PrimExpr:
        v = self.visit_expr(op.value)
        return op if v is op.value else Broadcast(v, op.lanes)

    @_default
    def visit_buffer_load_(self, op: BufferLoad) -> PrimExpr:
        buf = self._buffer(op.buffer)
        indices = _visit_each(self.visit_expr, op.indices)
        if buf is op.buffer and indices is op.indices:
            return op
        return BufferLoad(buf, indices)

    # ---------------------------------------------------------------- statements

    @_default
    def visit_for_(self, op: For) -> Stmt:
        lo = self.visit_expr(op.min)
        extent = self.visit_expr(op.extent)
        body = self.visit_stmt(op.body)
        if lo is op.min and extent is op.extent and body is op.body:
            return op
        return For(op.loop_var, lo, extent, op.kind, body, op.annotations)

    @_default
    def visit_seq_stmt_(self, op: SeqStmt) -> Stmt:
        seq = _visit_each(self.visit_stmt, op.seq)
        return op if seq is op.seq else SeqStmt(seq)

    @_default
    def visit_buffer_store_(self, op: BufferStore) -> Stmt:
        buf = self._buffer(op.buffer)
        value = self.visit_expr(op.value)
        indices = _visit_each(self.visit_expr, op.indices)
        if buf is op.buffer and value is op.value and indices is op.indices:
            return op
        return BufferStore(buf, value, indices)

    @_default
    def visit_if_then_else_(self, op: IfThenElse) -> Stmt:
        cond = self.visit_expr(op.condition)
        then_case = self.visit_stmt(op.then_case)
        else_case = None if op.else_case is None else self.visit_stmt(op.else_case)
        if cond is op.condition and then_case is op.then_case and else_case is op.else_case:
            return op
        return IfThenElse(cond, then_case, else_case)

    @_default
    def visit_let_stmt_(self, op: LetStmt) -> Stmt:
        value = self.visit_expr(op.value)
        body = self.visit_stmt(op.body)
        if value is op.value and body is op.body:
            return op
        return LetStmt(op.var, value, body)

    @_default
    def visit_allocate_(self, op: Allocate) -> Stmt:
        buf = self._buffer(op.buffer)
        body = self.visit_stmt(op.body)
        if buf is op.buffer and body is op.body:
            return op
        return Allocate(buf, body)

    @_default
    def visit_evaluate_(self, op: Evaluate) -> Stmt:
        v = self.visit_expr(op.value)
        return op if v is op.value else Evaluate(v)

    # ---------------------------------------------------------------- buffers and functions

    @_default
    def visit_buffer(self, buf: Buffer) -> Buffer:
        """A buffer (memoized per object): its ``buffer_remap`` replacement, else itself with its
        shape and strides visited (rebuilt only if one of them changed)."""
        remap = self.buffer_remap
        if remap:
            new = remap.get(buf.vid)
            if new is not None:
                return new
        shape = _visit_each(self.visit_expr, buf.shape)
        strides = _visit_each(self.visit_expr, buf.strides)
        if shape is buf.shape and strides is buf.strides:
            return buf
        return Buffer(buf.vid, buf.name, buf.dtype, shape, strides)

    @_default
    def visit_prim_func(self, func: PrimFunc) -> PrimFunc:
        """A function: its buffer parameters, then its body, in a fresh memo; same object if unchanged."""
        return self._in_new_scope(self._mutate_prim_func, func)

    def _param(self, p: Var | Buffer) -> Var | Buffer:
        return self._buffer(p) if type(p) is Buffer else p

    def _mutate_prim_func(self, func: PrimFunc) -> PrimFunc:
        params = _visit_each(self._param, func.params)
        body = self.visit_stmt(func.body)
        if body is func.body and params is func.params:
            return func
        return msgspec.structs.replace(func, params=params, body=body)


# ---------------------------------------------------------------- helpers

#: Children of each node kind in field order, as post_order_visit walks them (definitions excluded).
_PO_KIDS: dict[type, Callable[[Any], tuple[Any, ...]]] = {
    IntImm: lambda n: (),
    FloatImm: lambda n: (),
    Var: lambda n: (),
    **{kind: (lambda n: (n.a, n.b)) for kind in _BINARY_NAMES},
    Not: lambda n: (n.a,),
    Select: lambda n: (n.condition, n.true_value, n.false_value),
    Cast: lambda n: (n.value,),
    Call: lambda n: n.args,
    Ramp: lambda n: (n.base, n.stride),
    Broadcast: lambda n: (n.value,),
    BufferLoad: lambda n: (n.buffer, *n.indices),
    For: lambda n: (n.min, n.extent, n.body),
    SeqStmt: lambda n: n.seq,
    BufferStore: lambda n: (n.buffer, n.value, *n.indices),
    IfThenElse: lambda n: (n.condition, n.then_case, n.else_case),
    LetStmt: lambda n: (n.value, n.body),
    Allocate: lambda n: (n.buffer, n.body),
    Evaluate: lambda n: (n.value,),
    Buffer: lambda n: (*n.shape, *n.strides),
    PrimFunc: lambda n: (*(p for p in n.params if type(p) is Buffer), n.body),
}


def post_order_visit(node: Any, fvisit: Callable[[Any], Any]) -> None:
    """Call ``fvisit`` on every statement and expression under ``node``, children first (TVM's name).

    ``node`` is a statement, an expression, a :class:`~parpass.ir.tir.Buffer` or a
    :class:`~parpass.ir.tir.PrimFunc`. The order is post-order, left to right in
    field order; each distinct node object is visited once (a shared
    subexpression, or a shared ``IntImm``, is reported at its first place).
    Expressions in buffer shapes and strides are included (the buffer of a load,
    store or allocation comes before the node's other children), but ``fvisit``
    never receives the ``Buffer`` or ``PrimFunc`` itself. Definitions
    (``For.loop_var``, ``LetStmt.var``, scalar parameters) are not visited, as in
    :class:`StmtExprVisitor`. Iterative: any depth works.
    """
    kids_of = _PO_KIDS
    if type(node) not in kids_of:
        raise TypeError(
            f"post_order_visit: cannot walk {_describe(node)}; expected a tir statement, expression, Buffer or PrimFunc"
        )
    silent = (Buffer, PrimFunc)
    state: dict[int, bool] = {}  # id -> True once reported, False while its children are visited
    stack: list[Any] = [node]
    push = stack.append
    pop = stack.pop
    while stack:
        n = stack[-1]
        k = id(n)
        s = state.get(k)
        if s is None:
            state[k] = False
            kids = kids_of.get(type(n))
            if kids is None:
                raise TypeError(f"post_order_visit: cannot walk {_describe(n)} (found under {_describe(node)})")
            depth = len(stack)
            for c in reversed(kids(n)):
                if c is not None and id(c) not in state:
                    push(c)
            if len(stack) != depth:
                continue
        elif s:
            pop()
            continue
        pop()
        state[k] = True
        if type(n) not in silent:
            fvisit(n)


_N = TypeVar("_N")

ValueMap = Union[Mapping[Union[int, Var], tir.PrimExprLike], Callable[[Var], Union[PrimExpr, None]]]


class _CallableSubstituter(StmtExprMutator):
    """:func:`substitute` with a function ``Var -> PrimExpr | None``."""

    def __init__(self, fn: Callable[[Var], PrimExpr | None]) -> None:
        super().__init__()
        self._fn = fn

    def visit_var_(self, op: Var) -> PrimExpr:
        new = self._fn(op)
        return op if new is None else new


def _normalize_map(value_map: Mapping[Any, Any]) -> dict[int, PrimExpr]:
    out: dict[int, PrimExpr] = {}
    for key, value in value_map.items():
        if type(key) is Var:
            vid, dtype, name = key.vid, key.dtype, f"%{key.name_hint} (vid {key.vid})"
        elif isinstance(key, int) and not isinstance(key, bool):
            vid, dtype, name = key, None, f"vid {key}"
        else:
            raise TypeError(f"substitute: map keys must be tir.Var or int vids, got {_describe(key)}")
        if isinstance(value, tir.PrimExprBase):
            out[vid] = cast(PrimExpr, value)  # the PrimExpr union lists every concrete PrimExprBase class
        elif isinstance(value, (int, float)):
            out[vid] = tir.convert(value, dtype=dtype)
        else:
            raise TypeError(
                f"substitute: the replacement of {name} must be a tir expression or a number, got {_describe(value)}"
            )
    return out


def substitute(node: _N, value_map: ValueMap) -> _N:
    """``node`` with the uses of variables replaced (TVM's ``tir.stmt_functor.substitute``).

    ``value_map`` maps variables (a :class:`~parpass.ir.tir.Var` or its vid) to
    replacement expressions (Python numbers become immediates of the variable's
    dtype), or is a function ``Var -> PrimExpr | None`` (None keeps the
    variable). ``node`` is an expression, a statement, a
    :class:`~parpass.ir.tir.Buffer` or a :class:`~parpass.ir.tir.PrimFunc`.

    Variables inside buffer shapes and strides are replaced too, so every
    occurrence of a buffer (parameter, allocation, loads, stores) gets the same
    substituted shape and the IR stays consistent when, e.g., a symbolic size is
    specialized to a constant. Definitions (``For.loop_var``, ``LetStmt.var``,
    scalar parameters) are left alone. Returns ``node`` itself when nothing was
    replaced; otherwise only the paths to the replaced uses are rebuilt.
    """
    mutator: StmtExprMutator
    if isinstance(value_map, Mapping):
        remap = _normalize_map(value_map)
        if not remap:
            return node
        mutator = StmtExprMutator(var_remap=remap)
    elif callable(value_map):
        mutator = _CallableSubstituter(value_map)
    else:
        raise TypeError(f"substitute: value_map must be a mapping or a function, got {_describe(value_map)}")
    # each visit gives back a node of the kind it was given (the same class for a PrimFunc or a Buffer)
    subject: object = node  # narrowed by its class below (a TypeVar is not)
    if type(subject) is PrimFunc:
        return cast(_N, mutator.visit_prim_func(subject))
    if type(subject) is Buffer:
        return cast(_N, mutator.visit_buffer(subject))
    kind = type(subject)
    if kind in mutator._dispatch or kind in mutator._leaf_dispatch:
        return cast(_N, mutator.visit_stmt(cast(Stmt, subject)))  # its dispatch takes expressions too
    raise TypeError(
        f"substitute: cannot substitute in {_describe(node)}; expected a tir expression, statement, Buffer or PrimFunc"
    )
