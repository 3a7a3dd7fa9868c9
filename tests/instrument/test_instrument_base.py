"""PassInstrument and @pass_instrument: defaults, wrapping, read-only views, on_pass_error, should_run checks."""

from __future__ import annotations

import pickle

import pytest

from parpass.errors import ReadOnlyModuleError
from parpass.instrument import PassInstrument, pass_instrument
from parpass.ir import IRModule
from parpass.transform import PassContext, PassInfo, Sequential, module_pass


@pass_instrument
class OnlyAfter:
    """Counts run_after_pass calls."""

    def __init__(self, start: int = 0) -> None:
        self.count = start

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        self.count += 1


def test_decorated_class_is_an_instrument_with_defaults(mod: IRModule) -> None:
    inst = OnlyAfter(start=2)
    assert isinstance(inst, PassInstrument)
    assert OnlyAfter.__name__ == "OnlyAfter" and OnlyAfter.__doc__ == "Counts run_after_pass calls."
    assert inst.name == "OnlyAfter"
    assert inst.should_run(mod, PassInfo(0, "x")) is True
    inst.enter_pass_ctx()
    inst.run_before_pass(mod, PassInfo(0, "x"))
    with PassContext(instruments=[inst]):
        module_pass(lambda m, c: m, opt_level=0)(mod)
    assert inst.count == 3
    assert pickle.loads(pickle.dumps(inst)).count == 3
    assert pass_instrument()(type("Plain", (), {})).__name__ == "Plain"


def test_pass_instrument_rejects_non_classes() -> None:
    with pytest.raises(TypeError, match="decorates a class"):
        pass_instrument(lambda: None)  # type: ignore[arg-type]


def test_instruments_get_read_only_views(mod: IRModule) -> None:
    @pass_instrument
    class Vandal:
        def run_before_pass(self, m: IRModule, info: PassInfo) -> None:
            assert m.names() == mod.names()
            del m["f"]

    with pytest.raises(ReadOnlyModuleError, match="instruments"), PassContext(instruments=[Vandal()]):
        module_pass(lambda m, c: m, opt_level=0)(mod)
    assert "f" in mod


def test_should_run_returning_none_is_an_error(mod: IRModule) -> None:
    @pass_instrument
    class Forgetful:
        def should_run(self, m: IRModule, info: PassInfo) -> None:
            pass

    with (
        pytest.raises(TypeError, match=r"Forgetful\.should_run returned None for pass 'P'"),
        PassContext(instruments=[Forgetful()]),
    ):
        module_pass(lambda m, c: m, opt_level=0, name="P")(mod)


def test_on_pass_error_is_called_for_the_failing_pass_and_its_sequentials(mod: IRModule) -> None:
    events: list[tuple[str, str, str]] = []

    @pass_instrument
    class Watch:
        def run_after_pass(self, m: IRModule, info: PassInfo) -> None:
            events.append(("after", info.name, ""))

        def on_pass_error(self, m: IRModule, info: PassInfo, error: BaseException) -> None:
            events.append(("error", info.name, type(error).__name__))

    def fail(m: IRModule, c: PassContext) -> IRModule:
        raise OSError("disk")

    seq = Sequential([module_pass(lambda m, c: m, opt_level=0, name="ok"), module_pass(fail, opt_level=0, name="bad")])
    with pytest.raises(OSError), PassContext(instruments=[Watch()]):
        Sequential([seq], name="outer")(mod)
    assert events == [
        ("after", "ok", ""),
        ("error", "bad", "OSError"),
        ("error", "sequential", "OSError"),
        ("error", "outer", "OSError"),
    ]


@pytest.mark.parametrize("callback", ["before", "after"])
def test_on_pass_error_after_an_instrument_callback_raised(mod: IRModule, callback: str) -> None:
    """The instruments whose run_before_pass ran and whose run_after_pass did not complete are told."""
    events: list[str] = []

    @pass_instrument
    class Watch:
        def __init__(self, tag: str, fail: bool = False) -> None:
            self.tag, self.fail = tag, fail

        def run_before_pass(self, m: IRModule, info: PassInfo) -> None:
            events.append(f"{self.tag}.before({info.name})")
            if self.fail and callback == "before":
                raise OSError(self.tag)

        def run_after_pass(self, m: IRModule, info: PassInfo) -> None:
            events.append(f"{self.tag}.after({info.name})")
            if self.fail and callback == "after":
                raise OSError(self.tag)

        def on_pass_error(self, m: IRModule, info: PassInfo, error: BaseException) -> None:
            events.append(f"{self.tag}.error({info.name}, {error})")

    with pytest.raises(OSError, match="2"), PassContext(instruments=[Watch("1"), Watch("2", True), Watch("3")]):
        module_pass(lambda m, c: m, opt_level=0, name="P")(mod)
    if callback == "before":
        assert events == ["1.before(P)", "2.before(P)", "1.error(P, 2)", "2.error(P, 2)"]
    else:
        assert events == [
            *(f"{t}.before(P)" for t in "123"),
            "1.after(P)",
            "2.after(P)",
            "2.error(P, 2)",
            "3.error(P, 2)",
        ]
