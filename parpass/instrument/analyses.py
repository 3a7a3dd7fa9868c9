"""What instruments compute per function, as analyses the pass executor runs.

The well-formedness check of :class:`~parpass.instrument.WellFormedInstrument`, and
the text the printing instruments and ``DumpIR`` show. Each goes to the executor as a
:class:`~parpass.transform.analysis.FunctionAnalysis`: with worker processes, the
functions a pass changed are checked and printed there, in the processes that hold
them decoded, as a function-level pass runs. (This module imports the transform
layer, which imports the instrument package: the instruments load it on first use.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from parpass.ir.module import IRModule
from parpass.ir.node import BaseFunc
from parpass.ir.printer import astext
from parpass.ir.well_formed import function_problems
from parpass.transform.analysis import FunctionAnalysis
from parpass.transform.context import PassContext

__all__ = ["Checked", "FunctionText", "WellFormedCheck"]


class Checked(msgspec.Struct, frozen=True, array_like=True):
    """What checking one function found: its problems, and the module functions it calls."""

    problems: list[str]
    callees: list[str]


class WellFormedCheck(FunctionAnalysis):
    """The well-formedness check of the functions ``names`` of a module, run by the pass executor."""

    value_type = Checked
    reads_other_functions = True  # a call is checked against its callee's signature

    def __init__(self, check_types: bool, names: Sequence[str]) -> None:
        super().__init__("WellFormedCheck", names)
        self.check_types = check_types

    def analyze(self, func: BaseFunc, name: str, mod: IRModule, ctx: PassContext) -> Checked:
        problems, callees = function_problems(func, name, mod, check_types=self.check_types)
        return Checked(problems, list(callees))

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (WellFormedCheck, (self.check_types, sorted(self.names or ())))


class FunctionText(FunctionAnalysis):
    """The text of the functions ``names`` of a module, each as a module prints it (``@name = ...``)."""

    value_type = str

    def __init__(self, names: Sequence[str]) -> None:
        super().__init__("PrintFunctions", names)

    def analyze(self, func: BaseFunc, name: str, mod: IRModule, ctx: PassContext) -> str:
        return astext(func, name)

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (FunctionText, (sorted(self.names or ()),))
