"""The default optimization pipeline: the standard passes in an order that lets each help the next.

Dataflow functions first:

1. ``InferType`` (opt_level 0): every binding gets its type, and ill-typed
   input is rejected before anything is rewritten. The other passes keep the
   types correct, so it runs once.
2. ``CanonicalizeBindings`` (1): removes copies and tuple round trips, so that
   equal computations look equal (``f(y)`` with ``y = x`` becomes ``f(x)``,
   which common subexpression elimination then recognizes).
3. ``FoldConstant`` (2): evaluates what only depends on constants, chains
   included.
4. ``EliminateCommonSubexpr`` (2): after canonicalization and folding, equal
   calls have equal arguments; each is computed once.
5. ``DeadCodeElimination`` (1): last, it removes what the passes above left
   unused: copied-from tuples, folded intermediates, dead code of the input.

Then loop-level functions: ``Simplify`` (arithmetic first, so loop extents
and conditions are in canonical form), ``UnrollLoop`` and ``VectorizeLoop``
(which decide from those simplified extents), ``FlattenBuffer`` (after
vectorization, so the vector accesses are flattened too) and ``RemoveNoOp``
(cleans up the empty loops and no-op statements the others leave).

Finally ``RemoveUnusedFunctions`` (module level, 1): after dead code
elimination removed unused calls, fewer functions are reachable.
"""

from __future__ import annotations

from parpass.transform import Pass, Pipeline, get_pass

__all__ = ["PIPELINE_PASSES", "default_pipeline"]

#: The names of the passes of the default pipeline, in order.
PIPELINE_PASSES: tuple[str, ...] = (
    "InferType",
    "CanonicalizeBindings",
    "FoldConstant",
    "EliminateCommonSubexpr",
    "DeadCodeElimination",
    "Simplify",
    "UnrollLoop",
    "VectorizeLoop",
    "FlattenBuffer",
    "RemoveNoOp",
    "RemoveUnusedFunctions",
)


def default_pipeline(opt_level: int = 2) -> Pipeline:
    """The Sequential a user runs to optimize a module: the passes of :data:`PIPELINE_PASSES` up to ``opt_level``.

    It is a :class:`~parpass.transform.Pipeline`, so ``str()`` gives its pipeline
    spec (``seq{name=default_pipeline}(InferType,...)``) and
    ``parse_pipeline(str(default_pipeline()))`` builds it again.

    A pass whose own opt_level is above ``opt_level`` is left out. As with any
    Sequential, the PassContext still decides at run time: a pass above the
    context's opt_level (2 by default) is skipped, so run a pipeline built for a
    higher level under ``PassContext(opt_level=...)`` of that level.
    """
    if not isinstance(opt_level, int) or isinstance(opt_level, bool) or opt_level < 0:
        raise ValueError(f"default_pipeline: opt_level must be a non-negative int, got {opt_level!r}")
    passes: list[Pass] = []
    for name in PIPELINE_PASSES:
        p = get_pass(name)  # looked up by name: the registry knows every standard pass
        if p.info.opt_level <= opt_level:
            passes.append(p)
    return Pipeline(passes, opt_level=0, name="default_pipeline")
