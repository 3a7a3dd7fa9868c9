"""Well-formedness of dataflow Functions: scopes, unique ids, callees and types (see the package docstring).

The checker walks with an explicit stack of tasks (deep IR is fine): a task is a
handler, a node and its place. Handlers of expressions push the type they infer
(None when unknown) on a stack of types that the handler of the enclosing
construct pops.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from parpass.errors import not_found
from parpass.ir import relax, tir
from parpass.ir.builtin_ops import format_type
from parpass.ir.module import IRModule
from parpass.ir.node import GlobalVar, Op
from parpass.ir.op import get_op
from parpass.ir.types import PrimType, TensorType, TupleType
from parpass.ir.well_formed.common import KNOWN_DTYPES, var_name

__all__ = ["RelaxChecker"]


def _type_problem(ty: Any) -> str | None:
    """Why ``ty`` is not a valid type, or None."""
    stack = [ty]
    while stack:
        t = stack.pop()
        if isinstance(t, TupleType):
            stack.extend(t.fields)
        elif isinstance(t, TensorType):
            if t.dtype not in KNOWN_DTYPES:
                return f"type {format_type(ty)} has unknown dtype {t.dtype!r}"
            if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in t.shape):
                return f"type {format_type(ty)} has a shape that is not a tuple of non-negative ints"
        elif isinstance(t, PrimType):
            if t.dtype not in KNOWN_DTYPES:
                return f"type {format_type(ty)} has unknown dtype {t.dtype!r}"
        else:
            return f"{type(t).__name__} is not a type"
    return None


def _is_bool_scalar(ty: Any) -> bool:
    return (isinstance(ty, PrimType) and ty.dtype == "bool") or (
        isinstance(ty, TensorType) and ty.dtype == "bool" and ty.shape == ()
    )


def _format_loc(loc: Any) -> str:
    """A place chain ``("binding", parent, i, var)`` / ``("branch", parent, which)`` / ... as text."""
    parts: list[str] = []
    while loc is not None:
        tag = loc[0]
        if tag == "binding":
            parts.append(f"binding {loc[2]} (%{var_name(loc[3])})")
        elif tag == "branch":
            parts.append(f"{loc[2]} branch")
        elif tag == "body":
            parts.append("result expression")
        elif tag == "param":
            parts.append(f"parameter {loc[2]} (%{var_name(loc[3])})")
        else:
            parts.append("return type")
        loc = loc[1]
    return " > ".join(reversed(parts))


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


def _scalar_argument_fits(param: tir.Var, ty: Any) -> bool:
    """A scalar PrimFunc parameter takes a PrimType or a 0-d tensor of its dtype."""
    return (
        isinstance(ty, (PrimType, TensorType))
        and ty.dtype == param.dtype
        and (isinstance(ty, PrimType) or ty.shape == ())
    )


class RelaxChecker:
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
        self.tasks: list[tuple[Callable[[Any, Any], None], Any, Any]] = []  # (handler, node, place): last in, first out
        self.block_vids: list[list[int]] = []  # vids bound by each block being visited, innermost last
        self.types: list[Any] = []  # types inferred for the expressions visited, awaiting their user

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
            self.check_param(k, param)
        body_ty = self.walk(func.body)
        if func.ret_type is not None:
            self.check_ret_type(func.ret_type, body_ty)

    def check_param(self, k: int, param: Any) -> None:
        loc = ("param", None, k, getattr(param, "var", None))
        if not isinstance(param, relax.Param):
            self.report(loc, f"is a {type(param).__name__}, not a Param")
            return
        problem = _type_problem(param.ty)
        if problem is not None:
            self.report(loc, problem)
        self.define(param.var, param.ty if problem is None else None, loc)

    def check_ret_type(self, ret_type: Any, body_ty: Any) -> None:
        problem = _type_problem(ret_type)
        if problem is not None:
            self.report(("ret", None), problem)
        elif body_ty is not None and body_ty != ret_type:
            self.report(
                ("ret", None),
                f"ret_type {format_type(ret_type)} differs from the body's type {format_type(body_ty)}",
            )

    def walk(self, body: relax.SeqExpr) -> Any:
        """The type of block ``body`` (None if unknown), checking everything in it."""
        tasks = self.tasks
        tasks.append((self.visit_block, body, None))
        while tasks:
            handler, node, loc = tasks.pop()
            handler(node, loc)
        return self.types[-1] if self.types else None

    def pop_types(self, n: int) -> list[Any]:
        """The last ``n`` inferred types, in order, taken off the stack."""
        if not n:
            return []
        popped = self.types[-n:]
        del self.types[-n:]
        return popped

    # ------------------------------------------------------------ blocks and bindings

    def visit_block(self, seq: Any, parent: Any) -> None:
        """Visit the bindings of block ``seq`` in order, then its result (``parent`` is None for the body)."""
        if not isinstance(seq, relax.SeqExpr):
            self.report(parent, f"a block must be a SeqExpr, got {type(seq).__name__}")
            self.types.append(None)
            return
        bindings = seq.bindings
        count = len(bindings)
        self.block_vids.append([])
        self.tasks.append((self.end_block, seq, parent))
        self.tasks.append((self.visit_expr, seq.body, ("body", parent)))
        for i in range(count - 1, -1, -1):
            binding = bindings[i]
            self.tasks.append((self.visit_binding, binding, ("binding", parent, i, getattr(binding, "var", None))))

    def visit_binding(self, binding: Any, loc: Any) -> None:
        if not isinstance(binding, relax.Binding):
            self.report(loc, f"is a {type(binding).__name__}, not a Binding")
            return
        self.tasks.append((self.bind, binding, loc))
        self.tasks.append((self.visit_expr, binding.value, loc))

    def bind(self, binding: relax.Binding, loc: Any) -> None:
        """Define the variable of ``binding`` once its value is checked (its type is on the stack)."""
        inferred = self.types.pop()
        ty = self.annotated_type(binding.ty, inferred, loc)
        self.define(binding.var, ty if ty is not None else inferred, loc)
        if isinstance(binding.var, relax.Var):
            self.block_vids[-1].append(binding.var.vid)

    def annotated_type(self, ty: Any, inferred: Any, loc: Any) -> Any:
        """Annotation ``ty`` if it is a valid type (None if not, or absent), checked against ``inferred``."""
        if ty is None:
            return None
        problem = _type_problem(ty)
        if problem is not None:
            self.report(loc, f"annotated {problem}")
            return None
        if inferred is not None and ty != inferred:
            self.report(loc, f"annotated type {format_type(ty)} differs from the inferred type {format_type(inferred)}")
        return ty

    def end_block(self, _seq: relax.SeqExpr, parent: Any) -> None:
        """The bindings of an If branch go out of scope after it (those of the body stay)."""
        vids = self.block_vids.pop()
        if parent is not None:
            for vid in vids:
                self.scope.pop(vid, None)

    # ------------------------------------------------------------ expressions

    def visit_expr(self, expr: Any, loc: Any) -> None:
        visitor = _EXPR_VISITORS.get(type(expr))
        if visitor is not None:
            visitor(self, expr, loc)
        else:
            self.report(loc, f"a {type(expr).__name__} is not an expression")
            self.types.append(None)

    def visit_var(self, var: relax.Var, loc: Any) -> None:
        if var.vid in self.scope:
            self.types.append(self.scope[var.vid])
            return
        if var.vid in self.defined:
            self.report(
                loc,
                f"%{var.name_hint} (vid {var.vid}) is used outside the branch that defines it "
                f"(at {_format_loc(self.defined[var.vid])})",
            )
        else:
            self.report(loc, f"%{var.name_hint} (vid {var.vid}) is used before it is defined")
        self.types.append(None)

    def visit_constant(self, const: relax.Constant, loc: Any) -> None:
        self.types.append(self.constant(const, loc))

    def visit_call(self, call: relax.Call, loc: Any) -> None:
        self.tasks.append((self.call_step, call, loc))
        for arg in reversed(call.args):
            self.tasks.append((self.visit_expr, arg, loc))

    def visit_tuple(self, expr: relax.Tuple, loc: Any) -> None:
        self.tasks.append((self.tuple_step, expr, loc))
        for field in reversed(expr.fields):
            self.tasks.append((self.visit_expr, field, loc))

    def visit_get_item(self, expr: relax.TupleGetItem, loc: Any) -> None:
        self.tasks.append((self.get_item_step, expr, loc))
        self.tasks.append((self.visit_expr, expr.tuple_value, loc))

    def visit_if(self, expr: relax.If, loc: Any) -> None:
        self.tasks.append((self.if_step, expr, loc))
        self.tasks.append((self.visit_block, expr.else_branch, ("branch", loc, "else")))
        self.tasks.append((self.visit_block, expr.then_branch, ("branch", loc, "then")))
        self.tasks.append((self.visit_expr, expr.cond, loc))

    def visit_global_var(self, gv: GlobalVar, loc: Any) -> None:
        self.report(loc, f"@{gv.name_hint} is used as a value; functions can only be called")
        self.types.append(None)

    def call_step(self, call: relax.Call, loc: Any) -> None:
        arg_types = self.pop_types(len(call.args))
        result = self.call(call, arg_types, loc)
        self.types.append(result if self.check_types else None)

    def tuple_step(self, expr: relax.Tuple, loc: Any) -> None:
        fields = self.pop_types(len(expr.fields))
        self.types.append(TupleType(tuple(fields)) if all(f is not None for f in fields) else None)

    def get_item_step(self, expr: relax.TupleGetItem, loc: Any) -> None:
        self.types.append(self.get_item(expr, self.types.pop(), loc))

    def if_step(self, expr: relax.If, loc: Any) -> None:
        else_ty = self.types.pop()
        then_ty = self.types.pop()
        cond_ty = self.types.pop()
        if cond_ty is not None and not _is_bool_scalar(cond_ty):
            self.report(loc, f"If condition must be a bool scalar, got {format_type(cond_ty)}")
        if then_ty is not None and else_ty is not None and then_ty != else_ty:
            self.report(
                loc,
                f"If branches have different types: {format_type(then_ty)} and {format_type(else_ty)}",
            )
        self.types.append(then_ty if then_ty == else_ty else None)

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

    # ------------------------------------------------------------ calls

    def call(self, call: relax.Call, arg_types: list[Any], loc: Any) -> Any:
        """The type of ``call`` (None if unknown), checking its callee and arguments."""
        op = call.op
        if isinstance(op, Op):
            return self.call_op(op, call, arg_types, loc)
        if not isinstance(op, GlobalVar):
            self.report(loc, f"a call's callee must be an Op or a GlobalVar, got {type(op).__name__}")
            return None
        return self.call_global(op, call, arg_types, loc)

    def call_op(self, op: Op, call: relax.Call, arg_types: list[Any], loc: Any) -> Any:
        try:
            info = get_op(op.name)
        except KeyError as exc:
            self.report(loc, f"call of an unknown op: {exc}")
            return None
        if info.num_inputs is not None and info.num_inputs != len(call.args):
            self.report(loc, f"op {op.name!r} takes {info.num_inputs} argument(s), got {len(call.args)}")
            return None
        known = all(t is not None for t in arg_types)
        if info.infer_type is None or not known or not self.check_types:
            return None
        try:
            return info.infer_type(arg_types, call.attrs)
        except Exception as exc:
            self.report(loc, f"ill-typed call of op {op.name!r}: {exc}")
            return None

    def call_global(self, gv: GlobalVar, call: relax.Call, arg_types: list[Any], loc: Any) -> Any:
        self.callees[gv.name_hint] = None
        if self.mod is None:
            return None
        if gv.name_hint not in self.mod:
            err = not_found("function", gv.name_hint, self.mod.names(), where="in the module")
            self.report(loc, f"call of @{gv.name_hint}: {err}")
            return None
        callee = self.mod[gv.name_hint]
        if isinstance(callee, relax.Function):
            return self.call_function(gv.name_hint, callee, call, arg_types, loc)
        if isinstance(callee, tir.PrimFunc):
            return self.call_prim_func(gv.name_hint, callee, call, arg_types, loc)
        self.report(loc, f"call of @{gv.name_hint}: it is a {type(callee).__name__}")
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
        """The outputs of a destination-passing call: the Buffer parameters after the arguments."""
        params = callee.params
        if len(call.args) > len(params):
            self.report(loc, f"call of PrimFunc @{gname}: it has {len(params)} parameter(s), got {len(call.args)}")
            return None
        for k, (param, ty) in enumerate(zip(params, arg_types, strict=False)):
            if ty is None:
                continue
            want = _param_tensor_type(param)
            ok = _scalar_argument_fits(param, ty) if isinstance(param, tir.Var) else want is None or ty == want
            if not ok:
                shown = format_type(want) if want is not None else param.dtype
                self.report(
                    loc, f"call of PrimFunc @{gname}: argument {k} has type {format_type(ty)}, expected {shown}"
                )
        return self.prim_func_outputs(gname, params[len(call.args) :], len(call.args), loc)

    def prim_func_outputs(self, gname: str, outputs: tuple[Any, ...], first: int, loc: Any) -> Any:
        """The type of the output parameters ``outputs`` (numbered from ``first``), or None if unknown."""
        types: list[TensorType] = []
        unknown = False
        for k, param in enumerate(outputs, first):
            if not isinstance(param, tir.Buffer):
                self.report(loc, f"call of PrimFunc @{gname}: scalar parameter {k} ({var_name(param)}) has no argument")
                return None
            out = _param_tensor_type(param)
            if out is None:
                unknown = True
            else:
                types.append(out)
        if unknown:
            return None
        return types[0] if len(types) == 1 else TupleType(tuple(types))


#: The handler of each kind of expression (anything else is reported as not an expression).
_EXPR_VISITORS: dict[type, Callable[[RelaxChecker, Any, Any], None]] = {
    relax.Var: RelaxChecker.visit_var,
    relax.Constant: RelaxChecker.visit_constant,
    relax.Call: RelaxChecker.visit_call,
    relax.Tuple: RelaxChecker.visit_tuple,
    relax.TupleGetItem: RelaxChecker.visit_get_item,
    relax.If: RelaxChecker.visit_if,
    GlobalVar: RelaxChecker.visit_global_var,
}
