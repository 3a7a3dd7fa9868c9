"""Parsing loop-level (tir) functions: parameters, buffers and statements (expressions: :mod:`.tir_expr`)."""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any

from parpass.ir import tir
from parpass.ir.parser.tir_expr import _PrimExprParser
from parpass.ir.parser.tokens import EOF, _did_you_mean, describe

_FOR_KINDS = {k.value: k for k in tir.ForKind}
_STMT_WORDS = ("for", "seq", "if", "let", "allocate", "evaluate")
#: How a bracket changes the nesting depth while parameters are scanned.
_DEPTH = {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}


def _body(items: list[tir.Stmt]) -> tir.Stmt:
    """A block's body: its one statement, or a SeqStmt of them."""
    return items[0] if len(items) == 1 else tir.SeqStmt(tuple(items))


# ---------------------------------------------------------------- the open blocks of the statement machine


class _StmtFrame(abc.ABC):
    """An open block: its statements so far; :meth:`close` makes the statement it stands for."""

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: list[tir.Stmt] = []

    @abc.abstractmethod
    def close(self) -> tir.Stmt:
        """The statement of the block, once its ``}`` is read."""


class _RootFrame(_StmtFrame):
    """The function body."""

    __slots__ = ()

    def close(self) -> tir.Stmt:
        return _body(self.items)


class _SeqFrame(_StmtFrame):
    """``seq { ... }``: a SeqStmt even of one statement."""

    __slots__ = ()

    def close(self) -> tir.Stmt:
        return tir.SeqStmt(tuple(self.items))


class _ForFrame(_StmtFrame):
    """The body of a ``for`` loop, with the loop's header."""

    __slots__ = ("annotations", "extent", "kind", "lo", "var")

    def __init__(self, var: tir.Var, lo: Any, extent: Any, kind: tir.ForKind, annotations: dict[str, Any]) -> None:
        self.items: list[tir.Stmt] = []  # (not super().__init__(): one call less per block)
        self.var = var
        self.lo = lo
        self.extent = extent
        self.kind = kind
        self.annotations = annotations

    def close(self) -> tir.Stmt:
        return tir.For(self.var, self.lo, self.extent, self.kind, _body(self.items), self.annotations)


class _IfFrame(_StmtFrame):
    """A branch of an ``if``: the then branch, or the else branch once ``then`` is set."""

    __slots__ = ("cond", "then")

    def __init__(self, cond: Any) -> None:
        self.items: list[tir.Stmt] = []  # (not super().__init__(): one call less per block)
        self.cond = cond
        self.then: tir.Stmt | None = None

    def close(self) -> tir.Stmt:
        if self.then is None:
            return tir.IfThenElse(self.cond, _body(self.items))
        return tir.IfThenElse(self.cond, self.then, _body(self.items))


class _LetFrame(_StmtFrame):
    """The body of a ``let``, with its variable and value."""

    __slots__ = ("value", "var")

    def __init__(self, var: tir.Var, value: Any) -> None:
        self.items: list[tir.Stmt] = []  # (not super().__init__(): one call less per block)
        self.var = var
        self.value = value

    def close(self) -> tir.Stmt:
        return tir.LetStmt(self.var, self.value, _body(self.items))


class _AllocateFrame(_StmtFrame):
    """The body of an ``allocate``, with its buffer."""

    __slots__ = ("buffer",)

    def __init__(self, buffer: tir.Buffer) -> None:
        self.items: list[tir.Stmt] = []  # (not super().__init__(): one call less per block)
        self.buffer = buffer

    def close(self) -> tir.Stmt:
        return tir.Allocate(self.buffer, _body(self.items))


class _TirParser(_PrimExprParser):
    """Loop-level functions; statements are parsed by one loop over an explicit stack of open blocks."""

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
            if tok == EOF:
                self.fail("unexpected end of input in a parameter list", k)
            if depth == 0:
                if tok == ")":
                    self.i = start
                    return
                if expect_param:
                    self._declare_param(k)
                    expect_param = False
                elif tok == ",":
                    expect_param = True
            depth += _DEPTH.get(tok, 0)
            k += 1

    def _declare_param(self, k: int) -> None:
        """Declare the parameter at token ``k``: a buffer gets its id, a scalar its variable."""
        toks = self.toks
        tok = toks[k]
        if tok[0] != "%" or len(tok) < 2:
            self.fail(f"expected a parameter '%name: dtype' or '%name: Buffer(...)', got {describe(tok)}", k)
        if toks[k + 1] != ":":
            self.fail(f"expected ':' after a parameter name, got {describe(toks[k + 1])}", k + 1)
        key, name = self.name_of(k)
        old = self.names.get(key)
        if toks[k + 2] == "Buffer":
            if old is not None and type(old) is not int:
                self.fail(f"parameter {key} is declared twice with different kinds", k)
            if old is None:
                self.names[key] = self.ids.fresh()  # the buffer is defined once its shape is parsed
            return
        if toks[k + 3] == "(":
            self.fail(
                f"expected a dtype or 'Buffer(...)' for parameter {key}, got "
                f"{describe(toks[k + 2])}{_did_you_mean(toks[k + 2], ('Buffer',))}",
                k + 2,
            )
        self.i = k + 2
        dtype = self.dtype_word(True)
        if old is None:
            self.names[key] = tir.Var(self.ids.fresh(), name, dtype)
        elif type(old) is not tir.Var or old.dtype != dtype:
            self.fail(f"parameter {key} is declared twice with different kinds or dtypes", k)

    def buffer_decl(self) -> tir.Buffer:
        """``%name: Buffer(shape, "dtype"[, strides=shape])``, defining (or redefining) the buffer."""
        toks = self.toks
        k = self.i
        tok = toks[k]
        if tok[0] != "%" or len(tok) < 2:
            self.fail(f"expected a buffer '%name: Buffer(...)', got {describe(tok)}")
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
        stack: list[_StmtFrame] = [_RootFrame()]
        while True:
            tok = self.toks[self.i]
            if tok == "}":
                body = self._close_block(stack)
                if body is not None:
                    return body
                continue
            start = _STMT_STARTS.get(tok)
            if start is not None:
                start(self, stack)
            elif tok[0] == "%" and len(tok) > 1:
                stack[-1].items.append(self._stmt_store())
            elif tok == EOF:
                self.fail("unexpected end of input: a '}' is missing")
            else:
                hint = _did_you_mean(tok, _STMT_WORDS)
                self.fail(
                    f"unknown statement {describe(tok)}{hint}; a statement is for, seq, if, let, allocate, "
                    "evaluate or a buffer store '%buf[...] = value'"
                )

    def _close_block(self, stack: list[_StmtFrame]) -> tir.Stmt | None:
        """At a block's ``}``: the function body when the root closes, else None (its statement is added)."""
        self.i += 1
        frame = stack.pop()
        if type(frame) is _IfFrame and frame.then is None and self.toks[self.i] == "else":
            self.i += 1
            self.expect("{", "to open the else branch")
            frame.then = _body(frame.items)
            frame.items = []
            stack.append(frame)
            return None
        stmt = frame.close()
        if not stack:  # the root
            return stmt
        stack[-1].items.append(stmt)
        return None

    def _stmt_store(self) -> tir.BufferStore:
        """``%buf[indices] = value``."""
        k = self.i
        buf = self.buffer_use(k)
        self.i = k + 1
        self.expect("[", "after a buffer name (a store is '%buf[indices] = value')")
        indices = self.prim_list("]")
        self.expect("=", "in a buffer store")
        return tir.BufferStore(buf, self.prim_expr(), indices)

    def _stmt_evaluate(self, stack: list[_StmtFrame]) -> None:
        self.i += 1
        self.expect("(", "after evaluate")
        value = self.prim_expr()
        self.expect(")", "to close evaluate(...)")
        stack[-1].items.append(tir.Evaluate(value))

    def _stmt_for(self, stack: list[_StmtFrame]) -> None:
        stack.append(self.for_header())

    def _stmt_if(self, stack: list[_StmtFrame]) -> None:
        self.i += 1
        cond = self.prim_expr()
        self.expect("{", "after the condition of an if")
        stack.append(_IfFrame(cond))

    def _stmt_let(self, stack: list[_StmtFrame]) -> None:
        toks = self.toks
        self.i += 1
        kv = self.i
        if toks[kv][0] != "%" or len(toks[kv]) < 2:
            self.fail(f"expected a variable after 'let', got {describe(toks[kv])}")
        self.i = kv + 1
        self.expect(":", "after the variable of a let")
        dtype = self.dtype_word(True)
        self.expect("=", "in a let")
        value = self.prim_expr()
        var = self.define_tvar(kv, dtype)  # after its value, which does not see it
        self.expect("{", "after the value of a let")
        stack.append(_LetFrame(var, value))

    def _stmt_allocate(self, stack: list[_StmtFrame]) -> None:
        self.i += 1
        buf = self.buffer_decl()
        self.expect("{", "after the buffer of an allocate")
        stack.append(_AllocateFrame(buf))

    def _stmt_seq(self, stack: list[_StmtFrame]) -> None:
        self.i += 1
        self.expect("{", "after seq")
        stack.append(_SeqFrame())

    def for_header(self) -> _ForFrame:
        """``for %v: dtype in kind(min=e, extent=e) [annotations {...}] {`` as a statement frame."""
        toks = self.toks
        self.i += 1
        k = self.i
        if toks[k][0] != "%" or len(toks[k]) < 2:
            self.fail(f"expected a loop variable after 'for', got {describe(toks[k])}")
        self.i = k + 1
        self.expect(":", "after the loop variable")
        dtype = self.dtype_word(True)
        self.expect("in", "after the loop variable's dtype")
        kk = self.i
        kind = _FOR_KINDS.get(toks[kk])
        if kind is None:
            hint = _did_you_mean(toks[kk], _FOR_KINDS)
            self.fail(f"unknown loop kind {describe(toks[kk])}{hint}; one of: {', '.join(_FOR_KINDS)}")
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
        return _ForFrame(var, lo, extent, kind, ann)


#: Statements that start with a keyword, by the keyword.
_STMT_STARTS: dict[str, Callable[[_TirParser, list[_StmtFrame]], None]] = {
    "evaluate": _TirParser._stmt_evaluate,
    "for": _TirParser._stmt_for,
    "if": _TirParser._stmt_if,
    "let": _TirParser._stmt_let,
    "allocate": _TirParser._stmt_allocate,
    "seq": _TirParser._stmt_seq,
}
