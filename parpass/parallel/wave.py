"""The files through which one parallel wave reaches the workers of one machine.

A *wave* is one round trip: a chain of function-level passes applied to the
target functions of a module. The parent writes everything the workers share
into one file, once: the pickled passes, the pass context, every function of
the module as msgpack bytes (the module view, and the inputs a worker does not
hold resident) and the digest of those bytes where the parent knows it. Each
worker maps the file once per wave and caches what it unpickles, so a pass is
shipped to each worker once per pass, not once per function, and chunks of
work are just lists of function indices. Results come back on each worker's
own connection (:mod:`parpass.parallel.protocol`).

A second, small file holds one progress slot per worker of the crew (the
function being run, since when, and by which worker process), written by
workers and read by the parent to name the function a crashed or timed-out
worker was running, and to tell a crash of the wave's own from the loss of a
pool it shared.

The parent removes every file of a wave when the wave ends, however it ends.
A parent killed outright cannot: each worker watches its parent
(:func:`watch_parent`) and, once orphaned, removes the parent's scratch files
and exits.
"""

from __future__ import annotations

import contextlib
import glob
import mmap
import os
import secrets
import struct
import tempfile
import threading
import time
from typing import NamedTuple

import msgspec

from parpass.parallel.store import StoreReader, write_all

_SLOT = struct.Struct("<qdq")  # function index + 1 (0: idle), start time (time.monotonic), worker pid
_LEN = struct.Struct("<Q")


class WaveHeader(msgspec.Struct, frozen=True, array_like=True):
    """What every task of a wave shares, besides the function bytes."""

    passes: bytes  # cloudpickle of the list of passes of the chain
    context: bytes  # cloudpickle of the PassContext snapshot
    names: list[str]  # all functions of the module, in module order
    stores: list[str]  # the stores the functions' bytes lie in (see parpass.parallel.store)
    where: list[int]  # function i lies in stores[where[i]]
    offsets: list[int]  # ... at offsets[i]
    lengths: list[int]  # ... and is lengths[i] bytes long
    module_attrs: bytes  # msgpack of the module attributes
    record_instruments: bool  # record nested instrument callbacks for replay
    digests: list[bytes | None]  # digest of function i's bytes, None where the parent does not know it
    cache_budget: int  # encoded bytes of functions a worker may keep resident
    store_limit: int  # bytes past which a worker starts a new result store
    #: functions whose chain starts at its second pass (the first ran in the parent): (index, store, offset,
    #: length) of the bytes to start from
    probes: list[tuple[int, int, int, int]]
    #: keep the chain's results decoded in the worker instead of storing them (see ChunkDone.kept)
    keep: bool = False


#: ``where`` of a function no store holds: the worker that made it keeps it decoded (its digest is its token)
KEPT = -1


#: Environment variable naming the directory for scratch files (default: /dev/shm, else the temp directory).
SCRATCH_DIR_ENV = "PARPASS_SCRATCH_DIR"


#: /dev/shm with less room than this (a container's default is 64 MB) is passed over for the temp directory.
_SHM_MIN_FREE = 1 << 30


def scratch_dir() -> str:
    """Where the parent and its workers put wave files and result stores (see :data:`SCRATCH_DIR_ENV`)."""
    return _scratch_dir()


def _scratch_dir() -> str:
    chosen = os.environ.get(SCRATCH_DIR_ENV)
    if chosen:
        return chosen
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK):
        with contextlib.suppress(OSError):
            stat = os.statvfs(shm)
            if stat.f_bavail * stat.f_frsize >= _SHM_MIN_FREE:
                return shm
    return tempfile.gettempdir()


def scratch_path(kind: str) -> str:
    """The path of a new scratch file (``"wave"``, ``"progress"``), not created yet: its owner holds the name
    before the file exists, so that whatever interrupts the making (a signal right after the file is made)
    leaves it a name to remove."""
    return os.path.join(_scratch_dir(), f"parpass-{kind}-{os.getpid()}-{secrets.token_hex(8)}.bin")


def write_wave(header: WaveHeader, path: str) -> None:
    """Write the wave file of ``header`` at ``path`` (see :func:`scratch_path`; the caller removes it, also when
    this raises)."""
    data = msgspec.msgpack.encode(header)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        write_all(fd, [_LEN.pack(len(data)), data])
    finally:
        os.close(fd)


class WaveFile:
    """A worker's read-only mapping of a wave file, and of the result stores it refers to."""

    def __init__(self, path: str, readers: dict[str, StoreReader]) -> None:
        self.path = path
        _served_dirs.add(os.path.dirname(path))
        with open(path, "rb") as handle:
            self._map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        (header_len,) = _LEN.unpack_from(self._map, 0)
        self.header = header = msgspec.msgpack.decode(self._map[_LEN.size : _LEN.size + header_len], type=WaveHeader)
        for gone in set(readers) - set(header.stores):
            readers.pop(gone).close()
        self._stores = [readers.setdefault(p, StoreReader(p)) for p in header.stores]

    def stored_bytes(self, where: int, offset: int, length: int) -> memoryview:
        return self._stores[where].view(offset, length)

    def function_bytes(self, index: int) -> memoryview:
        header = self.header
        return self._stores[header.where[index]].view(header.offsets[index], header.lengths[index])

    def close(self) -> None:
        """Unmap the file."""
        self._map.close()


class Busy(NamedTuple):
    """A busy progress slot: chunk ``slot`` runs function ``function`` (its index) for ``seconds`` in worker ``pid``."""

    slot: int
    function: int
    seconds: float
    pid: int


class ProgressSlots:
    """One slot per chunk: which function it is running, since when, and in which process."""

    def __init__(self, path: str, count: int, create: bool) -> None:
        self.path = path
        self.count = count
        self._pid = os.getpid()
        size = max(1, count) * _SLOT.size
        if create:
            with open(path, "xb") as handle:
                handle.write(b"\0" * size)
        with open(path, "r+b") as handle:
            self._map = mmap.mmap(handle.fileno(), size)

    def start(self, slot: int, index: int) -> None:
        _SLOT.pack_into(self._map, slot * _SLOT.size, index + 1, time.monotonic(), self._pid)

    def idle(self, slot: int) -> None:
        _SLOT.pack_into(self._map, slot * _SLOT.size, 0, 0.0, 0)

    def running(self) -> list[Busy]:
        """Every busy slot."""
        now = time.monotonic()
        busy = []
        for slot in range(self.count):
            index, since, pid = _SLOT.unpack_from(self._map, slot * _SLOT.size)
            if index:
                busy.append(Busy(slot, index - 1, now - since, pid))
        return busy

    def close(self) -> None:
        self._map.close()


def remove(path: str) -> None:
    """Delete a wave or progress file, ignoring one that is already gone."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


#: In a worker: the directories of the waves it served, for :func:`watch_parent`.
_served_dirs: set[str] = set()


def watch_parent(parent: int, interval: float = 0.2) -> None:
    """In a worker: once the parent process ``parent`` is gone, remove its scratch files, then exit.

    A parent killed outright (SIGTERM without a handler, SIGKILL) removes
    nothing, and loky's idle workers would live on for minutes with queued
    chunks. Every worker removes every scratch file of the parent (their
    names hold its pid: a wave no worker has opened yet goes too).
    ``parent`` comes from the parent itself: one that died while this worker
    was starting is already gone here.
    """

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        for where in {*_served_dirs, _scratch_dir()}:
            for path in glob.glob(os.path.join(glob.escape(where), f"parpass-*-{parent}-*")):
                remove(path)
        os._exit(0)

    threading.Thread(target=watch, name="parpass-watch-parent", daemon=True).start()
