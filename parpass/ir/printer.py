"""The text form of parpass IR: ``str(node)``, ``mod.script()``, :func:`astext`.

The text is what IR-printing instruments show and what the ``.ppir`` parser
reads back, so it is

- **stable**: functions are printed in module order, each one self-contained;
  variable display names are derived from the function alone (its ``name_hint``s,
  with ``_1``, ``_2``, ... appended to later definitions that would clash, in
  the order the definitions are printed), never from a global counter. Changing
  one function changes only that function's lines.
- **complete**: types, dtypes, attributes (as JSON-like literals), constants'
  data (values for small constants, base64 of the raw little-endian bytes for
  the others), loop kinds, buffer shapes and strides, ``If`` blocks: everything
  needed to rebuild a structurally equal module. (Variable ids are not printed:
  within a function one display name is one variable.)
- **deep-safe and linear**: printing uses an explicit work stack, never Python
  recursion over the IR, and builds a list of strings joined once.

Example (a module with attributes, a dataflow function and a loop-level function)::

    module attrs {"target": "llvm"}

    @add_relu = function(%x: Tensor((4, 4), "float32"), %y: Tensor((4,), "float32"), %p: Prim("bool")) {
      %0: Tensor((4, 4), "float32") = add(%x, %y)
      %z = relu(%0)
      %c = const([1, 2], "int64")
      %r = if %p {
        %t = @helper(%z, attrs={"mode": "fast"})
        yield %t
      } else {
        yield (%z, %c)[0]
      }
      return %r
    }

    @helper = function(%a: Tensor((4, 4), "float32")) -> Tensor((4, 4), "float32") attrs {"Primitive": 1} {
      return %a
    }

    @scale = primfunc(%A: Buffer((16, 16), "float32"), %n: int32) attrs {"global_symbol": "scale"} {
      for %i: int32 in serial(min=0, extent=16) {
        for %j: int32 in vectorized(min=0, extent=4) {
          %A[%i, %j * 4] = %A[%i, %j * 4] * 2.0 + float64(0.5)
        }
      }
      evaluate(call("int32", "print", %n))
    }

Grammar (EBNF; ``{ x }`` is zero or more, ``[ x ]`` optional; ``NL`` is a line break;
spaces are insignificant except where noted; ``#`` outside a string starts a comment to
the end of the line, never emitted by the printer)::

    module      ::= [ "module" "attrs" dict NL ] { NL "@" name "=" function NL }
                                                    -- a blank line before each function;
                                                    -- "@name" is the function's module key
    function    ::= dataflow_fn | prim_fn           -- a standalone function omits "@name ="

    -- lexical
    name        ::= /[A-Za-z0-9_.]+/ | string       -- after "%" or "@", no space between
    ident       ::= /[A-Za-z_][A-Za-z0-9_.]*/ that is not a keyword
    string      ::= a JSON string literal ("..." with JSON escapes)
    int         ::= /-?[0-9]+/
    float       ::= /-?[0-9]+\\.[0-9]*([eE][-+]?[0-9]+)?/ | /-?[0-9]+[eE][-+]?[0-9]+/
                  | "inf" | "-inf" | "nan"          -- Python's repr of a float
    b64         ::= 'b64"' base64 '"'               -- no space between b64 and the quote
    keyword     ::= module attrs function primfunc return yield if else const true false
                    null nan inf for in seq let allocate evaluate not and or min max
                    select cast call ramp broadcast annotations strides Tensor Prim Tuple Buffer

    -- JSON-like literals (function, call, module attributes; loop annotations)
    literal     ::= "null" | "true" | "false" | int | float | string
                  | "[" [ literal { "," literal } ] "]"
                  | dict
    dict        ::= "{" [ string ":" literal { "," string ":" literal } ] "}"

    -- dataflow functions (parpass.ir.relax)
    dataflow_fn ::= "function" "(" [ param { "," param } ] ")" [ "->" type ] [ "attrs" dict ]
                    "{" block("return") "}"
    param       ::= "%" name ":" type
    block(kw)   ::= { NL binding } NL kw expr NL    -- one binding per line
    binding     ::= "%" name [ ":" type ] "=" expr
    expr        ::= primary { "[" int "]" }         -- TupleGetItem
    primary     ::= "%" name                        -- Var
                  | "@" name                        -- GlobalVar
                  | "const" "(" cvalue "," string ")"          -- Constant (shape from nesting)
                  | "const" "(" b64 "," string "," shape ")"   -- Constant, raw little-endian bytes
                  | "(" ")" | "(" expr "," ")" | "(" expr "," expr { "," expr } ")"   -- Tuple
                  | callee "(" [ callargs ] ")"     -- Call
                  | "if" expr "{" block("yield") "}" "else" "{" block("yield") "}"    -- If
    callee      ::= ident | string                  -- an op of the registry
                  | "@" name                        -- a function of the module
    callargs    ::= expr { "," expr } [ "," "attrs" "=" dict ] | "attrs" "=" dict
    cvalue      ::= "true" | "false" | int | float | "[" cvalue { "," cvalue } "]"
    shape       ::= "(" ")" | "(" int "," ")" | "(" int "," int { "," int } ")"
    type        ::= "Tensor" "(" shape "," string ")"          -- TensorType(shape, dtype)
                  | "Prim" "(" string ")"                      -- PrimType(dtype)
                  | "Tuple" "(" [ type { "," type } ] ")"      -- TupleType(fields)

    -- loop-level functions (parpass.ir.tir)
    prim_fn     ::= "primfunc" "(" [ tparam { "," tparam } ] ")" [ "attrs" dict ] "{" stmts "}"
    tparam      ::= "%" name ":" dtype | buffer
    buffer      ::= "%" name ":" "Buffer" "(" pshape "," string [ "," "strides" "=" pshape ] ")"
    pshape      ::= "(" ")" | "(" pexpr "," ")" | "(" pexpr "," pexpr { "," pexpr } ")"
    dtype       ::= ident | string                  -- e.g. int32, float32, int32x4
    stmts       ::= { NL stmt } NL                  -- exactly one stmt: the body is that stmt;
                                                    -- none or several: a SeqStmt of them
    stmt        ::= "for" "%" name ":" dtype "in" forkind "(" "min" "=" pexpr "," "extent" "=" pexpr ")"
                        [ "annotations" dict ] "{" stmts "}"
                  | "seq" "{" stmts "}"             -- always a SeqStmt of exactly these stmts
                  | "%" name "[" [ pexpr { "," pexpr } ] "]" "=" pexpr      -- BufferStore
                  | "if" pexpr "{" stmts "}" [ "else" "{" stmts "}" ]       -- IfThenElse
                  | "let" "%" name ":" dtype "=" pexpr "{" stmts "}"        -- LetStmt
                  | "allocate" buffer "{" stmts "}"                         -- Allocate
                  | "evaluate" "(" pexpr ")"                                -- Evaluate
    forkind     ::= "serial" | "parallel" | "vectorized" | "unrolled"
    pexpr       ::= or                              -- precedence, loosest first:
    or          ::= and { "or" and }                -- all binary operators associate left
    and         ::= not { "and" not }
    not         ::= "not" not | cmp
    cmp         ::= sum [ ("==" | "!=" | "<" | "<=" | ">" | ">=") sum ]   -- non-associative
    sum         ::= term { ("+" | "-") term }
    term        ::= atom { ("*" | "//" | "%") atom }   -- FloorDiv, FloorMod
    atom        ::= "(" pexpr ")"
                  | int                             -- IntImm int32
                  | float                           -- FloatImm float32
                  | "true" | "false"                -- IntImm bool 1 / 0
                  | dtype "(" (int | float) ")"     -- IntImm (int text) / FloatImm (float text) of dtype
                  | "%" name                        -- Var
                  | "%" name "[" [ pexpr { "," pexpr } ] "]"   -- BufferLoad
                  | ("min" | "max") "(" pexpr "," pexpr ")"
                  | "select" "(" pexpr "," pexpr "," pexpr ")"
                  | "cast" "(" string "," pexpr ")"           -- Cast(dtype, value)
                  | "call" "(" string "," string { "," pexpr } ")"   -- Call(dtype, op, args)
                  | "ramp" "(" pexpr "," pexpr "," int ")"    -- Ramp(base, stride, lanes)
                  | "broadcast" "(" pexpr "," int ")"         -- Broadcast(value, lanes)

Lexical notes for a parser: ``%`` immediately followed by a name character or ``"``
starts a variable, otherwise it is the modulo operator (the printer always writes
``a % b`` with spaces). ``-`` in operand position followed by a number (or ``inf``)
is part of a negative literal; after an operand it is subtraction. PrimFunc
parameters are all in scope in every parameter declaration (a buffer shape may name
a scalar parameter declared after it). Within one function one display name denotes
one variable (parameters, bindings, loop, let and buffer variables share that name
space), so a variable defined at two places keeps one name.
"""

from __future__ import annotations

import base64
import functools
import json
import math
import re
from collections.abc import Callable
from typing import Any, Union

from parpass.ir import relax, tir
from parpass.ir.node import BaseFunc, GlobalVar, Node, Op
from parpass.ir.types import PrimType, TensorType, TupleType

__all__ = ["KEYWORDS", "astext", "format_literal"]

#: Words with a meaning in the text form; op names and dtypes equal to one are quoted.
_KEYWORD_TEXT = """module attrs function primfunc return yield if else const true false null nan inf for in seq let
    allocate evaluate not and or min max select cast call ramp broadcast annotations strides Tensor Prim Tuple Buffer"""
KEYWORDS = frozenset(_KEYWORD_TEXT.split())
_NAME_RE = re.compile(r"[A-Za-z0-9_.]+\Z")
_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")
#: Constants with at most this many elements print their values; larger ones print base64.
SMALL_CONSTANT = 64

_Item = Union[str, tuple[Callable[[Any, Any], None], Any, Any]]


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


@functools.lru_cache(maxsize=4096)
def _quote_word(text: str) -> str:
    """``_quote`` for the few strings that repeat everywhere: dtypes, intrinsic names, attribute keys."""
    return _quote(text)


@functools.lru_cache(maxsize=65536)
def _fmt_name(name: str) -> str:
    """A variable or global name as written after its sigil."""
    return name if _NAME_RE.match(name) else _quote(name)


@functools.lru_cache(maxsize=4096)
def _fmt_ident(text: str) -> str:
    """An op name or dtype: bare when it is a plain identifier, else a JSON string."""
    return text if _IDENT_RE.match(text) and text not in KEYWORDS else _quote(text)


def _global(gv: GlobalVar) -> str:
    return "@" + _fmt_name(gv.name_hint)


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
            text = f"Tensor({_shape(tuple(t.shape))}, {_quote_word(t.dtype)})"
        else:
            text = f"Prim({_quote_word(t.dtype)})"
        if len(_LEAF_TYPE_CACHE) > 4096:
            _LEAF_TYPE_CACHE.clear()
        _LEAF_TYPE_CACHE[key] = text
    return text


# ---------------------------------------------------------------- literals


class _Text:
    """Raw text on the literal printer's stack (distinguishes it from string values)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


_FLAT: dict[type, Callable[[Any], str]] = {
    str: _quote,
    int: int.__repr__,
    float: float.__repr__,
    bool: lambda v: "true" if v else "false",
    type(None): lambda v: "null",
}


def format_literal(value: Any, where: str = "attribute") -> str:
    """``value`` (None, bool, int, float, str, and lists/tuples/dicts of those) as a JSON-like literal.

    Floats keep their type (``1.0``, ``inf``, ``nan``); dict keys must be strings.
    Raises TypeError naming ``where`` for any other value. Iterative, so deep
    nesting is fine.
    """
    if type(value) is dict and all(type(v) in _FLAT for v in value.values()):
        # The common case (``{"global_symbol": "f"}``): one flat dict, no stack needed.
        flat: list[str] = []
        for k, v in value.items():
            if type(k) is not str:
                break
            flat.append(_quote_word(k) + ": " + _FLAT[type(v)](v))
        else:
            return "{" + ", ".join(flat) + "}"
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        v = stack.pop()
        if type(v) is _Text:
            out.append(v.text)
        elif v is None:
            out.append("null")
        elif v is True:
            out.append("true")
        elif v is False:
            out.append("false")
        elif isinstance(v, int):
            out.append(int.__repr__(v))
        elif isinstance(v, float):
            out.append(float.__repr__(v))
        elif isinstance(v, str):
            out.append(_quote(v))
        elif isinstance(v, (list, tuple)):
            if not v:
                out.append("[]")
                continue
            out.append("[")
            items: list[Any] = []
            for i, x in enumerate(v):
                if i:
                    items.append(_Text(", "))
                items.append(x)
            items.append(_Text("]"))
            stack.extend(reversed(items))
        elif isinstance(v, dict):
            if not v:
                out.append("{}")
                continue
            out.append("{")
            items = []
            for i, (k, x) in enumerate(v.items()):
                if not isinstance(k, str):
                    raise TypeError(f"cannot print {where}: dict key {k!r} is a {type(k).__name__}, not a str")
                items.append(_Text((", " if i else "") + _quote_word(k) + ": "))
                items.append(x)
            items.append(_Text("}"))
            stack.extend(reversed(items))
        else:
            raise TypeError(
                f"cannot print {where}: a value of type {type(v).__name__} ({v!r}); "
                "attributes hold None, bool, int, float, str, and lists and dicts of those"
            )
    return "".join(out)


def _attrs(attrs: dict[str, Any], where: str) -> str:
    return format_literal(attrs, where)


# ---------------------------------------------------------------- constants


def _const_values(c: relax.Constant) -> str | None:
    """The nested-list value text of a small constant, or None to use base64."""
    import numpy as np

    try:
        dt = np.dtype(c.dtype)
    except TypeError:
        return None
    shape = tuple(c.shape)
    count = math.prod(shape)
    if dt.kind not in "biuf" or count > SMALL_CONSTANT or (count == 0):
        return None
    try:
        flat = c.numpy().reshape(-1)
    except (ValueError, TypeError):
        return None  # data does not match shape and dtype: base64 keeps it exact
    if dt.kind == "b":
        toks = ["true" if x else "false" for x in flat.tolist()]
        values: list[Any] = [t == "true" for t in toks]
    elif dt.kind in "iu":
        ints = [int(x) for x in flat.tolist()]
        toks = [str(x) for x in ints]
        values = ints
    else:
        toks = [str(x) for x in flat]  # numpy's shortest round-trip repr for the dtype
        values = [float(t) for t in toks]
    if np.asarray(values, dtype=flat.dtype).tobytes() != c.data:
        return None  # e.g. a NaN payload the decimal text would lose
    for dim in reversed(shape[1:] if shape else ()):
        toks = ["[" + ", ".join(toks[k : k + dim]) + "]" for k in range(0, len(toks), dim)]
    return "[" + ", ".join(toks) + "]" if shape else toks[0]


_CONST_CACHE: dict[tuple[bytes, str, tuple[int, ...]], str] = {}


def _const(c: relax.Constant) -> str:
    small = len(c.data) <= 256
    if small:
        key = (bytes(c.data), c.dtype, tuple(c.shape))
        cached = _CONST_CACHE.get(key)
        if cached is not None:
            return cached
    text = _const_text(c)
    if small:
        if len(_CONST_CACHE) > 4096:
            _CONST_CACHE.clear()
        _CONST_CACHE[key] = text
    return text


def _const_text(c: relax.Constant) -> str:
    values = _const_values(c)
    if values is not None:
        return f"const({values}, {_quote_word(c.dtype)})"
    data = base64.b64encode(bytes(c.data)).decode("ascii")
    return f'const(b64"{data}", {_quote_word(c.dtype)}, {_shape(tuple(c.shape))})'


# ---------------------------------------------------------------- loop-level tables

_BARE_INT = "int32"
_BARE_FLOAT = "float32"

# type -> (precedence, operator, left context, right context)
_BINOPS: dict[type, tuple[int, str, int, int]] = {
    tir.Or: (1, " or ", 1, 2),
    tir.And: (2, " and ", 2, 3),
    tir.EQ: (4, " == ", 5, 5),
    tir.NE: (4, " != ", 5, 5),
    tir.LT: (4, " < ", 5, 5),
    tir.LE: (4, " <= ", 5, 5),
    tir.GT: (4, " > ", 5, 5),
    tir.GE: (4, " >= ", 5, 5),
    tir.Add: (5, " + ", 5, 6),
    tir.Sub: (5, " - ", 5, 6),
    tir.Mul: (6, " * ", 6, 7),
    tir.FloorDiv: (6, " // ", 6, 7),
    tir.FloorMod: (6, " % ", 6, 7),
}
_NOT_PREC = 3
_STMT_TYPES = (tir.For, tir.SeqStmt, tir.BufferStore, tir.IfThenElse, tir.LetStmt, tir.Allocate, tir.Evaluate)


def _imm(e: tir.IntImm | tir.FloatImm) -> str:
    dtype = e.dtype
    if type(e) is tir.IntImm:
        v = e.value
        text = int.__repr__(v) if isinstance(v, int) else str(int(v))
        if dtype == _BARE_INT:
            return text
        if dtype == "bool" and v in (0, 1):
            return "true" if v else "false"
        return f"{_fmt_ident(dtype)}({text})"
    text = float.__repr__(float(e.value))
    return text if dtype == _BARE_FLOAT else f"{_fmt_ident(dtype)}({text})"


def _for_kind(kind: Any) -> str:
    return kind.value if isinstance(kind, tir.ForKind) else str(kind)


# ---------------------------------------------------------------- the printer


class _Printer:
    """Prints one self-contained unit (a function, or a single node) with its own names."""

    __slots__ = ("bnames", "out", "rnames", "stack", "suffix", "tnames", "used")

    def __init__(self) -> None:
        self.out: list[str] = []
        self.stack: list[_Item] = []
        # Display names by vid, one table per kind of variable; one shared set of used names.
        self.rnames: dict[int, str] = {}
        self.tnames: dict[int, str] = {}
        self.bnames: dict[int, str] = {}
        self.used: set[str] = set()
        self.suffix: dict[str, int] = {}

    # ------------------------------------------------------------ driver

    def run(self, item: _Item) -> None:
        stack = self.stack
        out = self.out
        stack.append(item)
        while stack:
            it = stack.pop()
            if type(it) is str:
                out.append(it)
            else:
                it[0](it[1], it[2])  # type: ignore[operator]

    def push(self, parts: list[_Item]) -> None:
        self.stack.extend(reversed(parts))

    def text(self) -> str:
        text = "".join(self.out)
        return text[1:] if text.startswith("\n") else text

    # ------------------------------------------------------------ names

    def _define(self, table: dict[int, str], vid: int, hint: str) -> str:
        """Name a variable first seen now: its hint, or hint_1, hint_2, ... if that is taken."""
        raw = hint
        if raw in self.used:
            k = self.suffix.get(hint, 1)
            while f"{hint}_{k}" in self.used:
                k += 1
            self.suffix[hint] = k + 1
            raw = f"{hint}_{k}"
        self.used.add(raw)
        name = table[vid] = "%" + _fmt_name(raw)
        return name

    def rvar(self, v: relax.Var) -> str:
        name = self.rnames.get(v.vid)
        return self._define(self.rnames, v.vid, v.name_hint) if name is None else name

    def tvar(self, v: tir.Var) -> str:
        name = self.tnames.get(v.vid)
        return self._define(self.tnames, v.vid, v.name_hint) if name is None else name

    def bufname(self, b: tir.Buffer) -> str:
        name = self.bnames.get(b.vid)
        return self._define(self.bnames, b.vid, b.name) if name is None else name

    # ------------------------------------------------------------ any node

    def node(self, n: Any, indent: int) -> None:
        """Dispatch on the node's family (used at the top and for misplaced nodes)."""
        if isinstance(n, (relax.Var, relax.Constant, relax.Tuple, relax.TupleGetItem, relax.Call, relax.If)):
            self.rx(n, indent)
        elif isinstance(n, GlobalVar):
            self.out.append(_global(n))
        elif isinstance(n, Op):
            self.out.append(_fmt_ident(n.name))
        elif isinstance(n, (TensorType, PrimType, TupleType)):
            self.ty(n, None)
        elif isinstance(n, relax.Function):
            self.function(n, None)
        elif isinstance(n, tir.PrimFunc):
            self.primfunc(n, None)
        elif isinstance(n, relax.Binding):
            self.binding(n, indent)
        elif isinstance(n, relax.SeqExpr):
            self.block(n, (indent, "yield"))
        elif isinstance(n, relax.Param):
            self.param(n, None)
        elif isinstance(n, tir.Buffer):
            self.bufdecl(n, None)
        elif isinstance(n, tir.PrimExprBase):
            self.tx(n, 0)
        elif isinstance(n, _STMT_TYPES):
            self.ts(n, indent)
        elif isinstance(n, Node):
            raise TypeError(f"the printer does not know node type {type(n).__name__}")
        else:
            raise TypeError(f"cannot print {type(n).__name__} {n!r}: not an IR node")

    # ------------------------------------------------------------ dataflow

    def ty(self, t: Any, _: Any) -> None:
        tt = type(t)
        if tt is TensorType or tt is PrimType:
            self.out.append(_leaf_type(t))
        elif tt is TupleType:
            parts: list[_Item] = ["Tuple("]
            for i, f in enumerate(t.fields):
                if i:
                    parts.append(", ")
                parts.append((self.ty, f, None))
            parts.append(")")
            self.push(parts)
        else:
            raise TypeError(f"cannot print {type(t).__name__} {t!r} as a type")

    def rx(self, e: Any, indent: int) -> None:
        t = type(e)
        out = self.out
        if t is relax.Var:
            out.append(self.rvar(e))
        elif t is relax.Call:
            op = e.op
            if type(op) is Op:
                callee = _fmt_ident(op.name)
            elif type(op) is GlobalVar:
                callee = _global(op)
            else:
                raise TypeError(f"a Call's op must be an Op or a GlobalVar, got {type(op).__name__}")
            args = e.args
            tail = ")"
            if e.attrs:
                tail = (", " if args else "") + "attrs=" + _attrs(e.attrs, f"attrs of a call of {callee}") + ")"
            if all(type(a) is relax.Var for a in args):
                out.append(callee + "(" + ", ".join([self.rvar(a) for a in args]) + tail)
                return
            out.append(callee + "(")
            parts: list[_Item] = []
            for i, a in enumerate(args):
                if i:
                    parts.append(", ")
                parts.append((self.rx, a, indent))
            parts.append(tail)
            self.push(parts)
        elif t is relax.Constant:
            out.append(_const(e))
        elif t is relax.TupleGetItem:
            self.stack.append(f"[{int(e.index)}]")
            self.stack.append((self.rx, e.tuple_value, indent))
        elif t is relax.Tuple:
            fields = e.fields
            if not fields:
                out.append("()")
                return
            out.append("(")
            parts = []
            for i, f in enumerate(fields):
                if i:
                    parts.append(", ")
                parts.append((self.rx, f, indent))
            parts.append(",)" if len(fields) == 1 else ")")
            self.push(parts)
        elif t is GlobalVar:
            out.append(_global(e))
        elif t is relax.If:
            close = "\n" + "  " * indent + "}"
            out.append("if ")
            self.push(
                [
                    (self.rx, e.cond, indent),
                    " {",
                    (self.block, e.then_branch, (indent + 1, "yield")),
                    close + " else {",
                    (self.block, e.else_branch, (indent + 1, "yield")),
                    close,
                ]
            )
        else:
            self.node(e, indent)

    def block(self, seq: relax.SeqExpr, arg: tuple[int, str]) -> None:
        indent, keyword = arg
        nl = "\n" + "  " * indent
        parts: list[_Item] = []
        binding = self.binding
        for b in seq.bindings:
            parts.append(nl)
            parts.append((binding, b, indent))
        parts.append(nl + keyword + " ")
        parts.append((self.rx, seq.body, indent))
        self.push(parts)

    def binding(self, b: relax.Binding, indent: int) -> None:
        name = self.rvar(b.var)
        ty = b.ty
        tt = type(ty)
        if ty is None:
            self.out.append(name + " = ")
        elif tt is TensorType or tt is PrimType:
            self.out.append(name + ": " + _leaf_type(ty) + " = ")  # type: ignore[arg-type]
        else:
            self.out.append(name + ": ")
            self.push([(self.ty, ty, None), " = ", (self.rx, b.value, indent)])
            return
        # A tail call, not recursion: rx only appends text and pushes work, so depth stays bounded.
        self.rx(b.value, indent)

    def param(self, p: relax.Param, _: Any) -> None:
        self.out.append(self.rvar(p.var) + ": ")
        self.stack.append((self.ty, p.ty, None))

    def function(self, f: relax.Function, _: Any) -> None:
        self.out.append("function(")
        parts: list[_Item] = []
        for i, p in enumerate(f.params):
            if i:
                parts.append(", ")
            parts.append((self.param, p, None))
        parts.append(")")
        if f.ret_type is not None:
            parts.append(" -> ")
            parts.append((self.ty, f.ret_type, None))
        if f.attrs:
            parts.append(" attrs " + _attrs(f.attrs, "function attrs"))
        parts.append(" {")
        parts.append((self.block, f.body, (1, "return")))
        parts.append("\n}")
        self.push(parts)

    # ------------------------------------------------------------ loop-level

    def tx(self, e: Any, ctx: int) -> None:
        t = type(e)
        out = self.out
        if t is tir.Var:
            out.append(self.tvar(e))
            return
        if t is tir.IntImm or t is tir.FloatImm:
            out.append(_imm(e))
            return
        info = _BINOPS.get(t)
        if info is not None:
            prec, sym, lctx, rctx = info
            a, b = e.a, e.b
            ta, tb = type(a), type(b)
            paren = prec < ctx
            # Fast path: both operands are leaves.
            if (ta is tir.Var or ta is tir.IntImm or ta is tir.FloatImm) and (
                tb is tir.Var or tb is tir.IntImm or tb is tir.FloatImm
            ):
                sa = self.tvar(a) if ta is tir.Var else _imm(a)
                sb = self.tvar(b) if tb is tir.Var else _imm(b)
                out.append(f"({sa}{sym}{sb})" if paren else sa + sym + sb)
                return
            if paren:
                out.append("(")
                self.push([(self.tx, a, lctx), sym, (self.tx, b, rctx), ")"])
            else:
                self.push([(self.tx, a, lctx), sym, (self.tx, b, rctx)])
            return
        if t is tir.BufferLoad:
            out.append(self.bufname(e.buffer) + "[")
            self.push([*self._join(e.indices), "]"])
        elif t is tir.Not:
            if ctx > _NOT_PREC:
                out.append("(not ")
                self.push([(self.tx, e.a, _NOT_PREC), ")"])
            else:
                out.append("not ")
                self.stack.append((self.tx, e.a, _NOT_PREC))
        elif t is tir.Min or t is tir.Max:
            out.append("min(" if t is tir.Min else "max(")
            self.push([(self.tx, e.a, 0), ", ", (self.tx, e.b, 0), ")"])
        elif t is tir.Select:
            out.append("select(")
            self.push([*self._join((e.condition, e.true_value, e.false_value)), ")"])
        elif t is tir.Cast:
            out.append(f"cast({_quote_word(e.dtype)}, ")
            self.push([(self.tx, e.value, 0), ")"])
        elif t is tir.Call:
            out.append(f"call({_quote_word(e.dtype)}, {_quote_word(e.op)}")
            parts: list[_Item] = []
            for a in e.args:
                parts.append(", ")
                parts.append((self.tx, a, 0))
            parts.append(")")
            self.push(parts)
        elif t is tir.Ramp:
            out.append("ramp(")
            self.push([(self.tx, e.base, 0), ", ", (self.tx, e.stride, 0), f", {int(e.lanes)})"])
        elif t is tir.Broadcast:
            out.append("broadcast(")
            self.push([(self.tx, e.value, 0), f", {int(e.lanes)})"])
        else:
            self.node(e, 0)

    def _join(self, exprs: tuple[Any, ...]) -> list[_Item]:
        parts: list[_Item] = []
        for i, x in enumerate(exprs):
            if i:
                parts.append(", ")
            parts.append((self.tx, x, 0))
        return parts

    def _pshape(self, exprs: tuple[Any, ...]) -> list[_Item]:
        parts: list[_Item] = ["("]
        parts.extend(self._join(exprs))
        parts.append(",)" if len(exprs) == 1 else ")")
        return parts

    def bufdecl(self, b: tir.Buffer, _: Any) -> None:
        self.out.append(self.bufname(b) + ": Buffer(")
        parts = self._pshape(tuple(b.shape))
        parts.append(", " + _quote_word(b.dtype))
        if b.strides:
            parts.append(", strides=")
            parts.extend(self._pshape(tuple(b.strides)))
        parts.append(")")
        self.push(parts)

    def tblock(self, body: Any, indent: int) -> None:
        """The statements of a ``{ ... }`` block: a SeqStmt of != 1 statements is spread out."""
        stmts = body.seq if type(body) is tir.SeqStmt and len(body.seq) != 1 else (body,)
        self.tlines(stmts, indent)

    def tlines(self, stmts: tuple[Any, ...], indent: int) -> None:
        nl = "\n" + "  " * indent
        parts: list[_Item] = []
        for s in stmts:
            parts.append(nl)
            parts.append((self.ts, s, indent))
        self.push(parts)

    def ts(self, s: Any, indent: int) -> None:
        t = type(s)
        out = self.out
        close = "\n" + "  " * indent + "}"
        if t is tir.BufferStore:
            out.append(self.bufname(s.buffer) + "[")
            self.push([*self._join(s.indices), "] = ", (self.tx, s.value, 0)])
        elif t is tir.For:
            v = s.loop_var
            head = f"for {self.tvar(v)}: {_fmt_ident(v.dtype)} in {_for_kind(s.kind)}(min="
            out.append(head)
            ann = " annotations " + _attrs(s.annotations, "loop annotations") if s.annotations else ""
            self.push(
                [
                    (self.tx, s.min, 0),
                    ", extent=",
                    (self.tx, s.extent, 0),
                    ")" + ann + " {",
                    (self.tblock, s.body, indent + 1),
                    close,
                ]
            )
        elif t is tir.SeqStmt:
            out.append("seq {")
            self.push([(self.tlines, s.seq, indent + 1), close])
        elif t is tir.IfThenElse:
            out.append("if ")
            parts: list[_Item] = [(self.tx, s.condition, 0), " {", (self.tblock, s.then_case, indent + 1), close]
            if s.else_case is not None:
                parts += [" else {", (self.tblock, s.else_case, indent + 1), close]
            self.push(parts)
        elif t is tir.LetStmt:
            v = s.var
            out.append(f"let {self.tvar(v)}: {_fmt_ident(v.dtype)} = ")
            self.push([(self.tx, s.value, 0), " {", (self.tblock, s.body, indent + 1), close])
        elif t is tir.Allocate:
            out.append("allocate ")
            self.push([(self.bufdecl, s.buffer, None), " {", (self.tblock, s.body, indent + 1), close])
        elif t is tir.Evaluate:
            out.append("evaluate(")
            self.push([(self.tx, s.value, 0), ")"])
        else:
            self.node(s, indent)

    def scalar_param(self, v: tir.Var, _: Any) -> None:
        self.out.append(f"{self.tvar(v)}: {_fmt_ident(v.dtype)}")

    def primfunc(self, f: tir.PrimFunc, _: Any) -> None:
        self.out.append("primfunc(")
        parts: list[_Item] = []
        for i, p in enumerate(f.params):
            if i:
                parts.append(", ")
            if type(p) is tir.Var:
                parts.append((self.scalar_param, p, None))  # named when printed, in order
            elif type(p) is tir.Buffer:
                parts.append((self.bufdecl, p, None))
            else:
                raise TypeError(f"a PrimFunc parameter must be a tir.Var or tir.Buffer, got {type(p).__name__}")
        parts.append(")")
        if f.attrs:
            parts.append(" attrs " + _attrs(f.attrs, "function attrs"))
        parts.append(" {")
        parts.append((self.tblock, f.body, 1))
        parts.append("\n}")
        self.push(parts)


# ---------------------------------------------------------------- entry points


def _function_text(func: BaseFunc, name: str | None) -> str:
    p = _Printer()
    if name is not None:
        p.out.append("@" + _fmt_name(name) + " = ")
    p.run((p.node, func, 0))
    return "".join(p.out)


def astext(node: Any, name: str | None = None) -> str:
    """The text form of an IRModule or of any IR node (see the module docstring for the grammar).

    A module prints as its attributes line (if any) and its functions in module
    order, separated by blank lines, with a final newline. A function prints as
    ``function(...) {...}`` / ``primfunc(...) {...}``, or ``@name = ...`` when
    ``name`` is given (as in a module). Any other node prints on its own, with its
    variables named from their name hints; free variables print by name.
    """
    from parpass.ir.module import IRModule

    if isinstance(node, IRModule):
        if name is not None:
            raise TypeError("astext(module, name=...): name applies to a single function only")
        chunks: list[str] = []
        if node.attrs:
            chunks.append("module attrs " + _attrs(dict(node.attrs), "module attrs"))
        for gv, func in node.items():
            chunks.append(_function_text(func, gv.name_hint))
        return "\n\n".join(chunks) + "\n" if chunks else ""
    if isinstance(node, BaseFunc):
        return _function_text(node, name)
    if name is not None:
        raise TypeError(f"astext(..., name=...): name applies to functions, not to {type(node).__name__}")
    p = _Printer()
    p.run((p.node, node, 0))
    return p.text()
