"""The standard passes of parpass, and the default pipeline.

Each pass lives in its own module and is registered by name: ``FoldConstant()``
(or ``parpass.transform.get_pass("FoldConstant")``) returns a new instance of
the pass, as in TVM. They are written only against :mod:`parpass.ir` and
:mod:`parpass.transform`, so each is also an example of how to write one.

Dataflow (``Function``) passes: :func:`InferType`, :func:`CanonicalizeBindings`,
:func:`FoldConstant`, :func:`EliminateCommonSubexpr`, :func:`DeadCodeElimination`.
Loop-level (``PrimFunc``) passes: :func:`Simplify`, :class:`UnrollLoop`,
:class:`VectorizeLoop`, :class:`FlattenBuffer`, :class:`RemoveNoOp`.
Module passes: :func:`RemoveUnusedFunctions`.
:func:`default_pipeline` chains them all.
"""

from __future__ import annotations

from parpass.passes.canonicalize_bindings import CanonicalizeBindings
from parpass.passes.dead_code_elimination import DeadCodeElimination
from parpass.passes.eliminate_common_subexpr import EliminateCommonSubexpr
from parpass.passes.flatten_buffer import FlattenBuffer
from parpass.passes.fold_constant import FoldConstant
from parpass.passes.infer_type import InferType, TypeInferenceError
from parpass.passes.pipeline import PIPELINE_PASSES, default_pipeline
from parpass.passes.remove_no_op import RemoveNoOp
from parpass.passes.remove_unused_functions import RemoveUnusedFunctions
from parpass.passes.simplify import Simplify
from parpass.passes.unroll_loop import UnrollLoop
from parpass.passes.vectorize_loop import VectorizeLoop

__all__ = [
    "PIPELINE_PASSES",
    "CanonicalizeBindings",
    "DeadCodeElimination",
    "EliminateCommonSubexpr",
    "FlattenBuffer",
    "FoldConstant",
    "InferType",
    "RemoveNoOp",
    "RemoveUnusedFunctions",
    "Simplify",
    "TypeInferenceError",
    "UnrollLoop",
    "VectorizeLoop",
    "default_pipeline",
]
