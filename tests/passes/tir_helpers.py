"""Helpers of the loop-level (PrimFunc) pass tests: small modules, deep IR, and the checks every pass claims."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from parpass.ir import IRModule, PrimFunc, assert_structural_equal, check_well_formed, tir, to_bytes
from parpass.testing import assert_same_meaning, random_module
from parpass.transform import Pass

#: Property tests: a few small modules each (every example interprets every PrimFunc twice).
PROPERTY_SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
SEEDS = st.integers(min_value=0, max_value=100_000)

I32 = "int32"
F32 = "float32"


def imm(value: int, dtype: str = I32) -> tir.IntImm:
    return tir.IntImm(dtype, value)


def small_prim_module(seed: int) -> IRModule:
    """A random module with a few PrimFuncs (and two dataflow functions the passes must not touch)."""
    return random_module(num_functions=2, num_prim_funcs=5, size=12, seed=seed)


def prim_names(mod: IRModule) -> list[str]:
    return [name for name in mod.names() if isinstance(mod[name], PrimFunc)]


def module_of(func: PrimFunc, name: str = "main") -> IRModule:
    return IRModule({name: func})


def run_pass(p: Pass, func: PrimFunc) -> PrimFunc:
    """``p`` applied to a module holding only ``func``; the new function."""
    out = p(module_of(func))["main"]
    assert isinstance(out, PrimFunc)
    return out


def assert_ir(actual: Any, expected: Any) -> None:
    """Structural equality (variables compared by definition), showing both sides on failure."""
    try:
        assert_structural_equal(actual, expected)
    except AssertionError as err:
        raise AssertionError(f"{err}\n--- got:\n{actual}\n--- expected:\n{expected}") from None


def same_meaning(before: IRModule, after: IRModule, names: list[str], seeds: tuple[int, ...] = (0, 1)) -> None:
    """The interpreter gives exactly the same buffers before and after, for each function and input seed."""
    for name in names:
        for seed in seeds:
            assert_same_meaning(before, after, name, seed=seed)


def seed_of(mod: IRModule) -> int:
    """An input seed that varies with the module (each example checks one set of inputs)."""
    return len(mod.names()) + sum(len(name) for name in mod.names())


def check_prim_func_pass(
    factory: Callable[[], Pass], mod: IRModule, *, idempotent: bool = True
) -> tuple[IRModule, IRModule]:
    """The properties every loop-level pass claims, on ``mod``.

    - the output is well formed and has the same functions;
    - dataflow functions and ``SkipOptimization`` PrimFuncs are the very same objects;
    - every PrimFunc means the same, exactly (these passes never reassociate floats);
    - the output is deterministic (a second run on an equal input gives the same bytes);
    - with ``idempotent``, a second run returns every function as the same object.
    """
    p = factory()
    after = p(mod)
    check_well_formed(after)
    assert after.names() == mod.names()
    names = prim_names(mod)
    for name in mod.names():
        func = mod[name]
        if func.skip_optimization or not isinstance(func, PrimFunc):
            assert after[name] is func, f"{p.info.name} touched {name}, which it must leave alone"
    same_meaning(mod, after, names, seeds=(seed_of(mod),))
    rerun = factory()(mod)
    for name in names:
        assert to_bytes(rerun[name]) == to_bytes(after[name]), f"{p.info.name} is not deterministic on {name}"
    if idempotent:
        again = factory()(after)
        for name in after.names():
            assert again[name] is after[name], f"{p.info.name} is not idempotent on {name}:\n{after[name]}"
    return mod, after


def skipped_copy(func: PrimFunc) -> IRModule:
    """A module with ``func`` twice: as ``main`` and marked ``SkipOptimization`` as ``skipped``."""
    return IRModule({"main": func, "skipped": func.with_attr("SkipOptimization", True)})


def deep_expression(depth: int, leaf: tir.PrimExpr, step: Callable[[tir.PrimExpr, int], tir.PrimExpr]) -> tir.PrimExpr:
    """``step`` applied ``depth`` times, starting from ``leaf``."""
    e = leaf
    for k in range(depth):
        e = step(e, k)
    return e


def deep_nest(depth: int, body: tir.Stmt, kind: tir.ForKind, extent: int = 1, first_vid: int = 1000) -> tir.Stmt:
    """``depth`` nested loops of ``kind`` and ``extent`` around ``body``."""
    for k in range(depth):
        var = tir.Var(first_vid + k, f"i{k}")
        body = tir.For(var, imm(0), imm(extent), kind, body)
    return body
