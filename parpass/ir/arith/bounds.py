"""Interval bounds of integer expressions, from facts about variables, and what they prove.

A loop gives its variable a range and a let gives its variable the range of its
value; every integer atom then gets bounds bottom-up. Bounds are those of the
exact integer value and are used only when an expression provably does not
wrap. They decide comparisons, ``min``/``max`` and divisions.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from parpass.ir.arith.dtypes import INT_RANGE, Interval
from parpass.ir.arith.polynomial import Poly, Polynomials, Result, poly_difference, poly_normalize
from parpass.ir.tir import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Cast,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    PrimExpr,
    Select,
    Var,
)

__all__ = ["Bounds"]

#: Bounds of an atom whose bounds were never computed (cannot happen for the walk's results).
_UNBOUNDED = (-(1 << 64), 1 << 64)


def _product_bounds(ba: Interval, bb: Interval) -> Interval:
    """Bounds of ``a * b`` for ``a`` in ``ba`` and ``b`` in ``bb``."""
    cands = (ba[0] * bb[0], ba[0] * bb[1], ba[1] * bb[0], ba[1] * bb[1])
    return min(cands), max(cands)


def _decide(kind: type, lo: int, hi: int) -> bool | None:
    """``d kind 0`` for every ``d`` in ``[lo, hi]``: True, False, or None when it depends on ``d``."""
    if kind is LT:
        return True if hi < 0 else False if lo >= 0 else None
    if kind is LE:
        return True if hi <= 0 else False if lo > 0 else None
    if kind is GT:
        return True if lo > 0 else False if hi <= 0 else None
    if kind is GE:
        return True if lo >= 0 else False if hi < 0 else None
    if lo > 0 or hi < 0:
        return kind is NE
    return None


class Bounds(Polynomials, ABC):
    """Facts about integer variables (ranges, let-bound polynomials) and the bounds they give every atom.

    The analyzer's walk (:class:`~parpass.ir.arith.analyzer.Arith`) provides :meth:`dtype_of` and
    fills ``_dt``, the dtype of every expression it has seen, by id.
    """

    #: the dtype of every expression seen, by id (kept alive in ``_keep``); filled by the analyzer's walk
    _dt: dict[int, str]

    def __init__(self) -> None:
        super().__init__()
        self.ranges: dict[int, Interval] = {}
        self.bindings: dict[int, tuple[Poly, str]] = {}
        self._bounds: dict[int, Interval] = {}

    @abstractmethod
    def dtype_of(self, expr: PrimExpr) -> str:
        """The dtype of ``expr``."""

    def _zbound(self, poly: Poly) -> Interval:
        """Bounds of the exact integer value of ``poly``, from the bounds of its atoms."""
        lo = hi = poly.get((), 0)
        for mono, c in poly.items():
            if not mono:
                continue
            mlo, mhi = self._monomial_bounds(mono)
            if c >= 0:
                lo += c * mlo
                hi += c * mhi
            else:
                lo += c * mhi
                hi += c * mlo
        return lo, hi

    def _monomial_bounds(self, mono: tuple[int, ...]) -> Interval:
        """Bounds of the product of the atoms of ``mono``."""
        bounds = self._bounds
        mlo = mhi = 1
        for a in mono:
            b = bounds.get(a)
            if b is None:  # not an integer atom seen by the walk (cannot happen for walk results)
                b = INT_RANGE.get(self._dt.get(id(self._rep[a]), ""), _UNBOUNDED)
            mlo, mhi = _product_bounds((mlo, mhi), b)
        return mlo, mhi

    def _exact_bound(self, poly: Poly, dtype: str) -> Interval | None:
        """Bounds of the value of ``poly`` if they show it never wraps (value == exact integer)."""
        b = self._zbound(poly)
        rlo, rhi = INT_RANGE[dtype]
        return b if rlo <= b[0] and b[1] <= rhi else None

    def _bound_of(self, expr: PrimExpr, dtype: str) -> Interval:
        """Bounds of the run-time value of integer expression ``expr`` (the dtype's range if unknown)."""
        b = self._exact_bound(self._poly(expr, dtype), dtype)
        return b if b is not None else INT_RANGE[dtype]

    def _note_bound(self, expr: PrimExpr, dtype: str) -> None:
        """Compute the bounds of an integer atom once its operands' bounds are known (bottom-up)."""
        s = self.sid(expr)
        if s in self._bounds or s in self._polys:
            return
        full = INT_RANGE[dtype]
        node: Any = expr
        kind = type(node)
        if kind is Var:  # (the commonest atom) the range its facts give
            self._bounds[s] = self.ranges.get(node.vid, full)
            return
        rule = _ATOM_BOUNDS.get(kind)
        self._bounds[s] = full if rule is None else rule(self, node, dtype, full)

    # Bounds of each kind of integer atom (``full``: the dtype's range, when nothing better is known).

    def _mod_bounds(self, node: Any, _dtype: str, full: Interval) -> Interval:
        c = node.b.value if type(node.b) is IntImm else 0
        if c > 0:
            return (0, c - 1)
        if c < 0:
            return (c + 1, 0)
        return full

    def _div_bounds(self, node: Any, dtype: str, full: Interval) -> Interval:
        c = node.b.value if type(node.b) is IntImm else 0
        if c == 0:
            return full
        a = self._bound_of(node.a, dtype)
        q0, q1 = sorted((a[0] // c, a[1] // c))
        return (max(q0, full[0]), min(q1, full[1]))

    def _min_max_bounds(self, node: Any, dtype: str, _full: Interval) -> Interval:
        ba, bb = self._bound_of(node.a, dtype), self._bound_of(node.b, dtype)
        pick = min if type(node) is Min else max
        return (pick(ba[0], bb[0]), pick(ba[1], bb[1]))

    def _select_bounds(self, node: Any, dtype: str, _full: Interval) -> Interval:
        bt, bf = self._bound_of(node.true_value, dtype), self._bound_of(node.false_value, dtype)
        return (min(bt[0], bf[0]), max(bt[1], bf[1]))

    def _cast_bounds(self, node: Any, dtype: str, full: Interval) -> Interval:
        src = self.dtype_of(node.value)
        if src == "bool":
            return (0, 1)
        if src in INT_RANGE:
            bs = self._bound_of(node.value, src)
            if full[0] <= bs[0] and bs[1] <= full[1]:
                return bs
        return full

    def _mul_bounds(self, node: Any, dtype: str, full: Interval) -> Interval:
        """A product of two sums kept as an atom."""
        lo, hi = _product_bounds(self._bound_of(node.a, dtype), self._bound_of(node.b, dtype))
        return (lo, hi) if full[0] <= lo and hi <= full[1] else full

    # What bounds prove.

    def _difference(self, ra: Result, rb: Result, dtype: str) -> tuple[Poly, Interval | None]:
        """``a - b`` as a polynomial over exact integers, and its bounds if neither side wraps."""
        pa, pb = self._poly(ra, dtype), self._poly(rb, dtype)
        diff = poly_difference(pa, pb)
        if self._exact_bound(pa, dtype) is None or self._exact_bound(pb, dtype) is None:
            return diff, None
        return diff, self._zbound(diff)

    def _compare(self, kind: type, ra: Result, rb: Result, dtype: str) -> bool | None:
        """The value of comparison ``kind(a, b)`` if the bounds decide it, else None."""
        diff, d = self._difference(ra, rb, dtype)
        if not diff:  # the same value
            return kind in (EQ, LE, GE)
        if d is None:
            return None
        return _decide(kind, *d)

    def _split_division(self, poly: Poly, c: int, dtype: str) -> tuple[Poly, Poly] | None:
        """``(poly // c, poly % c)`` as polynomials when the remainder's range proves them, else None."""
        if self._exact_bound(poly, dtype) is None:
            return None
        quotient: Poly = {}
        remainder: Poly = {}
        for mono, coef in poly.items():
            if coef % c == 0:
                quotient[mono] = coef // c
            elif not mono:
                quotient[()] = coef // c
                remainder[()] = coef % c
            else:
                remainder[mono] = coef
        rb = self._zbound(remainder)
        if rb[0] // c != rb[1] // c:
            return None
        m = rb[0] // c
        if m:
            quotient[()] = quotient.get((), 0) + m
            remainder[()] = remainder.get((), 0) - m * c
        return poly_normalize(quotient, dtype), poly_normalize(remainder, dtype)


_ATOM_BOUNDS: dict[type, Callable[[Bounds, Any, str, Interval], Interval]] = {
    FloorMod: Bounds._mod_bounds,
    FloorDiv: Bounds._div_bounds,
    Min: Bounds._min_max_bounds,
    Max: Bounds._min_max_bounds,
    Select: Bounds._select_bounds,
    Cast: Bounds._cast_bounds,
    Mul: Bounds._mul_bounds,
}
