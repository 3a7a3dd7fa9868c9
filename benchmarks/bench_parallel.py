"""Parallel executor benchmark: speedup over in-process runs, measured in one run.

Cases (issue 5), each run in-process (``parpass.num_workers = 1``) and with
``--workers`` workers in the default ``auto`` mode, medians of ``--repeat``:

(a) one CPU-heavy function pass (a register-pressure schedule search in
    plain Python) on ``random_module(2000)``;
(b) a pipeline of seven light standard passes of both function kinds (fused
    into one wave) on the same module; (b') the dataflow passes of the default
    pipeline, two of which read other functions (see ``dataflow_pipeline``);
(c) the same light pipeline on a module of 20 small functions, where the
    executor must notice that shipping costs more than it saves.

It also prints the parent's own overhead per function in the parallel runs
(encoding what is not cached, writing the wave, merging, replaying), and two
ceilings: the speedup of a pure-Python loop on the workers' number of
processes, and that of case (a)'s pass itself with nothing shipped.

    python benchmarks/bench_parallel.py [--functions 2000] [--workers 2] [--repeat 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable

import parpass
from parpass.ir import IRModule, relax
from parpass.parallel import default_executor as executor
from parpass.parallel import get_backend, usable_cores
from parpass.testing import random_module
from parpass.transform import Pass, PassContext, Sequential, function_pass


def _uses(value: object) -> list[int]:
    """Variable ids a binding's value reads."""
    out = []
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, relax.Var):
            out.append(node.vid)
        else:
            stack.extend(node.children())  # type: ignore[attr-defined]
    return out


@function_pass(opt_level=0, name="ScheduleSearch")
def schedule_search(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    """A CPU-heavy pass in plain Python: search binding orders for the lowest peak register pressure.

    Like a list scheduler with random restarts: it tries 24 dependence-respecting
    orders per function (seeded by the function's size, so deterministic), scores
    each by the peak number of live values, and records the best score.
    """
    bindings = func.bindings
    defs = {b.var.vid: i for i, b in enumerate(bindings)}
    preds = [[defs[v] for v in _uses(b.value) if v in defs] for b in bindings]
    last_use = {i: i for i in range(len(bindings))}
    for i, ps in enumerate(preds):
        for p in ps:
            last_use[p] = max(last_use[p], i)
    rng = random.Random(len(bindings))
    best = len(bindings) + 1
    for _ in range(24):
        indegree = [len(set(ps)) for ps in preds]
        succs: list[list[int]] = [[] for _ in bindings]
        for i, ps in enumerate(preds):
            for p in set(ps):
                succs[p].append(i)
        ready = [i for i, d in enumerate(indegree) if d == 0]
        live: set[int] = set()
        peak = 0
        while ready:
            i = ready.pop(rng.randrange(len(ready)))
            live.add(i)
            live = {j for j in live if last_use[j] > i or j == i}
            peak = max(peak, len(live))
            for s in succs[i]:
                indegree[s] -= 1
                if indegree[s] == 0:
                    ready.append(s)
        best = min(best, peak)
    return func.with_attr("peak_live_values", best)


def light_pipeline() -> Pass:
    """Light standard passes of both function kinds, none of which reads other functions: one fused wave."""
    from parpass import passes

    return Sequential(
        [
            passes.CanonicalizeBindings(),
            passes.FoldConstant(),
            passes.EliminateCommonSubexpr(),
            passes.Simplify(),
            passes.VectorizeLoop(),
            passes.FlattenBuffer(),
            passes.RemoveNoOp(),
        ],
        name="light_pipeline",
    )


def dataflow_pipeline() -> Pass:
    """The dataflow passes of the default pipeline; InferType and DeadCodeElimination read their callees.

    In a fused wave, a later pass that reads other functions makes each worker
    run the earlier passes on them again; the executor learns this and ships
    such passes in waves of their own, which costs a round trip each.
    """
    from parpass import passes

    return Sequential(
        [
            passes.InferType(),
            passes.CanonicalizeBindings(),
            passes.FoldConstant(),
            passes.EliminateCommonSubexpr(),
            passes.DeadCodeElimination(),
        ],
        name="dataflow_pipeline",
    )


def timed(pass_: Pass, mod: IRModule, workers: int, repeat: int) -> tuple[list[float], list[float], IRModule, IRModule]:
    """Seconds of ``pass_(mod)`` in-process and with ``workers`` workers, ``repeat`` samples each, interleaved.

    Interleaving puts both sides through the same spells of noise from other
    programs on a shared machine; one warm-up run of each comes first. A run
    shorter than :data:`MIN_SAMPLE` is timed over as many runs in a row as make
    one sample that long (the mean per run), so that timer and scheduler
    noise do not decide a ratio of milliseconds.
    """
    inline_ctx = PassContext(opt_level=3, config={"parpass.num_workers": 1})
    parallel_ctx = PassContext(opt_level=3, config={"parpass.num_workers": workers})
    serial: list[float] = []
    parallel: list[float] = []
    serial_out = parallel_out = mod
    runs = 1
    for round_ in range(repeat + 1):
        for ctx, samples in ((inline_ctx, serial), (parallel_ctx, parallel)):
            with ctx:
                start = time.perf_counter()
                for _ in range(runs):
                    out = pass_(mod)
                elapsed = (time.perf_counter() - start) / runs
            if round_:
                samples.append(elapsed)
            elif ctx is inline_ctx:
                runs = max(1, int(MIN_SAMPLE / max(elapsed, 1e-6)))
            if ctx is inline_ctx:
                serial_out = out
            else:
                parallel_out = out
    return serial, parallel, serial_out, parallel_out


#: Shortest sample timed, seconds (a shorter run is repeated within one sample).
MIN_SAMPLE = 0.2


def _spin(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def machine_headroom(workers: int) -> float:
    """Speedup of a pure-Python loop on ``workers`` processes over one: what this machine allows right now.

    Shared machines often give less than one core per process; parpass cannot beat this number.
    """
    from concurrent.futures import ProcessPoolExecutor

    n = 2_000_000
    start = time.perf_counter()
    for _ in range(workers):
        _spin(n)
    serial = time.perf_counter() - start
    with ProcessPoolExecutor(workers) as pool:
        list(pool.map(_spin, [10] * workers))
        start = time.perf_counter()
        list(pool.map(_spin, [n] * workers))
        parallel = time.perf_counter() - start
    return serial / parallel


def _schedule_search_seconds(num_functions: int, start_at: float) -> float:
    """Seconds of ScheduleSearch on the Functions of ``random_module(num_functions)``, in this process, on built
    IR (best of 2), starting at wall-clock time ``start_at`` so that several processes run it together."""
    mod = random_module(num_functions=num_functions, seed=0)
    ctx = PassContext(opt_level=3, config={"parpass.num_workers": 1})
    funcs = [(name, mod[name]) for name in schedule_search.targets(mod)]
    time.sleep(max(0.0, start_at - time.time()))
    best = float("inf")
    for _ in range(2):
        start = time.perf_counter()
        with ctx:
            for name, func in funcs:
                schedule_search.transform_one(func, name, mod, ctx)
        best = min(best, time.perf_counter() - start)
    return best


def pass_headroom(workers: int, num_functions: int) -> float:
    """Speedup of case (a)'s pass itself on ``workers`` processes over one, nothing shipped: the ceiling of (a).

    Every process runs the pass on the same module, first one alone, then all at once.
    """
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(workers) as pool:
        alone = pool.submit(_schedule_search_seconds, num_functions, time.time() + 2.0).result()
        together = list(pool.map(_schedule_search_seconds, [num_functions] * workers, [time.time() + 2.0] * workers))
    return workers * alone / max(together)


def same_bytes(a: IRModule, b: IRModule) -> bool:
    return a.names() == b.names() and all(a.encoded_function(n) == b.encoded_function(n) for n in a.names())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--functions", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--verbose", action="store_true", help="print the last waves of each case")
    args = parser.parse_args()

    big = random_module(num_functions=args.functions, seed=0)
    small = random_module(num_functions=20, num_prim_funcs=0, size=10, seed=0)
    cases: list[tuple[str, Callable[[], Pass], IRModule, str]] = [
        ("(a) CPU-heavy function pass", lambda: schedule_search, big, ">= 1.85x"),
        ("(b) light pipeline, 7 passes, one wave", light_pipeline, big, ">= 1.6x"),
        ("(b') dataflow pipeline, 5 passes, 2 look up callees", dataflow_pipeline, big, "-"),
        ("(c) light pipeline, 20 small functions", light_pipeline, small, ">= 0.95x"),
    ]
    get_backend().warm(args.workers)
    print(
        f"parpass {parpass.__version__}; usable cores {usable_cores()}; {args.workers} workers; median of {args.repeat}"
    )
    print(f"module: random_module({args.functions}) = {len(big)} functions")
    headroom = machine_headroom(args.workers)
    print(f"machine headroom now (a pure-Python loop on {args.workers} processes vs 1): {headroom:.2f}x")
    ceiling = pass_headroom(args.workers, max(args.functions // 2, 1))
    print(f"ceiling of (a) now (its pass alone on {args.workers} processes vs 1, nothing shipped): {ceiling:.2f}x\n")
    print("| case | in-process ms | parallel ms | speedup (median of ratios) | target | parent µs/function | mode |")
    print("|---|---:|---:|---:|---|---:|---|")
    ok = True
    for label, make, mod, target in cases:
        pass_ = make()
        executor.history.clear()
        serial, parallel, serial_out, parallel_out = timed(pass_, mod, args.workers, args.repeat)
        waves = [w for w in executor.history if w.parallel]
        overhead = statistics.median(w.parent_seconds / max(w.functions, 1) for w in waves) * 1e6 if waves else 0.0
        auto = [w for w in executor.history if w.reason != "configured in-process"]
        shipped = sum(w.parallel for w in auto)
        mode = f"{shipped} of {len(auto)} waves in workers" if auto else "?"
        identical = same_bytes(serial_out, parallel_out)
        ok &= identical
        speedup = statistics.median(s / p for s, p in zip(serial, parallel, strict=True))
        print(
            f"| {label} | {statistics.median(serial) * 1e3:.1f} | {statistics.median(parallel) * 1e3:.1f} | "
            f"{speedup:.2f}x | {target} | {overhead:.1f} | {mode}{'' if identical else ' (OUTPUT DIFFERS)'} |"
        )
        if args.verbose:
            for w in executor.history[-6:]:
                where = "workers" if w.parallel else f"in-process ({w.reason})"
                print(f"    {' -> '.join(w.passes)}: {w.wall * 1e3:.1f} ms, {where}")
    parpass.shutdown()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
