"""opt-bisect: number every pass application and skip those above a limit (LLVM's ``-opt-bisect-limit``).

With ``parpass.bisect_limit`` = N (N >= 0) in the config of a PassContext, every
pass application run under it gets a number, in the order of the serial run: a
module pass once, a function-level pass once per target function, in module
order. Applications numbered above N are skipped (a skipped module pass does not
run; a function-level pass leaves the functions numbered above N as they were),
and each decision is printed on stderr as LLVM prints it::

    BISECT: running pass (12) FoldConstant on function (main)
    BISECT: NOT running pass (13) FoldConstant on function (helper)
    BISECT: running pass (14) RemoveUnusedFunctions on module

What is numbered:

* only applications made at the top level: a pass called from inside another
  pass's function is part of that application (it is neither numbered nor
  skipped), wherever that function runs;
* not the passes in the context's ``required_pass``: as LLVM never asks the
  bisector about a pass whose ``isRequired()`` is true, they always run;
* a Sequential is not an application; the passes in it are.

A skipped pass gets no instrument callbacks (it did not run). The numbers go on
across every pass call made under the same context, as LLVM's go on across a
compilation. While the limit is set, a Sequential runs its function-level passes
one by one (not fused), so that each pass's targets are known before it runs;
the output does not change. The numbering, the printed lines and the output are
the same at any worker count.
"""

from __future__ import annotations

import sys
from typing import Annotated, NamedTuple

import msgspec

from parpass.transform.config import register_config_option

__all__ = ["BISECT_LIMIT", "BISECT_PRINT", "BisectDecision", "BisectState"]

#: The config key of the limit: -1 (the default) numbers nothing.
BISECT_LIMIT = "parpass.bisect_limit"
#: The config key that prints each decision on stderr (on by default, as LLVM does).
BISECT_PRINT = "parpass.bisect_print"

register_config_option(
    BISECT_LIMIT,
    Annotated[int, msgspec.Meta(ge=-1)],
    default=-1,
    doc="opt-bisect: number every top-level pass application (a module pass once, a function-level pass once "
    "per target function, in module order) and skip those numbered above this limit; -1 numbers nothing.",
)
register_config_option(
    BISECT_PRINT,
    bool,
    default=True,
    doc="With parpass.bisect_limit set, print each decision on stderr ('BISECT: running pass (N) P on "
    "function (f)'); False keeps them only in ctx.bisect_log.",
)


class BisectDecision(NamedTuple):
    """One numbered pass application: its number, the pass, the function (None: the module), whether it ran."""

    number: int
    pass_name: str
    function: str | None
    ran: bool

    def line(self) -> str:
        """The decision as LLVM prints it."""
        target = "module" if self.function is None else f"function ({self.function})"
        return f"BISECT: {'' if self.ran else 'NOT '}running pass ({self.number}) {self.pass_name} on {target}"


class BisectState:
    """The numbering of one PassContext: the limit, the last number given, and every decision made."""

    __slots__ = ("count", "limit", "log", "verbose")

    def __init__(self, limit: int, verbose: bool) -> None:
        self.limit = limit
        self.verbose = verbose
        self.count = 0
        self.log: list[BisectDecision] = []

    def decide(self, pass_name: str, targets: list[str] | None) -> int:
        """Number the applications of ``pass_name`` (one per name of ``targets``; None: the module) and
        return how many of them run (they are the first ones)."""
        start = self.count + 1
        units: list[str | None] = [None] if targets is None else list(targets)
        self.count += len(units)
        decisions = [
            BisectDecision(start + i, pass_name, unit, start + i <= self.limit) for i, unit in enumerate(units)
        ]
        self.log.extend(decisions)
        if self.verbose and decisions:
            sys.stderr.write("".join(d.line() + "\n" for d in decisions))
            sys.stderr.flush()
        return max(0, min(len(units), self.limit - start + 1))
