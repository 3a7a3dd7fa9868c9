"""Worker deaths, timeouts and interrupts: a clear error, nothing lost, nothing left behind."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest
from parallel_support import leftovers, module_bytes, parallel_ctx, survivors, wait_gone, worker_pids
from ptest_passes import count_bindings, exits_worker, fails_on_some, segfaults, sleeps

from parpass.errors import PassTimeoutError, WorkerCrashedError
from parpass.ir import IRModule, structural_hash
from parpass.parallel import LokyBackend, get_backend, load_reproducer, reproduce, set_backend
from parpass.parallel.backend import BrokenPool

HERE = os.path.dirname(__file__)


def _warm(mod: IRModule) -> list[int]:
    with parallel_ctx(2):
        count_bindings(mod)
    pids = worker_pids()
    assert pids
    return pids


@pytest.mark.parametrize("crashing_pass", [exits_worker, segfaults], ids=["os._exit", "segfault"])
def test_worker_death_names_pass_and_function_and_leaves_nothing(  # type: ignore[no-untyped-def]
    small_module: IRModule, crashing_pass, scratch, backend: str
) -> None:
    pids = _warm(small_module)
    before = module_bytes(small_module)
    with pytest.raises(WorkerCrashedError) as info, parallel_ctx(2):
        crashing_pass(small_module)
    err = info.value
    assert err.pass_name == repr(crashing_pass.info.name)
    assert "main" in err.functions
    assert "'main'" in str(err) and crashing_pass.info.name in str(err)
    assert module_bytes(small_module) == before
    assert len(wait_gone(pids, leaving=survivors(backend, pids))) == survivors(backend, pids)
    assert leftovers(scratch) == []  # no wave, progress or output file left
    # the pool is rebuilt and the next pass works
    with parallel_ctx(2):
        out = count_bindings(small_module)
    with parallel_ctx(1):
        assert module_bytes(out) == module_bytes(count_bindings(small_module))


def test_a_pool_broken_before_a_submission_is_rebuilt() -> None:
    backend = LokyBackend()
    try:
        crashed = backend.submit(2, os._exit, 3)
        with pytest.raises(BrokenPool):
            crashed.result(timeout=60)
        # the broken pool is noticed: the next submission gets a fresh pool, not the old error
        assert backend.submit(2, abs, -5).result(timeout=60) == 5
    finally:
        backend.shutdown()


class _HoldsChunksUntilADeath:
    """A backend whose crews send the first chunk of a wave, then hold every later chunk until the worker
    that took the first one has died (the pass kills its worker on the first function it runs).

    This makes certain the race CI once hit: a worker dies while the parent is
    still handing out the chunks of the same wave, to the other seat and to the
    dead one.
    """

    def __init__(self, inner: LokyBackend, marker: str) -> None:
        self.inner = inner
        self.marker = marker
        self.held = 0  # chunks sent after the death

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    @contextlib.contextmanager
    def crew(self, num_workers: int) -> Iterator[object]:
        with self.inner.crew(num_workers) as crew:
            yield _HeldCrew(crew, self)

    def wait_for_the_death(self) -> None:
        deadline = time.monotonic() + 60
        while True:
            assert time.monotonic() < deadline, "no worker ran the first chunk"
            try:
                with open(self.marker) as handle:
                    pid = int(handle.read().split()[0])
                break
            except (FileNotFoundError, IndexError, ValueError):  # not written yet
                time.sleep(0.01)
        assert wait_gone([pid], 60) == set(), "the worker that took the first chunk did not die"


class _HeldCrew:
    def __init__(self, crew: object, backend: _HoldsChunksUntilADeath) -> None:
        self._crew = crew
        self._backend = backend
        self._sent = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._crew, name)

    def run(self, seat: int, wave: str, indices: list[int]) -> None:
        if self._sent:
            self._backend.wait_for_the_death()
            self._backend.held += 1
        self._sent += 1
        self._crew.run(seat, wave, indices)  # type: ignore[attr-defined]


def test_a_worker_dying_while_chunks_are_handed_out_is_a_clear_crash(small_module: IRModule, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from parallel_support import dies_first

    before = module_bytes(small_module)
    marker = str(tmp_path / "died")
    backend = _HoldsChunksUntilADeath(LokyBackend(), marker)
    previous = set_backend(backend)  # type: ignore[arg-type]
    try:
        with pytest.raises(WorkerCrashedError) as info, parallel_ctx(2):
            dies_first(marker)(small_module)
        assert backend.held > 0  # chunks went out after the death, the race is certain
        err = info.value
        assert "DiesFirst" in str(err) and err.pass_name == "'DiesFirst'"
        with open(marker) as handle:
            _, digest = handle.read().split()
        # the function the dead worker was running, by its structural hash
        assert err.functions and str(structural_hash(small_module[err.functions[0]])) == digest
        assert module_bytes(small_module) == before
    finally:
        set_backend(previous).shutdown()
    with parallel_ctx(2):
        count_bindings(small_module)
    assert get_backend() is previous


def test_timeout_names_the_function_and_kills_the_workers(small_module: IRModule, scratch, backend: str) -> None:  # type: ignore[no-untyped-def]
    pids = _warm(small_module)
    start = time.monotonic()
    with pytest.raises(PassTimeoutError) as info, parallel_ctx(2, **{"parpass.timeout": 1.5}):
        sleeps(small_module)
    assert time.monotonic() - start < 30
    # main sleeps for a minute; on a machine loaded enough, another function may also be running when the
    # error is raised and have run past the timeout (it is then rightly named too)
    assert "main" in info.value.functions
    assert set(info.value.functions) <= set(small_module.names())
    assert "1.5s" in str(info.value) and "Sleeps" in str(info.value) and "'main'" in str(info.value)
    assert isinstance(info.value, TimeoutError)
    assert len(wait_gone(pids, leaving=survivors(backend, pids))) == survivors(backend, pids)
    assert leftovers(scratch) == []
    with parallel_ctx(2):
        count_bindings(small_module)


@pytest.mark.loky_only
@pytest.mark.parametrize("where", ["as-the-file-is-made", "as-publish-returns"])
def test_a_signal_as_a_wave_file_is_published_leaves_no_file(  # type: ignore[no-untyped-def]
    small_module: IRModule, scratch, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """A signal that lands once the wave file exists but before the executor holds its name (a SIGTERM to
    ``parpass opt`` left one behind, now and then) still leaves nothing: the crew names the file first."""
    from parpass.parallel import crew as crew_mod

    _warm(small_module)
    if where == "as-the-file-is-made":
        write = crew_mod.write_wave

        def interrupted_write(header: object, path: str) -> None:
            write(header, path)  # type: ignore[arg-type]
            raise KeyboardInterrupt

        monkeypatch.setattr(crew_mod, "write_wave", interrupted_write)
    else:
        publish = crew_mod.Crew.publish

        def interrupted_publish(self, header, targets=None):  # type: ignore[no-untyped-def]
            publish(self, header, targets)
            raise KeyboardInterrupt

        monkeypatch.setattr(crew_mod.Crew, "publish", interrupted_publish)
    with pytest.raises(KeyboardInterrupt), parallel_ctx(2):
        count_bindings(small_module)
    assert leftovers(scratch) == []
    monkeypatch.undo()
    with parallel_ctx(2):  # the next pass works
        count_bindings(small_module)
    assert leftovers(scratch) == []


def test_reproducer_is_written_and_reproduces(small_module: IRModule, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "repro.bin"
    with pytest.raises(ValueError), parallel_ctx(2, **{"parpass.reproducer": str(path)}):
        fails_on_some(small_module)
    repro = load_reproducer(str(path))
    assert repro.functions and all(len(small_module[n].bindings) in (3, 5) for n in repro.functions)
    assert "FailsOnSome" in repro.message
    error = reproduce(repro)
    assert error is not None and type(error).__name__ == "Boom"
    result = subprocess.run(
        [sys.executable, "-m", "parpass.parallel.reproducer", str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": HERE + os.pathsep + os.environ.get("PYTHONPATH", "")},
    )
    assert result.returncode == 1, result.stderr
    assert "reproduced: Boom" in result.stdout


def test_crash_reproducer_names_the_crashing_function(small_module: IRModule, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "crash.bin"
    with pytest.raises(WorkerCrashedError), parallel_ctx(2, **{"parpass.reproducer": str(path)}):
        exits_worker(small_module)
    repro = load_reproducer(str(path))
    assert "main" in repro.functions
    result = subprocess.run(
        [sys.executable, "-m", "parpass.parallel.reproducer", str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": HERE + os.pathsep + os.environ.get("PYTHONPATH", "")},
    )
    assert result.returncode == 3  # the pass kills the process in-process too: it still fails


def test_ctrl_c_leaves_no_worker_behind(tmp_path) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "interrupted.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import signal
            import sys
            # Ctrl-C handled as in a terminal, whatever started the test run (a shell without job control
            # starts background jobs with SIGINT ignored, and a child inherits that)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
            sys.path.insert(0, {HERE!r})
            import parpass
            from parpass.parallel import get_backend
            from parpass.testing import random_module
            from parpass.transform import PassContext
            from ptest_passes import count_bindings, sleeps
            mod = random_module(num_functions=24, num_prim_funcs=8, size=8, seed=11)
            cfg = {{"parpass.num_workers": 2, "parpass.parallel": "always"}}
            with PassContext(config=cfg):
                count_bindings(mod)
                print(*get_backend().worker_pids(), flush=True)
                try:
                    sleeps(mod)
                except KeyboardInterrupt:
                    print("interrupted", flush=True)
                    raise
            """
        )
    )
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    pids = [int(p) for p in proc.stdout.readline().split()]
    assert pids
    time.sleep(1.0)  # the sleeping pass is running in a worker now
    proc.send_signal(signal.SIGINT)
    sent = time.monotonic()
    out, err = proc.communicate(timeout=60)
    # a script that ignores the signal runs its 60 s pass to the end: exit 0 after ~59 s, no output (what a
    # test run started with SIGINT ignored gave before the script set its handler)
    assert "interrupted" in out, f"exit {proc.returncode} after {time.monotonic() - sent:.1f} s; stderr: {err!r}"
    assert proc.returncode != 0
    assert wait_gone(pids) == set()


def test_a_pass_inside_a_worker_never_starts_a_pool(small_module: IRModule) -> None:
    from ptest_passes import runs_parallel_pass_inside

    with parallel_ctx(2):
        out = runs_parallel_pass_inside(small_module)
    reasons = {out[n].attrs["inner_reason"] for n in runs_parallel_pass_inside.targets(small_module)}
    assert reasons == {"nested in a worker"}


@pytest.mark.loky_only  # a cluster's size is the cluster's: parpass.num_workers only caps what a pass uses
@pytest.mark.filterwarnings("ignore:config option .parpass.num_workers. is 3, more than:RuntimeWarning")
def test_changing_num_workers_resizes_the_pool(small_module: IRModule) -> None:
    with parallel_ctx(3):
        count_bindings(small_module)
    assert len(worker_pids()) == 3
    with parallel_ctx(2):
        count_bindings(small_module)
    assert len(worker_pids()) == 2
