"""What workers print, log, warn and trigger in instruments is replayed in the parent, in module order."""

from __future__ import annotations

import logging
import warnings

import pytest
from parallel_support import module_bytes, parallel_ctx
from ptest_passes import calls_failing_nested_pass, calls_nested_pass, chatty, count_bindings

from parpass.instrument import PassInstrument, pass_instrument
from parpass.ir import IRModule, structural_hash
from parpass.transform import PassContext, Sequential


def _capture_everything(pipeline, mod: IRModule, workers: int, capsys, caplog) -> tuple:  # type: ignore[no-untyped-def]
    caplog.clear()
    capsys.readouterr()
    with warnings.catch_warnings(record=True) as caught, parallel_ctx(workers):
        warnings.simplefilter("always")
        pipeline(mod)
    out, err = capsys.readouterr()
    logs = [(r.name, r.levelno, r.getMessage()) for r in caplog.records]
    warns = [(w.category, str(w.message)) for w in caught]
    return out, err, logs, warns


def test_captured_output_is_replayed_in_module_order(small_module: IRModule, capsys, caplog, history) -> None:  # type: ignore[no-untyped-def]
    caplog.set_level(logging.INFO)
    serial = _capture_everything(chatty, small_module, 1, capsys, caplog)
    parallel = _capture_everything(chatty, small_module, 2, capsys, caplog)
    assert history[-1].parallel
    assert serial[0].count("out ") == len(chatty.targets(small_module))
    assert serial[0] and serial[1] and serial[2] and serial[3]
    assert parallel == serial


def test_parent_logging_level_filters_replayed_records(small_module: IRModule, capsys, caplog) -> None:  # type: ignore[no-untyped-def]
    caplog.set_level(logging.ERROR)
    _, _, logs, _ = _capture_everything(chatty, small_module, 2, capsys, caplog)
    assert logs == []  # WARNING records are dropped by the parent's own level


def test_parent_warning_filters_apply(small_module: IRModule, capsys) -> None:  # type: ignore[no-untyped-def]
    with warnings.catch_warnings(record=True) as caught, parallel_ctx(2):
        warnings.simplefilter("ignore")
        chatty(small_module)
    assert caught == []


class _Trace(PassInstrument):
    def __init__(self, tag: str, trace: list) -> None:  # type: ignore[type-arg]
        self.tag, self.trace = tag, trace

    def run_before_pass(self, mod: IRModule, info) -> None:  # type: ignore[no-untyped-def]
        self.trace.append((self.tag, "before", info.name, structural_hash(mod)))

    def run_after_pass(self, mod: IRModule, info) -> None:  # type: ignore[no-untyped-def]
        self.trace.append((self.tag, "after", info.name, structural_hash(mod)))


def _trace(pipeline, mod: IRModule, workers: int) -> list:  # type: ignore[no-untyped-def, type-arg]
    trace: list = []  # type: ignore[type-arg]
    cfg = {"parpass.num_workers": workers, "parpass.parallel": "always" if workers > 1 else "never"}
    with PassContext(instruments=[_Trace("a", trace), _Trace("b", trace)], config=cfg):
        pipeline(mod)
    return trace


def test_instrument_trace_with_nested_passes_is_identical(small_module: IRModule, history) -> None:  # type: ignore[no-untyped-def]
    pipeline = Sequential([count_bindings, calls_nested_pass])
    serial = _trace(pipeline, small_module, 1)
    parallel = _trace(pipeline, small_module, 2)
    assert any(w.parallel and w.passes == ("CallsNestedPass",) for w in history)
    nested = [t for t in serial if t[2] == "InnerModulePass"]
    assert len(nested) > 2 * 10  # one before and after per instrument per function
    assert parallel == serial


def test_a_vetoing_instrument_keeps_the_pass_in_process(small_module: IRModule, history) -> None:  # type: ignore[no-untyped-def]
    @pass_instrument
    class SkipInner:
        def should_run(self, mod: IRModule, info) -> bool:  # type: ignore[no-untyped-def]
            return info.name != "InnerModulePass"

    with PassContext(instruments=[SkipInner()], config={"parpass.num_workers": 2, "parpass.parallel": "always"}):
        out = calls_nested_pass(small_module)
    assert not history[-1].parallel and "veto" in history[-1].reason
    # the veto was honoured: the inner pass returned its input, which has no "inner" attribute
    assert out["main"].attrs["inner"] is None


def test_a_veto_set_on_the_instance_keeps_the_pass_in_process(small_module: IRModule, history) -> None:  # type: ignore[no-untyped-def]
    @pass_instrument
    class Plain:
        pass

    plain = Plain()
    plain.should_run = lambda mod, info: info.name != "InnerModulePass"  # an override of this instrument only
    with PassContext(instruments=[plain], config={"parpass.num_workers": 2, "parpass.parallel": "always"}):
        out = calls_nested_pass(small_module)
    assert not history[-1].parallel and "veto" in history[-1].reason
    assert out["main"].attrs["inner"] is None


@pytest.mark.parametrize("workers", [1, 2])
def test_passes_without_instruments_record_nothing(small_module: IRModule, workers: int) -> None:
    with parallel_ctx(workers):
        out = calls_nested_pass(small_module)
    assert out["main"].attrs["inner"] == 1


class _Errors(PassInstrument):
    """Records each error an instrument hears of: the pass, the error, and what it was raised from."""

    def __init__(self, seen: list[tuple[str, ...]]) -> None:
        self.seen = seen

    def on_pass_error(self, mod: IRModule, info, error: BaseException) -> None:  # type: ignore[no-untyped-def]
        cause = error.__cause__
        self.seen.append((info.name, type(error).__name__, str(error), type(cause).__name__, str(cause)))


def test_an_instrument_hears_a_nested_pass_s_error_with_what_it_was_raised_from(small_module: IRModule) -> None:
    """A pass run inside a function pass in a worker fails ``from`` another error: the parent's instruments get
    that error with its cause, as in the serial run."""
    seen: dict[int, list[tuple[str, ...]]] = {1: [], 2: []}
    outs = {}
    for workers in (1, 2):
        cfg = {"parpass.num_workers": workers, "parpass.parallel": "always" if workers > 1 else "never"}
        with PassContext(instruments=[_Errors(seen[workers])], config=cfg):
            outs[workers] = calls_failing_nested_pass(small_module)
    assert module_bytes(outs[2]) == module_bytes(outs[1])
    assert seen[1] and all(s[:2] == ("InnerFailingPass", "Wrapped") and s[3] == "KeyError" for s in seen[1])
    assert seen[2] == seen[1]
