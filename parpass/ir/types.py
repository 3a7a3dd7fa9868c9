"""Types of the dataflow IR (:class:`~parpass.ir.Function` parameters and bindings)."""

from __future__ import annotations

from typing import Union

from parpass.ir.node import Node


class TensorType(Node, frozen=True, gc=False, tag="TensorType"):
    """A tensor of static ``shape`` and element ``dtype``; ``shape=()`` is a 0-d tensor."""

    shape: tuple[int, ...]
    dtype: str

    @property
    def ndim(self) -> int:
        return len(self.shape)


class PrimType(Node, frozen=True, gc=False, tag="PrimType"):
    """A scalar of ``dtype`` (TVM's ``PrimType``)."""

    dtype: str


class TupleType(Node, frozen=True, gc=False, tag="TupleType"):
    """A tuple whose fields have the given types."""

    fields: tuple[Type, ...]

    __child_fields__ = ("fields",)


Type = Union[TensorType, PrimType, TupleType]
