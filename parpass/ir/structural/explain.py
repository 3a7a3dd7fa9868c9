"""Explaining a structural difference: the path to the first differing place, and what differs there.

The streams of both sides are emitted again with a :class:`~parpass.ir.structural.stream.Trace`
up to the first differing token; the item that token belongs to, on each side,
is the place, and its path in the IR names it.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

import msgspec

from parpass.ir import relax, tir
from parpass.ir.node import Node
from parpass.ir.structural import specs as _specs
from parpass.ir.structural.stream import Trace, emit
from parpass.ir.structural.tokens import norm


def render_path(path: Any) -> str:
    """``body.bindings[3].value`` from a linked path ``(parent, field, index or None)``."""
    parts: list[str] = []
    while path:
        path, name, index = path
        label = name if index is None else f"{name}[{index}]"
        parts.append(label)
    text = ""
    for label in reversed(parts):
        text += label if label.startswith("[") or not text else f".{label}"
    return text


def brief(obj: Any, limit: int = 160) -> str:
    """``obj`` printed on one line, cut to ``limit`` characters."""
    try:
        text = str(obj)
    except Exception:  # the printer must not hide the difference
        text = f"<{type(obj).__name__}>"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value) if not isinstance(value, Node) else brief(value, limit)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _mismatch_text(cls: str, name: str, xv: Any, yv: Any) -> str:
    return f"{cls} {name} {_short(xv)} != {_short(yv)}"


def _tuple_field_diff(owner: type, cls: str, name: str, xv: tuple[Any, ...], yv: tuple[Any, ...]) -> str | None:
    """A difference of a tuple field: its length, or its items when they are not walked as children."""
    if len(xv) != len(yv):
        return f"{cls} {name}: length {len(xv)} != {len(yv)}"
    plain = owner in _specs.opaque_set() or not any(isinstance(item, Node) for item in xv)
    if plain and norm(xv) != norm(yv):
        return _mismatch_text(cls, name, xv, yv)
    return None


def _node_field_diff(cls: str, name: str, xv: Node, yv: Node) -> str | None:
    """A difference of a child node seen from its parent: only var-free (opaque) children are compared here."""
    opaque = _specs.opaque_set()
    if type(xv) is not type(yv) and (type(xv) in opaque or type(yv) in opaque):
        return f"{cls} {name}: {type(xv).__name__} != {type(yv).__name__}"
    if type(xv) in opaque and xv != yv:
        return _mismatch_text(cls, name, xv, yv)
    return None


def _field_diff(owner: type, name: str, xv: Any, yv: Any) -> str | None:
    """The difference of field ``name`` of two nodes of class ``owner``, or None."""
    cls = owner.__name__
    if type(xv) is tuple and type(yv) is tuple:
        return _tuple_field_diff(owner, cls, name, xv, yv)
    if (xv is None) != (yv is None):
        return _mismatch_text(cls, name, xv, yv)
    if isinstance(xv, Node) and isinstance(yv, Node):
        return _node_field_diff(cls, name, xv, yv)
    if norm(xv) != norm(yv):
        return _mismatch_text(cls, name, xv, yv)
    return None


def leaf_diff(x: Any, y: Any) -> str | None:
    """The first own field where two nodes of one class differ, as ``Class field a != b``.

    Child nodes that are walked separately are skipped (a difference inside them
    is reported at the child); tuple lengths, None-ness and var-free children are not.
    """
    if not isinstance(x, msgspec.Struct):
        if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)) and len(x) != len(y):
            return f"length {len(x)} != {len(y)}"
        return f"{_short(x)} != {_short(y)}"
    ignored = _specs.IGNORED.get(type(x), frozenset())
    # raw data last: "Constant dtype 'float32' != 'int32'" says more than the bytes
    for name in sorted(type(x).__struct_fields__, key=lambda f: isinstance(getattr(x, f), bytes)):
        if name not in ignored:
            found = _field_diff(type(x), name, getattr(x, name), getattr(y, name))
            if found is not None:
                return found
    return None


def _var_text(node: Any, tokens: list[Any], trace: Trace, k: int) -> str:
    name = getattr(node, "name_hint", None) or getattr(node, "name", "?")
    start = trace.starts[k]
    marker = tokens[start] if start < len(tokens) else None
    number = tokens[start + 1] if start + 1 < len(tokens) else None
    if marker in ("%v", "%tv", "%b", "%bmap") and number in trace.def_paths:
        where = render_path(trace.def_paths[number]) or "the root"
        return f"{name!s} (defined at {where})"
    if marker in ("%def", "%tdef", "%bdef"):
        return f"{name!s} (defined here)"
    return f"{name!s} (free, vid {getattr(node, 'vid', '?')})"


def _token_eq(x: Any, y: Any) -> bool:
    try:
        return bool(x == y)
    except RecursionError:
        return False


def first_difference(sa: list[Any], sb: list[Any]) -> int:
    """The first index where two token streams differ (the shorter length if one is a prefix)."""
    limit = min(len(sa), len(sb))
    step = 4096
    for lo in range(0, limit, step):
        hi = min(lo + step, limit)
        if sa[lo:hi] != sb[lo:hi]:  # compared in C; then find the token within the chunk
            return next(i for i in range(lo, hi) if not _token_eq(sa[i], sb[i]))
    return limit


class _Side:
    """One side of a comparison where the streams part: its tokens, their trace, and the index of the item there."""

    __slots__ = ("at", "tokens", "trace")

    def __init__(self, tokens: list[Any], trace: Trace, at: int) -> None:
        self.tokens = tokens
        self.trace = trace
        self.at = at  # index into trace.subjects


def _what_differs(x: Any, y: Any, lhs: _Side, rhs: _Side) -> str:
    """What differs between the items ``x`` (of ``lhs``) and ``y`` (of ``rhs``) at which the streams part."""
    if type(x) is not type(y):
        return f"node type {type(x).__name__} != {type(y).__name__}"
    if not isinstance(x, (relax.Var, tir.Var, tir.Buffer)):
        return leaf_diff(x, y) or f"{type(x).__name__} differs"
    leaf = leaf_diff(x, y) if isinstance(x, (tir.Var, tir.Buffer)) else None
    if leaf:
        return leaf
    kind = "buffer" if isinstance(x, tir.Buffer) else "variable"
    return f"{kind} {_var_text(x, lhs.tokens, lhs.trace, lhs.at)} != {_var_text(y, rhs.tokens, rhs.trace, rhs.at)}"


def explain(a: Any, b: Any, map_free_vars: bool, where: str, index: int) -> str:
    """A readable account of the first place where ``a`` and ``b`` differ: token ``index`` of their streams."""
    ta, tb = Trace(), Trace()
    sa, sb = emit(a, map_free_vars, ta, stop_at=index + 1), emit(b, map_free_vars, tb, stop_at=index + 1)
    limit = min(len(sa), len(sb))
    k = max(bisect_right(ta.starts, index) - 1, 0)
    kb = min(k, len(tb.subjects) - 1)
    x = ta.subjects[k] if ta.subjects else a
    y = tb.subjects[kb] if tb.subjects else b
    path = render_path(ta.paths[k]) if ta.paths else ""
    place = (f"{where}: " if where else "") + (f"{path}: " if path else "")
    what = _what_differs(x, y, _Side(sa, ta, k), _Side(sb, tb, kb))
    if index >= limit:
        what += " (one side has more IR)"
    return f"{place}{what}\n  lhs: {brief(x)}\n  rhs: {brief(y)}"
