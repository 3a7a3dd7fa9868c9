"""``Simplify``: arithmetic simplification of loop-level functions (TVM's ``tir.transform.Simplify``).

Every expression of a :class:`~parpass.ir.PrimFunc` (values, indices, loop bounds,
conditions, let values) is rewritten by the arithmetic analyzer of
:mod:`parpass.ir.arith` (constant folding, canonical integer sums, identities,
decisions by interval bounds), with the facts the function gives it:

* **Facts from the program.** A loop with constant bounds gives its variable the
  range ``[min, min + extent)``; a loop of extent 1, and a let bound to a constant
  or a variable, are substituted; other let values give their variable the range
  of the value, and ``FloorDiv``/``FloorMod`` see through them. So ``i < 16`` is
  true inside ``for i in range(16)``, ``(i * 8 + j) // 8`` is ``i`` when
  ``0 <= j < 8``. Buffers are left as they are, so a variable used in the shape
  of an allocated buffer is never substituted away.

Statements then follow: an ``IfThenElse`` with a decided condition keeps the taken
branch, a loop with extent ``<= 0`` disappears, a loop of extent 1 becomes its
body, and nested ``SeqStmt``s are flattened. What is removed disappears from its
``SeqStmt``; a function whose whole body disappears gets ``Evaluate(0)``.

Facts are global to a function: variable ids are unique in well-formed IR, so a
fact recorded at a definition holds at every use; a variable defined twice (ill-
formed IR) gets no facts. Results are memoized per expression object and
unchanged subtrees keep their identity; a function without anything to simplify
is returned as the same object. All walks are iterative (any depth). The pass
is idempotent: a simplified function simplifies to itself.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from operator import is_not
from typing import Any, ClassVar

from parpass.ir.arith import Arith, simplify_expr
from parpass.ir.module import IRModule
from parpass.ir.stmt_functor import post_order_visit
from parpass.ir.tir import (
    Allocate,
    BufferStore,
    Evaluate,
    FloatImm,
    For,
    IfThenElse,
    IntImm,
    LetStmt,
    Not,
    PrimExpr,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
)
from parpass.transform import PassContext, PrimFuncTransform, Statistic

__all__ = ["Arith", "Simplify", "simplify_expr", "simplify_prim_func"]

SIMPLIFIED = Statistic("Simplify", "simplified", "statement expressions rewritten")
REMOVED = Statistic("Simplify", "removed", "statements removed or replaced by their body")
DECIDED = Statistic("Simplify", "decided", "if conditions decided at compile time")

#: Marks a statement Simplify removed; a SeqStmt drops it, a function body becomes Evaluate(0).
_REMOVED: Any = None
_ENTER, _EXIT = 0, 1


def _noop() -> Stmt:
    return Evaluate(IntImm("int32", 0))


def _statements(body: Stmt) -> Iterator[Any]:
    """Every statement of ``body``, each object once (iterative)."""
    stack: list[Any] = [body]
    seen: set[int] = set()
    while stack:
        s = stack.pop()
        if id(s) in seen:
            continue
        seen.add(id(s))
        yield s
        kind = type(s)
        if kind is For or kind is LetStmt or kind is Allocate:
            stack.append(s.body)
        elif kind is SeqStmt:
            stack.extend(s.seq)
        elif kind is IfThenElse:
            stack.append(s.then_case)
            if s.else_case is not None:
                stack.append(s.else_case)


def _definitions(func: PrimFunc) -> tuple[set[int], set[int]]:
    """Ids defined exactly once (facts are recorded only for those), and ids used in allocated shapes.

    A variable used in the shape of an allocated buffer is never substituted away: buffers
    are left as they are, so its definition must stay.
    """
    in_shapes: set[int] = set()
    defined = [p.vid for p in func.params]
    for s in _statements(func.body):
        kind = type(s)
        if kind is For:
            defined.append(s.loop_var.vid)
        elif kind is LetStmt:
            defined.append(s.var.vid)
        elif kind is Allocate:
            for e in (*s.buffer.shape, *s.buffer.strides):
                post_order_visit(e, lambda n: in_shapes.add(n.vid) if type(n) is Var else None)
    return {vid for vid, n in Counter(defined).items() if n == 1}, in_shapes


class _StmtSimplifier:
    """Rewrites the statements of one function, iteratively, with one :class:`Arith` analyzer.

    A top-down visit of each statement records the facts its definitions give
    (loop ranges, let values) before anything below it is simplified; a bottom-up
    visit then rebuilds it from its rewritten children.

    Counts: ``simplified``, the expressions of the statements kept (a store's value and each index, an
    evaluated value, loop bounds, an ``if`` condition, a let value) that were rewritten; ``removed``,
    the loops, lets, ``if``s and allocations removed or replaced by their body (or taken branch);
    ``decided``, the ``if``s whose condition became a constant (each is also in ``removed``).
    """

    def __init__(self, func: PrimFunc) -> None:
        self.arith = Arith()
        self.simplify = self.arith.simplify
        self.defined_once, self.in_shapes = _definitions(func)
        self.memo: dict[int, Any] = {}  # statement id -> rewritten statement, or _REMOVED
        self.simplified = 0
        self.removed = 0
        self.decided = 0

    def run(self, body: Stmt) -> Stmt:
        """The simplified ``body`` (``Evaluate(0)`` if all of it was removed)."""
        memo = self.memo
        stack: list[tuple[int, Any]] = [(_ENTER, body)]
        while stack:
            phase, s = stack.pop()
            if id(s) in memo:
                continue
            visit = _VISITS.get(type(s))
            if visit is None:
                raise TypeError(f"Simplify: {type(s).__name__} is not a loop-level statement")
            enter, exit_ = visit
            if phase == _ENTER:
                kids = enter(self, s)
                if kids is None:  # decided without looking inside
                    continue
                stack.append((_EXIT, s))
                stack.extend((_ENTER, k) for k in reversed(kids) if id(k) not in memo)
            else:
                memo[id(s)] = exit_(self, s)
        out: Stmt = memo[id(body)]
        return _noop() if out is _REMOVED else out

    # --- top-down: record the facts ``s`` defines; return the statements to visit (None: ``s`` is done)

    def _enter_for(self, s: Any) -> tuple[Any, ...] | None:
        lo, extent = self.simplify(s.min), self.simplify(s.extent)
        n = extent.value if type(extent) is IntImm else None
        if n is not None and n <= 0:
            self.memo[id(s)] = _REMOVED
            self.removed += 1
            return None
        var = s.loop_var
        if var.vid not in self.defined_once:
            return (s.body,)
        if n == 1 and self.arith.dtype_of(lo) == var.dtype and var.vid not in self.in_shapes:
            self.arith.bind_value(var, lo)  # extent 1: substituted
        elif n is not None and type(lo) is IntImm:
            self.arith.bind_range(var, lo.value, lo.value + n - 1)
        return (s.body,)

    def _enter_let(self, s: Any) -> tuple[Any, ...]:
        value = self.simplify(s.value)
        var = s.var
        if var.vid in self.defined_once:
            substitutable = var.vid not in self.in_shapes and self.arith.dtype_of(value) == var.dtype
            if type(value) in (IntImm, FloatImm, Var) and substitutable:
                self.arith.bind_value(var, value)
            else:
                self.arith.bind_let(var, value)
        return (s.body,)

    def _enter_if(self, s: Any) -> tuple[Any, ...]:
        cond = self.simplify(s.condition)
        if type(cond) is IntImm:  # only the taken branch matters
            taken = s.then_case if cond.value else s.else_case
            return (taken,) if taken is not None else ()
        return (s.then_case,) if s.else_case is None else (s.then_case, s.else_case)

    def _enter_seq(self, s: SeqStmt) -> tuple[Any, ...]:
        return s.seq

    def _enter_body(self, s: Any) -> tuple[Any, ...]:
        return (s.body,)

    def _enter_leaf(self, s: Any) -> tuple[Any, ...]:
        return ()

    # --- bottom-up: the rewritten statement (or _REMOVED) from its rewritten children

    def _exit_store(self, s: Any) -> Any:
        value = self.simplify(s.value)
        indices = tuple(map(self.simplify, s.indices))
        rewritten = (value is not s.value) + sum(map(is_not, indices, s.indices))
        if not rewritten:
            return s
        self.simplified += rewritten
        return BufferStore(s.buffer, value, indices)

    def _exit_evaluate(self, s: Any) -> Any:
        value = self.simplify(s.value)
        if value is s.value:
            return s
        self.simplified += 1
        return Evaluate(value)

    def _exit_seq(self, s: Any) -> Any:
        out: list[Stmt] = []
        changed = False
        for k in s.seq:
            r = self.memo[id(k)]
            if r is not k:
                changed = True
            if type(r) is SeqStmt:
                out.extend(r.seq)
                changed = True
            elif r is not _REMOVED:
                out.append(r)
        if not changed:
            return s
        if not out:
            return _REMOVED
        return out[0] if len(out) == 1 else SeqStmt(tuple(out))

    def _exit_for(self, s: Any) -> Any:
        body = self.memo[id(s.body)]
        if body is _REMOVED:
            self.removed += 1
            return _REMOVED
        lo, extent = self.simplify(s.min), self.simplify(s.extent)
        if self.arith.substitutes(s.loop_var):
            self.removed += 1
            return body  # extent 1: the loop variable was substituted by ``min``
        rewritten = (lo is not s.min) + (extent is not s.extent)
        if not rewritten and body is s.body:
            return s
        self.simplified += rewritten
        return For(s.loop_var, lo, extent, s.kind, body, s.annotations)

    def _exit_if(self, s: Any) -> Any:
        cond = self.simplify(s.condition)
        if type(cond) is IntImm:
            self.decided += 1
            self.removed += 1
            taken = s.then_case if cond.value else s.else_case
            return _REMOVED if taken is None else self.memo[id(taken)]
        then_case = self.memo[id(s.then_case)]
        else_case = None if s.else_case is None else self.memo[id(s.else_case)]
        if else_case is _REMOVED:
            else_case = None
        if then_case is _REMOVED:
            return self._if_without_then(cond, else_case)
        if cond is s.condition and then_case is s.then_case and else_case is s.else_case:
            return s
        self.simplified += cond is not s.condition
        return IfThenElse(cond, then_case, else_case)

    def _if_without_then(self, cond: PrimExpr, else_case: Any) -> Any:
        """An ``if`` whose then-branch was removed: nothing, or the else-branch under the negated condition."""
        if else_case is None:
            self.removed += 1
            return _REMOVED
        self.simplified += 1  # the condition, negated
        return IfThenElse(self.simplify(Not(cond)), else_case)

    def _exit_let(self, s: Any) -> Any:
        body = self.memo[id(s.body)]
        if body is _REMOVED or self.arith.substitutes(s.var):
            self.removed += 1  # removed, or every use was replaced by the value
            return body
        value = self.simplify(s.value)
        if value is s.value and body is s.body:
            return s
        self.simplified += value is not s.value
        return LetStmt(s.var, value, body)

    def _exit_allocate(self, s: Any) -> Any:
        body = self.memo[id(s.body)]
        if body is _REMOVED:
            self.removed += 1
            return _REMOVED
        return s if body is s.body else Allocate(s.buffer, body)


_Enter = Callable[[_StmtSimplifier, Any], "tuple[Any, ...] | None"]
_Exit = Callable[[_StmtSimplifier, Any], Any]
#: Per kind of statement: (top-down visit, bottom-up visit).
_VISITS: dict[type, tuple[_Enter, _Exit]] = {
    For: (_StmtSimplifier._enter_for, _StmtSimplifier._exit_for),
    LetStmt: (_StmtSimplifier._enter_let, _StmtSimplifier._exit_let),
    IfThenElse: (_StmtSimplifier._enter_if, _StmtSimplifier._exit_if),
    SeqStmt: (_StmtSimplifier._enter_seq, _StmtSimplifier._exit_seq),
    Allocate: (_StmtSimplifier._enter_body, _StmtSimplifier._exit_allocate),
    BufferStore: (_StmtSimplifier._enter_leaf, _StmtSimplifier._exit_store),
    Evaluate: (_StmtSimplifier._enter_leaf, _StmtSimplifier._exit_evaluate),
}


def simplify_prim_func(func: PrimFunc) -> PrimFunc:
    """``func`` with its statements and expressions simplified; the same object if nothing changes."""
    simplifier = _StmtSimplifier(func)
    out = func.with_body(simplifier.run(func.body))
    if simplifier.simplified:
        SIMPLIFIED.add(simplifier.simplified)
    if simplifier.removed:
        REMOVED.add(simplifier.removed)
    if simplifier.decided:
        DECIDED.add(simplifier.decided)
    return out


@dataclass(frozen=True)
class Simplify(PrimFuncTransform):
    """Arithmetic simplification of every PrimFunc (see :mod:`parpass.passes.simplify`)."""

    name: ClassVar[str] = "Simplify"
    opt_level: ClassVar[int] = 0

    def transform_function(self, func: PrimFunc, mod: IRModule, ctx: PassContext) -> PrimFunc:
        return simplify_prim_func(func)
