"""Which module functions a function calls: the edges of a module's call graph.

Two readers that give the same list: :func:`called_names` walks a decoded
:class:`~parpass.ir.Function`, and :func:`called_names_encoded` reads the
function's encoded bytes without decoding it (three times faster than decoding,
and the decode would still need the walk). A module held as bytes, as the
parallel executor leaves it after a wave, answers :meth:`IRModule.called_names
<parpass.ir.IRModule.called_names>` from the bytes, so a module pass that
follows the call graph (``RemoveUnusedFunctions``) does not decode the
functions it visits.
"""

from __future__ import annotations

import re
import threading
from typing import Any, Union

import msgspec

from parpass.ir.node import GlobalVar
from parpass.ir.relax import Call, Constant, Function, If, SeqExpr, Tuple, TupleGetItem, Var
from parpass.ir.serialization import _deep_call

__all__ = ["called_names", "called_names_encoded"]


def called_names(func: Function) -> list[str]:
    """The module functions ``func`` refers to (``GlobalVar`` anywhere in its body), in first-reference order.

    Loop-level PrimFuncs call no module functions, so only dataflow Functions have callees.
    """
    found: dict[str, None] = {}
    stack: list[Any] = [func.body]
    push, extend = stack.append, stack.extend
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is Var or kind is Constant:
            continue
        if kind is Call:
            op = node.op
            if type(op) is GlobalVar:
                found[op.name_hint] = None
            extend(reversed(node.args))
        elif kind is SeqExpr:
            push(node.body)
            extend([binding.value for binding in reversed(node.bindings)])  # not a binding's variable or type
        elif kind is GlobalVar:
            found[node.name_hint] = None
        elif kind is Tuple:
            extend(reversed(node.fields))
        elif kind is TupleGetItem:
            push(node.tuple_value)
        elif kind is If:
            extend((node.else_branch, node.then_branch, node.cond))
        else:  # a node kind this walk does not know: all its children, in field order
            extend(reversed(list(node.children())))
    return list(found)


# ---------------------------------------------------------------------------------------------------------------------
# the same list, read from the bytes
#
# A schema that mirrors the expression nodes of parpass.ir.relax with only the fields that can lead to a
# GlobalVar: msgspec skips everything else (types, attributes, constants' data, variables) as raw msgpack, and
# ignores the trailing fields a mirror leaves out. Each GlobalVar reports its name as it is decoded, in the
# order of the bytes, which is the order of the fields: first reference first. The tags must be those of the
# real nodes (tests/ir/test_calls.py checks the mirror against them).

_FOUND = threading.local()  # the names a decode in this thread has met so far


class _GlobalVar(msgspec.Struct, array_like=True, gc=False, tag="GlobalVar"):
    name_hint: str

    def __post_init__(self) -> None:
        _FOUND.names.append(self.name_hint)


class _Op(msgspec.Struct, array_like=True, gc=False, tag="Op"):
    pass


class _Var(msgspec.Struct, array_like=True, gc=False, tag="Var"):
    pass


class _Constant(msgspec.Struct, array_like=True, gc=False, tag="Constant"):
    pass


class _Tuple(msgspec.Struct, array_like=True, gc=False, tag="Tuple"):
    fields: list[_Expr]


class _TupleGetItem(msgspec.Struct, array_like=True, gc=False, tag="TupleGetItem"):
    tuple_value: _Expr


class _Call(msgspec.Struct, array_like=True, gc=False, tag="Call"):
    op: Union[_Op, _GlobalVar]
    args: list[_Expr]


class _Binding(msgspec.Struct, array_like=True, gc=False, tag="Binding"):
    var: msgspec.Raw
    value: _Expr


class _SeqExpr(msgspec.Struct, array_like=True, gc=False, tag="SeqExpr"):
    bindings: list[_Binding]
    body: _Expr


class _If(msgspec.Struct, array_like=True, gc=False, tag="If"):
    cond: _Expr
    then_branch: _SeqExpr
    else_branch: _SeqExpr


_Expr = Union[_Var, _Constant, _Tuple, _TupleGetItem, _Call, _If, _GlobalVar]


class _Function(msgspec.Struct, array_like=True, gc=False, tag="Function"):
    params: msgspec.Raw
    body: _SeqExpr


_MIRRORS: tuple[type[msgspec.Struct], ...] = (
    _GlobalVar,
    _Op,
    _Var,
    _Constant,
    _Tuple,
    _TupleGetItem,
    _Call,
    _Binding,
    _SeqExpr,
    _If,
    _Function,
)
_DECODER = msgspec.msgpack.Decoder(_Function)
#: finds the tag every GlobalVar's bytes hold, in bytes and in views alike
_GLOBAL_VAR_TAG = re.compile(re.escape(msgspec.msgpack.encode("GlobalVar"))).search


def called_names_encoded(data: bytes | memoryview) -> list[str]:
    """:func:`called_names` of the Function encoded as ``data``, read without decoding it.

    ``data`` must hold a Function (:meth:`IRModule.kind_and_attrs
    <parpass.ir.IRModule.kind_and_attrs>` tells); bytes in which no GlobalVar
    can be are not parsed at all. Raises ``msgspec.DecodeError`` (or
    ``UnicodeDecodeError``) where they are not a Function's: a full decode then
    says what is wrong with them.
    """
    if _GLOBAL_VAR_TAG(data) is None:
        return []
    return list(dict.fromkeys(_deep_call(_names_met, data)))  # deep nesting is read with room for it


def _names_met(data: bytes | memoryview) -> list[str]:
    """The GlobalVar names in ``data``, in order, repeats included (run in whichever thread decodes)."""
    found: list[str] = []
    _FOUND.names = found
    try:
        _DECODER.decode(data)
    finally:
        _FOUND.names = None
    return found
