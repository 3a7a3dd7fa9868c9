"""Instruments that do not read the module keep fusion, with the callbacks of a pass-by-pass run.

An instrument whose ``reads_module`` is False (and that does not override
``should_run``) lets a Sequential hand a run of function-level passes to the
executor as one chain; the chain observer then drives the instruments, so the
callback sequence (TVM's order: should_run, run_before_pass, the nested
passes' callbacks, run_after_pass or on_pass_error) is exactly the one a
pass-by-pass run gives, in-process and on workers, also when a pass fails in
the middle of the chain. ``parpass.fuse_passes`` turns fusion off.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any
from unittest import mock

import pytest
from support import prim_func, relax_func

sys.path.insert(0, os.path.dirname(__file__))  # workers import instrument_fusion_passes by reference

import instrument_fusion_passes as fp

from parpass.instrument import PassInstrument, PassTimingInstrument, pass_instrument
from parpass.ir import IRModule
from parpass.ir.serialization import to_bytes
from parpass.transform import (
    FunctionLevelPass,
    InlineExecutor,
    PassConfigError,
    PassContext,
    PassInfo,
    Sequential,
    get_function_pass_executor,
    list_configs,
    set_function_pass_executor,
)
from parpass.transform.executor import ChainObserver, StageTiming


class Trace(PassInstrument):
    """Records every callback as ``"<callback>:<pass>"``; does not read the modules it gets."""

    reads_module = False

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        self.log.append(f"before:{info.name}")

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        self.log.append(f"after:{info.name}")

    def on_pass_error(self, mod: IRModule, info: PassInfo, error: BaseException) -> None:
        self.log.append(f"error:{info.name}:{type(error).__name__}")

    def on_pass_timing(self, info: PassInfo, timing: StageTiming, fused: bool) -> None:
        self.log.append(f"timing:{info.name}")


class ReadsModule(PassInstrument):
    """An instrument that reads the modules (the default)."""

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        len(mod)


class Chains:
    """An executor that records the chains it is handed, and runs them with ``inner``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.chains: list[tuple[str, ...]] = []

    def run(
        self,
        passes: Sequence[FunctionLevelPass],
        mod: IRModule,
        ctx: PassContext,
        observer: ChainObserver | None = None,
    ) -> IRModule:
        self.chains.append(tuple(p.info.name for p in passes))
        out: IRModule = self.inner.run(passes, mod, ctx, observer)
        return out


@pytest.fixture
def chains() -> Iterator[Chains]:
    """The installed executor (the parallel one), wrapped to record the chains it runs."""
    installed = get_function_pass_executor()
    spy = Chains(installed)
    set_function_pass_executor(spy)
    yield spy
    set_function_pass_executor(installed)


@pytest.fixture
def should_run_log() -> Iterator[list[str]]:
    """Records the calls of the default ``should_run`` (still the default: fusion is allowed)."""
    log: list[str] = []

    def record(self: PassInstrument, mod: IRModule, info: PassInfo) -> bool:
        log.append(f"should_run:{info.name}")
        return True

    with mock.patch.object(PassInstrument, "should_run", record):
        yield log


def module(boom: bool = False) -> IRModule:
    """Ten dataflow functions and three loop functions, interleaved; with ``boom`` one in the middle fails B."""
    funcs: dict[str, Any] = {}
    for i in range(10):
        attrs = {"boom": True} if boom and i == 5 else None
        funcs[f"fn{i}"] = relax_func(1 + i % 4, attrs=attrs)
        if i % 4 == 1:
            funcs[f"loop{i}"] = prim_func(2 + i)
    return IRModule(funcs)


PIPELINE = Sequential([fp.start, fp.pass_a, fp.pass_b, fp.pass_c, fp.pass_d], name="Pipe")
CHAIN = ("A", "B", "C", "D")

#: name -> config of the four ways to run the pipeline, the first being the reference.
RUNS = {
    "pass by pass, in-process": {"parpass.num_workers": 1, "parpass.fuse_passes": False},
    "fused, in-process": {"parpass.num_workers": 1},
    "fused, 2 workers": {"parpass.num_workers": 2, "parpass.parallel": "always"},
    "pass by pass, 2 workers": {"parpass.num_workers": 2, "parpass.parallel": "always", "parpass.fuse_passes": False},
}


def traced(mod: IRModule, config: dict[str, Any], log: list[str]) -> tuple[bytes | None, BaseException | None]:
    log.clear()
    with PassContext(instruments=[Trace(log)], config=config):
        try:
            return to_bytes(PIPELINE(mod)), None
        except ValueError as err:
            return None, err


# ---------------------------------------------------------------------------------------------------------------------
# reads_module


def test_reads_module_defaults_to_true_and_timing_does_not_read() -> None:
    assert PassInstrument.reads_module is True
    assert PassTimingInstrument.reads_module is False

    @pass_instrument
    class Quiet:
        reads_module = False

        def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
            pass

    @pass_instrument
    class Plain:
        def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
            pass

    assert Quiet().reads_module is False and Plain().reads_module is True


# ---------------------------------------------------------------------------------------------------------------------
# when a Sequential fuses


@pytest.mark.parametrize(
    ("instruments", "config", "fused"),
    [
        (lambda: [], {}, True),
        (lambda: [Trace([])], {}, True),
        (lambda: [PassTimingInstrument(), Trace([])], {}, True),
        (lambda: [ReadsModule()], {}, False),
        (lambda: [Trace([]), ReadsModule()], {}, False),
        (lambda: [], {"parpass.fuse_passes": False}, False),
        (lambda: [PassTimingInstrument()], {"parpass.fuse_passes": False}, False),
        (lambda: [PassTimingInstrument()], {"parpass.fuse_passes": True}, True),
    ],
    ids=["none", "not-reading", "two-not-reading", "reading", "one-reading", "off", "off-timing", "on-timing"],
)
def test_fusion_needs_instruments_that_do_not_read_and_the_key_on(
    chains: Chains, instruments: Any, config: dict[str, Any], fused: bool
) -> None:
    with PassContext(instruments=instruments(), config={"parpass.num_workers": 1, **config}):
        out = PIPELINE(module())
    assert chains.chains == ([CHAIN] if fused else [(name,) for name in CHAIN])
    with PassContext(config={"parpass.num_workers": 1, "parpass.fuse_passes": False}):
        assert to_bytes(out) == to_bytes(PIPELINE(module()))


def test_an_instrument_that_may_veto_keeps_every_pass_its_own_wave(chains: Chains) -> None:
    @pass_instrument
    class QuietVeto:
        reads_module = False

        def should_run(self, mod: IRModule, info: PassInfo) -> bool:
            return info.name != "C"

    log: list[str] = []
    with PassContext(instruments=[QuietVeto(), Trace(log)], config={"parpass.num_workers": 1}):
        PIPELINE(module())
    assert chains.chains == [("A",), ("B",), ("D",)]  # C vetoed: honoured because nothing was fused
    assert "before:C" not in log


def test_an_executor_without_an_observer_runs_pass_by_pass_under_instruments() -> None:
    """An executor written before the observer existed (``run(passes, mod, ctx)``) keeps working."""
    seen: list[tuple[str, ...]] = []

    class Old:
        def run(self, passes: Sequence[FunctionLevelPass], mod: IRModule, ctx: PassContext) -> IRModule:
            seen.append(tuple(p.info.name for p in passes))
            return InlineExecutor().run(passes, mod, ctx)

    installed = set_function_pass_executor(Old())
    try:
        log: list[str] = []
        timing = PassTimingInstrument()
        with PassContext(instruments=[Trace(log), timing]):
            PIPELINE(module())
        with PassContext():
            PIPELINE(module())
    finally:
        set_function_pass_executor(installed)
    assert seen == [(name,) for name in CHAIN] + [CHAIN]  # fused only without instruments
    assert "timing:A" not in log  # the executor reported no time: the instrument measured its own
    assert [c.name for c in timing.timings[0].children] == ["Start", *CHAIN]


def test_fuse_passes_is_a_registered_bool_key() -> None:
    entry = list_configs()["parpass.fuse_passes"]
    assert entry["type"] == "bool" and entry["default"] is True and "fus" in entry["doc"]
    with pytest.raises(PassConfigError, match=r"'parpass\.fuse_passes' expects bool, got int 1"):
        PassContext(config={"parpass.fuse_passes": 1})
    with pytest.raises(PassConfigError, match=r"'parpass\.fuse_passes' expects bool, got str 'no'"):
        PassContext(config={"parpass.fuse_passes": "no"})


# ---------------------------------------------------------------------------------------------------------------------
# the trace of a fused chain


def test_fused_trace_is_tvm_order(chains: Chains, should_run_log: list[str]) -> None:
    """The exact sequence in-process, fused: per pass should_run, before, nested passes, timing, after."""
    mod = IRModule({"f": relax_func(1), "k": prim_func(4), "g": relax_func(2)})
    traced(mod, {"parpass.num_workers": 1}, should_run_log)
    assert chains.chains == [CHAIN]

    def nested() -> list[str]:
        return ["should_run:Inner", "before:Inner", "after:Inner"]

    def stage(name: str, calls: int) -> list[str]:
        body = [e for _ in range(calls) for e in nested()]
        return [f"should_run:{name}", f"before:{name}", *body, f"timing:{name}", f"after:{name}"]

    assert should_run_log == [
        "should_run:Pipe",
        "before:Pipe",
        "should_run:Start",
        "before:Start",
        "after:Start",
        *stage("A", 2),  # f and g
        *stage("B", 2),
        *stage("C", 0),  # k: a PrimFunc, no nested call
        *stage("D", 2),
        "after:Pipe",
    ]


@pytest.mark.parametrize("boom", [False, True], ids=["passes", "fails-in-the-middle"])
def test_same_trace_fused_pass_by_pass_and_on_workers(chains: Chains, should_run_log: list[str], boom: bool) -> None:
    from parpass.parallel import default_executor

    mod = module(boom)
    results: dict[str, tuple[list[str], bytes | None, BaseException | None]] = {}
    for name, config in RUNS.items():
        chains.chains.clear()
        default_executor.forget()
        out, err = traced(mod, config, should_run_log)
        results[name] = (list(should_run_log), out, err)
        if "fused" in name:
            assert chains.chains == [CHAIN], name
        else:
            expected = [(p,) for p in CHAIN[:2]] if boom else [(p,) for p in CHAIN]
            assert chains.chains == expected, name
        if "2 workers" in name:
            assert any(w.parallel and "B" in w.passes for w in default_executor.history), name

    reference, ref_out, ref_err = results["pass by pass, in-process"]
    if boom:
        assert ref_out is None and ref_err is not None
        assert "error:B:ValueError" in reference and "after:B" not in reference and "before:C" not in reference
        assert reference[-1] == "error:Pipe:ValueError"
    else:
        assert ref_out is not None and reference[-1] == "after:Pipe"
    assert reference.count("before:Inner") == (16 if boom else 30)  # A: ten calls; B: ten, or six up to fn5; D: ten
    for name, (trace, out, err) in results.items():
        assert trace == reference, name
        assert out == ref_out, name
        if boom:
            assert type(err) is ValueError and str(err) == str(ref_err), name
            assert "parpass: raised in pass 'B' on function 'fn5'" in getattr(err, "__notes__", []), name
