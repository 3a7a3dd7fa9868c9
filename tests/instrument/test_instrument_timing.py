"""PassTimingInstrument: TVM's render format, the raw tree, robustness after a pass raised."""

from __future__ import annotations

import re
import time

import pytest

from parpass.instrument import PassInstrument, PassTiming, PassTimingInstrument, render_timings
from parpass.ir import IRModule
from parpass.transform import Pass, PassContext, Sequential, module_pass

LINE = re.compile(r"^(\t*)(\S+): (\d+)us \[(-?\d+)us\] \((\d+\.\d\d)%; (\d+\.\d\d)%\)$")


def sleeper(name: str, seconds: float = 0.0, raises: bool = False) -> Pass:
    def run(mod: IRModule, ctx: PassContext) -> IRModule:
        time.sleep(seconds)
        if raises:
            raise RuntimeError(name)
        return mod

    return module_pass(run, opt_level=0, name=name)


def test_is_a_real_instrument() -> None:
    assert issubclass(PassTimingInstrument, PassInstrument)


def test_render_format_pre_order_tab_indented(mod: IRModule) -> None:
    timing = PassTimingInstrument()
    seq = Sequential([sleeper("A", 0.002), Sequential([sleeper("B", 0.001)], name="Inner")], name="Outer")
    with PassContext(instruments=[timing]):
        seq(mod)
        sleeper("Top2")(mod)
        inside = timing.render()
    text = timing.render()
    assert text == inside  # readable inside and after the with block
    lines = text.splitlines()
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), lines
    assert [(len(m[1]), m[2]) for m in parsed] == [(0, "Outer"), (1, "A"), (1, "Inner"), (2, "B"), (0, "Top2")]
    tree = timing.timings
    assert [t.name for t in tree] == ["Outer", "Top2"]
    outer = tree[0]
    assert [c.name for c in outer.children] == ["A", "Inner"]
    assert outer.children[0].total >= 0.002 and outer.children[1].children[0].total >= 0.001
    assert outer.self_time == pytest.approx(outer.total - sum(c.total for c in outer.children))
    # the percentages: of all top-level time, and of the parent
    top = sum(t.total for t in tree)
    assert float(parsed[1][5]) == pytest.approx(outer.children[0].total / top * 100, abs=0.01)
    assert float(parsed[1][6]) == pytest.approx(outer.children[0].total / outer.total * 100, abs=0.01)
    assert text.endswith("\n")


def test_render_of_known_tree() -> None:
    tree = [
        PassTiming("InferType", 0.006993, 0.006993),
        PassTiming(
            "FoldScaleAxis",
            0.008131,
            0.000002,
            (PassTiming("FoldConstant", 0.008129, 0.00163, (PassTiming("InferType", 0.006499, 0.006499),)),),
        ),
    ]
    assert render_timings(tree) == (
        "InferType: 6993us [6993us] (46.24%; 46.24%)\n"
        "FoldScaleAxis: 8131us [2us] (53.76%; 53.76%)\n"
        "\tFoldConstant: 8129us [1630us] (53.75%; 99.98%)\n"
        "\t\tInferType: 6499us [6499us] (42.97%; 79.95%)\n"
    )
    assert render_timings([]) == ""


def test_keeps_working_after_a_pass_raised(mod: IRModule) -> None:
    timing = PassTimingInstrument()
    with PassContext(instruments=[timing]):
        with pytest.raises(RuntimeError):
            Sequential([sleeper("ok"), sleeper("bad", raises=True)], name="S")(mod)
        sleeper("after")(mod)  # a top-level pass, not nested under the failed ones
        text = timing.render()
    names = [(len(m[1]), m[2]) for m in (LINE.match(line) for line in text.splitlines()) if m]
    assert names == [(0, "S"), (1, "ok"), (1, "bad"), (0, "after")]
    s = timing.timings[0]
    assert s.failed and s.children[1].failed and not s.children[0].failed
    assert not timing.timings[1].failed


def test_fresh_on_enter_and_static_render(mod: IRModule) -> None:
    timing = PassTimingInstrument()
    with PassContext(instruments=[timing]):
        sleeper("one")(mod)
    with PassContext(instruments=[timing]):
        sleeper("two")(mod)
        assert PassTimingInstrument.render() == timing.render()  # TVM's static form
    assert [t.name for t in timing.timings] == ["two"]


def test_static_render_is_the_innermost_context_s_instrument(mod: IRModule) -> None:
    outer, inner = PassTimingInstrument(), PassTimingInstrument()
    with PassContext(instruments=[outer]):
        sleeper("outer")(mod)
        with PassContext(instruments=[inner]):
            sleeper("inner")(mod)
            assert "inner" in PassTimingInstrument.render() and "outer" not in PassTimingInstrument.render()
        assert PassTimingInstrument.render() == outer.render()
    # outside every context the static form renders nothing (as TVM's); the instance keeps its profile
    assert PassTimingInstrument.render() == ""
    assert "outer" in outer.render()


def test_vetoed_passes_are_not_timed(mod: IRModule) -> None:
    from parpass.instrument import pass_instrument

    @pass_instrument
    class VetoX:
        def should_run(self, m: IRModule, info: object) -> bool:
            return info.name != "X"  # type: ignore[attr-defined]

    timing = PassTimingInstrument()
    with PassContext(instruments=[VetoX(), timing]):
        Sequential([sleeper("X"), sleeper("Y")])(mod)
    assert [c.name for c in timing.timings[0].children] == ["Y"]


@pytest.mark.parametrize("callback", ["run_before_pass", "run_after_pass"])
def test_keeps_working_after_another_instrument_raised(mod: IRModule, callback: str) -> None:
    from parpass.instrument import pass_instrument

    @pass_instrument
    class FailOnBad:
        def run_before_pass(self, m: IRModule, info: object) -> None:
            if callback == "run_before_pass" and info.name == "bad":  # type: ignore[attr-defined]
                raise RuntimeError("instrument")

        def run_after_pass(self, m: IRModule, info: object) -> None:
            if callback == "run_after_pass" and info.name == "bad":  # type: ignore[attr-defined]
                raise RuntimeError("instrument")

    timing = PassTimingInstrument()
    # Before: timing opened the record of "bad" before FailOnBad raised. After: FailOnBad raised before
    # timing's run_after_pass. Either way the record is closed, and "after" is not nested under "bad".
    order = [timing, FailOnBad()] if callback == "run_before_pass" else [FailOnBad(), timing]
    with PassContext(instruments=order):
        with pytest.raises(RuntimeError, match="instrument"):
            sleeper("bad")(mod)
        sleeper("after")(mod)
        text = timing.render()
    names = [(len(m[1]), m[2]) for m in (LINE.match(line) for line in text.splitlines()) if m]
    assert names == [(0, "bad"), (0, "after")]
    assert timing.timings[0].failed and not timing.timings[1].failed
