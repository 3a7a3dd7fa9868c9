"""Canonical tokens for leaf values, and the digest of a token stream.

Leaf values (node fields that are not children, attribute values) become tokens
that are equal exactly when the values compare equal as structural equality
means it: Python ``==`` (``1 == 1.0 == True``, ``-0.0 == 0.0``), except that NaN
equals NaN, dicts regardless of insertion order, lists equal to tuples.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Iterator
from typing import Any

import msgspec

from parpass.ir import tir
from parpass.ir.node import INT64_MIN, UINT64_MAX, Node

NAN_TOKEN = ("\0nan",)
EMPTY_DICT_TOKEN: tuple[str, tuple[Any, ...]] = ("\0dict", ())
#: Types whose values are their own tokens.
SIMPLE = frozenset({str, int, type(None)})

_CONTAINERS = (list, tuple, dict)


def norm_scalar(v: Any) -> Any:
    """A canonical token for a scalar leaf: equal under ``==`` (NaN == NaN) <=> equal tokens."""
    t = type(v)
    if t is str or t is int or v is None or t is bytes:
        return v
    if t is float:
        if v != v:
            return NAN_TOKEN
        return int(v) if v.is_integer() else v
    if t is bool:
        return int(v)
    if isinstance(v, enum.Enum):
        return norm_scalar(v.value)
    return _norm_subclass(v)


def _norm_subclass(v: Any) -> Any:
    """The token of a value of a subclass of a plain type: it compares as its base type does."""
    if isinstance(v, str):
        return str(v)
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return norm_scalar(float(v))
    if isinstance(v, bytes):
        return bytes(v)
    raise TypeError(f"structural comparison does not support values of type {type(v).__name__}: {v!r}")


def _sort_key(token: Any) -> tuple[int, Any]:
    """An order on dict-key tokens of mixed types (None, numbers, str, bytes, anything else)."""
    if token is None:
        return (0, 0)
    if isinstance(token, (int, float)):
        return (1, token)
    if isinstance(token, str):
        return (2, token)
    if isinstance(token, bytes):
        return (3, token)
    return (4, repr(token))


def norm(value: Any) -> Any:
    """A canonical token for a plain-data value (attributes): nested lists, ``("\\0dict", pairs)`` for dicts."""
    t = type(value)
    if t in SIMPLE:
        return value
    if isinstance(value, dict):
        flat = _flat_dict_token(value)
        if flat is not None:
            return flat
    if not isinstance(value, _CONTAINERS):
        return value if isinstance(value, Node) else norm_scalar(value)
    return _norm_container(value)


def _flat_dict_token(value: dict[Any, Any]) -> Any:
    """The token of an empty dict or one of str keys and simple values (the common attributes), else None."""
    if not value:
        return EMPTY_DICT_TOKEN
    if all(type(k) is str and type(v) in SIMPLE for k, v in value.items()):
        return ("\0dict", tuple(sorted(value.items())))
    return None


class _Frame:
    """A container being normalized: its items, which one is next, the tokens so far, and its keys if a dict."""

    __slots__ = ("indices", "items", "keys", "out")

    def __init__(self, container: Any) -> None:
        self.out: list[Any] = []
        self.keys: list[Any] | None
        if isinstance(container, dict):
            keyed = sorted(((norm_scalar(k), v) for k, v in container.items()), key=lambda kv: _sort_key(kv[0]))
            self.items = [v for _, v in keyed]
            self.keys = [k for k, _ in keyed]
        else:
            self.items = list(container)
            self.keys = None
        self.indices: Iterator[int] = iter(range(len(self.items)))

    def token(self) -> Any:
        """The token of the whole container, once every item is in ``out``."""
        return self.out if self.keys is None else ("\0dict", tuple(zip(self.keys, self.out, strict=True)))


def _norm_item(item: Any) -> Any:
    """The token of a container item that is not a non-empty container."""
    if isinstance(item, dict):
        return EMPTY_DICT_TOKEN
    if isinstance(item, (list, tuple)):
        return []
    if isinstance(item, Node) or type(item) in SIMPLE:
        return item
    return norm_scalar(item)


def _norm_container(value: Any) -> Any:
    """The token of a list, tuple or dict, built bottom-up from an explicit stack (deep values are fine)."""
    frames = [_Frame(value)]
    while True:
        frame = frames[-1]
        index = next(frame.indices, None)
        if index is None:  # complete: it goes into its parent, or is the result
            frames.pop()
            if not frames:
                return frame.token()
            frames[-1].out.append(frame.token())
            continue
        item = frame.items[index]
        if isinstance(item, _CONTAINERS) and item:
            frames.append(_Frame(item))
        else:
            frame.out.append(_norm_item(item))


def digest(tokens: list[Any]) -> int:
    """A 64-bit BLAKE2b digest of the msgpack encoding of ``tokens`` (stable across processes)."""
    try:
        data = msgspec.msgpack.encode(tokens)
    except OverflowError:  # ints beyond 64 bits: encode them as text
        data = msgspec.msgpack.encode(_bigints_as_text(tokens))
    except RecursionError:  # deep opaque subtrees or attribute values
        from parpass.ir.serialization import encode_with

        data = encode_with(msgspec.msgpack.encode, tokens, "IR for hashing")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def _fits(value: int) -> bool:
    """Whether msgpack holds ``value``."""
    return INT64_MIN <= value <= UINT64_MAX


def _bigints_as_text(tokens: list[Any]) -> list[Any]:
    """``tokens`` with ints msgpack cannot hold (beyond 64 bits) written as text."""
    out: list[Any] = []
    for tok in tokens:
        if type(tok) is int and not _fits(tok):
            out.append(("\0int", str(tok)))
        elif type(tok) is tir.IntImm and not _fits(tok.value):
            out.append(("\0intimm", tok.dtype, str(tok.value)))
        elif isinstance(tok, (list, tuple)) and not isinstance(tok, Node):
            out.append(_map_bigints(tok))
        else:
            out.append(tok)
    return out


def _map_bigints(value: Any) -> Any:
    # attribute values are shallow in practice; this runs only when a huge int was found
    stack: list[tuple[Any, list[Any]]] = []
    root: list[Any] = []
    stack.append((value, root))
    while stack:
        src, dst = stack.pop()
        for item in src:
            if type(item) is int and not _fits(item):
                dst.append(("\0int", str(item)))
            elif isinstance(item, (list, tuple)):
                sub: list[Any] = []
                dst.append(sub)
                stack.append((item, sub))
            else:
                dst.append(item)
    return root
