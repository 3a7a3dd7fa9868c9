"""Literal text: JSON-like attribute literals (:func:`format_literal`) and relax constants' data."""

from __future__ import annotations

import base64
import math
from collections.abc import Callable
from typing import Any

from parpass.ir import relax
from parpass.ir.printer.words import _quote, _shape, quote_word

__all__ = ["SMALL_CONSTANT", "format_literal"]

#: Constants with at most this many elements print their values; larger ones print base64.
SMALL_CONSTANT = 64


# ---------------------------------------------------------------- attribute literals


class _Text:
    """Raw text on the literal printer's stack (distinguishes it from string values)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


_FLAT: dict[type, Callable[[Any], str]] = {
    str: _quote,
    int: int.__repr__,
    float: float.__repr__,
    bool: lambda v: "true" if v else "false",
    type(None): lambda v: "null",
}

#: One step of the literal printer: appends text to ``out`` and/or pushes work on ``stack``.
_Step = Callable[[Any, list[str], list[Any], str], None]


def _step_flat(v: Any, out: list[str], stack: list[Any], where: str) -> None:
    out.append(_FLAT[type(v)](v))


def _step_int(v: int, out: list[str], stack: list[Any], where: str) -> None:
    out.append(int.__repr__(v))


def _step_float(v: float, out: list[str], stack: list[Any], where: str) -> None:
    out.append(float.__repr__(v))


def _step_str(v: str, out: list[str], stack: list[Any], where: str) -> None:
    out.append(_quote(v))


def _step_sequence(v: list[Any] | tuple[Any, ...], out: list[str], stack: list[Any], where: str) -> None:
    if not v:
        out.append("[]")
        return
    if all(type(x) in _FLAT for x in v):  # the common case: no nesting, no work for the stack
        out.append("[" + ", ".join([_FLAT[type(x)](x) for x in v]) + "]")
        return
    out.append("[")
    items: list[Any] = []
    for i, x in enumerate(v):
        if i:
            items.append(_Text(", "))
        items.append(x)
    items.append(_Text("]"))
    stack.extend(reversed(items))


def _step_dict(v: dict[Any, Any], out: list[str], stack: list[Any], where: str) -> None:
    if not v:
        out.append("{}")
        return
    out.append("{")
    items: list[Any] = []
    for i, (k, x) in enumerate(v.items()):
        if not isinstance(k, str):
            raise TypeError(f"cannot print {where}: dict key {k!r} is a {type(k).__name__}, not a str")
        head = (", " if i else "") + quote_word(k) + ": "
        flat = _FLAT.get(type(x))
        if flat is None:
            items.append(_Text(head))
            items.append(x)
        else:
            items.append(_Text(head + flat(x)))
    items.append(_Text("}"))
    stack.extend(reversed(items))


def _step_unsupported(v: Any, out: list[str], stack: list[Any], where: str) -> None:
    raise TypeError(
        f"cannot print {where}: a value of type {type(v).__name__} ({v!r}); "
        "attributes hold None, bool, int, float, str, and lists and dicts of those"
    )


#: Steps by exact type; subclasses of the value types are added by :func:`_step_for` when first seen.
_STEPS: dict[type, _Step] = {
    type(None): _step_flat,
    bool: _step_flat,
    int: _step_int,
    float: _step_float,
    str: _step_str,
    list: _step_sequence,
    tuple: _step_sequence,
    dict: _step_dict,
}
#: Checked in order for a value whose exact type has no step (an int or str subclass, an OrderedDict, ...).
_SUBCLASS_STEPS: tuple[tuple[type | tuple[type, ...], _Step], ...] = (
    (int, _step_int),
    (float, _step_float),
    (str, _step_str),
    ((list, tuple), _step_sequence),
    (dict, _step_dict),
)


def _step_for(cls: type) -> _Step:
    step = _STEPS.get(cls)
    if step is not None:
        return step
    for base, step in _SUBCLASS_STEPS:
        if issubclass(cls, base):
            _STEPS[cls] = step  # remembered: IR attributes are FrozenAttrs and FrozenLists
            return step
    return _step_unsupported


def _flat_dict(value: dict[Any, Any]) -> str | None:
    """The text of a dict of str keys and scalar values (the common case), else None."""
    flat: list[str] = []
    for k, v in value.items():
        if type(k) is not str:
            return None
        flat.append(quote_word(k) + ": " + _FLAT[type(v)](v))
    return "{" + ", ".join(flat) + "}"


def format_literal(value: Any, where: str = "attribute") -> str:
    """``value`` (None, bool, int, float, str, and lists/tuples/dicts of those) as a JSON-like literal.

    Floats keep their type (``1.0``, ``inf``, ``nan``); dict keys must be strings.
    Raises TypeError naming ``where`` for any other value. Iterative, so deep
    nesting is fine.
    """
    if type(value) is dict and all(type(v) in _FLAT for v in value.values()):
        # The common case (``{"global_symbol": "f"}``): one flat dict, no stack needed.
        text = _flat_dict(value)
        if text is not None:
            return text
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        v = stack.pop()
        if type(v) is _Text:  # separators and closing brackets: the commonest item
            out.append(v.text)
            continue
        step = _STEPS.get(type(v))
        if step is None:
            step = _step_for(type(v))
        step(v, out, stack, where)
    return "".join(out)


def format_attrs(attrs: dict[str, Any], where: str) -> str:
    return format_literal(attrs, where)


# ---------------------------------------------------------------- constants


def _const_values(c: relax.Constant) -> str | None:
    """The nested-list value text of a small constant, or None to use base64."""
    import numpy as np

    try:
        dt = np.dtype(c.dtype)
    except TypeError:
        return None
    shape = tuple(c.shape)
    count = math.prod(shape)
    if dt.kind not in "biuf" or count > SMALL_CONSTANT or (count == 0):
        return None
    try:
        flat = c.numpy().reshape(-1)
    except (ValueError, TypeError):
        return None  # data does not match shape and dtype: base64 keeps it exact
    if dt.kind == "b":
        toks = ["true" if x else "false" for x in flat.tolist()]
        values: list[Any] = [t == "true" for t in toks]
    elif dt.kind in "iu":
        ints = [int(x) for x in flat.tolist()]
        toks = [str(x) for x in ints]
        values = ints
    else:
        toks = [str(x) for x in flat]  # numpy's shortest round-trip repr for the dtype
        values = [float(t) for t in toks]
    if np.asarray(values, dtype=flat.dtype).tobytes() != c.data:
        return None  # e.g. a NaN payload the decimal text would lose
    for dim in reversed(shape[1:] if shape else ()):
        toks = ["[" + ", ".join(toks[k : k + dim]) + "]" for k in range(0, len(toks), dim)]
    return "[" + ", ".join(toks) + "]" if shape else toks[0]


_CONST_CACHE: dict[tuple[bytes, str, tuple[int, ...]], str] = {}


def _const(c: relax.Constant) -> str:
    small = len(c.data) <= 256
    if small:
        key = (bytes(c.data), c.dtype, tuple(c.shape))
        cached = _CONST_CACHE.get(key)
        if cached is not None:
            return cached
    text = _const_text(c)
    if small:
        if len(_CONST_CACHE) > 4096:
            _CONST_CACHE.clear()
        _CONST_CACHE[key] = text
    return text


def _const_text(c: relax.Constant) -> str:
    values = _const_values(c)
    if values is not None:
        return f"const({values}, {quote_word(c.dtype)})"
    data = base64.b64encode(bytes(c.data)).decode("ascii")
    return f'const(b64"{data}", {quote_word(c.dtype)}, {_shape(tuple(c.shape))})'
