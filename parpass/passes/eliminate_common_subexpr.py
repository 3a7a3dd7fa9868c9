"""EliminateCommonSubexpr: compute each distinct pure operator call once.

Two bindings whose values are calls of the same pure op, with the same
arguments and the same attributes, compute the same value; the second one is
dropped and its uses read the first one's variable instead.

Calls are compared by a key built *after* earlier replacements were applied
to their arguments, so chains collapse in one run (``a2 = f(x)`` is replaced
by ``a1``, which makes ``g(a2)`` equal to an earlier ``g(a1)``). Variables
compare by id, constants by dtype, shape and bytes, attributes regardless of
their order.

Scopes: a binding inside an ``If`` branch may reuse a value computed before
the ``If``, never the reverse, and the two branches never share values.

Not eliminated: calls of impure ops (``print``, ``random_uniform``), calls of
module functions, and tuples and projections (cheap, and CanonicalizeBindings
handles their round trips).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, ClassVar

import msgspec

from parpass.ir import Binding, Call, Constant, Function, IRModule, Op, SeqExpr, Var, get_op
from parpass.ir.expr_functor import ExprMutator
from parpass.ir.relax import Expr, If
from parpass.transform import FunctionTransform, PassContext, Statistic

__all__ = ["EliminateCommonSubexpr"]

ELIMINATED = Statistic("EliminateCommonSubexpr", "eliminated", "bindings removed as repeats of an earlier call")

# Attribute dicts enter keys as msgpack bytes with sorted keys, so that {"a": 1, "b": 2} == {"b": 2, "a": 1}.
_ENCODER = msgspec.msgpack.Encoder(order="sorted")


class _CommonSubexprEliminator(ExprMutator):
    """Rewrites one function; ``available`` maps a call key to the variable holding its value.

    ``eliminated`` counts the bindings dropped because an earlier binding computes the same call.
    """

    def __init__(self) -> None:
        super().__init__()
        self.available: dict[Hashable, Var] = {}
        self.added: list[Hashable] = []  # keys in the order they became available, to close scopes
        self.eliminated = 0

    def visit_seq_expr(self, seq: SeqExpr) -> SeqExpr:
        # A block is a scope: what it makes available is forgotten when it ends.
        mark = len(self.added)
        new = super().visit_seq_expr(seq)
        for key in self.added[mark:]:
            del self.available[key]
        del self.added[mark:]
        return new

    def visit_binding(self, binding: Binding) -> Binding | None:
        value = binding.value
        new: Expr
        if type(value) is Call and all(type(a) is Var or type(a) is Constant for a in value.args):
            new = self.substitute_args(value)  # fast path for A-normal form
        else:
            new = self.visit_expr(value)
        if type(new) is Call:
            key = _key(new)
            if key is not None:
                first = self.available.get(key)
                if first is not None:
                    self.var_remap[binding.var.vid] = first
                    self.eliminated += 1
                    return None
                self.available[key] = binding.var
                self.added.append(key)
        if new is value:
            return binding
        return Binding(binding.var, new, binding.ty)

    def substitute_args(self, call: Call) -> Call:
        """``call`` (whose arguments are variables and constants) with replaced variables substituted."""
        remap = self.var_remap
        if not remap:
            return call
        args = tuple(remap.get(a.vid, a) if type(a) is Var else a for a in call.args)
        if all(a is b for a, b in zip(args, call.args, strict=True)):
            return call
        return Call(call.op, args, call.attrs)


def _key(call: Call) -> Hashable | None:
    """The identity of the value ``call`` computes, or None when it must not be shared (not a pure op call)."""
    op = call.op
    if type(op) is not Op or not get_op(op.name).pure:
        return None
    parts: list[Any] = [op.name, _ENCODER.encode(call.attrs) if call.attrs else b""]
    arg: Any
    for arg in call.args:
        kind = type(arg)
        if kind is Var:
            parts.append(arg.vid)
        elif kind is Constant:
            parts.append((arg.dtype, arg.shape, arg.data))
        elif _is_pure(arg):
            # A nested argument: compared by its encoding (variables by id and name, which is conservative).
            parts.append(_ENCODER.encode(arg))
        else:
            return None
    return tuple(parts)


def _is_pure(expr: Expr) -> bool:
    """Whether ``expr`` (nested) calls only pure ops and holds no ``If`` (blocks are not compared)."""
    stack: list[Any] = [expr]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is Call:
            if type(node.op) is not Op or not get_op(node.op.name).pure:
                return False
            stack.extend(node.args)
        elif kind is If:
            return False
        else:
            stack.extend(node.children())
    return True


@dataclass(frozen=True)
class EliminateCommonSubexpr(FunctionTransform):
    """The EliminateCommonSubexpr pass (function level, opt_level 2): one binding per distinct pure op call."""

    name: ClassVar[str] = "EliminateCommonSubexpr"
    opt_level: ClassVar[int] = 2

    def transform_function(self, func: Function, mod: IRModule, ctx: PassContext) -> Function:
        eliminator = _CommonSubexprEliminator()
        out = eliminator.visit_function(func)
        if eliminator.eliminated:
            ELIMINATED.add(eliminator.eliminated)
        return out
