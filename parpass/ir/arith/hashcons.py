"""Structural ids and hash-consing of loop-level expressions, for the arithmetic analyzer.

Every expression the analyzer sees gets a *structural id* (sid): structurally
equal expressions share a sid, which is what polynomials are keyed by and how
``x - x`` cancels. The first expression seen with a sid is its representative,
reused whenever that structure is needed again, so equal results are one object.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any, cast

import msgspec

from parpass.ir import tir
from parpass.ir.arith.dtypes import FLOAT_DTYPES
from parpass.ir.tir import Broadcast, BufferLoad, Call, Cast, FloatImm, IntImm, PrimExpr, Ramp, Var

__all__ = ["HashConsing"]

operands = tir.operands


def _mix(h: int, x: int) -> int:
    """One step of a 64-bit FNV-style mix (deterministic in every process, unlike ``hash()``)."""
    return ((h ^ (x & 0xFFFFFFFFFFFFFFFF)) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF


class HashConsing:
    """The table of structural ids: representatives by structure, and a deterministic order of atoms.

    Tables are keyed by ``id()`` of expressions, so every expression they saw is kept alive in ``_keep``
    (an id is never reused while the table lives).
    """

    def __init__(self) -> None:
        self._keep: list[Any] = []
        self._sid: dict[int, int] = {}
        self._table: dict[tuple[Any, ...], int] = {}
        self._rep: list[PrimExpr] = []
        self._keys: list[tuple[Any, ...]] = []
        self._digests: dict[int, int] = {}
        self._bufkeys: dict[int, tuple[int, bytes]] = {}

    def sid(self, expr: PrimExpr) -> int:
        """The structural id of ``expr`` (iterative; memoized per object)."""
        sids = self._sid
        s = sids.get(id(expr))
        if s is not None:
            return s
        stack = [expr]
        while stack:
            node = stack[-1]
            if id(node) in sids:
                stack.pop()
                continue
            kids = operands(node)
            depth = len(stack)
            for k in kids:
                if id(k) not in sids:
                    stack.append(k)
            if len(stack) != depth:
                continue
            stack.pop()
            self._register(node, tuple([sids[id(k)] for k in kids]))
        return sids[id(expr)]

    def _leaf_key(self, node: Any) -> tuple[Any, ...]:
        """What identifies ``node`` besides its kind and its operands' sids."""
        kind = type(node)
        if kind is IntImm:
            return (node.dtype, int(node.value))
        if kind is FloatImm:
            return (node.dtype, float(node.value).hex())
        if kind is Var:
            return (node.vid, node.name_hint, node.dtype)
        if kind is Cast:
            return (node.dtype,)
        if kind is Call:
            return (node.dtype, node.op)
        if kind is Ramp or kind is Broadcast:
            return (node.lanes,)
        if kind is BufferLoad:  # its buffer by value, encoded once per buffer object
            buf = node.buffer
            key = self._bufkeys.get(id(buf))
            if key is None:
                key = (buf.vid, msgspec.msgpack.encode(buf))
                self._bufkeys[id(buf)] = key
                self._keep.append(buf)
            return key
        return ()

    def _register(self, node: PrimExpr, kid_sids: tuple[int, ...]) -> int:
        key = (type(node), self._leaf_key(node), kid_sids)
        s = self._table.get(key)
        if s is None:
            s = len(self._rep)
            self._table[key] = s
            self._rep.append(node)
            self._keys.append(key)
        self._sid[id(node)] = s
        self._keep.append(node)
        return s

    def _make(
        self, kind: type, *kids: PrimExpr, leaf: tuple[Any, ...] = (), build: Callable[[], PrimExpr] | None = None
    ) -> PrimExpr:
        """The representative of ``kind(*kids)`` (hash-consed: an existing equal node is reused)."""
        kid_sids = tuple(map(self.sid, kids))
        s = self._table.get((kind, leaf, kid_sids))
        if s is not None:
            return self._rep[s]
        node = cast(PrimExpr, build() if build is not None else kind(*kids))
        self._register(node, kid_sids)
        return node

    def const(self, dtype: str, value: int | float) -> PrimExpr:
        """The representative immediate of ``value`` in scalar ``dtype``."""
        if dtype in FLOAT_DTYPES:
            v = float(value)
            return self._make(FloatImm, leaf=(dtype, v.hex()), build=lambda: FloatImm(dtype, v))
        iv = int(value)
        return self._make(IntImm, leaf=(dtype, iv), build=lambda: IntImm(dtype, iv))

    def ramp(self, base: PrimExpr, stride: PrimExpr, lanes: int) -> PrimExpr:
        """The representative ``Ramp(base, stride, lanes)``."""
        return self._make(Ramp, base, stride, leaf=(lanes,), build=lambda: Ramp(base, stride, lanes))

    def broadcast(self, value: PrimExpr, lanes: int) -> PrimExpr:
        """The representative ``Broadcast(value, lanes)``."""
        return self._make(Broadcast, value, leaf=(lanes,), build=lambda: Broadcast(value, lanes))

    def _digest(self, sid: int) -> int:
        """A deterministic 64-bit digest of the structure with id ``sid`` (iterative)."""
        digests = self._digests
        d = digests.get(sid)
        if d is not None:
            return d
        stack = [sid]
        while stack:
            s = stack[-1]
            if s in digests:
                stack.pop()
                continue
            kind, leaf, kid_sids = self._keys[s]
            missing = [k for k in kid_sids if k not in digests]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            h = _mix(0xCBF29CE484222325, zlib.crc32(kind.__name__.encode()))
            h = _mix(h, zlib.crc32(repr(leaf).encode()))
            for k in kid_sids:
                h = _mix(h, digests[k])
            digests[s] = h
        return digests[sid]

    def _order(self, sid: int) -> tuple[int, int, int]:
        """Canonical order of atoms: variables by id, then other atoms by digest."""
        node = self._rep[sid]
        if type(node) is Var:
            return (0, node.vid, sid)
        return (1, self._digest(sid), sid)
