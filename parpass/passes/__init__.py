"""The standard passes of parpass, and the default pipeline.

Each pass lives in its own module and is registered by name: ``FoldConstant()``
(or ``parpass.transform.get_pass("FoldConstant")``) returns a new instance of
the pass, as in TVM. They are written only against :mod:`parpass.ir` and
:mod:`parpass.transform`, so each is also an example of how to write one.

Dataflow (``Function``) passes: :func:`InferType`, :func:`CanonicalizeBindings`,
:func:`FoldConstant`, :func:`EliminateCommonSubexpr`, :func:`DeadCodeElimination`.
Loop-level (``PrimFunc``) passes: :func:`Simplify`, :func:`UnrollLoop`,
:func:`VectorizeLoop`, :func:`FlattenBuffer`, :func:`RemoveNoOp`.
Module passes: :func:`RemoveUnusedFunctions`.
:func:`default_pipeline` chains them all.
"""

from __future__ import annotations

import importlib
from typing import Any

from parpass.passes.canonicalize_bindings import CanonicalizeBindings
from parpass.passes.dead_code_elimination import DeadCodeElimination
from parpass.passes.eliminate_common_subexpr import EliminateCommonSubexpr
from parpass.passes.fold_constant import FoldConstant
from parpass.passes.infer_type import InferType, TypeInferenceError
from parpass.passes.pipeline import PIPELINE_PASSES, default_pipeline
from parpass.passes.remove_unused_functions import RemoveUnusedFunctions

__all__ = [
    "PIPELINE_PASSES",
    "CanonicalizeBindings",
    "DeadCodeElimination",
    "EliminateCommonSubexpr",
    "FoldConstant",
    "InferType",
    "RemoveUnusedFunctions",
    "TypeInferenceError",
    "default_pipeline",
]

# The loop-level passes are being written alongside; import each one that exists already.
# TODO(lead): once all five modules have landed, replace this loop with plain imports.
for _module, _factory in (
    ("simplify", "Simplify"),
    ("unroll_loop", "UnrollLoop"),
    ("vectorize_loop", "VectorizeLoop"),
    ("flatten_buffer", "FlattenBuffer"),
    ("remove_no_op", "RemoveNoOp"),
):
    _full = f"parpass.passes.{_module}"
    try:
        _mod: Any = importlib.import_module(_full)
    except ModuleNotFoundError as _err:
        if _err.name != _full:
            raise
        continue
    globals()[_factory] = getattr(_mod, _factory)
    __all__.append(_factory)
