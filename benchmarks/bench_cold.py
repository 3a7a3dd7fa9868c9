"""Cold single runs: ``parpass opt`` in a fresh process, in-process against workers, as a user's one-shot build runs.

Generates a module with ``parpass gen --functions N --seed 0`` (16,000
Functions and 8,000 PrimFuncs by default), then runs ``parpass opt m.msgpack
-o out.msgpack --workers 1`` and ``--workers W`` (the default pipeline)
alternately, each in a fresh process, ``--repeat`` times each. Each time is
the wall time of the whole command (interpreter start, import, reading the
file, pool start-up, an unlearned cost model, the pipeline, writing the
result). Prints every time, the medians, their ratio against issue 12's target
(>= 1.5x), the machine headroom (a pure-Python loop on W processes against
one) measured before and after the runs, and the ceiling of the run itself:
after each pair, W ``--workers 1`` runs start at once, each on the whole
module, and W x (that round's ``--workers 1`` time) / (the slowest of them)
is what no executor could beat on this machine at that moment. All outputs must
be byte-identical.

Its files live in a temporary folder, removed at the end (also on Ctrl-C,
SIGTERM or an error). Exit status 1 if the outputs differ or a run fails.

    python benchmarks/bench_cold.py [--functions 16000] [--repeat 3] [--workers 2]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchutil import bytecode_state, machine_headroom, mark, sigterm_as_exit, size_repeat_workers

#: Issue 12's target for the cold single run on 16,000 functions.
TARGET = 1.5


def run_command(args: list[str]) -> float:
    """Wall seconds of ``python -m parpass ARGS`` in a fresh process; RuntimeError with its stderr if it fails."""
    (seconds,) = run_together([args])
    return seconds


def run_together(commands: list[list[str]]) -> list[float]:
    """Wall seconds of each ``python -m parpass ARGS`` of ``commands``, all started at once, each in a fresh
    process, until it exits; RuntimeError with the stderr of the first that fails.

    Ended with SIGTERM (then SIGKILL) if this process is interrupted, so that their workers go too.
    """
    with contextlib.ExitStack() as files:
        errs = [files.enter_context(tempfile.TemporaryFile("w+")) for _ in commands]
        start = time.perf_counter()
        procs = [
            subprocess.Popen([sys.executable, "-m", "parpass", *args], stdout=subprocess.DEVNULL, stderr=err)
            for args, err in zip(commands, errs, strict=True)
        ]
        seconds: list[float | None] = [None] * len(procs)
        try:
            while None in seconds:
                for k, proc in enumerate(procs):
                    if seconds[k] is None and proc.poll() is not None:
                        seconds[k] = time.perf_counter() - start
                time.sleep(0.005)
        except BaseException:
            for proc in procs:
                _stop(proc)
            raise
        for args, proc, err in zip(commands, procs, errs, strict=True):
            if proc.returncode != 0:
                err.seek(0)
                raise RuntimeError(f"parpass {' '.join(args)} failed (exit status {proc.returncode}):\n{err.read()}")
    return [t for t in seconds if t is not None]


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run(args: argparse.Namespace, tmp: Path) -> int:
    module = tmp / "m.msgpack"
    seconds = run_command(["gen", "-o", str(module), "--functions", str(args.functions), "--seed", "0"])
    print(
        f"module: parpass gen --functions {args.functions} --seed 0: {module.stat().st_size / 1e6:.1f} MB "
        f"(generated in {seconds:.1f} s)"
    )
    print(f"parpass's bytecode (what each timed process and its workers import): {bytecode_state()}")
    before = machine_headroom(args.workers)
    print(f"machine headroom before the runs (a pure-Python loop on {args.workers} processes vs 1): {before:.2f}x")
    times: dict[int, list[float]] = {1: [], args.workers: []}
    ceilings: list[float] = []
    digests: set[str] = set()
    for round_ in range(args.repeat):
        for workers, samples in times.items():
            out = tmp / f"out-{workers}-{round_}.msgpack"
            samples.append(run_command(["opt", str(module), "-o", str(out), "--workers", str(workers)]))
            digests.add(digest(out))
            out.unlink()
            print(f"  run {round_ + 1}, --workers {workers}: {samples[-1]:.2f} s", flush=True)
        outs = [tmp / f"ceiling-{k}.msgpack" for k in range(args.workers)]
        together = run_together([["opt", str(module), "-o", str(out), "--workers", "1"] for out in outs])
        digests.update(digest(out) for out in outs)
        for out in outs:
            out.unlink()
        ceilings.append(args.workers * times[1][-1] / max(together))
        print(
            f"  run {round_ + 1}, {args.workers} x --workers 1 at once: "
            f"{', '.join(f'{t:.2f} s' for t in together)}: ceiling {ceilings[-1]:.2f}x",
            flush=True,
        )
    after = machine_headroom(args.workers)
    print(f"machine headroom after the runs: {after:.2f}x")
    serial, parallel = statistics.median(times[1]), statistics.median(times[args.workers])
    print(
        f"\nparpass opt, default pipeline, fresh process, median of {args.repeat}: --workers 1 {serial:.2f} s, "
        f"--workers {args.workers} {parallel:.2f} s"
    )
    print(f"speedup (ratio of the medians): {mark(serial / parallel, TARGET)} (target >= {TARGET}x)")
    ceiling = statistics.median(ceilings)
    print(
        f"ceiling of the run on this machine ({args.workers} x --workers 1 at once against one alone, median of "
        f"{args.repeat}): {ceiling:.2f}x; the speedup is {serial / parallel / ceiling * 100:.0f}% of it"
    )
    identical = len(digests) == 1
    print(f"outputs byte-identical: {'yes' if identical else 'NO'} ({(2 + args.workers) * args.repeat} runs)")
    return 0 if identical else 1


def main() -> int:
    args = size_repeat_workers(__doc__ or "", 16000, "--workers 1")
    try:
        with sigterm_as_exit(), tempfile.TemporaryDirectory(prefix="parpass-bench-cold-") as tmp:
            return run(args, Path(tmp))
    except RuntimeError as err:
        print(f"bench_cold: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
