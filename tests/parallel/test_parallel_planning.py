"""How the executor decides where a wave runs and cuts it into chunks, and what a wave leaves behind."""

from __future__ import annotations

import gc
import itertools
import random
import warnings
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from parallel_support import module_bytes, parallel_ctx
from ptest_passes import chatty, count_bindings, keep_even

from parpass.ir import IRModule
from parpass.parallel import get_backend
from parpass.parallel.cost import MIN_CHUNK_SHARE, CostModel, plan_chunks
from parpass.testing import random_module
from parpass.transform import PassContext

# ---------------------------------------------------------------------------------------------------------------------
# chunks


@given(sizes=st.lists(st.integers(1, 100_000), max_size=300), workers=st.integers(1, 8))
def test_chunks_cover_every_function_once_in_module_order_within_a_chunk(sizes: list[int], workers: int) -> None:
    chunks = plan_chunks(sizes, workers)
    assert sorted(i for chunk in chunks for i in chunk) == list(range(len(sizes)))
    assert all(chunk and chunk == sorted(chunk) for chunk in chunks)


def test_no_functions_no_chunks() -> None:
    assert plan_chunks([], 4) == []


def test_chunks_go_largest_first_and_shrink_towards_the_end() -> None:
    rng = random.Random(0)
    sizes = [rng.randint(100, 5000) for _ in range(2000)]
    total = sum(sizes)
    chunks = plan_chunks(sizes, 2)
    shares = [sum(sizes[i] for i in chunk) / total for chunk in chunks]
    # factoring: a batch of one chunk per worker, each half of what is left divided among the workers
    assert shares[0] == pytest.approx(0.25, abs=0.01) and shares[1] == pytest.approx(0.25, abs=0.01)
    assert shares[2] == pytest.approx(0.125, abs=0.01) and shares[3] == pytest.approx(0.125, abs=0.01)
    assert all(later <= earlier + 0.005 for earlier, later in itertools.pairwise(shares))
    # the floor (a round trip per chunk is not free); the last chunk takes what is left
    assert min(shares[:-1]) >= MIN_CHUNK_SHARE / 2
    assert len(chunks) <= 16
    biggest = sorted(range(len(sizes)), key=lambda i: -sizes[i])[:50]
    assert set(biggest) <= set(chunks[0])  # the biggest functions never come last


def test_one_huge_function_gets_a_chunk_of_its_own() -> None:
    sizes = [10] * 100 + [1_000_000] + [10] * 100
    chunks = plan_chunks(sizes, 4)
    assert chunks[0] == [100]
    assert len(chunks) > 1  # the small ones are still spread over the other workers


# ---------------------------------------------------------------------------------------------------------------------
# the cost model


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

    outputs = []
    # serial, 'auto' (in-process on so small a module, which decodes ahead), and in workers
    for config in ({"parpass.num_workers": 1}, {"parpass.num_workers": 2}, {"parpass.parallel": "always"}):
        with (
            pytest.raises(IRFormatError, match="Bindinx"),
            PassContext(config={"parpass.num_workers": 2, **config}),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore")  # Chatty warns too; what it prints is what is compared
            chatty(module())
        outputs.append(capsys.readouterr().out)
    assert outputs[0].count("out ") == 2 and outputs[1] == outputs[0] and outputs[2] == outputs[0]


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


def test_auto_keeps_a_small_module_in_process(history) -> None:  # type: ignore[no-untyped-def]
    small = random_module(num_functions=6, num_prim_funcs=0, size=4, seed=1)
    with PassContext(config={"parpass.num_workers": 2}):
        out = count_bindings(small)
    assert not history[-1].parallel and history[-1].reason == "estimated faster in-process"
    with parallel_ctx(1):
        assert module_bytes(out) == module_bytes(count_bindings(small))


# ---------------------------------------------------------------------------------------------------------------------
# what a wave leaves behind


def test_a_wave_leaves_no_file_behind(small_module: IRModule, history, scratch: Path) -> None:  # type: ignore[no-untyped-def]
    with parallel_ctx(2):
        out = keep_even(small_module)
    assert history[-1].parallel and history[-1].chunks > 1
    assert list(scratch.iterdir()) == []
    with parallel_ctx(1):
        assert module_bytes(out) == module_bytes(keep_even(small_module))


def _freeze_count() -> int:
    return gc.get_freeze_count()


def test_workers_keep_what_they_imported_out_of_garbage_collections(small_module: IRModule) -> None:
    with parallel_ctx(2):
        count_bindings(small_module)  # starts the pool
    frozen = get_backend().submit(2, _freeze_count).result()
    assert frozen > 1000  # parpass and its imports: loky's periodic gc.collect() in a worker skips them
