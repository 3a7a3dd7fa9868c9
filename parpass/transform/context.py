"""PassContext: the configuration and instruments that passes run under (TVM's ``PassContext``).

Contexts are entered with ``with``; :meth:`PassContext.current` returns the
innermost one entered in the calling thread (a thread-local stack), or the
thread's own default context. A nested context does not inherit anything from
the one around it, as in TVM.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

from parpass.instrument.base import PassInstrument
from parpass.transform.bisect import BISECT_LIMIT, BISECT_PRINT, BisectDecision, BisectState
from parpass.transform.config import PassConfig, list_configs, validate_config
from parpass.transform.pass_info import PassInfo, check_opt_level, check_pass_names
from parpass.transform.statistics import PASS_STATISTICS, PassStatistics, swap_sink

if TYPE_CHECKING:
    from parpass.ir.module import IRModule
    from parpass.transform.executor import StageTiming

__all__ = ["PassContext", "PassContextSnapshot", "at_top_level", "inside_pass"]

_VIEW_REASON = "pass instruments get a read-only view of the module"


@dataclass(frozen=True)
class PassContextSnapshot:
    """A picklable description of a PassContext, without its instruments.

    Holds the opt_level, the required/disabled pass lists, the validated config
    values and the registered defaults of every config option, so that a worker
    process that did not register an option still reads the same values.
    """

    opt_level: int
    required_pass: tuple[str, ...]
    disabled_pass: tuple[str, ...]
    config: tuple[tuple[str, Any], ...]
    defaults: tuple[tuple[str, Any], ...]


class _ThreadState(threading.local):
    def __init__(self) -> None:
        self.stack: list[PassContext] = []
        #: where statistics were counted before each context of ``stack`` was entered (restored on exit)
        self.sinks: list[dict[tuple[str, str], int] | None] = []
        self.default: PassContext | None = None
        self.depth = 0  # pass applications this thread is inside
        self.pipeline: PipelineProgress | None = None  # of the pipeline this thread runs (its outermost Sequential)
        self.pipeline_owner: object = None
        #: what runs when that pipeline ends (see at_pipeline_end)
        self.pipeline_end: list[Callable[[], None]] = []


_STATE = _ThreadState()


def at_top_level() -> bool:
    """Whether the calling thread runs no pass now: a pass called here is an application of its own
    (numbered by opt-bisect, listed in the statistics), not part of another pass's."""
    return _STATE.depth == 0


class PipelineProgress:
    """How far a pipeline has come: when it began, the passes it finished, the passes after the one running."""

    __slots__ = ("began", "done", "left")

    def __init__(self, passes: int) -> None:
        self.began = time.perf_counter()
        self.done = 0
        self.left = max(passes - 1, 0)

    def reached(self, done: int, passes: int) -> None:
        """``done`` of its ``passes`` passes are finished."""
        self.done, self.left = done, max(passes - done - 1, 0)


def pipeline_progress() -> tuple[float, int, int] | None:
    """How far the pipeline this thread runs (its outermost running Sequential) has come: the seconds since it
    began, the passes it finished, the passes after the one running; None outside one. What an executor
    deciding whether starting workers pays can expect of the rest of the run."""
    progress = _STATE.pipeline
    if progress is None:
        return None
    return time.perf_counter() - progress.began, progress.done, progress.left


@contextmanager
def pipeline_running(owner: object, passes: int) -> Iterator[PipelineProgress | None]:
    """Within the block, this thread runs the pipeline ``owner`` (a Sequential) of ``passes`` passes, unless it
    runs another already (then that one is the pipeline): yields the progress to update, or None. Entered
    again by the same owner (around its instrument callbacks, then around its passes), it yields the same
    progress."""
    state = _STATE
    if state.pipeline is not None:
        yield state.pipeline if state.pipeline_owner is owner else None
        return
    state.pipeline, state.pipeline_owner = PipelineProgress(passes), owner
    failed = False
    try:
        yield state.pipeline
    except BaseException:
        failed = True
        raise
    finally:
        state.pipeline = state.pipeline_owner = None
        _end_pipeline(state, failed)


def at_pipeline_end(callback: Callable[[], None]) -> bool:
    """Have ``callback`` run when the pipeline this thread runs ends (before its result is returned), once;
    False, nothing registered, where no pipeline runs. What it raises is the pipeline's error, unless the
    pipeline ended by raising one already (then that one goes on)."""
    state = _STATE
    if state.pipeline is None:
        return False
    if callback not in state.pipeline_end:
        state.pipeline_end.append(callback)
    return True


def _end_pipeline(state: _ThreadState, failed: bool) -> None:
    callbacks, state.pipeline_end = state.pipeline_end, []
    for callback in callbacks:
        if failed:
            with contextlib.suppress(Exception):
                callback()
        else:
            callback()


@contextmanager
def inside_pass() -> Iterator[None]:
    """Within the block, the calling thread is inside a pass application (a worker is, for every chunk)."""
    _STATE.depth += 1
    try:
        yield
    finally:
        _STATE.depth -= 1


def _check_instruments(instruments: object) -> tuple[PassInstrument, ...]:
    if instruments is None:
        return ()
    if not isinstance(instruments, (list, tuple)):
        raise TypeError(f"PassContext: instruments must be a list of PassInstrument, got {type(instruments).__name__}")
    for index, pi in enumerate(instruments):
        if not isinstance(pi, PassInstrument):
            hint = " (decorate its class with @pass_instrument)" if not isinstance(pi, type) else " (an instance)"
            raise TypeError(
                f"PassContext: instruments[{index}] must be a PassInstrument{hint}, got {type(pi).__name__}: {pi!r}"
            )
    return tuple(instruments)


def _pass_error(instruments: Sequence[PassInstrument], view: IRModule, info: PassInfo, err: BaseException) -> None:
    """``on_pass_error`` of ``instruments`` after an instrument callback raised ``err`` (which then propagates)."""
    for pi in instruments:
        pi.on_pass_error(view, info, err)


class PassContext:
    """``PassContext(opt_level=2, required_pass=None, disabled_pass=None, instruments=None, config=None)``.

    * ``opt_level``: a Sequential runs the passes whose ``info.opt_level`` is at most this.
    * ``required_pass``: names always enabled in a Sequential (unless disabled), and never vetoed
      by an instrument's ``should_run``.
    * ``disabled_pass``: names a Sequential skips (this wins over everything else).
    * ``instruments``: :class:`~parpass.instrument.PassInstrument`s called around every pass.
    * ``config``: values of registered config options (see :func:`register_config_option`),
      validated here; read them with ``ctx.config[key]``.
    """

    __slots__ = (
        "_bisect",
        "_config",
        "_counting",
        "_disabled",
        "_instruments",
        "_memo",
        "_opt_level",
        "_required",
        "_required_set",
        "_statistics",
    )

    def __init__(
        self,
        opt_level: int = 2,
        required_pass: Iterable[str] | None = None,
        disabled_pass: Iterable[str] | None = None,
        instruments: Sequence[PassInstrument] | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self._opt_level = check_opt_level(opt_level, "PassContext")
        self._required = check_pass_names(required_pass, "PassContext: required_pass", allow_set=True)
        self._disabled = check_pass_names(disabled_pass, "PassContext: disabled_pass", allow_set=True)
        self._required_set = frozenset(self._required)
        self._instruments = _check_instruments(instruments)
        self._config = PassConfig(validate_config(config))
        self._init_records()

    def _init_records(self) -> None:
        self._statistics = PassStatistics()
        self._counting = bool(self._config[PASS_STATISTICS])
        self._bisect: BisectState | None = None
        self._memo: dict[tuple[object, ...], tuple[IRModule, IRModule]] | None = None

    # ------------------------------------------------------------ fields

    @property
    def opt_level(self) -> int:
        return self._opt_level

    @property
    def required_pass(self) -> tuple[str, ...]:
        return self._required

    @property
    def disabled_pass(self) -> tuple[str, ...]:
        return self._disabled

    @property
    def instruments(self) -> tuple[PassInstrument, ...]:
        """The instruments, in call order (cleared if entering or exiting them failed)."""
        return self._instruments

    @property
    def config(self) -> PassConfig:
        """The validated config (``ctx.config[key]``; unset registered keys give their default)."""
        return self._config

    @property
    def pass_statistics(self) -> PassStatistics:
        """The pass statistics counted under this context (empty unless its config sets
        ``parpass.pass_statistics``); they add up over every pass call made under it."""
        return self._statistics

    @property
    def bisect_log(self) -> tuple[BisectDecision, ...]:
        """Every pass application opt-bisect numbered under this context, in order (empty unless its
        config sets ``parpass.bisect_limit``)."""
        return tuple(self._bisect.log) if self._bisect is not None else ()

    def bisect_state(self) -> BisectState | None:
        """The opt-bisect numbering of this context; None when ``parpass.bisect_limit`` is not set."""
        if self._bisect is None:
            limit = self._config[BISECT_LIMIT]
            if limit < 0:
                return None
            self._bisect = BisectState(limit, bool(self._config[BISECT_PRINT]))
        return self._bisect

    def memoize_applications(self, memo: dict[tuple[object, ...], tuple[IRModule, IRModule]]) -> None:
        """Reuse, under this context, what a top-level pass application returned under any context sharing
        ``memo``: the same pass object on the same module object with the same opt-bisect decisions gives the
        same module (passes are deterministic), so it is not run again.

        For tools that run one pipeline many times on one module (``parpass bisect``). A reused application
        gets no instrument callbacks and counts no statistics, so a context with instruments is refused.
        """
        if self._instruments:
            raise ValueError("memoize_applications: a context with instruments would miss their callbacks")
        self._memo = memo

    @property
    def application_memo(self) -> dict[tuple[object, ...], tuple[IRModule, IRModule]] | None:
        """The memo of :meth:`memoize_applications`, if one was given."""
        return self._memo

    def note_run(self, info: PassInfo) -> None:
        """Record that a pass runs at the top level (the statistics list it, in the order passes ran)."""
        if self._counting:
            self._statistics.note_run(info.name)

    def __repr__(self) -> str:
        parts = [f"opt_level={self._opt_level}"]
        if self._required:
            parts.append(f"required_pass={list(self._required)!r}")
        if self._disabled:
            parts.append(f"disabled_pass={list(self._disabled)!r}")
        if self._instruments:
            parts.append(f"instruments={list(self._instruments)!r}")
        if len(self._config):
            parts.append(f"config={dict(self._config)!r}")
        return f"PassContext({', '.join(parts)})"

    # ------------------------------------------------------------ scope

    def __enter__(self) -> PassContext:
        self._enter_instruments()
        _STATE.stack.append(self)
        _STATE.sinks.append(swap_sink(self._statistics.counts if self._counting else None))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        stack = _STATE.stack
        if not stack or stack[-1] is not self:
            raise RuntimeError("PassContext exited out of order: it is not the innermost context of this thread")
        stack.pop()
        swap_sink(_STATE.sinks.pop())  # back to where counts went before: an outer context's, or a worker stage's
        self._exit_instruments()

    @staticmethod
    def current() -> PassContext:
        """The innermost context entered in this thread, else this thread's default context."""
        state = _STATE
        if state.stack:
            return state.stack[-1]
        if state.default is None:
            state.default = PassContext()
        return state.default

    def override_instruments(self, instruments: Sequence[PassInstrument] | None) -> None:
        """Replace the instruments: exit the old ones, then enter the new ones (TVM semantics)."""
        new = _check_instruments(instruments)
        self._exit_instruments()
        self._instruments = new
        self._enter_instruments()

    @staticmethod
    def list_configs() -> dict[str, dict[str, Any]]:
        """Every registered config option: ``{key: {"type", "default", "doc"}}``, sorted by key."""
        return list_configs()

    # ------------------------------------------------------------ enabling

    def pass_enabled(self, info: PassInfo) -> bool:
        """Whether a Sequential runs a pass: disabled wins, then required, then ``opt_level >= info.opt_level``."""
        name = info.name
        if name in self._disabled:
            return False
        if name in self._required_set:
            return True
        return self._opt_level >= info.opt_level

    def is_required(self, name: str) -> bool:
        """Whether ``name`` is in ``required_pass`` (such passes skip ``should_run``)."""
        return name in self._required_set

    # ------------------------------------------------------------ instrument points

    def _enter_instruments(self) -> None:
        entered: list[PassInstrument] = []
        try:
            for pi in self._instruments:
                pi.enter_pass_ctx()
                entered.append(pi)
        except BaseException:
            self._instruments = ()
            for pi in entered:
                pi.exit_pass_ctx()
            raise

    def _exit_instruments(self) -> None:
        try:
            for pi in self._instruments:
                pi.exit_pass_ctx()
        except BaseException:
            self._instruments = ()
            raise

    def instrument_before_pass(self, mod: IRModule, info: PassInfo) -> bool:
        """TVM's ``InstrumentBeforePass``: whether the pass runs; calls ``run_before_pass`` if it does.

        Every instrument's ``should_run`` is called (no short cut after a veto)
        unless the pass is in ``required_pass``; an exception propagates at once
        (from ``run_before_pass``, after ``on_pass_error`` of the instruments whose
        ``run_before_pass`` was called, the failing one included).
        """
        instruments = self._instruments
        if not instruments:
            return True
        view = mod.read_only_view(_VIEW_REASON)
        run = True
        if info.name not in self._required_set:
            for pi in instruments:
                answer = pi.should_run(view, info)
                if answer is None:
                    raise TypeError(
                        f"instrument {pi.name}.should_run returned None for pass {info.name!r}; it must return a bool"
                    )
                if not answer:
                    run = False
        if run:
            for index, pi in enumerate(instruments):
                try:
                    pi.run_before_pass(view, info)
                except BaseException as err:
                    # The pass will not run: let the instruments whose run_before_pass was called close
                    # what they opened for it (a timing frame), or the next pass would nest under it.
                    _pass_error(instruments[: index + 1], view, info, err)
                    raise
        return run

    def instrument_after_pass(
        self, mod: IRModule, info: PassInfo, timing: StageTiming | None = None, fused: bool = False
    ) -> None:
        """TVM's ``InstrumentAfterPass``: every instrument's ``run_after_pass``, in order.

        With ``timing`` (what the executor measured of a function-level pass),
        each instrument's ``on_pass_timing(info, timing, fused)`` comes just before
        its ``run_after_pass``. An exception propagates at once; the instruments
        whose ``run_after_pass`` did not complete (the failing one and those after
        it) get ``on_pass_error`` first, so that what they opened in
        ``run_before_pass`` is closed.
        """
        instruments = self._instruments
        if instruments:
            view = mod.read_only_view(_VIEW_REASON)
            for index, pi in enumerate(instruments):
                try:
                    if timing is not None:
                        pi.on_pass_timing(info, timing, fused)
                    pi.run_after_pass(view, info)
                except BaseException as err:
                    _pass_error(instruments[index:], view, info, err)
                    raise

    def instrument_pass_error(self, mod: IRModule, info: PassInfo, error: BaseException) -> None:
        """Every instrument's ``on_pass_error`` (a pass that got ``run_before_pass`` raised ``error``)."""
        instruments = self._instruments
        if instruments:
            view = mod.read_only_view(_VIEW_REASON)
            for pi in instruments:
                pi.on_pass_error(view, info, error)

    # ------------------------------------------------------------ worker processes

    def snapshot(self) -> PassContextSnapshot:
        """A picklable description of this context without its instruments (see :meth:`from_snapshot`)."""
        defaults = tuple((name, entry["default"]) for name, entry in list_configs().items() if "default" in entry)
        return PassContextSnapshot(
            self._opt_level, self._required, self._disabled, tuple(self._config._values.items()), defaults
        )

    @classmethod
    def from_snapshot(
        cls, snapshot: PassContextSnapshot, instruments: Sequence[PassInstrument] | None = None
    ) -> PassContext:
        """A context equal to the one ``snapshot`` was taken of, with ``instruments`` (none by default).

        The config values were validated when the original context was built and
        are not validated again, so this works where the options are not registered.
        """
        if not isinstance(snapshot, PassContextSnapshot):
            raise TypeError(f"from_snapshot expects a PassContextSnapshot, got {type(snapshot).__name__}")
        ctx = cls.__new__(cls)
        ctx._opt_level = snapshot.opt_level
        ctx._required = tuple(snapshot.required_pass)
        ctx._disabled = tuple(snapshot.disabled_pass)
        ctx._required_set = frozenset(ctx._required)
        ctx._instruments = _check_instruments(list(instruments) if instruments is not None else None)
        ctx._config = PassConfig(dict(snapshot.config), dict(snapshot.defaults))
        ctx._init_records()
        return ctx
