"""InferType: fill in the type of every binding, and check the types that are already there.

Types flow forward from the parameters:

* a constant has the tensor type of its data, a tuple the tuple of its fields'
  types, ``t[i]`` the type of field ``i``;
* a call of an op has the type the op registry's type rule gives for the
  argument types (the rule raises when they are wrong);
* a call of a module function takes the callee's signature, looked up in
  ``mod``: a ``Function``'s parameter types must match the arguments and the
  call has its ``ret_type`` (inferred from the callee's body when it has
  none); a ``PrimFunc`` is called in destination-passing style (the
  arguments fill its first parameters, the remaining buffer parameters are
  the outputs, and the call has the output's tensor type, or a tuple of
  them);
* an ``If`` needs a boolean scalar condition and has the type both branches
  agree on.

Each binding's ``ty`` is set to the inferred type, and the function's
``ret_type`` to the type of its result. A type that is already there must
agree with the inferred one. Every type error is a :class:`TypeInferenceError`
(a ``TypeError``) naming the function, the binding, and the types involved.
A type that cannot be known (the callee is a recursive function without a
``ret_type``, or a ``PrimFunc`` with symbolic buffer shapes) is left as it was.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

import msgspec

from parpass.errors import ParpassError
from parpass.ir import (
    Attrs,
    Binding,
    Call,
    Constant,
    Function,
    GlobalVar,
    If,
    IRModule,
    Op,
    PrimFunc,
    PrimType,
    TensorType,
    Tuple,
    TupleGetItem,
    TupleType,
    Type,
    Var,
    get_op,
    tir,
)
from parpass.ir.builtin_ops import format_type
from parpass.ir.expr_functor import ExprMutator, post_order
from parpass.ir.relax import Expr
from parpass.passes.module_memo import ModuleMemo
from parpass.transform import FunctionTransform, PassContext, Statistic

__all__ = ["InferType", "TypeInferenceError"]

ANNOTATED = Statistic("InferType", "annotated", "bindings whose type was filled in")
RET_TYPES = Statistic("InferType", "ret_types", "function return types filled in")


class TypeInferenceError(ParpassError, TypeError):
    """An ill-typed binding or function found by InferType; the message names the function and binding."""


_UNDEFINED: Any = object()
# Attributes enter memo keys as msgpack with sorted keys (equal dicts give equal bytes; 1, 1.0, True differ).
_ATTRS_ENCODER = msgspec.msgpack.Encoder(order="sorted")


def _is_flat(value: Expr) -> bool:
    """Whether ``value`` is a variable, a constant, or a call/tuple/projection of those (A-normal form)."""
    if type(value) is Call:
        return all(type(a) is Var or type(a) is Constant for a in value.args)
    if type(value) is Tuple:
        return all(type(a) is Var or type(a) is Constant for a in value.fields)
    if type(value) is TupleGetItem:
        return type(value.tuple_value) is Var
    return type(value) is Var or type(value) is Constant


def _operands_first(expr: Expr) -> list[Expr]:
    """The nodes of ``expr`` whose types its type is computed from, operands before their expression (an If is
    one node: its blocks are typed already). An explicit walk, so nesting depth costs no Python frames."""
    order: list[Expr] = []
    stack: list[tuple[Expr, bool]] = [(expr, False)]
    while stack:
        node, ready = stack.pop()
        operands: tuple[Expr, ...] = ()
        if type(node) is Call:
            operands = node.args
        elif type(node) is Tuple:
            operands = node.fields
        elif type(node) is TupleGetItem:
            operands = (node.tuple_value,)
        if operands and not ready:
            stack.append((node, True))
            stack.extend((k, False) for k in operands)
        else:
            order.append(node)
    return order


def _is_scalar(ty: Type, dtype: str) -> bool:
    """Whether ``ty`` is a scalar of ``dtype``: a PrimType, or a tensor type of shape ``()``."""
    if isinstance(ty, PrimType):
        return ty.dtype == dtype
    return isinstance(ty, TensorType) and ty.dtype == dtype and ty.shape == ()


class _Signatures:
    """The call types of the functions of ``mod``; return types of functions without one are inferred once."""

    def __init__(self, mod: IRModule) -> None:
        self.mod = mod
        self.inferred: dict[str, Type | None] = {}  # function without ret_type -> type of its body (None: unknown)
        self.cyclic: set[str] = set()  # functions that reach a call cycle among functions without ret_type
        # (op, argument types, attributes) -> result type: type rules are pure, and most calls of a module
        # repeat a few signatures, so each is computed once per pass run.
        self.op_types: dict[tuple[Any, ...], Type] = {}

    def name_of(self, func: Function) -> str:
        """The name ``func`` has in the module (for error messages only: it searches the module)."""
        for name in self.mod.names():
            if self.mod[name] is func:
                return name
        for name in self.mod.names():  # a worker may hold an equal copy rather than the same object
            if self.mod[name] == func:
                return name
        return str(func.attrs.get("global_symbol", "<function>"))

    def callee(self, name: str) -> Function | PrimFunc:
        if name not in self.mod:
            raise KeyError(name)
        return cast("Function | PrimFunc", self.mod[name])  # the only kinds of function a module holds

    def return_type(self, name: str) -> Type | None:
        """The return type of Function ``name``: its ``ret_type``, else the type inferred from its body."""
        func: Any = self.mod[name]
        if func.ret_type is not None:
            return cast("Type | None", func.ret_type)
        memo = self.inferred
        if name in memo:
            return memo[name]
        # Post-order over the functions without ret_type that `name` reaches through calls, so each is
        # inferred after its callees. A function that reaches a call cycle among them gets no type (None):
        # the same answer whichever function is asked about first.
        stack: list[tuple[str, Any]] = [(name, iter(self._untyped_callees(name)))]
        on_stack = {name}
        while stack:
            fname, callees = stack[-1]
            callee = next(callees, None)
            if callee is None:
                stack.pop()
                on_stack.discard(fname)
                memo[fname] = self._infer_quietly(fname)
            elif callee in on_stack or callee in self.cyclic:
                for f, _ in stack:
                    memo[f] = None
                    self.cyclic.add(f)
                stack.clear()
            elif callee not in memo:
                stack.append((callee, iter(self._untyped_callees(callee))))
                on_stack.add(callee)
        return memo[name]

    def _untyped_callees(self, name: str) -> list[str]:
        """The Functions without ret_type that ``name`` calls, in first-call order."""
        found: dict[str, None] = {}
        func: Any = self.mod[name]
        stack: list[Any] = [func.body]
        while stack:
            node = stack.pop()
            kind = type(node)
            if kind is Call:
                op = node.op
                if type(op) is GlobalVar and op.name_hint in self.mod:
                    callee = self.mod[op.name_hint]
                    if type(callee) is Function and callee.ret_type is None:
                        found[op.name_hint] = None
                stack.extend(reversed(node.args))
            elif kind is Binding:
                stack.append(node.value)
            elif kind is not Var and kind is not Constant:
                stack.extend(reversed(list(node.children())))
        return list(found)

    def _infer_quietly(self, name: str) -> Type | None:
        """The type of Function ``name``'s body, or None when it is ill-typed or unknown."""
        func = self.mod[name]
        assert isinstance(func, Function)
        try:
            return _TypeInferrer(name, self).infer(func).ret_type
        except (TypeError, KeyError):
            return None


class _TypeInferrer(ExprMutator):
    """Infers the types of one function. ``types`` maps a variable id to its type (None: unknown).

    ``annotated`` counts the bindings without a type that got one (read by the pass only for the
    function it transforms: the inferrers that type callees for their return types count nothing).
    """

    def __init__(self, name: str | None, signatures: _Signatures) -> None:
        super().__init__()
        self.name = name  # None: looked up in the module if an error needs it
        self.func: Function | None = None
        self.signatures = signatures
        self.types: dict[int, Type | None] = {}
        self.if_types: dict[int, Type | None] = {}  # id of an If (as rewritten) -> its type
        self.keep: list[If] = []  # keeps those Ifs alive, so their ids stay theirs
        self.binding: Binding | None = None  # the binding being typed, for error messages
        self.annotated = 0

    def infer(self, func: Function) -> Function:
        self.func = func
        for param in func.params:
            self.types[param.var.vid] = param.ty
        new = self.visit_function(func)
        self.binding = None
        body_ty = self.type_of(new.body.body)
        if body_ty is None or body_ty == new.ret_type:
            return new
        if new.ret_type is not None:
            raise self.error(
                f"the function's ret_type is {format_type(new.ret_type)} but its result has type {format_type(body_ty)}"
            )
        return msgspec.structs.replace(new, ret_type=body_ty)

    def error(self, detail: str) -> TypeInferenceError:
        b = self.binding
        where = f"binding %{b.var.name_hint} (vid {b.var.vid})" if b is not None else "the result expression"
        name = self.name
        if name is None:
            assert self.func is not None
            name = self.signatures.name_of(self.func)
        return TypeInferenceError(f"InferType: function {name!r}, {where}: {detail}")

    # ------------------------------------------------------------ bindings and Ifs

    def visit_binding(self, binding: Binding) -> Binding:
        outer, self.binding = self.binding, binding
        value: Any = binding.value
        new = value
        kind = type(value)
        # Fast paths for A-normal form; a nested value is visited first (its Ifs' blocks get typed).
        if kind is Call and (arg_types := self.leaf_types(value.args)) is not None:
            inferred = self.call_type(value, arg_types)
        elif kind is Var:
            inferred = self.var_type(value)
        else:
            if not _is_flat(value):
                new = self.visit_expr(value)
            inferred = self.type_of(new)
        ty = binding.ty
        if ty is None:
            ty = inferred
            if ty is not None:
                self.annotated += 1
        elif inferred is not None and inferred != ty:
            raise self.error(
                f"the binding is annotated {format_type(ty)} but its value has type {format_type(inferred)}"
            )
        self.types[binding.var.vid] = ty
        self.binding = outer
        if new is value and ty is binding.ty:
            return binding
        return Binding(binding.var, new, ty)

    def leaf_types(self, args: tuple[Expr, ...]) -> list[Type | None] | None:
        """The types of ``args`` if they are all variables and constants, else None."""
        types = self.types
        out: list[Type | None] = []
        for arg in args:
            if type(arg) is Var:
                ty = types.get(arg.vid, _UNDEFINED)
                if ty is _UNDEFINED:
                    self.var_type(arg)  # raises the error
            elif type(arg) is Constant:
                ty = TensorType(tuple(arg.shape), arg.dtype)
            else:
                return None
            out.append(ty)
        return out

    @post_order
    def visit_if_(self, op: If) -> Expr:
        new = super().visit_if_(op)
        assert type(new) is If
        cond_ty = self.type_of(new.cond)
        if cond_ty is not None and not _is_scalar(cond_ty, "bool"):
            raise self.error(f"the If condition must be a bool scalar, got {format_type(cond_ty)}")
        then_ty, else_ty = self.type_of(new.then_branch.body), self.type_of(new.else_branch.body)
        if then_ty is not None and else_ty is not None and then_ty != else_ty:
            raise self.error(
                f"the If branches have different types: then {format_type(then_ty)}, else {format_type(else_ty)}"
            )
        self.if_types[id(new)] = then_ty if then_ty == else_ty else None
        self.keep.append(new)
        return new

    # ------------------------------------------------------------ expressions

    def type_of(self, expr: Expr) -> Type | None:
        """The type of ``expr`` (None when unknown); nested Ifs must have been visited already."""
        if type(expr) is Var:
            return self.var_type(expr)
        if type(expr) is Call and (arg_types := self.leaf_types(expr.args)) is not None:
            return self.call_type(expr, arg_types)
        if type(expr) is TupleGetItem and type(expr.tuple_value) is Var:
            return self.item_type(expr, self.var_type(expr.tuple_value))
        return self.nested_type(expr)

    def nested_type(self, expr: Expr) -> Type | None:
        """The type of any expression: the types of its nodes, operands first."""
        done: dict[int, Type | None] = {}
        for node in _operands_first(expr):
            done[id(node)] = self.node_type(node, done)
        return done[id(expr)]

    def node_type(self, node: Expr, done: dict[int, Type | None]) -> Type | None:
        """The type of ``node``, given the types of its operands in ``done`` (by id)."""
        if isinstance(node, Var):
            return self.var_type(node)
        if isinstance(node, Constant):
            return TensorType(tuple(node.shape), node.dtype)
        if isinstance(node, Call):
            return self.call_type(node, [done[id(a)] for a in node.args])
        if isinstance(node, TupleGetItem):
            return self.item_type(node, done[id(node.tuple_value)])
        if isinstance(node, Tuple):
            fields = [t for t in (done[id(f)] for f in node.fields) if t is not None]
            return TupleType(tuple(fields)) if len(fields) == len(node.fields) else None
        if isinstance(node, If):
            return self.if_types[id(node)]
        raise self.error(f"@{node.name_hint} is used as a value; module functions can only be called")

    def var_type(self, var: Var) -> Type | None:
        ty = self.types.get(var.vid, _UNDEFINED)
        if ty is _UNDEFINED:
            raise self.error(f"%{var.name_hint} (vid {var.vid}) is used before it is defined")
        return cast("Type | None", ty)

    def item_type(self, item: TupleGetItem, tuple_ty: Type | None) -> Type | None:
        if tuple_ty is None:
            return None
        if not isinstance(tuple_ty, TupleType):
            raise self.error(f"projection [{item.index}] of a value of type {format_type(tuple_ty)}, not a tuple")
        if not 0 <= item.index < len(tuple_ty.fields):
            raise self.error(f"projection [{item.index}] is out of range for {format_type(tuple_ty)}")
        return tuple_ty.fields[item.index]

    def call_type(self, call: Call, arg_types: list[Type | None]) -> Type | None:
        """The type of ``call`` given the types of its arguments (None: unknown); checks the arguments."""
        callee = call.op
        if not isinstance(callee, Op):
            return self.module_call_type(callee.name_hint, arg_types)
        if None in arg_types:
            return None
        attrs = call.attrs
        # Most calls repeat a signature seen before: the memo lookup stays on this path.
        key = (callee.name, *arg_types, _ATTRS_ENCODER.encode(attrs) if attrs else b"")
        ty = self.signatures.op_types.get(key)
        return ty if ty is not None else self.apply_type_rule(callee, arg_types, attrs, key)

    def apply_type_rule(self, op: Op, arg_types: list[Type | None], attrs: Attrs, key: tuple[Any, ...]) -> Type | None:
        """The type ``op``'s type rule gives (remembered under ``key``), or None if it has no rule."""
        rule = get_op(op.name).infer_type
        if rule is None:
            return None
        try:
            ty = rule(arg_types, attrs)
        except TypeError as err:
            raise self.error(str(err)) from err
        self.signatures.op_types[key] = ty
        return ty

    def module_call_type(self, name: str, arg_types: list[Type | None]) -> Type | None:
        """The type of a call of module function ``name``; checks the arguments."""
        try:
            func = self.signatures.callee(name)
        except KeyError:
            raise self.error(f"calls @{name}, which is not a function of the module") from None
        if isinstance(func, PrimFunc):
            return self.prim_call_type(name, func, arg_types)
        return self.function_call_type(name, func, arg_types)

    def function_call_type(self, name: str, func: Function, arg_types: list[Type | None]) -> Type | None:
        """The return type of Function ``name``; checks the arguments against its parameters."""
        params = func.params
        if len(arg_types) != len(params):
            raise self.error(f"@{name} takes {len(params)} argument(s), got {len(arg_types)}")
        for k, (param, ty) in enumerate(zip(params, arg_types, strict=True)):
            if ty is not None and ty != param.ty:
                raise self.error(
                    f"argument {k} of the call of @{name} has type {format_type(ty)}, "
                    f"but parameter %{param.var.name_hint} expects {format_type(param.ty)}"
                )
        return self.signatures.return_type(name)

    def prim_call_type(self, name: str, func: PrimFunc, arg_types: list[Type | None]) -> Type | None:
        """The type of a destination-passing call of PrimFunc ``name``; checks the inputs."""
        params = func.params
        if len(arg_types) > len(params):
            raise self.error(f"PrimFunc @{name} has {len(params)} parameter(s), got {len(arg_types)} argument(s)")
        for k, (param, ty) in enumerate(zip(params, arg_types, strict=False)):
            if ty is None:
                continue
            if isinstance(param, tir.Var):
                ok = _is_scalar(ty, param.dtype)
                want = f"a {param.dtype} scalar"
            else:
                expected = _buffer_type(param)
                ok = expected is None or ty == expected
                want = format_type(expected) if expected is not None else param.dtype
            if not ok:
                raise self.error(
                    f"argument {k} of the call of PrimFunc @{name} has type {format_type(ty)}, expected {want}"
                )
        outputs: list[Type] = []
        for param in params[len(arg_types) :]:
            if not isinstance(param, tir.Buffer):
                raise self.error(
                    f"the call of PrimFunc @{name} gives no argument for scalar parameter {param.name_hint}"
                )
            out = _buffer_type(param)
            if out is None:
                return None
            outputs.append(out)
        return outputs[0] if len(outputs) == 1 else TupleType(tuple(outputs))


def _buffer_type(buffer: tir.Buffer) -> TensorType | None:
    """The tensor type a buffer parameter stands for in a dataflow call (None if its shape is symbolic)."""
    dims = []
    for dim in buffer.shape:
        if type(dim) is not tir.IntImm:
            return None
        dims.append(int(dim.value))
    return TensorType(tuple(dims), buffer.dtype)


@dataclass(frozen=True)
class InferType(FunctionTransform):
    """The InferType pass (function level, opt_level 0): fills in and checks binding and return types.

    Runs :class:`_TypeInferrer` on every function; the return types it infers are remembered for the module
    of one pass run (see :class:`~parpass.passes.module_memo.ModuleMemo`).
    """

    name: ClassVar[str] = "InferType"
    reads_other_functions: ClassVar[bool] = True  # its callees' signatures
    opt_level: ClassVar[int] = 0

    _signatures: ModuleMemo[_Signatures] = field(
        default_factory=lambda: ModuleMemo(_Signatures), init=False, repr=False, compare=False
    )

    def transform_function(self, func: Function, mod: IRModule, ctx: PassContext) -> Function:
        inferrer = _TypeInferrer(None, self._signatures.of(mod))
        out = inferrer.infer(func)
        if inferrer.annotated:
            ANNOTATED.add(inferrer.annotated)
        if func.ret_type is None and out.ret_type is not None:
            RET_TYPES.add(1)
        return out
