"""Pass statistics: declaring counters, counting under a context, totals and their report."""

from __future__ import annotations

import pytest

from parpass.instrument import PassInstrument
from parpass.ir import IRModule, relax
from parpass.testing import random_module
from parpass.transform import PassContext, PassInfo, Sequential, Statistic, function_pass, module_pass
from parpass.transform.statistics import declared_statistics

SEEN = Statistic("TestCountFunctions", "seen", "functions seen")
BINDINGS = Statistic("TestCountFunctions", "bindings", "bindings seen")
MODULES = Statistic("TestCountModule", "modules", "modules seen")

COUNTING = {"parpass.pass_statistics": True, "parpass.num_workers": 1}


@function_pass(opt_level=0, name="TestCountFunctions")
def count_functions(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    SEEN.add()
    BINDINGS.add(len(func.bindings))
    return func


@module_pass(opt_level=0, name="TestCountModule")
def count_module(mod: IRModule, ctx: PassContext) -> IRModule:
    MODULES.add()
    return mod


@module_pass(opt_level=0, name="TestCallsCounter")
def calls_counter(mod: IRModule, ctx: PassContext) -> IRModule:
    """Runs TestCountFunctions from inside itself: its counts are TestCountFunctions's."""
    return count_functions(mod)


@pytest.fixture(scope="module")
def mod() -> IRModule:
    return random_module(num_functions=12, num_prim_funcs=3, size=6, seed=4)


def _functions(mod: IRModule) -> list[relax.Function]:
    return [f for f in (mod[n] for n in mod.names()) if isinstance(f, relax.Function)]


def test_counts_what_the_passes_add(mod: IRModule) -> None:
    targets = [f for f in _functions(mod) if not f.attrs.get("SkipOptimization")]
    with PassContext(config=COUNTING) as ctx:
        Sequential([count_functions, count_module])(mod)
    stats = ctx.pass_statistics
    assert stats["TestCountFunctions", "seen"] == len(targets) > 0
    assert stats["TestCountFunctions", "bindings"] == sum(len(f.bindings) for f in targets)
    assert stats["TestCountModule", "modules"] == 1
    # declared order within a pass, passes in the order they ran
    assert list(stats.as_dict()) == ["TestCountFunctions", "TestCountModule"]
    assert list(stats.as_dict()["TestCountFunctions"]) == ["seen", "bindings"]


def test_totals_add_up_over_calls_under_one_context(mod: IRModule) -> None:
    with PassContext(config=COUNTING) as ctx:
        count_module(mod)
        count_module(mod)
    assert ctx.pass_statistics["TestCountModule", "modules"] == 2


def test_nothing_is_counted_unless_the_context_asks(mod: IRModule) -> None:
    with PassContext(config={"parpass.num_workers": 1}) as ctx:
        count_functions(mod)
    assert ctx.pass_statistics.as_dict() == {}
    with PassContext(config=COUNTING) as outer:
        with PassContext(config={"parpass.num_workers": 1}):  # a nested context that does not count
            count_module(mod)
        count_module(mod)  # the outer one counts again once the inner one is left
    assert outer.pass_statistics["TestCountModule", "modules"] == 1


def test_a_pass_that_ran_lists_its_declared_counters_at_zero() -> None:
    empty = IRModule({})
    with PassContext(config=COUNTING) as ctx:
        count_functions(empty)
    assert ctx.pass_statistics.as_dict() == {"TestCountFunctions": {"seen": 0, "bindings": 0}}


def test_counts_of_a_nested_pass_go_to_that_pass(mod: IRModule) -> None:
    with PassContext(config=COUNTING) as ctx:
        calls_counter(mod)
    table = ctx.pass_statistics.as_dict()
    assert table["TestCountFunctions"]["seen"] > 0
    # the nested pass is not a top-level run, but it counted: listed after the passes that ran
    assert list(table) == ["TestCountFunctions"]


def test_report_is_mlir_list_view(mod: IRModule) -> None:
    with PassContext(config=COUNTING) as ctx:
        count_functions(mod)
    seen, bindings = (
        ctx.pass_statistics["TestCountFunctions", "seen"],
        ctx.pass_statistics["TestCountFunctions", "bindings"],
    )
    width = len(str(max(seen, bindings)))
    lines = ctx.pass_statistics.render().splitlines()
    assert lines[0] == lines[2] == "===" + "-" * 73 + "==="
    assert lines[1].strip() == "... Pass statistics report ..."
    assert lines[3:] == [
        "TestCountFunctions",
        f"  (S) {seen:>{width}} seen - functions seen",
        f"  (S) {bindings:>{width}} bindings - bindings seen",
    ]


def test_an_instrument_reads_the_counts_of_the_pass_that_just_ran(mod: IRModule) -> None:
    seen: list[tuple[str, int]] = []

    class Reader(PassInstrument):
        def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
            stats = PassContext.current().pass_statistics
            seen.append((info.name, stats["TestCountFunctions", "seen"]))

    with PassContext(config=COUNTING, instruments=[Reader()]) as ctx:
        Sequential([count_functions, count_functions])(mod)
    total = ctx.pass_statistics["TestCountFunctions", "seen"]
    assert seen == [("TestCountFunctions", total // 2), ("TestCountFunctions", total), ("sequential", total)]


def test_declaring_a_counter_again() -> None:
    Statistic("TestCountFunctions", "seen", "functions seen")  # the same declaration: fine
    with pytest.raises(ValueError, match=r"TestCountFunctions\.seen is declared already"):
        Statistic("TestCountFunctions", "seen", "something else")
    with pytest.raises(ValueError, match="counter name"):
        Statistic("TestCountFunctions", " padded ")
    with pytest.raises(TypeError, match="description must be a str"):
        Statistic("TestCountFunctions", "other", 3)  # type: ignore[arg-type]
    assert declared_statistics()["TestCountFunctions"]["seen"] == "functions seen"


def test_add_takes_an_int_only_when_counting() -> None:
    with PassContext(config=COUNTING):
        with pytest.raises(TypeError, match=r"TestCountModule.modules: add\(\) takes an int, got 1.5"):
            MODULES.add(1.5)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="got True"):
            MODULES.add(True)
    MODULES.add(1.5)  # type: ignore[arg-type]  # nobody counts: nothing is checked, nothing is kept


def test_statistic_pickles_by_its_declaration() -> None:
    import pickle

    again = pickle.loads(pickle.dumps(SEEN))
    assert (again.pass_name, again.name, again.description) == ("TestCountFunctions", "seen", "functions seen")
