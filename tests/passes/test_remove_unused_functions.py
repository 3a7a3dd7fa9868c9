"""RemoveUnusedFunctions: reachability from entry points, laziness, and the pass properties."""

from __future__ import annotations

from hypothesis import given
from passes_support import F32, PROPERTY_SETTINGS, SEEDS, same_meaning, small_random_module

from parpass.ir import Function, GlobalVar, IRModule, PrimFunc, check_well_formed, structural_equal
from parpass.ir.builder import FunctionBuilder, PrimFuncBuilder, call
from parpass.passes import RemoveUnusedFunctions
from parpass.transform import PassContext


def func(name: str, *callees: str, entry: bool = False, **attrs: object) -> Function:
    """``x -> callee_n(... callee_1(x))``, an entry point (``global_symbol``) if ``entry``."""
    if entry:
        attrs["global_symbol"] = name
    fb = FunctionBuilder(name, attrs=attrs)
    x = fb.param("x", F32)
    for callee in callees:
        x = fb.emit(call(GlobalVar(callee), x))
    return fb.finish(fb.emit(call("negative", x)))


def kernel(name: str, entry: bool = False) -> PrimFunc:
    pb = PrimFuncBuilder(name, attrs={"global_symbol": name} if entry else {})
    a = pb.buffer("A", (4,), "float32")
    b = pb.buffer("B", (4,), "float32")
    with pb.for_range("i", 4) as i:
        pb.store(b, (i,), a[i] + 1.0)
    return pb.finish()


def test_keeps_what_entry_points_reach_in_module_order() -> None:
    mod = IRModule(
        {
            "leaf": func("leaf"),
            "orphan": func("orphan", "leaf"),  # calls a kept function, but nothing calls it
            "k_used": kernel("k_used"),
            "k_unused": kernel("k_unused"),
            "k_entry": kernel("k_entry", entry=True),
            "mid": func("mid", "leaf", "k_used"),
            "main": func("main", "mid", entry=True),
            "skipped": func("skipped", "helper", SkipOptimization=True),  # left alone, with what it calls
            "helper": func("helper"),
        }
    )
    out = RemoveUnusedFunctions()(mod)
    assert out.names() == ["leaf", "k_used", "k_entry", "mid", "main", "skipped", "helper"]
    for name in out.names():
        assert out[name] is mod[name]
    assert len(mod) == 9  # the input module is not changed
    check_well_formed(out)


def test_call_cycles_and_no_entry_points() -> None:
    mod = IRModule({"a": func("a", "b"), "b": func("b", "a"), "main": func("main", "a", entry=True)})
    assert RemoveUnusedFunctions()(mod).names() == ["a", "b", "main"]
    unreachable_cycle = IRModule({"a": func("a", "b"), "b": func("b", "a"), "main": func("main", entry=True)})
    assert RemoveUnusedFunctions()(unreachable_cycle).names() == ["main"]
    # Without entry points nothing can be called from outside, so nothing is kept.
    assert RemoveUnusedFunctions()(IRModule({"a": func("a"), "k": kernel("k")})).names() == []


def test_nothing_to_remove_leaves_the_module_as_it_was() -> None:
    mod = IRModule({"leaf": func("leaf"), "main": func("main", "leaf", entry=True), "k": kernel("k", entry=True)})
    out = RemoveUnusedFunctions()(mod)
    assert out.names() == mod.names()
    assert all(out[name] is mod[name] for name in mod.names())


def test_a_module_held_as_bytes_is_not_decoded() -> None:
    source = IRModule(
        {
            "leaf": func("leaf"),
            "unused": func("unused", "leaf"),
            "k": kernel("k", entry=True),
            "main": func("main", "leaf", entry=True),
        }
    )
    lazy = IRModule()
    for name in source.names():
        lazy.set_encoded_function(name, source.encoded_function(name))
    out = RemoveUnusedFunctions()(lazy)
    assert out.names() == ["leaf", "k", "main"]
    assert not any(lazy.is_decoded(name) for name in lazy.names())  # calls are read from the bytes


@PROPERTY_SETTINGS
@given(seed=SEEDS)
def test_properties_on_random_modules(seed: int) -> None:
    before = small_random_module(seed)
    p = RemoveUnusedFunctions()
    after = p(before)
    check_well_formed(after)
    kept = after.names()
    assert kept == [name for name in before.names() if name in kept]  # module order
    for name in before.names():
        attrs = before[name].attrs
        if "global_symbol" in attrs or attrs.get("SkipOptimization"):
            assert name in kept
    for name in kept:
        assert after[name] is before[name]
    entries = [n for n in kept if isinstance(after[n], Function) and "global_symbol" in after[n].attrs]
    same_meaning(before, after, entries)
    assert structural_equal(p(after), after)  # idempotent


def test_random_module_has_work() -> None:
    before = small_random_module(3)
    after = RemoveUnusedFunctions()(before)
    assert len(after) < len(before), "nothing removed: the test proves nothing"


def test_statistics_count_removed_functions() -> None:
    mod = IRModule(
        {
            "leaf": func("leaf"),
            "orphan": func("orphan", "leaf"),  # removed
            "k_unused": kernel("k_unused"),  # removed
            "k_used": kernel("k_used"),
            "main": func("main", "leaf", "k_used", entry=True),
            "cycle_a": func("cycle_a", "cycle_b"),  # removed: an unreachable cycle
            "cycle_b": func("cycle_b", "cycle_a"),  # removed
        }
    )
    with PassContext(config={"parpass.pass_statistics": True}) as ctx:
        out = RemoveUnusedFunctions()(mod)
    assert out.names() == ["leaf", "k_used", "main"]
    assert ctx.pass_statistics.as_dict()["RemoveUnusedFunctions"] == {"removed": 4}
    with PassContext(config={"parpass.pass_statistics": True}) as ctx:
        assert RemoveUnusedFunctions()(out).names() == out.names()
    assert ctx.pass_statistics.as_dict()["RemoveUnusedFunctions"] == {"removed": 0}
