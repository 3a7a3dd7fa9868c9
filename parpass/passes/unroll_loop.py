"""``UnrollLoop``: unrolls loops, explicitly marked or small enough (TVM's ``tir.transform.UnrollLoop``).

Configured by the PassContext option ``"tir.UnrollLoop"``, a
:class:`UnrollLoopConfig` (given as a dict of its fields, as in TVM)::

    with PassContext(config={"tir.UnrollLoop": {"auto_max_step": 16}}):
        mod = UnrollLoop()(mod)

or by the pass's own fields, the same ones: ``UnrollLoop(auto_max_step=16,
explicit_unroll=False)``. A field given wins over the context's value; a field
left out (None) is read from the context when the pass runs, so ``UnrollLoop()``
does what TVM's ``UnrollLoop()``, which takes no options, does.

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

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar

import msgspec

from parpass.ir import IdSupply
from parpass.ir.module import IRModule
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
    PassConfigError,
    PassContext,
    PrimFuncTransform,
    Statistic,
    get_config_option,
    register_config_option,
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
# Loop kinds, looked up once: an enum member lookup is slow next to the rest of a decision.
_SERIAL, _UNROLLED = ForKind.SERIAL, ForKind.UNROLLED
# The tasks of the decision walk.
_VISIT, _ENTER_ELEMENT, _LEAVE_ELEMENT, _LEAVE_LOOP = range(4)


def _extent(loop: For) -> int:
    """The loop's extent if it is a non-negative int32 immediate, else -1 (TVM's GetExtent)."""
    e = loop.extent
    if type(e) is IntImm and e.dtype != "bool" and 0 <= e.value <= _INT32_MAX:
        return int(e.value)
    return -1


def _own_exprs(stmt: Any) -> tuple[PrimExpr, ...]:
    """The expressions of ``stmt`` itself, not those of the statements inside it."""
    kind = type(stmt)
    if kind is BufferStore:
        return (stmt.value, *stmt.indices)
    if kind is Evaluate or kind is LetStmt:
        return (stmt.value,)
    if kind is IfThenElse:
        return (stmt.condition,)
    if kind is For:
        return (stmt.min, stmt.extent)
    return ()


def _local_index_vars(stmt: Any, local: set[int], touched: set[int]) -> None:
    """Add to ``touched`` the variables indexing ``local`` buffers in the accesses of ``stmt`` itself."""

    def mark(node: Any) -> None:
        if type(node) is Var:
            touched.add(node.vid)

    def visit(node: Any) -> None:
        if type(node) is BufferLoad and node.buffer.vid in local:
            for index in node.indices:
                post_order_visit(index, mark)

    if type(stmt) is BufferStore and stmt.buffer.vid in local:
        for index in stmt.indices:
            post_order_visit(index, mark)
    for e in _own_exprs(stmt):
        post_order_visit(e, visit)


class _Planner:
    """TVM's LoopUnroller, run iteratively: decides which loops to unroll or mark (by ``id``).

    Bottom-up over each loop nest it counts TVM's ``step_count_`` (the statements a body will have once the loops
    inside it are unrolled), ``unroll_depth_`` and ``normal_loop_depth_`` (how deep unrolled and remaining loops
    nest inside it); a loop's decision depends on those of its body. The walk is a stack of tasks, so deep nests do
    not recurse.
    """

    __slots__ = ("cfg", "decisions", "local", "normal_depth", "saved", "steps", "tasks", "touched", "unroll_depth")

    def __init__(self, cfg: UnrollLoopConfig) -> None:
        self.cfg = cfg
        self.decisions: dict[int, str] = {}
        self.steps = self.unroll_depth = self.normal_depth = 0
        self.saved: list[tuple[int, int, int]] = []  # the counts of the sequence around the element being counted
        self.local: set[int] = set()  # buffers allocated in the function: "local" memory
        self.touched: set[int] = set()  # variables indexing a local buffer
        self.tasks: list[tuple[int, Any]] = []  # (what to do, the statement it is done to)

    def plan(self, body: Stmt) -> dict[int, str]:
        """The decision for each loop of ``body`` that is unrolled or marked, by the loop's ``id``."""
        tasks, local, saved = self.tasks, self.local, self.saved
        track_local = self.cfg.unroll_local_access
        tasks.append((_VISIT, body))
        while tasks:
            code, arg = tasks.pop()
            if code == _VISIT:
                if track_local and local:
                    _local_index_vars(arg, local, self.touched)
                kind = type(arg)
                if kind is BufferStore or kind is Evaluate:
                    self.steps += 1
                else:
                    handler = _PLAN_HANDLERS.get(kind)
                    if handler is not None:
                        handler(self, arg)
            elif code == _ENTER_ELEMENT:  # each element of a sequence is counted from zero (TVM)
                saved.append((self.steps, self.unroll_depth, self.normal_depth))
                self.steps = self.unroll_depth = self.normal_depth = 0
            elif code == _LEAVE_ELEMENT:  # ... then added to the sequence's counts
                steps, unroll_depth, normal_depth = saved.pop()
                self.steps += steps
                self.unroll_depth = max(self.unroll_depth, unroll_depth)
                self.normal_depth = max(self.normal_depth, normal_depth)
            else:
                self.leave_loop(arg)
        return self.decisions

    def visit_for(self, loop: For) -> None:
        self.tasks += ((_LEAVE_LOOP, loop), (_VISIT, loop.body))

    def visit_seq(self, seq: SeqStmt) -> None:
        tasks = self.tasks
        for element in reversed(seq.seq):
            tasks += ((_LEAVE_ELEMENT, None), (_VISIT, element), (_ENTER_ELEMENT, None))

    def visit_if(self, stmt: IfThenElse) -> None:
        """Both branches counted, one after the other, without reset (TVM)."""
        if stmt.else_case is not None:
            self.tasks.append((_VISIT, stmt.else_case))
        self.tasks.append((_VISIT, stmt.then_case))

    def visit_let(self, stmt: LetStmt) -> None:
        self.tasks.append((_VISIT, stmt.body))

    def visit_allocate(self, stmt: Allocate) -> None:
        self.local.add(stmt.buffer.vid)
        self.tasks.append((_VISIT, stmt.body))

    def leave_loop(self, loop: For) -> None:
        """The loop's body has been counted: decide the loop (TVM's rules), and count it into what encloses it."""
        cfg, kind, extent = self.cfg, loop.kind, _extent(loop)
        if extent < 0:
            auto = False
        elif kind == _UNROLLED or (cfg.unroll_local_access and extent > 0 and loop.loop_var.vid in self.touched):
            auto = True  # explicitly, or for local access
        else:
            auto = (
                kind == _SERIAL
                and self.normal_depth == 0
                and self.unroll_depth <= cfg.auto_max_depth
                and (extent * self.steps <= cfg.auto_max_step or extent <= cfg.auto_max_extent)
            )
        if auto:
            self.steps *= extent
            self.unroll_depth += 1
        else:
            self.normal_depth += 1
        if (auto and cfg.explicit_unroll) or (cfg.auto_max_extent == 1 and 0 <= extent <= 1):
            self.decisions[id(loop)] = _UNROLL
        elif auto and kind != _UNROLLED:
            self.decisions[id(loop)] = _MARK


_PLAN_HANDLERS: dict[type, Callable[[_Planner, Any], None]] = {
    For: _Planner.visit_for,
    SeqStmt: _Planner.visit_seq,
    IfThenElse: _Planner.visit_if,
    LetStmt: _Planner.visit_let,
    Allocate: _Planner.visit_allocate,
}


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
    """Applies the decisions of :class:`_Planner`, innermost loops first; counts the loops it unrolls and marks."""

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
    decisions = _Planner(cfg).plan(func.body)
    if not decisions:
        return func
    unroller = _Unroller(func, decisions)
    out = func.with_body(unroller.visit_stmt(func.body))
    if unroller.unrolled:
        UNROLLED.add(unroller.unrolled)
    if unroller.marked:
        MARKED.add(unroller.marked)
    return out


def _checked_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` (fields of :class:`UnrollLoopConfig`) checked and converted as the config option checks its fields.

    An unknown field, or a value of the wrong type or out of range, raises :class:`~parpass.transform.PassConfigError`
    naming the call.
    """
    if not options:
        return {}
    try:
        checked = get_config_option("tir.UnrollLoop").validate(options)
    except PassConfigError as err:
        raise type(err)(f"UnrollLoop({', '.join(f'{k}=...' for k in options)}): {err}") from None
    return {key: getattr(checked, key) for key in options}


def _shown_signature() -> inspect.Signature:
    """The options as ``parpass passes`` lists them and pipeline specs check them: the fields of
    :class:`UnrollLoopConfig`, with their types, ranges and TVM's defaults."""
    return inspect.Signature(
        [
            inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.type)
            for f in msgspec.structs.fields(UnrollLoopConfig)
        ]
    )


@dataclass(frozen=True, init=False)
class UnrollLoop(PrimFuncTransform):
    """Unroll loops of every PrimFunc per ``"tir.UnrollLoop"`` (see :mod:`parpass.passes.unroll_loop`).

    Its fields are those of :class:`UnrollLoopConfig`. A field given (``UnrollLoop(auto_max_step=16)``) overrides
    the context's ``"tir.UnrollLoop"``; a field left out (None) takes the context's value when the pass runs, as
    TVM's ``UnrollLoop()``, which has no options, takes them all. An unknown field or a value of the wrong type (or
    out of range) raises :class:`~parpass.transform.PassConfigError` here.
    """

    name: ClassVar[str] = "UnrollLoop"
    opt_level: ClassVar[int] = 0
    # What parpass passes lists and pipeline specs check: the default of a field left out is TVM's (unless the
    # context sets one), not the None that marks it as left out.
    __signature__: ClassVar[inspect.Signature] = _shown_signature()

    auto_max_step: int | None = None
    auto_max_depth: int | None = None
    auto_max_extent: int | None = None
    explicit_unroll: bool | None = None
    unroll_local_access: bool | None = None
    #: The fields given, checked: what replaces the context's values.
    _overrides: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __init__(self, **options: Any) -> None:
        """Written out, not generated: an unknown option is a PassConfigError naming the config's fields."""
        overrides = _checked_options({key: value for key, value in options.items() if value is not None})
        for key, value in overrides.items():
            object.__setattr__(self, key, value)
        object.__setattr__(self, "_overrides", overrides)

    def config(self, ctx: PassContext) -> UnrollLoopConfig:
        """The config this pass runs with in ``ctx``: the context's ``"tir.UnrollLoop"`` with the fields given here."""
        cfg: UnrollLoopConfig = ctx.config["tir.UnrollLoop"]
        return msgspec.structs.replace(cfg, **self._overrides) if self._overrides else cfg

    def transform_function(self, func: PrimFunc, mod: IRModule, ctx: PassContext) -> PrimFunc:
        return unroll_prim_func(func, self.config(ctx))
