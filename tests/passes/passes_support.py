"""Helpers for the tests of the standard passes: small modules, and the checks every pass must pass.

``tests/passes`` is on ``sys.path`` while its tests run, so they ``from passes_support import ...``.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from parpass.ir import Function, IRModule, PrimFunc, TensorType, check_well_formed, relax, structural_equal
from parpass.testing import assert_same_meaning, random_module
from parpass.transform import Pass

F32 = TensorType((4,), "float32")

#: Hypothesis settings of the property tests: few, small modules (each example interprets a whole module).
PROPERTY_SETTINGS = settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
SEEDS = st.integers(min_value=0, max_value=100_000)


def small_random_module(seed: int) -> IRModule:
    """A small random module: a few dataflow functions (some calling others) and a few PrimFuncs."""
    return random_module(num_functions=6, num_prim_funcs=2, size=10, seed=seed)


def dataflow_names(mod: IRModule) -> list[str]:
    return [name for name in mod.names() if isinstance(mod[name], Function)]


def run_on(p: Pass, func: Function, **others: Any) -> Function:
    """``p`` applied to a module holding ``func`` as ``main`` (plus ``others``); the new ``main``."""
    out = p(IRModule({"main": func, **others}))
    result = out["main"]
    assert isinstance(result, Function)
    return result


def same_meaning(before: IRModule, after: IRModule, names: list[str], rtol: float = 0.0) -> None:
    """The interpreter gives the same outputs for ``names`` before and after (stdout of ``print`` ops hidden)."""
    with contextlib.redirect_stdout(io.StringIO()):
        for name in names:
            for seed in (0, 1):
                assert_same_meaning(before, after, name, seed=seed, rtol=rtol)


def check_function_pass(factory: Callable[[], Pass], seed: int) -> tuple[IRModule, IRModule]:
    """The properties every standard function-level pass claims, on a random module.

    - the output is well formed;
    - every dataflow function means the same (exactly: these passes never reassociate arithmetic);
    - SkipOptimization functions and PrimFuncs are the very same objects;
    - the pass is idempotent: a second run returns every function as the same object.
    """
    before = small_random_module(seed)
    p = factory()
    after = p(before)
    check_well_formed(after)
    assert after.names() == before.names()
    for name in before.names():
        func = before[name]
        if func.skip_optimization or isinstance(func, PrimFunc):
            assert after[name] is func, f"{p.info.name} touched {name}, which it must leave alone"
    same_meaning(before, after, dataflow_names(before))
    again = p(after)
    for name in after.names():
        assert again[name] is after[name], f"{p.info.name} is not idempotent on {name} (seed {seed})"
    return before, after


def count_bindings(func: relax.Function) -> int:
    """Bindings in ``func``, nested blocks included."""
    count = 0
    stack: list[Any] = [func.body]
    while stack:
        node = stack.pop()
        if type(node) is relax.Binding:
            count += 1
        stack.extend(node.children())
    return count


def assert_same_ir(actual: Any, expected: Any) -> None:
    """Structural equality (variables compared by definition, not by id or name)."""
    assert structural_equal(actual, expected), f"got:\n{actual}\nexpected:\n{expected}"
