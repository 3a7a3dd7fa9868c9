"""Instruments that print the IR around passes.

* :class:`PrintBeforeAll` / :class:`PrintAfterAll` (TVM's names): every pass.
* :class:`PrintIRBefore` / :class:`PrintIRAfter` (the reference's names): every
  pass, or only those named in ``passes``.
* :class:`PassPrintingInstrument` (TVM's): before the passes named in one list,
  after those named in another.
* :class:`PrintAfterChange`: after each pass, the IR if the pass changed it,
  otherwise one line saying it did not (LLVM's ``-print-changed``).

They print to ``file`` (``sys.stdout`` at the time of printing by default),
and print nothing, nor render any IR, for passes they do not report on.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TextIO

from parpass.instrument.base import PassInstrument, same_fingerprint
from parpass.instrument.module_text import ModuleText

if TYPE_CHECKING:
    from parpass.ir.module import IRModule
    from parpass.transform.pass_info import PassInfo

__all__ = [
    "PassPrintingInstrument",
    "PrintAfterAll",
    "PrintAfterChange",
    "PrintBeforeAll",
    "PrintIRAfter",
    "PrintIRBefore",
]


def _name_filter(passes: Iterable[str] | None, where: str) -> frozenset[str] | None:
    if passes is None:
        return None
    if isinstance(passes, str):
        raise TypeError(f"{where}: expected a list of pass names, not a bare string ({passes!r}); write [{passes!r}]")
    names = list(passes)
    for index, name in enumerate(names):
        if not isinstance(name, str):
            raise TypeError(f"{where}[{index}] must be a pass name (str), got {type(name).__name__}: {name!r}")
    return frozenset(names)


class _Printer(PassInstrument):
    def __init__(self, file: TextIO | None = None) -> None:
        self._file = file

    def _print(self, text: str) -> None:
        print(text, file=self._file if self._file is not None else sys.stdout)

    def _text(self, mod: IRModule) -> str:
        """``str(mod)``, each function printed once while it stays the same (see ModuleText)."""
        texts: ModuleText | None = self.__dict__.get("_texts")
        if texts is None:
            texts = self.__dict__["_texts"] = ModuleText()
        return texts.text(mod)

    def exit_pass_ctx(self) -> None:
        texts: ModuleText | None = self.__dict__.get("_texts")
        if texts is not None:
            texts.clear()  # the text of a whole module: not kept beyond the context

    def __getstate__(self) -> dict[str, object]:
        return {key: value for key, value in self.__dict__.items() if key != "_texts"}  # a per-process memo


class PrintBeforeAll(_Printer):
    """Prints ``Before Running Pass: <info>`` and the module before every pass."""

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        self._print(f"Before Running Pass: {info}")
        self._print(self._text(mod))


class PrintAfterAll(_Printer):
    """Prints ``After Running Pass: <info>`` and the module after every pass."""

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        self._print(f"After Running Pass: {info}")
        self._print(self._text(mod))


class PassPrintingInstrument(_Printer):
    """Prints the IR before the passes named in ``print_before_pass_names`` and after those in the other list."""

    def __init__(
        self,
        print_before_pass_names: Iterable[str],
        print_after_pass_names: Iterable[str],
        file: TextIO | None = None,
    ) -> None:
        super().__init__(file)
        self.print_before_pass_names = _name_filter(print_before_pass_names, "print_before_pass_names") or frozenset()
        self.print_after_pass_names = _name_filter(print_after_pass_names, "print_after_pass_names") or frozenset()

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        if info.name in self.print_before_pass_names:
            self._print(f"Print IR before: {info.name}\n{self._text(mod)}\n\n")

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        if info.name in self.print_after_pass_names:
            self._print(f"Print IR after: {info.name}\n{self._text(mod)}\n\n")


class PrintIRBefore(_Printer):
    """Prints the IR before every pass, or only before the passes named in ``passes``."""

    def __init__(self, passes: Iterable[str] | None = None, file: TextIO | None = None) -> None:
        super().__init__(file)
        self.passes = _name_filter(passes, "PrintIRBefore: passes")

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        if self.passes is None or info.name in self.passes:
            self._print(f"Print IR before: {info.name}\n{self._text(mod)}\n\n")


class PrintIRAfter(_Printer):
    """Prints the IR after every pass, or only after the passes named in ``passes``."""

    def __init__(self, passes: Iterable[str] | None = None, file: TextIO | None = None) -> None:
        super().__init__(file)
        self.passes = _name_filter(passes, "PrintIRAfter: passes")

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        if self.passes is None or info.name in self.passes:
            self._print(f"Print IR after: {info.name}\n{self._text(mod)}\n\n")


class _Frames(threading.local):
    def __init__(self) -> None:
        self.stack: list[tuple[PassInfo, IRModule]] = []


class PrintAfterChange(_Printer):
    """After each pass, prints the IR if the pass changed it, else one line (LLVM's ``-print-changed``).

    The first pass run in the context is preceded by ``*** IR Dump At Start ***``
    and the module. A pass changed the module if it holds other function
    objects or attributes and its text differs (a pass that rebuilt an equal
    function did not change anything); the texts are only rendered when the
    objects differ. ``passes`` restricts the report to the passes named.
    """

    def __init__(self, passes: Iterable[str] | None = None, file: TextIO | None = None) -> None:
        super().__init__(file)
        self.passes = _name_filter(passes, "PrintAfterChange: passes")
        self._frames = _Frames()
        self._started = False

    def __getstate__(self) -> dict[str, object]:
        return {"passes": self.passes, "file": self._file, "started": self._started}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.passes = state["passes"]
        self._file = state["file"]
        self._started = bool(state["started"])
        self._frames = _Frames()

    def enter_pass_ctx(self) -> None:
        self._started = False
        self._frames.stack.clear()

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        if not self._started:
            self._started = True
            self._print(f"*** IR Dump At Start ***\n{self._text(mod)}")
        self._frames.stack.append((info, mod))

    def _pop(self, info: PassInfo) -> IRModule | None:
        stack = self._frames.stack
        for index in range(len(stack) - 1, -1, -1):
            if stack[index][0] is info:
                before = stack[index][1]
                del stack[index:]
                return before
        return None

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        before = self._pop(info)
        if before is None or (self.passes is not None and info.name not in self.passes):
            return
        if same_fingerprint(before.fingerprint(), mod.fingerprint()):
            changed = False
        else:
            text = self._text(mod)
            changed = text != self._text(before)
        if changed:
            self._print(f"*** IR Dump After {info.name} ***\n{text}")
        else:
            self._print(f"*** IR Dump After {info.name} omitted because no change ***")

    def on_pass_error(self, mod: IRModule, info: PassInfo, error: BaseException) -> None:
        self._pop(info)
