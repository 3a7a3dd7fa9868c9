"""default_pipeline: its passes and order, and meaning preserved on random modules."""

from __future__ import annotations

import pytest
from hypothesis import given
from passes_support import PROPERTY_SETTINGS, SEEDS, count_bindings, same_meaning, small_random_module

import parpass.passes
from parpass.ir import Function, PrimFunc, check_well_formed
from parpass.passes import PIPELINE_PASSES, default_pipeline
from parpass.transform import (
    FunctionPass,
    ModulePass,
    PassContext,
    PrimFuncPass,
    Sequential,
    list_passes,
    parse_pipeline,
)

DATAFLOW = ["InferType", "CanonicalizeBindings", "FoldConstant", "EliminateCommonSubexpr", "DeadCodeElimination"]
LOOP_LEVEL = ["Simplify", "UnrollLoop", "VectorizeLoop", "FlattenBuffer", "RemoveNoOp"]


def test_every_pipeline_pass_is_registered() -> None:
    assert [name for name in PIPELINE_PASSES if name not in list_passes()] == []


def test_order_and_kinds() -> None:
    pipeline = default_pipeline()
    assert isinstance(pipeline, Sequential)
    names = [p.info.name for p in pipeline.passes]
    assert names == [*DATAFLOW, *LOOP_LEVEL, "RemoveUnusedFunctions"]
    kinds = [type(p) for p in pipeline.passes]
    assert all(issubclass(k, FunctionPass) for k in kinds[:5])
    assert all(issubclass(k, PrimFuncPass) for k in kinds[5:10])
    assert issubclass(kinds[10], ModulePass)
    for name in names:  # every pass of the pipeline is exported by parpass.passes under its name
        assert getattr(parpass.passes, name)().info.name == name


def test_opt_level_selects_passes() -> None:
    for level in (0, 1, 2, 3):
        names = [p.info.name for p in default_pipeline(level).passes]
        assert all(p.info.opt_level <= level for p in default_pipeline(level).passes)
        assert names == [n for n in PIPELINE_PASSES if n in names]  # order kept
    assert default_pipeline(0).passes[0].info.name == "InferType"
    with pytest.raises(ValueError, match="opt_level"):
        default_pipeline(-1)


def test_str_is_a_spec_that_parses_back() -> None:
    """str() of the default pipeline is its pipeline spec, so the spec round trip holds for it too."""
    for level in (0, 2):
        pipeline = default_pipeline(level)
        spec = str(pipeline)
        assert spec.startswith("seq{name=default_pipeline}(InferType,")
        again = parse_pipeline(spec)
        assert str(again) == spec
        (inner,) = again.passes
        assert isinstance(inner, Sequential) and inner.info.name == "default_pipeline"
        assert [p.info.name for p in inner.passes] == [p.info.name for p in pipeline.passes]


@PROPERTY_SETTINGS
@given(seed=SEEDS)
def test_meaning_of_entry_functions_is_kept(seed: int) -> None:
    before = small_random_module(seed)
    after = default_pipeline()(before)
    check_well_formed(after)
    entries = [name for name in before.names() if "global_symbol" in before[name].attrs]
    assert all(name in after for name in entries)
    # Dataflow functions: exact (no pass reassociates arithmetic there). Loop-level functions: Simplify may
    # reassociate floating-point arithmetic, so a relative tolerance applies to them.
    same_meaning(before, after, [n for n in entries if isinstance(before[n], Function)])
    same_meaning(before, after, [n for n in entries if isinstance(before[n], PrimFunc)], rtol=1e-5)
    for name in before.names():
        if before[name].skip_optimization:
            assert after[name] is before[name]


def test_output_is_deterministic() -> None:
    mod = small_random_module(11)
    first, second = default_pipeline()(mod), default_pipeline()(mod)
    assert first.names() == second.names()
    for name in first.names():
        assert first.encoded_function(name) == second.encoded_function(name)


def test_pipeline_shrinks_a_random_module() -> None:
    before = small_random_module(3)
    with PassContext(opt_level=2):
        after = default_pipeline()(before)
    dataflow = [n for n in after.names() if isinstance(after[n], Function) and not after[n].skip_optimization]
    assert sum(count_bindings(after[n]) for n in dataflow) < sum(count_bindings(before[n]) for n in dataflow)  # type: ignore[arg-type]
    assert len(after) <= len(before)


def test_a_pipeline_kept_after_its_run_keeps_no_module() -> None:
    """InferType and DeadCodeElimination learn facts about the module they run on; a pipeline kept for the
    next run must not keep that module (its IR) alive, nor a cycle that only the collector would free."""
    import gc

    from parpass.ir import IRModule

    def modules() -> int:
        return sum(isinstance(o, IRModule) for o in gc.get_objects())

    pipeline = default_pipeline(2)
    gc.collect()
    gc.disable()  # what is freed must be freed by its last reference going, not by a collection
    try:
        before = modules()
        mod = small_random_module(3)
        with PassContext(opt_level=2, config={"parpass.num_workers": 1}):
            out = pipeline(mod)
        assert out is not mod
        del mod, out
        assert modules() == before
    finally:
        gc.enable()
