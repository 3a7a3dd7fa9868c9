"""A progress bar on a terminal, driven by a pass instrument (no dependency beyond the standard library)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Mapping
from typing import TextIO

from parpass.instrument import PassInstrument
from parpass.ir.module import IRModule
from parpass.transform import PassInfo

__all__ = ["ProgressBar", "ProgressInstrument"]


class ProgressBar:
    """A one-line bar on ``stream``, redrawn in place; draws nothing when ``stream`` is not a terminal.

    Progress is counted in units (``bench`` counts function-passes: each pass
    of the pipeline advances by the number of functions it visits).
    """

    def __init__(self, stream: TextIO, total: int, enabled: bool | None = None, min_interval: float = 0.1) -> None:
        self.stream = stream
        self.total = max(total, 1)
        self.done = 0
        self.label = ""
        if enabled is None:
            isatty = getattr(stream, "isatty", None)
            enabled = bool(isatty()) if callable(isatty) else False
        self.enabled = enabled
        self._min_interval = min_interval
        self._last = 0.0
        self._drawn = False

    def set_label(self, label: str) -> None:
        self.label = label
        self._draw(force=True)

    def advance(self, units: int) -> None:
        self.done = min(self.done + units, self.total)
        self._draw(force=False)

    def _draw(self, force: bool) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._last < self._min_interval:
            return
        self._last = now
        width = shutil.get_terminal_size((80, 24)).columns
        fraction = self.done / self.total
        bar_width = max(10, min(30, width // 4))
        filled = int(fraction * bar_width)
        head = f"[{'#' * filled}{'.' * (bar_width - filled)}] {fraction * 100:3.0f}% "
        line = (head + self.label)[: max(width - 1, 10)]
        self.stream.write("\r" + line + "\x1b[K")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        """Erase the bar (the line is left empty for what is printed next)."""
        if self.enabled and self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False


class ProgressInstrument(PassInstrument):
    """Advances a :class:`ProgressBar` when a pass of a known set finishes.

    ``units`` maps the ``PassInfo`` objects of the pipeline's passes (by
    identity) to how many units each is worth; other passes (passes nested in
    them, required passes) only show their name. ``prefix`` goes before the
    name of the running pass. It reads no module, so a pipeline it watches still runs fused.
    """

    reads_module = False

    def __init__(self, bar: ProgressBar, units: Mapping[int, int], prefix: str = "") -> None:
        self.bar = bar
        self.units = dict(units)
        self.prefix = prefix

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        if id(info) in self.units:
            self.bar.set_label(f"{self.prefix}{info.name}")

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        units = self.units.get(id(info))
        if units:
            self.bar.advance(units)
