"""The parallel executor: function-level passes fanned out to worker processes.

:class:`ParallelExecutor` implements the pass infrastructure's
:class:`~parpass.transform.executor.FunctionPassExecutor`. For each wave (one
function-level pass, or a fused chain of them) it decides whether to run
in-process or in workers, ships the work as msgspec bytes through a wave file,
merges the results back by module index, replays in the parent, in module
order, every instrument callback and every piece of output the work produced,
and reports errors as a serial run would. The serial run is the
specification: any worker count gives the same module bytes and the same
instrument trace.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import logging
import operator
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import repeat
from operator import add, is_
from typing import Any, NamedTuple, NoReturn, cast

import cloudpickle
import msgspec

from parpass.errors import (
    IRError,
    IRFormatError,
    ParallelExecutionError,
    PassShippingError,
    PassTimeoutError,
    RemotePassError,
    WorkerCrashedError,
    add_note,
)
from parpass.instrument.base import may_veto
from parpass.ir.module import IRModule, ModuleColumns
from parpass.ir.node import AttrValue, BaseFunc, frozen_attrs
from parpass.ir.relax import Function
from parpass.ir.serialization import encode_function, node_problem
from parpass.ir.tir import PrimFunc
from parpass.parallel import backend as backend_mod
from parpass.parallel import load as load_mod
from parpass.parallel.capture import Emission, replay
from parpass.parallel.config import ParallelConfig
from parpass.parallel.cost import DEFAULT_LATENCY, DEFAULT_OVERHEAD, CostModel
from parpass.parallel.crew import CrewLike, CrewLost
from parpass.parallel.error_chain import unpickled_chain
from parpass.parallel.kept import FetchingCrew, Keeper, token_pid
from parpass.parallel.lineage import Lineage
from parpass.parallel.pickling import dumps_for_workers
from parpass.parallel.protocol import ChunkDone, TaskError, WorkerFailure
from parpass.parallel.reproducer import write_reproducer
from parpass.parallel.schedule import CHUNK_SHARE, CLUSTER_CHUNK_SHARE, Dispatcher
from parpass.parallel.store import Location, location_store, pack_locations, unpack_locations
from parpass.parallel.wave import KEPT, WaveHeader, scratch_dir
from parpass.parallel.worker import pack_passes
from parpass.transform.analysis import FunctionAnalysis
from parpass.transform.context import PassContext, at_pipeline_end, pipeline_progress
from parpass.transform.executor import ChainObserver, InlineExecutor, StageTiming, target_function, view_reason
from parpass.transform.passes import FunctionLevelPass, attach_pass_note, visited_positions
from parpass.transform.statistics import add_counts

log = logging.getLogger("parpass.parallel")

#: The function class of a result whose class or attributes changed, by whether the worker says it is a PrimFunc.
_KINDS: tuple[type[BaseFunc], type[BaseFunc]] = (Function, PrimFunc)
#: How often the parent checks the progress slots for timeouts while it waits, seconds.
_POLL = 0.05
#: Chunks handed to a seat ahead of its answers, so that it never waits for the parent between chunks.
_IN_FLIGHT = 2
#: other functions a wave's failing pass also failed on that its error's note names (a count for the rest)
_OTHER_ERRORS_SHOWN = 10
#: A chunk carries at least this many of the backend's chunk round trips of work (see CostModel.latency).
_LATENCY_MULTIPLE = 8
#: Digests whose holder the executor remembers before it forgets those of functions no longer in the module
#: of the last wave (only a hint): at least this many, and this many per function of that module. A map
#: that grew without bound (over many pipeline runs) made every lookup a cache miss.
_OWNERS_MIN = 1 << 14
_OWNERS_PER_FUNCTION = 4
#: Kinds of chains whose last targets the executor remembers at most (see ParallelExecutor._targets).
_VISITED_KEPT = 16
#: Function sizes the executor remembers by name (see ParallelExecutor._sizes) before it starts afresh.
_SIZES_KEPT = 1 << 20
#: What an in-process run of 'auto' learns its cost into: the cost model, the chain's bytes, and whether
#: they are mostly guessed (see CostModel.record_rough).
_Learning = tuple[CostModel, int, bool]
#: A function's class and attributes (see IRModule.kind_and_attrs).
_Head = tuple[type[BaseFunc], Mapping[str, AttrValue]]
#: Smallest size a worker's result store reaches before it starts a new one (see parpass.parallel.store).
_STORE_MIN = 64 << 20
#: In-process seconds after which a wave first asks whether to move the rest of it to workers, and how
#: often after that (see ParallelExecutor._probed).
_PROBE_FIRST = 0.005
_PROBE_EVERY = 0.005
#: Functions a wave runs in-process before their rate is trusted (a pass's first calls pay for warming up).
_PROBE_MIN_FUNCTIONS = 8
#: A probe reads the clock every few functions while they are this fast together, up to this many apart
#: (see _Probe.run_until).
_CLOCK_EVERY = 0.0005
_CLOCK_STRIDE_MAX = 16
#: In-process seconds of work left below which the rest of a wave is not worth moving to workers.
_SHIP_MIN_SECONDS = 0.02
#: Why a single pass whose learned rate put the module below what could pay for moving ran here (_looks_light).
_LIGHT_REASON = "estimated faster in-process (probed: a light pass)"
#: Why a wave that the workers would run faster ran in-process: they are not started, and it does not earn that.
_UNSTARTED_REASON = "estimated faster in-process (the workers are not started: this wave does not pay for that)"
#: Seconds a run must expect to save before it starts the workers, with as many workers as usable cores:
#: their start-up (about half a second of CPU each here) competes with this process, and a first run on
#: this 2-core machine that started them to save ~0.6 s came out 0.3 s slower.
_START_COST = 1.0
#: In-process seconds a wave's first pass runs before its rate may start the workers (its first calls
#: pay for imports and warming up: a rate taken earlier overstates the work left).
_START_TRUST = 0.1
#: How much slower a function's work is in a worker than here (decoding what it lacks, encoding results).
_WORKER_FACTOR = 1.25
#: The rest of a wave moves to workers only when that is estimated at most this share of in-process.
_SHIP_MARGIN = 0.85
#: How many times a wave runs again on a new pool after losing its pool to a fault that is not its own
#: (a worker that died idle, another thread's crash); after that it runs in-process.
_RETRIES = 3


class WaveStats(msgspec.Struct):
    """What the executor measured of one wave (the last one is kept for benchmarks and tests)."""

    passes: tuple[str, ...]
    parallel: bool
    reason: str
    functions: int = 0
    chunks: int = 0
    nbytes: int = 0
    wall: float = 0.0
    worker_seconds: float = 0.0
    #: in a parallel wave, the parent's own work: its CPU time (the calling thread's) over the wave, waits
    #: not counted, nor a probe's pass calls; in an in-process one, the run's wall time
    parent_seconds: float = 0.0
    #: functions the workers found resident, and decoded from the wave's bytes
    hits: int = 0
    misses: int = 0
    #: functions a worker took from another's queue to keep busy
    stolen: int = 0
    #: in a parallel wave, the part of ``worker_seconds`` the passes' calls took (wall, summed over the
    #: workers); the rest is the executor's own work there (reading, decoding, encoding and storing functions)
    pass_seconds: float = 0.0
    #: of that work, the results: encoding the functions the chain changed, digesting, storing and keeping
    #: them resident, summed over the workers
    result_seconds: float = 0.0
    #: in a parallel wave, the workers' CPU time over their chunks, summed over them (``worker_seconds`` less
    #: their waits): with ``parent_seconds``, what the wave cost the machine's cores
    worker_cpu_seconds: float = 0.0


def _others_running() -> int:
    """:func:`parpass.parallel.load.others_running`, looked up when called (a test may stand in for it)."""
    return load_mod.others_running()


class ParallelExecutor:
    """Runs function-level passes in worker processes when that pays; in-process otherwise."""

    def __init__(self) -> None:
        #: what was learned per backend (by ``parpass.scheduler``: "" for local workers), each its own
        #: latency, transfer rate and worker speed, and the in-process costs learned beside each
        self.costs: dict[str, CostModel] = {}
        self.inline = InlineExecutor()
        self.last: WaveStats | None = None
        self.history: list[WaveStats] = []
        self._warned: set[str] = set()
        self._looks_up: set[str] = set()
        #: chains whose workers needed functions their wave left out for other workers to hold (see publish)
        self._reads_others: set[tuple[str, ...]] = set()
        self._bytes_per_function = 2000.0  # encoded size of a function, averaged over the last wave
        #: the last encoded size seen of each function, by name: what a function held only decoded is estimated
        #: at, so that a rate learned on it is on the same basis as one learned on its bytes
        self._sizes: dict[str, int] = {}
        self._lock = threading.Lock()
        self._pool_started = False  # this executor asked for workers once: later waves need not earn it
        self._inline_seconds = 0.0  # in-process work of the chains 'auto' probed and kept here
        #: per kinds of a chain (see _visit_key): the heads of the last module it ran on, and its targets there
        self._visited: dict[tuple[type[BaseFunc], ...], tuple[list[_Head], list[int]]] = {}
        #: the results workers keep for a pipeline's next wave (see parpass.parallel.kept)
        self.keeper = Keeper(_open_crew)

    def forget(self) -> None:
        """Drop everything learned so far (pass costs, pool overhead, passes that look up others, the in-process
        work that earns the workers' start); whether the workers were started once stays."""
        with self._lock:
            self.costs.clear()
            self._looks_up.clear()
            self._reads_others.clear()
            self._bytes_per_function = 2000.0
            self._sizes.clear()
            self._inline_seconds = 0.0
            self._visited.clear()
            self.history.clear()
            self.last = None

    @property
    def cost(self) -> CostModel:
        """What was learned on the local workers (see :meth:`cost_of`)."""
        return self.cost_of("")

    def cost_of(self, scheduler: str) -> CostModel:
        """What was learned on the backend of ``scheduler`` (config ``parpass.scheduler``; "" local workers):
        a cluster's round trip costs milliseconds where local workers' costs a tenth of one, and its workers
        need not be as fast as this machine's."""
        found = self.costs.get(scheduler)  # several times a wave: the lock only to make one
        if found is None:
            backend = backend_mod.backend_for(scheduler)
            # what the backend's round trips are assumed to cost until measured (a backend of one's own may
            # not say: then a local crew's)
            overhead = getattr(backend, "assumed_overhead", DEFAULT_OVERHEAD)
            latency = getattr(backend, "assumed_latency", DEFAULT_LATENCY)
            here = getattr(backend, "workers_on_this_machine", True)
            # workers on this machine share its cores with whatever else runs on it
            cores, load = (backend_mod.usable_cores(), _others_running) if here else (0, None)
            model = CostModel(overhead, latency, workers_on_this_machine=here, load=load, cores=cores)
            with self._lock:
                found = self.costs.setdefault(scheduler, model)
        return found

    def start_workers(self, ctx: PassContext) -> bool:
        """Start ``ctx``'s workers now, without waiting for them, for a caller that knows work for them is
        coming (a big module read for a pipeline): the first wave need not then earn their start-up.

        False, starting nothing, where ``ctx`` keeps function-level passes in this process.
        """
        cfg = ParallelConfig.of(ctx)
        if _kept_in_process(ctx, cfg) is not None:
            return False
        self._pool_started = True
        backend_mod.backend_for(cfg.scheduler).ready(cfg.num_workers)
        return True

    # ------------------------------------------------------------ decision

    def run(
        self,
        passes: Sequence[FunctionLevelPass],
        mod: IRModule,
        ctx: PassContext,
        observer: ChainObserver | None = None,
    ) -> IRModule:
        out = mod
        offset = 0
        for segment in self._segments(passes):
            staged = None if observer is None else _Offset(observer, offset)
            out = self._run_chain(segment, out, ctx, staged)
            offset += len(segment)
        return out

    def _segments(self, passes: Sequence[FunctionLevelPass]) -> list[list[FunctionLevelPass]]:
        """The chain cut before every pass seen looking up functions an earlier pass of a fused wave changes,
        or saying it does (:attr:`~parpass.transform.passes.FunctionLevelPass.reads_other_functions`).

        In a fused wave, such a lookup makes the worker run the earlier passes on
        the looked-up function again (the result is the same, the work is not
        free); the executor notices it and ships those passes in waves of their own.
        """
        segments: list[list[FunctionLevelPass]] = [[]]
        for index, p in enumerate(passes):
            if index and (p.reads_other_functions or p.info.name in self._looks_up):
                segments.append([])
            segments[-1].append(p)
        return segments

    def _run_chain(
        self, passes: Sequence[FunctionLevelPass], mod: IRModule, ctx: PassContext, observer: ChainObserver | None
    ) -> IRModule:
        names = tuple(p.info.name for p in passes)
        cfg = ParallelConfig.of(ctx)
        forced = _inline_reason(ctx, cfg, names)
        if forced is not None:
            return self._run_inline(passes, mod, ctx, observer, names, forced)
        auto = cfg.mode == "auto" and cfg.timeout <= 0  # only a worker can be stopped at a timeout: ship then
        cost = self.cost_of(cfg.scheduler)
        known = auto and cost.knows(names)
        if auto and (not known or self._looks_light(cost, passes, mod, cfg)):
            # Nothing learned to decide on, or a pass whose rate puts the whole module below what could pay for
            # moving it (see _may_move): the wave starts here as an in-process run would, and reads what it
            # would ship only once it has run long enough for moving to pay (reading it costs ~1 us a function:
            # a light pass ran 0.8x of in-process when it was read first).
            if cfg.strict:
                self._pack(passes, names, cfg)  # a pass that cannot be pickled fails before anything runs
            return self._probed(passes, mod, ctx, observer, cfg, names, None, light=known)
        sized = self._sized(passes, mod, time.thread_time(), estimate=auto)
        if not sized.table.indices:
            return self._run_inline(passes, mod, ctx, observer, names, "no target functions")
        # With parpass.strict a pass that cannot be pickled fails wherever it would run; else the chain is
        # pickled only once it may go to the workers.
        pickled = self._pack(passes, names, cfg) if cfg.strict else None
        if auto:
            # Decide on the amount of IR without encoding anything just to measure it.
            reason = self._keeps_in_process(cost, names, sized, cfg)
            if reason is not None:
                return self._decided_in_process(passes, mod, ctx, observer, names, reason, sized, cost)
            self._pool_started = True  # what this chain cost says the workers pay: they may start
            if not backend_mod.backend_for(cfg.scheduler).ready(cfg.num_workers):
                return self._probed(passes, mod, ctx, observer, cfg, names, sized)
        if pickled is None:
            pickled = self._pack(passes, names, cfg)
            if pickled is None:
                return self._run_inline(passes, mod, ctx, observer, names, "pass cannot be pickled")
        return self._run_parallel(passes, pickled, mod, ctx, observer, cfg, sized, None)

    def _keeps_in_process(
        self, cost: CostModel, names: tuple[str, ...], sized: _Sized, cfg: ParallelConfig
    ) -> str | None:
        """Why 'auto' runs the wave ``sized`` in-process; None: it ships it."""
        if not cost.should_parallelize(
            names, sized.estimate, cfg.num_workers, cfg.inline_below, sized.encoded, sized.unencoded
        ):
            return "estimated faster in-process"
        if self._workers_started(cfg):
            return None
        # What this wave would save must pay for starting the workers too (a second of CPU that slows this run:
        # a 60 ms pass's second run took 2.6x its in-process time while they started).
        estimates = cost.estimates(names, sized.estimate, cfg.num_workers, sized.encoded, sized.unencoded)
        return None if self._earns_start(*estimates, cfg) else _UNSTARTED_REASON

    def _decided_in_process(
        self,
        passes: Sequence[FunctionLevelPass],
        mod: IRModule,
        ctx: PassContext,
        observer: ChainObserver | None,
        names: tuple[str, ...],
        reason: str,
        sized: _Sized,
        cost: CostModel,
    ) -> IRModule:
        """The wave ``sized`` run in-process as 'auto' decided for ``reason``, its cost learned; the targets
        held as bytes are decoded (and timed) first."""
        began = time.perf_counter()
        table = sized.table
        pending = list(map(table.names.__getitem__, table.indices)) if sized.encoded else ()
        learn = (cost, sized.estimate, sized.rough)
        out = self._run_inline(passes, mod, ctx, observer, names, reason, learn, pending)
        if reason == _UNSTARTED_REASON:  # work the workers would have done faster: it counts towards their start
            self._inline_seconds += time.perf_counter() - began
        return out

    def _looks_light(
        self, cost: CostModel, passes: Sequence[FunctionLevelPass], mod: IRModule, cfg: ParallelConfig
    ) -> bool:
        """Whether a single pass's learned rate puts every function of ``mod`` (at the last wave's size a
        function) below what could pay for moving it to workers (see :meth:`_may_move`)."""
        if len(passes) != 1:
            return False
        seconds = cost.inline_seconds([passes[0].info.name], len(mod) * self._bytes_per_function)
        return seconds is not None and not self._may_move(seconds, cfg)

    def _may_move(self, seconds: float, cfg: ParallelConfig) -> bool:
        """Whether moving ``seconds`` of in-process work to workers could pay at all: it is worth moving, and
        the workers are started, or it could pay for their start were the workers' time nothing."""
        if seconds < _SHIP_MIN_SECONDS:
            return False
        return self._workers_started(cfg) or self._earns_start(seconds, 0.0, cfg)

    def _sized(
        self, passes: Sequence[FunctionLevelPass], mod: IRModule, cpu_start: float, estimate: bool = True
    ) -> _Sized:
        """The chain's wave as read from ``mod`` (see :meth:`_targets`) and, with ``estimate`` (what only
        ``auto`` decides on), its estimated bytes (see :meth:`_estimated_bytes`; else none);
        ``cpu_start``: this thread's CPU time when the wave began."""
        with _collection_paused():
            table = self._targets(passes, mod, cpu_start)
        if not estimate:
            return _Sized(table, 0, 0, 0, False)
        total, encoded, unencoded, guessed = self._estimated_bytes(table)
        # mostly sizes never seen: a rate learned on them is a rough one
        return _Sized(table, total, encoded, unencoded, 2 * guessed > total)

    def _pack(self, passes: Sequence[FunctionLevelPass], names: tuple[str, ...], cfg: ParallelConfig) -> bytes | None:
        """The chain pickled for the workers; None, having warned, for a pass that cannot be (an error with
        ``parpass.strict``)."""
        try:
            return pack_passes(passes)
        except Exception as err:
            message = f"pass {names[0] if len(names) == 1 else names!r} cannot be sent to worker processes: {err}"
            if cfg.strict:
                raise PassShippingError(message + " (config parpass.strict is set)") from err
            key = "/".join(names)
            if key not in self._warned:
                self._warned.add(key)
                warnings.warn(message + "; running it in-process", RuntimeWarning, stacklevel=3)
            _warn_unenforced_timeout(cfg, names, "pass cannot be pickled")
            return None

    def _targets(self, passes: Sequence[FunctionLevelPass], mod: IRModule, cpu_start: float) -> _Table:
        """The functions any pass of the chain may visit (kind and SkipOptimization read without decoding);
        ``cpu_start``: this thread's CPU time when the wave began.

        The heads are read once per wave; the targets of a chain of the same kinds are taken again from the
        last wave that had the same heads (a pipeline's next pass of the same kind, mostly).
        """
        t0 = time.perf_counter()
        columns = mod.columns()
        heads = columns.heads
        key = _visit_key(passes)
        known = self._visited.get(key) if key is not None else None
        # the same head objects (a wave's results keep the heads they came in with): equal heads that are other
        # objects (a module read again) take longer to compare than their targets take to pick
        if known is not None and len(known[0]) == len(heads) and all(map(is_, known[0], heads)):
            indices = known[1]
        else:
            indices = _visited(passes, heads, key)
        if key is not None:
            if len(self._visited) >= _VISITED_KEPT:
                self._visited.clear()
            self._visited[key] = (heads, indices)  # these heads: the next wave's are these very objects
        named = _named_targets(passes)
        if named is not None:
            names = columns.names
            indices = [i for i in indices if names[i] in named]
        return _Table(columns, indices, time.perf_counter() - t0, cpu_start)

    def _targets_hold(self, heads: list[_Head], out: IRModule) -> None:
        """The wave whose input had ``heads`` changed no function's class or ``SkipOptimization``: the targets
        taken on those heads (by kinds, see :meth:`_targets`) are the targets on ``out``'s, whatever other
        attributes changed. Taken again on them, they would cost a read of every new head."""
        after = out.columns().heads
        for key, (before, indices) in list(self._visited.items()):
            if before is heads:
                self._visited[key] = (after, indices)

    def _probed(
        self,
        passes: Sequence[FunctionLevelPass],
        mod: IRModule,
        ctx: PassContext,
        observer: ChainObserver | None,
        cfg: ParallelConfig,
        names: tuple[str, ...],
        sized: _Sized | None,
        light: bool = False,
    ) -> IRModule:
        """Run the chain's first pass in-process, in module order; start the workers when the work it shows
        pays for their start-up, and move the rest of the chain to them once they are ready and that pays.

        ``sized`` is the wave as read (see :meth:`_sized`); None for a chain not known
        yet, or a ``light`` one (a single pass whose learned rate puts the module below what could pay for moving):
        it is read at the first check, so that a wave over before it costs what in-process costs.
        This is how a chain the cost model does not know yet (or a pool not started yet) costs at most a
        few checks more than in-process: nothing is decided on a guess. The serial order holds: the first
        pass's first functions run here, before anything the workers run.
        """
        cpu_start = time.thread_time()
        p0 = passes[0]
        view = mod.read_only_view(view_reason(p0.info.name))
        first = p0.targets(mod)
        single = len(passes) == 1  # the first pass's functions are the wave's: their rate projects its rest
        fallback = int(sized.estimate / max(1, len(sized.table.indices)) if sized else self._bytes_per_function)
        sizes = self._sizes
        probe = _Probe(first)
        start, cpu = time.perf_counter(), time.process_time()
        check = start + _PROBE_FIRST
        shipped = asked = False
        if observer is not None:
            observer.before_stage(0)
        try:
            ran = 0
            while ran < len(first):
                ran = probe.run_until(p0, mod, view, ctx, sizes, fallback, check)
                if not _PROBE_MIN_FUNCTIONS <= ran < len(first):
                    continue  # the rate of its first calls is not trusted yet, or the wave is over
                now = time.perf_counter()
                elapsed = now - start
                if sized is None:  # the pass's time is counted without the reading's
                    left = elapsed * (len(first) / ran - 1) if single else None
                    sized, wall_read, cpu_read = self._read_by_probe(passes, mod, cpu_start, left, cfg)
                    start, cpu = start + wall_read, cpu + cpu_read
                check = time.perf_counter() + _PROBE_EVERY
                if sized is None or not self._worth_moving(names, elapsed, probe.done_bytes, sized.estimate, cfg):
                    continue
                moving = self._move_now(probe, passes, names, cfg)
                if moving:
                    shipped = True
                    break
                asked = moving is not None  # None: the chain cannot be pickled (warned): it all stays here
                check = check if asked else float("inf")
        except BaseException as err:
            if observer is not None:
                observer.stage_failed(0, err)
            raise
        probe.timing = StageTiming(time.perf_counter() - start, time.process_time() - cpu, in_caller=True)
        self._inline_seconds += probe.timing.wall
        done = probe.done_bytes
        probe.sized = sized
        # What the first pass cost here, moved or not: a chain of it alone need not be run in-process once
        # more only to learn that (see CostModel.should_parallelize).
        cost = self.cost_of(cfg.scheduler)
        cost.record_decode(probe.decode_seconds, probe.decoded_bytes)
        record = cost.record_rough if shipped or 2 * probe.guessed > done else cost.record_inline  # a few, or guessed
        record(names[:1], probe.timing.wall - probe.decode_seconds, int(done))
        if shipped:  # a probe that moves read the wave
            assert probe.pickled is not None and probe.sized is not None
            return self._run_parallel(passes, probe.pickled, mod, ctx, observer, cfg, probe.sized, probe)
        reason = _LIGHT_REASON if light else "ran in-process (too little work to move)"
        return self._finish_in_process(passes, names, mod, ctx, observer, probe, cfg, asked, cpu_start, reason)

    def _read_by_probe(
        self,
        passes: Sequence[FunctionLevelPass],
        mod: IRModule,
        cpu_start: float,
        left: float | None,
        cfg: ParallelConfig,
    ) -> tuple[_Sized | None, float, float]:
        """The wave as read at a probe's check (see :meth:`_sized`), and the wall and CPU seconds reading it
        took; None, nothing read, where ``left`` (of a single-pass wave, the in-process seconds the pass's own
        rate leaves) could not pay for moving (see :meth:`_may_move`; ~1 us a function is saved: the reading
        of a light pass on a big module cost a first run as much as a fifth of its time)."""
        if left is not None and not self._may_move(left, cfg):
            return None, 0.0, 0.0
        wall, cpu = time.perf_counter(), time.process_time()
        sized = self._sized(passes, mod, cpu_start)
        return sized, time.perf_counter() - wall, time.process_time() - cpu

    def _move_now(
        self, probe: _Probe, passes: Sequence[FunctionLevelPass], names: tuple[str, ...], cfg: ParallelConfig
    ) -> bool | None:
        """Whether a probe that found moving the rest worth it moves now: True once the workers are ready
        (asked for here, not waited for) and the chain is pickled into ``probe``; None for a chain that cannot
        be pickled (the warning given)."""
        self._pool_started = True
        if not backend_mod.backend_for(cfg.scheduler).ready(cfg.num_workers):  # starts the workers without waiting
            return False
        probe.pickled = self._pack(passes, names, cfg)
        return None if probe.pickled is None else True

    def _finish_in_process(
        self,
        passes: Sequence[FunctionLevelPass],
        names: tuple[str, ...],
        mod: IRModule,
        ctx: PassContext,
        observer: ChainObserver | None,
        probe: _Probe,
        cfg: ParallelConfig,
        asked: bool,
        cpu_start: float,
        reason: str,
    ) -> IRModule:
        """After the first pass of the chain ran here on every function (``probe``): its result, and the rest
        of the chain run (in the workers if they were ``asked`` for and it pays, else here); ``cpu_start``:
        this thread's CPU time when the wave began; ``reason``: why it ran here, for its wave's statistics.

        A chain that ran here whole is learned whole: run again, it is decided at once instead of probed
        again. One whose time, shared among the workers, would save less than a round trip to them could
        not have gained there: unless the probe read the wave already, it is not read to learn that (run
        again, it starts here again, at no more cost than in-process; reading it costs a first run of a
        light chain on a small module ~3% more)."""
        if observer is not None:
            observer.after_stage(0, probe.timing)
        out = mod.copy()
        for name, new in probe.changed.items():
            out[name] = new
        wall = probe.timing.wall
        self._remember(WaveStats(names[:1], False, reason, wall=wall, parent_seconds=wall))
        if len(passes) == 1:
            return out
        rest = None if observer is None else _Offset(observer, 1)
        if asked:  # the workers were asked for and may be ready by now: the rest of the chain decides anew
            return self._run_chain(passes[1:], out, ctx, rest)
        began = time.perf_counter()
        out = self._run_inline(passes[1:], out, ctx, rest, names[1:], "after the first pass ran in-process")
        seconds = time.perf_counter() - began
        self._inline_seconds += seconds
        cost = self.cost_of(cfg.scheduler)
        took = wall - probe.decode_seconds + seconds
        sized = probe.sized
        if sized is None and took * (1 - 1 / cfg.num_workers) >= cost.overhead:  # workers: at best took / n
            sized = self._sized(passes, mod, cpu_start)
        if sized is not None:
            (cost.record_rough if sized.rough else cost.record_inline)(names, took, sized.estimate)
        return out

    def _worth_moving(
        self, names: tuple[str, ...], elapsed: float, done: float, estimate: int, cfg: ParallelConfig
    ) -> bool:
        """Whether the rest of a probed wave should move to the workers, ``elapsed`` seconds and ``done`` bytes in."""
        inline, parallel = self._rest(names, elapsed, done, estimate, cfg)
        if inline < _SHIP_MIN_SECONDS or parallel >= _SHIP_MARGIN * inline:
            return False  # not worth moving (nor starting workers for)
        # starting workers must not cost more CPU than this run has shown it would save; workers someone
        # already started (a warm-up, another executor) cost nothing more
        if self._workers_started(cfg):
            return True
        return elapsed >= _START_TRUST and self._earns_start(inline, parallel, cfg)

    def _workers_started(self, cfg: ParallelConfig) -> bool:
        """Whether the workers need not earn their start: this executor asked for them once, or they are
        started or starting already (a warm-up, another executor)."""
        return self._pool_started or backend_mod.backend_for(cfg.scheduler).started(cfg.num_workers)

    def _earns_start(self, inline: float, parallel: float, cfg: ParallelConfig) -> bool:
        """Whether starting the workers pays: what moving the rest of this wave saves, plus what the in-process
        work still to come would save, covers their start. Within a pipeline (a Sequential), what is to come is
        its passes left at the rate of those run so far; elsewhere, as much as this process has done already.

        A start late in a pipeline costs its CPU for little left to move: under ``WellFormedInstrument``, whose
        checks made this process's work grow pass after pass, the workers started two passes from the end
        and the first run took 1.07x its in-process time. The pipeline's own callbacks are part of it: its
        check of the whole input, before the first pass, now starts them."""
        progress = pipeline_progress()
        if progress is None:
            to_come = self._inline_seconds
        else:
            elapsed, done, left = progress
            to_come = elapsed / max(done, 1) * left
        again = to_come * max(1 - _WORKER_FACTOR / cfg.num_workers, 0.0)
        return inline - parallel + again >= _START_COST * cfg.num_workers / backend_mod.usable_cores()

    def _rest(
        self, names: tuple[str, ...], elapsed: float, done: float, total: float, cfg: ParallelConfig
    ) -> tuple[float, float]:
        """The chain's remaining work, at the rate its first functions showed: estimated (in-process,
        parallel) seconds."""
        rate = elapsed / max(done, 1.0)  # seconds per byte of the first pass, here
        cost = self.cost_of(cfg.scheduler)
        others = cost.others()
        known = cost.estimates(names, int(total), cfg.num_workers, others=others)[0] / max(total, 1.0)
        chain_rate = max(rate * len(names), known) if cost.knows(names) else rate * len(names)
        left = max(total - done, 0.0)
        # Moving leaves to the workers the whole chain on the functions not reached yet, and its later passes
        # on those the first pass ran on here (they take up from its results): in bytes of whole-chain work,
        rest = left + done * (len(names) - 1) / len(names)
        inline = chain_rate * rest
        parallel = cost.measured_parallel(names, rest, cfg.num_workers, others)
        if parallel is None:
            shipped = cost.ship_rate * (left + done if len(names) > 1 else left)
            parallel = cost.overhead + shipped + _WORKER_FACTOR * inline / cost.speed(cfg.num_workers, others)
        return inline, parallel

    def _estimated_bytes(self, table: _Table) -> tuple[int, int, int, int]:
        """Encoded size of the table's targets (the held bytes where there are some, else the size last seen
        of a function of that name, else the average of the last wave), the size of those held only as bytes,
        which an in-process run must decode first, of those held only decoded, which a parallel run must
        encode first (and its workers decode), and of those guessed (the average: never seen encoded)."""
        names, _, sizes, decoded, _, _ = table.columns
        seen = self._sizes
        if len(seen) > _SIZES_KEPT:
            seen.clear()
        fallback = int(self._bytes_per_function)
        total = encoded = unencoded = guessed = 0
        for index in table.indices:
            size = sizes[index]
            if size is None:
                size = seen.get(names[index], 0)
                if not size:
                    size = fallback
                    guessed += size
                total += size
                unencoded += size
            else:
                seen[names[index]] = size
                total += size
                if not decoded[index]:
                    encoded += size
        return total, encoded, unencoded, guessed

    def _run_inline(
        self,
        passes: Sequence[FunctionLevelPass],
        mod: IRModule,
        ctx: PassContext,
        observer: ChainObserver | None,
        names: tuple[str, ...],
        reason: str,
        learn: _Learning | None = None,
        targets: Sequence[str] = (),
    ) -> IRModule:
        """Run the chain in this process; with ``learn`` (a decision of 'auto'), learn what it cost.

        The functions among ``targets`` still held as bytes (results of an earlier
        wave in workers) are decoded first and timed on their own, so that the
        pass's rate is learned without the decoding, and the decoding's without the pass.
        """
        start = time.perf_counter()
        pending = [name for name in targets if not mod.is_decoded(name)]
        for count, name in enumerate(pending):
            try:
                mod[name]  # decoded into the module's slot, as the run would
            except IRFormatError:  # bad bytes: the run meets them in module order, as a serial run would
                del pending[count:]
                break
        decoded = time.perf_counter()
        result = self.inline.run(passes, mod, ctx, observer)
        end = time.perf_counter()
        nbytes = 0
        if learn is not None:
            cost, nbytes, rough = learn
            if not backend_mod.in_worker():
                if pending:
                    cost.record_decode(decoded - start, sum(mod.cached_size(name) or 0 for name in pending))
                (cost.record_rough if rough else cost.record_inline)(names, end - decoded, nbytes)
        wall = end - start
        self._remember(WaveStats(names, False, reason, nbytes=nbytes, wall=wall, parent_seconds=wall))
        return result

    def _remember(self, stats: WaveStats) -> None:
        with self._lock:
            self.last = stats
            self.history.append(stats)
            del self.history[:-256]

    # ------------------------------------------------------------ the wave

    def _run_parallel(
        self,
        passes: Sequence[FunctionLevelPass],
        pickled: bytes,
        mod: IRModule,
        ctx: PassContext,
        observer: ChainObserver | None,
        cfg: ParallelConfig,
        sized: _Sized,
        probe: _Probe | None,
    ) -> IRModule:
        """Run the wave ``sized`` in workers; ``probe``, if given, is what ran of it in-process first (the first
        pass on the first functions), which the workers take up from."""
        names = tuple(p.info.name for p in passes)
        self._fetch_unless_taken(names, passes, cfg)
        with _collection_paused():
            shipped = _shipped(mod, names, sized.table, sized.unencoded)
        self._bytes_per_function = sum(shipped.sizes) / len(shipped.sizes)
        backend = backend_mod.backend_for(cfg.scheduler)
        cost = self.cost_of(cfg.scheduler)
        self._pool_started = True
        start = time.perf_counter()
        indices, sizes, all_names = shipped.indices, shipped.sizes, shipped.names
        with _collection_paused():
            wave = self._wave_input(pickled, mod, ctx, cfg, shipped, probe)
        setup = time.perf_counter() - start
        waited = 0.0
        starting = 0.0  # waiting for the workers to start: not what the wave costs once they run
        for _ in range(_RETRIES + 1):
            try:
                asked_at = time.perf_counter()
                with backend.crew(cfg.num_workers) as crew, _collection_paused():
                    began = time.perf_counter()
                    starting += began - asked_at
                    run = self._attempt(crew, wave, indices, sizes, cfg, names, mod, ctx, passes)
                    waited = time.perf_counter() - began
                if run.void is None:
                    break
                # (out of the crew's block: a failure there ends its workers, and with them what they keep)
                self._fetch_for_retry(run.void, names, cfg)
            except _LostElsewhere as lost:
                log.info("pass %s: %s; running the wave again on a new crew", _label(names), lost)
        else:
            # The pool kept dying under this wave through faults of other work: the serial run is the
            # specification, and none of this wave's functions killed a worker.
            log.warning("pass %s: worker pool lost %d times to other work; in-process now", _label(names), _RETRIES + 1)
            return self._run_inline(passes, mod, ctx, observer, names, "worker pool lost to other work")
        results = [done for _, done in run.answers]
        for stage, p in enumerate(passes):
            if any(stage < len(r.recomputed) and r.recomputed[stage] for r in results):
                self._looks_up.add(p.info.name)
        nbytes = sum(sizes)
        busy = sum(r.seconds for r in results)
        merge_start = time.perf_counter()
        if probe is not None and observer is not None:
            observer = _AfterProbe(observer, probe.timing)
        try:
            with _collection_paused():
                kept_as = self._kept_as(names, cfg, passes, ctx, mod, wave)
                out = self._merge(run, mod, shipped.heads, probe, wave, kept_as)
            if probe is None and all(r.heads_keep_targets for r in results):
                self._targets_hold(shipped.heads, out)
            _hand_values(results, passes, all_names)
            self._replay_and_raise(results, passes, all_names, mod, ctx, cfg, observer)
            if probe is None:  # a whole wave in workers: what it took, load included, decides the next
                taken = time.perf_counter() - start + shipped.seconds - shipped.encode_seconds - starting
                missed = sum(r.misses for r in results) * nbytes // max(len(indices), 1)
                cost.record_parallel(names, taken, nbytes, cfg.num_workers, missed)
                cost.record_changed(names, sum(len(r.indices) for r in results), len(indices))
            if shipped.unencoded:
                cost.record_encode(shipped.encode_seconds, shipped.unencoded)
        finally:
            end = time.perf_counter()
            # the pass calls' time, less the workers' waits for a CPU: what the chain itself costs, neither
            # their decoding and encoding nor what other programs took (that is in record_parallel's wave)
            passes_busy = sum(sum(r.stage_wall) - sum(r.stage_waited) for r in results)
            cost.record_workers(names, passes_busy, _worker_bytes(nbytes, probe, len(passes)))
            cost.record_wave(end - start - (merge_start - start - setup - waited), busy, cfg.num_workers, nbytes)
            # this thread's CPU time since the wave began, less the probe's pass calls: the parent's own work
            # (reading the module, handing out, decoding answers, merging, replaying), not its waits
            probed = probe.timing.cpu if probe is not None else 0.0
            parent = max(time.thread_time() - shipped.cpu_start - probed, 0.0)
            wall = end - start + shipped.seconds
            stats = WaveStats(
                names,
                True,
                "parallel",
                len(indices),
                run.chunks,
                nbytes,
                wall,
                busy,
                parent,
                hits=sum(r.hits for r in results),
                misses=sum(r.misses for r in results),
                stolen=run.stolen,
                pass_seconds=sum(sum(r.stage_wall) for r in results),
                result_seconds=sum(r.result_seconds for r in results),
                worker_cpu_seconds=sum(r.cpu_seconds for r in results),
            )
            self._remember(stats)
        return out

    def _fetch_for_retry(self, void: _LostKept | _Lacked, names: tuple[str, ...], cfg: ParallelConfig) -> None:
        """After an attempt void for results workers keep (a pass read one another worker keeps, or the worker
        that keeps some is gone): fetch them all, so that the next attempt has bytes for every function (a lost
        one is made again here; see Keeper.fetch_all)."""
        if isinstance(void, _Lacked):
            self._reads_others.add(names)  # its waves fetch first from now on
            self.keeper.let_go(void.tokens, (cfg.scheduler, cfg.num_workers))
        self.keeper.fetch_all()

    def _fetch_unless_taken(
        self, names: tuple[str, ...], passes: Sequence[FunctionLevelPass], cfg: ParallelConfig
    ) -> None:
        """Fetch the results workers keep unless this wave can take them as they are: they are kept by this
        wave's workers, and its passes read no function but the one they transform."""
        waiting = self.keeper.waiting()
        if waiting and (waiting != {(cfg.scheduler, cfg.num_workers)} or self._reads(names, passes)):
            self.keeper.fetch_all()

    def _reads(self, names: tuple[str, ...], passes: Sequence[FunctionLevelPass]) -> bool:
        """Whether the chain may read functions other than the one it transforms (said, or seen)."""
        return names in self._reads_others or any(
            p.reads_other_functions or p.info.name in self._looks_up for p in passes
        )

    def _keeps(self, crew: CrewLike, cfg: ParallelConfig, names: tuple[str, ...], reads: bool, probed: bool) -> bool:
        """Whether a wave on ``crew`` leaves its results with its workers (see parpass.parallel.kept): they can,
        the config lets them, its passes read no other function (``reads`` False: a worker would then look up
        what another keeps), a pipeline runs with passes to come, whose end fetches what is left, and the
        chain's results were not fetched before the next wave took them (a wave whose passes read any function
        came next, or this process read them): that would add a round trip and save nothing. ``probed``: the
        wave takes up from a first pass run here (its results are bytes here already)."""
        if reads or probed or not (cfg.keep_results and getattr(crew, "keeps", False)):
            return False
        if not self.keeper.keeps(_label(names)):
            return False
        progress = pipeline_progress()
        return progress is not None and progress[2] > 0 and at_pipeline_end(self.keeper.fetch_all)

    def _kept_as(
        self,
        names: tuple[str, ...],
        cfg: ParallelConfig,
        passes: Sequence[FunctionLevelPass],
        ctx: PassContext,
        mod: IRModule,
        wave: _WaveInput,
    ) -> _KeptAs:
        """What a kept result becomes in the result module of the wave (``wave``, on ``mod``): its slot's
        buffer; with what made it, so that it can be made again (see parpass.parallel.lineage)."""
        where, label = (cfg.scheduler, cfg.num_workers), _label(names)
        lineage = Lineage(passes, ctx, wave.names, mod.attrs)
        keep = self.keeper.keep
        return lambda tokens, made: keep(tokens, made, label, where, lineage, mod.function_sources(made))

    @staticmethod
    def _wave_input(
        pickled: bytes, mod: IRModule, ctx: PassContext, cfg: ParallelConfig, shipped: _Shipped, probe: _Probe | None
    ) -> _WaveInput:
        """What every attempt of the wave shares (see :class:`_WaveInput`)."""
        return _WaveInput(
            pickled,
            dumps_for_workers(ctx.snapshot()),
            shipped.names,
            # the IR keeps an executor's location opaque; this executor records only its own (see store.py)
            cast("list[Location | None]", shipped.locations),
            msgspec.msgpack.encode(dict(mod.attrs)),
            bool(ctx.instruments),
            shipped.digests,
            cfg.cache_bytes,
            _probe_inputs(probe, mod, shipped.names),
            shipped.total,
        )

    def _attempt(
        self,
        crew: CrewLike,
        wave: _WaveInput,
        indices: list[int],
        sizes: list[int],
        cfg: ParallelConfig,
        names: tuple[str, ...],
        mod: IRModule,
        ctx: PassContext,
        passes: Sequence[FunctionLevelPass],
    ) -> _Run:
        """Run the wave once on ``crew``: write its file, hand out its chunks, collect every answer.

        Raises :class:`_LostElsewhere` when the crew was lost to a fault of no function of this wave.
        Each attempt has a file of its own, so that nothing of a lost attempt can land in the next one.
        Any other failure propagates; the caller's ``backend.crew`` then kills the crew's workers.
        """
        directory = scratch_dir()
        crew.begin_wave(directory)
        store_limit = max(_STORE_MIN, 4 * wave.nbytes // crew.size)
        placed, probes, digests = _place(crew, wave, directory, store_limit, mod, self.keeper)
        wave_path = ""
        try:
            try:
                reads = self._reads(names, passes)
                keep = self._keeps(crew, cfg, names, reads, bool(wave.probes))
                header = self._header(wave, crew, placed, store_limit, probes, keep, digests)
                wave_path = crew.publish(header, None if reads else indices)
            except CrewLost as lost:  # nothing of the wave ran
                raise _LostElsewhere(lost) from lost
            dispatcher = self._dispatcher(crew, wave, indices, sizes, cfg, names)
            if dispatcher is None:  # a worker that kept some of the wave's inputs is gone
                return _void_run(_LostKept())
            cost = self.cost_of(cfg.scheduler)
            outstanding = [0] * crew.size
            run = _Run(whole_round_trips=not cost.workers_on_this_machine)
            for _ in range(_IN_FLIGHT):
                for seat in range(crew.size):
                    self._hand_out(crew, dispatcher, seat, wave_path, outstanding, run)
            while any(outstanding):
                for seat, answer in crew.receive(_POLL):
                    self._take(crew, seat, answer, wave_path, run, names, mod, ctx, passes, cfg)
                    outstanding[seat] -= 1
                    self._hand_out(crew, dispatcher, seat, wave_path, outstanding, run)
                if cfg.timeout > 0:
                    self._check_timeout(crew, wave, names, mod, ctx, passes, cfg)
            self._after_attempt(crew, run, dispatcher, wave, names, cost)
            return run
        except CrewLost as lost:
            self._fail_lost(crew, lost, names, wave.names, mod, ctx, passes, cfg)
        finally:  # withdrawn whatever ends the attempt, a signal right after publishing included
            if wave_path:
                crew.withdraw(wave_path)

    def _after_attempt(
        self,
        crew: CrewLike,
        run: _Run,
        dispatcher: Dispatcher,
        wave: _WaveInput,
        names: tuple[str, ...],
        cost: CostModel,
    ) -> None:
        """What an attempt whose chunks all answered leaves to learn and to tidy."""
        if crew.lacked:  # a chunk needed what its wave left out: send all of it next time
            self._reads_others.add(names)
        run.void = _Lacked.of(run)
        cost.record_latency(run.latencies)
        run.stolen = dispatcher.stolen
        _prune_owners(crew, run, wave.digests)

    def _dispatcher(
        self,
        crew: CrewLike,
        wave: _WaveInput,
        indices: list[int],
        sizes: list[int],
        cfg: ParallelConfig,
        names: tuple[str, ...],
    ) -> Dispatcher | None:
        """Who runs what of the wave on ``crew`` (see :class:`~parpass.parallel.schedule.Dispatcher`); None
        where a worker that keeps some of its inputs is no seat of the crew."""
        try:
            owners, pinned = _owners(crew, list(map(wave.digests.__getitem__, indices)), self.keeper)
        except _LostKept:
            return None
        cost = self.cost_of(cfg.scheduler)
        # a chunk carries at least _LATENCY_MULTIPLE round trips of work (in bytes of IR at the chain's rate)
        floor = _LATENCY_MULTIPLE * cost.latency / max(cost.worker_rate(names), 1e-12)
        share = CHUNK_SHARE if cost.workers_on_this_machine else CLUSTER_CHUNK_SHARE
        return Dispatcher(indices, sizes, owners, crew.size, floor, share, pinned)

    @staticmethod
    def _header(
        wave: _WaveInput,
        crew: CrewLike,
        placed: tuple[list[int], list[int], list[int]],
        store_limit: int,
        probes: list[tuple[int, int, int, int]],
        keep: bool,
        digests: list[bytes | None],
    ) -> WaveHeader:
        """What a wave's workers read first (see :class:`~parpass.parallel.wave.WaveHeader`)."""
        return WaveHeader(
            wave.passes,
            wave.context,
            wave.names,
            list(crew.stores),
            *placed,
            wave.attrs,
            wave.record,
            digests,
            wave.cache_bytes,
            store_limit,
            probes,
            keep,
        )

    def _take(
        self,
        crew: CrewLike,
        seat: int,
        answer: object,
        wave_path: str,
        run: _Run,
        names: tuple[str, ...],
        mod: IRModule,
        ctx: PassContext,
        passes: Sequence[FunctionLevelPass],
        cfg: ParallelConfig,
    ) -> None:
        """One answer from ``seat``: a chunk's results into ``run``, or its failure."""
        if isinstance(answer, WorkerFailure):
            error = RemotePassError(f"{answer.type_name}: {answer.message}", _label(names), (), answer.type_name)
            add_note(error, "parpass: remote traceback (worker process):\n" + answer.traceback.rstrip())
            self._fail_crash(error, names, [], [], mod, ctx, passes, cfg)
        assert isinstance(answer, ChunkDone) and answer.wave == wave_path
        if answer.lacked:  # void: the attempt is run again once the kept results are fetched
            run.lacked = True
            return
        run.answered(seat, answer.seconds)
        # its results mapped and their holder noted now, while the workers still run: not after the last answer
        run.answers.append((seat, answer))
        run.views.append(_mapped(crew, seat, answer))
        _note_owners(crew, seat, answer)

    def _check_timeout(
        self,
        crew: CrewLike,
        wave: _WaveInput,
        names: tuple[str, ...],
        mod: IRModule,
        ctx: PassContext,
        passes: Sequence[FunctionLevelPass],
        cfg: ParallelConfig,
    ) -> None:
        """A PassTimeoutError naming the functions that have run past ``parpass.timeout`` (with its reproducer)."""
        late = [(b.function, b.seconds) for b in crew.running(cfg.timeout) if b.seconds > cfg.timeout]
        if late:
            funcs = tuple(wave.names[i] for i, _ in late)
            message = (
                f"pass {_label(names)} exceeded the timeout of {cfg.timeout:g}s "
                f"(config parpass.timeout) on function(s) {', '.join(map(repr, funcs))}"
            )
            self._write_reproducer(cfg, mod, ctx, passes, funcs, message)
            raise PassTimeoutError(message, _label(names), funcs)

    @staticmethod
    def _hand_out(
        crew: CrewLike, dispatcher: Dispatcher, seat: int, wave_path: str, outstanding: list[int], run: _Run
    ) -> None:
        chunk = dispatcher.next_chunk(seat)
        if chunk:
            run.sent(seat)
            crew.run(seat, wave_path, chunk)
            outstanding[seat] += 1
            run.chunks += 1

    def _fail_lost(
        self,
        crew: CrewLike,
        lost: CrewLost,
        names: tuple[str, ...],
        all_names: list[str],
        mod: IRModule,
        ctx: PassContext,
        passes: Sequence[FunctionLevelPass],
        cfg: ParallelConfig,
    ) -> NoReturn:
        """Raise for a crew lost during a wave: a crash of a function of the wave (the worker running it
        died on its own), or :class:`_LostElsewhere` (killed from outside while idle, by another fault)."""
        busy = crew.running()
        dead = lost.lost.dead if lost.lost is not None else frozenset()
        culprits = [all_names[i] for i in lost.suspects] or [all_names[b.function] for b in busy if b.pid in dead]
        if not culprits:
            raise _LostElsewhere(lost)
        others = [all_names[b.function] for b in busy if b.pid not in dead and all_names[b.function] not in culprits]
        self._fail_crash(lost.lost, names, culprits, others, mod, ctx, passes, cfg)
        raise AssertionError("unreachable")  # pragma: no cover

    def _fail_crash(
        self,
        error: BaseException | None,
        names: tuple[str, ...],
        running: list[str],
        others: list[str],
        mod: IRModule,
        ctx: PassContext,
        passes: Sequence[FunctionLevelPass],
        cfg: ParallelConfig,
    ) -> None:
        """Raise the error of a wave whose task failed with ``error``: ``running`` names the functions that
        were running where it failed (on the dead worker, for a crash), ``others`` those running elsewhere."""
        funcs = tuple(running)
        where = f"on function(s) {', '.join(map(repr, funcs))}" if funcs else "(no function was running)"
        if isinstance(error, backend_mod.BrokenPool):
            detail = str(error).split("\n")[0]
            codes = getattr(error, "exit_codes", "")
            exit_codes = f" (exit codes {codes})" if codes else _exit_codes(str(error))
            also = f"; other workers were running {', '.join(map(repr, others))}" if others else ""
            message = f"a worker process died while running pass {_label(names)} {where}{exit_codes}: {detail}{also}"
            self._write_reproducer(cfg, mod, ctx, passes, funcs, message)
            raise WorkerCrashedError(message, _label(names), funcs) from error
        message = f"pass {_label(names)} could not run in a worker process {where}: {type(error).__name__}: {error}"
        self._write_reproducer(cfg, mod, ctx, passes, funcs, message)
        raise ParallelExecutionError(message, _label(names), funcs) from error

    def _write_reproducer(
        self,
        cfg: ParallelConfig,
        mod: IRModule,
        ctx: PassContext,
        passes: Sequence[FunctionLevelPass],
        funcs: Sequence[str],
        message: str,
    ) -> None:
        if not cfg.reproducer:
            return
        try:
            write_reproducer(cfg.reproducer, mod, passes, ctx.snapshot(), list(funcs), message)
        except Exception as err:  # the original failure matters more than the reproducer
            log.warning("could not write the reproducer %s: %s", cfg.reproducer, err)

    # ------------------------------------------------------------ merge, replay, errors

    @staticmethod
    def _merge(
        run: _Run,
        mod: IRModule,
        heads: list[_Head],
        probe: _Probe | None,
        wave: _WaveInput,
        kept_as: _KeptAs,
    ) -> IRModule:
        """The module after the wave: ``mod`` with what the probe and the workers changed, by module index.

        ``heads`` are the class and attributes of ``mod``'s functions, which a changed function keeps unless
        its answer says otherwise; every column is gathered first and set in one call.
        """
        out = mod.copy()
        all_names = wave.names
        if probe is not None:  # what the first pass changed in-process: the workers took up from it
            heads = list(heads)
            for index, data in wave.probes:
                name = all_names[index]
                new = probe.changed.get(name)
                if new is not None:
                    out.set_encoded_function(name, data, new)
                    heads[index] = (type(new), new.attrs)
        changed: list[int] = []
        buffers: list[Any] = []  # views of stores, or what a kept result's slot reads (see _note_kept)
        starts: list[int] = []
        sizes: list[int] = []
        digests: list[bytes] = []
        locations: list[Location] = []
        new_heads: list[_Head] = []
        for (_, answer), stored in zip(run.answers, run.views, strict=True):
            if not answer.indices:  # it changed nothing
                continue
            first = len(changed)
            changed += answer.indices
            buffers += repeat(stored, len(answer.indices))
            starts += answer.offsets
            sizes += answer.lengths
            digests += answer.digests
            locations += pack_locations(answer.store, answer.offsets, answer.lengths)
            if answer.kept:
                _note_kept(answer, first, all_names, kept_as, (buffers, sizes, locations))
            start = len(new_heads)
            new_heads += map(heads.__getitem__, answer.indices)
            if answer.head_at:
                # one head (class, frozen attributes, as a decode gives them) per distinct one, shared
                distinct = [(_KINDS[prim], frozen_attrs(attrs)) for prim, attrs in answer.heads]
                changed_heads = map(distinct.__getitem__, answer.head_of)
                deque(map(new_heads.__setitem__, map(add, repeat(start), answer.head_at), changed_heads), maxlen=0)
        changed_names = list(map(all_names.__getitem__, changed))
        out.set_encoded_regions(changed_names, buffers, starts, sizes, digests, locations, new_heads, changed)
        _record_digests(out, run, all_names, wave.digests, probe is not None)
        _record_learned(mod, run, all_names)
        return out

    def _replay_and_raise(
        self,
        results: list[ChunkDone],
        passes: Sequence[FunctionLevelPass],
        all_names: list[str],
        mod: IRModule,
        ctx: PassContext,
        cfg: ParallelConfig,
        observer: ChainObserver | None,
    ) -> None:
        errors = sorted((e for r in results for e in r.errors), key=lambda e: (e.stage, e.index))
        cutoff = (errors[0].stage, errors[0].index) if errors else None
        emitted = sorted(((e.stage, e.index, e.emissions) for r in results for e in r.emissions), key=_by_place)
        last = errors[0].stage if errors else len(passes) - 1
        position = 0
        for stage in range(last + 1):
            if observer is not None:
                observer.before_stage(stage)
            position = _replay_stage(
                emitted, position, stage, cutoff, ctx, passes[stage].info.name, all_names, observer
            )
            if stage < last or not errors:
                # Counted in the workers: in the caller's statistics before the instruments hear of the pass.
                add_counts(c for r in results if stage < len(r.stage_counts) for c in r.stage_counts[stage])
                if observer is not None:
                    observer.after_stage(stage, _stage_timing(results, stage))
        if not errors:
            return
        first = errors[0]
        same_wave = [e for e in errors if e.stage == first.stage]
        pass_name = passes[first.stage].info.name
        funcs = tuple(all_names[e.index] for e in same_wave)
        message = f"pass {pass_name!r} failed on {len(same_wave)} function(s): " + ", ".join(
            f"{all_names[e.index]!r} ({e.type_name}: {e.message})" for e in same_wave
        )
        self._write_reproducer(cfg, mod, ctx, passes, funcs, message)
        error = _rebuild(first, pass_name, all_names[first.index], same_wave, all_names)
        if observer is not None:
            observer.stage_failed(first.stage, error)
        raise error


def _replay_stage(
    emitted: list[tuple[int, int, list[Emission]]],
    position: int,
    stage: int,
    cutoff: tuple[int, int] | None,
    ctx: PassContext,
    pass_name: str,
    all_names: list[str],
    observer: ChainObserver | None,
) -> int:
    """Replay stage ``stage``'s emissions from ``emitted[position:]`` in module order, up to the first error
    (``cutoff``); where the next stage's begin."""
    while position < len(emitted) and emitted[position][0] == stage:
        _, index, emissions = emitted[position]
        position += 1
        if cutoff is not None and (stage, index) > cutoff:
            break
        try:
            _replay(emissions, ctx)
        except BaseException as err:  # an instrument of a nested pass: serially, raised in this pass's code
            attach_pass_note(err, pass_name, all_names[index])
            if observer is not None:
                observer.stage_failed(stage, err)
            raise
    return position


class _Offset:
    """A chain observer for a segment of a longer chain, which starts at stage ``offset`` of it."""

    def __init__(self, observer: ChainObserver, offset: int) -> None:
        self._observer = observer
        self._offset = offset

    def before_stage(self, stage: int) -> None:
        self._observer.before_stage(stage + self._offset)

    def after_stage(self, stage: int, timing: StageTiming) -> None:
        self._observer.after_stage(stage + self._offset, timing)

    def stage_failed(self, stage: int, error: BaseException) -> None:
        self._observer.stage_failed(stage + self._offset, error)


class _AfterProbe(_Offset):
    """The observer of a chain whose first pass began in-process: that stage began already, and its time
    is the in-process part's plus the workers'."""

    def __init__(self, observer: ChainObserver, probe: StageTiming) -> None:
        super().__init__(observer, 0)
        self._probe = probe

    def before_stage(self, stage: int) -> None:
        if stage:
            super().before_stage(stage)

    def after_stage(self, stage: int, timing: StageTiming) -> None:
        if stage == 0:
            timing = StageTiming(timing.wall + self._probe.wall, timing.cpu + self._probe.cpu)
        super().after_stage(stage, timing)


def _worker_bytes(nbytes: int, probe: _Probe | None, stages: int) -> int:
    """The bytes of whole-chain work the workers did in a wave of ``nbytes`` of ``stages`` passes: all of it,
    less what a probe ran in-process first (its first pass, on its first functions)."""
    if probe is None:
        return nbytes
    return max(int(nbytes - probe.done_bytes / stages), 1)


def _probe_inputs(probe: _Probe | None, mod: IRModule, names: list[str]) -> list[tuple[int, bytes | memoryview]]:
    """The functions a probe ran the first pass on, and the bytes the workers take up from (its result)."""
    if probe is None:
        return []
    position = {name: i for i, name in enumerate(names)}
    out: list[tuple[int, bytes | memoryview]] = []
    changed = probe.changed
    for name in probe.ran:
        new = changed.get(name)
        data = mod.encoded_buffer(name) if new is None else encode_function(new)
        out.append((position[name], data))
    return out


def _stage_timing(results: Sequence[ChunkDone], stage: int) -> StageTiming:
    """Stage ``stage``'s wall and CPU seconds, summed over the chunks that ran it."""
    return StageTiming(
        sum(r.stage_wall[stage] for r in results if stage < len(r.stage_wall)),
        sum(r.stage_cpu[stage] for r in results if stage < len(r.stage_cpu)),
    )


class _WaveInput(msgspec.Struct, frozen=True, dict=False):
    """What the wave file of every attempt of one wave holds (see :func:`~parpass.parallel.wave.write_wave`)."""

    passes: bytes
    context: bytes
    names: list[str]
    #: where the executor's workers stored each function's bytes, if they did (see :func:`pack_locations`)
    locations: list[Location | None]
    attrs: bytes
    record: bool
    digests: list[bytes | None]
    cache_bytes: int
    #: the functions the first pass already ran on in-process: (index, the bytes the workers take up from)
    probes: list[tuple[int, bytes | memoryview]]
    nbytes: int  # the encoded size of every function


class _Table(NamedTuple):
    """A module's functions as a chain's wave reads them, once (see :meth:`IRModule.columns`), the positions
    of its targets, and the seconds it took to read."""

    columns: ModuleColumns
    indices: list[int]
    seconds: float
    #: this thread's CPU time (time.thread_time) when the wave began: what the parent's work is counted from
    cpu_start: float

    @property
    def names(self) -> list[str]:
        return self.columns.names

    @property
    def heads(self) -> list[_Head]:
        return self.columns.heads


class _Shipped(NamedTuple):
    """What a wave ships: the module as the wave read it (``table``: every function's name, head, digest and
    location, the targets' positions), the targets' encoded sizes, every function's encoded size summed,
    and the seconds it took to read (the table's included). The bytes themselves are read from the module
    only for the functions that lie in no store of the crew."""

    table: _Table
    sizes: list[int]
    total: int
    seconds: float
    #: of ``seconds``, reading the sizes: mostly encoding the ``unencoded`` bytes held only decoded
    encode_seconds: float
    unencoded: int

    @property
    def names(self) -> list[str]:
        return self.table.columns.names

    @property
    def heads(self) -> list[_Head]:
        return self.table.columns.heads

    @property
    def digests(self) -> list[bytes | None]:
        return self.table.columns.digests

    @property
    def locations(self) -> list[object]:
        return self.table.columns.locations

    @property
    def indices(self) -> list[int]:
        return self.table.indices

    @property
    def cpu_start(self) -> float:
        """See :attr:`_Table.cpu_start`."""
        return self.table.cpu_start


class _Sized(NamedTuple):
    """A wave as read from the module (see :meth:`ParallelExecutor._sized`): its table, its estimated
    encoded bytes, of those the ones held only as bytes and the ones held only decoded, and whether the
    sizes are mostly guessed (never seen encoded: a rate learned on them is a rough one)."""

    table: _Table
    estimate: int
    encoded: int
    unencoded: int
    rough: bool


class _Probe:
    """What a wave ran in-process before it moved to workers: its first pass on its first functions
    (``names[:count]``)."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = names  # the first pass's targets, in module order
        self.count = 0  # how many of them it ran on
        self.changed: dict[str, BaseFunc] = {}  # name -> the first pass's result, where a new object; in run order
        self.guessed = 0  # of the sizes of the functions the pass ran on, the ones guessed (never seen encoded)
        self.timing = StageTiming(0.0, 0.0, in_caller=True)
        self.decode_seconds = 0.0  # decoding the functions held as bytes (learned apart from the pass)
        self.decoded_bytes = 0
        self.done_bytes = 0.0  # the encoded size of the functions the pass ran on (sampled: see _count_size)
        self.pickled: bytes | None = None  # the chain for the workers, once the probe moves it there
        self.sized: _Sized | None = None  # the wave as read, once the probe read it
        self._stride = 1  # functions run between two readings of the clock (see run_until)

    @property
    def ran(self) -> Sequence[str]:
        """The functions the first pass ran on, in module order."""
        return self.names[: self.count]

    def run_until(
        self,
        p: FunctionLevelPass,
        mod: IRModule,
        view: IRModule,
        ctx: PassContext,
        seen: Mapping[str, int],
        fallback: int,
        deadline: float,
    ) -> int:
        """Run ``p`` on the next functions of :attr:`names` of ``mod`` in order until the clock passes
        ``deadline``; how many it ran on so far. Each one's decoding, if held as bytes, is timed apart.

        The clock is read after every function at first, and every few functions (up to
        :data:`_CLOCK_STRIDE_MAX`) while they take less than :data:`_CLOCK_EVERY` together; where it is read,
        the function just run stands for those since the last reading in :attr:`done_bytes` (see
        :meth:`_count_size`). Reading the clock and each size after every function cost a 4 us pass 3-5% of its
        time. A function much slower than those before it is noticed at most that many functions late."""
        decoded, transform, clock = mod.held_function, p.transform_one, time.perf_counter
        names, changed = self.names, self.changed
        at, stride = self.count, self._stride
        last = clock()
        while at < len(names):
            block = names[at : at + stride]
            for name in block:
                func = decoded(name)
                if func is None:
                    func = self._decoded(p, mod, name)
                new = transform(func, name, view, ctx)
                if new is not func:
                    changed[name] = new
            at = self.count = at + len(block)
            self._count_size(mod, block[-1], len(block), seen, fallback)
            now = clock()
            if now >= deadline:
                break
            stride = self._stride = min(2 * stride, _CLOCK_STRIDE_MAX) if now - last < _CLOCK_EVERY else 1
            last = now
        return at

    def _count_size(self, mod: IRModule, name: str, count: int, seen: Mapping[str, int], fallback: int) -> None:
        """Count ``count`` functions run at the encoded size of function ``name`` of ``mod`` (one sample stands
        for the functions run since the last): as held, else as last ``seen``, else ``fallback`` (then in
        :attr:`guessed` too). The sizes only weigh the rate the cost model learns."""
        size = mod.cached_size(name)
        if size is None:
            size = seen.get(name)
            if size is None:
                size = fallback
                self.guessed += count * fallback
        self.done_bytes += count * size

    def _decoded(self, p: FunctionLevelPass, mod: IRModule, name: str) -> BaseFunc:
        """Function ``name`` of ``mod``, held as bytes, decoded (and timed apart)."""
        self.decoded_bytes += mod.cached_size(name) or 0
        before = time.perf_counter()
        func = target_function(p, mod, name)
        self.decode_seconds += time.perf_counter() - before
        return func


class _Run:
    """What one attempt of a wave brought back: every chunk's answer, by seat, and what it cost the parent."""

    def __init__(self, whole_round_trips: bool = False) -> None:
        #: sample each seat's first round trip whole rather than what later chunks cost (see :meth:`answered`)
        self.whole_round_trips = whole_round_trips
        self.answers: list[tuple[int, ChunkDone]] = []
        self.views: list[memoryview | None] = []  # per answer: the store its changed functions' new bytes lie in
        self.chunks = 0
        self.stolen = 0
        self.lacked = False  # an answer said its chunk needed a function another worker keeps
        #: why the attempt counts for nothing, for the caller to handle out of the crew's block (see _Lacked)
        self.void: _Lacked | _LostKept | None = None
        #: what chunks cost beyond their work, one sample per chunk after a seat's first, or per seat's first
        #: with ``whole_round_trips`` (see :meth:`answered`)
        self.latencies: list[float] = []
        self._sent_at: dict[int, deque[float]] = {}  # per seat: when its chunks in flight went, oldest first
        self._answered_at: dict[int, float] = {}  # per seat: when its last answer came

    def sent(self, seat: int) -> None:
        """A chunk went to ``seat``."""
        self._sent_at.setdefault(seat, deque()).append(time.perf_counter())

    def answered(self, seat: int, seconds: float) -> None:
        """A chunk of ``seat`` came back, ``seconds`` of work in the worker.

        Its cost beyond its work is the time since the seat's previous answer (or since it went, if later),
        less its work: what one more chunk costs a seat kept busy. A seat's first chunk gives no sample: its
        round trip also holds what the wave costs once (opening it in the worker), which made a local crew's
        chunks look 10x dearer than they are, and their floor too high.

        With ``whole_round_trips`` (workers on other machines: a cluster), only a seat's first chunk gives a
        sample, its whole round trip less its work. A cluster's chunk costs its scheduler, client and
        comms CPU that the gaps between answers do not show; sized by those gaps (~2 ms) a LocalCluster's
        chunks cost the 2-core machine 78% of the local speedup on the heavy pass against 95% sized by
        round trips (``bench_cluster.py``, the same run of each).
        """
        now = time.perf_counter()
        queue = self._sent_at.get(seat)
        sent = queue.popleft() if queue else now
        before = self._answered_at.get(seat)
        if self.whole_round_trips:
            if before is None:
                self.latencies.append(now - sent - seconds)
        elif before is not None:
            self.latencies.append(now - max(before, sent) - seconds)
        self._answered_at[seat] = now


def _void_run(void: _LostKept) -> _Run:
    """An attempt that ran nothing and counts for nothing, for ``void``."""
    run = _Run()
    run.void = void
    return run


class _LostElsewhere(Exception):
    """A wave's crew was lost to a fault of none of its functions: the wave runs again on a new crew."""

    def __init__(self, lost: CrewLost) -> None:
        super().__init__(str(lost))
        self.lost = lost


def _open_crew(scheduler: str, workers: int) -> contextlib.AbstractContextManager[FetchingCrew]:
    """The crew of ``workers`` workers of ``scheduler``'s backend, for fetching what they keep."""
    return cast("contextlib.AbstractContextManager[FetchingCrew]", backend_mod.backend_for(scheduler).crew(workers))


def _owners(crew: CrewLike, inputs: list[bytes | None], keeper: Keeper) -> tuple[list[int | None], list[bool]]:
    """The seat holding each of a wave's ``inputs`` (digests; None: the parent lacks it) resident, if any, and
    whether it must run there: a result a worker keeps (see parpass.parallel.kept) has no bytes elsewhere.
    Raises :class:`_LostKept` for one whose worker no seat has."""
    holder = cast("dict[bytes | None, int]", crew.owners).get
    owners = list(map(holder, inputs))
    unfetched = keeper.unfetched_tokens
    pinned = list(map(unfetched.__contains__, inputs)) if unfetched else [False] * len(inputs)
    if any(pinned):  # a kept result's token names the worker that made it, which alone can run it
        seats = {pid: seat for seat, pid in enumerate(getattr(crew, "pids", ()))}
        for at in itertools.compress(range(len(inputs)), pinned):
            if owners[at] is None:  # (its answer noted its seat, unless pruned since)
                owners[at] = seats.get(token_pid(cast("bytes", inputs[at])) or 0)
        if None in itertools.compress(owners, pinned):
            raise _LostKept()
        keeper.took(cast("list[bytes]", list(itertools.compress(inputs, pinned))))
    return owners, pinned


class _Lacked:
    """A chunk of the attempt needed a function another worker keeps (see parpass.parallel.kept): the attempt
    counts for nothing (``tokens``: what its other chunks kept, to let go), and runs again after a fetch."""

    def __init__(self, tokens: list[bytes]) -> None:
        self.tokens = tokens

    @classmethod
    def of(cls, run: _Run) -> _Lacked | None:
        """What voids an attempt one of whose chunks answered that it lacked such a function; None if none did."""
        if not run.lacked:
            return None
        return cls([answer.digests[at] for _, answer in run.answers for at in answer.kept])


class _LostKept(Exception):
    """A function of the wave is kept by a worker no seat of the crew has: it died, or was let go."""


#: What kept results become in the wave's result module (tokens, function names -> their slots' buffers).
_KeptAs = Callable[[list[bytes], list[str]], Sequence[object]]
#: The location a kept result has in the module (store number 0 is never a store's: see store_number).
_KEPT_LOCATION: Location = (0, 0, 0)


def _note_kept(
    answer: ChunkDone,
    first: int,
    names: list[str],
    kept_as: _KeptAs,
    columns: tuple[list[object], list[int], list[Location]],
) -> None:
    """Point the merge's columns (``buffers``, ``sizes``, ``locations``; ``answer``'s results from ``first``)
    at the results ``answer``'s worker keeps: each a buffer fetched when read, its size a typical function's
    until then (only the executor's estimates read it)."""
    buffers, sizes, locations = columns
    indices = list(map(answer.indices.__getitem__, answer.kept))
    made = kept_as(list(map(answer.digests.__getitem__, answer.kept)), list(map(names.__getitem__, indices)))
    places = [first + at for at in answer.kept]
    deque(map(buffers.__setitem__, places, made), maxlen=0)
    deque(map(sizes.__setitem__, places, repeat(_KEPT_SIZE)), maxlen=0)
    deque(map(locations.__setitem__, places, repeat(_KEPT_LOCATION)), maxlen=0)


#: The size a kept result is estimated at when its input's is unknown (a kept result's, say): IR of a function.
_KEPT_SIZE = 2500


def _rebuild(
    first: TaskError, pass_name: str, func_name: str, wave: list[TaskError], all_names: list[str]
) -> BaseException:
    """The exception to raise in the parent for the first error of a wave."""
    err: BaseException | None = None
    if first.pickled is not None:
        try:
            err = unpickled_chain(first.pickled)
        except Exception:
            err = None
    if err is None:
        err = RemotePassError(
            f"{first.type_name}: {first.message}", pass_name, tuple(all_names[e.index] for e in wave), first.type_name
        )
    attach_pass_note(err, pass_name, func_name)
    notes = ["parpass: remote traceback (worker process):\n" + first.traceback.rstrip()]
    if len(wave) > 1:
        shown = wave[1 : 1 + _OTHER_ERRORS_SHOWN]
        others = ", ".join(f"{all_names[e.index]!r} ({e.type_name})" for e in shown)
        if len(wave) - 1 > len(shown):
            others += f", ... ({len(wave) - 1 - len(shown)} more)"
        notes.append(f"parpass: pass {pass_name!r} also failed on {len(wave) - 1} more function(s): {others}")
    for note in notes:
        add_note(err, note)
    return err


def _by_place(item: tuple[int, int, list[Emission]]) -> tuple[int, int]:
    return item[0], item[1]


def _replay(emissions: list[Emission], ctx: PassContext) -> None:
    """Re-emit captured output, and call the parent's instruments for recorded nested passes."""
    pending: list[Emission] = []
    for em in emissions:
        if em.kind != "instrument":
            pending.append(em)
            continue
        replay(pending)
        pending = []
        info, names, blobs, attrs, crossing = cloudpickle.loads(em.record)
        error = None if crossing is None else unpickled_chain(crossing)
        nested = IRModule(attrs=attrs)
        for name, data in zip(names, blobs, strict=True):
            nested.set_encoded_function(name, data)
        if em.text == "before":
            ctx.instrument_before_pass(nested, info)
        elif em.text == "after":
            ctx.instrument_after_pass(nested, info)
        else:
            assert error is not None, "an error callback carries its error"
            ctx.instrument_pass_error(nested, info, error)
    replay(pending)


def _place(
    crew: CrewLike, wave: _WaveInput, directory: str, store_limit: int, mod: IRModule, keeper: Keeper
) -> tuple[tuple[list[int], list[int], list[int]], list[tuple[int, int, int, int]], list[bytes | None]]:
    """Where the crew reads each function's bytes, as columns (store, offset, length), and each probe's
    result, ``(index, store, offset, length)``: bytes no live store holds go into the parent's own store
    (once for the crew's life; ``mod`` records where); a result a worker keeps (see ``keeper``) lies where its
    fetch put it, or, not fetched, nowhere (:data:`~parpass.parallel.wave.KEPT`: only that worker has it).
    Third, the functions' digests as the wave sends them: a fetched result's is that of its bytes, not its
    token (another worker may hold the same bytes from a run before)."""
    probed: list[tuple[str, int, int, int]] = []  # (store, index, offset, length) of each probe's result
    if wave.probes:
        store, offsets = crew.place(directory, store_limit, [data for _, data in wave.probes])
        for (index, data), offset in zip(wave.probes, offsets, strict=True):
            probed.append((store, index, offset, len(data)))
    locations: list[Location | None] = wave.locations
    digests = wave.digests
    waiting: list[int] = []  # kept by a worker, not fetched
    forgotten: list[int] = []  # fetched, their bytes sliced out into their slots: digest unknown here
    if keeper.kept_total and _KEPT_LOCATION in locations:
        locations, digests = list(locations), list(digests)
        kept = list(itertools.compress(range(len(locations)), map(operator.eq, locations, repeat(_KEPT_LOCATION))))
        tokens = list(map(wave.digests.__getitem__, kept))
        unfetched = list(map(keeper.unfetched_tokens.__contains__, tokens))
        waiting = list(itertools.compress(kept, unfetched))
        deque(map(locations.__setitem__, waiting, repeat(None)), maxlen=0)
        fetched = list(itertools.compress(kept, map(operator.not_, unfetched)))
        for i, place in zip(fetched, keeper.places(list(map(wave.digests.__getitem__, fetched))), strict=True):
            if place is not None:  # a location None: made again here, its slot holds the bytes
                locations[i], digests[i] = place
            else:  # its slot holds the bytes now, sliced out (the holder that knew their digest is gone)
                locations[i] = digests[i] = None  # sent as bytes, digested by the worker that takes them
                forgotten.append(i)
    live_paths = list(crew.stores)
    # every function placed in a live store already (but those kept), the common case: no look at each one
    columns = (
        _kept_columns(list(locations), waiting, live_paths) if waiting else unpack_locations(locations, live_paths)
    )
    if columns is None:
        locations = list(locations)
        skip = set(waiting)
        unplaced = [
            i
            for i, at in enumerate(locations)
            if i not in skip and (at is None or location_store(at) not in crew.stores)
        ]
        blobs = [mod.encoded_buffer(wave.names[i]) for i in unplaced]
        path, offsets = crew.place(directory, store_limit, blobs)
        placed = pack_locations(path, offsets, list(map(len, blobs)))
        for i, location in zip(unplaced, placed, strict=True):
            locations[i] = location
        mod.record_locations([wave.names[i] for i in unplaced], placed, unplaced)
        if forgotten:  # the token is no digest of the bytes now placed: the next wave must not send it
            mod.record_digests([wave.names[i] for i in forgotten], [None] * len(forgotten), forgotten)
        columns = _kept_columns(locations, waiting, list(crew.stores))  # (placing may have opened a store)
        assert columns is not None, "every function was just placed in a live store, or is kept"
    live = {path: i for i, path in enumerate(crew.stores)}
    return columns, [(index, live[store], offset, length) for store, index, offset, length in probed], digests


def _kept_columns(
    locations: list[Location | None], waiting: list[int], live: list[str]
) -> tuple[list[int], list[int], list[int]] | None:
    """``locations`` as columns (see unpack_locations), those at ``waiting`` (no bytes anywhere but in the
    worker that keeps them, None in ``locations``, which this changes) as :data:`~parpass.parallel.wave.KEPT`;
    None if another is not placed in a live store."""
    stand_in = next((at for at in locations if at is not None), None)
    if stand_in is None:  # none placed: every function of the module is kept, or some are still to place
        count = len(locations)
        return ([KEPT] * count, [0] * count, [0] * count) if len(waiting) == count else None
    deque(map(locations.__setitem__, waiting, repeat(stand_in)), maxlen=0)
    columns = unpack_locations(locations, live)
    if columns is None:
        return None
    where, offsets, lengths = columns
    for column, value in ((where, KEPT), (offsets, 0), (lengths, 0)):
        deque(map(column.__setitem__, waiting, repeat(value)), maxlen=0)
    return where, offsets, lengths


def _mapped(crew: CrewLike, seat: int, answer: ChunkDone) -> memoryview | None:
    """The store ``answer``'s worker wrote the new bytes of the functions it changed to, as one view (mapped
    again only where it grew since; the file outlives a worker that dies); None if it changed none."""
    if not answer.store:  # it stored nothing (it changed nothing, or keeps what it changed)
        return None
    reader = crew.store(seat, answer.store)  # in answer order: a store the seat left is retired
    return reader.view(0, max(map(add, answer.offsets, answer.lengths)))


def _note_owners(crew: CrewLike, seat: int, answer: ChunkDone) -> None:
    """Remember that ``seat`` holds the functions of ``answer`` (changed, unchanged, and the inputs it digested),
    for the next wave's affinity."""
    owners = crew.owners
    owners.update(zip(answer.digests, repeat(seat)))
    owners.update(zip(answer.same_digests, repeat(seat)))
    owners.update(zip(answer.learned_digests, repeat(seat)))  # the inputs it digested: resident there too


def _prune_owners(crew: CrewLike, run: _Run, digests: list[bytes | None]) -> None:
    """Past the bound (see :data:`_OWNERS_MIN`), forget which seat holds the functions neither in the wave
    (``digests``, None where the parent did not know it) nor in its answers (changed or not)."""
    owners = crew.owners
    if len(owners) > max(_OWNERS_MIN, _OWNERS_PER_FUNCTION * len(digests)):
        holder = cast("dict[bytes | None, int]", owners).get
        answers = [answer for _, answer in run.answers]
        kept = itertools.chain(
            digests,
            *(a.digests for a in answers),
            *(a.same_digests for a in answers),
            *(a.learned_digests for a in answers),
        )
        crew.owners = {digest: held for digest in kept if digest is not None and (held := holder(digest)) is not None}


def _hand_values(results: Sequence[ChunkDone], passes: Sequence[FunctionLevelPass], names: list[str]) -> None:
    """Give each analysis of the chain (see FunctionAnalysis) the values the workers computed for it."""
    for answer in results:
        for stage, index, data in zip(answer.value_stage, answer.value_at, answer.values, strict=True):
            analysis = passes[stage]
            assert isinstance(analysis, FunctionAnalysis), "only an analysis sends values"
            analysis.values[names[index]] = data


def _record_digests(out: IRModule, run: _Run, names: list[str], known: list[bytes | None], probed: bool) -> None:
    """Record in ``out`` the digests the workers computed of unchanged functions the wave did not know."""
    lacking: list[int] = []
    digests: list[bytes] = []
    for _, answer in run.answers:
        for index, digest in zip(answer.same, answer.same_digests, strict=True):
            if probed or known[index] is None:
                lacking.append(index)
                digests.append(digest)
    out.record_digests(list(map(names.__getitem__, lacking)), digests, lacking)


def _record_learned(mod: IRModule, run: _Run, names: list[str]) -> None:
    """Record in the wave's input ``mod`` the digests the workers computed of the bytes it sent them without one
    (changed functions; see :attr:`ChunkDone.learned`): a module run again is then known by them."""
    learned = [index for _, answer in run.answers for index in answer.learned]
    if learned:
        digests = [d for _, answer in run.answers for d in answer.learned_digests]
        mod.record_digests(list(map(names.__getitem__, learned)), digests, learned)


@contextlib.contextmanager
def _collection_paused() -> Iterator[None]:
    """The garbage collector paused while the parent does a wave's bookkeeping (as a worker does for a chunk).

    That work builds a few objects per function that all live on (slots, views, locations): every few
    hundred of them the collector would run, and now and then over the whole heap, at several times the
    cost of the work itself. No user code runs inside (instruments are replayed outside).

    The young collection that follows walks what the wave built once (~0.4 us a changed function). Moving
    those objects to the oldest generation unscanned instead (``gc.freeze`` then ``gc.unfreeze``) was tried
    and dropped: it resets the young count, so a caller that makes little besides waves never reached a
    collection again and its cyclic garbage was never freed.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


_NESTED = "nested in a worker"


def _kept_in_process(ctx: PassContext, cfg: ParallelConfig) -> str | None:
    """Why every function-level pass under ``ctx`` runs in-process whatever it would cost (None: it may go to
    the workers); a ``num_workers`` below 1 is an error."""
    if backend_mod.in_worker():
        return _NESTED
    if cfg.num_workers < 1:
        raise ParallelExecutionError(f"config option 'parpass.num_workers' must be >= 1, got {cfg.num_workers}")
    if cfg.num_workers == 1 or cfg.mode == "never":
        return "configured in-process"
    vetoer = _vetoing_instrument(ctx)
    return None if vetoer is None else f"instrument {vetoer} may veto nested passes"


def _inline_reason(ctx: PassContext, cfg: ParallelConfig, names: tuple[str, ...]) -> str | None:
    """:func:`_kept_in_process`, warning, when the chain is kept in-process by configuration or an
    instrument, that a ``parpass.timeout`` set is not enforced."""
    reason = _kept_in_process(ctx, cfg)
    if reason is not None and reason != _NESTED:
        _warn_unenforced_timeout(cfg, names, reason)
    return reason


def _shipped(mod: IRModule, names: tuple[str, ...], table: _Table, unencoded: int) -> _Shipped:
    """What a wave of the chain ``names`` on the targets of ``table`` ships, read from ``mod`` (encoding what
    is held decoded: ``unencoded`` bytes, as estimated)."""
    t0 = time.perf_counter()
    columns = table.columns
    held = columns.sizes
    every = cast("list[int]", held)
    if None in held:  # held only decoded: encoded now (the module then holds the bytes)
        pairs = zip(columns.names, held, strict=True)
        every = [len(_encoded(mod, name, names)) if size is None else size for name, size in pairs]
    sizes = list(map(every.__getitem__, table.indices))
    read = time.perf_counter() - t0
    return _Shipped(table, sizes, sum(every), table.seconds + read, read, unencoded)


def _encoded(mod: IRModule, name: str, names: tuple[str, ...]) -> bytes | memoryview:
    """Function ``name`` of ``mod`` as the bytes a wave ships; an IRError naming the function and the
    place when it holds what the IR cannot encode (a pass built an integer beyond 64 bits, say)."""
    try:
        return mod.encoded_buffer(name)
    except (OverflowError, UnicodeEncodeError, TypeError) as err:
        where = node_problem(mod[name]) or str(err)
        raise IRError(
            f"function {name!r} cannot be sent to worker processes for pass {_label(names)}: {where} "
            "(parpass IR holds plain data: 64-bit integers and UTF-8 strings)",
        ) from err


def _visited(
    passes: Sequence[FunctionLevelPass], heads: list[_Head], kinds: tuple[type[BaseFunc], ...] | None
) -> list[int]:
    """The positions of the functions (of these ``heads``) any pass of the chain may visit; ``kinds`` is the
    chain's :func:`_visit_key`."""
    if kinds is not None:  # every pass keeps the rule of FunctionLevelPass.visits
        return visited_positions(kinds, heads)
    visits = [p.visits for p in passes]
    if len(visits) == 1:
        visit = visits[0]
        return [i for i, (kind, attrs) in enumerate(heads) if visit(kind, attrs)]
    return [i for i, (kind, attrs) in enumerate(heads) if any(visit(kind, attrs) for visit in visits)]


def _named_targets(passes: Sequence[FunctionLevelPass]) -> frozenset[str] | None:
    """The only functions any pass of the chain may visit, by name (see FunctionLevelPass.target_names);
    None where a pass names none (it may visit every function)."""
    named: frozenset[str] = frozenset()
    for p in passes:
        only = p.target_names()
        if only is None:
            return None
        named |= only
    return named


def _visit_key(passes: Sequence[FunctionLevelPass]) -> tuple[type[BaseFunc], ...] | None:
    """What the targets of the chain depend on besides the heads: the passes' kinds, where every pass
    keeps the rule of :meth:`FunctionLevelPass.visits` (None: a pass has a rule of its own)."""
    if any(type(p).visits is not FunctionLevelPass.visits for p in passes):
        return None
    return tuple(p.func_kind for p in passes)


def _vetoing_instrument(ctx: PassContext) -> str | None:
    """An instrument that may veto passes, whose answers for nested passes a worker cannot know."""
    return next((pi.name for pi in ctx.instruments if may_veto(pi)), None)


def _warn_unenforced_timeout(cfg: ParallelConfig, names: tuple[str, ...], reason: str) -> None:
    """Say that ``parpass.timeout`` does not hold for a chain that runs in-process for ``reason``.

    A timeout is enforced by killing the worker that runs past it; code running in
    the caller's own process cannot be stopped safely. Python's warning filters
    decide how often the warning shows (by default once per pass and reason).
    """
    if cfg.timeout > 0:
        warnings.warn(
            f"config parpass.timeout={cfg.timeout:g} is not enforced for pass {_label(names)}: it runs in-process "
            f"({reason}), and a timeout can only stop a worker process",
            RuntimeWarning,
            stacklevel=3,
        )


def _label(names: tuple[str, ...]) -> str:
    return repr(names[0]) if len(names) == 1 else "chain " + " -> ".join(names)


def _exit_codes(text: str) -> str:
    marker = "The exit codes of the workers are "
    if marker in text:
        return " (exit codes " + text.split(marker, 1)[1].split("\n", 1)[0].strip() + ")"
    return ""
