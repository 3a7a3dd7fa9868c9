"""Printing loop-level (tir) IR: functions, buffers, statements and expressions by precedence."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from parpass.ir import tir
from parpass.ir.printer.core import _Item, _PrinterBase
from parpass.ir.printer.literals import format_attrs
from parpass.ir.printer.words import fmt_ident, quote_word

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
        return f"{fmt_ident(dtype)}({text})"
    text = float.__repr__(float(e.value))
    return text if dtype == _BARE_FLOAT else f"{fmt_ident(dtype)}({text})"


def _for_kind(kind: Any) -> str:
    return kind.value if isinstance(kind, tir.ForKind) else str(kind)


class _TirPrinter(_PrinterBase):
    """The loop-level half of the printer."""

    __slots__ = ()

    # ------------------------------------------------------------ expressions

    def tx(self, e: Any, ctx: int) -> None:
        """A loop-level expression in a context of precedence ``ctx`` (parenthesized when it binds looser)."""
        t = type(e)
        if t is tir.Var:
            self.out.append(self.tvar(e))
            return
        if t is tir.IntImm or t is tir.FloatImm:
            self.out.append(_imm(e))
            return
        info = _BINOPS.get(t)
        if info is None:
            step = _TX_STEPS.get(t)
            if step is None:
                self.node(e, 0)
            else:
                step(self, e, ctx)
            return
        # A binary operator (inline: the commonest kind of node here).
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
            self.out.append(f"({sa}{sym}{sb})" if paren else sa + sym + sb)
        elif paren:
            self.out.append("(")
            self.push([(self.tx, a, lctx), sym, (self.tx, b, rctx), ")"])
        else:
            self.push([(self.tx, a, lctx), sym, (self.tx, b, rctx)])

    def _tx_load(self, e: tir.BufferLoad, ctx: int) -> None:
        self.out.append(self.bufname(e.buffer) + "[")
        self.push([*self._join(e.indices), "]"])

    def _tx_not(self, e: tir.Not, ctx: int) -> None:
        if ctx > _NOT_PREC:
            self.out.append("(not ")
            self.push([(self.tx, e.a, _NOT_PREC), ")"])
        else:
            self.out.append("not ")
            self.stack.append((self.tx, e.a, _NOT_PREC))

    def _tx_min_max(self, e: tir.Min | tir.Max, ctx: int) -> None:
        self.out.append("min(" if type(e) is tir.Min else "max(")
        self.push([(self.tx, e.a, 0), ", ", (self.tx, e.b, 0), ")"])

    def _tx_select(self, e: tir.Select, ctx: int) -> None:
        self.out.append("select(")
        self.push([*self._join((e.condition, e.true_value, e.false_value)), ")"])

    def _tx_cast(self, e: tir.Cast, ctx: int) -> None:
        self.out.append(f"cast({quote_word(e.dtype)}, ")
        self.push([(self.tx, e.value, 0), ")"])

    def _tx_call(self, e: tir.Call, ctx: int) -> None:
        self.out.append(f"call({quote_word(e.dtype)}, {quote_word(e.op)}")
        parts: list[_Item] = []
        for a in e.args:
            parts.append(", ")
            parts.append((self.tx, a, 0))
        parts.append(")")
        self.push(parts)

    def _tx_ramp(self, e: tir.Ramp, ctx: int) -> None:
        self.out.append("ramp(")
        self.push([(self.tx, e.base, 0), ", ", (self.tx, e.stride, 0), f", {int(e.lanes)})"])

    def _tx_broadcast(self, e: tir.Broadcast, ctx: int) -> None:
        self.out.append("broadcast(")
        self.push([(self.tx, e.value, 0), f", {int(e.lanes)})"])

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
        parts.append(", " + quote_word(b.dtype))
        if b.strides:
            parts.append(", strides=")
            parts.extend(self._pshape(tuple(b.strides)))
        parts.append(")")
        self.push(parts)

    # ------------------------------------------------------------ statements

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
        """A statement at ``indent`` (by :data:`_TS_STEPS`)."""
        step = _TS_STEPS.get(type(s))
        if step is None:
            self.node(s, indent)
        else:
            step(self, s, indent)

    def _ts_store(self, s: tir.BufferStore, indent: int) -> None:
        self.out.append(self.bufname(s.buffer) + "[")
        self.push([*self._join(s.indices), "] = ", (self.tx, s.value, 0)])

    def _ts_for(self, s: tir.For, indent: int) -> None:
        v = s.loop_var
        self.out.append(f"for {self.tvar(v)}: {fmt_ident(v.dtype)} in {_for_kind(s.kind)}(min=")
        ann = " annotations " + format_attrs(s.annotations, "loop annotations") if s.annotations else ""
        self.push(
            [
                (self.tx, s.min, 0),
                ", extent=",
                (self.tx, s.extent, 0),
                ")" + ann + " {",
                (self.tblock, s.body, indent + 1),
                "\n" + "  " * indent + "}",
            ]
        )

    def _ts_seq(self, s: tir.SeqStmt, indent: int) -> None:
        self.out.append("seq {")
        self.push([(self.tlines, s.seq, indent + 1), "\n" + "  " * indent + "}"])

    def _ts_if(self, s: tir.IfThenElse, indent: int) -> None:
        close = "\n" + "  " * indent + "}"
        self.out.append("if ")
        parts: list[_Item] = [(self.tx, s.condition, 0), " {", (self.tblock, s.then_case, indent + 1), close]
        if s.else_case is not None:
            parts += [" else {", (self.tblock, s.else_case, indent + 1), close]
        self.push(parts)

    def _ts_let(self, s: tir.LetStmt, indent: int) -> None:
        v = s.var
        self.out.append(f"let {self.tvar(v)}: {fmt_ident(v.dtype)} = ")
        self.push([(self.tx, s.value, 0), " {", (self.tblock, s.body, indent + 1), "\n" + "  " * indent + "}"])

    def _ts_allocate(self, s: tir.Allocate, indent: int) -> None:
        self.out.append("allocate ")
        self.push([(self.bufdecl, s.buffer, None), " {", (self.tblock, s.body, indent + 1), "\n" + "  " * indent + "}"])

    def _ts_evaluate(self, s: tir.Evaluate, indent: int) -> None:
        self.out.append("evaluate(")
        self.push([(self.tx, s.value, 0), ")"])

    # ------------------------------------------------------------ functions

    def scalar_param(self, v: tir.Var, _: Any) -> None:
        self.out.append(f"{self.tvar(v)}: {fmt_ident(v.dtype)}")

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
            parts.append(" attrs " + format_attrs(f.attrs, "function attrs"))
        parts.append(" {")
        parts.append((self.tblock, f.body, 1))
        parts.append("\n}")
        self.push(parts)


#: Loop-level expressions other than variables, immediates and binary operators, by exact type.
_TX_STEPS: dict[type, Callable[[_TirPrinter, Any, int], None]] = {
    tir.BufferLoad: _TirPrinter._tx_load,
    tir.Not: _TirPrinter._tx_not,
    tir.Min: _TirPrinter._tx_min_max,
    tir.Max: _TirPrinter._tx_min_max,
    tir.Select: _TirPrinter._tx_select,
    tir.Cast: _TirPrinter._tx_cast,
    tir.Call: _TirPrinter._tx_call,
    tir.Ramp: _TirPrinter._tx_ramp,
    tir.Broadcast: _TirPrinter._tx_broadcast,
}
#: Statements by exact type.
_TS_STEPS: dict[type, Callable[[_TirPrinter, Any, int], None]] = {
    tir.BufferStore: _TirPrinter._ts_store,
    tir.For: _TirPrinter._ts_for,
    tir.SeqStmt: _TirPrinter._ts_seq,
    tir.IfThenElse: _TirPrinter._ts_if,
    tir.LetStmt: _TirPrinter._ts_let,
    tir.Allocate: _TirPrinter._ts_allocate,
    tir.Evaluate: _TirPrinter._ts_evaluate,
}
