"""What a function pass learns about the whole module once and reuses for every function of one run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from parpass.ir import IRModule

__all__ = ["ModuleMemo"]

T = TypeVar("T")


class ModuleMemo(Generic[T]):
    """Facts about a module (``build(mod)``: which functions are pure, their return types), kept for the module
    a pass instance last saw.

    A pass run hands every function the same read-only module view, which cannot change while it is held, so
    the facts built for the first function hold for the others. A writable module may change between calls:
    its facts are built afresh each time and not kept. It pickles without its facts: workers build their own.
    """

    __slots__ = ("_build", "_held")

    def __init__(self, build: Callable[[IRModule], T]) -> None:
        self._build = build
        self._held: tuple[IRModule, T] | None = None

    def __reduce__(self) -> tuple[type[ModuleMemo[T]], tuple[Callable[[IRModule], T]]]:
        return (type(self), (self._build,))

    def of(self, mod: IRModule) -> T:
        """The facts about ``mod``: the kept ones if ``mod`` is the module they were built for."""
        held = self._held
        if held is not None and held[0] is mod:
            return held[1]
        facts = self._build(mod)
        self._held = (mod, facts) if mod.is_read_only else None
        return facts
