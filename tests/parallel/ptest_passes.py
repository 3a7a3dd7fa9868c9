"""Passes used by the parallel-executor tests.

They live in an importable module (not a test file) so that worker processes
load them by reference, as they would a user's passes.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
import time
import uuid
import warnings
from dataclasses import dataclass
from typing import Any, ClassVar

import msgspec

from parpass.ir import IRModule, relax
from parpass.ir.node import BaseFunc, GlobalVar
from parpass.ir.types import TensorType
from parpass.transform import FunctionTransform, PassContext, Statistic, function_pass, module_pass, prim_func_pass
from parpass.transform.analysis import FunctionAnalysis

log = logging.getLogger("ptest")


@function_pass(opt_level=0, name="CountBindings")
def count_bindings(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    """Changes every Function: records its number of bindings."""
    return func.with_attr("num_bindings", len(func.bindings))


@function_pass(opt_level=0, name="Rebuild")
def rebuild(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    """Returns every Function as a new object with an equal body and the same attributes: a change to the
    executor (it tells changes by identity), none to the IR."""
    return func.with_body(msgspec.structs.replace(func.body))


@function_pass(opt_level=0, name="KeepEven")
def keep_even(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    """Changes only functions with an even number of bindings (others come back unchanged)."""
    if len(func.bindings) % 2:
        return func
    return func.with_attr("even", True)


@prim_func_pass(opt_level=0, name="TagPrimFuncs")
def tag_prim_funcs(func, mod, ctx):  # type: ignore[no-untyped-def]
    return func.with_attr("tagged", ctx.opt_level)


def _callees(func: relax.Function) -> list[str]:
    out = []
    stack: list[object] = [func.body]
    while stack:
        node = stack.pop()
        if isinstance(node, relax.Call) and isinstance(node.op, GlobalVar):
            out.append(node.op.name_hint)
        stack.extend(node.children())  # type: ignore[attr-defined]
    return sorted(out)


@function_pass(opt_level=0, name="LookUpCallees")
def look_up_callees(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    """Reads other functions through the module view: the callees' attributes as they were before the pass."""
    seen = []
    for name in _callees(func):
        callee = mod[name]
        seen.append(f"{name}:{len(callee.params)}:{callee.attrs.get('num_bindings', -1)}")
    return func.with_attr("callees", seen)


@function_pass(opt_level=0, name="LooksUpCarelessly")
def looks_up_carelessly(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    """Looks up its callees, taking any failure for a callee it cannot read (``except BaseException``)."""
    seen = []
    for name in _callees(func):
        try:
            seen.append(f"{name}:{len(mod[name].params)}")
        except BaseException:  # the carelessness is the point
            seen.append(f"{name}:?")
    return func.with_attr("callees", seen)


@function_pass(opt_level=0, name="Chatty")
def chatty(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    """Prints, logs and warns (with the function's name), and changes nothing."""
    name = func.attrs.get("global_symbol", len(func.bindings))
    print(f"out {name}")
    log.warning("log %s", name)
    warnings.warn(f"warn {name}", UserWarning, stacklevel=1)
    print(f"err {name}", file=__import__("sys").stderr)
    return func


@module_pass(opt_level=0, name="InnerModulePass")
def inner_module_pass(mod: IRModule, ctx: PassContext) -> IRModule:
    return mod.with_attr("inner", len(mod))


@function_pass(opt_level=0, name="CallsNestedPass")
def calls_nested_pass(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    """Runs another pass on a one-function module, from inside a function pass."""
    small = IRModule({"f": func})
    out = inner_module_pass(small)
    return func.with_attr("inner", out.attrs.get("inner"))


@module_pass(opt_level=0, name="InnerFailingPass")
def inner_failing_pass(mod: IRModule, ctx: PassContext) -> IRModule:
    try:
        {}[len(mod)]
    except KeyError as err:
        raise Wrapped("inner pass failed") from err
    return mod


@function_pass(opt_level=0, name="CallsFailingNestedPass")
def calls_failing_nested_pass(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    """Runs a pass that fails (from a KeyError) from inside a function pass, and carries on."""
    try:
        inner_failing_pass(IRModule({"f": func}))
    except Wrapped:
        return func.with_attr("inner_failed", True)
    return func


class Boom(ValueError):
    """The error the failing passes raise."""


@function_pass(opt_level=0, name="FailsOnSome")
def fails_on_some(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    """Raises on functions with exactly 3 or 5 bindings, and changes the others (so chunks write results)."""
    if len(func.bindings) in (3, 5):
        raise Boom(f"cannot handle {len(func.bindings)} bindings")
    return func.with_attr("checked", True)


class Unpicklable(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.lock = threading.Lock()


@function_pass(opt_level=0, name="RaisesUnpicklable")
def raises_unpicklable(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    raise Unpicklable("holds a lock")


class Wrapped(Exception):
    """What ``raises_chained`` raises, from the error it met (and while handling another)."""


@function_pass(opt_level=0, name="RaisesChained")
def raises_chained(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    """Raises ``Wrapped`` from a KeyError, while handling an unpicklable error, on every function."""
    try:
        raise Unpicklable("handled first")
    except Unpicklable:
        try:
            {}[func.attrs.get("global_symbol", "?")]
        except KeyError as err:
            raise Wrapped(f"no entry for {len(func.params)} params") from err


@function_pass(opt_level=0, name="RaisesWhileHandling")
def raises_while_handling(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    """Raises a ValueError while handling a ZeroDivisionError (a context, no cause)."""
    try:
        len(func.params) // 0
    except ZeroDivisionError:
        raise ValueError(f"while handling, {len(func.params)} params")  # noqa: B904 (the context is the point)
    return func


def _target(func: relax.Function) -> bool:
    return func.attrs.get("global_symbol") == "main"


@function_pass(opt_level=0, name="ExitsWorker")
def exits_worker(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    """Kills its process on ``main``; changes the other functions (so chunks write results)."""
    if _target(func):
        os._exit(3)
    return func.with_attr("survived", True)


@function_pass(opt_level=0, name="ExitsOnAny")
def exits_on_any(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    os._exit(4)


@function_pass(opt_level=0, name="Segfaults")
def segfaults(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    """Crashes its process on ``main``; changes the other functions (so chunks write results)."""
    if _target(func):
        ctypes.string_at(0)
    return func.with_attr("survived", True)


@function_pass(opt_level=0, name="Sleeps")
def sleeps(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    if _target(func):
        time.sleep(60)
    return func


@function_pass(opt_level=0, name="WaitsALittle")
def waits_a_little(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    """Waits 20 ms per function, using no CPU (as a pass that runs an external tool does)."""
    time.sleep(0.02)
    return func


@function_pass(opt_level=0, name="RunsParallelPassInside")
def runs_parallel_pass_inside(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    """Asks for a parallel run of another function pass from inside a pass."""
    from parpass.parallel import default_executor as executor

    inner = IRModule({f"copy{i}": func for i in range(8)})
    with PassContext(config={"parpass.num_workers": 2, "parpass.parallel": "always"}):
        count_bindings(inner)
    assert executor.last is not None
    return func.with_attr("inner_reason", executor.last.reason)


@function_pass(opt_level=0, name="ReadsContext")
def reads_context(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    """Records what the worker's current context says."""
    current = PassContext.current()
    assert current is ctx
    return func.with_attr(
        "ctx", [ctx.opt_level, list(ctx.required_pass), list(ctx.disabled_pass), ctx.config["parpass.timeout"]]
    )


#: Counted by CountsBindings and CountsLookups (pass statistics must add up the same at any worker count).
BINDINGS_SEEN = Statistic("CountsBindings", "bindings", "bindings seen")
LOOKUPS = Statistic("CountsLookups", "lookups", "callees looked up")


@function_pass(opt_level=0, name="CountsBindings")
def counts_bindings(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    """Counts the bindings of every Function, and changes it (so a later pass of a fused chain that looks
    it up must compute it again in a worker)."""
    BINDINGS_SEEN.add(len(func.bindings))
    return func.with_attr("counted", True)


@function_pass(opt_level=0, name="CountsLookups")
def counts_lookups(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    """Looks up every callee through the module view, counting the lookups."""
    callees = _callees(func)
    for name in callees:
        mod[name]
    LOOKUPS.add(len(callees))
    return func


NESTED_COUNT = Statistic("CountsAfterNestedContext", "bindings", "bindings counted after a nested context")


@function_pass(opt_level=0, name="CountsAfterNestedContext")
def counts_after_nested_context(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    """Enters and leaves a context of its own, then counts: the count belongs to the enclosing run."""
    with PassContext():
        pass
    NESTED_COUNT.add(len(func.bindings))
    return func


@dataclass(frozen=True)
class TagWith(FunctionTransform):
    """A pass written as a class (its option travels to the workers with it)."""

    name: ClassVar[str] = "TagWith"
    opt_level: ClassVar[int] = 0

    label: str = "tag"

    def transform_function(self, func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
        return func.with_attr(self.label, len(func.bindings))


class _Marks:
    """Part of a reference cycle; writes a file of its own name when it is collected."""

    def __init__(self, directory: str, name: str) -> None:
        self.path = os.path.join(directory, name)
        self.cycle = self

    def __del__(self) -> None:
        with open(self.path, "w"):
            pass


@dataclass(frozen=True)
class LeavesCycles(FunctionTransform):
    """Leaves a reference cycle behind for every function (only the cyclic garbage collector frees it)."""

    name: ClassVar[str] = "LeavesCycles"
    opt_level: ClassVar[int] = 0

    directory: str = ""

    def transform_function(self, func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
        _Marks(self.directory, uuid.uuid4().hex)
        return func


# ---------------------------------------------------------------------------------------------------------------------
# analyses (read-only, a value per function)


class Shape(msgspec.Struct, frozen=True, array_like=True):
    """What :class:`MeasureFunctions` finds of a function."""

    kind: str
    size: int
    callees: list[str]


class MeasureFunctions(FunctionAnalysis):
    """Each function's kind, number of bindings (or loop-nest statements) and the module functions it calls."""

    value_type = Shape

    def analyze(self, func: BaseFunc, name: str, mod: IRModule, ctx: PassContext) -> Shape:
        if isinstance(func, relax.Function):
            return Shape("Function", len(func.bindings), sorted(set(_callees(func))))
        return Shape(type(func).__name__, len(repr(func)), [])


class MeasureOrFail(MeasureFunctions):
    """Fails on functions with exactly 3 or 5 bindings (as fails_on_some does)."""

    def analyze(self, func: BaseFunc, name: str, mod: IRModule, ctx: PassContext) -> Shape:
        if isinstance(func, relax.Function) and len(func.bindings) in (3, 5):
            raise Boom(f"cannot measure {len(func.bindings)} bindings")
        return super().analyze(func, name, mod, ctx)


class ReturnsAnObject(FunctionAnalysis):
    """Returns what msgpack cannot carry for functions with exactly 3 bindings."""

    def analyze(self, func: BaseFunc, name: str, mod: IRModule, ctx: PassContext) -> object:
        return threading.Lock() if isinstance(func, relax.Function) and len(func.bindings) == 3 else 1


class ReturnsTheWrongType(MeasureFunctions):
    """Says its values are Shapes, returns a number for PrimFuncs."""

    def analyze(self, func: BaseFunc, name: str, mod: IRModule, ctx: PassContext) -> Any:
        return 7 if not isinstance(func, relax.Function) else super().analyze(func, name, mod, ctx)


@function_pass(opt_level=0, name="RetypeFirstParam")
def retype_first_param(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    """Gives a function that calls none the signature of an int32 first parameter: its callers' calls no
    longer type-check (a change of a callee's signature, nothing else)."""
    if _callees(func) or not func.params or not isinstance(func.params[0].ty, TensorType):
        return func
    first = func.params[0]
    retyped = msgspec.structs.replace(first, ty=TensorType(first.ty.shape, "int32"))
    return msgspec.structs.replace(func, params=(retyped, *func.params[1:]))


class ExitsOnMain(MeasureFunctions):
    """Kills its process on ``main`` (as exits_worker does)."""

    def analyze(self, func: BaseFunc, name: str, mod: IRModule, ctx: PassContext) -> Shape:
        if isinstance(func, relax.Function) and _target(func):
            os._exit(3)
        return super().analyze(func, name, mod, ctx)


class CallsAPass(FunctionAnalysis):
    """Runs a pass on a module of the function alone and says how many bindings it left."""

    def analyze(self, func: BaseFunc, name: str, mod: IRModule, ctx: PassContext) -> int:
        if not isinstance(func, relax.Function):
            return 0
        alone = count_bindings(IRModule({name: func}))
        return int(alone[name].attrs.get("num_bindings", -1))
