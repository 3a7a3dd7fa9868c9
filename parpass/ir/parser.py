"""Parser of the IR text form: ``parse(astext(mod))`` rebuilds ``mod``; ``.ppir`` files.

The grammar is the one :mod:`parpass.ir.printer` writes down in its docstring.
:func:`parse` reads a printed module, :func:`parse_function` a printed function
(``function(...) {...}`` or ``primfunc(...) {...}``, optionally ``@name = ...``).
Importing this module registers the ``.ppir`` file format, so that
:func:`parpass.ir.save` writes the text form of a module (atomically, like the
other formats) and :func:`parpass.ir.load` parses it back.

What comes back. The result is structurally equal to the module that was
printed (:func:`~parpass.ir.structural_equal`: same IR up to variable ids and
name hints), and printing it again gives the same text. Variables get fresh
function-local ids from an :class:`~parpass.ir.ids.IdSupply` in definition order
(parameters first, in order; a binding's, loop's or let's variable right after
its value, min and extent, which do not see it), and their display names as name
hints, so the same text always gives byte-identical IR. Within a function one
display name is one variable, as the printer guarantees: a name defined a second
time (a loop variable reused by two sibling loops, a variable bound in both
branches of an ``If``) is the same variable.

Checks. A variable must be defined (textually) before it is used; relax ops must
be registered; dtypes must be known (:data:`~parpass.ir.builtin_ops.DTYPES`, and
for loop-level values also vectors such as ``int32x4``); function names must be
unique. Anything else that is well-formed text is rebuilt as written (types are
not inferred or checked: :func:`~parpass.ir.well_formed` does that). Every
problem raises :class:`ParseError` (an :class:`~parpass.errors.IRFormatError`,
so a ``ValueError``) whose message is ``file:line:col: what is wrong``, followed
by the offending source line and a caret under the column.

Design (deep IR). The tokenizer is one regular expression applied with
``findall`` (token strings only; positions are recomputed only to report an
error). The parser is hand-written recursive descent *without* Python recursion
over the IR: dataflow expressions and blocks, loop-level statements, loop-level
expressions (operator precedence over an operand and an operator stack, with
Python's precedence as the printer uses it), types, attribute literals and
constant values are each parsed by a loop over an explicit stack of open
constructs. A 100,000-binding function, a 5,000-deep expression or loop nest,
or a 5,000-deep attribute list parse at any recursion limit, in any thread.
"""

from __future__ import annotations

import base64
import binascii
import difflib
import gc
import json
import os
import re
from typing import Any, NoReturn, cast

import numpy as np

from parpass.errors import IRFormatError, NameNotFoundError, close_names, closest_names, format_names
from parpass.ir import relax, tir
from parpass.ir.builtin_ops import DTYPES
from parpass.ir.dtype import split_vector
from parpass.ir.ids import IdSupply
from parpass.ir.module import IRModule
from parpass.ir.node import BaseFunc, GlobalVar, Op
from parpass.ir.op import get_op
from parpass.ir.printer import KEYWORDS, astext
from parpass.ir.serialization import IRObject, check_loaded, register_format
from parpass.ir.types import PrimType, TensorType, TupleType, Type

__all__ = ["TEXT_EXTENSION", "ParseError", "parse", "parse_function", "parse_text"]

#: The file extension of the text form.
TEXT_EXTENSION = ".ppir"


class ParseError(IRFormatError):
    """Text that is not valid IR text: ``file:line:col: reason``, the source line and a caret.

    Attributes: ``filename``, ``line`` and ``column`` (1-based), ``reason`` (what is
    wrong, without the location), ``source_line`` (the offending line). ``brief`` is
    the first line of the message, for one-line error reports.
    """

    def __init__(self, filename: str, line: int, column: int, reason: str, source_line: str) -> None:
        self.filename = filename
        self.line = line
        self.column = column
        self.reason = reason
        self.source_line = source_line
        shown, caret = _excerpt(source_line, column)
        super().__init__(f"{self.brief}\n{shown}\n{caret}")

    @property
    def brief(self) -> str:
        """``file:line:col: reason`` on one line."""
        return f"{self.filename}:{self.line}:{self.column}: {self.reason}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.filename, self.line, self.column, self.reason, self.source_line))


def _excerpt(line: str, column: int, width: int = 100) -> tuple[str, str]:
    """The source line (cut to ``width`` characters around the column) and a caret line under it."""
    line = line.rstrip("\r").replace("\t", " ")
    start = 0
    if len(line) > width:
        start = max(0, min(column - 1 - width // 2, len(line) - width))
        cut = line[start : start + width]
        line = ("..." if start else "") + cut + ("..." if start + width < len(line) else "")
        return line, " " * (column - 1 - start + (3 if start else 0)) + "^"
    return line, " " * (column - 1) + "^"


# ---------------------------------------------------------------------------------------------------------------------
# tokens

_STRING = r'"(?:[^"\\\n]|\\.)*"'
_TOKEN_RE = re.compile(
    r"(?:\s+|#[^\n]*)*("
    # leaf types exactly as the printer writes them, as one token (a fast path; other spellings parse too)
    r'Tensor\(\((?:-?[0-9]+,|-?[0-9]+(?:, -?[0-9]+)+)?\), "[A-Za-z0-9_]+"\)'
    r'|Prim\("[A-Za-z0-9_]+"\)'
    r"|[%@](?:" + _STRING + r"|[A-Za-z0-9_.]+)"  # %var, @global
    r'|b64"[^"\n]*"'
    r"|" + _STRING + r"|[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?"
    r"|[A-Za-z_][A-Za-z0-9_.]*"
    r"|->|==|!=|<=|>=|//"
    r"|\S)"  # any other character: punctuation, or an error
)
_TENSOR_FAST = re.compile(r'Tensor\(\(([-0-9, ]*)\), "([A-Za-z0-9_]+)"\)\Z')
_PRIM_FAST = re.compile(r'Prim\("([A-Za-z0-9_]+)"\)\Z')
_NAME_RE = re.compile(r"[A-Za-z0-9_.]+\Z")
_INT_RE = re.compile(r"-?[0-9]+\Z")
_NUMBER_RE = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|inf|nan)\Z")
_CONST_WORDS = frozenset({"true", "false", "inf", "nan"})
#: The end-of-input token: starts with a space, which no real token does.
_EOF = " end of input"
#: How many tokens past the current one the parser looks at, at most.
_LOOKAHEAD = 4

_DTYPE_SET = frozenset(DTYPES)
_FOR_KINDS = {k.value: k for k in tir.ForKind}
_STMT_WORDS = ("for", "seq", "if", "let", "allocate", "evaluate")
_TYPE_WORDS = ("Tensor", "Prim", "Tuple")
_FUNC_WORDS = ("function", "primfunc")

# loop-level binary operators: token -> (precedence, class); all associate left, comparisons do not chain
_BINOPS: dict[str, tuple[int, type]] = {
    "or": (1, tir.Or),
    "and": (2, tir.And),
    "==": (4, tir.EQ),
    "!=": (4, tir.NE),
    "<": (4, tir.LT),
    "<=": (4, tir.LE),
    ">": (4, tir.GT),
    ">=": (4, tir.GE),
    "+": (5, tir.Add),
    "-": (5, tir.Sub),
    "*": (6, tir.Mul),
    "//": (6, tir.FloorDiv),
    "%": (6, tir.FloorMod),
}
_CMP_PREC = 4
_NOT_ENTRY = (3, None, -1)
# loop-level function-like forms: name -> number of expression arguments (None: any)
_PFORMS: dict[str, int | None] = {
    "min": 2,
    "max": 2,
    "select": 3,
    "cast": 1,
    "call": None,
    "ramp": 3,
    "broadcast": 2,
}

# frame kinds of the dataflow machine
_BLOCK, _CALL, _TUPLE, _IF = range(4)
# frame kinds of the statement machine
_S_ROOT, _S_SEQ, _S_FOR, _S_IF, _S_LET, _S_ALLOC = range(6)
# group kinds of the loop-level expression machine
_G_PAREN, _G_LOAD, _G_FORM = range(3)


def _describe(tok: str) -> str:
    if tok == _EOF:
        return "end of input"
    return repr(tok if len(tok) <= 40 else tok[:37] + "...")


def _did_you_mean(tok: str, words: Any) -> str:
    """`` (did you mean 'x'?)`` when ``tok`` is a word close to one of ``words``, else empty."""
    if not _is_ident(tok) or tok in KEYWORDS:
        return ""
    near = difflib.get_close_matches(tok, list(words), n=1, cutoff=0.6)
    return f" (did you mean {near[0]!r}?)" if near else ""


def _is_ident(tok: str) -> bool:
    c = tok[0]
    return (c.isascii() and c.isalpha()) or c == "_"


def _decode_string(tok: str) -> str:
    """The value of a JSON string token (raises ValueError on a bad escape)."""
    if "\\" not in tok:
        return tok[1:-1]
    value = json.loads(tok, strict=False)  # strict=False: raw control characters pass, as on the fast path
    assert isinstance(value, str)
    return value


def _fmt_key(sigil: str, name: str) -> str:
    """The canonical (printed) spelling of ``%name`` / ``@name``: the key of a name in the tables."""
    return sigil + (name if _NAME_RE.match(name) else json.dumps(name, ensure_ascii=False))


# ---------------------------------------------------------------------------------------------------------------------
# the parser


class _Parser:
    """Parses one text. Token strings live in ``toks`` (ending with ``_EOF``); ``i`` is the current index."""

    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.filename = filename
        self.toks: list[str] = _TOKEN_RE.findall(text)
        # End-of-input tokens, enough for the longest look-ahead (``toks[k + 3]``): text cut anywhere reads
        # as "unexpected end of input", never as an IndexError.
        self.toks.extend([_EOF] * _LOOKAHEAD)
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
        raise _error_at(self.text, pos, self.filename, reason)

    def expect(self, word: str, what: str = "") -> None:
        tok = self.toks[self.i]
        if tok != word:
            ctx = f" {what}" if what else ""
            self.fail(f"expected {word!r}{ctx}, got {_describe(tok)}")
        self.i += 1

    def string(self, what: str) -> str:
        """A JSON string token."""
        tok = self.toks[self.i]
        if tok[0] != '"':
            self.fail(f"expected a string ({what}), got {_describe(tok)}")
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
            self.fail(f"expected {what}, got {_describe(tok)}")
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
            self.fail(f"expected an integer ({what}), got {_describe(tok)}", k)
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
        return _fmt_key(tok[0], name), name

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
        toks = self.toks
        stack: list[list[Any]] = []  # open containers: [container, is_dict, pending key]
        while True:
            k = self.i
            tok = toks[k]
            self.i = k + 1
            value: Any
            if tok == "[":
                if toks[k + 1] == "]":
                    self.i = k + 2
                    value = []
                else:
                    stack.append([[], False, None])
                    continue
            elif tok == "{":
                if toks[k + 1] == "}":
                    self.i = k + 2
                    value = {}
                else:
                    frame: list[Any] = [{}, True, None]
                    self._dict_key(frame)
                    stack.append(frame)
                    continue
            elif tok == "null":
                value = None
            elif tok == "true":
                value = True
            elif tok == "false":
                value = False
            elif tok[0] == '"':
                self.i = k
                value = self.string("a literal")
            else:
                self.i = k
                value = self.number("a literal (null, true, false, a number, a string, a list or a dict)")
            # the value is complete: hand it to the open containers
            while True:
                if not stack:
                    return value
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
                    break
                close = "}" if frame[1] else "]"
                if tok != close:
                    self.fail(f"expected ',' or {close!r} in a {'dict' if frame[1] else 'list'}, got {_describe(tok)}")
                self.i += 1
                stack.pop()
                value = container

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
        self.fail(f"expected {what}, got {_describe(tok)}", k)

    def attrs(self, what: str) -> dict[str, Any]:
        k = self.i
        if self.toks[k] != "{":
            self.fail(f"expected a dict of {what} ('{{...}}'), got {_describe(self.toks[k])}")
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
        toks = self.toks
        stack: list[list[Type]] = []
        while True:
            k = self.i
            tok = toks[k]
            t = self.types.get(tok)
            if t is not None:
                self.i = k + 1
            elif tok[-1:] == ")" and (tok.startswith("Tensor(") or tok.startswith("Prim(")):
                t = self._fast_type(tok, k)
                self.i = k + 1
            elif tok == "Tensor":
                self.i = k + 1
                self.expect("(", "after Tensor")
                shape = self.int_shape()
                self.expect(",", "after a tensor shape")
                t = TensorType(shape, self.dtype_string(False))
                self.expect(")", "to close Tensor(...)")
            elif tok == "Prim":
                self.i = k + 1
                self.expect("(", "after Prim")
                t = PrimType(self.dtype_string(False))
                self.expect(")", "to close Prim(...)")
            elif tok == "Tuple":
                self.i = k + 1
                self.expect("(", "after Tuple")
                if toks[self.i] == ")":
                    self.i += 1
                    t = TupleType(())
                else:
                    stack.append([])
                    continue
            else:
                hint = _did_you_mean(tok, _TYPE_WORDS)
                self.fail(f"expected a type (Tensor, Prim or Tuple), got {_describe(tok)}{hint}")
            while True:
                if not stack:
                    return t
                stack[-1].append(t)
                tok = toks[self.i]
                if tok == ",":
                    self.i += 1
                    break
                if tok != ")":
                    self.fail(f"expected ',' or ')' in Tuple(...), got {_describe(tok)}")
                self.i += 1
                t = TupleType(tuple(stack.pop()))

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

    # ------------------------------------------------------------ constants

    def constant(self) -> relax.Constant:
        """``const(values, "dtype")`` or ``const(b64"...", "dtype", shape)``."""
        self.expect("const")
        self.expect("(", "after const")
        toks = self.toks
        k = self.i
        tok = toks[k]
        if tok.startswith('b64"'):
            try:
                data = base64.b64decode(tok[4:-1], validate=True)
            except (binascii.Error, ValueError) as exc:
                self.fail(f"bad base64 data: {exc}", k, shift=4)
            self.i = k + 1
            self.expect(",", "after the constant's data")
            dtype = self.dtype_string(False)
            self.expect(",", "after the constant's dtype")
            shape = self.int_shape()
            self.expect(")", "to close const(...)")
            return relax.Constant(data, dtype, shape)
        k0 = self.i
        values, where, shape = self.const_values()
        self.expect(",", "after the constant's values")
        kd = self.i
        dtype = self.dtype_string(False)
        self.expect(")", "to close const(...)")
        dt = np.dtype(dtype)
        if dt.byteorder not in "|<":
            dt = dt.newbyteorder("<")
        converted: list[Any]
        if dt.kind == "b":
            bad = [n for n, text in enumerate(values) if text != "true" and text != "false"]
            if bad:
                self.fail(f"a constant of dtype {dtype} holds true or false, got {values[bad[0]]!r}", where[bad[0]])
            converted = [text == "true" for text in values]
        else:
            numeric = _INT_RE.match if dt.kind in "iu" else _NUMBER_RE.match
            bad = [n for n, text in enumerate(values) if not numeric(text)]
            if bad:
                kind = "integers" if dt.kind in "iu" else "numbers"
                self.fail(f"a constant of dtype {dtype} holds {kind}, got {values[bad[0]]!r}", where[bad[0]])
            try:
                converted = [int(t) for t in values] if dt.kind in "iu" else [float(t) for t in values]
            except ValueError as exc:  # an integer with more digits than int() converts
                self.fail(f"bad constant value: {exc}", k0)
        try:
            data = np.asarray(converted, dtype=dt).tobytes()
        except (OverflowError, ValueError) as exc:
            self.fail(f"constant values do not fit {dtype}: {exc}", kd)
        return relax.Constant(data, dtype, shape)

    def const_values(self) -> tuple[list[str], list[int], tuple[int, ...]]:
        """A scalar, or a regular nested list, of true/false/numbers.

        Returns the value texts (a negative number with its ``-``), the token index
        of each, and the shape. One loop over tokens with a stack of element counts.
        """
        toks = self.toks
        i = start = self.i
        values: list[str] = []
        where: list[int] = []
        counts: list[int] = []  # elements so far of each open list
        dims: dict[int, int] = {}  # depth -> length of the lists closed at that depth
        leaf_depth = -1
        want_value = True
        while True:
            tok = toks[i]
            if want_value:
                if tok == "[":
                    i += 1
                    if toks[i] != "]":
                        counts.append(0)
                        continue
                    counts.append(0)  # an empty list: closed just below
                    tok = "]"
                else:
                    where.append(i)
                    if tok == "-":
                        i += 1
                        raw = toks[i]
                        tok = "-" + raw
                    else:
                        raw = tok
                    if not ("0" <= raw[0] <= "9" or raw in _CONST_WORDS):
                        self.fail(f"expected a constant value (true, false or a number), got {_describe(raw)}", i)
                    values.append(tok)
                    i += 1
                    depth = len(counts)
                    if depth != leaf_depth:
                        if leaf_depth >= 0:
                            self.fail("ragged constant: values are nested to different depths", where[-1])
                        leaf_depth = depth
                        if any(d >= depth for d in dims):
                            self.fail("ragged constant: values are nested to different depths", where[-1])
                    if not counts:
                        self.i = i
                        return values, where, ()
                    counts[-1] += 1
                    want_value = False
                    continue
            if tok == ",":
                i += 1
                want_value = True
                continue
            if tok != "]":
                self.i = i
                self.fail(f"expected ',' or ']' in constant values, got {_describe(tok)}")
            i += 1
            n = counts.pop()
            depth = len(counts)
            if dims.setdefault(depth, n) != n:
                self.fail("ragged constant: lists of one level have different lengths", start)
            if 0 <= leaf_depth <= depth:
                self.fail("ragged constant: values are nested to different depths", start)
            if not counts:
                self.i = i
                ndim = leaf_depth if leaf_depth >= 0 else len(dims)
                if any(d not in dims for d in range(ndim)):
                    self.fail("ragged constant: empty lists at different depths", start)
                return values, where, tuple(dims[d] for d in range(ndim))
            counts[-1] += 1
            want_value = False

    # ------------------------------------------------------------ module and functions

    def module(self) -> IRModule:
        toks = self.toks
        attrs: dict[str, Any] = {}
        if toks[self.i] == "module":
            self.i += 1
            self.expect("attrs", "after 'module'")
            attrs = self.attrs("module attributes")
        funcs: list[tuple[str, BaseFunc]] = []
        seen: dict[str, int] = {}
        while toks[self.i] != _EOF:
            k = self.i
            tok = toks[k]
            if tok[0] != "@" or len(tok) < 2:
                if tok in _FUNC_WORDS:
                    self.fail(f"expected '@name = {tok}(...)': a module's functions are named (use parse_function)")
                self.fail(
                    f"expected a function definition '@name = function(...)' or '@name = primfunc(...)', "
                    f"got {_describe(tok)}"
                )
            name = self.name_of(k)[1]
            if name in seen:
                line = self.text.count("\n", 0, self._offset(seen[name])) + 1
                self.fail(f"duplicate function name @{name} (first defined on line {line})", k)
            seen[name] = k
            self.i = k + 1
            self.expect("=", f"after @{name}")
            funcs.append((name, self.function()))
        undefined = [(k, name) for name, k in self.global_uses.items() if name not in seen]
        if undefined:  # the first in the text: nothing could run it (InferType would fail deep in a pipeline)
            k, name = min(undefined)
            near = close_names(name, seen)
            hint = f"; did you mean {format_names('@' + n for n in near)}?" if near else ""
            self.fail(
                f"@{name} is called but not defined in the module (it defines "
                f"{format_names(['@' + n for n in seen][:8], len(seen))}){hint}",
                k,
            )
        return IRModule(funcs, attrs=attrs)

    def function(self) -> BaseFunc:
        tok = self.toks[self.i]
        self.names = {}
        self.ids = IdSupply()
        if tok == "function":
            return self.relax_function()
        if tok == "primfunc":
            return self.prim_function()
        hint = _did_you_mean(tok, _FUNC_WORDS)
        self.fail(f"expected 'function' or 'primfunc', got {_describe(tok)}{hint}")

    # ------------------------------------------------------------ dataflow functions

    def define_rvar(self, k: int) -> relax.Var:
        tok = self.toks[k]
        key, name = (tok, tok[1:]) if tok[1] != '"' else self.name_of(k)
        v = self.names.get(key)
        if v is None:
            v = self.names[key] = relax.Var(self.ids.fresh(), name)
        return v

    def relax_function(self) -> relax.Function:
        toks = self.toks
        self.i += 1
        self.expect("(", "after 'function'")
        params: list[relax.Param] = []
        if toks[self.i] != ")":
            while True:
                k = self.i
                if toks[k][0] != "%" or len(toks[k]) < 2:
                    self.fail(f"expected a parameter '%name: type', got {_describe(toks[k])}")
                var = self.define_rvar(k)
                self.i = k + 1
                self.expect(":", "after a parameter name")
                params.append(relax.Param(var, self.type_()))
                if toks[self.i] != ",":
                    break
                self.i += 1
        self.expect(")", "to close the parameter list")
        ret: Type | None = None
        if toks[self.i] == "->":
            self.i += 1
            ret = self.type_()
        attrs: dict[str, Any] = {}
        if toks[self.i] == "attrs":
            self.i += 1
            attrs = self.attrs("function attributes")
        self.expect("{", "to open the function body")
        body = self.relax_block("return")
        return relax.Function(tuple(params), body, ret, attrs=attrs)

    def relax_block(self, keyword: str) -> relax.SeqExpr:
        """A block after its ``{``, through its ``}``: bindings, then ``keyword expr``.

        One loop over an explicit stack of open constructs (blocks, calls, tuples, ifs).
        """
        toks = self.toks
        names = self.names
        # frames: [_BLOCK, keyword, bindings, token index of the pending binding's variable (-1: the body),
        #          the pending binding's type]
        #         [_CALL, op, args, attrs, start] / [_TUPLE, fields, start] / [_IF, cond, then, start]
        stack: list[list[Any]] = [[_BLOCK, keyword, [], -1, None]]
        i = self.i
        # mode 0: next item of the top block; 1: start an expression; 2: an expression is complete;
        # 3: inside the argument list of a call, before an argument (or its attrs, or its ")")
        mode = 0
        value: Any = None
        while True:
            if mode == 0:
                frame = stack[-1]
                tok = toks[i]
                if tok[0] == "%" and len(tok) > 1:
                    frame[3] = i  # the variable is defined once its value is parsed
                    i += 1
                    ty = None
                    if toks[i] == ":":
                        self.i = i + 1
                        ty = self.type_()
                        i = self.i
                    if toks[i] != "=":
                        self.i = i
                        self.fail(f"expected '=' in a binding, got {_describe(toks[i])}")
                    i += 1
                    frame[4] = ty
                    mode = 1
                elif tok == frame[1]:
                    i += 1
                    frame[3] = -1
                    mode = 1
                else:
                    self.i = i
                    other = "yield" if frame[1] == "return" else "return"
                    if tok == other:
                        self.fail(
                            f"expected {frame[1]!r} to end this block ({other!r} ends "
                            f"{'an if branch' if other == 'yield' else 'a function body'})"
                        )
                    hint = _did_you_mean(tok, (frame[1],))
                    self.fail(f"expected a binding '%name = ...' or {frame[1]!r}, got {_describe(tok)}{hint}")
            if mode == 1:
                tok = toks[i]
                c = tok[0]
                if c == "%" and len(tok) > 1:
                    value = names.get(tok)
                    if value is None:
                        key = self.name_of(i)[0]
                        value = names.get(key)
                        if value is None:
                            self.i = i
                            self.undefined(key, i, "variable")
                    i += 1
                    mode = 2
                elif c == "@" and len(tok) > 1:
                    gv = self.global_var(i)
                    if toks[i + 1] == "(":
                        stack.append([_CALL, gv, [], None, i])
                        i += 2
                        mode = 3
                    else:
                        value = gv
                        i += 1
                        mode = 2
                elif tok == "(":
                    if toks[i + 1] == ")":
                        value = relax.Tuple(())
                        i += 2
                        mode = 2
                    else:
                        stack.append([_TUPLE, [], i])
                        i += 1
                elif tok == "if":
                    stack.append([_IF, None, None, i])
                    i += 1
                elif tok == "const":
                    self.i = i
                    value = self.constant()
                    i = self.i
                    mode = 2
                elif (c == '"' or _is_ident(tok)) and tok not in KEYWORDS:
                    self.i = i
                    name = self.word("an op name")
                    op = self.op(name, i)
                    i = self.i
                    if toks[i] != "(":
                        self.i = i
                        self.fail(f"expected '(' after op {name!r}: an op is only used in a call")
                    stack.append([_CALL, op, [], None, i - 1])
                    i += 1
                    mode = 3
                else:
                    self.i = i
                    self.fail(f"expected an expression, got {_describe(tok)}")
            if mode == 3:  # just after the '(' of a call, or after ', ' in its arguments
                tok = toks[i]
                if tok == ")":
                    frame = stack.pop()
                    value = relax.Call(frame[1], tuple(frame[2]), frame[3] or {})
                    i += 1
                    mode = 2
                elif tok == "attrs":
                    self.i = i + 1
                    self.expect("=", "after 'attrs' in a call")
                    stack[-1][3] = self.attrs("call attributes")
                    i = self.i
                    if toks[i] != ")":
                        self.fail(f"expected ')' after a call's attrs, got {_describe(toks[i])}")
                    frame = stack.pop()
                    value = relax.Call(frame[1], tuple(frame[2]), frame[3])
                    i += 1
                    mode = 2
                else:
                    mode = 1
                    continue
            if mode != 2:
                continue
            # an expression is complete: postfix projections, then hand it to the innermost open construct
            while toks[i] == "[":
                self.i = i + 1
                index = self.integer("a tuple index")
                i = self.i
                if toks[i] != "]":
                    self.fail(f"expected ']' after a tuple index, got {_describe(toks[i])}")
                i += 1
                value = relax.TupleGetItem(value, index)
            frame = stack[-1]
            kind = frame[0]
            if kind == _CALL:
                frame[2].append(value)
                tok = toks[i]
                if tok == ",":
                    i += 1
                    mode = 3
                elif tok == ")":
                    stack.pop()
                    value = relax.Call(frame[1], tuple(frame[2]), frame[3] or {})
                    i += 1
                else:
                    self.i = i
                    self.fail(f"expected ',' or ')' in the arguments of a call, got {_describe(tok)}")
            elif kind == _BLOCK:
                k = frame[3]
                if k >= 0:
                    var = names.get(toks[k])
                    if var is None:
                        var = self.define_rvar(k)
                    frame[2].append(relax.Binding(var, value, frame[4]))
                    mode = 0
                    continue
                if toks[i] != "}":
                    self.i = i
                    self.fail(f"expected '}}' after {frame[1]!r} and its expression, got {_describe(toks[i])}")
                i += 1
                stack.pop()
                value = relax.SeqExpr(tuple(frame[2]), value)
                if not stack:
                    self.i = i
                    return cast(relax.SeqExpr, value)
                frame = stack[-1]  # an _IF
                if frame[2] is None:
                    frame[2] = value
                    self.i = i
                    self.expect("else", "after the first branch of an if")
                    self.expect("{", "to open the else branch")
                    i = self.i
                    stack.append([_BLOCK, "yield", [], -1, None])
                    mode = 0
                    continue
                stack.pop()
                value = relax.If(frame[1], frame[2], value)
            elif kind == _TUPLE:
                frame[1].append(value)
                tok = toks[i]
                if tok == ",":
                    i += 1
                    if toks[i] == ")":
                        i += 1
                        stack.pop()
                        value = relax.Tuple(tuple(frame[1]))
                    else:
                        mode = 1
                elif tok == ")":
                    if len(frame[1]) == 1:
                        self.i = i
                        self.fail("a one-element tuple is written with a trailing comma: (x,)")
                    i += 1
                    stack.pop()
                    value = relax.Tuple(tuple(frame[1]))
                else:
                    self.i = i
                    self.fail(f"expected ',' or ')' in a tuple, got {_describe(tok)}")
            else:  # _IF: the condition is complete
                frame[1] = value
                if toks[i] != "{":
                    self.i = i
                    self.fail(f"expected '{{' after the condition of an if, got {_describe(toks[i])}")
                i += 1
                stack.append([_BLOCK, "yield", [], -1, None])
                mode = 0

    # ------------------------------------------------------------ loop-level functions

    def prim_function(self) -> tir.PrimFunc:
        toks = self.toks
        self.i += 1
        self.expect("(", "after 'primfunc'")
        self.declare_params()
        params: list[tir.Var | tir.Buffer] = []
        if toks[self.i] != ")":
            while True:
                k = self.i
                if toks[k + 2] == "Buffer":
                    params.append(self.buffer_decl())
                else:
                    var = self.names[self.name_of(k)[0]]
                    self.i = k + 3  # checked by declare_params
                    params.append(var)
                if toks[self.i] != ",":
                    break
                self.i += 1
        self.expect(")", "to close the parameter list")
        attrs: dict[str, Any] = {}
        if toks[self.i] == "attrs":
            self.i += 1
            attrs = self.attrs("function attributes")
        self.expect("{", "to open the function body")
        body = self.statements()
        return tir.PrimFunc(tuple(params), body, attrs=attrs)

    def declare_params(self) -> None:
        """Give every parameter its id, in order, and define the scalars (a buffer shape may use a later one)."""
        toks = self.toks
        k = start = self.i
        depth = 0
        expect_param = True
        while True:
            tok = toks[k]
            if tok == _EOF:
                self.fail("unexpected end of input in a parameter list", k)
            if depth == 0:
                if tok == ")":
                    self.i = start
                    return
                if expect_param:
                    if tok[0] != "%" or len(tok) < 2:
                        self.fail(
                            f"expected a parameter '%name: dtype' or '%name: Buffer(...)', got {_describe(tok)}", k
                        )
                    if toks[k + 1] != ":":
                        self.fail(f"expected ':' after a parameter name, got {_describe(toks[k + 1])}", k + 1)
                    key, name = self.name_of(k)
                    old = self.names.get(key)
                    if toks[k + 2] == "Buffer":
                        if old is not None and type(old) is not int:
                            self.fail(f"parameter {key} is declared twice with different kinds", k)
                        if old is None:
                            self.names[key] = self.ids.fresh()  # the buffer is defined once its shape is parsed
                    else:
                        if toks[k + 3] == "(":
                            self.fail(
                                f"expected a dtype or 'Buffer(...)' for parameter {key}, got "
                                f"{_describe(toks[k + 2])}{_did_you_mean(toks[k + 2], ('Buffer',))}",
                                k + 2,
                            )
                        self.i = k + 2
                        dtype = self.dtype_word(True)
                        if old is None:
                            self.names[key] = tir.Var(self.ids.fresh(), name, dtype)
                        elif type(old) is not tir.Var or old.dtype != dtype:
                            self.fail(f"parameter {key} is declared twice with different kinds or dtypes", k)
                    expect_param = False
                elif tok == ",":
                    expect_param = True
            if tok in ("(", "[", "{"):
                depth += 1
            elif tok in (")", "]", "}"):
                depth -= 1
            k += 1

    def buffer_decl(self) -> tir.Buffer:
        """``%name: Buffer(shape, "dtype"[, strides=shape])``, defining (or redefining) the buffer."""
        toks = self.toks
        k = self.i
        tok = toks[k]
        if tok[0] != "%" or len(tok) < 2:
            self.fail(f"expected a buffer '%name: Buffer(...)', got {_describe(tok)}")
        key, name = self.name_of(k)
        old = self.names.get(key)
        if old is None:
            vid = self.ids.fresh()
        elif type(old) is int:
            vid = old
        elif type(old) is tir.Buffer:
            vid = old.vid
        else:
            self.fail(f"{key} is a scalar variable, not a buffer", k)
        self.i = k + 1
        self.expect(":", "after a buffer name")
        self.expect("Buffer", "in a buffer declaration")
        self.expect("(", "after Buffer")
        shape = self.prim_shape()
        self.expect(",", "after a buffer shape")
        dtype = self.dtype_string(True)
        strides: tuple[Any, ...] = ()
        if toks[self.i] == ",":
            self.i += 1
            self.expect("strides", "(the only optional argument of Buffer)")
            self.expect("=", "after 'strides'")
            strides = self.prim_shape()
        self.expect(")", "to close Buffer(...)")
        buf = tir.Buffer(vid, name, dtype, shape, strides)
        self.names[key] = buf
        return buf

    def prim_shape(self) -> tuple[Any, ...]:
        """``()``, ``(e,)`` or ``(e, f, ...)`` of loop-level expressions."""
        self.expect("(", "to open a shape")
        toks = self.toks
        if toks[self.i] == ")":
            self.i += 1
            return ()
        dims = [self.prim_expr()]
        while toks[self.i] == ",":
            self.i += 1
            if toks[self.i] == ")":
                break
            dims.append(self.prim_expr())
        else:
            if len(dims) == 1:
                self.fail("a one-element shape is written with a trailing comma: (n,)")
        self.expect(")", "to close a shape")
        return tuple(dims)

    def define_tvar(self, k: int, dtype: str) -> tir.Var:
        key, name = self.name_of(k)
        old = self.names.get(key)
        if old is None:
            var = tir.Var(self.ids.fresh(), name, dtype)
        elif type(old) is tir.Var:
            if old.dtype == dtype:
                return old
            var = tir.Var(old.vid, name, dtype)
        else:
            self.fail(f"{key} is a buffer, not a scalar variable", k)
        self.names[key] = var
        return var

    def statements(self) -> tir.Stmt:
        """The statements of a block after its ``{``, through its ``}``.

        One loop over an explicit stack of open blocks. A block of exactly one
        statement is that statement; otherwise (and always for ``seq``) a SeqStmt.
        """
        toks = self.toks
        # frames: [kind, statements, data...]
        stack: list[list[Any]] = [[_S_ROOT, []]]
        while True:
            k = self.i
            tok = toks[k]
            if tok == "}":
                self.i = k + 1
                frame = stack.pop()
                kind = frame[0]
                items = frame[1]
                stmt: Any
                if kind == _S_SEQ:
                    stmt = tir.SeqStmt(tuple(items))
                else:
                    body = items[0] if len(items) == 1 else tir.SeqStmt(tuple(items))
                    if kind == _S_ROOT:
                        return body
                    if kind == _S_FOR:
                        stmt = tir.For(frame[2], frame[3], frame[4], frame[5], body, frame[6])
                    elif kind == _S_LET:
                        stmt = tir.LetStmt(frame[2], frame[3], body)
                    elif kind == _S_ALLOC:
                        stmt = tir.Allocate(frame[2], body)
                    elif frame[3] is None:  # _S_IF, then-branch
                        if toks[self.i] == "else":
                            self.i += 1
                            self.expect("{", "to open the else branch")
                            stack.append([_S_IF, [], frame[2], body])
                            continue
                        stmt = tir.IfThenElse(frame[2], body)
                    else:
                        stmt = tir.IfThenElse(frame[2], frame[3], body)
                stack[-1][1].append(stmt)
                continue
            c = tok[0]
            if c == "%" and len(tok) > 1:
                buf = self.buffer_use(k)
                self.i = k + 1
                self.expect("[", "after a buffer name (a store is '%buf[indices] = value')")
                indices = self.prim_list("]")
                self.expect("=", "in a buffer store")
                stack[-1][1].append(tir.BufferStore(buf, self.prim_expr(), indices))
            elif tok == "evaluate":
                self.i = k + 1
                self.expect("(", "after evaluate")
                value = self.prim_expr()
                self.expect(")", "to close evaluate(...)")
                stack[-1][1].append(tir.Evaluate(value))
            elif tok == "for":
                stack.append(self.for_header())
            elif tok == "if":
                self.i = k + 1
                cond = self.prim_expr()
                self.expect("{", "after the condition of an if")
                stack.append([_S_IF, [], cond, None])
            elif tok == "let":
                self.i = k + 1
                kv = self.i
                if toks[kv][0] != "%" or len(toks[kv]) < 2:
                    self.fail(f"expected a variable after 'let', got {_describe(toks[kv])}")
                self.i = kv + 1
                self.expect(":", "after the variable of a let")
                dtype = self.dtype_word(True)
                self.expect("=", "in a let")
                value = self.prim_expr()
                var = self.define_tvar(kv, dtype)  # after its value, which does not see it
                self.expect("{", "after the value of a let")
                stack.append([_S_LET, [], var, value])
            elif tok == "allocate":
                self.i = k + 1
                buf = self.buffer_decl()
                self.expect("{", "after the buffer of an allocate")
                stack.append([_S_ALLOC, [], buf])
            elif tok == "seq":
                self.i = k + 1
                self.expect("{", "after seq")
                stack.append([_S_SEQ, []])
            elif tok == _EOF:
                self.fail("unexpected end of input: a '}' is missing")
            else:
                hint = _did_you_mean(tok, _STMT_WORDS)
                self.fail(
                    f"unknown statement {_describe(tok)}{hint}; a statement is for, seq, if, let, allocate, "
                    "evaluate or a buffer store '%buf[...] = value'"
                )

    def for_header(self) -> list[Any]:
        """``for %v: dtype in kind(min=e, extent=e) [annotations {...}] {`` as a statement frame."""
        toks = self.toks
        self.i += 1
        k = self.i
        if toks[k][0] != "%" or len(toks[k]) < 2:
            self.fail(f"expected a loop variable after 'for', got {_describe(toks[k])}")
        self.i = k + 1
        self.expect(":", "after the loop variable")
        dtype = self.dtype_word(True)
        self.expect("in", "after the loop variable's dtype")
        kk = self.i
        kind = _FOR_KINDS.get(toks[kk])
        if kind is None:
            hint = _did_you_mean(toks[kk], _FOR_KINDS)
            self.fail(f"unknown loop kind {_describe(toks[kk])}{hint}; one of: {', '.join(_FOR_KINDS)}")
        self.i = kk + 1
        self.expect("(", "after the loop kind")
        self.expect("min")
        self.expect("=", "after 'min'")
        lo = self.prim_expr()
        self.expect(",", "after the loop's min")
        self.expect("extent")
        self.expect("=", "after 'extent'")
        extent = self.prim_expr()
        self.expect(")", "after the loop's extent")
        var = self.define_tvar(k, dtype)  # after min and extent, which do not see it
        ann: dict[str, Any] = {}
        if toks[self.i] == "annotations":
            self.i += 1
            ann = self.attrs("loop annotations")
        self.expect("{", "to open the loop body")
        return [_S_FOR, [], var, lo, extent, kind, ann]

    def buffer_use(self, k: int) -> tir.Buffer:
        tok = self.toks[k]
        buf = self.names.get(tok)
        if type(buf) is tir.Buffer:
            return buf
        key = self.name_of(k)[0]
        buf = self.names.get(key)
        if type(buf) is tir.Buffer:
            return buf
        if buf is None:
            self.undefined(key, k, "buffer")
        if type(buf) is int:
            self.fail(f"buffer parameter {key} is used in a parameter's shape before its own declaration", k)
        self.fail(f"{key} is a scalar variable, not a buffer", k)

    def prim_list(self, close: str) -> tuple[Any, ...]:
        """Expressions separated by commas up to ``close`` (consumed)."""
        toks = self.toks
        items: list[Any] = []
        if toks[self.i] != close:
            items.append(self.prim_expr())
            while toks[self.i] == ",":
                self.i += 1
                items.append(self.prim_expr())
        self.expect(close, "to close an index list")
        return tuple(items)

    def prim_expr(self) -> Any:
        """A loop-level expression by operator precedence, on explicit operand and operator stacks.

        Operators associate left; comparisons do not chain; ``not`` binds looser than
        comparisons and tighter than ``and``. Parentheses, buffer loads and the
        function-like forms are groups on the operator stack.
        """
        toks = self.toks
        names = self.names
        i = self.i
        vals: list[Any] = []
        # operators: (precedence, class, token index) for binary operators and `not`; lists for groups:
        # [0, _G_PAREN, start] / [0, _G_LOAD, start, buffer, indices] / [0, _G_FORM, start, name, args, extra]
        ops: list[Any] = []
        while True:
            # ---- operand position
            tok = toks[i]
            c = tok[0]
            value: Any
            if c == "%" and len(tok) > 1:
                obj = names.get(tok)
                if obj is None or (type(obj) is not tir.Var and toks[i + 1] != "["):
                    key = self.name_of(i)[0]
                    obj = names.get(key)
                    if obj is None:
                        self.i = i
                        self.undefined(key, i, "variable")
                if toks[i + 1] == "[":
                    if type(obj) is not tir.Buffer:
                        self.i = i
                        self.buffer_use(i)
                    if toks[i + 2] == "]":
                        value = tir.BufferLoad(obj, ())
                        i += 3
                    else:
                        ops.append([0, _G_LOAD, i, obj, []])
                        i += 2
                        continue
                else:
                    if type(obj) is not tir.Var:
                        self.i = i
                        self.fail(f"{tok} is a buffer; a load is written {tok}[indices]")
                    value = obj
                    i += 1
            elif "0" <= c <= "9":
                if _INT_RE.match(tok):
                    self.i = i
                    value = tir.IntImm("int32", self._int(tok, i))
                else:
                    value = tir.FloatImm("float32", float(tok))
                i += 1
            elif tok == "not":
                ops.append(_NOT_ENTRY)
                i += 1
                continue
            elif tok == "(":
                ops.append([0, _G_PAREN, i])
                i += 1
                continue
            elif tok == "true" or tok == "false":
                value = tir.IntImm("bool", 1 if tok == "true" else 0)
                i += 1
            elif tok == "-" or tok == "inf" or tok == "nan":
                self.i = i
                if tok == "-" and not ("0" <= toks[i + 1][0] <= "9" or toks[i + 1] in ("inf", "nan")):
                    self.fail("'-' in front of an operand is only part of a number literal (write 0 - x)")
                number = self.number("an expression")
                i = self.i
                value = tir.IntImm("int32", number) if isinstance(number, int) else tir.FloatImm("float32", number)
            elif tok in _PFORMS:
                if toks[i + 1] != "(":
                    self.i = i + 1
                    self.fail(f"expected '(' after {tok}, got {_describe(toks[i + 1])}")
                self.i = i + 2
                extra: Any = None
                if tok == "cast":
                    extra = self.dtype_string(True)
                    self.expect(",", "after the dtype of a cast")
                elif tok == "call":
                    dtype = self.dtype_string(True)
                    self.expect(",", "after the dtype of a call")
                    extra = (dtype, self.string("an intrinsic name"))
                    if toks[self.i] == ")":
                        value = tir.Call(dtype, extra[1], ())
                        i = self.i + 1
                        extra = False
                    else:
                        self.expect(",", "after the intrinsic name of a call")
                if extra is not False:
                    ops.append([0, _G_FORM, i, tok, [], extra])
                    i = self.i
                    continue
            elif (c == '"' or _is_ident(tok)) and toks[i + 1] == "(" and tok not in KEYWORDS:
                # an immediate of a dtype: int32(3), float64(0.5), "my dtype"(1)
                self.i = i
                dtype = self.dtype_word(True)
                self.i += 1
                number = self.number(f"a number in {dtype}(...)")
                value = tir.IntImm(dtype, number) if isinstance(number, int) else tir.FloatImm(dtype, number)
                self.expect(")", f"to close {dtype}(...)")
                i = self.i
            else:
                self.i = i
                if _is_ident(tok) and tok not in KEYWORDS:
                    self.fail(
                        f"unknown name {_describe(tok)} in an expression (variables are written %name; "
                        f"an immediate of a dtype is dtype(value))"
                    )
                self.fail(f"expected an expression, got {_describe(tok)}")
            vals.append(value)
            # ---- operator position
            while True:
                tok = toks[i]
                info = _BINOPS.get(tok)
                if info is not None:
                    prec = info[0]
                    while ops and ops[-1][0] >= prec:
                        top = ops[-1]
                        if top[0] == _CMP_PREC and prec == _CMP_PREC:
                            self.i = i
                            self.fail("comparisons do not chain: parenthesize one of them")
                        ops.pop()
                        if top[1] is None:
                            vals.append(tir.Not(vals.pop()))
                        else:
                            b = vals.pop()
                            vals[-1] = top[1](vals[-1], b)
                    ops.append((prec, info[1], i))
                    i += 1
                    break
                # not an operator: finish the operators of the innermost group
                while ops and ops[-1][0] > 0:
                    top = ops.pop()
                    if top[1] is None:
                        vals.append(tir.Not(vals.pop()))
                    else:
                        b = vals.pop()
                        vals[-1] = top[1](vals[-1], b)
                if not ops:
                    self.i = i
                    return vals.pop()
                group = ops[-1]
                gkind = group[1]
                if gkind == _G_PAREN:
                    if tok != ")":
                        self.i = i
                        self.fail(f"expected ')' to close the '(' {self._where(group[2])}, got {_describe(tok)}")
                    ops.pop()
                    i += 1
                    continue
                args = group[4]
                args.append(vals.pop())
                if tok == ",":
                    i += 1
                    break  # the next argument
                close = "]" if gkind == _G_LOAD else ")"
                if tok != close:
                    self.i = i
                    self.fail(f"expected ',' or {close!r}, got {_describe(tok)}")
                ops.pop()
                i += 1
                if gkind == _G_LOAD:
                    vals.append(tir.BufferLoad(group[3], tuple(args)))
                else:
                    self.i = i - 1
                    vals.append(self.form(group, args))

    def _where(self, k: int) -> str:
        pos = self._offset(k)
        return f"at line {self.text.count(chr(10), 0, pos) + 1}, column {pos - self.text.rfind(chr(10), 0, pos)}"

    def form(self, group: list[Any], args: list[Any]) -> Any:
        """The node of a function-like form once its arguments are parsed (``self.i`` at its ``)``)."""
        name = group[3]
        want = _PFORMS[name]
        if want is not None and len(args) != want:
            self.fail(
                f"{name}(...) takes {want} argument{'s' if want != 1 else ''}"
                f"{' after the dtype' if name == 'cast' else ''}, got {len(args)}",
                group[2],
            )
        if name == "min":
            return tir.Min(args[0], args[1])
        if name == "max":
            return tir.Max(args[0], args[1])
        if name == "select":
            return tir.Select(args[0], args[1], args[2])
        if name == "cast":
            return tir.Cast(group[5], args[0])
        if name == "call":
            return tir.Call(group[5][0], group[5][1], tuple(args))
        lanes = args[-1]
        if type(lanes) is not tir.IntImm or lanes.dtype != "int32":
            self.fail(f"the last argument of {name}(...) is its number of lanes, an integer literal", group[2])
        if name == "ramp":
            return tir.Ramp(args[0], args[1], lanes.value)
        return tir.Broadcast(args[0], lanes.value)


def _error_at(text: str, pos: int, filename: str, reason: str) -> ParseError:
    line_start = text.rfind("\n", 0, pos) + 1
    line_end = text.find("\n", pos)
    if line_end < 0:
        line_end = len(text)
    line = text.count("\n", 0, pos) + 1
    return ParseError(filename, line, pos - line_start + 1, reason, text[line_start:line_end])


# ---------------------------------------------------------------------------------------------------------------------
# entry points


def _run(text: str, filename: str, what: str) -> Any:
    if not isinstance(text, str):
        raise TypeError(f"parse expects the text as a str, got {type(text).__name__}")
    gc_was_enabled = gc.isenabled()
    gc.disable()  # many small containers, no cycles: collections would cost more than the parse
    try:
        p = _Parser(text, filename)
        try:
            if what == "module":
                return p.module()
            if p.toks[0][0] == "@" and len(p.toks[0]) > 1:
                p.i = 1
                p.expect("=", "after the function's name")
            func = p.function()
        except IndexError as exc:  # a look-ahead past the end-of-input tokens: the text was cut short
            raise _error_at(text, len(text), filename, "unexpected end of input") from exc
        if p.toks[p.i] != _EOF:
            p.fail(f"unexpected {_describe(p.toks[p.i])} after the end of the function")
        return func
    finally:
        if gc_was_enabled:
            gc.enable()


def parse(text: str, filename: str = "<string>") -> IRModule:
    """The module printed as ``text`` (see :mod:`parpass.ir.printer` for the grammar).

    ``filename`` names the text in error messages. Raises :class:`ParseError`.
    """
    return cast(IRModule, _run(text, filename, "module"))


def parse_function(text: str, filename: str = "<string>") -> BaseFunc:
    """The function printed as ``text``: ``function(...) {...}`` or ``primfunc(...) {...}``.

    A leading ``@name =`` (as in a module) is accepted and ignored. Raises :class:`ParseError`.
    """
    return cast(BaseFunc, _run(text, filename, "function"))


def parse_text(text: str, filename: str = "<string>") -> IRObject:
    """A module, or a single function when ``text`` is one (starts with ``function``/``primfunc``)."""
    head = _TOKEN_RE.match(text)
    if head is not None and head.group(1) in _FUNC_WORDS:
        return parse_function(text, filename)
    return parse(text, filename)


# ---------------------------------------------------------------------------------------------------------------------
# the .ppir file format


def _write_text(obj: IRObject) -> bytes:
    text = astext(obj)
    if text and not text.endswith("\n"):
        text += "\n"
    # save() has refused lone surrogates already (no format holds them); surrogatepass keeps direct calls total.
    return text.encode("utf-8", "surrogatepass")


def _read_text(data: bytes, source: str) -> IRObject:
    try:
        text = data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as exc:
        prefix = data[: exc.start].decode("utf-8", "replace")
        raise _error_at(
            prefix + data[exc.start :].decode("utf-8", "replace"), len(prefix), source, f"not UTF-8 text: {exc.reason}"
        ) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    # Escapes may spell integers beyond 64 bits and lone surrogates: refused, as no other format can hold them.
    return check_loaded(parse_text(text, os.fspath(source)), os.fspath(source))


# ``.txt`` too: what DumpIR and ``parpass gen -o m.txt`` write is the text form, and reads back as such.
for _ext in (TEXT_EXTENSION, ".txt"):
    register_format(_ext, _write_text, _read_text, override=True)
