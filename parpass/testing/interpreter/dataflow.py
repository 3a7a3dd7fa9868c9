"""The dataflow machine: runs a :class:`~parpass.ir.Function` with a task stack and a value stack.

A task is a tuple whose first item is the bound method that runs it, given the
whole task. Evaluating an expression pushes the tasks that evaluate its operands
(each leaves one value on the value stack) under the task that combines them, so
deep IR never recurses in Python. Expression kinds dispatch through
:data:`_EVALUATORS`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from parpass.errors import not_found
from parpass.ir import relax, tir
from parpass.ir.module import IRModule
from parpass.ir.node import GlobalVar, Op
from parpass.ir.op import get_op
from parpass.testing.interpreter.errors import ArgumentError, InterpreterError, lookup
from parpass.testing.interpreter.prim_run import run_prim, run_prim_func
from parpass.testing.interpreter.values import MISSING, Value, coerce, describe, is_bool_scalar, value_key

_Task = tuple[Any, ...]


class _Frame:
    """One active function call: its name, variables, current place and caller."""

    __slots__ = ("caller", "caller_loc", "env", "loc", "name")

    def __init__(self, name: str, env: dict[int, Value], caller: _Frame | None, caller_loc: Any) -> None:
        self.name = name
        self.env = env
        self.loc: Any = None
        self.caller = caller
        self.caller_loc = caller_loc

    def error(self, message: str, cls: type[InterpreterError] = InterpreterError) -> InterpreterError:
        """An error naming this function, the place in it, and (up to 8 of) its callers and their places."""
        text = f"in function {self.name!r}{_format_relax_loc(self.loc)}: {message}"
        caller, loc, depth = self.caller, self.caller_loc, 0
        while caller is not None and depth < 8:
            text += f"\n  called from function {caller.name!r}{_format_relax_loc(loc)}"
            loc = caller.caller_loc
            caller = caller.caller
            depth += 1
        if caller is not None:
            text += "\n  ..."
        return cls(text)


def _format_relax_loc(loc: Any) -> str:
    """``loc`` is a chain ``("binding", parent, index, var)`` / ``("body", parent)`` / ``("branch", parent, which)``."""
    parts: list[str] = []
    while loc is not None:
        if loc[0] == "binding":
            parts.append(f"binding {loc[2]} (%{loc[3].name_hint})")
        elif loc[0] == "body":
            parts.append("result expression")
        else:
            parts.append(f"{loc[2]} branch")
        loc = loc[1]
    return ", " + " > ".join(reversed(parts)) if parts else ""


def run_function(mod: IRModule, name: str, *args: Value, memoize: bool = True) -> Value:
    """Run function ``name`` of ``mod`` on ``args`` and return its value.

    For a :class:`~parpass.ir.Function`, ``args`` are numpy arrays (see
    :mod:`parpass.testing.interpreter`) and the result is an array or a tuple of them. If ``name`` is a
    :class:`~parpass.ir.PrimFunc`, this is :func:`run_prim_func` and returns the
    tuple of its buffers after the run.

    Raises :class:`ArgumentError` when ``args`` do not match the parameters and
    :class:`InterpreterError` when the program fails.

    With ``memoize`` (the default), a call of a module function whose arguments are
    bit-identical to those of an earlier call in the same run reuses that call's
    result. Every op is deterministic (stateful ones too, given their attributes),
    so the values are the same; only a ``print`` in the reused call does not print
    again. Generated modules call functions from several places, and without this
    their call trees grow exponentially.
    """
    if not isinstance(mod, IRModule):
        raise TypeError(f"run_function expects an IRModule, got {type(mod).__name__}")
    func = lookup(mod, name, "in the module given to run_function")
    if isinstance(func, tir.PrimFunc):
        return run_prim_func(func, *args, name=name)
    if not isinstance(func, relax.Function):
        raise TypeError(f"function {name!r} is a {type(func).__name__}, not a Function or PrimFunc")
    if len(args) != len(func.params):
        raise ArgumentError(
            f"function {name!r} takes {len(func.params)} argument(s) "
            f"({', '.join('%' + p.var.name_hint for p in func.params)}), got {len(args)}"
        )
    env, problem = _bind_params(func, args)
    if problem is not None:
        raise ArgumentError(f"function {name!r}: {problem}")
    return _DataflowMachine(mod, memoize).run(_Frame(name, env, None, None), func)


def _bind_params(func: relax.Function, args: Sequence[Any]) -> tuple[dict[int, Value], str | None]:
    """``func``'s parameters bound to ``args`` (as many), each coerced to its type; or the first problem."""
    env: dict[int, Value] = {}
    for k, (param, arg) in enumerate(zip(func.params, args, strict=True)):
        value, problem = coerce(arg, param.ty, f"argument {k} (%{param.var.name_hint})")
        if problem is not None:
            return env, problem
        env[param.var.vid] = value
    return env, None


def run(mod: IRModule, name: str, *args: Any, memoize: bool = True) -> Value:
    """Run function ``name`` of ``mod`` whatever its kind (same as :func:`run_function`)."""
    return run_function(mod, name, *args, memoize=memoize)


def _pop(values: list[Value], n: int) -> list[Value]:
    """The top ``n`` values, removed from the stack (in push order)."""
    if n == 0:
        return []
    out = values[-n:]
    del values[-n:]
    return out


class _DataflowMachine:
    """One run of a Function and everything it calls: the task stack, the value stack and the call memo."""

    __slots__ = ("memo", "memoize", "mod", "tasks", "values")

    def __init__(self, mod: IRModule, memoize: bool) -> None:
        self.mod = mod
        self.memoize = memoize
        self.tasks: list[_Task] = []
        self.values: list[Value] = []
        self.memo: dict[tuple[Any, ...], Value] = {}  # (callee, argument bits) -> result, when memoize

    def run(self, frame: _Frame, func: relax.Function) -> Value:
        """The value of ``func``'s body, its parameters bound in ``frame``."""
        tasks = self.tasks
        tasks.append((self._block, func.body, 0, frame, None, None))
        while tasks:
            task = tasks.pop()
            task[0](task)
        if len(self.values) != 1:  # pragma: no cover - the machine's own invariant
            raise AssertionError(f"interpreter finished with {len(self.values)} values")
        return self.values[0]

    # ------------------------------------------------------------ expressions

    def _eval(self, task: _Task) -> None:
        _, expr, frame = task
        handler = _EVALUATORS.get(type(expr))
        if handler is None:
            raise frame.error(f"cannot evaluate a {type(expr).__name__} node as an expression")
        handler(self, expr, frame)

    def _eval_var(self, expr: relax.Var, frame: _Frame) -> None:
        value = frame.env.get(expr.vid, MISSING)
        if value is MISSING:
            raise frame.error(f"variable %{expr.name_hint} (vid {expr.vid}) is used before it is defined")
        self.values.append(value)

    def _eval_constant(self, expr: relax.Constant, frame: _Frame) -> None:
        self.values.append(expr.numpy())

    def _eval_call(self, expr: relax.Call, frame: _Frame) -> None:
        tasks = self.tasks
        if isinstance(expr.op, Op):
            tasks.append((self._call_op, expr, frame))
        elif isinstance(expr.op, GlobalVar):
            tasks.append((self._call_function, expr, frame))
        else:
            raise frame.error(f"a call's callee must be an Op or a GlobalVar, got {type(expr.op).__name__}")
        for arg in reversed(expr.args):
            tasks.append((self._eval, arg, frame))

    def _eval_tuple(self, expr: relax.Tuple, frame: _Frame) -> None:
        tasks = self.tasks
        tasks.append((self._make_tuple, expr, frame))
        for field in reversed(expr.fields):
            tasks.append((self._eval, field, frame))

    def _eval_get_item(self, expr: relax.TupleGetItem, frame: _Frame) -> None:
        self.tasks.append((self._get_item, expr, frame))
        self.tasks.append((self._eval, expr.tuple_value, frame))

    def _eval_if(self, expr: relax.If, frame: _Frame) -> None:
        self.tasks.append((self._branch, expr, frame))
        self.tasks.append((self._eval, expr.cond, frame))

    def _eval_global_var(self, expr: GlobalVar, frame: _Frame) -> None:
        raise frame.error(f"@{expr.name_hint} is used as a value; functions can only be called")

    # ------------------------------------------------------------ blocks

    def _block(self, task: _Task) -> None:
        """Run binding ``i`` of a block and queue the rest; after the last, evaluate the block's result."""
        _, seq, i, frame, scope, parent = task
        tasks = self.tasks
        if i < len(seq.bindings):
            binding = seq.bindings[i]
            frame.loc = ("binding", parent, i, binding.var)
            tasks.append((self._block, seq, i + 1, frame, scope, parent))
            tasks.append((self._bind, binding, frame, scope))
            tasks.append((self._eval, binding.value, frame))
        else:
            frame.loc = ("body", parent)
            tasks.append((self._end_block, frame, scope, parent))
            tasks.append((self._eval, seq.body, frame))

    def _bind(self, task: _Task) -> None:
        _, binding, frame, scope = task
        frame.env[binding.var.vid] = self.values.pop()
        if scope is not None:
            scope.append(binding.var.vid)

    def _end_block(self, task: _Task) -> None:
        """Forget a branch's bindings (``scope``) and return to the place of the ``If``."""
        _, frame, scope, parent = task
        if scope:
            for vid in scope:
                frame.env.pop(vid, None)
        frame.loc = None if parent is None else parent[1]  # a branch's parent is ("branch", place of the If, which)

    def _branch(self, task: _Task) -> None:
        """Run the branch an ``If``'s condition (on the value stack) takes, in a scope of its own."""
        _, expr, frame = task
        cond = self.values.pop()
        if not is_bool_scalar(cond):
            raise frame.error(f"If condition must be a boolean scalar, got {describe(cond)}")
        which = "then" if bool(cond) else "else"
        branch = expr.then_branch if which == "then" else expr.else_branch
        self.tasks.append((self._block, branch, 0, frame, [], ("branch", frame.loc, which)))

    # ------------------------------------------------------------ tuples

    def _make_tuple(self, task: _Task) -> None:
        expr = task[1]
        self.values.append(tuple(_pop(self.values, len(expr.fields))))

    def _get_item(self, task: _Task) -> None:
        _, expr, frame = task
        value = self.values.pop()
        if not isinstance(value, tuple):
            raise frame.error(f"TupleGetItem index {expr.index} of {describe(value)}, not a tuple")
        if not 0 <= expr.index < len(value):
            raise frame.error(f"TupleGetItem index {expr.index} is out of range for a tuple of {len(value)}")
        self.values.append(value[expr.index])

    # ------------------------------------------------------------ calls

    def _call_op(self, task: _Task) -> None:
        _, call, frame = task
        args = _pop(self.values, len(call.args))
        self.values.append(_apply_op(call, args, frame))

    def _call_function(self, task: _Task) -> None:
        """Call a module function: reuse a memoized result, enter a Function, or run a PrimFunc."""
        _, call, frame = task
        args = _pop(self.values, len(call.args))
        gname = call.op.name_hint
        if gname not in self.mod:
            err = not_found("function", gname, self.mod.names(), where="in the module")
            raise frame.error(f"call of @{gname}: {err}")
        callee = self.mod[gname]
        key = (gname, value_key(args)) if self.memoize else None
        if key is not None and key in self.memo:
            self.values.append(self.memo[key])
        elif isinstance(callee, relax.Function):
            self._enter(gname, callee, args, frame, key)
        elif isinstance(callee, tir.PrimFunc):
            result = _call_prim_from_dataflow(gname, callee, args, frame)
            if key is not None:
                self.memo[key] = result
            self.values.append(result)
        else:
            raise frame.error(f"call of @{gname}: it is a {type(callee).__name__}, not a function")

    def _enter(
        self, gname: str, callee: relax.Function, args: list[Value], frame: _Frame, key: tuple[Any, ...] | None
    ) -> None:
        """Queue the body of Function ``callee`` in a new frame (and the memoizing of its result under ``key``)."""
        if len(args) != len(callee.params):
            raise frame.error(f"call of @{gname}: it takes {len(callee.params)} argument(s), got {len(args)}")
        env, problem = _bind_params(callee, args)
        if problem is not None:
            raise frame.error(f"call of @{gname}: {problem}")
        new = _Frame(gname, env, frame, frame.loc)
        if key is not None:
            self.tasks.append((self._remember, key))
        self.tasks.append((self._block, callee.body, 0, new, None, None))

    def _remember(self, task: _Task) -> None:
        """Memoize the result of the call just finished (on top of the value stack)."""
        self.memo[task[1]] = self.values[-1]


_EVALUATORS: dict[type, Callable[[_DataflowMachine, Any, _Frame], None]] = {
    relax.Var: _DataflowMachine._eval_var,
    relax.Constant: _DataflowMachine._eval_constant,
    relax.Call: _DataflowMachine._eval_call,
    relax.Tuple: _DataflowMachine._eval_tuple,
    relax.TupleGetItem: _DataflowMachine._eval_get_item,
    relax.If: _DataflowMachine._eval_if,
    GlobalVar: _DataflowMachine._eval_global_var,
}


def _apply_op(call: relax.Call, args: list[Value], frame: _Frame) -> Value:
    """The op registry's evaluation rule of ``call``'s op applied to ``args``."""
    assert isinstance(call.op, Op)
    name = call.op.name
    try:
        info = get_op(name)
    except KeyError as exc:
        raise frame.error(str(exc)) from None
    if info.num_inputs is not None and info.num_inputs != len(args):
        raise frame.error(f"op {name!r} takes {info.num_inputs} argument(s), got {len(args)}")
    if info.evaluate is None:
        raise frame.error(f"op {name!r} has no evaluation rule")
    try:
        return info.evaluate(args, call.attrs)
    except Exception as exc:
        raise frame.error(f"op {name!r} failed: {type(exc).__name__}: {exc}") from exc


def _call_prim_from_dataflow(gname: str, callee: tir.PrimFunc, args: list[Value], frame: _Frame) -> Value:
    """Run a PrimFunc called from a Function with the call_tir convention (see :mod:`parpass.testing.interpreter`)."""
    params = callee.params
    if len(args) > len(params):
        raise frame.error(f"call of PrimFunc @{gname}: it has {len(params)} parameter(s), got {len(args)} argument(s)")
    for k in range(len(args), len(params)):
        out_param = params[k]
        if isinstance(out_param, tir.Var):
            raise frame.error(
                f"call of PrimFunc @{gname}: parameter {k} ({out_param.name_hint}) is a scalar, so it cannot be "
                f"an output; pass it as an argument"
            )
    inputs = [_prim_input(gname, params[k], k, arg, frame) for k, arg in enumerate(args)]
    try:
        buffers = run_prim(callee, gname, inputs, allocate_outputs=True)
    except InterpreterError as exc:
        raise frame.error(f"call of PrimFunc @{gname} failed: {exc}", type(exc)) from exc
    n_in_buffers = sum(1 for p in params[: len(args)] if isinstance(p, tir.Buffer))
    outputs = buffers[n_in_buffers:]
    for out in outputs:
        out.flags.writeable = False
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def _prim_input(gname: str, param: Any, k: int, arg: Value, frame: _Frame) -> Any:
    """Argument ``k`` of a PrimFunc call from a Function: a copy for a buffer, a numpy scalar for a scalar."""
    if isinstance(arg, tuple) or not isinstance(arg, (np.ndarray, np.generic)):
        raise frame.error(f"call of PrimFunc @{gname}: argument {k} is {describe(arg)}, not an array")
    if isinstance(param, tir.Buffer):
        return np.array(arg, copy=True)
    if np.ndim(arg) != 0:
        raise frame.error(
            f"call of PrimFunc @{gname}: argument {k} for scalar parameter {param.name_hint} must be 0-d, "
            f"got {describe(arg)}"
        )
    return np.asarray(arg)[()]
