"""Helpers for the parallel-executor tests."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))  # workers import ptest_passes by reference

from parpass.ir import IRModule
from parpass.parallel import default_executor as executor  # noqa: F401
from parpass.parallel import get_backend
from parpass.transform import PassContext


def parallel_ctx(workers: int = 2, **config: object) -> PassContext:
    """A context that forces worker processes (or in-process when ``workers`` is 1)."""
    cfg = {"parpass.num_workers": workers, "parpass.parallel": "always" if workers > 1 else "never"}
    cfg.update(config)
    return PassContext(config=cfg)


def module_bytes(mod: IRModule) -> list[tuple[str, bytes]]:
    return [(name, mod.encoded_function(name)) for name in mod.names()]


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live (non-zombie) process."""
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("State:"):
                    return "Z" not in line.split(":", 1)[1]
    except FileNotFoundError:
        return False
    return False


def worker_pids() -> list[int]:
    return get_backend().worker_pids()
