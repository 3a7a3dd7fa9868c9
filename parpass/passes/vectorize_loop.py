"""``VectorizeLoop``: ``vectorized`` loops become vector code (TVM's ``tir.transform.VectorizeLoop``).

A loop ``for i in vectorized(min, n)`` with a constant extent ``n >= 2`` is
replaced by its body evaluated once on ``n`` lanes: ``i`` becomes
``ramp(min, 1, n)``, arithmetic on it stays a ``Ramp`` where it is linear
(``i * 4 + 1`` -> ``ramp(min * 4 + 1, 4, n)``), loop-invariant operands of a
vector operation are ``Broadcast``, loads and stores with a vector index become
vector accesses. An extent of 1 becomes the body with ``i`` replaced by ``min``.

The loop falls back to a ``serial`` loop with the same body (which means the
same) when it cannot be vectorized safely:

* the extent is not a constant ``>= 1``;
* the body holds a loop, an ``Allocate``, an ``IfThenElse`` whose condition
  depends on ``i``, or vectors already (a nested vectorized loop);
* a store does not depend on ``i`` (every lane would write the same element),
  or its index is not linear in ``i`` (each vector index must be a ``Ramp`` with
  a constant stride; a scatter could write one element twice);
* the lanes could interfere. The serial loop runs the whole body for lane 0,
  then for lane 1, ...; the vector code runs each statement for all lanes at once.
  The two agree when each lane only touches its own elements of every buffer the
  body writes. So for each stored buffer the pass requires that every access to
  it in the body (loads anywhere, stores) uses the same index, and that this
  index gives distinct elements for distinct lanes (the element strides of its
  ``Ramp`` dimensions combine to a non-zero step; with a symbolic shape only the
  last dimension of a compact buffer may be a ``Ramp``). Buffers that are only
  read may be accessed at any index, vector or not (a gather).

A ``LetStmt`` in the body whose value depends on ``i`` is substituted into its
uses when its value has no loads (it is pure arithmetic, so moving it is safe),
and otherwise becomes a let of a vector variable with a fresh id. Deterministic,
iterative (deep expressions, lets and loop nests are fine) and
identity-preserving; the result has no ``vectorized`` loop left, so the pass is
idempotent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, cast

from parpass.ir import IdSupply, structural_equal, tir
from parpass.ir.dtype import element_dtype, vector_dtype
from parpass.ir.module import IRModule
from parpass.ir.stmt_functor import StmtExprMutator, post_order, substitute
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
    ForKind,
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
from parpass.transform import PassContext, PrimFuncTransform, Statistic

__all__ = ["VectorizeLoop", "vectorize_prim_func"]

VECTORIZED = Statistic("VectorizeLoop", "vectorized", "vectorized loops replaced by vector code")
SERIALIZED = Statistic("VectorizeLoop", "serialized", "vectorized loops made serial (cannot be vectorized safely)")

_ARITH = (Add, Sub, Mul)  # a Ramp stays a Ramp under these where it is linear
_BINARY = (*_ARITH, FloorDiv, FloorMod, Min, Max, EQ, NE, LT, LE, GT, GE, And, Or)
_INT_LIMITS = {
    f"{s}int{b}": (0 if s else -(1 << (b - 1)), (1 << b) - 1 if s else (1 << (b - 1)) - 1)
    for b in (8, 16, 32, 64)
    for s in ("", "u")
}


def _is_vector_dtype(dtype: str) -> bool:
    """Whether ``dtype`` is a vector dtype (``int32x4``: it has a lane count)."""
    return element_dtype(dtype) != dtype


class _Fallback(Exception):
    """The loop cannot be vectorized safely; the message says why."""


def _fold(kind: type, a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """``kind(a, b)`` for scalar ``+ - *``, folding immediates (never into a wrap) and ``x + 0``, ``x * 1``."""
    if type(a) is IntImm and type(b) is IntImm:
        value = a.value + b.value if kind is Add else a.value - b.value if kind is Sub else a.value * b.value
        lo, hi = _INT_LIMITS.get(a.dtype, (0, -1))
        if lo <= value <= hi:
            return IntImm(a.dtype, value)
    if type(b) is IntImm and b.value == (1 if kind is Mul else 0):
        return a
    if kind is not Sub and type(a) is IntImm and a.value == (1 if kind is Mul else 0):
        return b
    return cast(PrimExpr, kind(a, b))


_kids = tir.operands


class _LoopVectorizer:
    """Vectorizes the body of one loop, or raises :class:`_Fallback`."""

    def __init__(self, loop: For, lanes: int, ids: Any) -> None:
        self.loop = loop
        self.lanes = lanes
        self.ids = ids  # a callable giving the function's IdSupply
        dtype = loop.loop_var.dtype
        self.env: dict[int, PrimExpr] = {loop.loop_var.vid: Ramp(loop.min, IntImm(dtype, 1), lanes)}
        self.let_vars: dict[int, Var] = {}  # let variable -> its vector replacement
        self.memo: dict[int, PrimExpr] = {}
        self.vectors: set[int] = set()  # ids of results that are vectors
        self.keep: list[Any] = []
        self.loads: list[tuple[Buffer, tuple[PrimExpr, ...]]] = []
        self.stores: list[tuple[Buffer, tuple[PrimExpr, ...]]] = []

    # ------------------------------------------------------------------ expressions

    def is_vector(self, e: PrimExpr) -> bool:
        return id(e) in self.vectors

    def vector(self, e: PrimExpr) -> PrimExpr:
        """``e`` as a vector: a scalar is broadcast."""
        return e if self.is_vector(e) else Broadcast(e, self.lanes)

    def _made(self, e: PrimExpr) -> PrimExpr:
        self.vectors.add(id(e))
        self.keep.append(e)
        return e

    def expr(self, root: PrimExpr) -> PrimExpr:
        """``root`` evaluated on all lanes at once (a scalar when it does not depend on the loop)."""
        memo = self.memo
        stack = [root]
        while stack:
            node = stack[-1]
            if id(node) in memo:
                stack.pop()
                continue
            kids = _kids(node)
            depth = len(stack)
            for k in kids:
                if id(k) not in memo:
                    stack.append(k)
            if len(stack) != depth:
                continue
            stack.pop()
            memo[id(node)] = self._node(node, kids, [memo[id(k)] for k in kids])
            self.keep.append(node)
        return memo[id(root)]

    def _node(self, node: Any, kids: tuple[Any, ...], vals: list[PrimExpr]) -> PrimExpr:
        """``node`` on all lanes, given its operands ``kids`` already evaluated to ``vals``."""
        kind = type(node)
        if kind is Var:
            return self._var(node)
        if kind is IntImm or kind is FloatImm:
            return cast(PrimExpr, node)
        if kind is Ramp or kind is Broadcast or ((kind is Cast or kind is Call) and _is_vector_dtype(node.dtype)):
            raise _Fallback("the body already holds vectors (is a vectorized loop nested?)")
        if not any(self.is_vector(v) for v in vals):
            return self._invariant(node, kids, vals)
        rule = _VECTOR_RULES.get(kind)
        if rule is None:
            raise _Fallback(f"cannot vectorize a {kind.__name__}")
        return self._made(rule(self, node, vals))

    def _var(self, var: Var) -> PrimExpr:
        """What ``var`` stands for on all lanes: the loop's Ramp, a let's value or vector variable, or itself."""
        if _is_vector_dtype(var.dtype):
            raise _Fallback("the body already holds vectors")
        new = self.env.get(var.vid)
        if new is None:
            return var
        if type(new) is Ramp or type(new) is Broadcast or (type(new) is Var and _is_vector_dtype(new.dtype)):
            self.vectors.add(id(new))
        self.keep.append(new)
        return new

    def _invariant(self, node: Any, kids: tuple[Any, ...], vals: list[PrimExpr]) -> PrimExpr:
        """A node whose operands are all scalars: the same on every lane (rebuilt if an operand changed)."""
        out = node if all(v is k for v, k in zip(vals, kids, strict=True)) else self._rebuild(node, vals)
        if type(node) is BufferLoad:
            self.loads.append((node.buffer, tuple(vals)))
        return cast(PrimExpr, out)

    # The vector forms of the operations, for a node with at least one vector operand.

    def _vector_arith(self, node: Any, vals: list[PrimExpr]) -> PrimExpr:
        """``+ - *``: a Ramp where linear, else the vector operation."""
        ramp = self._ramp_arith(type(node), vals[0], vals[1])
        return ramp if ramp is not None else self._vector_binary(node, vals)

    def _vector_binary(self, node: Any, vals: list[PrimExpr]) -> PrimExpr:
        return cast(PrimExpr, type(node)(self.vector(vals[0]), self.vector(vals[1])))

    def _vector_not(self, node: Not, vals: list[PrimExpr]) -> PrimExpr:
        return Not(vals[0])

    def _vector_select(self, node: Select, vals: list[PrimExpr]) -> PrimExpr:
        cond, t, f = vals
        if not (self.is_vector(t) or self.is_vector(f)):
            t, f = Broadcast(t, self.lanes), Broadcast(f, self.lanes)
        return Select(cond, self.vector(t), self.vector(f))

    def _vector_cast(self, node: Cast, vals: list[PrimExpr]) -> PrimExpr:
        return Cast(vector_dtype(node.dtype, self.lanes), vals[0])

    def _vector_call(self, node: Call, vals: list[PrimExpr]) -> PrimExpr:
        return Call(vector_dtype(node.dtype, self.lanes), node.op, tuple(self.vector(v) for v in vals))

    def _vector_load(self, node: BufferLoad, vals: list[PrimExpr]) -> PrimExpr:
        indices = tuple(vals)
        self.loads.append((node.buffer, indices))
        return BufferLoad(node.buffer, indices)

    def _ramp_arith(self, kind: type, a: Any, b: Any) -> PrimExpr | None:
        """Linear arithmetic on a Ramp stays a Ramp: ``ramp(b, s) + x = ramp(b + x, s)``, ..."""
        ra, rb = type(a) is Ramp, type(b) is Ramp
        va, vb = self.is_vector(a), self.is_vector(b)
        if kind is Mul:
            if ra and not vb:
                return Ramp(_fold(Mul, a.base, b), _fold(Mul, a.stride, b), a.lanes)
            if rb and not va:
                return Ramp(_fold(Mul, a, b.base), _fold(Mul, a, b.stride), b.lanes)
            return None
        if ra and rb:
            return Ramp(_fold(kind, a.base, b.base), _fold(kind, a.stride, b.stride), a.lanes)
        if ra and not vb:
            return Ramp(_fold(kind, a.base, b), a.stride, a.lanes)
        if rb and not va:
            stride = b.stride if kind is Add else _fold(Sub, IntImm(b.stride.dtype, 0), b.stride)
            return Ramp(_fold(kind, a, b.base), stride, b.lanes)
        return None

    @staticmethod
    def _rebuild(node: Any, vals: list[PrimExpr]) -> PrimExpr:
        kind = type(node)
        if kind in _BINARY:
            return cast(PrimExpr, kind(vals[0], vals[1]))
        if kind is Not:
            return Not(vals[0])
        if kind is Select:
            return Select(vals[0], vals[1], vals[2])
        if kind is Cast:
            return Cast(node.dtype, vals[0])
        if kind is Call:
            return Call(node.dtype, node.op, tuple(vals))
        if kind is BufferLoad:
            return BufferLoad(node.buffer, tuple(vals))
        raise _Fallback(f"cannot rebuild a {kind.__name__}")

    # ------------------------------------------------------------------ statements

    def body(self, body: Stmt) -> Stmt:
        """The vectorized body: lets and conditions first (top-down), then statements bottom-up."""
        self._prepare(body)
        return self._rewrite(body)

    def _prepare(self, body: Stmt) -> None:
        """Top-down: reject what cannot be vectorized, and vectorize let values and conditions."""
        stack: list[Any] = [body]
        while stack:
            s = stack.pop()
            step = _PREPARE_STEPS.get(type(s))
            if step is None:
                raise _Fallback(f"cannot vectorize a {type(s).__name__}")
            step(self, s, stack)

    def _prepare_seq(self, s: SeqStmt, stack: list[Any]) -> None:
        stack.extend(reversed(s.seq))

    def _prepare_let(self, s: LetStmt, stack: list[Any]) -> None:
        value = self.expr(s.value)
        if self.is_vector(value):
            if _has_load(s.value):  # keep the evaluation point: a let of a vector variable
                var = Var(self.ids().fresh(), s.var.name_hint, vector_dtype(s.var.dtype, self.lanes))
                self.let_vars[s.var.vid] = var
                self.env[s.var.vid] = var
            else:  # pure arithmetic: substitute it
                self.env[s.var.vid] = value
        stack.append(s.body)

    def _prepare_if(self, s: IfThenElse, stack: list[Any]) -> None:
        if self.is_vector(self.expr(s.condition)):
            raise _Fallback("an IfThenElse condition depends on the loop variable")
        if s.else_case is not None:
            stack.append(s.else_case)
        stack.append(s.then_case)

    def _prepare_leaf(self, s: BufferStore | Evaluate, stack: list[Any]) -> None:
        """A store or evaluate: vectorized bottom-up, later."""

    def _reject_loop(self, s: For, stack: list[Any]) -> None:
        raise _Fallback("the body holds a loop")

    def _reject_allocate(self, s: Allocate, stack: list[Any]) -> None:
        raise _Fallback("the body holds an Allocate")

    def _rewrite(self, body: Stmt) -> Stmt:
        done: dict[int, Stmt] = {}
        stack: list[tuple[bool, Any]] = [(False, body)]
        while stack:
            expanded, s = stack.pop()
            if id(s) in done:
                continue
            kind = type(s)
            kids: tuple[Any, ...] = ()
            if kind is SeqStmt:
                kids = s.seq
            elif kind is LetStmt:
                kids = (s.body,)
            elif kind is IfThenElse:
                kids = (s.then_case,) if s.else_case is None else (s.then_case, s.else_case)
            if not expanded and kids:
                stack.append((True, s))
                stack.extend((False, k) for k in reversed(kids))
                continue
            done[id(s)] = self._stmt(s, kind, done)
            self.keep.append(s)
        return done[id(body)]

    def _stmt(self, s: Any, kind: type, done: dict[int, Stmt]) -> Stmt:
        if kind is BufferStore:
            indices = tuple(self.expr(i) for i in s.indices)
            if not any(self.is_vector(i) for i in indices):
                raise _Fallback(f"the store to {s.buffer.name} does not depend on the loop variable")
            self.stores.append((s.buffer, indices))
            return BufferStore(s.buffer, self.vector(self.expr(s.value)), indices)
        if kind is Evaluate:
            value = self.expr(s.value)
            return s if value is s.value else Evaluate(value)
        if kind is SeqStmt:
            return SeqStmt(tuple(done[id(x)] for x in s.seq))
        if kind is IfThenElse:
            else_case = None if s.else_case is None else done[id(s.else_case)]
            return IfThenElse(self.expr(s.condition), done[id(s.then_case)], else_case)
        if kind is LetStmt:
            body = done[id(s.body)]
            var = self.let_vars.get(s.var.vid)
            if var is not None:
                return LetStmt(var, self.expr(s.value), body)
            if s.var.vid in self.env:
                return body  # substituted into its uses
            return LetStmt(s.var, self.expr(s.value), body)
        raise _Fallback(f"cannot vectorize a {kind.__name__}")

    # ------------------------------------------------------------------ lanes must not interfere

    def check_independent(self) -> None:
        """Raise :class:`_Fallback` unless each lane touches only its own elements of every stored buffer."""
        stored: dict[int, tuple[Buffer, tuple[PrimExpr, ...]]] = {}
        for buf, indices in self.stores:
            first = stored.setdefault(buf.vid, (buf, indices))
            if not _same_indices(first[1], indices):
                raise _Fallback(f"buffer {buf.name} is stored at different indices")
        for buf, indices in self.loads:
            written = stored.get(buf.vid)
            if written is not None and not _same_indices(written[1], indices):
                raise _Fallback(f"buffer {buf.name} is read at another index than it is written")
        for buf, indices in stored.values():
            if not self._distinct_lanes(buf, indices):
                raise _Fallback(f"the store to {buf.name} may write one element from several lanes")

    def _distinct_lanes(self, buf: Buffer, indices: tuple[PrimExpr, ...]) -> bool:
        """True when the lanes of ``buf[indices]`` are distinct elements: a non-zero combined step."""
        step = 0
        for k, index in enumerate(indices):
            if not self.is_vector(index):
                continue
            if type(index) is not Ramp or type(index.stride) is not IntImm:
                return False  # a scatter
            element = _element_stride(buf, k)
            if element is None:
                return False
            step += index.stride.value * element
        span = abs(step) * (self.lanes - 1)
        return step != 0 and span < (1 << 31)


#: The vector form of each operation a vectorized body may hold (see :meth:`_LoopVectorizer._node`).
_VECTOR_RULES: dict[type, Callable[[_LoopVectorizer, Any, list[PrimExpr]], PrimExpr]] = {
    **dict.fromkeys(_ARITH, _LoopVectorizer._vector_arith),
    **dict.fromkeys(_BINARY[len(_ARITH) :], _LoopVectorizer._vector_binary),
    Not: _LoopVectorizer._vector_not,
    Select: _LoopVectorizer._vector_select,
    Cast: _LoopVectorizer._vector_cast,
    Call: _LoopVectorizer._vector_call,
    BufferLoad: _LoopVectorizer._vector_load,
}

#: What :meth:`_LoopVectorizer._prepare` does with each statement it may meet (anything else cannot be vectorized).
_PREPARE_STEPS: dict[type, Callable[[_LoopVectorizer, Any, list[Any]], None]] = {
    SeqStmt: _LoopVectorizer._prepare_seq,
    LetStmt: _LoopVectorizer._prepare_let,
    IfThenElse: _LoopVectorizer._prepare_if,
    BufferStore: _LoopVectorizer._prepare_leaf,
    Evaluate: _LoopVectorizer._prepare_leaf,
    For: _LoopVectorizer._reject_loop,
    Allocate: _LoopVectorizer._reject_allocate,
}


def _element_stride(buf: Buffer, k: int) -> int | None:
    """The element stride of dimension ``k`` of ``buf`` if it is a constant."""
    if buf.strides:
        s = buf.strides[k]
        return int(s.value) if type(s) is IntImm else None
    stride = 1
    for d in buf.shape[k + 1 :]:
        if type(d) is not IntImm:
            return None
        stride *= int(d.value)
    return stride


def _same_indices(a: tuple[PrimExpr, ...], b: tuple[PrimExpr, ...]) -> bool:
    return len(a) == len(b) and all(x is y or structural_equal(x, y) for x, y in zip(a, b, strict=True))


def _has_load(expr: PrimExpr) -> bool:
    stack: list[Any] = [expr]
    seen: set[int] = set()
    while stack:
        e = stack.pop()
        if type(e) is BufferLoad:
            return True
        if id(e) not in seen:
            seen.add(id(e))
            stack.extend(_kids(e))
    return False


class _Vectorizer(StmtExprMutator):
    """Vectorizes every ``vectorized`` loop of a function, innermost first.

    ``vectorized`` counts the loops replaced by their body on all lanes (an extent of 1 included:
    one lane), ``serialized`` those that fell back to a ``serial`` loop.
    """

    def __init__(self, func: PrimFunc) -> None:
        super().__init__()
        self.func = func
        self._ids: IdSupply | None = None
        self.vectorized = 0
        self.serialized = 0

    def ids(self) -> IdSupply:
        if self._ids is None:
            self._ids = IdSupply.for_function(self.func)
        return self._ids

    @post_order
    def visit_for_(self, op: For) -> Stmt:
        new = super().visit_for_(op)
        if op.kind != ForKind.VECTORIZED or type(new) is not For:
            return new
        extent = new.extent
        n = int(extent.value) if type(extent) is IntImm and extent.dtype != "bool" else 0
        if n == 1:
            self.vectorized += 1
            return substitute(new.body, {new.loop_var.vid: new.min})
        if n >= 2:
            vectorizer = _LoopVectorizer(new, n, self.ids)
            try:
                body = vectorizer.body(new.body)
                vectorizer.check_independent()
                self.vectorized += 1
                return body
            except _Fallback:
                pass
        self.serialized += 1
        return For(new.loop_var, new.min, new.extent, ForKind.SERIAL, new.body, new.annotations)


def vectorize_prim_func(func: PrimFunc) -> PrimFunc:
    """``func`` with its ``vectorized`` loops vectorized (or made serial); the same object if it has none."""
    vectorizer = _Vectorizer(func)
    out = vectorizer.visit_prim_func(func)
    if vectorizer.vectorized:
        VECTORIZED.add(vectorizer.vectorized)
    if vectorizer.serialized:
        SERIALIZED.add(vectorizer.serialized)
    return out


@dataclass(frozen=True)
class VectorizeLoop(PrimFuncTransform):
    """Vectorize the ``vectorized`` loops of every PrimFunc (see :mod:`parpass.passes.vectorize_loop`)."""

    name: ClassVar[str] = "VectorizeLoop"
    opt_level: ClassVar[int] = 0

    def transform_function(self, func: PrimFunc, mod: IRModule, ctx: PassContext) -> PrimFunc:
        return vectorize_prim_func(func)
