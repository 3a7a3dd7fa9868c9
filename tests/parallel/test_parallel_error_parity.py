"""Whatever pass code raises in a worker reaches the caller as the serial run raises it, and the pool survives.

Issue 11: ``SystemExit``/``KeyboardInterrupt`` from pass code, an exception whose
``__str__`` raises, a returned function that cannot be encoded (item 8); a
nested instrument's error replayed from a worker (item 11); the worker's
traceback of a pass defined outside any importable module (item 17).
"""

from __future__ import annotations

import linecache
import traceback

import pytest
from parallel_support import leftovers, module_bytes, parallel_ctx, worker_pids
from ptest_error_passes import (
    raises_keyboard_interrupt,
    raises_system_exit,
    raises_unprintable,
    returns_unencodable,
)
from ptest_passes import calls_nested_pass, count_bindings

from parpass.errors import ParallelExecutionError
from parpass.instrument import PassInstrument, pass_instrument
from parpass.ir import IRModule
from parpass.transform import Pass, PassContext, PassInfo

NOTE = "parpass: raised in pass "


def _pass_notes(err: BaseException) -> list[str]:
    return [n for n in getattr(err, "__notes__", []) if n.startswith(NOTE)]


def _warm_pids(mod: IRModule) -> list[int]:
    with parallel_ctx(2):
        count_bindings(mod)
    pids = worker_pids()
    assert len(pids) == 2
    return pids


def _raised(p: Pass, mod: IRModule, workers: int) -> BaseException:
    """What ``p(mod)`` raises with ``workers`` workers (BaseException included: SystemExit, KeyboardInterrupt)."""
    try:
        with parallel_ctx(workers):
            p(mod)
    except BaseException as err:  # the point is to catch what escapes
        return err
    raise AssertionError(f"{p.info.name} raised nothing with {workers} worker(s)")


@pytest.mark.parametrize(
    ("p", "kind"),
    [
        (raises_system_exit, SystemExit),
        (raises_keyboard_interrupt, KeyboardInterrupt),
        (raises_unprintable, ValueError),
    ],
    ids=["SystemExit", "KeyboardInterrupt", "str-raises"],
)
def test_pass_code_exception_is_the_serial_one_and_the_pool_survives(  # type: ignore[no-untyped-def]
    small_module: IRModule, p: Pass, kind: type[BaseException], history, scratch
) -> None:
    pids = _warm_pids(small_module)
    before = module_bytes(small_module)
    serial = _raised(p, small_module, 1)
    parallel = _raised(p, small_module, 2)
    assert history[-1].parallel
    assert not isinstance(parallel, ParallelExecutionError)
    assert type(parallel) is type(serial) and isinstance(parallel, kind)
    assert parallel.args == serial.args
    expected = [f"{NOTE}{p.info.name!r} on function 'main'"]
    assert _pass_notes(serial) == expected
    assert _pass_notes(parallel) == expected
    assert worker_pids() == pids  # the same workers: nothing was torn down
    assert module_bytes(small_module) == before
    assert leftovers(scratch) == []
    with parallel_ctx(2):
        count_bindings(small_module)
    assert worker_pids() == pids


def test_unencodable_result_is_an_error_of_that_pass_on_that_function(  # type: ignore[no-untyped-def]
    small_module: IRModule, history, scratch
) -> None:
    pids = _warm_pids(small_module)
    # Serially the value is refused where it is built, or else where the result is first encoded.
    try:
        with parallel_ctx(1):
            out = returns_unencodable(small_module)
        out.encoded_function("main")
    except Exception as err:
        serial: BaseException = err
    else:
        raise AssertionError("the serial run built and encoded a function it cannot encode")
    parallel = _raised(returns_unencodable, small_module, 2)
    assert not isinstance(parallel, ParallelExecutionError)
    assert type(parallel) is type(serial)
    assert _pass_notes(parallel) == [f"{NOTE}'ReturnsUnencodable' on function 'main'"]
    assert "NotEncodable" in str(parallel)
    assert worker_pids() == pids
    assert leftovers(scratch) == []


class InstrumentFailure(RuntimeError):
    """What the instrument below raises."""


def _failing_instrument() -> PassInstrument:
    @pass_instrument
    class FailsOnThirdNested:
        """Raises in ``run_before_pass`` of the third nested InnerModulePass (in module order)."""

        def __init__(self) -> None:
            self.seen = 0

        def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
            if info.name == "InnerModulePass":
                self.seen += 1
                if self.seen == 3:
                    raise InstrumentFailure(f"nested call {self.seen}")

    return FailsOnThirdNested()  # type: ignore[no-any-return]


def test_nested_instrument_error_from_a_worker_has_the_serial_note(small_module: IRModule, history) -> None:  # type: ignore[no-untyped-def]
    third = calls_nested_pass.targets(small_module)[2]
    raised = []
    for workers in (1, 2):
        cfg = {"parpass.num_workers": workers, "parpass.parallel": "always" if workers > 1 else "never"}
        with pytest.raises(InstrumentFailure) as info, PassContext(instruments=[_failing_instrument()], config=cfg):
            calls_nested_pass(small_module)
        raised.append(info.value)
    assert history[-1].parallel and history[-1].passes == ("CallsNestedPass",)
    serial, parallel = raised
    assert str(parallel) == str(serial) == "nested call 3"
    expected = [f"{NOTE}'CallsNestedPass' on function {third!r}"]
    assert _pass_notes(serial) == expected
    assert _pass_notes(parallel) == expected


_CELL = """\
from parpass.transform import function_pass


@function_pass(opt_level=0, name="CellBoom")
def cell_boom(func, mod, ctx):
    raise ValueError("boom in a cell")
"""


@pytest.mark.parametrize("where", ["file", "notebook-cell"])
def test_worker_traceback_shows_the_users_file_line_and_source(small_module: IRModule, tmp_path, where: str) -> None:  # type: ignore[no-untyped-def]
    """A pass defined outside any importable module (shipped by value) fails in a worker: its frame in the
    remote traceback is the serial run's (file, line, function and the source line), whether the source is
    a file or known only to the parent's ``linecache`` (as a notebook cell's is)."""
    filename = str(tmp_path / "cell_17.py")
    if where == "file":
        (tmp_path / "cell_17.py").write_text(_CELL)
    else:
        linecache.cache[filename] = (len(_CELL), None, _CELL.splitlines(keepends=True), filename)
    try:
        namespace: dict[str, object] = {"__name__": "__main__"}  # shipped by value, as a script's passes are
        exec(compile(_CELL, filename, "exec"), namespace)
        cell_boom = namespace["cell_boom"]
        assert isinstance(cell_boom, Pass)
        serial = "".join(traceback.format_exception(_raised(cell_boom, small_module, 1)))
        parallel = _raised(cell_boom, small_module, 2)
    finally:
        linecache.cache.pop(filename, None)
    frame = f'  File "{filename}", line 6, in cell_boom\n    raise ValueError("boom in a cell")\n'
    assert frame in serial
    remote = [n for n in parallel.__notes__ if "remote traceback" in n]
    assert len(remote) == 1
    assert frame in remote[0] + "\n"
    assert "<dynamic-code>" not in remote[0]


def test_only_the_shipped_code_s_source_goes_with_the_passes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The wave carries the linecache entries of the code shipped by value, not every cell the session ran."""
    import cloudpickle

    from parpass.parallel.worker import pack_passes

    shipped, unrelated = str(tmp_path / "cell_1.py"), str(tmp_path / "cell_2.py")
    for name in (shipped, unrelated):
        linecache.cache[name] = (len(_CELL), None, _CELL.splitlines(keepends=True), name)
    try:
        namespace: dict[str, object] = {"__name__": "__main__"}
        exec(compile(_CELL, shipped, "exec"), namespace)
        _, sources = cloudpickle.loads(pack_passes([namespace["cell_boom"]]))  # type: ignore[list-item]
    finally:
        for name in (shipped, unrelated):
            linecache.cache.pop(name, None)
    assert shipped in sources
    assert unrelated not in sources


def test_pass_code_shipped_by_value_keeps_its_file_name(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """cloudpickle 3 renames the file of code it pickles by value to ``<dynamic-code>``; parpass's pickling
    of pass code (waves, reproducers) keeps the real name, which tracebacks show."""
    import cloudpickle

    from parpass.parallel.pickling import dumps_for_workers

    filename = str(tmp_path / "cell_3.py")
    namespace: dict[str, object] = {"__name__": "__main__"}
    exec(compile(_CELL, filename, "exec"), namespace)
    shipped = cloudpickle.loads(dumps_for_workers(namespace["cell_boom"]))
    assert shipped.pass_func.__code__.co_filename == filename  # type: ignore[attr-defined]
