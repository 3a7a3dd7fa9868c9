"""``parpass bench``'s figures: medians, speedups, where each pass ran, the parent's serial share and the
Amdahl projection, the table, the JSON and the plot."""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from typing import Any, cast

from parpass.cli.bench_runs import Run
from parpass.cli.common import UsageError, atomic_output, check_parent_dir

__all__ = [
    "AMDAHL_WORKERS",
    "PLOT_INSTALL_HINT",
    "amdahl",
    "check_plot",
    "plot",
    "render_amdahl",
    "render_cpu",
    "render_machine",
    "render_table",
    "serial_and_parallel",
    "summarize",
]


#: How to get matplotlib for ``--plot`` (the README says the same).
PLOT_INSTALL_HINT = 'pip install matplotlib, or pip install ".[plot]" in a parpass checkout'


#: The worker counts the Amdahl projection is printed for.
AMDAHL_WORKERS = (16, 64)


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
    runs: Sequence[Run], counts: Sequence[int], cores: int, seq_names: set[str], leaf_kinds: dict[str, str]
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
        "cpu": cpu_bounds(runs, configs, cores),
    }


#: Each total's wall and CPU attributes on a :class:`Run`.
_WAYS = (
    ("total", "wall", "cpu"),
    ("total_timed", "timed_wall", "timed_cpu"),
    ("total_fused", "fused_wall", "fused_cpu"),
)


def cpu_bounds(runs: Sequence[Run], configs: Sequence[int], cores: int) -> dict[str, Any]:
    """Per total and worker count: the runs' CPU seconds (medians; see :func:`~parpass.cli.bench_runs.run_cpu`)
    and the most speedup they allow, the in-process wall time over that CPU spread on ``min(workers, cores)``
    cores: however well the parent's work and the workers' overlap, a run cannot take less than that."""
    out: dict[str, Any] = {}
    for key, wall_attr, cpu_attr in _WAYS:
        t1 = _median([getattr(r, wall_attr) for r in runs if r.workers == 1])
        seconds = {c: _median([getattr(r, cpu_attr) for r in runs if r.workers == c]) for c in configs}
        out[key] = {
            "seconds": {str(c): seconds[c] for c in configs},
            "bound": {
                str(c): t1 / (seconds[c] / min(c, cores)) if seconds[c] > 0 and cores > 0 else None
                for c in configs
                if c != 1
            },
        }
    return out


def render_cpu(summary: dict[str, Any], counts: Sequence[int]) -> str:
    """Per parallel worker count: each total's CPU time against in-process, and the speedup it allows."""
    cpu = summary.get("cpu")
    if not cpu:
        return ""
    lines = []
    for c in [str(c) for c in counts if c != 1]:
        parts = []
        for key, label in _TOTALS:
            bound = cpu[key]["bound"].get(c)
            if bound is None:
                continue
            seconds = cpu[key]["seconds"]
            parts.append(
                f"{label} {_fmt_time(seconds[c])} against {_fmt_time(seconds['1'])} in-process, at most {bound:.2f}x"
            )
        if parts:
            lines.append(
                f"CPU of the runs ({c} workers: this process and the workers' chunks) and the speedup it allows on "
                f"that many usable cores, however the work overlaps: {'; '.join(parts)}"
            )
    return "\n".join(lines)


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
    in_process = [r for r in runs if r.workers == 1]
    t1 = _median([r.wall for r in in_process])
    out: dict[str, Any] = {}
    for c in configs:
        in_workers = [r for r in runs if r.workers == c]
        if c == 1 or not in_workers:
            continue
        pairs = [serial_and_parallel(r) for r in in_workers]
        serial = _median([s for s, _ in pairs])
        parallel = _median([p for _, p in pairs])
        work = serial + parallel
        shipped = {tuple(w["passes"]) for r in in_workers for w in r.waves if w["parallel"]}
        out[str(c)] = {
            "t1_seconds": t1,
            "serial_seconds": serial,
            "parallel_seconds": parallel,
            # of the workers' busy time, the passes' own calls; and those waves' time in the in-process runs
            "pass_seconds": _median([sum(w["pass_seconds"] for w in r.waves if w["parallel"]) for r in in_workers]),
            # of the rest, keeping the results as bytes (absent from the waves of runs saved before it was measured)
            "result_seconds": _median(
                [sum(w.get("result_seconds", 0.0) for w in r.waves if w["parallel"]) for r in in_workers]
            ),
            "pass_seconds_in_process": _median(
                [
                    sum(w["wall"] for w in r.waves if not w["parallel"] and tuple(w["passes"]) in shipped)
                    for r in in_process
                ]
            ),
            "serial_share": serial / work if work > 0 else None,
            "bound": {str(n): t1 / (serial + parallel / n) if work > 0 else None for n in AMDAHL_WORKERS},
        }
    return out


def render_amdahl(summary: dict[str, Any]) -> str:
    """Per parallel worker count: the serial share, how the workers' busy time divides (where they ran
    anything), and the projection."""
    lines = []
    for c, figures in summary["amdahl"].items():
        share = figures["serial_share"]
        share_text = f" ({share * 100:.0f}%)" if share is not None else ""
        lines.append(
            f"parent's serial share, pass by pass ({c} workers): {_fmt_time(figures['serial_seconds'])} "
            f"of {_fmt_time(figures['serial_seconds'] + figures['parallel_seconds'])}{share_text}; "
            f"workers busy {_fmt_time(figures['parallel_seconds'])}"
        )
        passes, alone = figures["pass_seconds"], figures["pass_seconds_in_process"]
        if passes > 0:
            as_long = f", {passes / alone:.2f}x as long" if alone > 0 else ""
            kept = figures.get("result_seconds", 0.0)
            of_which = (
                f"; of it, the results: encoding, digesting, storing and keeping resident the functions the passes "
                f"changed, {_fmt_time(kept)}"
                if kept > 0
                else ""
            )
            lines.append(
                f"of the workers' busy time ({c} workers): the passes' calls {_fmt_time(passes)} (the same waves "
                f"in-process: {_fmt_time(alone)}{as_long}), the executor's own work "
                f"{_fmt_time(max(figures['parallel_seconds'] - passes, 0.0))} (reading, decoding, encoding and "
                f"storing functions{of_which})"
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


#: The totals of the table, and how the machine lines name them.
_TOTALS = (("total", "pass by pass"), ("total_timed", "fused with the timing instrument"), ("total_fused", "fused"))


#: A headroom below this share of what the cores allow says the machine was busy with other programs.
BUSY_HEADROOM_SHARE = 0.75


def render_machine(summary: dict[str, Any], counts: Sequence[int], cores: int = 0) -> str:
    """The machine's headroom, the pipeline's own ceiling, and each total's speedup as a share of that ceiling;
    with ``cores`` (usable), a warning when the headroom says other programs were using them."""
    machine = summary.get("machine") or {}
    if machine.get("headroom_before") is None:
        return f"machine headroom and the pipeline's ceiling: not measured ({machine.get('ceiling_skipped') or '-'})"
    workers = max(counts)
    after = machine.get("headroom_after")
    lines = [
        f"machine headroom (a pure-Python loop on {workers} processes vs 1): {machine['headroom_before']:.2f}x "
        f"before the runs" + (f", {after:.2f}x after" if after is not None else "")
    ]
    possible = min(workers, cores) if cores > 0 else 0
    lowest = min(h for h in (machine["headroom_before"], after) if h is not None)
    if possible > 1 and lowest < BUSY_HEADROOM_SHARE * possible:
        lines.append(
            f"warning: {workers} processes got {lowest:.2f}x of one here, where {possible} usable cores allow "
            f"{possible}x: other programs were using the cores, so the speedups above measure them as much as "
            "parpass; run again when the machine is quiet"
        )
    if not machine["ceiling"]:
        lines.append(f"the pipeline's ceiling: not measured ({machine['ceiling_skipped']})")
    for c, figures in machine["ceiling"].items():
        rounds = ", ".join(f"{value:.2f}x" for value in figures["rounds"])
        ceiling = figures["median"]
        lines.append(
            f"ceiling of this pipeline on {c} processes (it runs in-process on {c} processes at once, each on the "
            f"whole module, against 1 alone; nothing shipped; rounds {rounds}): {ceiling:.2f}x"
        )
        shares = ", ".join(
            f"{label} {summary[key]['speedup'][c] / ceiling * 100:.0f}%"
            for key, label in _TOTALS
            if summary[key]["speedup"].get(c)
        )
        lines.append(f"speedup as a share of that ceiling ({c} workers): {shares}")
    return "\n".join(lines)


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


def check_plot(path: str | None) -> None:
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
    check_parent_dir(path, "--plot")


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
