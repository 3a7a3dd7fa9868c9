"""The base of every IR node, and the handles shared by both function kinds.

Nodes are frozen ``msgspec.Struct``s encoded as tagged arrays, so that typed
decoding rebuilds them without pickle. They are not tracked by the cyclic
garbage collector (``gc=False``): IR is a tree (or a DAG through shared
subtrees), never a cycle, and leaving millions of nodes out of the collector
makes building and decoding large modules much faster.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import msgspec

#: Attribute values are plain data: None, bool, int, float, str, and lists/dicts of those.
AttrValue = Any
Attrs = dict[str, AttrValue]


class Node(msgspec.Struct, frozen=True, gc=False, array_like=True, omit_defaults=True, tag=True):
    """Base class of all IR nodes: immutable, encoded as a tagged msgpack array."""

    #: Names of fields that hold child nodes (or tuples of them); used by generic walks.
    __child_fields__: ClassVar[tuple[str, ...]] = ()

    def __str__(self) -> str:
        from parpass.ir.printer import astext

        return astext(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self}>"

    def children(self) -> Iterator[Node]:
        """The node's direct child nodes, in field order."""
        for name in self.__child_fields__:
            value = getattr(self, name)
            if isinstance(value, Node):
                yield value
            elif isinstance(value, tuple):
                for item in value:
                    if isinstance(item, Node):
                        yield item


class GlobalVar(Node, frozen=True, gc=False, tag="GlobalVar"):
    """A named handle to a function of an :class:`~parpass.ir.IRModule` (TVM's ``GlobalVar``)."""

    name_hint: str

    def __str__(self) -> str:
        return f"@{self.name_hint}"


class Op(Node, frozen=True, gc=False, tag="Op"):
    """A reference to an operator of the op registry, by name (TVM's ``Op``)."""

    name: str

    @staticmethod
    def get(name: str) -> Op:
        """The operator called ``name``; raises a KeyError naming the closest ops if unknown."""
        from parpass.ir.op import get_op

        get_op(name)
        return Op(name)

    def __str__(self) -> str:
        return self.name


class BaseFunc(Node, frozen=True, gc=False, kw_only=True):
    """Base of :class:`~parpass.ir.Function` and :class:`~parpass.ir.PrimFunc`.

    ``attrs`` is keyword-only and comes last, after each kind's own fields. Treat it
    as read-only: use :meth:`with_attr` / :meth:`without_attr` to get a changed copy.
    """

    attrs: Attrs = {}

    def with_attr(self, key: str, value: AttrValue) -> BaseFunc:
        """A copy of this function with attribute ``key`` set to ``value`` (TVM's ``with_attr``)."""
        if not isinstance(key, str):
            raise TypeError(f"attribute keys must be str, got {type(key).__name__}: {key!r}")
        return msgspec.structs.replace(self, attrs={**self.attrs, key: value})

    def without_attr(self, key: str) -> BaseFunc:
        """A copy of this function without attribute ``key`` (unchanged if it has none)."""
        if key not in self.attrs:
            return self
        return msgspec.structs.replace(self, attrs={k: v for k, v in self.attrs.items() if k != key})

    @property
    def skip_optimization(self) -> bool:
        """True when the function carries a truthy ``"SkipOptimization"`` attribute."""
        return bool(self.attrs.get("SkipOptimization", False))
