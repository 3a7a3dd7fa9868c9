"""What runs inside a worker process: a seat of the crew, serving chunks of waves.

A worker of the crew (:func:`serve`) connects to the parent and runs the
chunks it is sent until the parent lets it go. A chunk takes its functions from
the worker's resident cache when the worker holds them (the executor sends a
function to the worker that produced it in the previous wave), else decodes
them from the wave file, and applies the chain of passes stage by stage (each
pass to every function, as the serial run does), recording what each pass call
printed, logged, warned or triggered in the instruments, and the exception it
raised; a function stops at its first error. It sends back each final function
as bytes (nothing when no pass changed it) with their digest, and keeps the
final functions resident for the next wave.

The module a pass receives is the module as it was before that pass. For the
first pass of a chain this is the wave's module; for a later pass of a fused
chain, a function looked up in the view is computed on demand by running the
earlier passes on it here (passes are deterministic, so this is the function
the parent will get), with its output and instrument events discarded: they
belong to the task that owns that function.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import itertools
import linecache
import os
import time
import traceback
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Protocol

import cloudpickle
import msgspec

from parpass.errors import IRFormatError
from parpass.instrument.base import PassInstrument
from parpass.ir.digest import digest_of
from parpass.ir.module import IRModule
from parpass.ir.node import SKIP_OPTIMIZATION, BaseFunc
from parpass.ir.peek import peek_function
from parpass.ir.serialization import decode_function, encode_function
from parpass.ir.tir import PrimFunc
from parpass.parallel.capture import Capture, Emission
from parpass.parallel.error_chain import pickled_chain
from parpass.parallel.load import run_delay
from parpass.parallel.pickling import dumps_for_workers
from parpass.parallel.protocol import (
    ChunkDone,
    Fetched,
    FetchKept,
    Hello,
    RunChunk,
    StageEmissions,
    Stop,
    TaskError,
    WorkerFailure,
    decode_to_worker,
    encode,
)
from parpass.parallel.resident import ResidentCache
from parpass.parallel.store import StoreReader, StoreWriter
from parpass.parallel.wave import KEPT, ProgressSlots, WaveFile, WaveHeader, scratch_dir
from parpass.transform.analysis import FunctionAnalysis
from parpass.transform.context import PassContext, inside_pass
from parpass.transform.executor import view_reason
from parpass.transform.pass_info import PassInfo
from parpass.transform.passes import FunctionLevelPass, attach_pass_note
from parpass.transform.statistics import PASS_STATISTICS, counting

#: Seconds a worker waits for a message before it collects the cyclic garbage its chunks left frozen...
_COLLECT_AFTER = 0.5
#: ...and at most once in this many seconds: a collection walks the resident IR (~50 ms for 3,000 functions),
#: and a wave that comes meanwhile waits for it (a parent that works half a second in-process between two
#: waves would meet one every time), as does the parent's own work for a core. A collection that finds
#: fewer cyclic objects than _WORTH_COLLECTING doubles the spacing, up to the most; one that finds more
#: sets it back.
_COLLECT_EVERY = 5.0
_COLLECT_EVERY_MOST = 40.0
_WORTH_COLLECTING = 1000
_collect_every = _COLLECT_EVERY
#: Whether a chunk froze what it built since this worker last collected (see run_chunk), and when it last did.
_froze = False
_collected_at = -_COLLECT_EVERY_MOST

#: The results this worker keeps decoded for the parent (waves that said ``keep``), by token, until the parent
#: fetches their bytes or lets them go (FetchKept); a token names its worker (see _new_token).
_kept: dict[bytes, BaseFunc] = {}
_tokens = itertools.count()
#: Bytes past which a store that took fetched results starts a new one (as a wave's store_limit does).
_FETCH_STORE_LIMIT = 1 << 28


def _new_token() -> bytes:
    """A name for a kept result, unique among this parent's workers: b"K", this process id, a counter (17 bytes,
    so never equal to a digest)."""
    return b"K" + os.getpid().to_bytes(8, "little") + next(_tokens).to_bytes(8, "little")


#: The length of a token: b"K", a process id and a counter of 8 bytes each.
_TOKEN_SIZE = 17


def token_pid(token: bytes) -> int | None:
    """The process id of the worker that keeps (or kept) the result ``token`` names; None for a digest."""
    if len(token) != _TOKEN_SIZE or token[:1] != b"K":
        return None
    return int.from_bytes(token[1:9], "little")


class FunctionNotSent(BaseException):
    """A chunk needs a function whose bytes its wave left out, held by another worker (a cluster sends each
    worker first only what it does not hold and no other worker does). Whatever the chunk then makes of it
    (an error of a pass, or one the pass catches), its answer is dropped and it runs again on the whole
    wave: see :func:`parpass.parallel.cluster.run_cluster_chunk`. A BaseException, so that pass code
    catching ``Exception`` around a lookup is less likely to go on with its chunk for nothing."""

    def __init__(self, index: int) -> None:
        super().__init__(f"the bytes of function {index} were not sent to this worker")
        self.index = index


class WaveSource(Protocol):
    """Where a worker reads a wave: the file of a local crew (:class:`~parpass.parallel.wave.WaveFile`), or
    the bytes a cluster sent (:class:`parpass.parallel.cluster.WaveBytes`)."""

    path: str  # the wave's name, which every answer carries back
    header: WaveHeader

    def stored_bytes(self, where: int, offset: int, length: int) -> memoryview: ...

    def function_bytes(self, index: int) -> memoryview: ...

    def close(self) -> None: ...


class Progress(Protocol):
    """Where a worker says which function it is running (see :class:`~parpass.parallel.wave.ProgressSlots`)."""

    def start(self, slot: int, index: int) -> None: ...

    def idle(self, slot: int) -> None: ...


class ResultSink(Protocol):
    """Where a chunk's new function bytes go: a store file (:class:`~parpass.parallel.store.StoreWriter`),
    or the answer itself on a cluster. ``append`` returns the store's name and the blobs' offsets in it."""

    def append(self, directory: str, limit: int, blobs: Sequence[bytes | memoryview]) -> tuple[str, list[int]]: ...


class _Recorder(PassInstrument):
    """Stands in for the parent's instruments: records nested pass callbacks for replay."""

    def __init__(self) -> None:
        self.sink: list[Emission] | None = None

    def _record(self, callback: str, mod: IRModule, info: PassInfo, error: BaseException | None = None) -> None:
        if self.sink is None:
            return
        names = mod.names()
        crossing = None if error is None else _crossing(error)
        payload = (info, names, [mod.encoded_function(n) for n in names], dict(mod.attrs), crossing)
        self.sink.append(Emission("instrument", callback, record=cloudpickle.dumps(payload)))

    def should_run(self, mod: IRModule, info: PassInfo) -> bool:
        return True

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        self._record("before", mod, info)

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        self._record("after", mod, info)

    def on_pass_error(self, mod: IRModule, info: PassInfo, error: BaseException) -> None:
        self._record("error", mod, info, error)


def _crossing(error: BaseException) -> bytes:
    """``error`` with the exceptions it was raised from, for the parent (see error_chain.py); a stand-in for
    one that does not pickle."""
    data = pickled_chain(error, _stand_in) or pickled_chain(_stand_in(error), _stand_in)
    assert data is not None, "a RuntimeError of a str pickles"
    return data


def _stand_in(error: BaseException) -> BaseException:
    """What crosses to the parent for an exception that does not pickle: its type's name and its message."""
    return RuntimeError(f"{type(error).__name__}: {_text(error)}")


def pack_passes(passes: Sequence[FunctionLevelPass]) -> bytes:
    """``passes`` pickled for a wave, with the source the parent's :mod:`linecache` holds that is in no file.

    A pass defined in a notebook cell (or a REPL) has a code object whose file
    does not exist: only the parent's ``linecache`` knows its lines. The worker
    gets them too, so that its tracebacks show the lines the serial run's show.
    Only the entries of the code shipped by value go (cloudpickle writes each
    code object's file name into the bytes), so a long notebook session does
    not send every cell it ever ran. Raises whatever pickling the passes raises.
    """
    pickled = dumps_for_workers(list(passes))
    sources = {
        name: entry
        for name, entry in list(linecache.cache.items())
        if len(entry) == 4 and entry[1] is None and name.encode("utf-8", "surrogatepass") in pickled
    }
    packed: bytes = cloudpickle.dumps((pickled, sources))
    return packed


#: The chains of passes this worker unpickled lately, by their pickled bytes, most recent last.
_CHAINS: OrderedDict[bytes, list[FunctionLevelPass]] = OrderedDict()
_CHAINS_KEPT = 8


def _passes_of(pickled: bytes) -> list[FunctionLevelPass]:
    """The chain ``pickled`` holds: the same objects as the last wave of the same chain got.

    The parent runs a pass object again on every call; so does a worker, rather than a copy per wave:
    a class-form pass refers to itself (through its bound pass function), so each copy would be
    cyclic garbage after its wave, and it holds its memo of that wave's module view.
    """
    chain = _CHAINS.pop(pickled, None)
    if chain is None:
        chain = cloudpickle.loads(pickled)
        while len(_CHAINS) >= _CHAINS_KEPT:
            _CHAINS.popitem(last=False)
    _CHAINS[pickled] = chain
    return chain


class _Wave:
    """A worker's state for one wave: the file, the passes, the context, the stage views."""

    def __init__(self, file: WaveSource, cache: ResidentCache) -> None:
        self.file = file
        header = self.file.header
        self.cache = cache
        cache.resize(header.cache_budget)
        self.passes: list[FunctionLevelPass]
        pickled, sources = cloudpickle.loads(header.passes)
        linecache.cache.update(sources)  # so that a traceback here shows the lines the parent's would
        self.passes = _passes_of(pickled)
        snapshot = cloudpickle.loads(header.context)
        self.recorder = _Recorder()
        self.capture = Capture()
        instruments = [self.recorder] if header.record_instruments else None
        self.ctx = PassContext.from_snapshot(snapshot, instruments)
        # the context of a function computed only to be looked up: what it counts is its own task's
        quiet = dataclasses.replace(snapshot, config=(*snapshot.config, (PASS_STATISTICS, False)))
        self.quiet_ctx = PassContext.from_snapshot(quiet)
        self.counting = bool(self.ctx.config[PASS_STATISTICS])
        self.attrs = msgspec.msgpack.decode(header.module_attrs)
        self.recomputed = [0] * len(self.passes)
        self.hits = self.misses = 0
        self._loading = 0
        self._inputs: dict[int, BaseFunc] = {}  # the wave's input functions this worker has in hand
        self._pinned: dict[int, BaseFunc] = {}  # resident functions whose bytes the wave left out (see pin)
        #: functions whose chain starts at its second pass: where the bytes to start from lie
        self.probes = {index: (where, offset, length) for index, where, offset, length in header.probes}
        self._probe_digests: dict[int, bytes] = {}
        self._computed: dict[int, bytes] = {}  # digests of the wave's functions the parent did not know
        #: the chunk being run needed a function kept by another worker (see _bytes): its answer is void
        self.missed = False
        self.views: list[IRModule] = [self._input_view()]
        for stage in range(1, len(self.passes)):
            self.views.append(self._stage_view(stage))

    @functools.cached_property
    def index(self) -> dict[str, int]:
        """Each function's module order index by name: built on the wave's first lookup of another function
        (most waves make none; 0.2-0.6 ms for 3,000 names at each wave's start otherwise)."""
        return {name: i for i, name in enumerate(self.file.header.names)}

    def digest(self, index: int) -> bytes:
        """The digest of function ``index``'s bytes: sent by the parent, else computed here (once a wave)."""
        known = self.file.header.digests[index] or self._computed.get(index)
        if not known:
            known = self._computed[index] = digest_of(self._bytes(index))
        return known

    def _bytes(self, index: int) -> memoryview:
        """Function ``index``'s bytes; :class:`FunctionNotSent` for one that another worker keeps decoded (it
        made it, and the parent has not fetched it): the chunk's answer then says so, and counts for nothing."""
        if self.file.header.where[index] == KEPT:
            self.missed = True
            raise FunctionNotSent(index)
        return self.file.function_bytes(index)

    def input(self, index: int) -> BaseFunc:
        """Function ``index`` as the wave gets it: resident if this worker holds it, else decoded.

        Raises :class:`~parpass.errors.IRFormatError` for bytes that do not decode.
        """
        func = self._inputs.get(index)
        if func is not None:
            return func
        # Bytes the parent holds without their digest (read from a file, encoded there) are digested here: ~2 us,
        # where decoding takes ~30, and this worker may hold them from a run before.
        digest = self.digest(index)
        func = self.cache.get(digest)
        if func is None:
            func = self._pinned.get(index) or _kept.get(digest)
        if func is None:
            data = self._bytes(index)
            func = decode_function(data, f"@{self.file.header.names[index]}")
            self.misses += 1
            self.cache.put(digest, func, len(data))
        else:
            self.hits += 1
        self._inputs[index] = func
        return func

    def pin(self, indices: Sequence[int]) -> list[int]:
        """Hold for this wave the functions ``indices``, whose bytes it left out because the parent knows
        this worker holds them resident; returns those it no longer holds (evicted since), which it needs
        the bytes of."""
        lacking = []
        for index in indices:
            func = self.cache.get(self.digest(index))
            if func is None:
                lacking.append(index)
            else:
                self._pinned[index] = func
        return lacking

    def chunk_input(self, index: int) -> BaseFunc:
        """What the chain starts from for function ``index``: its input, or what the first pass made of it."""
        place = self.probes.get(index)
        if place is None:
            return self.input(index)
        data = self.file.stored_bytes(*place)
        digest = self._probe_digests[index] = digest_of(data)
        func = self.cache.get(digest)
        if func is None:
            func = decode_function(data)
            self.misses += 1
            self.cache.put(digest, func, len(data))
        else:
            self.hits += 1
        return func

    def chunk_digest(self, index: int) -> bytes:
        """The digest of the bytes :meth:`chunk_input` started from."""
        known = self._probe_digests.get(index)
        return known if known is not None else self.digest(index)

    def _input_view(self) -> IRModule:
        def load(name: str) -> BaseFunc:
            return self.input(self.index[name])

        reason = view_reason(self.passes[0].info.name)
        return IRModule.from_loader(self.file.header.names, load, self.attrs, read_only=reason)

    def _stage_view(self, stage: int) -> IRModule:
        """The module before pass ``stage``, each function computed from the previous view on demand."""
        before, p = self.views[stage - 1], self.passes[stage - 1]

        def load(name: str) -> BaseFunc:
            outermost = not self._loading  # the lookup of the pass itself, not an earlier stage it pulls in
            self._loading += 1
            try:
                func = before[name]
                if not applies(p, func):
                    return func
                if outermost:
                    self.recomputed[stage] += 1
                # Computed here only to be looked up: its output and events belong to its own task.
                saved_sink, self.capture.sink = self.capture.sink, []
                saved_record, self.recorder.sink = self.recorder.sink, None
                try:
                    with self.quiet_ctx:  # counts nothing (see __init__)
                        return p.transform_one(func, name, before, self.quiet_ctx)
                finally:
                    self.capture.sink, self.recorder.sink = saved_sink, saved_record
            finally:
                self._loading -= 1

        reason = view_reason(self.passes[stage].info.name)
        return IRModule.from_loader(self.file.header.names, load, self.attrs, read_only=reason)

    def close(self) -> None:
        self.views.clear()
        self._inputs.clear()
        self._pinned.clear()
        self.file.close()


def applies(p: FunctionLevelPass, func: BaseFunc) -> bool:
    """Whether function-level pass ``p`` visits ``func``."""
    return p.visits(type(func), func.attrs)


class Seat:
    """A worker's serving state: its resident functions and the wave it serves now.

    ``open_wave`` opens a wave by its name; ``store`` takes the new bytes of its chunks.
    """

    def __init__(
        self,
        seat: int,
        progress: Progress,
        store: ResultSink,
        open_wave: Callable[[str], WaveSource],
        cache: ResidentCache | None = None,
    ) -> None:
        self.seat = seat
        self.progress = progress
        self.cache = ResidentCache(0) if cache is None else cache
        self.store = store
        self.open_wave = open_wave
        self.wave: _Wave | None = None

    def wave_of(self, path: str) -> _Wave:
        wave = self.wave
        if wave is None or wave.file.path != path:
            if wave is not None:  # a worker serves one wave at a time
                self.wave = None
                wave.close()
            wave = self.wave = _Wave(self.open_wave(path), self.cache)
        return wave

    def close_wave(self) -> None:
        """Close the wave served now, if any (the resident functions stay)."""
        if self.wave is not None:
            self.wave.close()
            self.wave = None

    def close(self) -> None:
        self.close_wave()
        self.cache.clear()


#: The resident functions this worker's last seat left when the parent let it go, for its next seat (a new crew
#: on the same pool); None when there are none, or that seat idled out and freed them.
_left_behind: ResidentCache | None = None


def serve(
    address: str, authkey: bytes, seat: int, progress_path: str, seats: int, idle: float, store_prefix: str
) -> int:
    """The task a crew seat runs: serve the parent's chunks on this worker until it stops us.

    Returns the number of chunks served when the parent closes the connection
    or sends :class:`~parpass.parallel.protocol.Stop`, or after ``idle``
    seconds without a message (the parent then starts a new crew).

    A seat the parent lets go leaves its resident functions to the worker's next seat, as they are (freeing
    16,000 functions took 0.4 s, which the parent's exit waited for): a new crew on this pool finds them by
    their digests, and a worker that loky then lets go skips freeing them (see
    :func:`parpass.parallel.backend._skip_teardown_after_a_clean_exit`). A seat that idles out frees them.
    """
    from multiprocessing.connection import Client

    global _left_behind
    progress = ProgressSlots(progress_path, seats, create=False)
    store = StoreWriter(store_prefix)
    readers: dict[str, StoreReader] = {}
    cache, _left_behind = _left_behind, None
    state = Seat(seat, progress, store, lambda path: WaveFile(path, readers), cache)
    served = 0
    let_go = False  # by the parent (it closed the connection, or said Stop), rather than idled out
    try:
        with Client(address, family="AF_UNIX", authkey=authkey) as conn:
            conn.send_bytes(encode(Hello(seat, os.getpid(), state.cache.digests())))
            while _wait_for_work(conn, idle):
                try:
                    message = decode_to_worker(conn.recv_bytes())
                except EOFError:
                    let_go = True
                    break
                if isinstance(message, Stop):
                    let_go = True
                    break
                if isinstance(message, FetchKept):
                    conn.send_bytes(encode(fetch_kept(state, message)))
                    continue
                conn.send_bytes(encode(serve_chunk(state, message)))
                served += 1
    except (EOFError, ConnectionError):  # the parent went away: nothing left to serve
        let_go = True
    finally:
        if let_go:
            state.close_wave()
            _left_behind = state.cache
        else:
            state.close()
        store.close()
        for reader in readers.values():
            reader.close()
        progress.close()
    return served


def _wait_for_work(conn: Connection, idle: float) -> bool:
    """Wait up to ``idle`` seconds for the parent's next message; False if none came.

    A worker that waited :data:`_COLLECT_AFTER` seconds in vain has nothing to
    hurry for: it collects then the cyclic garbage its chunks left frozen (see
    :func:`run_chunk`), unless it did less than ``_collect_every`` seconds ago
    (it collects once that much time has passed, if still idle).
    """
    start = time.monotonic()
    deadline = start + idle
    if _froze:
        due = min(_collection_time(start), deadline)
        if conn.poll(max(due - start, 0.0)):
            return True
        if due >= deadline:
            return False
        collect_frozen_garbage()
    return conn.poll(max(deadline - time.monotonic(), 0.0))


def collection_due(idle_since: float, now: float) -> bool:
    """Whether a worker idle since ``idle_since`` should collect the garbage its chunks froze (see
    :func:`_wait_for_work`)."""
    return _froze and now >= _collection_time(idle_since)


def _collection_time(idle_since: float) -> float:
    """When a worker idle since ``idle_since`` collects: idle long enough, and not collected too lately."""
    return max(idle_since + _COLLECT_AFTER, _collected_at + _collect_every)


def collect_frozen_garbage() -> None:
    """Collect the cyclic garbage the chunks froze, and space the next collection by what this one found."""
    global _froze, _collected_at, _collect_every
    _froze = False
    gc.unfreeze()
    found = gc.collect()
    gc.freeze()  # what survives, this process's imports included (see parpass.parallel.backend._mark_worker)
    _collected_at = time.monotonic()
    worth = found >= _WORTH_COLLECTING
    _collect_every = _COLLECT_EVERY if worth else min(2 * _collect_every, _COLLECT_EVERY_MOST)


def fetch_kept(state: Seat, message: FetchKept) -> Fetched:
    """The bytes of the kept results ``message.tokens``, appended to this worker's store; each then resident
    under its digest (evicted as any), no longer kept: the next wave names it by that digest."""
    for token in message.drop:
        _kept.pop(token, None)
    out = Fetched()
    blobs: list[bytes] = []
    for token in message.tokens:
        func = _kept.pop(token, None)
        if func is None:
            out.lost.append(token)
            continue
        try:
            data = encode_function(func)
        except Exception as err:  # a value the IR cannot hold: the parent names the pass and the function
            out.unencodable.append((token, f"{type(err).__name__}: {err}"))
            out.unencodable_errors.append(pickled_chain(err, _stand_in) or b"")
            continue
        digest = digest_of(data)
        state.cache.put(digest, func, len(data))
        out.tokens.append(token)
        out.lengths.append(len(data))
        out.digests.append(digest)
        blobs.append(data)
    if blobs:
        out.store, out.offsets = state.store.append(scratch_dir(), _FETCH_STORE_LIMIT, blobs)
    return out


def serve_chunk(state: Seat, message: RunChunk) -> ChunkDone | WorkerFailure:
    try:
        wave = state.wave_of(message.wave)
        try:
            done = run_chunk(wave, message.indices, state.progress, state.seat, state.store)
        except FunctionNotSent:  # (it set wave.missed)
            done = ChunkDone(message.wave)
        if wave.missed:  # it needed what another worker keeps: void (its own kept results go)
            for at in done.kept:
                _kept.pop(done.digests[at], None)
            return ChunkDone(message.wave, lacked=True)
        return done
    except BaseException as err:  # a wave this worker cannot run at all: the parent reports it
        if state.wave is not None:
            state.wave.close()
            state.wave = None
        text = "".join(traceback.format_exception(type(err), err, err.__traceback__))
        return WorkerFailure(type(err).__qualname__, _text(err), text)


def run_chunk(wave: _Wave, indices: Sequence[int], progress: Progress, slot: int, store: ResultSink) -> ChunkDone:
    """Apply the wave's chain of passes to the functions ``indices``; their new bytes go to ``store``."""
    global _froze
    start, cpu_start = time.perf_counter(), time.process_time()
    gc_was_enabled = gc.isenabled()
    gc.disable()  # setting up and decoding build many small objects: collecting costs several times the work
    out = ChunkDone(wave.file.path)
    try:
        names = wave.file.header.names
        capture, recorder, ctx, views = wave.capture, wave.recorder, wave.ctx, wave.views
        wave.recomputed = [0] * len(wave.passes)
        wave.hits = wave.misses = 0
        wave.missed = False
        # Everything here is part of the application of a pass the parent numbered (opt-bisect).
        with capture, ctx, inside_pass():
            # Decoded together, then pass by pass, as the serial run goes: a pass's code and data stay
            # in the processor's caches, and the chunk's IR lies together in memory (~10% faster than
            # taking each function through the whole chain in turn).
            originals = _inputs(wave, indices, progress, slot, out)
            funcs = list(originals)
            failed = [False] * len(indices)  # a pass raised on it: it goes no further
            changed_by = [0] * len(indices)  # the last stage that returned a new function
            first = [1 if index in wave.probes else 0 for index in indices]  # the stage each function starts at
            _drop_values(wave.passes)
            for stage, p in enumerate(wave.passes):
                view = views[stage]
                stage_start, stage_cpu, stage_waited = time.perf_counter(), time.process_time(), run_delay()
                counts: dict[tuple[str, str], int] | None = {} if wave.counting else None
                with counting(counts):  # this stage's counts, restored however the stage ends
                    for k, index in enumerate(indices):
                        func = funcs[k]
                        if func is None or failed[k] or stage < first[k] or not applies(p, func):
                            continue
                        progress.start(slot, index)
                        sink = recorder.sink = capture.begin()
                        try:
                            new = p.transform_one(func, names[index], view, ctx)
                        except BaseException as err:
                            # SystemExit and KeyboardInterrupt from pass code too: the serial run raises them
                            # from the pass; escaping the task would look like a broken pool.
                            out.errors.append(_task_error(stage, index, err))
                            failed[k] = True
                        else:
                            if new is not func:
                                funcs[k], changed_by[k] = new, stage
                        finally:
                            recorder.sink = None
                        if sink:
                            out.emissions.append(StageEmissions(stage, index, sink))
                    _send_values(wave, stage, p, out)
                if counts is not None:
                    out.stage_counts.append([(p_name, name, n) for (p_name, name), n in sorted(counts.items())])
                out.stage_wall.append(time.perf_counter() - stage_start)
                out.stage_cpu.append(time.process_time() - stage_cpu)
                out.stage_waited.append(run_delay() - stage_waited)
            progress.idle(slot)
            kept = time.perf_counter()
            _results(wave, indices, originals, funcs, failed, changed_by, store, out)
            out.result_seconds = time.perf_counter() - kept
    finally:
        progress.idle(slot)
        # What the chunk built (the resident IR, mostly) leaves the collector's generations unscanned: with
        # them, the next collection walked it all while the parent waited for this answer (20-26 ms after a
        # chunk of 135 functions). Cyclic garbage frozen with it is collected when the worker is idle.
        gc.freeze()
        _froze = True
        if gc_was_enabled:
            gc.enable()
    out.seconds = time.perf_counter() - start
    out.cpu_seconds = time.process_time() - cpu_start
    out.recomputed = wave.recomputed
    out.hits, out.misses = wave.hits, wave.misses
    return out


def _results(
    wave: _Wave,
    indices: Sequence[int],
    originals: Sequence[BaseFunc | None],
    funcs: Sequence[BaseFunc | None],
    failed: Sequence[bool],
    changed_by: Sequence[int],
    store: ResultSink,
    out: ChunkDone,
) -> None:
    """Encode what the chain changed into ``store`` (and, unless the wave keeps its results, what it took as
    kept here and left unchanged), keep every final function resident, list the results."""
    header = wave.file.header
    blobs: list[bytes] = []
    stored: list[int] = []  # the positions in out.indices of the results stored (the others are kept)
    distinct: dict[tuple[bool, bytes], int] = {}  # the chunk's new heads so far, by kind and encoded attributes
    for k, index in enumerate(indices):
        func, original = funcs[k], originals[k]
        if func is None or original is None or failed[k]:
            continue
        if func is original and (header.keep or header.where[index] != KEPT):
            out.same.append(index)
            out.same_digests.append(wave.chunk_digest(index))
            continue
        # (unchanged, but kept here by the wave before, whose bytes the parent lacks: a wave that keeps nothing
        # sends them now, as it sends what it changed, rather than leave them to a fetch of their own)
        new_head = type(func) is not type(original) or (
            func.attrs is not original.attrs and func.attrs != original.attrs
        )
        made = _result(wave, func, index, changed_by[k], out, new_head)
        if made is None:
            continue
        data, digest, head = made
        if data:
            stored.append(len(out.indices))
            blobs.append(data)
        if not header.digests[index] and index not in wave.probes:  # the parent's bytes, digested here
            out.learned.append(index)
            out.learned_digests.append(wave.digest(index))
        if head is not None:
            _note_head(out, distinct, func, head)
            if out.heads_keep_targets and (
                type(func) is not type(original)
                or bool(func.attrs.get(SKIP_OPTIMIZATION, False)) != bool(original.attrs.get(SKIP_OPTIMIZATION, False))
            ):
                out.heads_keep_targets = False
        out.indices.append(index)
        out.lengths.append(len(data))
        out.digests.append(digest)
    out.offsets = [0] * len(out.indices)
    if blobs:
        out.store, offsets = store.append(os.path.dirname(wave.file.path), header.store_limit, blobs)
        deque(map(out.offsets.__setitem__, stored, offsets), maxlen=0)


def _result(
    wave: _Wave, func: BaseFunc, index: int, stage: int, out: ChunkDone, new_head: bool
) -> tuple[bytes, bytes, bytes | None] | None:
    """The bytes and digest of ``func``, the chain's result for function ``index`` (resident here from now),
    and, where its class or attributes changed (``new_head``), its encoded attributes, which the answer
    carries (see _note_head); for a wave that keeps its results, no bytes and a token naming it here (see
    ChunkDone.kept: only the attributes are encoded now, the rest at a fetch); None for a value the IR cannot
    hold (an error of pass ``stage``, in ``out``)."""
    keep = wave.file.header.keep
    try:
        data = b"" if keep else encode_function(func)
        head = _attrs_key(func.attrs) if new_head else None
    except Exception as err:  # a value the IR cannot hold: an error of the pass that returned it
        attach_pass_note(err, wave.passes[stage].info.name, wave.file.header.names[index])
        out.errors.append(_task_error(stage, index, err))
        return None
    if keep:
        token = _new_token()
        _kept[token] = func
        out.kept.append(len(out.indices))
        return data, token, head
    digest = digest_of(data)
    wave.cache.put(digest, func, len(data))
    return data, digest, head


def _drop_values(passes: Sequence[FunctionLevelPass]) -> None:
    """Forget what the chain's analyses hold of a chunk that failed before this one."""
    for p in passes:
        if isinstance(p, FunctionAnalysis):
            p.take_values()


def _send_values(wave: _Wave, stage: int, p: FunctionLevelPass, out: ChunkDone) -> None:
    """If ``p`` (stage ``stage``) is an analysis, put the values it computed in this chunk into ``out``."""
    if isinstance(p, FunctionAnalysis):
        for name, data in p.take_values().items():
            out.value_stage.append(stage)
            out.value_at.append(wave.index[name])
            out.values.append(data)


def _note_head(out: ChunkDone, distinct: dict[tuple[bool, bytes], int], func: BaseFunc, attrs: bytes) -> None:
    """List the new head of ``func`` (the next result of ``out``; ``attrs``: its attributes encoded): its place
    in ``out.heads``, which lists it the first time ``distinct`` (by kind and encoded attributes) meets it."""
    prim = isinstance(func, PrimFunc)  # what decoding the bytes gives
    key = (prim, attrs)
    at = distinct.setdefault(key, len(distinct))
    if at == len(out.heads):
        out.heads.append((prim, dict(func.attrs)))
    out.head_at.append(len(out.indices))
    out.head_of.append(at)


#: Equal encodings are equal attributes, of the same types (``1`` and ``True`` encode apart).
_attrs_key = msgspec.msgpack.Encoder().encode


def _inputs(
    wave: _Wave, indices: Sequence[int], progress: Progress, slot: int, out: ChunkDone
) -> list[BaseFunc | None]:
    """The functions ``indices``, resident or decoded; None for bytes that do not decode (a module can hold
    such bytes unread, e.g. after a load with ``validate=False``), reported as the function's error in the
    first pass that visits it, where the serial run meets it."""
    funcs: list[BaseFunc | None] = []
    for index in indices:
        progress.start(slot, index)
        try:
            funcs.append(wave.chunk_input(index))
        except IRFormatError as err:
            kind, attrs = peek_function(wave.file.function_bytes(index))
            stage = next((s for s, p in enumerate(wave.passes) if p.visits(kind, attrs)), 0)
            out.errors.append(_task_error(stage, index, err))
            funcs.append(None)
    return funcs


def _task_error(stage: int, index: int, err: BaseException) -> TaskError:
    text = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    return TaskError(stage, index, pickled_chain(err, _stand_in), type(err).__qualname__, _text(err), text)


def _text(err: BaseException) -> str:
    """``str(err)``, or what :mod:`traceback` shows when the exception's ``__str__`` itself raises."""
    try:
        return str(err)
    except Exception:
        return "<exception str() failed>"


def warm_up(pause: float = 0.0) -> int:
    """A task that loads parpass in a worker (so a fresh pool's first wave does not pay for imports).

    ``pause`` keeps the worker busy a moment, so that each of several warm-up tasks lands on its own worker.
    """
    from parpass._loading import load_all

    load_all()  # the standard passes and options a pass may look up

    time.sleep(pause)
    return os.getpid()


__all__ = ["Seat", "applies", "pack_passes", "run_chunk", "serve", "serve_chunk", "warm_up"]
