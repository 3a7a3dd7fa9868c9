"""FunctionAnalysis: a read-only computation over the functions of a module, run by the pass executor.

An analysis computes one plain-data value per function (the problems a checker
finds in it, a count, a digest of its signature) and changes nothing. Written as
a :class:`FunctionAnalysis`, it runs wherever the installed executor runs
function-level passes (on worker processes with the parallel executor, which
decides as it does for a pass whether moving pays) and the values come back here
by function name, exactly what a serial loop over the functions would compute::

    class CountBindings(FunctionAnalysis):
        def analyze(self, func, name, mod, ctx):
            return count_bindings(func)

    counts = CountBindings("CountBindings").run(mod)   # {name: count}

Values are what msgpack carries, decoded as ``value_type`` (a ``msgspec.Struct``,
say; plain data by default), wherever they were computed: a value computed here is
encoded and decoded as one computed in a worker is, so both have the same type, and
a value msgpack cannot carry is an error of the analysis on that function either
way. An analysis may read other functions of ``mod`` (a callee's signature): it is
given the whole module, read-only.

It is not a pass of a pipeline: :meth:`FunctionAnalysis.run` calls the executor
directly, under a context with the caller's configuration but no instruments and
no pass statistics, so it is neither instrumented, numbered by opt-bisect nor
counted. An instrument uses it to check the functions a pass changed on every core.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, ClassVar

import msgspec

from parpass.ir.module import IRModule
from parpass.ir.node import BaseFunc
from parpass.transform.context import PassContext
from parpass.transform.executor import get_function_pass_executor
from parpass.transform.pass_info import PassInfo
from parpass.transform.passes import FunctionLevelPass, _run_chain, attach_pass_note
from parpass.transform.statistics import PASS_STATISTICS

__all__ = ["FunctionAnalysis"]


class FunctionAnalysis(FunctionLevelPass):
    """A value per function of a module (every kind, ``SkipOptimization`` included), computed by :meth:`analyze`.

    ``name`` names it in errors and in the executor's wave statistics (and its
    learned cost); ``names``, if given, are the only functions analysed. Subclasses
    that take arguments of their own define ``__reduce_ex__`` (it travels to workers).
    """

    #: what a value is decoded as, wherever it was computed (plain msgpack data when ``Any``)
    value_type: ClassVar[Any] = Any
    #: whether :meth:`analyze` reads functions other than the one it is given (see FunctionLevelPass)
    reads_other_functions: ClassVar[bool] = False

    def __init__(self, name: str, names: Iterable[str] | None = None) -> None:
        super().__init__(self._analyze_unnamed, PassInfo(0, name))
        self.names = None if names is None else frozenset(names)
        #: the values computed in this process or brought back from workers, encoded, by function name
        self.values: dict[str, bytes] = {}

    @abc.abstractmethod
    def analyze(self, func: BaseFunc, name: str, mod: IRModule, ctx: PassContext) -> Any:
        """The value of function ``name`` (``func``) of ``mod``: data msgpack can carry, of ``value_type``."""

    def run(self, mod: IRModule, ctx: PassContext | None = None) -> dict[str, Any]:
        """The value of every function analysed, by name, in module order; the first error (in module order)
        of :meth:`analyze` propagates, with the note naming the analysis and the function."""
        quiet = _quiet(PassContext.current() if ctx is None else ctx)
        self.values = {}
        with quiet:  # what analyze itself runs (a nested pass, a statistic) is under it too, as in a worker
            _run_chain((self,), mod, quiet)
        values, self.values = self.values, {}
        return {name: self._decoded(name, values.get(name)) for name in self.targets(mod)}

    def target_names(self) -> frozenset[str] | None:
        return self.names

    def visits(self, func_kind: type[BaseFunc], attrs: Mapping[str, Any]) -> bool:
        return True

    def transform_one(self, func: BaseFunc, name: str, mod: IRModule, ctx: PassContext) -> BaseFunc:
        if self.names is not None and name not in self.names:
            return func  # a worker's chain applies it to what the executor sent: only the named ones
        try:
            value = self.analyze(func, name, mod, ctx)
            try:
                self.values[name] = _encoder.encode(value)
            except (TypeError, OverflowError, ValueError) as exc:
                raise TypeError(
                    f"analysis {self.info.name!r} returned a value msgpack cannot carry ({type(value).__name__}): {exc}"
                ) from None
        except BaseException as err:
            attach_pass_note(err, self.info.name, name)
            raise
        return func

    def take_values(self) -> dict[str, bytes]:
        """The values computed here since the last call, encoded (a worker sends them after each chunk)."""
        values, self.values = self.values, {}
        return values

    def _decoded(self, name: str, data: bytes | None) -> Any:
        if data is None:  # an executor that ran it elsewhere and did not bring its values back
            raise TypeError(
                f"analysis {self.info.name!r}: the function pass executor {get_function_pass_executor()!r} gave "
                f"no value for function {name!r} (an executor must hand an analysis's values back to it)"
            )
        try:
            return msgspec.msgpack.decode(data, type=self.value_type)
        except msgspec.ValidationError as exc:
            raise TypeError(
                f"analysis {self.info.name!r}: the value of function {name!r} is not a {self.value_type!r}: {exc}"
            ) from None

    def _analyze_unnamed(self, func: BaseFunc, mod: IRModule, ctx: PassContext) -> BaseFunc:
        raise TypeError(f"analysis {self.info.name!r} runs through transform_one, which names the function")

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (type(self), (self.info.name, None if self.names is None else sorted(self.names)))


_encoder = msgspec.msgpack.Encoder()


def _quiet(ctx: PassContext) -> PassContext:
    """``ctx`` without instruments and pass statistics: what an analysis runs under."""
    snapshot = ctx.snapshot()
    config = tuple((key, value) for key, value in snapshot.config if key != PASS_STATISTICS)
    return PassContext.from_snapshot(replace(snapshot, config=(*config, (PASS_STATISTICS, False))))
