"""opt-bisect: what is numbered, in what order, what a limit skips, and what it prints."""

from __future__ import annotations

import pytest

from parpass.instrument import PassInstrument
from parpass.ir import IRModule, PrimFunc, relax, to_bytes
from parpass.testing import random_module
from parpass.transform import (
    PassContext,
    PassInfo,
    Sequential,
    function_pass,
    module_pass,
    prim_func_pass,
)
from parpass.transform.config import PassConfigError


@function_pass(opt_level=0, name="TagA")
def tag_a(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    return func.with_attr("a", True)


@prim_func_pass(opt_level=0, name="TagP")
def tag_p(func, mod, ctx):  # type: ignore[no-untyped-def]
    return func.with_attr("p", True)


@module_pass(opt_level=0, name="ModAttr")
def mod_attr(mod: IRModule, ctx: PassContext) -> IRModule:
    return mod.with_attr("m", True)


@module_pass(opt_level=0, name="RunsTagA")
def runs_tag_a(mod: IRModule, ctx: PassContext) -> IRModule:
    """Calls TagA from inside itself: part of this application, not numbered."""
    return tag_a(mod)


PIPELINE = Sequential([tag_a, mod_attr, tag_p])


@pytest.fixture(scope="module")
def mod() -> IRModule:
    return random_module(num_functions=6, num_prim_funcs=3, size=5, seed=2)


def _targets(mod: IRModule, kind: type) -> list[str]:
    return [n for n in mod.names() if isinstance(mod[n], kind) and not mod[n].attrs.get("SkipOptimization")]


def _run(mod: IRModule, limit: int, pipeline: object = PIPELINE, **config: object) -> tuple[IRModule, PassContext]:
    with PassContext(config={"parpass.bisect_limit": limit, "parpass.num_workers": 1, **config}) as ctx:
        out = pipeline(mod)  # type: ignore[operator]
    return out, ctx


def test_numbering_follows_the_serial_run(mod: IRModule, capsys: pytest.CaptureFixture[str]) -> None:
    functions, prims = _targets(mod, relax.Function), _targets(mod, PrimFunc)
    _, ctx = _run(mod, 1000)
    expected = [("TagA", n) for n in functions] + [("ModAttr", None)] + [("TagP", n) for n in prims]
    assert [(d.pass_name, d.function) for d in ctx.bisect_log] == expected
    assert [d.number for d in ctx.bisect_log] == list(range(1, len(expected) + 1))
    assert all(d.ran for d in ctx.bisect_log)
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"BISECT: running pass (1) TagA on function ({functions[0]})"
    assert f"BISECT: running pass ({len(functions) + 1}) ModAttr on module" in err
    assert len(err) == len(expected)


def test_a_limit_skips_what_is_numbered_above_it(mod: IRModule, capsys: pytest.CaptureFixture[str]) -> None:
    functions = _targets(mod, relax.Function)
    out, ctx = _run(mod, 2)
    # TagA ran on the first two functions only; ModAttr and TagP did not run at all
    assert [n for n in functions if out[n].attrs.get("a")] == functions[:2]
    assert "m" not in out.attrs
    assert not any(out[n].attrs.get("p") for n in out.names())
    err = capsys.readouterr().err.splitlines()
    assert err[2] == f"BISECT: NOT running pass (3) TagA on function ({functions[2]})"
    assert f"BISECT: NOT running pass ({len(functions) + 1}) ModAttr on module" in err
    assert [d.ran for d in ctx.bisect_log].count(True) == 2


def test_limit_zero_runs_nothing_and_a_large_one_everything(mod: IRModule) -> None:
    none, _ = _run(mod, 0)
    assert to_bytes(none) == to_bytes(mod)
    with PassContext(config={"parpass.num_workers": 1}):
        plain = PIPELINE(mod)
    everything, _ = _run(mod, 10**9)
    assert to_bytes(everything) == to_bytes(plain)


def test_off_by_default_and_nothing_printed(mod: IRModule, capsys: pytest.CaptureFixture[str]) -> None:
    _, ctx = _run(mod, -1)
    assert ctx.bisect_log == ()
    assert capsys.readouterr().err == ""


def test_bisect_print_false_keeps_the_log_only(mod: IRModule, capsys: pytest.CaptureFixture[str]) -> None:
    _, ctx = _run(mod, 3, **{"parpass.bisect_print": False})
    assert len(ctx.bisect_log) > 3
    assert capsys.readouterr().err == ""


def test_required_passes_are_not_numbered_and_always_run(mod: IRModule) -> None:
    with PassContext(
        required_pass=["ModAttr"], config={"parpass.bisect_limit": 0, "parpass.bisect_print": False}
    ) as ctx:
        out = PIPELINE(mod)
    assert out.attrs.get("m") is True
    assert "ModAttr" not in {d.pass_name for d in ctx.bisect_log}


def test_a_pass_called_inside_another_is_part_of_its_application(mod: IRModule) -> None:
    out, ctx = _run(mod, 1, Sequential([runs_tag_a]), **{"parpass.bisect_print": False})
    assert [(d.number, d.pass_name, d.function, d.ran) for d in ctx.bisect_log] == [(1, "RunsTagA", None, True)]
    assert all(out[n].attrs.get("a") for n in _targets(mod, relax.Function))  # the nested pass ran in full


def test_numbers_go_on_across_calls_under_one_context(mod: IRModule) -> None:
    with PassContext(config={"parpass.bisect_limit": 1, "parpass.bisect_print": False}) as ctx:
        first = mod_attr(mod)
        second = mod_attr(mod)
    assert first.attrs.get("m") is True and "m" not in second.attrs
    assert [(d.number, d.ran) for d in ctx.bisect_log] == [(1, True), (2, False)]


def test_a_skipped_pass_gets_no_instrument_callbacks(mod: IRModule) -> None:
    calls: list[tuple[str, str]] = []

    class Trace(PassInstrument):
        def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
            calls.append(("before", info.name))

        def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
            calls.append(("after", info.name))

    config = {"parpass.bisect_limit": 1, "parpass.bisect_print": False, "parpass.num_workers": 1}
    with PassContext(instruments=[Trace()], config=config):
        PIPELINE(mod)
    names = {name for _, name in calls}
    assert "TagA" in names and "ModAttr" not in names and "TagP" not in names


def test_fusion_is_off_under_bisect_and_the_output_is_the_same(mod: IRModule) -> None:
    chain = Sequential([tag_a, tag_a.__class__(tag_a.pass_func, PassInfo(0, "TagA2"))])
    with PassContext(config={"parpass.num_workers": 1}):
        plain = chain(mod)
    out, ctx = _run(mod, 10**9, chain, **{"parpass.bisect_print": False})
    assert to_bytes(out) == to_bytes(plain)
    n = len(_targets(mod, relax.Function))
    assert [d.pass_name for d in ctx.bisect_log] == ["TagA"] * n + ["TagA2"] * n


def test_a_bad_limit_is_refused() -> None:
    with pytest.raises(PassConfigError, match=r"parpass\.bisect_limit"):
        PassContext(config={"parpass.bisect_limit": -2})


def test_memoized_applications_are_reused_not_run_again(mod: IRModule) -> None:
    calls: list[str] = []

    @module_pass(opt_level=0, name="Counted")
    def counted(m: IRModule, ctx: PassContext) -> IRModule:
        calls.append("Counted")
        return m.with_attr("counted", len(calls))

    pipeline = Sequential([tag_a, counted, tag_p])
    memo: dict = {}

    def run(limit: int) -> IRModule:
        ctx = PassContext(
            config={"parpass.bisect_limit": limit, "parpass.bisect_print": False, "parpass.num_workers": 1}
        )
        ctx.memoize_applications(memo)
        with ctx:
            return pipeline(mod)  # type: ignore[no-any-return]

    everything = run(10**9)
    assert calls == ["Counted"]
    assert run(10**9) is everything and calls == ["Counted"]  # nothing ran again
    n = len(_targets(mod, relax.Function))
    partial = run(n + 2)  # TagA and Counted as before (reused), TagP on one function only (new)
    assert calls == ["Counted"]
    assert partial.attrs["counted"] == 1
    assert sum(1 for name in partial.names() if partial[name].attrs.get("p")) == 1
    with pytest.raises(ValueError, match="instruments"):
        PassContext(instruments=[PassInstrument()]).memoize_applications(memo)
