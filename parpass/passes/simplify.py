"""``Simplify``: arithmetic simplification of loop-level functions (TVM's ``tir.transform.Simplify``).

Every expression of a :class:`~parpass.ir.PrimFunc` (values, indices, loop bounds,
conditions, let values) is rewritten by a small arithmetic engine:

* **Constant folding** with the semantics of the dtype: integer arithmetic wraps
  like C (two's complement), ``FloorDiv``/``FloorMod`` round toward negative
  infinity, division by zero is never folded (it stays an error at run time),
  floating-point operations are computed in the dtype's own precision (numpy) and
  folded only when the result is finite.
* **Canonical integer sums and products.** ``+``, ``-`` and ``*`` on scalar
  integers are flattened into a polynomial over *atoms* (variables, loads,
  divisions, ...), with coefficients reduced modulo ``2**bits``. That is exact:
  wrapping integers form a ring, so reassociating, commuting and distributing
  never changes a result. The polynomial is written back in a canonical order
  (variables by id, then other atoms by a structural digest; the constant last),
  so ``(i + 1) * 8 - 8 + j`` becomes ``i * 8 + j``, ``x - x`` becomes ``0`` and
  ``x * 1 + 0`` becomes ``x``. A product of two sums is distributed only when it
  gives at most 8 terms, otherwise it stays an atom.
* **Identities**: ``min(x, x)``, ``x // 1``, ``x % 1``, ``select`` with a constant
  condition or equal branches, ``not not x``, ``and``/``or`` with constants,
  casts to the same dtype, lane-wise folding of ``Broadcast`` operands and
  ``Ramp`` arithmetic.
* **Facts from the program.** A loop with constant bounds gives its variable the
  range ``[min, min + extent)``; a loop of extent 1, and a let bound to a constant
  or a variable, are substituted; other let values give their variable the range
  of the value, and ``FloorDiv``/``FloorMod`` see through them. With those ranges
  comparisons, ``min``/``max`` and divisions are decided by interval arithmetic:
  ``i < 16`` is true inside ``for i in range(16)``, ``(i * 8 + j) // 8`` is ``i``
  when ``0 <= j < 8``. Integer ranges are tracked in exact integers and used only
  when an expression provably does not wrap. Buffers are left as they are, so a
  variable used in the shape of an allocated buffer is never substituted away.

Statements then follow: an ``IfThenElse`` with a decided condition keeps the taken
branch, a loop with extent ``<= 0`` disappears, a loop of extent 1 becomes its
body, and nested ``SeqStmt``s are flattened. What is removed disappears from its
``SeqStmt``; a function whose whole body disappears gets ``Evaluate(0)``.

Floating point: only exact folds are done, never reassociation. One exception,
as in TVM and C compilers' ``-fno-signed-zeros``: ``x + 0.0`` becomes ``x``, which
differs only in the sign of a zero result (``-0.0 + 0.0`` is ``+0.0``; the two
compare equal).

Facts are global to a function: variable ids are unique in well-formed IR, so a
fact recorded at a definition holds at every use; a variable defined twice (ill-
formed IR) gets no facts. Results are memoized per expression object and
unchanged subtrees keep their identity; a function without anything to simplify
is returned as the same object. All walks are iterative (any depth). The pass
is idempotent: a simplified function simplifies to itself.
"""

from __future__ import annotations

import zlib
from typing import Any, Union, cast

import msgspec
import numpy as np

from parpass.ir import tir
from parpass.ir.dtype import split_vector
from parpass.ir.stmt_functor import post_order_visit
from parpass.ir.tir import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    Allocate,
    And,
    Broadcast,
    BufferLoad,
    BufferStore,
    Call,
    Cast,
    Evaluate,
    FloatImm,
    FloorDiv,
    FloorMod,
    For,
    IfThenElse,
    IntImm,
    LetStmt,
    Max,
    Min,
    Mul,
    Not,
    Or,
    PrimExpr,
    PrimFunc,
    Ramp,
    Select,
    SeqStmt,
    Stmt,
    Sub,
    Var,
)
from parpass.transform import Pass, PassContext, Statistic, prim_func_pass, register_pass

__all__ = ["Arith", "Simplify", "simplify_expr", "simplify_prim_func"]

SIMPLIFIED = Statistic("Simplify", "simplified", "statement expressions rewritten")
REMOVED = Statistic("Simplify", "removed", "statements removed or replaced by their body")
DECIDED = Statistic("Simplify", "decided", "if conditions decided at compile time")

#: A polynomial: monomial (sorted tuple of atom sids, ``()`` for the constant) -> coefficient.
Poly = dict[tuple[int, ...], int]
Interval = tuple[int, int]

_INT_BITS: dict[str, tuple[int, bool]] = {
    "int8": (8, True),
    "int16": (16, True),
    "int32": (32, True),
    "int64": (64, True),
    "uint8": (8, False),
    "uint16": (16, False),
    "uint32": (32, False),
    "uint64": (64, False),
}
_RANGE: dict[str, Interval] = {
    d: ((-(1 << (b - 1)), (1 << (b - 1)) - 1) if s else (0, (1 << b) - 1)) for d, (b, s) in _INT_BITS.items()
}
_FLOATS = frozenset({"float16", "float32", "float64"})
#: Products of two sums are distributed when they give at most this many terms.
_MAX_DISTRIBUTE = 8
#: Intrinsics whose result on a constant is exactly representable (folded with numpy).
_EXACT_INTRINSICS = {"abs": np.abs, "fabs": np.abs, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc}
_ARITH_FOLD = {Add: np.add, Sub: np.subtract, Mul: np.multiply, Min: np.minimum, Max: np.maximum}
_COMPARE_FOLD = {EQ: np.equal, NE: np.not_equal, LT: np.less, LE: np.less_equal, GT: np.greater, GE: np.greater_equal}
_COMPARES = (EQ, NE, LT, LE, GT, GE)
_BINARIES = (Add, Sub, Mul, FloorDiv, FloorMod, Min, Max, EQ, NE, LT, LE, GT, GE, And, Or)
#: ``not (a op b)`` for integers; EQ/NE also for floats (NaN compares unequal either way).
_NEGATED = {LT: GE, GE: LT, LE: GT, GT: LE, EQ: NE, NE: EQ}
_MIRRORED = {LT: GT, GT: LT, LE: GE, GE: LE, EQ: EQ, NE: NE}


def _wrap(value: int, dtype: str) -> int:
    """``value`` reduced into the range of integer ``dtype`` (two's complement)."""
    bits, signed = _INT_BITS[dtype]
    v = value & ((1 << bits) - 1)
    if signed and v >> (bits - 1):
        v -= 1 << bits
    return v


_kids = tir.operands


_BINARY_SET = frozenset(_BINARIES)


def _step_dtype(node: Any, kid_dtypes: list[str]) -> str:
    """The dtype of ``node`` from the dtypes of its operands (one step of ``tir.expr_dtype``)."""
    kind = type(node)
    if kind is IntImm or kind is FloatImm or kind is Var:
        return str(node.dtype)
    if kind in _BINARY_SET:
        if kind in _COMPARES:
            lanes = split_vector(kid_dtypes[0])[1]
            return "bool" if lanes == 1 else f"boolx{lanes}"
        return kid_dtypes[0]
    if kind is Not:
        return kid_dtypes[0]
    if kind is Select:
        return kid_dtypes[1]
    if kind is Cast:
        base, lanes = split_vector(node.dtype)
        lanes = max(lanes, split_vector(kid_dtypes[0])[1])
        return base if lanes == 1 else f"{base}x{lanes}"
    if kind is Call:
        return str(node.dtype)
    if kind is Ramp:
        return f"{kid_dtypes[0]}x{node.lanes}"
    if kind is Broadcast:
        base, lanes = split_vector(kid_dtypes[0])
        return f"{base}x{lanes * node.lanes}"
    if kind is BufferLoad:
        lanes = 1
        for d in kid_dtypes:
            lanes = max(lanes, split_vector(d)[1])
        return node.buffer.dtype if lanes == 1 else f"{node.buffer.dtype}x{lanes}"
    raise TypeError(f"Simplify: {kind.__name__} is not a loop-level expression")


def _mix(h: int, x: int) -> int:
    """One step of a 64-bit FNV-style mix (deterministic in every process, unlike ``hash()``)."""
    return ((h ^ (x & 0xFFFFFFFFFFFFFFFF)) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF


class _Lazy:
    """An integer sum or product kept as a polynomial until someone needs its expression."""

    __slots__ = ("dtype", "expr", "origin", "poly")

    def __init__(self, poly: Poly, dtype: str, origin: PrimExpr) -> None:
        self.poly = poly
        self.dtype = dtype
        self.origin = origin
        self.expr: PrimExpr | None = None


Result = Union[PrimExpr, _Lazy]


class Arith:
    """The arithmetic engine of :func:`Simplify`, with facts about variables.

    ``simplify(expr)`` returns the simplified expression (``expr`` itself when
    nothing changes). Facts are set with :meth:`bind_range` / :meth:`bind_value`
    / :meth:`bind_let` *before* any expression using the variable is simplified;
    results are memoized per expression object for the engine's lifetime, so one
    engine serves one function.

    Every expression the engine sees gets a *structural id* (sid): structurally
    equal expressions share a sid, which is what polynomials are keyed by and how
    ``x - x`` cancels. The first expression seen with a sid is its representative,
    reused whenever that structure is needed again (hash-consing).
    """

    def __init__(self) -> None:
        self.ranges: dict[int, Interval] = {}
        self.values: dict[int, PrimExpr] = {}
        self.bindings: dict[int, tuple[Poly, str]] = {}
        self._memo: dict[int, Result] = {}
        self._dt: dict[int, str] = {}
        self._keep: list[Any] = []
        self._sid: dict[int, int] = {}
        self._table: dict[tuple[Any, ...], int] = {}
        self._rep: list[PrimExpr] = []
        self._keys: list[tuple[Any, ...]] = []
        self._polys: dict[int, Poly] = {}
        self._bounds: dict[int, Interval] = {}
        self._digests: dict[int, int] = {}
        self._bufkeys: dict[int, tuple[int, bytes]] = {}
        #: integer immediates and variables by value: equal leaves (decoded IR does not share them) are seen once
        self._leaves: dict[PrimExpr, PrimExpr] = {}

    # ------------------------------------------------------------------ facts

    def bind_range(self, var: Var, lo: int, hi: int) -> None:
        """``lo <= var <= hi`` wherever ``var`` is used."""
        if var.dtype in _RANGE:
            rlo, rhi = _RANGE[var.dtype]
            self.ranges[var.vid] = (max(lo, rlo), min(hi, rhi))

    def bind_value(self, var: Var, value: PrimExpr) -> None:
        """``var`` equals the (simplified) ``value`` wherever it is used: uses are replaced."""
        self.values[var.vid] = value

    def bind_let(self, var: Var, value: PrimExpr) -> None:
        """``var`` is bound to the simplified ``value``: record its range and polynomial for proofs."""
        dtype = var.dtype
        if dtype not in _RANGE:
            return
        r = self._result(value)
        poly = self._poly(r, dtype)
        bound = self._exact_bound(poly, dtype)
        if bound is not None:
            self.bind_range(var, *bound)
            self.bindings[var.vid] = (poly, dtype)

    # ------------------------------------------------------------------ entry points

    def simplify(self, expr: PrimExpr) -> PrimExpr:
        """The simplified ``expr`` (the same object when nothing changes)."""
        return self._force(self._result(expr))

    def dtype_of(self, expr: PrimExpr) -> str:
        """The dtype of ``expr`` (simplifying it if the engine has not seen it yet)."""
        self._result(expr)
        return self._dt[id(expr)]

    # ------------------------------------------------------------------ the walk

    def _result(self, root: PrimExpr) -> Result:
        """The result of ``root``: operands first (post-order on an explicit stack), memoized per object."""
        memo = self._memo
        r = memo.get(id(root))
        if r is not None:
            return r
        dts = self._dt
        keep = self._keep
        leaves = self._leaves
        sids = self._sid
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
                keep.append(node)
                if kind is not FloatImm:  # (0.0 == -0.0: floats are not looked up by value)
                    first = leaves.setdefault(node, node)
                    if first is not node:  # an equal leaf seen before: the same result and sid
                        fk = id(first)
                        r = memo[fk]
                        memo[key] = node if r is first else r
                        dts[key] = dts[fk]
                        s = sids.get(fk)
                        if s is not None:
                            sids[key] = s
                        continue
                dtype = node.dtype
                dts[key] = dtype
                res: Result = node
                if kind is Var:
                    value = self.values.get(node.vid)
                    if value is not None and dts.get(id(value)) == dtype:
                        res = value
                    elif dtype in _RANGE:
                        self._note_bound(node, dtype)
                memo[key] = res
                continue
            kids = _kids(node)
            depth = len(stack)
            for k in kids:
                if id(k) not in memo:
                    stack.append(k)
            if len(stack) != depth:
                continue
            stack.pop()
            kid_dts = [dts[id(k)] for k in kids]
            dtype = _step_dtype(node, kid_dts)
            dts[key] = dtype
            res = self._rewrite(node, kind, kids, [memo[id(k)] for k in kids], kid_dts, dtype)
            memo[key] = res
            keep.append(node)
            if not isinstance(res, _Lazy):
                if res is not node:
                    self._note(res, dtype)
                if dtype in _RANGE and type(res) is not IntImm:
                    self._note_bound(res, dtype)
        return memo[id(root)]

    def _note(self, expr: PrimExpr, dtype: str) -> None:
        """Record a result as already simplified (results are fixpoints)."""
        key = id(expr)
        if key not in self._memo:
            self._memo[key] = expr
            self._dt[key] = dtype
            self._keep.append(expr)

    def _force(self, r: Result) -> PrimExpr:
        if not isinstance(r, _Lazy):
            return r
        if r.expr is None:
            e = self._emit(r.poly, r.dtype)
            if e is not r.origin and self.sid(e) == self.sid(r.origin):
                e = r.origin
            self._remember(e, r.poly)
            self._note(e, r.dtype)
            r.expr = e
        return r.expr

    # ------------------------------------------------------------------ structural ids

    def sid(self, expr: PrimExpr) -> int:
        """The structural id of ``expr`` (iterative; memoized per object)."""
        sids = self._sid
        s = sids.get(id(expr))
        if s is not None:
            return s
        stack = [expr]
        while stack:
            node = stack[-1]
            if id(node) in sids:
                stack.pop()
                continue
            kids = _kids(node)
            depth = len(stack)
            for k in kids:
                if id(k) not in sids:
                    stack.append(k)
            if len(stack) != depth:
                continue
            stack.pop()
            self._register(node, tuple(sids[id(k)] for k in kids))
        return sids[id(expr)]

    def _leaf_key(self, node: Any) -> tuple[Any, ...]:
        kind = type(node)
        if kind is IntImm:
            return (node.dtype, int(node.value))
        if kind is FloatImm:
            return (node.dtype, float(node.value).hex())
        if kind is Var:
            return (node.vid, node.name_hint, node.dtype)
        if kind is Cast:
            return (node.dtype,)
        if kind is Call:
            return (node.dtype, node.op)
        if kind is Ramp or kind is Broadcast:
            return (node.lanes,)
        if kind is BufferLoad:
            buf = node.buffer
            key = self._bufkeys.get(id(buf))
            if key is None:
                key = (buf.vid, msgspec.msgpack.encode(buf))
                self._bufkeys[id(buf)] = key
                self._keep.append(buf)
            return key
        return ()

    def _register(self, node: PrimExpr, kid_sids: tuple[int, ...]) -> int:
        key = (type(node), self._leaf_key(node), kid_sids)
        s = self._table.get(key)
        if s is None:
            s = len(self._rep)
            self._table[key] = s
            self._rep.append(node)
            self._keys.append(key)
        self._sid[id(node)] = s
        self._keep.append(node)
        return s

    def _make(self, kind: type, *kids: PrimExpr, leaf: tuple[Any, ...] = (), build: Any = None) -> PrimExpr:
        """The representative of ``kind(*kids)`` (hash-consed: an existing equal node is reused)."""
        kid_sids = tuple(self.sid(k) for k in kids)
        s = self._table.get((kind, leaf, kid_sids))
        if s is not None:
            return self._rep[s]
        node = cast(PrimExpr, build() if build is not None else kind(*kids))
        self._register(node, kid_sids)
        return node

    def const(self, dtype: str, value: int | float) -> PrimExpr:
        """The representative immediate of ``value`` in scalar ``dtype``."""
        if dtype in _FLOATS:
            v = float(value)
            return self._make(FloatImm, leaf=(dtype, v.hex()), build=lambda: FloatImm(dtype, v))
        iv = int(value)
        return self._make(IntImm, leaf=(dtype, iv), build=lambda: IntImm(dtype, iv))

    def _digest(self, sid: int) -> int:
        """A deterministic 64-bit digest of the structure with id ``sid`` (iterative)."""
        digests = self._digests
        d = digests.get(sid)
        if d is not None:
            return d
        stack = [sid]
        while stack:
            s = stack[-1]
            if s in digests:
                stack.pop()
                continue
            kind, leaf, kid_sids = self._keys[s]
            missing = [k for k in kid_sids if k not in digests]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            h = _mix(0xCBF29CE484222325, zlib.crc32(kind.__name__.encode()))
            h = _mix(h, zlib.crc32(repr(leaf).encode()))
            for k in kid_sids:
                h = _mix(h, digests[k])
            digests[s] = h
        return digests[sid]

    def _order(self, sid: int) -> tuple[int, int, int]:
        """Canonical order of atoms: variables by id, then other atoms by digest."""
        node = self._rep[sid]
        if type(node) is Var:
            return (0, node.vid, sid)
        return (1, self._digest(sid), sid)

    # ------------------------------------------------------------------ polynomials

    def _poly(self, r: Result, dtype: str) -> Poly:
        if isinstance(r, _Lazy):
            return r.poly
        if type(r) is IntImm:
            v = _wrap(int(r.value), dtype)
            return {(): v} if v else {}
        s = self.sid(r)
        p = self._polys.get(s)
        return p if p is not None else {(s,): 1}

    def _normalize(self, poly: Poly, dtype: str) -> Poly:
        out: Poly = {}
        for mono, c in poly.items():
            c = _wrap(c, dtype)
            if c:
                out[mono] = c
        return out

    def _add(self, pa: Poly, pb: Poly, dtype: str, sign: int = 1) -> Poly:
        """``pa + sign * pb``; copies the larger operand once and touches only the other's terms."""
        if sign == 1 and len(pb) > len(pa):
            pa, pb = pb, pa
        elif sign == -1 and len(pb) > len(pa):
            out = self._normalize({m: -c for m, c in pb.items()}, dtype)
            return self._add(out, pa, dtype)
        out = dict(pa)
        for mono, c in pb.items():
            v = _wrap(out.get(mono, 0) + sign * c, dtype)
            if v:
                out[mono] = v
            else:
                out.pop(mono, None)
        return out

    def _mul(self, pa: Poly, pb: Poly, dtype: str) -> Poly | None:
        """The product, or None when it should stay an atom (too many terms)."""
        if len(pa) * len(pb) > _MAX_DISTRIBUTE and not ((len(pa) == 1 and () in pa) or (len(pb) == 1 and () in pb)):
            return None
        out: Poly = {}
        for ma, ca in pa.items():
            for mb, cb in pb.items():
                mono = tuple(sorted(ma + mb)) if ma and mb else ma or mb
                out[mono] = out.get(mono, 0) + ca * cb
        return self._normalize(out, dtype)

    def _emit(self, poly: Poly, dtype: str) -> PrimExpr:
        """The canonical expression of ``poly``: terms in atom order, the constant last."""
        bits, signed = _INT_BITS[dtype]
        half = 1 << (bits - 1)
        lo, hi = _RANGE[dtype]

        def signed_value(c: int) -> int:
            return c if signed or c < half else c - (1 << bits)

        items: list[tuple[tuple[tuple[int, int, int], ...], tuple[int, ...], int]] = []
        for mono, c in poly.items():
            if mono:
                items.append((tuple(sorted(self._order(a) for a in mono)), mono, c))
        items.sort(key=lambda item: item[0])
        parts: list[tuple[tuple[int, ...], int]] = [(mono, signed_value(c)) for _, mono, c in items]
        const = poly.get((), 0)
        if const:
            parts.append(((), signed_value(const)))
        if not parts:
            return self.const(dtype, 0)
        if not items:
            return self.const(dtype, const)

        def term(mono: tuple[int, ...], c: int) -> PrimExpr:
            if not mono:
                return self.const(dtype, c)
            atoms = sorted(mono, key=self._order)
            e: PrimExpr = self._rep[atoms[0]]
            for a in atoms[1:]:
                e = self._make(Mul, e, self._rep[a])
            if c != 1:
                e = self._make(Mul, e, self.const(dtype, c if lo <= c <= hi else _wrap(c, dtype)))
            return e

        start = next((k for k, (_, c) in enumerate(parts) if c > 0), None)
        if start is None:  # every coefficient negative: 0 - t0 - t1 ...
            mono, c = parts[0]
            first = term(mono, -c) if lo <= -c <= hi else None
            out = self._make(Sub, self.const(dtype, 0), first) if first is not None else term(mono, c)
            rest = parts[1:]
        else:
            out = term(*parts[start])
            rest = parts[:start] + parts[start + 1 :]
        for mono, c in rest:
            if c < 0 and lo <= -c <= hi:
                out = self._make(Sub, out, term(mono, -c))
            else:
                out = self._make(Add, out, term(mono, c))
        self._remember(out, poly)
        return out

    def _remember(self, expr: PrimExpr, poly: Poly) -> None:
        """Record that ``expr`` is the sum ``poly``, so a parent sees its terms rather than an atom."""
        if type(expr) is IntImm:
            return
        if len(poly) == 1:
            ((mono, c),) = poly.items()
            if c == 1 and len(mono) == 1:  # a lone atom is its own polynomial
                return
        self._polys[self.sid(expr)] = poly

    # ------------------------------------------------------------------ bounds

    def _zbound(self, poly: Poly) -> Interval:
        """Bounds of the exact integer value of ``poly``, from the bounds of its atoms."""
        lo = hi = poly.get((), 0)
        bounds = self._bounds
        for mono, c in poly.items():
            if not mono:
                continue
            mlo = mhi = 1
            for a in mono:
                b = bounds.get(a)
                if b is None:  # not an integer atom seen by the walk (cannot happen for walk results)
                    b = _RANGE.get(self._dt.get(id(self._rep[a]), ""), (-(1 << 64), 1 << 64))
                cands = (mlo * b[0], mlo * b[1], mhi * b[0], mhi * b[1])
                mlo, mhi = min(cands), max(cands)
            if c >= 0:
                lo += c * mlo
                hi += c * mhi
            else:
                lo += c * mhi
                hi += c * mlo
        return lo, hi

    def _exact_bound(self, poly: Poly, dtype: str) -> Interval | None:
        """Bounds of the value of ``poly`` if they show it never wraps (value == exact integer)."""
        b = self._zbound(poly)
        rlo, rhi = _RANGE[dtype]
        return b if rlo <= b[0] and b[1] <= rhi else None

    def _bound_of(self, expr: PrimExpr, dtype: str) -> Interval:
        """Bounds of the run-time value of integer expression ``expr`` (the dtype's range if unknown)."""
        b = self._exact_bound(self._poly(expr, dtype), dtype)
        return b if b is not None else _RANGE[dtype]

    def _note_bound(self, expr: PrimExpr, dtype: str) -> None:
        """Compute the bounds of an integer atom once its operands' bounds are known (bottom-up)."""
        s = self.sid(expr)
        if s in self._bounds or s in self._polys:
            return
        node: Any = expr
        full = _RANGE[dtype]
        b = full
        kind = type(node)
        if kind is Var:
            b = self.ranges.get(node.vid, full)
        elif kind is FloorMod or kind is FloorDiv:
            c = node.b.value if type(node.b) is IntImm else 0
            if kind is FloorMod and c > 0:
                b = (0, c - 1)
            elif kind is FloorMod and c < 0:
                b = (c + 1, 0)
            elif c != 0:
                a = self._bound_of(node.a, dtype)
                q0, q1 = sorted((a[0] // c, a[1] // c))
                b = (max(q0, full[0]), min(q1, full[1]))
        elif kind is Min or kind is Max:
            ba, bb = self._bound_of(node.a, dtype), self._bound_of(node.b, dtype)
            pick = min if kind is Min else max
            b = (pick(ba[0], bb[0]), pick(ba[1], bb[1]))
        elif kind is Select:
            bt, bf = self._bound_of(node.true_value, dtype), self._bound_of(node.false_value, dtype)
            b = (min(bt[0], bf[0]), max(bt[1], bf[1]))
        elif kind is Cast:
            src = self.dtype_of(node.value)
            if src == "bool":
                b = (0, 1)
            elif src in _RANGE:
                bs = self._bound_of(node.value, src)
                if full[0] <= bs[0] and bs[1] <= full[1]:
                    b = bs
        elif kind is Mul:  # a product of two sums kept as an atom
            ba, bb = self._bound_of(node.a, dtype), self._bound_of(node.b, dtype)
            cands = (ba[0] * bb[0], ba[0] * bb[1], ba[1] * bb[0], ba[1] * bb[1])
            if full[0] <= min(cands) and max(cands) <= full[1]:
                b = (min(cands), max(cands))
        self._bounds[s] = b

    def _difference(self, ra: Result, rb: Result, dtype: str) -> tuple[Poly, Interval | None]:
        """``a - b`` as a polynomial over exact integers, and its bounds if neither side wraps."""
        pa, pb = self._poly(ra, dtype), self._poly(rb, dtype)
        diff = dict(pa)
        for mono, c in pb.items():
            diff[mono] = diff.get(mono, 0) - c
        diff = {m: c for m, c in diff.items() if c}
        if self._exact_bound(pa, dtype) is None or self._exact_bound(pb, dtype) is None:
            return diff, None
        return diff, self._zbound(diff)

    # ------------------------------------------------------------------ rewriting

    def _rewrite(
        self, node: Any, kind: type, kids: tuple[Any, ...], results: list[Result], kid_dts: list[str], dtype: str
    ) -> Result:
        """The result of composite ``node`` given its operands' results."""
        if dtype in _RANGE and (kind is Add or kind is Sub or kind is Mul):
            pa, pb = self._poly(results[0], dtype), self._poly(results[1], dtype)
            if kind is Mul:
                product = self._mul(pa, pb, dtype)
                if product is None:
                    ea, eb = self._force(results[0]), self._force(results[1])
                    if self._order(self.sid(eb)) < self._order(self.sid(ea)):
                        ea, eb = eb, ea
                    return self._same(node, self._make(Mul, ea, eb))
                return _Lazy(product, dtype, node)
            return _Lazy(self._add(pa, pb, dtype, 1 if kind is Add else -1), dtype, node)
        es = [self._force(r) for r in results]
        out = self._rules(node, kind, es, dtype, results, kid_dts)
        if out is not None:
            return self._same(node, out)
        for e, k in zip(es, kids, strict=True):
            if e is not k:  # an operand changed (structurally: equal results keep their identity)
                return self._rebuild(node, es)
        return cast("PrimExpr | _Lazy", node)

    def _same(self, node: PrimExpr, out: PrimExpr) -> PrimExpr:
        """``node`` itself when ``out`` is structurally equal to it (keeps identity)."""
        if out is node or self.sid(out) != self.sid(node):
            return out
        return node

    def _rebuild(self, node: Any, es: list[PrimExpr]) -> PrimExpr:
        kind = type(node)
        if kind in _BINARY_SET:
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

    def ramp(self, base: PrimExpr, stride: PrimExpr, lanes: int) -> PrimExpr:
        return self._make(Ramp, base, stride, leaf=(lanes,), build=lambda: Ramp(base, stride, lanes))

    def broadcast(self, value: PrimExpr, lanes: int) -> PrimExpr:
        return self._make(Broadcast, value, leaf=(lanes,), build=lambda: Broadcast(value, lanes))

    def _scalar(self, kind: type, a: PrimExpr, b: PrimExpr) -> PrimExpr:
        """``kind(a, b)`` on scalar operands, simplified."""
        return self.simplify(self._make(kind, a, b))

    def _rules(
        self, node: Any, kind: type, es: list[Any], dtype: str, kids: list[Result], kid_dts: list[str]
    ) -> PrimExpr | None:
        """The rewrite of ``node`` with simplified operands ``es``, or None to keep its shape."""
        if kind in _BINARY_SET:
            a, b = es
            if type(a) is Broadcast and type(b) is Broadcast and a.lanes == b.lanes:
                return self.broadcast(self._scalar(kind, a.value, b.value), a.lanes)
            if type(a) is Ramp or type(b) is Ramp:
                return self._ramp_rules(kind, a, b)
            operand = kid_dts[0]
            if operand in _RANGE:
                return self._int_rules(kind, a, b, kids, dtype, operand)
            if operand in _FLOATS:
                return self._float_rules(kind, a, b, operand)
            if operand == "bool":
                return self._bool_rules(kind, a, b)
            return None
        if kind is Not:
            return self._not(es[0])
        if kind is Select:
            cond, t, f = es
            if type(cond) is IntImm:
                return cast("PrimExpr | None", t if cond.value else f)
            if self.sid(t) == self.sid(f):
                return cast("PrimExpr | None", t)
            return None
        if kind is Cast:
            return self._cast(node.dtype, es[0], kid_dts[0])
        if kind is Call:
            fold = _EXACT_INTRINSICS.get(node.op)
            if fold is not None and len(es) == 1 and type(es[0]) is FloatImm and node.dtype in _FLOATS:
                return self._float_const(node.dtype, fold(np.dtype(node.dtype).type(es[0].value)))
            return None
        if kind is Ramp:
            base, stride = es
            if type(stride) is IntImm and stride.value == 0:
                return self.broadcast(base, node.lanes)
            return None
        return None

    # --- integers

    def _int_rules(
        self, kind: type, a: PrimExpr, b: PrimExpr, kids: list[Result], dtype: str, operand: str
    ) -> PrimExpr | None:
        ca = a.value if type(a) is IntImm else None
        cb = b.value if type(b) is IntImm else None
        if kind is FloorDiv or kind is FloorMod:
            return self._div(kind, a, b, ca, cb, kids, operand)
        if kind is Min or kind is Max:
            if ca is not None and cb is not None:
                return self.const(operand, min(ca, cb) if kind is Min else max(ca, cb))
            if self.sid(a) == self.sid(b):
                return a
            _, d = self._difference(kids[0], kids[1], operand)
            if d is not None:
                if d[1] <= 0:  # a <= b
                    return a if kind is Min else b
                if d[0] >= 0:  # a >= b
                    return b if kind is Min else a
            return None
        if kind in _COMPARES:
            decided = self._compare(kind, kids[0], kids[1], operand)
            if decided is not None:
                return self.const("bool", int(decided))
            if ca is not None and cb is None:  # constant on the right
                return self._make(_MIRRORED[kind], b, a)
        return None

    def _compare(self, kind: type, ra: Result, rb: Result, dtype: str) -> bool | None:
        diff, d = self._difference(ra, rb, dtype)
        if not diff:  # the same value
            return kind in (EQ, LE, GE)
        if d is None:
            return None
        lo, hi = d
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

    def _div(
        self, kind: type, a: PrimExpr, b: PrimExpr, ca: int | None, cb: int | None, kids: list[Result], dtype: str
    ) -> PrimExpr | None:
        if cb is None or cb == 0:
            return None
        if ca is not None:
            q, r = _wrap(ca, dtype) // cb, _wrap(ca, dtype) % cb
            value = q if kind is FloorDiv else r
            lo, hi = _RANGE[dtype]
            return self.const(dtype, value) if lo <= value <= hi else None
        if cb == 1:
            return a if kind is FloorDiv else self.const(dtype, 0)
        if cb < 0:
            return None
        poly = self._poly(kids[0], dtype)
        split = self.split_vector(poly, cb, dtype)
        if split is None and len(poly) == 1:  # a let-bound variable: look at its value
            (mono,) = poly
            atom: Any = self._rep[mono[0]] if len(mono) == 1 and poly[mono] == 1 else None
            if type(atom) is Var and atom.vid in self.bindings:
                split = self.split_vector(self.bindings[atom.vid][0], cb, dtype)
        if split is None:
            return None
        quotient, remainder = split
        return self._emit(quotient if kind is FloorDiv else remainder, dtype)

    def split_vector(self, poly: Poly, c: int, dtype: str) -> tuple[Poly, Poly] | None:
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
        return self._normalize(quotient, dtype), self._normalize(remainder, dtype)

    # --- floats

    def _float_rules(self, kind: type, a: PrimExpr, b: PrimExpr, dtype: str) -> PrimExpr | None:
        fa = a.value if type(a) is FloatImm else None
        fb = b.value if type(b) is FloatImm else None
        if fa is not None and fb is not None:
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
        if kind is Add:
            if fb == 0.0:
                return a
            if fa == 0.0:
                return b
            if fa is not None:  # constant on the right (commuting is exact)
                return self._make(Add, b, a)
        elif kind is Sub:
            if fb == 0.0:
                return a
        elif kind is Mul:
            if fb == 1.0:
                return a
            if fa == 1.0:
                return b
            if fa is not None:
                return self._make(Mul, b, a)
        elif kind is Min or kind is Max:
            if self.sid(a) == self.sid(b):
                return a
        elif kind in _COMPARES and fa is not None and fb is None:
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
        if kind in _NEGATED and "x" not in self.dtype_of(a.a):
            operand = self.dtype_of(a.a)
            if operand in _RANGE or operand == "bool" or kind is EQ or kind is NE:
                return self.simplify(self._make(_NEGATED[kind], a.a, a.b))
        return None

    def _cast(self, dtype: str, value: PrimExpr, src: str) -> PrimExpr | None:
        if src == dtype:
            return value
        if "x" in dtype or "x" in src:
            return None
        if type(value) is IntImm or type(value) is FloatImm:
            raw: Any = value.value
            if src in _RANGE:
                raw = _wrap(int(raw), src)
            elif src == "bool":
                raw = bool(raw)
            with np.errstate(all="ignore"):
                if src in _FLOATS and dtype in _RANGE:
                    f = float(value.value)
                    lo, hi = _RANGE[dtype]
                    if not np.isfinite(f) or not lo <= np.trunc(np.dtype(src).type(f)) <= hi:
                        return None
                out = np.array(raw, dtype=np.dtype(src)).astype(np.dtype(dtype))[()]
            if dtype in _FLOATS:
                return self._float_const(dtype, out)
            return self.const(dtype, int(out))
        return None

    # --- vectors

    def _ramp_rules(self, kind: type, a: Any, b: Any) -> PrimExpr | None:
        """Lane-wise integer arithmetic on ``Ramp`` and ``Broadcast`` operands stays a Ramp."""
        ta, tb = type(a), type(b)
        if kind is Add or kind is Sub:
            if ta is Ramp and tb is Ramp and a.lanes == b.lanes:
                return self.ramp(self._scalar(kind, a.base, b.base), self._scalar(kind, a.stride, b.stride), a.lanes)
            if ta is Ramp and tb is Broadcast and a.lanes == b.lanes and "x" not in self.dtype_of(b.value):
                return self.ramp(self._scalar(kind, a.base, b.value), a.stride, a.lanes)
            if ta is Broadcast and tb is Ramp and a.lanes == b.lanes and "x" not in self.dtype_of(a.value):
                stride = (
                    b.stride if kind is Add else self._scalar(Sub, self.const(self.dtype_of(b.stride), 0), b.stride)
                )
                return self.ramp(self._scalar(kind, a.value, b.base), stride, b.lanes)
        if kind is Mul:
            if ta is Broadcast and tb is Ramp:
                a, b, ta, tb = b, a, tb, ta
            if ta is Ramp and tb is Broadcast and a.lanes == b.lanes and "x" not in self.dtype_of(b.value):
                return self.ramp(self._scalar(Mul, a.base, b.value), self._scalar(Mul, a.stride, b.value), a.lanes)
        return None


# ---------------------------------------------------------------------- statements

#: Marks a statement Simplify removed; a SeqStmt drops it, a function body becomes Evaluate(0).
_REMOVED: Any = None
_ENTER, _EXIT = 0, 1


def _noop() -> Stmt:
    return Evaluate(IntImm("int32", 0))


class _StmtSimplifier:
    """Rewrites the statements of one function, iteratively, with one :class:`Arith` engine.

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
        self.defined_once, self.in_shapes = self._definitions(func)
        self.memo: dict[int, Any] = {}  # statement id -> rewritten statement, or _REMOVED
        self.keep: list[Any] = []
        self.simplified = 0
        self.removed = 0
        self.decided = 0

    @staticmethod
    def _definitions(func: PrimFunc) -> tuple[set[int], set[int]]:
        """Ids defined exactly once (facts are recorded only for those), and ids used in allocated shapes.

        A variable used in the shape of an allocated buffer is never substituted away: buffers
        are left as they are, so its definition must stay.
        """
        count: dict[int, int] = {}
        in_shapes: set[int] = set()
        for p in func.params:
            count[p.vid] = count.get(p.vid, 0) + 1
        stack: list[Any] = [func.body]
        seen: set[int] = set()
        while stack:
            s = stack.pop()
            if id(s) in seen:
                continue
            seen.add(id(s))
            kind = type(s)
            if kind is For:
                count[s.loop_var.vid] = count.get(s.loop_var.vid, 0) + 1
                stack.append(s.body)
            elif kind is LetStmt:
                count[s.var.vid] = count.get(s.var.vid, 0) + 1
                stack.append(s.body)
            elif kind is SeqStmt:
                stack.extend(s.seq)
            elif kind is IfThenElse:
                stack.append(s.then_case)
                if s.else_case is not None:
                    stack.append(s.else_case)
            elif kind is Allocate:
                for e in (*s.buffer.shape, *s.buffer.strides):
                    post_order_visit(e, lambda n: in_shapes.add(n.vid) if type(n) is Var else None)
                stack.append(s.body)
        return {vid for vid, n in count.items() if n == 1}, in_shapes

    def run(self, body: Stmt) -> Stmt:
        memo = self.memo
        simplify = self.arith.simplify
        stack: list[tuple[int, Any]] = [(_ENTER, body)]
        while stack:
            phase, s = stack.pop()
            if id(s) in memo:
                continue
            kind = type(s)
            if phase == _ENTER:
                kids = self._enter(s, kind, simplify)
                if kids is None:  # decided without looking inside
                    continue
                stack.append((_EXIT, s))
                stack.extend((_ENTER, k) for k in reversed(kids) if id(k) not in memo)
            else:
                memo[id(s)] = self._exit(s, kind, simplify)
                self.keep.append(s)
        out: Stmt = memo[id(body)]
        return _noop() if out is _REMOVED else out

    def _enter(self, s: Any, kind: type, simplify: Any) -> tuple[Any, ...] | None:
        """Record the facts ``s`` defines; return the statements to visit (None: ``s`` is done)."""
        arith = self.arith
        if kind is For:
            lo, extent = simplify(s.min), simplify(s.extent)
            n = extent.value if type(extent) is IntImm else None
            if n is not None and n <= 0:
                self.memo[id(s)] = _REMOVED
                self.removed += 1
                return None
            var = s.loop_var
            if var.vid in self.defined_once:
                if n == 1 and arith.dtype_of(lo) == var.dtype and var.vid not in self.in_shapes:
                    arith.bind_value(var, lo)
                elif n is not None and type(lo) is IntImm:
                    arith.bind_range(var, lo.value, lo.value + n - 1)
            return (s.body,)
        if kind is LetStmt:
            value = simplify(s.value)
            var = s.var
            if var.vid in self.defined_once:
                substitutable = var.vid not in self.in_shapes and arith.dtype_of(value) == var.dtype
                if type(value) in (IntImm, FloatImm, Var) and substitutable:
                    arith.bind_value(var, value)
                else:
                    arith.bind_let(var, value)
            return (s.body,)
        if kind is IfThenElse:
            cond = simplify(s.condition)
            if type(cond) is IntImm:  # only the taken branch matters
                taken = s.then_case if cond.value else s.else_case
                return (taken,) if taken is not None else ()
            return (s.then_case,) if s.else_case is None else (s.then_case, s.else_case)
        if kind is SeqStmt:
            return cast("tuple[Any, ...] | None", s.seq)
        if kind is Allocate:
            return (s.body,)
        if kind is BufferStore or kind is Evaluate:
            return ()
        raise TypeError(f"Simplify: {kind.__name__} is not a loop-level statement")

    def _exit(self, s: Any, kind: type, simplify: Any) -> Any:
        memo = self.memo
        if kind is BufferStore:
            value = simplify(s.value)
            indices = tuple(simplify(i) for i in s.indices)
            rewritten = (value is not s.value) + sum(x is not y for x, y in zip(indices, s.indices, strict=True))
            if not rewritten:
                return s
            self.simplified += rewritten
            return BufferStore(s.buffer, value, indices)
        if kind is Evaluate:
            value = simplify(s.value)
            if value is s.value:
                return s
            self.simplified += 1
            return Evaluate(value)
        if kind is SeqStmt:
            out: list[Stmt] = []
            changed = False
            for k in s.seq:
                r = memo[id(k)]
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
        if kind is For:
            body = memo[id(s.body)]
            if body is _REMOVED:
                self.removed += 1
                return _REMOVED
            lo, extent = simplify(s.min), simplify(s.extent)
            if s.loop_var.vid in self.arith.values:
                self.removed += 1
                return body  # extent 1: the loop variable was substituted by ``min``
            rewritten = (lo is not s.min) + (extent is not s.extent)
            if not rewritten and body is s.body:
                return s
            self.simplified += rewritten
            return For(s.loop_var, lo, extent, s.kind, body, s.annotations)
        if kind is IfThenElse:
            cond = simplify(s.condition)
            if type(cond) is IntImm:
                self.decided += 1
                self.removed += 1
                taken = s.then_case if cond.value else s.else_case
                return _REMOVED if taken is None else memo[id(taken)]
            then_case = memo[id(s.then_case)]
            else_case = None if s.else_case is None else memo[id(s.else_case)]
            if else_case is _REMOVED:
                else_case = None
            if then_case is _REMOVED:
                if else_case is None:
                    self.removed += 1
                    return _REMOVED
                self.simplified += 1  # the condition, negated
                return IfThenElse(simplify(Not(cond)), else_case)
            if cond is s.condition and then_case is s.then_case and else_case is s.else_case:
                return s
            self.simplified += cond is not s.condition
            return IfThenElse(cond, then_case, else_case)
        if kind is LetStmt:
            body = memo[id(s.body)]
            if body is _REMOVED or s.var.vid in self.arith.values:
                self.removed += 1  # removed, or every use was replaced by the value
                return body
            value = simplify(s.value)
            if value is s.value and body is s.body:
                return s
            self.simplified += value is not s.value
            return LetStmt(s.var, value, body)
        if kind is Allocate:
            body = memo[id(s.body)]
            if body is _REMOVED:
                self.removed += 1
                return _REMOVED
            return s if body is s.body else Allocate(s.buffer, body)
        raise TypeError(f"Simplify: {kind.__name__} is not a loop-level statement")


def simplify_expr(expr: PrimExpr) -> PrimExpr:
    """``expr`` simplified on its own (no facts about its variables); the same object if unchanged."""
    return Arith().simplify(expr)


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


def _simplify(func: PrimFunc, mod: Any, ctx: PassContext) -> PrimFunc:
    return simplify_prim_func(func)


@register_pass("Simplify")
def Simplify() -> Pass:
    """Arithmetic simplification of every PrimFunc (see :mod:`parpass.passes.simplify`)."""
    return prim_func_pass(_simplify, opt_level=0, name="Simplify")
