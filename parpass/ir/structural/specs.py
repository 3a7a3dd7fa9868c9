"""What structural comparison needs to know about each node class: its kind, tag, leaf fields and child steps.

Specs are built on first use from the subclasses of :class:`~parpass.ir.node.Node`
(and again when a node class defined since shows up), so every tagged node class
is covered without a registry.
"""

from __future__ import annotations

import threading

from parpass.ir import relax, tir
from parpass.ir.node import GlobalVar, Node, Op
from parpass.ir.types import PrimType, TensorType, TupleType

# kinds of node classes
GENERIC, RVAR, TVAR, BUFFER, OPAQUE, INTIMM = range(6)
# roles of child fields
CHILD, DEF, DEFS = range(3)

#: Classes whose subtrees hold no variables and no floats: compared with msgspec's ``==``, hashed by encoding.
OPAQUE_CLASSES: tuple[type[Node], ...] = (TensorType, PrimType, TupleType, Op, GlobalVar, relax.Constant)
#: Fields that are not part of the structure.
IGNORED: dict[type, frozenset[str]] = {
    relax.Var: frozenset({"vid", "name_hint"}),
    tir.Var: frozenset({"vid", "name_hint"}),
    tir.Buffer: frozenset({"vid", "name"}),
}
#: Child fields in walk order, with their role, where it differs from field order / plain children.
_STEPS: dict[type, tuple[tuple[str, int], ...]] = {
    relax.Param: (("var", DEF), ("ty", CHILD)),
    relax.Binding: (("value", CHILD), ("var", DEF), ("ty", CHILD)),
    tir.For: (("min", CHILD), ("extent", CHILD), ("loop_var", DEF), ("body", CHILD)),
    tir.LetStmt: (("value", CHILD), ("var", DEF), ("body", CHILD)),
    tir.Allocate: (("buffer", DEF), ("body", CHILD)),
    tir.PrimFunc: (("params", DEFS), ("body", CHILD)),
}
#: Node classes of a kind of their own (checked by identity: subclasses are generic).
_EXACT_KINDS: dict[type, int] = {relax.Var: RVAR, tir.Var: TVAR, tir.Buffer: BUFFER}

#: ``(kind, tag, leaf fields, child steps in reverse walk order)``
Spec = tuple[int, str, tuple[str, ...], tuple[tuple[str, int], ...]]

_SPECS: dict[type, Spec] = {}
_SPECS_LOCK = threading.Lock()
_opaque_set: frozenset[type] = frozenset()


def tag_of(cls: type) -> str | None:
    """The msgspec tag of a node class, or None for an untagged (abstract) one."""
    tag = getattr(getattr(cls, "__struct_config__", None), "tag", None)
    return tag if isinstance(tag, str) else None


def _kind_of(cls: type) -> int:
    kind = _EXACT_KINDS.get(cls)
    if kind is not None:
        return kind
    if issubclass(cls, OPAQUE_CLASSES):
        return OPAQUE
    return INTIMM if cls is tir.IntImm else GENERIC


def _spec_of(cls: type[Node], tag: str) -> Spec:
    fields = cls.__struct_fields__
    children: tuple[str, ...] = getattr(cls, "__child_fields__", ())
    ignored = IGNORED.get(cls, frozenset())
    steps = _STEPS.get(cls, tuple((name, CHILD) for name in fields if name in children))
    stepped = {name for name, _ in steps}
    leaves = tuple(f for f in fields if f not in stepped and f not in ignored)
    return (_kind_of(cls), tag, leaves, tuple(reversed(steps)))


def _build_specs() -> dict[type, Spec]:
    """The spec of every tagged node class."""
    specs: dict[type, Spec] = {}
    stack: list[type[Node]] = [Node]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        tag = tag_of(cls)
        if tag is not None and cls not in specs:
            specs[cls] = _spec_of(cls, tag)
    return specs


def node_specs(refresh: bool = False) -> dict[type, Spec]:
    """The specs of all node classes, built on first use (``refresh``: again, for classes defined since).

    The same dict object every time (refreshing updates it in place), so callers may hold on to it.
    """
    global _opaque_set
    if refresh or not _SPECS:
        with _SPECS_LOCK:
            if refresh or not _SPECS:
                built = _build_specs()
                _opaque_set = frozenset(cls for cls, spec in built.items() if spec[0] == OPAQUE)
                _SPECS.update(built)
    return _SPECS


def opaque_set() -> frozenset[type]:
    """The node classes of kind OPAQUE among those with specs so far."""
    return _opaque_set
