"""What a function of a module is known by without reading it: what instruments key their caches on.

An instrument that keeps something per function (its problems, its text) must
know a function again in the next module it is given. Decoding it to compare
would cost what the cache saves, so a function is known by the content digest of
its bytes (a module an executor's workers produced holds them, and a module read
from a file gets them here) or as the very object (held decoded): equal digests,
or the same object, are the same function.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from parpass.ir.digest import digest_of

if TYPE_CHECKING:
    from parpass.ir.module import IRModule
    from parpass.ir.node import BaseFunc

__all__ = ["Version", "function_versions", "same_version"]

#: A function's digest and the function object, where the module has them (at least one of the two).
Version = tuple["bytes | None", "BaseFunc | None"]


def function_versions(mod: IRModule) -> dict[str, Version]:
    """Every function of ``mod`` by name, in module order, with what it is known by; the digest of bytes held
    without one is computed here and recorded in ``mod`` (a cache, as an executor records it)."""
    versions = {name: (mod.digest(name), mod.held_function(name)) for name in mod.names()}
    unknown = [name for name, (digest, func) in versions.items() if digest is None and func is None]
    if unknown:
        digests = [digest_of(mod.encoded_buffer(name)) for name in unknown]
        mod.record_digests(unknown, digests)
        versions.update((name, (digest, None)) for name, digest in zip(unknown, digests, strict=True))
    return versions


def same_version(then: Version, now: Version) -> bool:
    """Whether ``then`` and ``now`` are the same function (equal digests, or the same object)."""
    digest, func = then
    return (digest is not None and digest == now[0]) or (func is not None and func is now[1])
