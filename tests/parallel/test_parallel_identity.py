"""Parallel runs give the serial run's module, byte for byte, at any worker count."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from parallel_support import module_bytes, parallel_ctx
from ptest_passes import count_bindings, keep_even, look_up_callees, tag_prim_funcs

from parpass.ir import IRModule, relax
from parpass.testing import random_module
from parpass.transform import PassContext, Sequential, function_pass


def _run(pipeline, mod: IRModule, workers: int) -> IRModule:  # type: ignore[no-untyped-def]
    with parallel_ctx(workers):
        return pipeline(mod)


PIPELINES = {
    "one pass": count_bindings,
    "partly unchanged": keep_even,
    "prim funcs": tag_prim_funcs,
    "fused chain with lookups": Sequential([count_bindings, look_up_callees, keep_even, tag_prim_funcs]),
}


@settings(max_examples=8, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    workers=st.sampled_from([2, 3]),
    pipeline=st.sampled_from(sorted(PIPELINES)),
)
def test_byte_identical_to_serial(seed: int, workers: int, pipeline: str) -> None:
    mod = random_module(num_functions=16, num_prim_funcs=6, size=8, seed=seed)
    before = module_bytes(mod)
    serial = _run(PIPELINES[pipeline], mod, 1)
    parallel = _run(PIPELINES[pipeline], mod, workers)
    assert module_bytes(parallel) == module_bytes(serial)
    assert parallel.names() == mod.names()
    assert module_bytes(mod) == before  # the caller's module is never changed


@function_pass(opt_level=0, name="SkipEven")
def skip_even(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    """Marks functions with an even number of bindings SkipOptimization: the next pass must pass them over."""
    return func if len(func.bindings) % 2 else func.with_attr("SkipOptimization", True)


def test_workers_report_the_new_attributes_so_the_next_wave_reads_no_bytes(
    small_module: IRModule, history, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    serial = _run(Sequential([skip_even, keep_even]), small_module, 1)
    out = _run(skip_even, small_module, 2)
    assert history[-1].parallel
    import parpass.ir.peek

    def no_peeking(data: object) -> None:
        raise AssertionError("the attributes of a worker's result were read from its bytes")

    monkeypatch.setattr(parpass.ir.peek, "peek_function", no_peeking)
    held = [n for n in out.names() if not out.is_decoded(n)]  # bytes from the workers
    skipped = [n for n in out.names() if out.kind_and_attrs(n)[1].get("SkipOptimization")]
    assert set(skipped) & set(held) and [n for n in out.names() if not out.is_decoded(n)] == held
    again = _run(keep_even, out, 2)  # picks its targets from the heads the workers sent
    assert history[-1].parallel
    assert module_bytes(again) == module_bytes(serial)
    assert all(not again.kind_and_attrs(n)[1].get("even") for n in skipped)


def test_results_stay_encoded_and_unchanged_functions_keep_their_slot(small_module: IRModule, history) -> None:  # type: ignore[no-untyped-def]
    mod = small_module.copy()
    out = _run(keep_even, mod, 2)
    assert history[-1].parallel
    changed = [n for n in mod.names() if out.kind_and_attrs(n)[1].get("even")]
    assert changed
    for name in changed:
        assert not out.is_decoded(name)  # a worker's result is held as bytes until read
    before, after = mod.fingerprint(), out.fingerprint()
    for i in range(0, len(before) - 1, 2):
        name = before[i]
        if name not in changed:
            assert after[i + 1] is before[i + 1], name


def test_fused_chain_is_one_wave_and_sees_the_previous_pass(small_module: IRModule, history) -> None:  # type: ignore[no-untyped-def]
    chain = Sequential([count_bindings, look_up_callees])
    out = _run(chain, small_module, 2)
    waves = [w for w in history if w.parallel]
    assert [w.passes for w in waves] == [("CountBindings", "LookUpCallees")]
    # the workers had to run CountBindings again on looked-up callees: next time the chain is cut there
    history.clear()
    assert module_bytes(_run(chain, small_module, 2)) == module_bytes(out)
    assert [w.passes for w in history if w.parallel] == [("CountBindings",), ("LookUpCallees",)]
    main = out["main"]
    # main calls other functions; LookUpCallees saw them after CountBindings
    assert main.attrs["callees"]
    assert all(not entry.endswith(":-1") for entry in main.attrs["callees"])
    assert module_bytes(out) == module_bytes(_run(chain, small_module, 1))


def test_module_view_lookup_sees_module_before_the_pass(small_module: IRModule) -> None:
    out = _run(look_up_callees, _run(count_bindings, small_module, 2), 2)
    serial = _run(look_up_callees, _run(count_bindings, small_module, 1), 1)
    assert module_bytes(out) == module_bytes(serial)


def test_skip_optimization_functions_are_not_shipped_or_changed(history) -> None:  # type: ignore[no-untyped-def]
    mod = random_module(num_functions=40, num_prim_funcs=0, size=6, seed=5)
    skipped = [n for n in mod.names() if mod[n].attrs.get("SkipOptimization")]
    assert skipped
    out = _run(count_bindings, mod, 2)
    for name in skipped:
        assert out[name] is mod[name]
    assert history[-1].functions == len(mod) - len(skipped)


def test_workers_see_the_callers_context(small_module: IRModule, history) -> None:  # type: ignore[no-untyped-def]
    from ptest_passes import reads_context

    from parpass.transform import PassContext

    config = {"parpass.num_workers": 2, "parpass.parallel": "always", "parpass.timeout": 120.0}
    with PassContext(opt_level=3, required_pass=["Chatty"], disabled_pass=["KeepEven"], config=config):
        out = reads_context(small_module)
    assert history[-1].parallel
    assert out["main"].attrs["ctx"] == [3, ["Chatty"], ["KeepEven"], 120.0]
