"""Deterministic random modules that look like compiled models.

:func:`random_module` builds an :class:`~parpass.ir.IRModule` of dataflow
:class:`~parpass.ir.Function`s and loop-level :class:`~parpass.ir.PrimFunc`s that
gives every standard pass real work: constants to fold, repeated subexpressions,
dead and copied bindings, tuples, ``If`` blocks, calls between functions, entry
points and unreachable functions, loop nests to unroll and vectorize, and
arithmetic to simplify.

Determinism: the only source of randomness is one ``random.Random(seed)``, used
only through integer draws and ``random()`` with plain float arithmetic (no
``math.log``/``exp``, whose last bit may differ between C libraries), never
``hash()`` or set order. The same arguments give byte-identical functions on
every machine and Python version that keeps ``random``'s documented sequences.

All generated IR is well typed: every binding's value type-checks through the op
registry's type rules (most bindings carry their type in ``Binding.ty``; some are
left ``None`` for InferType to fill), every variable is defined before use, and ids
are unique within each function.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeGuard

import numpy as np

from parpass.ir import tir
from parpass.ir.ids import IdSupply
from parpass.ir.module import IRModule
from parpass.ir.node import Attrs, BaseFunc, GlobalVar, Op
from parpass.ir.op import get_op
from parpass.ir.relax import (
    Binding,
    Call,
    Constant,
    Expr,
    Function,
    If,
    Param,
    SeqExpr,
    Tuple,
    TupleGetItem,
    Var,
)
from parpass.ir.types import PrimType, TensorType, TupleType, Type

__all__ = ["random_module"]

# ---------------------------------------------------------------- shared helpers

_FUNC_WORDS = (
    "attention",
    "mlp",
    "layer_norm",
    "embedding",
    "residual_block",
    "conv_block",
    "decoder_layer",
    "encoder_layer",
    "projection",
    "pooling",
    "classifier_head",
    "rotary_embed",
)
_KERNEL_WORDS = (
    "conv2d",
    "dense",
    "matmul",
    "batch_matmul",
    "add",
    "relu",
    "multiply",
    "softmax",
    "layer_norm",
    "transpose",
    "reshape",
    "sigmoid",
    "tanh",
    "exp",
    "sum",
    "mean",
    "max_pool2d",
    "avg_pool2d",
    "concatenate",
    "divide",
    "subtract",
    "cast",
    "gelu",
    "bias_add",
)
_DIMS = (1, 2, 3, 4, 4, 8, 8)
#: Fraction of bindings that carry their type (the rest are left for InferType).
_TYPED_FRACTION = 0.85
#: Window of recent values that operands are drawn from (keeps generation linear-time).
_WINDOW = 24


def _draw_size(rng: random.Random, size: int) -> int:
    """A size skewed like real models: many small, some medium, a few very large.

    A four-tier mixture approximating a log-normal with mean about ``size``; it uses
    only integer draws so it is bit-exact everywhere.
    """
    size = max(1, size)
    u = rng.random()
    if u < 0.55:
        lo, hi = 1, max(1, size // 2)
    elif u < 0.85:
        lo, hi = max(1, size // 2), max(1, (size * 3) // 2)
    elif u < 0.97:
        lo, hi = max(1, (size * 3) // 2), max(2, size * 4)
    else:
        lo, hi = max(2, size * 4), max(3, size * 12)
    return rng.randint(lo, hi)


def _recent(rng: random.Random, n: int) -> int:
    """An index in ``range(n)`` biased towards the end (recent values feed the next op)."""
    r = rng.random()
    back = int(r * r * n)
    return n - 1 - min(back, n - 1)


def _const_values(rng: random.Random, dtype: str, count: int, nonzero: bool = False) -> list[float] | list[int]:
    if dtype == "bool":
        return [int(rng.random() < 0.5) for _ in range(count)]
    if dtype.startswith("float"):
        # Quarter steps are exact in every float width, so folding order cannot change bits.
        vals = [rng.randint(-8, 8) / 4 for _ in range(count)]
        return [v if v or not nonzero else 0.5 for v in vals]
    ints = [rng.randint(-4, 4) for _ in range(count)]
    return [v if v or not nonzero else 1 for v in ints]


def _constant(rng: random.Random, shape: tuple[int, ...], dtype: str, nonzero: bool = False) -> Constant:
    count = 1
    for d in shape:
        count *= d
    values = _const_values(rng, dtype, count, nonzero)
    return Constant.from_value(np.array(values, dtype=dtype).reshape(shape))


def _const_type(c: Constant) -> TensorType:
    return TensorType(tuple(c.shape), c.dtype)


def _is_tensor(ty: Type) -> TypeGuard[TensorType | PrimType]:
    return isinstance(ty, (TensorType, PrimType))


def _dtype(ty: Type) -> str:
    """The element dtype of a tensor or scalar type (the generator only asks it of those)."""
    if not isinstance(ty, (TensorType, PrimType)):
        raise TypeError(f"random_module: expected a tensor or scalar type, got {ty!r}")
    return ty.dtype


def _fields(ty: Type) -> tuple[Type, ...]:
    """The field types of a tuple type (the generator only asks it of those)."""
    if not isinstance(ty, TupleType):
        raise TypeError(f"random_module: expected a tuple type, got {ty!r}")
    return ty.fields


def _shape(ty: Type) -> tuple[int, ...]:
    return tuple(ty.shape) if isinstance(ty, TensorType) else ()


# ---------------------------------------------------------------- dataflow functions


@dataclass
class _Signature:
    gv: GlobalVar
    param_types: tuple[Type, ...]
    ret_type: Type


@dataclass
class _Scope:
    """One binding block: its bindings, the values visible in it, and its pure calls (for CSE)."""

    bindings: list[Binding] = field(default_factory=list)
    pool: list[tuple[Var, Type]] = field(default_factory=list)
    calls: list[tuple[Call, Type, str]] = field(default_factory=list)


#: Dataflow generation steps and their relative weights.
_STEPS: tuple[tuple[str, int], ...] = (
    ("unary", 14),
    ("binary", 20),
    ("binary_const", 10),
    ("const_call", 6),
    ("create", 2),
    ("cse", 8),
    ("dead", 5),
    ("copy", 5),
    ("tuple", 4),
    ("getitem", 4),
    ("const_tuple", 3),
    ("split", 3),
    ("reduce", 5),
    ("layout", 5),
    ("matmul", 4),
    ("concat", 2),
    ("where", 3),
    ("astype", 2),
    ("call", 6),
    ("if", 3),
    ("stateful", 1),
)
_STEP_NAMES = tuple(name for name, _ in _STEPS)


class _FunctionGen:
    """Builds one dataflow Function, step by step, from a budget of bindings."""

    def __init__(
        self,
        rng: random.Random,
        dtype: str,
        palette: list[tuple[int, ...]],
        callees: list[_Signature],
        call_boost: int = 1,
    ) -> None:
        self.rng = rng
        self.dtype = dtype
        self.palette = palette
        self.callees = callees
        self.ids = IdSupply()
        self.params: list[tuple[Var, Type]] = []
        self.count = 0  # bindings emitted so far, nested blocks included
        weights = [w * call_boost if name == "call" else w for name, w in _STEPS]
        self.cum = [sum(weights[: k + 1]) for k in range(len(weights))]

    # ------------------------------------------------------------ emission

    def typed(self, op: str, arg_types: Sequence[Type], attrs: Attrs | None = None) -> Type | None:
        """The result type of ``op`` on ``arg_types``, or None if the op rejects them."""
        try:
            rule = get_op(op).infer_type
            return None if rule is None else rule(list(arg_types), attrs or {})
        except TypeError:
            return None

    def emit(self, scope: _Scope, value: Expr, ty: Type, name: str, live: bool = True) -> Var:
        var = self.ids.var(name)
        scope.bindings.append(Binding(var, value, ty if self.rng.random() < _TYPED_FRACTION else None))
        self.count += 1
        if live:
            scope.pool.append((var, ty))
        return var

    def emit_call(
        self,
        scope: _Scope,
        op: str,
        args: Sequence[Expr],
        arg_types: Sequence[Type],
        attrs: Attrs | None = None,
        name: str | None = None,
        live: bool = True,
    ) -> tuple[Var, Type] | None:
        ty = self.typed(op, arg_types, attrs)
        if ty is None:
            return None
        call = Call(Op(op), tuple(args), dict(attrs or {}))
        var = self.emit(scope, call, ty, name or op, live)
        if get_op(op).pure:
            scope.calls.append((call, ty, name or op))
        return var, ty

    # ------------------------------------------------------------ operand choice

    def pick(self, scope: _Scope, pred: Callable[[Type], bool]) -> tuple[Var, Type] | None:
        window = scope.pool[-_WINDOW:]
        cands = [e for e in window if pred(e[1])]
        if not cands:
            cands = [e for e in self.params if pred(e[1])]
        if not cands:
            return None
        return cands[_recent(self.rng, len(cands))]

    def pick_tensor(self, scope: _Scope, numeric: bool = True) -> tuple[Var, Type] | None:
        def ok(ty: Type) -> bool:
            return _is_tensor(ty) and (not numeric or ty.dtype != "bool")

        return self.pick(scope, ok)

    # ------------------------------------------------------------ steps (each returns False if it could not run)

    def step_unary(self, scope: _Scope, live: bool = True) -> bool:
        x = self.pick_tensor(scope)
        if x is None:
            return False
        ops = ["relu", "negative", "abs", "exp", "tanh", "sigmoid", "sqrt", "log"]
        op = ops[self.rng.randrange(len(ops) if _dtype(x[1]).startswith("float") else 3)]
        if op in ("sqrt", "log"):  # keep the domain valid: sqrt(abs(x)), log(sigmoid(x))
            inner = self.emit_call(scope, "abs" if op == "sqrt" else "sigmoid", [x[0]], [x[1]])
            if inner is None:
                return False
            x = inner
        return self.emit_call(scope, op, [x[0]], [x[1]], live=live) is not None

    def step_binary(self, scope: _Scope, live: bool = True) -> bool:
        a = self.pick_tensor(scope)
        if a is None:
            return False
        a_shape, a_dtype = _shape(a[1]), _dtype(a[1])

        def partner(ty: Type) -> bool:
            if not _is_tensor(ty) or ty.dtype != a_dtype:
                return False
            s = _shape(ty)
            pairs = zip(reversed(s), reversed(a_shape), strict=False)  # trailing dims, numpy-style
            return len(s) <= 3 and all(x == y or x == 1 or y == 1 for x, y in pairs)

        b = self.pick(scope, partner) or a
        ops = ["add", "add", "multiply", "multiply", "subtract", "maximum", "minimum", "divide", "power"]
        op = ops[self.rng.randrange(len(ops) - (0 if a_dtype.startswith("float") else 2))]
        if op == "power":  # a non-negative base keeps it real: power(abs(a), b)
            base = self.emit_call(scope, "abs", [a[0]], [a[1]])
            if base is None:
                return False
            a = base
        return self.emit_call(scope, op, [a[0], b[0]], [a[1], b[1]], live=live) is not None

    def step_binary_const(self, scope: _Scope) -> bool:
        a = self.pick_tensor(scope)
        if a is None:
            return False
        shape, dtype = _shape(a[1]), _dtype(a[1])
        roll = self.rng.random()
        cshape = () if roll < 0.4 else (shape[-1:] if roll < 0.7 else shape)
        op = ["add", "multiply", "subtract", "divide", "maximum"][self.rng.randrange(5)]
        c = _constant(self.rng, cshape, dtype, nonzero=op == "divide")
        return self.emit_call(scope, op, [a[0], c], [a[1], _const_type(c)]) is not None

    def step_const_call(self, scope: _Scope) -> bool:
        """Calls on constants only (and a follow-up on the result), for FoldConstant."""
        shape = self.palette[self.rng.randrange(len(self.palette))]
        c1 = _constant(self.rng, shape, self.dtype)
        roll = self.rng.randrange(4)
        if roll == 0:
            op = "exp" if self.dtype.startswith("float") else "negative"
            res = self.emit_call(scope, op, [c1], [_const_type(c1)], name="const")
        elif roll == 1 and len(shape) >= 1:
            w = _constant(self.rng, (shape[-1], self.palette[0][-1] if self.palette[0] else 2), self.dtype)
            res = self.emit_call(scope, "matmul", [c1, w], [_const_type(c1), _const_type(w)], name="const")
        else:
            c2 = _constant(self.rng, shape, self.dtype)
            op = ["add", "multiply", "subtract"][self.rng.randrange(3)]
            res = self.emit_call(scope, op, [c1, c2], [_const_type(c1), _const_type(c2)], name="const")
        if res is None:
            return False
        if self.rng.random() < 0.5:  # a chain that folds only after the first fold
            c3 = _constant(self.rng, (), self.dtype)
            self.emit_call(scope, "add", [res[0], c3], [res[1], _const_type(c3)], name="const")
        return True

    def step_create(self, scope: _Scope) -> bool:
        shape = self.palette[self.rng.randrange(len(self.palette))]
        kind = ["zeros", "ones", "full"][self.rng.randrange(3)]
        attrs: Attrs = {"shape": list(shape), "dtype": self.dtype}
        if kind == "full":
            attrs["value"] = _const_values(self.rng, self.dtype, 1)[0]
        return self.emit_call(scope, kind, [], [], attrs, name=kind) is not None

    def step_cse(self, scope: _Scope) -> bool:
        """Repeat an earlier pure call of a visible scope, as a new binding (for CSE)."""
        if not scope.calls:
            return False
        n = min(len(scope.calls), _WINDOW)
        call, ty, name = scope.calls[len(scope.calls) - n + _recent(self.rng, n)]
        again = Call(call.op, call.args, dict(call.attrs))
        self.emit(scope, again, ty, name)
        return True

    def step_dead(self, scope: _Scope) -> bool:
        if self.rng.random() < 0.5:
            return self.step_unary(scope, live=False)
        return self.step_binary(scope, live=False)

    def step_copy(self, scope: _Scope) -> bool:
        x = self.pick(scope, lambda ty: True)
        if x is None:
            return False
        self.emit(scope, x[0], x[1], "copy" if self.rng.random() < 0.5 else x[0].name_hint)
        return True

    def step_tuple(self, scope: _Scope) -> bool:
        a, b = self.pick_tensor(scope, numeric=False), self.pick_tensor(scope, numeric=False)
        if a is None or b is None:
            return False
        ty = TupleType((a[1], b[1]))
        t = self.emit(scope, Tuple((a[0], b[0])), ty, "tup")
        if self.rng.random() < 0.6:  # trivial round trip t[k] (CanonicalizeBindings)
            k = self.rng.randrange(2)
            self.emit(scope, TupleGetItem(t, k), ty.fields[k], "item")
        return True

    def step_getitem(self, scope: _Scope) -> bool:
        x = self.pick(scope, lambda ty: isinstance(ty, TupleType) and len(ty.fields) > 0)
        if x is None:
            return False
        fields = _fields(x[1])
        k = self.rng.randrange(len(fields))
        self.emit(scope, TupleGetItem(x[0], k), fields[k], "item")
        return True

    def step_const_tuple(self, scope: _Scope) -> bool:
        """``t = (c1, c2); y = t[k]``, or the tuple inline: ``y = (c1, c2)[k]`` (for FoldConstant)."""
        shape = self.palette[self.rng.randrange(len(self.palette))]
        c1, c2 = _constant(self.rng, shape, self.dtype), _constant(self.rng, (), self.dtype)
        tup = Tuple((c1, c2))
        ty = TupleType((_const_type(c1), _const_type(c2)))
        k = self.rng.randrange(2)
        if self.rng.random() < 0.7:
            t = self.emit(scope, tup, ty, "const_tup", live=False)
            self.emit(scope, TupleGetItem(t, k), ty.fields[k], "const")
        else:
            self.emit(scope, TupleGetItem(tup, k), ty.fields[k], "const")
        return True

    def step_split(self, scope: _Scope) -> bool:
        x = self.pick(scope, lambda ty: isinstance(ty, TensorType) and any(d % 2 == 0 for d in ty.shape))
        if x is None:
            return False
        shape = _shape(x[1])
        axis = next(k for k, d in enumerate(shape) if d % 2 == 0)
        res = self.emit_call(scope, "split", [x[0]], [x[1]], {"sections": 2, "axis": axis})
        if res is None:
            return False
        k = self.rng.randrange(2)
        self.emit(scope, TupleGetItem(res[0], k), _fields(res[1])[k], "part")
        return True

    def step_reduce(self, scope: _Scope) -> bool:
        x = self.pick(scope, lambda ty: isinstance(ty, TensorType) and ty.ndim >= 1 and ty.dtype != "bool")
        if x is None:
            return False
        ndim = len(_shape(x[1]))
        op = ["sum", "mean", "max", "min"][self.rng.randrange(4 if _dtype(x[1]).startswith("float") else 1)]
        attrs: Attrs = {"axis": self.rng.randrange(-1, ndim) if self.rng.random() < 0.8 else None}
        if self.rng.random() < 0.5:
            attrs["keepdims"] = True
        return self.emit_call(scope, op, [x[0]], [x[1]], attrs) is not None

    def step_layout(self, scope: _Scope) -> bool:
        x = self.pick(scope, lambda ty: isinstance(ty, TensorType) and ty.ndim >= 1)
        if x is None:
            return False
        shape = _shape(x[1])
        if len(shape) >= 2 and self.rng.random() < 0.5:
            axes = list(range(len(shape)))
            self.rng.shuffle(axes)
            return self.emit_call(scope, "transpose", [x[0]], [x[1]], {"axes": axes}) is not None
        target = [-1] if len(shape) > 1 or self.rng.random() < 0.5 else [1, shape[0]]
        return self.emit_call(scope, "reshape", [x[0]], [x[1]], {"shape": target}) is not None

    def step_matmul(self, scope: _Scope) -> bool:
        a = self.pick(scope, lambda ty: isinstance(ty, TensorType) and 1 <= ty.ndim <= 3 and ty.dtype != "bool")
        if a is None:
            return False
        k = _shape(a[1])[-1]

        def rhs(ty: Type) -> bool:
            return isinstance(ty, TensorType) and ty.ndim == 2 and ty.shape[0] == k and ty.dtype == _dtype(a[1])

        b = self.pick(scope, rhs)
        if b is None or self.rng.random() < 0.5:  # a constant weight, as in a real layer
            w = _constant(self.rng, (k, _DIMS[self.rng.randrange(len(_DIMS))]), _dtype(a[1]))
            return self.emit_call(scope, "matmul", [a[0], w], [a[1], _const_type(w)]) is not None
        return self.emit_call(scope, "matmul", [a[0], b[0]], [a[1], b[1]]) is not None

    def step_concat(self, scope: _Scope) -> bool:
        a = self.pick(scope, lambda ty: isinstance(ty, TensorType) and ty.ndim >= 1 and max(ty.shape) <= 8)
        if a is None:
            return False
        b = self.pick(scope, lambda ty: ty == a[1]) or a
        axis = self.rng.randrange(len(_shape(a[1])))
        return self.emit_call(scope, "concat", [a[0], b[0]], [a[1], b[1]], {"axis": axis}) is not None

    def step_where(self, scope: _Scope) -> bool:
        a = self.pick_tensor(scope)
        if a is None:
            return False
        zero = _constant(self.rng, (), _dtype(a[1]))
        cond = self.emit_call(scope, "greater", [a[0], zero], [a[1], _const_type(zero)], name="mask")
        if cond is None:
            return False
        b = self.pick(scope, lambda ty: ty == a[1]) or a
        return self.emit_call(scope, "where", [cond[0], a[0], b[0]], [cond[1], a[1], b[1]]) is not None

    def step_astype(self, scope: _Scope) -> bool:
        x = self.pick_tensor(scope, numeric=False)
        if x is None:
            return False
        src = _dtype(x[1])
        target = "int32" if src.startswith("float") else self.dtype if self.dtype != src else "float32"
        return self.emit_call(scope, "astype", [x[0]], [x[1]], {"dtype": target}) is not None

    def step_stateful(self, scope: _Scope) -> bool:
        if self.rng.random() < 0.6:
            x = self.pick_tensor(scope)
            if x is None:
                return False
            live = self.rng.random() < 0.5  # an unused print must survive DCE all the same
            return self.emit_call(scope, "print", [x[0]], [x[1]], {"message": "debug: "}, live=live) is not None
        shape = self.palette[self.rng.randrange(len(self.palette))]
        attrs: Attrs = {"shape": list(shape), "seed": self.rng.randrange(1 << 16)}
        return self.emit_call(scope, "random_uniform", [], [], attrs, name="noise") is not None

    def arg_for(self, scope: _Scope, ty: Type) -> Expr | None:
        """A value of type ``ty`` for a call argument: a visible value, or a new constant/tuple."""
        for var, vty in reversed(scope.pool[-_WINDOW:] + self.params):
            if vty == ty:
                return var
        if isinstance(ty, TensorType):
            return _constant(self.rng, tuple(ty.shape), ty.dtype)
        if isinstance(ty, TupleType):
            fields = [self.arg_for(scope, f) for f in ty.fields]
            if any(f is None for f in fields):
                return None
            return self.emit(scope, Tuple(tuple(f for f in fields if f is not None)), ty, "args", live=False)
        return None  # a scalar parameter nobody here can supply

    def step_call(self, scope: _Scope) -> bool:
        if not self.callees:
            return False
        sig = self.callees[_recent(self.rng, len(self.callees))]
        args = []
        for ty in sig.param_types:
            arg = self.arg_for(scope, ty)
            if arg is None:
                return False
            args.append(arg)
        self.emit(scope, Call(sig.gv, tuple(args)), sig.ret_type, f"{sig.gv.name_hint}_out")
        return True

    def step_if(self, scope: _Scope, budget: int, depth: int) -> bool:
        """An If on a computed condition, with two nested blocks yielding the same type."""
        a = self.pick(scope, lambda ty: isinstance(ty, TensorType) and ty.dtype != "bool")
        if a is None:
            return False
        s = self.emit_call(scope, "sum", [a[0]], [a[1]], name="total")
        if s is None:
            return False
        limit = _constant(self.rng, (), _dtype(s[1]))
        op = "less" if self.rng.random() < 0.5 else "greater"
        cond = self.emit_call(scope, op, [s[0], limit], [s[1], _const_type(limit)], name="cond")
        if cond is None:
            return False
        target = self.pick_tensor(scope)
        if target is None:
            return False
        inner = max(1, (budget - 3) // 2)
        then_branch = self.block(scope, self.rng.randint(1, inner), depth + 1, target)
        else_branch = self.block(scope, self.rng.randint(1, inner), depth + 1, target)
        self.emit(scope, If(cond[0], then_branch, else_branch), target[1], "branch")
        return True

    # ------------------------------------------------------------ blocks

    def run_steps(self, scope: _Scope, budget: int, depth: int) -> None:
        start = self.count
        attempts = 0
        while self.count - start < budget and attempts < budget * 4 + 8:
            attempts += 1
            r = self.rng.randrange(self.cum[-1])
            k = 0
            while self.cum[k] <= r:
                k += 1
            name = _STEP_NAMES[k]
            if name == "if":
                remaining = budget - (self.count - start)
                if depth < 2 and remaining >= 5:
                    self.step_if(scope, remaining, depth)
                continue
            getattr(self, f"step_{name}")(scope)

    def block(self, outer: _Scope, budget: int, depth: int, target: tuple[Var, Type]) -> SeqExpr:
        """A nested block seeing ``outer``'s values, ending in a value of ``target``'s type."""
        scope = _Scope([], list(outer.pool), list(outer.calls))
        self.run_steps(scope, budget, depth)
        want = target[1]
        own = [v for v, ty in scope.pool[len(outer.pool) :] if ty == want]
        if own:
            return SeqExpr(tuple(scope.bindings), own[-1])
        dtype = _dtype(want)
        ops = ["relu", "negative", "abs", "tanh", "sigmoid"] if dtype.startswith("float") else ["relu", "negative"]
        res = self.emit_call(scope, ops[self.rng.randrange(len(ops))], [target[0]], [want])
        assert res is not None and res[1] == want, "unary ops keep the type"
        return SeqExpr(tuple(scope.bindings), res[0])

    def param_type(self) -> Type:
        roll = self.rng.random()
        shape = self.palette[self.rng.randrange(len(self.palette))]
        if roll < 0.06:
            return PrimType(self.dtype)
        if roll < 0.14:
            other = self.palette[self.rng.randrange(len(self.palette))]
            return TupleType((TensorType(shape, self.dtype), TensorType(other, self.dtype)))
        return TensorType(shape, self.dtype)

    def build(self, budget: int, name: str, attrs: Attrs) -> tuple[Function, _Signature]:
        names = ["x", "weight", "bias", "state", "alpha"]
        for k in range(1 + (self.rng.randrange(3) if budget > 2 else 0)):
            ty = self.param_type()
            var = self.ids.var(names[k] if not isinstance(ty, PrimType) else "alpha")
            self.params.append((var, ty))
        scope = _Scope()
        scope.pool.extend(self.params)
        for var, ty in self.params:  # unpack tuple params so their fields get used
            if isinstance(ty, TupleType):
                k = self.rng.randrange(len(ty.fields))
                self.emit(scope, TupleGetItem(var, k), ty.fields[k], f"{var.name_hint}_{k}")
        if not any(isinstance(ty, (TensorType, PrimType)) for _, ty in scope.pool):
            self.step_create(scope)
        self.run_steps(scope, budget, 0)
        results = [e for e in scope.pool[len(self.params) :] if _is_tensor(e[1])] or [
            e for e in self.params if _is_tensor(e[1])
        ]
        if not results:  # only tuple parameters and no bindings: return the first one
            results = self.params[:1]
        last = results[-1]
        if len(results) >= 2 and self.rng.random() < 0.2:
            other = results[_recent(self.rng, len(results) - 1)]
            body: Expr = Tuple((other[0], last[0]))
            ret: Type = TupleType((other[1], last[1]))
        else:
            body, ret = last[0], last[1]
        func = Function(
            tuple(Param(v, t) for v, t in self.params),
            SeqExpr(tuple(scope.bindings), body),
            ret if self.rng.random() < 0.9 else None,
            attrs=attrs,
        )
        return func, _Signature(GlobalVar(name), tuple(t for _, t in self.params), ret)


# ---------------------------------------------------------------- loop-level functions


class _PrimGen:
    """Builds one PrimFunc: a few loop-nest stages over small static buffers."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.ids = IdSupply()
        self.dtype = "float32" if rng.random() < 0.85 else "int32"
        self.is_float = self.dtype == "float32"

    def imm(self, value: float) -> tir.PrimExpr:
        return tir.FloatImm(self.dtype, float(value)) if self.is_float else tir.IntImm(self.dtype, int(value))

    def small_const(self) -> tir.PrimExpr:
        return self.imm(self.rng.choice((0.5, 2.0, 0.25, 3.0, 1.5)) if self.is_float else self.rng.randint(1, 5))

    def nest(
        self,
        shape: Sequence[int],
        make_body: Callable[[list[tir.Var]], tir.Stmt],
        names: str = "ijk",
        inner_kind: tir.ForKind | None = None,
    ) -> tir.Stmt:
        """A loop nest over ``shape``; the outer loop may be parallel, the inner vectorized/unrolled."""
        loop_vars = [self.ids.tir_var(names[k] if k < len(names) else f"i{k}") for k in range(len(shape))]
        stmt = make_body(loop_vars)
        for k in range(len(shape) - 1, -1, -1):
            extent = shape[k]
            kind = tir.ForKind.SERIAL
            roll = self.rng.random()
            if k == len(shape) - 1:
                if inner_kind is not None:
                    kind = inner_kind
                elif roll < 0.3 and extent in (2, 4, 8):
                    kind = tir.ForKind.VECTORIZED
                elif roll < 0.45 and extent <= 4:
                    kind = tir.ForKind.UNROLLED
            elif k == 0 and roll < 0.35:
                kind = tir.ForKind.PARALLEL
            stmt = tir.For(loop_vars[k], tir.IntImm("int32", 0), tir.IntImm("int32", extent), kind, stmt)
        return stmt

    def index(self, v: tir.Var, extent: int) -> tir.PrimExpr:
        """An index equal to ``v``, sometimes in a simplifiable disguise."""
        roll = self.rng.randrange(8)
        if roll == 0:
            return (v + 1) - 1
        if roll == 1:
            return v * 1 + 0
        if roll == 2:
            return tir.min_(v, extent - 1)
        if roll == 3:
            return tir.max_(v, 0)
        return v

    def value_expr(self, loads: list[tir.PrimExpr], loop_vars: list[tir.Var]) -> tir.PrimExpr:
        """An arithmetic expression over ``loads`` with identities and constant subexpressions."""
        x = loads[0]
        for other in loads[1:]:
            op = self.rng.randrange(4)
            x = x + other if op < 2 else (x * other if op == 2 else tir.max_(x, other))
        roll = self.rng.randrange(9)
        if roll == 0:
            x = x * self.imm(1)
        elif roll == 1:
            x = x + self.imm(0)
        elif roll == 2:
            x = x * (self.imm(2) * self.imm(0.5 if self.is_float else 1))  # constant subexpression
        elif roll == 3:
            x = tir.Select(tir.gt(x, self.imm(0)), x, self.imm(0))  # relu
        elif roll == 4 and loop_vars:
            x = x + tir.Cast(self.dtype, loop_vars[-1])
        elif roll == 5 and self.is_float:
            x = tir.Call(self.dtype, "exp" if self.rng.random() < 0.5 else "tanh", (x,))
        elif roll == 6:
            x = x + self.small_const() * self.small_const()
        return x

    def stage_elementwise(self, out: tir.Buffer, ins: list[tir.Buffer], shape: tuple[int, ...]) -> tir.Stmt:
        def body(lv: list[tir.Var]) -> tir.Stmt:
            loads: list[tir.PrimExpr] = []
            for buf in ins:
                rank = len(buf.shape)
                idx = [self.index(v, shape[len(shape) - rank + k]) for k, v in enumerate(lv[len(lv) - rank :])]
                loads.append(buf[tuple(idx)])
            return out.store(tuple(lv), self.value_expr(loads, lv))

        return self.nest(shape, body)

    def stage_inplace(self, out: tir.Buffer, bias: tir.Buffer, shape: tuple[int, ...]) -> tir.Stmt:
        """``out[...] = out[...] op bias[j]`` (a fused epilogue)."""

        def body(lv: list[tir.Var]) -> tir.Stmt:
            cur = out[tuple(lv)]
            val = cur + bias[lv[-1]] if self.rng.random() < 0.6 else tir.max_(cur, self.imm(0))
            return out.store(tuple(lv), val)

        return self.nest(shape, body)

    def stage_guarded(self, out: tir.Buffer, src: tir.Buffer, shape: tuple[int, ...]) -> tir.Stmt:
        """An IfThenElse decidable from the loop bounds (always true, or always false)."""

        def body(lv: list[tir.Var]) -> tir.Stmt:
            v, extent = lv[0], shape[0]
            store = out.store(tuple(lv), src[tuple(lv)] * self.small_const())
            other = out.store(tuple(lv), self.imm(0))
            roll = self.rng.randrange(4)
            if roll == 0:
                return tir.IfThenElse(tir.lt(v, extent), store, other)
            if roll == 1:
                return tir.IfThenElse(tir.ge(v, extent + 2), other, store)
            if roll == 2:
                return tir.IfThenElse(tir.ge(v, 0), store)
            return tir.IfThenElse(tir.lt(v, max(1, extent // 2)), store, other)  # not decidable

        return self.nest(shape, body, inner_kind=tir.ForKind.SERIAL)

    def stage_let(self, out: tir.Buffer, src: tir.Buffer, shape: tuple[int, ...]) -> tir.Stmt:
        """``let flat = i*d + j`` and indices recovered by floordiv/floormod (simplifiable)."""
        if len(shape) < 2:
            return self.stage_elementwise(out, [src], shape)

        def body(lv: list[tir.Var]) -> tir.Stmt:
            d = shape[-1]
            flat = self.ids.tir_var("flat")
            i, j = lv[-2], lv[-1]
            idx: list[tir.PrimExpr] = [*lv[:-2], flat // d, flat % d]
            store = out.store(tuple(lv), src[tuple(idx)] + self.imm(0))
            return tir.LetStmt(flat, i * d + j, store)

        return self.nest(shape, body)

    def stage_reduce(self, out: tir.Buffer, src: tir.Buffer, shape: tuple[int, ...]) -> tir.Stmt:
        """A softmax-like row normalisation through a local accumulator (Allocate)."""
        acc = self.ids.buffer("acc_local", self.dtype, (1,))
        zero = tir.IntImm("int32", 0)
        outer, inner = shape[:-1], shape[-1]

        def body(lv: list[tir.Var]) -> tir.Stmt:
            k = self.ids.tir_var("k")
            k2 = self.ids.tir_var("k")
            init = acc.store((zero,), self.imm(0))
            accumulate = tir.For(
                k,
                zero,
                tir.IntImm("int32", inner),
                tir.ForKind.SERIAL,
                acc.store((zero,), acc[zero] + src[tuple([*lv, k])]),
            )
            denom = acc[zero] + self.imm(1)
            at = tuple([*lv, k2])
            write = tir.For(
                k2,
                zero,
                tir.IntImm("int32", inner),
                tir.ForKind.UNROLLED if inner <= 4 else tir.ForKind.SERIAL,
                out.store(at, src[at] * denom if self.is_float else src[at] - acc[zero]),
            )
            return tir.Allocate(acc, tir.SeqStmt((init, accumulate, write)))

        if not outer:
            return body([])
        return self.nest(outer, body, inner_kind=tir.ForKind.SERIAL)

    def stage_noop(self, out: tir.Buffer, shape: tuple[int, ...]) -> tir.Stmt:
        """Statements with no effect: ``Evaluate(0)``, ``out[i] = out[i]``, or an empty-bodied loop."""
        roll = self.rng.randrange(3)
        if roll == 0:
            return tir.Evaluate(tir.IntImm("int32", 0))
        if roll == 1:
            return self.nest(shape, lambda lv: out.store(tuple(lv), out[tuple(lv)]), inner_kind=tir.ForKind.SERIAL)
        i = self.ids.tir_var("i")
        return tir.For(i, tir.IntImm("int32", 0), tir.IntImm("int32", 4), tir.ForKind.SERIAL, tir.Evaluate(self.imm(0)))

    def build(self, budget: int, name: str, attrs: Attrs) -> tir.PrimFunc:
        rank = self.rng.randint(1, 3)
        shape = tuple(
            self.rng.choice((4, 8)) if k == rank - 1 else _DIMS[self.rng.randrange(len(_DIMS))] for k in range(rank)
        )
        a = self.ids.buffer("A", self.dtype, shape)
        b = self.ids.buffer("B", self.dtype, shape)
        bias = self.ids.buffer("bias", self.dtype, shape[-1:])
        out = self.ids.buffer("T_out", self.dtype, shape)
        params: list[tir.Var | tir.Buffer] = [a, b, bias, out]
        scalar = None
        if self.rng.random() < 0.2:
            scalar = self.ids.tir_var("alpha", self.dtype)
            params.append(scalar)
        stages: list[tir.Stmt] = [self.stage_elementwise(out, [a, b] if self.rng.random() < 0.6 else [a], shape)]
        kinds = ("elementwise", "inplace", "guarded", "let", "reduce", "noop", "noop")
        for _ in range(max(0, budget // 5)):
            kind = kinds[self.rng.randrange(len(kinds))]
            if kind == "elementwise":
                stages.append(self.stage_elementwise(out, [out, bias][: self.rng.randint(1, 2)], shape))
            elif kind == "inplace":
                stages.append(self.stage_inplace(out, bias, shape))
            elif kind == "guarded":
                stages.append(self.stage_guarded(out, a, shape))
            elif kind == "let":
                stages.append(self.stage_let(out, b, shape))
            elif kind == "reduce":
                stages.append(self.stage_reduce(out, a, shape))
            else:
                stages.append(self.stage_noop(out, shape))
        if scalar is not None:
            stages.append(self.nest(shape, lambda lv: out.store(tuple(lv), out[tuple(lv)] * scalar)))
        body = stages[0] if len(stages) == 1 else tir.SeqStmt(tuple(stages))
        return tir.PrimFunc(tuple(params), body, attrs=attrs)


# ---------------------------------------------------------------- module


def random_module(
    num_functions: int = 20,
    num_prim_funcs: int | None = None,
    size: int = 20,
    seed: int = 0,
) -> IRModule:
    """A random but realistic module of ``num_functions`` Functions and ``num_prim_funcs`` PrimFuncs.

    ``num_prim_funcs`` defaults to ``num_functions // 2``. ``size`` is the typical
    number of bindings of a Function (loop-nest stages of a PrimFunc scale with it);
    actual sizes are skewed: many small functions and a few up to 12x ``size``.
    The same arguments give the same module, byte for byte, on every machine.

    Features: constant-only calls (tensor constants, constant tuples and their
    projections), repeated pure calls, dead bindings, copies, tuples, ``If`` with
    nested blocks, stateful ``print``/``random_uniform`` calls, calls to earlier
    Functions (an acyclic call graph) with matching signatures, entry points
    (``"global_symbol"``, always including ``main``), unreachable functions, and a
    few ``"SkipOptimization"`` functions. PrimFuncs have static buffer shapes, loops
    of constant extent (serial, parallel, vectorized, unrolled), simplifiable index
    and value arithmetic, decidable conditions, ``LetStmt``, ``Allocate`` and no-op
    statements.

    A few Functions hold stateful ``print`` calls, so interpreting a module writes
    some lines to stdout.
    """
    num_prim_funcs = _checked_counts(num_functions, num_prim_funcs, size, seed)
    rng = random.Random(seed)
    total = num_functions + num_prim_funcs
    skip = set(rng.sample(range(total), max(1, total // 20))) if total >= 5 else set()
    # Module order interleaves the two kinds; index -> kind.
    kinds = ["F"] * num_functions + ["P"] * num_prim_funcs
    rng.shuffle(kinds)
    plan = _ModulePlan(rng, size, num_functions, _palette(rng))
    funcs: list[tuple[str, BaseFunc]] = []
    for index, kind in enumerate(kinds):
        attrs: Attrs = {"SkipOptimization": True} if index in skip else {}
        funcs.append(plan.function(attrs) if kind == "F" else plan.prim_func(attrs))
    return IRModule(funcs)


def _checked_counts(num_functions: int, num_prim_funcs: int | None, size: int, seed: int) -> int:
    """The arguments of :func:`random_module` checked; returns ``num_prim_funcs`` with its default resolved."""
    for arg, value in (("num_functions", num_functions), ("size", size), ("seed", seed)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"random_module: {arg} must be an int, got {type(value).__name__}: {value!r}")
    if num_prim_funcs is None:
        num_prim_funcs = num_functions // 2
    if not isinstance(num_prim_funcs, int) or isinstance(num_prim_funcs, bool):
        raise TypeError(f"random_module: num_prim_funcs must be an int, got {num_prim_funcs!r}")
    if num_functions < 0 or num_prim_funcs < 0:
        raise ValueError(f"random_module: function counts must be >= 0, got {num_functions} and {num_prim_funcs}")
    if size < 1:
        raise ValueError(f"random_module: size must be >= 1, got {size}")
    return num_prim_funcs


def _palette(rng: random.Random) -> list[tuple[int, ...]]:
    """The few tensor shapes a module's Functions share, so their signatures match and they can call each other."""
    palette: list[tuple[int, ...]] = []
    for _ in range(4):
        rank = rng.randint(1, 3)
        palette.append(tuple(_DIMS[rng.randrange(len(_DIMS))] for _ in range(rank)))
    return palette


class _ModulePlan:
    """Draws a module's functions one by one, in module order, from the module's one ``rng``."""

    def __init__(self, rng: random.Random, size: int, num_functions: int, palette: list[tuple[int, ...]]) -> None:
        self.rng = rng
        self.size = size
        self.num_functions = num_functions
        self.palette = palette
        self.callees: list[_Signature] = []  # Functions later ones may call (orphans are left out)
        self.f_count = 0
        self.p_count = 0

    def function(self, attrs: Attrs) -> tuple[str, BaseFunc]:
        """The next dataflow Function; the last one is ``main``, an entry point with a bigger budget."""
        rng = self.rng
        is_main = self.f_count == self.num_functions - 1
        name = "main" if is_main else f"{_FUNC_WORDS[rng.randrange(len(_FUNC_WORDS))]}_{self.f_count}"
        role = rng.random()
        if is_main or role < 0.1:
            attrs = {"global_symbol": name, **attrs}
        dtype = "float32" if rng.random() < 0.9 else "int32"
        gen = _FunctionGen(rng, dtype, self.palette, self.callees, call_boost=4 if is_main else 1)
        budget = _draw_size(rng, self.size)
        func, sig = gen.build(max(budget, 2 * self.size) if is_main else budget, name, attrs)
        if is_main or not 0.1 <= role < 0.2:  # else an orphan: never called, no entry point -> unreachable
            self.callees.append(sig)
        self.f_count += 1
        return name, func

    def prim_func(self, attrs: Attrs) -> tuple[str, BaseFunc]:
        """The next PrimFunc, named like a fused kernel; most are entry points."""
        rng = self.rng
        budget = _draw_size(rng, self.size)
        words = [_KERNEL_WORDS[rng.randrange(len(_KERNEL_WORDS))] for _ in range(rng.randint(1, 3))]
        name = "fused_" + "_".join(words) + f"_{self.p_count}"
        if rng.random() < 0.9:
            attrs = {"global_symbol": name, **attrs}
        func = _PrimGen(rng).build(budget, name, attrs)
        self.p_count += 1
        return name, func
