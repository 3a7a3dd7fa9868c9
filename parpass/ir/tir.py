"""The loop-level function kind: :class:`PrimFunc`, like TVM TIR.

A PrimFunc has scalar (:class:`Var`) and buffer (:class:`Buffer`) parameters
and a statement body. Expressions carry their dtype as TVM's do: leaves store
it, and composite expressions derive it from their operands (``expr.dtype``).

Python operators build expressions: ``i * 4 + j`` on :class:`Var`s gives
``Add(Mul(i, IntImm(4)), j)``; plain ints and floats are converted to
immediates of the other operand's dtype. Comparisons are built with
:func:`lt`, :func:`eq`, ... (``==`` stays structural equality of nodes).
"""

from __future__ import annotations

import enum
import threading
from typing import Union, cast

import msgspec

from parpass.ir.dtype import element_dtype, lanes_of, vector_dtype
from parpass.ir.node import BaseFunc, Node, freeze_field


class _TirNode(Node, frozen=True, gc=False, tag=lambda name: f"tir.{name}"):
    """Base of the loop-level IR nodes; their tags are ``tir.<Class>``."""


def _as_prim_expr(node: PrimExprBase) -> PrimExpr:
    """``node`` typed as the :data:`PrimExpr` union, which lists every concrete PrimExprBase class."""
    return cast("PrimExpr", node)


class PrimExprBase(_TirNode, frozen=True, gc=False):
    """Base of loop-level expressions; Python arithmetic operators build new nodes."""

    @property
    def dtype(self) -> str:
        return expr_dtype(self)

    def __add__(self, other: PrimExprLike) -> Add:
        return Add(_as_prim_expr(self), convert(other, self))

    def __radd__(self, other: PrimExprLike) -> Add:
        return Add(convert(other, self), _as_prim_expr(self))

    def __sub__(self, other: PrimExprLike) -> Sub:
        return Sub(_as_prim_expr(self), convert(other, self))

    def __rsub__(self, other: PrimExprLike) -> Sub:
        return Sub(convert(other, self), _as_prim_expr(self))

    def __mul__(self, other: PrimExprLike) -> Mul:
        return Mul(_as_prim_expr(self), convert(other, self))

    def __rmul__(self, other: PrimExprLike) -> Mul:
        return Mul(convert(other, self), _as_prim_expr(self))

    def __floordiv__(self, other: PrimExprLike) -> FloorDiv:
        return FloorDiv(_as_prim_expr(self), convert(other, self))

    def __mod__(self, other: PrimExprLike) -> FloorMod:
        return FloorMod(_as_prim_expr(self), convert(other, self))

    def __neg__(self) -> Sub:
        return Sub(convert(0, self), _as_prim_expr(self))


# ---------------------------------------------------------------- leaves


class IntImm(PrimExprBase, frozen=True, gc=False):
    """An integer (or boolean) immediate."""

    dtype: str
    value: int


class FloatImm(PrimExprBase, frozen=True, gc=False):
    """A floating-point immediate."""

    dtype: str
    value: float


class Var(PrimExprBase, frozen=True, gc=False):
    """A scalar variable: function-local id, name hint and dtype."""

    vid: int
    name_hint: str
    dtype: str = "int32"


# ---------------------------------------------------------------- arithmetic


class _Binary(PrimExprBase, frozen=True, gc=False):
    a: PrimExpr
    b: PrimExpr

    __child_fields__ = ("a", "b")


class Add(_Binary, frozen=True, gc=False):
    """``a + b``."""


class Sub(_Binary, frozen=True, gc=False):
    """``a - b``."""


class Mul(_Binary, frozen=True, gc=False):
    """``a * b``."""


class FloorDiv(_Binary, frozen=True, gc=False):
    """``a // b``, rounding towards negative infinity."""


class FloorMod(_Binary, frozen=True, gc=False):
    """``a % b``, with the sign of ``b``."""


class Min(_Binary, frozen=True, gc=False):
    """``min(a, b)``."""


class Max(_Binary, frozen=True, gc=False):
    """``max(a, b)``."""


class _Compare(_Binary, frozen=True, gc=False):
    """A comparison; its dtype is ``bool``."""


class EQ(_Compare, frozen=True, gc=False):
    """``a == b``."""


class NE(_Compare, frozen=True, gc=False):
    """``a != b``."""


class LT(_Compare, frozen=True, gc=False):
    """``a < b``."""


class LE(_Compare, frozen=True, gc=False):
    """``a <= b``."""


class GT(_Compare, frozen=True, gc=False):
    """``a > b``."""


class GE(_Compare, frozen=True, gc=False):
    """``a >= b``."""


class And(_Compare, frozen=True, gc=False):
    """Logical ``a and b`` of booleans."""


class Or(_Compare, frozen=True, gc=False):
    """Logical ``a or b`` of booleans."""


class Not(PrimExprBase, frozen=True, gc=False):
    """Logical negation of a boolean."""

    a: PrimExpr

    __child_fields__ = ("a",)


class Select(PrimExprBase, frozen=True, gc=False):
    """``true_value if condition else false_value`` (both sides may be evaluated)."""

    condition: PrimExpr
    true_value: PrimExpr
    false_value: PrimExpr

    __child_fields__ = ("condition", "true_value", "false_value")


class Cast(PrimExprBase, frozen=True, gc=False):
    """``value`` converted to ``dtype``."""

    dtype: str
    value: PrimExpr

    __child_fields__ = ("value",)


class Call(PrimExprBase, frozen=True, gc=False):
    """A call of an intrinsic (``"exp"``, ``"sqrt"``, ...) by name, returning ``dtype``."""

    dtype: str
    op: str
    args: tuple[PrimExpr, ...]

    __child_fields__ = ("args",)


class Ramp(PrimExprBase, frozen=True, gc=False):
    """The vector ``[base, base + stride, ..., base + (lanes - 1) * stride]``."""

    base: PrimExpr
    stride: PrimExpr
    lanes: int

    __child_fields__ = ("base", "stride")


class Broadcast(PrimExprBase, frozen=True, gc=False):
    """The vector of ``lanes`` copies of the scalar ``value``."""

    value: PrimExpr
    lanes: int

    __child_fields__ = ("value",)


class Buffer(_TirNode, frozen=True, gc=False):
    """A multi-dimensional array: function-local id, name, element dtype, shape, strides.

    Empty ``strides`` means compact row-major layout.
    """

    vid: int
    name: str
    dtype: str
    shape: tuple[PrimExpr, ...]
    strides: tuple[PrimExpr, ...] = ()

    __child_fields__ = ("shape", "strides")

    def __getitem__(self, indices: PrimExprLike | tuple[PrimExprLike, ...]) -> BufferLoad:
        """``buf[i, j]`` builds a :class:`BufferLoad`."""
        idx = indices if isinstance(indices, tuple) else (indices,)
        return BufferLoad(self, tuple(convert(i) for i in idx))

    def store(self, indices: PrimExprLike | tuple[PrimExprLike, ...], value: PrimExprLike) -> BufferStore:
        """``buf.store((i, j), v)`` builds a :class:`BufferStore`."""
        idx = indices if isinstance(indices, tuple) else (indices,)
        return BufferStore(self, convert(value, dtype=self.dtype), tuple(convert(i) for i in idx))


class BufferSharing(threading.local):
    """Per thread: while a function is being decoded, the buffers decoded so far, by value.

    A function built in memory uses one :class:`Buffer` object for all the loads,
    stores and allocations of a buffer, and passes memoize per object. msgspec
    decodes a new object at every occurrence instead; while ``table`` is set (by
    :func:`~parpass.ir.serialization.decode_function`), each load, store and
    allocation is pointed at the first equal buffer as it is decoded, and a
    PrimFunc's buffer parameters likewise, so decoded IR has the sharing of the
    IR it was encoded from (and passes run as fast on it).
    """

    table: dict[Buffer, Buffer] | None = None


#: The state of decoding in this thread.
buffer_sharing = BufferSharing()


def _share_buffer(node: BufferLoad | BufferStore | Allocate) -> None:
    """What the nodes that hold a buffer do once built: while decoding, point ``node`` (not yet seen by
    anyone) at the first equal buffer decoded (see :class:`BufferSharing`)."""
    table = buffer_sharing.table
    if table is not None:
        buf = node.buffer
        shared = table.setdefault(buf, buf)
        if shared is not buf:
            msgspec.structs.force_setattr(node, "buffer", shared)


class BufferLoad(PrimExprBase, frozen=True, gc=False):
    """``buffer[indices]``."""

    buffer: Buffer
    indices: tuple[PrimExpr, ...]

    __child_fields__ = ("buffer", "indices")

    def __post_init__(self) -> None:
        _share_buffer(self)


PrimExpr = Union[
    IntImm,
    FloatImm,
    Var,
    Add,
    Sub,
    Mul,
    FloorDiv,
    FloorMod,
    Min,
    Max,
    EQ,
    NE,
    LT,
    LE,
    GT,
    GE,
    And,
    Or,
    Not,
    Select,
    Cast,
    Call,
    Ramp,
    Broadcast,
    BufferLoad,
]
PrimExprLike = Union[PrimExpr, int, float, bool]
_LEAVES = (IntImm, FloatImm, Var, Cast, Call, BufferLoad)


# ---------------------------------------------------------------- statements


class ForKind(str, enum.Enum):
    """How a :class:`For` loop runs (TVM's ``ForKind``)."""

    SERIAL = "serial"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    UNROLLED = "unrolled"


class For(_TirNode, frozen=True, gc=False):
    """``for loop_var in range(min, min + extent): body``."""

    loop_var: Var
    min: PrimExpr
    extent: PrimExpr
    kind: ForKind
    body: Stmt
    annotations: dict[str, object] = {}

    __child_fields__ = ("loop_var", "min", "extent", "body")

    def __post_init__(self) -> None:
        freeze_field(self, "annotations", "loop annotation")


class SeqStmt(_TirNode, frozen=True, gc=False):
    """Statements run in order."""

    seq: tuple[Stmt, ...]

    __child_fields__ = ("seq",)


class BufferStore(_TirNode, frozen=True, gc=False):
    """``buffer[indices] = value``."""

    buffer: Buffer
    value: PrimExpr
    indices: tuple[PrimExpr, ...]

    __child_fields__ = ("buffer", "value", "indices")

    def __post_init__(self) -> None:
        _share_buffer(self)


class IfThenElse(_TirNode, frozen=True, gc=False):
    """``if condition: then_case else: else_case`` (``else_case`` may be None)."""

    condition: PrimExpr
    then_case: Stmt
    else_case: Stmt | None = None

    __child_fields__ = ("condition", "then_case", "else_case")


class LetStmt(_TirNode, frozen=True, gc=False):
    """Binds ``var`` to ``value`` within ``body``."""

    var: Var
    value: PrimExpr
    body: Stmt

    __child_fields__ = ("var", "value", "body")


class Allocate(_TirNode, frozen=True, gc=False):
    """Allocates ``buffer`` (its shape and dtype) for the duration of ``body``."""

    buffer: Buffer
    body: Stmt

    __child_fields__ = ("buffer", "body")

    def __post_init__(self) -> None:
        _share_buffer(self)


class Evaluate(_TirNode, frozen=True, gc=False):
    """Evaluates ``value`` for its side effects (e.g. an intrinsic call)."""

    value: PrimExpr

    __child_fields__ = ("value",)


Stmt = Union[For, SeqStmt, BufferStore, IfThenElse, LetStmt, Allocate, Evaluate]


class PrimFunc(BaseFunc, frozen=True, gc=False, tag="PrimFunc"):
    """A loop-level function: scalar and buffer parameters and a statement body."""

    params: tuple[Var | Buffer, ...]
    body: Stmt

    __child_fields__ = ("params", "body")

    def __post_init__(self) -> None:
        super().__post_init__()
        table = buffer_sharing.table
        if table:  # the body's buffers are shared already: the parameters join them
            params = tuple(table.get(p, p) if type(p) is Buffer else p for p in self.params)
            if any(a is not b for a, b in zip(params, self.params, strict=True)):
                msgspec.structs.force_setattr(self, "params", params)

    def with_body(self, body: Stmt) -> PrimFunc:
        """This function with another body (the same object if ``body`` is unchanged)."""
        if body is self.body:
            return self
        return msgspec.structs.replace(self, body=body)


# ---------------------------------------------------------------- helpers


def expr_dtype(expr: PrimExprBase) -> str:
    """The dtype of ``expr`` (``"int32x4"`` for a 4-lane vector), computed without recursion."""
    lanes = 1
    while True:
        if isinstance(expr, (IntImm, FloatImm, Var, Cast, Call)):
            return vector_dtype(expr.dtype if lanes == 1 else element_dtype(expr.dtype), lanes)
        if isinstance(expr, (_Compare, Not)):
            return vector_dtype("bool", lanes)
        if isinstance(expr, _Binary):
            # Both operands share the dtype: follow a leaf operand when there is one, so that
            # left-deep chains such as ((x + 1) + 1) + 1 answer in constant time.
            expr = expr.b if isinstance(expr.b, _LEAVES) else expr.a
        elif isinstance(expr, Select):
            expr = expr.true_value
        elif isinstance(expr, Ramp):
            lanes *= expr.lanes
            expr = expr.base
        elif isinstance(expr, Broadcast):
            lanes *= expr.lanes
            expr = expr.value
        elif isinstance(expr, BufferLoad):
            return _buffer_load_dtype(expr, lanes)
        else:
            raise TypeError(f"not a PrimExpr: {type(expr).__name__}")


def _buffer_load_dtype(load: BufferLoad, lanes: int) -> str:
    """The dtype of a load, ``lanes`` times over: vector indices make it a vector of their lanes."""
    for index in load.indices:
        if isinstance(index, (Ramp, Broadcast, _Binary)):
            lanes *= lanes_of(expr_dtype(index))
    return vector_dtype(load.buffer.dtype, lanes)


def convert(value: PrimExprLike, like: PrimExprBase | None = None, dtype: str | None = None) -> PrimExpr:
    """``value`` as a PrimExpr; Python numbers take ``dtype``, or the dtype of ``like``."""
    if isinstance(value, PrimExprBase):
        return value
    if dtype is None and like is not None:
        dtype = element_dtype(like.dtype)
    if isinstance(value, bool):
        return IntImm("bool", int(value))
    if isinstance(value, int):
        if dtype is not None and dtype.startswith("float"):
            return FloatImm(dtype, float(value))
        return IntImm(dtype or "int32", value)
    if isinstance(value, float):
        return FloatImm(dtype if dtype and dtype.startswith("float") else "float32", value)
    raise TypeError(f"cannot convert {type(value).__name__} {value!r} to a PrimExpr")


#: The expressions without operands (and the leaves of every expression walk).
LEAF_EXPRS = (IntImm, FloatImm, Var)
_NO_OPERANDS = frozenset(LEAF_EXPRS)


def operands_or_none(node: object) -> tuple[PrimExpr, ...]:
    """:func:`operands` of a PrimExpr, and none of anything else (what ill-formed IR may hold in its place)."""
    return operands(node) if isinstance(node, PrimExprBase) else ()


def operands(expr: PrimExprBase) -> tuple[PrimExpr, ...]:
    """The operand expressions of ``expr``, in field order (a load's indices, not its buffer).

    Unlike :meth:`Node.children`, this names only expressions, which is what
    expression walkers (simplifiers, vectorizers) iterate over.
    """
    if type(expr) in _NO_OPERANDS:
        return ()
    if isinstance(expr, _Binary):
        return (expr.a, expr.b)
    if isinstance(expr, BufferLoad):
        return expr.indices
    if isinstance(expr, Select):
        return (expr.condition, expr.true_value, expr.false_value)
    if isinstance(expr, (Cast, Broadcast)):
        return (expr.value,)
    if isinstance(expr, Not):
        return (expr.a,)
    if isinstance(expr, Ramp):
        return (expr.base, expr.stride)
    if isinstance(expr, Call):
        return expr.args
    if isinstance(expr, (IntImm, FloatImm, Var)):
        return ()
    raise TypeError(f"{type(expr).__name__} is not a loop-level expression")


def const(value: int | float | bool, dtype: str | None = None) -> PrimExpr:
    """An immediate of ``dtype`` (int32, float32 or bool by default, from the Python type)."""
    return convert(value, dtype=dtype)


def lt(a: PrimExprLike, b: PrimExprLike) -> LT:
    """``a < b``."""
    x = convert(a, b if isinstance(b, PrimExprBase) else None)
    return LT(x, convert(b, x))


def le(a: PrimExprLike, b: PrimExprLike) -> LE:
    """``a <= b``."""
    x = convert(a, b if isinstance(b, PrimExprBase) else None)
    return LE(x, convert(b, x))


def gt(a: PrimExprLike, b: PrimExprLike) -> GT:
    """``a > b``."""
    x = convert(a, b if isinstance(b, PrimExprBase) else None)
    return GT(x, convert(b, x))


def ge(a: PrimExprLike, b: PrimExprLike) -> GE:
    """``a >= b``."""
    x = convert(a, b if isinstance(b, PrimExprBase) else None)
    return GE(x, convert(b, x))


def eq(a: PrimExprLike, b: PrimExprLike) -> EQ:
    """``a == b`` as an expression."""
    x = convert(a, b if isinstance(b, PrimExprBase) else None)
    return EQ(x, convert(b, x))


def ne(a: PrimExprLike, b: PrimExprLike) -> NE:
    """``a != b`` as an expression."""
    x = convert(a, b if isinstance(b, PrimExprBase) else None)
    return NE(x, convert(b, x))


def min_(a: PrimExprLike, b: PrimExprLike) -> Min:
    """``min(a, b)``."""
    x = convert(a, b if isinstance(b, PrimExprBase) else None)
    return Min(x, convert(b, x))


def max_(a: PrimExprLike, b: PrimExprLike) -> Max:
    """``max(a, b)``."""
    x = convert(a, b if isinstance(b, PrimExprBase) else None)
    return Max(x, convert(b, x))


def stmt_label(stmt: object) -> str:
    """A statement as a place in a message (``For i``, ``BufferStore B``); ``?`` for a name ill-formed IR lacks."""
    kind = type(stmt)
    if kind is For:
        return f"For {getattr(getattr(stmt, 'loop_var', None), 'name_hint', '?')}"
    if kind is BufferStore:
        return f"BufferStore {getattr(getattr(stmt, 'buffer', None), 'name', '?')}"
    if kind is LetStmt:
        return f"LetStmt {getattr(getattr(stmt, 'var', None), 'name_hint', '?')}"
    if kind is Allocate:
        return f"Allocate {getattr(getattr(stmt, 'buffer', None), 'name', '?')}"
    return kind.__name__
