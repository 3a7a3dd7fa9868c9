"""Function-level passes on a Dask cluster (``pip install "parpass[dask]"``).

The parent and the cluster's workers share nothing but the network. A wave's
data (passes, context, every function's bytes) reaches each worker of the
crew once, as one Dask data item; a chunk's answer carries the new bytes of
the functions it changed, which the parent appends to its own result store,
so the module it returns is exactly what a local run gives. A chunk goes to
the worker that holds its functions decoded (a strict Dask worker restriction:
when that worker is lost, the crew decides where the chunk runs, see
:class:`ClusterCrew`), and each worker keeps the same bounded resident cache
as a local one.

Choose it with the config key ``parpass.scheduler`` (a scheduler address), or
install a :class:`DaskBackend` over your own ``distributed.Client`` with
:func:`~parpass.parallel.backend.set_backend`. Dask is imported only here, and
only when a backend is made.

Faults keep the local backend's guarantees (see :class:`ClusterCrew`): a
function that kills its worker is named, and costs one worker; a worker lost
to anything else costs nothing but time.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Collection, Container, Iterator, Mapping
from multiprocessing.pool import ThreadPool
from typing import TYPE_CHECKING, Any, cast

import msgspec

from parpass.parallel import backend as backend_mod
from parpass.parallel import worker as worker_mod
from parpass.parallel.backend import PoolLost, Task
from parpass.parallel.crew import CrewLost, StoreKeeper
from parpass.parallel.protocol import ChunkDone, FromWorker, RunChunk, decode_from_worker, encode
from parpass.parallel.store import StoreReader
from parpass.parallel.wave import Busy, WaveHeader, scratch_dir

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

#: distributed's Client and Future: typed loosely here (Dask is optional, and only partly annotated)
Client = Any
Future = Any

_LEN = struct.Struct("<Q")

#: Seconds to wait for a cluster's first worker, and for warm-up tasks.
_WORKER_WAIT = 60.0
#: Seconds between two questions to the scheduler about which workers it has (see ClusterCrew.receive).
_CHECK_EVERY = 0.25
#: Seconds between two looks at whether the worker holding a finished chunk's result is still there, while
#: the parent fetches that result.
_FETCH_CHECK = 1.0
#: Seconds between two questions to a cluster's workers about what they run (see ClusterCrew.running).
_ASK_EVERY = 0.25
#: Seconds an idle cluster worker's collector sleeps between looks (see parpass.parallel.worker).
_COLLECT_POLL = 0.25
#: Seconds a client the backend opened batches its messages to the scheduler (Dask's own: 10 ms). A wave's
#: chunks go out in a burst, of which all but the first waited that long: the second worker started its
#: first chunk ~10 ms after the first (the heavy pass on a 2-worker LocalCluster: 89% of local -> 91%).
_SEND_INTERVAL = 1e-3


# ---------------------------------------------------------------------------------------------------------------------
# the wave on the wire


#: The offset of a function whose bytes a packed wave leaves out: held by the worker it goes to, or by another.
HELD_HERE = -1
HELD_ELSEWHERE = -2


def pack_wave(
    header: WaveHeader, stores: Mapping[str, StoreReader], held: Container[int] = (), elsewhere: Container[int] = ()
) -> bytes:
    """One bytes object holding the wave ``header`` and the bytes of every function but those ``held`` (the
    worker it goes to holds them resident: their offset is :data:`HELD_HERE`) and those held ``elsewhere``
    (by other workers: :data:`HELD_ELSEWHERE`), and each probe's, read from the parent's ``stores``: what a
    cluster worker gets instead of a wave file it could not open."""
    readers = [stores[path] for path in header.stores]
    parts: list[memoryview] = []
    offsets: list[int] = []
    at = 0
    for index, (where, offset, length) in enumerate(zip(header.where, header.offsets, header.lengths, strict=True)):
        if index in held:
            offsets.append(HELD_HERE)
            continue
        if index in elsewhere:
            offsets.append(HELD_ELSEWHERE)
            continue
        parts.append(readers[where].view(offset, length))
        offsets.append(at)
        at += length
    probes: list[tuple[int, int, int, int]] = []
    for index, where, offset, length in header.probes:
        parts.append(readers[where].view(offset, length))
        probes.append((index, 0, at, length))
        at += length
    packed = msgspec.structs.replace(header, stores=[""], where=[0] * len(offsets), offsets=offsets, probes=probes)
    head = msgspec.msgpack.encode(packed)
    return b"".join([_LEN.pack(len(head)), head, *parts])


class WaveBytes:
    """A wave as a cluster worker reads it (see :func:`pack_wave`); named ``path`` like a wave file."""

    def __init__(self, path: str, payload: bytes) -> None:
        self.path = path
        self.payload = payload
        view = memoryview(payload)
        (size,) = _LEN.unpack_from(view, 0)
        self.header = msgspec.msgpack.decode(view[_LEN.size : _LEN.size + size], type=WaveHeader)
        self._data = view[_LEN.size + size :]
        offsets = self.header.offsets
        #: the functions whose bytes the parent left out because this worker holds them (see _Wave.pin)
        self.absent = [index for index, offset in enumerate(offsets) if offset == HELD_HERE]
        #: whether it left out functions other workers hold (a chunk that needs one runs on the whole wave)
        self.partial = HELD_ELSEWHERE in offsets
        #: whether a chunk asked for one of those (whatever it then made of the error: see run_cluster_chunk)
        self.missed = False

    def stored_bytes(self, where: int, offset: int, length: int) -> memoryview:
        return self._data[offset : offset + length]

    def lacks(self, indices: list[int]) -> bool:
        """Whether any of functions ``indices`` was left out because another worker holds it."""
        offsets = self.header.offsets
        return self.partial and any(offsets[index] == HELD_ELSEWHERE for index in indices)

    def function_bytes(self, index: int) -> memoryview:
        header = self.header
        start = header.offsets[index]
        if start == HELD_ELSEWHERE:  # a lookup of a function another worker holds: the chunk runs again, whole
            self.missed = True
            raise worker_mod.FunctionNotSent(index)
        if start < 0:  # pinned when the wave opened (see _ClusterSeat.ready_for): never read
            raise LookupError(f"wave {self.path}: the bytes of function {index} were left out (held here)")
        return self._data[start : start + header.lengths[index]]

    def close(self) -> None:
        """Nothing to release: the bytes go with the last reference."""


# ---------------------------------------------------------------------------------------------------------------------
# in a cluster worker


class _AnswerBytes:
    """Where a cluster chunk's new function bytes go: into its answer (a
    :class:`~parpass.parallel.worker.ResultSink`)."""

    def __init__(self) -> None:
        self.blobs: list[bytes | memoryview] = []
        self.size = 0

    def append(self, directory: str, limit: int, blobs: Sequence[bytes | memoryview]) -> tuple[str, list[int]]:
        offsets = []
        for blob in blobs:
            offsets.append(self.size)
            self.size += len(blob)
            self.blobs.append(blob)
        return "", offsets

    def take(self) -> bytes:
        data = b"".join(self.blobs)
        self.blobs, self.size = [], 0
        return data


class _Progress:
    """Which function this worker runs, since when (a :class:`~parpass.parallel.worker.Progress`): kept in its
    memory, which the parent reads through Dask (:func:`running_here`) when a chunk runs long."""

    def __init__(self) -> None:
        self.wave = ""
        self.index = -1
        self.since = 0.0

    def start(self, slot: int, index: int) -> None:
        self.index, self.since = index, time.monotonic()

    def idle(self, slot: int) -> None:
        self.index = -1


class _ClusterSeat:
    """This worker process's serving state, shared by its chunks (one at a time: see :data:`_LOCK`)."""

    def __init__(self) -> None:
        backend_mod.become_worker()
        self.sink = _AnswerBytes()
        self.progress = _Progress()
        self.payload = b""  # the bytes of the wave the next chunk opens (a worker serves one wave at a time)
        self.opened: WaveBytes | None = None  # the wave opened last (the open one, if any)
        self.seat = worker_mod.Seat(0, self.progress, self.sink, self._open)
        self.idle_since = time.monotonic()
        threading.Thread(target=self._collect_when_idle, name="parpass-collect", daemon=True).start()

    def _open(self, name: str) -> WaveBytes:
        payload, self.payload = self.payload, b""
        self.opened = WaveBytes(name, payload)
        return self.opened

    def ready_for(self, name: str, payload: bytes, indices: list[int]) -> bool:
        """Whether this worker can run the chunk ``indices`` of wave ``name``, whose ``payload`` the chunk
        brings: the wave is open here, with the bytes or the function itself of every function of the chunk
        (the parent leaves out the functions it knows this worker holds, one evicted since makes the payload
        lack it, and may leave out those other workers hold). A payload other than the one the open wave
        lacks functions of (the whole wave, sent after that) opens it again."""
        wave, opened = self.seat.wave, self.opened
        if not (
            wave is not None
            and opened is not None
            and opened.path == name
            and (payload is opened.payload or not opened.absent)
        ):
            self.seat.close_wave()
            self.payload = payload
            try:
                wave = self.seat.wave_of(name)
            except BaseException:  # serve_chunk opens it once more (with the payload _open took), and reports
                self.payload = payload
                return True
            if wave.pin(cast("WaveBytes", wave.file).absent):
                self.seat.close_wave()
                return False
        if cast("WaveBytes", wave.file).lacks(indices):
            self.seat.close_wave()
            return False
        return True

    def missed(self) -> bool:
        """Whether a chunk of the wave opened last asked for a function it left out for another worker (the
        wave may be closed since: a chunk that fails as a whole closes it)."""
        return self.opened is not None and self.opened.missed

    def _collect_when_idle(self) -> None:
        while True:
            time.sleep(_COLLECT_POLL)
            with _LOCK:
                if worker_mod.collection_due(self.idle_since, time.monotonic()):
                    worker_mod.collect_frozen_garbage()


#: Chunks of one worker process run one at a time (a Dask worker may have several threads).
_LOCK = threading.Lock()
_seat: _ClusterSeat | None = None


def _here() -> _ClusterSeat:
    global _seat
    if _seat is None:
        _seat = _ClusterSeat()
    return _seat


def run_cluster_chunk(name: str, payload: bytes, indices: list[int]) -> tuple[bytes, bytes] | None:
    """The task of one chunk on a cluster worker: the encoded answer, and the new bytes it refers to; None
    when the wave's payload lacks a function the chunk needs (one this worker no longer holds, or one another
    worker holds: its own or looked up): the parent then sends the wave whole and the chunk again.

    The chunk runs in a thread of parpass's own while Dask's task thread waits for it: Dask's sampling
    profiler walks the whole stack of every thread running a task, twice every 10 ms, and a pass's stack
    (visitors recursing into the IR) is deep; a waiting task's stack is a few frames."""
    return _chunk_thread().apply(_run_chunk_here, (name, payload, indices))


_chunk_threads: ThreadPool | None = None
_CHUNK_THREADS_LOCK = threading.Lock()


def _chunk_thread() -> ThreadPool:
    """The thread chunks run in (a daemon, as Dask's own task threads are: it holds up no worker's exit)."""
    global _chunk_threads
    with _CHUNK_THREADS_LOCK:  # a worker of several threads may start two chunks at once
        if _chunk_threads is None:
            _chunk_threads = ThreadPool(1)
        return _chunk_threads


def _run_chunk_here(name: str, payload: bytes, indices: list[int]) -> tuple[bytes, bytes] | None:
    with _LOCK:
        here = _here()
        if not here.ready_for(name, payload, indices):
            return None
        here.progress.wave = name
        try:
            answer = worker_mod.serve_chunk(here.seat, RunChunk(name, indices))
        finally:
            here.idle_since = time.monotonic()
        blob = here.sink.take()
        if here.missed():  # it asked for a function another worker holds: its answer cannot stand
            here.seat.close_wave()
            return None
    return encode(answer), blob


def running_here() -> tuple[str, int, float, int] | None:
    """What this cluster worker runs now: (wave, function index, seconds, pid); None when idle. Dask runs it
    in the worker's event loop, beside the chunk's thread."""
    here = _seat
    if here is None or here.progress.index < 0:
        return None
    progress = here.progress
    return progress.wave, progress.index, time.monotonic() - progress.since, os.getpid()


def run_isolated(name: str, payload: bytes, indices: list[int]) -> tuple[int, int]:
    """Run the chunk ``indices`` of wave ``name`` in a subprocess of this worker: its exit status (0: it ran)
    and the function it was running when it ended (-1: none). What tells a function that kills its
    process from a worker killed from outside, without risking this worker. A subprocess, not
    multiprocessing: Dask's workers are daemonic."""
    message = msgspec.msgpack.encode([name, indices, sys.path])  # the passes import as they do here
    child = subprocess.run(
        [sys.executable, "-c", "from parpass.parallel.cluster import _isolated_main; _isolated_main()"],
        input=_LEN.pack(len(message)) + message + payload,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    started = child.stdout.split()
    last = int(started[-1]) if started and child.returncode else -1
    return child.returncode, last


def _isolated_main() -> None:
    data = sys.stdin.buffer.read()
    (size,) = _LEN.unpack_from(data, 0)
    name, indices, sys.path[:] = msgspec.msgpack.decode(data[_LEN.size : _LEN.size + size])
    backend_mod.become_worker()
    waves = {name: WaveBytes(name, data[_LEN.size + size :])}
    seat = worker_mod.Seat(0, _SaysWhich(), _AnswerBytes(), waves.__getitem__)
    worker_mod.serve_chunk(seat, RunChunk(name, indices))


class _SaysWhich:
    """Progress written to stdout, one function index a line, so that it outlives the process."""

    def start(self, slot: int, index: int) -> None:
        os.write(1, b"%d\n" % index)

    def idle(self, slot: int) -> None:
        pass


def warm_cluster_worker() -> int:
    """Load parpass in a cluster worker; its pid."""
    with _LOCK:
        _here()
    return worker_mod.warm_up()


# ---------------------------------------------------------------------------------------------------------------------
# in the parent


def _known_keys(keys: list[str], dask_scheduler: Any = None) -> list[str]:
    """On the scheduler: which of ``keys`` it still tracks."""
    return [key for key in keys if key in dask_scheduler.tasks]


def _error_of(future: Future) -> BaseException | None:
    """The exception of a future that is done but did not finish (cancelled: the client or cluster left)."""
    try:
        error: BaseException | None = future.exception(timeout=_WORKER_WAIT)
    except BaseException as err:
        error = err
    return error


def restart(client: Client, addresses: list[str]) -> None:
    """Have the nannies of workers ``addresses`` start them again, without waiting for them to come back.

    Waiting (``Client.restart_workers``) would hold an error up to a minute where
    a worker comes back slowly, or never (a ``LocalCluster`` closes a nanny whose
    worker is gone when its lost-worker timeout fires); the next wave uses the
    workers there are then.
    """
    with contextlib.suppress(Exception):
        client.sync(
            client.scheduler.restart_workers,
            workers=addresses,
            timeout=_WORKER_WAIT,
            wait_for_workers=False,
            on_error="return",
            stimulus_id=f"parpass-restart-{time.time()}",
        )


#: What :meth:`ClusterCrew._answer` returns for a chunk whose worker lacked a function's bytes.
_LACKS = object()


class ClusterCrew(StoreKeeper):
    """The seats of a wave on a cluster: one per worker address, in address order.

    Every answer's new bytes land in the parent's own store. Each chunk is
    pinned to its seat's worker (strictly: Dask must not run a chunk that
    killed one worker on another). When a worker is lost (gone from the
    scheduler, or its chunk failed with ``KilledWorker``), the crew runs the
    functions that worker held again, alone, in a subprocess of a live worker
    (:func:`run_isolated`), and either raises :class:`CrewLost` naming the one
    the subprocess died on (a function that kills its process: one worker lost
    to it, whatever the scheduler's ``allowed-failures``), or sends the lost
    worker's chunks to live workers, which then serve its seat (a worker killed
    from outside: the wave goes on).
    """

    def __init__(self, client: Client, addresses: list[str], generation: int) -> None:
        super().__init__()
        self.client = client
        self.generation = generation
        self.closed = False
        found = client.run(os.getpid, workers=addresses, on_error="return")
        self.pids: dict[str, int] = {a: pid for a, pid in found.items() if isinstance(pid, int)}
        self.addresses = addresses = [a for a in addresses if a in self.pids]  # a worker that did not answer: gone
        self.size = len(addresses)
        self._route = list(addresses)  # the worker serving each seat now
        self._waves: dict[str, dict[str, Future]] = {}  # per wave: the data each worker reads it from
        self._pending: dict[Future, tuple[int, list[int]]] = {}
        self._sent: dict[Future, float] = {}  # when each pending chunk was sent (time.monotonic)
        self._late: set[int] = set()  # seats found running one function past the limit asked about
        self._asked = 0.0  # when the workers were last asked what they run
        self._checked = time.monotonic()  # when the scheduler was last asked which workers it has
        self._wave = ""
        self._header: WaveHeader | None = None  # the wave's, to send it whole where a worker lacks a function
        self._whole: set[str] = set()  # the workers that have the wave whole
        #: the workers the wave went to without what other workers hold: what each holds, what it lacks, and
        #: what no chunk of the wave reads
        self._top_up: dict[str, tuple[set[int], set[int], set[int]]] = {}
        #: whether a chunk of the wave needed a function its payload left out (the executor reads it)
        self.lacked = False
        self.keeps = False  # a cluster's workers store every result (see Crew.keeps)
        self._done: queue.SimpleQueue[Future] = queue.SimpleQueue()  # chunks done, as they come
        self._directory = scratch_dir()
        self._limit = 64 << 20

    def begin_wave(self, directory: str) -> None:
        super().begin_wave(directory)
        self._directory = directory

    def publish(self, header: WaveHeader, targets: Collection[int] | None = None) -> str:
        """Send each worker of the crew the wave, less the functions the executor says its seat holds
        resident (``owners``): a wave of a pipeline's next pass sends each worker about the other's half.

        Where the passes read no function but the one they transform (``targets`` given), each worker is
        sent only the targets no worker holds, so that its chunks, on what it holds, start at once (the
        functions no pass of the wave visits are sent to none: a module's PrimFuncs, in a wave of Relax
        passes); what others hold follows if it takes a chunk from another's queue (see :meth:`run`), the
        whole wave if a pass looks one up after all (the chunk runs again: see :func:`run_cluster_chunk`)."""
        self._limit = header.store_limit
        self._header = header
        self._wave = wave = f"parpass-wave-{os.urandom(8).hex()}"
        self._waves[wave] = {}
        self._whole.clear()
        self._top_up.clear()
        self.lacked = False
        held = self._held(header)
        for seat, address in enumerate(self._route):
            if self._route.count(address) > 1:  # a worker serving two seats (one was lost): the whole wave
                held[seat] = set()
        unread = set() if targets is None else set(range(len(header.digests))).difference(targets)
        if not any(held):  # nobody holds anything yet: the same bytes for all, sent once
            if unread:
                self._share(pack_wave(header, self.stores, (), unread), sorted(set(self._route)))
            else:
                self._send_whole(sorted(set(self._route)), again=True)
            return wave
        plans = dict(zip(self._route, held, strict=True))
        everyone = set().union(*held) if targets is not None else set()
        for address, skip in plans.items():
            elsewhere = everyone - skip
            self._waves[wave][address] = self._send(pack_wave(header, self.stores, skip, elsewhere | unread), [address])
            if elsewhere:
                self._top_up[address] = (skip, elsewhere, unread)
            elif not skip and not unread:
                self._whole.add(address)
        return wave

    def _top_up_for(self, address: str, indices: list[int]) -> None:
        """Before worker ``address`` gets the chunk ``indices``: if its payload left out some of them (another
        worker holds them: a chunk taken from that one's queue), send it the wave less only what it holds."""
        plan = self._top_up.get(address)
        if plan is None or plan[1].isdisjoint(indices):
            return
        assert self._header is not None
        del self._top_up[address]
        self._share(pack_wave(self._header, self.stores, plan[0], plan[2]), [address])

    def _held(self, header: WaveHeader) -> list[set[int]]:
        """Per seat, the functions of the wave whose digest the executor last saw it hold."""
        held: list[set[int]] = [set() for _ in self._route]
        holder = self.owners.get
        for index, digest in enumerate(header.digests):
            seat = holder(digest) if digest else None
            if seat is not None and seat < len(held):
                held[seat].add(index)
        return held

    def _send(self, payload: bytes, addresses: list[str]) -> Future:
        """``payload`` put in the memory of the workers ``addresses`` (one Dask data item)."""
        try:
            [future] = self.client.scatter([payload], workers=addresses, broadcast=len(addresses) > 1, hash=False)
        except Exception as err:  # a worker of the crew is gone (the scheduler has not seen it yet, say)
            raise CrewLost(f"the wave could not reach the crew's workers: {type(err).__name__}: {err}") from err
        return future

    def _send_whole(self, addresses: list[str], again: bool = False) -> None:
        """Send the wave, every function's bytes, to the workers ``addresses`` that lack it whole (``again``:
        to all of them), for its chunks from now on."""
        assert self._header is not None
        addresses = [address for address in addresses if again or address not in self._whole]
        if not addresses:
            return
        self._share(pack_wave(self._header, self.stores), addresses)
        self._whole.update(addresses)

    def _share(self, payload: bytes, addresses: list[str]) -> None:
        """``payload`` the wave's data on the workers ``addresses`` from now on (one Dask data item), in place
        of what they had of it."""
        for address in addresses:
            self._top_up.pop(address, None)
        data = self._send(payload, addresses)
        waves = self._waves[self._wave]
        for address in addresses:
            old = waves.get(address)
            waves[address] = data
            if old is not None and old is not data:
                old.release()

    def withdraw(self, wave: str) -> None:
        for future in set(self._waves.pop(wave, {}).values()):
            future.release()
        if wave == self._wave:
            self._header = None

    def run(self, seat: int, wave: str, indices: list[int]) -> None:
        self._top_up_for(self._route[seat], indices)
        future = self.client.submit(
            run_cluster_chunk,
            wave,
            self._waves[wave][self._route[seat]],
            indices,
            workers=[self._route[seat]],
            allow_other_workers=False,
            pure=False,
        )
        self._pending[future] = (seat, indices)
        self._sent[future] = time.monotonic()
        future.add_done_callback(self._done.put)

    def receive(self, timeout: float) -> list[tuple[int, FromWorker]]:
        """The answers that arrive within ``timeout`` seconds, as (seat, message); raises :class:`CrewLost`."""
        if not self._pending:
            time.sleep(timeout)
            return []
        done: list[Future] = []
        with contextlib.suppress(queue.Empty):
            done.append(self._done.get(timeout=timeout))
            while True:
                done.append(self._done.get_nowait())
        out: list[tuple[int, FromWorker]] = []
        failed: list[Future] = []  # chunks that did not finish: they stay pending, and _recover sends them again
        for future in done:
            seat, _ = self._pending.get(future, (-1, []))
            if seat < 0:  # of a wave abandoned since, or sent again
                continue
            answer = self._answer(future, self._route[seat])
            if answer is None:
                failed.append(future)
                continue
            _, indices = self._pending.pop(future)
            del self._sent[future]
            if answer is _LACKS:  # its worker lacks a function the wave left out: send it whole
                self.lacked = True
                self._send_whole([self._route[seat]])
                self.run(seat, self._wave, indices)
                continue
            if isinstance(answer, ChunkDone):
                self._note_inputs(seat, indices)
            out.append((seat, cast("FromWorker", answer)))
        if failed or time.monotonic() - self._checked > _CHECK_EVERY:
            self._checked = time.monotonic()
            live = self._live()
            lost = {self._route[seat] for seat, _ in self._pending.values() if self._route[seat] not in live}
            if failed or lost:
                self._recover(lost, failed, live)
        return out

    def _note_inputs(self, seat: int, indices: list[int]) -> None:
        """Note that ``seat`` holds resident the inputs of its chunk ``indices`` whose digests the wave carried:
        it decoded them (or had them). The same module run again (another pipeline on it, or the same one)
        then sends that worker none of their bytes, and its chunks go where they are held. The executor notes
        only the results (in a pipeline, the next wave's inputs) and the digests workers computed: a local
        crew's waves cost nothing per function sent, a cluster's a scatter of its bytes."""
        header = self._header
        if header is None:
            return
        digests = header.digests
        probed = {index for index, *_ in header.probes}  # started from the probe's bytes: not the input's
        self.owners.update((digest, seat) for i in indices if (digest := digests[i]) and i not in probed)

    def _answer(self, future: Future, address: str) -> FromWorker | object | None:
        """A done chunk's answer, its new bytes in the parent's store; :data:`_LACKS` if its worker lacked
        a function's bytes (see :meth:`_ClusterSeat.ready_for`); None if its worker (at ``address``) was lost."""
        if future.status != "finished":
            if self.client.status != "running":
                error = _error_of(future)
                raise CrewLost(f"a cluster chunk was lost: {type(error).__name__}: {error}")
            return None  # its worker died (KilledWorker), or the wave's data was lost with one
        while True:
            try:
                result = future.result(timeout=_FETCH_CHECK)
                break
            except TimeoutError:
                # A result whose worker died after the chunk finished is never fetched, nor computed again
                # (the chunk was pinned to that worker): waiting for it hung a wave (and every wave after
                # it on the cluster) for good.
                if address not in self._live():
                    return None
            except Exception:  # its result was on a worker lost since
                return None
        if result is None:
            return _LACKS
        data, blob = result
        answer = decode_from_worker(data)
        if isinstance(answer, ChunkDone) and answer.indices:
            answer.store, (base,) = self.place(self._directory, self._limit, [blob])
            answer.offsets = [base + offset for offset in answer.offsets]
        return answer

    def _live(self) -> set[str]:
        return set(self.client.scheduler_info(n_workers=-1)["workers"])

    def _recover(self, lost: set[str], failed: list[Future], live: set[str]) -> None:
        """Workers ``lost`` are gone, chunks ``failed``: raise for a function that killed a worker, else send
        those chunks again (a lost worker's to live ones)."""
        held = [f for f, (seat, _) in self._pending.items() if self._route[seat] in lost]
        orphans = [(f, *self._pending[f]) for f in dict.fromkeys([*held, *failed])]
        self._cancel([future for future, _, _ in orphans])
        for future, _, _ in orphans:
            del self._pending[future], self._sent[future]
        alive = sorted(live - lost)
        deadline = time.monotonic() + _WORKER_WAIT
        while not alive and time.monotonic() < deadline:  # a nanny restarts its worker within seconds
            time.sleep(_CHECK_EVERY)
            alive = sorted(self._live() - lost)
        if not alive:
            raise CrewLost(f"every worker of the crew was lost ({', '.join(sorted(lost))})")
        # The scheduler may count the wave's data lost with a worker; and a worker that takes over a lost
        # one's seat does not hold its functions: the whole wave goes again to the workers left.
        self._send_whole(alive, again=True)
        suspects = sorted(i for _, seat, indices in orphans if self._route[seat] in lost for i in indices)
        if suspects:
            self._isolate(suspects, alive[0], lost)
        serving = set(self._route)
        spare = [address for address in alive if address not in serving] or alive
        for k, seat in enumerate(seat for seat, address in enumerate(self._route) if address in lost):
            self._route[seat] = spare[k % len(spare)]
        for _, seat, indices in orphans:
            self.run(seat, self._wave, indices)

    def _isolate(self, indices: list[int], where: str, lost: set[str]) -> None:
        """Run the functions ``indices`` (those a lost worker held) again, alone, in a subprocess of worker
        ``where``: raise :class:`CrewLost` naming the one it died on, if it dies."""
        future = self.client.submit(
            run_isolated,
            self._wave,
            self._waves[self._wave][where],
            indices,
            workers=[where],
            allow_other_workers=False,
            pure=False,
        )
        code, last = future.result()
        if code != 0:
            message = (
                f"cluster worker(s) {', '.join(sorted(lost))} died running it, and so did a subprocess that ran "
                f"the worker's functions alone (exit status {code})"
            )
            dead = frozenset(self.pids[address] for address in lost if address in self.pids)
            raise CrewLost(message, PoolLost(message, self.generation, dead, str(code)), [last] if last >= 0 else [])

    def running(self, longer_than: float = 0.0) -> list[Busy]:
        """What the seats run, asked of the workers (a round trip through the scheduler) only when a limit is
        given and a chunk was sent more than ``longer_than`` seconds ago, at most every :data:`_ASK_EVERY`
        seconds."""
        if longer_than <= 0:
            return []
        now = time.monotonic()
        oldest = min(self._sent.values(), default=now)
        if now - oldest <= longer_than or now - self._asked < _ASK_EVERY:
            return []
        self._asked = now
        seats = sorted({seat for future, (seat, _) in self._pending.items() if self._sent[future] < now - longer_than})
        try:
            found = self.client.run(running_here, workers=[self._route[seat] for seat in seats], on_error="return")
        except Exception:  # a worker lost meanwhile: the chunk's own future reports it
            return []
        busy = []
        for seat in seats:
            what = found.get(self._route[seat])
            if isinstance(what, tuple) and what[0] == self._wave:
                _, index, seconds, pid = what
                busy.append(Busy(seat, index, seconds, pid))
                if seconds > longer_than > 0:
                    self._late.add(seat)
        return busy

    def store(self, seat: int, path: str) -> StoreReader:
        return self.stores[path]  # every answer's bytes are in the parent's own store

    def abandon(self) -> None:
        """After a failed wave: cancel its chunks, and restart the workers that ran a function past the
        timeout (only those: a chunk cancelled while it runs ends on its own)."""
        if self._pending:
            with contextlib.suppress(Exception):
                self._cancel(list(self._pending))
        self._pending.clear()
        self._sent.clear()
        late = sorted({self._route[seat] for seat in self._late})
        self._late.clear()
        if late:
            restart(self.client, late)

    def _cancel(self, futures: list[Future]) -> None:
        """Cancel ``futures`` and wait until the scheduler has forgotten them: a cancellation travels on the
        client's batched stream, and a restart (an RPC of its own) that overtook it would have the scheduler
        run the chunks of the restarted worker elsewhere."""
        keys = [future.key for future in futures]
        self.client.cancel(futures, force=True)
        deadline = time.monotonic() + _WORKER_WAIT
        while self.client.run_on_scheduler(_known_keys, keys) and time.monotonic() < deadline:
            time.sleep(0.01)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for future in [*(f for waves in self._waves.values() for f in waves.values()), *self._pending]:
            with contextlib.suppress(Exception):
                future.release()
        self._waves.clear()
        self._pending.clear()
        self.close_stores()


class DaskBackend:
    """Function-level passes on the workers of a Dask cluster (see the module docstring).

    Before it has measured a wave here, the executor assumes one costs what a 2-worker LocalCluster's took
    beyond its work (40-60 ms: the wave's scatter, task round trips through the scheduler, the merge) and a
    chunk ~5 ms (``bench_cluster``): with a local crew's 4 ms, a first run shipped light passes and lost.
    Nor does it take what a pass costs in the cluster's workers for what it costs in this process.

    ``client`` is a ``distributed.Client``, or a scheduler address to connect
    to (the backend then closes its client in :meth:`close`, and has it send
    to the scheduler every millisecond, not every 10: see :data:`_SEND_INTERVAL`). A pass uses
    at most ``parpass.num_workers`` of the cluster's workers, the first ones
    by address: the cluster's size is the cluster's to set.
    """

    assumed_overhead = 40e-3
    assumed_latency = 5e-3
    #: even a LocalCluster's: its workers ran Simplify 10-25% slower per byte than this process did
    workers_on_this_machine = False

    def __init__(self, client: Client | str) -> None:
        import distributed

        connect: Any = distributed.Client
        self._own = isinstance(client, str)
        self.client: Client = connect(client, set_as_default=False) if isinstance(client, str) else client
        if self._own:  # a client of the user's keeps the user's settings
            batched = getattr(self.client, "scheduler_comm", None)
            if batched is not None and isinstance(getattr(batched, "interval", None), float):
                batched.interval = _SEND_INTERVAL
        self._generation = 0
        self._crew: ClusterCrew | None = None
        self._crew_lock = threading.Lock()
        self._warmed: set[str] = set()
        self._warming: threading.Thread | None = None

    def addresses(self, num_workers: int) -> list[str]:
        """The workers a pass on ``num_workers`` uses: the cluster's first ones by address (waits for one)."""
        workers = sorted(self.client.scheduler_info(n_workers=-1)["workers"])
        if not workers:
            self.client.wait_for_workers(1, timeout=_WORKER_WAIT)
            workers = sorted(self.client.scheduler_info(n_workers=-1)["workers"])
        return workers[:num_workers]

    def submit(self, num_workers: int, fn: Callable[..., Any], /, *args: Any) -> Task:
        task = Task(self._generation)
        future = self.client.submit(fn, *args, pure=False)

        def settle() -> None:
            try:
                task.set_result(future.result())
            except BaseException as err:
                from distributed import KilledWorker

                lost = isinstance(err, KilledWorker) or future.cancelled()
                task.set_exception(PoolLost(f"{type(err).__name__}: {err}", task.generation) if lost else err)

        threading.Thread(target=settle, name="parpass-dask-task", daemon=True).start()
        return task

    def warm(self, num_workers: int) -> None:
        addresses = [a for a in self.addresses(num_workers) if a not in self._warmed]
        futures = [
            self.client.submit(warm_cluster_worker, workers=[a], allow_other_workers=False, pure=False)
            for a in addresses
        ]
        with contextlib.suppress(Exception):  # a lost worker: the wave's own chunks meet it
            self.client.gather(futures)
            self._warmed.update(addresses)

    def ready(self, num_workers: int) -> bool:
        if set(self.addresses(num_workers)) <= self._warmed:
            return True
        if self._warming is None or not self._warming.is_alive():
            self._warming = threading.Thread(target=self.warm, args=(num_workers,), name="parpass-dask-warm")
            self._warming.daemon = True
            self._warming.start()
        return False

    def started(self, num_workers: int) -> bool:
        # the cluster's workers run whoever asks; this asks the scheduler nothing (a round trip): whether
        # parpass was loaded in some of them, or is being loaded
        warming = self._warming
        return bool(self._warmed) or (warming is not None and warming.is_alive())

    def worker_pids(self) -> list[int]:
        return sorted(self.client.run(os.getpid).values())

    @contextlib.contextmanager
    def crew(self, num_workers: int) -> Iterator[ClusterCrew]:
        with self._crew_lock:
            addresses = self.addresses(num_workers)
            crew = self._crew
            if crew is None or crew.closed or crew.addresses != addresses:
                if crew is not None:
                    crew.close()
                crew = self._crew = self._new_crew(addresses)
            try:
                yield crew
            except BaseException:
                self._crew = None
                crew.abandon()
                crew.close()
                raise

    def crew_files(self) -> list[str]:
        """The files the live crew keeps between waves (the parent's result stores); removed when it closes."""
        crew = self._crew
        return [] if crew is None else crew.files()

    def _new_crew(self, addresses: list[str]) -> ClusterCrew:
        """A crew of the workers ``addresses`` that answer (of the cluster's first ones, if none does)."""
        for _ in range(2):
            self._generation += 1
            crew = ClusterCrew(self.client, addresses, self._generation)
            if crew.size:
                return crew
            crew.close()
            self.client.wait_for_workers(1, timeout=_WORKER_WAIT)
            addresses = self.addresses(len(addresses))
        raise CrewLost(f"no worker of the cluster answered ({', '.join(addresses)})")

    def kill(self, generation: int | None = None) -> None:
        crew = self._crew
        if crew is not None and generation in (None, crew.generation):
            self._crew = None
            restart(self.client, crew.addresses)
            crew.close()

    def shutdown(self) -> None:
        """Let the crew go (its result stores with it); the client stays connected (see :meth:`close`)."""
        crew, self._crew = self._crew, None
        if crew is not None:
            crew.close()

    def close(self) -> None:
        """Shut down, and close the client if this backend opened it."""
        self.shutdown()
        if self._own:
            with contextlib.suppress(Exception):
                self.client.close()


_AT: dict[str, DaskBackend] = {}
_AT_LOCK = threading.Lock()


def backend_at(address: str) -> DaskBackend:
    """The backend of the Dask scheduler at ``address`` (one client per address, for this process's life)."""
    with _AT_LOCK:
        found = _AT.get(address)
        if found is None or found.client.status in ("closing", "closed"):  # shut down since: connect again
            try:
                found = _AT[address] = DaskBackend(address)
            except ImportError as err:
                raise ImportError(
                    f"config parpass.scheduler={address!r} needs Dask: pip install 'parpass[dask]' ({err})"
                ) from err
        return found


@atexit.register
def close_clients() -> None:
    """Close the clients :func:`backend_at` opened (at exit; a test may call it before its cluster closes)."""
    with _AT_LOCK:
        backends = list(_AT.values())
        _AT.clear()
    for found in backends:
        found.close()
