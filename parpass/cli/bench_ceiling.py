"""What this machine allows ``parpass bench``: its headroom, and the pipeline's own ceiling, measured in the same run.

A speedup means little without what the machine could give at best. Two
figures are measured next to the timed runs:

* the *machine headroom*: a pure-Python loop on W processes at once against
  one (shared machines often give less than a core per process);
* the *ceiling of the pipeline*: the pipeline itself, run in-process on W
  processes at once, each on the whole module, against one process alone,
  nothing shipped: W x (time alone) / (slowest time together). The pipeline's
  passes are memory-heavy Python, so this is usually below the headroom (the
  processes share the caches and the memory bus). No executor, however good,
  beats it: the work is the same and only the sharing of the machine differs.

The ceiling's processes are started once (a loky pool of their own, apart from
the executor's workers) and idle between rounds; one round is measured
after each repeat of the timed runs, so that the ceiling and the speedups are
taken under the same conditions.
"""

from __future__ import annotations

import gc
import os
import time
from typing import Any

__all__ = ["Ceiling", "machine_headroom"]

#: Seconds the processes of a round wait for each other before they start together.
_START_DELAY = 0.5
#: Rounds of busy tasks sent to start every process of the ceiling's pool before giving up.
_START_TRIES = 20


def _spin(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def machine_headroom(workers: int, n: int = 2_000_000) -> float:
    """Speedup of a pure-Python loop on ``workers`` processes over one: what this machine allows right now.

    Shared machines often give less than one core per process; parpass cannot beat this number.
    """
    from loky import ProcessPoolExecutor

    start = time.perf_counter()
    for _ in range(workers):
        _spin(n)
    serial = time.perf_counter() - start
    with ProcessPoolExecutor(workers) as pool:
        list(pool.map(_spin, [10] * workers))
        start = time.perf_counter()
        list(pool.map(_spin, [n] * workers))
        parallel = time.perf_counter() - start
    return serial / parallel


# ---------------------------------------------------------------------------------------------------------------------
# the pipeline's ceiling

#: In each process of the ceiling: the pipeline, the module's bytes, the context's opt_level and config.
_LOADED: dict[str, Any] = {}


def _load(
    pipeline: bytes, data: bytes, small: bytes, opt_level: int, config: dict[str, Any], min_sample: float
) -> None:
    """The initializer of a ceiling process: unpickle the pipeline and run it once on ``small`` (imports, caches)."""
    import cloudpickle

    _LOADED.update(
        pipeline=cloudpickle.loads(pipeline),
        data=data,
        opt_level=opt_level,
        config={**config, "parpass.num_workers": 1},
        min_sample=min_sample,
    )
    _run(small)


def _run(data: bytes) -> float:
    """Seconds the pipeline takes in this process on the module ``data`` holds (decoded as the timed runs do)."""
    from parpass.ir.serialization import from_bytes
    from parpass.transform import PassContext

    mod = from_bytes(data)
    gc.collect()  # as the timed runs do
    with PassContext(opt_level=_LOADED["opt_level"], config=_LOADED["config"]):
        start = time.perf_counter()
        _LOADED["pipeline"](mod)
        return time.perf_counter() - start


def _ready(seconds: float) -> int:
    """Keep this process busy ``seconds`` (so that the next task goes to another one); its pid."""
    time.sleep(seconds)
    return os.getpid()


def _timed_at(start_at: float) -> tuple[int, float]:
    """Wait until ``start_at`` (``time.time()``), then time the pipeline on the whole module; (pid, seconds).

    A run shorter than the ceiling's ``min_sample`` is repeated until the runs add up to it (the mean is
    returned), so that a run of milliseconds is not decided by timer and scheduler noise.
    """
    time.sleep(max(0.0, start_at - time.time()))
    total, runs = 0.0, 0
    while runs == 0 or total < _LOADED["min_sample"]:
        total += _run(_LOADED["data"])
        runs += 1
    return os.getpid(), total / runs


class Ceiling:
    """The pipeline's ceiling on each of ``counts`` processes, a round at a time (see the module docstring).

    ``pipeline`` is the pickled pass, ``data`` and ``small`` the module's and a small warm-up module's bytes;
    a run shorter than ``min_sample`` seconds is timed over as many runs in a row as make that long.
    """

    def __init__(
        self,
        pipeline: bytes,
        data: bytes,
        small: bytes,
        opt_level: int,
        config: dict[str, Any],
        counts: list[int],
        min_sample: float = 0.0,
    ) -> None:
        self.counts = counts
        #: per process count, the ratio each round measured
        self.rounds: dict[int, list[float]] = {c: [] for c in counts}
        size = max(counts)
        from loky import ProcessPoolExecutor as LokyPool

        self._pool = LokyPool(size, initializer=_load, initargs=(pipeline, data, small, opt_level, config, min_sample))
        try:
            self._start(size)
        except BaseException:
            self.close()
            raise

    def _start(self, size: int) -> None:
        """Start every process (each warms up on the small module) before anything is timed."""
        for _ in range(_START_TRIES):
            if len(set(self._pool.map(_ready, [0.2] * size))) == size:
                return
        raise RuntimeError(f"the ceiling's {size} processes did not all start")

    def _together(self, count: int, delay: float) -> list[float]:
        """Seconds of ``count`` runs started at once, one per process (an error if a process ran two)."""
        start_at = time.time() + delay
        results = list(self._pool.map(_timed_at, [start_at] * count))
        pids = {pid for pid, _ in results}
        if len(pids) != count:
            raise RuntimeError(f"the ceiling's {count} runs went to {len(pids)} processes; they must each have one")
        return [seconds for _, seconds in results]

    def measure_round(self) -> None:
        """One round: the pipeline alone on one process, then on each count of processes at once."""
        (alone,) = self._together(1, 0.0)
        for count in self.counts:
            together = self._together(count, _START_DELAY)
            self.rounds[count].append(count * alone / max(together))

    def close(self) -> None:
        self._pool.shutdown(wait=True, kill_workers=True)
