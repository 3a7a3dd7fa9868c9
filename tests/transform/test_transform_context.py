"""PassContext: with-scope, thread-local current(), no inheritance, lists, snapshots."""

from __future__ import annotations

import pickle
import threading

import pytest

from parpass.instrument import PassInstrument
from parpass.transform import PassContext, PassContextSnapshot, PassInfo, register_config_option


def test_defaults_and_fields() -> None:
    ctx = PassContext()
    assert ctx.opt_level == 2
    assert ctx.required_pass == () and ctx.disabled_pass == () and ctx.instruments == ()
    assert len(ctx.config) == 0
    ctx = PassContext(opt_level=3, required_pass=["A"], disabled_pass=("B", "C"))
    assert (ctx.opt_level, ctx.required_pass, ctx.disabled_pass) == (3, ("A",), ("B", "C"))
    assert PassContext(disabled_pass={"b", "a"}).disabled_pass == ("a", "b")  # sets in a stable order


@pytest.mark.parametrize("field", ["required_pass", "disabled_pass"])
def test_bare_string_pass_list_rejected(field: str) -> None:
    with pytest.raises(TypeError, match="bare string") as info:
        PassContext(**{field: "ab"})
    assert "['ab']" in str(info.value)
    with pytest.raises(TypeError, match=field):
        PassContext(**{field: ["a", None]})


def test_bad_fields() -> None:
    with pytest.raises(TypeError, match="opt_level must be an int"):
        PassContext(opt_level="3")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="instruments must be a list"):
        PassContext(instruments=PassInstrument())  # type: ignore[arg-type]

    class NotAnInstrument:
        def run_before_pass(self, mod: object, info: object) -> None:
            pass

    with pytest.raises(TypeError, match=r"instruments\[1\] must be a PassInstrument.*pass_instrument"):
        PassContext(instruments=[PassInstrument(), NotAnInstrument()])  # type: ignore[list-item]


def test_with_scope_and_current() -> None:
    default = PassContext.current()
    assert PassContext.current() is default  # the per-thread default is stable
    outer = PassContext(opt_level=3)
    inner = PassContext(opt_level=0)
    with outer as entered:
        assert entered is outer and PassContext.current() is outer
        with inner:
            assert PassContext.current() is inner
            assert PassContext.current().opt_level == 0  # no inheritance from outer
        assert PassContext.current() is outer
    assert PassContext.current() is default


def test_reentrant_and_exit_order_checked() -> None:
    ctx = PassContext(opt_level=1)
    with ctx, ctx:
        assert PassContext.current() is ctx
    assert PassContext.current() is not ctx
    a, b = PassContext(), PassContext()
    a.__enter__()
    b.__enter__()
    with pytest.raises(RuntimeError, match="out of order"):
        a.__exit__(None, None, None)
    b.__exit__(None, None, None)
    a.__exit__(None, None, None)


def test_no_inheritance_of_instruments_or_config() -> None:
    register_config_option("test.key", int, default=0)
    pi = PassInstrument()
    with PassContext(instruments=[pi], config={"test.key": 5}), PassContext() as inner:
        assert inner.instruments == ()
        assert inner.config["test.key"] == 0


def test_default_context_is_per_thread() -> None:
    main_default = PassContext.current()
    seen: list[PassContext] = []
    thread = threading.Thread(target=lambda: seen.append(PassContext.current()))
    thread.start()
    thread.join()
    assert seen[0] is not main_default
    with PassContext(opt_level=3):
        other: list[int] = []
        t = threading.Thread(target=lambda: other.append(PassContext.current().opt_level))
        t.start()
        t.join()
        assert other == [2]  # a context entered in one thread is not current in another


def test_pass_enabled_rule() -> None:
    ctx = PassContext(opt_level=2, required_pass=["Hi", "Both"], disabled_pass=["Lo", "Both"])
    assert ctx.pass_enabled(PassInfo(2, "X"))
    assert not ctx.pass_enabled(PassInfo(3, "X"))
    assert ctx.pass_enabled(PassInfo(9, "Hi"))  # required beats opt_level
    assert not ctx.pass_enabled(PassInfo(0, "Lo"))  # disabled beats opt_level
    assert not ctx.pass_enabled(PassInfo(0, "Both"))  # disabled beats required


def test_snapshot_round_trip_without_instruments() -> None:
    register_config_option("test.level", int, default=3)
    register_config_option("test.unset", str, default="dflt")
    ctx = PassContext(
        opt_level=3, required_pass=["A"], disabled_pass=["B"], instruments=[PassInstrument()], config={"test.level": 9}
    )
    snap = ctx.snapshot()
    assert isinstance(snap, PassContextSnapshot)
    snap = pickle.loads(pickle.dumps(snap))
    rebuilt = PassContext.from_snapshot(snap)
    assert (rebuilt.opt_level, rebuilt.required_pass, rebuilt.disabled_pass) == (3, ("A",), ("B",))
    assert rebuilt.instruments == ()
    assert dict(rebuilt.config) == {"test.level": 9}
    assert rebuilt.config["test.unset"] == "dflt"
    # A worker that never registered the option still reads the value and the default.
    from parpass.transform import config as config_mod

    config_mod._OPTIONS.pop("test.unset")
    assert PassContext.from_snapshot(snap).config["test.unset"] == "dflt"
    recorder = PassInstrument()
    assert PassContext.from_snapshot(snap, instruments=[recorder]).instruments == (recorder,)
    with pytest.raises(TypeError, match="PassContextSnapshot"):
        PassContext.from_snapshot({"opt_level": 2})  # type: ignore[arg-type]


def test_repr() -> None:
    assert repr(PassContext(opt_level=1, disabled_pass=["X"])) == "PassContext(opt_level=1, disabled_pass=['X'])"
