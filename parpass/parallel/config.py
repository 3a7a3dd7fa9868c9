"""The PassContext config options of the parallel executor, and reading them."""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass
from typing import Annotated, Literal

import msgspec

from parpass.parallel.backend import in_worker, usable_cores
from parpass.transform.config import register_config_option
from parpass.transform.context import PassContext

NUM_WORKERS = "parpass.num_workers"
MODE = "parpass.parallel"
INLINE_BELOW = "parpass.inline_below_seconds"
TIMEOUT = "parpass.timeout"
STRICT = "parpass.strict"
REPRODUCER = "parpass.reproducer"
WORKER_CACHE = "parpass.worker_cache_mb"
SCHEDULER = "parpass.scheduler"
KEEP_RESULTS = "parpass.keep_results"

register_config_option(
    NUM_WORKERS,
    Annotated[int, msgspec.Meta(ge=1)],
    default=usable_cores(),
    doc="Worker processes for function-level passes; 1 runs everything in-process. "
    "Default: the cores this process may use (more only add memory and start-up time: a warning says so, once).",
)
register_config_option(
    MODE,
    Literal["auto", "always", "never"],
    default="auto",
    doc="'auto' runs a function-level pass in workers when that is expected to be faster; "
    "'always' forces workers whenever num_workers > 1; 'never' runs in-process.",
)
register_config_option(
    INLINE_BELOW,
    float,
    default=-1.0,
    doc="In 'auto' mode, run a pass in-process when its estimated in-process time is below this many seconds. "
    "-1 (default): decide from the measured cost of shipping work to the pool.",
)
register_config_option(
    TIMEOUT,
    Annotated[float, msgspec.Meta(ge=0)],
    default=0.0,
    doc="Seconds one function may spend in one pass before the pass is aborted; 0: no limit. Enforced in workers "
    "only ('auto' ships every pass while it is set); a pass kept in-process warns that it is not enforced.",
)
register_config_option(
    STRICT,
    bool,
    default=False,
    doc="Raise, instead of warning and running in-process, when a pass cannot be shipped to workers.",
)
register_config_option(
    REPRODUCER,
    str,
    default="",
    doc="If set, a file path where a failing parallel pass writes a crash reproducer "
    "(re-run it with `python -m parpass.parallel.reproducer FILE`).",
)


register_config_option(
    WORKER_CACHE,
    Annotated[float, msgspec.Meta(ge=0, le=1e6)],
    default=128.0,
    doc="Megabytes of IR (counted encoded; decoded it takes about 5x that) each worker keeps decoded between "
    "waves, so that the next pass on a function it holds skips decoding; least recently used out first. "
    "0: keep nothing (every wave decodes what it gets); at most 1e6 (a terabyte).",
)
register_config_option(
    SCHEDULER,
    Annotated[str, msgspec.Meta(pattern=r"^(|[A-Za-z][A-Za-z0-9+.-]*://.+)$")],
    default="",
    doc="Where function-level passes run: '' (default) on worker processes of this machine, or the address of "
    "a Dask scheduler (e.g. 'tcp://host:8786'; needs `pip install parpass[dask]`), whose workers then run them. "
    "On a cluster, parpass.num_workers is how many of its workers a pass uses at most.",
)


register_config_option(
    KEEP_RESULTS,
    bool,
    default=False,
    doc="Within a pipeline, let the worker that ran a pass on a function keep the result decoded for the "
    "pipeline's next pass instead of sending its bytes back (this machine's workers only; passes that read no "
    "other function); what reads the function in this process, and the pipeline's end, fetch it. Results a "
    "worker dies holding are made again in this process from what made them (their input and passes).",
)


@dataclass(frozen=True)
class ParallelConfig:
    """The executor's options as read from one PassContext."""

    num_workers: int
    mode: str
    inline_below: float
    timeout: float
    strict: bool
    reproducer: str
    cache_bytes: int
    scheduler: str = ""
    keep_results: bool = False

    @classmethod
    def of(cls, ctx: PassContext) -> ParallelConfig:
        cfg = ctx.config
        out = cls(
            num_workers=int(cfg[NUM_WORKERS]),
            mode=str(cfg[MODE]),
            inline_below=float(cfg[INLINE_BELOW]),
            timeout=float(cfg[TIMEOUT]),
            strict=bool(cfg[STRICT]),
            reproducer=str(cfg[REPRODUCER]),
            cache_bytes=int(float(cfg[WORKER_CACHE]) * 1e6),
            scheduler=str(cfg[SCHEDULER]),
            keep_results=bool(cfg[KEEP_RESULTS]),
        )
        if out.num_workers > 1 and out.mode != "never" and not out.scheduler:
            _warn_if_oversubscribed(out.num_workers)
        return out


# More workers than cores is legal (it can help a pass that waits), but usually a mistake that costs memory and time.
_LOCK = threading.Lock()
_warned_oversubscribed = False


def _warn_if_oversubscribed(num_workers: int) -> None:
    """A RuntimeWarning, once per process, when ``num_workers`` exceeds the usable cores."""
    global _warned_oversubscribed
    cores = usable_cores()  # read once per process
    with _LOCK:
        if _warned_oversubscribed or num_workers <= cores or in_worker():
            return
        _warned_oversubscribed = True
    warnings.warn(
        f"config option {NUM_WORKERS!r} is {num_workers}, more than the {cores} usable "
        f"core{'s' if cores != 1 else ''}: each extra worker process costs memory and start-up time "
        f"and makes passes slower, not faster (the default is the usable cores; said once per process)",
        RuntimeWarning,
        stacklevel=4,
    )
