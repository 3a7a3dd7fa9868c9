"""Root of the test suite: puts ``tests/`` on ``sys.path`` so that ``support`` is importable, and sets the
hypothesis profile: no per-example deadline (CI machines are shared and noisy; timing is for benchmarks)."""

import signal
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from parpass._loading import load_all

# The whole package, before any test snapshots the registries: a test that restores them afterwards
# must not take away the standard passes and options that loading on first use would register inside it.
load_all()

settings.register_profile("parpass", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("parpass")


@pytest.fixture(autouse=True)
def _a_quiet_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The executor's decisions see a machine with nothing else running: what a test decides must not hang
    on what else CI runs beside it (the tests of the load's effect set their own)."""
    from parpass.parallel import executor

    monkeypatch.setattr(executor, "_others_running", lambda: 0)


def _signal_state() -> tuple[object, object, set[signal.Signals]]:
    """How this thread handles SIGINT and SIGTERM, and which signals it blocks."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    return signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM), mask


@pytest.fixture(autouse=True)
def _signals_as_found() -> Iterator[None]:
    """A test leaves Ctrl-C and SIGTERM handled as it found them: a process started later by the same test process
    inherits an ignored or blocked SIGINT, and would then go on through a Ctrl-C test's signal."""
    before = _signal_state()
    yield
    assert _signal_state() == before, "this test left SIGINT/SIGTERM handling (or the signal mask) changed"
