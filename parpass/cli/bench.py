"""``parpass bench``: the default pipeline in-process and on worker processes, pass by pass and fused.

Generates a :func:`~parpass.testing.random_module`, runs the pipeline on it
in-process (``parpass.num_workers=1``) and with each worker count, checks the
outputs are byte-identical, and prints per pass the in-process time, the
parallel time, the speedup and the parallel efficiency (speedup divided by the
workers that can actually run at once: ``min(workers, usable cores)``), then
three totals, the parent's own overhead per function (serializing, shipping
and merging, from the executor's wave statistics), and the parent's serial
share of the pass-by-pass runs with the speedup Amdahl's law bounds it to on
more workers (a projection, not a measurement).

Each configuration runs the pipeline three ways, each from a module freshly
decoded from bytes (as if read from a file):

* pass by pass: fusion off (``parpass.fuse_passes=False``: every pass is its
  own wave), with a :class:`~parpass.instrument.PassTimingInstrument`, whose
  per-pass times are the table's rows;
* fused with the timing instrument (it reads no module, so the pipeline runs
  fused; its per-pass times are the executor's, summed over the workers);
* fused without instruments, as users run it.

The worker pool is started and warmed up (on a small module) before anything is timed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from parpass.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    add_common_options,
    add_config_options,
    atomic_output,
    build_pipeline,
    make_context,
    opt_level,
    parse_config,
    positive_int,
)
from parpass.cli.gen import add_module_size_options, make_module
from parpass.cli.progress import ProgressBar, ProgressInstrument
from parpass.instrument import PassInstrument, PassTiming, PassTimingInstrument
from parpass.ir.module import IRModule
from parpass.transform import FunctionLevelPass, Pass, Sequential, pipeline_spec
from parpass.transform.passes import FUSE_PASSES
from parpass.transform.statistics import PASS_STATISTICS

_DESCRIPTION = """\
Time a pass pipeline (the default pipeline unless --pipeline) on a random module of
thousands of functions, in-process and on worker processes; check that the outputs are
byte-identical; print per pass the in-process time, the parallel time, the speedup and the
parallel efficiency (speedup / min(workers, usable cores)), then three totals (pass by pass;
fused with the timing instrument; fused without instruments), the parent's own overhead per
function, and its serial share with the Amdahl projection on 16 and 64 workers. Exit status 1
if the outputs differ.

examples:
  parpass bench
  parpass bench --workers 1,2,4 --repeat 3 --json bench.json
  parpass bench --functions 500 --pipeline 'InferType,FoldConstant,DeadCodeElimination'
"""

#: How to get matplotlib for ``--plot`` (the README says the same).
PLOT_INSTALL_HINT = 'pip install matplotlib, or pip install ".[plot]" in a parpass checkout'

#: Config options bench sets itself, and what to do instead of setting them.
_RESERVED = {
    "parpass.num_workers": "use --workers",
    FUSE_PASSES: "it runs the pipeline both pass by pass and fused",
    PASS_STATISTICS: "it counts them in the pass-by-pass runs (see --json)",
}

#: The worker counts the Amdahl projection is printed for.
AMDAHL_WORKERS = (16, 64)


def worker_list(text: str) -> list[int]:
    """``"1,2,4"`` as ``[1, 2, 4]`` (positive, without repeats, in the order given)."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        value = positive_int(part)
        if value not in out:
            out.append(value)
    if not out:
        raise argparse.ArgumentTypeError(f"expected worker counts like 1,2,4, got {text!r}")
    return out


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="time the default pipeline in-process and on worker processes (start here)",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_module_size_options(parser, functions=2000)
    parser.add_argument(
        "--workers",
        type=worker_list,
        metavar="N[,N...]",
        help="worker counts to compare with the in-process run (default: the usable cores, at least 2)",
    )
    parser.add_argument(
        "--repeat",
        type=positive_int,
        default=3,
        metavar="N",
        help="runs of each configuration; reports the median (default 3: shared machines are noisy)",
    )
    parser.add_argument("--pipeline", metavar="SPEC", help="pipeline spec to time (default: the default pipeline)")
    parser.add_argument(
        "-O",
        "--opt-level",
        type=opt_level,
        default=2,
        metavar="N",
        help="opt_level, 0 to 3, of the PassContext and of the default pipeline (default 2)",
    )
    add_config_options(parser)
    parser.add_argument("--json", metavar="FILE", help="write the raw figures to FILE as JSON")
    parser.add_argument("--plot", metavar="FILE.png", help="draw the speedups to an image (needs matplotlib)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (it shows only on a terminal)")
    add_common_options(parser)
    parser.set_defaults(func=run)


# ---------------------------------------------------------------------------------------------------------------------
# one run


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


@dataclass
class Row:
    key: tuple[str, ...]
    name: str
    depth: int
    seconds: dict[int, float] = field(default_factory=dict)


def _sequence_names(p: Pass) -> set[str]:
    out: set[str] = set()
    stack = [p]
    while stack:
        q = stack.pop()
        if isinstance(q, Sequential):
            out.add(q.info.name)
            stack.extend(q.passes)
    return out


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
        self.data = data
        self.opt_level = opt_level
        self.config = config
        self.seq_names = _sequence_names(pipeline)
        self.reference: bytes | None = None
        self.reference_statistics: dict[str, dict[str, int]] | None = None

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
        self, workers: int, instruments: list[PassInstrument], fuse: bool = True, count: bool = False
    ) -> tuple[float, list[dict[str, Any]], bool, dict[str, dict[str, int]]]:
        """Wall time, executor waves, whether the output is byte-identical to the first run's (and, with
        ``count``, the pass statistics equal to the first counted run's), and the statistics counted."""
        from parpass.ir.serialization import from_bytes, to_bytes
        from parpass.parallel import default_executor as executor

        mod = from_bytes(self.data)  # a fresh module holding its functions as bytes, as if read from a file
        assert isinstance(mod, IRModule)
        ctx = self.context(workers, instruments, **{FUSE_PASSES: fuse, PASS_STATISTICS: count})
        marker = executor.history[-1] if executor.history else None
        start = time.perf_counter()
        with ctx:
            out = self.pipeline(mod)
        wall = time.perf_counter() - start
        waves = [_wave_dict(w) for w in _new_waves(marker)]
        data = to_bytes(out)
        if self.reference is None:
            self.reference = data
        same = data == self.reference
        statistics = ctx.pass_statistics.as_dict()
        if count:
            if self.reference_statistics is None:
                self.reference_statistics = statistics
            same = same and statistics == self.reference_statistics
        return wall, waves, same, statistics

    def run(self, workers: int, progress: PassInstrument | None, bar: ProgressBar | None = None) -> Run:
        """The pipeline pass by pass under a timing instrument (fusion off), fused under a timing instrument,
        then fused without instruments."""
        timing = PassTimingInstrument()
        instruments: list[PassInstrument] = [timing] if progress is None else [timing, progress]
        wall, waves, same, statistics = self._timed(workers, instruments, fuse=False, count=True)
        table = timing_rows(timing.timings, self.seq_names)
        rows = {key: seconds for key, _, seconds in table}
        depths = {key: depth for key, depth, _ in table}
        where = "in-process" if workers == 1 else f"{workers} workers"
        if bar is not None:
            bar.set_label(f"{where}: the pipeline fused, with the timing instrument")
        timed = PassTimingInstrument()
        timed_wall, timed_waves, timed_same, _ = self._timed(workers, [timed])
        timed_rows = {key: (node.wall, node.cpu) for key, _, node in timing_nodes(timed.timings, self.seq_names)}
        if bar is not None:
            bar.set_label(f"{where}: the pipeline without instruments")
        fused_wall, fused_waves, fused_same, _ = self._timed(workers, [])
        identical = same and timed_same and fused_same
        return Run(
            workers,
            wall,
            rows,
            depths,
            waves,
            fused_wall,
            fused_waves,
            identical,
            timed_wall,
            timed_waves,
            timed_rows,
            statistics,
        )


# ---------------------------------------------------------------------------------------------------------------------
# figures and the table


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _overhead_per_function(waves: Sequence[dict[str, Any]]) -> float | None:
    par = [w for w in waves if w["parallel"]]
    functions = sum(w["functions"] for w in par)
    if not functions:
        return None
    return cast("float | None", sum(w["parent_seconds"] for w in par) / functions)


def _fmt_time(seconds: float) -> str:
    if seconds != seconds:  # nan
        return "-"
    return f"{seconds * 1e3:,.1f} ms"


def _fmt_speedup(base: float, other: float) -> str:
    return f"{base / other:.2f}x" if other > 0 and base == base and other == other else "-"


def _fmt_eff(base: float, other: float, usable: int) -> str:
    return f"{base / other / usable * 100:.0f}%" if other > 0 and base == base and other == other else "-"


def summarize(
    runs: Sequence[Run], counts: Sequence[int], cores: int, seq_names: set[str], pipeline: Pass
) -> dict[str, Any]:
    """Medians per row and worker count, speedups, efficiencies, overheads and where each pass ran."""
    order: list[tuple[str, ...]] = []
    depth: dict[tuple[str, ...], int] = {}
    for run in runs:
        for key in run.rows:
            if key not in depth:
                order.append(key)
                depth[key] = run.depths[key]
    configs = [1, *[c for c in counts if c != 1]]
    rows = []
    leaf_kinds = _leaf_kinds(pipeline)
    for key in order:
        name = key[-1].rsplit("#", 1)[0]
        entry: dict[str, Any] = {"name": name, "path": [k.rsplit("#", 1)[0] for k in key], "depth": depth[key]}
        medians = {c: _median([r.rows[key] for r in runs if r.workers == c and key in r.rows]) for c in configs}
        entry["seconds"] = {str(c): medians[c] for c in configs}
        entry["speedup"] = {str(c): medians[1] / medians[c] if medians[c] > 0 else None for c in configs if c != 1}
        entry["efficiency"] = {
            str(c): medians[1] / medians[c] / min(c, cores) if medians[c] > 0 else None for c in configs if c != 1
        }
        entry["ran"] = {str(c): _ran(name, runs, c, leaf_kinds) for c in configs if c != 1 and name not in seq_names}
        entry["where"] = _where(name, runs, [c for c in configs if c != 1], name in seq_names, leaf_kinds)
        rows.append(entry)
    overhead = {}
    for c in configs:
        if c == 1:
            continue
        values = [
            v
            for r in runs
            if r.workers == c
            for v in [_overhead_per_function([*r.waves, *r.timed_waves, *r.fused_waves])]
            if v
        ]
        overhead[str(c)] = _median(values) if values else None
    return {
        "rows": rows,
        "total": _total(runs, configs, cores, "wall"),
        "total_timed": _total(runs, configs, cores, "timed_wall"),
        "total_fused": _total(runs, configs, cores, "fused_wall"),
        "parent_overhead_per_function": overhead,
        "amdahl": amdahl(runs, configs),
    }


def serial_and_parallel(run: Run) -> tuple[float, float]:
    """The parent's own time in a pass-by-pass run, and the workers' busy time, from the run's waves.

    Serial: everything of the run's wall time that was not spent waiting for
    workers (module passes, waves kept in-process, the parent's part of the
    parallel waves: encoding, shipping, merging, replaying). Parallel: the
    seconds the workers were busy with the parallel waves, summed over them.
    """
    parallel_waves = [w for w in run.waves if w["parallel"]]
    waiting = sum(w["wall"] - w["parent_seconds"] for w in parallel_waves)
    busy = sum(w["worker_seconds"] for w in parallel_waves)
    return max(run.wall - waiting, 0.0), busy


def amdahl(runs: Sequence[Run], configs: Sequence[int]) -> dict[str, Any]:
    """Per parallel worker count: the parent's serial share of the pass-by-pass runs (medians over the
    repeats) and Amdahl's bound ``T1 / (serial + parallel / N)`` on :data:`AMDAHL_WORKERS` workers, where
    T1 is the in-process pass-by-pass time. A projection from measured figures, not a measurement."""
    t1 = _median([r.wall for r in runs if r.workers == 1])
    out: dict[str, Any] = {}
    for c in configs:
        if c == 1:
            continue
        pairs = [serial_and_parallel(r) for r in runs if r.workers == c]
        if not pairs:
            continue
        serial = _median([s for s, _ in pairs])
        parallel = _median([p for _, p in pairs])
        work = serial + parallel
        out[str(c)] = {
            "t1_seconds": t1,
            "serial_seconds": serial,
            "parallel_seconds": parallel,
            "serial_share": serial / work if work > 0 else None,
            "bound": {str(n): t1 / (serial + parallel / n) if work > 0 else None for n in AMDAHL_WORKERS},
        }
    return out


def render_amdahl(summary: dict[str, Any]) -> str:
    """The serial share and the projection, one pair of lines per parallel worker count."""
    lines = []
    for c, figures in summary["amdahl"].items():
        share = figures["serial_share"]
        share_text = f" ({share * 100:.0f}%)" if share is not None else ""
        lines.append(
            f"parent's serial share, pass by pass ({c} workers): {_fmt_time(figures['serial_seconds'])} "
            f"of {_fmt_time(figures['serial_seconds'] + figures['parallel_seconds'])}{share_text}; "
            f"workers busy {_fmt_time(figures['parallel_seconds'])}"
        )
        bounds = ", ".join(
            f"{value:.2f}x on {n} workers" if value is not None else f"- on {n} workers"
            for n, value in figures["bound"].items()
        )
        lines.append(
            f"projection (Amdahl's law from that share, not a measurement): at most {bounds} "
            f"(T1 = in-process, pass by pass: {_fmt_time(figures['t1_seconds'])})"
        )
    return "\n".join(lines)


def _total(runs: Sequence[Run], configs: Sequence[int], cores: int, attr: str) -> dict[str, Any]:
    totals = {c: _median([getattr(r, attr) for r in runs if r.workers == c]) for c in configs}
    return {
        "seconds": {str(c): totals[c] for c in configs},
        "speedup": {str(c): totals[1] / totals[c] if totals[c] > 0 else None for c in configs if c != 1},
        "efficiency": {
            str(c): totals[1] / totals[c] / min(c, cores) if totals[c] > 0 else None for c in configs if c != 1
        },
    }


def _leaf_kinds(pipeline: Pass) -> dict[str, str]:
    out: dict[str, str] = {}
    stack = [pipeline]
    while stack:
        p = stack.pop()
        if isinstance(p, Sequential):
            stack.extend(p.passes)
        else:
            out.setdefault(p.info.name, "function" if isinstance(p, FunctionLevelPass) else "module")
    return out


def _ran(name: str, runs: Sequence[Run], workers: int, kinds: dict[str, str]) -> str:
    """Where a pass ran in the pass-by-pass runs with ``workers``: ``workers``, ``in-process``, or ``mixed`` (both)."""
    if kinds.get(name) == "module":
        return "in-process"
    waves = [w for r in runs if r.workers == workers for w in r.waves if name in w["passes"]]
    shipped = sum(1 for w in waves if w["parallel"])
    if not waves:
        return "-"
    return "workers" if shipped == len(waves) else "in-process" if shipped == 0 else "mixed"


def _where(name: str, runs: Sequence[Run], counts: Sequence[int], is_seq: bool, kinds: dict[str, str]) -> str:
    """Where a pass ran in the parallel runs: ``workers``, or in-process and why."""
    if is_seq:
        return ""
    if kinds.get(name) == "module":
        return "module pass: in-process"
    notes = []
    for c in counts:
        waves = [w for r in runs if r.workers == c for w in r.waves if name in w["passes"]]
        if not waves:
            continue
        if all(w["parallel"] for w in waves):
            continue
        reasons = sorted({w["reason"] for w in waves if not w["parallel"]})
        notes.append(f"{c} workers: in-process ({'; '.join(reasons)})")
    return ", ".join(notes)


def render_table(summary: dict[str, Any], counts: Sequence[int], cores: int) -> str:
    configs = [c for c in counts if c != 1]
    header = ["pass", "in-process"]
    for c in configs:
        header += [f"{c} worker{'s' if c > 1 else ''}", "ran", "speedup", "efficiency"]
    body: list[list[str]] = []
    notes: list[str] = []
    for row in summary["rows"]:
        sec = row["seconds"]
        base = sec["1"]
        cells = ["  " * row["depth"] + row["name"], _fmt_time(base)]
        for c in configs:
            other = sec[str(c)]
            ran = row.get("ran", {}).get(str(c), "")
            cells += [_fmt_time(other), ran, _fmt_speedup(base, other), _fmt_eff(base, other, min(c, cores))]
        if row["where"]:
            notes.append(f"  {row['name']}: {row['where']}")
        body.append(cells)
    totals = []
    for label, key in (
        ("total, pass by pass", "total"),
        ("total, fused, timing instrument", "total_timed"),
        ("total, fused (no instruments)", "total_fused"),
    ):
        total = summary[key]["seconds"]
        cells = [label, _fmt_time(total["1"])]
        for c in configs:
            cells += [
                _fmt_time(total[str(c)]),
                "",
                _fmt_speedup(total["1"], total[str(c)]),
                _fmt_eff(total["1"], total[str(c)], min(c, cores)),
            ]
        totals.append(cells)
    widths = [max(len(r[i]) for r in [header, *body, *totals]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(cells)
        ).rstrip()

    rule = "-" * len(line(header))
    out = [line(header), rule, *(line(r) for r in body), rule, *(line(r) for r in totals)]
    out += [
        "",
        "ran: where a pass ran in the parallel runs, pass by pass: 'workers' (every wave shipped), 'in-process' "
        "(kept in this process: a module pass, or the executor's choice), 'mixed' (some waves each)",
    ]
    if notes:
        out += ["", "passes that ran in-process in the parallel runs, and why:", *notes]
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------------------------------
# the command


def _check_plot(path: str | None) -> None:
    if path is None:
        return
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError(
            f"--plot needs matplotlib, which is not installed; install it with: {PLOT_INSTALL_HINT}"
        ) from None
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    if ext not in ("png", "svg", "pdf"):
        raise UsageError(f"--plot {path}: expected a .png, .svg or .pdf file")
    _check_dir(path, "--plot")


def _check_dir(path: str, option: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise UsageError(f"{option} {path}: directory {directory} does not exist")


def plot(path: str, summary: dict[str, Any], counts: Sequence[int], cores: int, title: str) -> None:
    """A grouped bar chart of the speedup of each pass (and the total) for each worker count."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    configs = [c for c in counts if c != 1]
    labels = [r["name"] for r in summary["rows"]] + ["total", "total (fused, timed)", "total (fused)"]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.7 * len(labels) + 2), 4.5))
    width = 0.8 / max(len(configs), 1)
    for i, c in enumerate(configs):
        values = [r["speedup"].get(str(c)) or 0.0 for r in summary["rows"]]
        values.append(summary["total"]["speedup"].get(str(c)) or 0.0)
        values.append(summary["total_timed"]["speedup"].get(str(c)) or 0.0)
        values.append(summary["total_fused"]["speedup"].get(str(c)) or 0.0)
        xs = [x + (i - (len(configs) - 1) / 2) * width for x in range(len(labels))]
        ax.bar(xs, values, width, label=f"{c} workers")
        ax.axhline(min(c, cores), color="grey", linewidth=0.8, linestyle="--")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=45, ha="right")
    ax.set_ylabel("speedup over in-process")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    with atomic_output(path, "wb") as handle:
        fig.savefig(handle, format=ext)
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    from parpass.ir.serialization import to_bytes
    from parpass.parallel import usable_cores
    from parpass.testing import random_module

    _check_plot(args.plot)
    if args.json:
        _check_dir(args.json, "--json")
    config = parse_config(args.config)
    for key, instead in _RESERVED.items():
        if key in config:
            raise UsageError(f"--config {key}: bench sets it itself; {instead}")
    cores = usable_cores()
    counts: list[int] = args.workers if args.workers else [max(2, cores)]
    if args.pipeline is not None:
        pipeline: Pass = build_pipeline(args.pipeline, "--pipeline")
        pipeline_label = args.pipeline
    else:
        from parpass.passes import default_pipeline

        pipeline = default_pipeline(args.opt_level)
        pipeline_label = f"default_pipeline({args.opt_level})"
    try:
        spec: str | None = pipeline_spec(pipeline)
    except ValueError:
        spec = None

    prim_funcs = args.prim_funcs if args.prim_funcs is not None else args.functions // 2
    if args.functions + prim_funcs == 0:
        given = f"--functions {args.functions}"
        if args.prim_funcs is not None:
            given += f" --prim-funcs {args.prim_funcs}"
        raise UsageError(f"{given}: an empty module, nothing to time (give --functions or --prim-funcs of at least 1)")

    started = time.perf_counter()
    mod = make_module(args)
    data = to_bytes(mod)
    num_funcs = len(mod)
    kinds = _count_kinds(mod)
    small = to_bytes(random_module(max(8, 4 * max(counts)), None, args.size, args.seed + 1))
    del mod

    out = sys.stdout
    out.write(
        f"parpass bench: random_module(functions={args.functions}, prim_funcs={prim_funcs}, size={args.size}, "
        f"seed={args.seed}): {num_funcs} functions ({kinds}), {len(data) / 1e6:.1f} MB of IR\n"
        f"pipeline: {pipeline_label}" + (f" = {spec}" if spec is not None and spec != pipeline_label else "") + "\n"
        f"usable cores: {cores}; worker counts: {', '.join(map(str, counts))}; "
        f"repeat: {args.repeat}{' (median)' if args.repeat > 1 else ''}\n\n"
    )
    out.flush()

    bench = Bench(pipeline, data, args.opt_level, config)
    configs = [1, *[c for c in counts if c != 1]]
    leaves = _leaf_units(pipeline, num_funcs, kinds_map=_kinds_by_pass(pipeline, data))
    total_units = sum(leaves.values()) * args.repeat * len(configs)
    bar = ProgressBar(sys.stderr, total_units, enabled=False if args.no_progress else None)
    runs: list[Run] = []
    try:
        for c in configs:
            bar.set_label("warming up" if c == 1 else f"starting {c} workers")
            bench.warm_up(c, small)  # first-call costs (imports, caches, the pool) are not timed
            for r in range(args.repeat):
                where = "in-process" if c == 1 else f"{c} workers"
                rep = f" run {r + 1}/{args.repeat}" if args.repeat > 1 else ""
                progress = ProgressInstrument(bar, leaves, prefix=f"{where}{rep}: ") if bar.enabled else None
                runs.append(bench.run(c, progress, bar if bar.enabled else None))
    finally:
        bar.close()

    summary = summarize(runs, counts, cores, bench.seq_names, pipeline)
    out.write(render_table(summary, counts, cores) + "\n\n")
    for c in configs[1:]:
        value = summary["parent_overhead_per_function"].get(str(c))
        figure = f"{value * 1e6:.1f} us" if value is not None else "n/a (no pass ran in workers)"
        out.write(f"parent overhead per function ({c} workers): {figure}\n")
    projection = render_amdahl(summary)
    if projection:
        out.write(projection + "\n")
    out.write(f"efficiency = speedup / min(workers, usable cores = {cores})\n")
    identical = all(r.identical for r in runs)
    mismatched = sorted({r.workers for r in runs if not r.identical})
    if identical:
        out.write(f"outputs byte-identical to the in-process run, pass statistics equal: yes ({3 * len(runs)} runs)\n")
    out.write(f"wall time of the benchmark: {time.perf_counter() - started:.1f}s\n")
    out.flush()

    if args.json:
        figures = {
            "module": {
                "functions": args.functions,
                "prim_funcs": prim_funcs,
                "size": args.size,
                "seed": args.seed,
                "num_functions": num_funcs,
                "bytes": len(data),
            },
            "pipeline": spec if spec is not None else pipeline_label,
            "opt_level": args.opt_level,
            "config": {k: v for k, v in config.items() if isinstance(v, (int, float, str, bool))},
            "usable_cores": cores,
            "worker_counts": counts,
            "repeat": args.repeat,
            "identical": identical,
            "runs": [
                {
                    "workers": r.workers,
                    "wall": r.wall,
                    "timed_wall": r.timed_wall,
                    "fused_wall": r.fused_wall,
                    "identical": r.identical,
                    "passes": [{"path": list(k), "seconds": s} for k, s in r.rows.items()],
                    "timed_passes": [{"path": list(k), "wall": w, "cpu": c} for k, (w, c) in r.timed_rows.items()],
                    "waves": r.waves,
                    "timed_waves": r.timed_waves,
                    "fused_waves": r.fused_waves,
                    "statistics": r.statistics,
                }
                for r in runs
            ],
            "summary": summary,
            "statistics": runs[0].statistics if runs else {},
        }
        with atomic_output(args.json, "w") as handle:
            json.dump(figures, handle, indent=2)
            handle.write("\n")
    if args.plot:
        title = f"parpass bench: {num_funcs} functions, {cores} usable cores"
        plot(args.plot, summary, counts, cores, title)
    if not identical:
        print(
            f"parpass: error: the outputs with {', '.join(map(str, mismatched))} worker(s) differ from the "
            "in-process output (or their pass statistics differ)",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return EXIT_OK


def _count_kinds(mod: IRModule) -> str:
    counts: dict[str, int] = {}
    for name in mod.names():
        kind, _ = mod.kind_and_attrs(name)
        counts[kind.__name__] = counts.get(kind.__name__, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))


def _kinds_by_pass(pipeline: Pass, data: bytes) -> dict[int, int]:
    """For each function-level pass of the pipeline (by id of its info), how many functions it visits."""
    from parpass.ir.serialization import from_bytes

    mod = from_bytes(data, validate=False)
    assert isinstance(mod, IRModule)
    out: dict[int, int] = {}
    stack = [pipeline]
    while stack:
        p = stack.pop()
        if isinstance(p, Sequential):
            stack.extend(p.passes)
        elif isinstance(p, FunctionLevelPass):
            out[id(p.info)] = len(p.targets(mod))
    return out


def _leaf_units(pipeline: Pass, num_funcs: int, kinds_map: dict[int, int]) -> dict[int, int]:
    """Progress units of each pass of the pipeline: the functions it visits (a module pass: all of them)."""
    out: dict[int, int] = {}
    stack = [pipeline]
    while stack:
        p = stack.pop()
        if isinstance(p, Sequential):
            stack.extend(p.passes)
        else:
            out[id(p.info)] = max(kinds_map.get(id(p.info), num_funcs), 1)
    return out
