"""Whether a wave is worth shipping to workers, and how to cut it into chunks.

The executor learns, per pass (and per fused chain), how many seconds of work
a byte of IR costs, from every run it makes in-process or in workers, and how
long a round trip to the pool costs. A wave runs in workers only when the
estimated parallel time (round trip, plus the work divided among the workers)
beats the estimated in-process time. A pass never measured is estimated at a
deliberately high default rate, so big modules start parallel and small ones
in-process.
"""

from __future__ import annotations

import statistics
import threading
from collections.abc import Sequence

#: Seconds per byte of encoded IR assumed for a pass never measured (a light Python pass runs ~ 10-50 ns/B).
DEFAULT_RATE = 30e-9
#: Round-trip cost of a wave assumed before one is measured (write, submit, wait, merge), seconds.
DEFAULT_OVERHEAD = 4e-3
#: Parent-side cost per byte shipped and merged, assumed before measured.
DEFAULT_SHIP_RATE = 1e-9
#: Chunks per worker: more balances load better, fewer cost fewer round trips.
CHUNKS_PER_WORKER = 4
#: Smoothing of the running estimates (weight of the newest measurement).
_ALPHA = 0.5
#: Waves whose overhead the estimate is the median of.
_SAMPLES = 5


class CostModel:
    """Running estimates of pass cost and pool overhead, shared by all contexts of a process."""

    def __init__(self) -> None:
        self._rates: dict[tuple[str, ...], float] = {}
        self.overhead = DEFAULT_OVERHEAD
        self._overheads: list[float] = []
        self.ship_rate = DEFAULT_SHIP_RATE
        self._lock = threading.Lock()

    def rate(self, chain: Sequence[str]) -> float:
        """Estimated seconds per byte of the chain of passes named ``chain``."""
        key = tuple(chain)
        with self._lock:
            if key in self._rates:
                return self._rates[key]
            singles = [self._rates.get((name,)) for name in key]
        return sum(r if r is not None else DEFAULT_RATE for r in singles)

    def measured(self, chain: Sequence[str]) -> bool:
        with self._lock:
            return tuple(chain) in self._rates

    def record_work(self, chain: Sequence[str], seconds: float, nbytes: int) -> None:
        """Fold in a measurement: the chain took ``seconds`` of work on ``nbytes`` of IR."""
        if nbytes <= 0:
            return
        key = tuple(chain)
        rate = seconds / nbytes
        with self._lock:
            old = self._rates.get(key)
            self._rates[key] = rate if old is None else (1 - _ALPHA) * old + _ALPHA * rate
            if len(key) == 1:
                return
            # Apportion the chain's rate to its passes that were never measured alone.
            known = sum(self._rates.get((n,), 0.0) for n in key)
            missing = [n for n in key if (n,) not in self._rates]
            for name in missing:
                self._rates[(name,)] = max(rate - known, 0.0) / len(missing)

    def record_wave(self, wall: float, busy: float, workers: int, nbytes: int) -> None:
        """Fold in a parallel wave: ``wall`` seconds in the parent for ``busy`` seconds of worker time.

        The overhead estimate is the median of the last few waves, so that one wave
        slowed down by another program does not turn parallel runs off.
        """
        sample = max(wall - busy / max(workers, 1), 0.0)
        with self._lock:
            self._overheads.append(sample)
            del self._overheads[:-_SAMPLES]
            self.overhead = statistics.median(self._overheads)

    def inline_seconds(self, chain: Sequence[str], nbytes: int) -> float:
        return self.rate(chain) * nbytes

    def parallel_seconds(self, chain: Sequence[str], nbytes: int, workers: int) -> float:
        return self.overhead + self.ship_rate * nbytes + self.inline_seconds(chain, nbytes) / workers

    def should_parallelize(self, chain: Sequence[str], nbytes: int, workers: int, inline_below: float) -> bool:
        """The automatic decision: workers only when they are expected to win."""
        inline = self.inline_seconds(chain, nbytes)
        if inline_below >= 0:
            return inline >= inline_below
        return self.parallel_seconds(chain, nbytes, workers) < inline


def plan_chunks(sizes: Sequence[int], workers: int) -> list[list[int]]:
    """Cut positions ``0..len(sizes)-1`` into chunks, largest functions first.

    Functions are sorted by size (descending, ties by position); big ones go
    alone into the first chunks, and the small ones fill later chunks of about
    equal total size, so the pool ends with small tasks and no worker is left
    finishing one big function while the others idle.
    """
    if not sizes:
        return []
    order = sorted(range(len(sizes)), key=lambda i: (-sizes[i], i))
    target = max(sum(sizes) / max(workers * CHUNKS_PER_WORKER, 1), 1.0)
    chunks: list[list[int]] = []
    current: list[int] = []
    filled = 0
    for i in order:
        current.append(i)
        filled += sizes[i]
        if filled >= target:
            chunks.append(sorted(current))
            current, filled = [], 0
    if current:
        chunks.append(sorted(current))
    return chunks
