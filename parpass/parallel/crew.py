"""A crew: every worker of a pool serving its own connection, so the executor can choose who runs what.

loky hands a task to whichever worker is free, through one shared call queue:
good for balance, but a worker cannot be asked for by name, and the executor
needs exactly that to send a function to the worker that holds it decoded. A
crew keeps one long-lived task per worker of the pool (:func:`~parpass.parallel.worker.serve`),
each connected to the parent by its own socket: the parent sends a chunk to
the seat it chooses (affinity) and reads each seat's answers as they come.
The pool stays loky's (start-up, death detection, clean-up); the crew only
keeps the workers busy listening while waves need them, and lets them go
(back to the pool) when it closes or after ``idle`` seconds without work.

A worker that dies takes the whole pool down (loky's rule): the crew is then
lost, and :meth:`Crew.lost` says which workers died on their own, as
:class:`~parpass.parallel.backend.PoolLost` does for plain tasks.
"""

from __future__ import annotations

import contextlib
import glob
import os
import select
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Sequence
from itertools import repeat
from multiprocessing.connection import Connection, Listener
from typing import TYPE_CHECKING, Protocol

from parpass.parallel.protocol import (
    Fetched,
    FetchKept,
    FromWorker,
    Hello,
    RunChunk,
    Stop,
    ToWorker,
    decode_from_worker,
    encode,
)
from parpass.parallel.store import StoreReader, StoreWriter
from parpass.parallel.wave import Busy, ProgressSlots, WaveHeader, remove, scratch_path, write_wave

if TYPE_CHECKING:
    from parpass.parallel.backend import PoolLost, Task

#: Seconds to wait for every seat of a new crew to connect (workers are started first: only a stuck
#: system gets near).
_CONNECT_WAIT = 60.0
#: Seconds to wait for the tasks of a lost crew to settle (loky fails them within milliseconds).
_SETTLE_WAIT = 10.0


class CrewLost(Exception):
    """The crew's pool was lost, or a seat left; :attr:`lost` holds the pool's :class:`PoolLost` if any, and
    :attr:`suspects` the functions (module indices) the crew knows killed their worker, if it knows."""

    def __init__(self, message: str, lost: PoolLost | None = None, suspects: Sequence[int] = ()) -> None:
        super().__init__(message)
        self.lost = lost
        self.suspects = tuple(suspects)


class CrewLike(Protocol):
    """What the executor needs of a crew: :class:`Crew` on this machine, a cluster's
    (:class:`parpass.parallel.cluster.ClusterCrew`) elsewhere."""

    size: int
    generation: int
    owners: dict[bytes, int]
    stores: dict[str, StoreReader]
    #: whether a chunk of the last wave needed a function its seat was not sent (see :meth:`publish`)
    lacked: bool

    def begin_wave(self, directory: str) -> None: ...

    def place(self, directory: str, limit: int, blobs: list[bytes | memoryview]) -> tuple[str, list[int]]: ...

    def publish(self, header: WaveHeader, targets: Collection[int] | None = None) -> str:
        """Make the wave reachable by the seats; ``targets``: the functions its chunks run on, where as far as
        the executor knows its passes read no function but the one they transform (a crew may then send each
        seat less to start with); None where they may read any."""
        ...

    def withdraw(self, wave: str) -> None: ...

    def run(self, seat: int, wave: str, indices: list[int]) -> None: ...

    def receive(self, timeout: float) -> list[tuple[int, FromWorker]]: ...

    def store(self, seat: int, path: str) -> StoreReader: ...

    def running(self, longer_than: float = 0.0) -> list[Busy]:
        """What each busy seat is running now, and for how long: at least the functions running for more
        than ``longer_than`` seconds (a crew may leave out the others, where asking costs)."""
        ...

    def files(self) -> list[str]: ...


def _address() -> str:
    """A fresh socket address: in Linux's abstract namespace (no file to clean up), else a short path."""
    name = f"parpass-crew-{os.getpid()}-{os.urandom(6).hex()}"
    if sys.platform.startswith("linux"):
        return "\0" + name
    return os.path.join(tempfile.gettempdir(), name)


class StoreKeeper:
    """The result stores a crew's waves read, as the parent keeps them: the seats' and its own.

    A store is an append-only file of function bytes (see :mod:`parpass.parallel.store`).
    Its readers live in ``stores`` while some function of some module may lie
    there; the stores a seat left for a new one are retired and deleted when
    the next wave begins, and every store goes when the crew closes.
    """

    def __init__(self) -> None:
        #: which seat holds (resident) the function of each digest, as far as the executor knows
        self.owners: dict[bytes, int] = {}
        #: the live result stores (see parpass.parallel.store), in the order they appeared
        self.stores: dict[str, StoreReader] = {}
        self._seat_store: dict[int, str] = {}
        self._retired: list[str] = []
        #: every store of this crew is named so (the parent's pid first, for watch_parent)
        self._store_prefix = f"parpass-store-{os.getpid()}-{os.urandom(4).hex()}-"
        self._store_dirs: set[str] = set()  # where this crew's stores may lie
        self._own = StoreWriter(self._store_prefix)  # the parent's store, for bytes no worker wrote

    def store(self, seat: int, path: str) -> StoreReader:
        """The reader of ``seat``'s result store ``path``; a store it left for a new one is retired."""
        left = self._seat_store.get(seat, "")
        if left != path:
            if left:
                self._retired.append(left)
            self._seat_store[seat] = path
        reader = self.stores.get(path)
        if reader is None:
            reader = self.stores[path] = StoreReader(path)
        return reader

    def place(self, directory: str, limit: int, blobs: list[bytes | memoryview]) -> tuple[str, list[int]]:
        """Append ``blobs`` to the parent's own store (in ``directory``, where this wave's workers will put
        theirs); its path and their offsets."""
        before = self._own.path
        self._store_dirs.add(directory)
        path, offsets = self._own.append(directory, limit, blobs)
        if path != before:
            if before:
                self._retired.append(before)
            self.stores[path] = StoreReader(path)
        return path, offsets

    def begin_wave(self, directory: str) -> None:
        """A wave whose files (and new stores) go to ``directory`` begins: delete the stores the seats left
        (no worker reads them any more)."""
        self._store_dirs.add(directory)
        self.retire_stores()

    def retire_stores(self) -> None:
        """Delete the stores the seats left."""
        for path in self._retired:
            reader = self.stores.pop(path, None)
            if reader is not None:
                reader.close()
            remove(path)
        self._retired.clear()

    def files(self) -> list[str]:
        """The files the crew keeps while it lives: its result stores (for tests and diagnostics)."""
        return sorted({*self.stores, *self._retired})

    def close_stores(self) -> None:
        """Delete every store of the crew."""
        self._own.close()
        self._retired.extend(self.stores)
        self.retire_stores()
        # A store a worker started in a wave that failed before its answer came is known only by name.
        for directory in self._store_dirs:
            for path in glob.glob(os.path.join(glob.escape(directory), glob.escape(self._store_prefix) + "*")):
                remove(path)


class Crew(StoreKeeper):
    """``size`` seats, one per worker of a pool of ``size`` workers (see the module docstring).

    ``submit(size, fn, *args)`` runs a task on that pool (a backend's submission).
    """

    def __init__(self, submit: Callable[..., Task], size: int, idle: float) -> None:
        from parpass.parallel.worker import serve

        super().__init__()
        self.size = size
        self.lacked = False  # each seat maps the whole wave file: it lacks only what another keeps (see keeps)
        #: its workers can keep a wave's results decoded until the parent fetches them (FetchKept)
        self.keeps = True
        self.idle = idle
        self.last_used = time.monotonic()
        self.closed = False
        self._conns: list[Connection | None] = [None] * size
        self.pids = [0] * size
        #: every seat's connection registered once: multiprocessing's wait() builds a selector each call (8.5 us
        #: against 1.2, ~17 calls a wave)
        self._poller = select.poll()
        self._seat_of_fd: dict[int, int] = {}
        self._waves: set[str] = set()  # the wave files published and not withdrawn yet
        authkey = os.urandom(32)
        self._address = _address()
        self._listener = Listener(self._address, family="AF_UNIX", authkey=authkey)
        self._progress_path = scratch_path("progress")  # named before it is made: closing removes it
        self.tasks: list[Task] = []
        try:
            self.progress = ProgressSlots(self._progress_path, size, create=True)
            for seat in range(size):
                self.tasks.append(
                    submit(
                        size, serve, self._address, authkey, seat, self.progress.path, size, idle, self._store_prefix
                    )
                )
            self.generation = self.tasks[0].generation
            self._connect()
        except BaseException:
            self.close()
            raise

    def _connect(self) -> None:
        """Accept a connection from every seat (in a thread: a listener has no timeout), or fail."""
        accepted: list[Connection] = []
        failure: list[BaseException] = []

        def accept() -> None:
            try:
                for _ in range(self.size):
                    accepted.append(self._listener.accept())
            except BaseException as err:  # closed under us (a task failed), or a bad handshake
                failure.append(err)

        thread = threading.Thread(target=accept, name="parpass-crew-accept", daemon=True)
        thread.start()
        deadline = time.monotonic() + _CONNECT_WAIT
        while thread.is_alive():
            thread.join(0.01)
            failed = next((t for t in self.tasks if t.done()), None)
            if failed is not None or time.monotonic() > deadline:
                self._listener.close()  # ends the accept thread
                thread.join(_SETTLE_WAIT)
                for conn in accepted:
                    conn.close()
                error = failed.exception() if failed is not None else None
                raise CrewLost(f"a crew of {self.size} workers could not start: {error or 'timed out'}", _lost(error))
        if failure:
            raise CrewLost(f"a crew of {self.size} workers could not start: {failure[0]}")
        for conn in accepted:
            hello = decode_from_worker(conn.recv_bytes())
            assert isinstance(hello, Hello)
            self._conns[hello.seat] = conn
            self.pids[hello.seat] = hello.pid
            self._seat_of_fd[conn.fileno()] = hello.seat
            self._poller.register(conn, select.POLLIN)
            self.owners.update(zip(hello.holds, repeat(hello.seat)))  # what an earlier crew left the worker
        self._listener.close()
        remove(self.progress.path)  # every seat has it mapped: no file need outlive the crew's start

    def alive(self) -> bool:
        """Whether every seat is still connected and serving (not idled out, not lost)."""
        if self.closed or any(t.done() for t in self.tasks):
            return False
        return time.monotonic() - self.last_used < 0.8 * self.idle

    def send(self, seat: int, message: ToWorker) -> None:
        conn = self._conns[seat]
        if conn is None:
            raise CrewLost(f"crew seat {seat} is gone")
        try:
            conn.send_bytes(encode(message))
        except (OSError, ValueError) as err:
            raise self._loss(f"crew seat {seat} could not be reached: {err}") from err

    def run(self, seat: int, wave: str, indices: list[int]) -> None:
        """Send seat ``seat`` a chunk of the wave in file ``wave``."""
        self.send(seat, RunChunk(wave, indices))

    def ask(self, seat: int, tokens: list[bytes], drop: list[bytes]) -> None:
        """Ask seat ``seat`` for the bytes of the results its worker keeps under ``tokens`` (see
        :class:`~parpass.parallel.protocol.FetchKept`), between waves; those under ``drop`` let go."""
        self.send(seat, FetchKept(tokens, drop))

    def answer(self, seat: int) -> Fetched:
        """Seat ``seat``'s answer to :meth:`ask`."""
        conn = self._conns[seat]
        if conn is None:
            raise CrewLost(f"crew seat {seat} is gone")
        try:
            answer = decode_from_worker(conn.recv_bytes())
        except (EOFError, OSError) as err:
            raise self._loss(f"crew seat {seat} (worker {self.pids[seat]}) closed its connection") from err
        self.last_used = time.monotonic()
        if not isinstance(answer, Fetched):
            raise CrewLost(f"crew seat {seat} answered a fetch with {type(answer).__name__}")
        return answer

    def receive(self, timeout: float) -> list[tuple[int, FromWorker]]:
        """The answers that arrive within ``timeout`` seconds, as (seat, message); raises :class:`CrewLost`."""
        out: list[tuple[int, FromWorker]] = []
        for fd, _ in self._poller.poll(max(timeout, 0.0) * 1000):
            seat = self._seat_of_fd[fd]
            conn = self._conns[seat]
            assert conn is not None, "a seat that answers is connected"
            try:
                data = conn.recv_bytes()
            except (EOFError, OSError) as err:
                raise self._loss(f"crew seat {seat} (worker {self.pids[seat]}) closed its connection") from err
            out.append((seat, decode_from_worker(data)))
        self.last_used = time.monotonic()
        return out

    def publish(self, header: WaveHeader, targets: Collection[int] | None = None) -> str:
        """Make a wave reachable by the seats: its name, which :meth:`run` passes on (here, its file: the
        seats map what they read of it, so all of it is there whatever the passes read)."""
        path = scratch_path("wave")
        self._waves.add(path)  # before the file exists: closing the crew removes it, whatever comes between
        try:
            write_wave(header, path)
        except BaseException:
            self.withdraw(path)
            raise
        return path

    def withdraw(self, wave: str) -> None:
        """The wave ``wave`` is over (its chunks answered, or the wave failed)."""
        remove(wave)
        self._waves.discard(wave)

    def running(self, longer_than: float = 0.0) -> list[Busy]:
        """What each busy seat is running now (its progress slot), and for how long."""
        return self.progress.running()

    def _loss(self, message: str) -> CrewLost:
        """The :class:`CrewLost` for a seat that went away: waits until the pool's tasks settle, so that
        the error carries the pool's account of which workers died on their own."""
        deadline = time.monotonic() + _SETTLE_WAIT
        for task in self.tasks:
            with contextlib.suppress(Exception):
                task.exception(timeout=max(0.0, deadline - time.monotonic()))
        lost = next((_lost(t.exception()) for t in self.tasks if t.done() and t.exception() is not None), None)
        return CrewLost(message, lost)

    def close(self) -> None:
        """Let the seats go (their workers return to the pool) and remove the crew's files."""
        if self.closed:
            return
        self.closed = True
        for conn in self._conns:
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.send_bytes(encode(Stop()))
                with contextlib.suppress(Exception):
                    conn.close()
        with contextlib.suppress(Exception):
            self._listener.close()
        if not self._address.startswith("\0"):
            remove(self._address)
        progress: ProgressSlots | None = getattr(self, "progress", None)  # None: a signal cut its making short
        if progress is not None:
            progress.close()
        remove(self._progress_path)
        for wave in sorted(self._waves):  # a wave a signal cut short
            self.withdraw(wave)
        self.close_stores()


def _lost(error: BaseException | None) -> PoolLost | None:
    from parpass.parallel.backend import PoolLost

    return error if isinstance(error, PoolLost) else None
