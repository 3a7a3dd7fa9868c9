"""Helpers shared by the benchmark scripts: machine headroom, a core burner, ratios, a line fit, output digests.

Not a benchmark itself. The scripts import it from their own folder (``python
benchmarks/bench_parallel.py`` puts ``benchmarks/`` on ``sys.path``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType

from parpass.cli.bench_ceiling import machine_headroom
from parpass.ir import IRModule, to_bytes

__all__ = [
    "burning_one_core",
    "fit_line",
    "machine_headroom",
    "mark",
    "median_ratio",
    "module_digest",
    "sigterm_as_exit",
    "size_repeat_workers",
]

#: A pure-Python busy loop that stops by itself once its parent is gone (reparented: another parent pid), so
#: that it cannot outlive a benchmark killed with SIGKILL, which runs no cleanup.
_BURN = """\
import os, sys
parent = int(sys.argv[1])
while os.getppid() == parent:
    for _ in range(200_000):
        pass
"""


@contextlib.contextmanager
def burning_one_core() -> Iterator[subprocess.Popen[bytes]]:
    """A background process that burns one core while the body runs; killed when the body ends, however it ends.

    The loaded runs of the benchmarks use it: ``auto`` must not lose to an
    in-process run when the workers get less than a core each.
    """
    proc = subprocess.Popen([sys.executable, "-c", _BURN, str(os.getpid())], stdin=subprocess.DEVNULL)
    try:
        time.sleep(0.2)  # let it start burning before anything is timed
        yield proc
    finally:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def sigterm_as_exit() -> Iterator[None]:
    """SIGTERM raises ``SystemExit(143)`` inside the body, so that ``finally`` blocks (the burner's kill) run."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def bytecode_state() -> str:
    """Whether a fresh process imports parpass from cached bytecode, in words: a cold run's timed span includes
    its imports, each of its workers' too. ``pip install .`` compiles the package; an editable install under
    ``PYTHONDONTWRITEBYTECODE=1`` (this development machine's environment, and the lent machines') compiles it
    from source in every process (~60 ms in the parent before it reads its input, and as much in each worker)."""
    import parpass

    root = Path(parpass.__file__).parent
    sources = [path for path in root.rglob("*.py") if "__pycache__" not in path.parts]
    stale = [path for path in sources if not _cached(path)]
    if not stale:
        return "cached for every module"
    if sys.dont_write_bytecode:
        return (
            f"compiled from source in every process for {len(stale)} of {len(sources)} modules "
            "(PYTHONDONTWRITEBYTECODE is set; python -m compileall parpass caches it)"
        )
    return f"not cached yet for {len(stale)} of {len(sources)} modules (the first process to import them caches it)"


def _cached(source: Path) -> bool:
    """Whether ``source`` has bytecode the import system takes as it is (a timestamp pyc of this source)."""
    try:
        with open(importlib.util.cache_from_source(str(source)), "rb") as pyc:
            head = pyc.read(16)
    except OSError:
        return False
    stat = source.stat()
    fields = [int.from_bytes(head[i : i + 4], "little") for i in (4, 8, 12)]  # flags, mtime, size
    return head[:4] == importlib.util.MAGIC_NUMBER and fields == [0, int(stat.st_mtime), stat.st_size]


def size_repeat_workers(description: str, functions: int, against: str) -> argparse.Namespace:
    """The command line of a script that times a module of ``--functions`` Functions, ``--repeat`` times each
    side, on ``--workers`` workers (at least 2) against ``against``: parsed and checked."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--functions", type=int, default=functions, help=f"Functions of the module (default {functions})"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side, alternating (default 3)")
    parser.add_argument("--workers", type=int, default=2, help="workers of the parallel runs (default 2)")
    args = parser.parse_args()
    for name in ("functions", "repeat"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1")
    if args.workers < 2:
        parser.error(f"--workers must be >= 2 (the runs compare it with {against})")
    return args


def median_ratio(serial: Sequence[float], parallel: Sequence[float]) -> float:
    """Median of ``serial[i] / parallel[i]``: samples taken in pairs (interleaved) are compared pair by pair."""
    if len(serial) != len(parallel):
        raise ValueError(f"need the same number of samples on both sides, got {len(serial)} and {len(parallel)}")
    if not serial:
        raise ValueError("no samples")
    return statistics.median(s / p for s, p in zip(serial, parallel, strict=True))


def mark(ratio: float, target: float) -> str:
    """``ratio`` as ``"1.52x ok"`` when it meets ``target``, else ``"0.91x MISS"``."""
    return f"{ratio:.2f}x {'ok' if round(ratio, 2) >= target else 'MISS'}"


def fit_line(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares ``y = fixed + slope * x`` through ``(x, y)`` points; returns ``(fixed, slope)``."""
    xs = [x for x, _ in points]
    if len(set(xs)) < 2:
        raise ValueError(f"a line fit needs points at two different x at least, got x = {sorted(set(xs))}")
    ys = [y for _, y in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


def module_digest(mod: IRModule) -> str:
    """SHA-256 of a module's bytes (functions and attributes): equal iff byte-identical."""
    return hashlib.sha256(to_bytes(mod)).hexdigest()
