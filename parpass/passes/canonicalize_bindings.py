"""CanonicalizeBindings: remove copies and trivial tuple round trips.

Two rewrites, both of which only rename values (nothing is computed differently):

* copy propagation: after ``y = x``, every use of ``y`` (the returned
  expression included) becomes ``x`` and the binding is dropped;
* tuple round trips: after ``t = (a, b)``, ``y = t[0]`` is a copy of ``a``,
  so uses of ``y`` become ``a`` and the binding is dropped. The same holds
  for ``(a, b)[0]`` written inline. ``t`` itself stays (DeadCodeElimination
  removes it when nothing else uses it).

Bindings are visited in order and the replacements are recorded in the
mutator's ``var_remap``, so chains (``z = y; y = x``) collapse in one run and
running the pass again changes nothing. A copy inside an ``If`` branch is
replaced only inside that branch, which is the only place its variable can
be used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from parpass.ir import Binding, Call, Constant, Function, IRModule, Tuple, TupleGetItem, Var
from parpass.ir.expr_functor import ExprMutator
from parpass.ir.relax import Expr
from parpass.transform import FunctionTransform, PassContext, Statistic

__all__ = ["CanonicalizeBindings"]

COPIES = Statistic("CanonicalizeBindings", "copies", "copy bindings removed")
PROJECTIONS = Statistic("CanonicalizeBindings", "projections", "tuple projections replaced by the field's variable")


class _Canonicalizer(ExprMutator):
    """Rewrites one function; ``tuples`` maps a variable id to the tuple expression bound to it.

    ``copies`` counts the bindings dropped because their value is (or projects to) a variable;
    ``projections`` the ``t[i]`` replaced by the variable in field ``i``, in a binding or nested.
    """

    def __init__(self) -> None:
        super().__init__()
        self.tuples: dict[int, Tuple] = {}
        self.copies = 0
        self.projections = 0

    def visit_binding(self, binding: Binding) -> Binding | None:
        value: Any = binding.value
        kind = type(value)
        remap = self.var_remap
        # Fast paths for A-normal form (operands are variables and constants); anything nested goes
        # through the general mutator.
        if kind is Var:
            new: Expr = remap.get(value.vid, value)
        elif (kind is Call or kind is Tuple) and all(
            type(a) is Var or type(a) is Constant for a in (value.args if kind is Call else value.fields)
        ):
            new = self.substitute_leaves(value)
        elif kind is TupleGetItem and type(value.tuple_value) is Var:
            tup = remap.get(value.tuple_value.vid, value.tuple_value)
            new = value if tup is value.tuple_value else TupleGetItem(tup, value.index)
        else:
            new = self.visit_expr(value)
        if type(new) is TupleGetItem:
            new = self.project(new)
        if type(new) is Var:
            remap[binding.var.vid] = new  # a copy: later uses read the original
            self.copies += 1
            return None
        if type(new) is Tuple:
            self.tuples[binding.var.vid] = new
        if new is value:
            return binding
        return Binding(binding.var, new, binding.ty)

    def visit_tuple_getitem_(self, op: TupleGetItem) -> Expr:
        new = super().visit_tuple_getitem_(op)
        return self.project(new) if type(new) is TupleGetItem else new

    def project(self, item: TupleGetItem) -> Expr:
        """``t[i]`` as the variable in field ``i`` of the tuple ``t`` is bound to, when it is one."""
        tup: Expr | None = item.tuple_value
        if type(tup) is Var:
            tup = self.tuples.get(tup.vid)
        if type(tup) is Tuple and 0 <= item.index < len(tup.fields):
            field = tup.fields[item.index]
            if type(field) is Var:
                self.projections += 1
                return field
        return item

    def substitute_leaves(self, value: Call | Tuple) -> Expr:
        """``value`` (a call or tuple of variables and constants) with remapped variables replaced."""
        remap = self.var_remap
        if not remap:
            return value
        items = value.args if isinstance(value, Call) else value.fields
        new_items = tuple(remap.get(a.vid, a) if type(a) is Var else a for a in items)
        if all(a is b for a, b in zip(new_items, items, strict=True)):
            return value
        if type(value) is Call:
            return Call(value.op, new_items, value.attrs)
        return Tuple(new_items)


@dataclass(frozen=True)
class CanonicalizeBindings(FunctionTransform):
    """The CanonicalizeBindings pass (function level, opt_level 1): copy propagation and tuple round trips."""

    name: ClassVar[str] = "CanonicalizeBindings"
    opt_level: ClassVar[int] = 1

    def transform_function(self, func: Function, mod: IRModule, ctx: PassContext) -> Function:
        canonicalizer = _Canonicalizer()
        out = canonicalizer.visit_function(func)
        if canonicalizer.copies:
            COPIES.add(canonicalizer.copies)
        if canonicalizer.projections:
            PROJECTIONS.add(canonicalizer.projections)
        return out
