"""DeadCodeElimination: remove bindings whose value nobody uses and whose computation has no effect.

Each block is walked backwards, from its result expression to its first
binding, tracking which variables are used by what is kept: a binding is
dropped when its variable is not used and its value is pure. Walking
backwards removes whole chains of dead bindings in one run, so running the
pass again changes nothing. ``If`` branches are blocks too: they are cleaned
the same way, and an ``If`` whose value is unused disappears entirely when
nothing in it has an effect.

What is pure: variables, constants, tuples and projections of pure values,
calls of pure ops, and calls of module functions that are pure themselves:
a ``PrimFunc`` (called in destination-passing style, it only writes its own
fresh outputs) or a ``Function`` whose body, and every function it calls,
calls only pure ops. A call of a stateful op (``print``, ``random_uniform``),
of a function that calls one, of a function that is not in the module, or of
a (mutually) recursive function, which might not terminate, is kept even when
its value is unused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from parpass.ir import Binding, Call, Constant, Function, GlobalVar, If, IRModule, Op, PrimFunc, SeqExpr, Var, get_op
from parpass.ir.expr_functor import ExprMutator
from parpass.ir.relax import Expr
from parpass.passes.module_memo import ModuleMemo
from parpass.transform import FunctionTransform, PassContext, Statistic

__all__ = ["DeadCodeElimination"]

REMOVED = Statistic("DeadCodeElimination", "removed", "bindings removed")


class _FunctionPurity:
    """Which functions of ``mod`` are pure, found on demand (iteratively) and remembered."""

    def __init__(self, mod: IRModule) -> None:
        self.mod = mod
        self.pure: dict[str, bool] = {}

    def is_pure(self, name: str) -> bool:
        memo = self.pure
        known = memo.get(name)
        if known is not None:
            return known
        # Depth-first over the call graph. Every function on the stack calls the one above it, so an
        # impure callee (or a call back into the stack: recursion) makes all of them impure.
        stack: list[tuple[str, Any]] = []
        on_stack: set[str] = set()

        def enter(fname: str) -> bool:
            callees = self._direct_callees(fname)
            if callees is None:
                memo[fname] = False
                return False
            stack.append((fname, iter(callees)))
            on_stack.add(fname)
            return True

        def all_impure() -> None:
            for fname, _ in stack:
                memo[fname] = False
            stack.clear()

        if not enter(name):
            return False
        while stack:
            fname, callees = stack[-1]
            callee = next(callees, None)
            if callee is None:
                stack.pop()
                on_stack.discard(fname)
                memo[fname] = True
            elif callee in on_stack or memo.get(callee) is False or (callee not in memo and not enter(callee)):
                all_impure()
        return memo[name]

    def _direct_callees(self, name: str) -> list[str] | None:
        """The module functions ``name`` calls, or None if it is impure by itself (or missing)."""
        if name not in self.mod:
            return None
        func = self.mod[name]
        if isinstance(func, PrimFunc):
            return []
        if not isinstance(func, Function):
            return None
        return _callees_unless_impure(func.body)


def _callees_unless_impure(body: SeqExpr) -> list[str] | None:
    """The module functions ``body`` calls (in first-call order), or None if it calls an impure op."""
    callees: dict[str, None] = {}
    stack: list[Any] = [body]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is Call:
            op = node.op
            if type(op) is Op:
                if not get_op(op.name).pure:
                    return None
            elif type(op) is GlobalVar:
                callees[op.name_hint] = None
            stack.extend(node.args)
        elif kind is Binding:
            stack.append(node.value)
        elif kind is not Var and kind is not Constant:
            stack.extend(node.children())
    return list(callees)


class _DeadCodeRemover(ExprMutator):
    """Cleans one function. ``visit_var_`` sees every use of a kept value and records it in ``live``.

    ``removed`` counts the bindings dropped (a dropped ``If`` binding counts once, whatever its blocks hold).
    """

    def __init__(self, purity: _FunctionPurity) -> None:
        super().__init__()
        self.purity = purity
        self.live: set[int] = set()
        self.removed = 0

    def visit_var_(self, op: Var) -> Expr:
        self.live.add(op.vid)
        return op

    def visit_seq_expr(self, seq: SeqExpr) -> SeqExpr:
        body = self.visit_expr(seq.body)
        live = self.live
        kept: list[Binding] = []
        changed = body is not seq.body
        for binding in reversed(seq.bindings):
            value: Any = binding.value
            if binding.var.vid not in live and self.is_pure(value):
                changed = True
                self.removed += 1
                continue
            kind = type(value)
            if kind is Call and all(type(a) is Var or type(a) is Constant for a in value.args):
                live.update(a.vid for a in value.args if type(a) is Var)  # fast path: a flat call is unchanged
            elif kind is Var:
                live.add(value.vid)
            elif kind is not Constant:
                new = self.visit_expr(value)  # records uses; cleans the blocks of nested Ifs
                if new is not value:
                    binding = Binding(binding.var, new, binding.ty)
                    changed = True
            kept.append(binding)
        if not changed:
            return seq
        kept.reverse()
        return SeqExpr(tuple(kept), body)

    def is_pure(self, expr: Expr) -> bool:
        """Whether evaluating ``expr`` has no effect besides its value (nested blocks included)."""
        if type(expr) is Call and type(expr.op) is Op and all(type(a) is Var or type(a) is Constant for a in expr.args):
            return get_op(expr.op.name).pure  # fast path: a flat op call (the most common value)
        if type(expr) is Var or type(expr) is Constant:
            return True
        return self.nested_is_pure(expr)

    def nested_is_pure(self, expr: Expr) -> bool:
        """:meth:`is_pure` for any expression: an explicit walk, so nesting depth costs no Python frames."""
        stack: list[Any] = [expr]
        while stack:
            node = stack.pop()
            kind = type(node)
            if kind is Var or kind is Constant:
                continue
            if kind is Call:
                if not self.is_pure_callee(node.op):
                    return False
                stack.extend(node.args)
            elif kind is If:
                stack.append(node.cond)
                for branch in (node.then_branch, node.else_branch):
                    stack.extend(b.value for b in branch.bindings)
                    stack.append(branch.body)
            else:
                stack.extend(node.children())
        return True

    def is_pure_callee(self, op: Op | GlobalVar) -> bool:
        """Whether calling ``op`` (an op, or a module function) has no effect besides its value."""
        if isinstance(op, Op):
            return get_op(op.name).pure
        return self.purity.is_pure(op.name_hint)


@dataclass(frozen=True)
class DeadCodeElimination(FunctionTransform):
    """The DeadCodeElimination pass (function level, opt_level 1): removes unused pure bindings.

    Runs :class:`_DeadCodeRemover` on every function; which functions are pure is remembered for the module of
    one pass run (see :class:`~parpass.passes.module_memo.ModuleMemo`).
    """

    name: ClassVar[str] = "DeadCodeElimination"
    reads_other_functions: ClassVar[bool] = True  # whether its callees are pure
    opt_level: ClassVar[int] = 1

    _purity: ModuleMemo[_FunctionPurity] = field(
        default_factory=lambda: ModuleMemo(_FunctionPurity), init=False, repr=False, compare=False
    )

    def transform_function(self, func: Function, mod: IRModule, ctx: PassContext) -> Function:
        remover = _DeadCodeRemover(self._purity.of(mod))
        out = remover.visit_function(func)
        if remover.removed:
            REMOVED.add(remover.removed)
        return out
