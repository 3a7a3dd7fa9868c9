"""The worker pool under faults it did not cause: a worker that died idle, another thread's crash, a resize.

A wave is reported only for its own faults. A worker death that none of the
wave's functions caused (an idle worker killed from outside, a neighbour
thread's pass crashing the shared pool) costs the wave a retry on a rebuilt
pool, never an error naming its functions, and never a raw loky or OS
exception. Every wait here is bounded: a hang fails the test instead of
blocking the suite.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from parallel_support import leftovers, module_bytes, parallel_ctx, wait_gone, worker_pids
from ptest_passes import count_bindings, exits_worker

from parpass.errors import WorkerCrashedError
from parpass.ir import IRModule
from parpass.passes import FoldConstant, default_pipeline
from parpass.testing import random_module

#: Generous bound on one pass call; only a hang gets near it.
_CALL_LIMIT = 120.0


def _bounded(fn: Callable[[], Any]) -> Any:
    """``fn()`` in a daemon thread, failing the test if it does not finish within :data:`_CALL_LIMIT`."""
    outcome: list[Any] = []

    def call() -> None:
        try:
            outcome.append((True, fn()))
        except BaseException as err:
            outcome.append((False, err))

    thread = threading.Thread(target=call, daemon=True)  # a hung call must not hold up the interpreter's exit
    thread.start()
    thread.join(timeout=_CALL_LIMIT)
    if not outcome:
        pytest.fail(f"a pass call hung for more than {_CALL_LIMIT:g}s")
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def _fold(mod: IRModule, workers: int) -> IRModule:
    with parallel_ctx(workers):
        return FoldConstant()(mod)  # type: ignore[no-any-return]


@pytest.mark.filterwarnings("ignore:config option .parpass.num_workers. is 3, more than:RuntimeWarning")
@pytest.mark.loky_only  # resizes the pool
def test_a_pass_with_another_worker_count_after_an_idle_worker_died_neither_hangs_nor_leaks_loky_errors(
    small_module: IRModule, scratch
) -> None:  # type: ignore[no-untyped-def]
    expected = module_bytes(_fold(small_module, 1))
    seen: set[int] = set()
    for trial in range(4):
        workers, other = (2, 3) if trial % 2 == 0 else (3, 2)
        _bounded(lambda w=workers: _fold(small_module, w))
        pids = worker_pids()
        seen.update(pids)
        os.kill(pids[0], signal.SIGKILL)  # idle: no wave is running
        out = _bounded(lambda o=other: _fold(small_module, o))  # at once, with another worker count
        assert module_bytes(out) == expected
        assert len(worker_pids()) == other
    assert wait_gone(seen - set(worker_pids())) == set()  # every replaced pool's workers are gone
    assert leftovers(scratch) == []


def test_a_worker_that_died_idle_is_not_the_next_pass_s_error(small_module: IRModule, scratch) -> None:  # type: ignore[no-untyped-def]
    expected = module_bytes(_fold(small_module, 1))
    for _ in range(6):
        _bounded(lambda: _fold(small_module, 2))
        os.kill(worker_pids()[0], signal.SIGKILL)
        time.sleep(0.1)
        out = _bounded(lambda: _fold(small_module, 2))  # an innocent pass: rebuilt and run, no error
        assert module_bytes(out) == expected
    assert leftovers(scratch) == []


def test_a_crash_in_one_thread_is_not_reported_by_pipelines_in_another(scratch) -> None:  # type: ignore[no-untyped-def]
    crashing = random_module(num_functions=24, num_prim_funcs=8, size=8, seed=11)
    innocent = random_module(num_functions=24, num_prim_funcs=8, size=8, seed=5)
    with parallel_ctx(1):
        expected = module_bytes(default_pipeline()(innocent))
    stop = threading.Event()
    crashes: list[BaseException] = []
    seen: set[int] = set()

    def crash_repeatedly() -> None:
        while not stop.is_set():
            try:
                with parallel_ctx(2):
                    exits_worker(crashing)
            except BaseException as err:
                crashes.append(err)

    def innocent_pipelines() -> list[BaseException | list[tuple[str, bytes]]]:
        outcomes: list[BaseException | list[tuple[str, bytes]]] = []
        for _ in range(8):
            try:
                with parallel_ctx(2):
                    outcomes.append(module_bytes(default_pipeline()(innocent)))
            except BaseException as err:
                outcomes.append(err)
            seen.update(worker_pids())
        return outcomes

    neighbour = threading.Thread(target=crash_repeatedly, daemon=True)
    neighbour.start()
    try:
        outcomes = _bounded(innocent_pipelines)
    finally:
        stop.set()
        neighbour.join(timeout=_CALL_LIMIT)
    assert not neighbour.is_alive()
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    assert errors == []  # not one pipeline of the innocent thread failed
    assert all(o == expected for o in outcomes)
    # the crashing thread still gets its own crash, naming its own pass and function
    assert crashes
    assert all(isinstance(err, WorkerCrashedError) for err in crashes), crashes
    assert all(err.functions[:1] == ("main",) and "ExitsWorker" in str(err) for err in crashes)  # type: ignore[attr-defined]
    assert leftovers(scratch) == []
    with parallel_ctx(2):
        count_bindings(innocent)
    assert wait_gone(seen - set(worker_pids())) == set()


# ---------------------------------------------------------------- signals to the `parpass` command

_SLOW_PASS = """
import time
from parpass.transform import function_pass, register_pass

@function_pass(opt_level=0, name="SlowTestPass")
def slow_test_pass(func, mod, ctx):
    time.sleep(0.02)
    return func.with_attr("slow", True)

register_pass("SlowTestPass")(lambda: slow_test_pass)
"""


def _group(pgid: int) -> list[int]:
    """Live (non-zombie) processes of process group ``pgid``, read from /proc."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                state, _ppid, group = handle.read().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):
            continue
        if int(group) == pgid and state != "Z":
            out.append(int(entry))
    return out


def _group_gone(pgid: int, seconds: float = 15.0) -> list[int]:
    deadline = time.monotonic() + seconds
    left = _group(pgid)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = _group(pgid)
    return left


def _start_opt(tmp_path, scratch_dir) -> subprocess.Popen[str]:  # type: ignore[no-untyped-def]
    """``parpass opt`` running a slow pass on 2 workers, in a session of its own, once its first wave is out."""
    module, passes = tmp_path / "mod.msgpack", tmp_path / "slow.py"
    if not module.exists():
        subprocess.run(
            [sys.executable, "-m", "parpass", "gen", "-o", str(module), "--functions", "300", "--prim-funcs", "0"],
            check=True,
            timeout=_CALL_LIMIT,
        )
        passes.write_text(_SLOW_PASS)
    command = [sys.executable, "-m", "parpass", "opt", str(module), "-p", "SlowTestPass", "--load", str(passes)]
    command += ["--workers", "2", "--config", 'parpass.parallel="always"', "-o", str(tmp_path / "out.msgpack")]
    env = {**os.environ, "PARPASS_SCRATCH_DIR": str(scratch_dir)}
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, start_new_session=True, env=env)
    deadline = time.monotonic() + _CALL_LIMIT
    while not any(p.name.startswith("parpass-wave-") for p in scratch_dir.iterdir()):
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "no wave started"
        time.sleep(0.02)
    return proc


@pytest.mark.parametrize("whole_group", [False, True], ids=["parent", "process-group"])
def test_sigterm_to_parpass_opt_exits_143_and_leaves_nothing(tmp_path, whole_group: bool) -> None:  # type: ignore[no-untyped-def]
    scratch_dir = tmp_path / "scratch"
    scratch_dir.mkdir()
    for delay in (0.0, 0.7):
        proc = _start_opt(tmp_path, scratch_dir)
        time.sleep(delay)
        if whole_group:
            os.killpg(proc.pid, signal.SIGTERM)
        else:
            proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=_CALL_LIMIT)
        finally:
            leftover = _group_gone(proc.pid)
            for pid in leftover:  # only this test's own processes: its session
                os.kill(pid, signal.SIGKILL)
        assert proc.returncode == 143, err
        assert _own_lines(err) == ["parpass: error: terminated"], err
        assert leftover == []  # no worker, no resource tracker
        assert list(scratch_dir.iterdir()) == []


def test_ctrl_c_in_parpass_opt_is_one_line_exit_130_and_leaves_nothing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    scratch_dir = tmp_path / "scratch"
    scratch_dir.mkdir()
    # a terminal sends Ctrl-C to the whole process group; a user presses it again while parpass stops
    for delay, repeats in ((0.0, 1), (0.4, 3), (1.0, 1), (0.2, 5)):
        proc = _start_opt(tmp_path, scratch_dir)
        time.sleep(delay)
        for _ in range(repeats):
            os.killpg(proc.pid, signal.SIGINT)
            time.sleep(0.03)
        try:
            _, err = proc.communicate(timeout=_CALL_LIMIT)
        finally:
            leftover = _group_gone(proc.pid)
            for pid in leftover:
                os.kill(pid, signal.SIGKILL)
        assert proc.returncode == 130, err
        assert _own_lines(err) == ["parpass: error: interrupted"], err
        assert leftover == []
        assert list(scratch_dir.iterdir()) == []


def test_sigterm_to_a_library_user_leaves_no_worker_and_no_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Without a handler the parent dies at once: its workers notice, remove the wave's files and exit."""
    scratch_dir = tmp_path / "scratch"
    scratch_dir.mkdir()
    script = tmp_path / "user.py"
    script.write_text(
        _SLOW_PASS
        + """
from parpass.testing import random_module
from parpass.transform import PassContext
mod = random_module(num_functions=300, num_prim_funcs=0, size=8, seed=1)
with PassContext(config={"parpass.num_workers": 2, "parpass.parallel": "always"}):
    slow_test_pass(mod)
"""
    )
    env = {**os.environ, "PARPASS_SCRATCH_DIR": str(scratch_dir)}
    proc = subprocess.Popen([sys.executable, str(script)], start_new_session=True, env=env)
    deadline = time.monotonic() + _CALL_LIMIT
    while not any(p.name.startswith("parpass-wave-") for p in scratch_dir.iterdir()):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=_CALL_LIMIT)
    leftover = _group_gone(proc.pid)
    for pid in leftover:
        os.kill(pid, signal.SIGKILL)
    assert leftover == []
    assert list(scratch_dir.iterdir()) == []


@pytest.mark.parametrize("status", [130, 143])
def test_the_command_cannot_hang_on_its_way_out_after_an_interrupt(
    monkeypatch: pytest.MonkeyPatch, status: int
) -> None:
    """After Ctrl-C or SIGTERM, ``parpass`` exits the usual way with a watchdog that ends the process with the
    same status should the interpreter's exit-time joins of loky's threads hang (a CI run once saw that)."""
    import parpass.cli.main as cli_main

    exits: list[int] = []
    monkeypatch.setattr(cli_main, "EXIT_GRACE", 0.05)
    monkeypatch.setattr(cli_main.os, "_exit", exits.append)
    monkeypatch.setattr(cli_main, "main", lambda: status)
    with pytest.raises(SystemExit) as leaving:
        cli_main.run()
    assert leaving.value.code == status
    time.sleep(0.5)  # the exit "hangs": the watchdog ends the process
    assert exits == [status]
    monkeypatch.setattr(cli_main, "main", lambda: 0)
    with pytest.raises(SystemExit):
        cli_main.run()
    time.sleep(0.2)
    assert exits == [status]  # no watchdog on a normal exit


def _own_lines(err: str) -> list[str]:
    """The lines of ``err`` other than loky's resource tracker's: at times (about 1 run in 12) its separate
    process reports a semaphore of the killed pool as leaked after the parent exited (a known loky
    warning on a killed executor; the semaphore is gone, as its second line says)."""
    lines = err.splitlines()
    out: list[str] = []
    skip = False
    for line in lines:
        tracker = "loky/backend/resource_tracker.py" in line
        if tracker and ("leaked semlock" in line or "resource_tracker: /loky-" in line):
            skip = True  # the warning line (the leak, or the semaphore already gone), then the line it quotes
            continue
        if skip and line.startswith("  "):
            continue
        skip = False
        out.append(line)
    return out


@pytest.mark.loky_only  # loky's exit hook
def test_the_crew_closes_before_a_loky_pool_started_after_it_waits_at_exit(small_module: IRModule) -> None:
    """loky registers its exit hook (which waits for every running task: a crew's seats serve for minutes)
    again each time a pool starts; the next wave puts parpass's hook, which lets the seats go, after it."""
    from loky import ProcessPoolExecutor

    from parpass.parallel import get_backend

    with parallel_ctx(2):
        count_bindings(small_module)
    with ProcessPoolExecutor(1) as other:  # someone else's pool: loky's hook goes last
        other.submit(int).result()
    hooks = threading._threading_atexits  # type: ignore[attr-defined]
    assert hooks[-1].func != get_backend().close_crew  # type: ignore[attr-defined]
    with parallel_ctx(2):
        count_bindings(small_module)
    assert hooks[-1].func == get_backend().close_crew  # type: ignore[attr-defined]


_POOL_AFTER_THE_LAST_WAVE = """
import sys
sys.path[:0] = {path!r}
from loky import ProcessPoolExecutor
from parallel_support import parallel_ctx
from ptest_passes import count_bindings
from parpass.testing import random_module

with parallel_ctx(2):
    count_bindings(random_module(num_functions=12, num_prim_funcs=0, size=4, seed=1))
other = ProcessPoolExecutor(1)  # started after the last wave, and never shut down: its exit hook runs first
print(other.submit(int, "7").result())
"""


@pytest.mark.loky_only  # loky's exit hook
def test_a_loky_pool_started_after_the_last_wave_does_not_hold_up_the_exit(tmp_path: Path) -> None:
    """No wave comes after that pool to put parpass's exit hook last: the crew's seats are let go as soon as
    the interpreter starts exiting, and the process ends (it waited for them two minutes)."""
    script = tmp_path / "pool_after.py"
    script.write_text(_POOL_AFTER_THE_LAST_WAVE.format(path=sys.path))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "7"
