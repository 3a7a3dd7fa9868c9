"""``parpass bench``'s measurements: the pipeline run in one configuration, timed three ways.

Each configuration runs the pipeline from a module freshly decoded from bytes
(as if read from a file): pass by pass (fusion off) under a
:class:`~parpass.instrument.PassTimingInstrument`, whose per-pass times are the
table's rows; fused with the timing instrument (it reads no module, so the
pipeline still runs fused); and fused without instruments, as users run it.
Every output is compared with the first run's, byte for byte, and the pass
statistics with the first counted run's.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from parpass.cli.common import make_context
from parpass.cli.progress import ProgressBar
from parpass.instrument import PassInstrument, PassTiming, PassTimingInstrument
from parpass.ir.module import IRModule
from parpass.transform import FunctionLevelPass, Pass, Sequential, walk_passes
from parpass.transform.passes import FUSE_PASSES
from parpass.transform.statistics import PASS_STATISTICS

__all__ = [
    "Bench",
    "Run",
    "count_kinds",
    "leaf_kinds",
    "progress_units",
    "run_cpu",
    "sequence_names",
    "timing_nodes",
    "timing_rows",
]


@dataclass
class Run:
    """One timed configuration: the pipeline pass by pass (fusion off, timing instrument: ``wall``, ``rows``,
    ``waves``), fused with the timing instrument (``timed_*``), and fused without instruments (``fused_*``).

    ``timed_rows`` holds, per pass, the ``(wall, cpu)`` seconds the timing
    instrument reported in the fused run (for a function-level pass, summed over
    the processes that ran it).
    """

    workers: int
    wall: float
    rows: dict[tuple[str, ...], float]
    depths: dict[tuple[str, ...], int]
    waves: list[dict[str, Any]]
    fused_wall: float = 0.0
    fused_waves: list[dict[str, Any]] = field(default_factory=list)
    identical: bool = True
    timed_wall: float = 0.0
    timed_waves: list[dict[str, Any]] = field(default_factory=list)
    timed_rows: dict[tuple[str, ...], tuple[float, float]] = field(default_factory=dict)
    #: the pass statistics counted in the pass-by-pass run
    statistics: dict[str, dict[str, int]] = field(default_factory=dict)
    #: CPU seconds of each way (pass by pass, fused with the timing instrument, fused): this process's, all
    #: its threads, and the workers' over their chunks (see :func:`run_cpu`)
    cpu: float = 0.0
    timed_cpu: float = 0.0
    fused_cpu: float = 0.0


def run_cpu(process_cpu: float, waves: Sequence[dict[str, Any]]) -> float:
    """What a run cost the machine's cores: ``process_cpu`` (this process's CPU seconds over the run) and the
    workers' CPU seconds over the chunks of its parallel ``waves``. Not counted: a worker opening a wave
    (decoding its header, ~1-2 ms a wave) and a worker's idle collections."""
    return process_cpu + float(sum(w.get("worker_cpu_seconds", 0.0) for w in waves if w["parallel"]))


class _Timed(NamedTuple):
    """One timed run of the pipeline (see :meth:`Bench._timed`)."""

    wall: float
    waves: list[dict[str, Any]]
    same: bool
    statistics: dict[str, dict[str, int]]
    cpu: float


def timing_rows(roots: Sequence[PassTiming], seq_names: set[str]) -> list[tuple[tuple[str, ...], int, float]]:
    """``(key, depth, seconds)`` for the passes directly inside the pipeline and inside nested Sequentials.

    A key is the path of names from the top with, at each level, how many
    earlier siblings had the same name (so a pass that runs twice gives two
    rows). Passes nested inside other passes are not rows. ``seconds`` is the
    pass's total (TVM's figure: the time it took in this process).
    """
    return [(key, depth, node.total) for key, depth, node in timing_nodes(roots, seq_names)]


def timing_nodes(roots: Sequence[PassTiming], seq_names: set[str]) -> list[tuple[tuple[str, ...], int, PassTiming]]:
    """:func:`timing_rows` with each row's whole :class:`~parpass.instrument.PassTiming` (wall and CPU too)."""
    out: list[tuple[tuple[str, ...], int, PassTiming]] = []
    stack: list[tuple[tuple[str, ...], int, PassTiming]] = []

    def push(children: Sequence[PassTiming], prefix: tuple[str, ...], depth: int) -> None:
        seen: dict[str, int] = {}
        keyed = []
        for child in children:
            n = seen.get(child.name, 0)
            seen[child.name] = n + 1
            keyed.append(((*prefix, f"{child.name}#{n}"), depth, child))
        stack.extend(reversed(keyed))

    if len(roots) == 1 and roots[0].name in seq_names:  # the pipeline itself: its total is the "total" row
        push(roots[0].children, (f"{roots[0].name}#0",), 0)
    else:
        push(roots, (), 0)
    while stack:
        key, depth, node = stack.pop()
        out.append((key, depth, node))
        if node.name in seq_names:
            push(node.children, key, depth + 1)
    return out


def _new_waves(marker: object) -> list[Any]:
    from parpass.parallel import default_executor as executor

    history = list(executor.history)
    for index in range(len(history) - 1, -1, -1):
        if history[index] is marker:
            return history[index + 1 :]
    return history


def _wave_dict(w: Any) -> dict[str, Any]:
    """Every field of the executor's ``WaveStats`` (passes as a list), for the figures and the JSON."""
    import msgspec

    out: dict[str, Any] = msgspec.structs.asdict(w)
    out["passes"] = list(w.passes)
    return out


class Bench:
    """Runs the configurations and keeps their figures."""

    def __init__(self, pipeline: Pass, data: bytes, opt_level: int, config: dict[str, Any]) -> None:
        self.pipeline = pipeline
        self.opt_level = opt_level
        self.config = config
        self.seq_names = sequence_names(pipeline)
        #: the module each way runs on (the same one unless renewed) and, by module, the output of its first run
        self.modules = [data, data, data]
        self.references: dict[int, bytes] = {}
        self.reference_statistics: dict[str, dict[str, int]] | None = None

    def renew(self, modules: Sequence[bytes]) -> None:
        """Time the next runs of each of the three ways (pass by pass, fused with the timing instrument, fused)
        on a module of its own, ``modules[way]``; the first run on each is the reference the others must equal."""
        self.modules = list(modules)
        self.references.clear()
        self.reference_statistics = None

    def context(self, workers: int, instruments: Sequence[PassInstrument], **extra: Any) -> Any:
        config = dict(self.config)
        config["parpass.num_workers"] = workers
        config.update(extra)
        return make_context(self.opt_level, (), (), instruments, config)

    def warm_up(self, workers: int, small: bytes) -> None:
        """Run the pipeline once on a small module: starts the pool of ``workers`` (if > 1), imports the passes."""
        from parpass.ir.serialization import from_bytes

        mod = from_bytes(small)
        assert isinstance(mod, IRModule)
        with self.context(workers, [], **{"parpass.parallel": "always"}):
            self.pipeline(mod)

    def _timed(
        self, way: int, workers: int, instruments: list[PassInstrument], fuse: bool = True, count: bool = False
    ) -> _Timed:
        """Wall time, executor waves, whether the output is byte-identical to the first run's on the same
        module (and, with ``count``, the pass statistics equal to the first counted run's), the statistics
        counted, and the CPU time (see :func:`run_cpu`); on the module of ``way`` (see :meth:`renew`)."""
        from parpass.ir.serialization import from_bytes, to_bytes
        from parpass.parallel import default_executor as executor

        source = self.modules[way]
        mod = from_bytes(source)  # a fresh module holding its functions as bytes, as if read from a file
        assert isinstance(mod, IRModule)
        ctx = self.context(workers, instruments, **{FUSE_PASSES: fuse, PASS_STATISTICS: count})
        marker = executor.history[-1] if executor.history else None
        gc.collect()  # no run pays for garbage another left (the collector's cadence charged alternate runs)
        start, cpu_start = time.perf_counter(), time.process_time()
        with ctx:
            out = self.pipeline(mod)
        wall, process_cpu = time.perf_counter() - start, time.process_time() - cpu_start
        waves = [_wave_dict(w) for w in _new_waves(marker)]
        data = to_bytes(out)
        same = data == self.references.setdefault(id(source), data)
        statistics = ctx.pass_statistics.as_dict()
        if count:
            if self.reference_statistics is None:
                self.reference_statistics = statistics
            same = same and statistics == self.reference_statistics
        return _Timed(wall, waves, same, statistics, run_cpu(process_cpu, waves))

    def run(self, workers: int, progress: PassInstrument | None, bar: ProgressBar | None = None) -> Run:
        """The pipeline pass by pass under a timing instrument (fusion off), fused under a timing instrument,
        then fused without instruments."""
        timing = PassTimingInstrument()
        instruments: list[PassInstrument] = [timing] if progress is None else [timing, progress]
        by_pass = self._timed(0, workers, instruments, fuse=False, count=True)
        table = timing_rows(timing.timings, self.seq_names)
        rows = {key: seconds for key, _, seconds in table}
        depths = {key: depth for key, depth, _ in table}
        where = "in-process" if workers == 1 else f"{workers} workers"
        if bar is not None:
            bar.set_label(f"{where}: the pipeline fused, with the timing instrument")
        timed = PassTimingInstrument()
        fused_timed = self._timed(1, workers, [timed])
        timed_rows = {key: (node.wall, node.cpu) for key, _, node in timing_nodes(timed.timings, self.seq_names)}
        if bar is not None:
            bar.set_label(f"{where}: the pipeline without instruments")
        fused = self._timed(2, workers, [])
        return Run(
            workers,
            by_pass.wall,
            rows,
            depths,
            by_pass.waves,
            fused.wall,
            fused.waves,
            by_pass.same and fused_timed.same and fused.same,
            fused_timed.wall,
            fused_timed.waves,
            timed_rows,
            by_pass.statistics,
            by_pass.cpu,
            fused_timed.cpu,
            fused.cpu,
        )


# ---------------------------------------------------------------------------------------------------------------------
# what the pipeline and the module hold


def sequence_names(pipeline: Pass) -> set[str]:
    """The names of the Sequentials in ``pipeline`` (their rows are groups, not passes)."""
    return {p.info.name for p in walk_passes(pipeline) if isinstance(p, Sequential)}


def leaf_kinds(pipeline: Pass) -> dict[str, str]:
    """Each pass name of ``pipeline``: "function" (function-level) or "module", as it first appears."""
    out: dict[str, str] = {}
    for p in walk_passes(pipeline):
        if not isinstance(p, Sequential):
            out.setdefault(p.info.name, "function" if isinstance(p, FunctionLevelPass) else "module")
    return out


def count_kinds(mod: IRModule) -> str:
    """``"1000 Function, 500 PrimFunc"``: the module's functions by kind."""
    counts: dict[str, int] = {}
    for name in mod.names():
        kind, _ = mod.kind_and_attrs(name)
        counts[kind.__name__] = counts.get(kind.__name__, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))


def progress_units(pipeline: Pass, data: bytes) -> dict[int, int]:
    """Progress units of each pass of the pipeline (by id of its info): the functions it visits in the module
    ``data`` holds (a module pass: all of them)."""
    from parpass.ir.serialization import from_bytes

    mod = from_bytes(data, validate=False)
    assert isinstance(mod, IRModule)
    out: dict[int, int] = {}
    for p in walk_passes(pipeline):
        if isinstance(p, FunctionLevelPass):
            out[id(p.info)] = max(len(p.targets(mod)), 1)
        elif not isinstance(p, Sequential):
            out[id(p.info)] = max(len(mod), 1)
    return out
