"""Which module functions a function calls: the edges of a module's call graph."""

from __future__ import annotations

from typing import Any

from parpass.ir.node import GlobalVar
from parpass.ir.relax import Binding, Constant, Function, Var

__all__ = ["called_names"]


def called_names(func: Function) -> list[str]:
    """The module functions ``func`` refers to (``GlobalVar`` anywhere in its body), in first-reference order.

    Loop-level PrimFuncs call no module functions, so only dataflow Functions have callees.
    """
    found: dict[str, None] = {}
    stack: list[Any] = [func.body]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is GlobalVar:
            found[node.name_hint] = None
        elif kind is Binding:
            stack.append(node.value)  # not the binding's variable or type
        elif kind is not Var and kind is not Constant:
            stack.extend(node.children())
    return list(found)
