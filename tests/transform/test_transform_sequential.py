"""Sequential: the enabling rule, required passes (transitive, deduplicated, cycles), fusion."""

from __future__ import annotations

import pytest

from parpass.errors import NameNotFoundError
from parpass.ir import IRModule, relax
from parpass.transform import (
    FunctionLevelPass,
    InlineExecutor,
    Pass,
    PassContext,
    PassDependencyError,
    Sequential,
    function_pass,
    module_pass,
    prim_func_pass,
    register_pass,
    set_function_pass_executor,
)


def recorder(
    log: list[str], name: str, opt_level: int = 0, required: list[str] | None = None, change: bool = False
) -> Pass:
    """A module pass that appends its name to ``log`` (and changes the module if ``change``)."""

    def run(mod: IRModule, ctx: PassContext) -> IRModule:
        log.append(name)
        if change:
            mod["f"] = mod["f"].with_attr(name, len(log))
        return mod

    return module_pass(run, opt_level=opt_level, name=name, required=required)


def test_runs_in_order(mod: IRModule) -> None:
    log: list[str] = []
    out = Sequential([recorder(log, "A"), recorder(log, "B"), recorder(log, "A")])(mod)
    assert log == ["A", "B", "A"] and out.names() == mod.names()
    assert Sequential()(mod) is mod  # nothing ran: the input comes back


def test_enabling_rule(mod: IRModule) -> None:
    log: list[str] = []
    seq = Sequential([recorder(log, "lo", 1), recorder(log, "hi", 3), recorder(log, "req", 9), recorder(log, "off", 0)])
    with PassContext(opt_level=2, required_pass=["req"], disabled_pass=["off"]):
        seq(mod)
    assert log == ["lo", "req"]
    log.clear()
    with PassContext(opt_level=3, required_pass=["off"], disabled_pass=["off"]):
        seq(mod)  # disabled wins over required
    assert log == ["lo", "hi"]


def test_direct_call_always_runs(mod: IRModule) -> None:
    log: list[str] = []
    p = recorder(log, "hi", 5)
    with PassContext(opt_level=0, disabled_pass=["hi"]):
        p(mod)
    assert log == ["hi"]


def test_disabled_sequential_is_skipped_whole(mod: IRModule) -> None:
    log: list[str] = []
    inner = Sequential([recorder(log, "a"), recorder(log, "b")], name="Inner")
    outer = Sequential([inner, recorder(log, "c")], name="Outer")
    with PassContext(disabled_pass=["Inner"]):
        outer(mod)
    assert log == ["c"]
    log.clear()
    with PassContext(opt_level=0):
        Sequential([Sequential([recorder(log, "x")], opt_level=1, name="High")])(mod)
    assert log == []


def test_required_passes_run_first_transitively_once(mod: IRModule) -> None:
    log: list[str] = []
    register_pass("Base")(lambda: recorder(log, "Base"))
    register_pass("Mid")(lambda: recorder(log, "Mid", required=["Base"]))
    register_pass("Other")(lambda: recorder(log, "Other", required=["Base"]))
    seq = Sequential(
        [
            recorder(log, "P", required=["Mid", "Other"]),
            recorder(log, "Q", required=["Base"]),
        ]
    )
    seq(mod)
    # Base once (the module never changed), dependencies before dependents.
    assert log == ["Base", "Mid", "Other", "P", "Q"]
    log.clear()
    seq(mod)  # a new run of the Sequential starts afresh
    assert log == ["Base", "Mid", "Other", "P", "Q"]


def test_required_pass_runs_again_after_the_module_changed(mod: IRModule) -> None:
    log: list[str] = []
    register_pass("Analyze")(lambda: recorder(log, "Analyze"))
    seq = Sequential(
        [
            recorder(log, "A", required=["Analyze"]),
            recorder(log, "B", required=["Analyze"]),  # A did not change the module: no rerun
            recorder(log, "Mutate", change=True),
            recorder(log, "C", required=["Analyze"]),  # the module changed: rerun
        ]
    )
    seq(mod)
    assert log == ["Analyze", "A", "B", "Mutate", "Analyze", "C"]


def test_required_passes_ignore_opt_level_and_disabled(mod: IRModule) -> None:
    log: list[str] = []
    register_pass("Heavy")(lambda: recorder(log, "Heavy", opt_level=9))
    with PassContext(opt_level=0, disabled_pass=["Heavy"]):
        Sequential([recorder(log, "P", required=["Heavy"])])(mod)
    assert log == ["Heavy", "P"]  # as in TVM: a required pass is run whatever the level


def test_required_not_resolved_for_disabled_pass(mod: IRModule) -> None:
    log: list[str] = []
    with PassContext(disabled_pass=["P"]):
        Sequential([recorder(log, "P", required=["NotRegistered"])])(mod)
    assert log == []


def test_unknown_required_names_closest(mod: IRModule) -> None:
    register_pass("FoldConstantX")(lambda: recorder([], "FoldConstantX"))
    log: list[str] = []
    with pytest.raises(NameNotFoundError) as info:
        Sequential([recorder(log, "first"), recorder(log, "P", required=["FoldConstntX"])])(mod)
    msg = str(info.value)
    assert "'FoldConstntX'" in msg and "required by 'P'" in msg and "'FoldConstantX'" in msg
    assert log == ["first"]  # nothing of P ran


def test_cycle_is_rejected_with_the_cycle_printed(mod: IRModule) -> None:
    log: list[str] = []
    register_pass("A")(lambda: recorder(log, "A", required=["B"]))
    register_pass("B")(lambda: recorder(log, "B", required=["C"]))
    register_pass("C")(lambda: recorder(log, "C", required=["A"]))
    with pytest.raises(PassDependencyError, match=r"cycle: A -> B -> C -> A"):
        Sequential([recorder(log, "P", required=["A"])])(mod)
    with pytest.raises(PassDependencyError, match=r"cycle: P -> P"):
        Sequential([recorder(log, "P", required=["P"])])(mod)
    register_pass("Loop")(lambda: recorder(log, "Loop", required=["P2"]))
    with pytest.raises(PassDependencyError, match=r"cycle: P2 -> Loop -> P2"):
        Sequential([recorder(log, "P2", required=["Loop"])])(mod)
    assert log == []  # resolution fails before anything runs


def test_nested_sequential_required(mod: IRModule) -> None:
    log: list[str] = []
    register_pass("Prep")(lambda: recorder(log, "Prep"))
    inner = Sequential([recorder(log, "x")], name="Inner", required=["Prep"])
    Sequential([inner])(mod)
    assert log == ["Prep", "x"]
    log.clear()
    inner(mod)  # called directly, a pass's own required list is not resolved (as in TVM)
    assert log == ["x"]


def test_required_runs_once_across_nested_sequentials(mod: IRModule) -> None:
    log: list[str] = []
    register_pass("Analyze")(lambda: recorder(log, "Analyze"))
    inner = Sequential([recorder(log, "B", required=["Analyze"])], name="Inner")
    deeper = Sequential([Sequential([recorder(log, "C", required=["Analyze"])], name="In2")], name="In1")
    changing = Sequential([recorder(log, "D", change=True), recorder(log, "E", required=["Analyze"])], name="In3")
    Sequential([recorder(log, "A", required=["Analyze"]), inner, deeper, changing])(mod)
    # one run of the outer Sequential: Analyze again only after D changed the module
    assert log == ["Analyze", "A", "B", "C", "D", "Analyze", "E"]
    log.clear()
    inner(mod)  # a run of its own: the state of the earlier run is not kept
    assert log == ["Analyze", "B"]


class _CountingExecutor(InlineExecutor):
    def __init__(self) -> None:
        self.chains: list[list[str]] = []

    def run(self, passes, mod, ctx):  # type: ignore[no-untyped-def]
        self.chains.append([p.info.name for p in passes])
        return super().run(passes, mod, ctx)


@pytest.fixture
def counting() -> _CountingExecutor:
    executor = _CountingExecutor()
    previous = set_function_pass_executor(executor)
    yield executor
    set_function_pass_executor(previous)


def _tag(name: str, opt_level: int = 0, required: list[str] | None = None, prim: bool = False) -> FunctionLevelPass:
    deco = prim_func_pass if prim else function_pass
    return deco(lambda f, m, c: f.with_attr(name, True), opt_level=opt_level, name=name, required=required)


def test_fusion_of_consecutive_function_level_passes(mod: IRModule, counting: _CountingExecutor) -> None:
    log: list[str] = []
    register_pass("Need")(lambda: recorder(log, "Need"))
    seq = Sequential(
        [
            _tag("a"),
            _tag("skipped", opt_level=5),
            _tag("b", prim=True),
            _tag("c"),
            recorder(log, "M"),
            _tag("d"),
            _tag("e", required=["Need"]),
            _tag("f"),
            _tag("g"),
        ]
    )
    out = seq(mod)
    assert counting.chains == [["a", "b", "c"], ["d"], ["e"], ["f", "g"]]
    assert out["f"].attrs == {k: True for k in "acdefg"} and out["k"].attrs == {"b": True}
    # With instruments the passes run one by one (each gets its own callbacks).
    from parpass.instrument import PassInstrument

    counting.chains.clear()
    with PassContext(instruments=[PassInstrument()]):
        fused_out = seq(mod)
    assert counting.chains == [["a"], ["b"], ["c"], ["d"], ["e"], ["f"], ["g"]]
    assert [fused_out[n].attrs for n in mod.names()] == [out[n].attrs for n in mod.names()]


def test_chain_means_pass_by_pass(mod: IRModule) -> None:
    """Pass 2 of a chain sees the module pass 1 produced, for every function."""
    seen: list[bool] = []

    @function_pass(opt_level=0)
    def first(func: relax.Function, m: IRModule, ctx: PassContext) -> relax.Function:
        return func.with_attr("first", True)

    @function_pass(opt_level=0)
    def second(func: relax.Function, m: IRModule, ctx: PassContext) -> relax.Function:
        seen.append(all("first" in m[n].attrs for n in ("f", "g")))
        return func

    Sequential([first, second])(mod)
    assert seen == [True, True]


def test_sequential_validation() -> None:
    with pytest.raises(TypeError, match=r"passes\[1\] is not a Pass"):
        Sequential([_tag("a"), "b"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="list of passes"):
        Sequential("ab")  # type: ignore[arg-type]
    s = Sequential([_tag("a")], opt_level=2, name="S", required=["X"])
    assert (s.info.name, s.info.opt_level, s.info.required) == ("S", 2, ("X",))
    assert [p.info.name for p in s.passes] == ["a"]
    assert Sequential().info.name == "sequential" and Sequential().info.opt_level == 0
