"""The IR checked before and after every pass: the default pipeline under ``WellFormedInstrument``, in-process
against worker processes, warm and cold.

The instrument reads the module, so the pipeline runs pass by pass, and after each
pass the functions it changed (and their callers) are checked. Checking costs more
than most passes (~160 us a function), and in-process it is serial; with workers,
the instrument's check of a pass's changed functions runs there, in the processes
that hold them (see ``parpass.transform.analysis``), so it is parallel too.

Warm: in this process, the worker pool started and the cost model taught by one
run, ``--repeat`` interleaved runs of the pipeline in-process with the instrument,
on ``--workers`` workers with it, and in-process without it (what the checks add),
each on a module freshly decoded from bytes (as read from a file). Cold:
``parpass opt m.msgpack --verify-each --workers 1`` against ``--workers W``, each
in a fresh process, alternating. Prints the medians, their ratio, where the
parallel runs' time went (the passes' waves and the checks' waves), the machine
headroom before and after, and whether every output is byte-identical and every
run checked the same number of functions. Exit status 1 if not.

    python benchmarks/bench_well_formed.py [--functions 2000] [--repeat 3] [--workers 2]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench_cold import digest, run_command
from benchutil import bytecode_state, machine_headroom, mark, median_ratio, module_digest, sigterm_as_exit

from parpass.instrument import WellFormedInstrument
from parpass.ir import from_bytes, to_bytes
from parpass.parallel import default_executor, get_backend, shutdown
from parpass.passes import default_pipeline
from parpass.testing import random_module
from parpass.transform import PassContext

#: Issue 12's target for pass-by-pass runs, which this is (any instrument that reads the module makes one).
TARGET = 1.5
#: Issue 12's floor for a first run in a fresh process: 'auto' must not make it slower than in-process.
COLD_FLOOR = 0.95
#: The name of the instrument's check in the executor's wave statistics.
CHECK = ("WellFormedCheck",)


class Warm:
    """The pipeline on one module in this process, with and without the instrument, at a worker count."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pipeline = default_pipeline(2)
        self.digests: set[str] = set()
        self.checked: set[int] = set()

    def run(self, workers: int, check: bool = True) -> float:
        """Wall seconds of one run (its output's digest and count of functions checked noted)."""
        mod = from_bytes(self.data)
        gc.collect()
        instruments = [WellFormedInstrument()] if check else []
        with PassContext(opt_level=2, instruments=instruments, config={"parpass.num_workers": workers}):
            start = time.perf_counter()
            out = self.pipeline(mod)
            seconds = time.perf_counter() - start
        self.digests.add(module_digest(out))
        if check:
            self.checked.add(instruments[0].functions_checked)
        return seconds


def warm_runs(args: argparse.Namespace) -> tuple[float, bool]:
    data = to_bytes(random_module(num_functions=args.functions, num_prim_funcs=args.functions // 2, size=20, seed=0))
    warm = Warm(data)
    get_backend().warm(args.workers)
    warm.run(args.workers)  # the cost model learns the passes and the check
    warm.run(1)
    serial: list[float] = []
    parallel: list[float] = []
    bare: list[float] = []
    passes = checks = 0.0
    for _ in range(args.repeat):
        serial.append(warm.run(1))
        default_executor.history.clear()
        parallel.append(warm.run(args.workers))
        waves = [w for w in default_executor.history if w.parallel]
        checks += sum(w.wall for w in waves if w.passes == CHECK) / args.repeat
        passes += sum(w.wall for w in waves if w.passes != CHECK) / args.repeat
        bare.append(warm.run(1, check=False))
    s, p, b = (statistics.median(x) for x in (serial, parallel, bare))
    print(
        f"\nwarm, this process, median of {args.repeat} interleaved runs: in-process {s:.2f} s "
        f"(the pipeline alone {b:.2f} s: the checks add {s - b:.2f} s), {args.workers} workers {p:.2f} s"
    )
    ratio = median_ratio(serial, parallel)
    print(f"  speedup: {mark(ratio, TARGET)} (target >= {TARGET}x; median of the per-round ratios)")
    split = f"the passes' waves {passes:.2f} s, the checks' waves {checks:.2f} s"
    print(f"  the parallel runs' waves in workers (wall): {split}")
    same = len(warm.digests) == 1 and len(warm.checked) == 1
    print(
        f"  outputs byte-identical: {'yes' if len(warm.digests) == 1 else 'NO'}; functions checked per run: "
        f"{', '.join(map(str, sorted(warm.checked)))}"
    )
    shutdown()
    return ratio, same


def cold_runs(args: argparse.Namespace, tmp: Path) -> tuple[float, bool]:
    module = tmp / "m.msgpack"
    functions = str(args.functions)
    run_command(["gen", "-o", str(module), "--functions", functions, "--prim-funcs", str(args.functions // 2)])
    times: dict[int, list[float]] = {1: [], args.workers: []}
    digests: set[str] = set()
    for round_ in range(args.repeat):
        for workers, samples in times.items():
            out = tmp / f"out-{workers}.msgpack"
            samples.append(
                run_command(["opt", str(module), "-o", str(out), "--verify-each", "--workers", str(workers)])
            )
            digests.add(digest(out))
            print(f"  cold run {round_ + 1}, --workers {workers}: {samples[-1]:.2f} s", flush=True)
    s, p = statistics.median(times[1]), statistics.median(times[args.workers])
    print(
        f"\ncold, parpass opt --verify-each in a fresh process, median of {args.repeat}: --workers 1 {s:.2f} s, "
        f"--workers {args.workers} {p:.2f} s"
    )
    ratio = median_ratio(times[1], times[args.workers])
    print(f"  speedup: {mark(ratio, COLD_FLOOR)} (floor >= {COLD_FLOOR}x; median of the per-round ratios)")
    print(f"  outputs byte-identical: {'yes' if len(digests) == 1 else 'NO'}")
    return ratio, len(digests) == 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--functions", type=int, default=2000, help="Functions of the module (default 2000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side, interleaved (default 3)")
    parser.add_argument("--workers", type=int, default=2, help="workers of the parallel runs (default 2)")
    args = parser.parse_args()
    for name in ("functions", "repeat"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1")
    if args.workers < 2:
        parser.error("--workers must be >= 2 (the runs compare it with in-process)")
    print(
        f"module: random_module({args.functions} Functions, {args.functions // 2} PrimFuncs, size 20, seed 0); "
        "pipeline: default_pipeline(2) under WellFormedInstrument()"
    )
    print(f"parpass's bytecode: {bytecode_state()}")
    before = machine_headroom(args.workers)
    print(f"machine headroom before the runs (a pure-Python loop on {args.workers} processes vs 1): {before:.2f}x")
    warm, warm_same = warm_runs(args)
    try:
        with sigterm_as_exit(), tempfile.TemporaryDirectory(prefix="parpass-bench-wf-") as tmp:
            cold, cold_same = cold_runs(args, Path(tmp))
    except RuntimeError as err:
        print(f"bench_well_formed: {err}", file=sys.stderr)
        return 1
    after = machine_headroom(args.workers)
    print(f"\nmachine headroom after the runs: {after:.2f}x")
    warm_line = f"warm {mark(warm, TARGET)} (target >= {TARGET}x)"
    print(f"summary: {warm_line}, cold {mark(cold, COLD_FLOOR)} (floor >= {COLD_FLOOR}x)")
    return 0 if warm_same and cold_same else 1


if __name__ == "__main__":
    sys.exit(main())
