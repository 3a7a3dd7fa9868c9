"""msgspec serialization (to_bytes / from_bytes) against pickle on a generated module.

Run: ``python benchmarks/bench_serialization.py [--functions 2000] [--repeats 5]``

Measures, on ``random_module(num_functions=N)`` (plus its default N/2 PrimFuncs):

* encode: ``to_bytes`` of a module whose functions have no cached bytes (a real
  encode of every function) against ``pickle.dumps`` of the same functions;
* decode: ``from_bytes`` as it is used (functions type-checked, then held lazily),
  ``from_bytes(validate=False)`` (framing checked only), and ``from_bytes``
  followed by reading every function (a full decode), against ``pickle.loads``.

Each figure is the median of ``--repeats`` runs with the garbage collector on (as in
real use) and collected before each run. Throughput is in MB/s of the format's own
bytes; ns/node divides the time by the number of IR nodes (tree count).
"""

from __future__ import annotations

import argparse
import gc
import pickle
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from parpass.ir import IRModule, Node
from parpass.ir.serialization import from_bytes, to_bytes
from parpass.testing import random_module


def count_nodes(mod: IRModule) -> int:
    """IR nodes of every function, counting a shared subtree at each place it occurs (as encoding does)."""
    total = 0
    for _, func in mod.items():
        stack: list[Node] = [func]
        while stack:
            node = stack.pop()
            total += 1
            stack.extend(node.children())
    return total


def median_time(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--functions", type=int, default=2000, help="dataflow functions (default 2000)")
    parser.add_argument("--prim-funcs", type=int, default=None, help="loop-level functions (default functions/2)")
    parser.add_argument("--size", type=int, default=20, help="typical function size (default 20)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    mod = random_module(num_functions=args.functions, num_prim_funcs=args.prim_funcs, size=args.size, seed=args.seed)
    items = list(mod.items())
    nodes = count_nodes(mod)
    print(
        f"module: {len(items)} functions, {nodes:,} nodes, generated in {time.perf_counter() - t0:.1f} s; "
        f"median of {args.repeats}; Python {sys.version.split()[0]}"
    )

    def fresh_module() -> IRModule:
        return IRModule(items, attrs=mod.attrs)  # decoded functions only: no cached bytes

    data = to_bytes(fresh_module())
    payload = (dict(mod.attrs), items)
    pickled = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)

    def encode() -> None:
        to_bytes(fresh_module())

    def full_decode(validate: bool = True) -> None:
        back = from_bytes(data, validate=validate)
        assert isinstance(back, IRModule)
        for name in back.names():
            back[name]

    fresh_module()  # warm-up
    rows: list[tuple[str, float, int]] = [
        ("msgspec encode: to_bytes (no cached bytes)", median_time(encode, args.repeats), len(data)),
        (
            "pickle.dumps",
            median_time(lambda: pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL), args.repeats),
            len(pickled),
        ),
        (
            "msgspec decode: from_bytes (validated, lazy)",
            median_time(lambda: from_bytes(data), args.repeats),
            len(data),
        ),
        (
            "msgspec decode: from_bytes(validate=False)",
            median_time(lambda: from_bytes(data, validate=False), args.repeats),
            len(data),
        ),
        ("msgspec decode: from_bytes + read every function", median_time(full_decode, args.repeats), len(data)),
        (
            "msgspec decode: from_bytes(validate=False) + read every function",
            median_time(lambda: full_decode(validate=False), args.repeats),
            len(data),
        ),
        ("pickle.loads", median_time(lambda: pickle.loads(pickled), args.repeats), len(pickled)),
    ]
    mod_cached = fresh_module()
    to_bytes(mod_cached)
    rows.insert(
        1,
        (
            "msgspec encode: to_bytes (cached function bytes)",
            median_time(lambda: to_bytes(mod_cached), args.repeats),
            len(data),
        ),
    )

    print()
    print("| operation | time (ms) | size (MB) | MB/s | ns/node |")
    print("|---|---:|---:|---:|---:|")
    for label, seconds, size in rows:
        print(
            f"| {label} | {seconds * 1e3:.1f} | {size / 1e6:.2f} | {size / 1e6 / seconds:.0f} | "
            f"{seconds * 1e9 / nodes:.0f} |"
        )
    times = {label: seconds for label, seconds, _ in rows}
    enc = times["msgspec encode: to_bytes (no cached bytes)"]
    dumps = times["pickle.dumps"]
    loads = times["pickle.loads"]
    print()
    print("| ratio (pickle time / msgspec time) | x |")
    print("|---|---:|")
    print(f"| encode: pickle.dumps / to_bytes | {dumps / enc:.1f} |")
    for label in (
        "msgspec decode: from_bytes (validated, lazy)",
        "msgspec decode: from_bytes(validate=False)",
        "msgspec decode: from_bytes + read every function",
        "msgspec decode: from_bytes(validate=False) + read every function",
    ):
        print(f"| decode: pickle.loads / {label.removeprefix('msgspec decode: ')} | {loads / times[label]:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
