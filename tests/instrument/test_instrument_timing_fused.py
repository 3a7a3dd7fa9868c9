"""PassTimingInstrument with fused chains and workers: the time of a function-level pass is the executor's.

For a function-level pass the instrument takes the wall and CPU time the
executor measured (summed over the processes that ran it, as MLIR's pass
timing does for threaded pipelines), in a fused chain and on its own; a module
pass or a Sequential keeps the calling process's own wall and CPU time. The
two-column report (``render_report``) is what ``parpass opt --time-passes`` prints.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator, Sequence

import pytest
from support import relax_func

sys.path.insert(0, os.path.dirname(__file__))  # workers import instrument_fusion_passes by reference

import instrument_fusion_passes as fp

from parpass.instrument import PassTiming, PassTimingInstrument, render_timing_report
from parpass.ir import IRModule
from parpass.transform import (
    FunctionLevelPass,
    InlineExecutor,
    PassContext,
    Sequential,
    get_function_pass_executor,
    set_function_pass_executor,
)
from parpass.transform.executor import ChainObserver, StageTiming

TVM_LINE = re.compile(r"^(\t*)(\S+): (\d+)us \[(-?\d+)us\] \((\d+\.\d\d)%; (-?\d+\.\d\d)%\)$")


class Reporting(InlineExecutor):
    """Runs in-process, but reports stage ``i`` as having taken ``1.5 + i`` s of wall and ``0.25 + i`` s of CPU."""

    def run(
        self,
        passes: Sequence[FunctionLevelPass],
        mod: IRModule,
        ctx: PassContext,
        observer: ChainObserver | None = None,
    ) -> IRModule:
        outer = observer

        class Fixed:
            def before_stage(self, stage: int) -> None:
                assert outer is not None
                outer.before_stage(stage)

            def after_stage(self, stage: int, timing: StageTiming) -> None:
                assert outer is not None
                outer.after_stage(stage, StageTiming(1.5 + stage, 0.25 + stage))

            def stage_failed(self, stage: int, error: BaseException) -> None:
                assert outer is not None
                outer.stage_failed(stage, error)

        return super().run(passes, mod, ctx, Fixed() if observer is not None else None)


@pytest.fixture
def reporting() -> Iterator[None]:
    installed = set_function_pass_executor(Reporting())
    yield
    set_function_pass_executor(installed)


def module(n: int = 6) -> IRModule:
    return IRModule({f"fn{i}": relax_func(1 + i % 3) for i in range(n)})


PIPELINE = Sequential([fp.start, fp.pass_a, fp.pass_d], name="Pipe")


@pytest.mark.usefixtures("reporting")
def test_a_fused_pass_gets_the_time_the_executor_reports() -> None:
    timing = PassTimingInstrument()
    with PassContext(instruments=[timing]):
        PIPELINE(module())
    (pipe,) = timing.timings
    start, a, d = pipe.children
    assert [start.name, a.name, d.name] == ["Start", "A", "D"]
    assert (a.total, a.wall, a.cpu, a.fused, a.remote) == (1.5, 1.5, 0.25, True, True)  # Reporting: not in_caller
    assert (d.total, d.wall, d.cpu, d.fused, d.remote) == (2.5, 2.5, 1.25, True, True)
    # module passes and Sequentials: this process's own wall (total) and CPU
    assert not start.fused and start.wall == start.total and start.cpu >= 0
    assert not pipe.fused and pipe.wall == pipe.total and pipe.cpu >= 0
    assert pipe.self_time == pytest.approx(pipe.total - start.total - 1.5 - 2.5)
    assert [c.name for c in a.children] == ["Inner"] * 6  # nested passes still nested


@pytest.mark.usefixtures("reporting")
def test_a_pass_on_its_own_gets_the_executor_s_wall_and_cpu_and_keeps_its_elapsed_total() -> None:
    timing = PassTimingInstrument()
    with PassContext(instruments=[timing], config={"parpass.fuse_passes": False}):
        PIPELINE(module())
    _, a, d = timing.timings[0].children
    for row in (a, d):
        assert (row.wall, row.cpu, row.fused) == (1.5, 0.25, False)  # a chain of one: stage 0
        assert 0 < row.total != row.wall  # the elapsed time in this process (TVM's), not the executor's
    assert timing.timings[0].children[0].name == "Start"


def test_a_failed_pass_keeps_its_own_time() -> None:
    timing = PassTimingInstrument()
    mod = IRModule({"fn0": relax_func(1), "fn1": relax_func(2, attrs={"boom": True})})
    with PassContext(instruments=[timing], config={"parpass.num_workers": 1}), pytest.raises(ValueError, match="boom"):
        Sequential([fp.pass_a, fp.pass_b, fp.pass_d], name="S")(mod)
    (seq,) = timing.timings
    assert seq.failed and [c.name for c in seq.children] == ["A", "B"]
    a, b = seq.children
    assert not a.failed and a.fused and b.failed and b.wall == b.total


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "pass-by-pass"])
@pytest.mark.parametrize("workers", [1, 2])
def test_cpu_of_a_function_pass_is_summed_over_the_processes_that_ran_it(workers: int, fuse: bool) -> None:
    """Burn spends BURN_SECONDS of CPU per function where it runs: the row shows at least all of it,
    which on workers the calling process, waiting for them, could not have measured of itself."""
    from parpass.parallel import default_executor

    default_executor.forget()
    n = 8
    timing = PassTimingInstrument()
    config = {"parpass.num_workers": workers, "parpass.parallel": "always", "parpass.fuse_passes": fuse}
    with PassContext(instruments=[timing], config=config):
        Sequential([fp.burn, fp.pass_d], name="S")(module(n))
    burn, d = timing.timings[0].children
    assert burn.name == "Burn" and burn.fused is fuse and d.fused is fuse
    assert burn.remote is (workers > 1) and d.remote is (workers > 1)  # measured in the workers, or here
    assert burn.cpu >= n * fp.BURN_SECONDS * 0.999
    assert burn.wall > 0 and d.wall > 0 and d.cpu >= 0
    assert [c.name for c in d.children] == ["Inner"] * n  # nested calls replayed from the workers, still nested
    # The report's Total counts this process's CPU time and the workers': the burn's at least, either way.
    total = re.search(r"^ +\d+\.\d{4} \(100\.0%\) +(\d+\.\d{4}) \(100\.0%\)  Total$", timing.render_report(), re.M)
    assert total is not None and float(total[1]) >= round(burn.cpu, 4) - 1e-4
    if workers > 1:
        assert all(w.parallel for w in default_executor.history)
        assert len(default_executor.history) == (1 if fuse else 2)


def test_render_keeps_tvm_s_format_for_fused_runs() -> None:
    timing = PassTimingInstrument()
    with PassContext(instruments=[timing], config={"parpass.num_workers": 1}):
        PIPELINE(module())
    lines = timing.render().splitlines()
    parsed = [TVM_LINE.match(line) for line in lines]
    assert all(parsed), lines
    assert [(len(m[1]), m[2]) for m in parsed if m][:4] == [(0, "Pipe"), (1, "Start"), (1, "A"), (2, "Inner")]


def test_render_report_has_wall_and_cpu_columns() -> None:
    tree = [
        PassTiming(
            "Pipe",
            2.0,
            0.5,
            (
                PassTiming("Start", 0.5, 0.5, cpu=0.4),
                PassTiming(
                    "A", 3.0, 3.0, (PassTiming("Inner", 0.001, 0.001, cpu=0.001),), cpu=2.5, fused=True, remote=True
                ),
                PassTiming("B", 0.25, 0.25, failed=True, cpu=0.2),
            ),
            cpu=1.0,
        ),
    ]
    assert tree[0].children[0].wall == 0.5  # wall defaults to total
    text = render_timing_report(tree, total_wall=2.5)
    assert text == (
        "===-------------------------------------------------------------------------===\n"
        "                      ... Pass execution timing report ...\n"
        "===-------------------------------------------------------------------------===\n"
        "  Total Execution Time: 2.5000 seconds\n"
        "  A function-level pass's wall and CPU time are summed over the processes that ran it (the workers);\n"
        "  a module pass's or Sequential's are this process's own. The Total's CPU time counts both.\n"
        "\n"
        "  ----Wall Time----  ----CPU Time-----  ----Name----\n"
        "    2.0000 ( 80.0%)    1.0000 ( 28.6%)  Pipe\n"
        "    0.5000 ( 20.0%)    0.4000 ( 11.4%)    Start\n"
        "    3.0000 (120.0%)    2.5000 ( 71.4%)    A\n"
        "    0.0010 (  0.0%)    0.0010 (  0.0%)      Inner\n"
        "    0.2500 ( 10.0%)    0.2000 (  5.7%)    B (failed)\n"
        "    2.5000 (100.0%)    3.5000 (100.0%)  Total\n"
    )
    assert render_timing_report([]) == ""


def test_render_report_of_a_run() -> None:
    timing = PassTimingInstrument()
    with PassContext(instruments=[timing], config={"parpass.num_workers": 1}):
        PIPELINE(module(2))
    text = timing.render_report()
    assert "Pass execution timing report" in text and "summed over the processes" in text
    names = [line[40:] for line in text.splitlines() if re.match(r"^ +\d+\.\d{4} \(", line)]
    assert names == ["Pipe", "  Start", "  A", "    Inner", "    Inner", "  D", "    Inner", "    Inner", "Total"]


def test_the_fixture_restores_the_installed_executor() -> None:
    before = get_function_pass_executor()
    fixture = reporting.__wrapped__()  # type: ignore[attr-defined]
    next(fixture)
    assert isinstance(get_function_pass_executor(), Reporting)
    with pytest.raises(StopIteration):
        next(fixture)
    assert get_function_pass_executor() is before
