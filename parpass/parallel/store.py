"""Result stores: where workers put the bytes of the functions they return, for the parent to keep.

Each worker of a crew appends the bytes of its results to a file of its own (a
*store*, in the parent's scratch directory, named after the parent) and
answers with where they lie. The parent maps the file and holds each result as
a read-only view of it: it copies nothing, and what a worker wrote is the
parent's to keep even if that worker dies next (the file outlives it; the
mapping outlives the file). The next wave then tells the workers where each
function lies instead of writing its bytes again: a wave file carries only the
bytes of functions that lie in no live store.

Where a function lies is a tuple (:func:`pack_locations`): its store's number in
this process, its offset and its length. The parent records one per function
it holds, every wave. Tuples, not one packed int (as before): packing took
three big-int operations a function and unpacking five, ~0.9 ms a wave of
2,000 functions in the parent, against one zip each way; a tuple of ints is
untracked by the garbage collector at its first collection.

A store that grew past its limit is retired: its worker starts a new one, and
the parent deletes the old file at the start of its next wave (its mapped
views stay valid for as long as a module holds them). The parent deletes the
live stores when the crew closes; a worker orphaned by a parent killed
outright deletes them too (:func:`~parpass.parallel.wave.watch_parent`).
"""

from __future__ import annotations

import itertools
import mmap
import os
import tempfile
from collections import deque
from collections.abc import Sequence
from itertools import repeat

#: Buffers one writev call takes at most (Linux's IOV_MAX).
_IOV_MAX = 1024

#: Every store path this process has packed a location in, by number and number by path. Numbers are never
#: given twice, so a location kept in a module from long ago names no other store; an entry is a path and an int.
_numbers: dict[str, int] = {}
_paths: dict[int, str] = {}
_next_number = itertools.count(1)


def store_number(path: str) -> int:
    """The number of store ``path`` in this process's packed locations (see :func:`pack_locations`)."""
    number = _numbers.get(path)
    if number is None:
        number = _numbers.setdefault(path, next(_next_number))  # two threads at once: one number wins
        _paths.setdefault(number, path)
    return number


#: Where a function's bytes lie: its store's number (see :func:`store_number`), offset and length.
Location = tuple[int, int, int]


def pack_locations(path: str, offsets: Sequence[int], lengths: Sequence[int]) -> list[Location]:
    """Where each blob of store ``path`` lies (``offsets[i]``, ``lengths[i]``), one location per blob."""
    return list(zip(repeat(store_number(path), len(offsets)), offsets, lengths, strict=True))


def unpack_locations(
    locations: Sequence[Location | None], live: Sequence[str]
) -> tuple[list[int], list[int], list[int]] | None:
    """``locations`` as columns: the index in ``live`` (store paths) of each one's store, its offset and its
    length; None if one is None (not placed) or lies in a store not in ``live``."""
    if not locations:
        return [], [], []
    try:
        numbers, offsets, lengths = zip(*locations, strict=True)
    except TypeError:  # a None
        return None
    where = {store_number(path): i for i, path in enumerate(live)}
    try:
        stores = list(map(where.__getitem__, numbers))
    except KeyError:
        return None
    return stores, list(offsets), list(lengths)


def location_store(location: Location) -> str | None:
    """The path of the store a location lies in (None: not a store of this process)."""
    return _paths.get(location[0])


#: A store file is extended ahead of its writes, to twice what they reach and at least this many bytes: the
#: parent, which maps the file whole, then maps it again only when it doubled, not at every answer.
_EXTEND_MIN = 1 << 20


class StoreWriter:
    """A store: appends blobs, rotating to a new file (named ``prefix``...) in ``directory`` once past ``limit``.

    The file is longer than what was written (a sparse tail of zeros, see :data:`_EXTEND_MIN`); its readers
    read only where a blob was reported.
    """

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self.path = ""
        self.size = 0
        self._extent = 0
        self._fd = -1

    def append(self, directory: str, limit: int, blobs: Sequence[bytes | memoryview]) -> tuple[str, list[int]]:
        """Append ``blobs``; return the store's path and each blob's offset in it."""
        if self._fd < 0 or self.size > limit or os.path.dirname(self.path) != directory:
            self._rotate(directory)
        offsets = []
        offset = self.size
        for blob in blobs:
            offsets.append(offset)
            offset += len(blob)
        if offset > self._extent:
            self._extent = max(2 * offset, _EXTEND_MIN)
            os.ftruncate(self._fd, self._extent)
        write_all(self._fd, blobs)
        self.size = offset
        return self.path, offsets

    def _rotate(self, directory: str) -> None:
        self.close()
        fd, path = tempfile.mkstemp(prefix=self._prefix, suffix=".bin", dir=directory)
        self._fd, self.path, self.size, self._extent = fd, path, 0, 0

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def write_all(fd: int, blobs: Sequence[bytes | memoryview]) -> None:
    """Write ``blobs`` back to back at ``fd``'s position, without joining them first (a copy)."""
    pending = deque(memoryview(b) for b in blobs if len(b))
    while pending:
        written = os.writev(fd, list(itertools.islice(pending, _IOV_MAX)))
        while written:
            first = pending[0]
            if written >= len(first):
                written -= len(first)
                pending.popleft()
            else:
                pending[0] = first[written:]
                written = 0


class StoreReader:
    """A read-only mapping of a store, mapped again (larger) when asked for bytes past its end."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._view: memoryview | None = None

    def view(self, offset: int, length: int) -> memoryview:
        """The ``length`` bytes at ``offset``, as a view of the mapping (no copy)."""
        end = offset + length
        if self._view is None or len(self._view) < end:
            with open(self.path, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                if size < end:
                    raise OSError(f"{self.path}: {size} bytes, expected at least {end}")
                self._view = memoryview(mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_READ))
        return self._view[offset:end]

    def close(self) -> None:
        """Drop this reader's mapping (views handed out keep it alive until they go)."""
        self._view = None
