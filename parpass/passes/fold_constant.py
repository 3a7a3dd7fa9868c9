"""FoldConstant: evaluate, at compile time, what only depends on constants.

A call of a registered op whose arguments are all constants is replaced by the
op's result, computed with the op registry's ``evaluate`` rule (the same rule
the reference interpreter uses, so folding cannot change what a program
computes). Ops that are not pure (``print``, ``random_uniform``) are never
evaluated, nor are calls of module functions. ``t[i]`` of a constant tuple, or
of a tuple expression whose field ``i`` is constant, becomes that field.

An argument is constant when it is a :class:`~parpass.ir.Constant`, a variable
bound to one (or to a tuple of constants), or a nested expression that folds.
Bindings are visited in order, so a chain ``a = add(c1, c2); b = mul(a, c3)``
folds completely in one run: the result is a fixed point and running the pass
again changes nothing. The folded bindings keep their variables (a later
DeadCodeElimination removes the ones nobody uses any more).

Not folded: ``If`` on a constant condition, and calls whose evaluation the op's
type rule rejects (an ill-typed call is left for InferType to report).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, ClassVar, Union

import numpy as np

from parpass.ir import Binding, Call, Constant, Function, IRModule, Op, Tuple, TupleGetItem, Var, get_op
from parpass.ir.dtype import dtype_name
from parpass.ir.expr_functor import ExprMutator
from parpass.ir.relax import Expr
from parpass.transform import FunctionTransform, PassContext, Statistic

__all__ = ["FoldConstant"]

FOLDED = Statistic("FoldConstant", "folded", "calls folded into constants")
PROJECTIONS = Statistic("FoldConstant", "projections", "tuple projections folded into constants")

_NATIVE_LITTLE_ENDIAN = sys.byteorder == "little"

#: What a variable is known to be bound to: a constant, or a tuple expression (whose fields may be constant).
Known = Union[Constant, Tuple]


class _ConstantFolder(ExprMutator):
    """Folds one function; ``known`` maps a variable id to the constant or tuple it is bound to.

    ``folded`` and ``projections`` count the calls and ``t[i]`` projections replaced by constants.
    """

    def __init__(self) -> None:
        super().__init__()
        self.known: dict[int, Known] = {}
        self.folded = 0
        self.projections = 0

    # ------------------------------------------------------------ bindings

    def visit_binding(self, binding: Binding) -> Binding:
        value: Any = binding.value
        new: Any
        kind = type(value)
        if kind is Call and all(type(a) is Var or type(a) is Constant for a in value.args):
            new = self.fold_call(value)  # fast path: nothing nested to visit first (no variable is remapped)
        elif kind is TupleGetItem and type(value.tuple_value) is Var:
            new = self.fold_getitem(value)
        elif kind is Var or kind is Constant:
            new = value
        else:
            new = self.visit_expr(value)  # nested expressions fold bottom-up through the handlers below
        kind = type(new)
        if kind is Constant or kind is Tuple:
            self.known[binding.var.vid] = new
        elif kind is Var and new.vid in self.known:
            self.known[binding.var.vid] = self.known[new.vid]
        if new is value:
            return binding
        return Binding(binding.var, new, binding.ty)

    # ------------------------------------------------------------ nested expressions

    def visit_call_(self, op: Call) -> Expr:
        new = super().visit_call_(op)
        return self.fold_call(new) if type(new) is Call else new

    def visit_tuple_getitem_(self, op: TupleGetItem) -> Expr:
        new = super().visit_tuple_getitem_(op)
        return self.fold_getitem(new) if type(new) is TupleGetItem else new

    # ------------------------------------------------------------ folding

    def fold_call(self, call: Call) -> Expr:
        """The folded value of ``call``, or ``call`` itself when it cannot be folded."""
        callee = call.op
        if type(callee) is not Op:
            return call  # a call of a module function is not evaluated
        known = self.known
        for arg in call.args:  # a quick rejection first: most calls have a non-constant variable argument
            if type(arg) is Var and arg.vid not in known:
                return call
        info = get_op(callee.name)
        if not info.pure or info.evaluate is None:
            return call
        args = []
        for arg in call.args:
            const = self.constant_of(arg)
            if const is None:
                return call
            args.append(_to_numpy(const))
        try:
            result = info.evaluate(args, call.attrs)
        except (TypeError, ValueError):
            return call  # ill-typed: InferType reports it; folding must not fail on code that may never run
        self.folded += 1
        return _from_numpy(result)

    def fold_getitem(self, item: TupleGetItem) -> Expr:
        """``t[i]`` as a constant when field ``i`` of the tuple ``t`` is constant, else ``item`` itself."""
        tup: Any = item.tuple_value
        if type(tup) is Var:
            tup = self.known.get(tup.vid)
        if type(tup) is not Tuple or not 0 <= item.index < len(tup.fields):
            return item
        const = self.constant_of(tup.fields[item.index])
        if const is None:
            return item
        self.projections += 1
        return const

    def constant_of(self, expr: Expr) -> Constant | Tuple | None:
        """``expr`` as a constant expression (a Constant, or a Tuple whose leaves are all Constants), or None."""
        root = self.resolve(expr)
        if type(root) is not Tuple:
            return root if type(root) is Constant else None
        # Tuples (of tuples): an explicit post-order, so nesting depth costs no Python frames.
        done: dict[int, Constant | Tuple | None] = {}
        stack: list[tuple[Any, bool]] = [(root, False)]
        while stack:
            node, ready = stack.pop()
            if type(node) is not Tuple:
                done[id(node)] = node if type(node) is Constant else None
            elif not ready:
                stack.append((node, True))
                stack.extend((self.resolve(f), False) for f in node.fields)
            else:
                fields = [c for c in (done[id(self.resolve(f))] for f in node.fields) if c is not None]
                if len(fields) < len(node.fields):
                    done[id(node)] = None  # a field is not constant
                elif all(f is g for f, g in zip(fields, node.fields, strict=True)):
                    done[id(node)] = node
                else:
                    done[id(node)] = Tuple(tuple(fields))
        return done[id(root)]

    def resolve(self, expr: Any) -> Any:
        """What a variable is known to be bound to (None if unknown); any other expression itself."""
        return self.known.get(expr.vid) if type(expr) is Var else expr


def _to_numpy(const: Constant | Tuple) -> Any:
    """A constant expression as the value ``evaluate`` rules take: an array, or a tuple of values."""
    if type(const) is Constant:
        return const.numpy()
    # Nested tuples through an explicit post-order (field values are collected before their tuple).
    values: dict[int, Any] = {}
    stack: list[tuple[Any, bool]] = [(const, False)]
    while stack:
        node, ready = stack.pop()
        if type(node) is Constant:
            values[id(node)] = node.numpy()
        elif not ready:
            stack.append((node, True))
            stack.extend((f, False) for f in node.fields)
        else:
            values[id(node)] = tuple(values[id(f)] for f in node.fields)
    return values[id(const)]


def _from_numpy(value: Any) -> Constant | Tuple:
    """An ``evaluate`` result as a constant expression, keeping its dtype and shape."""
    if not isinstance(value, tuple):
        arr = np.asarray(value)
        if _NATIVE_LITTLE_ENDIAN and arr.dtype.isnative:  # the common case, without from_value's conversions
            return Constant(arr.tobytes(), dtype_name(arr.dtype), tuple(int(d) for d in arr.shape))
        return Constant.from_value(arr)
    # Tuple-valued ops (``split``) return flat tuples; nesting, if any, is shallow.
    return Tuple(tuple(_from_numpy(v) for v in value))


@dataclass(frozen=True)
class FoldConstant(FunctionTransform):
    """The FoldConstant pass (function level, opt_level 2): evaluates calls of pure ops on constants.

    Returns the same function object when nothing folds.
    """

    name: ClassVar[str] = "FoldConstant"
    opt_level: ClassVar[int] = 2

    def transform_function(self, func: Function, mod: IRModule, ctx: PassContext) -> Function:
        folder = _ConstantFolder()
        out = folder.visit_function(func)
        if folder.folded:
            FOLDED.add(folder.folded)
        if folder.projections:
            PROJECTIONS.add(folder.projections)
        return out
