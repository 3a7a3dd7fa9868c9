"""The reference interpreter: what a parpass program means.

It is slow and simple on purpose. A pass preserves meaning exactly when the
interpreter gives the same outputs before and after it, so the interpreter is
the specification that :func:`assert_same_meaning` checks passes against.
Every walk here uses explicit stacks, so deep IR (a 5,000-deep expression nest,
long call chains) never hits Python's recursion limit.

Dataflow functions (:class:`~parpass.ir.Function`)
    :func:`run_function` takes numpy arrays (tuples of them for tuple-typed
    parameters; numbers or 0-d arrays for ``PrimType`` parameters), checks them
    against the parameter types and returns numpy arrays (or tuples of them).
    Bindings run in order; a ``Call`` of an :class:`~parpass.ir.Op` uses the op
    registry's ``evaluate`` rule (stateful ops too: ``random_uniform`` with its
    ``seed`` attribute is deterministic); a ``Call`` of a ``GlobalVar`` runs that
    function of the module; ``If`` needs a boolean scalar condition and runs only
    the branch taken; bindings made inside a branch are gone after it.

    Calling a :class:`~parpass.ir.PrimFunc` from a ``Function`` follows TVM's
    destination-passing ``call_tir`` convention: the call's ``k`` arguments fill
    the first ``k`` parameters (a tensor for a ``Buffer``, a scalar for a scalar
    ``Var``), every remaining parameter must be a ``Buffer`` and is an output,
    allocated zeroed with its declared shape and dtype. The call's value is the
    output array, or a tuple of them when there are several. Inputs are copied,
    so a PrimFunc that writes to an input buffer does not change the caller's
    value.

Loop-level functions (:class:`~parpass.ir.PrimFunc`)
    :func:`run_prim_func` takes the arguments positionally: a numpy array for a
    ``Buffer`` parameter (dtype and shape checked), a number for a scalar
    parameter. Buffers are updated in place and returned. The semantics are
    TVM TIR's:

    - every ``For`` kind runs ``loop_var`` over ``[min, min + extent)`` serially;
    - a buffer is flat memory; an access's element offset is
      ``sum(index_k * stride_k)`` with the accessing ``Buffer`` node's
      ``strides``, or its row-major strides when ``strides`` is empty. So a
      flattened (1-D) view of a buffer, with the same ``vid``, reads the same
      memory. An offset outside the memory is an error;
    - a ``Ramp`` or ``Broadcast`` is a vector (a 1-D numpy array of its lanes),
      and a load or store whose index is a vector is a vector access;
    - scalars are numpy scalars of their dtype, so integer arithmetic wraps
      like C and float arithmetic runs in the dtype's precision; ``FloorDiv``
      and ``FloorMod`` round toward negative infinity (on floats
      ``floor(a / b)`` and ``a - floor(a / b) * b``, as TVM defines them);
      division by zero, of any dtype, raises :class:`DivisionByZeroError`;
    - both operands of a binary operator must have the same dtype (lanes
      included), conditions must be ``bool``;
    - ``Select`` evaluates both values; ``Evaluate`` evaluates its expression;
    - ``Allocate`` gives fresh zeroed memory for the duration of its body;
    - intrinsic ``Call``s by name: the set :data:`~parpass.ir.well_formed.INTRINSICS`
      (exp, exp2, log, log2, log10, sqrt, rsqrt, tanh, sin, cos, fabs, abs,
      floor, ceil, round (half to even), trunc, sigmoid, pow); each argument must
      have the call's dtype and the result is computed in that dtype. Any other
      name is an error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from parpass.errors import ParpassError, not_found
from parpass.ir import relax, tir
from parpass.ir.builtin_ops import format_type  # importing it registers the standard ops
from parpass.ir.dtype import element_dtype
from parpass.ir.module import IRModule
from parpass.ir.node import BaseFunc, GlobalVar, Op
from parpass.ir.op import get_op
from parpass.ir.types import PrimType, TensorType, TupleType, Type
from parpass.ir.well_formed import INTRINSICS

__all__ = [
    "ArgumentError",
    "DivisionByZeroError",
    "InterpreterError",
    "assert_same_meaning",
    "random_inputs",
    "run",
    "run_function",
    "run_prim_func",
]


class InterpreterError(ParpassError, RuntimeError):
    """A program failed while being interpreted (names the function and the place)."""


class ArgumentError(InterpreterError, ValueError):
    """Arguments that do not match a function's parameters (names the function and the parameter)."""


class DivisionByZeroError(InterpreterError, ZeroDivisionError):
    """``FloorDiv`` or ``FloorMod`` by zero in a PrimFunc."""


Value = Any  # a numpy array, or a tuple of values

_MISSING = object()


# ====================================================================== values and types


def _describe(value: Value) -> str:
    """A short description of a runtime value for error messages."""
    if isinstance(value, tuple):
        return f"a tuple of {len(value)} fields"
    if isinstance(value, np.ndarray):
        return f"an array of shape {tuple(value.shape)} and dtype {value.dtype}"
    if isinstance(value, np.generic):
        return f"a numpy {value.dtype} scalar"
    text = repr(value)
    return f"a {type(value).__name__} ({text if len(text) <= 60 else text[:57] + '...'})"


def _coerce(value: Value, ty: Type, what: str) -> tuple[Value, str | None]:
    """``value`` checked against ``ty`` and converted to the interpreter's form.

    Returns ``(converted, None)`` or ``(None, problem)``. Arrays are copied and made
    read-only, so an evaluation rule can never change the caller's data.
    """
    out: list[Value] = [None]
    # Work items: (value, type, path, container list, slot in container).
    stack: list[tuple[Value, Type, str, list[Value], int]] = [(value, ty, what, out, 0)]
    while stack:
        val, t, path, holder, slot = stack.pop()
        if isinstance(t, TupleType):
            if isinstance(val, list):
                val = tuple(val)
            if not isinstance(val, tuple):
                return (
                    None,
                    f"{path}: expected a tuple of {len(t.fields)} fields for {format_type(t)}, got {_describe(val)}",
                )
            if len(val) != len(t.fields):
                return None, f"{path}: expected a tuple of {len(t.fields)} fields for {format_type(t)}, got {len(val)}"
            fields: list[Value] = [None] * len(val)
            holder[slot] = fields  # converted to a tuple below
            for k in range(len(val) - 1, -1, -1):
                stack.append((val[k], t.fields[k], f"{path}[{k}]", fields, k))
            continue
        if isinstance(t, PrimType):
            shape: tuple[int, ...] = ()
        elif isinstance(t, TensorType):
            shape = tuple(t.shape)
        else:
            return None, f"{path}: parameter type {format_type(t)} is not a type"
        if isinstance(val, (bool, int, float)) and not isinstance(val, np.generic) and isinstance(t, PrimType):
            want = np.dtype(t.dtype)
            if isinstance(val, float) and want.kind in "biu":
                return None, f"{path}: expected {format_type(t)}, got the float {val!r}"
            try:
                val = np.array(val, dtype=want)
            except (OverflowError, ValueError) as exc:
                return None, f"{path}: {val!r} does not fit {format_type(t)} ({exc})"
        elif isinstance(val, np.generic):
            val = np.array(val)
        if not isinstance(val, np.ndarray):
            return None, f"{path}: expected a numpy array for {format_type(t)}, got {_describe(val)}"
        if str(val.dtype) != t.dtype or tuple(val.shape) != shape:
            return None, f"{path}: expected {format_type(t)}, got {_describe(val)}"
        arr = np.array(val, copy=True)
        arr.flags.writeable = False
        holder[slot] = arr
    return _freeze(out[0]), None


def _freeze(value: Value) -> Value:
    """Nested lists (from :func:`_coerce`) as nested tuples, without recursion."""
    if not isinstance(value, list):
        return value
    # Post-order: convert the innermost lists first.
    order: list[list[Value]] = []
    stack = [value]
    while stack:
        item = stack.pop()
        order.append(item)
        stack.extend(v for v in item if isinstance(v, list))
    done: dict[int, tuple[Value, ...]] = {}
    for item in reversed(order):
        done[id(item)] = tuple(done[id(v)] if isinstance(v, list) else v for v in item)
    return done[id(value)]


def _is_bool_scalar(value: Value) -> bool:
    return isinstance(value, (np.ndarray, np.generic)) and value.shape == () and value.dtype == np.bool_


# ====================================================================== dataflow functions

# Task codes of the dataflow machine.
_EVAL, _BLOCK, _BIND, _END_BLOCK, _CALL_OP, _CALL_FN, _TUPLE, _GET_ITEM, _IF, _MEMO = range(10)


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
    """``loc`` is a chain ``("binding", parent, index, var)`` / ``("branch", parent, which)``."""
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


def _lookup(mod: IRModule, name: str, where: str) -> BaseFunc:
    if name not in mod:
        raise not_found("function", name, mod.names(), where=where)
    return mod[name]


def run_function(mod: IRModule, name: str, *args: Value, memoize: bool = True) -> Value:
    """Run function ``name`` of ``mod`` on ``args`` and return its value.

    For a :class:`~parpass.ir.Function`, ``args`` are numpy arrays (see the module
    docstring) and the result is an array or a tuple of them. If ``name`` is a
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
    func = _lookup(mod, name, "in the module given to run_function")
    if isinstance(func, tir.PrimFunc):
        return run_prim_func(func, *args, name=name)
    if not isinstance(func, relax.Function):
        raise TypeError(f"function {name!r} is a {type(func).__name__}, not a Function or PrimFunc")
    if len(args) != len(func.params):
        raise ArgumentError(
            f"function {name!r} takes {len(func.params)} argument(s) "
            f"({', '.join('%' + p.var.name_hint for p in func.params)}), got {len(args)}"
        )
    env: dict[int, Value] = {}
    for k, (param, arg) in enumerate(zip(func.params, args, strict=True)):
        value, problem = _coerce(arg, param.ty, f"argument {k} (%{param.var.name_hint})")
        if problem is not None:
            raise ArgumentError(f"function {name!r}: {problem}")
        env[param.var.vid] = value
    return _run_dataflow(mod, _Frame(name, env, None, None), func, memoize)


def _run_dataflow(mod: IRModule, frame: _Frame, func: relax.Function, memoize: bool) -> Value:
    """The dataflow machine: a task stack and a value stack, no Python recursion."""
    tasks: list[tuple[Any, ...]] = [(_BLOCK, func.body, 0, frame, None, None)]
    values: list[Value] = []
    memo: dict[tuple[Any, ...], Value] = {}  # (callee, argument bits) -> result, when memoize
    while tasks:
        task = tasks.pop()
        code = task[0]
        if code == _EVAL:
            expr, frame = task[1], task[2]
            kind = type(expr)
            if kind is relax.Var:
                value = frame.env.get(expr.vid, _MISSING)
                if value is _MISSING:
                    raise frame.error(f"variable %{expr.name_hint} (vid {expr.vid}) is used before it is defined")
                values.append(value)
            elif kind is relax.Constant:
                values.append(expr.numpy())
            elif kind is relax.Call:
                if isinstance(expr.op, Op):
                    tasks.append((_CALL_OP, expr, frame))
                elif isinstance(expr.op, GlobalVar):
                    tasks.append((_CALL_FN, expr, frame))
                else:
                    raise frame.error(f"a call's callee must be an Op or a GlobalVar, got {type(expr.op).__name__}")
                for arg in reversed(expr.args):
                    tasks.append((_EVAL, arg, frame))
            elif kind is relax.Tuple:
                tasks.append((_TUPLE, expr, frame))
                for field in reversed(expr.fields):
                    tasks.append((_EVAL, field, frame))
            elif kind is relax.TupleGetItem:
                tasks.append((_GET_ITEM, expr, frame))
                tasks.append((_EVAL, expr.tuple_value, frame))
            elif kind is relax.If:
                tasks.append((_IF, expr, frame))
                tasks.append((_EVAL, expr.cond, frame))
            elif kind is GlobalVar:
                raise frame.error(f"@{expr.name_hint} is used as a value; functions can only be called")
            else:
                raise frame.error(f"cannot evaluate a {kind.__name__} node as an expression")
        elif code == _BLOCK:
            _, seq, i, frame, scope, parent = task
            if i < len(seq.bindings):
                binding = seq.bindings[i]
                frame.loc = ("binding", parent, i, binding.var)
                tasks.append((_BLOCK, seq, i + 1, frame, scope, parent))
                tasks.append((_BIND, binding, frame, scope))
                tasks.append((_EVAL, binding.value, frame))
            else:
                frame.loc = ("body", parent)
                tasks.append((_END_BLOCK, frame, scope, parent))
                tasks.append((_EVAL, seq.body, frame))
        elif code == _BIND:
            _, binding, frame, scope = task
            frame.env[binding.var.vid] = values.pop()
            if scope is not None:
                scope.append(binding.var.vid)
        elif code == _END_BLOCK:
            _, frame, scope, parent = task
            if scope:
                for vid in scope:
                    frame.env.pop(vid, None)
            frame.loc = parent
        elif code == _CALL_OP:
            _, call, frame = task
            args = _pop(values, len(call.args))
            values.append(_call_op(call, args, frame))
        elif code == _CALL_FN:
            _, call, frame = task
            args = _pop(values, len(call.args))
            gname = call.op.name_hint
            if gname not in mod:
                err = not_found("function", gname, mod.names(), where="in the module")
                raise frame.error(f"call of @{gname}: {err}")
            callee = mod[gname]
            key = (gname, _value_key(args)) if memoize else None
            if key is not None and key in memo:
                values.append(memo[key])
                continue
            if isinstance(callee, relax.Function):
                if len(args) != len(callee.params):
                    raise frame.error(f"call of @{gname}: it takes {len(callee.params)} argument(s), got {len(args)}")
                env: dict[int, Value] = {}
                for k, (param, arg) in enumerate(zip(callee.params, args, strict=True)):
                    value, problem = _coerce(arg, param.ty, f"argument {k} (%{param.var.name_hint})")
                    if problem is not None:
                        raise frame.error(f"call of @{gname}: {problem}")
                    env[param.var.vid] = value
                new = _Frame(gname, env, frame, frame.loc)
                if key is not None:
                    tasks.append((_MEMO, key))
                tasks.append((_BLOCK, callee.body, 0, new, None, None))
            elif isinstance(callee, tir.PrimFunc):
                result = _call_prim_from_dataflow(gname, callee, args, frame)
                if key is not None:
                    memo[key] = result
                values.append(result)
            else:
                raise frame.error(f"call of @{gname}: it is a {type(callee).__name__}, not a function")
        elif code == _TUPLE:
            _, expr, frame = task
            values.append(tuple(_pop(values, len(expr.fields))))
        elif code == _GET_ITEM:
            _, expr, frame = task
            value = values.pop()
            if not isinstance(value, tuple):
                raise frame.error(f"TupleGetItem index {expr.index} of {_describe(value)}, not a tuple")
            if not 0 <= expr.index < len(value):
                raise frame.error(f"TupleGetItem index {expr.index} is out of range for a tuple of {len(value)}")
            values.append(value[expr.index])
        elif code == _MEMO:
            memo[task[1]] = values[-1]
        elif code == _IF:
            _, expr, frame = task
            cond = values.pop()
            if not _is_bool_scalar(cond):
                raise frame.error(f"If condition must be a boolean scalar, got {_describe(cond)}")
            which = "then" if bool(cond) else "else"
            branch = expr.then_branch if which == "then" else expr.else_branch
            tasks.append((_BLOCK, branch, 0, frame, [], ("branch", frame.loc, which)))
        else:  # pragma: no cover - every task code is handled above
            raise AssertionError(f"unknown task {code}")
    if len(values) != 1:  # pragma: no cover - the machine's own invariant
        raise AssertionError(f"interpreter finished with {len(values)} values")
    return values[0]


def _value_key(values: Sequence[Value]) -> tuple[Any, ...]:
    """A hashable key of runtime values: dtype, shape and bytes of every array, tuples kept as tuples."""
    out: list[Any] = []
    stack: list[Any] = list(reversed(values))
    while stack:
        value = stack.pop()
        if isinstance(value, tuple):
            out.append(("(", len(value)))
            stack.extend(reversed(value))
        else:
            arr = np.asarray(value)
            out.append((arr.dtype.str, arr.shape, arr.tobytes()))
    return tuple(out)


def _pop(values: list[Value], n: int) -> list[Value]:
    if n == 0:
        return []
    out = values[-n:]
    del values[-n:]
    return out


def _call_op(call: relax.Call, args: list[Value], frame: _Frame) -> Value:
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
    """Run a PrimFunc called from a Function with the call_tir convention (module docstring)."""
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
    inputs: list[Any] = []
    for k, arg in enumerate(args):
        if isinstance(arg, tuple) or not isinstance(arg, (np.ndarray, np.generic)):
            raise frame.error(f"call of PrimFunc @{gname}: argument {k} is {_describe(arg)}, not an array")
        param = params[k]
        if isinstance(param, tir.Buffer):
            inputs.append(np.array(arg, copy=True))
        else:
            if np.ndim(arg) != 0:
                raise frame.error(
                    f"call of PrimFunc @{gname}: argument {k} for scalar parameter {param.name_hint} must be 0-d, "
                    f"got {_describe(arg)}"
                )
            inputs.append(np.asarray(arg)[()])
    try:
        buffers = _run_prim(callee, gname, inputs, allocate_outputs=True)
    except InterpreterError as exc:
        raise frame.error(f"call of PrimFunc @{gname} failed: {exc}", type(exc)) from exc
    n_in_buffers = sum(1 for p in params[: len(args)] if isinstance(p, tir.Buffer))
    outputs = buffers[n_in_buffers:]
    for out in outputs:
        out.flags.writeable = False
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


# ====================================================================== loop-level functions

# Statement task codes of the loop-level machine.
_S_STMT, _S_FOR, _S_RESTORE_VAR, _S_RESTORE_BUF = range(4)


def _vector_dtype(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"{value.dtype}x{value.shape[0]}"
    return str(value.dtype)


def _same_dtype(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return bool(a.dtype == b.dtype and a.shape == b.shape)
    return True


def _element_dtype(dtype: str) -> np.dtype[Any]:
    return np.dtype(element_dtype(dtype))


def _float_floordiv(a: Any, b: Any) -> Any:
    return np.floor(a / b)


def _float_floormod(a: Any, b: Any) -> Any:
    return a - np.floor(a / b) * b


def _sigmoid(x: Any) -> Any:
    one = x.dtype.type(1)
    return one / (one + np.exp(-x))


def _rsqrt(x: Any) -> Any:
    return x.dtype.type(1) / np.sqrt(x)


#: Implementations of :data:`~parpass.ir.well_formed.INTRINSICS`, on numpy scalars or lane arrays.
_INTRINSIC_IMPL: dict[str, Callable[..., Any]] = {
    "exp": np.exp,
    "exp2": np.exp2,
    "log": np.log,
    "log2": np.log2,
    "log10": np.log10,
    "sqrt": np.sqrt,
    "rsqrt": _rsqrt,
    "tanh": np.tanh,
    "sin": np.sin,
    "cos": np.cos,
    "fabs": np.abs,
    "abs": np.abs,
    "floor": np.floor,
    "ceil": np.ceil,
    "round": np.rint,
    "trunc": np.trunc,
    "sigmoid": _sigmoid,
    "pow": np.power,
}
assert set(_INTRINSIC_IMPL) == set(INTRINSICS), "every known intrinsic needs an implementation"

_COMPARE: dict[type, Callable[..., Any]] = {
    tir.EQ: np.equal,
    tir.NE: np.not_equal,
    tir.LT: np.less,
    tir.LE: np.less_equal,
    tir.GT: np.greater,
    tir.GE: np.greater_equal,
}
_ARITH: dict[type, Callable[..., Any]] = {
    tir.Add: np.add,
    tir.Sub: np.subtract,
    tir.Mul: np.multiply,
    tir.Min: np.minimum,
    tir.Max: np.maximum,
}


def _expr_children(node: Any) -> tuple[Any, ...]:
    """The operand expressions of a PrimExpr (none for anything else, e.g. in ill-formed IR)."""
    return tir.operands(node) if isinstance(node, tir.PrimExprBase) else ()


_LEAVES = (tir.IntImm, tir.FloatImm, tir.Var)


class _TirMachine:
    """Runs one PrimFunc: scalar environment, buffer memory and an explicit statement stack."""

    def __init__(self, func: tir.PrimFunc, name: str) -> None:
        self.func = func
        self.name = name
        self.env: dict[int, Any] = {}
        self.memory: dict[int, np.ndarray] = {}
        self.layouts: dict[int, tuple[tir.Buffer, tuple[int, ...]]] = {}
        self.loc: Any = None
        self.stmt: Any = None

    # ------------------------------------------------------------ errors

    def error(self, message: str, cls: type[InterpreterError] = InterpreterError) -> InterpreterError:
        return cls(f"in PrimFunc {self.name!r}{self._place()}: {message}")

    def _place(self) -> str:
        parts: list[str] = []
        if self.stmt is not None:
            parts.append(_stmt_label(self.stmt))
        loc = self.loc
        while loc is not None:
            parent, container, k = loc
            parts.append(_container_label(container, k))
            loc = parent
        return ", at " + " > ".join(reversed(parts)) if parts else ""

    # ------------------------------------------------------------ expressions

    def eval(self, root: Any) -> Any:
        """The value of PrimExpr ``root``: post-order on an explicit stack, memoized per node."""
        if isinstance(root, _LEAVES):
            return self._leaf(root)
        memo: dict[int, Any] = {}
        stack = [root]
        while stack:
            node = stack[-1]
            key = id(node)
            if key in memo:
                stack.pop()
                continue
            if isinstance(node, _LEAVES):
                memo[key] = self._leaf(node)
                stack.pop()
                continue
            kids = _expr_children(node)
            pending = [k for k in kids if id(k) not in memo]
            if pending:
                stack.extend(reversed(pending))
                continue
            stack.pop()
            memo[key] = self._compute(node, [memo[id(k)] for k in kids])
        return memo[id(root)]

    def _leaf(self, node: Any) -> Any:
        kind = type(node)
        if kind is tir.Var:
            value = self.env.get(node.vid, _MISSING)
            if value is _MISSING:
                raise self.error(
                    f"variable {node.name_hint} (vid {node.vid}) is used outside the scope of its definition"
                )
            return value
        try:
            return _element_dtype(node.dtype).type(node.value)
        except (OverflowError, ValueError, TypeError) as exc:
            raise self.error(f"immediate {node.value!r} does not fit dtype {node.dtype!r}: {exc}") from None

    def _compute(self, node: Any, vals: list[Any]) -> Any:
        kind = type(node)
        fn = _ARITH.get(kind)
        if fn is not None:
            a, b = vals
            self._check_same(node, a, b)
            return fn(a, b)
        fn = _COMPARE.get(kind)
        if fn is not None:
            a, b = vals
            self._check_same(node, a, b)
            return fn(a, b)
        if kind is tir.FloorDiv or kind is tir.FloorMod:
            a, b = vals
            self._check_same(node, a, b)
            if np.any(b == 0):
                raise self.error(
                    f"{kind.__name__} by zero ({_show(a)} {'//' if kind is tir.FloorDiv else '%'} 0)",
                    DivisionByZeroError,
                )
            if a.dtype.kind == "f":
                return _float_floordiv(a, b) if kind is tir.FloorDiv else _float_floormod(a, b)
            return np.floor_divide(a, b) if kind is tir.FloorDiv else np.remainder(a, b)
        if kind is tir.And or kind is tir.Or:
            a, b = vals
            self._check_same(node, a, b)
            self._check_bool(node, a)
            return np.logical_and(a, b) if kind is tir.And else np.logical_or(a, b)
        if kind is tir.Not:
            self._check_bool(node, vals[0])
            return np.logical_not(vals[0])
        if kind is tir.BufferLoad:
            return self._load(node, vals)
        if kind is tir.Select:
            cond, t, f = vals
            self._check_same(node, t, f)
            self._check_bool(node, cond)
            if isinstance(cond, np.ndarray) or isinstance(t, np.ndarray):
                if np.shape(cond) != np.shape(t) and np.ndim(cond) != 0:
                    raise self.error(
                        f"Select condition has {_vector_dtype(cond)} lanes but values are {_vector_dtype(t)}"
                    )
                return np.where(cond, t, f).astype(t.dtype)
            return t if cond else f
        if kind is tir.Cast:
            return vals[0].astype(_element_dtype(node.dtype))
        if kind is tir.Ramp:
            base, stride = vals
            self._check_same(node, base, stride)
            if isinstance(base, np.ndarray):
                raise self.error(f"Ramp base must be a scalar, got {_vector_dtype(base)}")
            if node.lanes < 1:
                raise self.error(f"Ramp lanes must be positive, got {node.lanes}")
            lanes = np.arange(node.lanes).astype(base.dtype)
            return (base + stride * lanes).astype(base.dtype)
        if kind is tir.Broadcast:
            if node.lanes < 1:
                raise self.error(f"Broadcast lanes must be positive, got {node.lanes}")
            value = vals[0]
            if isinstance(value, np.ndarray):
                return np.tile(value, node.lanes)
            return np.full(node.lanes, value, dtype=value.dtype)
        if kind is tir.Call:
            return self._intrinsic(node, vals)
        raise self.error(f"cannot evaluate a {kind.__name__} node as an expression")

    def _check_same(self, node: Any, a: Any, b: Any) -> None:
        if not _same_dtype(a, b):
            raise self.error(
                f"operands of {type(node).__name__} have different dtypes: {_vector_dtype(a)} and {_vector_dtype(b)}"
            )

    def _check_bool(self, node: Any, value: Any) -> None:
        if value.dtype != np.bool_:
            raise self.error(f"{type(node).__name__} needs a bool operand, got {_vector_dtype(value)}")

    def _intrinsic(self, node: tir.Call, vals: list[Any]) -> Any:
        arity = INTRINSICS.get(node.op)
        if arity is None:
            raise self.error(f"unknown intrinsic {node.op!r}; known: {', '.join(sorted(INTRINSICS))}")
        if len(vals) != arity:
            raise self.error(f"intrinsic {node.op!r} takes {arity} argument(s), got {len(vals)}")
        want = node.dtype
        for k, v in enumerate(vals):
            if _vector_dtype(v) != want:
                raise self.error(f"argument {k} of intrinsic {node.op!r} is {_vector_dtype(v)}, the call is {want}")
        out = _INTRINSIC_IMPL[node.op](*vals)
        return out.astype(_element_dtype(want))

    # ------------------------------------------------------------ memory

    def strides_of(self, buffer: tir.Buffer) -> tuple[int, ...]:
        """Element strides of ``buffer``: its ``strides``, or row-major ones from its ``shape``."""
        cached = self.layouts.get(id(buffer))
        if cached is not None and cached[0] is buffer:
            return cached[1]
        constant = all(type(e) is tir.IntImm for e in buffer.shape) and all(
            type(e) is tir.IntImm for e in buffer.strides
        )
        if buffer.strides:
            strides = tuple(self._int(e, f"stride {k} of buffer {buffer.name}") for k, e in enumerate(buffer.strides))
            if len(strides) != len(buffer.shape):
                raise self.error(f"buffer {buffer.name} has {len(buffer.shape)} dimensions but {len(strides)} strides")
        else:
            shape = self.shape_of(buffer)
            acc = 1
            rev: list[int] = []
            for dim in reversed(shape):
                rev.append(acc)
                acc *= dim
            strides = tuple(reversed(rev))
        if constant:
            self.layouts[id(buffer)] = (buffer, strides)
        return strides

    def shape_of(self, buffer: tir.Buffer) -> tuple[int, ...]:
        shape = tuple(self._int(e, f"dimension {k} of buffer {buffer.name}") for k, e in enumerate(buffer.shape))
        for k, dim in enumerate(shape):
            if dim < 0:
                raise self.error(f"dimension {k} of buffer {buffer.name} is negative ({dim})")
        return shape

    def memory_size(self, buffer: tir.Buffer) -> int:
        """Elements of memory ``buffer`` needs: its shape's product, or the extent its strides reach."""
        shape = self.shape_of(buffer)
        if any(d == 0 for d in shape):
            return 0
        if not buffer.strides:
            size = 1
            for d in shape:
                size *= d
            return size
        strides = self.strides_of(buffer)
        if any(s < 0 for s in strides):
            raise self.error(f"buffer {buffer.name} has negative strides {strides}")
        return 1 + sum((d - 1) * s for d, s in zip(shape, strides, strict=True))

    def _int(self, expr: Any, what: str) -> int:
        value = self.eval(expr)
        if isinstance(value, np.ndarray) or value.dtype.kind not in "iu":
            raise self.error(f"{what} must be an integer scalar, got {_vector_dtype(value)}")
        return int(value)

    def _offsets(self, buffer: tir.Buffer, indices: Sequence[Any], access: str) -> Any:
        """The element offset (an int, or an int64 array for a vector access) of ``buffer[indices]``."""
        strides = self.strides_of(buffer)
        if len(indices) != len(strides):
            raise self.error(
                f"{access} of buffer {buffer.name} has {len(indices)} indices but the buffer has "
                f"{len(strides)} dimensions"
            )
        lanes = None
        offset: Any = 0
        for k, (index, stride) in enumerate(zip(indices, strides, strict=True)):
            if index.dtype.kind not in "iu":
                raise self.error(
                    f"index {k} of {access} of buffer {buffer.name} is {_vector_dtype(index)}, not an integer"
                )
            if isinstance(index, np.ndarray):
                if lanes is not None and len(index) != lanes:
                    raise self.error(f"vector indices of {access} of buffer {buffer.name} have different lanes")
                lanes = len(index)
                offset = offset + index.astype(np.int64) * stride
            else:
                offset = offset + int(index) * stride
        memory = self.memory.get(buffer.vid)
        if memory is None:
            raise self.error(
                f"{access} of buffer {buffer.name} (vid {buffer.vid}): the buffer is not a parameter and not "
                f"allocated by an enclosing Allocate"
            )
        if memory.dtype != _element_dtype(buffer.dtype):
            raise self.error(f"{access} of buffer {buffer.name} as {buffer.dtype}, but its memory holds {memory.dtype}")
        size = memory.shape[0]
        low, high = (int(offset.min()), int(offset.max())) if lanes is not None else (offset, offset)
        if lanes == 0 or low < 0 or high >= size:
            shown = ", ".join(_show(i) for i in indices)
            raise self.error(
                f"{access} of buffer {buffer.name}[{shown}] is out of bounds: element offset "
                f"{_show(offset)} outside [0, {size})"
            )
        return offset

    def _load(self, node: tir.BufferLoad, indices: list[Any]) -> Any:
        offset = self._offsets(node.buffer, indices, "load")
        value = self.memory[node.buffer.vid][offset]
        return value.copy() if isinstance(value, np.ndarray) else value

    def _store(self, stmt: tir.BufferStore) -> None:
        value = self.eval(stmt.value)
        indices = [self.eval(i) for i in stmt.indices]
        buffer = stmt.buffer
        offset = self._offsets(buffer, indices, "store")
        if value.dtype != _element_dtype(buffer.dtype):
            raise self.error(
                f"store of a {_vector_dtype(value)} value into buffer {buffer.name} of dtype {buffer.dtype}"
            )
        if isinstance(offset, np.ndarray):
            if not isinstance(value, np.ndarray) or value.shape != offset.shape:
                raise self.error(
                    f"vector store into buffer {buffer.name} writes {offset.shape[0]} lanes but the value is "
                    f"{_vector_dtype(value)}"
                )
        elif isinstance(value, np.ndarray):
            raise self.error(f"store of a {_vector_dtype(value)} vector into buffer {buffer.name} at a scalar index")
        self.memory[buffer.vid][offset] = value

    # ------------------------------------------------------------ statements

    def execute(self, body: Any) -> None:
        """Run statement ``body`` on an explicit stack of statement tasks."""
        tasks: list[tuple[Any, ...]] = [(_S_STMT, body, None)]
        env, memory = self.env, self.memory
        while tasks:
            task = tasks.pop()
            code = task[0]
            if code == _S_STMT:
                stmt, loc = task[1], task[2]
                self.loc, self.stmt = loc, stmt
                kind = type(stmt)
                if kind is tir.BufferStore:
                    self._store(stmt)
                elif kind is tir.SeqStmt:
                    for k in range(len(stmt.seq) - 1, -1, -1):
                        tasks.append((_S_STMT, stmt.seq[k], (loc, stmt, k)))
                elif kind is tir.For:
                    tasks.append(self._start_for(stmt, loc))
                elif kind is tir.IfThenElse:
                    cond = self.eval(stmt.condition)
                    if not isinstance(cond, np.bool_):
                        raise self.error(f"IfThenElse condition must be a bool scalar, got {_vector_dtype(cond)}")
                    if cond:
                        tasks.append((_S_STMT, stmt.then_case, (loc, stmt, "then")))
                    elif stmt.else_case is not None:
                        tasks.append((_S_STMT, stmt.else_case, (loc, stmt, "else")))
                elif kind is tir.LetStmt:
                    value = self.eval(stmt.value)
                    if _vector_dtype(value) != stmt.var.dtype:
                        raise self.error(
                            f"LetStmt binds {stmt.var.name_hint} of dtype {stmt.var.dtype} to a "
                            f"{_vector_dtype(value)} value"
                        )
                    tasks.append((_S_RESTORE_VAR, stmt.var.vid, env.get(stmt.var.vid, _MISSING)))
                    env[stmt.var.vid] = value
                    tasks.append((_S_STMT, stmt.body, (loc, stmt, None)))
                elif kind is tir.Allocate:
                    buffer = stmt.buffer
                    fresh = np.zeros(self.memory_size(buffer), dtype=_element_dtype(buffer.dtype))
                    tasks.append((_S_RESTORE_BUF, buffer.vid, memory.get(buffer.vid)))
                    memory[buffer.vid] = fresh
                    tasks.append((_S_STMT, stmt.body, (loc, stmt, None)))
                elif kind is tir.Evaluate:
                    self.eval(stmt.value)
                else:
                    raise self.error(f"cannot execute a {kind.__name__} node as a statement")
            elif code == _S_FOR:
                _, stmt, loc, i, end, prev = task
                var = stmt.loop_var
                if i < end:
                    env[var.vid] = _element_dtype(var.dtype).type(i)
                    tasks.append((_S_FOR, stmt, loc, i + 1, end, prev))
                    tasks.append((_S_STMT, stmt.body, (loc, stmt, None)))
                elif prev is _MISSING:
                    env.pop(var.vid, None)
                else:
                    env[var.vid] = prev
            elif code == _S_RESTORE_VAR:
                _, vid, prev = task
                if prev is _MISSING:
                    env.pop(vid, None)
                else:
                    env[vid] = prev
            else:  # _S_RESTORE_BUF
                _, vid, prev = task
                if prev is None:
                    memory.pop(vid, None)
                else:
                    memory[vid] = prev

    def _start_for(self, stmt: tir.For, loc: Any) -> tuple[Any, ...]:
        var = stmt.loop_var
        try:
            tir.ForKind(stmt.kind)
        except ValueError:
            raise self.error(f"For {var.name_hint} has an invalid kind {stmt.kind!r}") from None
        lo = self.eval(stmt.min)
        extent = self.eval(stmt.extent)
        for what, value in (("min", lo), ("extent", extent)):
            if _vector_dtype(value) != var.dtype:
                raise self.error(
                    f"For {var.name_hint}: loop variable is {var.dtype} but {what} is {_vector_dtype(value)}"
                )
        if element_dtype(var.dtype) not in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
            raise self.error(f"For {var.name_hint}: loop variable must be an integer, got {var.dtype}")
        start = int(lo)
        return (_S_FOR, stmt, loc, start, start + int(extent), self.env.get(var.vid, _MISSING))


def _show(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return "[" + ", ".join(str(v) for v in value.tolist()) + "]"
    if isinstance(value, np.generic):
        return str(value.item())
    return str(value)


def _stmt_label(stmt: Any) -> str:
    kind = type(stmt)
    if kind is tir.For:
        return f"For {stmt.loop_var.name_hint}"
    if kind is tir.BufferStore:
        return f"BufferStore {stmt.buffer.name}"
    if kind is tir.LetStmt:
        return f"LetStmt {stmt.var.name_hint}"
    if kind is tir.Allocate:
        return f"Allocate {stmt.buffer.name}"
    return kind.__name__


def _container_label(container: Any, k: Any) -> str:
    if type(container) is tir.SeqStmt:
        return f"SeqStmt[{k}]"
    if type(container) is tir.IfThenElse:
        return f"IfThenElse ({k})"
    return _stmt_label(container)


def _scalar_arg(value: Any, var: tir.Var, k: int, name: str) -> Any:
    """A scalar argument converted to a numpy scalar of ``var``'s dtype."""
    want = _element_dtype(var.dtype)
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, np.generic):
        if value.dtype != want:
            raise ArgumentError(
                f"PrimFunc {name!r}: argument {k} ({var.name_hint}) must be a {var.dtype} scalar, "
                f"got {_describe(value)}"
            )
        return value
    if not isinstance(value, (bool, int, float)):
        raise ArgumentError(
            f"PrimFunc {name!r}: argument {k} ({var.name_hint}) must be a {var.dtype} scalar, got {_describe(value)}"
        )
    if isinstance(value, float) and want.kind in "biu":
        raise ArgumentError(
            f"PrimFunc {name!r}: argument {k} ({var.name_hint}) is {var.dtype}, got the float {value!r}"
        )
    try:
        return want.type(value)
    except (OverflowError, ValueError) as exc:
        raise ArgumentError(
            f"PrimFunc {name!r}: argument {k} ({var.name_hint}) = {value!r} does not fit {var.dtype}"
        ) from exc


def _grid(shape: tuple[int, ...], strides: tuple[int, ...]) -> Any:
    """Element offsets of every index of ``shape`` under ``strides``, as an int64 array of ``shape``."""
    offsets = np.zeros(shape, dtype=np.int64)
    for axis, (dim, stride) in enumerate(zip(shape, strides, strict=True)):
        view = [1] * len(shape)
        view[axis] = dim
        offsets = offsets + np.arange(dim, dtype=np.int64).reshape(view) * stride
    return offsets


def _run_prim(func: tir.PrimFunc, name: str, args: Sequence[Any], allocate_outputs: bool = False) -> list[np.ndarray]:
    """Run ``func`` on ``args``; return its buffer arrays (params order), updated in place.

    With ``allocate_outputs``, parameters past ``len(args)`` get zeroed arrays of their
    declared shape (the dataflow call convention).
    """
    params = func.params
    if len(args) != len(params) and not (allocate_outputs and len(args) <= len(params)):
        shown = ", ".join(p.name if isinstance(p, tir.Buffer) else p.name_hint for p in params)
        raise ArgumentError(f"PrimFunc {name!r} takes {len(params)} argument(s) ({shown}), got {len(args)}")
    machine = _TirMachine(func, name)
    seen: dict[int, int] = {}
    for k, param in enumerate(params):
        if param.vid in seen:
            raise ArgumentError(
                f"PrimFunc {name!r}: parameters {seen[param.vid]} and {k} have the same vid {param.vid}"
            )
        seen[param.vid] = k
        if isinstance(param, tir.Var):
            if k >= len(args):
                raise ArgumentError(f"PrimFunc {name!r}: no argument for scalar parameter {k} ({param.name_hint})")
            machine.env[param.vid] = _scalar_arg(args[k], param, k, name)
        elif not isinstance(param, tir.Buffer):
            raise ArgumentError(f"PrimFunc {name!r}: parameter {k} is a {type(param).__name__}, not a Var or Buffer")
    arrays: list[np.ndarray] = []
    layouts: list[tuple[np.ndarray, Any, int]] = []  # (user array, offset grid or None, vid)
    with np.errstate(all="ignore"):
        for k, param in enumerate(params):
            if not isinstance(param, tir.Buffer):
                continue
            try:
                shape = machine.shape_of(param)
                size = machine.memory_size(param)
                strides = machine.strides_of(param) if param.strides else None
            except InterpreterError as exc:
                raise ArgumentError(f"PrimFunc {name!r}: cannot lay out parameter {k} ({param.name}): {exc}") from exc
            dtype = _element_dtype(param.dtype)
            if k >= len(args):
                arr = np.zeros(shape, dtype=dtype)
            else:
                arr = args[k]
                if not isinstance(arr, np.ndarray):
                    raise ArgumentError(
                        f"PrimFunc {name!r}: argument {k} ({param.name}) must be a numpy array of shape {shape} "
                        f"and dtype {param.dtype}, got {_describe(arr)}"
                    )
                if arr.dtype != dtype or tuple(arr.shape) != shape:
                    raise ArgumentError(
                        f"PrimFunc {name!r}: argument {k} ({param.name}) must have shape {shape} and dtype "
                        f"{param.dtype}, got {_describe(arr)}"
                    )
            if strides is None:
                memory = np.array(arr, dtype=dtype, copy=True).reshape(-1)
                grid = None
            else:
                grid = _grid(shape, strides)
                memory = np.zeros(size, dtype=dtype)
                memory[grid.reshape(-1)] = arr.reshape(-1)
            machine.memory[param.vid] = memory
            arrays.append(arr)
            layouts.append((arr, grid, param.vid))
        machine.execute(func.body)
    # Copy the results back only after a successful run: a failing run leaves the arguments as they were.
    for arr, grid, vid in layouts:
        memory = machine.memory[vid]
        result = memory.reshape(arr.shape) if grid is None else memory[grid]
        if arr.flags.writeable:
            arr[...] = result
        elif not np.array_equal(arr, result, equal_nan=arr.dtype.kind in "fc"):
            raise ArgumentError(f"PrimFunc {name!r} wrote to a buffer whose array is read-only")
    return arrays


def run_prim_func(func_or_mod: tir.PrimFunc | IRModule, *args: Any, name: str | None = None) -> tuple[np.ndarray, ...]:
    """Run a PrimFunc on positional ``args`` and return its buffer arrays, updated in place.

    ``func_or_mod`` is a :class:`~parpass.ir.PrimFunc`, or an :class:`IRModule` with
    ``name`` naming one. Buffer arguments are numpy arrays of the declared shape and
    dtype (a buffer with ``strides`` is laid out in fresh memory with those element
    strides); scalar arguments are Python numbers or numpy scalars of the dtype.
    The arrays are written only if the run succeeds.
    """
    if isinstance(func_or_mod, IRModule):
        if name is None:
            raise TypeError("run_prim_func on an IRModule needs name=")
        func = _lookup(func_or_mod, name, "in the module given to run_prim_func")
        label = name
    else:
        func = func_or_mod
        label = name or str(func.attrs.get("global_symbol", "<PrimFunc>"))
    if not isinstance(func, tir.PrimFunc):
        raise TypeError(f"{label!r} is a {type(func).__name__}, not a PrimFunc")
    return tuple(_run_prim(func, label, args))


def run(mod: IRModule, name: str, *args: Any, memoize: bool = True) -> Value:
    """Run function ``name`` of ``mod`` whatever its kind (same as :func:`run_function`)."""
    return run_function(mod, name, *args, memoize=memoize)


# ====================================================================== inputs and comparison


def _random_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: str, scalar_int: bool = False) -> Any:
    """Deterministic values: floats in [-2, 2), ints in [-8, 8] ([1, 8] for loop-level scalars), bools."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind == "u":
        return rng.integers(0, 16, size=shape).astype(dt)
    if dt.kind == "i":
        low = 1 if scalar_int else -8
        return rng.integers(low, 9, size=shape).astype(dt)
    if dt.kind == "f":
        return rng.uniform(-2.0, 2.0, size=shape).astype(dt)
    raise ValueError(f"random_inputs: unsupported dtype {dtype!r}")


def random_inputs(func: BaseFunc, seed: int = 0) -> list[Any]:
    """Deterministic random arguments for ``func`` (same seed, same values on every machine).

    For a :class:`~parpass.ir.Function`: one value per parameter (arrays; tuples for
    tuple types; 0-d arrays for ``PrimType``). For a :class:`~parpass.ir.PrimFunc`:
    a Python number per scalar parameter (integers in [1, 8], so they are safe as
    extents and divisors) and an array per buffer (its shape evaluated with those
    scalars). Floats are in [-2, 2), integers in [-8, 8], unsigned in [0, 16).
    """
    rng = np.random.default_rng(seed)
    if isinstance(func, relax.Function):
        out: list[Any] = []
        for fparam in func.params:
            out.append(_random_value(rng, fparam.ty))
        return out
    if isinstance(func, tir.PrimFunc):
        machine = _TirMachine(func, "<random_inputs>")
        values: list[Any] = [None] * len(func.params)
        for k, param in enumerate(func.params):
            if isinstance(param, tir.Var):
                scalar = _random_array(rng, (), param.dtype, scalar_int=True)[()]
                machine.env[param.vid] = scalar
                values[k] = scalar.item()
        for k, param in enumerate(func.params):
            if isinstance(param, tir.Buffer):
                values[k] = _random_array(rng, machine.shape_of(param), param.dtype)
        return values
    raise TypeError(f"random_inputs expects a Function or PrimFunc, got {type(func).__name__}")


def _random_value(rng: np.random.Generator, ty: Type) -> Any:
    out: list[Any] = [None]
    stack: list[tuple[Type, list[Any], int]] = [(ty, out, 0)]
    while stack:
        t, holder, slot = stack.pop()
        if isinstance(t, TupleType):
            fields: list[Any] = [None] * len(t.fields)
            holder[slot] = fields
            # Fields in order, so the draws do not depend on stack order.
            for k in range(len(t.fields) - 1, -1, -1):
                stack.append((t.fields[k], fields, k))
        elif isinstance(t, TensorType):
            holder[slot] = _random_array(rng, tuple(t.shape), t.dtype)
        elif isinstance(t, PrimType):
            holder[slot] = np.asarray(_random_array(rng, (), t.dtype))
        else:
            raise TypeError(f"random_inputs: parameter type {format_type(t)} is not a type")
    return _freeze(out[0])


def _copy_value(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_copy_value(v) for v in value)  # tuple parameters are shallow
    if isinstance(value, np.ndarray):
        return value.copy()
    return value


def _first_difference(name: str, before: Any, after: Any, rtol: float, atol: float) -> str | None:
    """A description of the first place where ``before`` and ``after`` differ, or None."""
    stack: list[tuple[Any, Any, str]] = [(before, after, "")]
    while stack:
        a, b, path = stack.pop()
        where = f"function {name!r}: output{path}"
        if isinstance(a, tuple) or isinstance(b, tuple):
            if not (isinstance(a, tuple) and isinstance(b, tuple)) or len(a) != len(b):
                return f"{where}: before is {_describe(a)}, after is {_describe(b)}"
            for k in range(len(a) - 1, -1, -1):
                stack.append((a[k], b[k], f"{path}[{k}]"))
            continue
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype != b.dtype:
            return f"{where}: dtype {a.dtype} before, {b.dtype} after"
        if a.shape != b.shape:
            if a.size == b.size:  # a flattened buffer: the same memory in another shape
                a, b = a.reshape(-1), b.reshape(-1)
            else:
                return f"{where}: shape {a.shape} before, {b.shape} after"
        floating = a.dtype.kind in "fc"
        if (rtol == 0 and atol == 0) or not floating:
            same = a == b
            if floating:
                same |= np.isnan(a) & np.isnan(b)
        else:
            same = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
        if not np.all(same):
            bad = np.argwhere(~np.asarray(same))
            first = tuple(int(i) for i in bad[0])
            text = (
                f"{where}: {len(bad)} of {a.size} element(s) differ; first at index {first}: "
                f"before {a[first]!r}, after {b[first]!r}"
            )
            if floating:
                with np.errstate(all="ignore"):
                    diff = np.nanmax(np.abs(a.astype(np.float64) - b.astype(np.float64)))
                text += f"; max abs difference {diff!r}"
            if rtol or atol:
                text += f" (rtol={rtol}, atol={atol})"
            return text
    return None


class Reference(NamedTuple):
    """What a function computes on its :func:`random_inputs`: the inputs, and the outputs before any pass."""

    kind: type[BaseFunc]
    inputs: list[Any]
    outputs: Value


def reference_run(mod: IRModule, name: str, seed: int = 0) -> Reference:
    """Run function ``name`` of ``mod`` on its :func:`random_inputs` for ``seed``, keeping inputs and outputs.

    Raises :class:`InterpreterError` when the function fails on those inputs.
    """
    func = _lookup(mod, name, "in the module")
    inputs = random_inputs(func, seed)
    return Reference(type(func), inputs, run_function(mod, name, *[_copy_value(v) for v in inputs]))


def meaning_difference(
    ref: Reference, after: IRModule, name: str, rtol: float = 0.0, atol: float = 0.0, seed: int = 0
) -> str | None:
    """How function ``name`` of ``after`` departs from ``ref`` (what it computed before), or None.

    The rules of :func:`assert_same_meaning`; ``seed`` only names the inputs in the message.
    """
    f_after = _lookup(after, name, "in the module after the pass")
    if type(f_after) is not ref.kind:
        return _kind_change(name, ref.kind, type(f_after))
    after_inputs = [_copy_value(v) for v in ref.inputs]
    if isinstance(f_after, tir.PrimFunc):
        after_inputs = _adapt_buffers(f_after, after_inputs)
    try:
        out_after = run_function(after, name, *after_inputs)
    except InterpreterError as exc:
        return f"function {name!r} runs before the pass but fails after it (seed {seed}): {exc}"
    problem = _first_difference(name, ref.outputs, out_after, rtol, atol)
    return None if problem is None else f"meaning changed (seed {seed}): {problem}"


def assert_same_meaning(
    before: IRModule,
    after: IRModule,
    name: str | None = None,
    seed: int = 0,
    rtol: float = 0.0,
    atol: float = 0.0,
    *,
    allow_failing_before: bool = False,
) -> list[str]:
    """Assert that function ``name`` computes the same in ``before`` and ``after``.

    Both run (in the interpreter) on copies of :func:`random_inputs` of ``before``'s
    function for ``seed``; outputs (for a PrimFunc, every buffer after the run) must
    be equal: exactly by default (NaN equals NaN), or within ``rtol``/``atol`` for
    floating-point outputs when a pass may reassociate arithmetic. A buffer whose
    shape changed but not its size (a flattened buffer) is compared element by
    element in memory order; its input is reshaped the same way.

    ``name=None`` checks every function of ``before`` that is still in ``after``.
    If ``before`` itself fails on the inputs, this raises an AssertionError saying
    so, unless ``allow_failing_before`` (then the function is skipped: a failing
    program has no meaning to preserve). Returns the names compared.
    """
    names = [name] if name is not None else [n for n in before.names() if n in after]
    compared: list[str] = []
    for fname in names:
        f_before = _lookup(before, fname, "in the module before the pass")
        f_after = _lookup(after, fname, "in the module after the pass")
        if type(f_before) is not type(f_after):
            raise AssertionError(_kind_change(fname, type(f_before), type(f_after)))
        try:
            ref = reference_run(before, fname, seed)
        except InterpreterError as exc:
            if allow_failing_before:
                continue
            raise AssertionError(
                f"function {fname!r} fails before the pass on the inputs of seed {seed}, so its meaning cannot be "
                f"compared: {exc}"
            ) from exc
        problem = meaning_difference(ref, after, fname, rtol, atol, seed)
        if problem is not None:
            raise AssertionError(problem)
        compared.append(fname)
    return compared


def _kind_change(name: str, before: type[BaseFunc], after: type[BaseFunc]) -> str:
    return f"function {name!r} is a {before.__name__} before and a {after.__name__} after"


def _adapt_buffers(func: tir.PrimFunc, inputs: list[Any]) -> list[Any]:
    """Reshape array inputs to ``func``'s buffer shapes where only the shape (not the size) differs."""
    if len(inputs) != len(func.params):
        return inputs
    machine = _TirMachine(func, "<assert_same_meaning>")
    for param, value in zip(func.params, inputs, strict=True):
        if isinstance(param, tir.Var) and isinstance(value, (bool, int, float, np.generic)):
            machine.env[param.vid] = _element_dtype(param.dtype).type(value)
    out = list(inputs)
    for k, (param, value) in enumerate(zip(func.params, inputs, strict=True)):
        if isinstance(param, tir.Buffer) and isinstance(value, np.ndarray):
            try:
                shape = machine.shape_of(param)
            except InterpreterError:
                continue
            if shape != value.shape and int(np.prod(shape)) == value.size:
                out[k] = value.reshape(shape).copy()
    return out
