"""Passes for the fusion-under-instruments tests.

They live in an importable module (not a test file) so that worker processes
load them by reference, as they would a user's passes.
"""

from __future__ import annotations

import time

from parpass.ir import IRModule, relax, tir
from parpass.transform import PassContext, function_pass, module_pass, prim_func_pass


@module_pass(opt_level=0, name="Inner")
def inner(mod: IRModule, ctx: PassContext) -> IRModule:
    """The pass that the function passes below call from inside their functions (a nested pass call)."""
    return mod


@module_pass(opt_level=0, name="Start")
def start(mod: IRModule, ctx: PassContext) -> IRModule:
    return mod


@function_pass(opt_level=0, name="A")
def pass_a(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    inner(IRModule({"main": func}))
    return func.with_attr("a", len(func.bindings))


@function_pass(opt_level=0, name="B")
def pass_b(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    """Calls Inner, then raises on a function marked ``boom`` (so nested events precede the failure)."""
    inner(IRModule({"main": func}))
    if func.attrs.get("boom"):
        raise ValueError(f"boom on a function of {len(func.bindings)} bindings")
    return func.with_attr("b", 1)


@prim_func_pass(opt_level=0, name="C")
def pass_c(func: tir.PrimFunc, mod: IRModule, ctx: PassContext) -> tir.PrimFunc:
    return func.with_attr("c", 1)


@function_pass(opt_level=0, name="D")
def pass_d(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    inner(IRModule({"main": func}))
    return func


#: CPU seconds :func:`burn` spends on every function.
BURN_SECONDS = 0.02


@function_pass(opt_level=0, name="Burn")
def burn(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    """Spends :data:`BURN_SECONDS` of CPU time (of the process that runs it) on every function."""
    end = time.process_time() + BURN_SECONDS
    while time.process_time() < end:
        pass
    return func.with_attr("burnt", 1)
