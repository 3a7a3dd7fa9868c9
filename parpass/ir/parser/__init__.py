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

Modules: :mod:`.tokens` (the tokenizer, :class:`ParseError`), :mod:`.core` (the cursor:
errors, words, names, dtypes, attribute literals, types), :mod:`.constants`,
:mod:`.relax_syntax` (dataflow functions), :mod:`.tir_expr` and :mod:`.tir_syntax`
(loop-level expressions, then functions and statements); this module holds the entry
points, the module syntax and the ``.ppir`` format.
"""

from __future__ import annotations

import gc
import os
from typing import Any, cast

from parpass.errors import close_names, format_names
from parpass.ir.ids import IdSupply
from parpass.ir.module import IRModule
from parpass.ir.node import BaseFunc
from parpass.ir.parser.relax_syntax import _RelaxParser
from parpass.ir.parser.tir_syntax import _TirParser
from parpass.ir.parser.tokens import (
    _FUNC_WORDS,
    _TOKEN_RE,
    EOF,
    TEXT_EXTENSION,
    ParseError,
    _did_you_mean,
    describe,
    error_at,
)
from parpass.ir.printer import astext
from parpass.ir.serialization import IRObject, check_loaded, register_format

__all__ = ["TEXT_EXTENSION", "ParseError", "parse", "parse_function", "parse_text", "text_bytes", "write_text"]


class _Parser(_RelaxParser, _TirParser):
    """Parses one text: a module of named functions, or one function of either family."""

    def module(self) -> IRModule:
        toks = self.toks
        attrs: dict[str, Any] = {}
        if toks[self.i] == "module":
            self.i += 1
            self.expect("attrs", "after 'module'")
            attrs = self.attrs("module attributes")
        funcs: list[tuple[str, BaseFunc]] = []
        seen: dict[str, int] = {}
        while toks[self.i] != EOF:
            k = self.i
            tok = toks[k]
            if tok[0] != "@" or len(tok) < 2:
                if tok in _FUNC_WORDS:
                    self.fail(f"expected '@name = {tok}(...)': a module's functions are named (use parse_function)")
                self.fail(
                    f"expected a function definition '@name = function(...)' or '@name = primfunc(...)', "
                    f"got {describe(tok)}"
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
        self.fail(f"expected 'function' or 'primfunc', got {describe(tok)}{hint}")


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
            raise error_at(text, len(text), filename, "unexpected end of input") from exc
        if p.toks[p.i] != EOF:
            p.fail(f"unexpected {describe(p.toks[p.i])} after the end of the function")
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


def write_text(obj: IRObject) -> bytes:
    """The ``.ppir``/``.txt`` file bytes of a module or function (see :func:`text_bytes`)."""
    return text_bytes(astext(obj))


def text_bytes(text: str) -> bytes:
    """The file bytes of IR text: UTF-8, ending in a newline."""
    if text and not text.endswith("\n"):
        text += "\n"
    # save() has refused lone surrogates already (no format holds them); surrogatepass keeps direct calls total.
    return text.encode("utf-8", "surrogatepass")


def _read_text(data: bytes, source: str) -> IRObject:
    try:
        text = data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as exc:
        prefix = data[: exc.start].decode("utf-8", "replace")
        raise error_at(
            prefix + data[exc.start :].decode("utf-8", "replace"), len(prefix), source, f"not UTF-8 text: {exc.reason}"
        ) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    # Escapes may spell integers beyond 64 bits and lone surrogates: refused, as no other format can hold them.
    return check_loaded(parse_text(text, os.fspath(source)), os.fspath(source))


# ``.txt`` too: what DumpIR and ``parpass gen -o m.txt`` write is the text form, and reads back as such.
for _ext in (TEXT_EXTENSION, ".txt"):
    register_format(_ext, write_text, _read_text, override=True)
