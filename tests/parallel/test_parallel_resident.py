"""Resident IR: workers keep the functions of earlier waves, and runs stay the serial run, byte for byte.

Every wave of a pipeline sends each function to the worker that holds it
decoded (affinity), with work stealing for balance; these tests check that the
result and the instrument trace are the serial run's while that happens, that
the residency is real (the executor's wave log counts hits), and that it
survives what can go wrong around it: a tiny or zero cache, a worker killed
while it holds functions, a pass that kills its worker, a pool resized in the
middle of a pipeline, two pipelines in two threads, a skewed distribution.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from parallel_support import (
    KillsAWorkerAfter,
    Recorder,
    at_workers,
    bounded,
    module_bytes,
    parallel_ctx,
    survivors,
    tag_and_report_pid,
    wait_gone,
    worker_pids,
)
from ptest_passes import count_bindings, exits_worker, keep_even

from parpass.errors import WorkerCrashedError
from parpass.ir import IRModule, relax
from parpass.parallel import get_backend, shutdown
from parpass.parallel.executor import WaveStats
from parpass.passes import (
    CanonicalizeBindings,
    DeadCodeElimination,
    EliminateCommonSubexpr,
    FoldConstant,
    InferType,
    RemoveNoOp,
    Simplify,
)
from parpass.testing import random_module
from parpass.transform import Pass, PassContext, Sequential, function_pass, module_pass
from parpass.transform.config import PassConfigError

THREE_WORKERS = pytest.mark.filterwarnings("ignore:config option .parpass.num_workers. is 3, more than:RuntimeWarning")

#: Passes of PIPELINE that look up no other function: each of their waves takes every target exactly once,
#: so every target is either a hit (the seat it went to held it) or a miss.
NO_LOOKUPS = {"CanonicalizeBindings", "FoldConstant", "EliminateCommonSubexpr", "RemoveNoOp"}

#: Bound on a whole pipeline run in a thread; only a hang gets near it.
CALL_LIMIT = 300.0
#: Bound on a small script's whole run (start-up, one pass, exit): it takes a few seconds; only a hang gets near.
EXIT_LIMIT = 45.0


def pipeline() -> Sequential:
    """Standard passes on Functions, then on PrimFuncs: every wave's targets are the previous wave's but one."""
    return Sequential(
        [
            InferType(),
            CanonicalizeBindings(),
            FoldConstant(),
            EliminateCommonSubexpr(),
            DeadCodeElimination(),
            Simplify(),
            RemoveNoOp(),
        ]
    )


def _module(seed: int = 3, functions: int = 120) -> IRModule:
    return random_module(num_functions=functions, num_prim_funcs=functions // 3, size=8, seed=seed)


def _traced(
    mod: IRModule, workers: int, rounds: int = 2, config: dict[str, object] | None = None
) -> tuple[list[tuple[str, ...]], IRModule]:
    """``pipeline()`` applied ``rounds`` times in a row under a :class:`Recorder` (one wave per pass), with
    ``config`` on top of the worker settings."""
    trace: list[tuple[str, ...]] = []
    mode = "always" if workers > 1 else "never"
    cfg: dict[str, object] = {"parpass.num_workers": workers, "parpass.parallel": mode, **(config or {})}
    out = mod
    with PassContext(instruments=[Recorder(trace)], config=cfg):
        for _ in range(rounds):
            out = pipeline()(out)
    return trace, out


def _serial(mod: IRModule, rounds: int = 2) -> tuple[list[tuple[str, ...]], list[tuple[str, bytes]]]:
    trace, out = _traced(mod, 1, rounds)
    return trace, module_bytes(out)


def _resident_waves(waves: list[WaveStats]) -> list[WaveStats]:
    """Waves of passes that look nothing up, whose targets the previous wave had just returned."""
    pairs = zip(waves[1:], waves, strict=False)
    return [w for w, before in pairs if w.passes[0] in NO_LOOKUPS and w.functions == before.functions]


def _released(scratch: Path) -> list[Path]:
    """Release the workers (the crew and its files go with them), then list what is left in ``scratch``."""
    get_backend().shutdown()
    return list(scratch.iterdir())


# ---------------------------------------------------------------------------------------------------------------------
# 1. identity, and residency that is real


@THREE_WORKERS
@pytest.mark.parametrize("workers", [2, 3])
def test_resident_runs_give_the_serial_bytes_and_trace_and_really_hit(workers: int, history) -> None:  # type: ignore[no-untyped-def]
    mod = _module()
    before = module_bytes(mod)
    serial_trace, serial_bytes = _serial(mod)
    history.clear()
    trace, out = _traced(mod, workers)
    assert module_bytes(out) == serial_bytes
    assert trace == serial_trace
    assert module_bytes(mod) == before  # the caller's module is never changed
    waves = [w for w in history if w.parallel]
    names = [p.info.name for p in pipeline().passes]
    assert [w.passes[0] for w in waves] == names * 2  # pass by pass: one wave each, all in workers
    resident = _resident_waves(waves)
    assert len(resident) == 8  # CanonicalizeBindings, FoldConstant, EliminateCommonSubexpr, RemoveNoOp; twice
    for wave in resident:
        assert wave.hits + wave.misses == wave.functions, wave
        # every function went to the seat that holds it, unless another seat stole it to keep busy
        assert wave.misses <= wave.stolen, wave
        assert wave.hits >= wave.functions - wave.stolen > 0, wave


def test_the_second_round_of_a_pipeline_decodes_only_what_was_stolen(history) -> None:  # type: ignore[no-untyped-def]
    """Two top-level calls in a row: the second one's waves find the first one's results resident."""
    mod = _module(seed=8, functions=80)
    _, expected = _serial(mod, rounds=3)
    history.clear()
    _, out = _traced(mod, 2, rounds=3)
    assert module_bytes(out) == expected
    waves = [w for w in history if w.parallel]
    later = waves[len(waves) // 3 :]  # rounds 2 and 3: every target was returned by the round before
    no_lookups = [w for w in later if w.passes[0] in NO_LOOKUPS | {"Simplify"}]
    assert no_lookups
    assert sum(w.misses for w in no_lookups) <= sum(w.stolen for w in no_lookups)
    assert sum(w.hits for w in no_lookups) > 0


def test_a_worker_finds_a_function_it_holds_even_when_the_parent_does_not_know_its_digest(history) -> None:  # type: ignore[no-untyped-def]
    """The same module read again from bytes: the parent knows no digest, the workers still hold what they
    decoded the first time, and find it by digesting the bytes (where they used to decode them again)."""
    from parpass.ir.serialization import from_bytes, to_bytes

    data = to_bytes(_module(seed=9, functions=60))
    with parallel_ctx(1):
        expected = module_bytes(count_bindings(from_bytes(data)))
    outputs, waves = [], []
    for _ in range(2):
        fresh = from_bytes(data)
        assert isinstance(fresh, IRModule)
        with parallel_ctx(2):
            outputs.append(module_bytes(count_bindings(fresh)))
        waves.append(history[-1])
    assert outputs == [expected, expected]
    first, second = waves
    assert first.parallel and second.parallel and first.functions == second.functions
    assert second.hits + second.misses == second.functions
    assert second.misses <= second.stolen + first.stolen  # the same hand-out, but for what was stolen either time
    assert second.hits > first.hits


def test_the_parent_learns_the_digests_the_workers_computed_of_what_it_sent_without(history) -> None:  # type: ignore[no-untyped-def]
    """A built module's functions go out without digests (the parent never hashed them); the workers hash them
    to find what they hold, and say what they found for the functions the pass changed, so that the module,
    run again, is known by them: its wave carries their digests and no worker hashes them again."""
    from parpass.ir.digest import digest_of

    mod = _module(seed=13, functions=40)
    assert all(digest is None for _, _, digest, _ in mod.encoded_entries())
    with parallel_ctx(1):
        expected = module_bytes(count_bindings(mod))
    with parallel_ctx(2):
        first = module_bytes(count_bindings(mod))
    targets = [name for name in mod.names() if count_bindings.visits(*mod.kind_and_attrs(name))]
    entries = {name: (data, digest) for name, data, digest, _ in mod.encoded_entries()}
    assert targets and all(entries[name][1] == digest_of(bytes(entries[name][0])) for name in targets)
    with parallel_ctx(2):
        second = module_bytes(count_bindings(mod))
    assert first == second == expected
    assert history[-1].hits + history[-1].misses == history[-1].functions
    assert history[-1].misses <= history[-1].stolen  # held where it was: found by the digest sent


@module_pass(opt_level=0, name="DropEveryOther")
def _drop_every_other(mod: IRModule, ctx: PassContext) -> IRModule:
    """Removes every other Function (in the parent): the next wave's targets are a subset, shuffled in size order."""
    out = mod.copy()
    functions = [name for name in mod.names() if mod.kind_and_attrs(name)[0] is relax.Function]
    for name in functions[::2]:
        del out[name]
    return out


def test_each_function_goes_to_the_seat_that_holds_it_when_the_module_changes_shape(history) -> None:  # type: ignore[no-untyped-def]
    """Affinity, not chance: after half the functions are gone, handing the rest out by size alone would send
    about half of them to the seat that does not hold them."""
    mod = random_module(num_functions=160, num_prim_funcs=0, size=8, seed=12)
    chain = Sequential([count_bindings, _drop_every_other, keep_even])
    with parallel_ctx(1):
        expected = module_bytes(chain(mod))
    history.clear()
    with parallel_ctx(2):
        out = chain(mod)
    assert module_bytes(out) == expected
    first, second = (w for w in history if w.parallel)
    assert second.passes == ("KeepEven",) and second.functions < first.functions
    assert second.hits + second.misses == second.functions
    assert second.misses <= second.stolen, second
    assert second.hits > 0


@pytest.mark.loky_only  # a crew of this machine's workers, let go and started again on the same pool
def test_a_new_crew_on_the_same_workers_finds_what_the_last_one_left(history) -> None:  # type: ignore[no-untyped-def]
    """A seat the parent lets go leaves its resident functions to the worker's next seat, which says what it
    holds as it joins the new crew: each function goes to the worker that holds it (which seat each worker
    takes is chance: handed out by size alone, all of them once went to the other worker)."""
    mod = _module(seed=21, functions=60)
    with parallel_ctx(1):
        expected = module_bytes(count_bindings(mod))
    with parallel_ctx(2):
        count_bindings(mod)  # the workers hold the targets now, and the module knows their digests
    first = history[-1]
    assert first.parallel, first
    pids = sorted(worker_pids())
    get_backend().close_crew()  # type: ignore[attr-defined]
    with parallel_ctx(2):
        assert module_bytes(count_bindings(mod)) == expected
    assert sorted(worker_pids()) == pids  # the same workers, under a new crew
    wave = history[-1]
    assert wave.parallel and wave.hits + wave.misses == wave.functions
    assert wave.hits > 0 and wave.misses <= wave.stolen, (first, wave)


@pytest.mark.loky_only  # how loky lets its workers go
def test_a_worker_let_go_cleanly_runs_its_exit_handlers_and_skips_freeing_its_heap(tmp_path: Path) -> None:
    """At ``shutdown()`` (as at the parent's exit), a worker ends once its exit handlers ran, without freeing
    its heap object by object (the resident IR: 0.4 s for 16,000 functions, which the parent waited for)."""
    handled, freed = tmp_path / "exit-handler-ran", tmp_path / "heap-freed"

    class FreedAtTeardown:
        def __init__(self) -> None:
            self.mark = functools.partial(os.open, str(freed), os.O_CREAT | os.O_WRONLY)  # whatever is gone by then

        def __del__(self) -> None:
            self.mark()

    def leave_traces(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
        import atexit

        if not hasattr(os, "parpass_test_kept"):  # once per worker: the teardown clears the os module's dict
            os.parpass_test_kept = FreedAtTeardown()  # type: ignore[attr-defined]
            atexit.register(handled.touch)
        return func

    shutdown()
    with parallel_ctx(2):
        function_pass(leave_traces, opt_level=0, name="LeaveTraces")(_module(seed=22, functions=20))
    pool = get_backend()._pool  # type: ignore[attr-defined]
    pids = worker_pids()
    shutdown()
    assert wait_gone(pids) == set()
    pool.note_workers()
    assert sorted(p.exitcode for p in pool.workers.values()) == [0, 0]  # ended, not killed
    assert handled.exists()
    assert not freed.exists()


# ---------------------------------------------------------------------------------------------------------------------
# 2. the cache's bound


@pytest.mark.parametrize("megabytes", [0.001, 0], ids=["1kB", "zero"])
def test_a_tiny_or_zero_cache_gives_the_same_bytes_and_decodes_again(megabytes: float, history) -> None:  # type: ignore[no-untyped-def]
    mod = _module(seed=4, functions=60)
    serial_trace, serial_bytes = _serial(mod)
    _traced(mod, 2)  # the workers now hold this module's functions, under the default bound
    history.clear()
    trace, out = _traced(mod, 2, config={"parpass.worker_cache_mb": megabytes})
    assert module_bytes(out) == serial_bytes
    assert trace == serial_trace
    waves = [w for w in history if w.parallel]
    resident = _resident_waves(waves)
    assert sum(w.misses for w in resident) > sum(w.stolen for w in resident)
    if megabytes == 0:
        # the bound applies at once: what the default bound kept is dropped, and nothing is kept
        assert all(w.hits == 0 for w in waves), waves
        assert all(w.misses >= w.functions for w in waves), waves


@pytest.mark.parametrize("value", [-1, -0.5, "big", "64", None, [1.0]])
def test_a_wrong_cache_bound_is_a_config_error_naming_the_key(value: object) -> None:
    with pytest.raises(PassConfigError, match=r"parpass\.worker_cache_mb"):
        PassContext(config={"parpass.worker_cache_mb": value})


@pytest.mark.parametrize("value", [float("inf"), 1e300, 1e6 + 1])
def test_an_unbounded_cache_is_refused_up_front_naming_the_key(value: float) -> None:
    with pytest.raises(PassConfigError, match=r"parpass\.worker_cache_mb"):
        PassContext(config={"parpass.worker_cache_mb": value})


def test_the_largest_cache_bound_works() -> None:
    mod = _module(seed=4, functions=30)
    with parallel_ctx(2, **{"parpass.worker_cache_mb": 1e6}):
        out = count_bindings(mod)
    with parallel_ctx(1):
        assert module_bytes(out) == module_bytes(count_bindings(mod))


# ---------------------------------------------------------------------------------------------------------------------
# 3. workers that die holding resident functions


def test_cycles_a_pass_leaves_in_a_worker_are_collected_once_it_is_idle(tmp_path: Path, history) -> None:  # type: ignore[no-untyped-def]
    """A worker keeps what its chunks built out of the collector's scans (a collection walked the resident
    IR while the parent waited), so the cyclic garbage a pass leaves there is collected when it is idle."""
    from ptest_passes import LeavesCycles

    shutdown()  # fresh workers: they collect at their first half second idle
    mod = random_module(num_functions=30, num_prim_funcs=0, size=4, seed=4)
    leaves = LeavesCycles(directory=str(tmp_path))
    expected = len(leaves.targets(mod))
    with parallel_ctx(2):
        leaves(mod)
    assert history[-1].parallel and expected > 20
    deadline = time.monotonic() + 60  # not a speed limit: the worker collects after half a second idle
    while len(list(tmp_path.iterdir())) < expected and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(list(tmp_path.iterdir())) == expected


class _Quiet:
    """A worker's connection to a parent that sends nothing: records how long each poll waited."""

    def __init__(self) -> None:
        self.polls: list[float] = []

    def poll(self, timeout: float) -> bool:
        self.polls.append(timeout)
        return False


@pytest.mark.parametrize("last", [None, 1.0], ids=["long ago", "a second ago"])
def test_an_idle_worker_collects_at_most_once_in_a_while(monkeypatch: pytest.MonkeyPatch, last) -> None:  # type: ignore[no-untyped-def]
    """A collection walks the resident IR and a wave that comes meanwhile waits: an idle worker collects
    after half a second, but not again within five seconds of the last time (then once they have passed);
    collections that find little space themselves out further, one that finds much sets them back."""
    from parpass.parallel import worker

    collections: list[float] = []
    found = [0]
    monkeypatch.setattr(worker.gc, "collect", lambda *args: collections.append(time.monotonic()) or found[0])
    monkeypatch.setattr(worker.gc, "freeze", lambda: None)
    monkeypatch.setattr(worker.gc, "unfreeze", lambda: None)
    monkeypatch.setattr(worker, "_collect_every", worker._COLLECT_EVERY)
    now = time.monotonic()
    monkeypatch.setattr(worker, "_froze", True)
    monkeypatch.setattr(worker, "_collected_at", now - 100 if last is None else now - last)
    conn = _Quiet()
    assert not worker._wait_for_work(conn, 30.0)  # type: ignore[arg-type]
    assert len(collections) == 1 and not worker._froze
    first, rest = conn.polls
    expected = worker._COLLECT_AFTER if last is None else worker._COLLECT_EVERY - last
    assert first == pytest.approx(expected, abs=0.05) and 29 < rest <= 30.0  # then the rest of the idle time
    conn.polls.clear()
    assert not worker._wait_for_work(conn, 30.0)  # type: ignore[arg-type]
    assert len(collections) == 1 and len(conn.polls) == 1  # nothing new was frozen: nothing to collect
    assert worker._collect_every == 2 * worker._COLLECT_EVERY  # it found nothing: the next waits longer
    found[0] = worker._WORTH_COLLECTING
    worker._froze, worker._collected_at = True, time.monotonic() - 100
    conn.polls.clear()
    worker._wait_for_work(conn, 30.0)  # type: ignore[arg-type]
    assert len(collections) == 2 and worker._collect_every == worker._COLLECT_EVERY  # it found much


def test_a_worker_runs_the_same_pass_objects_for_every_wave_of_a_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    """As the parent runs one pass object on every call: a copy per wave would be cyclic garbage after it (a
    class-form pass refers to itself) holding its memo of the wave's module view."""
    import cloudpickle

    from parpass.parallel import worker
    from parpass.passes import DeadCodeElimination, InferType

    monkeypatch.setattr(worker, "_CHAINS", type(worker._CHAINS)())
    infer, dce = cloudpickle.dumps([InferType()]), cloudpickle.dumps([DeadCodeElimination()])
    first = worker._passes_of(infer)
    assert worker._passes_of(infer) is first and worker._passes_of(dce) is not first
    for k in range(worker._CHAINS_KEPT):
        worker._passes_of(cloudpickle.dumps([InferType(), DeadCodeElimination()] * (k + 1)))
    assert worker._passes_of(infer) is not first  # the least recently used chains go first
    assert len(worker._CHAINS) <= worker._CHAINS_KEPT


def test_a_worker_killed_between_two_waves_loses_nothing(history, scratch: Path, backend: str) -> None:  # type: ignore[no-untyped-def]
    mod = _module(seed=5, functions=60)
    serial_trace, serial_bytes = _serial(mod, rounds=1)
    with parallel_ctx(2):
        count_bindings(mod)  # a pool, before the pipeline starts
    first_pool = set(worker_pids())
    killer = KillsAWorkerAfter("FoldConstant")
    trace: list[tuple[str, ...]] = []
    history.clear()
    with PassContext(
        instruments=[Recorder(trace), killer], config={"parpass.num_workers": 2, "parpass.parallel": "always"}
    ):
        out = pipeline()(mod)
    assert killer.killed  # SIGKILLed, idle, holding what the first three waves left resident
    assert module_bytes(out) == serial_bytes
    assert trace == serial_trace
    waves = [w.passes[0] for w in history]
    assert waves == [p.info.name for p in pipeline().passes]
    assert all(w.parallel for w in history)  # the wave after the kill ran again on new workers, not in-process
    if backend == "loky":  # the pool went whole
        assert not set(worker_pids()) & set(killer.before)
        assert wait_gone(first_pool | set(killer.before)) == set()
    else:  # a cluster lost the one worker (its nanny started another)
        assert set(worker_pids()) & set(killer.before) == set(killer.before) - set(killer.killed)
    assert _released(scratch) == []


def test_a_pass_that_kills_its_worker_after_resident_waves_is_reported(
    small_module: IRModule, scratch: Path, backend: str
) -> None:
    trace: list[tuple[str, ...]] = []
    before = module_bytes(small_module)
    with parallel_ctx(2):
        count_bindings(small_module)
    pids = set(worker_pids())  # the crew the chain gets: its first two waves leave functions resident there
    chain = Sequential([count_bindings, keep_even, exits_worker])
    config = {"parpass.num_workers": 2, "parpass.parallel": "always"}
    with pytest.raises(WorkerCrashedError) as info, PassContext(instruments=[Recorder(trace)], config=config):
        chain(small_module)
    err = info.value
    assert err.pass_name == "'ExitsWorker'"
    assert err.functions[:1] == ("main",)
    assert "'main'" in str(err) and "ExitsWorker" in str(err)
    assert [t[:2] for t in trace if t[0] in ("after", "error")] == [
        ("after", "CountBindings"),
        ("after", "KeepEven"),
        ("error", "ExitsWorker"),
        ("error", "sequential"),
    ]
    assert module_bytes(small_module) == before
    # the next call works, on new workers, and is the serial run's
    with parallel_ctx(2):
        out = Sequential([count_bindings, keep_even])(small_module)
    assert len(wait_gone(pids, leaving=survivors(backend, pids))) == survivors(backend, pids)
    with parallel_ctx(1):
        assert module_bytes(out) == module_bytes(Sequential([count_bindings, keep_even])(small_module))
    assert _released(scratch) == []


_EXITS = """
import sys
sys.path.insert(0, {here!r})
from parpass.parallel import LokyBackend, get_backend, set_backend
from parpass.testing import random_module
from parpass.transform import PassContext
from ptest_passes import count_bindings

set_backend(LokyBackend(crew_idle=3600.0))  # a crew that would wait an hour for its next wave
with PassContext(config={{"parpass.num_workers": 2, "parpass.parallel": "always"}}):
    count_bindings(random_module(num_functions=40, num_prim_funcs=0, size=6, seed=1))
print(*get_backend().worker_pids(), flush=True)
"""


def test_a_script_that_ran_a_parallel_pass_exits_at_once_leaving_no_worker(tmp_path: Path) -> None:
    script = tmp_path / "user.py"
    script.write_text(_EXITS.format(here=str(Path(__file__).parent)))
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=EXIT_LIMIT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # this test's own session: the script and its workers
        proc.communicate()
        pytest.fail(f"the script still had not exited {EXIT_LIMIT:g}s after its last pass (hung at exit)")
    assert proc.returncode == 0, err
    pids = [int(pid) for pid in out.split()]
    assert len(pids) == 2
    assert wait_gone(pids) == set()


# ---------------------------------------------------------------------------------------------------------------------
# 4. a pool resized in the middle of a pipeline


def _resizing(counts: tuple[int, int, int], pools: list[list[int]]) -> Sequential:
    stages: list[Pass] = [
        Sequential([InferType(), CanonicalizeBindings()]),
        Sequential([FoldConstant(), EliminateCommonSubexpr()]),
        Sequential([DeadCodeElimination(), Simplify(), keep_even]),
    ]
    return Sequential([at_workers(n, stage, pools) for n, stage in zip(counts, stages, strict=True)])


@pytest.mark.loky_only  # a cluster's size is the cluster's (parpass.num_workers caps what a pass uses)
@THREE_WORKERS
def test_a_pool_resized_in_the_middle_of_a_pipeline_gives_the_serial_bytes(history, scratch: Path) -> None:  # type: ignore[no-untyped-def]
    mod = _module(seed=6, functions=60)
    with parallel_ctx(1):
        expected = module_bytes(_resizing((1, 1, 1), [])(mod))
    history.clear()
    pools: list[list[int]] = []
    with parallel_ctx(2):
        out = _resizing((2, 3, 2), pools)(mod)
    assert module_bytes(out) == expected
    assert [len(p) for p in pools] == [2, 3, 2]
    assert all(w.parallel for w in history)
    seen = {pid for pool in pools for pid in pool}
    assert not set(pools[0]) & set(pools[1]) and not set(pools[1]) & set(pools[2])  # a new pool each time
    assert wait_gone(seen - set(worker_pids())) == set()  # the old workers are gone
    assert _released(scratch) == []


# ---------------------------------------------------------------------------------------------------------------------
# 5. two pipelines in two threads


def test_two_pipelines_in_two_threads_each_give_their_serial_bytes() -> None:
    mods = [_module(seed=21, functions=60), _module(seed=22, functions=50)]
    expected = [_serial(mod, rounds=1) for mod in mods]
    rounds = 3
    outcomes: list[list[object]] = [[], []]

    def work(k: int) -> None:
        for _ in range(rounds):
            try:
                trace, out = _traced(mods[k], 2, rounds=1)
                outcomes[k].append((trace, module_bytes(out)))
            except BaseException as err:  # reported by the main thread
                outcomes[k].append(err)

    threads = [threading.Thread(target=work, args=(k,), daemon=True) for k in range(2)]

    def run_both() -> None:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    bounded(run_both, CALL_LIMIT, "two pipelines in two threads")
    for k in range(2):
        errors = [o for o in outcomes[k] if isinstance(o, BaseException)]
        assert errors == [], errors
        assert len(outcomes[k]) == rounds
        assert all(o == expected[k] for o in outcomes[k])


# ---------------------------------------------------------------------------------------------------------------------
# 6. stealing


def test_a_seat_that_holds_nothing_steals_and_the_bytes_stay_the_serial_ones(history, capsys) -> None:  # type: ignore[no-untyped-def]
    mod = random_module(num_functions=150, num_prim_funcs=0, size=8, seed=9)
    with parallel_ctx(2):
        first = count_bindings(mod)  # every result is resident in one seat or the other
        with get_backend().crew(2) as crew:  # the crew the next wave gets: skew it
            assert crew.owners
            for digest in crew.owners:
                crew.owners[digest] = 0
        capsys.readouterr()
        out = tag_and_report_pid(first)
    printed = capsys.readouterr().out.split()
    wave = history[-1]
    assert wave.parallel and wave.passes == ("TagAndReportPid",)
    assert wave.stolen > 0  # seat 1 had nothing of its own
    pids = {int(word) for word in printed if word.isdigit()}
    assert len(pids) == 2 and pids == set(worker_pids())  # both seats ran functions
    with parallel_ctx(1):
        assert module_bytes(out) == module_bytes(tag_and_report_pid(count_bindings(mod)))
