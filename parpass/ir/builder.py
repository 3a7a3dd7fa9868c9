"""Builders that make writing IR in Python pleasant: tests, examples and passes use them.

Dataflow functions (:class:`FunctionBuilder`, in the spirit of TVM's ``BlockBuilder``):
parameters and bindings are emitted in order and each returns its variable; the
builder checks that ops exist and get the right number of arguments, that every
variable used was defined in this builder (and is in scope), and fills in binding
types from the op registry's type rules when the argument types are known::

    from parpass.ir import PrimType, TensorType
    from parpass.ir.builder import FunctionBuilder, call, const

    fb = FunctionBuilder("main", attrs={"global_symbol": "main"})
    x = fb.param("x", TensorType((4, 4), "float32"))
    p = fb.param("p", PrimType("bool"))
    y = fb.emit(call("add", x, const(1.0, "float32")), name="y")   # y: Tensor((4, 4), "float32")
    branch = fb.if_(p, name="r")
    with branch as (then, else_):
        with then:
            then.yield_(fb.emit(call("relu", y)))
        with else_:
            else_.yield_(y)
    func = fb.finish(branch.var)                                    # a relax.Function

Loop-level functions (:class:`PrimFuncBuilder`): parameters are declared with
:meth:`~PrimFuncBuilder.buffer` and :meth:`~PrimFuncBuilder.var`; loops, lets,
allocations and conditionals are context managers that collect the statements
made inside them::

    from parpass.ir import tir
    from parpass.ir.builder import PrimFuncBuilder

    pb = PrimFuncBuilder("scale", attrs={"global_symbol": "scale"})
    A = pb.buffer("A", (16, 16), "float32")
    B = pb.buffer("B", (16, 16), "float32")
    n = pb.var("n", "int32")
    with pb.for_range("i", 16) as i:                          # i in range(16)
        with pb.for_range("j", 0, 16, kind="vectorized") as j:
            with pb.if_then_else(tir.lt(i, n)):
                pb.store(B, (i, j), A[i, j] * 2.0)
            with pb.else_():
                pb.store(B, (i, j), 0.0)
    func = pb.finish()                                        # a tir.PrimFunc

Variable ids come from the builder's :class:`~parpass.ir.ids.IdSupply` (fresh from 0,
or one you pass in, e.g. ``IdSupply.for_function(old_func)`` in a pass), never from a
process-wide counter, so building the same IR twice gives identical functions.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Union, cast

from parpass.errors import IRError, closest_names, format_names
from parpass.ir import relax, tir
from parpass.ir.ids import IdSupply
from parpass.ir.node import AttrValue, GlobalVar, Node, Op
from parpass.ir.op import get_op
from parpass.ir.printer import format_literal
from parpass.ir.types import PrimType, TensorType, TupleType, Type

__all__ = [
    "BuilderError",
    "FunctionBuilder",
    "IfBranch",
    "IfBuilder",
    "PrimFuncBuilder",
    "call",
    "const",
    "getitem",
    "tuple_",
]

_EXPR_TYPES = (relax.Var, relax.Constant, relax.Tuple, relax.TupleGetItem, relax.Call, relax.If, GlobalVar)
_TYPE_TYPES = (TensorType, PrimType, TupleType)


class BuilderError(IRError):
    """A builder used inconsistently: a variable from elsewhere, a wrong arity, finishing twice, ..."""


# ---------------------------------------------------------------- dataflow helpers


def _check_expr(value: object, what: str) -> relax.Expr:
    if not isinstance(value, _EXPR_TYPES):
        hint = "; wrap numbers and arrays with const(value, dtype)" if not isinstance(value, Node) else ""
        raise TypeError(f"{what} must be a dataflow expression, got {type(value).__name__} {value!r}{hint}")
    return value


def _check_arity(op_name: str, nargs: int) -> None:
    info = get_op(op_name)  # NameNotFoundError naming the closest ops
    if info.num_inputs is not None and info.num_inputs != nargs:
        plural = "argument" if info.num_inputs == 1 else "arguments"
        raise BuilderError(f"op {op_name!r} takes {info.num_inputs} {plural}, got {nargs}")


def call(op: str | Op | GlobalVar, /, *args: relax.Expr, **attrs: AttrValue) -> relax.Call:
    """A call of registered op ``op`` (a name or :class:`Op`) or of module function ``op`` (a GlobalVar).

    Keyword arguments become the call's attributes. Raises a KeyError naming the
    closest ops for an unknown op, and :class:`BuilderError` for a wrong number of
    arguments.
    """
    if isinstance(op, str):
        _check_arity(op, len(args))
        callee: Op | GlobalVar = Op(op)
    elif isinstance(op, Op):
        _check_arity(op.name, len(args))
        callee = op
    elif isinstance(op, GlobalVar):
        callee = op
    else:
        raise TypeError(f"call(): the callee must be an op name, an Op or a GlobalVar, got {type(op).__name__}")
    name = callee.name if isinstance(callee, Op) else f"@{callee.name_hint}"
    for i, arg in enumerate(args):
        _check_expr(arg, f"argument {i} of the call of {name}")
    if attrs:
        format_literal(attrs, f"attributes of the call of {name}")  # plain data only
    return relax.Call(callee, tuple(args), dict(attrs))


def const(value: Any, dtype: str | None = None) -> relax.Constant:
    """A tensor constant holding ``value`` (a number, nested list or numpy array) as ``dtype``."""
    return relax.Constant.from_value(value, dtype)


def tuple_(*fields: relax.Expr) -> relax.Tuple:
    """A tuple of the given expressions."""
    for i, f in enumerate(fields):
        _check_expr(f, f"tuple field {i}")
    return relax.Tuple(tuple(fields))


def getitem(tup: relax.Expr, index: int) -> relax.TupleGetItem:
    """Field ``index`` of tuple ``tup``."""
    _check_expr(tup, "the tuple of getitem")
    if not isinstance(index, int) or isinstance(index, bool):
        raise TypeError(f"getitem(): the index must be an int, got {type(index).__name__} {index!r}")
    return relax.TupleGetItem(tup, index)


# ---------------------------------------------------------------- FunctionBuilder


class _Scope:
    """A block being built: its bindings and the variables it defines."""

    __slots__ = ("bindings", "defined", "label", "types")

    def __init__(self, label: str) -> None:
        self.label = label
        self.bindings: list[relax.Binding] = []
        self.defined: dict[int, relax.Var] = {}
        self.types: dict[int, Type | None] = {}


class IfBranch:
    """One branch of an :class:`IfBuilder`: a context manager; emits inside it go to the branch."""

    def __init__(self, owner: IfBuilder, label: str) -> None:
        self._owner = owner
        self._label = label
        self._scope: _Scope | None = None
        self._entered = False
        self.result: relax.Expr | None = None
        self.seq: relax.SeqExpr | None = None

    def __enter__(self) -> IfBranch:
        fb = self._owner._fb
        fb._check_open()
        if self._entered:
            raise BuilderError(f"the {self._label} branch of {self._owner._label} was already built")
        if not fb._frames or fb._frames[-1] is not self._owner:
            raise BuilderError(f"enter the {self._label} branch directly inside `with` of {self._owner._label}")
        self._entered = True
        self._scope = _Scope(f"the {self._label} branch of {self._owner._label}")
        fb._frames.append(self._scope)
        return self

    def yield_(self, value: relax.Expr) -> None:
        """Set the value this branch yields (once, as the branch's last step)."""
        fb = self._owner._fb
        if self._scope is None or not fb._frames or fb._frames[-1] is not self._scope:
            raise BuilderError(f"yield_() of the {self._label} branch of {self._owner._label} outside that branch")
        if self.result is not None:
            raise BuilderError(f"the {self._label} branch of {self._owner._label} already yielded")
        fb._check_uses(_check_expr(value, f"the value yielded by the {self._label} branch"), self._scope.label)
        self.result = value

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        fb = self._owner._fb
        if fb._frames and fb._frames[-1] is self._scope:
            fb._frames.pop()
        if exc_type is not None:
            return
        if self.result is None:
            raise BuilderError(f"the {self._label} branch of {self._owner._label} yields nothing: call yield_(expr)")
        assert self._scope is not None
        self.seq = relax.SeqExpr(tuple(self._scope.bindings), self.result)

    def result_type(self) -> Type | None:
        assert self._scope is not None and self.result is not None
        fb = self._owner._fb
        fb._frames.append(self._scope)  # the branch's own variables are visible to its result
        try:
            return fb.type_of(self.result)
        finally:
            fb._frames.pop()


class IfBuilder:
    """Builds ``var = if cond { ... } else { ... }``; made by :meth:`FunctionBuilder.if_`.

    Use it as a context manager that unpacks into its two branches, each itself a
    context manager that ends with ``branch.yield_(value)``. When the outer ``with``
    closes, the If binding is emitted; its variable is :attr:`var`.
    """

    def __init__(self, fb: FunctionBuilder, cond: relax.Expr, var: relax.Var, ty: Type | None) -> None:
        self._fb = fb
        self._cond = cond
        self._ty = ty
        self._entered = False
        self._label = f"if %{var.name_hint}"
        self.var = var
        self.then = IfBranch(self, "then")
        self.else_ = IfBranch(self, "else")

    def __enter__(self) -> IfBuilder:
        self._fb._check_open()
        if self._entered:
            raise BuilderError(f"{self._label} was already built")
        self._entered = True
        self._fb._frames.append(self)
        return self

    def __iter__(self) -> Iterator[IfBranch]:
        return iter((self.then, self.else_))

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        fb = self._fb
        if fb._frames and fb._frames[-1] is self:
            fb._frames.pop()
        if exc_type is not None:
            return
        for branch in (self.then, self.else_):
            if branch.seq is None:
                raise BuilderError(f"{self._label}: the {branch._label} branch was not built")
        assert self.then.seq is not None and self.else_.seq is not None
        ty = self._ty
        if ty is None and fb.infer_types:
            then_ty, else_ty = self.then.result_type(), self.else_.result_type()
            ty = then_ty if then_ty is not None and then_ty == else_ty else None
        fb._bind(self.var, relax.If(self._cond, self.then.seq, self.else_.seq), ty)


class FunctionBuilder:
    """Builds a dataflow :class:`~parpass.ir.relax.Function` binding by binding (see the module docstring).

    ``name`` is used in error messages and for :attr:`global_var`; ``attrs`` and
    ``ret_type`` go on the function. ``ids`` supplies variable ids (a fresh supply
    from 0 by default). With ``infer_types`` (the default), bindings get the type
    the op registry's rule gives when every argument type is known; a rule that
    rejects the arguments raises its TypeError, naming the binding.
    """

    def __init__(
        self,
        name: str | None = None,
        *,
        attrs: Mapping[str, AttrValue] | None = None,
        ret_type: Type | None = None,
        ids: IdSupply | None = None,
        infer_types: bool = True,
    ) -> None:
        self.name = name
        self.attrs: dict[str, AttrValue] = dict(attrs or {})
        if self.attrs:
            format_literal(self.attrs, f"attrs of {self._what()}")
        self.ret_type = ret_type
        self.ids = ids if ids is not None else IdSupply()
        self.infer_types = infer_types
        self._params: list[relax.Param] = []
        self._root = _Scope(self._what())
        self._frames: list[_Scope | IfBuilder] = [self._root]
        self._finished = False

    # ------------------------------------------------------------ helpers (also as module functions)

    call = staticmethod(call)
    const = staticmethod(const)
    tuple_ = staticmethod(tuple_)
    getitem = staticmethod(getitem)

    def _what(self) -> str:
        return f"FunctionBuilder {self.name!r}" if self.name else "FunctionBuilder"

    @property
    def global_var(self) -> GlobalVar:
        """``GlobalVar(name)``, for calls to the function being built (e.g. recursion)."""
        if not self.name:
            raise BuilderError("this FunctionBuilder has no name, so it has no GlobalVar")
        return GlobalVar(self.name)

    # ------------------------------------------------------------ scopes

    def _check_open(self) -> None:
        if self._finished:
            raise BuilderError(f"{self._what()} was already finished; start a new builder")

    def _current(self, action: str) -> _Scope:
        self._check_open()
        top = self._frames[-1]
        if isinstance(top, IfBuilder):
            raise BuilderError(
                f"{action} directly inside `with` of {top._label}: do it inside `with then:` or `with else_:`"
            )
        return top

    def _lookup(self, var: relax.Var) -> _Scope | None:
        for frame in reversed(self._frames):
            if isinstance(frame, _Scope):
                found = frame.defined.get(var.vid)
                if found is not None:
                    return frame if found == var else None
        return None

    def _visible(self) -> list[str]:
        names: list[str] = []
        for frame in self._frames:
            if isinstance(frame, _Scope):
                names.extend(v.name_hint for v in frame.defined.values())
        return names

    def _check_uses(self, expr: relax.Expr, where: str) -> None:
        """Every variable used in ``expr`` (and not bound inside it) is in scope; ops are valid."""
        bound: set[int] = set()
        seen: set[int] = set()
        stack: list[Any] = [expr]
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            t = type(node)
            if t is relax.Var:
                if node.vid not in bound and self._lookup(node) is None:
                    visible = self._visible()
                    near = closest_names(node.name_hint, visible)
                    raise BuilderError(
                        f"{where}: variable %{node.name_hint} (id {node.vid}) is not defined in {self._what()} "
                        f"or not in scope here; in scope: {format_names(near, len(visible))}"
                    )
            elif t is relax.Binding:
                bound.add(node.var.vid)
                stack.append(node.value)
            elif t is relax.SeqExpr:
                stack.append(node.body)
                stack.extend(reversed(node.bindings))
            elif t is relax.Call:
                if isinstance(node.op, Op):
                    _check_arity(node.op.name, len(node.args))
                stack.extend(reversed(node.args))
            elif isinstance(node, Node):
                stack.extend(reversed(list(node.children())))
            else:
                raise TypeError(f"{where}: {type(node).__name__} {node!r} is not an IR node")

    # ------------------------------------------------------------ types

    def type_of(self, expr: relax.Expr) -> Type | None:
        """The type of ``expr`` as far as this builder knows it (None when unknown)."""
        # Iterative post-order over the (usually tiny) expression; results by node id.
        known: dict[int, Type | None] = {}
        stack: list[tuple[Any, bool]] = [(expr, False)]
        while stack:
            node, ready = stack.pop()
            if id(node) in known:
                continue
            t = type(node)
            kids: tuple[Any, ...] = ()
            if t is relax.Tuple:
                kids = node.fields
            elif t is relax.TupleGetItem:
                kids = (node.tuple_value,)
            elif t is relax.Call and isinstance(node.op, Op):
                kids = node.args
            if not ready and kids:
                stack.append((node, True))
                stack.extend((k, False) for k in kids)
                continue
            known[id(node)] = self._type_step(node, [known.get(id(k)) for k in kids])
        return known[id(expr)]

    def _type_step(self, node: Any, kid_types: list[Type | None]) -> Type | None:
        t = type(node)
        if t is relax.Var:
            frame = self._lookup(node)
            return frame.types.get(node.vid) if frame is not None else None
        if t is relax.Constant:
            return TensorType(tuple(node.shape), node.dtype)
        if t is relax.Tuple:
            return TupleType(tuple(kid_types)) if all(k is not None for k in kid_types) else None  # type: ignore[arg-type]
        if t is relax.TupleGetItem:
            tup = kid_types[0]
            if isinstance(tup, TupleType) and -len(tup.fields) <= node.index < len(tup.fields):
                return cast("Type | None", tup.fields[node.index])
            return None
        if t is relax.Call and isinstance(node.op, Op):
            rule = get_op(node.op.name).infer_type
            if rule is None or any(k is None for k in kid_types):
                return None
            return rule(kid_types, node.attrs)
        return None

    # ------------------------------------------------------------ building

    def param(self, name: str | relax.Var, ty: Type) -> relax.Var:
        """Add a parameter of type ``ty`` and return its variable (``name`` may be an existing Var)."""
        self._check_open()
        if not isinstance(ty, _TYPE_TYPES):
            raise TypeError(f"{self._what()}: the type of parameter {name!r} must be a Type, got {ty!r}")
        if isinstance(name, relax.Var):
            var = name
            if var.vid in self._root.defined:
                raise BuilderError(f"{self._what()}: variable %{var.name_hint} (id {var.vid}) is already defined")
            while self.ids.next_id <= var.vid:  # later fresh ids must not collide with it
                self.ids.fresh()
        elif isinstance(name, str):
            var = self.ids.var(name)
        else:
            raise TypeError(f"{self._what()}: a parameter name must be a str or a Var, got {type(name).__name__}")
        self._params.append(relax.Param(var, ty))
        self._root.defined[var.vid] = var
        self._root.types[var.vid] = ty
        return var

    def _bind(self, var: relax.Var, value: relax.Expr, ty: Type | None) -> None:
        scope = self._current(f"binding %{var.name_hint}")
        scope.bindings.append(relax.Binding(var, value, ty))
        scope.defined[var.vid] = var
        scope.types[var.vid] = ty

    def emit(self, value: relax.Expr, name: str = "lv", ty: Type | None = None) -> relax.Var:
        """Bind ``value`` to a new variable called ``name`` in the current block and return the variable.

        ``ty`` is the binding's type; when omitted it is inferred if possible.
        """
        scope = self._current(f"emit %{name}")
        where = f"{scope.label}, binding %{name}"
        self._check_uses(_check_expr(value, f"{where}: the value"), where)
        if ty is not None and not isinstance(ty, _TYPE_TYPES):
            raise TypeError(f"{where}: ty must be a Type, got {ty!r}")
        if ty is None and self.infer_types:
            try:
                ty = self.type_of(value)
            except TypeError as err:
                raise TypeError(f"{where}: {err}") from err
        var = self.ids.var(name)
        self._bind(var, value, ty)
        return var

    def if_(self, cond: relax.Expr, name: str = "lv", ty: Type | None = None) -> IfBuilder:
        """An :class:`IfBuilder` for ``name = if cond {...} else {...}`` (see the module docstring)."""
        scope = self._current(f"if_ %{name}")
        self._check_uses(_check_expr(cond, f"the condition of if %{name}"), f"{scope.label}, if %{name}")
        if ty is not None and not isinstance(ty, _TYPE_TYPES):
            raise TypeError(f"if %{name}: ty must be a Type, got {ty!r}")
        return IfBuilder(self, cond, self.ids.var(name), ty)

    @property
    def params(self) -> tuple[relax.Var, ...]:
        """The parameter variables so far."""
        return tuple(p.var for p in self._params)

    @property
    def bindings(self) -> tuple[relax.Binding, ...]:
        """The top-level bindings so far."""
        return tuple(self._root.bindings)

    def finish(self, ret: relax.Expr, ret_type: Type | None = None) -> relax.Function:
        """The function returning ``ret``; the builder cannot be used afterwards."""
        self._check_open()
        if len(self._frames) > 1:
            top = self._frames[-1]
            label = top._label if isinstance(top, IfBuilder) else top.label
            raise BuilderError(f"{self._what()}: cannot finish while {label} is still open")
        where = f"{self._what()}, the returned value"
        self._check_uses(_check_expr(ret, where), where)
        rtype = ret_type if ret_type is not None else self.ret_type
        if rtype is None and self.infer_types:
            rtype = self.type_of(ret)
        self._finished = True
        return relax.Function(
            tuple(self._params),
            relax.SeqExpr(tuple(self._root.bindings), ret),
            rtype,
            attrs=dict(self.attrs),
        )


# ---------------------------------------------------------------- PrimFuncBuilder

_ExprLike = Union[tir.PrimExpr, int, float, bool]


class _Block:
    """Statements collected inside one construct, and the variables and buffers it defines."""

    __slots__ = ("buffers", "label", "stmts", "vars")

    def __init__(self, label: str) -> None:
        self.label = label
        self.stmts: list[tir.Stmt] = []
        self.vars: dict[int, tir.Var] = {}
        self.buffers: dict[int, tir.Buffer] = {}


def _stmt_of(stmts: list[tir.Stmt]) -> tir.Stmt:
    return stmts[0] if len(stmts) == 1 else tir.SeqStmt(tuple(stmts))


class PrimFuncBuilder:
    """Builds a loop-level :class:`~parpass.ir.tir.PrimFunc` (see the module docstring).

    Every statement made inside a ``with`` construct becomes part of that
    construct's body; one statement stays itself, several become a SeqStmt.
    Variables and buffers used must be parameters of this builder or defined by an
    enclosing loop, let or allocation.
    """

    def __init__(
        self,
        name: str | None = None,
        *,
        attrs: Mapping[str, AttrValue] | None = None,
        ids: IdSupply | None = None,
    ) -> None:
        self.name = name
        self.attrs: dict[str, AttrValue] = dict(attrs or {})
        if self.attrs:
            format_literal(self.attrs, f"attrs of {self._what()}")
        self.ids = ids if ids is not None else IdSupply()
        self._params: list[tir.Var | tir.Buffer] = []
        self._blocks: list[_Block] = [_Block(self._what())]
        self._last_if: tuple[_Block, int, tir.IfThenElse] | None = None
        self._finished = False

    def _what(self) -> str:
        return f"PrimFuncBuilder {self.name!r}" if self.name else "PrimFuncBuilder"

    def _check_open(self) -> None:
        if self._finished:
            raise BuilderError(f"{self._what()} was already finished; start a new builder")

    # ------------------------------------------------------------ scope checks

    def _known_var(self, v: tir.Var) -> bool:
        for block in reversed(self._blocks):
            found = block.vars.get(v.vid)
            if found is not None:
                return bool(found == v)
        return False

    def _known_buffer(self, b: tir.Buffer) -> bool:
        for block in reversed(self._blocks):
            found = block.buffers.get(b.vid)
            if found is not None:
                return bool(found == b)
        return False

    def _visible(self) -> list[str]:
        names: list[str] = []
        for block in self._blocks:
            names.extend(v.name_hint for v in block.vars.values())
            names.extend(b.name for b in block.buffers.values())
        return names

    def _undefined(self, what: str, name: str, vid: int, where: str) -> BuilderError:
        visible = self._visible()
        near = closest_names(name, visible)
        return BuilderError(
            f"{where}: {what} %{name} (id {vid}) is not defined in {self._what()} or not in scope here; "
            f"in scope: {format_names(near, len(visible))}"
        )

    def _check_uses(self, root: Node, where: str) -> None:
        """Variables and buffers under ``root`` (not bound inside it) are in scope."""
        bound: set[tuple[str, int]] = set()
        seen: set[int] = set()
        stack: list[Any] = [root]
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            t = type(node)
            if t is tir.Var:
                if ("v", node.vid) not in bound and not self._known_var(node):
                    raise self._undefined("variable", node.name_hint, node.vid, where)
                continue
            if t is tir.Buffer:
                if ("b", node.vid) not in bound and not self._known_buffer(node):
                    raise self._undefined("buffer", node.name, node.vid, where)
                continue  # its shape was checked where it was declared
            # Variables bound by a statement inside ``root`` are in scope for the rest of it.
            if t is tir.For:
                bound.add(("v", node.loop_var.vid))
            elif t is tir.LetStmt:
                bound.add(("v", node.var.vid))
            elif t is tir.Allocate:
                bound.add(("b", node.buffer.vid))
            if isinstance(node, Node):
                stack.extend(reversed(list(node.children())))
            else:
                raise TypeError(f"{where}: {type(node).__name__} {node!r} is not an IR node")

    # ------------------------------------------------------------ parameters

    def var(self, name: str, dtype: str = "int32") -> tir.Var:
        """Add a scalar parameter and return its variable."""
        self._check_open()
        v = self.ids.tir_var(name, dtype)
        self._params.append(v)
        self._blocks[0].vars[v.vid] = v
        return v

    def buffer(
        self,
        name: str,
        shape: tuple[_ExprLike, ...] | list[_ExprLike],
        dtype: str = "float32",
        strides: tuple[_ExprLike, ...] | list[_ExprLike] = (),
    ) -> tir.Buffer:
        """Add a buffer parameter of ``shape`` and ``dtype`` (compact row-major unless ``strides``)."""
        self._check_open()
        buf = self._new_buffer(name, shape, dtype, strides)
        self._params.append(buf)
        self._blocks[0].buffers[buf.vid] = buf
        return buf

    def _new_buffer(
        self,
        name: str,
        shape: tuple[_ExprLike, ...] | list[_ExprLike],
        dtype: str,
        strides: tuple[_ExprLike, ...] | list[_ExprLike],
    ) -> tir.Buffer:
        if not isinstance(shape, (tuple, list)) or not isinstance(strides, (tuple, list)):
            raise TypeError(f"buffer {name!r}: shape and strides are tuples, got {shape!r} and {strides!r}")
        if strides and len(strides) != len(shape):
            raise BuilderError(f"buffer {name!r}: {len(strides)} strides for {len(shape)} dimensions")
        return self.ids.buffer(name, dtype, tuple(shape), tuple(strides))

    # ------------------------------------------------------------ statements

    def emit(self, stmt: tir.Stmt) -> tir.Stmt:
        """Append a statement built elsewhere to the current block (checking the names it uses)."""
        self._check_open()
        block = self._blocks[-1]
        self._check_uses(stmt, f"{block.label}, statement {type(stmt).__name__}")
        block.stmts.append(stmt)
        self._last_if = None
        return stmt

    def store(
        self, buffer: tir.Buffer, indices: _ExprLike | tuple[_ExprLike, ...] | list[_ExprLike], value: _ExprLike
    ) -> tir.BufferStore:
        """``buffer[indices] = value``; Python numbers become immediates of the buffer's dtype."""
        if not isinstance(buffer, tir.Buffer):
            raise TypeError(f"store(): the target must be a tir.Buffer, got {type(buffer).__name__}")
        idx = tuple(indices) if isinstance(indices, (tuple, list)) else (indices,)
        if len(idx) != len(buffer.shape):
            raise BuilderError(f"store to %{buffer.name}: {len(idx)} indices for {len(buffer.shape)} dimensions")
        stmt = buffer.store(idx, value)
        self.emit(stmt)
        return stmt

    def evaluate(self, value: _ExprLike) -> tir.Evaluate:
        """Evaluate ``value`` for its side effects."""
        stmt = tir.Evaluate(tir.convert(value))
        self.emit(stmt)
        return stmt

    @contextmanager
    def _block(self, label: str) -> Iterator[_Block]:
        """Open a block for the statements of a construct; closed on exit (also on error)."""
        self._check_open()
        block = _Block(label)
        self._blocks.append(block)
        try:
            yield block
        finally:
            if self._blocks and self._blocks[-1] is block:
                self._blocks.pop()
            self._last_if = None

    def _append(self, stmt: tir.Stmt) -> None:
        self._blocks[-1].stmts.append(stmt)
        self._last_if = None

    @contextmanager
    def for_range(
        self,
        name: str,
        start: _ExprLike,
        stop: _ExprLike | None = None,
        *,
        kind: str | tir.ForKind = "serial",
        dtype: str = "int32",
        annotations: Mapping[str, AttrValue] | None = None,
    ) -> Iterator[tir.Var]:
        """A loop over ``range(start, stop)`` (or ``range(start)``) whose body is built in the ``with``.

        ``kind`` is serial, parallel, vectorized or unrolled. Yields the loop variable.
        """
        try:
            for_kind = tir.ForKind(kind)
        except ValueError:
            kinds = ", ".join(k.value for k in tir.ForKind)
            raise BuilderError(f"for_range {name!r}: unknown loop kind {kind!r}; kinds: {kinds}") from None
        if stop is None:
            lo: tir.PrimExpr = tir.convert(0, dtype=dtype)
            extent = tir.convert(start, dtype=dtype)
        elif isinstance(start, int) and isinstance(stop, int):
            if stop < start:
                raise BuilderError(f"for_range {name!r}: stop {stop} is below start {start}")
            lo, extent = tir.convert(start, dtype=dtype), tir.convert(stop - start, dtype=dtype)
        else:
            lo = tir.convert(start, dtype=dtype)
            hi = tir.convert(stop, dtype=dtype)
            extent = hi if isinstance(start, int) and start == 0 else tir.Sub(hi, lo)
        where = f"{self._blocks[-1].label}, for_range {name!r}"
        self._check_uses(lo, where)
        self._check_uses(extent, where)
        ann = dict(annotations or {})
        if ann:
            format_literal(ann, f"annotations of loop {name!r}")
        loop_var = self.ids.tir_var(name, dtype)
        with self._block(f"loop %{name}") as block:
            block.vars[loop_var.vid] = loop_var
            yield loop_var
        self._append(tir.For(loop_var, lo, extent, for_kind, _stmt_of(block.stmts), ann))

    @contextmanager
    def let(self, name: str, value: _ExprLike, dtype: str | None = None) -> Iterator[tir.Var]:
        """``let name = value`` over the statements built in the ``with``; yields the variable."""
        val = tir.convert(value, dtype=dtype)
        self._check_uses(val, f"{self._blocks[-1].label}, let {name!r}")
        var = self.ids.tir_var(name, dtype or val.dtype)
        with self._block(f"let %{name}") as block:
            block.vars[var.vid] = var
            yield var
        self._append(tir.LetStmt(var, val, _stmt_of(block.stmts)))

    @contextmanager
    def allocate(
        self,
        name: str,
        shape: tuple[_ExprLike, ...] | list[_ExprLike],
        dtype: str = "float32",
        strides: tuple[_ExprLike, ...] | list[_ExprLike] = (),
    ) -> Iterator[tir.Buffer]:
        """Allocate a buffer for the statements built in the ``with``; yields the buffer."""
        self._check_open()
        buf = self._new_buffer(name, shape, dtype, strides)
        for dim in (*buf.shape, *buf.strides):
            self._check_uses(dim, f"{self._blocks[-1].label}, allocate {name!r}")
        with self._block(f"allocate %{name}") as block:
            block.buffers[buf.vid] = buf
            yield buf
        self._append(tir.Allocate(buf, _stmt_of(block.stmts)))

    @contextmanager
    def if_then_else(self, cond: _ExprLike) -> Iterator[None]:
        """``if cond`` with the statements built in the ``with`` as the then-branch.

        An :meth:`else_` block right after it adds the else-branch.
        """
        c = tir.convert(cond)
        self._check_uses(c, f"{self._blocks[-1].label}, if_then_else")
        with self._block("if_then_else") as block:
            yield
        stmt = tir.IfThenElse(c, _stmt_of(block.stmts), None)
        parent = self._blocks[-1]
        parent.stmts.append(stmt)
        self._last_if = (parent, len(parent.stmts) - 1, stmt)

    @contextmanager
    def else_(self) -> Iterator[None]:
        """The else-branch of the :meth:`if_then_else` block that has just closed."""
        last = self._last_if
        parent = self._blocks[-1]
        if last is None or last[0] is not parent or last[1] != len(parent.stmts) - 1:
            raise BuilderError("else_() must come right after a `with if_then_else(...)` block")
        _, index, stmt = last
        with self._block("else") as block:
            yield
        parent.stmts[index] = tir.IfThenElse(stmt.condition, stmt.then_case, _stmt_of(block.stmts))
        self._last_if = None

    # ------------------------------------------------------------ finishing

    @property
    def params(self) -> tuple[tir.Var | tir.Buffer, ...]:
        """The parameters declared so far."""
        return tuple(self._params)

    def finish(self) -> tir.PrimFunc:
        """The PrimFunc; the builder cannot be used afterwards."""
        self._check_open()
        if len(self._blocks) > 1:
            raise BuilderError(f"{self._what()}: cannot finish while {self._blocks[-1].label} is still open")
        self._finished = True
        return tir.PrimFunc(tuple(self._params), _stmt_of(self._blocks[0].stmts), attrs=dict(self.attrs))
