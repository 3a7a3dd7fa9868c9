"""The parpass IR: modules, the dataflow (:class:`Function`) and loop-level
(:class:`PrimFunc`) function kinds, serialization, structural comparison,
printing, builders and visitors.

The node classes of each kind live in :mod:`parpass.ir.relax` and
:mod:`parpass.ir.tir`; the most used ones are re-exported here.
"""

from parpass.ir import (
    builtin_ops,  # noqa: F401  (registers the standard ops)
    relax,
    tir,
)
from parpass.ir.expr_functor import ExprMutator, ExprVisitor, post_order
from parpass.ir.ids import IdSupply
from parpass.ir.module import IRModule
from parpass.ir.node import Attrs, AttrValue, BaseFunc, GlobalVar, Node, Op
from parpass.ir.op import OpInfo, get_op, list_ops, register_op
from parpass.ir.parser import ParseError, parse, parse_function  # also registers the .ppir file format
from parpass.ir.printer import astext
from parpass.ir.relax import (
    Binding,
    Call,
    Constant,
    Function,
    If,
    Param,
    SeqExpr,
    Tuple,
    TupleGetItem,
    Var,
)
from parpass.ir.serialization import from_bytes, load, save, to_bytes
from parpass.ir.stmt_functor import StmtExprMutator, StmtExprVisitor, post_order_visit, substitute
from parpass.ir.structural import assert_structural_equal, structural_equal, structural_hash
from parpass.ir.tir import Buffer, ForKind, PrimFunc
from parpass.ir.types import PrimType, TensorType, TupleType, Type
from parpass.ir.well_formed import check_well_formed, well_formed

__all__ = [
    "AttrValue",
    "Attrs",
    "BaseFunc",
    "Binding",
    "Buffer",
    "Call",
    "Constant",
    "ExprMutator",
    "ExprVisitor",
    "ForKind",
    "Function",
    "GlobalVar",
    "IRModule",
    "IdSupply",
    "If",
    "Node",
    "Op",
    "OpInfo",
    "Param",
    "ParseError",
    "PrimFunc",
    "PrimType",
    "SeqExpr",
    "StmtExprMutator",
    "StmtExprVisitor",
    "TensorType",
    "Tuple",
    "TupleGetItem",
    "TupleType",
    "Type",
    "Var",
    "assert_structural_equal",
    "astext",
    "check_well_formed",
    "from_bytes",
    "get_op",
    "list_ops",
    "load",
    "parse",
    "parse_function",
    "post_order",
    "post_order_visit",
    "register_op",
    "relax",
    "save",
    "structural_equal",
    "structural_hash",
    "substitute",
    "tir",
    "to_bytes",
    "well_formed",
]
