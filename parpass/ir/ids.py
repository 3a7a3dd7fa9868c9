"""Fresh variable ids, local to one function.

Ids never come from a process-wide counter: a pass that creates variables asks
the function it is rewriting for an :class:`IdSupply`, which starts after the
largest id in use. The same pass on the same function therefore yields the
same ids in any process, which keeps parallel output byte-identical.
"""

from __future__ import annotations

from parpass.ir import relax, tir
from parpass.ir.node import Node


def max_vid(root: Node) -> int:
    """The largest variable or buffer id under ``root``, or -1 if there is none."""
    best = -1
    seen: set[int] = set()
    stack: list[Node] = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        vid = getattr(node, "vid", None)
        if vid is not None and vid > best:
            best = vid
        stack.extend(node.children())
    return best


class IdSupply:
    """Hands out fresh function-local ids: ``IdSupply.for_function(func).var("t")``."""

    __slots__ = ("_next",)

    def __init__(self, next_id: int = 0) -> None:
        self._next = next_id

    @classmethod
    def for_function(cls, func: Node) -> IdSupply:
        """A supply whose ids are all unused in ``func``."""
        return cls(max_vid(func) + 1)

    @property
    def next_id(self) -> int:
        return self._next

    def fresh(self) -> int:
        """A new id."""
        vid = self._next
        self._next += 1
        return vid

    def var(self, name_hint: str) -> relax.Var:
        """A new dataflow variable."""
        return relax.Var(self.fresh(), name_hint)

    def tir_var(self, name_hint: str, dtype: str = "int32") -> tir.Var:
        """A new loop-level scalar variable."""
        return tir.Var(self.fresh(), name_hint, dtype)

    def buffer(
        self,
        name: str,
        dtype: str,
        shape: tuple[tir.PrimExprLike, ...],
        strides: tuple[tir.PrimExprLike, ...] = (),
    ) -> tir.Buffer:
        """A new buffer."""
        return tir.Buffer(
            self.fresh(),
            name,
            dtype,
            tuple(tir.convert(d) for d in shape),
            tuple(tir.convert(s) for s in strides),
        )
