"""The dataflow function builder: parameters, bindings and If blocks emitted in order, checked as they come."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from parpass.ir import relax
from parpass.ir.builder.base import BuilderBase
from parpass.ir.builder.errors import BuilderError
from parpass.ir.builder.exprs import call, check_arity, check_expr, const, getitem, tuple_
from parpass.ir.ids import IdSupply
from parpass.ir.node import AttrValue, GlobalVar, Node, Op
from parpass.ir.op import get_op
from parpass.ir.types import PrimType, TensorType, TupleType, Type

__all__ = ["FunctionBuilder", "IfBranch", "IfBuilder"]

_TYPE_TYPES = (TensorType, PrimType, TupleType)


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
        fb._check_uses(check_expr(value, f"the value yielded by the {self._label} branch"), self._scope.label)
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


class FunctionBuilder(BuilderBase):
    """Builds a dataflow :class:`~parpass.ir.relax.Function` binding by binding (see the module docstring).

    ``name`` is used in error messages and for :attr:`global_var`; ``attrs`` and
    ``ret_type`` go on the function. ``ids`` supplies variable ids (a fresh supply
    from 0 by default). With ``infer_types`` (the default), bindings get the type
    the op registry's rule gives when every argument type is known; a rule that
    rejects the arguments raises its TypeError, naming the binding.
    """

    kind_name = "FunctionBuilder"

    def __init__(
        self,
        name: str | None = None,
        *,
        attrs: Mapping[str, AttrValue] | None = None,
        ret_type: Type | None = None,
        ids: IdSupply | None = None,
        infer_types: bool = True,
    ) -> None:
        super().__init__(name, attrs)
        self.ret_type = ret_type
        self.ids = ids if ids is not None else IdSupply()
        self.infer_types = infer_types
        self._params: list[relax.Param] = []
        self._root = _Scope(self._what())
        self._frames: list[_Scope | IfBuilder] = [self._root]

    # ------------------------------------------------------------ helpers (also as module functions)

    call = staticmethod(call)
    const = staticmethod(const)
    tuple_ = staticmethod(tuple_)
    getitem = staticmethod(getitem)

    @property
    def global_var(self) -> GlobalVar:
        """``GlobalVar(name)``, for calls to the function being built (e.g. recursion)."""
        if not self.name:
            raise BuilderError("this FunctionBuilder has no name, so it has no GlobalVar")
        return GlobalVar(self.name)

    # ------------------------------------------------------------ scopes

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
                    raise self._undefined("variable", node.name_hint, node.vid, where)
            elif t is relax.Binding:
                bound.add(node.var.vid)
                stack.append(node.value)
            elif t is relax.SeqExpr:
                stack.append(node.body)
                stack.extend(reversed(node.bindings))
            elif t is relax.Call:
                if isinstance(node.op, Op):
                    check_arity(node.op.name, len(node.args))
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
            fields = [k for k in kid_types if k is not None]
            return TupleType(tuple(fields)) if len(fields) == len(kid_types) else None
        if t is relax.TupleGetItem:
            tup = kid_types[0]
            index: int = node.index
            if isinstance(tup, TupleType) and -len(tup.fields) <= index < len(tup.fields):
                return tup.fields[index]
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
        self._check_uses(check_expr(value, f"{where}: the value"), where)
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
        self._check_uses(check_expr(cond, f"the condition of if %{name}"), f"{scope.label}, if %{name}")
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
        self._check_uses(check_expr(ret, where), where)
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
