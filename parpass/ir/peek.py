"""Read a function's kind and attributes from its encoded bytes without decoding its body.

The attributes are the last field of an encoded function, so the body is
skipped as raw msgpack: about eight times faster than a full decode. The
parallel executor uses it to pick the targets of a pass (kind,
``SkipOptimization``) from a module whose functions are held as bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from parpass.ir.node import AttrValue, BaseFunc, frozen_attrs
from parpass.ir.relax import Function
from parpass.ir.serialization import _deep_call
from parpass.ir.tir import PrimFunc

_NULL = msgspec.Raw(b"\xc0")


class _FunctionHead(msgspec.Struct, array_like=True, tag="Function"):
    params: msgspec.Raw
    body: msgspec.Raw
    ret_type: msgspec.Raw = _NULL
    attrs: dict[str, Any] = {}


class _PrimFuncHead(msgspec.Struct, array_like=True, tag="PrimFunc"):
    params: msgspec.Raw
    body: msgspec.Raw
    attrs: dict[str, Any] = {}


_DECODER = msgspec.msgpack.Decoder(_FunctionHead | _PrimFuncHead)


def peek_function(data: bytes | memoryview) -> tuple[type[BaseFunc], Mapping[str, AttrValue]]:
    """``(Function or PrimFunc, attrs)`` of an encoded function, the attributes frozen as decoding makes them
    (a head a module caches must refuse changes, as the function's own attributes do)."""
    head = _deep_call(_DECODER.decode, data)  # a body nested past the recursion limit is skipped with room for it
    kind: type[BaseFunc] = Function if isinstance(head, _FunctionHead) else PrimFunc
    try:
        attrs = frozen_attrs(head.attrs)
    except TypeError as err:  # a value no attribute holds (a msgpack extension): decoding it whole says so
        raise msgspec.DecodeError(str(err)) from err
    return kind, attrs
