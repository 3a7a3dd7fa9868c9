"""Analyses (a value per function, nothing changed) and the well-formedness instrument on worker processes.

A :class:`~parpass.transform.analysis.FunctionAnalysis` runs where function-level
passes run; its values, errors and their order are those of the serial run. The
:class:`~parpass.instrument.WellFormedInstrument` checks through one: with workers,
the functions a pass changed are checked there, and the parent decodes none of them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from parallel_support import parallel_ctx
from ptest_passes import (
    Boom,
    CallsAPass,
    ExitsOnMain,
    MeasureFunctions,
    MeasureOrFail,
    ReturnsAnObject,
    ReturnsTheWrongType,
    Shape,
    count_bindings,
    retype_first_param,
)

from parpass.errors import IRError, WorkerCrashedError
from parpass.instrument import WellFormedInstrument
from parpass.ir import IRModule, from_bytes, to_bytes
from parpass.ir.node import SKIP_OPTIMIZATION
from parpass.passes import CanonicalizeBindings, FoldConstant, InferType
from parpass.testing import random_module
from parpass.transform import PassContext, Sequential, function_pass

#: Bound on a pipeline run in a thread; only a hang gets near it.
CALL_LIMIT = 300.0


def _module() -> IRModule:
    """A module read from bytes (as from a file): nothing decoded, no digest known."""
    return from_bytes(to_bytes(random_module(num_functions=60, num_prim_funcs=20, size=8, seed=5)))


def _serial(analysis_type: type[MeasureFunctions], mod: IRModule, names: list[str] | None = None) -> dict:
    with parallel_ctx(1) as ctx:
        return analysis_type("Measure", names).run(mod, ctx)


@pytest.mark.parametrize("workers", [1, 2])
def test_an_analysis_gives_the_serial_values_in_module_order(workers: int, history) -> None:  # type: ignore[no-untyped-def]
    mod = _module()
    expected = {name: MeasureFunctions("M").analyze(mod[name], name, mod, PassContext()) for name in mod.names()}
    with parallel_ctx(workers) as ctx:
        values = MeasureFunctions("Measure").run(_module(), ctx)
    assert values == expected
    assert list(values) == mod.names()
    assert all(type(v) is Shape for v in values.values())  # decoded as its value_type, wherever computed
    assert any(v.callees for v in values.values())
    waves = [w for w in history if w.passes == ("Measure",)]
    assert len(waves) == 1 and waves[0].parallel == (workers > 1)
    assert waves[0].functions == (len(mod.names()) if workers > 1 else 0)


def test_an_analysis_sees_every_function_and_only_the_ones_it_names(history) -> None:  # type: ignore[no-untyped-def]
    mod = _module().with_attr("unused", 1)
    skipped = mod.names()[0]
    mod[skipped] = mod[skipped].with_attr(SKIP_OPTIMIZATION, True)  # a pass would leave it: an analysis does not
    names = [mod.names()[i] for i in (3, 0, 41, 70)]
    with parallel_ctx(2) as ctx:
        every = MeasureFunctions("Measure").run(mod, ctx)
        some = MeasureFunctions("Measure", names).run(mod, ctx)
    assert skipped in every and len(every) == len(mod.names())
    assert list(some) == sorted(names, key=mod.names().index)  # module order, whatever order they were named in
    assert some == {name: every[name] for name in some}
    assert [w.functions for w in history if w.passes == ("Measure",)] == [len(mod.names()), len(names)]


@pytest.mark.parametrize("workers", [1, 2])
def test_the_first_error_of_an_analysis_in_module_order_names_it_and_the_function(workers: int) -> None:
    mod = _module()
    first = next(n for n in mod.names() if getattr(mod[n], "bindings", ()) and len(mod[n].bindings) in (3, 5))
    with parallel_ctx(workers) as ctx, pytest.raises(Boom) as info:
        MeasureOrFail("MeasureOrFail").run(mod, ctx)
    assert f"parpass: raised in pass 'MeasureOrFail' on function {first!r}" in info.value.__notes__


def test_a_worker_an_analysis_kills_is_reported_and_the_next_analysis_runs(small_module: IRModule) -> None:
    before = to_bytes(small_module)
    with parallel_ctx(2) as ctx, pytest.raises(WorkerCrashedError) as info:
        ExitsOnMain("ExitsOnMain").run(small_module, ctx)
    assert info.value.pass_name == "'ExitsOnMain'" and info.value.functions[:1] == ("main",)
    assert to_bytes(small_module) == before
    with parallel_ctx(2) as ctx:
        assert MeasureFunctions("Measure").run(small_module, ctx) == _serial(MeasureFunctions, small_module)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_value_msgpack_cannot_carry_is_an_error_wherever_it_was_computed(workers: int) -> None:
    mod = _module()
    first = next(n for n in mod.names() if len(getattr(mod[n], "bindings", ())) == 3)
    with parallel_ctx(workers) as ctx, pytest.raises(TypeError, match="'Objects' returned a value msgpack") as info:
        ReturnsAnObject("Objects").run(mod, ctx)
    assert f"parpass: raised in pass 'Objects' on function {first!r}" in info.value.__notes__


@pytest.mark.parametrize("workers", [1, 2])
def test_a_value_not_of_the_value_type_names_the_analysis_and_the_function(workers: int) -> None:
    mod = _module()
    first = next(n for n in mod.names() if type(mod[n]).__name__ == "PrimFunc")
    with parallel_ctx(workers) as ctx, pytest.raises(TypeError, match=rf"'Wrong': the value of function '{first}'"):
        ReturnsTheWrongType("Wrong").run(mod, ctx)


@pytest.mark.parametrize("workers", [1, 2])
def test_an_analysis_is_not_a_pass_the_instruments_see(workers: int) -> None:
    seen: list[str] = []

    class Watch(WellFormedInstrument):
        def run_before_pass(self, mod: IRModule, info) -> None:  # type: ignore[no-untyped-def]
            seen.append(info.name)

    with parallel_ctx(workers) as ctx:
        ctx.override_instruments([Watch()])
        MeasureFunctions("Measure").run(_module(), ctx)
        count_bindings(_module())
        # a pass the analysis runs itself runs under the analysis's context, as it would in a worker
        CallsAPass("CallsAPass").run(_module(), ctx)
    assert seen == ["CountBindings"]


# ---------------------------------------------------------------------------------------------------------------------
# the well-formedness instrument's checks on workers


def _pipeline() -> Sequential:
    return Sequential([InferType(), count_bindings, CanonicalizeBindings(), FoldConstant()])


def test_well_formed_checks_run_on_workers_and_decode_nothing_in_the_parent(history) -> None:  # type: ignore[no-untyped-def]
    checks = {}
    outs = {}
    for workers in (1, 2):
        history.clear()
        inst = WellFormedInstrument()
        with parallel_ctx(workers, **{"parpass.fuse_passes": False}) as ctx:
            ctx.override_instruments([inst])
            outs[workers] = _pipeline()(_module())
        checks[workers] = inst.functions_checked
    assert to_bytes(outs[1]) == to_bytes(outs[2])
    # found by digest where not by identity: no function checked on workers that in-process did not check
    assert 0 < checks[2] <= checks[1]
    out = outs[2]
    changed = [name for name in out.names() if not out.is_decoded(name)]
    assert len(changed) > len(out.names()) // 2  # the workers' results, checked there: still bytes here
    check_waves = [w for w in history if w.passes == ("WellFormedCheck",)]
    assert check_waves and all(w.parallel for w in check_waves)
    # an unchanged module checks nothing again, and decodes nothing to know it
    again = WellFormedInstrument()
    with parallel_ctx(2) as ctx:
        again.problems(out)
        first = again.functions_checked
        again.problems(out.copy())
    assert first == len(out.names()) and again.functions_checked == first
    assert [name for name in out.names() if not out.is_decoded(name)] == changed


@pytest.mark.parametrize("megabytes", [0, 1])
def test_well_formed_checks_with_workers_that_keep_little_or_nothing(megabytes: int) -> None:
    """A worker that no longer holds a function (evicted, or holding nothing) decodes it from the wave's bytes:
    the same problems, the same functions checked."""
    found = {}
    for workers, config in ((1, {}), (2, {"parpass.worker_cache_mb": megabytes})):
        inst = WellFormedInstrument()
        with parallel_ctx(workers, **{"parpass.fuse_passes": False, **config}) as ctx:
            ctx.override_instruments([inst])
            with pytest.raises(IRError) as info:
                Sequential([InferType(), count_bindings, retype_first_param])(_module())
        found[workers] = (str(info.value), inst.functions_checked)
    assert found[1][0] == found[2][0]
    # a function a pass rebuilt equal is the same bytes, so the same digest: on workers it is not checked again
    assert 0 < found[2][1] <= found[1][1]


def test_two_pipelines_in_two_threads_check_on_the_workers_at_once() -> None:
    import threading

    def run(workers: int, out: dict[str, object]) -> None:
        inst = WellFormedInstrument()
        try:
            with parallel_ctx(workers, **{"parpass.fuse_passes": False}) as ctx:
                ctx.override_instruments([inst])
                out["bytes"] = to_bytes(_pipeline()(_module()))
            out["checked"] = inst.functions_checked
        except BaseException as err:  # reported below, in the test's thread
            out["error"] = err

    serial: dict[str, object] = {}
    run(1, serial)
    results: list[dict[str, object]] = [{}, {}]
    threads = [threading.Thread(target=run, args=(2, result)) for result in results]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(CALL_LIMIT)
    assert not any(thread.is_alive() for thread in threads)
    for result in results:
        assert "error" not in result, result.get("error")
        assert result == serial


@function_pass(opt_level=0, name="DropFirstBinding")
def drop_first_binding(func, mod, ctx):  # type: ignore[no-untyped-def]
    from parpass.ir import relax

    return func.with_body(relax.SeqExpr(func.body.bindings[1:], func.body.body)) if func.bindings else func


@pytest.mark.parametrize("breaking", [drop_first_binding, retype_first_param])
def test_the_ill_formed_ir_a_pass_makes_is_reported_as_in_process(breaking) -> None:  # type: ignore[no-untyped-def]
    """The same error, word for word, with workers: problems of changed functions, and of unchanged callers
    whose callee's signature changed (``retype_first_param`` changes only functions that call none)."""
    texts = []
    for workers in (1, 2):
        with parallel_ctx(workers, **{"parpass.fuse_passes": False}) as ctx:
            ctx.override_instruments([WellFormedInstrument()])
            with pytest.raises(IRError) as info:
                Sequential([InferType(), breaking])(_module())
        texts.append(str(info.value))
    assert texts[0] == texts[1]
    assert f"after pass '{breaking.info.name}'" in texts[0]
    if breaking is retype_first_param:
        assert "call of @" in texts[0]  # a caller the pass left as it was


def test_a_module_given_ill_formed_is_reported_before_the_first_pass() -> None:
    from parpass.ir import relax

    bad = _module()
    victim = next(n for n in bad.names() if len(getattr(bad[n], "bindings", ())) > 2)
    ghost = relax.Var(9999, "ghost")  # returned, never defined
    bad[victim] = bad[victim].with_body(relax.SeqExpr(bad[victim].bindings, ghost))
    texts = []
    for workers in (1, 2):
        with parallel_ctx(workers) as ctx:
            ctx.override_instruments([WellFormedInstrument()])
            with pytest.raises(IRError) as info:
                _pipeline()(from_bytes(to_bytes(bad)))
        texts.append(str(info.value))
    assert texts[0] == texts[1]
    assert "before pass 'sequential'" in texts[0] and f"function {victim!r}" in texts[0]


def test_an_executor_that_loses_the_values_is_named() -> None:
    from parpass.transform import InlineExecutor, set_function_pass_executor

    class Elsewhere(InlineExecutor):
        """Runs the chain on copies of the passes, as one that ships them would, and brings nothing back."""

        def run(self, passes, mod, ctx, observer=None):  # type: ignore[no-untyped-def]
            import copy

            return super().run([copy.copy(p) for p in passes], mod, ctx, observer)

    previous = set_function_pass_executor(Elsewhere())
    try:
        with pytest.raises(TypeError, match=r"'Measure': the function pass executor .* gave no value for function"):
            MeasureFunctions("Measure").run(_module())
    finally:
        set_function_pass_executor(previous)


# ---------------------------------------------------------------------------------------------------------------------
# the printing instruments' text, kept per function and printed on workers


def test_the_ir_printed_after_every_pass_is_the_serial_text(tmp_path: Path, history) -> None:  # type: ignore[no-untyped-def]
    import io

    from parpass.instrument import DumpIR, PrintAfterAll, PrintAfterChange

    texts, dumps, outs = {}, {}, {}
    for workers in (1, 2):
        history.clear()
        after, changed = io.StringIO(), io.StringIO()
        dump = tmp_path / f"dump{workers}"
        with parallel_ctx(workers) as ctx:
            ctx.override_instruments([PrintAfterAll(file=after), PrintAfterChange(file=changed), DumpIR(dump)])
            outs[workers] = _pipeline()(_module())
        texts[workers] = after.getvalue() + changed.getvalue()
        dumps[workers] = {p.name: p.read_bytes() for p in sorted(dump.iterdir())}
    assert texts[1] == texts[2] and dumps[1] == dumps[2]
    assert texts[2].endswith(str(outs[2]) + "\n")  # the last printed is the pipeline's output, as str() gives it
    assert load_text(dumps[2][sorted(dumps[2])[-1]]) == str(outs[2])
    waves = [w for w in history if w.passes == ("PrintFunctions",)]
    assert waves and all(w.parallel for w in waves)


def load_text(data: bytes) -> str:
    from parpass.ir.parser import parse

    return str(parse(data.decode()))


def test_a_function_is_printed_once_while_it_stays_the_same() -> None:
    from parpass.instrument.module_text import ModuleText

    mod = _module()
    texts = ModuleText()
    with parallel_ctx(2):
        assert texts.text(mod) == str(mod)
        assert texts.functions_printed == len(mod)
        assert texts.text(mod.copy()) == str(mod) and texts.functions_printed == len(mod)
        changed = count_bindings(mod)  # changes Functions (on the workers: the results come back as bytes)
        functions = sum(changed.digest(n) != mod.digest(n) for n in mod.names())
        assert functions > len(mod) // 2
        assert texts.text(changed) == str(changed)
        assert texts.functions_printed == len(mod) + functions
        smaller = changed.copy()
        del smaller[smaller.names()[0]]
        assert texts.text(smaller) == str(smaller) and texts.functions_printed == len(mod) + functions
