"""Errors raised by passes in workers reach the caller as a serial run would raise them."""

from __future__ import annotations

import threading
import traceback
import warnings

import pytest
from parallel_support import executor, leftovers, module_bytes, parallel_ctx, probe_moves_at_once
from ptest_passes import Boom, count_bindings, fails_on_some, raises_chained, raises_unpicklable, raises_while_handling

from parpass.errors import PassShippingError, RemotePassError
from parpass.ir import IRModule
from parpass.parallel.error_chain import chain_of
from parpass.transform import PassContext, Sequential, function_pass


def _failing_names(mod: IRModule) -> list[str]:
    return [n for n in fails_on_some.targets(mod) if len(mod[n].bindings) in (3, 5)]


def test_first_error_in_module_order_with_its_type_and_notes(small_module: IRModule, history, scratch) -> None:  # type: ignore[no-untyped-def]
    failing = _failing_names(small_module)
    assert len(failing) >= 2
    before = module_bytes(small_module)
    with pytest.raises(Boom) as serial, parallel_ctx(1):
        fails_on_some(small_module)
    with pytest.raises(Boom) as parallel, parallel_ctx(2):
        fails_on_some(small_module)
    assert history[-1].passes == ("FailsOnSome",)
    assert str(parallel.value) == str(serial.value)
    notes = parallel.value.__notes__
    pass_notes = [n for n in notes if n.startswith("parpass: raised in pass")]
    assert pass_notes == [f"parpass: raised in pass 'FailsOnSome' on function {failing[0]!r}"]
    assert pass_notes == [n for n in serial.value.__notes__ if n.startswith("parpass: raised in pass")]
    remote = [n for n in notes if "remote traceback" in n]
    assert len(remote) == 1 and "ptest_passes.py" in remote[0] and "Boom" in remote[0]
    others = [n for n in notes if "also failed" in n]
    assert len(others) == 1
    positions = [others[0].index(repr(name)) for name in failing[1:]]
    assert positions == sorted(positions)  # reported in module order
    assert leftovers(scratch) == []  # the chunks that succeeded wrote their outputs; all are gone
    assert module_bytes(small_module) == before


@function_pass(opt_level=0, name="FailsEverywhere")
def _fails_everywhere(func, mod, ctx):  # type: ignore[no-untyped-def]
    raise Boom("no")


def test_the_note_of_other_failures_names_ten_and_counts_the_rest(small_module: IRModule) -> None:
    targets = _fails_everywhere.targets(small_module)
    assert len(targets) > 12
    with pytest.raises(Boom) as info, parallel_ctx(2):
        _fails_everywhere(small_module)
    (others,) = [n for n in info.value.__notes__ if "also failed" in n]
    assert f"also failed on {len(targets) - 1} more function(s): " in others
    assert all(f"{name!r} (Boom)" in others for name in targets[1:11])
    assert repr(targets[11]) not in others
    assert others.endswith(f", ... ({len(targets) - 11} more)")


def test_unpicklable_exception_becomes_remote_pass_error(small_module: IRModule) -> None:
    with pytest.raises(RemotePassError) as info, parallel_ctx(2):
        raises_unpicklable(small_module)
    err = info.value
    assert err.type_name == "Unpicklable"
    assert "holds a lock" in str(err)
    assert err.pass_name == "RaisesUnpicklable"
    assert err.functions[0] == raises_unpicklable.targets(small_module)[0]


@pytest.fixture
def unwarned(monkeypatch: pytest.MonkeyPatch) -> None:
    """The executor has warned of no pass yet (it warns once per process: the test's other backend did)."""
    monkeypatch.setattr(executor, "_warned", set())


def _unpicklable_pass():  # type: ignore[no-untyped-def]
    lock = threading.Lock()

    @function_pass(opt_level=0, name="HoldsLock")
    def holds_lock(func, mod, ctx):  # type: ignore[no-untyped-def]
        with lock:
            return func.with_attr("locked", True)

    return holds_lock


@pytest.mark.usefixtures("unwarned")
def test_unpicklable_pass_runs_in_process_with_one_warning(small_module: IRModule, history) -> None:  # type: ignore[no-untyped-def]
    holds_lock = _unpicklable_pass()
    with warnings.catch_warnings(record=True) as caught, parallel_ctx(2):
        warnings.simplefilter("always")
        first = holds_lock(small_module)
        second = holds_lock(small_module)
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1
    assert "HoldsLock" in messages[0] and "cannot be sent to worker processes" in messages[0]
    assert "lock" in messages[0].lower()
    assert not history[-1].parallel and history[-1].reason == "pass cannot be pickled"
    with parallel_ctx(1):
        serial = holds_lock(small_module)
    assert module_bytes(first) == module_bytes(serial) == module_bytes(second)


def test_auto_pickles_a_chain_only_when_it_moves_it_to_the_workers(
    small_module: IRModule, monkeypatch: pytest.MonkeyPatch, history
) -> None:  # type: ignore[no-untyped-def]
    """A chain that 'auto' starts in-process and keeps there is never pickled (a first run pays nothing
    for workers it does not use); one it moves is, once."""
    import parpass.parallel.executor as executor_mod
    from parpass.parallel import default_executor

    packed: list[int] = []
    pack = executor_mod.pack_passes

    def spy(passes):  # type: ignore[no-untyped-def]
        packed.append(len(passes))
        return pack(passes)

    monkeypatch.setattr(executor_mod, "pack_passes", spy)
    default_executor.forget()
    with PassContext(config={"parpass.num_workers": 2}):
        count_bindings(small_module)
    assert not history[-1].parallel and packed == []
    probe_moves_at_once(monkeypatch)
    with PassContext(config={"parpass.num_workers": 2}):
        count_bindings(small_module)
    assert history[-1].parallel and packed == [1]


@pytest.mark.usefixtures("unwarned")
def test_an_unpicklable_chain_the_probe_would_move_stays_in_process_with_one_warning(
    small_module: IRModule, monkeypatch: pytest.MonkeyPatch, history
) -> None:  # type: ignore[no-untyped-def]
    holds_lock = _unpicklable_pass()
    chain = Sequential([holds_lock, count_bindings])
    with parallel_ctx(1):
        serial = module_bytes(chain(small_module))
    probe_moves_at_once(monkeypatch)
    with warnings.catch_warnings(record=True) as caught, PassContext(config={"parpass.num_workers": 2}):
        warnings.simplefilter("always")
        out = chain(small_module)
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1 and "HoldsLock" in messages[0] and "cannot be sent to worker processes" in messages[0]
    assert module_bytes(out) == serial
    assert not any(w.parallel for w in history)


def test_strict_turns_an_unpicklable_pass_into_an_error(small_module: IRModule) -> None:
    holds_lock = _unpicklable_pass()
    with (
        pytest.raises(PassShippingError, match=r"HoldsLock.*parpass\.strict"),
        parallel_ctx(2, **{"parpass.strict": True}),
    ):
        holds_lock(small_module)


@pytest.mark.parametrize("target", [True, False], ids=["target", "module-view"])
def test_a_function_the_ir_cannot_encode_is_named_before_the_wave_ships(small_module: IRModule, target: bool) -> None:
    """A function a pass built by hand with an integer beyond 64 bits cannot be shipped: the error names
    the function, the place in it and the pass, where it used to be a bare OverflowError."""
    import msgspec

    from parpass.errors import IRError
    from parpass.ir import Function, PrimFunc

    kind = Function if target else PrimFunc  # count_bindings visits Functions only
    name = next(n for n in small_module.names() if isinstance(small_module[n], kind))
    func = small_module[name]
    bad = msgspec.structs.replace(func, attrs={**func.attrs, "big": 2**70})
    mod = IRModule({n: bad if n == name else small_module[n] for n in small_module.names()})
    with pytest.raises(IRError) as info, parallel_ctx(2):
        count_bindings(mod)
    text = str(info.value)
    assert f"function {name!r}" in text and "'CountBindings'" in text
    assert "does not fit in 64 bits" in text


def _chain(err: BaseException) -> list[tuple[str, str, str | None, str | None, bool]]:
    """Each exception of ``err``'s chain (see error_chain.chain_of): its type, message, and the types of its
    cause and context, and whether it suppresses the context."""
    return [
        (
            type(e).__name__,
            str(e),
            None if e.__cause__ is None else type(e.__cause__).__name__,
            None if e.__context__ is None else type(e.__context__).__name__,
            e.__suppress_context__,
        )
        for e in chain_of(err)
    ]


@pytest.mark.parametrize("pass_", [raises_chained, raises_while_handling], ids=["from", "while-handling"])
def test_an_error_keeps_the_errors_it_was_raised_from(small_module: IRModule, pass_) -> None:  # type: ignore[no-untyped-def]
    """``raise ... from err`` and an error raised while handling another reach the caller with their cause and
    context, as in the serial run (pickling an exception drops both); a context that does not pickle comes as a
    RuntimeError naming its type and message."""
    with pytest.raises(Exception) as serial, parallel_ctx(1):
        pass_(small_module)
    with pytest.raises(Exception) as parallel, parallel_ctx(2):
        pass_(small_module)
    expected = _chain(serial.value)
    if pass_ is raises_chained:
        assert [e[0] for e in expected] == ["Wrapped", "KeyError", "Unpicklable"]
        expected[1] = (*expected[1][:3], "RuntimeError", False)
        expected[2] = ("RuntimeError", "Unpicklable: handled first", None, None, False)
    assert _chain(parallel.value) == expected
    assert parallel.value.__cause__ is serial.value.__cause__ is None or (
        parallel.value.__cause__ is parallel.value.__context__
    )
    shown = "".join(traceback.format_exception(parallel.value))
    assert ("The above exception was the direct cause" in shown) == (pass_ is raises_chained)
    assert "During handling of the above exception" in shown
