"""Structural equality and hashing of IR, modulo variable renaming (TVM's names).

``structural_equal(a, b)`` is true when ``a`` and ``b`` are the same IR up to
the ids and name hints of their variables (alpha-equivalence);
``structural_hash`` is consistent with it and the same in every process;
``assert_structural_equal`` names the first place where two pieces of IR differ.

How it works. A pre-order walk (explicit stack, no recursion) turns IR into a
flat *canonical token stream*: each node contributes its tag and its leaf
fields, each tuple its length, and each variable is replaced by the number of
its definition in walk order (a de Bruijn-like numbering), so ids and names
vanish. Two pieces of IR are structurally equal exactly when their streams are
equal, and the hash is a BLAKE2b digest of the stream encoded as msgpack, so
hash and equality agree by construction and the hash does not depend on the
process (no ``hash()`` of ``str``). Subtrees that cannot contain variables
(types, ops, global vars, constants) enter the stream as the node object itself
and are compared and encoded by msgspec in C.

Definition sites: dataflow ``Param.var`` and ``Binding.var`` (after the bound
value, so the value sees the outer scope), loop-level ``For.loop_var`` (after
``min``/``extent``), ``LetStmt.var`` (after its value), ``Allocate.buffer`` and
``PrimFunc.params`` (all parameters at once, so a buffer shape may use any
scalar parameter). A use compares by the definition it refers to; a tir ``Var``
use also compares its dtype, a ``Buffer`` use its dtype (shape and strides are
compared where the buffer is defined). A variable with no definition in the
compared IR is *free*: it compares by its ``vid`` unless ``map_free_vars=True``,
which pairs free variables by order of first use. Name hints are ignored;
``GlobalVar`` names are not.

Leaf values compare as Python ``==`` does (so ``1 == 1.0 == True`` and
``-0.0 == 0.0``), except that NaN equals NaN; attribute dicts compare
regardless of insertion order, and lists equal tuples with the same items.

Modules are equal when they have the same function names in the same order,
equal attributes, and equal functions. Module hashes memoize function hashes by
a digest of each function's msgpack bytes (:meth:`IRModule.encoded_function`),
so rehashing a module after a pass only walks the functions the pass changed.

The parts: :mod:`.specs` (what is known about each node class), :mod:`.tokens`
(leaf values and the digest), :mod:`.stream` (the walk), :mod:`.explain`
(naming the first difference).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping
from typing import Any

from parpass.ir.module import IRModule
from parpass.ir.node import Node
from parpass.ir.serialization import function_of
from parpass.ir.structural.explain import explain, first_difference
from parpass.ir.structural.stream import emit
from parpass.ir.structural.tokens import digest, norm

__all__ = ["assert_structural_equal", "structural_equal", "structural_hash"]


def _attrs_token(attrs: Mapping[str, Any]) -> Any:
    return norm(dict(attrs))


def _func_equal(a: Any, b: Any, map_free_vars: bool, check_streams: bool = True) -> bool:
    """Structural equality of two nodes (or sequences of nodes); only the cheap checks unless ``check_streams``."""
    if a is b:
        return True
    if isinstance(a, Node) and type(a) is type(b):
        try:
            if a == b:  # field-wise equal (same ids) implies structurally equal
                return True
        except RecursionError:  # msgspec compares recursively; the streams below do not
            pass
    return check_streams and emit(a, map_free_vars) == emit(b, map_free_vars)


def _module_functions_equal(a: IRModule, b: IRModule, name: str, map_free_vars: bool) -> bool:
    # Identical bytes imply equal functions; comparing them avoids decoding a lazily held side
    # (encoding the decoded side is cheaper than decoding, and the bytes stay cached in its slot).
    if (not a.is_decoded(name) or not b.is_decoded(name)) and a.encoded_function(name) == b.encoded_function(name):
        return True
    return _func_equal(function_of(a, name), function_of(b, name), map_free_vars)


def structural_equal(a: Any, b: Any, map_free_vars: bool = False) -> bool:
    """Whether ``a`` and ``b`` (nodes, functions or IRModules) are the same IR up to variable renaming.

    ``map_free_vars``: pair variables not defined inside ``a``/``b`` by order of
    first use instead of requiring the same ``vid``.
    """
    if isinstance(a, IRModule) or isinstance(b, IRModule):
        if not (isinstance(a, IRModule) and isinstance(b, IRModule)):
            return False
        if a.names() != b.names() or _attrs_token(a.attrs) != _attrs_token(b.attrs):
            return False
        return all(_module_functions_equal(a, b, name, map_free_vars) for name in a.names())
    return _func_equal(a, b, map_free_vars)


_HASH_CACHE: dict[tuple[bytes, bool], int] = {}
_HASH_CACHE_LIMIT = 1 << 16
_HASH_CACHE_LOCK = threading.Lock()


def _function_hash_cached(mod: IRModule, name: str, map_free_vars: bool) -> int:
    """The structural hash of one function, memoized by a digest of its msgpack bytes."""
    key = (hashlib.blake2b(mod.encoded_function(name), digest_size=16).digest(), map_free_vars)
    found = _HASH_CACHE.get(key)
    if found is not None:
        return found
    value = digest(emit(function_of(mod, name), map_free_vars))
    with _HASH_CACHE_LOCK:
        if len(_HASH_CACHE) >= _HASH_CACHE_LIMIT:
            for old in list(_HASH_CACHE)[: _HASH_CACHE_LIMIT // 4]:
                _HASH_CACHE.pop(old, None)
        _HASH_CACHE[key] = value
    return value


def structural_hash(x: Any, map_free_vars: bool = False) -> int:
    """A 64-bit hash of ``x`` consistent with :func:`structural_equal`, the same in every process."""
    if isinstance(x, IRModule):
        funcs = [[name, _function_hash_cached(x, name, map_free_vars)] for name in x.names()]
        return digest(["%module", _attrs_token(x.attrs), funcs])
    return digest(emit(x, map_free_vars))


# ---------------------------------------------------------------------------------------------------------------------
# explaining a difference


def _mismatch(a: Any, b: Any, map_free_vars: bool) -> int | None:
    """None if ``a`` and ``b`` are structurally equal, else the index of the first differing token."""
    if _func_equal(a, b, map_free_vars, check_streams=False):
        return None
    sa, sb = emit(a, map_free_vars), emit(b, map_free_vars)
    if sa == sb:
        return None
    return first_difference(sa, sb)


def assert_structural_equal(a: Any, b: Any, map_free_vars: bool = False) -> None:
    """Raise AssertionError naming the first place where ``a`` and ``b`` differ structurally.

    The message starts with the path of the difference (``@main: body.bindings[3].value.args[1]:``)
    and what differs there, followed by both sides in brief.
    """
    if isinstance(a, IRModule) and isinstance(b, IRModule):
        if a.names() != b.names():
            only_a = [n for n in a.names() if n not in b]
            only_b = [n for n in b.names() if n not in a]
            detail = (
                f"only in lhs: {only_a}; only in rhs: {only_b}" if only_a or only_b else "same names, different order"
            )
            raise AssertionError(f"module function names differ: {detail}\n  lhs: {a.names()}\n  rhs: {b.names()}")
        if _attrs_token(a.attrs) != _attrs_token(b.attrs):
            keys = list(dict.fromkeys([*a.attrs, *b.attrs]))
            key = next(k for k in keys if k not in a.attrs or k not in b.attrs or norm(a.attrs[k]) != norm(b.attrs[k]))
            missing = "<missing>"
            raise AssertionError(
                f"module attrs differ at {key!r}: {a.attrs.get(key, missing)!r} != {b.attrs.get(key, missing)!r}"
            )
        for name in a.names():
            if _module_functions_equal(a, b, name, map_free_vars):
                continue
            fa, fb = function_of(a, name), function_of(b, name)
            index = _mismatch(fa, fb, map_free_vars)
            if index is not None:
                raise AssertionError(explain(fa, fb, map_free_vars, f"@{name}", index))
        return
    if isinstance(a, IRModule) or isinstance(b, IRModule):
        raise AssertionError(f"cannot compare {type(a).__name__} with {type(b).__name__}")
    index = _mismatch(a, b, map_free_vars)
    if index is not None:
        raise AssertionError(explain(a, b, map_free_vars, "", index))
