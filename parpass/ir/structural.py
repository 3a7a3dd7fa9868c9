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
"""

from __future__ import annotations

import enum
import hashlib
import threading
from bisect import bisect_right
from collections.abc import Mapping
from typing import Any

import msgspec

from parpass.ir import relax, tir
from parpass.ir.module import IRModule
from parpass.ir.node import GlobalVar, Node, Op
from parpass.ir.types import PrimType, TensorType, TupleType

__all__ = ["assert_structural_equal", "structural_equal", "structural_hash"]

# ---------------------------------------------------------------------------------------------------------------------
# node specs

# kinds of node classes
_GENERIC, _RVAR, _TVAR, _BUFFER, _OPAQUE, _INTIMM = range(6)
# roles of child fields
_CHILD, _DEF, _DEFS = range(3)

#: Classes whose subtrees hold no variables and no floats: compared with msgspec's ``==``, hashed by encoding.
_OPAQUE_CLASSES: tuple[type[Node], ...] = (TensorType, PrimType, TupleType, Op, GlobalVar, relax.Constant)
#: Fields that are not part of the structure.
_IGNORED: dict[type, frozenset[str]] = {
    relax.Var: frozenset({"vid", "name_hint"}),
    tir.Var: frozenset({"vid", "name_hint"}),
    tir.Buffer: frozenset({"vid", "name"}),
}
#: Child fields in walk order, with their role, where it differs from field order / plain children.
_STEPS: dict[type, tuple[tuple[str, int], ...]] = {
    relax.Param: (("var", _DEF), ("ty", _CHILD)),
    relax.Binding: (("value", _CHILD), ("var", _DEF), ("ty", _CHILD)),
    tir.For: (("min", _CHILD), ("extent", _CHILD), ("loop_var", _DEF), ("body", _CHILD)),
    tir.LetStmt: (("value", _CHILD), ("var", _DEF), ("body", _CHILD)),
    tir.Allocate: (("buffer", _DEF), ("body", _CHILD)),
    tir.PrimFunc: (("params", _DEFS), ("body", _CHILD)),
}

_OPAQUE_SET: frozenset[type] = frozenset()

_Spec = tuple[int, str, tuple[str, ...], tuple[tuple[str, int], ...]]
_SPECS: dict[type, _Spec] = {}
_SPECS_LOCK = threading.Lock()


def _tag_of(cls: type) -> str | None:
    tag = getattr(getattr(cls, "__struct_config__", None), "tag", None)
    return tag if isinstance(tag, str) else None


def _build_specs() -> dict[type, _Spec]:
    """``class -> (kind, tag, leaf fields, child steps in reverse walk order)`` for every node class."""
    specs: dict[type, _Spec] = {}
    stack: list[type] = [Node]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        tag = _tag_of(cls)
        if tag is None or cls in specs:
            continue
        fields: tuple[str, ...] = cls.__struct_fields__  # type: ignore[attr-defined]
        children: tuple[str, ...] = getattr(cls, "__child_fields__", ())
        ignored = _IGNORED.get(cls, frozenset())
        steps = _STEPS.get(cls, tuple((name, _CHILD) for name in fields if name in children))
        stepped = {name for name, _ in steps}
        leaves = tuple(f for f in fields if f not in stepped and f not in ignored)
        kind = _GENERIC
        if cls is relax.Var:
            kind = _RVAR
        elif cls is tir.Var:
            kind = _TVAR
        elif cls is tir.Buffer:
            kind = _BUFFER
        elif issubclass(cls, _OPAQUE_CLASSES):
            kind = _OPAQUE
        elif cls is tir.IntImm:
            kind = _INTIMM
        specs[cls] = (kind, tag, leaves, tuple(reversed(steps)))
    return specs


def _specs(refresh: bool = False) -> dict[type, _Spec]:
    """The specs of all node classes, built on first use (``refresh``: again, for classes defined since)."""
    global _OPAQUE_SET
    if refresh or not _SPECS:
        with _SPECS_LOCK:
            if refresh or not _SPECS:
                built = _build_specs()
                _OPAQUE_SET = frozenset(cls for cls, spec in built.items() if spec[0] == _OPAQUE)
                _SPECS.update(built)
    return _SPECS


# ---------------------------------------------------------------------------------------------------------------------
# leaf values

_NAN = ("\0nan",)
_EMPTY_DICT: tuple[str, tuple[Any, ...]] = ("\0dict", ())
_SIMPLE = frozenset({str, int, type(None)})


def _norm_scalar(v: Any) -> Any:
    """A canonical token for a scalar leaf: equal under ``==`` (NaN == NaN) <=> equal tokens."""
    t = type(v)
    if t is str or t is int or v is None or t is bytes:
        return v
    if t is float:
        if v != v:
            return _NAN
        return int(v) if v.is_integer() else v
    if t is bool:
        return int(v)
    if isinstance(v, enum.Enum):
        return _norm_scalar(v.value)
    # other subclasses of the plain types compare as their base type
    if isinstance(v, str):
        return str(v)
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return _norm_scalar(float(v))
    if isinstance(v, bytes):
        return bytes(v)
    raise TypeError(f"structural comparison does not support values of type {t.__name__}: {v!r}")


def _sort_key(token: Any) -> tuple[int, Any]:
    if token is None:
        return (0, 0)
    if isinstance(token, (int, float)):
        return (1, token)
    if isinstance(token, str):
        return (2, token)
    if isinstance(token, bytes):
        return (3, token)
    return (4, repr(token))


def _norm(value: Any) -> Any:
    """A canonical token for a plain-data value (attributes): nested lists, ``("\\0dict", pairs)`` for dicts.

    Iterative: containers are rebuilt bottom-up from an explicit stack of frames.
    """
    t = type(value)
    if t in _SIMPLE:
        return value
    if t is dict:
        if not value:
            return _EMPTY_DICT
        if all(type(k) is str and type(v) in _SIMPLE for k, v in value.items()):
            return ("\0dict", tuple(sorted(value.items())))
    if not isinstance(value, (list, tuple, dict)):
        return value if isinstance(value, Node) else _norm_scalar(value)
    # a frame: (items, index iterator, output list, is dict, normalized keys)
    result: list[Any] = []
    frames: list[tuple[list[Any], Any, list[Any], bool, list[Any]]] = []

    def open_frame(container: Any, out: list[Any]) -> None:
        if isinstance(container, dict):
            keyed = sorted(((_norm_scalar(k), v) for k, v in container.items()), key=lambda kv: _sort_key(kv[0]))
            frames.append(([v for _, v in keyed], iter(range(len(keyed))), out, True, [k for k, _ in keyed]))
        else:
            frames.append((list(container), iter(range(len(container))), out, False, []))

    open_frame(value, result)
    done: Any = None
    while frames:
        items, indices, out, is_dict, keys = frames[-1]
        index = next(indices, None)
        if index is None:
            frames.pop()
            built: Any = ("\0dict", tuple(zip(keys, out, strict=True))) if is_dict else out
            if frames:
                frames[-1][2].append(built)
            else:
                done = built
            continue
        item = items[index]
        if isinstance(item, (list, tuple, dict)) and item:
            open_frame(item, [])
        elif isinstance(item, dict):
            out.append(_EMPTY_DICT)
        elif isinstance(item, (list, tuple)):
            out.append([])
        elif isinstance(item, Node) or type(item) in _SIMPLE:
            out.append(item)
        else:
            out.append(_norm_scalar(item))
    return done


# ---------------------------------------------------------------------------------------------------------------------
# the canonical stream

_DEF_MARK = object()
_RDEF_MARK = object()


class _Trace:
    """What a tracked walk records to explain a difference: where each item's tokens start, and its path."""

    __slots__ = ("def_paths", "paths", "starts", "subjects")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.paths: list[Any] = []
        self.subjects: list[Any] = []
        self.def_paths: dict[int, Any] = {}


def _emit(root: Any, map_free_vars: bool, trace: _Trace | None = None, stop_at: int = -1) -> list[Any]:
    """The canonical token stream of ``root`` (see the module docstring), built without recursion.

    With a ``trace``, also records where each item's tokens start and its path,
    and stops once the stream is longer than ``stop_at`` (when that is >= 0).
    """
    specs = _specs()
    out: list[Any] = []
    append = out.append
    stack: list[Any] = [root]
    pop = stack.pop
    push = stack.append
    track = trace is not None
    paths: list[Any] = [()]  # parallel to ``stack`` when tracking
    path: Any = ()
    rnum: dict[int, int] = {}
    tnum: dict[int, int] = {}
    bnum: dict[int, int] = {}
    counter = 0
    simple = _SIMPLE
    opaque = _OPAQUE_SET
    rvar_cls = relax.Var
    while stack:
        node = pop()
        if track:
            if 0 <= stop_at < len(out):
                break
            path = paths.pop()
        if node is _RDEF_MARK:  # one dataflow variable defined (untracked walks only)
            append("%def")
            rnum[pop().vid] = counter
            counter += 1
            continue
        if node is _DEF_MARK:
            # a group of variables defined together: (var, ...) with their paths; buffer shapes are walked after
            group = pop()
            group_paths = paths.pop() if track else ()
            later: list[tuple[Any, Any]] = []
            for index, target in enumerate(group):
                tpath = group_paths[index] if track else ()
                spec = specs.get(type(target))
                kind = spec[0] if spec is not None else _GENERIC
                if track:
                    assert trace is not None
                    trace.starts.append(len(out))
                    trace.paths.append(tpath)
                    trace.subjects.append(target)
                    trace.def_paths[counter] = tpath
                if kind == _RVAR:
                    append("%def")
                    rnum[target.vid] = counter
                elif kind == _TVAR:
                    append("%tdef")
                    append(target.dtype)
                    tnum[target.vid] = counter
                elif kind == _BUFFER:
                    append("%bdef")
                    append(target.dtype)
                    bnum[target.vid] = counter
                    append(-1 - len(target.shape))
                    append(-1 - len(target.strides))
                    later.extend(((e, (tpath, "shape", i)) for i, e in enumerate(target.shape)))
                    later.extend(((e, (tpath, "strides", i)) for i, e in enumerate(target.strides)))
                else:  # not a variable: an ill-formed definition site, compared as an ordinary child
                    append("%notvar")
                    later.append((target, tpath))
                counter += 1
            for expr, epath in reversed(later):
                push(expr)
                if track:
                    paths.append(epath)
            continue
        if track:
            assert trace is not None
            trace.starts.append(len(out))
            trace.paths.append(path)
            trace.subjects.append(node)
        spec = specs.get(type(node))
        if spec is None and isinstance(node, Node) and _tag_of(type(node)) is not None:
            spec = _specs(refresh=True).get(type(node))  # a node class defined after the specs were built
            opaque = _OPAQUE_SET
        if spec is None:
            if isinstance(node, (tuple, list)) and any(isinstance(x, Node) for x in node):
                append("%seq")
                append(len(node))
                stack.extend(reversed(node))
                if track:
                    paths.extend((path, "", i) for i in reversed(range(len(node))))
            else:
                append(_norm(node))
            continue
        kind = spec[0]
        if kind == _GENERIC:
            append(spec[1])
            for name in spec[2]:
                v = getattr(node, name)
                if type(v) in simple:
                    append(v)
                elif type(v) is dict and not v:
                    append(_EMPTY_DICT)
                else:
                    append(_norm(v))
            for name, role in spec[3]:
                v = getattr(node, name)
                if role == _CHILD:
                    if type(v) is tuple:
                        append(-1 - len(v))
                        stack.extend(reversed(v))
                        if track:
                            paths.extend((path, name, i) for i in reversed(range(len(v))))
                    elif v is None:
                        append(None)
                    elif type(v) in opaque:
                        append(v)
                    else:
                        push(v)
                        if track:
                            paths.append((path, name, None))
                elif role == _DEF:
                    if track:
                        push((v,))
                        push(_DEF_MARK)
                        paths.append(((path, name, None),))
                        paths.append(None)
                    elif type(v) is rvar_cls:  # the common case, without the group machinery
                        push(v)
                        push(_RDEF_MARK)
                    else:
                        push((v,))
                        push(_DEF_MARK)
                else:  # _DEFS: a tuple of variables defined together, before any of their shapes is walked
                    append(-1 - len(v))
                    push(v)
                    push(_DEF_MARK)
                    if track:
                        paths.append(tuple((path, name, i) for i in range(len(v))))
                        paths.append(None)
        elif kind == _RVAR:
            vid = node.vid
            n = rnum.get(vid)
            if n is None and map_free_vars:
                n = rnum[vid] = counter
                if track:
                    assert trace is not None
                    trace.def_paths[counter] = path
                counter += 1
            if n is None:
                append("%free")
                append(vid)
            else:
                append("%v")
                append(n)
        elif kind == _TVAR:
            vid = node.vid
            n = tnum.get(vid)
            if n is None and map_free_vars:
                n = tnum[vid] = counter
                if track:
                    assert trace is not None
                    trace.def_paths[counter] = path
                counter += 1
            if n is None:
                append("%tfree")
                append(vid)
            else:
                append("%tv")
                append(n)
            append(node.dtype)
        elif kind == _BUFFER:
            vid = node.vid
            n = bnum.get(vid)
            if n is not None:
                append("%b")
                append(n)
                append(node.dtype)
                continue
            # a free buffer: its shape and strides are compared at every use
            if map_free_vars:
                n = bnum[vid] = counter
                if track:
                    assert trace is not None
                    trace.def_paths[counter] = path
                counter += 1
                append("%bmap")
                append(n)
            else:
                append("%bfree")
                append(vid)
            append(node.dtype)
            append(-1 - len(node.shape))
            append(-1 - len(node.strides))
            stack.extend(reversed(node.strides))
            stack.extend(reversed(node.shape))
            if track:
                paths.extend((path, "strides", i) for i in reversed(range(len(node.strides))))
                paths.extend((path, "shape", i) for i in reversed(range(len(node.shape))))
        elif kind == _INTIMM:  # var-free like the opaque nodes, once its value is a plain int
            v = node.value
            if type(v) is int:
                append(node)
            else:
                v = _norm_scalar(v)
                if type(v) is int:  # True, 2.0: the IntImm they are == to
                    append(tir.IntImm(node.dtype, v))
                else:
                    append(spec[1])
                    append(node.dtype)
                    append(v)
        else:  # _OPAQUE
            append(node)
    return out


def _digest(tokens: list[Any]) -> int:
    """A 64-bit BLAKE2b digest of the msgpack encoding of ``tokens`` (stable across processes)."""
    try:
        data = msgspec.msgpack.encode(tokens)
    except OverflowError:  # ints beyond 64 bits: encode them as text
        data = msgspec.msgpack.encode(_bigints_as_text(tokens))
    except RecursionError:  # deep opaque subtrees or attribute values
        from parpass.ir.serialization import _encode_with

        data = _encode_with(msgspec.msgpack.encode, tokens, "IR for hashing")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def _bigints_as_text(tokens: list[Any]) -> list[Any]:
    """``tokens`` with ints msgpack cannot hold (beyond 64 bits) written as text."""
    out: list[Any] = []
    for tok in tokens:
        if type(tok) is int and not -(2**63) <= tok < 2**64:
            out.append(("\0int", str(tok)))
        elif type(tok) is tir.IntImm and not -(2**63) <= tok.value < 2**64:
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
            if type(item) is int and not -(2**63) <= item < 2**64:
                dst.append(("\0int", str(item)))
            elif isinstance(item, (list, tuple)):
                sub: list[Any] = []
                dst.append(sub)
                stack.append((item, sub))
            else:
                dst.append(item)
    return root


# ---------------------------------------------------------------------------------------------------------------------
# public API


def _attrs_token(attrs: Mapping[str, Any]) -> Any:
    return _norm(dict(attrs))


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
    return check_streams and _emit(a, map_free_vars) == _emit(b, map_free_vars)


def _function_of(mod: IRModule, name: str) -> Any:
    """Function ``name`` of ``mod``; a lazily held one is decoded for the caller only and stays lazy in ``mod``."""
    if mod.is_decoded(name):
        return mod[name]
    from parpass.ir.serialization import decode_function

    return decode_function(mod.encoded_function(name))


def _module_functions_equal(a: IRModule, b: IRModule, name: str, map_free_vars: bool) -> bool:
    # Identical bytes imply equal functions; comparing them avoids decoding a lazily held side
    # (encoding the decoded side is cheaper than decoding, and the bytes stay cached in its slot).
    if (not a.is_decoded(name) or not b.is_decoded(name)) and a.encoded_function(name) == b.encoded_function(name):
        return True
    return _func_equal(_function_of(a, name), _function_of(b, name), map_free_vars)


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
    value = _digest(_emit(_function_of(mod, name), map_free_vars))
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
        return _digest(["%module", _attrs_token(x.attrs), funcs])
    return _digest(_emit(x, map_free_vars))


# ---------------------------------------------------------------------------------------------------------------------
# explaining a difference


def _render_path(path: Any) -> str:
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


def _brief(obj: Any, limit: int = 160) -> str:
    try:
        text = str(obj)
    except Exception:  # the printer must not hide the difference
        text = f"<{type(obj).__name__}>"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value) if not isinstance(value, Node) else _brief(value, limit)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _leaf_diff(x: Any, y: Any) -> str | None:
    """The first own field where two nodes of one class differ, as ``Class field a != b``.

    Child nodes that are walked separately are skipped (a difference inside them
    is reported at the child); tuple lengths, None-ness and var-free children are not.
    """
    cls = type(x).__name__
    if not isinstance(x, msgspec.Struct):
        if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)) and len(x) != len(y):
            return f"length {len(x)} != {len(y)}"
        return f"{_short(x)} != {_short(y)}"
    fields: tuple[str, ...] = type(x).__struct_fields__
    ignored = _IGNORED.get(type(x), frozenset())
    opaque = _OPAQUE_SET
    # raw data last: "Constant dtype 'float32' != 'int32'" says more than the bytes
    for name in sorted(fields, key=lambda f: isinstance(getattr(x, f), bytes)):
        if name in ignored:
            continue
        xv, yv = getattr(x, name), getattr(y, name)
        if type(xv) is tuple and type(yv) is tuple:
            if len(xv) != len(yv):
                return f"{cls} {name}: length {len(xv)} != {len(yv)}"
            plain = type(x) in opaque or not any(isinstance(item, Node) for item in xv)
            if plain and _norm(xv) != _norm(yv):
                return f"{cls} {name} {_short(xv)} != {_short(yv)}"
            continue
        if (xv is None) != (yv is None):
            return f"{cls} {name} {_short(xv)} != {_short(yv)}"
        if isinstance(xv, Node) and isinstance(yv, Node):
            if type(xv) is not type(yv) and (type(xv) in opaque or type(yv) in opaque):
                return f"{cls} {name}: {type(xv).__name__} != {type(yv).__name__}"
            if type(xv) in opaque and xv != yv:
                return f"{cls} {name} {_short(xv)} != {_short(yv)}"
            continue
        if _norm(xv) != _norm(yv):
            return f"{cls} {name} {_short(xv)} != {_short(yv)}"
    return None


def _var_text(node: Any, tokens: list[Any], trace: _Trace, k: int) -> str:
    name = getattr(node, "name_hint", None) or getattr(node, "name", "?")
    start = trace.starts[k]
    marker = tokens[start] if start < len(tokens) else None
    number = tokens[start + 1] if start + 1 < len(tokens) else None
    if marker in ("%v", "%tv", "%b", "%bmap") and number in trace.def_paths:
        where = _render_path(trace.def_paths[number]) or "the root"
        return f"{name!s} (defined at {where})"
    if marker in ("%def", "%tdef", "%bdef"):
        return f"{name!s} (defined here)"
    return f"{name!s} (free, vid {getattr(node, 'vid', '?')})"


def _first_difference(sa: list[Any], sb: list[Any]) -> int:
    """The first index where two token streams differ (the shorter length if one is a prefix)."""
    limit = min(len(sa), len(sb))
    step = 4096
    for lo in range(0, limit, step):
        hi = min(lo + step, limit)
        if sa[lo:hi] != sb[lo:hi]:  # compared in C; then find the token within the chunk
            return next(i for i in range(lo, hi) if not _token_eq(sa[i], sb[i]))
    return limit


def _mismatch(a: Any, b: Any, map_free_vars: bool) -> int | None:
    """None if ``a`` and ``b`` are structurally equal, else the index of the first differing token."""
    if _func_equal(a, b, map_free_vars, check_streams=False):
        return None
    sa, sb = _emit(a, map_free_vars), _emit(b, map_free_vars)
    if sa == sb:
        return None
    return _first_difference(sa, sb)


def _explain(a: Any, b: Any, map_free_vars: bool, where: str, index: int) -> str:
    """A readable account of the first place where ``a`` and ``b`` differ: token ``index`` of their streams."""
    ta, tb = _Trace(), _Trace()
    sa, sb = _emit(a, map_free_vars, ta, stop_at=index + 1), _emit(b, map_free_vars, tb, stop_at=index + 1)
    limit = min(len(sa), len(sb))
    k = max(bisect_right(ta.starts, index) - 1, 0)
    kb = min(k, len(tb.subjects) - 1)
    x = ta.subjects[k] if ta.subjects else a
    y = tb.subjects[kb] if tb.subjects else b
    path = _render_path(ta.paths[k]) if ta.paths else ""
    place = (f"{where}: " if where else "") + (f"{path}: " if path else "")
    if type(x) is not type(y):
        what = f"node type {type(x).__name__} != {type(y).__name__}"
    elif isinstance(x, (relax.Var, tir.Var, tir.Buffer)):
        leaf = _leaf_diff(x, y) if isinstance(x, (tir.Var, tir.Buffer)) else None
        if leaf:
            what = leaf
        else:
            kind = "buffer" if isinstance(x, tir.Buffer) else "variable"
            what = f"{kind} {_var_text(x, sa, ta, k)} != {_var_text(y, sb, tb, kb)}"
    else:
        what = _leaf_diff(x, y) or f"{type(x).__name__} differs"
    if index >= limit:
        what += " (one side has more IR)"
    return f"{place}{what}\n  lhs: {_brief(x)}\n  rhs: {_brief(y)}"


def _token_eq(x: Any, y: Any) -> bool:
    try:
        return bool(x == y)
    except RecursionError:
        return False


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
            key = next(
                k for k in keys if k not in a.attrs or k not in b.attrs or _norm(a.attrs[k]) != _norm(b.attrs[k])
            )
            missing = "<missing>"
            raise AssertionError(
                f"module attrs differ at {key!r}: {a.attrs.get(key, missing)!r} != {b.attrs.get(key, missing)!r}"
            )
        for name in a.names():
            if _module_functions_equal(a, b, name, map_free_vars):
                continue
            fa, fb = _function_of(a, name), _function_of(b, name)
            index = _mismatch(fa, fb, map_free_vars)
            if index is not None:
                raise AssertionError(_explain(fa, fb, map_free_vars, f"@{name}", index))
        return
    if isinstance(a, IRModule) or isinstance(b, IRModule):
        raise AssertionError(f"cannot compare {type(a).__name__} with {type(b).__name__}")
    index = _mismatch(a, b, map_free_vars)
    if index is not None:
        raise AssertionError(_explain(a, b, map_free_vars, "", index))
