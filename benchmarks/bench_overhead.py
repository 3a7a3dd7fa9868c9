"""The parent's own work per wave and per function, and the Amdahl bound it sets on many workers (issue 12).

Trivial function passes (nothing to compute, so what a wave costs is the
executor's own work) run in workers (config ``parpass.parallel = "always"``)
on ``random_module(n)`` for each ``n`` of ``--sizes``, ``--waves`` times each
(sizes interleaved), two ways:

- one pass per call: each top-level call is one wave;
- pipeline-shaped: one ``Sequential`` of ``--passes`` trivial passes with
  fusion off, so each pass is its own wave within one top-level call (where
  the workers may keep the IR between waves). Fusion is turned off by the
  config key ``parpass.fuse_passes``.

each with passes that return their input ("unchanged") and passes that change
every function ("changed": a new attribute). From the executor's wave
statistics (``parpass.parallel.default_executor.history``) it fits
``parent_seconds = fixed + per_function * functions`` over the sizes (through
the median of each size) and prints both against issue 12's targets (fixed
< 3 ms, per function < 3 µs), with what the parent does between the waves of a
pipeline (the Sequential, instruments) per pass. As a cross-check that does not
depend on what the executor counts as its own work, it fits the parent
process's CPU time over each call (all its threads) per wave the same way.

Then a projection, not a measurement: for the default pipeline on
``random_module(--project-functions)`` (as ``parpass bench`` runs it, each run
on a module freshly read from bytes), pass by pass and fused, the Amdahl bound
on 16 and 64 workers. Its serial part is the parent's work (the pipeline
chain's waves counted in workers, times the fitted fixed and per-function work
of the pipeline-shaped "changed" run) plus what runs in the parent in any case
(module passes, the Sequential); its parallel part is the in-process time of
the function-level passes. Bound(N) = T1 / (serial + parallel / N), where T1 is
the in-process time. Real runs pay more (decoding in the workers, the end of
each wave).

No figure here is a pass/fail check; the exit status is 1 only if a trivial
pass did not run in workers.

    python benchmarks/bench_overhead.py [--sizes 200,1000,2000] [--waves 30] [--passes 4] [--workers 2]
        [--project-functions 2000] [--project-repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchutil import fit_line, sigterm_as_exit

import parpass
from parpass.ir import IRModule, from_bytes, relax, to_bytes
from parpass.parallel import WaveStats, get_backend, usable_cores
from parpass.parallel import default_executor as executor
from parpass.passes import default_pipeline
from parpass.testing import random_module
from parpass.transform import Pass, PassContext, Sequential, function_pass
from parpass.transform.passes import FUSE_PASSES

#: Issue 12's targets for the parent's own work, on random_module(2000).
FIXED_TARGET_MS = 3.0
PER_FUNCTION_TARGET_US = 3.0
#: Worker counts of the projection.
PROJECTED_WORKERS = (16, 64)


def trivial_pass(index: int, changes: bool) -> Pass:
    """A function pass that returns its input (``changes=False``) or the function with one more attribute."""
    if changes:

        @function_pass(opt_level=0, name=f"Touch{index}")
        def touch(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
            return func.with_attr(f"touched_{index}", index)

        return touch

    @function_pass(opt_level=0, name=f"Identity{index}")
    def identity(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
        return func

    return identity


#: The config that makes a Sequential run each pass as its own wave.
FUSION_OFF: dict[str, Any] = {FUSE_PASSES: False}


@dataclass
class Sample:
    """One wave in workers: its functions and seconds; the parent's time between the waves of its call, and the
    parent process's CPU time over the call (all its threads) divided among the call's waves."""

    functions: int
    parent: float
    wall: float
    worker: float
    between: float
    cpu: float


def _waves_of_call(pass_: Pass, mod: IRModule, ctx: PassContext) -> tuple[list[WaveStats], float, float]:
    """The waves one top-level call of ``pass_`` ran, its wall time, and this process's CPU time over it."""
    executor.history.clear()
    with ctx:
        cpu = time.process_time()
        start = time.perf_counter()
        pass_(mod)
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu
    return list(executor.history), wall, cpu


def measure(
    make: Any, modules: dict[int, IRModule], ctx: PassContext, waves: int
) -> tuple[dict[int, list[Sample]], list[str]]:
    """``waves`` calls of ``make()`` on each module (sizes interleaved, after two warm-up calls each): the samples
    of every wave, per size, and the waves that did not run in workers (which the fit must not count)."""
    pass_ = make()
    out: dict[int, list[Sample]] = {n: [] for n in modules}
    inline: list[str] = []
    for round_ in range(waves + 2):
        for n, mod in modules.items():
            stats, wall, cpu = _waves_of_call(pass_, mod, ctx)
            if round_ < 2:
                continue
            inline += [f"{'/'.join(w.passes)}: {w.reason}" for w in stats if not w.parallel]
            count = max(len(stats), 1)
            between = (wall - sum(w.wall for w in stats)) / count
            out[n] += [
                Sample(w.functions, w.parent_seconds, w.wall, w.worker_seconds, between, cpu / count) for w in stats
            ]
    return out, inline


def report(title: str, samples: dict[int, list[Sample]]) -> tuple[float, float]:
    """Print the medians per size and the fit; returns ``(fixed, per_function)`` seconds."""
    print(f"\n{title}\n")
    print(
        "| module | functions a wave | waves | parent ms/wave | wall ms/wave | worker ms/wave | between waves ms "
        "| parent CPU ms/wave |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    points, cpu_points = [], []
    for n, rows in samples.items():
        functions = statistics.median(s.functions for s in rows)
        parent, wall, worker, between, cpu = (
            statistics.median(getattr(s, a) for s in rows) for a in ("parent", "wall", "worker", "between", "cpu")
        )
        points.append((functions, parent))
        cpu_points.append((functions, cpu))
        print(
            f"| random_module({n}) | {functions:.0f} | {len(rows)} | {parent * 1e3:.2f} | {wall * 1e3:.2f} | "
            f"{worker * 1e3:.2f} | {between * 1e3:.2f} | {cpu * 1e3:.2f} |"
        )
    cpu_fixed, cpu_per_function = fit_line(cpu_points)
    fixed, per_function = fit_line(points)
    ok_fixed = "ok" if fixed * 1e3 < FIXED_TARGET_MS else "MISS"
    ok_per = "ok" if per_function * 1e6 < PER_FUNCTION_TARGET_US else "MISS"
    print(f"\nparent fixed work per wave: {fixed * 1e3:.2f} ms (target < {FIXED_TARGET_MS:g} ms) {ok_fixed}")
    print(f"per function: {per_function * 1e6:.2f} us (target < {PER_FUNCTION_TARGET_US:g} us) {ok_per}")
    print(
        f"cross-check, the parent process's CPU time over the call (all its threads, the work between waves "
        f"included) per wave: {cpu_fixed * 1e3:.2f} ms + {cpu_per_function * 1e6:.2f} us a function"
    )
    return fixed, per_function


def project(data: bytes, workers: int, repeat: int, fixed: float, per_function: float) -> None:
    """Print the Amdahl bound of the default pipeline on many workers, pass by pass and fused (see the module doc)."""
    pipeline = default_pipeline(2)
    print(
        f"\nprojection (not a measurement): the Amdahl bound of the parent's serial share on the default pipeline,"
        f" parent work per wave {fixed * 1e3:.2f} ms + {per_function * 1e6:.2f} us a function (the fit above)\n"
    )
    print(
        "| run | in-process s | function passes s | parent anyway s | waves | functions shipped | serial share "
        + "".join(f"| bound on {n} workers " for n in (workers, *PROJECTED_WORKERS))
        + "|"
    )
    print("|---|---:|---:|---:|---:|---:|---:|" + "---:|" * (1 + len(PROJECTED_WORKERS)))
    for label, config in (("pass by pass", FUSION_OFF), ("fused", {})):
        inline_ctx = PassContext(opt_level=2, config={**config, "parpass.num_workers": 1})
        walls: list[float] = []
        passes: list[float] = []
        for _ in range(repeat):
            mod = from_bytes(data)
            assert isinstance(mod, IRModule)
            stats, wall, _ = _waves_of_call(pipeline, mod, inline_ctx)
            walls.append(wall)
            passes.append(sum(w.wall for w in stats))
        t1, work = statistics.median(walls), statistics.median(passes)
        anyway = max(t1 - work, 0.0)
        always = {**config, "parpass.num_workers": workers, "parpass.parallel": "always"}
        mod = from_bytes(data)
        assert isinstance(mod, IRModule)
        stats, _, _ = _waves_of_call(pipeline, mod, PassContext(opt_level=2, config=always))
        shipped = [w for w in stats if w.parallel]
        functions = sum(w.functions for w in shipped)
        serial = len(shipped) * fixed + functions * per_function + anyway
        bounds = "".join(f"| {t1 / (serial + work / n):.1f}x " for n in (workers, *PROJECTED_WORKERS))
        print(
            f"| {label} | {t1:.3f} | {work:.3f} | {anyway:.3f} | {len(shipped)} | {functions} | "
            f"{serial / t1:.1%} {bounds}|"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--sizes", default="200,1000,2000", help="random_module sizes, comma-separated (default 200,1000,2000)"
    )
    parser.add_argument("--waves", type=int, default=30, help="calls timed per size and run (default 30)")
    parser.add_argument("--passes", type=int, default=4, help="trivial passes in the pipeline-shaped run (default 4)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument(
        "--project-functions",
        type=int,
        default=2000,
        help="random_module size of the projection; 0 skips it (default 2000)",
    )
    parser.add_argument("--project-repeat", type=int, default=3, help="in-process runs of the projection (default 3)")
    args = parser.parse_args()
    try:
        sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    except ValueError:
        parser.error(f"--sizes: expected sizes like 200,1000,2000, got {args.sizes!r}")
    if len(sizes) < 2 or sizes[0] < 1:
        parser.error(f"--sizes: need two different sizes >= 1 at least, got {args.sizes!r}")
    for name in ("waves", "passes", "workers", "project_repeat"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.workers < 2:
        parser.error("--workers must be >= 2 (one worker runs in-process, with no wave to measure)")
    if args.project_functions < 0:
        parser.error("--project-functions must be >= 0")
    try:
        with sigterm_as_exit():
            return run(args, sizes)
    finally:
        parpass.shutdown()


def run(args: argparse.Namespace, sizes: Sequence[int]) -> int:
    modules = {n: random_module(num_functions=n, seed=0) for n in sizes}
    always = {"parpass.num_workers": args.workers, "parpass.parallel": "always"}
    get_backend().warm(args.workers)
    print(
        f"parpass {parpass.__version__}; usable cores {usable_cores()}; {args.workers} workers, mode 'always'; "
        f"{args.waves} calls per size and run, medians; trivial function passes (the Functions of each module)"
    )
    print(f"pipeline-shaped runs: a Sequential of {args.passes} passes, fusion off by config {FUSE_PASSES}=False")
    fits: dict[str, tuple[float, float]] = {}
    inline: list[str] = []
    for changes in (False, True):
        variant = "changed" if changes else "unchanged"
        ctx = PassContext(opt_level=2, config=always)
        samples, missed = measure(lambda c=changes: trivial_pass(0, c), modules, ctx, args.waves)
        inline += missed
        fits[f"one {variant}"] = report(f"one pass per call, functions {variant}:", samples)
        ctx = PassContext(opt_level=2, config={**FUSION_OFF, **always})

        def pipeline(c: bool = changes) -> Pass:
            return Sequential([trivial_pass(k, c) for k in range(args.passes)], name="trivial_pipeline")

        samples, missed = measure(pipeline, modules, ctx, args.waves)
        inline += missed
        fits[f"pipeline {variant}"] = report(
            f"pipeline-shaped ({args.passes} passes in one call, fusion off), functions {variant}:", samples
        )
    if args.project_functions:
        data = to_bytes(random_module(num_functions=args.project_functions, seed=0))
        fixed, per_function = fits["pipeline changed"]
        project(data, args.workers, args.project_repeat, fixed, per_function)
    if inline:
        print("\nwaves that did not run in workers (not counted):" + "".join(f"\n  {w}" for w in sorted(set(inline))))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
