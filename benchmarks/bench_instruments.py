"""Instruments that read the module: the default pipeline under ``WellFormedInstrument``, ``PrintAfterAll`` or
``DumpIR``, in-process against worker processes, warm and cold.

Such an instrument makes the pipeline run pass by pass, and its own work after
every pass (checking the IR, printing it) costs more than most passes (~150 us a
function for either). These instruments keep what they found per function while
the function stays the same, and hand the functions a pass changed to the pass
executor as an analysis (see ``parpass.transform.analysis``): on the workers, that
work is parallel too.

Warm: in this process, the worker pool started and the cost model taught by one
run, ``--repeat`` interleaved runs of the pipeline in-process with the instrument,
on ``--workers`` workers with it, and in-process without it (what the instrument
adds), each on a module freshly decoded from bytes (as read from a file). Cold:
``parpass opt m.msgpack --verify-each`` and ``--dump-ir DIR``, ``--workers 1``
against ``--workers W``, each in a fresh process, alternating. Prints the medians,
their ratios, where the parallel runs' time went (the passes' waves and the
instrument's), the machine headroom before and after, and whether every output
(and every dump) is byte-identical. Exit status 1 if not.

    python benchmarks/bench_instruments.py [--functions 2000] [--repeat 3] [--workers 2]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench_cold import digest, run_command
from benchutil import (
    bytecode_state,
    machine_headroom,
    mark,
    median_ratio,
    module_digest,
    sigterm_as_exit,
    size_repeat_workers,
)

from parpass.instrument import DumpIR, PassInstrument, PrintAfterAll, WellFormedInstrument
from parpass.ir import from_bytes, to_bytes
from parpass.parallel import default_executor, get_backend, shutdown
from parpass.passes import default_pipeline
from parpass.testing import random_module
from parpass.transform import PassContext

#: Issue 12's target for pass-by-pass runs, which these are (any instrument that reads the module makes one).
TARGET = 1.5
#: Issue 12's floor for a first run in a fresh process: 'auto' must not make it slower than in-process.
COLD_FLOOR = 0.95
#: The instruments' analyses, by name in the executor's wave statistics.
ANALYSES = {("WellFormedCheck",), ("PrintFunctions",)}


def dump_digest(directory: Path) -> str:
    """One digest of every file of ``directory`` (names and bytes), emptied afterwards."""
    h = hashlib.sha256()
    for path in sorted(directory.iterdir()):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
        path.unlink()
    return h.hexdigest()


class Warm:
    """The pipeline on one module in this process under one instrument (or none), at a worker count."""

    def __init__(self, data: bytes, make: Callable[[], PassInstrument], dump: Path | None) -> None:
        self.data = data
        self.make = make
        self.dump = dump
        self.pipeline = default_pipeline(2)
        self.digests: set[str] = set()
        self.dumps: set[str] = set()

    def run(self, workers: int, instrumented: bool = True) -> float:
        """Wall seconds of one run (the digests of its output and of its dump noted)."""
        mod = from_bytes(self.data)
        gc.collect()
        instruments = [self.make()] if instrumented else []
        with PassContext(opt_level=2, instruments=instruments, config={"parpass.num_workers": workers}):
            start = time.perf_counter()
            out = self.pipeline(mod)
            seconds = time.perf_counter() - start
        self.digests.add(module_digest(out))
        if instrumented and self.dump is not None:
            self.dumps.add(dump_digest(self.dump))
        return seconds


def warm_runs(args: argparse.Namespace, label: str, warm: Warm) -> tuple[float, bool]:
    warm.run(args.workers)  # the cost model learns the passes and the analysis
    warm.run(1)
    serial: list[float] = []
    parallel: list[float] = []
    bare: list[float] = []
    passes = analyses = 0.0
    for _ in range(args.repeat):
        serial.append(warm.run(1))
        default_executor.history.clear()
        parallel.append(warm.run(args.workers))
        waves = [w for w in default_executor.history if w.parallel]
        analyses += sum(w.wall for w in waves if w.passes in ANALYSES) / args.repeat
        passes += sum(w.wall for w in waves if w.passes not in ANALYSES) / args.repeat
        bare.append(warm.run(1, instrumented=False))
    s, p, b = (statistics.median(x) for x in (serial, parallel, bare))
    print(
        f"\n{label}, warm, median of {args.repeat} interleaved runs: in-process {s:.2f} s (the pipeline alone "
        f"{b:.2f} s: the instrument adds {s - b:.2f} s), {args.workers} workers {p:.2f} s"
    )
    ratio = median_ratio(serial, parallel)
    print(f"  speedup: {mark(ratio, TARGET)} (target >= {TARGET}x; median of the per-round ratios)")
    split = f"the passes' waves {passes:.2f} s, the instrument's waves {analyses:.2f} s"
    print(f"  the parallel runs' waves in workers (wall): {split}")
    same = len(warm.digests) == 1 and len(warm.dumps) <= 1
    print(f"  outputs byte-identical: {'yes' if len(warm.digests) == 1 else 'NO'}", end="")
    print(f"; dumps byte-identical: {'yes' if len(warm.dumps) == 1 else 'NO'}" if warm.dump else "")
    return ratio, same


def cold_runs(args: argparse.Namespace, tmp: Path, option: list[str], dump: Path | None) -> tuple[float, bool]:
    module = tmp / "m.msgpack"
    if not module.exists():
        run_command(["gen", "-o", str(module), "--functions", str(args.functions)])
    times: dict[int, list[float]] = {1: [], args.workers: []}
    digests: set[str] = set()
    for round_ in range(args.repeat):
        for workers, samples in times.items():
            out = tmp / "out.msgpack"
            samples.append(run_command(["opt", str(module), "-o", str(out), *option, "--workers", str(workers)]))
            digests.add(digest(out) + (dump_digest(dump) if dump else ""))
            print(f"  cold run {round_ + 1}, --workers {workers}: {samples[-1]:.2f} s", flush=True)
    s, p = statistics.median(times[1]), statistics.median(times[args.workers])
    print(
        f"\ncold, parpass opt {option[0]} in a fresh process, median of {args.repeat}: --workers 1 {s:.2f} s, "
        f"--workers {args.workers} {p:.2f} s"
    )
    ratio = median_ratio(times[1], times[args.workers])
    print(f"  speedup: {mark(ratio, COLD_FLOOR)} (floor >= {COLD_FLOOR}x; median of the per-round ratios)")
    print(f"  outputs byte-identical: {'yes' if len(digests) == 1 else 'NO'}")
    return ratio, len(digests) == 1


def run(args: argparse.Namespace, tmp: Path) -> int:
    data = to_bytes(random_module(num_functions=args.functions, num_prim_funcs=args.functions // 2, size=20, seed=0))
    get_backend().warm(args.workers)
    dump = tmp / "dump"
    figures: list[str] = []
    same = True
    with open(os.devnull, "w") as null:
        cases: list[tuple[str, Callable[[], PassInstrument], Path | None]] = [
            ("WellFormedInstrument()", WellFormedInstrument, None),
            ("PrintAfterAll(file=os.devnull)", lambda: PrintAfterAll(file=null), None),
            (f"DumpIR({dump.name})", lambda: DumpIR(dump), dump),
        ]
        for label, make, where in cases:
            ratio, ok = warm_runs(args, label, Warm(data, make, where))
            figures.append(f"{label} warm {ratio:.2f}x")
            same = same and ok
    shutdown()
    for option, where in ((["--verify-each"], None), (["--dump-ir", str(dump)], dump)):
        ratio, ok = cold_runs(args, tmp, option, where)
        figures.append(f"{option[0]} cold {ratio:.2f}x")
        same = same and ok
    shutil.rmtree(dump, ignore_errors=True)
    after = machine_headroom(args.workers)
    print(f"\nmachine headroom after the runs: {after:.2f}x")
    print(f"summary: {', '.join(figures)} (targets: warm >= {TARGET}x, cold >= {COLD_FLOOR}x)")
    return 0 if same else 1


def main() -> int:
    args = size_repeat_workers(__doc__ or "", 2000, "in-process")
    print(
        f"module: random_module({args.functions} Functions, {args.functions // 2} PrimFuncs, size 20, seed 0), "
        "as parpass gen makes it; pipeline: default_pipeline(2)"
    )
    print(f"parpass's bytecode: {bytecode_state()}")
    before = machine_headroom(args.workers)
    print(f"machine headroom before the runs (a pure-Python loop on {args.workers} processes vs 1): {before:.2f}x")
    try:
        with sigterm_as_exit(), tempfile.TemporaryDirectory(prefix="parpass-bench-instruments-") as tmp:
            return run(args, Path(tmp))
    except RuntimeError as err:
        print(f"bench_instruments: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
