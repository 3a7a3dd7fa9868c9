"""Integer sums and products as polynomials over atoms, and their canonical expressions.

Wrapping integers form a ring, so ``+``, ``-`` and ``*`` on scalar integers are
flattened into a polynomial over *atoms* (variables, loads, divisions, ...) with
coefficients reduced modulo ``2**bits``: reassociating, commuting and
distributing never changes a result. A polynomial is written back in a
canonical order (variables by id, then other atoms by a structural digest; the
constant last), so equal sums become equal expressions.
"""

from __future__ import annotations

from typing import Union

from parpass.ir.arith.dtypes import INT_BITS, INT_RANGE, wrap
from parpass.ir.arith.hashcons import HashConsing
from parpass.ir.tir import Add, IntImm, Mul, PrimExpr, Sub

__all__ = [
    "MAX_DISTRIBUTE",
    "LazySum",
    "Poly",
    "Polynomials",
    "Result",
    "poly_add",
    "poly_difference",
    "poly_mul",
    "poly_normalize",
]

#: A polynomial: monomial (sorted tuple of atom sids, ``()`` for the constant) -> coefficient.
Poly = dict[tuple[int, ...], int]
#: A term of a polynomial being written out: (monomial, coefficient as a signed value).
_Term = tuple[tuple[int, ...], int]
#: Products of two sums are distributed when they give at most this many terms.
MAX_DISTRIBUTE = 8


class LazySum:
    """An integer sum or product kept as a polynomial until someone needs its expression."""

    __slots__ = ("dtype", "expr", "origin", "poly")

    def __init__(self, poly: Poly, dtype: str, origin: PrimExpr) -> None:
        self.poly = poly
        self.dtype = dtype
        self.origin = origin
        self.expr: PrimExpr | None = None


#: What the analyzer computes for an expression: a simplified expression, or a sum not yet written out.
Result = Union[PrimExpr, LazySum]


def poly_normalize(poly: Poly, dtype: str) -> Poly:
    """``poly`` with its coefficients wrapped into ``dtype`` and zero terms dropped."""
    out: Poly = {}
    for mono, c in poly.items():
        c = wrap(c, dtype)
        if c:
            out[mono] = c
    return out


def poly_add(pa: Poly, pb: Poly, dtype: str, sign: int = 1) -> Poly:
    """``pa + sign * pb``; copies the larger operand once and touches only the other's terms."""
    if sign == 1 and len(pb) > len(pa):
        pa, pb = pb, pa
    elif sign == -1 and len(pb) > len(pa):
        out = poly_normalize({m: -c for m, c in pb.items()}, dtype)
        return poly_add(out, pa, dtype)
    out = dict(pa)
    for mono, c in pb.items():
        v = wrap(out.get(mono, 0) + sign * c, dtype)
        if v:
            out[mono] = v
        else:
            out.pop(mono, None)
    return out


def poly_mul(pa: Poly, pb: Poly, dtype: str) -> Poly | None:
    """The product, or None when it should stay an atom (too many terms)."""
    if len(pa) * len(pb) > MAX_DISTRIBUTE and not ((len(pa) == 1 and () in pa) or (len(pb) == 1 and () in pb)):
        return None
    out: Poly = {}
    for ma, ca in pa.items():
        for mb, cb in pb.items():
            mono = tuple(sorted(ma + mb)) if ma and mb else ma or mb
            out[mono] = out.get(mono, 0) + ca * cb
    return poly_normalize(out, dtype)


def poly_difference(pa: Poly, pb: Poly) -> Poly:
    """``pa - pb`` over exact integers (coefficients not wrapped), zero terms dropped."""
    diff = dict(pa)
    for mono, c in pb.items():
        diff[mono] = diff.get(mono, 0) - c
    return {m: c for m, c in diff.items() if c}


def _signed(c: int, dtype: str) -> int:
    """Coefficient ``c`` as written out: an unsigned dtype's upper half reads as a negative number."""
    bits, signed = INT_BITS[dtype]
    return c if signed or c < 1 << (bits - 1) else c - (1 << bits)


class Polynomials(HashConsing):
    """Polynomials of the expressions the analyzer has seen, and the canonical expression of a polynomial."""

    def __init__(self) -> None:
        super().__init__()
        self._polys: dict[int, Poly] = {}

    def _poly(self, r: Result, dtype: str) -> Poly:
        """The polynomial of result ``r`` (an atom is its own polynomial)."""
        if isinstance(r, LazySum):
            return r.poly
        if type(r) is IntImm:
            v = wrap(int(r.value), dtype)
            return {(): v} if v else {}
        s = self.sid(r)
        p = self._polys.get(s)
        return p if p is not None else {(s,): 1}

    def _emit(self, poly: Poly, dtype: str) -> PrimExpr:
        """The canonical expression of ``poly``: terms in atom order, the constant last."""
        terms = self._ordered_terms(poly, dtype)
        if not terms:
            return self.const(dtype, 0)
        if not terms[0][0]:  # the constant alone
            return self.const(dtype, poly[()])
        out = self._emit_sum(terms, dtype)
        self._remember(out, poly)
        return out

    def _ordered_terms(self, poly: Poly, dtype: str) -> list[_Term]:
        """The terms of ``poly`` in canonical order (the constant last), coefficients signed."""
        items = [(tuple(sorted(self._order(a) for a in mono)), mono, c) for mono, c in poly.items() if mono]
        items.sort(key=lambda item: item[0])
        terms = [(mono, _signed(c, dtype)) for _, mono, c in items]
        const = poly.get((), 0)
        if const:
            terms.append(((), _signed(const, dtype)))
        return terms

    def _emit_sum(self, terms: list[_Term], dtype: str) -> PrimExpr:
        """The sum of ``terms``, led by the first positive one; the others added or subtracted in order."""
        lo, hi = INT_RANGE[dtype]
        start = next((k for k, (_, c) in enumerate(terms) if c > 0), None)
        if start is None:  # every coefficient negative: 0 - t0 - t1 ...
            mono, c = terms[0]
            first = self._emit_term(mono, -c, dtype) if lo <= -c <= hi else None
            out = self._make(Sub, self.const(dtype, 0), first) if first is not None else self._emit_term(mono, c, dtype)
            rest = terms[1:]
        else:
            out = self._emit_term(*terms[start], dtype)
            rest = terms[:start] + terms[start + 1 :]
        for mono, c in rest:
            if c < 0 and lo <= -c <= hi:
                out = self._make(Sub, out, self._emit_term(mono, -c, dtype))
            else:
                out = self._make(Add, out, self._emit_term(mono, c, dtype))
        return out

    def _emit_term(self, mono: tuple[int, ...], c: int, dtype: str) -> PrimExpr:
        """``c`` times the product of the atoms of ``mono``, atoms in canonical order."""
        if not mono:
            return self.const(dtype, c)
        atoms = sorted(mono, key=self._order)
        e: PrimExpr = self._rep[atoms[0]]
        for a in atoms[1:]:
            e = self._make(Mul, e, self._rep[a])
        if c != 1:
            lo, hi = INT_RANGE[dtype]
            e = self._make(Mul, e, self.const(dtype, c if lo <= c <= hi else wrap(c, dtype)))
        return e

    def _remember(self, expr: PrimExpr, poly: Poly) -> None:
        """Record that ``expr`` is the sum ``poly``, so a parent sees its terms rather than an atom."""
        if type(expr) is IntImm:
            return
        if len(poly) == 1:
            ((mono, c),) = poly.items()
            if c == 1 and len(mono) == 1:  # a lone atom is its own polynomial
                return
        self._polys[self.sid(expr)] = poly
