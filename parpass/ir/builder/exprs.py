"""Dataflow expressions made with checks: calls of ops or module functions, constants and tuples.

The constructors name what is wrong (an unknown op, a wrong arity, a value that
is not an expression) where the expression is made, not later where it is used.
"""

from __future__ import annotations

from typing import Any

from parpass.ir import relax
from parpass.ir.builder.errors import BuilderError
from parpass.ir.node import AttrValue, GlobalVar, Node, Op
from parpass.ir.op import get_op
from parpass.ir.printer import format_literal

__all__ = ["call", "check_arity", "check_expr", "const", "getitem", "tuple_"]

_EXPR_TYPES = (relax.Var, relax.Constant, relax.Tuple, relax.TupleGetItem, relax.Call, relax.If, GlobalVar)


def check_expr(value: object, what: str) -> relax.Expr:
    """``value`` if it is a dataflow expression; a TypeError naming ``what`` (and the fix for a number) if not."""
    if not isinstance(value, _EXPR_TYPES):
        hint = "; wrap numbers and arrays with const(value, dtype)" if not isinstance(value, Node) else ""
        raise TypeError(f"{what} must be a dataflow expression, got {type(value).__name__} {value!r}{hint}")
    return value


def check_arity(op_name: str, nargs: int) -> None:
    """Op ``op_name`` exists and takes ``nargs`` arguments (or raise: a wrong arity is a BuilderError)."""
    info = get_op(op_name)  # NameNotFoundError naming the closest ops
    if info.num_inputs is not None and info.num_inputs != nargs:
        plural = "argument" if info.num_inputs == 1 else "arguments"
        raise BuilderError(f"op {op_name!r} takes {info.num_inputs} {plural}, got {nargs}")


def call(op: str | Op | GlobalVar, /, *args: relax.Expr, **attrs: AttrValue) -> relax.Call:
    """A call of registered op ``op`` (a name or :class:`Op`) or of module function ``op`` (a GlobalVar).

    Keyword arguments become the call's attributes. Raises a KeyError naming the
    closest ops for an unknown op, and :class:`BuilderError` for a wrong number of
    arguments.
    """
    if isinstance(op, str):
        check_arity(op, len(args))
        callee: Op | GlobalVar = Op(op)
    elif isinstance(op, Op):
        check_arity(op.name, len(args))
        callee = op
    elif isinstance(op, GlobalVar):
        callee = op
    else:
        raise TypeError(f"call(): the callee must be an op name, an Op or a GlobalVar, got {type(op).__name__}")
    name = callee.name if isinstance(callee, Op) else f"@{callee.name_hint}"
    for i, arg in enumerate(args):
        check_expr(arg, f"argument {i} of the call of {name}")
    if attrs:
        format_literal(attrs, f"attributes of the call of {name}")  # plain data only
    return relax.Call(callee, tuple(args), dict(attrs))


def const(value: Any, dtype: str | None = None) -> relax.Constant:
    """A tensor constant holding ``value`` (a number, nested list or numpy array) as ``dtype``."""
    return relax.Constant.from_value(value, dtype)


def tuple_(*fields: relax.Expr) -> relax.Tuple:
    """A tuple of the given expressions."""
    for i, f in enumerate(fields):
        check_expr(f, f"tuple field {i}")
    return relax.Tuple(tuple(fields))


def getitem(tup: relax.Expr, index: int) -> relax.TupleGetItem:
    """Field ``index`` of tuple ``tup``."""
    check_expr(tup, "the tuple of getitem")
    if not isinstance(index, int) or isinstance(index, bool):
        raise TypeError(f"getitem(): the index must be an int, got {type(index).__name__} {index!r}")
    return relax.TupleGetItem(tup, index)
