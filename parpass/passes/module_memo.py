"""What a function pass learns about the whole module once and reuses for every function of one run."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Generic, TypeVar, cast

from parpass.ir import IRModule

__all__ = ["ModuleMemo"]

T = TypeVar("T")


class ModuleMemo(Generic[T]):
    """Facts about a module (``build(mod)``: which functions are pure, their return types), kept for the module
    a pass instance last saw, for as long as that module lives.

    A pass run hands every function the same read-only module view, which cannot change while it is held, so
    the facts built for the first function hold for the others. A writable module may change between calls:
    its facts are built afresh each time and not kept. It pickles without its facts: workers build their own.

    The facts see the view through a weak proxy and go with it: a pass instance that outlives its run (a
    pipeline a user keeps, a worker's pass for the next wave) holds no module, so the module a run was given
    is freed when its caller lets go of it (the IR of 16,000 functions was held by the pipeline's passes until
    the collector found their cycle, and freeing it took 0.65 s at the exit of ``parpass opt``).
    """

    __slots__ = ("__weakref__", "_build", "_held")

    def __init__(self, build: Callable[[IRModule], T]) -> None:
        self._build = build
        self._held: tuple[weakref.ref[IRModule], T] | None = None

    def __reduce__(self) -> tuple[type[ModuleMemo[T]], tuple[Callable[[IRModule], T]]]:
        return (type(self), (self._build,))

    def of(self, mod: IRModule) -> T:
        """The facts about ``mod``: the kept ones if ``mod`` is the module they were built for."""
        held = self._held
        if held is not None and held[0]() is mod:
            return held[1]
        if not mod.is_read_only:
            self._held = None
            return self._build(mod)
        facts = self._build(cast("IRModule", weakref.proxy(mod)))
        self._held = (weakref.ref(mod, _forgetting(weakref.ref(self))), facts)
        return facts


def _forgetting(memo: weakref.ref[ModuleMemo[T]]) -> Callable[[weakref.ref[IRModule]], None]:
    """What drops ``memo``'s facts once their module is gone (holding the memo weakly: no cycle)."""

    def forget(gone: weakref.ref[IRModule]) -> None:
        held = memo()
        if held is not None and held._held is not None and held._held[0] is gone:
            held._held = None

    return forget
