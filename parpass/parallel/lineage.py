"""How results kept in workers were made, so that they can be made again when their worker dies.

A result kept in a worker (see :mod:`parpass.parallel.kept`) exists nowhere
else until it is fetched. So each wave that keeps results records what made
them, at the cost of a handle per result: its chain of passes, its context,
the module's function names and attributes (what its passes could see of the
module), and each result's input (what the parent held of the function, or the
token of a result an earlier wave kept, itself recorded). A wave keeps results
only where its passes read no function but the one they transform (a chunk that
needs another counts for nothing), so a lost result is its input run through the
chain once more: here, in the parent, stage by stage as a worker runs a chunk,
under a context that counts nothing, calls no instrument and runs no nested
pass in workers (the wave's callbacks, output and counts were delivered when it
ran). What made it once makes it again byte for byte, as any run makes the
serial run's bytes; what the passes print is printed again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from parpass.ir.module import IRModule
from parpass.parallel.config import NUM_WORKERS
from parpass.parallel.worker import applies
from parpass.transform.context import PassContext, inside_pass
from parpass.transform.executor import view_reason
from parpass.transform.statistics import PASS_STATISTICS, counting

if TYPE_CHECKING:
    from parpass.ir.node import BaseFunc
    from parpass.transform.passes import FunctionLevelPass

__all__ = ["Lineage", "remake"]


class Lineage:
    """What one wave that kept results ran (its chain, its context, the module's names and attributes) and, per
    result it kept, the function's name and its input (see :class:`~parpass.parallel.kept.Keeper`)."""

    __slots__ = ("attrs", "ctx", "names", "passes", "results", "sources")

    def __init__(
        self,
        passes: Sequence[FunctionLevelPass],
        ctx: PassContext,
        names: Sequence[str],
        attrs: Mapping[str, Any],
    ) -> None:
        self.passes = passes
        self.ctx = ctx
        self.names = names
        self.attrs = attrs
        self.results: list[str] = []
        self.sources: list[object] = []

    def add(self, names: list[str], sources: list[object]) -> int:
        """Record results of functions ``names`` made from ``sources``; returns the position of the first."""
        first = len(self.results)
        self.results += names
        self.sources += sources
        return first


def remake(lineage: Lineage, positions: Sequence[int], inputs: Sequence[BaseFunc]) -> list[BaseFunc]:
    """The results at ``positions`` of ``lineage`` made again from their ``inputs``: its chain run on them,
    pass by pass, each pass given the module as a worker's stage view shows it (these functions only: a
    lookup of another raises LookupError naming it)."""
    snapshot = lineage.ctx.snapshot()
    quiet = dataclasses.replace(snapshot, config=(*snapshot.config, (PASS_STATISTICS, False), (NUM_WORKERS, 1)))
    ctx = PassContext.from_snapshot(quiet)
    names = [lineage.results[at] for at in positions]
    funcs = list(inputs)
    with ctx, inside_pass(), counting(None):
        for p in lineage.passes:
            before = dict(zip(names, funcs, strict=True))
            view = IRModule.from_loader(
                lineage.names, partial(_held, before), lineage.attrs, read_only=view_reason(p.info.name)
            )
            for k, name in enumerate(names):
                if applies(p, funcs[k]):
                    funcs[k] = p.transform_one(funcs[k], name, view, ctx)
    return funcs


def _held(held: dict[str, BaseFunc], name: str) -> BaseFunc:
    func = held.get(name)
    if func is None:
        raise LookupError(
            f"function {name!r}: a result kept in a worker that died is being made again from its own input, "
            "and its pass looked up another function"
        )
    return func
