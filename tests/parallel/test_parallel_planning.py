"""How the executor decides where a wave runs, who runs what, what a worker keeps, and what a wave leaves behind."""

from __future__ import annotations

import gc
import itertools
import os
import random
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from parallel_support import leftovers, module_bytes, parallel_ctx
from ptest_passes import chatty, count_bindings, keep_even, rebuild, waits_a_little

import parpass.parallel.cost as cost_mod
from parpass.ir import IRModule, to_bytes
from parpass.ir.digest import DIGEST_SIZE, digest_of
from parpass.ir.node import BaseFunc
from parpass.parallel import get_backend
from parpass.parallel.cost import CostModel
from parpass.parallel.resident import ResidentCache
from parpass.parallel.schedule import (
    CHUNK_SHARE,
    CLUSTER_CHUNK_SHARE,
    MAX_FLOOR_SHARE,
    MIN_CHUNK_SHARE,
    Dispatcher,
    _by_owner,
)
from parpass.testing import random_module
from parpass.transform import PassContext, Sequential

# ---------------------------------------------------------------------------------------------------------------------
# who runs what: the Dispatcher


def _hand_out(dispatcher: Dispatcher, requests: list[int]) -> list[tuple[int, list[int]]]:
    """Ask for chunks as seats ``requests`` (cycled) do, until the whole wave is handed out: (seat, chunk) in order."""
    out: list[tuple[int, list[int]]] = []
    done = [False] * dispatcher.seats
    for seat in itertools.cycle(requests):
        if all(done[s] for s in set(requests)):
            break
        chunk = dispatcher.next_chunk(seat)
        if chunk:
            out.append((seat, chunk))
        else:
            done[seat] = True
    return out


@st.composite
def _waves(draw: st.DrawFn) -> tuple[list[int], list[int], list[int | None], int, list[int]]:
    seats = draw(st.integers(1, 5))
    n = draw(st.integers(0, 200))
    targets = sorted(draw(st.lists(st.integers(0, 10_000), min_size=n, max_size=n, unique=True)))
    sizes = draw(st.lists(st.integers(1, 100_000), min_size=n, max_size=n))
    owners = draw(st.lists(st.one_of(st.none(), st.integers(0, seats + 1)), min_size=n, max_size=n))
    requests = draw(st.lists(st.integers(0, seats - 1), min_size=1, max_size=12))
    return targets, sizes, owners, seats, requests


@given(wave=_waves())
def test_every_target_is_handed_out_exactly_once_each_chunk_in_module_order(wave) -> None:  # type: ignore[no-untyped-def]
    targets, sizes, owners, seats, requests = wave
    dispatcher = Dispatcher(targets, sizes, owners, seats)
    assert dispatcher.remaining() == len(targets)
    handed = _hand_out(dispatcher, requests)
    got = [i for _, chunk in handed for i in chunk]
    assert sorted(got) == targets  # every target once: none lost, none twice
    assert all(chunk and chunk == sorted(chunk) for _, chunk in handed)
    assert dispatcher.remaining() == 0
    assert all(dispatcher.next_chunk(seat) == [] for seat in range(seats))  # and nothing more, to anyone


@given(wave=_waves())
def test_the_same_wave_is_handed_out_the_same_way(wave) -> None:  # type: ignore[no-untyped-def]
    targets, sizes, owners, seats, requests = wave
    first = Dispatcher(targets, sizes, owners, seats)
    second = Dispatcher(targets, sizes, owners, seats)
    assert _hand_out(first, requests) == _hand_out(second, requests)
    assert first.stolen == second.stolen


@given(wave=_waves())
def test_a_seat_gets_its_own_functions_before_it_steals(wave) -> None:  # type: ignore[no-untyped-def]
    """Until a seat first steals, it runs only what it holds or was given as nobody's: never another's."""
    targets, sizes, owners, seats, requests = wave
    owner = {t: o for t, o in zip(targets, owners, strict=True) if o is not None and o < seats}
    dispatcher = Dispatcher(targets, sizes, owners, seats)
    stole = [False] * seats
    for seat in itertools.islice(itertools.cycle(requests), 4 * len(targets) + 4):
        before = dispatcher.stolen
        chunk = dispatcher.next_chunk(seat)
        stole[seat] = stole[seat] or dispatcher.stolen > before
        if not stole[seat]:
            assert all(owner.get(i, seat) == seat for i in chunk), (seat, chunk, owner)


@given(seats=st.integers(1, 12), owners=st.lists(st.one_of(st.none(), st.integers(-1, 13)), max_size=60))
def test_positions_are_grouped_by_owner_alike_for_few_seats_and_many(seats: int, owners: list[int | None]) -> None:
    """Few seats group one seat at a time, many in one loop: each seat's positions ascending, and nobody's
    (None or a seat out of range) apart."""
    mine, nobody = _by_owner(owners, seats)
    assert mine == [[p for p, o in enumerate(owners) if o == s] for s in range(seats)]
    assert nobody == [p for p, o in enumerate(owners) if o is None or not 0 <= o < seats]


def test_owners_get_their_own_functions_first() -> None:
    targets = list(range(40))
    owners: list[int | None] = [i % 2 for i in targets]
    dispatcher = Dispatcher(targets, [100] * 40, owners, 2)
    for _ in range(3):
        assert set(dispatcher.next_chunk(0)) <= set(range(0, 40, 2))
        assert set(dispatcher.next_chunk(1)) <= set(range(1, 40, 2))
    assert dispatcher.stolen == 0


def test_a_seat_whose_queue_runs_dry_steals_the_smallest_of_the_fullest_queue() -> None:
    sizes = [1000 - 10 * i for i in range(40)]  # function i is larger than i + 1
    dispatcher = Dispatcher(list(range(40)), sizes, [0] * 40, 2)  # seat 0 holds everything
    stolen = dispatcher.next_chunk(1)
    assert stolen and dispatcher.stolen >= len(stolen)
    moved = dispatcher.stolen
    own, stolen_back = _own_chunks(dispatcher, 0)
    kept = [i for chunk in own for i in chunk]
    assert len(kept) == 40 - moved and kept  # the holder keeps the rest...
    assert max(kept) < min(stolen)  # ...the largest: the thief took from the small end
    rest = [i for _, chunk in _hand_out(dispatcher, [1, 0]) for i in chunk]
    assert sorted(stolen + kept + stolen_back + rest) == list(range(40))


def _own_chunks(dispatcher: Dispatcher, seat: int) -> tuple[list[list[int]], list[int]]:
    """The chunks ``seat`` gets, asking alone, until its own queue runs dry; and the chunk it then got by
    stealing (empty when there was nothing left to steal)."""
    chunks: list[list[int]] = []
    while True:
        before = dispatcher.stolen
        chunk = dispatcher.next_chunk(seat)
        if not chunk or dispatcher.stolen > before:
            return chunks, chunk
        chunks.append(chunk)


def test_nobody_s_functions_are_shared_out_by_size() -> None:
    """Functions no seat holds go to the seat with the least work queued, largest first: even shares."""
    sizes = [5000, 100, 100, 100, 100, 100, 100, 100, 100, 4000, 1000]
    dispatcher = Dispatcher(list(range(len(sizes))), sizes, [None] * len(sizes), 2)
    first = dispatcher.next_chunk(1)
    assert 9 in first and 0 not in first  # the two largest went to different seats
    own = [first, *_own_chunks(dispatcher, 1)[0]]
    assert sum(sizes[i] for c in own for i in c) == sum(sizes) // 2


def test_owners_beyond_the_seats_count_as_nobody() -> None:
    """After a resize, the executor's hints may name seats the crew no longer has."""
    dispatcher = Dispatcher(list(range(10)), [10] * 10, [7] * 10, 2)
    handed = _hand_out(dispatcher, [0, 1])
    assert {seat for seat, _ in handed} == {0, 1} and dispatcher.stolen == 0


def test_chunks_shrink_towards_the_end_of_a_queue() -> None:
    rng = random.Random(0)
    sizes = [rng.randint(100, 5000) for _ in range(2000)]
    dispatcher = Dispatcher(list(range(2000)), sizes, [None] * 2000, 2)
    chunks, _ = _own_chunks(dispatcher, 0)
    shares = [sum(sizes[i] for i in c) / sum(sizes) for c in chunks]
    # factoring: each chunk a third of what the seat has left (its queue is half the wave), down to a floor
    assert shares[0] == pytest.approx(0.5 * CHUNK_SHARE, abs=0.01)
    assert shares[1] == pytest.approx(0.5 * (1 - CHUNK_SHARE) * CHUNK_SHARE, abs=0.01)
    assert all(later <= earlier + 0.005 for earlier, later in itertools.pairwise(shares[:-1]))
    assert min(shares[:-1]) >= MIN_CHUNK_SHARE / 2  # the floor (a round trip per chunk is not free)
    assert sum(shares) == pytest.approx(0.5, abs=0.01) and len(chunks) <= 40
    biggest = sorted(range(2000), key=lambda i: -sizes[i])[:50]
    assert set(biggest) <= set(chunks[0]) | set(dispatcher.next_chunk(1))  # the biggest go first, never last


@pytest.mark.parametrize("share", [CHUNK_SHARE, CLUSTER_CHUNK_SHARE, 1.0])
def test_a_chunk_takes_its_share_of_what_the_seat_has_left(share: float) -> None:
    """Local workers take a third of what they have left, a cluster's half (fewer of its dear round trips)."""
    sizes = [100] * 600
    dispatcher = Dispatcher(list(range(600)), sizes, [0] * 600, 1, share=share)
    left = 600
    for _ in range(3):
        chunk = dispatcher.next_chunk(0)
        assert len(chunk) == pytest.approx(max(left * share, 600 * MIN_CHUNK_SHARE), abs=1)
        left -= len(chunk)
        if not left:
            break
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(ValueError, match="share"):
            Dispatcher([0], [1], [None], 1, share=bad)


@pytest.mark.parametrize("floor_share", [1 / 8, 1.0])
def test_a_caller_s_floor_makes_chunks_larger_up_to_a_few_per_seat(floor_share: float) -> None:
    """A backend whose round trip is dear asks for large chunks (a floor, in sizes); each seat still gets
    several, so that one done early has something to steal."""
    sizes = [100] * 2000
    per_seat = sum(sizes) / 2
    dispatcher = Dispatcher(list(range(2000)), sizes, [None] * 2000, 2, floor=per_seat * floor_share)
    chunks, _ = _own_chunks(dispatcher, 0)
    shares = [sum(sizes[i] for i in c) / per_seat for c in chunks]
    floor = min(floor_share, MAX_FLOOR_SHARE)
    assert all(share >= floor - 0.001 for share in shares[:-1])
    assert sum(shares) == pytest.approx(1.0) and len(chunks) <= 1 / floor + 1
    plain, _ = _own_chunks(Dispatcher(list(range(2000)), sizes, [None] * 2000, 2), 0)
    assert len(chunks) < len(plain)  # fewer round trips than the default floor's


def test_the_chunk_latency_is_the_median_of_recent_samples_and_the_worker_rate_falls_back() -> None:
    model = CostModel()
    assert model.latency == cost_mod.DEFAULT_LATENCY
    model.record_latency([0.004, 0.006, 0.2])  # one slow start does not decide
    assert model.latency == pytest.approx(0.006)
    model.record_latency([-0.001])  # a chunk timed a little short of its work: no negative latency
    assert model.latency >= 0.0
    assert model.worker_rate(["A", "B"]) == 2 * cost_mod.DEFAULT_RATE
    model.record_inline(["A"], 0.5, 1000)
    assert model.worker_rate(["A"]) == pytest.approx(0.5 / 1000)
    model.record_workers(["A"], 0.2, 1000)
    assert model.worker_rate(["A"]) == pytest.approx(0.2 / 1000)


def test_a_chunk_s_latency_is_what_it_cost_a_busy_seat_not_the_wave_s_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """A seat's first answer gives no sample (its round trip holds the wave's opening); a later chunk's cost is
    the time since the seat's previous answer, or since the chunk went if later, less its work."""
    import parpass.parallel.executor as executor_mod

    clock = [0.0]
    monkeypatch.setattr(executor_mod.time, "perf_counter", lambda: clock[0])
    run = executor_mod._Run()

    def at(t: float) -> None:
        clock[0] = t

    at(0.0)
    run.sent(0)
    run.sent(0)  # two in flight
    run.sent(1)
    at(0.030)
    run.answered(0, 0.010)  # 20 ms beyond its work: the wave's opening, not a chunk's cost
    run.sent(0)
    assert run.latencies == []
    at(0.041)
    run.answered(0, 0.010)  # it waited behind the first: 1 ms beyond its work since that answer
    at(0.050)
    run.answered(1, 0.020)  # seat 1's first: no sample
    at(0.060)
    run.sent(1)  # after seat 1's answer: counted from when it went
    at(0.075)
    run.answered(1, 0.012)
    assert run.latencies == pytest.approx([0.001, 0.003])


def test_a_cluster_s_chunk_latency_is_each_seat_s_first_round_trip(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers on other machines: each seat's first chunk's whole round trip less its work is the sample (a
    cluster's chunk costs machinery the gaps between answers do not show); later chunks give none."""
    import parpass.parallel.executor as executor_mod

    clock = [0.0]
    monkeypatch.setattr(executor_mod.time, "perf_counter", lambda: clock[0])
    run = executor_mod._Run(whole_round_trips=True)
    run.sent(0)
    run.sent(0)
    run.sent(1)
    clock[0] = 0.030
    run.answered(0, 0.010)
    clock[0] = 0.041
    run.answered(0, 0.010)  # waited behind the first: no sample
    clock[0] = 0.050
    run.answered(1, 0.020)
    assert run.latencies == pytest.approx([0.020, 0.030])


def test_an_empty_wave_hands_out_nothing() -> None:
    dispatcher = Dispatcher([], [], [], 3)
    assert dispatcher.remaining() == 0
    assert [dispatcher.next_chunk(s) for s in range(3)] == [[], [], []]
    assert dispatcher.stolen == 0


# ---------------------------------------------------------------------------------------------------------------------
# what a worker keeps: the ResidentCache


def _funcs(count: int) -> list[BaseFunc]:
    mod = random_module(num_functions=count, num_prim_funcs=0, size=4, seed=2)
    return [mod[name] for name in mod.names()][:count]


def _key(n: int) -> bytes:
    return digest_of(str(n).encode())


def test_the_cache_evicts_the_least_recently_used_by_encoded_size() -> None:
    a, b, c, d = _funcs(4)
    cache = ResidentCache(1000)
    cache.put(_key(1), a, 400)
    cache.put(_key(2), b, 400)
    assert cache.get(_key(1)) is a  # 1 is now the most recently used
    cache.put(_key(3), c, 400)  # 1200 > 1000: the least recently used (2) goes
    assert cache.get(_key(2)) is None
    assert cache.get(_key(1)) is a and cache.get(_key(3)) is c
    assert cache.size == 800 and len(cache) == 2
    cache.put(_key(4), d, 900)  # room only for itself
    assert len(cache) == 1 and cache.get(_key(4)) is d and cache.size == 900


def test_the_cache_counts_a_function_put_twice_once() -> None:
    a, b = _funcs(2)
    cache = ResidentCache(1000)
    cache.put(_key(1), a, 600)
    cache.put(_key(1), a, 600)
    assert cache.size == 600 and len(cache) == 1
    cache.put(_key(2), b, 400)
    assert cache.size == 1000 and len(cache) == 2


def test_a_function_larger_than_the_budget_is_not_kept_and_evicts_nothing() -> None:
    a, b = _funcs(2)
    cache = ResidentCache(1000)
    cache.put(_key(1), a, 500)
    cache.put(_key(2), b, 1001)
    assert cache.get(_key(2)) is None
    assert cache.get(_key(1)) is a and cache.size == 500


def test_a_smaller_budget_evicts_the_least_recently_used() -> None:
    a, b, c = _funcs(3)
    cache = ResidentCache(1000)
    for key, func in ((1, a), (2, b), (3, c)):
        cache.put(_key(key), func, 300)
    assert cache.get(_key(1)) is a  # 2 is now the least recently used
    cache.resize(600)
    assert cache.get(_key(2)) is None and cache.get(_key(1)) is a and cache.get(_key(3)) is c
    assert cache.size == 600 and cache.budget == 600


def test_a_zero_budget_keeps_nothing() -> None:
    (a,) = _funcs(1)
    cache = ResidentCache(0)
    cache.put(_key(1), a, 1)
    cache.put(_key(2), a, 0)  # even an empty encoding: nothing at all is kept
    assert cache.get(_key(1)) is None
    assert cache.size == 0


def test_resize_evicts_down_to_the_new_budget_least_recently_used_first() -> None:
    a, b, c = _funcs(3)
    cache = ResidentCache(1000)
    for n, func in enumerate((a, b, c)):
        cache.put(_key(n), func, 300)
    cache.get(_key(0))
    cache.resize(600)
    assert cache.get(_key(1)) is None  # the least recently used
    assert cache.get(_key(0)) is a and cache.get(_key(2)) is c
    cache.resize(10_000)  # growing keeps everything
    assert len(cache) == 2
    cache.resize(0)
    assert len(cache) == 0 and cache.size == 0
    cache.put(_key(0), a, 1)
    assert len(cache) == 0


def test_the_digest_is_of_the_bytes() -> None:
    assert digest_of(b"abc") == digest_of(memoryview(b"xabc")[1:])
    assert digest_of(b"abc") != digest_of(b"abd")
    assert len(digest_of(b"")) == DIGEST_SIZE


# ---------------------------------------------------------------------------------------------------------------------
# the cost model


def test_the_parent_s_work_in_a_wave_is_its_cpu_time_not_its_wait(history) -> None:  # type: ignore[no-untyped-def]
    """What a wave's statistics count as the parent's own work is its CPU time: not the wait for the workers
    (here ~20 ms a function of sleeping in them), which its wall time includes."""
    from parpass.parallel import default_executor

    mod = random_module(num_functions=12, num_prim_funcs=0, size=4, seed=3)
    with parallel_ctx():
        waits_a_little(mod)
    wave = default_executor.history[-1]
    assert wave.parallel and wave.functions > 0
    assert wave.wall >= 0.02 * wave.functions / 2  # the two workers slept that long at least
    assert 0 < wave.parent_seconds < wave.wall / 2


def test_a_pass_never_measured_runs_in_workers_on_a_big_module_only() -> None:
    model = CostModel()
    assert not model.should_parallelize(["New"], 20_000, 2, -1.0)  # ~0.6 ms of work: the round trip costs more
    assert model.should_parallelize(["New"], 20_000_000, 2, -1.0)


def test_measured_costs_decide() -> None:
    model = CostModel()
    model.record_inline(["Cheap"], 0.001, 1_000_000)  # 1 ns per byte: never worth a round trip of ~4 ms
    model.record_inline(["Heavy"], 1.0, 1_000_000)
    assert not model.should_parallelize(["Cheap"], 1_000_000, 2, -1.0)
    assert model.should_parallelize(["Heavy"], 1_000_000, 2, -1.0)
    # measured in workers only, and not clearly better: learn the in-process cost once
    model.record_workers(["Unsure"], 0.004, 100_000)
    assert not model.should_parallelize(["Unsure"], 100_000, 2, -1.0)


def test_a_short_wave_of_a_chain_measured_only_in_workers_runs_here_once_to_learn_its_cost() -> None:
    """A chain whose rate was taken in workers only (on another module's big wave, or while other programs
    held the cores) is run here once on a wave short enough that doing so costs next to nothing, however wide
    the advantage that rate shows: a 20-function module's light pipeline shipped every time at 0.40x of
    in-process, its in-process cost never learned. A long wave with a wide advantage still ships."""
    model = CostModel()
    model.record_workers(["Light"], 0.600, 1_000_000)  # 600 ns a byte: in-process estimated from it
    model.record_parallel(["Light"], 0.004, 40_000, 2)  # a small wave in workers took 4 ms
    inline, parallel = model.estimates(["Light"], 40_000, 2, others=0)
    assert inline > 1.5 * parallel  # the workers' rate says they win widely
    assert not model.should_parallelize(["Light"], 40_000, 2, -1.0)  # 24 ms here, once, to learn
    model.record_inline(["Light"], 0.0015, 40_000)  # it took 1.5 ms
    assert not model.should_parallelize(["Light"], 40_000, 2, -1.0)  # and stays here on what it learned
    model.record_workers(["Long"], 0.600, 1_000_000)
    assert model.should_parallelize(["Long"], 1_000_000, 2, -1.0)  # 0.6 s here: not explored


@pytest.mark.parametrize("on_this_machine", [True, False])
def test_a_cluster_s_workers_do_not_stand_for_this_process_a_rough_measure_here_is_completed_once(
    on_this_machine: bool,
) -> None:
    """A chain measured in workers and only roughly here (a probe's first functions) is estimated here by the
    workers' rate: on local workers that stands; a cluster's workers ran Simplify 10-25% slower per byte than
    this process, which made a thin advantage look wide, so there it runs here once to learn its cost."""
    model = CostModel(workers_on_this_machine=on_this_machine)
    model.record_rough(["Simplify"], 0.300, 2_500_000)
    model.record_workers(["Simplify"], 0.280, 2_500_000)
    model.record_parallel(["Simplify"], 0.200, 2_500_000, 2)
    assert model.should_parallelize(["Simplify"], 2_500_000, 2, -1.0) is on_this_machine
    model.record_inline(["Simplify"], 0.240, 2_500_000)  # what that run measured here
    assert model.should_parallelize(["Simplify"], 2_500_000, 2, -1.0)  # 200 < 240 ms, nothing left as bytes yet


def test_a_measured_advantage_within_the_spread_of_a_busy_machine_keeps_the_chain_here() -> None:
    """A chain whose measured parallel waves beat in-process by less than 15% stays here: on a machine whose
    other programs take a core, the same wave's time spreads by more than that (the dataflow pipeline's read
    0.85-1.11x of in-process in one loaded run), and in-process cannot lose to itself. A wider advantage ships,
    and a thin one is still tried in workers now and then, so that a load that goes away is seen."""
    model = CostModel()
    for chain in ("Thin", "Wide"):
        model.record_inline([chain], 0.400, 3_000_000)
    model.record_parallel(["Thin"], 0.360, 3_000_000, 2)  # 1.11x
    model.record_parallel(["Wide"], 0.320, 3_000_000, 2)  # 1.25x
    assert model.should_parallelize(["Wide"], 3_000_000, 2, -1.0)
    tries = [model.should_parallelize(["Thin"], 3_000_000, 2, -1.0) for _ in range(16)]
    assert tries == ([False] * 7 + [True]) * 2


def _loaded_model(samples: list[int]) -> CostModel:
    """A cost model of a 2-core machine whose load source reads ``samples``, then their last, for good."""
    readings = iter(samples)
    last = [0]

    def load() -> int:
        last[0] = next(readings, last[0])
        return last[0]

    return CostModel(load=load, cores=2)


def test_a_chain_measured_quiet_is_judged_by_the_load_from_its_first_decision_under_it() -> None:
    """Two workers on 2 cores beside a program that burns one get 4/3 of a core's work done, not 2: a chain
    whose quiet waves beat in-process by 1.6x stays here from the first decision under that load (on its
    quiet time alone it would ship until loaded waves outvoted the quiet ones); one that beat it by 2x still
    ships. Waves measured under the load stand, taken back to a quiet machine, once the load is gone."""
    model = _loaded_model([0] * 3 + [1])  # 3 samples quiet, then loaded for good
    for chain in ("Thin", "Wide"):
        model.record_inline([chain], 0.400, 3_000_000)
    model.record_parallel(["Thin"], 0.250, 3_000_000, 2)  # 1.6x quiet
    model.record_parallel(["Wide"], 0.200, 3_000_000, 2)  # 2x quiet
    assert model.should_parallelize(["Thin"], 3_000_000, 2, -1.0)  # quiet
    model.others()  # the load starts: the first sample of it (one alone does not count)
    assert not model.should_parallelize(["Thin"], 3_000_000, 2, -1.0)
    assert model.should_parallelize(["Wide"], 3_000_000, 2, -1.0)
    model.record_parallel(["Wide"], 0.300, 3_000_000, 2)  # what 2x quiet takes under the load: 1.33x
    # taken back to a quiet machine, the loaded wave says what the quiet one did
    assert model.measured_parallel(["Wide"], 3_000_000, 2, 0) == pytest.approx(0.200, rel=0.01)
    assert model.measured_parallel(["Wide"], 3_000_000, 2, 1) == pytest.approx(0.300, rel=0.01)


def test_a_wave_measured_under_the_load_stands_for_it_over_quiet_waves_scaled() -> None:
    """Scaled from a quiet machine, a chain's waves are a model's guess of what it takes under a load; once
    one of its waves ran under that load, that wave says it (a small wave took 2-2.4x its quiet time beside
    one busy program, not the 1.5x the cores' share says), and the quiet ones still say the quiet time."""
    model = _loaded_model([0] * 3 + [1])
    for _ in range(3):
        model.record_parallel(["DCE"], 0.050, 3_000_000, 2)  # quiet
    model.others()  # the load starts (its first sample alone does not count)
    model.record_parallel(["DCE"], 0.110, 3_000_000, 2)  # under the load
    assert model.measured_parallel(["DCE"], 3_000_000, 2, 1) == pytest.approx(0.110)
    assert model.measured_parallel(["DCE"], 3_000_000, 2, 0) == pytest.approx(0.050)
    assert model.measured_parallel(["DCE"], 3_000_000, 2, 2) == pytest.approx(0.004 + 0.046 * 2.0)  # none: scaled


def test_a_load_in_one_sample_only_is_not_a_load() -> None:
    """A kernel thread's wake-up shows in one sample of the runnable count; a program that keeps a core busy
    shows in every one. The model counts what two samples in a row agree on."""
    model = _loaded_model([0, 3, 0, 2, 2])
    assert [model.others() for _ in range(5)] == [0, 0, 0, 0, 2]
    assert CostModel().others() == 0  # no load source: a machine with nothing else running


def test_the_executor_reads_the_load_of_this_machine_for_local_workers(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The executor's cost model for local workers samples this machine's runnable count, and knows its
    cores; a Dask cluster's workers are other machines, whose load this one does not see."""
    from parpass.parallel import executor as executor_mod
    from parpass.parallel.backend import usable_cores

    monkeypatch.setattr(executor_mod, "_others_running", lambda: 5)
    fresh = executor_mod.ParallelExecutor()
    model = fresh.cost_of("")
    assert (model.others(), model.cores) == ((5, usable_cores()) if backend == "loky" else (0, 0))


def test_the_runnable_count_sees_a_program_that_burns_a_core() -> None:
    """``others_running`` counts a busy program besides this one in every sample (Linux)."""
    from parpass.parallel.load import others_running, parallel_speed

    if not Path("/proc/loadavg").exists():
        pytest.skip("no /proc/loadavg on this system")
    burner = subprocess.Popen(
        [sys.executable, "-c", "import sys; print(flush=True); sys.stdout.close()\nwhile True: pass"],
        stdout=subprocess.PIPE,
    )
    try:
        assert burner.stdout is not None and burner.stdout.readline() == b"\n"
        assert min(others_running() for _ in range(20)) >= 1
    finally:
        burner.kill()
        burner.wait()
    assert parallel_speed(2, 1, 2) == pytest.approx(4 / 3) and parallel_speed(2, 0, 2) == 2.0
    assert parallel_speed(4, 0, 2) == 2.0 and parallel_speed(2, 7, 0) == 2.0  # 0 cores: as many as needed


def test_functions_left_as_bytes_cost_their_decoding_in_process() -> None:
    """After a wave in workers, an in-process run must first decode what the workers sent back."""
    model = CostModel()
    model.record_inline(["Light"], 0.002, 1_000_000)
    model.record_workers(["Light"], 0.004, 1_000_000)
    model.record_wave(0.004, 0.004, 2, 1_000_000)
    assert not model.should_parallelize(["Light"], 1_000_000, 2, -1.0)
    assert model.should_parallelize(["Light"], 1_000_000, 2, -1.0, encoded=1_000_000)  # + ~14 ms to decode
    inline, _ = model.estimates(["Light"], 1_000_000, 2, encoded=1_000_000)
    model.record_decode(0.001, 1_000_000)  # this machine decodes faster than assumed
    assert model.estimates(["Light"], 1_000_000, 2, encoded=1_000_000)[0] < inline


def test_shipping_only_to_postpone_decoding_stops_once_postponing_has_lost_what_decoding_costs() -> None:
    """Rent or buy: a chain that loses in workers ships, to keep from decoding here what an earlier wave left
    as bytes, only while its losses so far stay below that decoding (its results come back as bytes too)."""
    model = CostModel()
    decoding = model.decode_rate * 3_000_000  # ~42 ms
    for chain in ("Unroll", "Vectorize", "Flatten", "Close", "Wins"):
        model.record_inline([chain], 0.045, 3_000_000)
    for chain in ("Unroll", "Vectorize", "Flatten"):
        model.record_parallel([chain], 0.075, 3_000_000, 2)  # 30 ms slower in workers than here
    model.record_parallel(["Close"], 0.0475, 3_000_000, 2)  # 2.5 ms slower
    model.record_parallel(["Wins"], 0.030, 3_000_000, 2)
    assert model.estimates(["Unroll"], 3_000_000, 2, encoded=3_000_000)[1] < 0.045 + decoding
    assert model.should_parallelize(["Unroll"], 3_000_000, 2, -1.0, encoded=3_000_000)  # 30 ms lost < ~42
    assert not model.should_parallelize(["Vectorize"], 3_000_000, 2, -1.0, encoded=3_000_000)  # 60 ms: decode
    # the decoding done, the account starts again
    assert model.should_parallelize(["Flatten"], 3_000_000, 2, -1.0, encoded=3_000_000)  # 30 ms lost
    decisions = [model.should_parallelize(["Close"], 3_000_000, 2, -1.0, encoded=3_000_000) for _ in range(6)]
    assert decisions == [True] * 4 + [False, True]  # 30 + 5 * 2.5 ms: past the ~42 ms at the 5th
    # a chain that wins in workers postpones nothing: the bytes were taken up at a profit, the account closes
    assert all(model.should_parallelize(["Wins"], 3_000_000, 2, -1.0, encoded=3_000_000) for _ in range(3))
    decisions = [model.should_parallelize(["Close"], 3_000_000, 2, -1.0, encoded=3_000_000) for _ in range(18)]
    assert decisions == [True] * 16 + [False, True]  # 17 * 2.5 ms: past the ~42 ms
    # on decoded input nothing is postponed: a chain that loses in workers runs here
    assert not model.should_parallelize(["Unroll"], 3_000_000, 2, -1.0)


def test_chains_kept_here_only_by_encoding_their_input_ship_once_what_they_forgo_reaches_that_encoding() -> None:
    """Rent or buy the other way: after a pass ran here, a chain that would win in workers but for encoding its
    input (held decoded) first runs here, until what running here has forgone reaches that encoding; then it
    ships, and the account starts again."""
    model = CostModel()
    held = 3_000_000
    encoding = (model.encode_rate + model.decode_rate / 2) * held  # encoded here, decoded by 2 workers: ~33 ms
    for chain in ("Small", "Big", "Loses", "Wins"):
        model.record_inline([chain], 0.100, held)
    model.record_parallel(["Small"], 0.090, held, 2)  # 10 ms faster in workers on its own
    model.record_parallel(["Big"], 0.070, held, 2)  # 30 ms faster
    model.record_parallel(["Loses"], 0.250, held, 2)  # slower in workers by more than a retry's margin
    model.record_parallel(["Wins"], 0.020, held, 2)  # faster by far more than the encoding
    assert 0.025 < encoding < 0.045
    inline, parallel = model.estimates(["Big"], held, 2, unencoded=held)
    assert parallel > inline  # each loses once its input's encoding is counted
    decisions = [model.should_parallelize(["Small"], held, 2, -1.0, unencoded=held) for _ in range(5)]
    assert decisions == [False, False, False, True, False]  # 4 * 10 ms forgone >= ~33 ms: shipped at the 4th
    assert model.should_parallelize(["Big"], held, 2, -1.0, unencoded=held)  # 10 + 30 ms forgone: ship
    # a chain that loses in workers on its own forgoes nothing, however long it runs here
    assert not any(model.should_parallelize(["Loses"], held, 2, -1.0, unencoded=held) for _ in range(10))
    assert not model.should_parallelize(["Big"], held, 2, -1.0, unencoded=held)  # 30 ms: not yet
    # one that wins even with the encoding ships, and the account closes with it
    assert model.should_parallelize(["Wins"], held, 2, -1.0, unencoded=held)
    assert not model.should_parallelize(["Big"], held, 2, -1.0, unencoded=held)  # 30 ms again, not 60: not yet
    # on input held as bytes nothing is forgone: a chain that wins by the margin a measured time needs ships
    assert model.should_parallelize(["Big"], held, 2, -1.0)


def test_a_wave_that_leaves_bytes_is_charged_their_decoding_as_often_as_bytes_ended_up_decoded_here() -> None:
    """A chain that wins in workers by less than the decoding of what it changes stays here once the bytes
    waves left lately ended up decoded here; it ships again once workers take such bytes up."""
    model = CostModel()
    decoding = model.decode_rate * 3_000_000  # ~42 ms
    model.record_inline(["Simplify"], 0.150, 3_000_000)
    model.record_parallel(["Simplify"], 0.120, 3_000_000, 2)  # 30 ms faster in workers
    model.record_changed(["Simplify"], 1000, 1000)
    model.record_inline(["Light"], 0.045, 3_000_000)
    model.record_parallel(["Light"], 0.100, 3_000_000, 2)  # loses more than the decoding: decoded at once
    model.record_inline(["Heavy"], 0.500, 3_000_000)
    model.record_parallel(["Heavy"], 0.260, 3_000_000, 2)
    assert model.should_parallelize(["Simplify"], 3_000_000, 2, -1.0)  # nothing decoded after a wave yet
    for _ in range(2):
        assert not model.should_parallelize(["Light"], 3_000_000, 2, -1.0, encoded=3_000_000)
    assert not model.should_parallelize(["Simplify"], 3_000_000, 2, -1.0)  # 120 + ~3/4 of 42 ms > 150
    assert model.should_parallelize(["Heavy"], 3_000_000, 2, -1.0)  # wins by far more than the decoding
    for _ in range(3):  # bytes taken up by workers that win
        assert model.should_parallelize(["Heavy"], 3_000_000, 2, -1.0, encoded=3_000_000)
    assert model.should_parallelize(["Simplify"], 3_000_000, 2, -1.0)
    # a chain that changes few of its functions leaves few bytes
    model.record_changed(["Simplify"], 0, 1000)
    model.record_changed(["Simplify"], 0, 1000)
    for _ in range(4):
        assert not model.should_parallelize(["Light"], 3_000_000, 2, -1.0, encoded=3_000_000)
    assert model.should_parallelize(["Simplify"], 3_000_000, 2, -1.0)
    assert decoding < 0.100 - 0.045


def test_an_in_process_run_learns_the_decoding_apart_from_the_pass(history) -> None:  # type: ignore[no-untyped-def]
    from parpass.ir.serialization import from_bytes, to_bytes
    from parpass.parallel import default_executor

    small = from_bytes(to_bytes(random_module(num_functions=6, num_prim_funcs=0, size=4, seed=1)), validate=False)
    assert isinstance(small, IRModule)
    targets = list(count_bindings.targets(small))
    assert targets and not any(small.is_decoded(name) for name in small.names())
    before = default_executor.cost.decode_rate
    with PassContext(config={"parpass.num_workers": 2}):
        count_bindings(small)
    assert not history[-1].parallel
    assert default_executor.cost.decode_rate != before
    assert all(small.is_decoded(name) for name in targets)  # decoded once, in the caller's module


def test_unreadable_function_bytes_fail_where_the_serial_run_fails(history, capsys) -> None:  # type: ignore[no-untyped-def]
    """Decoding ahead (in-process, or a worker's whole chunk) must not move the error ahead of earlier output."""
    from parpass.errors import IRFormatError
    from parpass.ir.serialization import from_bytes, to_bytes

    def module() -> IRModule:
        mod = from_bytes(to_bytes(random_module(num_functions=6, num_prim_funcs=0, size=4, seed=1)), validate=False)
        assert isinstance(mod, IRModule)
        name = list(chatty.targets(mod))[2]
        # the head (kind, attrs) still reads, the body does not: a node tag no one knows
        bad = mod.encoded_function(name).replace(b"Binding", b"Bindinx")
        mod.set_encoded_function(name, bad)
        return mod

    bad_name = list(chatty.targets(module()))[2]
    outputs = []
    # serial, 'auto' (in-process on so small a module, which decodes ahead), and in workers
    for config in ({"parpass.num_workers": 1}, {"parpass.num_workers": 2}, {"parpass.parallel": "always"}):
        with (
            pytest.raises(IRFormatError, match=f"@{bad_name}: unknown node tag 'Bindinx'") as raised,
            PassContext(config={"parpass.num_workers": 2, **config}),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore")  # Chatty warns too; what it prints is what is compared
            chatty(module())
        outputs.append(capsys.readouterr().out)
        assert f"parpass: raised in pass 'Chatty' on function {bad_name!r}" in raised.value.__notes__, config
    assert outputs[0].count("out ") == 2 and outputs[1] == outputs[0] and outputs[2] == outputs[0]


def test_function_bytes_whose_head_does_not_read_fail_naming_the_function_and_the_pass(history) -> None:  # type: ignore[no-untyped-def]
    """Not even the class and attributes of a function held as bytes read: what passes visit it is unknown, so
    the chain fails before running, with the serial run's IRFormatError naming the function, not msgspec's."""
    from parpass.errors import IRFormatError
    from parpass.ir.serialization import from_bytes, to_bytes

    for config in ({"parpass.num_workers": 1}, {"parpass.num_workers": 2}, {"parpass.parallel": "always"}):
        mod = from_bytes(to_bytes(random_module(num_functions=6, num_prim_funcs=1, size=4, seed=1)), validate=False)
        assert isinstance(mod, IRModule)
        bad_name = mod.names()[3]
        mod.set_encoded_function(bad_name, b"\x93garbage")
        with (
            pytest.raises(IRFormatError, match=f"^function bytes: @{bad_name}: wrong field type") as raised,
            PassContext(config={"parpass.num_workers": 2, **config}),
        ):
            count_bindings(mod)
        assert raised.value.__notes__ == ["parpass: raised in pass 'CountBindings'"], config
        with pytest.raises(IRFormatError, match=f"@{bad_name}"):
            mod.kind_and_attrs(bad_name)


def test_the_configured_threshold_overrides_the_estimate() -> None:
    model = CostModel()
    model.record_inline(["P"], 0.010, 1_000_000)
    assert model.should_parallelize(["P"], 1_000_000, 2, 0.005)
    assert not model.should_parallelize(["P"], 1_000_000, 2, 0.050)


def test_one_slow_wave_does_not_turn_parallel_runs_off() -> None:
    model = CostModel()
    for wall in (0.010, 0.011, 0.009, 5.0):  # an outlier, e.g. another program took the cores
        model.record_wave(wall, 0.0, 2, 1000)
    assert model.overhead == pytest.approx(0.0105, abs=0.001)


def test_a_measured_parallel_wave_stands_for_its_own_time_whatever_the_round_trip_is_estimated_at_since() -> None:
    """The round trip's estimate moves with every wave of every chain (40-100 ms on a cluster within a few
    runs): a chain's wave of the same size is estimated at what it took, not 40 ms less."""
    model = CostModel()
    for _ in range(5):
        model.record_wave(0.100, 0.0, 2, 1000)
    model.record_parallel(["P"], 0.220, 2_500_000, 2)
    for _ in range(5):
        model.record_wave(0.040, 0.0, 2, 1000)
    assert model.overhead == pytest.approx(0.040)
    assert model.measured_parallel(["P"], 2_500_000, 2) == pytest.approx(0.220)
    # another size: the round trip as estimated now, and the rest in proportion
    assert model.measured_parallel(["P"], 5_000_000, 2) == pytest.approx(0.040 + 2 * 0.180)


def test_a_chain_s_measured_parallel_time_overrides_the_model_of_its_workers() -> None:
    """Workers that got less than a core each (another program took the rest) look fast to a model that
    divides their busy time among them; the wave's time in the caller says the truth."""
    model = CostModel()
    model.record_inline(["P"], 0.100, 1_000_000)
    model.record_workers(["P"], 0.120, 1_000_000)  # the model: ~60 ms on 2 workers, against 100 ms here
    assert model.should_parallelize(["P"], 1_000_000, 2, -1.0)
    for _ in range(2):
        model.record_parallel(["P"], 0.160, 1_000_000, 2)  # what the waves took in the caller
    assert model.measured_parallel(["P"], 1_000_000, 2) == pytest.approx(0.160)
    assert model.measured_parallel(["P"], 500_000, 2) == pytest.approx(model.overhead + (0.160 - model.overhead) / 2)
    assert not model.should_parallelize(["P"], 1_000_000, 2, -1.0)
    assert model.measured_parallel(["Q"], 1_000_000, 2) is None  # another chain's waves say nothing of it


def test_a_measured_parallel_time_stands_only_for_waves_of_its_size_and_worker_count() -> None:
    """A small wave is mostly its round trip: its time per byte, multiplied by a big module's bytes, kept a
    16-worker pipeline in-process (a benchmark's warm-up on a small module did it). Nor does a wave on 4
    workers say what 16 take."""
    model = CostModel()
    model.record_inline(["P"], 0.100, 1_000_000)
    model.record_workers(["P"], 0.100, 1_000_000)
    model.record_parallel(["P"], model.overhead + 0.010, 20_000, 16)  # 0.5 us a byte: ten times the work
    assert model.measured_parallel(["P"], 20_000, 16) == pytest.approx(model.overhead + 0.010)
    assert model.measured_parallel(["P"], 1_000_000, 16) is None  # 50 times the bytes: the model decides
    assert model.should_parallelize(["P"], 1_000_000, 16, -1.0)
    model.record_parallel(["P"], model.overhead + 0.080, 1_000_000, 4)
    assert model.measured_parallel(["P"], 1_000_000, 16) is None
    assert model.measured_parallel(["P"], 1_000_000, 4) == pytest.approx(model.overhead + 0.080)
    assert model.measured_parallel(["P"], 300_000, 4) is not None  # within a factor of 4


def test_a_probe_s_first_functions_stand_for_a_pass_only_until_a_whole_wave_measures_it() -> None:
    """A probe's few milliseconds (cold caches, a pass's lookups decoding the functions it reads) once put
    DeadCodeElimination at 25 times its rate here, which kept it shipping on a loaded machine for good."""
    model = CostModel()
    model.record_rough(["DCE"], 0.005, 15_000)  # 333 ns a byte
    assert model.knows(["DCE"])
    assert model.estimates(["DCE"], 4_000_000, 2)[0] == pytest.approx(4_000_000 * 0.005 / 15_000)
    model.record_workers(["DCE"], 0.060, 4_000_000)  # a whole wave in the workers: 15 ns a byte
    assert model.estimates(["DCE"], 4_000_000, 2)[0] == pytest.approx(0.060)
    model.record_inline(["DCE"], 0.050, 4_000_000)  # and a whole wave here
    assert model.estimates(["DCE"], 4_000_000, 2)[0] == pytest.approx(0.050)
    assert model.worker_rate(["DCE"]) == pytest.approx(0.060 / 4_000_000)
    # measured by its probe and in workers: no in-process run only to learn what the probe showed
    probed = CostModel()
    probed.record_rough(["P"], 0.100, 1_000_000)
    probed.record_workers(["P"], 0.100, 1_000_000)
    assert probed.should_parallelize(["P"], 1_000_000, 2, -1.0)


def test_one_slow_parallel_wave_does_not_keep_a_chain_in_process() -> None:
    model = CostModel()
    model.record_inline(["P"], 0.100, 1_000_000)
    for wall in (0.060, 0.062, 0.500):  # the last one: another program took the cores for a moment
        model.record_parallel(["P"], wall, 1_000_000, 2)
    assert model.should_parallelize(["P"], 1_000_000, 2, -1.0)


def test_where_the_data_lies_counts_on_the_parallel_side_too() -> None:
    """A chain measured in workers on IR they held: when its input was just built here (an earlier pass ran
    in-process), shipping it means encoding it here and decoding it there, which the measure did not pay."""
    model = CostModel()
    model.record_inline(["Light"], 0.060, 1_000_000)
    for _ in range(2):
        model.record_parallel(["Light"], 0.052, 1_000_000, 2)  # resident: nothing decoded in the workers
    assert model.should_parallelize(["Light"], 1_000_000, 2, -1.0)
    assert not model.should_parallelize(["Light"], 1_000_000, 2, -1.0, unencoded=1_000_000)  # + ~4 + ~7 ms
    _, before = model.estimates(["Light"], 1_000_000, 2, unencoded=1_000_000)
    model.record_encode(0.001, 1_000_000)  # this machine encodes faster than assumed
    assert model.estimates(["Light"], 1_000_000, 2, unencoded=1_000_000)[1] < before


def test_a_parallel_wave_is_recorded_without_the_decoding_of_what_the_workers_did_not_hold() -> None:
    resident, cold = CostModel(), CostModel()
    resident.record_parallel(["P"], 0.050, 1_000_000, 2)
    cold.record_parallel(["P"], 0.050 + cold.decode_rate * 1_000_000 / 2, 1_000_000, 2, missed=1_000_000)
    assert cold.measured_parallel(["P"], 1_000_000, 2) == pytest.approx(resident.measured_parallel(["P"], 1_000_000, 2))


def test_a_chain_kept_in_process_by_its_parallel_time_is_tried_in_workers_again() -> None:
    """A load that went away must not keep a chain in-process for good: now and then it runs in workers,
    which measures it again; a chain far slower in workers is not tried again."""
    model = CostModel()
    model.record_inline(["P"], 0.100, 1_000_000)
    model.record_inline(["Far"], 0.100, 1_000_000)
    for _ in range(3):
        model.record_parallel(["P"], 0.150, 1_000_000, 2)
        model.record_parallel(["Far"], 0.500, 1_000_000, 2)
    decisions = [model.should_parallelize(["P"], 1_000_000, 2, -1.0) for _ in range(2 * cost_mod._RETRY_AFTER)]
    assert decisions.count(True) == 2 and decisions[cost_mod._RETRY_AFTER - 1] and decisions[-1]
    assert not any(model.should_parallelize(["Far"], 1_000_000, 2, -1.0) for _ in range(3 * cost_mod._RETRY_AFTER))
    for _ in range(2):  # the load went away: the tries measured it
        model.record_parallel(["P"], 0.060, 1_000_000, 2)
    assert model.should_parallelize(["P"], 1_000_000, 2, -1.0)


def test_a_whole_wave_in_workers_is_measured_for_the_next_decision(history) -> None:  # type: ignore[no-untyped-def]
    from parpass.parallel import default_executor

    mod = random_module(num_functions=12, num_prim_funcs=0, size=4, seed=2)
    with PassContext(config={"parpass.num_workers": 2, "parpass.parallel": "always"}):
        count_bindings(mod)
    assert history[-1].parallel
    measured = default_executor.cost.measured_parallel(["CountBindings"], history[-1].nbytes, 2)
    assert measured is not None and 0 < measured < history[-1].wall + default_executor.cost.overhead


def test_a_probe_counts_the_later_passes_on_what_its_first_pass_already_ran() -> None:
    """A chain whose first pass is nearly done here still has its later passes to run on every function:
    moving the rest to workers moves those too (they take up from the first pass's results)."""
    from parpass.parallel.config import ParallelConfig
    from parpass.parallel.executor import ParallelExecutor

    executor = ParallelExecutor()
    cfg = ParallelConfig.of(PassContext(config={"parpass.num_workers": 2}))
    # the first pass: 0.09 s on 900 of 1000 bytes, so 1e-4 s a byte and a pass
    inline, parallel = executor._rest(("A", "B", "C"), 0.09, 900.0, 1000.0, cfg)
    assert inline == pytest.approx(1e-4 * (100 * 3 + 900 * 2))  # not just the 100 bytes the first pass has left
    assert parallel < inline
    alone, _ = executor._rest(("A",), 0.09, 900.0, 1000.0, cfg)
    assert alone == pytest.approx(1e-4 * 100)


def test_workers_already_started_need_not_earn_their_start() -> None:
    """A probe moves the rest of a wave to workers someone already started (a warm-up, another executor) on
    what moving saves alone: the start-up they would otherwise have to earn is spent. A first run of a 900 ms
    CPU-heavy pass on a warm pool once stayed in-process whole ("too little work to move")."""
    from parpass.parallel import backend as backend_mod
    from parpass.parallel.config import ParallelConfig
    from parpass.parallel.executor import _START_COST, ParallelExecutor

    fresh = ParallelExecutor()  # it asked for no worker itself
    cfg = ParallelConfig.of(PassContext(config={"parpass.num_workers": 2}))
    probed = (("Heavy",), 0.2, 1_000_000.0, 2_500_000, cfg)  # 0.2 s in, ~0.3 s of work left here
    inline, parallel = fresh._rest(*probed)
    assert 0 < inline - parallel < _START_COST  # what moving saves would not pay for starting workers
    backend = backend_mod.backend_for(cfg.scheduler)
    backend.warm(2)
    assert backend.started(2)
    assert fresh._worth_moving(*probed)


@pytest.mark.parametrize(
    ("progress", "earns"),
    [
        (None, True),  # outside a pipeline: as much again as this process did (1.5 s)
        ((1.0, 2, 8), True),  # 2 of 10 passes in 1 s: 4 s to come
        ((3.0, 9, 1), False),  # 9 of 10 passes in 3 s (1.5 s of it here): 0.33 s to come
        ((0.3, 0, 10), True),  # the first pass, 0.3 s in: 3 s to come at least
    ],
    ids=["no-pipeline", "early", "late", "first-pass"],
)
def test_what_starting_the_workers_may_save_is_the_work_still_to_come(
    monkeypatch: pytest.MonkeyPatch, progress: tuple[float, int, int] | None, earns: bool
) -> None:
    """Within a pipeline, what is to come is its passes left at the rate of those run so far, not the
    in-process work done already: under WellFormedInstrument that grew pass after pass, and the workers
    started two passes from the end of a first run (1.07x its in-process time)."""
    import parpass.parallel.executor as executor_mod
    from parpass.parallel.config import ParallelConfig
    from parpass.parallel.executor import ParallelExecutor

    _started_or_not(monkeypatch)
    monkeypatch.setattr(executor_mod, "pipeline_progress", lambda: progress)
    executor = ParallelExecutor()
    executor._inline_seconds = 3.0  # this process's work so far: 3 s, 1.125 s of which 2 workers would save
    cfg = ParallelConfig.of(PassContext(config={"parpass.num_workers": 2}))
    assert executor._earns_start(0.1, 0.08, cfg) is earns


def test_a_pipeline_says_how_far_it_has_come() -> None:
    """Its passes done and left (the enabled ones, a fused chain counted pass by pass), the outermost
    pipeline only, nothing outside one."""
    from parpass.instrument import PassInstrument
    from parpass.transform import PassInfo, Sequential, module_pass
    from parpass.transform.context import pipeline_progress

    seen: list[tuple[int, int] | None] = []

    @module_pass(opt_level=0, name="Look")
    def look(mod: IRModule, ctx: PassContext) -> IRModule:
        progress = pipeline_progress()
        seen.append(None if progress is None else progress[1:])
        return mod

    @module_pass(opt_level=3, name="Disabled")
    def disabled(mod: IRModule, ctx: PassContext) -> IRModule:
        return mod

    class LookToo(PassInstrument):
        """Sees the progress in the pipeline's own callbacks (an instrument's work there is the run's too)."""

        def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
            if info.name == "outer":
                progress = pipeline_progress()
                seen.append(None if progress is None else progress[1:])

    mod = random_module(num_functions=4, num_prim_funcs=0, size=4, seed=2)
    with PassContext(opt_level=2, instruments=[LookToo()], config={"parpass.num_workers": 1}):
        Sequential([look, count_bindings, rebuild, disabled, Sequential([look, look]), look], name="outer")(mod)
        look(mod)
    # passes done, and after the one running: the pipeline's own callback first, its first pass, ...
    assert seen == [(0, 4), (0, 4), (3, 1), (3, 1), (4, 0), None]
    assert pipeline_progress() is None


def _started_or_not(monkeypatch: pytest.MonkeyPatch) -> dict[str, bool]:
    """A backend of 2 usable cores whose workers are started when the returned ``["now"]`` says so."""
    from parpass.parallel import backend as backend_mod

    started = {"now": False}

    class Backend:
        def started(self, num_workers: int) -> bool:
            return started["now"]

    monkeypatch.setattr(backend_mod, "backend_for", lambda scheduler: Backend())
    monkeypatch.setattr(backend_mod, "usable_cores", lambda: 2)
    return started


@pytest.mark.parametrize("heavy", [False, True], ids=["saves-little", "saves-much"])
def test_a_known_chain_starts_the_workers_only_when_its_wave_pays_for_their_start(
    monkeypatch: pytest.MonkeyPatch, heavy: bool
) -> None:
    """'auto' ships a chain it knows when the workers would run it faster; where they are not started yet,
    only when what the wave saves also pays for their start (a 60 ms pass's second run took 2.6x its
    in-process time while they started), else in-process, counted towards their start."""
    from parpass.parallel.config import ParallelConfig
    from parpass.parallel.cost import CostModel
    from parpass.parallel.executor import _UNSTARTED_REASON, ParallelExecutor, _Sized

    started = _started_or_not(monkeypatch)
    fresh = ParallelExecutor()
    cost = fresh.costs[""] = CostModel()  # nothing else running: two workers do twice the work
    nbytes, seconds = 5_000_000, (3.0 if heavy else 0.06)
    cost.record_inline(("P",), seconds, nbytes)
    cfg = ParallelConfig.of(PassContext(config={"parpass.num_workers": 2}))
    sized = _Sized(None, nbytes, 0, 0, False)  # type: ignore[arg-type]
    assert cost.should_parallelize(("P",), nbytes, 2, cfg.inline_below)  # the workers would win
    assert fresh._keeps_in_process(cost, ("P",), sized, cfg) == (None if heavy else _UNSTARTED_REASON)
    started["now"] = True  # someone started them: what the wave saves decides alone
    assert fresh._keeps_in_process(cost, ("P",), sized, cfg) is None
    started["now"] = False
    fresh._pool_started = True  # this executor asked for them once
    assert fresh._keeps_in_process(cost, ("P",), sized, cfg) is None


def test_a_single_pass_that_cannot_pay_for_moving_starts_as_a_probe_reading_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A known single pass whose rate puts the whole module below what is worth moving, or, with the workers
    not started, below what pays for their start, starts in-process as the probe does: the wave is read
    (~1 us a function) only if its functions show more work than that."""
    from parpass.parallel.config import ParallelConfig
    from parpass.parallel.cost import CostModel
    from parpass.parallel.executor import ParallelExecutor

    started = _started_or_not(monkeypatch)
    fresh = ParallelExecutor()
    cost = fresh.costs[""] = CostModel()
    cfg = ParallelConfig.of(PassContext(config={"parpass.num_workers": 2}))
    mod = random_module(num_functions=40, num_prim_funcs=0, size=8, seed=3)
    whole = len(mod) * fresh._bytes_per_function
    assert not fresh._looks_light(cost, [count_bindings], mod, cfg)  # never measured: decided otherwise
    for seconds, unstarted, warm in [(0.01, True, True), (0.2, True, False), (5.0, False, False)]:
        cost._inline.clear()
        cost.record_inline(("CountBindings",), seconds, int(whole))
        started["now"] = False
        assert fresh._looks_light(cost, [count_bindings], mod, cfg) is unstarted
        started["now"] = True
        assert fresh._looks_light(cost, [count_bindings], mod, cfg) is warm
    assert not fresh._looks_light(cost, [count_bindings, count_bindings], mod, cfg)  # a chain: read first


@pytest.mark.loky_only
def test_asking_whether_workers_are_started_starts_none() -> None:
    from parpass.parallel.backend import LokyBackend

    backend = LokyBackend()
    try:
        assert not backend.started(2)
        assert backend.worker_pids() == []
        assert not backend.ready(2)  # ready() starts them
        assert backend.started(2) and not backend.started(3)
    finally:
        backend.kill()


def test_a_function_held_only_decoded_is_sized_as_it_was_last_seen_encoded() -> None:
    """A rate learned on a guessed size (the average of another wave's functions) and applied to real sizes
    was off by their ratio: Simplify's PrimFuncs, put at 2,000 bytes against 2,670, looked 4/3 as dear here."""
    from parpass.ir import from_bytes
    from parpass.parallel.executor import ParallelExecutor

    executor = ParallelExecutor()
    mod = random_module(num_functions=30, num_prim_funcs=30, size=8, seed=4)
    held = from_bytes(to_bytes(mod), validate=False)  # bytes only, as an earlier wave in workers leaves it
    assert isinstance(held, IRModule)
    table = executor._targets([count_bindings], held, 0.0)
    real = sum(held.cached_size(held.names()[i]) or 0 for i in table.indices)
    assert executor._estimated_bytes(table) == (real, real, 0, 0)  # all held as bytes only
    fresh = random_module(num_functions=30, num_prim_funcs=30, size=8, seed=4)  # the same, only decoded
    table = executor._targets([count_bindings], fresh, 0.0)
    assert executor._estimated_bytes(table) == (real, 0, real, 0)  # sized as last seen, nothing guessed
    executor.forget()
    total, _, unencoded, guessed = executor._estimated_bytes(table)
    assert guessed == unencoded == total == 2000 * len(table.indices)  # never seen: the average, a guess


def test_a_rate_learned_on_guessed_sizes_is_a_rough_one(history) -> None:  # type: ignore[no-untyped-def]
    """Run here on a module never seen encoded, a chain's rate is per guessed byte: it stands for the chain only
    until a wave on known sizes measures it (see CostModel.record_rough)."""
    from parpass.parallel import default_executor

    default_executor.forget()
    cost = default_executor.cost
    mod = random_module(num_functions=40, num_prim_funcs=0, size=8, seed=6)
    with PassContext(config={"parpass.num_workers": 2, "parpass.parallel": "auto"}):
        for _ in range(2):
            count_bindings(mod)
    assert not any(w.parallel for w in history)  # too small to move: run here twice
    assert ("CountBindings",) in cost._rough and ("CountBindings",) not in cost._inline


def test_a_probed_wave_s_worker_rate_counts_only_what_the_workers_ran() -> None:
    """Moved after the probe ran the first pass on 3/4 of the bytes, a one-pass chain leaves the workers a
    quarter: its workers' seconds over the whole wave's bytes made the pass look four times as fast there."""
    from parpass.parallel.executor import _Probe, _worker_bytes

    probe = _Probe([])
    probe.done_bytes = 750.0
    assert _worker_bytes(1000, None, 1) == 1000
    assert _worker_bytes(1000, probe, 1) == 250
    assert _worker_bytes(1000, probe, 3) == 750  # the later passes ran on everything in the workers


def test_a_pass_that_says_it_reads_other_functions_gets_a_wave_of_its_own_from_the_first_run(history) -> None:  # type: ignore[no-untyped-def]
    """DeadCodeElimination reads whether its callees are pure: fused after a pass that changes them, every
    worker would run that pass again on the callees it looks up. It says so, so the first run, before the
    executor has seen a lookup, already cuts the chain."""
    from parpass.parallel import default_executor
    from parpass.passes import CanonicalizeBindings, DeadCodeElimination

    chain = Sequential([CanonicalizeBindings(), DeadCodeElimination()])
    mod = random_module(num_functions=40, num_prim_funcs=0, size=8, seed=5)
    with PassContext(config={"parpass.num_workers": 1}):
        expected = to_bytes(chain(mod))
    default_executor.forget()  # nothing learned: no lookup seen yet
    history.clear()
    with PassContext(config={"parpass.num_workers": 2, "parpass.parallel": "always"}):
        out = chain(mod)
    assert to_bytes(out) == expected
    assert [w.passes for w in history if w.parallel] == [("CanonicalizeBindings",), ("DeadCodeElimination",)]
    assert DeadCodeElimination.reads_other_functions and not CanonicalizeBindings.reads_other_functions


def test_auto_keeps_a_small_module_in_process(history) -> None:  # type: ignore[no-untyped-def]
    small = random_module(num_functions=6, num_prim_funcs=0, size=4, seed=1)
    with PassContext(config={"parpass.num_workers": 2}):
        out = count_bindings(small)
    # The first time, the pass runs here while the workers start; the rest of the wave never pays to move.
    assert not history[-1].parallel and history[-1].reason == "ran in-process (too little work to move)"
    with PassContext(config={"parpass.num_workers": 2}):
        count_bindings(small)
    # learned: a pass that light starts here again, and reads nothing of the wave unless it shows more work
    assert not history[-1].parallel and history[-1].reason == "estimated faster in-process (probed: a light pass)"
    with parallel_ctx(1):
        assert module_bytes(out) == module_bytes(count_bindings(small))


def test_a_chain_not_known_reads_nothing_of_the_wave_before_the_probe_s_first_check(
    monkeypatch: pytest.MonkeyPatch,
    history,  # type: ignore[no-untyped-def]
) -> None:
    """A chain ``auto`` knows nothing of starts as an in-process run would: a wave over before the probe's
    first check never reads what it would ship (every function's size and where it is held), so a first run
    of a light pipeline on a small module costs what in-process costs."""
    from parpass.parallel import default_executor

    small = random_module(num_functions=6, num_prim_funcs=0, size=4, seed=1)
    chain = Sequential([count_bindings, rebuild])
    with parallel_ctx(1):
        expected = module_bytes(chain(small))
    default_executor.cost_of("").overhead = 1.0  # a round trip far dearer than this chain: nothing to learn

    def read(*args: object) -> None:
        raise AssertionError("the wave was read")

    monkeypatch.setattr(type(default_executor), "_targets", read)
    with PassContext(config={"parpass.num_workers": 2}):
        assert module_bytes(chain(small)) == expected
    assert not any(w.parallel for w in history)


def test_a_chain_that_ran_here_whole_after_its_probe_is_decided_at_once_the_next_time(history) -> None:  # type: ignore[no-untyped-def]
    """A chain probed (its first pass here, function by function) and kept here whole is learned whole: run
    again, it is decided before anything runs, not probed again at a few checks a function. One whose run
    here, shared among the workers, would save less than a round trip to them could not have gained there:
    it is not read to learn that, and starts here again as an in-process run would."""
    from parpass.parallel import default_executor

    small = random_module(num_functions=6, num_prim_funcs=0, size=4, seed=1)
    chain = Sequential([count_bindings, rebuild])
    probed = [
        (("CountBindings",), "ran in-process (too little work to move)"),
        (("Rebuild",), "after the first pass ran in-process"),
    ]
    default_executor.cost_of("").overhead = 1.0  # a round trip far dearer than this chain
    with PassContext(config={"parpass.num_workers": 2}):
        out = chain(small)
    assert [(w.passes, w.reason) for w in history] == probed
    history.clear()
    with PassContext(config={"parpass.num_workers": 2}):
        chain(small)
    assert [(w.passes, w.reason) for w in history] == probed  # not learned: no cheaper way to run it here
    default_executor.cost_of("").overhead = 0.0  # a round trip cheaper than this chain: learn it
    history.clear()
    with PassContext(config={"parpass.num_workers": 2}):
        chain(small)
    assert [(w.passes, w.reason) for w in history] == probed
    history.clear()
    with PassContext(config={"parpass.num_workers": 2}):
        again = chain(small)
    # decided at once, as one wave (in-process on this machine's rate; a machine loaded enough that the chain was
    # learned at 3x its quiet rate ships it, against the round trip of 0 set above)
    assert [w.passes for w in history] == [("CountBindings", "Rebuild")]
    assert history[0].reason in ("estimated faster in-process", "parallel")
    assert module_bytes(again) == module_bytes(out)


def test_a_chain_far_below_any_parallel_time_stays_here_and_decodes_what_it_must(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Work here under half the least a parallel wave costs (its overhead) is kept here, however it was
    measured, without estimating a parallel time (a light chain on a few functions is decided in a few
    microseconds); bytes an earlier wave left are then decoded here, which closes the postponing account."""
    for record in ("record_inline", "record_rough", "record_workers"):
        model = CostModel()
        getattr(model, record)(["P"], 0.001, 1_000_000)  # 1 ns a byte
        monkeypatch.setattr(model, "_estimates", lambda *args, **kwargs: pytest.fail("estimated"))
        assert not model.should_parallelize(["P"], 100_000, 2, -1.0, encoded=0)
        assert model._decoded_later == 0.0
        assert not model.should_parallelize(["P"], 100_000, 2, -1.0, encoded=50_000)
        assert model._decoded_later == cost_mod._ALPHA  # bought: the next wave that leaves bytes weighs them


_SMALL_RUN = """
import sys
sys.path.insert(0, {here!r})
from parpass.parallel import get_backend
from parpass.passes import default_pipeline
from parpass.testing import random_module
from parpass.transform import PassContext, Sequential

with PassContext(config={{"parpass.num_workers": 2}}):
    default_pipeline()(random_module(num_functions=20, num_prim_funcs=4, size=6, seed=3))
print(len(get_backend().worker_pids()))
"""


def test_a_short_first_run_does_not_start_the_workers(tmp_path: Path) -> None:
    # Starting workers costs CPU (about a second each) that a run this small never earns back.
    script = tmp_path / "small.py"
    script.write_text(_SMALL_RUN.format(here=str(Path(__file__).parent)))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0"]


# ---------------------------------------------------------------------------------------------------------------------
# what a wave leaves behind


def test_a_wave_leaves_no_file_behind(small_module: IRModule, history, scratch: Path) -> None:  # type: ignore[no-untyped-def]
    with parallel_ctx(2):
        out = keep_even(small_module)
    assert history[-1].parallel and history[-1].chunks > 1
    assert leftovers(scratch) == []
    with parallel_ctx(1):
        assert module_bytes(out) == module_bytes(keep_even(small_module))


def _freeze_count() -> int:
    return gc.get_freeze_count()


def test_workers_keep_what_they_imported_out_of_garbage_collections(small_module: IRModule) -> None:
    with parallel_ctx(2):
        count_bindings(small_module)  # starts the pool
    frozen = get_backend().submit(2, _freeze_count).result()
    assert frozen > 1000  # parpass and its imports: loky's periodic gc.collect() in a worker skips them


@pytest.mark.skipif(not os.path.exists("/proc/thread-self/schedstat"), reason="Linux schedstat only")
def test_a_thread_s_wait_for_a_cpu_is_its_own() -> None:
    """A Dask worker runs a chunk in a thread of its pool: the waits subtracted from that chunk's time are
    that thread's, not those of the process's first thread."""
    import threading

    from parpass.parallel.load import run_delay

    def own() -> float:
        with open("/proc/thread-self/schedstat", "rb") as f:
            return int(f.read().split()[1]) / 1e9

    sum(range(3_000_000))  # this thread has run (and may have waited) a while
    seen: list[tuple[float, float, float]] = []
    reader = threading.Thread(target=lambda: seen.append((own(), run_delay(), own())))
    reader.start()
    reader.join()
    ((before, got, after),) = seen
    assert before <= got <= after


def test_what_a_chain_costs_in_workers_stands_for_its_in_process_cost_waits_included(history) -> None:  # type: ignore[no-untyped-def]
    """Learned from workers: the pass calls' time (not the workers' decoding, nor their waits for a CPU), so a
    pass that waits without computing is not taken for free in-process."""
    from ptest_passes import waits_a_little

    from parpass.parallel import default_executor
    from parpass.parallel.load import run_delay

    waited = run_delay()
    assert waited >= 0.0 and run_delay() >= waited  # seconds this process waited for a CPU, so far
    mod = random_module(num_functions=10, num_prim_funcs=0, size=3, seed=5)
    targets = waits_a_little.targets(mod)
    with PassContext(config={"parpass.num_workers": 2, "parpass.parallel": "always"}):
        waits_a_little(mod)
    assert history[-1].parallel
    nbytes = history[-1].nbytes
    inline, _ = default_executor.cost.estimates(["WaitsALittle"], nbytes, 2)
    assert inline >= 0.8 * 0.02 * len(targets)  # the waits count: ~20 ms a function
