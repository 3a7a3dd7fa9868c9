"""Small IR modules built from node constructors, shared by the test packages.

``tests/`` is on ``sys.path`` (pytest puts the rootdir-level conftest's folder
there), so any test module can ``from support import make_module``.
"""

from __future__ import annotations

import time

from parpass.ir import IRModule, relax, tir
from parpass.ir.node import Op
from parpass.ir.types import TensorType


def relax_func(n: int = 1, attrs: dict | None = None) -> relax.Function:
    """``x -> add(x, x)`` repeated ``n`` times (a chain of ``n`` bindings)."""
    x = relax.Var(0, "x")
    bindings = []
    prev = x
    for k in range(n):
        v = relax.Var(k + 1, f"v{k}")
        bindings.append(relax.Binding(v, relax.Call(Op("add"), (prev, prev))))
        prev = v
    return relax.Function(
        (relax.Param(x, TensorType((4,), "float32")),), relax.SeqExpr(tuple(bindings), prev), attrs=attrs or {}
    )


def prim_func(extent: int = 4, attrs: dict | None = None) -> tir.PrimFunc:
    """``for i in range(extent): A[i] = A[i] + 1.0``."""
    i = tir.Var(0, "i")
    a = tir.Buffer(1, "A", "float32", (tir.IntImm("int32", extent),))
    body = tir.For(i, tir.IntImm("int32", 0), tir.IntImm("int32", extent), tir.ForKind.SERIAL, a.store(i, a[i] + 1.0))
    return tir.PrimFunc((a,), body, attrs=attrs or {})


def make_module() -> IRModule:
    """Two dataflow functions around a loop function, plus one skipped dataflow function."""
    return IRModule(
        {
            "f": relax_func(1),
            "k": prim_func(4),
            "g": relax_func(2),
            "skip": relax_func(1, attrs={"SkipOptimization": True}),
        }
    )


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live (non-zombie) process."""
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("State:"):
                    return "Z" not in line.split(":", 1)[1]
    except (FileNotFoundError, ProcessLookupError):  # gone before, or while, its status was read
        return False
    return False


def wait_gone(pids: set[int] | list[int], seconds: float = 10.0, leaving: int = 0) -> set[int]:
    """The processes of ``pids`` still alive after waiting up to ``seconds`` until at most ``leaving`` of them
    are (all exited, by default)."""
    deadline = time.monotonic() + seconds
    left = {p for p in pids if alive(p)}
    while len(left) > leaving and time.monotonic() < deadline:
        time.sleep(0.05)
        left = {p for p in left if alive(p)}
    return left
