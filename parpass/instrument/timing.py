"""PassTimingInstrument: wall-clock time of every pass, as a tree (TVM's ``PassTimingInstrument``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from parpass.instrument.base import PassInstrument

if TYPE_CHECKING:
    from parpass.ir.module import IRModule
    from parpass.transform.pass_info import PassInfo

__all__ = ["PassTiming", "PassTimingInstrument"]


@dataclass(frozen=True)
class PassTiming:
    """One pass run: its name, total and self time (total minus nested passes) in seconds, nested runs.

    ``failed`` is True when the pass raised (or its run was cut short); its total
    then ends where the failure was noticed.
    """

    name: str
    total: float
    self_time: float
    children: tuple[PassTiming, ...] = ()
    failed: bool = False


class _Open:
    __slots__ = ("children", "info", "name", "start")

    def __init__(self, info: PassInfo | None, name: str, start: float) -> None:
        self.info = info
        self.name = name
        self.start = start
        self.children: list[PassTiming] = []


def _close(node: _Open, end: float, failed: bool) -> PassTiming:
    total = end - node.start
    return PassTiming(node.name, total, total - sum(c.total for c in node.children), tuple(node.children), failed)


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


class _PerThread(threading.local):
    def __init__(self) -> None:
        self.stack: list[_Open] = []


_LAST = threading.local()  # the instrument that last timed a pass in this thread (for the static render())


class _RenderMethod:
    """``inst.render()`` renders that instrument; ``PassTimingInstrument.render()`` (TVM's static form)
    renders the instrument that last timed a pass in the calling thread."""

    def __get__(self, obj: PassTimingInstrument | None, owner: type | None = None) -> Callable[[], str]:
        if obj is not None:
            return obj._render
        last = getattr(_LAST, "inst", None)
        return last._render if last is not None else (lambda: "")


class PassTimingInstrument(PassInstrument):
    """Times every pass that runs in its context; :meth:`render` prints TVM's profile.

    Timings start afresh when the instrument enters a context and stay readable
    after it exits (TVM clears them on exit, so there ``render()`` must be called
    inside the ``with`` block; here both work). A pass that raised is closed at
    that moment (via ``on_pass_error``) and rendering keeps working; a run cut
    short otherwise (an instrument raised) is closed when noticed.
    :attr:`timings` gives the raw tree.
    """

    render = _RenderMethod()

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._roots: list[PassTiming] = []
        self._local = _PerThread()

    # -------------------------------------------------------- callbacks

    def enter_pass_ctx(self) -> None:
        with self._lock:
            self._roots = []
        self._local.stack.clear()

    def exit_pass_ctx(self) -> None:
        self._unwind(time.perf_counter())

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        _LAST.inst = self
        self._local.stack.append(_Open(info, info.name, time.perf_counter()))

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        self._finish(info, time.perf_counter(), failed=False)

    def on_pass_error(self, mod: IRModule, info: PassInfo, error: BaseException) -> None:
        self._finish(info, time.perf_counter(), failed=True)

    # -------------------------------------------------------- bookkeeping

    def _attach(self, done: PassTiming) -> None:
        stack = self._local.stack
        if stack:
            stack[-1].children.append(done)
        else:
            with self._lock:
                self._roots.append(done)

    def _finish(self, info: PassInfo, end: float, failed: bool) -> None:
        stack = self._local.stack
        if not any(node.info is info for node in stack):
            return  # not ours (e.g. this instrument was installed mid-pass)
        while stack:
            node = stack.pop()
            mine = node.info is info
            self._attach(_close(node, end, failed or not mine))
            if mine:
                return

    def _unwind(self, end: float) -> None:
        stack = self._local.stack
        while stack:
            self._attach(_close(stack.pop(), end, True))

    # -------------------------------------------------------- results

    @property
    def timings(self) -> list[PassTiming]:
        """The completed top-level pass runs (with nested runs as children), in the order they ran."""
        with self._lock:
            return list(self._roots)

    def _render(self) -> str:
        return render_timings(self.timings)

    def __getstate__(self) -> dict[str, Any]:
        return {"roots": self.timings}

    def __setstate__(self, state: dict[str, Any]) -> None:
        PassTimingInstrument.__init__(self)
        self._roots = list(state["roots"])
