"""The base of every IR node, and the handles shared by both function kinds.

Nodes are frozen ``msgspec.Struct``s encoded as tagged arrays, so that typed
decoding rebuilds them without pickle. They are not tracked by the cyclic
garbage collector (``gc=False``): IR is a tree (or a DAG through shared
subtrees), never a cycle, and leaving millions of nodes out of the collector
makes building and decoding large modules much faster.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, TypeVar

import msgspec

#: Attribute values are plain data: None, bool, int, float, str, bytes, and lists/dicts of those.
AttrValue = Any
Attrs = dict[str, AttrValue]

_READ_ONLY = "node attributes are read-only; use with_attr()/without_attr() for a changed copy"


def _read_only(self: object, *args: object, **kwargs: object) -> Any:
    raise TypeError(_READ_ONLY)


class FrozenAttrs(dict[str, AttrValue]):
    """An attribute map (or a dict nested in an attribute value): a ``dict`` that refuses to change.

    Nodes are immutable, and a node's attributes are part of it: ``f.attrs[k] = v``
    would change the function for everyone holding it (the caller's module
    included) and desynchronize it from its cached bytes; in a worker the change
    would be lost, so a serial and a parallel run would differ. So the map
    raises; use ``with_attr`` / ``without_attr`` for a changed copy. It is still a
    ``dict`` (msgspec encodes it as one, ``==`` and ``**`` work).

    Building one freezes the values all the way down (see :func:`freeze_value`);
    ``where`` names the map in errors (``"attribute"``, ``"module attribute"``).
    """

    __slots__ = ()

    def __init__(self, items: Any = (), /, where: str = "attribute") -> None:
        dict.__init__(self, items)
        for key, value in self.items():  # replacing a value while iterating is fine: the keys do not change
            if type(key) is not str:
                raise TypeError(f"{where}: key {key!r} is a {type(key).__name__}, not a str")
            if type(value) not in _SCALARS:
                dict.__setitem__(self, key, freeze_value(value, f"{where} {key!r}"))

    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenAttrs, (dict(self),))

    def __repr__(self) -> str:
        return dict.__repr__(self)


class FrozenList(list[AttrValue]):
    """A list nested in an attribute value: a ``list`` that refuses to change.

    It is what a decoded attribute array is, so lists and tuples given to a node
    become one too: a serial run and a worker see the same value. It compares
    equal to a plain list with the same items (not to a tuple), encodes as an
    array and prints as a list. ``list(value)`` is a mutable copy.
    """

    __slots__ = ()

    def __init__(self, items: Any = (), /, where: str = "attribute") -> None:
        list.__init__(self, items)
        for index, item in enumerate(self):
            if type(item) not in _SCALARS:
                list.__setitem__(self, index, freeze_value(item, f"{where}[{index}]"))

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only
    append = extend = insert = pop = remove = clear = sort = reverse = _read_only

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenList, (list(self),))

    def __repr__(self) -> str:
        return list.__repr__(self)


#: Types an attribute value may have as they are (immutable, and given back unchanged by decoding).
_SCALARS = frozenset({type(None), bool, int, float, str, bytes})
_FROZEN = frozenset({*_SCALARS, FrozenList, FrozenAttrs})
# The base classes' own methods, to fill a frozen container that is being built.
_new_dict, _fill_dict, _set_item = dict.__new__, dict.update, dict.__setitem__
_new_list, _fill_list = list.__new__, list.extend
_PLAIN = "attributes hold None, bool, int, float, str, bytes, and lists/tuples/dicts of those"


def _freeze_leaf(value: Any, where: str) -> AttrValue:
    """A value that is neither a plain scalar nor a list, tuple or dict, as it is held (or a TypeError)."""
    if isinstance(value, (set, frozenset)):
        raise TypeError(
            f"{where}: a set cannot be an attribute value (its order is not deterministic); use a sorted list"
        )
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, enum.Enum):
        return freeze_value(value.value, where)
    # subclasses of the plain types (numpy.float64, ...) are held as their base type, as decoding gives them
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, bytes):
        return bytes(value)
    raise TypeError(f"{where}: a value of type {type(value).__name__} ({value!r}) is not plain data; {_PLAIN}")


def _open(container: Any, path: str, key: Any) -> tuple[Iterator[tuple[Any, Any]], Any, str, Any]:
    """A frame of :func:`freeze_value`: (items to freeze, what they go into, its path, its key in its parent)."""
    if isinstance(container, dict):
        for k in container:
            if type(k) is not str:
                raise TypeError(f"{path}: key {k!r} is a {type(k).__name__}, not a str")
        return iter(container.items()), FrozenAttrs.__new__(FrozenAttrs), path, key
    return iter(enumerate(container)), FrozenList.__new__(FrozenList), path, key


def freeze_value(value: Any, where: str = "attribute") -> AttrValue:
    """``value`` as an attribute value is held: immutable all the way down, and as decoding gives it back.

    Lists and tuples become :class:`FrozenList`, dicts :class:`FrozenAttrs`, a
    bytearray or memoryview ``bytes``, an enum its value, a subclass of a plain
    type the plain type. A set raises (its order is not deterministic, and
    bytes would give a list back), as does anything else that is not plain
    data; the TypeError names ``where`` (the attribute key) and the path inside
    the value. The caller's containers are copied, never frozen in place.
    Iterative: deeply nested values are fine.
    """
    if type(value) in _FROZEN:
        return value
    if type(value) is list:  # the common container: a flat list of scalars (a shape), frozen as a copy
        flat = _frozen_flat_list(value)
        if flat is not None:
            return flat
    if not isinstance(value, (list, tuple, dict)):
        return _freeze_leaf(value, where)
    return _freeze_container(value, where)


def _frozen_flat_list(value: list[Any]) -> FrozenList | None:
    """``value`` copied into a FrozenList if every item is a plain scalar, else None."""
    for item in value:
        if type(item) not in _SCALARS:
            return None
    flat = _new_list(FrozenList)
    _fill_list(flat, value)
    return flat


def _put(container: FrozenAttrs | FrozenList, key: Any, item: AttrValue) -> None:
    """Add a frozen ``item`` (at ``key`` if a dict) to a frozen container being built."""
    if isinstance(container, FrozenAttrs):
        dict.__setitem__(container, key, item)
    else:
        list.append(container, item)


def _freeze_container(value: Any, where: str) -> AttrValue:
    """A list, tuple or dict frozen, from an explicit stack of frames (deeply nested values are fine)."""
    frames = [_open(value, where, None)]
    while True:
        items, out, path, _ = frames[-1]
        for key, item in items:
            if type(item) in _FROZEN:
                frozen = item
            elif isinstance(item, (list, tuple, dict)):
                frames.append(_open(item, f"{path}[{key!r}]", key))
                break
            else:
                frozen = _freeze_leaf(item, f"{path}[{key!r}]")
            if type(out) is FrozenAttrs:
                dict.__setitem__(out, key, frozen)
            else:
                list.append(out, frozen)
        else:  # this container is complete: it goes into its parent (or is the result)
            done = frames.pop()
            if not frames:
                return out
            _put(frames[-1][1], done[3], out)


#: The integers msgpack carries (and so what a module may hold: it must be shippable to workers and savable).
INT64_MIN, UINT64_MAX = -(2**63), 2**64 - 1


def scalar_problem(value: object) -> str | None:
    """Why ``value`` (a str or int of a node or an attribute) cannot be encoded, or None.

    msgpack carries integers from ``-2**63`` to ``2**64 - 1`` and UTF-8 strings: a
    lone surrogate (``"\\ud800"``, possible in Python strings and in escapes of the
    text form) has no UTF-8 encoding.
    """
    if isinstance(value, str):
        if value.isascii():
            return None
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"the string {value!r} holds a lone surrogate ({value[exc.start]!r}), which UTF-8 cannot encode"
        return None
    if isinstance(value, int) and not isinstance(value, bool) and not INT64_MIN <= value <= UINT64_MAX:
        return f"the integer {value} does not fit in 64 bits"
    return None


def value_problem(value: object) -> str | None:
    """The first place in a plain-data ``value`` (frozen or not) that cannot be encoded: ``[1]['k']: why``."""
    stack: list[tuple[object, str]] = [(value, "")]
    while stack:
        obj, path = stack.pop()
        if isinstance(obj, Mapping):  # a dict, or a module's read-only view of its attributes
            for key, item in obj.items():
                problem = scalar_problem(key)
                if problem is not None:
                    return f"{path}: key: {problem}"
                stack.append((item, f"{path}[{key!r}]"))
        elif isinstance(obj, (list, tuple)):
            stack.extend((item, f"{path}[{i}]") for i, item in enumerate(obj))
        else:
            problem = scalar_problem(obj)
            if problem is not None:
                return f"{path}: {problem}" if path else problem
    return None


def checked_value(value: AttrValue, where: str) -> AttrValue:
    """``value`` frozen (:func:`freeze_value`); ValueError naming ``where`` if it cannot be encoded.

    What ``with_attr`` does with the one value it sets (the cheap place to check it).
    """
    frozen = freeze_value(value, where)
    problem = value_problem(frozen)
    if problem is not None:
        raise ValueError(f"{where}{problem if problem.startswith('[') else ': ' + problem}")
    return frozen


#: The one empty attribute map (nodes without attributes share it).
EMPTY_ATTRS = FrozenAttrs()


def frozen_attrs(value: Any, where: str = "attribute") -> FrozenAttrs:
    """``value`` (a mapping) as a :class:`FrozenAttrs`, the same object if it already is one.

    ``where`` names the map in errors (``"attribute"``, ``"module attribute"``, ``"loop annotation"``).
    """
    if type(value) is FrozenAttrs:
        return value
    if not value:
        return EMPTY_ATTRS
    # The common cases (decoded attributes: scalars, flat lists of scalars such as shapes) are frozen
    # here, without the Python-level constructors; anything else goes through FrozenAttrs.
    out = _new_dict(FrozenAttrs)
    _fill_dict(out, value)
    for key, item in value.items():
        kind = type(item)
        if type(key) is not str:
            return FrozenAttrs(value, where)
        if kind in _SCALARS:
            continue
        if kind is not list:
            return FrozenAttrs(value, where)
        for x in item:
            if type(x) not in _SCALARS:
                return FrozenAttrs(value, where)
        flat = _new_list(FrozenList)
        _fill_list(flat, item)
        _set_item(out, key, flat)
    return out


def freeze_field(node: msgspec.Struct, name: str, where: str = "attribute") -> None:
    """Make the mapping in field ``name`` of ``node`` (just built or decoded) a :class:`FrozenAttrs`."""
    value = getattr(node, name)
    if type(value) is not FrozenAttrs:
        msgspec.structs.force_setattr(node, name, frozen_attrs(value, where))


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


#: The attribute that keeps a function from every function-level pass (TVM's name).
SKIP_OPTIMIZATION = "SkipOptimization"


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
        value = checked_value(value, f"attribute {key!r}")
        return msgspec.structs.replace(self, attrs=FrozenAttrs({**self.attrs, key: value}))

    def without_attr(self: _F, key: str) -> _F:
        """A copy of this function without attribute ``key`` (unchanged if it has none)."""
        if key not in self.attrs:
            return self
        return msgspec.structs.replace(self, attrs=frozen_attrs({k: v for k, v in self.attrs.items() if k != key}))

    @property
    def skip_optimization(self) -> bool:
        """True when the function carries a truthy ``"SkipOptimization"`` attribute."""
        return bool(self.attrs.get(SKIP_OPTIMIZATION, False))
