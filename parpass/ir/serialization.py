"""PLACEHOLDER (being written): msgspec serialization of IR."""
from __future__ import annotations

import msgspec

from parpass.ir.node import BaseFunc
from parpass.ir.relax import Function
from parpass.ir.tir import PrimFunc

_enc = msgspec.msgpack.Encoder()
_dec = msgspec.msgpack.Decoder(Function | PrimFunc)


def encode_function(func: BaseFunc) -> bytes:
    return _enc.encode(func)


def decode_function(data: bytes) -> BaseFunc:
    return _dec.decode(data)


def to_bytes(x):  # type: ignore[no-untyped-def]
    raise NotImplementedError


def from_bytes(b):  # type: ignore[no-untyped-def]
    raise NotImplementedError


def save(mod, path):  # type: ignore[no-untyped-def]
    raise NotImplementedError


def load(path):  # type: ignore[no-untyped-def]
    raise NotImplementedError
