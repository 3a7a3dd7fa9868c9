"""Dask cluster backend against the local (loky) one, measured in one run on this machine.

Starts a ``LocalCluster`` of ``--workers`` single-threaded worker processes and
times, in interleaved rounds, each case in-process (``parpass.num_workers = 1``),
on the local workers, and on the cluster's (both ``parpass.parallel = "always"``,
so that the figures measure the backends, not ``auto``'s choice):

- heavy: one CPU-heavy function pass (``bench_parallel``'s register-pressure
  schedule search) on ``random_module(--functions)``;
- default pipeline: ``default_pipeline(2)`` on the same module with prim funcs
  (what ``parpass opt`` runs), fused.

It prints each backend's speedup over in-process (median of ``--repeat``
ratios), the cluster's as a share of the local one (target: the heavy pass
>= 90%), the machine headroom measured in the same run, and each backend's
latency per chunk (a wave of one tiny function per chunk: the wall time of the
wave over its chunks). Each timed run starts after a full collection (else the
collector's cadence charges a 50-60 ms gen-2 collection to alternate runs).
Then the cluster in the default ``auto`` mode against in-process, after one
run of each (``auto`` has learned the cluster's costs): the heavy pass, the
pipeline fused, and the pipeline pass by pass (an instrument that reads the
module between passes), each >= 0.95x (``auto``
must never make a run slower). Last, what Dask's sampling profiler costs the
workers (it samples a running task's whole stack every 10 ms; on by default):
the heavy pass on the cluster with the workers' ``profile`` and
``profile-cycle`` callbacks stopped and running, in alternate rounds (a chunk
runs in a thread of parpass's own, out of the profiler's sight, so this should
read about 0%). Exit status 1 if any output differs from in-process.

    python benchmarks/bench_cluster.py [--functions 2000] [--workers 2] [--repeat 5]
"""

from __future__ import annotations

import argparse
import functools
import gc
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from bench_parallel import schedule_search
from benchutil import machine_headroom, median_ratio, module_digest, sigterm_as_exit

from parpass.instrument import PassInstrument
from parpass.ir import IRModule, relax
from parpass.parallel import cluster, get_backend, shutdown
from parpass.parallel import default_executor as executor
from parpass.passes import default_pipeline
from parpass.testing import random_module
from parpass.transform import Pass, PassContext, PassInfo, function_pass

#: The heavy pass on the cluster must reach this share of the local backend's speedup.
CLUSTER_SHARE = 0.90
#: ``auto`` on the cluster must be at least this fast against in-process.
AUTO_FLOOR = 0.95


class ReadsTheModule(PassInstrument):
    """An instrument that reads the module after each pass: the pipeline then runs pass by pass."""

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        len(mod)


@function_pass(opt_level=0, name="Touch")
def touch(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    """Next to no work: what a wave of it costs is the backend's own latency."""
    return func


def contexts(workers: int, address: str) -> dict[str, Callable[[], PassContext]]:
    base = {"parpass.parallel": "always", "parpass.num_workers": workers}
    return {
        "in-process": lambda: PassContext(opt_level=3, config={"parpass.num_workers": 1}),
        "local": lambda: PassContext(opt_level=3, config=base),
        "cluster": lambda: PassContext(opt_level=3, config={**base, "parpass.scheduler": address}),
    }


def time_case(pass_: Pass, mod: IRModule, ways: dict[str, Callable[[], PassContext]], repeat: int) -> dict[str, Any]:
    """Seconds of ``pass_(mod)`` each way, ``repeat`` samples each, interleaved after one warm-up round; and
    whether every way's output is the in-process one."""
    samples: dict[str, list[float]] = {way: [] for way in ways}
    digests: dict[str, str] = {}
    for round_ in range(repeat + 1):
        for way, ctx in ways.items():
            gc.collect()  # no run pays for garbage another left (the collector's cadence charged alternate runs)
            with ctx():
                start = time.perf_counter()
                out = pass_(mod)
                elapsed = time.perf_counter() - start
            if round_:
                samples[way].append(elapsed)
            digests[way] = module_digest(out)
    return {"samples": samples, "identical": len(set(digests.values())) == 1}


def chunk_latency(ways: dict[str, Callable[[], PassContext]], workers: int, repeat: int) -> dict[str, float]:
    """Per backend, the median over ``repeat`` waves of Touch on one tiny function per chunk: wall / chunks."""
    mod = random_module(num_functions=4 * workers, num_prim_funcs=0, size=2, seed=1)
    out: dict[str, float] = {}
    for way in ("local", "cluster"):
        per_chunk = []
        for _ in range(repeat + 1):
            executor.history.clear()
            with ways[way]():
                touch(mod)
            wave = executor.history[-1]
            per_chunk.append(wave.wall / max(wave.chunks, 1))
        out[way] = statistics.median(per_chunk[1:])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--functions", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if args.functions < 1 or args.workers < 2 or args.repeat < 1:
        parser.error("--functions and --repeat must be >= 1, --workers >= 2")
    from distributed import LocalCluster

    with sigterm_as_exit():
        local_cluster = LocalCluster(
            n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=50
        )
        try:
            return run(args, local_cluster.scheduler_address)
        finally:
            cluster.close_clients()
            local_cluster.close()
            shutdown()  # the local workers too: a loky pool started after their crew would wait for its seats


def run(args: argparse.Namespace, address: str) -> int:
    ways = contexts(args.workers, address)
    # Both backends' workers started and parpass imported in them before anything is measured: a worker still
    # importing takes a core from whatever runs meanwhile (the headroom read 1.1-1.3x there).
    cluster.backend_at(address).warm(args.workers)
    get_backend().warm(args.workers)
    headroom = machine_headroom(args.workers)
    print(f"machine headroom ({args.workers} processes against 1): {headroom:.2f}x")
    latency = chunk_latency(ways, args.workers, args.repeat)
    print(f"latency per chunk: local {latency['local'] * 1e3:.2f} ms, cluster {latency['cluster'] * 1e3:.2f} ms")
    heavy_mod = random_module(num_functions=args.functions, seed=0)
    pipeline_mod = random_module(num_functions=args.functions, num_prim_funcs=args.functions // 2, seed=0)
    cases = {"heavy": (schedule_search, heavy_mod), "default pipeline": (default_pipeline(2), pipeline_mod)}
    identical = True
    print(f"{'case':18} {'in-process':>11} {'local':>15} {'cluster':>15} {'cluster/local':>14}")
    for name, (pass_, mod) in cases.items():
        found = time_case(pass_, mod, ways, args.repeat)
        identical &= found["identical"]
        s = found["samples"]
        local = median_ratio(s["in-process"], s["local"])
        remote = median_ratio(s["in-process"], s["cluster"])
        share = remote / local
        target = (" ok" if share >= CLUSTER_SHARE else " MISS") if name == "heavy" else ""
        print(
            f"{name:18} {statistics.median(s['in-process']) * 1e3:9.0f}ms "
            f"{local:6.2f}x {statistics.median(s['local']) * 1e3:6.0f}ms "
            f"{remote:6.2f}x {statistics.median(s['cluster']) * 1e3:6.0f}ms {share:13.2%}{target}"
        )
    identical &= auto_cases(cases, address, args.repeat)
    identical &= profiler_cost(schedule_search, heavy_mod, ways, address, args.repeat)
    print(f"machine headroom after: {machine_headroom(args.workers):.2f}x")
    if not identical:
        print("OUTPUT DIFFERS from the in-process run", file=sys.stderr)
    return 0 if identical else 1


def auto_cases(cases: dict[str, tuple[Pass, IRModule]], address: str, repeat: int) -> bool:
    """The cluster in ``auto`` mode against in-process, per case (and the pipeline pass by pass); whether
    every output is the in-process one."""
    print(f"auto on the cluster against in-process (target >= {AUTO_FLOOR:.2f}x):")
    identical = True
    runs = [(name, pass_, mod, False) for name, (pass_, mod) in cases.items()]
    runs.append(("pipeline, pass by pass", *cases["default pipeline"], True))
    for name, pass_, mod, by_pass in runs:
        instruments: list[PassInstrument] = [ReadsTheModule()] if by_pass else []
        ways: dict[str, Callable[[], PassContext]] = {
            "in-process": functools.partial(
                PassContext, opt_level=3, config={"parpass.num_workers": 1}, instruments=instruments
            ),
            "auto": functools.partial(
                PassContext, opt_level=3, config={"parpass.scheduler": address}, instruments=instruments
            ),
        }
        found = time_case(pass_, mod, ways, repeat)
        identical &= found["identical"]
        s = found["samples"]
        ratio = median_ratio(s["in-process"], s["auto"])
        mark = "ok" if ratio >= AUTO_FLOOR else "MISS"
        print(
            f"  {name:24} in-process {statistics.median(s['in-process']) * 1e3:6.0f}ms, "
            f"auto {statistics.median(s['auto']) * 1e3:6.0f}ms: {ratio:.2f}x {mark}"
        )
    return identical


#: The workers' periodic callbacks of Dask's sampling profiler (distributed.worker.profile.*).
PROFILER_CALLBACKS = ("profile", "profile-cycle")


def _set_profiler(dask_worker: Any, on: bool) -> bool:
    """On a cluster worker (through ``Client.run``): start or stop its sampling profiler's callbacks; whether it
    has them."""
    found = [dask_worker.periodic_callbacks.get(name) for name in PROFILER_CALLBACKS]
    for callback in found:
        if callback is not None:
            (callback.start if on else callback.stop)()
    return all(callback is not None for callback in found)


def profiler_cost(
    pass_: Pass, mod: IRModule, ways: dict[str, Callable[[], PassContext]], address: str, repeat: int
) -> bool:
    """The heavy pass on the cluster with its workers' sampling profiler stopped and running, alternate rounds
    after one of each (the profiler is left running, Dask's default); whether every output is the same."""
    client = cluster.backend_at(address).client
    samples: dict[bool, list[float]] = {False: [], True: []}
    digests = set()
    try:
        for round_ in range(repeat + 1):
            for on in (False, True):
                if not all(client.run(_set_profiler, on=on).values()):
                    print("Dask's worker profiler: not running on the cluster's workers (nothing to compare)")
                    return True
                gc.collect()
                with ways["cluster"]():
                    start = time.perf_counter()
                    out = pass_(mod)
                    elapsed = time.perf_counter() - start
                if round_:
                    samples[on].append(elapsed)
                digests.add(module_digest(out))
    finally:
        client.run(_set_profiler, on=True)
    off, on = statistics.median(samples[False]), statistics.median(samples[True])
    print(
        f"Dask's worker profiler (heavy pass on the cluster, alternate rounds): off {off * 1e3:.0f}ms, "
        f"on {on * 1e3:.0f}ms (its default): it costs {on / off - 1:.1%}"
    )
    return len(digests) == 1


if __name__ == "__main__":
    sys.exit(main())
