"""The arithmetic analyzer: a memoized bottom-up walk applying the rewrite rules, with facts about variables."""

from __future__ import annotations

from typing import Any, cast

from parpass.ir import tir
from parpass.ir.arith.dtypes import BINARY_SET, INT_RANGE, STEP_DTYPE, not_loop_level
from parpass.ir.arith.polynomial import LazySum, Result, poly_add, poly_mul
from parpass.ir.arith.rules import RewriteRules
from parpass.ir.tir import (
    Add,
    Broadcast,
    BufferLoad,
    Call,
    Cast,
    FloatImm,
    IntImm,
    Mul,
    Not,
    PrimExpr,
    Ramp,
    Select,
    Sub,
    Var,
)

__all__ = ["Arith", "simplify_expr"]

operands = tir.operands


class Arith(RewriteRules):
    """The arithmetic analyzer (TVM's ``arith::Analyzer``), with facts about variables.

    ``simplify(expr)`` returns the simplified expression (``expr`` itself when
    nothing changes). Facts are set with :meth:`bind_range` / :meth:`bind_value`
    / :meth:`bind_let` *before* any expression using the variable is simplified;
    results are memoized per expression object for the analyzer's lifetime, so
    one analyzer serves one function.

    Every expression the analyzer sees gets a structural id (see
    :mod:`parpass.ir.arith.hashcons`); integer sums are polynomials over atoms
    (:mod:`~parpass.ir.arith.polynomial`), atoms have bounds
    (:mod:`~parpass.ir.arith.bounds`), and each node is rewritten by
    :mod:`~parpass.ir.arith.rules` once its operands are simplified.
    """

    def __init__(self) -> None:
        super().__init__()
        self._dt = {}
        self.values: dict[int, PrimExpr] = {}
        self._memo: dict[int, Result] = {}
        #: integer immediates and variables by value: equal leaves (decoded IR does not share them) are seen once
        self._leaves: dict[PrimExpr, PrimExpr] = {}

    # ------------------------------------------------------------------ facts

    def bind_range(self, var: Var, lo: int, hi: int) -> None:
        """``lo <= var <= hi`` wherever ``var`` is used."""
        if var.dtype in INT_RANGE:
            rlo, rhi = INT_RANGE[var.dtype]
            self.ranges[var.vid] = (max(lo, rlo), min(hi, rhi))

    def bind_value(self, var: Var, value: PrimExpr) -> None:
        """``var`` equals the (simplified) ``value`` wherever it is used: uses are replaced."""
        self.values[var.vid] = value

    def bind_let(self, var: Var, value: PrimExpr) -> None:
        """``var`` is bound to the simplified ``value``: record its range and polynomial for proofs."""
        dtype = var.dtype
        if dtype not in INT_RANGE:
            return
        r = self._result(value)
        poly = self._poly(r, dtype)
        bound = self._exact_bound(poly, dtype)
        if bound is not None:
            self.bind_range(var, *bound)
            self.bindings[var.vid] = (poly, dtype)

    def substitutes(self, var: Var) -> bool:
        """Whether uses of ``var`` are replaced by a value (:meth:`bind_value`)."""
        return var.vid in self.values

    # ------------------------------------------------------------------ entry points

    def simplify(self, expr: PrimExpr) -> PrimExpr:
        """The simplified ``expr`` (the same object when nothing changes)."""
        return self._force(self._result(expr))

    def dtype_of(self, expr: PrimExpr) -> str:
        """The dtype of ``expr`` (simplifying it if the analyzer has not seen it yet)."""
        self._result(expr)
        return self._dt[id(expr)]

    # ------------------------------------------------------------------ the walk

    def _result(self, root: PrimExpr) -> Result:
        """The result of ``root``: operands first (post-order on an explicit stack), memoized per object."""
        memo = self._memo
        r = memo.get(id(root))
        if r is not None:
            return r
        stack = [root]
        while stack:
            node: Any = stack[-1]
            key = id(node)
            if key in memo:
                stack.pop()
                continue
            kind = type(node)
            if kind is IntImm or kind is FloatImm or kind is Var:
                stack.pop()
                self._leaf_result(node, kind, key)
                continue
            kids = operands(node)
            depth = len(stack)
            for k in kids:
                if id(k) not in memo:
                    stack.append(k)
            if len(stack) == depth:  # operands done
                stack.pop()
                self._composite_result(node, kind, kids, key)
        return memo[id(root)]

    def _leaf_result(self, node: Any, kind: type, key: int) -> None:
        """Record the result (by ``key``, the id of ``node``) of an immediate or a variable.

        An equal immediate or variable seen before gives its result and sid.
        """
        memo, dts = self._memo, self._dt
        self._keep.append(node)
        if kind is not FloatImm:  # (0.0 == -0.0: floats are not looked up by value)
            first = self._leaves.setdefault(node, node)
            if first is not node:
                fk = id(first)
                r = memo[fk]
                memo[key] = node if r is first else r
                dts[key] = dts[fk]
                s = self._sid.get(fk)
                if s is not None:
                    self._sid[key] = s
                return
        dtype = node.dtype
        dts[key] = dtype
        res: Result = node
        if kind is Var:
            value = self.values.get(node.vid)
            if value is not None and dts.get(id(value)) == dtype:
                res = value
            elif dtype in INT_RANGE:
                self._note_bound(node, dtype)
        memo[key] = res

    def _composite_result(self, node: Any, kind: type, kids: tuple[Any, ...], key: int) -> None:
        """Record the result (by ``key``, the id of ``node``) of a node whose operands have theirs."""
        memo, dts = self._memo, self._dt
        kid_dts = [dts[id(k)] for k in kids]
        step = STEP_DTYPE.get(kind)
        if step is None:
            raise not_loop_level(node)
        dtype = step(node, kid_dts)
        dts[key] = dtype
        res = self._rewrite(node, kind, kids, [memo[id(k)] for k in kids], kid_dts, dtype)
        memo[key] = res
        self._keep.append(node)
        if not isinstance(res, LazySum):
            if res is not node:
                self._note(res, dtype)
            if dtype in INT_RANGE and type(res) is not IntImm:
                self._note_bound(res, dtype)

    def _note(self, expr: PrimExpr, dtype: str) -> None:
        """Record a result as already simplified (results are fixpoints)."""
        key = id(expr)
        if key not in self._memo:
            self._memo[key] = expr
            self._dt[key] = dtype
            self._keep.append(expr)

    def _force(self, r: Result) -> PrimExpr:
        """The expression of result ``r`` (a pending sum is written out once)."""
        if not isinstance(r, LazySum):
            return r
        if r.expr is None:
            e = self._emit(r.poly, r.dtype)
            if e is not r.origin and self.sid(e) == self.sid(r.origin):
                e = r.origin
            self._remember(e, r.poly)
            self._note(e, r.dtype)
            r.expr = e
        return r.expr

    # ------------------------------------------------------------------ rewriting

    def _rewrite(
        self, node: Any, kind: type, kids: tuple[Any, ...], results: list[Result], kid_dts: list[str], dtype: str
    ) -> Result:
        """The result of composite ``node`` given its operands' results."""
        if dtype in INT_RANGE and (kind is Add or kind is Sub or kind is Mul):
            return self._polynomial(node, kind, results, dtype)
        es = [self._force(r) for r in results]
        out = self._rules(node, kind, es, dtype, results, kid_dts)
        if out is not None:
            return self._same(node, out)
        for e, k in zip(es, kids, strict=True):
            if e is not k:  # an operand changed (structurally: equal results keep their identity)
                return self._rebuild(node, es)
        return cast("PrimExpr | LazySum", node)

    def _polynomial(self, node: Any, kind: type, results: list[Result], dtype: str) -> Result:
        """An integer ``+``, ``-`` or ``*`` as a pending sum (a product too large to distribute: an atom)."""
        pa, pb = self._poly(results[0], dtype), self._poly(results[1], dtype)
        if kind is not Mul:
            return LazySum(poly_add(pa, pb, dtype, 1 if kind is Add else -1), dtype, node)
        product = poly_mul(pa, pb, dtype)
        if product is not None:
            return LazySum(product, dtype, node)
        ea, eb = self._force(results[0]), self._force(results[1])
        if self._order(self.sid(eb)) < self._order(self.sid(ea)):
            ea, eb = eb, ea
        return self._same(node, self._make(Mul, ea, eb))

    def _same(self, node: PrimExpr, out: PrimExpr) -> PrimExpr:
        """``node`` itself when ``out`` is structurally equal to it (keeps identity)."""
        if out is node or self.sid(out) != self.sid(node):
            return out
        return node

    def _rebuild(self, node: Any, es: list[PrimExpr]) -> PrimExpr:
        """``node`` with operands ``es`` (hash-consed)."""
        kind = type(node)
        if kind in BINARY_SET:
            return self._make(kind, es[0], es[1])
        if kind is Not:
            return self._make(Not, es[0])
        if kind is Select:
            return self._make(Select, *es)
        if kind is Cast:
            return self._make(Cast, es[0], leaf=(node.dtype,), build=lambda: Cast(node.dtype, es[0]))
        if kind is Call:
            return self._make(Call, *es, leaf=(node.dtype, node.op), build=lambda: Call(node.dtype, node.op, tuple(es)))
        if kind is Ramp:
            return self.ramp(es[0], es[1], node.lanes)
        if kind is Broadcast:
            return self.broadcast(es[0], node.lanes)
        if kind is BufferLoad:
            return self._make(
                BufferLoad, *es, leaf=self._leaf_key(node), build=lambda: BufferLoad(node.buffer, tuple(es))
            )
        raise TypeError(f"Simplify: cannot rebuild a {kind.__name__}")


def simplify_expr(expr: PrimExpr) -> PrimExpr:
    """``expr`` simplified on its own (no facts about its variables); the same object if unchanged."""
    return Arith().simplify(expr)
