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

The worker pool is started and warmed up (on a small module) before anything is timed; with several
worker counts, again before each count's runs (the pool is resized between counts).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any

from parpass.cli.bench_ceiling import Ceiling, machine_headroom
from parpass.cli.bench_report import (
    check_plot,
    plot,
    render_amdahl,
    render_cpu,
    render_machine,
    render_table,
    summarize,
)
from parpass.cli.bench_runs import Bench, Run, count_kinds, leaf_kinds, progress_units
from parpass.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    add_common_options,
    add_config_options,
    atomic_output,
    build_pipeline,
    check_parent_dir,
    opt_level,
    parse_config,
    positive_int,
)
from parpass.cli.gen import add_module_size_options, make_module
from parpass.cli.progress import ProgressBar, ProgressInstrument
from parpass.transform import Pass, pipeline_spec
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


#: Config options bench sets itself, and what to do instead of setting them.
_RESERVED = {
    "parpass.num_workers": "use --workers",
    FUSE_PASSES: "it runs the pipeline both pass by pass and fused",
    PASS_STATISTICS: "it counts them in the pass-by-pass runs (see --json)",
}


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
    parser.add_argument(
        "--new-module-each-run",
        action="store_true",
        help="time each repeat's three ways (pass by pass, fused with the timing instrument, fused) on a module "
        "of their own (seeds from --seed + 1000; same sizes), in-process and on workers alike, so that no worker "
        "holds it from a run before, as when a compiler runs once on a new module; by default every run reads "
        "the same module's bytes again",
    )
    parser.add_argument(
        "--no-ceiling",
        action="store_true",
        help="do not measure the machine headroom and the pipeline's own ceiling (quicker; the speedups "
        "then have nothing to be read against)",
    )
    add_common_options(parser)
    parser.set_defaults(func=run)


# ---------------------------------------------------------------------------------------------------------------------
# the command


@dataclass
class _Plan:
    """What one ``parpass bench`` times: the pipeline, the module (as bytes), the worker counts."""

    pipeline: Pass
    label: str  # what the header calls the pipeline
    spec: str | None  # its pipeline spec, when it has one
    config: dict[str, Any]
    cores: int
    counts: list[int]  # the parallel worker counts asked for
    prim_funcs: int
    data: bytes  # the module
    small: bytes  # the warm-up module
    num_funcs: int
    kinds: str  # the module's functions by kind
    started: float  # when the work began (the options checked, the module about to be made)


def run(args: argparse.Namespace) -> int:
    plan = _plan(args)
    out = sys.stdout
    out.write(_header(args, plan))
    out.flush()
    bench = Bench(plan.pipeline, plan.data, args.opt_level, plan.config)
    machine = _Machine()
    runs = _measure(args, plan, bench, machine)
    summary = summarize(runs, plan.counts, plan.cores, bench.seq_names, leaf_kinds(plan.pipeline))
    summary["machine"] = machine.figures(plan.counts)
    out.write(_report(summary, runs, plan))
    out.write(f"wall time of the benchmark: {time.perf_counter() - plan.started:.1f}s\n")
    out.flush()
    if args.json:
        with atomic_output(args.json, "w") as handle:
            json.dump(_figures(args, plan, runs, summary), handle, indent=2)
            handle.write("\n")
    if args.plot:
        plot(
            args.plot,
            summary,
            plan.counts,
            plan.cores,
            f"parpass bench: {plan.num_funcs} functions, {plan.cores} usable cores",
        )
    mismatched = sorted({r.workers for r in runs if not r.identical})
    if mismatched:
        print(
            f"parpass: error: the outputs with {', '.join(map(str, mismatched))} worker(s) differ from the "
            "in-process output (or their pass statistics differ)",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return EXIT_OK


def _plan(args: argparse.Namespace) -> _Plan:
    """Every option checked (before any work), the pipeline built and the module generated."""
    from parpass.ir.serialization import to_bytes
    from parpass.parallel import usable_cores
    from parpass.testing import random_module

    check_plot(args.plot)
    if args.json:
        check_parent_dir(args.json, "--json")
    config = parse_config(args.config)
    for key, instead in _RESERVED.items():
        if key in config:
            raise UsageError(f"--config {key}: bench sets it itself; {instead}")
    cores = usable_cores()
    counts: list[int] = args.workers if args.workers else [max(2, cores)]
    pipeline, label = _pipeline(args)
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
    small = to_bytes(random_module(max(8, 4 * max(counts)), None, args.size, args.seed + 1))
    return _Plan(
        pipeline,
        label,
        spec,
        config,
        cores,
        counts,
        prim_funcs,
        to_bytes(mod),
        small,
        len(mod),
        count_kinds(mod),
        started,
    )


def _fresh_note(args: argparse.Namespace) -> str:
    if not args.new_module_each_run:
        return ""
    return f"; a new module for each way of each repeat (seeds from {args.seed + 1000})"


def _module_bytes(args: argparse.Namespace, seed: int) -> bytes:
    """The bytes of a module of the sizes asked for, from ``seed``."""
    from parpass.ir.serialization import to_bytes

    data: bytes = to_bytes(make_module(argparse.Namespace(**{**vars(args), "seed": seed})))
    return data


def _pipeline(args: argparse.Namespace) -> tuple[Pass, str]:
    """The pipeline to time and what the header calls it."""
    if args.pipeline is not None:
        return build_pipeline(args.pipeline, "--pipeline"), args.pipeline
    from parpass.passes import default_pipeline

    return default_pipeline(args.opt_level), f"default_pipeline({args.opt_level})"


def _header(args: argparse.Namespace, plan: _Plan) -> str:
    spec = f" = {plan.spec}" if plan.spec is not None and plan.spec != plan.label else ""
    return (
        f"parpass bench: random_module(functions={args.functions}, prim_funcs={plan.prim_funcs}, size={args.size}, "
        f"seed={args.seed}): {plan.num_funcs} functions ({plan.kinds}), {len(plan.data) / 1e6:.1f} MB of IR\n"
        f"pipeline: {plan.label}{spec}\n"
        f"usable cores: {plan.cores}; worker counts: {', '.join(map(str, plan.counts))}; "
        f"repeat: {args.repeat}{' (median)' if args.repeat > 1 else ''}"
        f"{_fresh_note(args)}\n\n"
    )


@dataclass
class _Machine:
    """What the machine allowed during the runs: headroom before and after, the pipeline's ceiling per round."""

    headroom_before: float | None = None
    headroom_after: float | None = None
    ceiling: Ceiling | None = None
    skipped: str = ""  # why the ceiling was not measured

    def figures(self, counts: list[int]) -> dict[str, Any]:
        ceiling = self.ceiling
        rounds = ceiling.rounds if ceiling is not None else {}
        return {
            "headroom_before": self.headroom_before,
            "headroom_after": self.headroom_after,
            "ceiling": {
                str(c): {"rounds": rounds[c], "median": statistics.median(rounds[c])} for c in counts if rounds.get(c)
            },
            "ceiling_skipped": self.skipped,
        }


def _start_ceiling(args: argparse.Namespace, plan: _Plan, machine: _Machine) -> None:
    """Measure the headroom and start the ceiling's processes (unless ``--no-ceiling``)."""
    from parpass.parallel.pickling import dumps_for_workers

    parallel = [c for c in plan.counts if c != 1]
    if args.no_ceiling or not parallel:
        machine.skipped = "--no-ceiling" if args.no_ceiling else "no parallel worker count"
        return
    machine.headroom_before = machine_headroom(max(parallel))
    try:
        pickled = dumps_for_workers(plan.pipeline)
    except Exception as err:
        machine.skipped = f"the pipeline cannot be sent to another process: {type(err).__name__}: {err}"
        return
    machine.ceiling = Ceiling(pickled, plan.data, plan.small, args.opt_level, plan.config, parallel)


def _measure(args: argparse.Namespace, plan: _Plan, bench: Bench, machine: _Machine) -> list[Run]:
    """Every configuration ``args.repeat`` times, interleaved (per repeat: in-process, each worker count, then
    a round of the ceiling), after an untimed warm-up run of each; with several worker counts, each count's
    runs follow an untimed warm-up too (the pool is resized between counts: a user's is not)."""
    configs = [1, *[c for c in plan.counts if c != 1]]
    leaves = progress_units(plan.pipeline, plan.data)
    total_units = sum(leaves.values()) * args.repeat * len(configs)
    bar = ProgressBar(sys.stderr, total_units, enabled=False if args.no_progress else None)
    runs: list[Run] = []
    try:
        for c in configs:
            bar.set_label("warming up" if c == 1 else f"starting {c} workers")
            bench.warm_up(c, plan.small)  # first-call costs (imports, caches, the pool) are not timed
        bar.set_label("measuring the machine")
        _start_ceiling(args, plan, machine)
        for r in range(args.repeat):
            if args.new_module_each_run:  # one for each way a repeat runs the pipeline
                bench.renew([_module_bytes(args, args.seed + 1000 + 3 * r + way) for way in range(3)])
            for c in configs:
                if c != 1 and len(configs) > 2:
                    bench.warm_up(c, plan.small)  # the pool was resized for the last count: not this count's cost
                where = "in-process" if c == 1 else f"{c} workers"
                rep = f" run {r + 1}/{args.repeat}" if args.repeat > 1 else ""
                progress = ProgressInstrument(bar, leaves, prefix=f"{where}{rep}: ") if bar.enabled else None
                runs.append(bench.run(c, progress, bar if bar.enabled else None))
            if machine.ceiling is not None:
                bar.set_label(f"the pipeline's ceiling, round {r + 1}/{args.repeat}")
                machine.ceiling.measure_round()
        if machine.headroom_before is not None:
            machine.headroom_after = machine_headroom(max(c for c in configs))
    finally:
        bar.close()
        if machine.ceiling is not None:
            machine.ceiling.close()
    return runs


def _report(summary: dict[str, Any], runs: list[Run], plan: _Plan) -> str:
    """The table, the parent's overhead, the Amdahl projection and whether the outputs matched."""
    lines = [render_table(summary, plan.counts, plan.cores), ""]
    for c in [c for c in plan.counts if c != 1]:
        value = summary["parent_overhead_per_function"].get(str(c))
        figure = f"{value * 1e6:.1f} us" if value is not None else "n/a (no pass ran in workers)"
        lines.append(f"parent overhead per function ({c} workers): {figure}")
    projection = render_amdahl(summary)
    if projection:
        lines.append(projection)
    cpu = render_cpu(summary, plan.counts)
    if cpu:
        lines.append(cpu)
    lines.append(render_machine(summary, plan.counts, plan.cores))
    lines.append(f"efficiency = speedup / min(workers, usable cores = {plan.cores})")
    if all(r.identical for r in runs):
        lines.append(f"outputs byte-identical to the in-process run, pass statistics equal: yes ({3 * len(runs)} runs)")
    return "\n".join(lines) + "\n"


def _figures(args: argparse.Namespace, plan: _Plan, runs: list[Run], summary: dict[str, Any]) -> dict[str, Any]:
    """The raw figures ``--json`` writes."""
    return {
        "module": {
            "functions": args.functions,
            "prim_funcs": plan.prim_funcs,
            "size": args.size,
            "seed": args.seed,
            "new_module_each_run": args.new_module_each_run,
            "num_functions": plan.num_funcs,
            "bytes": len(plan.data),
        },
        "pipeline": plan.spec if plan.spec is not None else plan.label,
        "opt_level": args.opt_level,
        "config": {k: v for k, v in plan.config.items() if isinstance(v, (int, float, str, bool))},
        "usable_cores": plan.cores,
        "worker_counts": plan.counts,
        "repeat": args.repeat,
        "identical": all(r.identical for r in runs),
        "runs": [_run_figures(r) for r in runs],
        "summary": summary,
        "statistics": runs[0].statistics if runs else {},
    }


def _run_figures(r: Run) -> dict[str, Any]:
    return {
        "workers": r.workers,
        "wall": r.wall,
        "timed_wall": r.timed_wall,
        "fused_wall": r.fused_wall,
        "cpu": r.cpu,
        "timed_cpu": r.timed_cpu,
        "fused_cpu": r.fused_cpu,
        "identical": r.identical,
        "passes": [{"path": list(k), "seconds": s} for k, s in r.rows.items()],
        "timed_passes": [{"path": list(k), "wall": w, "cpu": c} for k, (w, c) in r.timed_rows.items()],
        "waves": r.waves,
        "timed_waves": r.timed_waves,
        "fused_waves": r.fused_waves,
        "statistics": r.statistics,
    }
