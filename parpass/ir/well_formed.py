"""Well-formedness: the structural rules every pass must keep (TVM's ``WellFormed``).

:func:`well_formed` returns the problems it finds (an empty list when there are
none); :func:`check_well_formed` raises :class:`~parpass.errors.IRError` listing
them. Both take an :class:`~parpass.ir.IRModule` or a single function. Each
message names the function, the place and what is wrong.

Dataflow functions (:class:`~parpass.ir.Function`):

- every variable is defined before it is used: parameters, then bindings in
  order; the bindings of an ``If`` branch are visible only inside that branch;
- no two definitions (parameters, bindings, nested ones included) share a ``vid``;
- calls name a registered op or a function of the module, with the right arity;
- types are consistent: a binding's ``ty``, when present, equals the type the
  op registry's ``infer_type`` gives for the call (from the known types of its
  arguments); a call of a module ``Function`` passes arguments of its parameter
  types (and has the type of its ``ret_type``); a call of a ``PrimFunc`` follows
  the destination-passing convention of :mod:`parpass.testing.interpreter`; an
  ``If`` condition is a ``bool`` scalar and both branches have the same type;
  ``TupleGetItem`` projects a tuple with an index in range; ``ret_type``, when
  present, is the type of the body.

Loop-level functions (:class:`~parpass.ir.PrimFunc`):

- scalar variables are in scope where used: parameters everywhere, a loop
  variable in its loop's body, a ``LetStmt`` variable in its body; a use has the
  dtype of the definition;
- no two definitions (parameters, loop and let variables, allocated buffers)
  share a ``vid``;
- every buffer accessed by ``BufferLoad``/``BufferStore`` is a parameter or
  allocated by an enclosing ``Allocate``, and the accessing ``Buffer`` node equals
  that declaration; accesses have one index per dimension, integer indices, at
  most one vector width;
- dtypes are consistent: operands of binary operators have equal dtypes (lanes
  included), conditions are ``bool``, a stored value has the buffer's dtype (or a
  vector of it as wide as the vector index), a loop variable has the dtype of
  ``min`` and ``extent``, a let variable the dtype of its value, intrinsic calls
  name a known intrinsic (:data:`INTRINSICS`) with the right arity and arguments
  of the call's dtype;
- every ``For`` has a valid :class:`~parpass.ir.tir.ForKind`.

Both kinds: every integer fits in 64 bits and every string is UTF-8 (no lone
surrogate), or the function could be neither saved nor shipped to a worker.

The checker walks with explicit stacks (deep IR is fine) and takes time linear in
the size of the IR, so it can run before and after every pass of a pipeline.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from parpass.errors import IRError, not_found
from parpass.ir import relax, tir
from parpass.ir.builtin_ops import DTYPES, format_type
from parpass.ir.dtype import split_vector, vector_dtype
from parpass.ir.module import IRModule
from parpass.ir.node import BaseFunc, GlobalVar, Op
from parpass.ir.op import get_op
from parpass.ir.serialization import encoding_problem, node_problem
from parpass.ir.types import PrimType, TensorType, TupleType

__all__ = ["INTRINSICS", "check_well_formed", "format_problems", "function_problems", "well_formed"]

#: Intrinsics a loop-level ``Call`` may name, with their arity. The reference
#: interpreter implements exactly these; all are pure and dtype-preserving.
INTRINSICS: dict[str, int] = {
    "exp": 1,
    "exp2": 1,
    "log": 1,
    "log2": 1,
    "log10": 1,
    "sqrt": 1,
    "rsqrt": 1,
    "tanh": 1,
    "sin": 1,
    "cos": 1,
    "fabs": 1,
    "abs": 1,
    "floor": 1,
    "ceil": 1,
    "round": 1,
    "trunc": 1,
    "sigmoid": 1,
    "pow": 2,
}

_DTYPES = frozenset(DTYPES)
_INT_DTYPES = frozenset(d for d in DTYPES if d.startswith(("int", "uint")))
_INT_RANGES: dict[str, tuple[int, int]] = {d: (int(np.iinfo(d).min), int(np.iinfo(d).max)) for d in _INT_DTYPES} | {
    "bool": (0, 1)
}
_FOR_KINDS = frozenset(k.value for k in tir.ForKind)
_MAX_LISTED = 50


def well_formed(
    x: IRModule | BaseFunc, mod: IRModule | None = None, name: str | None = None, *, check_types: bool = True
) -> list[str]:
    """The well-formedness problems of ``x`` (a module or one function); empty if there are none.

    For a single function, ``mod`` (when given) is the module its calls refer to;
    without it, calls of module functions are not checked. ``name`` is the
    function's name in messages. ``check_types=False`` (TVM's ``check_ty=False``)
    leaves out the type checks of dataflow Functions: no type is inferred or
    compared, so only structural problems (scopes, ids, callees, arity) and
    annotations that are not valid types are reported.
    """
    problems: list[str] = []
    if isinstance(x, IRModule):
        for gv, func in x.items():
            _check_function(func, gv.name_hint, x, problems, check_types)
    elif isinstance(x, BaseFunc):
        label = name or str(x.attrs.get("global_symbol", "<function>"))
        _check_function(x, label, mod, problems, check_types)
    else:
        raise TypeError(f"well_formed expects an IRModule, Function or PrimFunc, got {type(x).__name__}")
    return problems


def check_well_formed(
    x: IRModule | BaseFunc, mod: IRModule | None = None, name: str | None = None, *, check_types: bool = True
) -> None:
    """Raise :class:`~parpass.errors.IRError` listing the problems of ``x``, if it has any."""
    problems = well_formed(x, mod, name, check_types=check_types)
    if problems:
        raise IRError(format_problems(problems))


def format_problems(problems: list[str], header: str = "ill-formed IR") -> str:
    """``problems`` as one message: a header with the count, one line per problem (at most 50)."""
    shown = problems[:_MAX_LISTED]
    text = f"{header}: {len(problems)} problem(s):\n" + "\n".join(f"  - {p}" for p in shown)
    if len(problems) > len(shown):
        text += f"\n  ... and {len(problems) - len(shown)} more"
    return text


def _check_function(
    func: BaseFunc, name: str, mod: IRModule | None, problems: list[str], check_types: bool = True
) -> tuple[str, ...]:
    """Append the problems of one function to ``problems``; return the module functions it calls."""
    unencodable = _encoding_problem(func, name, mod)
    if unencodable is not None:  # it could be neither saved nor shipped to a worker
        problems.append(f"function {name!r}, {unencodable}")
    if isinstance(func, relax.Function):
        checker = _RelaxChecker(func, name, mod, problems, check_types)
        checker.run()
        return tuple(checker.callees)
    if isinstance(func, tir.PrimFunc):
        _TirChecker(func, name, problems).run()
    else:
        problems.append(f"function {name!r}: a {type(func).__name__} is neither a Function nor a PrimFunc")
    return ()


def _encoding_problem(func: BaseFunc, name: str, mod: IRModule | None) -> str | None:
    """Why ``func`` cannot be encoded, or None; through the module's cached bytes when it holds this very
    function (encoded once: saving or shipping it later costs nothing more)."""
    if mod is None or name not in mod or mod[name] is not func:
        return encoding_problem(func)
    try:
        mod.encoded_function(name)
    except (OverflowError, UnicodeEncodeError):
        return node_problem(func) or "cannot be encoded"
    return None


def function_problems(
    func: BaseFunc, name: str, mod: IRModule | None, *, check_types: bool = True
) -> tuple[list[str], tuple[str, ...]]:
    """The problems of function ``name`` of ``mod``, and the names of the module functions it calls.

    A function's problems depend only on the function and on the functions it
    calls (their signatures), so a caller may cache the result while those stay
    the same objects (as :class:`parpass.instrument.well_formed.WellFormedInstrument` does).
    """
    problems: list[str] = []
    callees = _check_function(func, name, mod, problems, check_types)
    return problems, callees


# ====================================================================== types


def _type_problem(ty: Any) -> str | None:
    """Why ``ty`` is not a valid type, or None."""
    stack = [ty]
    while stack:
        t = stack.pop()
        if isinstance(t, TupleType):
            stack.extend(t.fields)
        elif isinstance(t, TensorType):
            if t.dtype not in _DTYPES:
                return f"type {format_type(ty)} has unknown dtype {t.dtype!r}"
            if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in t.shape):
                return f"type {format_type(ty)} has a shape that is not a tuple of non-negative ints"
        elif isinstance(t, PrimType):
            if t.dtype not in _DTYPES:
                return f"type {format_type(ty)} has unknown dtype {t.dtype!r}"
        else:
            return f"{type(t).__name__} is not a type"
    return None


def _is_bool_scalar(ty: Any) -> bool:
    return (isinstance(ty, PrimType) and ty.dtype == "bool") or (
        isinstance(ty, TensorType) and ty.dtype == "bool" and ty.shape == ()
    )


# ====================================================================== dataflow functions

_EXPR, _BLOCK, _BIND, _END_BLOCK, _CALL, _TUPLE, _GET_ITEM, _IF = range(8)


def _format_loc(loc: Any) -> str:
    """A place chain ``("binding", parent, i, var)`` / ``("branch", parent, which)`` / ... as text."""
    parts: list[str] = []
    while loc is not None:
        tag = loc[0]
        if tag == "binding":
            parts.append(f"binding {loc[2]} (%{_var_name(loc[3])})")
        elif tag == "branch":
            parts.append(f"{loc[2]} branch")
        elif tag == "body":
            parts.append("result expression")
        elif tag == "param":
            parts.append(f"parameter {loc[2]} (%{_var_name(loc[3])})")
        else:
            parts.append("return type")
        loc = loc[1]
    return " > ".join(reversed(parts))


def _var_name(var: Any) -> str:
    return str(getattr(var, "name_hint", "?"))


class _RelaxChecker:
    """Checks one dataflow Function with a task stack and a stack of inferred types."""

    def __init__(
        self, func: relax.Function, name: str, mod: IRModule | None, problems: list[str], check_types: bool = True
    ) -> None:
        self.check_types = check_types  # False: every type is unknown, so no type check fires
        self.func = func
        self.name = name
        self.mod = mod
        self.problems = problems
        self.scope: dict[int, Any] = {}  # vid -> type (None if unknown) of variables in scope
        self.defined: dict[int, Any] = {}  # vid -> place of its definition, for every definition so far
        self.callees: dict[str, None] = {}  # module functions called, in first-call order

    def report(self, loc: Any, message: str) -> None:
        where = _format_loc(loc)
        self.problems.append(f"function {self.name!r}{', ' + where if where else ''}: {message}")

    def define(self, var: Any, ty: Any, loc: Any) -> None:
        if not isinstance(var, relax.Var):
            self.report(loc, f"defines a {type(var).__name__}, not a Var")
            return
        first = self.defined.get(var.vid)
        if first is not None:
            self.report(loc, f"vid {var.vid} is defined twice (first at {_format_loc(first)})")
        else:
            self.defined[var.vid] = loc
        self.scope[var.vid] = ty if self.check_types else None

    def run(self) -> None:
        func = self.func
        for k, param in enumerate(func.params):
            loc = ("param", None, k, getattr(param, "var", None))
            if not isinstance(param, relax.Param):
                self.report(loc, f"is a {type(param).__name__}, not a Param")
                continue
            problem = _type_problem(param.ty)
            if problem is not None:
                self.report(loc, problem)
            self.define(param.var, param.ty if problem is None else None, loc)
        body_ty = self.walk(func.body)
        if func.ret_type is not None:
            problem = _type_problem(func.ret_type)
            if problem is not None:
                self.report(("ret", None), problem)
            elif body_ty is not None and body_ty != func.ret_type:
                self.report(
                    ("ret", None),
                    f"ret_type {format_type(func.ret_type)} differs from the body's type {format_type(body_ty)}",
                )

    def walk(self, body: relax.SeqExpr) -> Any:
        tasks: list[tuple[Any, ...]] = [(_BLOCK, body, 0, None, None)]
        types: list[Any] = []
        while tasks:
            task = tasks.pop()
            code = task[0]
            if code == _EXPR:
                self.expr(task[1], task[2], tasks, types)
            elif code == _BLOCK:
                _, seq, i, scope, parent = task
                if not isinstance(seq, relax.SeqExpr):
                    self.report(parent, f"a block must be a SeqExpr, got {type(seq).__name__}")
                    types.append(None)
                elif i < len(seq.bindings):
                    binding = seq.bindings[i]
                    loc = ("binding", parent, i, getattr(binding, "var", None))
                    tasks.append((_BLOCK, seq, i + 1, scope, parent))
                    if not isinstance(binding, relax.Binding):
                        self.report(loc, f"is a {type(binding).__name__}, not a Binding")
                        continue
                    tasks.append((_BIND, binding, loc, scope))
                    tasks.append((_EXPR, binding.value, loc))
                else:
                    tasks.append((_END_BLOCK, scope))
                    tasks.append((_EXPR, seq.body, ("body", parent)))
            elif code == _BIND:
                _, binding, loc, scope = task
                inferred = types.pop()
                ty = binding.ty
                if ty is not None:
                    problem = _type_problem(ty)
                    if problem is not None:
                        self.report(loc, f"annotated {problem}")
                        ty = None
                    elif inferred is not None and ty != inferred:
                        self.report(
                            loc,
                            f"annotated type {format_type(ty)} differs from the inferred type {format_type(inferred)}",
                        )
                self.define(binding.var, ty if ty is not None else inferred, loc)
                if scope is not None and isinstance(binding.var, relax.Var):
                    scope.append(binding.var.vid)
            elif code == _END_BLOCK:
                scope = task[1]
                if scope:
                    for vid in scope:
                        self.scope.pop(vid, None)
            elif code == _CALL:
                _, call, loc = task
                n = len(call.args)
                arg_types = types[len(types) - n :] if n else []
                if n:
                    del types[-n:]
                result = self.call(call, arg_types, loc)
                types.append(result if self.check_types else None)
            elif code == _TUPLE:
                _, expr, loc = task
                n = len(expr.fields)
                fields = types[len(types) - n :] if n else []
                if n:
                    del types[-n:]
                types.append(TupleType(tuple(fields)) if all(f is not None for f in fields) else None)
            elif code == _GET_ITEM:
                _, expr, loc = task
                types.append(self.get_item(expr, types.pop(), loc))
            else:  # _IF
                _, expr, loc = task
                else_ty = types.pop()
                then_ty = types.pop()
                cond_ty = types.pop()
                if cond_ty is not None and not _is_bool_scalar(cond_ty):
                    self.report(loc, f"If condition must be a bool scalar, got {format_type(cond_ty)}")
                if then_ty is not None and else_ty is not None and then_ty != else_ty:
                    self.report(
                        loc,
                        f"If branches have different types: {format_type(then_ty)} and {format_type(else_ty)}",
                    )
                types.append(then_ty if then_ty == else_ty else None)
        return types[-1] if types else None

    def expr(self, expr: Any, loc: Any, tasks: list[tuple[Any, ...]], types: list[Any]) -> None:
        kind = type(expr)
        if kind is relax.Var:
            if expr.vid in self.scope:
                types.append(self.scope[expr.vid])
                return
            if expr.vid in self.defined:
                self.report(
                    loc,
                    f"%{expr.name_hint} (vid {expr.vid}) is used outside the branch that defines it "
                    f"(at {_format_loc(self.defined[expr.vid])})",
                )
            else:
                self.report(loc, f"%{expr.name_hint} (vid {expr.vid}) is used before it is defined")
            types.append(None)
        elif kind is relax.Constant:
            types.append(self.constant(expr, loc))
        elif kind is relax.Call:
            tasks.append((_CALL, expr, loc))
            for arg in reversed(expr.args):
                tasks.append((_EXPR, arg, loc))
        elif kind is relax.Tuple:
            tasks.append((_TUPLE, expr, loc))
            for field in reversed(expr.fields):
                tasks.append((_EXPR, field, loc))
        elif kind is relax.TupleGetItem:
            tasks.append((_GET_ITEM, expr, loc))
            tasks.append((_EXPR, expr.tuple_value, loc))
        elif kind is relax.If:
            tasks.append((_IF, expr, loc))
            tasks.append((_BLOCK, expr.else_branch, 0, [], ("branch", loc, "else")))
            tasks.append((_BLOCK, expr.then_branch, 0, [], ("branch", loc, "then")))
            tasks.append((_EXPR, expr.cond, loc))
        elif kind is GlobalVar:
            self.report(loc, f"@{expr.name_hint} is used as a value; functions can only be called")
            types.append(None)
        else:
            self.report(loc, f"a {kind.__name__} is not an expression")
            types.append(None)

    def constant(self, const: relax.Constant, loc: Any) -> Any:
        if type(const.data) is not bytes or type(const.shape) is not tuple:
            # a bytearray (or list) could be changed in place, and decoding gives bytes (a tuple) back
            self.report(loc, "constant holds a mutable payload or shape; build it with bytes and a tuple")
        ty = TensorType(tuple(const.shape), const.dtype)
        problem = _type_problem(ty)
        if problem is not None:
            self.report(loc, f"constant of {problem}")
            return None
        size = 1
        for d in const.shape:
            size *= d
        expected = size * np.dtype(const.dtype).itemsize
        if len(const.data) != expected:
            self.report(loc, f"constant of type {format_type(ty)} holds {len(const.data)} bytes, expected {expected}")
        return ty if self.check_types else None

    def call(self, call: relax.Call, arg_types: list[Any], loc: Any) -> Any:
        op = call.op
        known = all(t is not None for t in arg_types)
        if isinstance(op, Op):
            try:
                info = get_op(op.name)
            except KeyError as exc:
                self.report(loc, f"call of an unknown op: {exc}")
                return None
            if info.num_inputs is not None and info.num_inputs != len(call.args):
                self.report(loc, f"op {op.name!r} takes {info.num_inputs} argument(s), got {len(call.args)}")
                return None
            if info.infer_type is None or not known or not self.check_types:
                return None
            try:
                return info.infer_type(arg_types, call.attrs)
            except Exception as exc:
                self.report(loc, f"ill-typed call of op {op.name!r}: {exc}")
                return None
        if not isinstance(op, GlobalVar):
            self.report(loc, f"a call's callee must be an Op or a GlobalVar, got {type(op).__name__}")
            return None
        self.callees[op.name_hint] = None
        if self.mod is None:
            return None
        if op.name_hint not in self.mod:
            err = not_found("function", op.name_hint, self.mod.names(), where="in the module")
            self.report(loc, f"call of @{op.name_hint}: {err}")
            return None
        callee = self.mod[op.name_hint]
        if isinstance(callee, relax.Function):
            return self.call_function(op.name_hint, callee, call, arg_types, loc)
        if isinstance(callee, tir.PrimFunc):
            return self.call_prim_func(op.name_hint, callee, call, arg_types, loc)
        self.report(loc, f"call of @{op.name_hint}: it is a {type(callee).__name__}")
        return None

    def call_function(
        self, gname: str, callee: relax.Function, call: relax.Call, arg_types: list[Any], loc: Any
    ) -> Any:
        if len(call.args) != len(callee.params):
            self.report(loc, f"call of @{gname}: it takes {len(callee.params)} argument(s), got {len(call.args)}")
            return None
        for k, (param, ty) in enumerate(zip(callee.params, arg_types, strict=True)):
            if ty is not None and ty != param.ty:
                self.report(
                    loc,
                    f"call of @{gname}: argument {k} has type {format_type(ty)}, parameter "
                    f"%{param.var.name_hint} is {format_type(param.ty)}",
                )
        return callee.ret_type

    def call_prim_func(self, gname: str, callee: tir.PrimFunc, call: relax.Call, arg_types: list[Any], loc: Any) -> Any:
        params = callee.params
        if len(call.args) > len(params):
            self.report(loc, f"call of PrimFunc @{gname}: it has {len(params)} parameter(s), got {len(call.args)}")
            return None
        for k, (param, ty) in enumerate(zip(params, arg_types, strict=False)):
            if ty is None:
                continue
            want = _param_tensor_type(param)
            if isinstance(param, tir.Var):
                ok = (
                    isinstance(ty, (PrimType, TensorType))
                    and ty.dtype == param.dtype
                    and (isinstance(ty, PrimType) or ty.shape == ())
                )
            else:
                ok = want is None or ty == want
            if not ok:
                shown = format_type(want) if want is not None else param.dtype
                self.report(
                    loc, f"call of PrimFunc @{gname}: argument {k} has type {format_type(ty)}, expected {shown}"
                )
        outputs: list[TensorType] = []
        unknown = False
        for k in range(len(call.args), len(params)):
            param = params[k]
            if not isinstance(param, tir.Buffer):
                self.report(
                    loc, f"call of PrimFunc @{gname}: scalar parameter {k} ({_var_name(param)}) has no argument"
                )
                return None
            out = _param_tensor_type(param)
            if out is None:
                unknown = True
            else:
                outputs.append(out)
        if unknown:
            return None
        return outputs[0] if len(outputs) == 1 else TupleType(tuple(outputs))

    def get_item(self, expr: relax.TupleGetItem, ty: Any, loc: Any) -> Any:
        if ty is None:
            return None
        if not isinstance(ty, TupleType):
            self.report(loc, f"TupleGetItem index {expr.index} of a non-tuple of type {format_type(ty)}")
            return None
        if not 0 <= expr.index < len(ty.fields):
            self.report(
                loc, f"TupleGetItem index {expr.index} is out of range for {format_type(ty)} ({len(ty.fields)} fields)"
            )
            return None
        return ty.fields[expr.index]


def _param_tensor_type(param: Any) -> TensorType | None:
    """The tensor type a Buffer parameter takes in a dataflow call (None if its shape is symbolic)."""
    if not isinstance(param, tir.Buffer):
        return None
    dims: list[int] = []
    for dim in param.shape:
        if not isinstance(dim, tir.IntImm):
            return None
        dims.append(int(dim.value))
    return TensorType(tuple(dims), param.dtype)


# ====================================================================== loop-level functions

_STMT, _UNDEF_VAR, _UNDECL_BUF = range(3)


def _tir_children(node: Any) -> tuple[Any, ...]:
    """The operand expressions of a PrimExpr (none for anything else, e.g. in ill-formed IR)."""
    return tir.operands(node) if isinstance(node, tir.PrimExprBase) else ()


_ARITH = (tir.Add, tir.Sub, tir.Mul, tir.FloorDiv, tir.FloorMod, tir.Min, tir.Max)
_CMP = (tir.EQ, tir.NE, tir.LT, tir.LE, tir.GT, tir.GE)
_LEAVES = (tir.IntImm, tir.FloatImm, tir.Var)


def _stmt_label(stmt: Any) -> str:
    kind = type(stmt)
    if kind is tir.For:
        return f"For {_var_name(stmt.loop_var)}"
    if kind is tir.BufferStore:
        return f"BufferStore {getattr(stmt.buffer, 'name', '?')}"
    if kind is tir.LetStmt:
        return f"LetStmt {_var_name(stmt.var)}"
    if kind is tir.Allocate:
        return f"Allocate {getattr(stmt.buffer, 'name', '?')}"
    return kind.__name__


def _format_tir_loc(loc: Any) -> str:
    """A chain ``(parent, stmt, k)`` as ``For i > SeqStmt[1] > BufferStore B``."""
    parts: list[str] = []
    while loc is not None:
        parent, stmt, k = loc
        if type(stmt) is tir.SeqStmt and k is not None:
            parts.append(f"SeqStmt[{k}]")
        elif type(stmt) is tir.IfThenElse and k is not None:
            parts.append(f"IfThenElse ({k})")
        elif isinstance(stmt, str):
            parts.append(stmt)
        else:
            parts.append(_stmt_label(stmt))
        loc = parent
    return " > ".join(reversed(parts))


class _TirChecker:
    """Checks one PrimFunc: scoped variables and buffers, dtypes, on explicit stacks."""

    def __init__(self, func: tir.PrimFunc, name: str, problems: list[str]) -> None:
        self.func = func
        self.name = name
        self.problems = problems
        self.vars: dict[int, tir.Var] = {}  # in scope: vid -> defining Var
        self.buffers: dict[int, tir.Buffer] = {}  # declared here: vid -> Buffer
        self.defined: dict[int, Any] = {}  # every definition so far: vid -> place

    def report(self, loc: Any, message: str) -> None:
        where = _format_tir_loc(loc)
        self.problems.append(f"PrimFunc {self.name!r}{', at ' + where if where else ''}: {message}")

    def define(self, vid: int, loc: Any, what: str) -> None:
        first = self.defined.get(vid)
        if first is not None:
            where = _format_tir_loc(first) or "the parameters"
            self.report(loc, f"{what} reuses vid {vid} (first defined at {where})")
        else:
            self.defined[vid] = loc

    def run(self) -> None:
        params = self.func.params
        for k, param in enumerate(params):
            if isinstance(param, tir.Var):
                loc = (None, f"parameter {k} ({param.name_hint})", None)
                self.define(param.vid, loc, f"scalar parameter {param.name_hint}")
                self.check_var_dtype(param, loc)
                self.vars[param.vid] = param
            elif not isinstance(param, tir.Buffer):
                self.report((None, f"parameter {k}", None), f"is a {type(param).__name__}, not a Var or Buffer")
        for k, param in enumerate(params):
            if isinstance(param, tir.Buffer):
                loc = (None, f"parameter {k} ({param.name})", None)
                self.declare(param, loc, f"buffer parameter {param.name}")
        self.walk(self.func.body)

    def check_var_dtype(self, var: tir.Var, loc: Any) -> None:
        if split_vector(var.dtype)[0] not in _DTYPES:
            self.report(loc, f"variable {var.name_hint} has unknown dtype {var.dtype!r}")

    def declare(self, buffer: tir.Buffer, loc: Any, what: str) -> None:
        self.define(buffer.vid, loc, what)
        if buffer.dtype not in _DTYPES:
            self.report(loc, f"buffer {buffer.name} has unknown dtype {buffer.dtype!r}")
        if buffer.strides and len(buffer.strides) != len(buffer.shape):
            self.report(
                loc, f"buffer {buffer.name} has {len(buffer.shape)} dimensions but {len(buffer.strides)} strides"
            )
        for k, dim in enumerate((*buffer.shape, *buffer.strides)):
            role = f"dimension {k}" if k < len(buffer.shape) else f"stride {k - len(buffer.shape)}"
            dtype = self.expr(dim, loc)
            if dtype is not None and dtype not in _INT_DTYPES:
                self.report(loc, f"{role} of buffer {buffer.name} must be an integer scalar, got {dtype}")
            if type(dim) is tir.IntImm and dim.value < 0:
                self.report(loc, f"{role} of buffer {buffer.name} is negative ({dim.value})")
        self.buffers[buffer.vid] = buffer

    def check_buffer_use(self, buffer: Any, loc: Any, access: str) -> bool:
        if not isinstance(buffer, tir.Buffer):
            self.report(loc, f"{access} of a {type(buffer).__name__}, not a Buffer")
            return False
        decl = self.buffers.get(buffer.vid)
        if decl is None:
            self.report(
                loc,
                f"{access} of buffer {buffer.name} (vid {buffer.vid}), which is neither a parameter nor allocated "
                f"by an enclosing Allocate",
            )
            return False
        if decl is not buffer and decl != buffer:
            self.report(
                loc,
                f"{access} of buffer {buffer.name} (vid {buffer.vid}) does not match its declaration "
                f"({_buffer_text(buffer)} vs declared {_buffer_text(decl)})",
            )
            return False
        return True

    # ------------------------------------------------------------ statements

    def walk(self, body: Any) -> None:
        tasks: list[tuple[Any, ...]] = [(_STMT, body, None)]
        while tasks:
            task = tasks.pop()
            code = task[0]
            if code == _UNDEF_VAR:
                self.vars.pop(task[1], None)
                continue
            if code == _UNDECL_BUF:
                self.buffers.pop(task[1], None)
                continue
            stmt, parent = task[1], task[2]
            loc = (parent, stmt, None)
            kind = type(stmt)
            if kind is tir.BufferStore:
                self.store(stmt, loc)
            elif kind is tir.SeqStmt:
                for k in range(len(stmt.seq) - 1, -1, -1):
                    tasks.append((_STMT, stmt.seq[k], (parent, stmt, k)))
            elif kind is tir.For:
                self.for_header(stmt, loc)
                tasks.append((_UNDEF_VAR, stmt.loop_var.vid))
                tasks.append((_STMT, stmt.body, loc))
            elif kind is tir.IfThenElse:
                cond = self.expr(stmt.condition, loc)
                if cond is not None and cond != "bool":
                    self.report(loc, f"IfThenElse condition must be a bool scalar, got {cond}")
                if stmt.else_case is not None:
                    tasks.append((_STMT, stmt.else_case, (parent, stmt, "else")))
                tasks.append((_STMT, stmt.then_case, (parent, stmt, "then")))
            elif kind is tir.LetStmt:
                var = stmt.var
                value = self.expr(stmt.value, loc)
                if not isinstance(var, tir.Var):
                    self.report(loc, f"LetStmt binds a {type(var).__name__}, not a Var")
                    tasks.append((_STMT, stmt.body, loc))
                    continue
                self.check_var_dtype(var, loc)
                if value is not None and value != var.dtype:
                    self.report(loc, f"LetStmt variable {var.name_hint} is {var.dtype} but its value is {value}")
                self.define(var.vid, loc, f"LetStmt variable {var.name_hint}")
                self.vars[var.vid] = var
                tasks.append((_UNDEF_VAR, var.vid))
                tasks.append((_STMT, stmt.body, loc))
            elif kind is tir.Allocate:
                if isinstance(stmt.buffer, tir.Buffer):
                    self.declare(stmt.buffer, loc, f"allocated buffer {stmt.buffer.name}")
                    tasks.append((_UNDECL_BUF, stmt.buffer.vid))
                else:
                    self.report(loc, f"allocates a {type(stmt.buffer).__name__}, not a Buffer")
                tasks.append((_STMT, stmt.body, loc))
            elif kind is tir.Evaluate:
                self.expr(stmt.value, loc)
            else:
                self.report(parent, f"a {kind.__name__} is not a statement")

    def for_header(self, stmt: tir.For, loc: Any) -> None:
        var = stmt.loop_var
        if not (isinstance(stmt.kind, str) and stmt.kind in _FOR_KINDS):
            self.report(loc, f"For kind {stmt.kind!r} is not one of {', '.join(sorted(_FOR_KINDS))}")
        lo = self.expr(stmt.min, loc)
        extent = self.expr(stmt.extent, loc)
        if not isinstance(var, tir.Var):
            self.report(loc, f"loop variable is a {type(var).__name__}, not a Var")
            return
        if var.dtype not in _INT_DTYPES:
            self.report(loc, f"loop variable {var.name_hint} must be an integer scalar, got {var.dtype}")
        for what, dtype in (("min", lo), ("extent", extent)):
            if dtype is not None and dtype != var.dtype:
                self.report(loc, f"loop variable {var.name_hint} is {var.dtype} but {what} is {dtype}")
        self.define(var.vid, loc, f"loop variable {var.name_hint}")
        self.vars[var.vid] = var

    def store(self, stmt: tir.BufferStore, loc: Any) -> None:
        value = self.expr(stmt.value, loc)
        index_types = [self.expr(i, loc) for i in stmt.indices]
        buffer = stmt.buffer
        if not self.check_buffer_use(buffer, loc, "store"):
            return
        lanes = self.index_lanes(buffer, index_types, loc, "store")
        if value is None or lanes is None:
            return
        base, value_lanes = split_vector(value)
        if base != buffer.dtype:
            self.report(loc, f"stores a {value} value into buffer {buffer.name} of dtype {buffer.dtype}")
        elif value_lanes != lanes:
            self.report(
                loc,
                f"stores a {value} value into buffer {buffer.name} at "
                f"{'a scalar index' if lanes == 1 else f'a {lanes}-lane vector index'}",
            )

    def index_lanes(self, buffer: tir.Buffer, index_types: list[Any], loc: Any, access: str) -> int | None:
        """The vector width of an access (1 for scalar), or None after reporting a problem."""
        if len(index_types) != len(buffer.shape):
            self.report(
                loc,
                f"{access} of buffer {buffer.name} has {len(index_types)} indices but the buffer has "
                f"{len(buffer.shape)} dimensions",
            )
            return None
        lanes = 1
        for k, dtype in enumerate(index_types):
            if dtype is None:
                return None
            base, n = split_vector(dtype)
            if base not in _INT_DTYPES:
                self.report(loc, f"index {k} of {access} of buffer {buffer.name} is {dtype}, not an integer")
                return None
            if n != 1:
                if lanes not in (1, n):
                    self.report(loc, f"vector indices of {access} of buffer {buffer.name} have different lanes")
                    return None
                lanes = n
        return lanes

    # ------------------------------------------------------------ expressions

    def expr(self, root: Any, loc: Any) -> str | None:
        """The dtype of PrimExpr ``root`` (None if unknown after a problem), checking it on the way."""
        if isinstance(root, _LEAVES):
            return self.leaf(root, loc)
        memo: dict[int, str | None] = {}
        stack = [root]
        while stack:
            node = stack[-1]
            key = id(node)
            if key in memo:
                stack.pop()
                continue
            if isinstance(node, _LEAVES):
                memo[key] = self.leaf(node, loc)
                stack.pop()
                continue
            kids = _tir_children(node)
            pending = [k for k in kids if id(k) not in memo]
            if pending:
                stack.extend(reversed(pending))
                continue
            stack.pop()
            memo[key] = self.compute(node, [memo[id(k)] for k in kids], loc)
        return memo[id(root)]

    def leaf(self, node: Any, loc: Any) -> str | None:
        kind = type(node)
        if kind is tir.Var:
            decl = self.vars.get(node.vid)
            if decl is None:
                if node.vid in self.defined:
                    self.report(loc, f"variable {node.name_hint} (vid {node.vid}) is used outside its scope")
                else:
                    self.report(loc, f"variable {node.name_hint} (vid {node.vid}) is used before it is defined")
                return None
            if decl.dtype != node.dtype:
                self.report(
                    loc,
                    f"variable {node.name_hint} (vid {node.vid}) is used as {node.dtype} but defined as {decl.dtype}",
                )
                return None
            return str(node.dtype)
        base = split_vector(node.dtype)[0]
        if base not in _DTYPES:
            self.report(loc, f"{kind.__name__} {node.value!r} has unknown dtype {node.dtype!r}")
            return None
        if kind is tir.FloatImm and not base.startswith("float"):
            self.report(loc, f"FloatImm {node.value!r} has non-float dtype {node.dtype}")
            return None
        if kind is tir.IntImm:
            bounds = _INT_RANGES.get(base)
            if bounds is None:
                self.report(loc, f"IntImm {node.value!r} has non-integer dtype {node.dtype}")
                return None
            if not bounds[0] <= node.value <= bounds[1]:
                self.report(loc, f"IntImm {node.value!r} does not fit dtype {node.dtype}")
                return None
        return str(node.dtype)

    def compute(self, node: Any, kids: list[str | None], loc: Any) -> str | None:
        kind = type(node)
        name = kind.__name__
        if kind in _ARITH or kind in _CMP or kind is tir.And or kind is tir.Or:
            a, b = kids
            if a is None or b is None:
                return None
            if a != b:
                self.report(loc, f"operands of {name} have different dtypes: {a} and {b}")
                return None
            base, lanes = split_vector(a)
            if kind is tir.And or kind is tir.Or:
                if base != "bool":
                    self.report(loc, f"{name} needs bool operands, got {a}")
                    return None
                return a
            if kind in _CMP:
                return vector_dtype("bool", lanes)
            if base == "bool":
                self.report(loc, f"{name} of bool operands")
                return None
            return a
        if kind is tir.Not:
            (a,) = kids
            if a is not None and split_vector(a)[0] != "bool":
                self.report(loc, f"Not needs a bool operand, got {a}")
                return None
            return a
        if kind is tir.Select:
            cond, t, f = kids
            if cond is None or t is None or f is None:
                return None
            if t != f:
                self.report(loc, f"Select values have different dtypes: {t} and {f}")
                return None
            cbase, clanes = split_vector(cond)
            if cbase != "bool" or clanes not in (1, split_vector(t)[1]):
                self.report(loc, f"Select condition must be bool (of the values' lanes), got {cond}")
                return None
            return t
        if kind is tir.Cast:
            (value,) = kids
            base, lanes = split_vector(node.dtype)
            if base not in _DTYPES:
                self.report(loc, f"Cast to unknown dtype {node.dtype!r}")
                return None
            if value is None:
                return None
            if lanes != split_vector(value)[1] and lanes != 1:
                self.report(loc, f"Cast of {value} to {node.dtype} changes the number of lanes")
                return None
            return vector_dtype(base, split_vector(value)[1])
        if kind is tir.Call:
            arity = INTRINSICS.get(node.op)
            if arity is None:
                self.report(loc, f"call of unknown intrinsic {node.op!r}; known: {', '.join(sorted(INTRINSICS))}")
                return None
            if len(kids) != arity:
                self.report(loc, f"intrinsic {node.op!r} takes {arity} argument(s), got {len(kids)}")
                return None
            for k, dtype in enumerate(kids):
                if dtype is not None and dtype != node.dtype:
                    self.report(loc, f"argument {k} of intrinsic {node.op!r} is {dtype}, the call is {node.dtype}")
                    return None
            return str(node.dtype)
        if kind is tir.Ramp:
            ramp_base, stride = kids
            if not isinstance(node.lanes, int) or node.lanes < 1:
                self.report(loc, f"Ramp lanes must be a positive int, got {node.lanes!r}")
                return None
            if ramp_base is None or stride is None:
                return None
            if ramp_base != stride or ramp_base not in _INT_DTYPES:
                self.report(
                    loc, f"Ramp base and stride must be integer scalars of one dtype, got {ramp_base} and {stride}"
                )
                return None
            return vector_dtype(ramp_base, node.lanes)
        if kind is tir.Broadcast:
            (value,) = kids
            if not isinstance(node.lanes, int) or node.lanes < 1:
                self.report(loc, f"Broadcast lanes must be a positive int, got {node.lanes!r}")
                return None
            if value is None:
                return None
            base, lanes = split_vector(value)
            return vector_dtype(base, lanes * node.lanes)
        if kind is tir.BufferLoad:
            if not self.check_buffer_use(node.buffer, loc, "load"):
                return None
            load_lanes = self.index_lanes(node.buffer, kids, loc, "load")
            if load_lanes is None:
                return None
            return vector_dtype(node.buffer.dtype, load_lanes)
        self.report(loc, f"a {name} is not an expression")
        return None


def _buffer_text(buffer: tir.Buffer) -> str:
    def dims(exprs: tuple[Any, ...]) -> str:
        return "(" + ", ".join(str(e.value) if type(e) is tir.IntImm else type(e).__name__ for e in exprs) + ")"

    text = f"{buffer.name}: {buffer.dtype}{dims(buffer.shape)}"
    if buffer.strides:
        text += f" strides {dims(buffer.strides)}"
    return text
