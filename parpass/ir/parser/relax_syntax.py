"""Parsing dataflow (relax) functions: parameters, blocks of bindings, expressions, calls, tuples and ifs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn, cast

from parpass.ir import relax
from parpass.ir.parser.constants import _ConstantParser
from parpass.ir.parser.tokens import _describe, _did_you_mean, _is_ident
from parpass.ir.printer import KEYWORDS
from parpass.ir.types import Type

# frame kinds of the block machine (indexes of _HAND_OFF):
# [_BLOCK, keyword, bindings, token index of the pending binding's variable (-1: the body), its type]
# [_CALL, op, args, attrs, start] / [_TUPLE, fields, start] / [_IF, cond, then, start]
_BLOCK, _CALL, _TUPLE, _IF = range(4)
# steps of the block machine (indexes of its step table), and its end
_M_ITEM, _M_START, _M_DONE, _M_ARGS, _M_RETURN = range(5)

#: What a step of the block machine answers: the next step, and the expression just completed (if any).
_Next = tuple[int, Any]


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

        One loop over an explicit stack of open constructs (blocks, calls, tuples, ifs);
        each step parses a little and names the next.
        """
        stack: list[list[Any]] = [[_BLOCK, keyword, [], -1, None]]
        steps = (self._block_item, self._expr_start, self._expr_done, self._call_args)
        mode, value = _M_ITEM, None
        while mode != _M_RETURN:
            mode, value = steps[mode](stack, value)
        return cast(relax.SeqExpr, value)

    # ------------------------------------------------------------ block items

    def _block_item(self, stack: list[list[Any]], _: Any) -> _Next:
        """The start of a binding ``%name [: type] =``, or the block's keyword; then its expression."""
        toks = self.toks
        i = self.i
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
            self.i = i + 1
            frame[4] = ty
            return self._expr_start(stack, None)
        if tok == frame[1]:
            self.i = i + 1
            frame[3] = -1
            return self._expr_start(stack, None)
        self._bad_block_item(frame[1], tok)

    def _bad_block_item(self, keyword: str, tok: str) -> NoReturn:
        other = "yield" if keyword == "return" else "return"
        if tok == other:
            self.fail(
                f"expected {keyword!r} to end this block ({other!r} ends "
                f"{'an if branch' if other == 'yield' else 'a function body'})"
            )
        hint = _did_you_mean(tok, (keyword,))
        self.fail(f"expected a binding '%name = ...' or {keyword!r}, got {_describe(tok)}{hint}")

    # ------------------------------------------------------------ starting an expression

    def _expr_start(self, stack: list[list[Any]], _: Any) -> _Next:
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
            stack.append([_IF, None, None, i])
            self.i = i + 1
            return _M_START, None
        if tok == "const":
            return _M_DONE, self.constant()
        if (c == '"' or _is_ident(tok)) and tok not in KEYWORDS:
            return self._op_call(stack, i)
        self.fail(f"expected an expression, got {_describe(tok)}")

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

    def _global_use(self, stack: list[list[Any]], i: int) -> _Next:
        """``@name``: a call of a module function when ``(`` follows, else the GlobalVar itself."""
        gv = self.global_var(i)
        if self.toks[i + 1] == "(":
            stack.append([_CALL, gv, [], None, i])
            self.i = i + 2
            return self._call_args(stack, None)
        self.i = i + 1
        return _M_DONE, gv

    def _tuple_open(self, stack: list[list[Any]], i: int) -> _Next:
        if self.toks[i + 1] == ")":
            self.i = i + 2
            return _M_DONE, relax.Tuple(())
        stack.append([_TUPLE, [], i])
        self.i = i + 1
        return _M_START, None

    def _op_call(self, stack: list[list[Any]], i: int) -> _Next:
        """``op(`` of a registered op (an op is only used in a call)."""
        name = self.word("an op name")
        op = self.op(name, i)
        i = self.i
        if self.toks[i] != "(":
            self.fail(f"expected '(' after op {name!r}: an op is only used in a call")
        stack.append([_CALL, op, [], None, i - 1])
        self.i = i + 1
        return self._call_args(stack, None)

    def _call_args(self, stack: list[list[Any]], _: Any) -> _Next:
        """Just after the ``(`` of a call, or a ``,`` in its arguments: ``)``, ``attrs=...)`` or arguments.

        Plain variable arguments (the common case) are taken here; any other argument is an expression.
        """
        toks = self.toks
        names = self.names
        args = stack[-1][2]
        i = self.i
        while True:
            tok = toks[i]
            if tok == ")" or tok == "attrs":
                self.i = i
                return self._call_close(stack)
            var = names.get(tok)
            if var is None or (toks[i + 1] != "," and toks[i + 1] != ")"):
                self.i = i
                return _M_START, None
            args.append(var)
            i += 1
            if toks[i] == ",":
                i += 1

    def _call_close(self, stack: list[list[Any]]) -> _Next:
        """``)`` or ``attrs={...})`` closing a call."""
        toks = self.toks
        i = self.i
        if toks[i] == ")":
            frame = stack.pop()
            self.i = i + 1
            return _M_DONE, relax.Call(frame[1], tuple(frame[2]), frame[3] or {})
        self.i = i + 1
        self.expect("=", "after 'attrs' in a call")
        stack[-1][3] = self.attrs("call attributes")
        i = self.i
        if toks[i] != ")":
            self.fail(f"expected ')' after a call's attrs, got {_describe(toks[i])}")
        frame = stack.pop()
        self.i = i + 1
        return _M_DONE, relax.Call(frame[1], tuple(frame[2]), frame[3])

    # ------------------------------------------------------------ a complete expression

    def _expr_done(self, stack: list[list[Any]], value: Any) -> _Next:
        """Postfix projections ``[k]``, then hand the expression to the innermost open construct."""
        toks = self.toks
        while toks[self.i] == "[":
            self.i += 1
            index = self.integer("a tuple index")
            if toks[self.i] != "]":
                self.fail(f"expected ']' after a tuple index, got {_describe(toks[self.i])}")
            self.i += 1
            value = relax.TupleGetItem(value, index)
        frame = stack[-1]
        kind: int = frame[0]
        return _HAND_OFF[kind](self, stack, frame, value)

    def _into_block(self, stack: list[list[Any]], frame: list[Any], value: Any) -> _Next:
        """A binding's value (define its variable), or the block's result (close the block)."""
        k = frame[3]
        if k >= 0:
            var = self.names.get(self.toks[k])
            if var is None:
                var = self.define_rvar(k)
            frame[2].append(relax.Binding(var, value, frame[4]))
            return _M_ITEM, None
        if self.toks[self.i] != "}":
            self.fail(f"expected '}}' after {frame[1]!r} and its expression, got {_describe(self.toks[self.i])}")
        self.i += 1
        stack.pop()
        seq = relax.SeqExpr(tuple(frame[2]), value)
        if not stack:
            return _M_RETURN, seq
        return self._branch_done(stack, seq)

    def _branch_done(self, stack: list[list[Any]], seq: relax.SeqExpr) -> _Next:
        """A branch of the innermost if is complete: open the else branch, or complete the if."""
        frame = stack[-1]
        if frame[2] is None:
            frame[2] = seq
            self.expect("else", "after the first branch of an if")
            self.expect("{", "to open the else branch")
            stack.append([_BLOCK, "yield", [], -1, None])
            return _M_ITEM, None
        stack.pop()
        return _M_DONE, relax.If(frame[1], frame[2], seq)

    def _into_call(self, stack: list[list[Any]], frame: list[Any], value: Any) -> _Next:
        frame[2].append(value)
        tok = self.toks[self.i]
        if tok == ",":
            self.i += 1
            return _M_ARGS, None
        if tok == ")":
            stack.pop()
            self.i += 1
            return _M_DONE, relax.Call(frame[1], tuple(frame[2]), frame[3] or {})
        self.fail(f"expected ',' or ')' in the arguments of a call, got {_describe(tok)}")

    def _into_tuple(self, stack: list[list[Any]], frame: list[Any], value: Any) -> _Next:
        toks = self.toks
        frame[1].append(value)
        tok = toks[self.i]
        if tok == ",":
            self.i += 1
            if toks[self.i] != ")":
                return _M_START, None
        elif tok == ")":
            if len(frame[1]) == 1:
                self.fail("a one-element tuple is written with a trailing comma: (x,)")
        else:
            self.fail(f"expected ',' or ')' in a tuple, got {_describe(tok)}")
        self.i += 1
        stack.pop()
        return _M_DONE, relax.Tuple(tuple(frame[1]))

    def _into_if(self, stack: list[list[Any]], frame: list[Any], value: Any) -> _Next:
        """The condition of an if is complete: open its first branch."""
        frame[1] = value
        if self.toks[self.i] != "{":
            self.fail(f"expected '{{' after the condition of an if, got {_describe(self.toks[self.i])}")
        self.i += 1
        stack.append([_BLOCK, "yield", [], -1, None])
        return _M_ITEM, None


#: Where a complete expression goes, by the kind of the innermost open construct.
_HAND_OFF: tuple[Callable[[_RelaxParser, list[list[Any]], list[Any], Any], _Next], ...] = (
    _RelaxParser._into_block,
    _RelaxParser._into_call,
    _RelaxParser._into_tuple,
    _RelaxParser._into_if,
)
