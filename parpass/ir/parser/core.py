"""The parser's cursor over the tokens: errors, words, names, dtypes, attribute literals and types.

The syntax of each IR family is parsed by a subclass (:mod:`.relax_syntax`, :mod:`.tir_syntax`);
everything here is shared by both.
"""

from __future__ import annotations

import enum
from typing import Any, Final, NoReturn

from parpass.errors import NameNotFoundError, closest_names, format_names
from parpass.ir.builtin_ops import DTYPES
from parpass.ir.dtype import split_vector
from parpass.ir.ids import IdSupply
from parpass.ir.node import GlobalVar, Op
from parpass.ir.op import get_op
from parpass.ir.parser.tokens import (
    _INT_RE,
    _LOOKAHEAD,
    _PRIM_FAST,
    _TENSOR_FAST,
    _TOKEN_RE,
    EOF,
    _decode_string,
    _did_you_mean,
    _is_ident,
    describe,
    error_at,
)
from parpass.ir.printer import KEYWORDS
from parpass.ir.printer.words import fmt_name
from parpass.ir.types import PrimType, TensorType, TupleType, Type

_DTYPE_SET = frozenset(DTYPES)
_TYPE_WORDS = ("Tensor", "Prim", "Tuple")
#: The keyword literals and their values.
_LITERAL_WORDS: dict[str, Any] = {"null": None, "true": True, "false": False}


class _Opened(enum.Enum):
    """The type of :data:`OPENED` (an enum, so that ``is OPENED`` narrows for the type checker)."""

    OPENED = "opened"


#: What a step of the loops that parse nested syntax (literals, types, tir expressions) answers when it
#: opened a container (a list, a dict, a Tuple type, a group): its contents come next. Never a parsed value.
OPENED: Final = _Opened.OPENED


class _ParserCore:
    """Parses one text. Token strings live in ``toks`` (ending with ``EOF``); ``i`` is the current index."""

    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.filename = filename
        self.toks: list[str] = _TOKEN_RE.findall(text)
        # End-of-input tokens, enough for the longest look-ahead (``toks[k + 3]``): text cut anywhere reads
        # as "unexpected end of input", never as an IndexError.
        self.toks.extend([EOF] * _LOOKAHEAD)
        self.i = 0
        if '"' in self.toks:  # a quote that did not start a complete string token
            self.fail("unterminated string (a string is one line, with JSON escapes)", self.toks.index('"'))
        # per function
        self.names: dict[str, Any] = {}
        self.ids = IdSupply()
        # per text: caches of immutable nodes and checked words
        self.types: dict[str, Type] = {}
        self.ops: dict[str, Op] = {}
        self.globals: dict[str, GlobalVar] = {}
        #: The token of the first use of each called ``@name``, to report one the module does not define.
        self.global_uses: dict[str, int] = {}
        self.dtypes: set[str] = set()
        self.vdtypes: set[str] = set()

    # ------------------------------------------------------------ errors

    def _offset(self, k: int) -> int:
        """Character offset of token ``k`` (recomputed by tokenizing again: only on the error path)."""
        end = 0
        for n, m in enumerate(_TOKEN_RE.finditer(self.text)):
            if n == k:
                return m.start(1)
            end = m.end(1)
        return end  # the end-of-input token: just after the last real token

    def fail(self, reason: str, k: int | None = None, shift: int = 0) -> NoReturn:
        """Raise a ParseError at token ``k`` (default: the current one), ``shift`` characters into it."""
        pos = self._offset(self.i if k is None else k) + shift
        raise error_at(self.text, pos, self.filename, reason)

    def expect(self, word: str, what: str = "") -> None:
        tok = self.toks[self.i]
        if tok != word:
            ctx = f" {what}" if what else ""
            self.fail(f"expected {word!r}{ctx}, got {describe(tok)}")
        self.i += 1

    def string(self, what: str) -> str:
        """A JSON string token."""
        tok = self.toks[self.i]
        if tok[0] != '"':
            self.fail(f"expected a string ({what}), got {describe(tok)}")
        try:
            value = _decode_string(tok)
        except ValueError as exc:
            self.fail(f"bad string literal: {exc}")
        self.i += 1
        return value

    def word(self, what: str) -> str:
        """An identifier or a string (dtypes, op names)."""
        tok = self.toks[self.i]
        if tok[0] == '"':
            return self.string(what)
        if not _is_ident(tok) or tok in KEYWORDS:
            self.fail(f"expected {what}, got {describe(tok)}")
        self.i += 1
        return tok

    def integer(self, what: str) -> int:
        """A (possibly negative) integer literal."""
        toks = self.toks
        k = self.i
        sign = 1
        if toks[k] == "-":
            sign, k = -1, k + 1
        tok = toks[k]
        if not _INT_RE.match(tok):
            self.fail(f"expected an integer ({what}), got {describe(tok)}", k)
        self.i = k + 1
        return sign * self._int(tok, k)

    def _int(self, tok: str, k: int) -> int:
        try:
            return int(tok)
        except ValueError as exc:  # more digits than int() converts
            self.fail(f"bad integer literal: {exc}", k)

    # ------------------------------------------------------------ names and dtypes

    def name_of(self, k: int) -> tuple[str, str]:
        """(table key, name) of the ``%name`` / ``@name`` token ``k``."""
        tok = self.toks[k]
        if tok[1] != '"':
            return tok, tok[1:]
        try:
            name = _decode_string(tok[1:])
        except ValueError as exc:
            self.fail(f"bad quoted name: {exc}", k)
        return tok[0] + fmt_name(name), name  # the key: the canonical (printed) spelling of the name

    def undefined(self, key: str, k: int, what: str) -> NoReturn:
        pool = [n for n in list(self.names)[-5000:] if n[0] == "%"]
        near = closest_names(key, pool, limit=3)
        hint = f"; closest defined: {', '.join(near)}" if near else ""
        self.fail(f"undefined {what} {key}{hint}", k)

    def dtype(self, text: str, k: int, vector: bool, shift: int = 0) -> str:
        """``text`` if it is a known dtype (``vector``: also ``<dtype>x<lanes>``), else a ParseError."""
        if text in self.dtypes or (vector and text in self.vdtypes):
            return text
        if text in _DTYPE_SET:
            self.dtypes.add(text)
            return text
        base, lanes = split_vector(text)
        if vector and lanes >= 2 and base in _DTYPE_SET:
            self.vdtypes.add(text)
            return text
        near = closest_names(text, DTYPES, limit=3)
        kind = "dtype (or vector dtype such as 'int32x4')" if vector else "dtype"
        self.fail(f"unknown {kind} {text!r}; closest: {format_names(near)}", k, shift)

    def dtype_word(self, vector: bool) -> str:
        k = self.i
        return self.dtype(self.word("a dtype"), k, vector)

    def dtype_string(self, vector: bool) -> str:
        k = self.i
        return self.dtype(self.string("a dtype"), k, vector)

    def op(self, name: str, k: int) -> Op:
        op = self.ops.get(name)
        if op is None:
            try:
                get_op(name)
            except NameNotFoundError as exc:
                self.fail(str(exc), k)
            op = self.ops[name] = Op(name)
        return op

    def global_var(self, k: int) -> GlobalVar:
        tok = self.toks[k]
        gv = self.globals.get(tok)
        if gv is None:
            gv = self.globals[tok] = GlobalVar(self.name_of(k)[1])
            self.global_uses[gv.name_hint] = k
        return gv

    # ------------------------------------------------------------ literals (attributes)

    def literal(self) -> Any:
        """A JSON-like literal: null, true, false, numbers (with inf/nan), strings, lists, dicts."""
        stack: list[list[Any]] = []  # open containers: [container, is_dict, pending key]
        while True:
            value = self._literal_start(stack)
            if value is OPENED:
                continue
            value = self._literal_done(stack, value)
            if value is not OPENED:
                return value

    def _literal_start(self, stack: list[list[Any]]) -> Any:
        """A scalar literal, an empty container, or ``OPENED`` after opening a container on ``stack``."""
        toks = self.toks
        k = self.i
        tok = toks[k]
        self.i = k + 1
        if tok in _LITERAL_WORDS:
            return _LITERAL_WORDS[tok]
        if tok == "[":
            if toks[k + 1] == "]":
                self.i = k + 2
                return []
            stack.append([[], False, None])
            return OPENED
        if tok == "{":
            if toks[k + 1] == "}":
                self.i = k + 2
                return {}
            frame: list[Any] = [{}, True, None]
            self._dict_key(frame)
            stack.append(frame)
            return OPENED
        self.i = k
        if tok[0] == '"':
            return self.string("a literal")
        return self.number("a literal (null, true, false, a number, a string, a list or a dict)")

    def _literal_done(self, stack: list[list[Any]], value: Any) -> Any:
        """Hand a complete ``value`` to the open containers: the whole literal, or ``OPENED`` at a ``,``."""
        toks = self.toks
        while stack:
            frame = stack[-1]
            container = frame[0]
            if frame[1]:
                container[frame[2]] = value
            else:
                container.append(value)
            tok = toks[self.i]
            if tok == ",":
                self.i += 1
                if frame[1]:
                    self._dict_key(frame)
                return OPENED
            close = "}" if frame[1] else "]"
            if tok != close:
                self.fail(f"expected ',' or {close!r} in a {'dict' if frame[1] else 'list'}, got {describe(tok)}")
            self.i += 1
            stack.pop()
            value = container
        return value

    def _dict_key(self, frame: list[Any]) -> None:
        k = self.i
        key = self.string("a dict key")
        if key in frame[0]:
            self.fail(f"duplicate key {key!r} in a dict", k)
        self.expect(":", "after a dict key")
        frame[2] = key

    def number(self, what: str) -> int | float:
        """An int or float literal, with an optional ``-``; ``inf`` and ``nan`` are floats."""
        toks = self.toks
        k = self.i
        neg = toks[k] == "-"
        if neg:
            k += 1
        tok = toks[k]
        c = tok[0]
        if "0" <= c <= "9":
            self.i = k + 1
            if _INT_RE.match(tok):
                value = self._int(tok, k)
                return -value if neg else value
            return float("-" + tok if neg else tok)
        if tok == "inf" or tok == "nan":
            self.i = k + 1
            return float("-" + tok if neg else tok)
        self.fail(f"expected {what}, got {describe(tok)}", k)

    def attrs(self, what: str) -> dict[str, Any]:
        k = self.i
        if self.toks[k] != "{":
            self.fail(f"expected a dict of {what} ('{{...}}'), got {describe(self.toks[k])}")
        value = self.literal()
        assert isinstance(value, dict)
        return value

    # ------------------------------------------------------------ types and shapes

    def int_shape(self) -> tuple[int, ...]:
        """``()``, ``(n,)`` or ``(n, m, ...)``."""
        self.expect("(", "to open a shape")
        toks = self.toks
        if toks[self.i] == ")":
            self.i += 1
            return ()
        dims = [self.integer("a dimension")]
        while toks[self.i] == ",":
            self.i += 1
            if toks[self.i] == ")":
                break
            dims.append(self.integer("a dimension"))
        else:
            if len(dims) == 1:
                self.fail("a one-element shape is written with a trailing comma: (n,)")
        self.expect(")", "to close a shape")
        return tuple(dims)

    def type_(self) -> Type:
        """``Tensor(shape, "dtype")`` | ``Prim("dtype")`` | ``Tuple(type, ...)`` (nesting on an explicit stack)."""
        t = self.types.get(self.toks[self.i])
        if t is not None:  # a leaf type seen before, as one token: the common case
            self.i += 1
            return t
        stack: list[list[Type]] = []  # the fields so far of each open Tuple(
        while True:
            leaf = self._type_start(stack)
            if leaf is OPENED:
                continue
            done = self._type_done(stack, leaf)
            if done is not OPENED:
                return done

    def _type_start(self, stack: list[list[Type]]) -> Type | _Opened:
        """A leaf type or ``Tuple()``, or ``OPENED`` after opening a Tuple on ``stack``."""
        toks = self.toks
        k = self.i
        tok = toks[k]
        t = self.types.get(tok)
        if t is not None:
            self.i = k + 1
            return t
        if tok[-1:] == ")" and (tok.startswith("Tensor(") or tok.startswith("Prim(")):
            t = self._fast_type(tok, k)
            self.i = k + 1
            return t
        if tok == "Tensor":
            return self._tensor_type()
        if tok == "Prim":
            self.i = k + 1
            self.expect("(", "after Prim")
            t = PrimType(self.dtype_string(False))
            self.expect(")", "to close Prim(...)")
            return t
        if tok == "Tuple":
            self.i = k + 1
            self.expect("(", "after Tuple")
            if toks[self.i] == ")":
                self.i += 1
                return TupleType(())
            stack.append([])
            return OPENED
        hint = _did_you_mean(tok, _TYPE_WORDS)
        self.fail(f"expected a type (Tensor, Prim or Tuple), got {describe(tok)}{hint}")

    def _tensor_type(self) -> TensorType:
        """``Tensor(shape, "dtype")`` written in tokens (another spelling than the printer's)."""
        self.i += 1
        self.expect("(", "after Tensor")
        shape = self.int_shape()
        self.expect(",", "after a tensor shape")
        t = TensorType(shape, self.dtype_string(False))
        self.expect(")", "to close Tensor(...)")
        return t

    def _type_done(self, stack: list[list[Type]], t: Type) -> Type | _Opened:
        """Hand a complete type to the open Tuples: the whole type, or ``OPENED`` at a ``,`` (more fields)."""
        toks = self.toks
        while stack:
            stack[-1].append(t)
            tok = toks[self.i]
            if tok == ",":
                self.i += 1
                return OPENED
            if tok != ")":
                self.fail(f"expected ',' or ')' in Tuple(...), got {describe(tok)}")
            self.i += 1
            t = TupleType(tuple(stack.pop()))
        return t

    def _fast_type(self, tok: str, k: int) -> Type:
        """A leaf type written as one token (the printer's exact spelling)."""
        m = _TENSOR_FAST.match(tok)
        t: Type
        if m is not None:
            dtype = self.dtype(m.group(2), k, False, shift=m.start(2) - 1)  # at the quote, as for a string token
            t = TensorType(tuple(int(d) for d in m.group(1).replace(",", " ").split()), dtype)
        else:
            m = _PRIM_FAST.match(tok)
            assert m is not None
            t = PrimType(self.dtype(m.group(1), k, False, shift=m.start(1) - 1))
        self.types[tok] = t
        return t
