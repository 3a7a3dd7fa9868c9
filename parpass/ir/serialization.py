"""msgspec serialization of IR: bare function bytes, enveloped modules, files.

Three layers:

* :func:`encode_function` / :func:`decode_function` -- the bare msgpack of one
  function node, no envelope. IRModule's lazy slots and the parallel executor
  move functions as these bytes, so they are a single call into msgspec.
* :func:`to_bytes` / :func:`from_bytes` -- a module or a single function inside
  an envelope that carries a magic marker and the format version::

      ["parpass", 1, "module", {module attrs}, [[name, <function>], ...]]
      ["parpass", 1, "function", <function>]

  A module is encoded from each function's cached bytes
  (:meth:`IRModule.encoded_function`, embedded with ``msgspec.Raw``), so nothing
  is encoded twice, and decoded back into lazily held functions
  (:meth:`IRModule.set_encoded_function`). Re-encoding a decoded module gives
  identical bytes.
* :func:`save` / :func:`load` -- files; the format comes from the extension
  (:data:`FORMATS`; ``.msgpack``/``.mpk``/``.bin`` for msgpack, ``.json`` for the
  same envelope as JSON). Writes are atomic.

What :func:`from_bytes` checks before it returns (``validate=True``, the
default, and always for :func:`load`): the envelope, magic and version; that
names are strings and unique; that every function slot is well-formed and
decodes as a typed ``Function | PrimFunc`` (node tags, field types). The typed
decode is thrown away and the function is kept as its bytes, decoded again on
first access: on a 2,000-function module the typed check costs about as much as
one full decode (~0.1 s), still several times faster than unpickling, and a
module whose functions only travel to worker processes is never held decoded.
With ``validate=False`` only the msgpack framing of each slot is checked
(several times cheaper); a slot that is well-formed but not IR then raises
:class:`~parpass.errors.IRFormatError` when it is first read.

Every bad input raises :class:`~parpass.errors.IRFormatError` (a ``ValueError``)
naming the source and what is wrong, chained to msgspec's error; nothing is
returned half-built.

msgspec encodes and decodes nested containers recursively, one C recursion
level per nested node or tuple. IR deeper than the interpreter's recursion
limit is (de)serialized with the limit raised for the call (restored
afterwards), and, beyond what the calling thread's stack safely holds (8,000
levels), in a helper thread with a stack sized for it (up to 200,000 levels).
On Python 3.12 and later, CPython caps C recursion itself, independently of
``sys.setrecursionlimit``; IR nested deeper than that cap fails there with a
clear :class:`~parpass.errors.IRError` instead.
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import re
import secrets
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar, Union, cast

import msgspec

from parpass.errors import IRError, IRFormatError, closest_names, format_names
from parpass.ir.module import IRModule
from parpass.ir.node import BaseFunc, Node, scalar_problem, value_problem
from parpass.ir.relax import Function
from parpass.ir.tir import PrimFunc, buffer_sharing

__all__ = [
    "FORMATS",
    "FORMAT_MAGIC",
    "FORMAT_VERSION",
    "SUPPORTED_VERSIONS",
    "IRFileNotFoundError",
    "check_loaded",
    "decode_function",
    "encode_function",
    "encoding_problem",
    "from_bytes",
    "from_json",
    "load",
    "register_format",
    "save",
    "to_bytes",
    "to_json",
]

#: First element of every envelope.
FORMAT_MAGIC = "parpass"
#: Version written by this parpass.
FORMAT_VERSION = 1
#: Versions this parpass reads.
SUPPORTED_VERSIONS: tuple[int, ...] = (1,)

IRObject = Union[IRModule, BaseFunc]
_FuncType = Union[Function, PrimFunc]

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(_FuncType)
_json_encoder = msgspec.json.Encoder()
_json_decoder = msgspec.json.Decoder(_FuncType)

# The msgpack envelope starts with a fixarray header and the fixstr "parpass".
_MSGPACK_MAGIC = msgspec.msgpack.encode(FORMAT_MAGIC)
_JSON_MAGIC_RE = re.compile(rb'\s*\[\s*"parpass"\s*,')


class IRFileNotFoundError(IRFormatError, FileNotFoundError):
    """:func:`load` of a path that does not exist (both an IRFormatError and a FileNotFoundError)."""


# ---------------------------------------------------------------------------------------------------------------------
# deep IR: raise the recursion limit, or use a thread with a big stack

#: Nesting levels trusted to the calling thread's own C stack (msgspec needs ~350 bytes per level).
_IN_THREAD_LEVELS = 8_000
#: Deepest nesting (de)serialized at all, in a helper thread with a stack sized for it.
_MAX_LEVELS = 200_000
_STACK_BYTES_PER_LEVEL = 640

_T = TypeVar("_T")


@contextlib.contextmanager
def _recursion_limit(limit: int) -> Iterator[None]:
    old = sys.getrecursionlimit()
    if limit > old:
        sys.setrecursionlimit(limit)
    try:
        yield
    finally:
        if limit > old:
            sys.setrecursionlimit(old)


def _call_deep(fn: Callable[[Any], _T], arg: Any, levels: int | None) -> _T:
    """``fn(arg)`` with room for ``levels`` more nesting levels (``None``: unknown, up to the maximum).

    Called only after ``fn(arg)`` hit the recursion limit. Moderate depths run
    here (in the main thread) with a raised limit; deeper ones, and calls from
    other threads, in a helper thread whose stack fits them.
    """
    if levels is not None and levels > _MAX_LEVELS:
        raise IRError(f"IR nested {levels} levels deep cannot be serialized (at most {_MAX_LEVELS})")
    # Only the main thread's stack size is known (the process's, 8 MiB on Linux); other threads go to a helper.
    in_main = threading.current_thread() is threading.main_thread()
    if in_main and (levels is None or levels <= _IN_THREAD_LEVELS):
        with contextlib.suppress(RecursionError), _recursion_limit(sys.getrecursionlimit() + _IN_THREAD_LEVELS):
            return fn(arg)
    budget = _MAX_LEVELS if levels is None else levels + 1_000
    result: list[_T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            with _recursion_limit(budget + 1_000):
                result.append(fn(arg))
        except BaseException as exc:  # re-raised in the calling thread
            failure.append(exc)

    old_size = threading.stack_size()
    threading.stack_size(budget * _STACK_BYTES_PER_LEVEL + (16 << 20))
    try:
        worker = threading.Thread(target=run, name="parpass-deep-serialization", daemon=True)
        worker.start()
    finally:
        threading.stack_size(old_size)
    worker.join()
    if failure:
        if isinstance(failure[0], RecursionError):
            raise IRError(
                f"IR nested more than {budget} levels deep cannot be (de)serialized"
                f" (or Python {sys.version.split()[0]} caps C recursion below that)"
            ) from failure[0]
        raise failure[0]
    return result[0]


def _deep_call(fn: Callable[[Any], _T], arg: Any) -> _T:
    """``fn(arg)``, retried with room for deep nesting if it hits the recursion limit."""
    try:
        return fn(arg)
    except RecursionError:
        return _call_deep(fn, arg, None)


def _nesting_depth(root: object) -> int:
    """Nesting levels of structs and containers under ``root`` (what msgspec recurses on), iteratively."""
    best = 0
    stack: list[tuple[object, int]] = [(root, 1)]
    while stack:
        obj, depth = stack.pop()
        if depth > best:
            best = depth
        if isinstance(obj, msgspec.Struct):
            stack.extend((getattr(obj, f), depth + 1) for f in obj.__struct_fields__)
        elif isinstance(obj, (tuple, list)):
            stack.extend((item, depth + 1) for item in obj)
        elif isinstance(obj, dict):
            stack.extend((item, depth + 1) for item in obj.values())
    return best


def encode_with(encode: Callable[[Any], bytes], obj: object, what: str) -> bytes:
    """``encode(obj)``, also for objects nested deeper than the recursion limit; errors name ``what``."""
    try:
        return encode(obj)
    except RecursionError:
        return _call_deep(encode, obj, _nesting_depth(obj) + 16)
    except (TypeError, OverflowError) as exc:
        raise type(exc)(f"cannot serialize {what}: {exc}") from exc


# ---------------------------------------------------------------------------------------------------------------------
# bare function bytes (hot path)


def encode_function(func: BaseFunc) -> bytes:
    """The msgpack bytes of one function node, with no envelope (what IRModule slots cache)."""
    try:
        return _encoder.encode(func)
    except RecursionError:
        return _call_deep(_encoder.encode, func, _nesting_depth(func) + 16)
    except (TypeError, OverflowError) as exc:
        raise type(exc)(f"cannot serialize function: {exc} (attribute values must be plain data)") from exc


def decode_function(data: bytes | bytearray | memoryview, where: str = "") -> BaseFunc:
    """The function encoded by :func:`encode_function`; IRFormatError if ``data`` is not one, naming
    ``where`` (``@main``: the function a module holds under that name) if given.

    The cyclic garbage collector is paused while decoding: IR holds no cycles, and
    collections triggered by the many small objects of a decode cost several times
    the decode itself when a module is read whole.
    """
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _decode_slot(_MSGPACK, data, "function bytes", where, "$")
    finally:
        if gc_was_enabled:
            gc.enable()


def _decode_deep(
    decode: Callable[[Any], _T], data: Any, untyped: Callable[[Any], Any], source: str, where: str = "", at: str = "$"
) -> _T:
    try:
        return _call_deep(decode, data, None)
    except msgspec.DecodeError as exc:
        raise _slot_error(exc, data, untyped, source, where, at) from exc
    except UnicodeDecodeError as exc:
        raise IRFormatError(f"{source}: {where + ': ' if where else ''}{_bad_utf8(exc)} ({at})") from exc
    except IRError as exc:
        raise IRFormatError(f"{source}: {where + ': ' if where else ''}{exc}") from exc


# ---------------------------------------------------------------------------------------------------------------------
# readable error messages


def _bad_utf8(exc: UnicodeDecodeError) -> str:
    """What a string that is not UTF-8 (msgspec raises UnicodeDecodeError for it, not a DecodeError) is told as."""
    return f"not valid UTF-8 in a string ({exc.reason}: {exc.object[exc.start : exc.end]!r} in {exc.object!r})"


def _all_node_classes() -> dict[str, type[Node]]:
    """Every concrete node class by its tag (``"Call"``, ``"tir.Add"``, ...).

    Abstract bases (``Node``, ``BaseFunc``, ``tir._Binary``, ...) have tags too, but never
    appear in encoded IR: leaving them out keeps them from being suggested as "closest
    known tags" or reported as nodes merely in the wrong place.
    """
    import parpass.ir.relax
    import parpass.ir.tir
    import parpass.ir.types  # noqa: F401  (make sure every node class is defined)

    found: dict[str, type[Node]] = {}
    stack: list[type] = [Node]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        tag = getattr(getattr(cls, "__struct_config__", None), "tag", None)
        if isinstance(tag, str) and not cls.__subclasses__():
            found.setdefault(tag, cls)
    return found


_TAGS: dict[str, type[Node]] = {}


def _node_tags() -> dict[str, type[Node]]:
    if not _TAGS:
        _TAGS.update(_all_node_classes())
    return _TAGS


_PATH_RE = re.compile(r"\[(\d+)\]|\.([A-Za-z_]\w*)|\[\.\.\.\]")
_MSG_RE = re.compile(r"^(?P<msg>.*?)(?: - at `(?:(?P<key>key) in )?(?P<path>\$[^`]*)`)?$", re.S)


def _readable_path(tree: Any, path: str, tag_error: bool) -> tuple[str, str | None, str | None]:
    """Translate msgspec's ``$[2][1][0]`` inside one function into ``body.bindings[0]``.

    ``tree`` is the function decoded untyped (nested lists). Returns the readable
    path, the tag of the innermost node on the path, and the field of that node the
    path goes through (``"<tag>"`` for a node's tag position). ``tag_error``: msgspec
    rejected a tag value, so the first element of a list that is no known node is
    taken for an unknown tag; otherwise it is an element like any other (a string
    in a tuple of ints is a wrong field type, not a tag).
    """
    parts: list[str] = []
    cur: Any = tree
    node_tag: str | None = None
    field: str | None = None
    tags = _node_tags()
    for match in _PATH_RE.finditer(path[1:]):
        index_text, key = match.group(1), match.group(2)
        if index_text is None:
            parts.append(f".{key}" if key else "[...]")
            cur, field = None, key
            continue
        index = int(index_text)
        if isinstance(cur, list) and cur and isinstance(cur[0], str) and cur[0] in tags:
            node_tag = cur[0]
            fields = tags[node_tag].__struct_fields__
            if index == 0:
                field = "<tag>"
            elif index - 1 < len(fields):
                field = fields[index - 1]
                parts.append(f".{field}")
            else:
                field = f"<extra element {index}>"
                parts.append(f".{field}")
        elif tag_error and isinstance(cur, list) and cur and isinstance(cur[0], str) and index == 0:
            field = "<tag>"
        else:  # an element of a field's tuple: the field stays the one reported
            parts.append(f"[{index}]")
        cur = cur[index] if isinstance(cur, list) and index < len(cur) else None
    text = "".join(parts).lstrip(".")
    return text, node_tag, field


def _slot_error(
    exc: msgspec.DecodeError,
    data: Any,
    untyped: Callable[[Any], Any],
    source: str,
    where: str,
    at: str = "$",
) -> IRFormatError:
    """A readable IRFormatError for a typed decode of one function that failed with ``exc``.

    ``at`` is msgspec-style path of the function within its envelope (``$[4][7][1]``),
    so the message shows where the bad value is in the whole file.
    """
    prefix = f"{source}: {where + ': ' if where else ''}"
    text = str(exc)
    if not isinstance(exc, msgspec.ValidationError):
        if "truncated" in text:
            return IRFormatError(f"{prefix}data is truncated ({text})")
        return IRFormatError(f"{prefix}not valid {'JSON' if untyped is msgspec.json.decode else 'msgpack'}: {text}")
    match = _MSG_RE.match(text)
    assert match is not None
    msg, path = match.group("msg"), match.group("path")
    if path is None:
        return IRFormatError(f"{prefix}wrong type for a function: {msg}")
    try:
        tree = _deep_call(untyped, data)
    except (IRError, msgspec.DecodeError, UnicodeDecodeError):
        tree = None
    readable, node_tag, field = _readable_path(tree, path, msg.startswith("Invalid value"))
    full = at + path[1:]
    place = readable or "the function itself"
    if field == "<tag>":
        bad = re.match(r"^Invalid value (.*)$", msg)
        value = bad.group(1) if bad else msg
        tag = value.strip("'\"")
        known = _node_tags()
        if tag in known:
            return IRFormatError(f"{prefix}node {value} is not allowed at {place} ({full})")
        near = closest_names(tag, sorted(known), limit=4)
        return IRFormatError(
            f"{prefix}unknown node tag {value} at {place} ({full}); closest known tags: {format_names(near)}"
        )
    owner = f" ({node_tag}.{field})" if node_tag and field and not field.startswith("<") else ""
    if match.group("key"):
        return IRFormatError(f"{prefix}wrong key type in the mapping at {place}{owner} ({full}): {msg}")
    return IRFormatError(f"{prefix}wrong field type at {place}{owner} ({full}): {msg}")


# ---------------------------------------------------------------------------------------------------------------------
# envelopes


class _Codec:
    """msgpack or JSON: the decoders and encoders an envelope needs."""

    def __init__(self, name: str, lib: Any, func_encoder: Any, func_decoder: Any) -> None:
        self.name = name
        self.lib = lib
        self.func_encoder = func_encoder
        self.func_decoder = func_decoder


_MSGPACK = _Codec("msgpack", msgspec.msgpack, _encoder, _decoder)
_JSON = _Codec("JSON", msgspec.json, _json_encoder, _json_decoder)


def _as_buffer(data: object) -> bytes | bytearray | memoryview:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return data
    raise TypeError(f"expected bytes, got {type(data).__name__}")


def _check_magic(buf: bytes | bytearray | memoryview, codec: _Codec, src: str) -> None:
    if len(buf) == 0:
        raise IRFormatError(f"{src}: empty (0 bytes), expected parpass IR ({codec.name})")
    head = bytes(buf[:64])
    if codec is _MSGPACK:
        if head[:1] and 0x90 <= head[0] <= 0x9F and head[1 : 1 + len(_MSGPACK_MAGIC)] == _MSGPACK_MAGIC:
            return
        if len(head) <= len(_MSGPACK_MAGIC) and (_MSGPACK_MAGIC.startswith(head[1:]) and 0x90 <= head[0] <= 0x9F):
            raise IRFormatError(f"{src}: data is truncated ({len(buf)} bytes)")
        hint = (
            " (it looks like JSON: load it from a .json file or with from_json)" if _JSON_MAGIC_RE.match(head) else ""
        )
        raise IRFormatError(f"{src}: not parpass IR: no {FORMAT_MAGIC!r} marker at the start{hint}")
    if _JSON_MAGIC_RE.match(head):
        return
    stripped = head.lstrip()
    if stripped and b'["parpass",'.startswith(re.sub(rb"\s+", b"", stripped)) and len(head) == len(buf):
        raise IRFormatError(f"{src}: data is truncated ({len(buf)} bytes)")
    hint = (
        " (it looks like msgpack: load it from a .msgpack file or with from_bytes)"
        if head[1 : 1 + len(_MSGPACK_MAGIC)] == _MSGPACK_MAGIC
        else ""
    )
    raise IRFormatError(f"{src}: not parpass IR: no {FORMAT_MAGIC!r} marker at the start{hint}")


def _decode_part(codec: _Codec, raw: Any, type_: Any, src: str, what: str) -> Any:
    try:
        return _deep_call(lambda b: codec.lib.decode(b, type=type_), raw)
    except msgspec.DecodeError as exc:
        raise IRFormatError(f"{src}: {what}: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise IRFormatError(f"{src}: {what}: {_bad_utf8(exc)}") from exc
    except IRError as exc:
        raise IRFormatError(f"{src}: {what}: {exc}") from exc


def _decode_slot(codec: _Codec, raw: Any, src: str, where: str, at: str) -> BaseFunc:
    """One function, typed, decoded with buffer sharing (see :class:`~parpass.ir.tir.BufferSharing`);
    a readable IRFormatError naming ``src``, ``where`` and the path ``at`` if it is not one."""
    saved, buffer_sharing.table = buffer_sharing.table, {}
    try:
        func: BaseFunc = codec.func_decoder.decode(raw)
    except RecursionError:
        return cast(BaseFunc, _decode_deep(codec.func_decoder.decode, raw, codec.lib.decode, src, where, at))
    except msgspec.DecodeError as exc:
        raise _slot_error(exc, raw, codec.lib.decode, src, where, at) from exc
    except UnicodeDecodeError as exc:
        raise IRFormatError(f"{src}: {where + ': ' if where else ''}{_bad_utf8(exc)} ({at})") from exc
    finally:
        buffer_sharing.table = saved
    return func


def _envelope_items(buf: bytes | bytearray | memoryview, codec: _Codec, src: str) -> list[msgspec.Raw]:
    """The top-level elements of an envelope, each still encoded."""
    try:
        items: list[msgspec.Raw] = _deep_call(lambda b: codec.lib.decode(b, type=list[msgspec.Raw]), buf)
    except IRError as exc:
        raise IRFormatError(f"{src}: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise IRFormatError(f"{src}: {_bad_utf8(exc)}") from exc
    except msgspec.DecodeError as exc:
        text = str(exc)
        kind = "data is truncated" if "truncated" in text else f"not valid {codec.name}"
        raise IRFormatError(f"{src}: {kind} ({text})") from exc
    return items


def _check_version(version: object, src: str) -> None:
    """Raise unless ``version`` is a format version this parpass reads."""
    if not isinstance(version, int) or isinstance(version, bool):
        raise IRFormatError(f"{src}: format version must be an integer, got {version!r}")
    if version not in SUPPORTED_VERSIONS:
        newer = " (written by a newer parpass?)" if version > max(SUPPORTED_VERSIONS) else ""
        supported = ", ".join(str(v) for v in SUPPORTED_VERSIONS)
        raise IRFormatError(
            f"{src}: unsupported format version {version}{newer}; this parpass reads version(s) {supported}"
        )


def _payload_kind(items: list[msgspec.Raw], codec: _Codec, src: str) -> Any:
    """The payload kind of an envelope (``"module"``, ``"function"``, or anything else), once its header checks."""
    if len(items) < 3:
        raise IRFormatError(f"{src}: envelope has {len(items)} elements, expected [magic, version, kind, ...]")
    magic = _decode_part(codec, items[0], Any, src, "magic")
    if magic != FORMAT_MAGIC:
        raise IRFormatError(f"{src}: not parpass IR: first element is {magic!r}, expected {FORMAT_MAGIC!r}")
    _check_version(_decode_part(codec, items[1], Any, src, "format version"), src)
    return _decode_part(codec, items[2], Any, src, "payload kind")


def _function_list_error(exc: msgspec.DecodeError, src: str) -> IRFormatError:
    """A readable error for a module's function list that is not ``[[name, function], ...]``."""
    match = _MSG_RE.match(str(exc))
    path = match.group("path") if match else None
    where = ""
    step = re.match(r"\$\[(\d+)\](?:\[(\d+)\])?", path) if path else None
    if step:
        part = {None: "", "0": " (its name)", "1": " (its function)"}.get(step.group(2), "")
        where = f" in entry #{step.group(1)}{part}"
    msg = match.group("msg") if match else str(exc)
    return IRFormatError(f"{src}: malformed function list{where}: {msg}")


def _function_entries(codec: _Codec, raw: msgspec.Raw, src: str) -> list[tuple[str, msgspec.Raw]]:
    """A module's ``(name, encoded function)`` entries."""
    try:
        entries: list[tuple[str, msgspec.Raw]] = _deep_call(
            lambda b: codec.lib.decode(b, type=list[tuple[str, msgspec.Raw]]), raw
        )
    except IRError as exc:
        raise IRFormatError(f"{src}: function list: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise IRFormatError(f"{src}: function list ($[4]): {_bad_utf8(exc)}") from exc
    except msgspec.DecodeError as exc:
        raise _function_list_error(exc, src) from exc
    return entries


def _checked_entries(
    entries: list[tuple[str, msgspec.Raw]], codec: _Codec, src: str, validate: bool
) -> list[tuple[str, Any, BaseFunc | None]]:
    """The entries with unique names checked, each with its function decoded (``validate``) or None."""
    if not validate and len({name for name, _ in entries}) == len(entries):  # no name twice: nothing to decode
        return [(name, raw, None) for name, raw in entries]
    seen: dict[str, int] = {}
    checked: list[tuple[str, Any, BaseFunc | None]] = []
    gc_was_enabled = gc.isenabled()
    gc.disable()  # see decode_function
    try:
        for index, (name, raw) in enumerate(entries):
            if name in seen:
                raise IRFormatError(f"{src}: duplicate function name {name!r} (entries #{seen[name]} and #{index})")
            seen[name] = index
            func = _decode_slot(codec, raw, src, f"@{name}", f"$[4][{index}][1]") if validate else None
            checked.append((name, raw, func))
    finally:
        if gc_was_enabled:
            gc.enable()
    return checked


#: A module envelope, split in one pass: magic, version, kind and attributes still encoded, and the
#: ``(name, encoded function)`` entries.
_ModuleEnvelope = tuple[msgspec.Raw, msgspec.Raw, msgspec.Raw, msgspec.Raw, list[tuple[str, msgspec.Raw]]]


def _module_envelope(
    buf: bytes | bytearray | memoryview, codec: _Codec, src: str, validate: bool
) -> tuple[str, dict[str, Any], list[tuple[str, Any, BaseFunc | None]], None] | None:
    """What :func:`_read_envelope` gives for a well-formed module envelope, read in one pass over the bytes
    (the general path walks the function list twice: 71 against 124 ms for 59 MB); None for anything else
    (a function envelope, a malformed one), which the general path then reads and words the error of."""
    try:
        magic, version, kind, attrs, entries = _deep_call(lambda b: codec.lib.decode(b, type=_ModuleEnvelope), buf)
    except (msgspec.DecodeError, UnicodeDecodeError, IRError):
        return None
    if _payload_kind([magic, version, kind], codec, src) != "module":
        return None
    return (
        "module",
        _decode_part(codec, attrs, dict[str, Any], src, "module attrs"),
        _checked_entries(entries, codec, src, validate),
        None,
    )


def _read_envelope(
    data: object, codec: _Codec, source: str | None, validate: bool
) -> tuple[str, dict[str, Any], list[tuple[str, Any, BaseFunc | None]], BaseFunc | None]:
    """Check and split an envelope: (kind, module attrs, [(name, raw function, decoded function or None)],
    decoded function or None). With ``validate``, every function of a module is decoded (and returned)."""
    src = source or f"<{codec.name} bytes>"
    buf = _as_buffer(data)
    _check_magic(buf, codec, src)
    module = _module_envelope(buf, codec, src, validate)
    if module is not None:
        return module
    items = _envelope_items(buf, codec, src)
    kind = _payload_kind(items, codec, src)
    if kind == "function":
        if len(items) != 4:
            raise IRFormatError(f"{src}: a function envelope has 4 elements, found {len(items)}")
        return kind, {}, [], _decode_slot(codec, items[3], src, "function", "$[3]")
    if kind != "module":
        raise IRFormatError(f"{src}: unknown payload kind {kind!r}; expected 'module' or 'function'")
    if len(items) != 5:
        raise IRFormatError(f"{src}: a module envelope has 5 elements, found {len(items)}")
    attrs = _decode_part(codec, items[3], dict[str, Any], src, "module attrs")
    entries = _function_entries(codec, items[4], src)
    return kind, attrs, _checked_entries(entries, codec, src, validate), None


def to_bytes(x: IRObject) -> bytes:
    """A module or a single function as enveloped msgpack bytes (see the module docstring)."""
    if isinstance(x, IRModule):
        return b"".join(module_pieces(x))
    if isinstance(x, BaseFunc):
        return _encoder.encode([FORMAT_MAGIC, FORMAT_VERSION, "function", msgspec.Raw(encode_function(x))])
    raise TypeError(f"to_bytes expects an IRModule or a function, got {type(x).__name__}")


#: Encoded as an element of a list, nothing: the envelope's parts are encoded with one where a function's bytes go.
_NOTHING = msgspec.Raw(b"")


def module_pieces(mod: IRModule) -> list[bytes | memoryview]:
    """:func:`to_bytes` of ``mod`` in pieces, to be written back to back: the envelope's parts, each encoded by
    msgspec, and each function's bytes as the module holds them (a view of a file the workers wrote included,
    not copied), encoded now where it holds the function only decoded.

    Saving a module from workers thus copies its functions once, into the file: joined first, 59 MB of
    them were copied twice more (out of the views, then into one buffer) and held twice in memory.
    """
    names = mod.names()
    # the array of entries, each [name, bytes], holds len(names) nothing: its header alone
    head = [FORMAT_MAGIC, FORMAT_VERSION, "module", dict(mod.attrs), [_NOTHING] * len(names)]
    pieces: list[bytes | memoryview] = [encode_with(_encoder.encode, head, "module attrs")]
    encode = _encoder.encode
    for name in names:
        pieces.append(encode([name, _NOTHING]))
        pieces.append(mod.encoded_buffer(name))
    return pieces


def from_bytes(data: bytes | bytearray | memoryview, *, source: str | None = None, validate: bool = True) -> IRObject:
    """The module or function encoded by :func:`to_bytes`.

    With ``validate`` (the default) every function is decoded now, so corrupt
    data is rejected here, and the module keeps both the decoded function and
    its bytes (reading it costs nothing more; shipping it is not re-encoded).
    With ``validate=False`` functions are held as bytes and decoded on first
    access. ``source`` names the data in error messages (a file name).
    """
    _, attrs, entries, func = _read_envelope(data, _MSGPACK, source, validate)
    if func is not None:
        return func
    mod = IRModule(attrs=attrs)
    names, raws, decoded = zip(*entries, strict=True) if entries else ((), (), ())
    mod.set_encoded_functions_in_order(names, list(map(bytes, raws)), decoded)
    return mod


# ---------------------------------------------------------------------------------------------------------------------
# what can be encoded (and so saved, loaded back and shipped to workers)


def node_problem(root: object) -> str | None:
    """The first place under ``root`` (a node, or plain data) holding an integer beyond 64 bits or a string
    with a lone surrogate, which msgpack cannot encode: ``body.value.b.value: the integer ... does not fit``.

    A walk of every field, so :func:`encoding_problem` runs it only once an encode has failed.
    """
    stack: list[tuple[object, str]] = [(root, "")]
    while stack:
        obj, path = stack.pop()
        if isinstance(obj, msgspec.Struct):
            for name in reversed(obj.__struct_fields__):
                value = getattr(obj, name)
                if value is not None:
                    stack.append((value, f"{path}.{name}" if path else name))
        elif isinstance(obj, (tuple, list)):
            stack.extend((item, f"{path}[{i}]") for i, item in reversed(list(enumerate(obj))))
        elif isinstance(obj, dict):
            found = value_problem(obj)
            if found is not None:
                return f"{path}{found}"
        else:
            problem = scalar_problem(obj)
            if problem is not None:
                return f"{path}: {problem}" if path else problem
    return None


def encoding_problem(x: IRObject) -> str | None:
    """Why ``x`` (a module or function) cannot be encoded, naming the place (``@f: body...: why``), or None.

    Each function is encoded (a module keeps the bytes: saving or shipping it later costs nothing
    more); only a failed encode is walked to find the place.
    """
    if isinstance(x, IRModule):
        found = value_problem(x.attrs)
        if found is not None:
            return f"module attrs{found}"
        for name in x.names():
            try:
                x.encoded_buffer(name)  # held bytes (a view included) stay as they are
            except (OverflowError, UnicodeEncodeError):
                return f"@{name}: {node_problem(x[name]) or 'cannot be encoded'}"
        return None
    try:
        encode_function(x)  # deep IR too
    except (OverflowError, UnicodeEncodeError):
        return node_problem(x) or "cannot be encoded"
    return None


def check_loaded(x: IRObject, source: str) -> IRObject:
    """``x``, read from ``source`` (text or JSON, which can hold them), if it has no integer beyond 64 bits
    and no lone surrogate; else an IRFormatError naming the place: such IR could not be saved or shipped."""
    problem = encoding_problem(x)
    if problem is not None:
        raise IRFormatError(f"{source}: {problem} (parpass IR holds 64-bit integers and UTF-8 strings only)")
    return x


# ---------------------------------------------------------------------------------------------------------------------
# JSON


def _json_problem(root: object) -> str | None:
    """Where ``root`` holds a value JSON would not give back: a non-finite float, or bytes outside a Constant."""
    stack: list[tuple[object, str, bool]] = [(root, "", False)]
    while stack:
        obj, path, in_attrs = stack.pop()
        problem = _json_value_problem(obj, path, in_attrs)
        if problem is not None:
            return problem
        stack.extend(_json_children(obj, path, in_attrs))
    return None


def _json_value_problem(obj: object, path: str, in_attrs: bool) -> str | None:
    """Why the scalar ``obj`` at ``path`` would not come back from JSON, or None."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return f"{path or 'value'}: JSON cannot represent the float {obj!r}"
    if in_attrs and isinstance(obj, (bytes, bytearray)):
        return f"{path}: JSON would turn the bytes attribute into a string"
    return None


def _json_children(obj: object, path: str, in_attrs: bool) -> list[tuple[object, str, bool]]:
    """The parts of ``obj`` that :func:`_json_problem` looks into, with their paths; whether they are attributes."""
    if isinstance(obj, msgspec.Struct):
        return [
            (value, f"{path}.{name}" if path else name, in_attrs or isinstance(value, dict))
            for name in obj.__struct_fields__
            if (value := getattr(obj, name)) is not None and not isinstance(value, (str, int))
        ]
    if isinstance(obj, (tuple, list)):
        return [(item, f"{path}[{i}]", in_attrs) for i, item in enumerate(obj)]
    if isinstance(obj, dict):
        return [(value, f"{path}[{key!r}]", True) for key, value in obj.items()]
    return []


def function_of(mod: IRModule, name: str) -> BaseFunc:
    """Function ``name`` of ``mod``; a lazily held one is decoded for the caller only and stays lazy in ``mod``.

    (Writing a module as JSON, or hashing or comparing it, should not leave its functions decoded in it.)
    """
    return mod[name] if mod.is_decoded(name) else decode_function(mod.encoded_function(name), f"@{name}")


def to_json(x: IRObject) -> bytes:
    """A module or a single function as enveloped JSON (UTF-8 bytes), the same layout as :func:`to_bytes`.

    Raises ValueError for values JSON cannot carry faithfully (``nan``/``inf``
    floats, bytes attributes); save those as msgpack.
    """
    payload: list[Any]
    unencodable = encoding_problem(x) if isinstance(x, (IRModule, BaseFunc)) else None
    if unencodable is not None:
        raise ValueError(f"cannot write JSON: {unencodable}; it could not be read back")
    if isinstance(x, IRModule):
        funcs = [[name, function_of(x, name)] for name in x.names()]
        payload = [FORMAT_MAGIC, FORMAT_VERSION, "module", dict(x.attrs), funcs]
        problem = _json_problem(payload[3])
        if problem:
            problem = f"module attrs{problem}"
        for name, func in funcs:
            if problem:
                break
            found = _json_problem(func)
            problem = f"@{name}: {found}" if found else None
    elif isinstance(x, BaseFunc):
        payload = [FORMAT_MAGIC, FORMAT_VERSION, "function", x]
        problem = _json_problem(x)
    else:
        raise TypeError(f"to_json expects an IRModule or a function, got {type(x).__name__}")
    if problem:
        raise ValueError(f"cannot write JSON: {problem}; use the msgpack format instead")
    return encode_with(_json_encoder.encode, payload, "IR as JSON")


def from_json(data: bytes | bytearray | memoryview | str, *, source: str | None = None) -> IRObject:
    """The module or function written by :func:`to_json`; every function is decoded (and so checked) now."""
    buf = data.encode() if isinstance(data, str) else data
    _, attrs, entries, func = _read_envelope(buf, _JSON, source, validate=False)
    src = source or "<JSON bytes>"
    if func is not None:
        return check_loaded(func, src)
    funcs = [
        (name, _decode_slot(_JSON, raw, src, f"@{name}", f"$[4][{i}][1]")) for i, (name, raw, _) in enumerate(entries)
    ]
    return check_loaded(IRModule(funcs, attrs=attrs), src)


# ---------------------------------------------------------------------------------------------------------------------
# files

Writer = Callable[[IRObject], bytes]
Reader = Callable[[bytes, str], IRObject]


def _read_msgpack(data: bytes, source: str) -> IRObject:
    return from_bytes(data, source=source)


def _read_json(data: bytes, source: str) -> IRObject:
    return from_json(data, source=source)


#: File formats by lower-case extension: ``extension -> (writer, reader)``. A writer turns a module
#: or function into the file's bytes; a reader turns them back, naming the file (its second argument)
#: in errors. Add formats with :func:`register_format`.
FORMATS: dict[str, tuple[Writer, Reader]] = {
    ".msgpack": (to_bytes, _read_msgpack),
    ".mpk": (to_bytes, _read_msgpack),
    ".bin": (to_bytes, _read_msgpack),
    ".json": (to_json, _read_json),
}


def register_format(extension: str, writer: Writer, reader: Reader, *, override: bool = False) -> None:
    """Make :func:`save`/:func:`load` handle files ending in ``extension`` (e.g. ``".ppir"``)."""
    if not extension.startswith(".") or len(extension) < 2:
        raise ValueError(f"a file extension starts with '.', got {extension!r}")
    ext = extension.lower()
    if ext in FORMATS and not override:
        raise ValueError(f"format {ext!r} is already registered (pass override=True to replace it)")
    FORMATS[ext] = (writer, reader)


def _format_for(path: Path) -> tuple[Writer, Reader]:
    ext = path.suffix.lower()
    fmt = FORMATS.get(ext)
    if fmt is None:
        supported = ", ".join(sorted(FORMATS))
        what = f"extension {ext!r}" if ext else "no extension"
        raise IRFormatError(f"{path}: unsupported file format ({what}); supported extensions: {supported}")
    return fmt


#: The file buffer of :func:`save`: a module's small pieces (names, and functions of a few kB) are gathered
#: into writes of this size.
_WRITE_BUFFER = 1 << 20


def _write_atomic(path: Path, pieces: Sequence[bytes | memoryview]) -> None:
    """Write ``pieces``, back to back, to ``path`` through a temporary file in the same directory and
    ``os.replace``."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    except OSError as exc:  # name the file asked for, not the temporary one (e.g. a missing directory)
        raise type(exc)(exc.errno, f"cannot write {path}: {exc.strerror}") from exc
    try:
        with os.fdopen(fd, "wb", buffering=_WRITE_BUFFER) as f:
            for piece in pieces:
                f.write(piece)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def save(obj: IRObject, path: str | os.PathLike[str]) -> None:
    """Write a module or function to ``path``, in the format its extension names (see :data:`FORMATS`).

    The file is replaced atomically: readers see the old file or the new one, never a partial write.
    """
    if not isinstance(obj, (IRModule, BaseFunc)):
        raise TypeError(f"save expects an IRModule or a function, got {type(obj).__name__}")
    target = Path(path)
    writer, _ = _format_for(target)
    problem = encoding_problem(obj)
    if problem is not None:  # what parpass writes, it reads: no format may hold what load refuses
        raise ValueError(f"cannot write {target}: {problem} (parpass IR holds 64-bit integers and UTF-8 strings only)")
    _write_atomic(target, module_pieces(obj) if writer is to_bytes and isinstance(obj, IRModule) else [writer(obj)])


def load(path: str | os.PathLike[str], *, validate: bool = True) -> IRObject:
    """Read a module or function saved by :func:`save`; IRFormatError naming the file if it is not valid IR.

    ``validate=False`` reads a msgpack module's functions as :func:`from_bytes` does with it (checked
    for framing only, decoded on first access); other formats are read as they always are.
    """
    source = Path(path)
    _, reader = _format_for(source)
    try:
        data = source.read_bytes()
    except FileNotFoundError as exc:
        raise IRFileNotFoundError(f"{source}: no such file") from exc
    except OSError as exc:
        raise IRFormatError(f"{source}: cannot read: {exc.strerror or exc}") from exc
    if not validate and reader is _read_msgpack:
        return from_bytes(data, source=str(source), validate=False)
    return reader(data, str(source))
