"""``UnrollLoop``: unrolls loops, explicitly marked or small enough (TVM's ``tir.transform.UnrollLoop``).

Configured by the PassContext option ``"tir.UnrollLoop"``, a
:class:`UnrollLoopConfig` (given as a dict of its fields, as in TVM)::

    with PassContext(config={"tir.UnrollLoop": {"auto_max_step": 16}}):
        mod = UnrollLoop()(mod)

or by keyword overrides of the same fields: ``UnrollLoop(auto_max_step=16,
explicit_unroll=False)`` (an override wins over the context's value).

TVM's rules, decided bottom-up over each loop nest:

* A loop of kind ``unrolled`` with a constant extent is unrolled.
* A ``serial`` loop with a constant extent is unrolled automatically when no
  loop inside it stays a loop, at most ``auto_max_depth`` unrolled loops are
  nested inside it, and either ``extent * steps <= auto_max_step`` (``steps`` is
  the number of statements its body will have once the loops inside it are
  unrolled: stores and evaluates, summed over sequences and both branches of
  ``if``s, multiplied by the extents of unrolled inner loops) or ``extent <=
  auto_max_extent``.
* With ``unroll_local_access``, a loop whose variable indexes a *local* buffer is
  unrolled too (TVM: a buffer in "local" or "warp" memory; here: a buffer
  allocated by an ``Allocate`` of the function, as parameters are the only
  non-local memory). The variables of every index of a load or store of such a
  buffer count, wherever the access is.
* With ``explicit_unroll`` (the default) a loop chosen for unrolling is replaced
  by copies of its body; without it, it is only marked: its kind becomes
  ``unrolled`` (a later code generator would emit an unroll pragma).
* Independently, when ``auto_max_extent == 1`` every loop of extent 0 or 1 is
  unrolled, whatever its kind.

Simplifications against TVM: an extent counts as constant only when it is an
immediate (TVM folds constant expressions first: run ``Simplify`` before); and an
``unrolled`` loop whose extent is not constant is left as it is (TVM rejects it).

Unrolling substitutes the loop variable by the constants ``min, min + 1, ...``
(``min + k`` when ``min`` is not an immediate); an extent of 0 gives
``Evaluate(0)``. The first copy keeps the body's own definitions; the others get
fresh ids (from :class:`~parpass.ir.IdSupply`) for every loop variable, let
variable and allocated buffer they define, so ids stay unique in the function
(TVM's ``ConvertSSA``). Deterministic, iterative (deep nests are fine), and
identity-preserving: a function with nothing to unroll is returned as is.
Idempotent for every configuration where ``auto_max_depth`` does not stop a nest
from being unrolled (a second run sees the unrolled loops gone, so their depth no
longer counts).
"""

from __future__ import annotations

import functools
import inspect
from typing import Annotated, Any

import msgspec

from parpass.ir import IdSupply
from parpass.ir.stmt_functor import StmtExprMutator, post_order, post_order_visit, substitute
from parpass.ir.tir import (
    Add,
    Allocate,
    Buffer,
    BufferLoad,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    LetStmt,
    PrimExpr,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
)
from parpass.transform import (
    Pass,
    PassConfigError,
    PassContext,
    Statistic,
    get_config_option,
    prim_func_pass,
    register_config_option,
    register_pass,
)

__all__ = ["UnrollLoop", "UnrollLoopConfig", "unroll_prim_func"]

UNROLLED = Statistic("UnrollLoop", "unrolled", "loops replaced by copies of their body")
MARKED = Statistic("UnrollLoop", "marked", "loops marked unrolled (explicit_unroll=False)")


#: A threshold: a count, never negative (a negative one would only ever mean "never", silently).
_Count = Annotated[int, msgspec.Meta(ge=0)]


class UnrollLoopConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The fields of config option ``"tir.UnrollLoop"`` (TVM's ``UnrollLoopConfig``)."""

    #: Threshold of the number of steps of a loop for automatic unrolling.
    auto_max_step: _Count = 0
    #: Maximum nesting of automatically unrolled loops.
    auto_max_depth: _Count = 8
    #: Loops with at most this extent are unrolled automatically.
    auto_max_extent: _Count = 0
    #: Replace loops by copies of their bodies (else only mark them ``unrolled``).
    explicit_unroll: bool = True
    #: Also unroll loops whose variable indexes local (allocated) buffers.
    unroll_local_access: bool = False


register_config_option(
    "tir.UnrollLoop",
    UnrollLoopConfig,
    doc="UnrollLoop thresholds: auto_max_step, auto_max_depth, auto_max_extent, explicit_unroll, unroll_local_access",
)

_INT32_MAX = (1 << 31) - 1
_UNROLL, _MARK = "unroll", "mark"
# Tasks of the decision walk.
_VISIT, _ELEM_BEGIN, _ELEM_END, _FOR_EXIT = range(4)


def _extent(loop: For) -> int:
    """The loop's extent if it is a non-negative int32 immediate, else -1 (TVM's GetExtent)."""
    e = loop.extent
    if type(e) is IntImm and e.dtype != "bool" and 0 <= e.value <= _INT32_MAX:
        return int(e.value)
    return -1


def _local_index_vars(stmt: Any, local: set[int], touched: set[int]) -> None:
    """Add to ``touched`` the variables indexing ``local`` buffers in the accesses of ``stmt`` itself."""

    def mark_index(index: PrimExpr) -> None:
        post_order_visit(index, lambda n: touched.add(n.vid) if type(n) is Var else None)

    def visit(node: Any) -> None:
        if type(node) is BufferLoad and node.buffer.vid in local:
            for index in node.indices:
                mark_index(index)

    kind = type(stmt)
    exprs: list[PrimExpr] = []
    if kind is BufferStore:
        if stmt.buffer.vid in local:
            for index in stmt.indices:
                mark_index(index)
        exprs = [stmt.value, *stmt.indices]
    elif kind is Evaluate or kind is LetStmt:
        exprs = [stmt.value]
    elif kind is IfThenElse:
        exprs = [stmt.condition]
    elif kind is For:
        exprs = [stmt.min, stmt.extent]
    for e in exprs:
        post_order_visit(e, visit)


def _decide(body: Stmt, cfg: UnrollLoopConfig) -> dict[int, str]:
    """TVM's LoopUnroller state machine, run iteratively: which loops to unroll or mark (by ``id``)."""
    decisions: dict[int, str] = {}
    steps = unroll_depth = normal_depth = 0
    saved: list[tuple[int, int, int]] = []
    local: set[int] = set()
    touched: set[int] = set()
    tasks: list[tuple[int, Any]] = [(_VISIT, body)]
    while tasks:
        code, s = tasks.pop()
        if code == _VISIT:
            kind = type(s)
            if cfg.unroll_local_access and local:
                _local_index_vars(s, local, touched)
            if kind is For:
                tasks.append((_FOR_EXIT, s))
                tasks.append((_VISIT, s.body))
            elif kind is SeqStmt:  # each element counted from zero, then added up (TVM)
                for element in reversed(s.seq):
                    tasks.extend(((_ELEM_END, None), (_VISIT, element), (_ELEM_BEGIN, None)))
            elif kind is BufferStore or kind is Evaluate:
                steps += 1
            elif kind is IfThenElse:  # both branches, one after the other, without reset (TVM)
                if s.else_case is not None:
                    tasks.append((_VISIT, s.else_case))
                tasks.append((_VISIT, s.then_case))
            elif kind is LetStmt:
                tasks.append((_VISIT, s.body))
            elif kind is Allocate:
                local.add(s.buffer.vid)
                tasks.append((_VISIT, s.body))
        elif code == _ELEM_BEGIN:
            saved.append((steps, unroll_depth, normal_depth))
            steps = unroll_depth = normal_depth = 0
        elif code == _ELEM_END:
            s0, u0, n0 = saved.pop()
            steps += s0
            unroll_depth = max(unroll_depth, u0)
            normal_depth = max(normal_depth, n0)
        else:  # _FOR_EXIT: the body has been counted
            value = _extent(s)
            auto = (
                s.kind == ForKind.SERIAL
                and value >= 0
                and normal_depth == 0
                and unroll_depth <= cfg.auto_max_depth
                and (value * steps <= cfg.auto_max_step or value <= cfg.auto_max_extent)
            )
            if s.kind == ForKind.UNROLLED and value >= 0:
                auto = True
            if cfg.unroll_local_access and value > 0 and s.loop_var.vid in touched:
                auto = True
            if auto:
                steps *= value
                unroll_depth += 1
            else:
                normal_depth += 1
            if (auto and cfg.explicit_unroll) or (cfg.auto_max_extent == 1 and 0 <= value <= 1):
                decisions[id(s)] = _UNROLL
            elif auto and s.kind != ForKind.UNROLLED:
                decisions[id(s)] = _MARK
    return decisions


def _definitions(stmt: Stmt) -> tuple[list[Var], list[Buffer]]:
    """Loop and let variables, and allocated buffers, defined in ``stmt`` (pre-order, left to right)."""
    variables: list[Var] = []
    buffers: list[Buffer] = []
    seen: set[int] = set()
    stack: list[Any] = [stmt]
    while stack:
        s = stack.pop()
        kind = type(s)
        if kind is For or kind is LetStmt:
            var = s.loop_var if kind is For else s.var
            if var.vid not in seen:
                seen.add(var.vid)
                variables.append(var)
            stack.append(s.body)
        elif kind is Allocate:
            if s.buffer.vid not in seen:
                seen.add(s.buffer.vid)
                buffers.append(s.buffer)
            stack.append(s.body)
        elif kind is SeqStmt:
            stack.extend(reversed(s.seq))
        elif kind is IfThenElse:
            if s.else_case is not None:
                stack.append(s.else_case)
            stack.append(s.then_case)
    return variables, buffers


class _Renamer(StmtExprMutator):
    """Gives the loop variables, let variables and buffers defined in a statement fresh ids."""

    def __init__(self, stmt: Stmt, ids: IdSupply) -> None:
        super().__init__()
        variables, buffers = _definitions(stmt)
        self.new_vars: dict[int, Var] = {}
        for v in variables:
            self.new_vars[v.vid] = Var(ids.fresh(), v.name_hint, v.dtype)
        self.var_remap: dict[int, PrimExpr] = dict(self.new_vars)
        for b in buffers:  # a buffer's shape may use a renamed variable
            renamed = Buffer(ids.fresh(), b.name, b.dtype, b.shape, b.strides)
            self.buffer_remap[b.vid] = substitute(renamed, lambda v: self.new_vars.get(v.vid))

    @post_order
    def visit_for_(self, op: For) -> Stmt:
        new = super().visit_for_(op)
        var = self.new_vars.get(op.loop_var.vid)
        if var is None or type(new) is not For:
            return new
        return For(var, new.min, new.extent, new.kind, new.body, new.annotations)

    @post_order
    def visit_let_stmt_(self, op: LetStmt) -> Stmt:
        new = super().visit_let_stmt_(op)
        var = self.new_vars.get(op.var.vid)
        if var is None or type(new) is not LetStmt:
            return new
        return LetStmt(var, new.value, new.body)


class _Unroller(StmtExprMutator):
    """Applies the decisions of :func:`_decide`, innermost loops first; counts the loops it unrolls and marks."""

    def __init__(self, func: PrimFunc, decisions: dict[int, str]) -> None:
        super().__init__()
        self.func = func
        self.decisions = decisions
        self._ids: IdSupply | None = None
        self.unrolled = 0
        self.marked = 0

    @property
    def ids(self) -> IdSupply:
        """Fresh ids, created on first need (finding the largest id in use walks the function)."""
        if self._ids is None:
            self._ids = IdSupply.for_function(self.func)
        return self._ids

    @post_order
    def visit_for_(self, op: For) -> Stmt:
        decision = self.decisions.get(id(op))
        if decision == _UNROLL:
            self.unrolled += 1
            return self.unroll(op, self.visit_stmt(op.body))
        new = super().visit_for_(op)
        if decision == _MARK and type(new) is For:
            self.marked += 1
            return For(new.loop_var, new.min, new.extent, ForKind.UNROLLED, new.body, new.annotations)
        return new

    def visit_seq_stmt_(self, op: SeqStmt) -> Stmt:
        """Splices the copies of an unrolled loop into the enclosing sequence."""
        seq: list[Stmt] = []
        changed = False
        for s in op.seq:
            new = self.visit_stmt(s)
            if new is not s:
                changed = True
                if type(new) is SeqStmt:
                    seq.extend(new.seq)
                    continue
            seq.append(new)
        return SeqStmt(tuple(seq)) if changed else op

    def unroll(self, op: For, body: Stmt) -> Stmt:
        n = _extent(op)
        if n == 0:
            return Evaluate(IntImm("int32", 0))
        var, lo = op.loop_var, op.min
        copies: list[Stmt] = []
        for k in range(n):
            value: PrimExpr
            if type(lo) is IntImm:
                value = IntImm(var.dtype, lo.value + k)
            else:
                value = lo if k == 0 else Add(lo, IntImm(var.dtype, k))
            copy = substitute(body, {var.vid: value})
            if k > 0 and any(_definitions(copy)):
                copy = _Renamer(copy, self.ids).visit_stmt(copy)
            if type(copy) is SeqStmt:
                copies.extend(copy.seq)
            else:
                copies.append(copy)
        return copies[0] if len(copies) == 1 else SeqStmt(tuple(copies))


def unroll_prim_func(func: PrimFunc, config: UnrollLoopConfig | None = None) -> PrimFunc:
    """``func`` with its loops unrolled per ``config`` (defaults if None); the same object if none is."""
    cfg = config if config is not None else UnrollLoopConfig()
    decisions = _decide(func.body, cfg)
    if not decisions:
        return func
    unroller = _Unroller(func, decisions)
    out = func.with_body(unroller.visit_stmt(func.body))
    if unroller.unrolled:
        UNROLLED.add(unroller.unrolled)
    if unroller.marked:
        MARKED.add(unroller.marked)
    return out


def _unroll_loop(func: PrimFunc, mod: Any, ctx: PassContext, overrides: dict[str, Any]) -> PrimFunc:
    cfg: UnrollLoopConfig = ctx.config["tir.UnrollLoop"]
    if overrides:
        cfg = msgspec.structs.replace(cfg, **overrides)
    return unroll_prim_func(func, cfg)


@register_pass("UnrollLoop")
def UnrollLoop(**overrides: Any) -> Pass:
    """Unroll loops of every PrimFunc per ``"tir.UnrollLoop"`` (see :mod:`parpass.passes.unroll_loop`).

    Keyword arguments override fields of the context's config, e.g.
    ``UnrollLoop(auto_max_step=16)``; an unknown field or a value of the wrong
    type (or out of range) raises :class:`~parpass.transform.PassConfigError` here.
    """
    if overrides:
        try:
            checked = get_config_option("tir.UnrollLoop").validate(overrides)
        except PassConfigError as err:
            raise type(err)(f"UnrollLoop({', '.join(f'{k}=...' for k in overrides)}): {err}") from None
        overrides = {key: getattr(checked, key) for key in overrides}
    return prim_func_pass(functools.partial(_unroll_loop, overrides=overrides), opt_level=0, name="UnrollLoop")


# The options it takes as ``**overrides``, spelled out for pipeline specs (which check names and values against a
# factory's signature) and ``parpass passes``: the fields of UnrollLoopConfig, with their types, ranges and defaults.
UnrollLoop.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [
        inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.type)
        for f in msgspec.structs.fields(UnrollLoopConfig)
    ],
    return_annotation=Pass,
)
