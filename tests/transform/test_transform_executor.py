"""The executor seam: InlineExecutor's contract, installing another executor, slot identity."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

from parpass.ir import IRModule, relax
from parpass.transform import (
    FunctionLevelPass,
    FunctionPassExecutor,
    InlineExecutor,
    PassContext,
    Sequential,
    function_pass,
    get_function_pass_executor,
    prim_func_pass,
    set_function_pass_executor,
)


def test_set_returns_previous_and_none_restores_inline() -> None:
    installed = get_function_pass_executor()  # the parallel executor, once parpass.parallel is imported
    assert isinstance(installed, FunctionPassExecutor)

    class Other(InlineExecutor):
        pass

    other = Other()
    previous = set_function_pass_executor(other)
    try:
        assert previous is installed
        assert get_function_pass_executor() is other
        assert set_function_pass_executor(None) is other
        assert type(get_function_pass_executor()) is InlineExecutor
    finally:
        set_function_pass_executor(installed)
    assert get_function_pass_executor() is installed
    with pytest.raises(TypeError, match="run"):
        set_function_pass_executor(object())  # type: ignore[arg-type]


def test_installed_executor_runs_the_body_between_instrument_callbacks(mod: IRModule) -> None:
    from parpass.instrument import pass_instrument

    events: list[str] = []

    @pass_instrument
    class Rec:
        def run_before_pass(self, m: IRModule, info: object) -> None:
            events.append("before")

        def run_after_pass(self, m: IRModule, info: object) -> None:
            events.append("after")

    class Spy:
        def run(self, passes: Sequence[FunctionLevelPass], m: IRModule, ctx: PassContext) -> IRModule:
            events.append("executor:" + ",".join(p.info.name for p in passes))
            assert ctx is PassContext.current()
            return InlineExecutor().run(passes, m, ctx)

    previous = set_function_pass_executor(Spy())
    try:
        p = function_pass(lambda f, m, c: f, opt_level=0, name="Id")
        with PassContext(instruments=[Rec()]):
            p(mod)
    finally:
        set_function_pass_executor(previous)
    assert events == ["before", "executor:Id", "after"]


def test_executor_must_return_a_new_module(mod: IRModule) -> None:
    class Broken:
        def __init__(self, result: object) -> None:
            self.result = result

        def run(self, passes: object, m: IRModule, ctx: object) -> object:
            return m if self.result == "input" else self.result

        def __repr__(self) -> str:
            return "Broken()"

    for result, message in ((None, "Broken() returned NoneType, not an IRModule"), ("input", "returned its input")):
        previous = set_function_pass_executor(Broken(result))  # type: ignore[arg-type]
        try:
            with pytest.raises(TypeError, match=re.escape(message)):
                function_pass(lambda f, m, c: f, opt_level=0)(mod)
            with pytest.raises(TypeError, match=re.escape(message)):  # the fused path checks too
                Sequential([function_pass(lambda f, m, c: f, opt_level=0)] * 2)(mod)
        finally:
            set_function_pass_executor(previous)


def test_inline_executor_contract(mod: IRModule) -> None:
    a = function_pass(lambda f, m, c: f.with_attr("a", 1), opt_level=0, name="a")
    same = prim_func_pass(lambda f, m, c: f, opt_level=0, name="same")
    ctx = PassContext()
    bytes_k = mod.encoded_function("k")
    bytes_f = mod.encoded_function("f")
    out = InlineExecutor().run([a, same], mod, ctx)
    assert out is not mod
    assert out.names() == mod.names()
    assert out["f"].attrs == {"a": 1} and "a" not in mod["f"].attrs
    # unchanged functions keep their slot: the cached encoded bytes survive
    assert out.encoded_function("k") is bytes_k
    assert out.encoded_function("f") is not bytes_f
    # nothing to do still gives a new module
    nothing = InlineExecutor().run([same], mod, ctx)
    assert nothing is not mod and nothing.fingerprint() == mod.fingerprint()


def test_chain_equals_pass_by_pass(mod: IRModule) -> None:
    order: list[str] = []

    def make(name: str) -> FunctionLevelPass:
        @function_pass(opt_level=0, name=name)
        def run(func: relax.Function, m: IRModule, ctx: PassContext) -> relax.Function:
            order.append(f"{name}:{len(func.bindings)}")
            return func.with_attr(name, sorted(func.attrs))

        return run

    chain = [make("p1"), make("p2")]
    fused = InlineExecutor().run(chain, mod, PassContext())
    assert order == ["p1:1", "p1:2", "p2:1", "p2:2"]  # all of pass 1 (module order), then pass 2
    order.clear()
    serial = chain[1](chain[0](mod))
    assert order == ["p1:1", "p1:2", "p2:1", "p2:2"]
    assert [fused[n] for n in mod.names()] == [serial[n] for n in mod.names()]
    assert fused["f"].attrs == {"p1": [], "p2": ["p1"]}


def test_lazily_held_functions(mod: IRModule) -> None:
    lazy = IRModule()
    for name in mod.names():
        lazy.set_encoded_function(name, mod.encoded_function(name))
    out = Sequential([function_pass(lambda f, m, c: f.with_attr("x", 1), opt_level=0)])(lazy)
    assert out["f"].attrs == {"x": 1} and out["k"] == mod["k"]


def test_inline_executor_tells_the_observer_where_each_stage_begins_and_ends(mod: IRModule) -> None:
    """before_stage(i), what pass i emits, after_stage(i, its time, measured in this process), in chain order;
    stage_failed(i, error) instead when pass i raised, and the error then propagates."""
    from parpass.transform.executor import StageTiming

    events: list[object] = []

    class Observer:
        def before_stage(self, stage: int) -> None:
            events.append(("before", stage))

        def after_stage(self, stage: int, timing: StageTiming) -> None:
            events.append(("after", stage, timing.in_caller, timing.wall >= 0 and timing.cpu >= 0))

        def stage_failed(self, stage: int, error: BaseException) -> None:
            events.append(("failed", stage, str(error)))

    def make(name: str, fails_on: int = -1) -> FunctionLevelPass:
        @function_pass(opt_level=0, name=name)
        def run(func: relax.Function, m: IRModule, ctx: PassContext) -> relax.Function:
            events.append(f"{name}:{len(func.bindings)}")
            if len(func.bindings) == fails_on:
                raise ValueError(f"{name} fails")
            return func

        return run

    InlineExecutor().run([make("p1"), make("p2")], mod, PassContext(), Observer())
    assert events == [
        ("before", 0),
        "p1:1",
        "p1:2",
        ("after", 0, True, True),
        ("before", 1),
        "p2:1",
        "p2:2",
        ("after", 1, True, True),
    ]
    events.clear()
    with pytest.raises(ValueError, match="p2 fails"):
        InlineExecutor().run([make("p1"), make("p2", fails_on=1), make("p3")], mod, PassContext(), Observer())
    stage_0 = [("before", 0), "p1:1", "p1:2", ("after", 0, True, True)]
    assert events == [*stage_0, ("before", 1), "p2:1", ("failed", 1, "p2 fails")]
    assert StageTiming(1.0, 2.0).in_caller is False  # an executor's workers measured it, unless it says otherwise
