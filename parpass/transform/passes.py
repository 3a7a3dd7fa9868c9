"""Pass objects: ModulePass, FunctionPass, PrimFuncPass and Sequential (TVM's pass constructs).

Every pass is called as ``pass_(mod)``: it runs under ``PassContext.current()``,
goes through that context's instruments, and returns a new module, never
changing ``mod``. A pass called directly always runs (no opt_level or
disabled_pass check; only a Sequential applies those to the passes it holds).
"""

from __future__ import annotations

import abc
import contextlib
import functools
import importlib
import inspect
import itertools
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from operator import itemgetter
from typing import Any, ClassVar, TypeGuard

from parpass.errors import IRFormatError, ParpassError, add_note, unknown_name
from parpass.instrument.base import keeps_fusion
from parpass.ir.module import IRModule, same_fingerprint
from parpass.ir.node import SKIP_OPTIMIZATION, BaseFunc
from parpass.ir.relax import Function
from parpass.ir.tir import PrimFunc
from parpass.transform.bisect import BISECT_LIMIT, BisectState
from parpass.transform.config import register_config_option
from parpass.transform.context import PassContext, at_top_level, inside_pass, pipeline_running
from parpass.transform.executor import ChainObserver, FunctionPassExecutor, StageTiming, get_function_pass_executor
from parpass.transform.pass_info import PassInfo
from parpass.transform.registry import get_pass, list_passes

__all__ = [
    "FUSE_PASSES",
    "NOTE_PREFIX",
    "FunctionLevelPass",
    "FunctionPass",
    "ModulePass",
    "Pass",
    "PassDependencyError",
    "PrimFuncPass",
    "Sequential",
    "attach_pass_note",
    "check_pass_func",
    "walk_passes",
]

#: A pass body as ``_run_instrumented`` calls it: the new module, and the time an executor measured (or None).
_TimedBody = Callable[[IRModule, PassContext], "tuple[IRModule, StageTiming | None]"]

#: Every note parpass attaches to an exception starts with this; an exception carries at most one.
NOTE_PREFIX = "parpass: raised in pass "

#: The config key that lets a Sequential fuse consecutive function-level passes (on by default).
FUSE_PASSES = "parpass.fuse_passes"

register_config_option(
    FUSE_PASSES,
    bool,
    default=True,
    doc="Let a Sequential run consecutive function-level passes as one fused chain (one wave, one round trip "
    "to the workers) when no instrument reads the modules; False runs every pass as its own wave.",
)


class PassDependencyError(ParpassError, ValueError):
    """The ``required`` passes of a pass form a cycle."""


def attach_pass_note(err: BaseException, pass_name: str, func_name: str | None = None) -> None:
    """Attach the note naming the pass (and function) to ``err``, unless a parpass note is already there.

    Uses PEP 678 notes (``add_note`` on 3.11+, ``__notes__`` by hand on 3.10), so the
    exception keeps its type. Only the innermost pass adds a note: enclosing
    Sequentials and passes that called the failing one leave it alone.
    """
    notes = getattr(err, "__notes__", None)
    if isinstance(notes, list) and any(isinstance(n, str) and n.startswith(NOTE_PREFIX) for n in notes):
        return
    note = f"{NOTE_PREFIX}{pass_name!r}" + (f" on function {func_name!r}" if func_name is not None else "")
    with contextlib.suppress(AttributeError, TypeError):  # an exception that refuses attributes goes on without it
        add_note(err, note)


def check_pass_func(pass_func: object, arity: int, where: str, params: str) -> None:
    """Reject a ``pass_func`` that is not callable or cannot take ``arity`` positional arguments."""
    if not callable(pass_func):
        raise TypeError(f"{where}: the pass function must be callable, got {type(pass_func).__name__}: {pass_func!r}")
    try:
        sig = inspect.signature(pass_func)
    except (TypeError, ValueError):  # builtins without a signature: trust them
        return
    try:
        sig.bind(*([None] * arity))
    except TypeError:
        raise TypeError(
            f"{where}: the pass function must accept {arity} positional arguments {params}, but its signature is {sig}"
        ) from None


def _check_module(mod: object, who: str) -> IRModule:
    if not isinstance(mod, IRModule):
        raise TypeError(f"{who} expects an IRModule, got {type(mod).__name__}: {mod!r}")
    return mod


def _resolve_global(module: str, qualname: str) -> object:
    obj: object = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


class Pass(abc.ABC):
    """Base of all passes: ``pass_(mod)`` runs the pass on ``mod`` under ``PassContext.current()``.

    Subclasses implement :meth:`_execute` (the body, without instruments).
    """

    _info: PassInfo

    def __init__(self, info: PassInfo) -> None:
        if not isinstance(info, PassInfo):
            raise TypeError(f"{type(self).__name__}: info must be a PassInfo, got {type(info).__name__}: {info!r}")
        self._info = info

    @property
    def info(self) -> PassInfo:
        """The pass's :class:`PassInfo` (name, opt_level, required, traceable)."""
        return self._info

    def __call__(self, mod: IRModule) -> IRModule:
        """Run this pass on ``mod`` (always: no opt_level/disabled check) through the current context's instruments."""
        _check_module(mod, f"pass {self._info.name!r}")
        return self._run(mod, PassContext.current())

    def _run(self, mod: IRModule, ctx: PassContext) -> IRModule:
        """The pass with its instrument callbacks (TVM's ``Pass::operator()``); a vetoed pass returns ``mod``.

        A pass that is an application of its own (run at the top level, not a
        Sequential) goes through opt-bisect first, is listed in the statistics,
        and runs inside the application (what it calls is part of it).
        """
        info = self._info
        if isinstance(self, Sequential):
            # the pipeline begins with its own callbacks: what an instrument does there is part of its run
            with pipeline_running(self, self._enabled(ctx)[-1] if self._passes else 0):
                return self._run_instrumented(self._execute_timed, mod, ctx)
        if not at_top_level():
            return self._run_instrumented(self._execute_timed, mod, ctx)
        runner: Pass | None = self
        gate = ctx.bisect_state()
        decided = (0, 0)  # the opt-bisect numbers this application took, and how many of them run
        if gate is not None and not ctx.is_required(info.name):
            first = gate.count
            runner = self._bisected(mod, gate)
            decided = (first, min(gate.limit, gate.count) - first)
        if runner is None:
            return mod
        memo = ctx.application_memo
        key = (self, id(mod), *decided)
        if memo is not None and key in memo:
            return memo[key][1]
        ctx.note_run(info)
        with inside_pass():
            ret = self._run_instrumented(runner._execute_timed, mod, ctx)
        if memo is not None:
            memo[key] = (mod, ret)  # the input kept alive, so that its id names it
        return ret

    def _run_instrumented(self, body: _TimedBody, mod: IRModule, ctx: PassContext) -> IRModule:
        """``body`` (this pass's, or what opt-bisect left of it) between this pass's instrument callbacks."""
        info = self._info
        if not ctx.instrument_before_pass(mod, info):
            return mod
        try:
            ret, timing = body(mod, ctx)
        except BaseException as err:
            ctx.instrument_pass_error(mod, info, err)
            raise
        ctx.instrument_after_pass(ret, info, timing)
        return ret

    def _bisected(self, mod: IRModule, gate: BisectState) -> Pass | None:
        """What of this pass runs under opt-bisect: itself, or nothing (None); a module pass is one application."""
        return self if gate.decide(self._info.name, None) else None

    @abc.abstractmethod
    def _execute(self, mod: IRModule, ctx: PassContext) -> IRModule:
        """The pass body, without instruments; returns a new module and never changes ``mod``."""

    def _execute_timed(self, mod: IRModule, ctx: PassContext) -> tuple[IRModule, StageTiming | None]:
        """:meth:`_execute`, with the time an executor measured for it (None: this process's own clock says)."""
        return self._execute(mod, ctx), None

    def __reduce_ex__(self, protocol: Any) -> Any:
        # A decorated module-level function became this pass under the function's own name, so the
        # function cannot be pickled by reference any more; pickle the pass by that reference instead.
        ref = self._global_reference()
        if ref is not None:
            return (_resolve_global, ref)
        return super().__reduce_ex__(protocol)

    def _global_reference(self) -> tuple[str, str] | None:
        func = self.__dict__.get("pass_func")
        module = getattr(func, "__module__", None)
        qualname = getattr(func, "__qualname__", None)
        if not isinstance(module, str) or not isinstance(qualname, str) or module == "__main__":
            return None
        if "<" in qualname or module not in sys.modules:
            return None
        obj: object = sys.modules[module]
        for part in qualname.split("."):
            obj = getattr(obj, part, None)
        return (module, qualname) if obj is self else None

    _kind = "Pass"

    def __str__(self) -> str:
        return f"Run {self._kind} pass: {self._info.name} at the optimization level {self._info.opt_level}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._info.name!r} opt_level={self._info.opt_level}>"


class ModulePass(Pass):
    """A pass over the whole module: ``pass_func(mod, ctx) -> IRModule``.

    ``pass_func`` gets its own (shallow) copy of the module, which it may change
    freely, add and delete functions included; the caller's module is never changed.
    """

    _kind = "Module"

    def __init__(self, pass_func: Callable[[IRModule, PassContext], IRModule], info: PassInfo) -> None:
        super().__init__(info)
        check_pass_func(pass_func, 2, f"module pass {info.name!r}", "(mod, ctx)")
        self.pass_func = pass_func

    def _execute(self, mod: IRModule, ctx: PassContext) -> IRModule:
        name = self._info.name
        try:
            ret = self.pass_func(mod.copy(), ctx)
        except BaseException as err:  # SystemExit and KeyboardInterrupt too, as function-level passes do
            attach_pass_note(err, name)
            raise
        if not isinstance(ret, IRModule):
            bad = TypeError(
                f"module pass {name!r} returned {type(ret).__name__}; a module pass must return an IRModule"
            )
            attach_pass_note(bad, name)  # so that a pass that called this one does not claim the error
            raise bad
        return ret.copy() if ret.is_read_only else ret


def visited_by_default(
    kinds: type[BaseFunc] | tuple[type[BaseFunc], ...], func_kind: type[BaseFunc], attrs: Mapping[str, Any]
) -> bool:
    """The rule of :meth:`FunctionLevelPass.visits` for a pass over ``kinds`` (or a chain of such passes, their
    kinds as a tuple: whether any visits the function): a function of one of them, not ``SkipOptimization``."""
    return issubclass(func_kind, kinds) and not attrs.get(SKIP_OPTIMIZATION, False)


def visited_positions(
    kinds: type[BaseFunc] | tuple[type[BaseFunc], ...], heads: Sequence[tuple[type[BaseFunc], Mapping[str, Any]]]
) -> list[int]:
    """The positions of the ``(class, attributes)`` ``heads`` that :func:`visited_by_default` visits: what an
    executor picking a wave's targets asks of every function, with the class test made once per class."""
    visited = {kind for kind in set(map(itemgetter(0), heads)) if issubclass(kind, kinds)}
    return [i for i, (kind, attrs) in enumerate(heads) if kind in visited and not attrs.get(SKIP_OPTIMIZATION, False)]


class FunctionLevelPass(Pass):
    """Base of the passes that transform one function at a time (FunctionPass, PrimFuncPass).

    ``pass_func(func, mod, ctx)`` is called for every function of :attr:`func_kind`
    that is not marked ``SkipOptimization``; ``mod`` is a read-only view of the
    module as it was before the pass, so every call sees the same module whatever
    ran before it; the results are put in the new module after all functions
    ran, in module order. ``pass_func`` must return a function of the same kind
    (the same object when it changes nothing): a function-level pass can neither
    add nor delete functions. The body runs through the installed
    :class:`~parpass.transform.executor.FunctionPassExecutor`.
    """

    func_kind: ClassVar[type[BaseFunc]] = BaseFunc
    #: A hint that the pass looks up other functions of the module it is given (a callee's signature, say).
    #: A parallel executor does not fuse such a pass into one wave with passes before it that change those
    #: functions (each worker would run them again on what it looks up); it learns this anyway from a first
    #: run, so the hint only spares the first run that cost. It never changes what the pass computes.
    reads_other_functions: ClassVar[bool] = False
    _kind = "Function-level"

    def __init__(self, pass_func: Callable[[Any, IRModule, PassContext], Any], info: PassInfo) -> None:
        super().__init__(info)
        check_pass_func(pass_func, 3, f"{self._label()} {info.name!r}", "(func, mod, ctx)")
        self.pass_func = pass_func

    @classmethod
    def _label(cls) -> str:
        return f"{cls._kind.lower()} pass"

    def targets(self, mod: IRModule) -> list[str]:
        """Names of the functions this pass visits: of :attr:`func_kind`, not ``SkipOptimization`` (see
        :meth:`visits`), among :meth:`target_names` if it names some, in module order."""
        names, heads = mod.head_columns()  # reads no function body
        if type(self).visits is FunctionLevelPass.visits:  # the default rule: the class test once per class
            targets = [names[i] for i in visited_positions(self.func_kind, heads)]
        else:
            visits = self.visits
            targets = [name for name, (kind, attrs) in zip(names, heads, strict=True) if visits(kind, attrs)]
        only = self.target_names()
        return targets if only is None else [name for name in targets if name in only]

    def target_names(self) -> frozenset[str] | None:
        """The only functions this pass may visit, by name (None: every function :meth:`visits` picks)."""
        return None

    def visits(self, func_kind: type[BaseFunc], attrs: Mapping[str, Any]) -> bool:
        """Whether this pass visits a function of class ``func_kind`` with ``attrs`` (the rule of :meth:`targets`)."""
        return visited_by_default(self.func_kind, func_kind, attrs)

    def transform_one(self, func: BaseFunc, name: str, mod: IRModule, ctx: PassContext) -> BaseFunc:
        """``pass_func(func, mod, ctx)``, checked: the result must be a function of the same kind.

        An exception from ``pass_func`` gets the note naming this pass and ``name``
        (once; see :func:`attach_pass_note`) and propagates as its own type.
        """
        try:
            ret = self.pass_func(func, mod, ctx)
        except BaseException as err:  # SystemExit and KeyboardInterrupt too, as workers report them
            attach_pass_note(err, self._info.name, name)
            raise
        if ret is func:
            return ret
        kind = self.func_kind
        if not isinstance(ret, kind):
            bad = TypeError(
                f"{self._label()} {self._info.name!r} returned {type(ret).__name__} for function {name!r}; "
                f"it must return a {kind.__name__} (a function-level pass can neither add nor delete functions)"
            )
            attach_pass_note(bad, self._info.name, name)
            raise bad
        return ret

    def _execute(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return _run_chain((self,), mod, ctx)

    def _bisected(self, mod: IRModule, gate: BisectState) -> Pass | None:
        """One application per target function, in module order: this pass, the pass on the first targets
        only, or nothing."""
        targets = self.targets(mod)
        running = gate.decide(self._info.name, targets)
        if running == len(targets):
            return self
        return _FirstTargets(self, targets[:running]) if running else None

    def _execute_timed(self, mod: IRModule, ctx: PassContext) -> tuple[IRModule, StageTiming | None]:
        """The body run by the executor, which also says how long it took, where instruments may want to know.

        The executor's time is the workers' when the pass ran there (summed over
        them), not this process's wait; an executor that takes no chain observer,
        or a subclass with a body of its own, reports nothing.
        """
        if not ctx.instruments or type(self)._execute is not FunctionLevelPass._execute:
            return self._execute(mod, ctx), None
        if not _takes_observer(get_function_pass_executor()):
            return self._execute(mod, ctx), None
        measured = _StageTime()
        return _run_chain((self,), mod, ctx, measured), measured.timing


class _FirstTargets(FunctionLevelPass):
    """Function-level pass ``inner`` applied to the functions ``names`` only, the others left as they are
    (what opt-bisect lets run of a pass whose applications straddle the limit)."""

    def __init__(self, inner: FunctionLevelPass, names: Sequence[str]) -> None:
        super().__init__(inner.pass_func, inner.info)
        self.inner = inner
        self.names = frozenset(names)

    def visits(self, func_kind: type[BaseFunc], attrs: Mapping[str, Any]) -> bool:
        return self.inner.visits(func_kind, attrs)

    def transform_one(self, func: BaseFunc, name: str, mod: IRModule, ctx: PassContext) -> BaseFunc:
        return self.inner.transform_one(func, name, mod, ctx) if name in self.names else func

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (_FirstTargets, (self.inner, sorted(self.names)))


class _StageTime:
    """A chain observer that keeps the time of the one pass of a chain (the executor's measure)."""

    __slots__ = ("timing",)

    def __init__(self) -> None:
        self.timing: StageTiming | None = None

    def before_stage(self, stage: int) -> None:
        pass

    def after_stage(self, stage: int, timing: StageTiming) -> None:
        self.timing = timing

    def stage_failed(self, stage: int, error: BaseException) -> None:
        pass


class _ChainCallbacks:
    """Drives the instruments around the passes of a fused chain, as a pass-by-pass run calls them.

    For each pass, in chain order: ``should_run`` and ``run_before_pass`` (through
    ``instrument_before_pass``) before anything the pass emits, then
    ``on_pass_timing`` with the executor's time and ``run_after_pass``, or
    ``on_pass_error``. Every callback gets ``mod``, the module the chain started
    from: the instruments promised not to read it (``reads_module`` is False).
    """

    __slots__ = ("_ctx", "_infos", "_mod")

    def __init__(self, ctx: PassContext, chain: Sequence[FunctionLevelPass], mod: IRModule) -> None:
        self._ctx = ctx
        self._infos = [p.info for p in chain]
        self._mod = mod

    def before_stage(self, stage: int) -> None:
        info = self._infos[stage]
        if not self._ctx.instrument_before_pass(self._mod, info):
            # keeps_fusion() admits no instrument that can veto; a veto here could not be honoured.
            raise RuntimeError(f"an instrument vetoed pass {info.name!r} inside a fused chain, which cannot skip it")

    def after_stage(self, stage: int, timing: StageTiming) -> None:
        self._ctx.instrument_after_pass(self._mod, self._infos[stage], timing, fused=True)

    def stage_failed(self, stage: int, error: BaseException) -> None:
        self._ctx.instrument_pass_error(self._mod, self._infos[stage], error)


@functools.lru_cache(maxsize=64)
def _run_takes_observer(run: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(run).parameters
    except (TypeError, ValueError):
        return False
    return "observer" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _takes_observer(executor: FunctionPassExecutor) -> bool:
    """Whether ``executor.run`` takes a chain observer (executors written before it existed do not)."""
    run = executor.run
    return _run_takes_observer(getattr(run, "__func__", run))


def _run_chain(
    passes: Sequence[FunctionLevelPass], mod: IRModule, ctx: PassContext, observer: ChainObserver | None = None
) -> IRModule:
    """Hand ``passes`` to the installed executor; check that it kept its side of the contract."""
    executor = get_function_pass_executor()
    try:
        # An executor written before chain observers existed takes (passes, mod, ctx) only.
        ret = executor.run(passes, mod, ctx) if observer is None else executor.run(passes, mod, ctx, observer=observer)
    except IRFormatError as err:  # a function the module held as bytes that do not read (the error names it)
        attach_pass_note(err, passes[0].info.name)  # unless the executor named the pass and function already
        raise
    if not isinstance(ret, IRModule):
        raise TypeError(f"the function pass executor {executor!r} returned {type(ret).__name__}, not an IRModule")
    if ret is mod:
        raise TypeError(f"the function pass executor {executor!r} returned its input module; it must return a new one")
    return ret


class FunctionPass(FunctionLevelPass):
    """A function-level pass over the dataflow :class:`~parpass.ir.Function`s of a module."""

    func_kind = Function
    _kind = "Function"


class PrimFuncPass(FunctionLevelPass):
    """A function-level pass over the loop-level :class:`~parpass.ir.PrimFunc`s of a module."""

    func_kind = PrimFunc
    _kind = "PrimFunc"


def _fusable(p: Pass) -> TypeGuard[FunctionLevelPass]:
    return isinstance(p, FunctionLevelPass) and type(p)._execute is FunctionLevelPass._execute


def _may_fuse(ctx: PassContext) -> bool:
    """Whether a Sequential may hand consecutive function-level passes to the executor as one chain.

    With ``parpass.fuse_passes`` on: always without instruments; with them, when
    none reads the modules or may veto a pass (:func:`keeps_fusion`) and the
    executor takes the chain observer that calls them pass by pass.
    """
    if not ctx.config[FUSE_PASSES] or ctx.config[BISECT_LIMIT] >= 0:
        return False  # opt-bisect numbers each pass's targets before it runs: one pass at a time
    instruments = ctx.instruments
    if not instruments:
        return True
    return all(keeps_fusion(pi) for pi in instruments) and _takes_observer(get_function_pass_executor())


def _chain_from(
    first: FunctionLevelPass, passes: Sequence[Pass], start: int, ctx: PassContext
) -> tuple[list[FunctionLevelPass], int]:
    """``first`` and the enabled fusable passes after it in ``passes[start:]``; the index where the chain ends."""
    chain = [first]
    j = start
    while j < len(passes):
        q = passes[j]
        if ctx.pass_enabled(q.info):
            if q.info.required or not _fusable(q):
                break
            chain.append(q)
        j += 1
    return chain, j


def _run_fused(chain: list[FunctionLevelPass], mod: IRModule, ctx: PassContext) -> IRModule:
    """A chain of function-level passes as one wave, each an application of its own, instruments called per pass."""
    observer = _ChainCallbacks(ctx, chain, mod) if ctx.instruments else None
    if at_top_level():
        for q in chain:
            ctx.note_run(q.info)
    with inside_pass():
        return _run_chain(chain, mod, ctx, observer)


class _RequiredRuns:
    """Per Sequential run: resolved required passes, and the module each left behind.

    Shared with the Sequentials nested in it (as elements of its pass list), so
    that a required pass is not run again in a sub-pipeline on an unchanged module.
    """

    __slots__ = ("after", "instances")

    def __init__(self) -> None:
        self.instances: dict[str, Pass] = {}
        self.after: dict[str, tuple[object, ...]] = {}


def _resolve_required(root: PassInfo, state: _RequiredRuns) -> None:
    """Instantiate every pass ``root`` requires, transitively; reject unknown names and cycles.

    Raises before any pass runs. A cycle is reported as ``A -> B -> C -> A``.
    """
    path: list[str] = [root.name]
    on_path = {root.name}
    # explicit stack of (name, iterator over its required names)
    stack: list[tuple[str, Iterator[str]]] = [(root.name, iter(root.required))]
    done: set[str] = set()
    while stack:
        name, pending = stack[-1]
        nxt = next(pending, None)
        if nxt is None:
            stack.pop()
            path.pop()
            on_path.discard(name)
            done.add(name)
            continue
        if nxt in on_path:
            cycle = [*path[path.index(nxt) :], nxt]
            raise PassDependencyError(f"required passes form a cycle: {' -> '.join(cycle)}")
        if nxt in done:
            continue
        p = state.instances.get(nxt)
        if p is None:
            try:
                p = get_pass(nxt)
            except KeyError:
                raise unknown_name(
                    "pass", nxt, list_passes(), f"in the pass registry (required by {name!r})", "list_passes()"
                ) from None
            state.instances[nxt] = p
        path.append(nxt)
        on_path.add(nxt)
        stack.append((nxt, iter(p.info.required)))


class Sequential(Pass):
    """``Sequential(passes=None, opt_level=0, name="sequential", required=None, traceable=False)``.

    Runs ``passes`` in order. Each is first checked with ``ctx.pass_enabled``
    (disabled_pass wins, then required_pass, then opt_level; a nested Sequential
    whose name is disabled is skipped whole). Before an enabled pass, the passes
    its ``info.required`` names are resolved through the pass registry,
    transitively, dependencies first; each runs at most once per run of this
    Sequential (the Sequentials nested in its pass list included) unless the
    module changed since it ran, and a dependency cycle is an error. Required
    passes run whatever the opt_level and disabled_pass (as in TVM); the
    context's instruments may still veto them.

    A run of consecutive enabled function-level passes without ``required``
    is handed to the executor as one chain (one wave: a chain means exactly
    the passes run one after the other) when the config ``parpass.fuse_passes``
    is on (the default) and the context has no instruments, or only
    instruments that read no module and cannot veto (``reads_module`` False,
    ``should_run`` not overridden). The executor then says where each pass
    of the chain begins and ends, and the instruments get the callbacks of
    every pass in the order a pass-by-pass run gives them (the module they
    get is the one the chain started from), and the executor's time for it.
    """

    _kind = "Sequential"

    def __init__(
        self,
        passes: Sequence[Pass] | None = None,
        opt_level: int = 0,
        name: str = "sequential",
        required: Sequence[str] | None = None,
        traceable: bool = False,
    ) -> None:
        super().__init__(PassInfo(opt_level, name, required, traceable))
        if passes is None:
            passes = []
        if not isinstance(passes, (list, tuple)):
            if isinstance(passes, Pass):
                passes = [passes]
            else:
                raise TypeError(f"Sequential {name!r}: passes must be a list of passes, got {type(passes).__name__}")
        for index, p in enumerate(passes):
            if not isinstance(p, Pass):
                raise TypeError(f"Sequential {name!r}: passes[{index}] is not a Pass: {type(p).__name__}: {p!r}")
        self._passes: tuple[Pass, ...] = tuple(passes)

    @property
    def passes(self) -> tuple[Pass, ...]:
        return self._passes

    def __str__(self) -> str:
        names = ", ".join(p.info.name for p in self._passes)
        return f"{super().__str__()}. The passes will be executed are: [{names}]"

    def _execute(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return self._execute_sharing(mod, ctx, _RequiredRuns())

    def _execute_sharing(self, mod: IRModule, ctx: PassContext, state: _RequiredRuns) -> IRModule:
        """The passes in order, with ``state``: this run's required passes (shared with nested Sequentials)."""
        enabled = self._enabled(ctx)
        total = enabled[-1] if enabled else 0
        i, n = 0, len(self._passes)
        with pipeline_running(self, total) as progress:
            while i < n:
                mod, i = self._run_from(i, mod, ctx, state)
                if progress is not None:
                    progress.reached(enabled[i - 1], total)
        return mod

    def _enabled(self, ctx: PassContext) -> list[int]:
        """How many of the passes up to each (itself included) ``ctx`` enables."""
        return list(itertools.accumulate(ctx.pass_enabled(p.info) for p in self._passes))

    def _run_from(self, i: int, mod: IRModule, ctx: PassContext, state: _RequiredRuns) -> tuple[IRModule, int]:
        """Pass ``i`` (with what it requires), the fused chain it begins, or nothing if it is disabled: the module
        after it, and the position of the next pass."""
        passes = self._passes
        p = passes[i]
        info = p.info
        if not ctx.pass_enabled(info):
            return mod, i + 1
        if info.required:
            mod = self._run_required(info, mod, ctx, state)
        elif _fusable(p) and _may_fuse(ctx):
            chain, j = _chain_from(p, passes, i + 1, ctx)
            if len(chain) > 1:
                return _run_fused(chain, mod, ctx), j
        mod = _run_nested(p, mod, ctx, state) if isinstance(p, Sequential) else p._run(mod, ctx)
        return mod, i + 1

    @staticmethod
    def _run_required(root: PassInfo, mod: IRModule, ctx: PassContext, state: _RequiredRuns) -> IRModule:
        _resolve_required(root, state)

        def ensure(name: str, mod: IRModule) -> IRModule:
            p = state.instances[name]
            for dep in p.info.required:
                mod = ensure(dep, mod)
            last = state.after.get(name)
            if last is not None and same_fingerprint(last, mod.fingerprint()):
                return mod
            mod = p._run(mod, ctx)
            state.after[name] = mod.fingerprint()
            return mod

        for dep in root.required:
            mod = ensure(dep, mod)
        return mod


def _run_nested(seq: Sequential, mod: IRModule, ctx: PassContext, state: _RequiredRuns) -> IRModule:
    """Run ``seq`` (an element of a running Sequential) sharing that run's ``state`` with it.

    So a required pass runs at most once per outermost Sequential run while the
    module is unchanged, however the pipeline is split into sub-Sequentials.
    Only ``seq`` itself gets it: a pass function (or instrument) that calls a
    Sequential gets a fresh state, so what runs does not depend on whether pass
    functions run in worker processes.
    """
    return seq._run_instrumented(lambda m, c: (seq._execute_sharing(m, c, state), None), mod, ctx)


def walk_passes(pipeline: Pass) -> Iterator[Pass]:
    """``pipeline`` and every pass inside it, Sequentials included, in the order a run meets them (pre-order)."""
    stack: list[Pass] = [pipeline]
    while stack:
        p = stack.pop()
        yield p
        if isinstance(p, Sequential):
            stack.extend(reversed(p.passes))
