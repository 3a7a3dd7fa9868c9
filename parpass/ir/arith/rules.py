"""Rewrite rules of the arithmetic analyzer: folding and identities, by kind of expression and operand dtype.

* Constant folding with the semantics of the dtype: integers wrap like C,
  ``FloorDiv``/``FloorMod`` round toward negative infinity, division by zero is
  never folded, floating-point operations are computed in the dtype's own
  precision (numpy) and folded only when the result is finite.
* Identities: ``min(x, x)``, ``x // 1``, ``x % 1``, ``select`` with a constant
  condition or equal branches, ``not not x``, ``and``/``or`` with constants,
  casts to the same dtype, lane-wise folding of ``Broadcast`` operands and
  ``Ramp`` arithmetic; comparisons, ``min``/``max`` and divisions decided by bounds.
* Floating point: only exact folds, never reassociation; ``x + 0.0`` becomes ``x``
  (as ``-fno-signed-zeros``: only the sign of a zero result differs).

A rule returns the rewritten expression, or None to keep the node's shape.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from parpass.ir.arith.bounds import Bounds
from parpass.ir.arith.dtypes import BINARIES, COMPARES, FLOAT_DTYPES, INT_RANGE, is_vector, wrap
from parpass.ir.arith.polynomial import Poly, Result
from parpass.ir.tir import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    Broadcast,
    Call,
    Cast,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    Not,
    Or,
    PrimExpr,
    Ramp,
    Select,
    Sub,
    Var,
)

__all__ = ["RewriteRules"]

#: Intrinsics whose result on a constant is exactly representable (folded with numpy).
_EXACT_INTRINSICS = {"abs": np.abs, "fabs": np.abs, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc}
_ARITH_FOLD = {Add: np.add, Sub: np.subtract, Mul: np.multiply, Min: np.minimum, Max: np.maximum}
_COMPARE_FOLD = {EQ: np.equal, NE: np.not_equal, LT: np.less, LE: np.less_equal, GT: np.greater, GE: np.greater_equal}
#: ``not (a op b)`` for integers; EQ/NE also for floats (NaN compares unequal either way).
_NEGATED: dict[type, type] = {LT: GE, GE: LT, LE: GT, GT: LE, EQ: NE, NE: EQ}
_MIRRORED: dict[type, type] = {LT: GT, GT: LT, LE: GE, GE: LE, EQ: EQ, NE: NE}

#: A rule for one kind of node: (rules, node, simplified operands, dtype, operand results, operand dtypes).
_Rule = Callable[["RewriteRules", Any, list[Any], str, list[Result], list[str]], "PrimExpr | None"]
#: A float identity: (rules, kind, a, b, a's constant value or None, b's constant value or None).
_FloatIdentity = Callable[["RewriteRules", type, PrimExpr, PrimExpr, Any, Any], "PrimExpr | None"]


class RewriteRules(Bounds):
    """The rewrite of a node given its simplified operands, by kind of node and dtype of the operands."""

    @abstractmethod
    def simplify(self, expr: PrimExpr) -> PrimExpr:
        """The simplified ``expr``."""

    def _scalar(self, kind: type, a: PrimExpr, b: PrimExpr) -> PrimExpr:
        """``kind(a, b)`` on scalar operands, simplified."""
        return self.simplify(self._make(kind, a, b))

    def _rules(
        self, node: Any, kind: type, es: list[Any], dtype: str, results: list[Result], kid_dts: list[str]
    ) -> PrimExpr | None:
        """The rewrite of ``node`` with simplified operands ``es``, or None to keep its shape."""
        rule = _RULES.get(kind)
        return None if rule is None else rule(self, node, es, dtype, results, kid_dts)

    # --- by kind of node

    def _binary_rules(
        self, node: Any, es: list[Any], dtype: str, results: list[Result], kid_dts: list[str]
    ) -> PrimExpr | None:
        kind = type(node)
        a, b = es
        if type(a) is Broadcast and type(b) is Broadcast and a.lanes == b.lanes:
            return self.broadcast(self._scalar(kind, a.value, b.value), a.lanes)
        if type(a) is Ramp or type(b) is Ramp:
            return self._ramp_rules(kind, a, b)
        operand = kid_dts[0]
        if operand in INT_RANGE:
            return self._int_rules(kind, a, b, results, dtype, operand)
        if operand in FLOAT_DTYPES:
            return self._float_rules(kind, a, b, operand)
        if operand == "bool":
            return self._bool_rules(kind, a, b)
        return None

    def _not_rules(
        self, node: Any, es: list[Any], dtype: str, results: list[Result], kid_dts: list[str]
    ) -> PrimExpr | None:
        return self._not(es[0])

    def _select_rules(
        self, node: Any, es: list[Any], dtype: str, results: list[Result], kid_dts: list[str]
    ) -> PrimExpr | None:
        cond, t, f = es
        if type(cond) is IntImm:
            return cast("PrimExpr | None", t if cond.value else f)
        if self.sid(t) == self.sid(f):
            return cast("PrimExpr | None", t)
        return None

    def _cast_rules(
        self, node: Any, es: list[Any], dtype: str, results: list[Result], kid_dts: list[str]
    ) -> PrimExpr | None:
        return self._cast(node.dtype, es[0], kid_dts[0])

    def _call_rules(
        self, node: Any, es: list[Any], dtype: str, results: list[Result], kid_dts: list[str]
    ) -> PrimExpr | None:
        fold = _EXACT_INTRINSICS.get(node.op)
        if fold is not None and len(es) == 1 and type(es[0]) is FloatImm and node.dtype in FLOAT_DTYPES:
            return self._float_const(node.dtype, fold(np.dtype(node.dtype).type(es[0].value)))
        return None

    def _ramp_stride_rules(
        self, node: Any, es: list[Any], dtype: str, results: list[Result], kid_dts: list[str]
    ) -> PrimExpr | None:
        base, stride = es
        if type(stride) is IntImm and stride.value == 0:
            return self.broadcast(base, node.lanes)
        return None

    # --- integers

    def _int_rules(
        self, kind: type, a: PrimExpr, b: PrimExpr, results: list[Result], dtype: str, operand: str
    ) -> PrimExpr | None:
        ca = a.value if type(a) is IntImm else None
        cb = b.value if type(b) is IntImm else None
        if kind is FloorDiv or kind is FloorMod:
            return self._div(kind, a, b, ca, cb, results, operand)
        if kind is Min or kind is Max:
            return self._int_min_max(kind, a, b, ca, cb, results, operand)
        if kind in COMPARES:
            return self._int_compare(kind, a, b, ca, cb, results, operand)
        return None

    def _int_min_max(
        self, kind: type, a: PrimExpr, b: PrimExpr, ca: int | None, cb: int | None, results: list[Result], operand: str
    ) -> PrimExpr | None:
        if ca is not None and cb is not None:
            return self.const(operand, min(ca, cb) if kind is Min else max(ca, cb))
        if self.sid(a) == self.sid(b):
            return a
        _, d = self._difference(results[0], results[1], operand)
        if d is not None:
            if d[1] <= 0:  # a <= b
                return a if kind is Min else b
            if d[0] >= 0:  # a >= b
                return b if kind is Min else a
        return None

    def _int_compare(
        self, kind: type, a: PrimExpr, b: PrimExpr, ca: int | None, cb: int | None, results: list[Result], operand: str
    ) -> PrimExpr | None:
        decided = self._compare(kind, results[0], results[1], operand)
        if decided is not None:
            return self.const("bool", int(decided))
        if ca is not None and cb is None:  # constant on the right
            return self._make(_MIRRORED[kind], b, a)
        return None

    def _div(
        self, kind: type, a: PrimExpr, b: PrimExpr, ca: int | None, cb: int | None, results: list[Result], dtype: str
    ) -> PrimExpr | None:
        if cb is None or cb == 0:
            return None
        if ca is not None:
            q, r = wrap(ca, dtype) // cb, wrap(ca, dtype) % cb
            value = q if kind is FloorDiv else r
            lo, hi = INT_RANGE[dtype]
            return self.const(dtype, value) if lo <= value <= hi else None
        if cb == 1:
            return a if kind is FloorDiv else self.const(dtype, 0)
        if cb < 0:
            return None
        split = self._split_sum(self._poly(results[0], dtype), cb, dtype)
        if split is None:
            return None
        quotient, remainder = split
        return self._emit(quotient if kind is FloorDiv else remainder, dtype)

    def _split_sum(self, poly: Poly, c: int, dtype: str) -> tuple[Poly, Poly] | None:
        """``(poly // c, poly % c)`` when bounds prove them; a let-bound variable is seen through."""
        split = self._split_division(poly, c, dtype)
        if split is None and len(poly) == 1:  # a let-bound variable: look at its value
            (mono,) = poly
            atom: Any = self._rep[mono[0]] if len(mono) == 1 and poly[mono] == 1 else None
            if type(atom) is Var and atom.vid in self.bindings:
                split = self._split_division(self.bindings[atom.vid][0], c, dtype)
        return split

    # --- floats

    def _float_rules(self, kind: type, a: PrimExpr, b: PrimExpr, dtype: str) -> PrimExpr | None:
        fa = a.value if type(a) is FloatImm else None
        fb = b.value if type(b) is FloatImm else None
        if fa is not None and fb is not None:
            return self._float_fold(kind, fa, fb, dtype)
        identity = _FLOAT_IDENTITIES.get(kind)
        return None if identity is None else identity(self, kind, a, b, fa, fb)

    def _float_fold(self, kind: type, fa: float, fb: float, dtype: str) -> PrimExpr | None:
        """``kind(fa, fb)`` computed in ``dtype``'s precision, if finite."""
        t = np.dtype(dtype).type
        x, y = t(fa), t(fb)
        with np.errstate(all="ignore"):
            if kind in _COMPARE_FOLD:
                return self.const("bool", int(bool(_COMPARE_FOLD[kind](x, y))))
            if kind in _ARITH_FOLD:
                return self._float_const(dtype, _ARITH_FOLD[kind](x, y))
            if (kind is FloorDiv or kind is FloorMod) and y != 0:
                q = np.floor(x / y)
                return self._float_const(dtype, q if kind is FloorDiv else x - q * y)
        return None

    def _float_unit(self, kind: type, a: PrimExpr, b: PrimExpr, fa: Any, fb: Any, unit: float) -> PrimExpr | None:
        """``x op unit`` and ``unit op x`` are ``x``; a constant goes to the right (commuting is exact)."""
        if fb == unit:
            return a
        if fa == unit:
            return b
        if fa is not None:
            return self._make(kind, b, a)
        return None

    def _float_add(self, kind: type, a: PrimExpr, b: PrimExpr, fa: Any, fb: Any) -> PrimExpr | None:
        return self._float_unit(kind, a, b, fa, fb, 0.0)

    def _float_mul(self, kind: type, a: PrimExpr, b: PrimExpr, fa: Any, fb: Any) -> PrimExpr | None:
        return self._float_unit(kind, a, b, fa, fb, 1.0)

    def _float_sub(self, kind: type, a: PrimExpr, b: PrimExpr, fa: Any, fb: Any) -> PrimExpr | None:
        return a if fb == 0.0 else None

    def _float_min_max(self, kind: type, a: PrimExpr, b: PrimExpr, fa: Any, fb: Any) -> PrimExpr | None:
        return a if self.sid(a) == self.sid(b) else None

    def _float_compare(self, kind: type, a: PrimExpr, b: PrimExpr, fa: Any, fb: Any) -> PrimExpr | None:
        if fa is not None and fb is None:  # constant on the right
            return self._make(_MIRRORED[kind], b, a)
        return None

    def _float_const(self, dtype: str, value: Any) -> PrimExpr | None:
        v = np.dtype(dtype).type(value)
        return self.const(dtype, float(v)) if np.isfinite(v) else None

    # --- booleans

    def _bool_rules(self, kind: type, a: PrimExpr, b: PrimExpr) -> PrimExpr | None:
        ca = a.value if type(a) is IntImm else None
        cb = b.value if type(b) is IntImm else None
        if kind is And or kind is Or:
            absorbing = 0 if kind is And else 1
            if ca is not None:
                return a if ca == absorbing else b
            if cb is not None:
                return b if cb == absorbing else a
            if self.sid(a) == self.sid(b):
                return a
            return None
        if (kind is EQ or kind is NE) and ca is not None and cb is not None:
            return self.const("bool", int((ca == cb) == (kind is EQ)))
        return None

    def _not(self, a: Any) -> PrimExpr | None:
        kind = type(a)
        if kind is IntImm:
            return self.const("bool", 1 - int(bool(a.value)))
        if kind is Not:
            return cast("PrimExpr | None", a.a)
        if kind in _NEGATED and not is_vector(self.dtype_of(a.a)):
            operand = self.dtype_of(a.a)
            if operand in INT_RANGE or operand == "bool" or kind is EQ or kind is NE:
                return self.simplify(self._make(_NEGATED[kind], a.a, a.b))
        return None

    def _cast(self, dtype: str, value: PrimExpr, src: str) -> PrimExpr | None:
        if src == dtype:
            return value
        if is_vector(dtype) or is_vector(src):
            return None
        if type(value) is IntImm or type(value) is FloatImm:
            return self._cast_const(dtype, value, src)
        return None

    def _cast_const(self, dtype: str, value: IntImm | FloatImm, src: str) -> PrimExpr | None:
        """Constant ``value`` of scalar dtype ``src`` converted to ``dtype`` as numpy does (None: undefined)."""
        raw: Any = value.value
        if src in INT_RANGE:
            raw = wrap(int(raw), src)
        elif src == "bool":
            raw = bool(raw)
        with np.errstate(all="ignore"):
            if src in FLOAT_DTYPES and dtype in INT_RANGE:
                f = float(value.value)
                lo, hi = INT_RANGE[dtype]
                if not np.isfinite(f) or not lo <= np.trunc(np.dtype(src).type(f)) <= hi:
                    return None
            out = np.array(raw, dtype=np.dtype(src)).astype(np.dtype(dtype))[()]
        if dtype in FLOAT_DTYPES:
            return self._float_const(dtype, out)
        return self.const(dtype, int(out))

    # --- vectors

    def _ramp_rules(self, kind: type, a: Any, b: Any) -> PrimExpr | None:
        """Lane-wise integer arithmetic on ``Ramp`` and ``Broadcast`` operands stays a Ramp."""
        if kind is Add or kind is Sub:
            return self._ramp_add_sub(kind, a, b)
        if kind is Mul:
            if type(a) is Broadcast and type(b) is Ramp:
                a, b = b, a
            if (
                type(a) is Ramp
                and type(b) is Broadcast
                and a.lanes == b.lanes
                and not is_vector(self.dtype_of(b.value))
            ):
                return self.ramp(self._scalar(Mul, a.base, b.value), self._scalar(Mul, a.stride, b.value), a.lanes)
        return None

    def _ramp_add_sub(self, kind: type, a: Any, b: Any) -> PrimExpr | None:
        ta, tb = type(a), type(b)
        if ta is Ramp and tb is Ramp and a.lanes == b.lanes:
            return self.ramp(self._scalar(kind, a.base, b.base), self._scalar(kind, a.stride, b.stride), a.lanes)
        if ta is Ramp and tb is Broadcast and a.lanes == b.lanes and not is_vector(self.dtype_of(b.value)):
            return self.ramp(self._scalar(kind, a.base, b.value), a.stride, a.lanes)
        if ta is Broadcast and tb is Ramp and a.lanes == b.lanes and not is_vector(self.dtype_of(a.value)):
            stride = b.stride if kind is Add else self._scalar(Sub, self.const(self.dtype_of(b.stride), 0), b.stride)
            return self.ramp(self._scalar(kind, a.value, b.base), stride, b.lanes)
        return None


_RULES: dict[type, _Rule] = {
    **{kind: RewriteRules._binary_rules for kind in BINARIES},
    Not: RewriteRules._not_rules,
    Select: RewriteRules._select_rules,
    Cast: RewriteRules._cast_rules,
    Call: RewriteRules._call_rules,
    Ramp: RewriteRules._ramp_stride_rules,
}
_FLOAT_IDENTITIES: dict[type, _FloatIdentity] = {
    Add: RewriteRules._float_add,
    Sub: RewriteRules._float_sub,
    Mul: RewriteRules._float_mul,
    Min: RewriteRules._float_min_max,
    Max: RewriteRules._float_min_max,
    **{kind: RewriteRules._float_compare for kind in COMPARES},
}
