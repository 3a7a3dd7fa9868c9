"""The printer's machine: an explicit work stack of text and deferred steps, and per-unit variable names."""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, Union, cast

from parpass.ir import relax, tir
from parpass.ir.printer.words import fmt_name

#: A deferred step ``(method, node, argument)``: ``method(node, argument)`` runs when it is popped.
_Step = tuple[Callable[[Any, Any], None], Any, Any]
#: A work item: text to emit, or a step.
_Item = Union[str, _Step]


class _PrinterBase(abc.ABC):
    """Prints one self-contained unit (a function, or a single node) with its own names."""

    __slots__ = ("bnames", "out", "rnames", "stack", "suffix", "tnames", "used")

    def __init__(self) -> None:
        self.out: list[str] = []
        self.stack: list[_Item] = []
        # Display names by vid, one table per kind of variable; one shared set of used names.
        self.rnames: dict[int, str] = {}
        self.tnames: dict[int, str] = {}
        self.bnames: dict[int, str] = {}
        self.used: set[str] = set()
        self.suffix: dict[str, int] = {}

    # ------------------------------------------------------------ driver

    def run(self, item: _Item) -> None:
        stack = self.stack
        out = self.out
        stack.append(item)
        while stack:
            it = stack.pop()
            if type(it) is str:
                out.append(it)
            else:
                step = cast(_Step, it)  # not text, so a step; anything else fails loudly on the call below
                step[0](step[1], step[2])

    def push(self, parts: list[_Item]) -> None:
        self.stack.extend(reversed(parts))

    def text(self) -> str:
        text = "".join(self.out)
        return text[1:] if text.startswith("\n") else text

    @abc.abstractmethod
    def node(self, n: Any, indent: int) -> None:
        """Print any node (the printer for one family hands it what it does not know)."""

    # ------------------------------------------------------------ names

    def _define(self, table: dict[int, str], vid: int, hint: str) -> str:
        """Name a variable first seen now: its hint, or hint_1, hint_2, ... if that is taken."""
        raw = hint
        if raw in self.used:
            k = self.suffix.get(hint, 1)
            while f"{hint}_{k}" in self.used:
                k += 1
            self.suffix[hint] = k + 1
            raw = f"{hint}_{k}"
        self.used.add(raw)
        name = table[vid] = "%" + fmt_name(raw)
        return name

    def rvar(self, v: relax.Var) -> str:
        name = self.rnames.get(v.vid)
        return self._define(self.rnames, v.vid, v.name_hint) if name is None else name

    def tvar(self, v: tir.Var) -> str:
        name = self.tnames.get(v.vid)
        return self._define(self.tnames, v.vid, v.name_hint) if name is None else name

    def bufname(self, b: tir.Buffer) -> str:
        name = self.bnames.get(b.vid)
        return self._define(self.bnames, b.vid, b.name) if name is None else name
