"""The functions a worker keeps decoded between waves, keyed by the digest of their bytes.

Within a pipeline run, the function a worker produced (or decoded) in one wave
is usually what the next wave sends it: the executor sends a function to the
worker that holds it, so that worker skips decoding. The key is a digest of
the function's encoded bytes, so a function is found only if it is exactly
what the parent holds: anything else (evicted, another worker's, changed in
the parent) is decoded from the wave's bytes as before. The cache is bounded
by the encoded size of what it holds (the decoded form takes about 5x that);
the least recently used functions go first.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import NamedTuple

from parpass.ir.node import BaseFunc


class _Entry(NamedTuple):
    func: BaseFunc
    size: int  # encoded bytes


class ResidentCache:
    """Decoded functions by digest, at most ``budget`` encoded bytes of them (least recently used out first)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.size = 0
        self._entries: OrderedDict[bytes, _Entry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def digests(self) -> list[bytes]:
        """The digests of the functions held, least recently used first."""
        return list(self._entries)

    def get(self, digest: bytes) -> BaseFunc | None:
        entry = self._entries.get(digest)
        if entry is None:
            return None
        self._entries.move_to_end(digest)
        return entry.func

    def put(self, digest: bytes, func: BaseFunc, size: int) -> None:
        """Keep ``func`` (``size`` encoded bytes) under ``digest``, evicting what no longer fits."""
        if size > self.budget:
            return
        old = self._entries.pop(digest, None)
        if old is not None:
            self.size -= old.size
        self._entries[digest] = _Entry(func, size)
        self.size += size
        self._evict()

    def resize(self, budget: int) -> None:
        self.budget = budget
        self._evict()

    def _evict(self) -> None:
        while self.size > self.budget and self._entries:
            _, evicted = self._entries.popitem(last=False)
            self.size -= evicted.size

    def clear(self) -> None:
        self._entries.clear()
        self.size = 0
