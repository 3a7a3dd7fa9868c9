"""Results kept in the workers between a pipeline's waves (config ``parpass.keep_results``).

With the key on, a wave whose passes read no other function leaves each result
with the worker that made it; these tests check that runs stay the serial run
byte for byte and callback for callback, that what the pipeline returns needs
no worker, that a pass reading what another worker keeps still gets it, that
a worker that dies holding kept results loses nothing (they are made again),
or, where they cannot be, fails the call clearly without touching the
caller's module, and the pieces (pinning, the pipeline's end,
learning which chains not to keep) on their own.
"""

from __future__ import annotations

import pytest
from parallel_support import KillsAWorkerAfter, Recorder, module_bytes

from parpass.errors import WorkerCrashedError
from parpass.ir import IRModule, relax
from parpass.parallel import default_executor, get_backend
from parpass.parallel.schedule import Dispatcher
from parpass.parallel.wave import KEPT
from parpass.passes import CanonicalizeBindings, EliminateCommonSubexpr, FoldConstant, InferType, RemoveNoOp, Simplify
from parpass.testing import random_module
from parpass.transform import PassContext, Sequential, function_pass
from parpass.transform.context import at_pipeline_end

KEEP = {"parpass.keep_results": True}


@pytest.fixture(autouse=True)
def _unlearned() -> None:
    """Each test starts with no chain known to lose by keeping (see Keeper.fetched_early)."""
    default_executor.keeper.fetched_early.clear()


def _pipeline() -> Sequential:
    """Passes that read no other function after one that does: the middle ones keep their results."""
    return Sequential(
        [InferType(), CanonicalizeBindings(), FoldConstant(), EliminateCommonSubexpr(), Simplify(), RemoveNoOp()]
    )


def _module(seed: int = 4) -> IRModule:
    return random_module(num_functions=80, num_prim_funcs=30, size=8, seed=seed)


def _run(mod: IRModule, workers: int, keep: bool = True, trace: list[tuple[str, ...]] | None = None) -> IRModule:
    mode = "always" if workers > 1 else "never"
    config = {"parpass.num_workers": workers, "parpass.parallel": mode, "parpass.keep_results": keep}
    with PassContext(instruments=[Recorder(trace if trace is not None else [])], config=config):
        return _pipeline()(mod)


def test_kept_results_give_the_serial_bytes_and_trace_and_need_no_worker_after_the_pipeline(backend: str) -> None:
    mod = _module()
    serial_trace: list[tuple[str, ...]] = []
    serial = module_bytes(_run(mod, 1, trace=serial_trace))
    before = default_executor.keeper.kept_total
    trace: list[tuple[str, ...]] = []
    out = _run(mod, 2, trace=trace)
    kept = default_executor.keeper.kept_total - before
    assert trace == serial_trace
    assert list(default_executor.keeper) == []  # the pipeline's end fetched all it returns
    get_backend().shutdown()  # no worker left to ask
    assert module_bytes(out) == serial
    assert (kept > 0) == (backend == "loky")  # a cluster's workers keep nothing


def test_with_the_key_off_nothing_is_kept() -> None:
    mod = _module(seed=5)
    before = default_executor.keeper.kept_total
    out = _run(mod, 2, keep=False)
    assert default_executor.keeper.kept_total == before
    assert module_bytes(out) == module_bytes(_run(mod, 1))


def test_the_pipeline_s_last_pass_and_a_single_pass_keep_nothing() -> None:
    """Nothing would take them: the pipeline's end (or the call's) would fetch them at once."""
    mod = _module(seed=6)
    before = default_executor.keeper.kept_total
    with PassContext(config={"parpass.num_workers": 2, "parpass.parallel": "always", **KEEP}):
        CanonicalizeBindings()(mod)
        Sequential([CanonicalizeBindings()])(mod)
    assert default_executor.keeper.kept_total == before


def test_a_pass_that_reads_a_function_another_worker_keeps_gets_it() -> None:
    """A pass that says nothing of it but looks up callees, after waves that kept their results: the chunks
    that needed one another worker kept count for nothing, and the wave runs again once all are fetched."""

    @function_pass(opt_level=0, name="TagWithCalleeSizes")
    def tag(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
        from parpass.ir.calls import called_names

        callees = [mod[name] for name in called_names(func)]
        return func.with_attr("callee_params", sum(len(c.params) for c in callees))

    mod = _module(seed=7)
    pipe = Sequential([InferType(), CanonicalizeBindings(), FoldConstant(), tag, RemoveNoOp()])
    with PassContext(config={"parpass.num_workers": 1}):
        serial = module_bytes(pipe(mod))
    config = {"parpass.num_workers": 2, "parpass.parallel": "always", "parpass.fuse_passes": False, **KEEP}
    with PassContext(config=config):
        out = pipe(mod)
        again = pipe(mod)  # now known to read other functions: fetched first, once
    assert module_bytes(out) == serial and module_bytes(again) == serial
    assert list(default_executor.keeper) == []


def _started_pool(mod: IRModule) -> None:
    """A pool, before the pipeline starts (the instrument that kills a worker needs one)."""
    with PassContext(config={"parpass.num_workers": 2, "parpass.parallel": "always"}):
        CanonicalizeBindings()(mod)


@pytest.mark.loky_only
def test_a_worker_killed_holding_kept_results_loses_nothing_they_are_made_again() -> None:
    """The worker that keeps FoldConstant's results dies before the next wave: the results it kept are made
    again in this process from what made them, and the call gives the serial bytes and trace."""
    mod = _module(seed=8)
    serial_trace: list[tuple[str, ...]] = []
    serial = module_bytes(_run(mod, 1, trace=serial_trace))
    given = module_bytes(mod)
    _started_pool(mod)
    killer = KillsAWorkerAfter("FoldConstant")
    trace: list[tuple[str, ...]] = []
    keeper = default_executor.keeper
    remade = keeper.remade_total
    config = {"parpass.num_workers": 2, "parpass.parallel": "always", **KEEP}
    # the killer first: the recorder then reads the module after FoldConstant, which fetches what the dead
    # worker kept (the next test meets the loss at the next wave instead)
    with PassContext(instruments=[killer, Recorder(trace)], config=config):
        out = _pipeline()(mod)
    assert killer.killed
    assert keeper.remade_total > remade  # made again, not fetched
    assert module_bytes(out) == serial
    assert trace == serial_trace
    assert module_bytes(mod) == given
    assert list(keeper) == []


@pytest.mark.loky_only
def test_results_of_several_kept_waves_lost_at_once_are_made_again_through_each_wave() -> None:
    """Fusion off: CanonicalizeBindings, FoldConstant, EliminateCommonSubexpr and Simplify each keep their
    results; a worker killed after Simplify held results made from results it kept before, some of them let
    go: each is made again from the last bytes this process held, through every wave since."""
    mod = _module(seed=9)
    serial = module_bytes(_run(mod, 1))
    _started_pool(mod)
    killer = KillsAWorkerAfter("Simplify")
    keeper = default_executor.keeper
    remade = keeper.remade_total
    config = {"parpass.num_workers": 2, "parpass.parallel": "always", "parpass.fuse_passes": False, **KEEP}
    with PassContext(instruments=[killer], config=config):
        out = _pipeline()(mod)
    assert killer.killed and keeper.remade_total > remade
    assert module_bytes(out) == serial


@pytest.mark.loky_only
def test_a_kept_result_that_cannot_be_made_again_fails_the_call_naming_the_pass_and_the_input_stays() -> None:
    """A pass that behaves otherwise in this process than in a worker (it raises here): its results, lost with
    their worker, cannot be made again; the call says so, naming the pass, and the caller's module stays."""

    @function_pass(opt_level=0, name="OnlyInWorkers")
    def only_in_workers(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
        import multiprocessing

        if multiprocessing.parent_process() is None:
            raise RuntimeError("run in the parent")
        return func.with_attr("seen_by_worker", 1)

    mod = _module(seed=10)
    given = module_bytes(mod)
    _started_pool(mod)
    killer = KillsAWorkerAfter("OnlyInWorkers")
    config = {"parpass.num_workers": 2, "parpass.parallel": "always", "parpass.fuse_passes": False, **KEEP}
    pipe = Sequential([CanonicalizeBindings(), only_in_workers, RemoveNoOp()])
    with PassContext(instruments=[killer], config=config), pytest.raises(WorkerCrashedError) as info:
        pipe(mod)
    assert killer.killed
    message = str(info.value)
    assert "died holding the results of pass" in message and "OnlyInWorkers" in message
    assert "making them again failed: RuntimeError: run in the parent" in message
    assert info.value.functions and all(name in mod for name in info.value.functions)
    assert module_bytes(mod) == given
    assert list(default_executor.keeper) == []


def _built_around_the_checks(where: str) -> function_pass:  # type: ignore[valid-type]
    """A pass that gives functions of 3 parameters a value the IR cannot encode, built around the checks
    (``msgspec.structs.replace``): a 2**70 attribute (``where="attrs"``) or a lone surrogate in the name of a
    parameter, in the body (``where="body"``)."""
    import msgspec

    @function_pass(opt_level=0, name="BuiltAroundTheChecks")
    def build(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
        if len(func.params) != 3:
            return func
        if where == "attrs":
            return msgspec.structs.replace(func, attrs={**func.attrs, "huge": 2**70})
        first = func.params[0]
        var = msgspec.structs.replace(first.var, name_hint="\ud800")
        return msgspec.structs.replace(func, params=[msgspec.structs.replace(first, var=var), *func.params[1:]])

    return build


def test_a_kept_result_the_ir_cannot_encode_is_an_error_naming_the_function_and_the_pass(backend: str) -> None:
    """Kept, a result is encoded only when it is fetched (here at the pipeline's end; its attributes, which the
    answer carries, in the wave): what cannot be encoded raises what the wave raises without keeping (the
    encoder's error, noted with the pass and the function). The caller's module stays."""
    mod = _module(seed=12)
    assert any(isinstance(f, relax.Function) and len(f.params) == 3 for f in mod.functions.values())
    given = module_bytes(mod)
    config = {"parpass.num_workers": 2, "parpass.parallel": "always", "parpass.fuse_passes": False, **KEEP}
    for where, error in (("body", UnicodeEncodeError), ("attrs", OverflowError)):
        with PassContext(config=config), pytest.raises(error) as info:
            Sequential([CanonicalizeBindings(), _built_around_the_checks(where), RemoveNoOp(), Simplify()])(mod)
        notes = [n for n in getattr(info.value, "__notes__", []) if n.startswith("parpass: raised in pass")]
        assert len(notes) == 1 and notes[0].startswith("parpass: raised in pass 'BuiltAroundTheChecks' on function")
    assert module_bytes(mod) == given
    assert list(default_executor.keeper) == []


def test_two_pipelines_keeping_results_in_two_threads_each_give_their_serial_bytes(backend: str) -> None:
    """Two threads run pipelines that keep their results on the same workers at once (fusion off, no
    instrument: every wave that can keeps), three times each: each output is its serial run's, and nothing
    is left kept."""
    import threading

    mods = [_module(seed=21), _module(seed=22)]
    with PassContext(config={"parpass.num_workers": 1}):
        expected = [module_bytes(_pipeline()(mod)) for mod in mods]
    config = {"parpass.num_workers": 2, "parpass.parallel": "always", "parpass.fuse_passes": False, **KEEP}
    outcomes: list[list[object]] = [[], []]
    before = default_executor.keeper.kept_total

    def work(k: int) -> None:
        for _ in range(3):
            try:
                with PassContext(config=config):
                    outcomes[k].append(module_bytes(_pipeline()(mods[k])))
            except BaseException as err:  # reported by the main thread
                outcomes[k].append(err)

    threads = [threading.Thread(target=work, args=(k,), daemon=True) for k in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not any(thread.is_alive() for thread in threads)
    for k in range(2):
        assert outcomes[k] == [expected[k]] * 3
    assert (default_executor.keeper.kept_total > before) == (backend == "loky")  # a cluster's workers keep nothing
    assert list(default_executor.keeper) == []


def test_a_chain_whose_results_a_reading_wave_fetches_stops_keeping(backend: str) -> None:
    """EliminateCommonSubexpr's results, taken by no wave before InferType (which reads callees) needs them all
    fetched: keeping them only added a round trip, and a second run does not keep them."""
    mod = _module(seed=9)
    pipe = Sequential([CanonicalizeBindings(), EliminateCommonSubexpr(), InferType(), RemoveNoOp()])
    default_executor.keeper.fetched_early.pop("EliminateCommonSubexpr", None)
    config = {"parpass.num_workers": 2, "parpass.parallel": "always", "parpass.fuse_passes": False, **KEEP}
    with PassContext(config=config):
        first = pipe(mod)
        learned = set(default_executor.keeper.fetched_early)
        second = pipe(mod)
    assert module_bytes(first) == module_bytes(second)
    if backend == "loky":
        assert "'EliminateCommonSubexpr'" in learned and "'CanonicalizeBindings'" not in learned


@pytest.mark.loky_only
def test_a_chain_that_stopped_keeping_tries_again_after_a_while() -> None:
    """What fetched a chain's results early may have been one run's: after RETRY_KEEPING_AFTER of its waves
    that keep nothing, the next one keeps again (and, fetched early again, stops again)."""
    from parpass.parallel.kept import RETRY_KEEPING_AFTER

    mod = _module(seed=9)
    pipe = Sequential([CanonicalizeBindings(), EliminateCommonSubexpr(), InferType(), RemoveNoOp()])
    keeper = default_executor.keeper
    config = {"parpass.num_workers": 2, "parpass.parallel": "always", "parpass.fuse_passes": False, **KEEP}
    label = "'EliminateCommonSubexpr'"
    outputs, left = [], []
    with PassContext(config=config):
        for _ in range(RETRY_KEEPING_AFTER + 2):
            outputs.append(module_bytes(pipe(mod)))
            left.append(keeper.fetched_early.get(label))
    assert all(out == outputs[0] for out in outputs)
    # learned on the first run; then one wave of it fewer to skip each run, until one keeps and learns again
    assert left == [RETRY_KEEPING_AFTER, *range(RETRY_KEEPING_AFTER - 1, 0, -1), None, RETRY_KEEPING_AFTER]


def test_keeping_again_counts_the_waves_that_keep_nothing() -> None:
    from parpass.parallel.kept import RETRY_KEEPING_AFTER, Keeper

    keeper = Keeper(lambda *args: None)
    keeper.fetched_early["X"] = RETRY_KEEPING_AFTER
    assert [keeper.keeps("X") for _ in range(RETRY_KEEPING_AFTER + 1)] == [False] * RETRY_KEEPING_AFTER + [True]
    assert "X" not in keeper.fetched_early and keeper.keeps("Y")


def test_a_pinned_function_is_never_stolen() -> None:
    """Seat 0 holds every function, two of them pinned (kept there, no bytes elsewhere): seat 1 steals only
    the others, and seat 0 runs the pinned ones first."""
    targets, sizes = [0, 1, 2, 3], [10, 10, 10, 10]
    pinned = [True, False, True, False]
    dispatcher = Dispatcher(targets, sizes, [0, 0, 0, 0], 2, pinned=pinned)
    stolen = dispatcher.next_chunk(1)
    assert stolen and not {0, 2} & set(stolen)
    handed = stolen + [i for chunk in iter(lambda: dispatcher.next_chunk(0), []) for i in chunk]
    assert sorted(handed) == targets
    alone = Dispatcher(targets, sizes, [0, 0, 0, 0], 2, pinned=[True] * 4)
    assert alone.next_chunk(1) == []  # nothing it may take


def test_a_wave_s_columns_mark_kept_only_the_results_a_worker_keeps() -> None:
    """Placing a wave: functions no store holds are kept only where the keeper says so; one merely not placed
    yet is not marked kept (else its chunk would count for nothing), and the columns are then left to the
    placing of the functions that lack a place."""
    from parpass.parallel.executor import _kept_columns
    from parpass.parallel.store import pack_locations

    live = ["/tmp/parpass-test-store"]
    assert _kept_columns([None, None, None], [0, 1, 2], live) == ([KEPT] * 3, [0] * 3, [0] * 3)
    assert _kept_columns([None, None, None], [1], live) is None
    placed = pack_locations(live[0], [0, 10], [10, 5])
    assert _kept_columns([placed[0], None, placed[1]], [1], live) == ([0, KEPT, 0], [0, 0, 10], [10, 0, 5])
    assert _kept_columns([None, placed[0], None], [0], live) is None  # the last has no place yet


def test_the_pipeline_s_end_runs_what_was_registered_once_and_only_inside_one() -> None:
    calls: list[str] = []

    def note() -> None:
        calls.append("end")

    assert at_pipeline_end(note) is False  # no pipeline runs

    @function_pass(opt_level=0, name="Registers")
    def registers(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
        assert at_pipeline_end(note) is True
        assert calls == []  # not before the end
        return func

    mod = _module(seed=10)
    with PassContext(config={"parpass.num_workers": 1}):
        Sequential([registers, registers])(mod)
    assert calls == ["end"]

    def fails() -> None:
        raise RuntimeError("from the end")

    @function_pass(opt_level=0, name="Breaks")
    def breaks(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
        at_pipeline_end(fails)
        raise ValueError("the pass's own")

    with PassContext(config={"parpass.num_workers": 1}), pytest.raises(ValueError, match="the pass's own"):
        Sequential([breaks])(mod)  # the pipeline's error goes on; the end's is dropped
