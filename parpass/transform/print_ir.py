"""PrintIR: a module pass that prints the module (TVM's ``tvm.transform.PrintIR``)."""

from __future__ import annotations

import sys

from parpass.ir.module import IRModule
from parpass.transform.context import PassContext
from parpass.transform.pass_info import PassInfo
from parpass.transform.passes import ModulePass

__all__ = ["PrintIR"]


class _PrintIRFunc:
    """The pass function of PrintIR (a class, so that the pass pickles by reference)."""

    __slots__ = ("header",)

    def __init__(self, header: str) -> None:
        self.header = header

    def __call__(self, mod: IRModule, ctx: PassContext) -> IRModule:
        # sys.stderr is looked up now, so redirection and capture see the output.
        sys.stderr.write(f"PrintIR({self.header}):\n{mod.script()}\n")
        return mod

    def __reduce__(self) -> tuple[object, ...]:
        return (_PrintIRFunc, (self.header,))


def PrintIR(header: str = "") -> ModulePass:
    """A module pass (opt_level 0, named "PrintIR") writing ``PrintIR(<header>):`` and the module's text to stderr."""
    if not isinstance(header, str):
        raise TypeError(f"PrintIR: header must be a str, got {type(header).__name__}: {header!r}")
    return ModulePass(_PrintIRFunc(header), PassInfo(0, "PrintIR"))
