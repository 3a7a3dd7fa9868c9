"""Pass statistics and opt-bisect at any worker count: the same totals, numbers, lines and output."""

from __future__ import annotations

import pytest
from parallel_support import module_bytes, parallel_ctx
from ptest_passes import counts_after_nested_context, counts_bindings, counts_lookups

from parpass.instrument import PassInstrument
from parpass.ir import IRModule
from parpass.ir.serialization import decode_function
from parpass.parallel import default_executor
from parpass.passes import default_pipeline
from parpass.testing import random_module
from parpass.transform import Pass, PassContext, PassInfo, Sequential


@pytest.fixture(scope="module")
def mod() -> IRModule:
    return random_module(num_functions=60, num_prim_funcs=30, size=8, seed=5)


def _pipeline() -> Pass:
    # CountsLookups after CountsBindings in one fused chain: its lookups make workers compute
    # CountsBindings again on other functions, which must not count twice.
    return Sequential([counts_bindings, counts_lookups, default_pipeline(2)])


def _statistics(mod: IRModule, workers: int, **config: object) -> tuple[dict[str, dict[str, int]], list]:
    with parallel_ctx(workers, **{"parpass.pass_statistics": True, **config}) as ctx:
        out = _pipeline()(mod)
    return ctx.pass_statistics.as_dict(), module_bytes(out)


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "pass-by-pass"])
def test_statistics_totals_equal_at_1_2_and_3_workers(mod: IRModule, fuse: bool) -> None:
    serial, serial_out = _statistics(mod, 1, **{"parpass.fuse_passes": fuse})
    assert serial["CountsBindings"]["bindings"] > 0 and serial["CountsLookups"]["lookups"] > 0
    assert sum(v for counters in serial.values() for v in counters.values()) > 0
    for workers in (2, 3):
        table, out = _statistics(mod, workers, **{"parpass.fuse_passes": fuse})
        assert table == serial, f"{workers} workers"
        assert list(table) == list(serial)
        assert out == serial_out


def test_counts_after_a_nested_context_in_a_pass_are_kept_in_workers(mod: IRModule) -> None:
    tables = []
    for workers in (1, 2):
        with parallel_ctx(workers, **{"parpass.pass_statistics": True, "parpass.parallel": "always"}) as ctx:
            counts_after_nested_context(mod)
        tables.append(ctx.pass_statistics.as_dict())
    assert tables[0]["CountsAfterNestedContext"]["bindings"] > 0
    assert tables[1] == tables[0]


class _SeesStatistics(PassInstrument):
    """Reads no module (the chain stays fused) and notes the context's totals after each pass."""

    reads_module = False

    def __init__(self) -> None:
        self.after: list[tuple[str, int, int]] = []

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        stats = PassContext.current().pass_statistics
        self.after.append((info.name, stats["CountsBindings", "bindings"], stats["CountsLookups", "lookups"]))


def test_statistics_reach_a_fused_chain_instrument_per_pass(mod: IRModule) -> None:
    with parallel_ctx(2, **{"parpass.parallel": "always"}):  # the executor learns that CountsLookups looks up
        Sequential([counts_bindings, counts_lookups])(mod)
    seen = _SeesStatistics()
    with parallel_ctx(2, **{"parpass.pass_statistics": True, "parpass.parallel": "always"}) as ctx:
        ctx.override_instruments([seen])
        Sequential([counts_bindings, counts_lookups])(mod)
    # handed to the executor as one chain; it runs a pass that looks up callees as a segment of its own
    waves = [w for w in default_executor.history if set(w.passes) & {"CountsBindings", "CountsLookups"}]
    assert [w.passes for w in waves[-2:]] == [("CountsBindings",), ("CountsLookups",)]
    assert all(w.parallel for w in waves[-2:])
    serial, _ = _statistics(mod, 1)
    bindings, lookups = serial["CountsBindings"]["bindings"], serial["CountsLookups"]["lookups"]
    assert lookups > 0
    # each pass's counts are in the totals when the instrument hears of that pass, and not before
    assert seen.after == [
        ("CountsBindings", bindings, 0),
        ("CountsLookups", bindings, lookups),
        ("sequential", bindings, lookups),
    ]


@pytest.mark.parametrize("limit", [0, 37, 95, 400, 10**6])
def test_bisect_lines_and_output_identical_at_1_and_2_workers(
    mod: IRModule, limit: int, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = []
    for workers in (1, 2):
        with parallel_ctx(workers, **{"parpass.bisect_limit": limit}) as ctx:
            out = default_pipeline(2)(mod)
        runs.append((capsys.readouterr().err, module_bytes(out), ctx.bisect_log))
    (err1, out1, log1), (err2, out2, log2) = runs
    assert err1 == err2
    assert out1 == out2
    assert log1 == log2
    lines = err1.splitlines()
    assert len(lines) == len(log1) > 0
    assert sum(1 for line in lines if line.startswith("BISECT: running pass")) == min(limit, len(log1))


def test_a_pass_class_runs_in_workers_with_its_options(mod: IRModule) -> None:
    from ptest_passes import TagWith

    outs = []
    for workers in (1, 2):
        with parallel_ctx(workers):
            outs.append(module_bytes(TagWith(label="n")(mod)))
    assert outs[0] == outs[1]
    tagged = [decode_function(data).attrs.get("n") for _, data in outs[1]]
    assert any(value is not None for value in tagged)  # the option reached the workers
