"""The text of the modules an instrument prints, kept per function from one module to the next.

A pipeline's modules differ by the functions each pass changed, and a function's
text depends on the function alone (see :mod:`parpass.ir.printer`), so a printing
instrument that renders the module before or after every pass renders each
function once: the text of a function it has printed is reused while the function
is the same (see :mod:`parpass.instrument.versions`), and the functions to print go
to the pass executor as an analysis, on the workers when that pays. The text is
``str(mod)``, byte for byte.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from parpass.instrument.versions import Version, function_versions, same_version
from parpass.ir.printer import module_text

if TYPE_CHECKING:
    from parpass.ir.module import IRModule

__all__ = ["ModuleText"]


class ModuleText:
    """``str(mod)`` for the modules of a pipeline, each function printed once while it stays the same."""

    def __init__(self) -> None:
        self._texts: dict[str, tuple[Version, str]] = {}
        self._lock = threading.Lock()  # one instrument may print in two threads' pipelines
        #: functions printed (not answered from what was kept); for tests and tuning
        self.functions_printed = 0

    def text(self, mod: IRModule) -> str:
        """``str(mod)``."""
        versions = function_versions(mod)
        with self._lock:
            kept = self._texts
            stale = [name for name, now in versions.items() if name not in kept or not same_version(kept[name][0], now)]
            if stale:
                from parpass.instrument.analyses import FunctionText  # see its module: loaded on first use

                printed = FunctionText(stale).run(mod)
                self.functions_printed += len(printed)
                kept.update((name, (versions[name], text)) for name, text in printed.items())
            out = module_text(mod.attrs, [kept[name][1] for name in versions])
            if len(kept) > len(versions):
                for name in [n for n in kept if n not in versions]:
                    del kept[name]
        return out

    def clear(self) -> None:
        with self._lock:
            self._texts.clear()
