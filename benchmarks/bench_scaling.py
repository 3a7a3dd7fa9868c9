"""Scaling benchmark: the executor's warm speedup on 2, 4, 8, 16... workers, against what the machine allows.

For a machine with more cores than this project's 2-core CI machine. For each
worker count it measures, in one run:

- the machine headroom: a pure-Python loop on that many processes against one;
- case (a) of ``bench_parallel.py`` (a CPU-heavy function pass) and its
  ceiling: the pass itself run in-process on that many processes at once, each
  on the whole module, against one alone, nothing shipped; the speedup as a
  share of that ceiling;
- cases (b) (seven light passes, one fused wave) and (b') (the default
  pipeline's dataflow passes; two read their callees).

Every speedup is the median of ``--repeat`` interleaved ratios of in-process time
(``parpass.num_workers = 1``) to the default ``auto`` mode's, warm (pool
started, cost model learned), as ``bench_parallel.py`` times them. Worker counts
above the usable cores are skipped. Exit status 1 if any parallel output
differs from the in-process one.

    python benchmarks/bench_scaling.py [--functions 8000] [--workers 2,4,8,16] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys

from bench_parallel import CASES, CEILING_ROUNDS, case_ceilings, timed
from benchutil import machine_headroom, median_ratio, module_digest

import parpass
from parpass.ir import to_bytes
from parpass.parallel import default_executor as executor
from parpass.parallel import get_backend, usable_cores
from parpass.testing import random_module

#: The cases timed at each worker count (keys of ``bench_parallel.CASES``): the heavy pass and the big pipelines.
SCALED = ("a", "b", "b'")


def ceilings(counts: list[int], data: bytes, rounds: int) -> dict[int, float]:
    """Case (a)'s ceiling on each of ``counts`` processes: median over ``rounds`` rounds."""
    heavy = next(c for c in CASES if c.key == "a")
    return {count: statistics.median(values) for count, values in case_ceilings(heavy, data, counts, rounds).items()}


def run(args: argparse.Namespace) -> bool:
    counts = [c for c in args.workers if c <= usable_cores()]
    skipped = [c for c in args.workers if c not in counts]
    mod = random_module(num_functions=args.functions, seed=0)
    data = to_bytes(mod)
    print(
        f"parpass {parpass.__version__}; usable cores {usable_cores()}; module random_module({args.functions}) = "
        f"{len(mod)} functions, {len(data) / 1e6:.1f} MB; warm: median of {args.repeat} interleaved ratios"
        + (f"; skipped (more than the usable cores): {skipped}" if skipped else "")
    )
    top = ceilings(counts, data, min(args.repeat, CEILING_ROUNDS))
    print(
        "\n| workers | machine headroom | (a) speedup | (a) ceiling | (a) share of ceiling | (b) speedup "
        "| (b') speedup | parent µs/function, (b) |\n|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    identical = True
    for count in counts:
        get_backend().warm(count)
        headroom = machine_headroom(count)
        ratios: dict[str, float] = {}
        overhead = 0.0
        for case in (c for c in CASES if c.key in SCALED):
            executor.history.clear()
            serial, parallel, serial_out, parallel_out = timed(case.make(), mod, count, args.repeat)
            ratios[case.key] = median_ratio(serial, parallel)
            identical &= module_digest(serial_out) == module_digest(parallel_out)
            waves = [w for w in executor.history if w.parallel]
            if case.key == "b" and waves:
                overhead = statistics.median(w.parent_seconds / max(w.functions, 1) for w in waves) * 1e6
        heavy, light, dataflow = (ratios[key] for key in SCALED)
        print(
            f"| {count} | {headroom:.2f}x | {heavy:.2f}x | {top[count]:.2f}x | {heavy / top[count] * 100:.0f}% | "
            f"{light:.2f}x | {dataflow:.2f}x | {overhead:.1f} |",
            flush=True,
        )
    print(f"\noutputs byte-identical to the in-process run: {'yes' if identical else 'NO'}")
    return identical


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--functions", type=int, default=8000, help="Functions in the module (default 8000)")
    parser.add_argument(
        "--workers",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[2, 4, 8, 16],
        help="comma-separated worker counts (default 2,4,8,16)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="warm ratios per case and count (default 3)")
    args = parser.parse_args()
    if any(c < 2 for c in args.workers):
        parser.error(f"--workers: every count must be at least 2, got {args.workers}")
    return 0 if run(args) else 1


if __name__ == "__main__":
    sys.exit(main())
