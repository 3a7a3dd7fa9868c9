"""Function-level passes on a Dask cluster: a 2-worker LocalCluster of processes, sharing no scratch directory
with the parent, gives the serial run's module, trace and errors."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
from parallel_support import Recorder, module_bytes
from ptest_passes import (
    count_bindings,
    exits_worker,
    fails_on_some,
    keep_even,
    look_up_callees,
    looks_up_carelessly,
    sleeps,
    tag_prim_funcs,
    waits_a_little,
)

from parpass.errors import ParallelExecutionError, PassTimeoutError, WorkerCrashedError
from parpass.ir import IRModule, relax
from parpass.parallel import cluster
from parpass.parallel import default_executor as executor
from parpass.passes import default_pipeline
from parpass.testing import random_module
from parpass.transform import PassContext, Sequential, function_pass

distributed = pytest.importorskip("distributed")
pytestmark = pytest.mark.own_backend  # each test names its cluster


def _start(tmp: Path, name: str, **config: object) -> distributed.LocalCluster:
    """A LocalCluster of 2 single-threaded worker processes whose scratch directory is ``tmp/name``."""
    import dask

    workers_scratch = tmp / name
    workers_scratch.mkdir()
    saved = os.environ.get("PARPASS_SCRATCH_DIR")
    os.environ["PARPASS_SCRATCH_DIR"] = str(workers_scratch)  # the workers inherit it; the parent's is reset
    try:
        with dask.config.set(config):
            return distributed.LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=50
            )
    finally:
        if saved is None:
            del os.environ["PARPASS_SCRATCH_DIR"]
        else:
            os.environ["PARPASS_SCRATCH_DIR"] = saved


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The scheduler address of a 2-worker LocalCluster, and its workers' scratch directory."""
    tmp = tmp_path_factory.mktemp("cluster")
    local = _start(tmp, "workers")
    try:
        yield local.scheduler_address, tmp / "workers"
    finally:
        cluster.close_clients()
        local.close()


@pytest.fixture
def parent_scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The parent's own scratch directory for the test (not the workers')."""
    where = tmp_path / "parent"
    where.mkdir()
    monkeypatch.setenv("PARPASS_SCRATCH_DIR", str(where))
    return where


def _files(scratch: Path) -> list[str]:
    """The files in ``scratch`` but the records cluster workers keep of what they run (see cluster.last_words)."""
    return sorted(name for name in os.listdir(scratch) if not name.startswith("parpass-cluster-"))


def _on(address: str, workers: int = 2, **config: object) -> PassContext:
    cfg: dict[str, object] = {"parpass.num_workers": workers, "parpass.parallel": "always"}
    cfg["parpass.scheduler"] = address
    cfg.update(config)
    return PassContext(config=cfg)


def _serial(pipeline, mod: IRModule, **config: object) -> IRModule:  # type: ignore[no-untyped-def]
    with PassContext(config={"parpass.num_workers": 1, **config}):
        return pipeline(mod)


@contextlib.contextmanager
def _fresh_cluster(tmp: Path, **config: object) -> Iterator[tuple[str, cluster.DaskBackend]]:
    """A cluster of the test's own (for tests that kill or restart its workers), warmed: address, backend."""
    local = _start(tmp, "workers", **config)
    try:
        backend = cluster.backend_at(local.scheduler_address)
        backend.warm(2)
        yield local.scheduler_address, backend
    finally:
        cluster.close_clients()
        local.close()


def _next_pass_works(address: str, mod: IRModule) -> None:
    with _on(address):
        out = count_bindings(mod)
    assert module_bytes(out) == module_bytes(_serial(count_bindings, mod))


PIPELINES = {
    "one pass": count_bindings,
    "partly unchanged": keep_even,
    "fused chain with lookups": Sequential([count_bindings, look_up_callees, keep_even, tag_prim_funcs]),
    "default pipeline": default_pipeline(2),
}


@pytest.mark.parametrize("fuse", [True, False])
@pytest.mark.parametrize("pipeline", sorted(PIPELINES))
def test_byte_identical_to_serial_on_a_cluster(
    dask_cluster: tuple[str, Path], parent_scratch: Path, pipeline: str, fuse: bool
) -> None:
    address, workers_scratch = dask_cluster
    mod = random_module(num_functions=30, num_prim_funcs=10, size=8, seed=5)
    before = module_bytes(mod)
    serial = _serial(PIPELINES[pipeline], mod, **{"parpass.fuse_passes": fuse})
    executor.forget()
    with _on(address, **{"parpass.fuse_passes": fuse}):
        out = PIPELINES[pipeline](mod)
    assert module_bytes(out) == module_bytes(serial)
    assert module_bytes(mod) == before
    assert any(s.parallel for s in executor.history)  # it did run on the cluster
    assert _files(workers_scratch) == []  # workers wrote no wave or store where they would on one machine


def test_no_wave_file_and_no_file_the_workers_read(
    dask_cluster: tuple[str, Path], parent_scratch: Path, monkeypatch: pytest.MonkeyPatch, small_module: IRModule
) -> None:
    """The parent writes no wave file; what it keeps (its result stores) lies only in its own directory, gone
    once the crew closes; the workers' directory stays empty."""
    from parpass.parallel import crew

    def no_wave_file(header: object, path: str) -> None:
        raise AssertionError("a wave file was written for a cluster")

    monkeypatch.setattr(crew, "write_wave", no_wave_file)
    address, workers_scratch = dask_cluster
    with _on(address):
        out = Sequential([count_bindings, keep_even])(small_module)
    assert module_bytes(out) == module_bytes(_serial(Sequential([count_bindings, keep_even]), small_module))
    assert all(name.startswith("parpass-store-") for name in os.listdir(parent_scratch))
    assert _files(workers_scratch) == []
    cluster.close_clients()  # closes the crew: its stores go
    assert os.listdir(parent_scratch) == []


def test_instrument_trace_is_the_serial_one(dask_cluster: tuple[str, Path], parent_scratch: Path) -> None:
    address, _ = dask_cluster
    mod = random_module(num_functions=20, num_prim_funcs=6, size=8, seed=2)
    pipeline = Sequential([count_bindings, look_up_callees, keep_even])
    serial: list[tuple[str, ...]] = []
    with PassContext(instruments=[Recorder(serial)], config={"parpass.num_workers": 1}):
        pipeline(mod)
    remote: list[tuple[str, ...]] = []
    with PassContext(
        instruments=[Recorder(remote)],
        config={"parpass.num_workers": 2, "parpass.parallel": "always", "parpass.scheduler": address},
    ):
        pipeline(mod)
    assert remote == serial


def test_a_pass_error_is_the_serial_one(
    dask_cluster: tuple[str, Path], parent_scratch: Path, small_module: IRModule
) -> None:
    address, _ = dask_cluster
    before = module_bytes(small_module)
    with pytest.raises(Exception) as serial, PassContext(config={"parpass.num_workers": 1}):
        fails_on_some(small_module)
    with pytest.raises(Exception) as remote, _on(address):
        fails_on_some(small_module)
    assert type(remote.value) is type(serial.value)
    assert str(remote.value) == str(serial.value)
    assert getattr(remote.value, "__notes__", [])[0] == getattr(serial.value, "__notes__", [])[0]
    assert module_bytes(small_module) == before


def test_num_workers_caps_the_workers_used(dask_cluster: tuple[str, Path], small_module: IRModule) -> None:
    address, _ = dask_cluster
    backend = cluster.backend_at(address)
    assert len(backend.addresses(1)) == 1
    assert len(backend.addresses(8)) == 2  # the cluster's size is the cluster's
    with _on(address, workers=1):
        out = count_bindings(small_module)
    assert module_bytes(out) == module_bytes(_serial(count_bindings, small_module))  # on one worker


class _Packed(list[tuple[int, int]]):
    elsewhere: list[int]

    def __init__(self) -> None:
        super().__init__()
        self.elsewhere = []


@pytest.fixture
def payloads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Each wave payload the parent packs for a cluster worker: (functions left out because it holds them,
    functions in all); those left out because other workers hold them are in ``payloads.elsewhere``."""
    packed = _Packed()
    pack = cluster.pack_wave

    def counting(header, stores, held=(), elsewhere=()):  # type: ignore[no-untyped-def]
        packed.append((len(held), len(header.names)))
        packed.elsewhere.append(len(elsewhere))
        return pack(header, stores, held, elsewhere)

    monkeypatch.setattr(cluster, "pack_wave", counting)
    return packed


@pytest.mark.parametrize("lookups", [False, True], ids=["own functions", "looking up callees"])
def test_a_worker_is_sent_only_the_functions_it_does_not_hold(
    dask_cluster: tuple[str, Path], payloads: list[tuple[int, int]], lookups: bool
) -> None:
    """A pipeline's next wave leaves out of each worker's payload what the executor saw it hold, and at
    first what the other worker holds too (its chunks start on what it holds); the rest follows while they
    run. A pass that looks up a function the other worker holds has its chunk run again on the whole wave,
    and the chain's next waves go without leaving anything out for others. The result is the serial one."""
    address, _ = dask_cluster
    mod = random_module(num_functions=60, num_prim_funcs=0, size=6, seed=12)
    second = look_up_callees if lookups else count_bindings
    expected = module_bytes(_serial(second, _serial(keep_even, mod)))
    executor.forget()
    with _on(address):
        out = second(keep_even(mod))
    assert module_bytes(out) == expected
    first, later, elsewhere = payloads[0], payloads[1:], payloads.elsewhere[1:]
    assert first[0] == 0 and payloads.elsewhere[0] == 3  # the first wave once, less what no pass visits
    # the next one per worker, with none of the functions either holds (all 57 targets), nor the 3 that
    # no pass of the wave visits
    assert [held + away for (held, _), away in zip(later[:2], elsewhere[:2], strict=True)] == [60, 60]
    assert all(0 < held < total for held, total in later[:2])
    # then, to a worker that takes a chunk from the other's queue, the wave less what it holds (and the 3)
    rest = list(zip(later[2:], elsewhere[2:], strict=True))
    if not lookups:
        assert all(away == 3 and (held, total) in later[:2] for (held, total), away in rest)
        return
    assert ((0, 60), 0) in rest  # a worker's first chunk looked up the other's functions: it got the wave whole
    payloads.clear()
    payloads.elsewhere.clear()
    with _on(address):
        again = second(out)
    assert module_bytes(again) == module_bytes(_serial(second, out))
    assert payloads.elsewhere and not any(payloads.elsewhere)  # it learned: nothing left out for others


def test_a_lookup_of_what_another_worker_holds_is_redone_whole_even_where_the_pass_swallows_the_error(
    dask_cluster: tuple[str, Path], payloads: list[tuple[int, int]]
) -> None:
    """A pass that looks up a function its worker was not sent (the other worker holds it) and takes the
    failure for an answer of its own (``except BaseException``) still gives the serial result: the chunk's
    answer is dropped and the chunk runs again on the whole wave."""
    address, _ = dask_cluster
    mod = random_module(num_functions=60, num_prim_funcs=0, size=6, seed=16)
    expected = module_bytes(_serial(looks_up_carelessly, _serial(keep_even, mod)))
    executor.forget()
    with _on(address):
        out = looks_up_carelessly(keep_even(mod))
    assert module_bytes(out) == expected
    assert any(payloads.elsewhere) and (0, 60) in payloads  # sent partial first, then whole


@pytest.mark.parametrize("known", [False, True], ids=["digests from the cluster", "digests known before"])
def test_a_module_run_again_is_sent_only_where_it_is_not_held(
    dask_cluster: tuple[str, Path], payloads: list[tuple[int, int]], known: bool
) -> None:
    """The same module run again leaves out of each worker's payload what that worker holds, and at first
    what the other one holds. The parent knows the holders from the digests the workers computed of a built
    module's functions (it sent them without one), or, for a module whose digests it knew before (here:
    learned on local workers first), from the crew, which notes which worker ran, so holds, each input."""
    address, _ = dask_cluster
    mod = random_module(num_functions=60, num_prim_funcs=0, size=6, seed=14 + known)  # none held yet
    expected = module_bytes(_serial(count_bindings, mod))
    executor.forget()
    if known:
        with PassContext(config={"parpass.num_workers": 2, "parpass.parallel": "always"}):
            assert module_bytes(count_bindings(mod)) == expected  # the parent learns the digests here
        assert sum(digest is not None for digest in mod.encoded_columns()[1]) >= 50  # every target's
    outputs = []
    for _ in range(2):
        with _on(address):
            outputs.append(module_bytes(count_bindings(mod)))
    assert outputs == [expected, expected]
    first, later = payloads[0], payloads[1:]
    assert first[0] == 0 and len(later) >= 2  # the first cluster run's wave whole, once; the second's per worker
    assert sum(left_out for left_out, _ in later[:2]) >= 50  # about all 60, each left out where it is held
    assert sum(payloads.elsewhere[1:3]) >= 50  # and where the other worker holds it


def test_a_worker_that_no_longer_holds_what_was_left_out_gets_the_wave_whole(
    dask_cluster: tuple[str, Path], payloads: list[tuple[int, int]]
) -> None:
    """With no resident cache, the functions the executor thinks a worker holds are gone: the worker says
    so before running anything, gets the whole wave, and the result is still the serial one."""
    address, _ = dask_cluster
    mod = random_module(num_functions=60, num_prim_funcs=0, size=6, seed=13)
    expected = module_bytes(_serial(count_bindings, _serial(keep_even, mod)))
    executor.forget()
    with _on(address, **{"parpass.worker_cache_mb": 0}):
        out = count_bindings(keep_even(mod))
    assert module_bytes(out) == expected
    assert any(left_out for left_out, _ in payloads)  # the second wave left functions out
    assert sum(1 for left_out, _ in payloads if left_out == 0) >= 2  # and then went whole


def test_a_client_the_backend_opened_sends_promptly_and_a_user_s_keeps_its_settings(
    dask_cluster: tuple[str, Path],
) -> None:
    """A wave's chunks go out in a burst, all but the first batched by the client: the backend's own client
    sends every millisecond (Dask's default is 10), a client the user hands over is left as it is."""
    import distributed

    address, _ = dask_cluster
    assert cluster.backend_at(address).client.scheduler_comm.interval == cluster._SEND_INTERVAL
    with distributed.Client(address, set_as_default=False) as mine:
        before = mine.scheduler_comm.interval
        backend = cluster.DaskBackend(mine)
        assert mine.scheduler_comm.interval == before > cluster._SEND_INTERVAL
        backend.close()
        assert mine.status == "running"  # not the backend's to close


def test_a_first_run_on_a_cluster_goes_by_a_cluster_s_round_trip(dask_cluster: tuple[str, Path]) -> None:
    """Before it has measured a wave on a backend, the executor assumes what that backend's round trips cost:
    with a local crew's 4 ms, a first run moved light passes to the cluster, whose waves cost ~40-60 ms more."""
    from parpass.parallel.backend import LokyBackend
    from parpass.parallel.config import ParallelConfig
    from parpass.parallel.executor import ParallelExecutor

    address, _ = dask_cluster
    fresh = ParallelExecutor()
    fresh._pool_started = True  # the workers are there: only what moving saves decides
    assert fresh.cost_of(address).overhead == cluster.DaskBackend.assumed_overhead > LokyBackend.assumed_overhead
    assert fresh.cost_of(address).latency == cluster.DaskBackend.assumed_latency
    # a probe 0.2 s into a light pass with 60 ms of in-process work left: worth moving to local workers only
    local = ParallelConfig.of(PassContext(config={"parpass.num_workers": 2}))
    remote = ParallelConfig.of(PassContext(config={"parpass.num_workers": 2, "parpass.scheduler": address}))
    assert fresh._worth_moving(("Light",), 0.2, 1_000_000.0, 1_300_000, local)
    assert not fresh._worth_moving(("Light",), 0.2, 1_000_000.0, 1_300_000, remote)


def test_what_auto_learns_on_a_cluster_is_the_cluster_s_own(dask_cluster: tuple[str, Path]) -> None:
    """Each backend has its own cost model: a cluster's round trip (milliseconds) does not make local
    workers look slow, nor theirs a cluster fast."""
    address, _ = dask_cluster
    mod = random_module(num_functions=40, num_prim_funcs=0, size=4, seed=2)
    executor.forget()
    local = PassContext(config={"parpass.num_workers": 2, "parpass.parallel": "always"})
    for _ in range(3):
        with local:
            count_bindings(mod)
    learned = executor.cost_of("").overhead
    for _ in range(3):
        with _on(address):
            count_bindings(mod)
    assert executor.cost_of("").overhead == learned  # untouched by the cluster's waves
    assert executor.cost is executor.cost_of("")
    assert executor.cost_of(address).overhead > learned  # a Dask round trip is dearer than a local one
    assert executor.cost_of(address).overhead != cluster.DaskBackend.assumed_overhead  # measured, not assumed
    # and so is a chunk's: the cluster's chunks are planned larger (see CostModel.latency)
    assert executor.cost_of(address).latency > executor.cost_of("").latency
    assert executor.cost_of(address).latency != cluster.DaskBackend.assumed_latency
    cluster_waves = [w for w in executor.history if w.parallel]
    assert executor.cost_of(address).measured_parallel(["CountBindings"], cluster_waves[-1].nbytes, 2) is not None


def _frames(tree: dict[str, object]) -> Iterator[str]:
    """The function names of every frame of a Dask profile tree (see ``Client.profile``)."""
    for child in cast("dict[str, dict[str, object]]", tree.get("children", {})).values():
        yield cast("dict[str, str]", child["description"])["name"]
        yield from _frames(child)


def test_a_pass_runs_out_of_sight_of_dask_s_sampling_profiler(dask_cluster: tuple[str, Path]) -> None:
    """Dask's workers sample the stack of every thread running a task every 10 ms and walk all of it (3-6% of
    a CPU-heavy pass, whose visitors recurse deep): a chunk runs in a thread of parpass's own, and the task
    thread the profiler samples only waits for it."""
    address, _ = dask_cluster
    mod = random_module(num_functions=30, num_prim_funcs=0, size=4, seed=3)
    client = cluster.backend_at(address).client
    start = time.time()
    with _on(address):
        out = waits_a_little(mod)  # 20 ms a function, 30 functions: ~30 samples a worker
    assert module_bytes(out) == module_bytes(_serial(waits_a_little, mod))
    sampled = set(_frames(client.profile(start=start)))
    assert "run_cluster_chunk" in sampled  # the profiler ran, and saw the task
    assert "waits_a_little" not in sampled


def test_a_timeout_names_the_late_function_and_restarts_only_its_worker(tmp_path: Path, small_module: IRModule) -> None:
    with _fresh_cluster(tmp_path) as (address, backend):
        before = set(backend.worker_pids())
        started = time.monotonic()
        with pytest.raises(PassTimeoutError) as err, _on(address, **{"parpass.timeout": 1.0}):
            sleeps(small_module)
        assert time.monotonic() - started < 50  # not the 60 s the pass sleeps: it was stopped
        assert err.value.functions == ("main",)
        assert "exceeded the timeout of 1s" in str(err.value)
        backend.client.wait_for_workers(2, timeout=60)  # the error came without waiting for the restart
        after = set(backend.worker_pids())
        assert len(after) == 2 and len(before & after) == 1  # the late worker was restarted, the other lives on
        _next_pass_works(address, small_module)


@function_pass(opt_level=0, name="SlowRebuild")
def slow_rebuild(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    time.sleep(0.05)
    return func.with_attr("rebuilt", True)


def test_a_worker_killed_from_outside_mid_wave_is_retried_elsewhere(tmp_path: Path) -> None:
    """SIGKILL one worker while the wave runs: Dask runs its chunks on the other, and the call returns the
    serial run's module."""
    mod = random_module(num_functions=60, num_prim_funcs=0, size=6, seed=3)
    expected = module_bytes(_serial(slow_rebuild, mod))
    with _fresh_cluster(tmp_path) as (address, backend):
        victim = backend.worker_pids()[0]
        killer = threading.Timer(0.6, os.kill, (victim, signal.SIGKILL))
        killer.start()
        try:
            with _on(address):
                out = slow_rebuild(mod)
        finally:
            killer.cancel()
        assert module_bytes(out) == expected
        assert victim not in backend.worker_pids()


@pytest.mark.parametrize("allowed_failures", [0, 3])
def test_a_pass_that_kills_its_worker_is_reported_once_naming_pass_and_function(
    tmp_path: Path, small_module: IRModule, allowed_failures: int
) -> None:
    """One worker dies (its nanny restarts it), whatever the scheduler's allowed-failures: the function is
    run again alone in a subprocess, which dies too, and the error names it."""
    with _fresh_cluster(tmp_path, **{"distributed.scheduler.allowed-failures": allowed_failures}) as (
        address,
        backend,
    ):
        before = module_bytes(small_module)
        pids = set(backend.worker_pids())
        with pytest.raises(WorkerCrashedError) as err, _on(address):
            exits_worker(small_module)
        assert err.value.pass_name == repr("ExitsWorker")
        assert err.value.functions == ("main",)
        assert "exit status 3" in str(err.value)
        assert module_bytes(small_module) == before
        backend.client.wait_for_workers(2, timeout=60)
        assert len(pids & set(backend.worker_pids())) == 1  # one worker died for it, the other lives on
        _next_pass_works(address, small_module)


def test_a_pass_module_the_workers_lack_is_named(
    dask_cluster: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_module: IRModule
) -> None:
    """A module on the parent's path only (the workers started before it was there): the error names it."""
    source = tmp_path / "only_here_passes.py"
    source.write_text(
        "from parpass.transform import function_pass\n"
        "@function_pass(opt_level=0, name='OnlyHere')\n"
        "def only_here(func, mod, ctx):\n"
        "    return func.with_attr('here', True)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import only_here_passes  # type: ignore[import-not-found]

    address, _ = dask_cluster
    with pytest.raises(ParallelExecutionError, match="only_here_passes") as err, _on(address):
        only_here_passes.only_here(small_module)
    assert err.value.pass_name == repr("OnlyHere")
    sys.modules.pop("only_here_passes", None)


def test_a_bad_scheduler_address_names_the_key() -> None:
    from parpass.transform.config import PassConfigError

    with pytest.raises(PassConfigError, match=r"'parpass\.scheduler'.*'localhost:8786'"):
        PassContext(config={"parpass.scheduler": "localhost:8786"})


def test_without_dask_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ImportError, match=r"parpass\[dask\]"):
        cluster.backend_at("tcp://127.0.0.1:1")


class _FinishedNeverFetched:
    """A chunk's future the scheduler calls finished whose result cannot be fetched yet (its worker may have
    died since): each ``result(timeout)`` times out, ``fetched_after`` times before it gives ``value``."""

    status = "finished"

    def __init__(self, fetched_after: int | None, value: object = None) -> None:
        self.fetched_after, self.value, self.waits = fetched_after, value, 0

    def result(self, timeout: float) -> object:
        assert timeout == cluster._FETCH_CHECK
        if self.fetched_after is not None and self.waits >= self.fetched_after:
            return self.value
        self.waits += 1
        raise TimeoutError


class _Scheduler:
    """What ``ClusterCrew._answer`` asks of its crew: which workers are there (``live`` in turn, then none)."""

    def __init__(self, *live: set[str]) -> None:
        self.answers = list(live)

    def _live(self) -> set[str]:
        return self.answers.pop(0) if self.answers else set()


def test_a_result_whose_worker_is_gone_is_sent_again_not_waited_for() -> None:
    """A chunk finished on a worker that died before its result was fetched: the result is never fetched nor
    computed again (the chunk was pinned there), so the parent stops waiting once the worker is gone (it hung
    for good, with every later wave on the cluster behind it) and sends the chunk again; while the worker is
    there, it waits."""
    answer = cluster.ClusterCrew._answer
    gone = _FinishedNeverFetched(fetched_after=None)
    assert answer(_Scheduler({"tcp://a"}, {"tcp://a"}), gone, "tcp://a") is None  # type: ignore[arg-type]
    assert gone.waits == 3  # two looks found it there, the third did not
    slow = _FinishedNeverFetched(fetched_after=2, value=None)  # None: the worker lacked a function
    assert answer(_Scheduler({"tcp://a"}, {"tcp://a"}), slow, "tcp://a") is cluster._LACKS  # type: ignore[arg-type]
