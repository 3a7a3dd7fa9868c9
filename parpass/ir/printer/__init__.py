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

Modules: :mod:`.words` (keywords, quoting, names, leaf types), :mod:`.literals`
(attribute literals, constants' data), :mod:`.core` (the work stack and variable
names), :mod:`.relax_printer` and :mod:`.tir_printer` (one per IR family); this
module holds the entry points.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from parpass.ir import relax, tir
from parpass.ir.node import BaseFunc, GlobalVar, Node, Op
from parpass.ir.printer.literals import SMALL_CONSTANT, format_attrs, format_literal
from parpass.ir.printer.relax_printer import _RelaxPrinter
from parpass.ir.printer.tir_printer import _STMT_TYPES, _TirPrinter
from parpass.ir.printer.words import KEYWORDS, fmt_ident, fmt_name
from parpass.ir.types import PrimType, TensorType, TupleType

__all__ = ["KEYWORDS", "SMALL_CONSTANT", "astext", "format_literal", "module_text"]


class _Printer(_RelaxPrinter, _TirPrinter):
    """Prints one self-contained unit (a function, or a single node) with its own names."""

    __slots__ = ()

    def node(self, n: Any, indent: int) -> None:
        """Dispatch on the node's family (used at the top and for misplaced nodes)."""
        for types, step in _NODE_STEPS:
            if isinstance(n, types):
                step(self, n, indent)
                return
        if isinstance(n, Node):
            raise TypeError(f"the printer does not know node type {type(n).__name__}")
        raise TypeError(f"cannot print {type(n).__name__} {n!r}: not an IR node")

    def _node_op(self, n: Op, indent: int) -> None:
        self.out.append(fmt_ident(n.name))


#: Node families in the order they are tried (isinstance, so subclasses print as their base).
_NODE_STEPS: tuple[tuple[type | tuple[type, ...], Callable[[_Printer, Any, int], None]], ...] = (
    ((relax.Var, relax.Constant, relax.Tuple, relax.TupleGetItem, relax.Call, relax.If), _Printer.rx),
    (GlobalVar, _Printer._rx_global_var),
    (Op, _Printer._node_op),
    ((TensorType, PrimType, TupleType), lambda p, n, indent: p.ty(n, None)),
    (relax.Function, lambda p, n, indent: p.function(n, None)),
    (tir.PrimFunc, lambda p, n, indent: p.primfunc(n, None)),
    (relax.Binding, _Printer.binding),
    (relax.SeqExpr, lambda p, n, indent: p.block(n, (indent, "yield"))),
    (relax.Param, lambda p, n, indent: p.param(n, None)),
    (tir.Buffer, lambda p, n, indent: p.bufdecl(n, None)),
    (tir.PrimExprBase, lambda p, n, indent: p.tx(n, 0)),
    (_STMT_TYPES, _Printer.ts),
)


# ---------------------------------------------------------------- entry points


def _function_text(func: BaseFunc, name: str | None) -> str:
    p = _Printer()
    if name is not None:
        p.out.append("@" + fmt_name(name) + " = ")
    p.run((p.node, func, 0))
    return "".join(p.out)


def module_text(attrs: Mapping[str, Any], functions: Iterable[str]) -> str:
    """The text of a module with attributes ``attrs`` whose functions print as ``functions`` (each one's
    :func:`astext` with its name, in module order): what ``astext(module)`` gives."""
    chunks = ["module attrs " + format_attrs(dict(attrs), "module attrs")] if attrs else []
    chunks.extend(functions)
    return "\n\n".join(chunks) + "\n" if chunks else ""


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
        return module_text(node.attrs, (_function_text(func, gv.name_hint) for gv, func in node.items()))
    if isinstance(node, BaseFunc):
        return _function_text(node, name)
    if name is not None:
        raise TypeError(f"astext(..., name=...): name applies to functions, not to {type(node).__name__}")
    p = _Printer()
    p.run((p.node, node, 0))
    return p.text()
