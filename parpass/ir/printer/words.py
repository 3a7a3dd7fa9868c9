"""The spelling of words in the text form: keywords, quoted strings, names, op names, dtypes, leaf types."""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from parpass.ir.node import GlobalVar
from parpass.ir.types import PrimType, TensorType

__all__ = ["KEYWORDS"]

#: Words with a meaning in the text form; op names and dtypes equal to one are quoted.
_KEYWORD_TEXT = """module attrs function primfunc return yield if else const true false null nan inf for in seq let
    allocate evaluate not and or min max select cast call ramp broadcast annotations strides Tensor Prim Tuple Buffer"""
KEYWORDS = frozenset(_KEYWORD_TEXT.split())
_NAME_RE = re.compile(r"[A-Za-z0-9_.]+\Z")
_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


@functools.lru_cache(maxsize=4096)
def quote_word(text: str) -> str:
    """``_quote`` for the few strings that repeat everywhere: dtypes, intrinsic names, attribute keys."""
    return _quote(text)


@functools.lru_cache(maxsize=65536)
def fmt_name(name: str) -> str:
    """A variable or global name as written after its sigil."""
    return name if _NAME_RE.match(name) else _quote(name)


@functools.lru_cache(maxsize=4096)
def fmt_ident(text: str) -> str:
    """An op name or dtype: bare when it is a plain identifier, else a JSON string."""
    return text if _IDENT_RE.match(text) and text not in KEYWORDS else _quote(text)


def _global(gv: GlobalVar) -> str:
    return "@" + fmt_name(gv.name_hint)


def _shape(dims: tuple[int, ...]) -> str:
    if len(dims) == 1:
        return f"({int(dims[0])},)"
    return "(" + ", ".join(str(int(d)) for d in dims) + ")"


_LEAF_TYPE_CACHE: dict[tuple[Any, ...], str] = {}


def _leaf_type(t: TensorType | PrimType) -> str:
    """The text of a TensorType or PrimType (memoized: models repeat a few types many times)."""
    key = (tuple(t.shape), t.dtype) if type(t) is TensorType else (t.dtype,)
    text = _LEAF_TYPE_CACHE.get(key)
    if text is None:
        if type(t) is TensorType:
            text = f"Tensor({_shape(tuple(t.shape))}, {quote_word(t.dtype)})"
        else:
            text = f"Prim({quote_word(t.dtype)})"
        if len(_LEAF_TYPE_CACHE) > 4096:
            _LEAF_TYPE_CACHE.clear()
        _LEAF_TYPE_CACHE[key] = text
    return text
