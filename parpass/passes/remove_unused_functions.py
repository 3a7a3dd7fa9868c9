"""RemoveUnusedFunctions: drop the functions no entry point can reach.

The entry points of a module are its functions with a ``"global_symbol"``
attribute (what the outside world can call). Everything they call, directly
or through other functions, is kept; every other function is removed.
Functions marked ``"SkipOptimization"`` are left alone, so they count as
entry points too (and keep what they call). A module without any entry point
keeps nothing: nobody can call any of its functions.

A module pass, since it deletes functions. Calls are found through the
:class:`~parpass.ir.GlobalVar` references anywhere in a dataflow Function's
body (loop-level PrimFuncs call no module functions). A module holding its
functions as encoded bytes, as after a parallel wave, is read without decoding
them (:meth:`IRModule.called_names <parpass.ir.IRModule.called_names>`). Module
order is kept; when nothing is removed the module comes back unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from parpass.ir import IRModule
from parpass.transform import ModuleTransform, PassContext, Statistic

__all__ = ["RemoveUnusedFunctions"]

REMOVED = Statistic("RemoveUnusedFunctions", "removed", "functions removed")


def _reachable(mod: IRModule) -> set[str]:
    """The names of the entry points of ``mod`` and of the functions they reach through calls."""
    reachable: set[str] = set()
    stack: list[str] = []
    for name, _, attrs in mod.heads():  # attributes read without decoding a lazily held body
        if "global_symbol" in attrs or attrs.get("SkipOptimization"):
            reachable.add(name)
            stack.append(name)
    while stack:
        for callee in mod.called_names(stack.pop()):  # read from the bytes where the module holds them
            if callee not in reachable and callee in mod:
                reachable.add(callee)
                stack.append(callee)
    return reachable


@dataclass(frozen=True)
class RemoveUnusedFunctions(ModuleTransform):
    """The RemoveUnusedFunctions pass (module level, opt_level 1): keeps what the entry points reach."""

    name: ClassVar[str] = "RemoveUnusedFunctions"
    opt_level: ClassVar[int] = 1

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        reachable = _reachable(mod)
        removed = 0
        for name in mod.names():  # module order; the pass got its own copy of the module to change
            if name not in reachable:
                del mod[name]
                removed += 1
        if removed:
            REMOVED.add(removed)
        return mod
