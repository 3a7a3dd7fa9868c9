"""Who runs what in a wave: each worker first the functions it holds, then its share of the rest, then steals.

Every target function starts in the queue of one seat of the crew: the seat
that holds it resident (it produced or decoded the function in an earlier
wave), or, for a function nobody holds, the seat with the least work queued
so far (largest functions first, so the queues come out even). A seat is
handed its own queue in shrinking chunks (*factoring*: half of what it has
left each time, down to a floor of :data:`MIN_CHUNK_SHARE` of the wave's work
per seat), so that few round trips carry most of the work and the end of the
queue stays small. A seat whose queue is empty steals half of what is left in
the fullest queue, from its small end: balance does not depend on the digests
being spread evenly, and a stolen function only costs the thief a decode.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Sequence

#: Smallest chunk, as a share of a wave's work per seat: smaller ones balance the end of a wave
#: better, but each costs a round trip.
MIN_CHUNK_SHARE = 1 / 32


class Dispatcher:
    """Hands out the functions of one wave to ``seats`` seats (see the module docstring).

    ``targets`` are function indices, ``sizes`` their encoded sizes (the
    estimate of their cost), ``owners`` the seat holding each resident (None:
    nobody).
    """

    def __init__(self, targets: Sequence[int], sizes: Sequence[int], owners: Sequence[int | None], seats: int) -> None:
        self.seats = max(seats, 1)
        size = self._size = dict(zip(targets, sizes, strict=True))
        queued = [0] * self.seats
        mine: list[list[int]] = [[] for _ in range(self.seats)]
        nobody: list[int] = []
        for index, owner in zip(targets, owners, strict=True):
            if owner is not None and 0 <= owner < self.seats:
                mine[owner].append(index)
                queued[owner] += size[index]
            else:
                nobody.append(index)
        if nobody:
            least = [(queued[s], s) for s in range(self.seats)]  # a heap: the seat with the least work queued
            heapq.heapify(least)
            for index in sorted(nobody, key=lambda i: (-size[i], i)):
                work, seat = least[0]
                mine[seat].append(index)
                heapq.heapreplace(least, (work + size[index], seat))
            queued = [0] * self.seats
            for work, seat in least:
                queued[seat] = work
        # Largest first: the small end of each queue is what goes last, or to a thief.
        self._queues = [deque(sorted(q, key=lambda i: (-size[i], i))) for q in mine]
        self._queued = queued
        self._floor = max(sum(sizes) * MIN_CHUNK_SHARE / self.seats, 1.0)
        self.stolen = 0

    def remaining(self) -> int:
        """Functions not handed out yet."""
        return sum(len(q) for q in self._queues)

    def next_chunk(self, seat: int) -> list[int]:
        """The next functions for ``seat`` (in module order); empty when the whole wave is handed out."""
        if not self._queues[seat]:
            self._steal(seat)
        queue = self._queues[seat]
        if not queue:
            return []
        target = max(self._queued[seat] / 2, self._floor)
        chunk: list[int] = []
        filled = 0
        while queue and filled < target:
            index = queue.popleft()
            chunk.append(index)
            filled += self._size[index]
        self._queued[seat] -= filled
        return sorted(chunk)

    def _steal(self, thief: int) -> None:
        victim = max(range(self.seats), key=lambda s: (self._queued[s], -s))
        queue = self._queues[victim]
        if not queue:
            return
        take = self._queued[victim] / 2
        taken: list[int] = []
        moved = 0
        while queue and (moved < take or not taken):
            index = queue.pop()  # the small end
            taken.append(index)
            moved += self._size[index]
        self._queued[victim] -= moved
        self._queued[thief] += moved
        self._queues[thief].extend(reversed(taken))  # still largest first
        self.stolen += len(taken)
