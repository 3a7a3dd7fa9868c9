"""Fixtures for the parallel-executor tests."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from parallel_support import executor

from parpass.ir import IRModule
from parpass.testing import random_module


@pytest.fixture(scope="session")
def small_module() -> IRModule:
    return random_module(num_functions=24, num_prim_funcs=8, size=8, seed=11)


@pytest.fixture
def history() -> Iterator[list]:
    """The executor's wave log, cleared for the test (with what the executor learned before it)."""
    executor.forget()
    yield executor.history


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The directory of this test's wave, progress and output files, to check that none is left behind."""
    from parpass.parallel import wave

    where = tmp_path / "scratch"
    where.mkdir()
    monkeypatch.setattr(wave, "_scratch_dir", lambda: str(where))
    return where


# ---------------------------------------------------------------------------------------------------------------------
# every test here runs on both backends: this machine's loky workers, and a Dask LocalCluster's


@pytest.fixture(scope="session", autouse=True)
def _lost_workers_stay() -> Iterator[None]:
    """A LocalCluster closes a nanny whose worker is still gone 15 s after it was lost (the config key
    ``distributed.deploy.lost-worker-timeout``): a worker a test restarts just then, 15 s after another test
    killed it, would never come back. Here the timeout outlasts the session."""
    try:
        import dask
    except ImportError:
        yield
        return
    with dask.config.set({"distributed.deploy.lost-worker-timeout": "1h"}):
        yield


@pytest.fixture(scope="session")
def _local_cluster() -> Iterator[str]:
    """A 2-worker LocalCluster of single-threaded processes (one per test process), its scheduler address."""
    distributed = pytest.importorskip("distributed")
    local = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=50
    )
    try:
        yield local.scheduler_address
    finally:
        from parpass.parallel import cluster

        cluster.close_clients()
        local.close()


#: The backends every test here runs on: this machine's loky workers and, where Dask is installed (the
#: ``test`` extra installs it), a Dask LocalCluster's; PARPASS_TEST_BACKENDS=loky (or dask) chooses one.
BACKENDS = (
    os.environ.get("PARPASS_TEST_BACKENDS") or ("loky,dask" if importlib.util.find_spec("distributed") else "loky")
).split(",")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test here on each of :data:`BACKENDS`, but those marked ``own_backend`` (they pick their own)."""
    if "backend" in metafunc.fixturenames and not metafunc.definition.get_closest_marker("own_backend"):
        metafunc.parametrize("backend", BACKENDS, indirect=True)


@pytest.fixture(autouse=True)
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """The backend the test's parallel runs use: loky's local workers, or (installed with set_backend) the
    workers of a Dask LocalCluster. A test marked ``loky_only`` checks what only local workers have; one
    marked ``own_backend`` runs once, on loky's unless it chooses (the Dask backend's own tests do)."""
    if getattr(request, "param", "loky") == "loky":
        yield "loky"
        return
    if request.node.get_closest_marker("loky_only"):
        pytest.skip("checks what only local workers have (see the loky_only marker)")
    from parpass.parallel import cluster, set_backend

    address = request.getfixturevalue("_local_cluster")
    backend = cluster.backend_at(address)
    # a test that killed a worker leaves its nanny starting another: the next test starts with both
    backend.client.wait_for_workers(2, timeout=120)
    previous = set_backend(backend)
    executor.forget()
    try:
        yield "dask"
    finally:
        set_backend(previous)
        executor.forget()
