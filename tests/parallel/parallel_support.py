"""Helpers for the parallel-executor tests.

Besides the contexts and module comparisons every test file uses, this holds
the instruments, module passes and picklable passes of the resident-IR tests:
workers import this module by reference, as they would a user's passes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # workers import ptest_passes by reference

from support import alive, wait_gone  # noqa: F401  (re-exported for the parallel tests)

from parpass.instrument import PassInstrument
from parpass.ir import IRModule, relax, structural_hash
from parpass.parallel import default_executor as executor
from parpass.parallel import get_backend
from parpass.transform import Pass, PassContext, PassInfo, function_pass, module_pass


def parallel_ctx(workers: int = 2, **config: object) -> PassContext:
    """A context that forces worker processes (or in-process when ``workers`` is 1)."""
    cfg: dict[str, object] = {"parpass.num_workers": workers, "parpass.parallel": "always" if workers > 1 else "never"}
    cfg.update(config)
    return PassContext(config=cfg)


def probe_moves_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """'auto' starts every chain it does not know in-process and finds at its first check that moving the
    rest to the (started) workers pays."""
    import parpass.parallel.executor as executor_mod

    monkeypatch.setattr(executor_mod, "_PROBE_FIRST", 0.0)
    monkeypatch.setattr(executor_mod, "_PROBE_EVERY", 0.0)
    monkeypatch.setattr(executor_mod, "_PROBE_MIN_FUNCTIONS", 1)
    monkeypatch.setattr(executor_mod, "_SHIP_MIN_SECONDS", 0.0)  # however little is left
    monkeypatch.setattr(executor, "_worth_moving", lambda *args: True)
    get_backend().warm(2)
    executor.forget()


def module_bytes(mod: IRModule) -> list[tuple[str, bytes]]:
    return [(name, mod.encoded_function(name)) for name in mod.names()]


def worker_pids() -> list[int]:
    return get_backend().worker_pids()


def survivors(backend: str, pids: list[int]) -> int:
    """How many of the workers ``pids`` outlive a pass that killed one of them, or ran past its timeout:
    loky's pool goes whole; a cluster loses only that worker (its nanny starts another)."""
    return 0 if backend == "loky" else len(pids) - 1


# ---------------------------------------------------------------------------------------------------------------------
# instruments (they run in the parent)


class Recorder(PassInstrument):
    """Records every callback with the pass name and the module's structural hash (so it reads the module:
    a Sequential runs pass by pass under it, one wave per function-level pass)."""

    def __init__(self, trace: list[tuple[str, ...]]) -> None:
        self.trace = trace

    def enter_pass_ctx(self) -> None:
        self.trace.append(("enter",))

    def exit_pass_ctx(self) -> None:
        self.trace.append(("exit",))

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        self.trace.append(("before", info.name, str(structural_hash(mod))))

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        self.trace.append(("after", info.name, str(structural_hash(mod))))

    def on_pass_error(self, mod: IRModule, info: PassInfo, error: BaseException) -> None:
        self.trace.append(("error", info.name, type(error).__name__))


class KillsAWorkerAfter(PassInstrument):
    """After pass ``pass_name`` (once), SIGKILLs one idle worker of the pool and waits until it is gone:
    the crew that holds the pipeline's resident functions loses a seat between two waves."""

    def __init__(self, pass_name: str) -> None:
        self.pass_name = pass_name
        self.killed: list[int] = []
        self.before: list[int] = []

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        if info.name != self.pass_name or self.killed:
            return
        import signal

        self.before = worker_pids()
        victim = self.before[0]
        os.kill(victim, signal.SIGKILL)
        if wait_gone([victim]):
            raise AssertionError(f"worker {victim} survived SIGKILL")
        self.killed.append(victim)


# ---------------------------------------------------------------------------------------------------------------------
# passes


def at_workers(workers: int, inner: Pass, pools: list[list[int]]) -> Pass:
    """A module pass that runs ``inner`` under a nested context with ``workers`` workers ('always' above 1),
    and then appends the pool's worker pids to ``pools``: a pipeline that resizes the pool as it goes."""

    def run(mod: IRModule, ctx: PassContext) -> IRModule:
        mode = "always" if workers > 1 else "never"
        with PassContext(opt_level=ctx.opt_level, config={"parpass.num_workers": workers, "parpass.parallel": mode}):
            out = inner(mod)
        pools.append(worker_pids() if workers > 1 else [])
        return out

    return module_pass(run, opt_level=0, name=f"AtWorkers{workers}")


@function_pass(opt_level=0, name="TagAndReportPid")
def tag_and_report_pid(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    """Prints the pid of the process it runs in (replayed in the parent) and changes the function."""
    print(f"pid {os.getpid()}")
    return func.with_attr("reported", len(func.bindings))


def dies_first(marker: str) -> Pass:
    """A function pass whose first call in any process (the one that creates file ``marker``) writes
    ``pid structural-hash`` of its function there and kills its process; every later call changes the function."""

    def run(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return func.with_attr("survived", True)
        os.write(fd, f"{os.getpid()} {structural_hash(func)}".encode())
        os.close(fd)
        os._exit(5)

    return function_pass(run, opt_level=0, name="DiesFirst")


def bounded(fn: Callable[[], object], seconds: float, what: str) -> object:
    """``fn()`` in a daemon thread; fails (AssertionError) if it does not finish within ``seconds``."""
    import threading

    outcome: list[tuple[bool, object]] = []

    def call() -> None:
        try:
            outcome.append((True, fn()))
        except BaseException as err:
            outcome.append((False, err))

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(timeout=seconds)
    if not outcome:
        raise AssertionError(f"{what} did not finish within {seconds:g}s (a deadlock?)")
    ok, value = outcome[0]
    if not ok:
        assert isinstance(value, BaseException)
        raise value
    return value


def leftovers(scratch: Path) -> list[str]:
    """Files in ``scratch`` other than the result stores the live crew keeps between waves (see
    :mod:`parpass.parallel.store`): a wave, progress or store file that should be gone."""
    keep = set(getattr(get_backend(), "crew_files", list)())
    return sorted(str(p) for p in scratch.iterdir() if str(p) not in keep)
