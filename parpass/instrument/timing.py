"""PassTimingInstrument: wall-clock and CPU time of every pass, as a tree (TVM's ``PassTimingInstrument``).

A function-level pass is timed by the executor that runs it: wall and CPU
seconds summed over the processes that ran it (the workers, or this process),
as MLIR's pass timing does for its threaded pipelines. The instrument reads no
module, so a pipeline timed with it still runs fused. Module passes and
Sequentials are timed in this process: its wall clock and its own CPU time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from parpass.instrument.base import PassInstrument

if TYPE_CHECKING:
    from parpass.ir.module import IRModule
    from parpass.transform.executor import StageTiming
    from parpass.transform.pass_info import PassInfo

__all__ = ["PassTiming", "PassTimingInstrument", "render_timing_report", "render_timings"]


@dataclass(frozen=True)
class PassTiming:
    """One pass run: its name, total and self time (total minus nested passes) in seconds, nested runs.

    ``total`` is TVM's figure: the wall-clock time between the pass's
    ``run_before_pass`` and ``run_after_pass`` in the calling process; for a pass
    run as a stage of a fused chain (``fused``), where no time of its own elapses
    there, it is the executor's ``wall``. ``wall`` and ``cpu`` are the seconds the
    executor measured for a function-level pass, summed over the processes that
    ran it (the workers, or this process); for a module pass, a Sequential or a
    pass that raised, ``wall`` is ``total`` (the default, -1, means that) and
    ``cpu`` is this process's own CPU time over the same span.

    ``remote`` says that ``wall`` and ``cpu`` were measured in other processes
    (the workers), so that this process's own CPU time does not include them.

    ``failed`` is True when the pass raised (or its run was cut short); its total
    then ends where the failure was noticed.
    """

    name: str
    total: float
    self_time: float
    children: tuple[PassTiming, ...] = ()
    failed: bool = False
    wall: float = -1.0
    cpu: float = 0.0
    fused: bool = False
    remote: bool = False

    def __post_init__(self) -> None:
        if self.wall < 0:
            object.__setattr__(self, "wall", self.total)


class _Open:
    __slots__ = ("children", "cpu_start", "fused", "info", "name", "reported", "start")

    def __init__(self, info: PassInfo | None, name: str, start: float, cpu_start: float) -> None:
        self.info = info
        self.name = name
        self.start = start
        self.cpu_start = cpu_start
        self.children: list[PassTiming] = []
        self.reported: StageTiming | None = None
        self.fused = False


def _close(node: _Open, end: float, cpu_end: float, failed: bool) -> PassTiming:
    elapsed = end - node.start
    reported = node.reported
    if reported is None or failed:
        wall, cpu, fused, remote = elapsed, cpu_end - node.cpu_start, False, False
    else:
        wall, cpu, fused, remote = reported.wall, reported.cpu, node.fused, not reported.in_caller
    total = wall if fused else elapsed
    self_time = total - sum(c.total for c in node.children)
    return PassTiming(node.name, total, self_time, tuple(node.children), failed, wall, cpu, fused, remote)


def _percent(part: float, whole: float) -> float:
    return part / whole * 100.0 if whole > 0 else 0.0


def render_timings(roots: list[PassTiming] | tuple[PassTiming, ...]) -> str:
    """TVM's profile text: pre-order, one line per pass, tab-indented by depth.

    ``name: <total>us [<self>us] (<% of all top-level passes>; <% of parent>)``
    """
    if not roots:
        return ""
    top = sum(r.total for r in roots)
    lines: list[str] = []
    stack: list[tuple[int, float, PassTiming]] = [(0, top, r) for r in reversed(roots)]
    while stack:
        depth, parent_total, node = stack.pop()
        for child in reversed(node.children):
            stack.append((depth + 1, node.total, child))
        lines.append(
            f"{chr(9) * depth}{node.name}: {node.total * 1e6:.0f}us [{node.self_time * 1e6:.0f}us] "
            f"({_percent(node.total, top):.2f}%; {_percent(node.total, parent_total):.2f}%)\n"
        )
    return "".join(lines)


_RULE = "===" + "-" * 73 + "==="


def render_timing_report(roots: Sequence[PassTiming], total_wall: float | None = None) -> str:
    """The report of ``parpass opt --time-passes``: wall and CPU columns, one row per pass, in the style of
    MLIR's ``-mlir-timing`` (tree display).

    Each row shows ``wall`` and ``cpu`` with their percentage of the Total row,
    then the name, indented two spaces per nesting level (`` (failed)`` after a
    pass that raised). The Total row's wall time sums the top-level rows, or is
    ``total_wall`` when given (the wall-clock time of the whole run as the
    caller measured it); its CPU time is all the run's: this process's own (the
    top-level rows) plus the workers' (the rows measured there). A
    function-level pass's time is summed over the processes that ran it, so with
    workers it can exceed its Sequential's (which is this process's own), and
    its wall time the run's.
    """
    if not roots:
        return ""
    wall_total = sum(r.wall for r in roots) if total_wall is None else total_wall
    cpu_total = sum(r.cpu for r in roots) + sum(node.cpu for node in _walk(roots) if node.remote)

    def cells(wall: float, cpu: float) -> str:
        return f"{wall:10.4f} ({_percent(wall, wall_total):5.1f}%){cpu:10.4f} ({_percent(cpu, cpu_total):5.1f}%)"

    lines = [
        _RULE,
        " " * 22 + "... Pass execution timing report ...",
        _RULE,
        f"  Total Execution Time: {wall_total:.4f} seconds",
        "  A function-level pass's wall and CPU time are summed over the processes that ran it (the workers);",
        "  a module pass's or Sequential's are this process's own. The Total's CPU time counts both.",
        "",
        "  ----Wall Time----  ----CPU Time-----  ----Name----",
    ]
    stack: list[tuple[int, PassTiming]] = [(0, r) for r in reversed(roots)]
    while stack:
        depth, node = stack.pop()
        stack.extend((depth + 1, child) for child in reversed(node.children))
        failed = " (failed)" if node.failed else ""
        lines.append(f"{cells(node.wall, node.cpu)}  {'  ' * depth}{node.name}{failed}")
    lines.append(f"{cells(wall_total, cpu_total)}  Total")
    return "\n".join(lines) + "\n"


def _walk(roots: Sequence[PassTiming]) -> list[PassTiming]:
    """Every node of the trees, in pre-order."""
    out: list[PassTiming] = []
    stack = list(reversed(roots))
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(reversed(node.children))
    return out


def _same(a: PassInfo | None, b: PassInfo) -> bool:
    return a is b or a == b


class _PerThread(threading.local):
    def __init__(self) -> None:
        self.stack: list[_Open] = []


class _Active(threading.local):
    """The timing instruments of the contexts this thread is inside, innermost last (entered, not yet exited)."""

    def __init__(self) -> None:
        self.stack: list[PassTimingInstrument] = []


_ACTIVE = _Active()


class _RenderMethod:
    """``inst.render()`` renders that instrument; ``PassTimingInstrument.render()`` (TVM's static form)
    renders the one in the innermost context the calling thread is inside ("" outside any, as TVM)."""

    def __get__(self, obj: PassTimingInstrument | None, owner: type | None = None) -> Callable[[], str]:
        if obj is not None:
            return obj._render
        active = _ACTIVE.stack
        return active[-1]._render if active else (lambda: "")


class PassTimingInstrument(PassInstrument):
    """Times every pass that runs in its context; :meth:`render` prints TVM's profile,
    :meth:`render_report` the wall and CPU columns (``parpass opt --time-passes``).

    A function-level pass gets the time its executor measured (see
    :class:`PassTiming`); the instrument reads no module (``reads_module`` is
    False), so a pipeline runs fused under it.

    Timings start afresh when the instrument enters a context and stay readable
    after it exits (TVM clears them on exit, so there ``render()`` must be called
    inside the ``with`` block; here both work). A pass that raised is closed at
    that moment (via ``on_pass_error``) and rendering keeps working; a run cut
    short otherwise (an instrument raised) is closed when noticed.
    :attr:`timings` gives the raw tree.
    """

    render = _RenderMethod()
    reads_module = False

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._roots: list[PassTiming] = []
        self._local = _PerThread()

    # -------------------------------------------------------- callbacks

    def enter_pass_ctx(self) -> None:
        with self._lock:
            self._roots = []
        self._local.stack.clear()
        _ACTIVE.stack.append(self)

    def exit_pass_ctx(self) -> None:
        self._unwind(time.perf_counter(), time.process_time())
        active = _ACTIVE.stack
        for i in range(len(active) - 1, -1, -1):
            if active[i] is self:
                del active[i]
                break

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        self._local.stack.append(_Open(info, info.name, time.perf_counter(), time.process_time()))

    def on_pass_timing(self, info: PassInfo, timing: StageTiming, fused: bool) -> None:
        stack = self._local.stack
        if stack and _same(stack[-1].info, info):
            stack[-1].reported = timing
            stack[-1].fused = fused

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        self._finish(info, time.perf_counter(), time.process_time(), failed=False)

    def on_pass_error(self, mod: IRModule, info: PassInfo, error: BaseException) -> None:
        self._finish(info, time.perf_counter(), time.process_time(), failed=True)

    # -------------------------------------------------------- bookkeeping

    def _attach(self, done: PassTiming) -> None:
        stack = self._local.stack
        if stack:
            stack[-1].children.append(done)
        else:
            with self._lock:
                self._roots.append(done)

    def _finish(self, info: PassInfo, end: float, cpu_end: float, failed: bool) -> None:
        stack = self._local.stack
        # The record this callback closes: the innermost opened for this very PassInfo, else for an equal
        # one (the callbacks of a pass nested in a worker's function are replayed here with a copy of it
        # for each callback).
        target = next((node for node in reversed(stack) if node.info is info), None)
        if target is None:
            target = next((node for node in reversed(stack) if node.info == info), None)
        if target is None:
            return  # not ours (e.g. this instrument was installed mid-pass)
        while stack:
            node = stack.pop()
            mine = node is target
            self._attach(_close(node, end, cpu_end, failed or not mine))
            if mine:
                return

    def _unwind(self, end: float, cpu_end: float) -> None:
        stack = self._local.stack
        while stack:
            self._attach(_close(stack.pop(), end, cpu_end, True))

    # -------------------------------------------------------- results

    @property
    def timings(self) -> list[PassTiming]:
        """The completed top-level pass runs (with nested runs as children), in the order they ran."""
        with self._lock:
            return list(self._roots)

    def _render(self) -> str:
        return render_timings(self.timings)

    def render_report(self, total_wall: float | None = None) -> str:
        """The wall and CPU columns of every pass (see :func:`render_timing_report`)."""
        return render_timing_report(self.timings, total_wall)

    def __getstate__(self) -> dict[str, Any]:
        return {"roots": self.timings}

    def __setstate__(self, state: dict[str, Any]) -> None:
        PassTimingInstrument.__init__(self)
        self._roots = list(state["roots"])
