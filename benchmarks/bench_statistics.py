"""What pass statistics cost: the default pipeline in-process with counting off, on, and with the counters
stubbed out (as if the passes counted nothing), in interleaved runs.

Counting off must cost nothing measurable (the ratio off / stubbed near 1.00); counting on costs a dict
update per count.

    python benchmarks/bench_statistics.py [--functions 2000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager

from parpass.ir import from_bytes, to_bytes
from parpass.passes import default_pipeline
from parpass.testing import random_module
from parpass.transform import PassContext, Statistic


@contextmanager
def stubbed() -> Iterator[None]:
    """Statistic.add does nothing at all (not even the thread-local read)."""
    add = Statistic.add
    Statistic.add = lambda self, count=1: None  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        Statistic.add = add  # type: ignore[method-assign]


def run(data: bytes, counting: bool) -> float:
    mod = from_bytes(data)
    config = {"parpass.num_workers": 1, "parpass.pass_statistics": counting}
    start = time.perf_counter()
    with PassContext(config=config):
        default_pipeline(2)(mod)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--functions", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    if args.repeat < 1 or args.functions < 1:
        parser.error("--repeat and --functions must be at least 1")
    data = to_bytes(random_module(args.functions, seed=0))
    times: dict[str, list[float]] = {"stubbed": [], "off": [], "on": []}
    for _ in range(args.repeat + 1):  # the first round warms caches up and is not counted
        with stubbed():
            times["stubbed"].append(run(data, False))
        times["off"].append(run(data, False))
        times["on"].append(run(data, True))
    med = {k: statistics.median(v[1:]) for k, v in times.items()}
    print(f"default pipeline, random_module({args.functions}), in-process, median of {args.repeat} interleaved runs")
    for key, value in med.items():
        print(f"  counters {key:8s} {value:.3f}s   (cold first run {times[key][0]:.3f}s)")
    print(f"off / stubbed: {med['off'] / med['stubbed']:.3f}   on / off: {med['on'] / med['off']:.3f}")


if __name__ == "__main__":
    main()
