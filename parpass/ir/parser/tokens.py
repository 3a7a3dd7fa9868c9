"""Lexical layer of the text parser: tokens, the error type and its excerpt, small token predicates."""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

from parpass.errors import IRFormatError
from parpass.ir.printer import KEYWORDS

__all__ = ["ParseError"]

#: The file extension of the text form.
TEXT_EXTENSION = ".ppir"


class ParseError(IRFormatError):
    """Text that is not valid IR text: ``file:line:col: reason``, the source line and a caret.

    Attributes: ``filename``, ``line`` and ``column`` (1-based), ``reason`` (what is
    wrong, without the location), ``source_line`` (the offending line). ``brief`` is
    the first line of the message, for one-line error reports.
    """

    __module__ = "parpass.ir.parser"  # its public home (tracebacks and pickles name it there)

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


# ---------------------------------------------------------------- tokens

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
_INT_RE = re.compile(r"-?[0-9]+\Z")
_NUMBER_RE = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|inf|nan)\Z")
_CONST_WORDS = frozenset({"true", "false", "inf", "nan"})
#: The end-of-input token: starts with a space, which no real token does.
EOF = " end of input"
#: How many tokens past the current one the parser looks at, at most.
_LOOKAHEAD = 4

_FUNC_WORDS = ("function", "primfunc")


def describe(tok: str) -> str:
    if tok == EOF:
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


def error_at(text: str, pos: int, filename: str, reason: str) -> ParseError:
    line_start = text.rfind("\n", 0, pos) + 1
    line_end = text.find("\n", pos)
    if line_end < 0:
        line_end = len(text)
    line = text.count("\n", 0, pos) + 1
    return ParseError(filename, line, pos - line_start + 1, reason, text[line_start:line_end])
