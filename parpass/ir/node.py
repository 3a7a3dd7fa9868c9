"""The base of every IR node, and the handles shared by both function kinds.

Nodes are frozen ``msgspec.Struct``s encoded as tagged arrays, so that typed
decoding rebuilds them without pickle. They are not tracked by the cyclic
garbage collector (``gc=False``): IR is a tree (or a DAG through shared
subtrees), never a cycle, and leaving millions of nodes out of the collector
makes building and decoding large modules much faster.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar, TypeVar

import msgspec

#: Attribute values are plain data: None, bool, int, float, str, and lists/dicts of those.
AttrValue = Any
Attrs = dict[str, AttrValue]


class FrozenAttrs(dict[str, AttrValue]):
    """The attribute map of a node: a ``dict`` that refuses to change.

    Nodes are immutable, and a node's attributes are part of it: ``f.attrs[k] = v``
    would change the function for everyone holding it (the caller's module
    included) and desynchronize it from its cached bytes. So the map raises; use
    ``with_attr`` / ``without_attr`` for a changed copy. It is still a ``dict``
    (msgspec encodes it as one, ``==`` and ``**`` work); values nested inside it
    are plain data to be treated as read-only too.
    """

    __slots__ = ()

    def _read_only(self, *args: object, **kwargs: object) -> Any:
        raise TypeError("node attributes are read-only; use with_attr()/without_attr() for a changed copy")

    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenAttrs, (dict(self),))

    def __repr__(self) -> str:
        return dict.__repr__(self)


#: The one empty attribute map (nodes without attributes share it).
EMPTY_ATTRS = FrozenAttrs()


def frozen_attrs(value: Any) -> FrozenAttrs:
    """``value`` (a mapping) as a :class:`FrozenAttrs`, the same object if it already is one."""
    if type(value) is FrozenAttrs:
        return value
    if not value:
        return EMPTY_ATTRS
    return FrozenAttrs(value)


def freeze_field(node: msgspec.Struct, name: str) -> None:
    """Make the mapping in field ``name`` of ``node`` (just built or decoded) a :class:`FrozenAttrs`."""
    value = getattr(node, name)
    if type(value) is not FrozenAttrs:
        msgspec.structs.force_setattr(node, name, frozen_attrs(value))


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


_F = TypeVar("_F", bound="BaseFunc")


class BaseFunc(Node, frozen=True, gc=False, kw_only=True):
    """Base of :class:`~parpass.ir.Function` and :class:`~parpass.ir.PrimFunc`.

    ``attrs`` is keyword-only and comes last, after each kind's own fields. Treat it
    as read-only: use :meth:`with_attr` / :meth:`without_attr` to get a changed copy.
    """

    attrs: Attrs = {}

    def __post_init__(self) -> None:
        freeze_field(self, "attrs")

    def with_attr(self: _F, key: str, value: AttrValue) -> _F:
        """A copy of this function with attribute ``key`` set to ``value`` (TVM's ``with_attr``)."""
        if not isinstance(key, str):
            raise TypeError(f"attribute keys must be str, got {type(key).__name__}: {key!r}")
        return msgspec.structs.replace(self, attrs=FrozenAttrs({**self.attrs, key: value}))

    def without_attr(self: _F, key: str) -> _F:
        """A copy of this function without attribute ``key`` (unchanged if it has none)."""
        if key not in self.attrs:
            return self
        return msgspec.structs.replace(self, attrs=frozen_attrs({k: v for k, v in self.attrs.items() if k != key}))

    @property
    def skip_optimization(self) -> bool:
        """True when the function carries a truthy ``"SkipOptimization"`` attribute."""
        return bool(self.attrs.get("SkipOptimization", False))
