"""The check of :class:`~parpass.instrument.WellFormedInstrument`, as an analysis the pass executor runs.

The functions to check go to the executor as a
:class:`~parpass.transform.analysis.FunctionAnalysis`: with worker processes they are
checked there, in the processes that hold them decoded, as a function-level pass runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from parpass.ir.module import IRModule
from parpass.ir.node import BaseFunc
from parpass.ir.well_formed import function_problems
from parpass.transform.analysis import FunctionAnalysis
from parpass.transform.context import PassContext

__all__ = ["Checked", "WellFormedCheck"]


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
