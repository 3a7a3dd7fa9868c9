"""Parsing dataflow (relax) functions: parameters, blocks of bindings, expressions, calls, tuples and ifs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn, cast

from parpass.ir import relax
from parpass.ir.parser.constants import _ConstantParser
from parpass.ir.parser.tokens import _did_you_mean, _is_ident, describe
from parpass.ir.printer import KEYWORDS
from parpass.ir.types import Type

# steps of the block machine (indexes of its step table), and its end
_M_ITEM, _M_START, _M_DONE, _M_ARGS, _M_RETURN = range(5)

#: What a step of the block machine answers: the next step, and the expression just completed (if any).
_Next = tuple[int, Any]


# ---------------------------------------------------------------- the open constructs of the block machine


class _BlockFrame:
    """An open block: its bindings so far, and the binding (or final expression) being parsed."""

    __slots__ = ("bindings", "keyword", "var_at", "var_type")

    def __init__(self, keyword: str) -> None:
        self.keyword = keyword  # the word before the block's result: "return" or "yield"
        self.bindings: list[relax.Binding] = []
        self.var_at = -1  # token index of the pending binding's variable; -1: the block's result
        self.var_type: Type | None = None  # the pending binding's declared type


class _CallFrame:
    """An open call: its callee and its arguments so far."""

    __slots__ = ("args", "attrs", "callee")

    def __init__(self, callee: Any) -> None:
        self.callee = callee
        self.args: list[Any] = []
        self.attrs: dict[str, Any] | None = None


class _TupleFrame:
    """An open tuple: its fields so far."""

    __slots__ = ("fields",)

    def __init__(self) -> None:
        self.fields: list[Any] = []


class _IfFrame:
    """An open if: its condition, then its first branch once complete."""

    __slots__ = ("cond", "then")

    def __init__(self) -> None:
        self.cond: Any = None
        self.then: relax.SeqExpr | None = None


class _RelaxParser(_ConstantParser):
    """Dataflow functions, parsed by one loop over an explicit stack of open constructs."""

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
                    self.fail(f"expected a parameter '%name: type', got {describe(toks[k])}")
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

        One loop over an explicit stack of open constructs (blocks, calls, tuples, ifs);
        each step parses a little and names the next.
        """
        stack: list[Any] = [_BlockFrame(keyword)]  # the open constructs (frames), innermost last
        steps = (self._block_item, self._expr_start, self._expr_done, self._call_args)
        mode, value = _M_ITEM, None
        while mode != _M_RETURN:
            mode, value = steps[mode](stack, value)
        return cast(relax.SeqExpr, value)

    # ------------------------------------------------------------ block items

    def _block_item(self, stack: list[Any], _: Any) -> _Next:
        """The start of a binding ``%name [: type] =``, or the block's keyword; then its expression."""
        toks = self.toks
        i = self.i
        frame: _BlockFrame = stack[-1]
        tok = toks[i]
        if tok[0] == "%" and len(tok) > 1:
            frame.var_at = i  # the variable is defined once its value is parsed
            i += 1
            ty = None
            if toks[i] == ":":
                self.i = i + 1
                ty = self.type_()
                i = self.i
            if toks[i] != "=":
                self.i = i
                self.fail(f"expected '=' in a binding, got {describe(toks[i])}")
            self.i = i + 1
            frame.var_type = ty
            return self._expr_start(stack, None)
        if tok == frame.keyword:
            self.i = i + 1
            frame.var_at = -1
            return self._expr_start(stack, None)
        self._bad_block_item(frame.keyword, tok)

    def _bad_block_item(self, keyword: str, tok: str) -> NoReturn:
        other = "yield" if keyword == "return" else "return"
        if tok == other:
            self.fail(
                f"expected {keyword!r} to end this block ({other!r} ends "
                f"{'an if branch' if other == 'yield' else 'a function body'})"
            )
        hint = _did_you_mean(tok, (keyword,))
        self.fail(f"expected a binding '%name = ...' or {keyword!r}, got {describe(tok)}{hint}")

    # ------------------------------------------------------------ starting an expression

    def _expr_start(self, stack: list[Any], _: Any) -> _Next:
        """A leaf expression, or the opening of a call, tuple or if."""
        toks = self.toks
        i = self.i
        tok = toks[i]
        c = tok[0]
        if c == "%" and len(tok) > 1:
            return _M_DONE, self._use_rvar(i)
        if c == "@" and len(tok) > 1:
            return self._global_use(stack, i)
        if tok == "(":
            return self._tuple_open(stack, i)
        if tok == "if":
            stack.append(_IfFrame())
            self.i = i + 1
            return _M_START, None
        if tok == "const":
            return _M_DONE, self.constant()
        if (c == '"' or _is_ident(tok)) and tok not in KEYWORDS:
            return self._op_call(stack, i)
        self.fail(f"expected an expression, got {describe(tok)}")

    def _use_rvar(self, i: int) -> relax.Var:
        """The defined variable of the ``%name`` token ``i``."""
        value = self.names.get(self.toks[i])
        if value is None:
            key = self.name_of(i)[0]
            value = self.names.get(key)
            if value is None:
                self.undefined(key, i, "variable")
        self.i = i + 1
        return cast(relax.Var, value)

    def _global_use(self, stack: list[Any], i: int) -> _Next:
        """``@name``: a call of a module function when ``(`` follows, else the GlobalVar itself."""
        gv = self.global_var(i)
        if self.toks[i + 1] == "(":
            stack.append(_CallFrame(gv))
            self.i = i + 2
            return self._call_args(stack, None)
        self.i = i + 1
        return _M_DONE, gv

    def _tuple_open(self, stack: list[Any], i: int) -> _Next:
        if self.toks[i + 1] == ")":
            self.i = i + 2
            return _M_DONE, relax.Tuple(())
        stack.append(_TupleFrame())
        self.i = i + 1
        return _M_START, None

    def _op_call(self, stack: list[Any], i: int) -> _Next:
        """``op(`` of a registered op (an op is only used in a call)."""
        name = self.word("an op name")
        op = self.op(name, i)
        i = self.i
        if self.toks[i] != "(":
            self.fail(f"expected '(' after op {name!r}: an op is only used in a call")
        stack.append(_CallFrame(op))
        self.i = i + 1
        return self._call_args(stack, None)

    def _call_args(self, stack: list[Any], _: Any) -> _Next:
        """Just after the ``(`` of a call, or a ``,`` in its arguments: ``)``, ``attrs=...)`` or arguments.

        Plain variable arguments (the common case) are taken here; any other argument is an expression.
        """
        toks = self.toks
        names = self.names
        args = stack[-1].args
        i = self.i
        while True:
            tok = toks[i]
            if tok == ")" or tok == "attrs":
                self.i = i
                return self._call_close(stack)
            # Fast path for a plain variable: must give what _expr_start (its _use_rvar branch) would.
            var = names.get(tok)
            if var is None or (toks[i + 1] != "," and toks[i + 1] != ")"):
                self.i = i
                return _M_START, None
            args.append(var)
            i += 1
            if toks[i] == ",":
                i += 1

    def _call_close(self, stack: list[Any]) -> _Next:
        """``)`` or ``attrs={...})`` closing a call."""
        toks = self.toks
        i = self.i
        frame: _CallFrame = stack[-1]
        if toks[i] == ")":
            stack.pop()
            self.i = i + 1
            return _M_DONE, relax.Call(frame.callee, tuple(frame.args), frame.attrs or {})
        self.i = i + 1
        self.expect("=", "after 'attrs' in a call")
        attrs = frame.attrs = self.attrs("call attributes")
        i = self.i
        if toks[i] != ")":
            self.fail(f"expected ')' after a call's attrs, got {describe(toks[i])}")
        stack.pop()
        self.i = i + 1
        return _M_DONE, relax.Call(frame.callee, tuple(frame.args), attrs)

    # ------------------------------------------------------------ a complete expression

    def _expr_done(self, stack: list[Any], value: Any) -> _Next:
        """Postfix projections ``[k]``, then hand the expression to the innermost open construct."""
        toks = self.toks
        while toks[self.i] == "[":
            self.i += 1
            index = self.integer("a tuple index")
            if toks[self.i] != "]":
                self.fail(f"expected ']' after a tuple index, got {describe(toks[self.i])}")
            self.i += 1
            value = relax.TupleGetItem(value, index)
        frame = stack[-1]
        return _HAND_OFF[type(frame)](self, stack, frame, value)

    def _into_block(self, stack: list[Any], frame: _BlockFrame, value: Any) -> _Next:
        """A binding's value (define its variable), or the block's result (close the block)."""
        k = frame.var_at
        if k >= 0:
            var = self.names.get(self.toks[k])
            if var is None:
                var = self.define_rvar(k)
            frame.bindings.append(relax.Binding(var, value, frame.var_type))
            return _M_ITEM, None
        if self.toks[self.i] != "}":
            self.fail(f"expected '}}' after {frame.keyword!r} and its expression, got {describe(self.toks[self.i])}")
        self.i += 1
        stack.pop()
        seq = relax.SeqExpr(tuple(frame.bindings), value)
        if not stack:
            return _M_RETURN, seq
        return self._branch_done(stack, seq)

    def _branch_done(self, stack: list[Any], seq: relax.SeqExpr) -> _Next:
        """A branch of the innermost if is complete: open the else branch, or complete the if."""
        frame: _IfFrame = stack[-1]
        then = frame.then
        if then is None:
            frame.then = seq
            self.expect("else", "after the first branch of an if")
            self.expect("{", "to open the else branch")
            stack.append(_BlockFrame("yield"))
            return _M_ITEM, None
        stack.pop()
        return _M_DONE, relax.If(frame.cond, then, seq)

    def _into_call(self, stack: list[Any], frame: _CallFrame, value: Any) -> _Next:
        frame.args.append(value)
        tok = self.toks[self.i]
        if tok == ",":
            self.i += 1
            return _M_ARGS, None
        if tok == ")":
            stack.pop()
            self.i += 1
            return _M_DONE, relax.Call(frame.callee, tuple(frame.args), frame.attrs or {})
        self.fail(f"expected ',' or ')' in the arguments of a call, got {describe(tok)}")

    def _into_tuple(self, stack: list[Any], frame: _TupleFrame, value: Any) -> _Next:
        toks = self.toks
        fields = frame.fields
        fields.append(value)
        tok = toks[self.i]
        if tok == ",":
            self.i += 1
            if toks[self.i] != ")":
                return _M_START, None
        elif tok == ")":
            if len(fields) == 1:
                self.fail("a one-element tuple is written with a trailing comma: (x,)")
        else:
            self.fail(f"expected ',' or ')' in a tuple, got {describe(tok)}")
        self.i += 1
        stack.pop()
        return _M_DONE, relax.Tuple(tuple(fields))

    def _into_if(self, stack: list[Any], frame: _IfFrame, value: Any) -> _Next:
        """The condition of an if is complete: open its first branch."""
        frame.cond = value
        if self.toks[self.i] != "{":
            self.fail(f"expected '{{' after the condition of an if, got {describe(self.toks[self.i])}")
        self.i += 1
        stack.append(_BlockFrame("yield"))
        return _M_ITEM, None


#: Where a complete expression goes, by the type of the innermost open construct.
_HAND_OFF: dict[type, Callable[[_RelaxParser, list[Any], Any, Any], _Next]] = {
    _BlockFrame: _RelaxParser._into_block,
    _CallFrame: _RelaxParser._into_call,
    _TupleFrame: _RelaxParser._into_tuple,
    _IfFrame: _RelaxParser._into_if,
}
