"""Who runs what in a wave: each worker first the functions it holds, then its share of the rest, then steals.

Every target function starts in the queue of one seat of the crew: the seat
that holds it resident (it produced or decoded the function in an earlier
wave), or, for a function nobody holds, the seat with the least work queued
so far (largest functions first, so the queues come out even). A seat is
handed its own queue in shrinking chunks (*factoring*: a share of what it has
left each time, a third for local workers and half on a cluster, down to a
floor of :data:`MIN_CHUNK_SHARE` of the wave's work per seat, or the
caller's ``floor``, at most :data:`MAX_FLOOR_SHARE` of it: a backend whose
round trip costs milliseconds asks for chunks that each carry many times
that), so that few round trips carry most of the work and the end of the
queue stays small. A seat whose queue is empty steals half of what is
left in the fullest queue, from its small end: balance does not depend on the
digests being spread evenly, and a stolen function only costs the thief a
decode. A function only its holder can run (``pinned``: it keeps the function
decoded and no store has its bytes) is never stolen: it heads its holder's
queue, which runs it first.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import operator
from collections.abc import Sequence

#: Smallest chunk, as a share of a wave's work per seat: smaller ones balance the end of a wave
#: better, but each costs a round trip.
MIN_CHUNK_SHARE = 1 / 32
#: A chunk's share of the work its seat has left, on local workers: with two chunks in flight a seat has
#: committed 5/9 of its queue at the start (3/4 with halves), so a first chunk slower than its sizes say leaves
#: less of a tail (a seat that finished has nothing left to steal); each chunk more costs a round trip.
CHUNK_SHARE = 1 / 3
#: The same on a cluster, whose round trip (its scheduler's, client's and comms' CPU included) costs ~20x a
#: local one: fewer, larger chunks.
CLUSTER_CHUNK_SHARE = 1 / 2
#: Largest floor a caller may ask for, as a share of a wave's work per seat: each seat still gets a few
#: chunks, so that a seat done early has something to steal.
MAX_FLOOR_SHARE = 1 / 4


class Dispatcher:
    """Hands out the functions of one wave to ``seats`` seats (see the module docstring).

    ``targets`` are function indices, ``sizes`` their encoded sizes (the
    estimate of their cost), ``owners`` the seat holding each resident (None:
    nobody), ``floor`` the least work (in sizes) worth a chunk of its own, ``share`` what share of the work
    a seat has left a chunk takes (:data:`CHUNK_SHARE`, :data:`CLUSTER_CHUNK_SHARE`).

    Each seat's queue is a list, largest first, of which ``[lo, hi)`` is left, with the running sums of its
    sizes: a chunk (from the large end) and a theft (from the small end) are each one bisection and one
    slice, whatever their length (the parent hands out a wave's thousands of functions between answers).
    """

    def __init__(
        self,
        targets: Sequence[int],
        sizes: Sequence[int],
        owners: Sequence[int | None],
        seats: int,
        floor: float = 0.0,
        share: float = CHUNK_SHARE,
        pinned: Sequence[bool] | None = None,
    ) -> None:
        if not 0.0 < share <= 1.0:
            raise ValueError(f"Dispatcher: a chunk's share must be in (0, 1], got {share!r}")
        self.seats = max(seats, 1)
        self._share = share
        if len(targets) != len(sizes) or len(targets) != len(owners):
            raise ValueError("Dispatcher: targets, sizes and owners differ in length")
        # The queues hold positions in ``targets`` (sorted, so that positions order as the indices do).
        if pinned is None:
            pinned = [False] * len(targets)
        if len(pinned) != len(targets):
            raise ValueError("Dispatcher: targets and pinned differ in length")
        if list(targets) != sorted(targets):
            targets, sizes, owners, pinned = map(
                list, zip(*sorted(zip(targets, sizes, owners, pinned, strict=True)), strict=True)
            )
        self._targets = list(targets)
        size = self._size = list(sizes)
        mine, nobody = _by_owner(owners, self.seats)
        if nobody:
            # a heap: the seat with the least work queued
            least = [(sum(map(size.__getitem__, q)), s) for s, q in enumerate(mine)]
            heapq.heapify(least)
            for position in _largest_first(nobody, size):
                work, seat = least[0]
                mine[seat].append(position)
                heapq.heapreplace(least, (work + size[position], seat))
            mine = [sorted(q) for q in mine]
        # Largest first: the small end of each queue is what goes last, or to a thief; the pinned ones, which no
        # thief may take, before the others.
        if any(pinned):
            self._queues = [_largest_first([p for p in q if pinned[p]], size) for q in mine]
            self._pinned_end = [len(q) for q in self._queues]
            for queue, q in zip(self._queues, mine, strict=True):
                queue += _largest_first([p for p in q if not pinned[p]], size)
        else:
            self._queues = [_largest_first(q, size) for q in mine]
            self._pinned_end = [0] * self.seats
        self._sums = [_running_sums(q, size) for q in self._queues]
        self._lo = [0] * self.seats
        self._hi = [len(q) for q in self._queues]
        per_seat = sum(size) / self.seats
        self._floor = max(per_seat * MIN_CHUNK_SHARE, min(floor, per_seat * MAX_FLOOR_SHARE), 1.0)
        self.stolen = 0

    def remaining(self) -> int:
        """Functions not handed out yet."""
        return sum(self._hi) - sum(self._lo)

    def _stealable(self, seat: int) -> int:
        """The work (summed sizes) left in ``seat``'s queue that a thief may take."""
        sums = self._sums[seat]
        start = max(self._lo[seat], self._pinned_end[seat])
        return max(sums[self._hi[seat]] - sums[start], 0)

    def next_chunk(self, seat: int) -> list[int]:
        """The next functions for ``seat`` (in module order); empty when the whole wave is handed out.

        From the large end of its queue, functions until their sizes reach the share of the work it has left
        (at least the floor), or the queue's end.
        """
        if self._lo[seat] == self._hi[seat]:
            self._steal(seat)
        lo, hi = self._lo[seat], self._hi[seat]
        if lo == hi:
            return []
        sums = self._sums[seat]
        base = sums[lo]
        target = max((sums[hi] - base) * self._share, self._floor)
        end = bisect.bisect_left(sums, target, lo + 1, hi, key=lambda total: total - base)
        self._lo[seat] = end
        return list(map(self._targets.__getitem__, sorted(self._queues[seat][lo:end])))

    def _steal(self, thief: int) -> None:
        """Move to ``thief``'s (empty) queue the small end of the fullest queue: the fewest functions
        whose sizes reach half of its work (at least one)."""
        victim = max(range(self.seats), key=lambda s: (self._stealable(s), -s))
        lo, hi = max(self._lo[victim], self._pinned_end[victim]), self._hi[victim]
        if lo >= hi:
            return
        sums = self._sums[victim]
        top = sums[hi]
        take = (top - sums[lo]) / 2
        # the last start whose suffix still reaches ``take`` (the suffix sums fall as the start rises)
        start = max(bisect.bisect_right(sums, -take, lo, hi, key=lambda total: total - top) - 1, lo)
        taken = self._queues[victim][start:hi]  # still largest first
        self._hi[victim] = start
        self._queues[thief] = taken
        self._sums[thief] = _running_sums(taken, self._size)
        self._lo[thief], self._hi[thief] = 0, len(taken)
        self._pinned_end[thief] = 0
        self.stolen += len(taken)


#: Up to this many seats, positions are grouped by owner one seat at a time (a pass in C each), beyond it in
#: one Python loop: ~0.02 against ~0.2 us a function each.
_GROUP_BY_SEAT = 8


def _by_owner(owners: Sequence[int | None], seats: int) -> tuple[list[list[int]], list[int]]:
    """The positions of ``owners`` each seat holds (ascending), and those nobody holds (None, or a seat out
    of range)."""
    positions = range(len(owners))
    if seats <= _GROUP_BY_SEAT:
        mine = [
            list(itertools.compress(positions, map(operator.eq, owners, itertools.repeat(s)))) for s in range(seats)
        ]
        if sum(map(len, mine)) == len(owners):
            return mine, []
        seats_held: dict[int | None, bool] = dict.fromkeys(range(seats), True)
        return mine, list(itertools.compress(positions, map(operator.not_, map(seats_held.get, owners))))
    mine = [[] for _ in range(seats)]
    nobody: list[int] = []
    queue_of: dict[int | None, list[int]] = dict(enumerate(mine))
    for position, owner in enumerate(owners):
        queue_of.get(owner, nobody).append(position)
    return mine, nobody


def _largest_first(positions: list[int], size: list[int]) -> list[int]:
    """``positions`` (ascending) by size, largest first, ties in order."""
    return sorted(positions, key=size.__getitem__, reverse=True)  # a sort keeps ties' order, reversed too


def _running_sums(queue: list[int], size: list[int]) -> list[int]:
    """0, then the sizes of ``queue`` summed up to and including each of its functions."""
    return list(itertools.accumulate(map(size.__getitem__, queue), initial=0))
