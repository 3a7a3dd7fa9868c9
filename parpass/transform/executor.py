"""The seam between the serial pass semantics and whatever runs function-level passes.

A :class:`FunctionPassExecutor` applies a chain of function-level passes
(:class:`~parpass.transform.FunctionPass`, :class:`~parpass.transform.PrimFuncPass`)
to the functions of a module. The pass infrastructure calls it for the body of
every function-level pass, between that pass's own instrument callbacks, and a
:class:`~parpass.transform.Sequential` hands it several consecutive passes as one
chain when doing so cannot change what instruments observe.

The contract, which :class:`InlineExecutor` defines and any other executor (the
parallel one) must reproduce exactly:

* pass 1 of the chain is applied to every target of the module
  (``p.targets(mod)``: functions of its kind, not marked ``SkipOptimization``, in
  module order) through ``p.transform_one(func, name, view, ctx)``, where ``view``
  is a read-only view of the module as it was before pass 1; then pass 2 is
  applied the same way to the result, and so on. A chain is therefore exactly
  the passes run one after the other.
* a function returned as the same object is unchanged and its module slot is
  kept (so its cached encoded bytes survive);
* the result is a new module; ``mod`` is never changed, also when a pass raises.
* the first exception (in module order) propagates, with the note
  ``transform_one`` attached.

The executor is called between the pass's own instrument callbacks (or, for a
fused chain, only when the context has no instruments). A pass function may
itself call passes (nested calls); they run under ``PassContext.current()``
and its instruments (``should_run``, ``run_before_pass``, ``run_after_pass``,
``on_pass_error``), so an executor that runs pass functions elsewhere must
reproduce those callbacks in module order. Workers can rebuild the context
with ``PassContext.from_snapshot(ctx.snapshot(), instruments=...)``.

A pass of the chain may be a :class:`~parpass.transform.analysis.FunctionAnalysis`
(it changes nothing and computes a value per function): an executor that runs
``transform_one`` elsewhere hands each value it computed back to the caller's
analysis object (its ``values``, by function name), as the parallel executor does.

A chain may also come with a :class:`ChainObserver` (a Sequential fusing
passes under instruments that do not read modules, say): the executor then
calls ``observer.before_stage(i)`` before anything pass ``i`` emits is seen
(its output, the instrument events of the passes it calls), and
``observer.after_stage(i, timing)`` after, with the time pass ``i`` took
(:class:`StageTiming`: wall and CPU seconds summed over every process that ran
it), or ``observer.stage_failed(i, error)`` instead when pass ``i`` raised
``error`` (which the executor then raises). Stages come in chain order, so the
observer sees exactly what a pass-by-pass run would have shown.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from parpass._loading import load_all
from parpass.errors import IRFormatError

if TYPE_CHECKING:
    from parpass.ir.module import IRModule
    from parpass.ir.node import BaseFunc
    from parpass.transform.context import PassContext
    from parpass.transform.passes import FunctionLevelPass

__all__ = [
    "ChainObserver",
    "FunctionPassExecutor",
    "InlineExecutor",
    "StageTiming",
    "get_function_pass_executor",
    "install_default_executor",
    "set_function_pass_executor",
    "target_function",
]


def view_reason(pass_name: str) -> str:
    """Why the module given to a function-level pass is read-only (the text of the error on a write)."""
    return (
        f"function-level pass {pass_name!r} gets the module as it was before the pass, read-only; "
        "return the new function instead (a function-level pass cannot add, delete or replace functions)"
    )


@dataclass(frozen=True)
class StageTiming:
    """How long one pass of a chain took: wall and CPU seconds, each summed over the processes that ran it.

    ``in_caller`` is True when the pass ran in the calling process (the inline
    executor says so): its CPU time is then part of that process's own, which a
    timing report must not count twice. False (the default): it ran elsewhere,
    in worker processes.
    """

    wall: float
    cpu: float
    in_caller: bool = False


class ChainObserver(Protocol):
    """Told where each pass of a chain begins and ends in what the chain emits (see the module docstring)."""

    def before_stage(self, stage: int) -> None: ...

    def after_stage(self, stage: int, timing: StageTiming) -> None: ...

    def stage_failed(self, stage: int, error: BaseException) -> None: ...


@runtime_checkable
class FunctionPassExecutor(Protocol):
    """Applies a chain of function-level passes to every target function of a module."""

    def run(
        self,
        passes: Sequence[FunctionLevelPass],
        mod: IRModule,
        ctx: PassContext,
        observer: ChainObserver | None = None,
    ) -> IRModule:
        """Apply ``passes`` in order (each to all its targets) and return a NEW module; never change ``mod``."""
        ...


class InlineExecutor:
    """The serial executor: runs every pass function in the calling thread, in module order."""

    def run(
        self,
        passes: Sequence[FunctionLevelPass],
        mod: IRModule,
        ctx: PassContext,
        observer: ChainObserver | None = None,
    ) -> IRModule:
        current = mod
        for stage, p in enumerate(passes):
            if observer is not None:
                observer.before_stage(stage)
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                updates = _changes(p, current, ctx)
            except BaseException as err:
                if observer is not None:
                    observer.stage_failed(stage, err)
                raise
            if observer is not None:
                spent = StageTiming(time.perf_counter() - wall, time.process_time() - cpu, in_caller=True)
                observer.after_stage(stage, spent)
            if updates:
                nxt = current.copy()
                for name, new in updates:
                    nxt[name] = new
                current = nxt
        return mod.copy() if current is mod else current

    def __repr__(self) -> str:
        return "InlineExecutor()"


def _changes(p: FunctionLevelPass, mod: IRModule, ctx: PassContext) -> list[tuple[str, BaseFunc]]:
    """Pass ``p`` run on every target of ``mod`` in module order: the functions it changed, with their results."""
    view = mod.read_only_view(view_reason(p.info.name))
    updates: list[tuple[str, BaseFunc]] = []
    for name in p.targets(mod):
        func = mod.held_function(name)
        if func is None:  # held as bytes: decoded now (an error of this pass if they do not decode)
            func = target_function(p, mod, name)
        new = p.transform_one(func, name, view, ctx)
        if new is not func:
            updates.append((name, new))
    return updates


def target_function(p: FunctionLevelPass, mod: IRModule, name: str) -> BaseFunc:
    """``mod[name]``, which pass ``p`` is to run on: bytes the module held unread that do not decode are an
    error of ``p`` on that function, as a worker reports them."""
    try:
        return mod[name]
    except IRFormatError as err:
        from parpass.transform.passes import attach_pass_note

        attach_pass_note(err, p.info.name, name)
        raise


_LOCK = threading.Lock()
_DEFAULT = InlineExecutor()
_executor: FunctionPassExecutor = _DEFAULT
_chosen = False  # set_function_pass_executor or install_default_executor was called


def get_function_pass_executor() -> FunctionPassExecutor:
    """The executor that runs function-level passes in this process.

    Unless one was set, the first call loads the whole package, whose parallel
    executor installs itself (:func:`install_default_executor`); without it, an
    :class:`InlineExecutor`.
    """
    if not _chosen:
        load_all()
    return _executor


def set_function_pass_executor(executor: FunctionPassExecutor | None) -> FunctionPassExecutor:
    """Install ``executor`` for the whole process (None restores the inline one); returns the previous one."""
    global _executor, _chosen
    if executor is not None and not callable(getattr(executor, "run", None)):
        raise TypeError(f"a function pass executor needs a run(passes, mod, ctx) method, got {executor!r}")
    if not _chosen:
        load_all()  # so that the parallel executor, loaded later, does not replace this choice
    with _LOCK:
        previous = _executor
        _executor = _DEFAULT if executor is None else executor
        _chosen = True
    return previous


def install_default_executor(executor: FunctionPassExecutor) -> None:
    """Install ``executor`` as the process's default (what the parallel executor does when it is loaded)."""
    global _executor, _chosen
    with _LOCK:
        _executor = executor
        _chosen = True
