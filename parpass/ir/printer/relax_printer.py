"""Printing dataflow (relax) IR: functions, blocks, bindings, expressions and types."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from parpass.ir import relax
from parpass.ir.node import GlobalVar, Op
from parpass.ir.printer.core import _Item, _PrinterBase
from parpass.ir.printer.literals import _const, format_attrs
from parpass.ir.printer.words import _global, _leaf_type, fmt_ident
from parpass.ir.types import PrimType, TensorType, TupleType


class _RelaxPrinter(_PrinterBase):
    """The dataflow half of the printer."""

    __slots__ = ()

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
        """A dataflow expression (variables inline; other kinds by :data:`_RX_STEPS`)."""
        if type(e) is relax.Var:
            self.out.append(self.rvar(e))
            return
        step = _RX_STEPS.get(type(e))
        if step is None:
            self.node(e, indent)
        else:
            step(self, e, indent)

    def _rx_call(self, e: relax.Call, indent: int) -> None:
        op = e.op
        if type(op) is Op:
            callee = fmt_ident(op.name)
        elif type(op) is GlobalVar:
            callee = _global(op)
        else:
            raise TypeError(f"a Call's op must be an Op or a GlobalVar, got {type(op).__name__}")
        args: tuple[Any, ...] = e.args
        tail = ")"
        if e.attrs:
            tail = (", " if args else "") + "attrs=" + format_attrs(e.attrs, f"attrs of a call of {callee}") + ")"
        if all(type(a) is relax.Var for a in args):
            self.out.append(callee + "(" + ", ".join([self.rvar(a) for a in args]) + tail)
            return
        self.out.append(callee + "(")
        parts: list[_Item] = []
        for i, a in enumerate(args):
            if i:
                parts.append(", ")
            parts.append((self.rx, a, indent))
        parts.append(tail)
        self.push(parts)

    def _rx_constant(self, e: relax.Constant, indent: int) -> None:
        self.out.append(_const(e))

    def _rx_getitem(self, e: relax.TupleGetItem, indent: int) -> None:
        self.stack.append(f"[{int(e.index)}]")
        self.stack.append((self.rx, e.tuple_value, indent))

    def _rx_tuple(self, e: relax.Tuple, indent: int) -> None:
        fields = e.fields
        if not fields:
            self.out.append("()")
            return
        self.out.append("(")
        parts: list[_Item] = []
        for i, f in enumerate(fields):
            if i:
                parts.append(", ")
            parts.append((self.rx, f, indent))
        parts.append(",)" if len(fields) == 1 else ")")
        self.push(parts)

    def _rx_global_var(self, e: GlobalVar, indent: int) -> None:
        self.out.append(_global(e))

    def _rx_if(self, e: relax.If, indent: int) -> None:
        close = "\n" + "  " * indent + "}"
        self.out.append("if ")
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
        if ty is None:
            self.out.append(name + " = ")
        elif type(ty) is TensorType or type(ty) is PrimType:
            self.out.append(name + ": " + _leaf_type(ty) + " = ")
        else:
            self.out.append(name + ": ")
            self.push([(self.ty, ty, None), " = ", (self.rx, b.value, indent)])
            return
        # A tail call, not recursion: rx only appends text and pushes work, so depth stays bounded.
        value = b.value
        # Fast path for the commonest value: must print what rx's dispatch (its relax.Call entry) prints.
        if type(value) is relax.Call:
            self._rx_call(value, indent)
        else:
            self.rx(value, indent)

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
            parts.append(" attrs " + format_attrs(f.attrs, "function attrs"))
        parts.append(" {")
        parts.append((self.block, f.body, (1, "return")))
        parts.append("\n}")
        self.push(parts)


#: Dataflow expressions other than variables, by exact type.
_RX_STEPS: dict[type, Callable[[_RelaxPrinter, Any, int], None]] = {
    relax.Call: _RelaxPrinter._rx_call,
    relax.Constant: _RelaxPrinter._rx_constant,
    relax.TupleGetItem: _RelaxPrinter._rx_getitem,
    relax.Tuple: _RelaxPrinter._rx_tuple,
    GlobalVar: _RelaxPrinter._rx_global_var,
    relax.If: _RelaxPrinter._rx_if,
}
