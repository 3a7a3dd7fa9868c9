"""Parsing loop-level (tir) expressions by operator precedence, on explicit operand and operator stacks."""

from __future__ import annotations

from typing import Any

from parpass.ir import tir
from parpass.ir.parser.core import OPENED, _ParserCore
from parpass.ir.parser.tokens import _INT_RE, _is_ident, describe
from parpass.ir.printer import KEYWORDS

# binary operators: token -> (precedence, class); all associate left, comparisons do not chain
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
#: The operator-stack entry of ``not`` (operators are tuples ``(precedence, class, token index)``).
_NOT_ENTRY = (3, None, -1)
# function-like forms: name -> number of expression arguments (None: any)
_PFORMS: dict[str, int | None] = {
    "min": 2,
    "max": 2,
    "select": 3,
    "cast": 1,
    "call": None,
    "ramp": 3,
    "broadcast": 2,
}


# ---------------------------------------------------------------- groups on the operator stack
# A group is an object, an operator a tuple: ``type(ops[-1]) is tuple`` tells an operator of the innermost group.


class _ParenGroup:
    """An open ``(``."""

    __slots__ = ("start",)

    def __init__(self, start: int) -> None:
        self.start = start  # token index of the "(", for errors


class _LoadGroup:
    """An open buffer load ``%buf[``: its indices so far."""

    __slots__ = ("args", "buffer")

    def __init__(self, buffer: tir.Buffer) -> None:
        self.buffer = buffer
        self.args: list[Any] = []


class _FormGroup:
    """An open function-like form ``name(``: its arguments so far, and the dtype (and name) of a cast or call."""

    __slots__ = ("args", "dtype", "intrinsic", "name", "start")

    def __init__(self, start: int, name: str, dtype: str, intrinsic: str) -> None:
        self.start = start  # token index of the name, for errors
        self.name = name
        self.dtype = dtype  # of a cast or call ("" for the other forms)
        self.intrinsic = intrinsic  # the name of a call ("" for the other forms)
        self.args: list[Any] = []


def _apply(top: Any, vals: list[Any]) -> None:
    """Apply the operator ``top`` (``not`` or a binary operator) to the operands on top of ``vals``."""
    if top[1] is None:
        vals.append(tir.Not(vals.pop()))
    else:
        b = vals.pop()
        vals[-1] = top[1](vals[-1], b)


class _PrimExprParser(_ParserCore):
    """Loop-level expressions; operands are parsed by token (:meth:`_operand`), operators by precedence."""

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
        i = self.i
        nxt = toks[i + 1]
        if nxt not in _BINOPS and nxt != "[":  # maybe a lone variable or integer (indices, bounds): no stacks
            # Fast path: must give what _operand (_var_operand, the integer branch) then _operators would.
            tok = toks[i]
            obj = self.names.get(tok)
            if type(obj) is tir.Var:
                self.i = i + 1
                return obj
            if "0" <= tok[0] <= "9" and _INT_RE.match(tok):
                self.i = i + 1
                return tir.IntImm("int32", self._int(tok, i))
        vals: list[Any] = []
        # operators: (precedence, class, token index) for binary operators and `not`; group objects
        ops: list[Any] = []
        while True:
            value = self._operand(ops)
            if value is OPENED:
                continue
            vals.append(value)
            if self._operators(vals, ops):
                return vals.pop()

    # ------------------------------------------------------------ operand position

    def _operand(self, ops: list[Any]) -> Any:
        """An operand, or ``OPENED`` after pushing ``not`` or a group (its operand comes next)."""
        toks = self.toks
        i = self.i
        tok = toks[i]
        c = tok[0]
        if c == "%" and len(tok) > 1:
            return self._var_operand(ops, i)
        if "0" <= c <= "9":
            self.i = i + 1
            if _INT_RE.match(tok):
                return tir.IntImm("int32", self._int(tok, i))
            return tir.FloatImm("float32", float(tok))
        if tok == "not":
            ops.append(_NOT_ENTRY)
            self.i = i + 1
            return OPENED
        if tok == "(":
            ops.append(_ParenGroup(i))
            self.i = i + 1
            return OPENED
        if tok == "true" or tok == "false":
            self.i = i + 1
            return tir.IntImm("bool", 1 if tok == "true" else 0)
        return self._word_operand(ops, tok)

    def _word_operand(self, ops: list[Any], tok: str) -> Any:
        """A negative number, inf or nan, a function-like form, or an immediate of a dtype."""
        toks = self.toks
        i = self.i
        if tok == "-" or tok == "inf" or tok == "nan":
            if tok == "-" and not ("0" <= toks[i + 1][0] <= "9" or toks[i + 1] in ("inf", "nan")):
                self.fail("'-' in front of an operand is only part of a number literal (write 0 - x)")
            number = self.number("an expression")
            return tir.IntImm("int32", number) if isinstance(number, int) else tir.FloatImm("float32", number)
        if tok in _PFORMS:
            return self._form_open(ops, tok, i)
        if (tok[0] == '"' or _is_ident(tok)) and toks[i + 1] == "(" and tok not in KEYWORDS:
            return self._dtype_imm()
        if _is_ident(tok) and tok not in KEYWORDS:
            self.fail(
                f"unknown name {describe(tok)} in an expression (variables are written %name; "
                f"an immediate of a dtype is dtype(value))"
            )
        self.fail(f"expected an expression, got {describe(tok)}")

    def _var_operand(self, ops: list[Any], i: int) -> Any:
        """``%v`` (a scalar), ``%buf[]``, or ``OPENED`` after opening the load group of ``%buf[``."""
        toks = self.toks
        tok = toks[i]
        obj = self.names.get(tok)
        if obj is None or (type(obj) is not tir.Var and toks[i + 1] != "["):
            key = self.name_of(i)[0]
            obj = self.names.get(key)
            if obj is None:
                self.undefined(key, i, "variable")
        if toks[i + 1] != "[":
            if type(obj) is not tir.Var:
                self.fail(f"{tok} is a buffer; a load is written {tok}[indices]")
            self.i = i + 1
            return obj
        if type(obj) is not tir.Buffer:
            self.buffer_use(i)
        if toks[i + 2] == "]":
            self.i = i + 3
            return tir.BufferLoad(obj, ())
        ops.append(_LoadGroup(obj))
        self.i = i + 2
        return OPENED

    def _form_open(self, ops: list[Any], tok: str, i: int) -> Any:
        """``name(`` of a function-like form, with the leading dtype (and name) of a cast or call."""
        toks = self.toks
        if toks[i + 1] != "(":
            self.i = i + 1
            self.fail(f"expected '(' after {tok}, got {describe(toks[i + 1])}")
        self.i = i + 2
        dtype = intrinsic = ""
        if tok == "cast":
            dtype = self.dtype_string(True)
            self.expect(",", "after the dtype of a cast")
        elif tok == "call":
            dtype = self.dtype_string(True)
            self.expect(",", "after the dtype of a call")
            intrinsic = self.string("an intrinsic name")
            if toks[self.i] == ")":
                self.i += 1
                return tir.Call(dtype, intrinsic, ())
            self.expect(",", "after the intrinsic name of a call")
        ops.append(_FormGroup(i, tok, dtype, intrinsic))
        return OPENED

    def _dtype_imm(self) -> Any:
        """An immediate of a dtype: ``int32(3)``, ``float64(0.5)``, ``"my dtype"(1)``."""
        dtype = self.dtype_word(True)
        self.i += 1
        number = self.number(f"a number in {dtype}(...)")
        value = tir.IntImm(dtype, number) if isinstance(number, int) else tir.FloatImm(dtype, number)
        self.expect(")", f"to close {dtype}(...)")
        return value

    # ------------------------------------------------------------ operator position

    def _operators(self, vals: list[Any], ops: list[Any]) -> bool:
        """After an operand: take a binary operator (False: an operand follows) or close groups.

        True when the expression is complete (no open group and no operator follows).
        """
        toks = self.toks
        while True:
            info = _BINOPS.get(toks[self.i])
            if info is not None:
                self._binop(info, vals, ops)
                return False
            # not an operator: finish the operators of the innermost group
            while ops and type(ops[-1]) is tuple:
                _apply(ops.pop(), vals)
            if not ops:
                return True
            if not self._close_group(vals, ops):
                return False

    def _binop(self, info: tuple[int, type], vals: list[Any], ops: list[Any]) -> None:
        """Apply the pending operators that bind at least as tight, then push this one."""
        prec = info[0]
        while ops and type(ops[-1]) is tuple and ops[-1][0] >= prec:
            top = ops[-1]
            if top[0] == _CMP_PREC and prec == _CMP_PREC:
                self.fail("comparisons do not chain: parenthesize one of them")
            ops.pop()
            _apply(top, vals)
        ops.append((prec, info[1], self.i))
        self.i += 1

    def _close_group(self, vals: list[Any], ops: list[Any]) -> bool:
        """At the end of a group's operand: True once the group is closed, False at a ``,`` (more arguments)."""
        tok = self.toks[self.i]
        group = ops[-1]
        if type(group) is _ParenGroup:
            if tok != ")":
                self.fail(f"expected ')' to close the '(' {self._where(group.start)}, got {describe(tok)}")
            ops.pop()
            self.i += 1
            return True
        args = group.args
        args.append(vals.pop())
        if tok == ",":
            self.i += 1
            return False  # the next argument
        is_load = type(group) is _LoadGroup
        close = "]" if is_load else ")"
        if tok != close:
            self.fail(f"expected ',' or {close!r}, got {describe(tok)}")
        ops.pop()
        if is_load:
            vals.append(tir.BufferLoad(group.buffer, tuple(args)))
        else:
            vals.append(self.form(group, args))
        self.i += 1
        return True

    def _where(self, k: int) -> str:
        pos = self._offset(k)
        return f"at line {self.text.count(chr(10), 0, pos) + 1}, column {pos - self.text.rfind(chr(10), 0, pos)}"

    def form(self, group: _FormGroup, args: list[Any]) -> Any:
        """The node of a function-like form once its arguments are parsed (``self.i`` at its ``)``)."""
        name = group.name
        want = _PFORMS[name]
        if want is not None and len(args) != want:
            self.fail(
                f"{name}(...) takes {want} argument{'s' if want != 1 else ''}"
                f"{' after the dtype' if name == 'cast' else ''}, got {len(args)}",
                group.start,
            )
        if name == "min":
            return tir.Min(args[0], args[1])
        if name == "max":
            return tir.Max(args[0], args[1])
        if name == "select":
            return tir.Select(args[0], args[1], args[2])
        if name == "cast":
            return tir.Cast(group.dtype, args[0])
        if name == "call":
            return tir.Call(group.dtype, group.intrinsic, tuple(args))
        lanes = args[-1]
        if type(lanes) is not tir.IntImm or lanes.dtype != "int32":
            self.fail(f"the last argument of {name}(...) is its number of lanes, an integer literal", group.start)
        if name == "ramp":
            return tir.Ramp(args[0], args[1], lanes.value)
        return tir.Broadcast(args[0], lanes.value)
