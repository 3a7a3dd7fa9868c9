"""Per-pass benchmark of the default pipeline: in-process time per node and per binding.

Builds ``random_module(--functions)`` (which also holds ``--functions // 2``
PrimFuncs), then runs the passes of :func:`parpass.passes.default_pipeline` one
after the other, each on the output of the one before (so every pass sees the
input it gets in the pipeline). Each pass is timed ``--repeat`` times on the
same input, in-process, and the fastest run is reported (the machine is
shared; the minimum is the least disturbed run).

Sizes are those of the functions the pass visits: for a function-level pass
its targets (functions of its kind, not ``SkipOptimization``); for a module
pass, every function of the module. Nodes are all IR nodes of those functions
(types and parameters included); bindings are dataflow ``Binding``s, nested
blocks included.

    python benchmarks/bench_passes.py [--functions 2000] [--size 20] [--seed 0] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import time
from typing import Any

from parpass.ir import IRModule, relax
from parpass.passes import PIPELINE_PASSES
from parpass.testing import random_module
from parpass.transform import (
    FunctionLevelPass,
    ModulePass,
    Pass,
    PassContext,
    PrimFuncPass,
    get_pass,
    list_configs,
)


def count(mod: IRModule, names: list[str]) -> tuple[int, int]:
    """(nodes, bindings) of functions ``names`` of ``mod``, walked iteratively."""
    nodes = bindings = 0
    for name in names:
        stack: list[Any] = [mod[name]]
        while stack:
            node = stack.pop()
            nodes += 1
            if type(node) is relax.Binding:
                bindings += 1
            stack.extend(node.children())
    return nodes, bindings


def visited(p: Pass, mod: IRModule) -> list[str]:
    if isinstance(p, FunctionLevelPass):
        return p.targets(mod)
    return mod.names()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--functions", type=int, default=2000)
    parser.add_argument("--size", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    start = time.perf_counter()
    mod = random_module(num_functions=args.functions, size=args.size, seed=args.seed)
    built = time.perf_counter() - start
    kinds = [type(mod[name]).__name__ for name in mod.names()]
    print(
        f"random_module(num_functions={args.functions}, size={args.size}, seed={args.seed}): "
        f"{kinds.count('Function')} Functions, {kinds.count('PrimFunc')} PrimFuncs, built in {built:.1f} s"
    )
    # In-process numbers: with the parallel executor installed, keep it from using workers.
    config = {"parpass.num_workers": 1} if "parpass.num_workers" in list_configs() else {}

    rows = []
    total = 0.0
    with PassContext(opt_level=3, config=config):
        for name in PIPELINE_PASSES:
            p = get_pass(name)
            names = visited(p, mod)
            nodes, bindings = count(mod, names)
            best = float("inf")
            out = mod
            for _ in range(args.repeat):
                p = get_pass(name)  # a fresh instance: no memo carried over from the previous run
                gc.collect()
                t0 = time.perf_counter()
                out = p(mod)
                best = min(best, time.perf_counter() - t0)
            total += best
            per_node = best / nodes * 1e6 if nodes else float("nan")
            per_binding = f"{best / bindings * 1e6:.2f}" if bindings else "-"
            kind = (
                "module" if isinstance(p, ModulePass) else ("prim_func" if isinstance(p, PrimFuncPass) else "function")
            )
            rows.append((name, kind, len(names), nodes, bindings, best * 1e3, per_node, per_binding))
            mod = out

    print()
    print("| pass | kind | functions | nodes | bindings | time (ms) | µs/node | µs/binding |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name, kind, funcs, nodes, bindings, ms, per_node, per_binding in rows:
        print(f"| {name} | {kind} | {funcs} | {nodes} | {bindings} | {ms:.1f} | {per_node:.2f} | {per_binding} |")
    print(f"\ntotal: {total * 1e3:.0f} ms (fastest of {args.repeat} runs per pass)")


if __name__ == "__main__":
    main()
