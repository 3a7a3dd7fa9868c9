"""Visitors and mutators of the dataflow IR: :class:`ExprVisitor` and :class:`ExprMutator`.

They follow TVM's Python ``relax.PyExprVisitor`` / ``PyExprMutator``:
``visit_expr(expr)`` dispatches on the node's type to one handler per node
class (``visit_var_``, ``visit_constant_``, ``visit_tuple_``,
``visit_tuple_getitem_``, ``visit_call_``, ``visit_if_``, ``visit_global_var_``,
``visit_op_``), and ``visit_binding``, ``visit_seq_expr``, ``visit_function``,
``visit_var_def`` and ``visit_type`` handle the rest. Override the handlers you
need; call ``super().visit_call_(op)`` (or ``self.visit_expr(child)``) for the
default behaviour. A mutator's handlers return the new node, or the very same
object when nothing under it changed, so an untouched function costs no
allocation.

Dispatch goes through a table built once per class (node type -> handler), not
through ``isinstance`` chains.

Traversal order and deep IR
---------------------------
Python allows about a thousand nested calls, and IR can be much deeper (a long
chain of ``x + 1 + 1 + ...``, a long statement nest). So ``visit_expr(e)`` does
not recurse per level. It first runs, with an explicit stack, the handlers of
the *composite* nodes under ``e`` that have not been visited yet, in post-order,
left to right (field order), each exactly once; then it runs ``e``'s handler.
When a handler asks for a child's result (``self.visit_expr(child)``, or
through ``super()``), a composite child's result is already in the memo and
comes back at once, and a *leaf* child (a variable, constant, op or global
var) is visited right then. So handlers keep TVM's natural style and the
default traversal never recurses per level of nesting.

What is pre-visited, for the dataflow IR: the fields of ``Tuple``, the tuple of
``TupleGetItem``, the arguments of ``Call`` and the condition of ``If``. The
bindings of a :class:`SeqExpr` are visited by :meth:`ExprVisitor.visit_seq_expr`
one after the other, in order: the handler of binding ``k`` (and everything it
does, such as filling ``var_remap``) runs before any part of binding ``k + 1``
is visited. ``If`` branches are visited by the ``If`` handler when it asks for
them, so nesting of ``If`` costs a few Python frames per level (about 150
levels fit in the default recursion limit of 1000); a flat function of any
length, and an expression of any depth, do not recurse at all. So that nested
``If`` blocks (and nested overridden scoped handlers, below) of any realistic
depth still work, each such nesting level raises the interpreter's recursion
limit by a fixed number of frames for as long as the outermost one runs, and
restores it afterwards (on Python 3.11 and later, where Python-to-Python calls
do not grow the C stack; on 3.10 the limit is left alone).

Scoped handlers
---------------
A few node kinds open a scope: ``If`` here; ``For``, ``IfThenElse``,
``LetStmt`` and ``Allocate`` in the loop-level IR. When a subclass overrides the
handler of such a kind, the handler runs *before* the node's children are
visited, and they are visited when it asks for them, exactly as in TVM: it can
set up context (loop ranges, bound variables, "inside a branch") or skip a
subtree. Such a handler runs with a fresh memo, so results computed under one
context never leak into another. It recurses (a few Python frames per nesting
level, for which the recursion limit is raised as described above); decorate
the override with :func:`post_order` to have its children visited first,
iteratively, when it needs no context. Default handlers and handlers of all
other kinds always see their children already visited.

Memoization
-----------
Results of composite nodes are memoized by object identity: a subexpression
object reachable twice is visited once. Leaves are not memoized: every use of a
variable goes through ``visit_var_`` (so use counts are right however the
builder shared its ``Var`` objects, and ``var_remap`` entries added at any time
take effect). The memo lives as long as the visitor, except that
``visit_function`` (and a scoped handler) works in a fresh memo of its own; a
visitor or mutator is meant for one function at a time.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

import msgspec

from parpass.ir.node import GlobalVar, Op
from parpass.ir.relax import Binding, Call, Constant, Expr, Function, If, Param, SeqExpr, Tuple, TupleGetItem, Var
from parpass.ir.types import TupleType, Type

_N = TypeVar("_N")
_R = TypeVar("_R")
__all__ = ["ExprMutator", "ExprVisitor", "post_order"]

_F = TypeVar("_F", bound=Callable[..., Any])

#: Memo marker: not visited yet.
_MISSING: Any = object()
#: Memo marker: the node's children are being visited; its handler has not run yet.
_PENDING: Any = object()


def _set_attribute(fn: Callable[..., Any], attr: str, value: object) -> None:
    """Set an attribute on a function (a bound method refuses it with AttributeError, as it should)."""
    setattr(fn, attr, value)


def _mark(fn: Callable[..., Any], attr: str) -> None:
    """Flag a handler function with ``attr`` (read back with ``getattr(fn, attr, False)``)."""
    _set_attribute(fn, attr, True)


def post_order(handler: _F) -> _F:
    """Mark an override of a scoped handler (``visit_if_``, ``visit_for_``, ...) as post-order.

    By default such an override runs before the node's children are visited, so
    that it can set up context for them (see the module docstring); that costs a
    few Python frames per nesting level. A ``@post_order`` handler instead gets
    its children visited first, iteratively, like every other handler: use it
    when the handler only needs its children's results (unrolling a loop whose
    body is already rewritten, removing an empty branch), and the IR may nest
    deeply.
    """
    if not callable(handler):
        raise TypeError(
            f"post_order marks a visitor's handler method (@post_order above def visit_if_...) and walks no IR;"
            f" got {_describe(handler)}. To walk the nodes under an expression, subclass ExprVisitor"
        )
    _mark(handler, "_parpass_post_order")
    return handler


def _default(handler: _F) -> _F:
    """Mark a handler as the library's default (its children are visited first)."""
    _mark(handler, "_parpass_default")
    return handler


def _no_kids(node: Any) -> tuple[Any, ...]:
    return ()


#: Whether nesting may raise the recursion limit: from Python 3.11 on, Python-to-Python calls do not use the
#: C stack, so a higher limit cannot overflow it (on 3.10 every Python frame is a C frame too).
_CAN_GROW_RECURSION = sys.version_info >= (3, 11)
#: Nesting levels that run under the limit as it is (a few frames each).
_FREE_LEVELS = 16
#: Python frames allowed per nesting level once the limit is raised (the library's handlers use about 6).
_FRAMES_PER_LEVEL = 32
#: Levels added to the limit at a time, so that it is not set on every level.
_GROW_LEVELS = 256


def _make_room(self: Any, level: int) -> None:
    """Make sure nesting level ``level`` of ``self``'s recursive handlers fits under the recursion limit.

    The limit is raised relative to its value when the first raise happened, not to
    the current stack depth (which cannot be read cheaply): the depth then was below
    that value, and each level adds at most :data:`_FRAMES_PER_LEVEL` frames.
    """
    if self._saved_limit is None:
        self._saved_limit = sys.getrecursionlimit()
    need = self._saved_limit + level * _FRAMES_PER_LEVEL
    if need > sys.getrecursionlimit():
        self._set_limit = need + _GROW_LEVELS * _FRAMES_PER_LEVEL
        sys.setrecursionlimit(self._set_limit)


def _restore_limit(self: Any) -> None:
    """Put back the recursion limit raised by :func:`_make_room` (unless someone changed it since)."""
    if self._set_limit is not None and sys.getrecursionlimit() == self._set_limit:
        sys.setrecursionlimit(self._saved_limit)
    self._saved_limit = self._set_limit = None


def _nested(handler: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """Wrap a handler that recurses into nested blocks so that deep nests do not hit the recursion limit."""

    def run_nested(self: Any, node: Any) -> Any:
        level = self._level + 1
        self._level = level
        if level > _FREE_LEVELS and _CAN_GROW_RECURSION:
            _make_room(self, level)
        try:
            return handler(self, node)
        finally:
            self._level = level - 1
            if level == 1 and self._saved_limit is not None:
                _restore_limit(self)

    _set_attribute(run_nested, "__wrapped__", handler)
    return run_nested


def _scoped(handler: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """Wrap an overridden scoped handler so that it runs in a fresh memo scope (and may nest deeply)."""

    def run_in_scope(self: Any, node: Any) -> Any:
        saved = self._memo, self._keep
        self._memo, self._keep = {}, []
        try:
            return handler(self, node)
        finally:
            self._memo, self._keep = saved

    _set_attribute(run_in_scope, "__wrapped__", handler)
    return _nested(run_in_scope)


def _visit_each(visit: Callable[[Any], Any], items: tuple[Any, ...]) -> tuple[Any, ...]:
    """``visit`` applied to each item, in order, once each; ``items`` itself when every result is its item."""
    n = len(items)
    if n == 1:
        x0 = items[0]
        y0 = visit(x0)
        return items if y0 is x0 else (y0,)
    if n == 2:
        x0, x1 = items
        y0 = visit(x0)
        y1 = visit(x1)
        return items if y0 is x0 and y1 is x1 else (y0, y1)
    for i, x in enumerate(items):
        y = visit(x)
        if y is not x:
            out = [*items[:i], y]
            out.extend(map(visit, items[i + 1 :]))
            return tuple(out)
    return items


def _describe(node: Any) -> str:
    if isinstance(node, msgspec.Struct):
        return f"{type(node).__module__}.{type(node).__name__} node"
    return f"{type(node).__name__} {node!r:.80}"


class _FunctorBase:
    """The traversal engine shared by the dataflow and loop-level visitors.

    An IR family configures it with class attributes:

    - ``_HANDLER_NAMES``: composite node type -> handler method name;
    - ``_LEAF_NAMES``: leaf node type -> handler method name (never memoized);
    - ``_KIDS_OF``: composite node type -> function giving the children to visit
      before the node's handler, in *reverse* field order (the stack pops them
      left to right); leaves and ``None`` among them are skipped;
    - ``_SCOPED_KINDS``: composite types whose overridden handlers run first
      (see the module docstring);
    - ``_NESTING_KINDS``: composite types whose handlers, default ones included,
      visit nested blocks recursively (the dataflow ``If``).

    ``__init_subclass__`` resolves the handlers of each class once into
    ``_dispatch`` / ``_leaf_dispatch`` / ``_kids`` tables of plain functions.
    """

    _HANDLER_NAMES: ClassVar[dict[type, str]] = {}
    _LEAF_NAMES: ClassVar[dict[type, str]] = {}
    _KIDS_OF: ClassVar[dict[type, Callable[[Any], tuple[Any, ...]]]] = {}
    _SCOPED_KINDS: ClassVar[frozenset[type]] = frozenset()
    _NESTING_KINDS: ClassVar[frozenset[type]] = frozenset()

    _dispatch: ClassVar[dict[type, Callable[[Any, Any], Any]]] = {}
    _leaf_dispatch: ClassVar[dict[type, Callable[[Any, Any], Any]]] = {}
    _kids: ClassVar[dict[type, Callable[[Any], tuple[Any, ...]]]] = {}

    _memo: dict[int, Any]
    _keep: list[Any]
    #: Nesting level of recursive handlers now running, and the recursion limit before / after raising it.
    _level: int
    _saved_limit: int | None
    _set_limit: int | None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        dispatch: dict[type, Callable[[Any, Any], Any]] = {}
        kids: dict[type, Callable[[Any], tuple[Any, ...]]] = {}
        for kind, name in cls._HANDLER_NAMES.items():
            fn = getattr(cls, name, None)
            if fn is None:
                continue
            if (
                kind in cls._SCOPED_KINDS
                and not getattr(fn, "_parpass_default", False)
                and not getattr(fn, "_parpass_post_order", False)
            ):
                dispatch[kind] = _scoped(fn)
                kids[kind] = _no_kids
            else:
                dispatch[kind] = _nested(fn) if kind in cls._NESTING_KINDS else fn
                kids[kind] = cls._KIDS_OF[kind]
        cls._dispatch = dispatch
        cls._kids = kids
        cls._leaf_dispatch = {kind: getattr(cls, name) for kind, name in cls._LEAF_NAMES.items() if hasattr(cls, name)}

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        # State lives here so that a subclass whose __init__ forgets super().__init__() still works.
        self = super().__new__(cls)
        self._memo = {}
        self._keep = []
        self._level = 0
        self._saved_limit = None
        self._set_limit = None
        return self

    def _visit(self, node: Any) -> Any:
        """The memoized entry point behind ``visit_expr`` / ``visit_stmt``."""
        leaf = self._leaf_dispatch.get(type(node))
        if leaf is not None:
            return leaf(self, node)
        r = self._memo.get(id(node), _MISSING)
        if r is _MISSING:
            return self._walk(node)
        if r is _PENDING:
            raise RuntimeError(
                f"{type(self).__name__}: {_describe(node)} was asked for while its own children were being "
                "visited (a handler visited one of its ancestors)"
            )
        return r

    def _walk(self, root: Any) -> Any:
        """Run the handlers of ``root``'s unvisited composite descendants, then ``root``'s, iteratively."""
        dispatch = self._dispatch
        if type(root) not in dispatch:
            raise TypeError(self._cannot_visit(root))
        memo = self._memo
        self._keep.append(root)  # keeps ids in the memo unique while it lives
        for c in self._kids[type(root)](root):
            if type(c) in dispatch and id(c) not in memo:
                return self._walk_stack(root)
        # fast path: nothing under the root to visit first (e.g. a call of variables)
        k = id(root)
        memo[k] = _PENDING
        try:
            r = dispatch[type(root)](self, root)
        except BaseException:
            if memo.get(k) is _PENDING:  # a nested walk that failed may have cleared it already
                del memo[k]
            raise
        memo[k] = r
        return r

    def _walk_stack(self, root: Any) -> Any:
        """:meth:`_walk` of a root with unvisited composite children: post-order, from an explicit stack."""
        dispatch = self._dispatch
        memo = self._memo
        kids_of = self._kids
        get = memo.get
        stack = [root]
        push = stack.append
        pop = stack.pop
        try:
            while stack:
                node = stack[-1]
                k = id(node)
                state = get(k, _MISSING)
                if state is _MISSING:
                    memo[k] = _PENDING
                    depth = len(stack)
                    for c in kids_of[type(node)](node):
                        if type(c) in dispatch and id(c) not in memo:
                            push(c)
                    if len(stack) != depth:
                        continue
                    pop()
                    memo[k] = dispatch[type(node)](self, node)
                elif state is _PENDING:
                    pop()
                    memo[k] = dispatch[type(node)](self, node)
                else:
                    pop()  # a second copy of a node shared under two parents
        except BaseException:
            for key in [key for key, value in memo.items() if value is _PENDING]:
                del memo[key]
            raise
        return memo[id(root)]

    def _cannot_visit(self, node: Any) -> str:
        kinds = sorted(t.__name__ for t in (*self._leaf_dispatch, *self._dispatch))
        return f"{type(self).__name__} cannot visit {_describe(node)}; it visits {', '.join(kinds)}"

    def _in_new_scope(self, fn: Callable[[_N], _R], node: _N) -> _R:
        """``fn(node)`` with a fresh memo, restored afterwards."""
        saved = self._memo, self._keep
        self._memo, self._keep = {}, []
        try:
            return fn(node)
        finally:
            self._memo, self._keep = saved


def _make_entry(name: str, doc: str) -> Callable[[Any, Any], Any]:
    """A copy of the memoized entry point under its public name (no extra call layer)."""

    def entry(self: Any, node: Any) -> Any:
        leaf = self._leaf_dispatch.get(type(node))
        if leaf is not None:
            return leaf(self, node)
        r = self._memo.get(id(node), _MISSING)
        if r is _MISSING:
            return self._walk(node)
        if r is _PENDING:
            return self._visit(node)  # raises the cycle error
        return r

    entry.__name__ = name
    entry.__qualname__ = name
    entry.__doc__ = doc
    return entry


_VISIT_EXPR_DOC = """Visit ``expr`` and return its handler's result (memoized per composite node).

Dispatches on the node type to ``visit_<kind>_``. Override it to intercept
every request for an expression's result (e.g. to substitute some
expressions before dispatch); see the module docstring for the order in
which handlers run.
"""


class _RelaxFunctor(_FunctorBase):
    """Dispatch configuration of the dataflow IR."""

    _HANDLER_NAMES = {
        Tuple: "visit_tuple_",
        TupleGetItem: "visit_tuple_getitem_",
        Call: "visit_call_",
        If: "visit_if_",
    }
    _LEAF_NAMES = {
        Var: "visit_var_",
        Constant: "visit_constant_",
        GlobalVar: "visit_global_var_",
        Op: "visit_op_",
    }
    _KIDS_OF = {
        Tuple: lambda n: n.fields[::-1],
        TupleGetItem: lambda n: (n.tuple_value,),
        Call: lambda n: n.args[::-1],
        If: lambda n: (n.cond,),
    }
    _SCOPED_KINDS = frozenset({If})
    _NESTING_KINDS = frozenset({If})

    if TYPE_CHECKING:

        def visit_expr(self, expr: Expr | Op) -> Any: ...

    else:
        visit_expr = _make_entry("visit_expr", _VISIT_EXPR_DOC)


class ExprVisitor(_RelaxFunctor):
    """Walks dataflow IR without changing it (TVM's ``relax.ExprVisitor``).

    Handlers return nothing. The defaults visit every child: an analysis
    overrides the handlers of the nodes it cares about and calls ``super()`` to
    keep walking. Entry points: :meth:`visit_function`, :meth:`visit_seq_expr`,
    :meth:`visit_binding`, :meth:`visit_expr`. Deep-IR behaviour, traversal
    order and memoization are described in :mod:`parpass.ir.expr_functor`.

    Example: count the uses of each variable::

        class CountUses(ExprVisitor):
            def __init__(self) -> None:
                self.uses: dict[int, int] = {}

            def visit_var_(self, op: Var) -> None:
                self.uses[op.vid] = self.uses.get(op.vid, 0) + 1
    """

    # ---------------------------------------------------------------- leaves

    @_default
    def visit_var_(self, op: Var) -> None:
        """A use of a variable (binding sites go to :meth:`visit_var_def`)."""

    @_default
    def visit_constant_(self, op: Constant) -> None:
        """A tensor constant."""

    @_default
    def visit_global_var_(self, op: GlobalVar) -> None:
        """A reference to a module function, e.g. the callee of a :class:`Call`."""

    @_default
    def visit_op_(self, op: Op) -> None:
        """A reference to a registered operator, the callee of a :class:`Call`."""

    # ---------------------------------------------------------------- composites

    @_default
    def visit_tuple_(self, op: Tuple) -> None:
        visit = self.visit_expr
        for f in op.fields:
            visit(f)

    @_default
    def visit_tuple_getitem_(self, op: TupleGetItem) -> None:
        self.visit_expr(op.tuple_value)

    @_default
    def visit_call_(self, op: Call) -> None:
        visit = self.visit_expr
        visit(op.op)
        for a in op.args:
            visit(a)

    @_default
    def visit_if_(self, op: If) -> None:
        self.visit_expr(op.cond)
        self.visit_seq_expr(op.then_branch)
        self.visit_seq_expr(op.else_branch)

    # ---------------------------------------------------------------- blocks and functions

    @_default
    def visit_var_def(self, var: Var) -> None:
        """A variable at its definition: a binding's ``var`` or a parameter."""

    @_default
    def visit_type(self, ty: Type) -> None:
        """A type annotation (of a parameter, a binding or a return); visits tuple fields."""
        if type(ty) is TupleType:
            for f in ty.fields:
                self.visit_type(f)

    @_default
    def visit_binding(self, binding: Binding) -> None:
        """``var = value``: visits the variable definition, the value, then the type."""
        self.visit_var_def(binding.var)
        self.visit_expr(binding.value)
        if binding.ty is not None:
            self.visit_type(binding.ty)

    @_default
    def visit_seq_expr(self, seq: SeqExpr) -> None:
        """A block: its bindings in order, then its result expression."""
        visit_binding = self.visit_binding
        for b in seq.bindings:
            visit_binding(b)
        self.visit_expr(seq.body)

    @_default
    def visit_function(self, func: Function) -> None:
        """A function: parameters (definition, then type), body, return type; in a fresh memo."""
        self._in_new_scope(self._visit_function_parts, func)

    def _visit_function_parts(self, func: Function) -> None:
        for p in func.params:
            self.visit_var_def(p.var)
            self.visit_type(p.ty)
        self.visit_seq_expr(func.body)
        if func.ret_type is not None:
            self.visit_type(func.ret_type)


class ExprMutator(_RelaxFunctor):
    """Rewrites dataflow IR (TVM's ``relax.ExprMutator``), preserving identity.

    Every handler returns the rewritten node, or the very same object when
    nothing under it changed; a rebuilt node only re-creates the path from the
    change to the root, and siblings stay the same objects. Entry points:
    :meth:`visit_function`, :meth:`visit_seq_expr`, :meth:`visit_binding`,
    :meth:`visit_expr`.

    **Variable remapping.** ``var_remap`` maps a variable id to the expression
    that replaces every later use of that variable (``visit_var_`` consults it;
    definitions are left alone). Copy propagation, for instance, drops
    ``y = x`` and records ``var_remap[y.vid] = x``. Replacements are returned as
    they are, not visited again. The map belongs to the mutator (vids are
    function-local: use one mutator per function).

    **Bindings.** :meth:`visit_binding` returns what replaces the binding in its
    block: the same :class:`Binding` (unchanged), another ``Binding``, ``None``
    to drop it, or a list (or tuple) of ``Binding``s to splice in its place (in
    order; empty drops it). Anything else is a TypeError naming the binding.

    Example: replace ``multiply(x, 1)`` by ``x``::

        class DropMulOne(ExprMutator):
            def visit_call_(self, op: Call) -> Expr:
                op = super().visit_call_(op)  # arguments rewritten first
                if isinstance(op, Call) and op.op == Op("multiply") and is_one(op.args[1]):
                    return op.args[0]
                return op
    """

    var_remap: dict[int, Expr]

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        self = super().__new__(cls, *args, **kwargs)
        self.var_remap = {}
        return self

    def __init__(self, var_remap: Mapping[int, Expr] | None = None) -> None:
        if var_remap is not None:
            self.var_remap = dict(var_remap)

    if TYPE_CHECKING:

        def visit_expr(self, expr: Expr | Op) -> Expr: ...

    # ---------------------------------------------------------------- leaves

    @_default
    def visit_var_(self, op: Var) -> Expr:
        """A use of a variable: its ``var_remap`` replacement, if any, else itself."""
        remap = self.var_remap
        if remap:
            new = remap.get(op.vid)
            if new is not None:
                return new
        return op

    @_default
    def visit_constant_(self, op: Constant) -> Expr:
        return op

    @_default
    def visit_global_var_(self, op: GlobalVar) -> Expr:
        return op

    @_default
    def visit_op_(self, op: Op) -> Op | GlobalVar:
        """The callee of a call of an operator; may return another Op or a GlobalVar."""
        return op

    # ---------------------------------------------------------------- composites

    @_default
    def visit_tuple_(self, op: Tuple) -> Expr:
        fields = _visit_each(self.visit_expr, op.fields)
        return op if fields is op.fields else Tuple(fields)

    @_default
    def visit_tuple_getitem_(self, op: TupleGetItem) -> Expr:
        value = self.visit_expr(op.tuple_value)
        if value is op.tuple_value:
            return op
        return TupleGetItem(value, op.index)

    @_default
    def visit_call_(self, op: Call) -> Expr:
        # visit_op_ and visit_global_var_ give a callee back
        callee = cast("Op | GlobalVar", self.visit_expr(op.op))
        args = _visit_each(self.visit_expr, op.args)
        if callee is op.op and args is op.args:
            return op
        return Call(callee, args, op.attrs)

    @_default
    def visit_if_(self, op: If) -> Expr:
        cond = self.visit_expr(op.cond)
        then_branch = self.visit_seq_expr(op.then_branch)
        else_branch = self.visit_seq_expr(op.else_branch)
        if cond is op.cond and then_branch is op.then_branch and else_branch is op.else_branch:
            return op
        return If(cond, then_branch, else_branch)

    # ---------------------------------------------------------------- blocks and functions

    @_default
    def visit_var_def(self, var: Var) -> Var:
        """A variable at its definition (binding or parameter); returns it unchanged by default."""
        return var

    @_default
    def visit_type(self, ty: Type) -> Type:
        """A type annotation; the default rebuilds a tuple type only if a field changed."""
        if type(ty) is TupleType:
            fields = _visit_each(self.visit_type, ty.fields)
            return ty if fields is ty.fields else TupleType(fields)
        return ty

    @_default
    def visit_binding(self, binding: Binding) -> Binding | list[Binding] | tuple[Binding, ...] | None:
        """``var = value``; returns the binding(s) that replace it (see the class docstring)."""
        var = self.visit_var_def(binding.var)
        value = self.visit_expr(binding.value)
        ty = binding.ty
        new_ty = None if ty is None else self.visit_type(ty)
        if var is binding.var and value is binding.value and new_ty is ty:
            return binding
        return Binding(var, value, new_ty)

    @_default
    def visit_seq_expr(self, seq: SeqExpr) -> SeqExpr:
        """A block: each binding in order through :meth:`visit_binding`, then the result expression."""
        visit_binding = self.visit_binding
        out: list[Binding] = []
        append = out.append
        changed = False
        for b in seq.bindings:
            r = visit_binding(b)
            if r is b:
                append(b)
                continue
            changed = True
            if r is None:
                continue
            if type(r) is Binding:
                append(r)
            elif isinstance(r, (list, tuple)):
                for item in r:
                    if type(item) is not Binding:
                        raise TypeError(self._bad_binding_result(b, item, "a list holding "))
                    append(item)
            else:
                raise TypeError(self._bad_binding_result(b, r, ""))
        body = self.visit_expr(seq.body)
        if not changed and body is seq.body:
            return seq
        return SeqExpr(tuple(out), body)

    def _bad_binding_result(self, b: Binding, got: Any, where: str) -> str:
        return (
            f"{type(self).__name__}.visit_binding must return a Binding, None or a list of Bindings; "
            f"for the binding of %{b.var.name_hint} (vid {b.var.vid}) it returned {where}{_describe(got)}"
        )

    @_default
    def visit_function(self, func: Function) -> Function:
        """A function: parameters, body and return type, in a fresh memo; same object if unchanged."""
        return self._in_new_scope(self._mutate_function, func)

    def _mutate_param(self, p: Param) -> Param:
        var = self.visit_var_def(p.var)
        ty = self.visit_type(p.ty)
        return p if var is p.var and ty is p.ty else Param(var, ty)

    def _mutate_function(self, func: Function) -> Function:
        params = _visit_each(self._mutate_param, func.params)
        body = self.visit_seq_expr(func.body)
        ret_type = func.ret_type
        new_ret = None if ret_type is None else self.visit_type(ret_type)
        if params is func.params and body is func.body and new_ret is ret_type:
            return func
        return msgspec.structs.replace(func, params=params, body=body, ret_type=new_ret)
