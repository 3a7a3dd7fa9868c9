"""The exact callback trace of several instruments around nested Sequentials (the reference's semantics).

Every test asserts the complete list of callbacks, in order: instruments are
called in list order; every should_run is called (no short cut after a veto)
unless the pass is in ``ctx.required_pass``; a vetoed pass gets no
before/after; a Sequential gets before/after around its body; and each of the
exception cases behaves as the reference's Pass Instrument section says.
"""

from __future__ import annotations

import pytest

from parpass.instrument import pass_instrument
from parpass.ir import IRModule, relax
from parpass.transform import Pass, PassContext, Sequential, function_pass, module_pass, register_pass


class Boom(Exception):
    pass


@pass_instrument
class Rec:
    """Records every callback as ``"<tag>.<callback>(<pass>)"``; vetoes ``veto``; raises on ``fail``."""

    def __init__(self, tag: str, log: list[str], veto: tuple[str, ...] = (), fail: tuple[str, str | None] = ("", None)):
        self.tag = tag
        self.log = log
        self.veto = veto
        self.fail = fail

    def _hit(self, callback: str, name: str | None = None) -> None:
        self.log.append(f"{self.tag}.{callback}" + (f"({name})" if name is not None else ""))
        if self.fail[0] == callback and self.fail[1] in (None, name):
            raise Boom(f"{self.tag}.{callback}")

    def enter_pass_ctx(self) -> None:
        self._hit("enter")

    def exit_pass_ctx(self) -> None:
        self._hit("exit")

    def should_run(self, mod: IRModule, info: object) -> bool:
        self._hit("should_run", info.name)  # type: ignore[attr-defined]
        return info.name not in self.veto  # type: ignore[attr-defined]

    def run_before_pass(self, mod: IRModule, info: object) -> None:
        self._hit("before", info.name)  # type: ignore[attr-defined]

    def run_after_pass(self, mod: IRModule, info: object) -> None:
        self._hit("after", info.name)  # type: ignore[attr-defined]


def body(log: list[str], name: str, raises: bool = False, required: list[str] | None = None) -> Pass:
    def run(mod: IRModule, ctx: PassContext) -> IRModule:
        log.append(f"run:{name}")
        if raises:
            raise Boom(f"in {name}")
        return mod

    return module_pass(run, opt_level=0, name=name, required=required)


def each(tags: str, callback: str, name: str | None = None) -> list[str]:
    return [f"{t}.{callback}" + (f"({name})" if name is not None else "") for t in tags]


def ran(tags: str, name: str, required_pass: bool = False) -> list[str]:
    """The callbacks of a pass that runs: should_run (unless required), before, its body, after."""
    sr = [] if required_pass else each(tags, "should_run", name)
    return [*sr, *each(tags, "before", name), f"run:{name}", *each(tags, "after", name)]


def test_two_instruments_nested_sequentials_vetoes_required(mod: IRModule) -> None:
    log: list[str] = []
    register_pass("Req")(lambda: body(log, "Req"))
    inner = Sequential([body(log, "B"), body(log, "V")], name="Inner")
    outer = Sequential([body(log, "A"), inner, body(log, "C", required=["Req"]), body(log, "D")], name="Outer")
    with PassContext(required_pass=["B"], instruments=[Rec("1", log), Rec("2", log, veto=("V",))]):
        outer(mod)
    expected = [
        *each("12", "enter"),
        *each("12", "should_run", "Outer"),
        *each("12", "before", "Outer"),
        *ran("12", "A"),
        *each("12", "should_run", "Inner"),
        *each("12", "before", "Inner"),
        *ran("12", "B", required_pass=True),  # in ctx.required_pass: should_run skipped
        *each("12", "should_run", "V"),  # vetoed by 2: no before/after, no run
        *each("12", "after", "Inner"),
        *ran("12", "Req"),  # pulled in by PassInfo.required: should_run is called
        *ran("12", "C"),
        *ran("12", "D"),
        *each("12", "after", "Outer"),
        *each("12", "exit"),
    ]
    assert log == expected


def test_three_instruments_veto_of_a_sequential_and_nested_pass_calls(mod: IRModule) -> None:
    log: list[str] = []
    inner_call = body(log, "Nested")

    @function_pass(opt_level=0, name="Caller")
    def caller(func: relax.Function, m: IRModule, ctx: PassContext) -> relax.Function:
        inner_call(m)  # a pass called from inside a pass goes through the same instruments
        return func

    skipped = Sequential([body(log, "never")], name="Skipped")
    seq = Sequential([skipped, caller, body(log, "Last")], name="Top")
    instruments = [Rec("a", log, veto=("Skipped",)), Rec("b", log), Rec("c", log, veto=("Last",))]
    with PassContext(instruments=instruments):
        seq(mod)
    expected = [
        *each("abc", "enter"),
        *each("abc", "should_run", "Top"),
        *each("abc", "before", "Top"),
        *each("abc", "should_run", "Skipped"),  # a vetoes, b and c are still asked
        *each("abc", "should_run", "Caller"),
        *each("abc", "before", "Caller"),
        *ran("abc", "Nested"),  # function f
        *ran("abc", "Nested"),  # function g
        *each("abc", "after", "Caller"),
        *each("abc", "should_run", "Last"),  # c vetoes
        *each("abc", "after", "Top"),
        *each("abc", "exit"),
    ]
    assert log == expected


def test_enter_failure_exits_the_entered_clears_and_does_not_push() -> None:
    log: list[str] = []
    ctx = PassContext(instruments=[Rec("1", log), Rec("2", log, fail=("enter", None)), Rec("3", log)])
    before = PassContext.current()
    with pytest.raises(Boom, match=r"2\.enter"), ctx:
        log.append("body")  # never reached
    assert log == ["1.enter", "2.enter", "1.exit"]
    assert ctx.instruments == ()
    assert PassContext.current() is before


def test_exit_failure_stops_the_remaining_exits_and_clears() -> None:
    log: list[str] = []
    ctx = PassContext(instruments=[Rec("1", log), Rec("2", log, fail=("exit", None)), Rec("3", log)])
    with pytest.raises(Boom, match=r"2\.exit"), ctx:
        log.append("body")
    assert log == [*each("123", "enter"), "body", "1.exit", "2.exit"]
    assert ctx.instruments == ()
    assert PassContext.current() is not ctx  # popped before the instruments exit


@pytest.mark.parametrize("callback", ["should_run", "before", "after"])
def test_failure_in_a_pass_callback_propagates_at_once_and_the_with_exits_all(mod: IRModule, callback: str) -> None:
    log: list[str] = []
    seq = Sequential([Sequential([body(log, "X"), body(log, "Y")], name="In")], name="Out")
    instruments = [Rec("1", log), Rec("2", log, fail=(callback, "X")), Rec("3", log)]
    with pytest.raises(Boom, match=rf"2\.{callback}"), PassContext(instruments=instruments):
        seq(mod)
    prefix = [
        *each("123", "enter"),
        *each("123", "should_run", "Out"),
        *each("123", "before", "Out"),
        *each("123", "should_run", "In"),
        *each("123", "before", "In"),
    ]
    at_failure = {
        "should_run": ["1.should_run(X)", "2.should_run(X)"],
        "before": [*each("123", "should_run", "X"), "1.before(X)", "2.before(X)"],
        "after": [*each("123", "should_run", "X"), *each("123", "before", "X"), "run:X", "1.after(X)", "2.after(X)"],
    }[callback]
    # No more callbacks of X, no Y, no after for In or Out; then every instrument exits.
    assert log == [*prefix, *at_failure, *each("123", "exit")]


def test_failure_inside_a_pass_gives_no_after_for_it_or_its_sequentials(mod: IRModule) -> None:
    log: list[str] = []
    seq = Sequential([body(log, "ok"), Sequential([body(log, "bad", raises=True), body(log, "never")], name="In")])
    with pytest.raises(Boom, match="in bad"), PassContext(instruments=[Rec("1", log), Rec("2", log)]):
        seq(mod)
    assert log == [
        *each("12", "enter"),
        *each("12", "should_run", "sequential"),
        *each("12", "before", "sequential"),
        *ran("12", "ok"),
        *each("12", "should_run", "In"),
        *each("12", "before", "In"),
        *each("12", "should_run", "bad"),
        *each("12", "before", "bad"),
        "run:bad",
        *each("12", "exit"),
    ]


def test_override_instruments_exits_old_enters_new(mod: IRModule) -> None:
    log: list[str] = []
    ctx = PassContext(instruments=[Rec("o", log)])
    with ctx:
        ctx.override_instruments([Rec("n", log), Rec("m", log)])
        body(log, "P")(mod)
    assert log == ["o.enter", "o.exit", "n.enter", "m.enter", *ran("nm", "P"), "n.exit", "m.exit"]
    # On the thread's default context, without a with block.
    log.clear()
    default = PassContext.current()
    default.override_instruments([Rec("d", log)])
    try:
        body(log, "Q")(mod)
    finally:
        default.override_instruments(None)
    assert log == ["d.enter", *ran("d", "Q"), "d.exit"]
    # Entering the new instruments fails: they are cleared, the entered ones exit.
    log.clear()
    with ctx:
        with pytest.raises(Boom):
            ctx.override_instruments([Rec("x", log), Rec("y", log, fail=("enter", None))])
        assert ctx.instruments == ()
    assert log == ["n.enter", "m.enter", "n.exit", "m.exit", "x.enter", "y.enter", "x.exit"]


def test_required_pass_in_context_skips_should_run_even_when_vetoed(mod: IRModule) -> None:
    log: list[str] = []
    with PassContext(required_pass=["Must"], instruments=[Rec("1", log, veto=("Must",))]):
        body(log, "Must")(mod)
    assert log == ["1.enter", *ran("1", "Must", required_pass=True), "1.exit"]


def test_vetoed_pass_returns_its_input(mod: IRModule) -> None:
    log: list[str] = []
    with PassContext(instruments=[Rec("1", log, veto=("P",))]):
        assert body(log, "P")(mod) is mod
