"""``RemoveNoOp``: removes statements that have no effect (TVM's ``tir.transform.RemoveNoOp``).

A statement is a no-op when running it changes no buffer. This pass removes:

* ``Evaluate`` of a side-effect-free expression (a constant, arithmetic, loads,
  the pure intrinsics of :data:`~parpass.ir.well_formed.INTRINSICS`; a call of any
  other intrinsic is assumed to have side effects and is kept);
* a store of the value just loaded from the same place (``A[i] = A[i]``);
* loops whose body is a no-op, or whose extent is a constant ``<= 0``;
* ``IfThenElse`` whose branches are both no-ops (an empty ``then`` with a real
  ``else`` becomes ``if not cond: else``; an empty ``else`` is dropped);
* ``LetStmt`` and ``Allocate`` whose body is a no-op, and ``LetStmt`` whose
  variable is no longer used and whose value is pure;
* empty and nested ``SeqStmt``s (flattened; a single statement stands alone).

Removing a statement never removes a side effect: the expressions it would have
evaluated are pure. (They may fail at run time, e.g. an out-of-bounds load; a
failing program has no meaning to preserve.) If the whole body is a no-op the
function keeps a valid body, ``Evaluate(0)``.

Written with :class:`~parpass.ir.stmt_functor.StmtExprMutator`: statement
handlers run after their children (``@post_order``), so a 2,000-deep loop nest is
walked without recursion, and unchanged subtrees keep their identity. A second
run changes nothing (the pass is idempotent).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from parpass.ir import structural_equal, tir
from parpass.ir.module import IRModule
from parpass.ir.stmt_functor import StmtExprMutator, StmtExprVisitor, post_order
from parpass.ir.tir import (
    Allocate,
    BufferLoad,
    BufferStore,
    Call,
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
)
from parpass.ir.well_formed import INTRINSICS
from parpass.transform import PassContext, PrimFuncTransform, Statistic

__all__ = ["RemoveNoOp", "is_no_op", "remove_no_op_prim_func"]

REMOVED = Statistic("RemoveNoOp", "removed", "statements without effect removed")


def _no_op() -> Stmt:
    return Evaluate(IntImm("int32", 0))


def is_no_op(stmt: Stmt) -> bool:
    """True for the no-op statements this pass leaves behind: ``Evaluate`` of a constant."""
    return type(stmt) is Evaluate and type(stmt.value) in (IntImm, FloatImm)


def _pure(*exprs: PrimExpr) -> bool:
    """No call of an intrinsic outside the pure ones anywhere in ``exprs`` (iterative walk)."""
    stack: list[Any] = list(exprs)
    seen: set[int] = set()
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if type(e) is Call and e.op not in INTRINSICS:
            return False
        stack.extend(c for c in e.children() if not isinstance(c, tir.Buffer))
    return True


def _flatten(seq: list[Stmt]) -> list[Stmt]:
    """The statements of ``seq`` with nested SeqStmts spliced in and no-ops dropped."""
    out: list[Stmt] = []
    for s in seq:
        if type(s) is SeqStmt:
            out.extend(x for x in s.seq if not is_no_op(x))  # children are already flat
        elif not is_no_op(s):
            out.append(s)
    return out


def _seq(op: SeqStmt, seq: list[Stmt]) -> Stmt:
    """``op`` rebuilt from its visited children ``seq``, flat and without no-ops."""
    flat = _flatten(seq)
    if not flat:
        return _no_op()
    if len(flat) == 1:
        return flat[0]
    if len(flat) == len(op.seq) and all(a is b for a, b in zip(flat, op.seq, strict=True)):
        return op
    return SeqStmt(tuple(flat))


class _NoOpRemover(StmtExprMutator):
    """Replaces every statement without effect by ``Evaluate(0)``, then drops those from sequences.

    ``removed`` counts the statements found to have no effect (a loop whose body has none counts
    with the statements of its body), and the constant ``Evaluate``s of the input dropped from a
    sequence or from an ``if`` that stays.
    """

    def __init__(self) -> None:
        super().__init__()
        self.removed = 0

    def _removed(self) -> Stmt:
        self.removed += 1
        return _no_op()

    def visit_evaluate_(self, op: Evaluate) -> Stmt:
        if is_no_op(op) or not _pure(op.value):
            return op
        return self._removed()

    def visit_buffer_store_(self, op: BufferStore) -> Stmt:
        value = op.value
        if (
            type(value) is BufferLoad
            and value.buffer.vid == op.buffer.vid
            and (value.buffer is op.buffer or value.buffer == op.buffer)
            and len(value.indices) == len(op.indices)
            and all(a is b or structural_equal(a, b) for a, b in zip(value.indices, op.indices, strict=True))
            and _pure(*op.indices)
        ):
            return self._removed()  # buf[i] = buf[i]
        return super().visit_buffer_store_(op)

    def visit_seq_stmt_(self, op: SeqStmt) -> Stmt:
        self.removed += sum(1 for s in op.seq if is_no_op(s))  # the input's own no-ops: _seq drops them
        return _seq(op, [self.visit_stmt(s) for s in op.seq])

    @post_order
    def visit_for_(self, op: For) -> Stmt:
        empty = type(op.extent) is IntImm and op.extent.value <= 0
        if (empty or is_no_op(self.visit_stmt(op.body))) and _pure(op.min, op.extent):
            return self._removed()
        return super().visit_for_(op)

    @post_order
    def visit_if_then_else_(self, op: IfThenElse) -> Stmt:
        then_case = self.visit_stmt(op.then_case)
        else_case = None if op.else_case is None else self.visit_stmt(op.else_case)
        if else_case is not None and is_no_op(else_case):
            if else_case is op.else_case:  # the input's own no-op (a replaced one counted already)
                self.removed += 1
            else_case = None
        if is_no_op(then_case):
            if else_case is None:
                if _pure(op.condition):
                    return self._removed()
                return op if then_case is op.then_case and op.else_case is None else IfThenElse(op.condition, then_case)
            cond = op.condition.a if type(op.condition) is Not else Not(op.condition)
            if then_case is op.then_case:  # the input's own no-op
                self.removed += 1
            return IfThenElse(cond, else_case)
        if then_case is op.then_case and else_case is op.else_case:
            return op
        return IfThenElse(op.condition, then_case, else_case)

    @post_order
    def visit_let_stmt_(self, op: LetStmt) -> Stmt:
        if is_no_op(self.visit_stmt(op.body)) and _pure(op.value):
            return self._removed()
        return super().visit_let_stmt_(op)

    @post_order
    def visit_allocate_(self, op: Allocate) -> Stmt:
        if is_no_op(self.visit_stmt(op.body)):
            return self._removed()
        return super().visit_allocate_(op)


class _CountUses(StmtExprVisitor):
    """How often each scalar variable is used."""

    def __init__(self) -> None:
        self.uses: dict[int, int] = {}

    def visit_var_(self, op: tir.Var) -> None:
        self.uses[op.vid] = self.uses.get(op.vid, 0) + 1


class _UnusedLetRemover(StmtExprMutator):
    """Removes lets whose variable is unused and whose value is pure (inner lets first).

    ``removed`` counts them.
    """

    def __init__(self, uses: dict[int, int]) -> None:
        super().__init__()
        self.uses = uses
        self.removed = 0

    @post_order
    def visit_let_stmt_(self, op: LetStmt) -> Stmt:
        if self.uses.get(op.var.vid, 0) == 0 and _pure(op.value):
            counter = _CountUses()
            counter.visit_expr(op.value)
            for vid, n in counter.uses.items():  # the value's uses go away with it
                self.uses[vid] -= n
            self.removed += 1
            return self.visit_stmt(op.body)
        return super().visit_let_stmt_(op)

    def visit_seq_stmt_(self, op: SeqStmt) -> Stmt:
        return _seq(op, [self.visit_stmt(s) for s in op.seq])


def _has_let(body: Stmt) -> bool:
    stack: list[Any] = [body]
    while stack:
        s = stack.pop()
        kind = type(s)
        if kind is LetStmt:
            return True
        if kind is SeqStmt:
            stack.extend(s.seq)
        elif kind is For or kind is Allocate:
            stack.append(s.body)
        elif kind is IfThenElse:
            stack.append(s.then_case)
            if s.else_case is not None:
                stack.append(s.else_case)
    return False


def remove_no_op_prim_func(func: PrimFunc) -> PrimFunc:
    """``func`` without its no-op statements; the same object if it has none."""
    remover = _NoOpRemover()
    body = remover.visit_stmt(func.body)
    removed = remover.removed
    if _has_let(body):
        counter = _CountUses()
        counter.visit_stmt(body)
        let_remover = _UnusedLetRemover(counter.uses)
        body = let_remover.visit_stmt(body)
        removed += let_remover.removed
    if removed:
        REMOVED.add(removed)
    return func.with_body(body)


@dataclass(frozen=True)
class RemoveNoOp(PrimFuncTransform):
    """Remove statements without effect from every PrimFunc (see :mod:`parpass.passes.remove_no_op`)."""

    name: ClassVar[str] = "RemoveNoOp"
    opt_level: ClassVar[int] = 0

    def transform_function(self, func: PrimFunc, mod: IRModule, ctx: PassContext) -> PrimFunc:
        return remove_no_op_prim_func(func)
