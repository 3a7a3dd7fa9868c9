"""The parent's own work per wave: what it keeps from one wave to the next, and that it changes no result.

The parent reads the module in columns once per wave, takes a chain's targets again from the last wave
with the same heads, merges the workers' answers as parallel arrays, and bounds the map of which worker
holds what. These tests check that each shortcut gives what the long way gives.
"""

from __future__ import annotations

from types import SimpleNamespace

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from parallel_support import module_bytes, parallel_ctx, probe_moves_at_once

import parpass.parallel.executor as executor_mod
from parpass.ir import IRModule, relax
from parpass.ir.node import FrozenAttrs
from parpass.parallel import default_executor
from parpass.parallel.protocol import ChunkDone
from parpass.parallel.schedule import Dispatcher
from parpass.passes import CanonicalizeBindings, EliminateCommonSubexpr, FoldConstant
from parpass.testing import random_module
from parpass.transform import Pass, PassContext, Sequential, function_pass


def _pipeline() -> Sequential:
    """Passes that look up no other function (a lookup decodes what a worker lacks: a miss no theft explains)."""
    return Sequential([CanonicalizeBindings(), FoldConstant(), EliminateCommonSubexpr()])


def test_a_bounded_owner_map_keeps_affinity_and_the_serial_bytes(monkeypatch: pytest.MonkeyPatch, history) -> None:  # type: ignore[no-untyped-def]
    """Pruned after every wave (the smallest bounds), the map still sends each function to its holder."""
    monkeypatch.setattr(executor_mod, "_OWNERS_MIN", 0)
    monkeypatch.setattr(executor_mod, "_OWNERS_PER_FUNCTION", 1)
    mod = random_module(num_functions=60, num_prim_funcs=0, size=8, seed=5)
    with parallel_ctx(1):
        expected = module_bytes(_pipeline()(_pipeline()(mod)))
    history.clear()
    with parallel_ctx(2, **{"parpass.fuse_passes": False}):
        out = _pipeline()(_pipeline()(mod))
    assert module_bytes(out) == expected
    later = [w for w in history if w.parallel][1:]  # every target of these was returned by the wave before
    assert later and sum(w.misses for w in later) <= sum(w.stolen for w in later)
    assert sum(w.hits for w in later) > 0


def test_a_wave_says_what_keeping_its_results_as_bytes_cost_the_workers(history) -> None:  # type: ignore[no-untyped-def]
    """Part of the executor's own work in the workers, apart from the passes' calls; something when a pass
    changed functions (each is encoded, digested and stored)."""
    mod = random_module(num_functions=40, num_prim_funcs=0, size=8, seed=3)

    @function_pass(opt_level=0, name="Tag")
    def tag(func: relax.Function, m: IRModule, ctx: PassContext) -> relax.Function:
        return func.with_attr("tagged", 1)

    @function_pass(opt_level=0, name="Keep")
    def keep(func: relax.Function, m: IRModule, ctx: PassContext) -> relax.Function:
        return func

    with parallel_ctx(2):
        tag(mod)
        changed = history[-1]
        keep(mod)
        unchanged = history[-1]
    for wave in (changed, unchanged):
        assert wave.parallel and 0.0 <= wave.result_seconds <= wave.worker_seconds - wave.pass_seconds
    assert changed.result_seconds > 0.0


def test_unsorted_targets_are_handed_out_as_sorted_ones() -> None:
    targets = [7, 3, 11, 5, 2, 13]
    sizes = [10, 40, 10, 25, 40, 5]
    owners: list[int | None] = [None, 1, 0, None, 1, 0]
    order = sorted(range(len(targets)), key=targets.__getitem__)
    ordered = Dispatcher([targets[i] for i in order], [sizes[i] for i in order], [owners[i] for i in order], seats=2)
    shuffled = Dispatcher(targets, sizes, owners, seats=2)
    for seat in [0, 1, 1, 0, 0, 1, 0, 1, 0, 1]:
        assert shuffled.next_chunk(seat) == ordered.next_chunk(seat)
    assert shuffled.remaining() == ordered.remaining() == 0
    assert shuffled.stolen == ordered.stolen


def test_set_encoded_columns_replaces_only_functions_the_module_has() -> None:
    mod = random_module(num_functions=3, num_prim_funcs=1, size=4, seed=2)
    names, heads = mod.head_columns()
    sizes, digests, _ = mod.encoded_columns()
    data = [mod.encoded_buffer(name) for name in names]
    copy = mod.copy()
    copy.set_encoded_columns(names, data, [b"d" * 16] * len(names), [("here", 0, s) for s in sizes], heads)
    assert copy.names() == names and module_bytes(copy) == module_bytes(mod)
    assert copy.head_columns() == (names, heads)
    assert copy.encoded_columns()[1] == [b"d" * 16] * len(names) and digests == [None] * len(names)
    with pytest.raises(KeyError, match="not in it"):
        copy.set_encoded_columns(["nowhere"], [data[0]], [None], [None], [heads[0]])
    assert copy.names() == names  # nothing changed


def test_what_a_merge_sets_is_left_out_of_the_collector_s_walks_and_behaves_as_any_function() -> None:
    """The slots a wave's merge makes (thousands a wave) are not tracked by the garbage collector (each
    collection walked them: ~1 ms of a 2,000-function wave's ~11 ms in the parent): they read, decode,
    copy, record and re-encode as any function of a module does."""
    import copy as copy_mod
    import gc
    import pickle

    from parpass.ir.digest import digest_of

    mod = random_module(num_functions=3, num_prim_funcs=1, size=4, seed=2)
    names, heads = mod.head_columns()
    sizes, _, _ = mod.encoded_columns()
    data = [memoryview(mod.encoded_function(name)) for name in names]
    merged = mod.copy()
    merged.set_encoded_columns(names, data, [None] * len(names), [("here", 0, s) for s in sizes], heads)
    slots = list(merged._slots.values())
    assert not any(gc.is_tracked(slot) for slot in slots)
    gc.collect()
    assert [merged[name] for name in names] == [mod[name] for name in names]  # decoded from the views
    assert merged.head_columns() == (names, heads) and merged.encoded_columns()[2][0] == ("here", 0, sizes[0])
    merged.record_digests(names, [digest_of(bytes(d)) for d in data])
    assert merged.encoded_columns()[1] == [digest_of(bytes(d)) for d in data]
    assert module_bytes(merged.copy()) == module_bytes(copy_mod.deepcopy(merged)) == module_bytes(mod)
    assert module_bytes(pickle.loads(pickle.dumps(merged))) == module_bytes(mod)
    assert all(isinstance(merged.encoded_function(name), bytes) for name in names)  # its own bytes from now on


class _Cycle:
    """A reference cycle (it refers to itself), which only the garbage collector frees."""

    def __init__(self) -> None:
        self.me = self


def test_a_caller_s_cyclic_garbage_between_waves_is_freed_at_the_collector_s_own_cadence() -> None:
    """The parent pauses the collector during a wave's bookkeeping and leaves its cadence alone: cycles a
    caller drops between waves are freed by the collections that follow, with no ``gc.collect()`` of its
    own (moving a wave's objects to the oldest generation unscanned reset the young count, and a loop that
    made little besides waves never reached a collection again)."""
    import gc
    import weakref

    assert gc.isenabled()
    mod = random_module(num_functions=40, size=4, seed=3)
    freed: list[bool] = []
    waves, cycles = 30, 100
    with parallel_ctx(2):
        for _ in range(waves):
            for _ in range(cycles):
                weakref.finalize(_Cycle(), freed.append, True)
            _pipeline()(mod)
    assert len(freed) >= 0.8 * waves * cycles, len(freed)


def _held_three_ways() -> IRModule:
    """Four functions: held as bytes only, decoded with its bytes, decoded only (an attribute set), bytes only."""
    from parpass.ir.serialization import from_bytes, to_bytes

    lazy = from_bytes(to_bytes(random_module(num_functions=3, num_prim_funcs=1, size=4, seed=2)), validate=False)
    assert isinstance(lazy, IRModule)
    names = lazy.names()
    lazy[names[1]]  # decoded, bytes kept
    lazy[names[2]] = lazy[names[2]].with_attr("k", 1)  # decoded only
    return lazy


def test_held_columns_say_what_cached_size_and_is_decoded_say() -> None:
    lazy = _held_three_ways()
    names = lazy.names()
    sizes, decoded = lazy.held_columns()
    assert sizes == [lazy.cached_size(name) for name in names] and sizes[2] is None and None not in sizes[:2]
    assert decoded == [lazy.is_decoded(name) for name in names] == [False, True, True, False]


def test_the_columns_a_wave_reads_say_what_each_function_s_accessors_say_and_encode_nothing() -> None:
    lazy = _held_three_ways()
    names = lazy.names()
    lazy.record_digest(names[0], b"d" * 16)
    lazy.record_location(names[3], ("store", 8, lazy.cached_size(names[3])))
    columns = lazy.columns()
    assert columns.names == names
    assert columns.heads == [lazy.kind_and_attrs(name) for name in names]
    assert columns.heads[2][1]["k"] == 1
    assert (columns.sizes, columns.decoded) == lazy.held_columns() and columns.sizes[2] is None
    assert columns.digests == [b"d" * 16, None, None, None]
    assert columns.locations == [None, None, None, ("store", 8, lazy.cached_size(names[3]))]
    assert lazy.cached_size(names[2]) is None and not lazy.is_decoded(names[0])  # nothing encoded nor decoded


def test_a_wave_taken_up_from_an_in_process_start_keeps_the_heads_of_its_bytes(  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch, history
) -> None:
    """``auto`` runs a chain's first pass in-process on the first functions, then moves the rest to the
    workers, which take up from what the first pass made: a function whose attributes the first pass changed
    here, and whose body a later pass changed there, must keep the new attributes in the head the output
    module holds (the next wave picks its targets from the heads without reading bytes)."""
    from ptest_passes import count_bindings, rebuild

    from parpass.transform import PassContext

    probe_moves_at_once(monkeypatch)  # the chain unknown: 'auto' starts it in-process
    taken_up: list[int] = []  # functions the workers took up from the first pass's in-process result
    inputs = executor_mod._probe_inputs

    def spy(*args):  # type: ignore[no-untyped-def]
        out = inputs(*args)
        taken_up.append(len(out))
        return out

    monkeypatch.setattr(executor_mod, "_probe_inputs", spy)
    chain = Sequential([count_bindings, rebuild])
    mod = random_module(num_functions=40, num_prim_funcs=0, size=8, seed=3)
    with parallel_ctx(1):
        expected = module_bytes(chain(mod))
    with PassContext(config={"parpass.num_workers": 2, "parpass.parallel": "auto"}):
        out = chain(mod)
    wave = next(w for w in history if w.parallel)
    assert wave.passes == ("CountBindings", "Rebuild") and taken_up and taken_up[0] > 0
    heads = out.heads()  # before anything is decoded: what the module holds
    assert module_bytes(out) == expected
    assert [(name, type(out[name]), dict(out[name].attrs)) for name in out.names()] == [
        (name, kind, dict(attrs)) for name, kind, attrs in heads
    ]
    assert all("num_bindings" in attrs or attrs.get("SkipOptimization") for _, _, attrs in heads)


def test_a_pass_the_probe_moved_keeps_what_it_cost_in_process(monkeypatch: pytest.MonkeyPatch, history) -> None:  # type: ignore[no-untyped-def]
    """The probe ran the first functions here before it moved the rest: that is the pass's in-process cost, so
    the next run need not run it all in-process once more only to learn it (and decode every function first)."""
    from ptest_passes import count_bindings

    from parpass.parallel import default_executor
    from parpass.transform import PassContext

    probe_moves_at_once(monkeypatch)
    mod = random_module(num_functions=40, num_prim_funcs=0, size=8, seed=3)
    with PassContext(config={"parpass.num_workers": 2, "parpass.parallel": "auto"}):
        count_bindings(mod)
    assert history[-1].parallel  # the probe moved the rest of the wave
    assert default_executor.cost._rough.get(("CountBindings",), 0.0) > 0.0  # learned from the probe's functions
    assert ("CountBindings",) not in default_executor.cost._inline  # a few functions are not a whole wave's rate
    assert default_executor.cost.knows(["CountBindings"])  # the next run decides on it, without a probe


def _fresh(mod: IRModule) -> tuple[list[object], ...]:
    """``mod``'s columns read again from its functions (a read-only view keeps none)."""
    return tuple(mod.read_only_view().columns())


_CHANGES = st.lists(
    st.sampled_from(
        [
            "set",
            "delete",
            "update",
            "read",
            "encode",
            "digest",
            "digest_at",
            "locate_at",
            "locate",
            "encoded_one",
            "copy",
            "merge",
            "merge_bad",
        ]
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(changes=_CHANGES, pick=st.integers(0, 1000))
def test_the_columns_a_module_keeps_are_always_those_read_from_its_functions(changes: list[str], pick: int) -> None:
    """Whatever changed the module (or read it lazily), :meth:`IRModule.columns` says what reading it now says;
    a merge given the positions patches the kept columns (kept, not read again) and a wrong position raises."""
    mod = _held_three_ways()
    mod.columns()
    for step, change in enumerate(changes):
        names = mod.names()
        name = names[(pick + step) % len(names)] if names else None
        if change == "set" and name is not None:
            mod[name] = mod[name].with_attr("step", step)
        elif change == "delete" and name is not None and len(names) > 1:
            del mod[name]
        elif change == "update":
            mod.update(random_module(num_functions=1, num_prim_funcs=0, size=3, seed=step))
        elif change == "read" and name is not None:
            mod[name]
        elif change == "encode" and name is not None:
            mod.encoded_buffer(name)
        elif change == "digest" and name is not None:
            mod.record_digests([name], [bytes([step]) * 16])
        elif change == "digest_at" and name is not None:
            kept = mod.columns()
            mod.record_digests([name], [bytes([step, 1]) * 8], [names.index(name)])
            assert mod._columns is not None and mod._columns.names is kept.names  # patched, not read again
            with pytest.raises(ValueError, match="positions"):
                mod.record_digests([name], [b"x" * 16], [len(names)])
        elif change == "locate" and name is not None:
            mod.record_locations([name], [("store", step, 1)])
        elif change == "locate_at" and name is not None:
            kept = mod.columns()
            mod.record_locations([name], [("store", step, 2)], [names.index(name)])
            assert mod._columns is not None and mod._columns.names is kept.names  # patched, not read again
        elif change == "encoded_one" and name is not None:
            mod.set_encoded_function(name, mod.encoded_function(name))
        elif change == "copy":
            mod = mod.copy()
        elif change in ("merge", "merge_bad") and names:
            positions = sorted({(pick + step) % len(names), (pick * 7 + step) % len(names)})
            chosen = [names[i] for i in positions]
            data = [mod.encoded_function(n) for n in chosen]
            heads = [(type(mod[n]), {"merged": step}) for n in chosen]
            digests = [bytes([step, i]) * 8 for i in range(len(chosen))]
            locations = [("merged", step, len(d)) for d in data]
            before = mod.columns()  # kept (reading the bytes above may have dropped them)
            if change == "merge_bad":
                with pytest.raises(ValueError, match="positions"):
                    mod.set_encoded_columns(chosen, data, digests, locations, heads, [p + 1 for p in positions])
                continue
            mod.set_encoded_columns(chosen, data, digests, locations, heads, positions)
            kept = mod._columns
            assert kept is not None and kept.names is before.names  # patched, not read again
        assert tuple(mod.columns()) == _fresh(mod), change
        assert mod.columns() is mod.columns()


def _annotate(index: int) -> Pass:
    """A pass that gives every dataflow function one more attribute (its class and SkipOptimization kept)."""

    @function_pass(opt_level=0, name=f"Annotate{index}")
    def annotate(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
        return func.with_attr(f"annotated_{index}", index)

    return annotate


@function_pass(opt_level=0, name="SkipEveryThird")
def _skip_every_third(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    """Marks a third of the functions SkipOptimization: the passes after it must not visit them."""
    return (
        func.with_attr("SkipOptimization", True)
        if sum(map(ord, func.attrs.get("global_symbol", ""))) % 3 == 0
        else func
    )


def _counting_visits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times the executor takes a chain's targets from every head (once per call)."""
    calls: list[int] = []
    taken = executor_mod._visited

    def counted(*args: object) -> list[int]:
        calls.append(1)
        return taken(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(executor_mod, "_visited", counted)
    return calls


def test_a_wave_that_changes_only_other_attributes_keeps_its_chain_s_targets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every function's head changes in every wave, none its class or SkipOptimization: the targets are
    taken once, at the first wave, and every wave's output is the serial one."""
    mod = random_module(num_functions=40, num_prim_funcs=5, size=6, seed=9)
    pipeline = Sequential([_annotate(i) for i in range(4)])
    with parallel_ctx(1):
        expected = module_bytes(pipeline(mod))
    calls = _counting_visits(monkeypatch)
    default_executor.forget()
    with parallel_ctx(2, **{"parpass.fuse_passes": False}):
        out = pipeline(mod)
    assert module_bytes(out) == expected
    assert len(calls) == 1


def test_a_wave_that_sets_skip_optimization_makes_the_next_take_its_targets_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pass that marks functions SkipOptimization changes the next pass's targets: they are taken again, and
    the next pass leaves the marked functions as the serial run does."""
    mod = random_module(num_functions=40, num_prim_funcs=5, size=6, seed=9)
    pipeline = Sequential([_annotate(0), _skip_every_third, _annotate(1)])
    with parallel_ctx(1):
        serial = pipeline(mod)
    skipped = [name for name in serial.names() if serial.kind_and_attrs(name)[1].get("SkipOptimization")]
    assert skipped and all("annotated_1" not in serial.kind_and_attrs(name)[1] for name in skipped)
    calls = _counting_visits(monkeypatch)
    default_executor.forget()
    with parallel_ctx(2, **{"parpass.fuse_passes": False}):
        out = pipeline(mod)
    assert module_bytes(out) == module_bytes(serial)
    assert len(calls) == 2  # the first wave, and the one after the marking (the marking's own kept them)


@function_pass(opt_level=0, name="AnnotateByParity")
def _annotate_by_parity(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    """Two distinct new attribute maps among all the functions (and their own ``global_symbol`` kept)."""
    return func.with_attr("parity", len(func.params) % 2).with_attr("flag", True)


def test_heads_a_wave_changed_are_the_serial_run_s_and_refuse_changes(history) -> None:  # type: ignore[no-untyped-def]
    """The attributes a parallel wave reports are what the serial run's functions hold (frozen: changing them
    raises, as on the serial module, rather than changing the heads that pick later passes' targets), and
    each chunk sends each distinct new head once."""
    mod = random_module(num_functions=40, num_prim_funcs=5, size=6, seed=9)
    with parallel_ctx(1):
        serial = _annotate_by_parity(mod)
    sent: list[ChunkDone] = []
    original = executor_mod.ParallelExecutor._take

    def take(self, crew, seat, answer, *rest):  # type: ignore[no-untyped-def]
        sent.append(answer)
        return original(self, crew, seat, answer, *rest)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(executor_mod.ParallelExecutor, "_take", take)
        with parallel_ctx(2):
            out = _annotate_by_parity(mod)
    assert module_bytes(out) == module_bytes(serial)
    names = serial.names()
    assert [out.kind_and_attrs(n) for n in names] == [serial.kind_and_attrs(n) for n in names]
    assert {type(out.kind_and_attrs(n)[1]) for n in names} == {FrozenAttrs}
    changed = next(n for n in names if "parity" in out.kind_and_attrs(n)[1])
    with pytest.raises(TypeError):
        out.kind_and_attrs(changed)[1]["parity"] = 7  # type: ignore[index]
    assert out.kind_and_attrs(changed) == serial.kind_and_attrs(changed)
    # the functions with a global_symbol each have their own head; the others share two
    for answer in sent:
        assert len(answer.head_of) == len(answer.head_at) == len(answer.indices) > 0
        assert len(answer.heads) == len(set(answer.head_of)) <= len(answer.indices)
        assert len({msgspec.msgpack.encode(h) for h in answer.heads}) == len(answer.heads)
    assert sum(len(a.heads) for a in sent) < sum(len(a.indices) for a in sent) / 2


@pytest.mark.parametrize("ship_min", [1e9, 0.0], ids=["too-little-left", "enough-left"])
def test_a_single_pass_probe_reads_the_wave_only_when_its_rate_leaves_enough_to_move(  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch, history, ship_min: float
) -> None:
    """At a probe's check, a single-pass wave whose first functions' rate leaves less in-process work than is
    worth moving is not read (its columns, sizes and targets: ~1 us a function); one that leaves more is."""
    from ptest_passes import count_bindings

    monkeypatch.setattr(executor_mod, "_PROBE_FIRST", 0.0)
    monkeypatch.setattr(executor_mod, "_PROBE_EVERY", 0.0)
    monkeypatch.setattr(executor_mod, "_PROBE_MIN_FUNCTIONS", 1)
    monkeypatch.setattr(executor_mod, "_SHIP_MIN_SECONDS", ship_min)
    monkeypatch.setattr(default_executor, "_worth_moving", lambda *args: False)
    reads: list[int] = []
    sized = default_executor._sized
    monkeypatch.setattr(default_executor, "_sized", lambda *args, **kw: reads.append(1) or sized(*args, **kw))
    default_executor.forget()
    mod = random_module(num_functions=40, num_prim_funcs=0, size=8, seed=3)
    with PassContext(config={"parpass.num_workers": 2, "parpass.parallel": "auto"}):
        out = count_bindings(mod)
    assert not history[-1].parallel
    assert reads == ([] if ship_min else [1])  # read once, at the first check that found enough left
    with parallel_ctx(1):
        assert module_bytes(out) == module_bytes(count_bindings(mod))


def _same_functions(count: int) -> IRModule:
    """``count`` functions of one body (so of one encoded size), held as bytes only."""
    from parpass.ir.serialization import from_bytes, to_bytes

    one = random_module(num_functions=1, num_prim_funcs=0, size=6, seed=2)
    body = one[one.names()[0]]
    back = from_bytes(to_bytes(IRModule({f"f{i}": body for i in range(count)})), validate=False)
    assert isinstance(back, IRModule)
    return back


@pytest.mark.own_backend
def test_a_probe_reads_the_clock_less_often_while_its_functions_are_fast_and_after_each_once_one_is_slow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Reading the clock (and a size) after every function cost a 4 us pass 3-5% of its time: the probe reads
    it after 1, 2, 4... functions up to a bound while they prove fast, and after every one again once a block
    was slow. The pass's results are the serial run's, whatever the blocks."""
    from parpass.transform.executor import InlineExecutor

    slow = "f40"

    @function_pass(opt_level=0, name="Mark")
    def mark(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
        return func.with_attr("marked", True)

    mod = _same_functions(100)
    names = mark.targets(mod)
    transform = mark.transform_one
    clock = [0.0]  # the probe's clock: 1 us a function, the slow one 2 * _CLOCK_EVERY

    def timed(func: relax.Function, name: str, view: IRModule, ctx: PassContext) -> relax.Function:
        clock[0] += 2 * executor_mod._CLOCK_EVERY if name == slow else 1e-6
        return transform(func, name, view, ctx)  # type: ignore[return-value]

    monkeypatch.setattr(executor_mod, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    monkeypatch.setattr(mark, "transform_one", timed)
    probe = executor_mod._Probe(names)
    blocks: list[tuple[str, int]] = []  # where it reads the clock: (the function just run, how many it stands for)
    count_size = probe._count_size
    monkeypatch.setattr(probe, "_count_size", lambda m, f, n, *a: blocks.append((f, n)) or count_size(m, f, n, *a))
    ctx = PassContext()
    assert probe.run_until(mark, mod, mod.read_only_view("test"), ctx, {}, 7, float("inf")) == 100
    assert executor_mod._CLOCK_STRIDE_MAX == 16
    # f31-f46 holds the slow f40: read after f47 again, then 2, 4... apart
    assert [n for _, n in blocks] == [1, 2, 4, 8, 16, 16, 1, 2, 4, 8, 16, 16, 6]
    assert [name for name, _ in blocks][5:7] == ["f46", "f47"]
    assert probe.count == 100 and list(probe.ran) == names
    expected = InlineExecutor().run([mark], mod, ctx)
    assert list(probe.changed) == names
    assert all(probe.changed[name] == expected[name] for name in names)
    clock[0] = 0.0
    again = executor_mod._Probe(names)
    assert again.run_until(mark, mod, mod.read_only_view("test"), ctx, {}, 7, 10e-6) == 15  # the block f7-f14 passed it
    assert again.run_until(mark, mod, mod.read_only_view("test"), ctx, {}, 7, float("inf")) == 100
    assert list(again.ran) == names and list(again.changed) == names


@pytest.mark.own_backend
def test_a_probe_s_sampled_sizes_are_the_held_sizes_where_all_are_equal_and_the_guess_where_none_is_known() -> None:
    from ptest_passes import count_bindings

    mod = _same_functions(50)
    size = mod.cached_size("f0")
    assert size and all(mod.cached_size(name) == size for name in mod.names())
    names = count_bindings.targets(mod)
    probe = executor_mod._Probe(names)
    ctx = PassContext()
    assert probe.run_until(count_bindings, mod, mod.read_only_view("test"), ctx, {}, 7, float("inf")) == 50
    assert probe.done_bytes == 50 * size and probe.guessed == 0
    assert probe.decoded_bytes == 50 * size and probe.decode_seconds > 0  # held as bytes: decoded, timed apart
    decoded = IRModule({name: mod[name] for name in mod.names()})  # held decoded only: no size held
    again = executor_mod._Probe(names)
    assert again.run_until(count_bindings, decoded, decoded.read_only_view("test"), ctx, {"f0": 3}, 7, 0.0) == 1
    assert again.done_bytes == 3 and again.guessed == 0  # the size last seen
    assert again.run_until(count_bindings, decoded, decoded.read_only_view("test"), ctx, {"f0": 3}, 7, 0.0) == 2
    assert again.done_bytes == 3 + 7 and again.guessed == 7  # never seen: the fallback, counted as guessed
    assert again.decoded_bytes == 0 and list(again.ran) == ["f0", "f1"]
