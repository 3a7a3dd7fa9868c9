"""ExprVisitor / ExprMutator: dispatch, identity preservation, memoization, binding edits,
variable remapping, override styles, scoped handlers and deep IR."""

from __future__ import annotations

import sys
from typing import Any

import msgspec
import pytest

from parpass.ir import tir
from parpass.ir.expr_functor import ExprMutator, ExprVisitor, post_order
from parpass.ir.node import GlobalVar, Op
from parpass.ir.relax import Binding, Call, Constant, Function, If, Param, SeqExpr, Tuple, TupleGetItem, Var
from parpass.ir.types import PrimType, TensorType, TupleType

F32 = TensorType((4,), "float32")
ADD = Op("add")
MUL = Op("multiply")


def const(v: float) -> Constant:
    return Constant.from_value([v] * 4, "float32")


def bind(vid: int, value: Any, name: str | None = None, ty: Any = F32) -> Binding:
    return Binding(Var(vid, name or f"v{vid}"), value, ty)


def func(params: list[Var], bindings: list[Binding], body: Any, **attrs: Any) -> Function:
    return Function(tuple(Param(p, F32) for p in params), SeqExpr(tuple(bindings), body), F32, attrs=attrs)


def walk(root: Any):  # iterative, for checks on deep IR
    stack = [root]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(n.children())


def all_kinds_function() -> tuple[Function, dict[str, Any]]:
    """A function using every expression kind once, with the nodes by role."""
    x, p = Var(0, "x"), Var(1, "p")
    c = const(1.0)
    call = Call(ADD, (x, c))
    tup = Tuple((x, call))
    tgi = TupleGetItem(tup, 1)
    gv = GlobalVar("helper")
    gcall = Call(gv, (x,))
    then_b = SeqExpr((bind(10, gcall),), Var(10, "v10"))
    else_b = SeqExpr((), x)
    cond = If(p, then_b, else_b)
    bindings = [bind(2, call), bind(3, tup, ty=TupleType((F32, F32))), bind(4, tgi), bind(5, cond)]
    f = Function(
        (Param(x, F32), Param(p, PrimType("bool"))),
        SeqExpr(tuple(bindings), Var(5, "v5")),
        F32,
        attrs={"global_symbol": "main"},
    )
    return f, {"call": call, "tup": tup, "tgi": tgi, "gcall": gcall, "if": cond, "const": c, "gv": gv}


class Recorder(ExprVisitor):
    """Records (handler, node) for every handler call."""

    def __init__(self) -> None:
        self.log: list[tuple[str, Any]] = []

    def visit_var_(self, op: Var) -> None:
        self.log.append(("var", op))

    def visit_constant_(self, op: Constant) -> None:
        self.log.append(("constant", op))

    def visit_global_var_(self, op: GlobalVar) -> None:
        self.log.append(("global_var", op))

    def visit_op_(self, op: Op) -> None:
        self.log.append(("op", op))

    def visit_tuple_(self, op: Tuple) -> None:
        self.log.append(("tuple", op))
        super().visit_tuple_(op)

    def visit_tuple_getitem_(self, op: TupleGetItem) -> None:
        self.log.append(("tuple_getitem", op))
        super().visit_tuple_getitem_(op)

    def visit_call_(self, op: Call) -> None:
        self.log.append(("call", op))
        super().visit_call_(op)

    def visit_var_def(self, var: Var) -> None:
        self.log.append(("var_def", var))

    def visit_type(self, ty: Any) -> None:
        self.log.append(("type", ty))
        super().visit_type(ty)

    def visit_binding(self, binding: Binding) -> None:
        self.log.append(("binding", binding))
        super().visit_binding(binding)

    def visit_seq_expr(self, seq: SeqExpr) -> None:
        self.log.append(("seq_expr", seq))
        super().visit_seq_expr(seq)

    def kinds(self) -> list[str]:
        return [k for k, _ in self.log]


# ---------------------------------------------------------------- dispatch


def test_every_handler_is_dispatched_to_with_its_node() -> None:
    f, n = all_kinds_function()
    r = Recorder()
    r.visit_function(f)
    seen = {(k, id(node)) for k, node in r.log}
    assert ("call", id(n["call"])) in seen
    assert ("call", id(n["gcall"])) in seen
    assert ("tuple", id(n["tup"])) in seen
    assert ("tuple_getitem", id(n["tgi"])) in seen
    assert ("constant", id(n["const"])) in seen
    assert ("global_var", id(n["gv"])) in seen
    assert [node for k, node in r.log if k == "op"] == [ADD]
    assert sorted(v.vid for k, v in r.log if k == "var_def") == [0, 1, 2, 3, 4, 5, 10]
    assert r.kinds().count("binding") == 5
    assert r.kinds().count("seq_expr") == 3  # body and both branches
    # parameter types, binding types and the return type (TupleType fields included)
    assert r.kinds().count("type") == 2 + 5 + 2 + 1


def test_if_handler_and_branch_order() -> None:
    f, n = all_kinds_function()

    class IfRec(Recorder):
        def visit_if_(self, op: If) -> None:
            self.log.append(("if", op))
            super().visit_if_(op)

    r = IfRec()
    r.visit_function(f)
    kinds = r.kinds()
    i = kinds.index("if")
    # a scoped override runs first, then cond, then-branch, else-branch
    assert kinds[i + 1 : i + 3] == ["var", "seq_expr"]
    assert r.log[i + 1][1] == Var(1, "p")
    seqs = [node for k, node in r.log[i:] if k == "seq_expr"]
    assert seqs == [n["if"].then_branch, n["if"].else_branch]


def test_handlers_run_post_order_left_to_right() -> None:
    x = Var(0, "x")
    a = Call(ADD, (x, x))
    b = Call(MUL, (x, x))
    inner = Tuple((a, b))
    outer = Tuple((TupleGetItem(inner, 0), Call(ADD, (x, x)), inner))
    r = Recorder()
    r.visit_expr(outer)
    composite = [node for k, node in r.log if k in ("tuple", "call", "tuple_getitem")]
    assert composite == [a, b, inner, outer.fields[0], outer.fields[1], outer]
    assert [id(c) for c in composite] == [id(a), id(b), id(inner), id(outer.fields[0]), id(outer.fields[1]), id(outer)]


def test_visit_expr_rejects_non_expressions() -> None:
    with pytest.raises(TypeError, match=r"ExprVisitor cannot visit .*SeqExpr.*Call"):
        ExprVisitor().visit_expr(SeqExpr((), Var(0, "x")))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"ExprMutator cannot visit .*tir.*Add"):
        ExprMutator().visit_expr(tir.Var(0, "i") + 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="cannot visit int 3"):
        ExprMutator().visit_expr(3)  # type: ignore[arg-type]
    # a malformed child is reported when its parent asks for it
    with pytest.raises(TypeError, match="cannot visit str 'oops'"):
        ExprMutator().visit_expr(Tuple((Var(0, "x"), "oops")))  # type: ignore[arg-type]


# ---------------------------------------------------------------- identity


def test_noop_mutator_returns_the_same_objects() -> None:
    f, n = all_kinds_function()
    m = ExprMutator()
    assert m.visit_function(f) is f
    assert m.visit_expr(n["if"]) is n["if"]
    assert m.visit_seq_expr(f.body) is f.body
    assert m.visit_binding(f.body.bindings[0]) is f.body.bindings[0]


def test_change_deep_inside_rebuilds_only_the_path_to_the_root() -> None:
    f, n = all_kinds_function()
    target = n["gcall"]  # inside the then-branch of the If

    class RenameCallee(ExprMutator):
        def visit_global_var_(self, op: GlobalVar) -> Any:
            return GlobalVar("helper2")

    g = RenameCallee().visit_function(f)
    assert g is not f
    assert g.attrs == {"global_symbol": "main"} and g.ret_type is f.ret_type
    assert g.params is f.params
    old_b, new_b = f.body.bindings, g.body.bindings
    assert len(new_b) == 4
    assert all(new_b[i] is old_b[i] for i in range(3))  # untouched siblings: same objects
    new_if = new_b[3].value
    assert new_if is not n["if"]
    assert new_if.cond is n["if"].cond
    assert new_if.else_branch is n["if"].else_branch
    new_call = new_if.then_branch.bindings[0].value
    assert new_call.op == GlobalVar("helper2")
    assert new_call.args is target.args
    assert new_b[3].var is old_b[3].var and g.body.body is f.body.body


def test_rebuilt_nodes_keep_non_child_fields() -> None:
    x = Var(0, "x")
    call = Call(ADD, (x, x), {"axis": 1})
    tgi = TupleGetItem(Tuple((x, call)), 1)
    y = Var(1, "y")
    out = ExprMutator(var_remap={0: y}).visit_expr(tgi)
    assert out == TupleGetItem(Tuple((y, Call(ADD, (y, y), {"axis": 1}))), 1)


# ---------------------------------------------------------------- memoization


def test_shared_subexpression_is_visited_once_and_rewritten_once() -> None:
    x = Var(0, "x")
    shared = Call(ADD, (x, x))
    expr = Tuple((shared, Tuple((shared, x)), shared))

    class Count(ExprMutator):
        calls = 0

        def visit_call_(self, op: Call) -> Any:
            Count.calls += 1
            return Call(MUL, op.args)

    out = Count().visit_expr(expr)
    assert Count.calls == 1
    assert out.fields[0] is out.fields[1].fields[0] is out.fields[2]
    assert out.fields[0].op == MUL


def test_shared_subexpression_across_bindings_is_visited_once() -> None:
    x = Var(0, "x")
    shared = Tuple((x, x))
    f = func([x], [bind(1, shared), bind(2, shared)], Var(2, "v2"))
    r = Recorder()
    r.visit_function(f)
    assert r.kinds().count("tuple") == 1
    # a new function scope visits it again
    r.visit_function(f)
    assert r.kinds().count("tuple") == 2


def test_variable_uses_are_visited_at_every_occurrence() -> None:
    x = Var(0, "x")
    f = func([x], [bind(1, Call(ADD, (x, x))), bind(2, Tuple((x, Var(1, "v1"))))], Var(2, "v2"))

    class CountUses(ExprVisitor):
        def __init__(self) -> None:
            self.uses: dict[int, int] = {}

        def visit_var_(self, op: Var) -> None:
            self.uses[op.vid] = self.uses.get(op.vid, 0) + 1

    c = CountUses()
    c.visit_function(f)
    assert c.uses == {0: 3, 1: 1, 2: 1}


def test_temporary_nodes_never_hit_a_stale_memo_entry() -> None:
    # Nodes built and dropped in a loop reuse ids; the memo must not confuse them.
    class Swap(ExprMutator):
        def visit_tuple_(self, op: Tuple) -> Any:
            return Tuple(op.fields[::-1])

    m = Swap()
    pairs = [(Var(2 * k, "a"), Var(2 * k + 1, "b")) for k in range(300)]
    for k, pair in enumerate(pairs):
        out = m.visit_expr(Tuple(pair))  # the temporary Tuple dies right after; its memory is reused
        assert out.fields[0].vid == 2 * k + 1 and out.fields[1].vid == 2 * k


# ---------------------------------------------------------------- bindings


class EditBindings(ExprMutator):
    """Drops bindings of vid 2, duplicates vid 3 as a list, turns vid 4 into a tuple of two."""

    def visit_binding(self, binding: Binding) -> Any:
        vid = binding.var.vid
        if vid == 2:
            return None
        if vid == 3:
            return [Binding(Var(30, "pre"), binding.value, binding.ty), binding]
        if vid == 4:
            return (binding, Binding(Var(40, "post"), Var(4, "v4"), binding.ty))
        if vid == 5:
            return []
        return super().visit_binding(binding)


def test_bindings_can_be_dropped_replaced_and_spliced() -> None:
    x = Var(0, "x")
    bs = [bind(1, Call(ADD, (x, x))), bind(2, x), bind(3, x), bind(4, x), bind(5, x), bind(6, x)]
    f = func([x], bs, Var(6, "v6"))
    g = EditBindings().visit_function(f)
    assert [b.var.vid for b in g.body.bindings] == [1, 30, 3, 4, 40, 6]
    assert g.body.bindings[0] is bs[0] and g.body.bindings[2] is bs[2] and g.body.bindings[5] is bs[5]


def test_binding_edits_inside_if_branches() -> None:
    x, p = Var(0, "x"), Var(1, "p")
    then_b = SeqExpr((bind(2, x), bind(7, x)), Var(7, "v7"))
    f = func([x, p], [bind(8, If(p, then_b, SeqExpr((), x)))], Var(8, "v8"))
    g = EditBindings().visit_function(f)
    new_if = g.body.bindings[0].value
    assert [b.var.vid for b in new_if.then_branch.bindings] == [7]
    assert new_if.else_branch is f.body.bindings[0].value.else_branch


@pytest.mark.parametrize(
    ("result", "message"),
    [
        (Var(9, "w"), r"returned parpass\.ir\.relax\.Var node"),
        ([Var(9, "w")], r"returned a list holding parpass\.ir\.relax\.Var node"),
        ("nope", "returned str 'nope'"),
    ],
)
def test_bad_visit_binding_result_is_a_clear_error(result: Any, message: str) -> None:
    class Bad(ExprMutator):
        def visit_binding(self, binding: Binding) -> Any:
            return result

    x = Var(0, "x")
    f = func([x], [bind(1, x, name="tmp")], x)
    with pytest.raises(TypeError, match=r"visit_binding must return .* binding of %tmp \(vid 1\).*" + message):
        Bad().visit_function(f)


# ---------------------------------------------------------------- variable remapping


class CopyPropagation(ExprMutator):
    """Drops ``y = x`` (x a variable) and replaces later uses of y by x."""

    def visit_binding(self, binding: Binding) -> Any:
        value = self.visit_expr(binding.value)
        if isinstance(value, Var):
            self.var_remap[binding.var.vid] = value
            return None
        return super().visit_binding(binding)


def test_var_remap_copy_propagation_across_bindings_and_branches() -> None:
    x, p = Var(0, "x"), Var(1, "p")
    y, z, w = Var(2, "y"), Var(3, "z"), Var(4, "w")
    inner = SeqExpr((bind(5, Tuple((z, Call(ADD, (z, y))))),), Var(5, "v5"))
    bindings = [
        Binding(y, x, F32),
        Binding(z, y, F32),  # chain: z = y = x
        Binding(w, Tuple((Call(MUL, (z, x)), TupleGetItem(Tuple((y,)), 0))), None),
        bind(6, If(p, inner, SeqExpr((), z))),
    ]
    f = func([x, p], bindings, Tuple((w, Var(6, "v6"), z)))
    g = CopyPropagation().visit_function(f)
    assert [b.var.vid for b in g.body.bindings] == [4, 6]
    assert g.body.bindings[0].value == Tuple((Call(MUL, (x, x)), TupleGetItem(Tuple((x,)), 0)))
    new_if = g.body.bindings[1].value
    assert new_if.then_branch.bindings[0].value == Tuple((x, Call(ADD, (x, x))))
    assert new_if.else_branch.body is x
    assert g.body.body == Tuple((w, Var(6, "v6"), x))


def test_var_remap_given_to_the_constructor_and_left_defs_alone() -> None:
    x, y = Var(0, "x"), Var(1, "y")
    f = func([x], [Binding(x, Call(ADD, (x, x)), F32)], x)
    g = ExprMutator(var_remap={0: y}).visit_function(f)
    assert g.params[0].var is x and g.body.bindings[0].var is x  # definitions untouched
    assert g.body.bindings[0].value == Call(ADD, (y, y))
    assert g.body.body is y


# ---------------------------------------------------------------- override styles


class FoldAdd(ExprMutator):
    """Post-order rewrite: add(c1, c2) of constants becomes a constant."""

    def visit_call_(self, op: Call) -> Any:
        op = super().visit_call_(op)
        if isinstance(op, Call) and op.op == ADD and all(isinstance(a, Constant) for a in op.args):
            return Constant.from_value(op.args[0].numpy() + op.args[1].numpy())
        return op


def test_post_order_override_calling_super_folds_nested_calls() -> None:
    e = Call(ADD, (Call(ADD, (const(1), const(2))), Call(ADD, (const(3), Tuple((const(4),))))))
    out = FoldAdd().visit_expr(Call(ADD, (Call(ADD, (const(1), const(2))), const(3))))
    assert isinstance(out, Constant) and out.numpy().tolist() == [6.0] * 4
    out2 = FoldAdd().visit_expr(e)
    assert isinstance(out2, Call) and isinstance(out2.args[0], Constant)
    assert out2.args[1] is e.args[1]  # add(const, tuple) is not folded: same object


def test_override_that_skips_super_and_visit_expr_interception() -> None:
    x = Var(0, "x")
    keep = Call(MUL, (x, x))

    class KeepMul(ExprMutator):
        def visit_call_(self, op: Call) -> Any:
            return op if op.op == MUL else super().visit_call_(op)

    assert KeepMul(var_remap={0: Var(1, "y")}).visit_expr(keep) is keep

    class Intercept(ExprMutator):
        """Replaces every expression structurally equal to `keep` before dispatch."""

        def visit_expr(self, expr: Any) -> Any:
            if expr == keep:
                return Var(9, "cached")
            return super().visit_expr(expr)

    out = Intercept().visit_expr(Tuple((Call(MUL, (x, x)), Tuple((keep,)))))
    assert out == Tuple((Var(9, "cached"), Tuple((Var(9, "cached"),))))


def test_visit_op_and_visit_type_overrides_rebuild_calls_params_and_types() -> None:
    x = Var(0, "x")
    f = Function(
        (Param(x, TupleType((F32, PrimType("int32")))),),
        SeqExpr((Binding(Var(1, "y"), Call(ADD, (x, x)), TupleType((F32,))),), Var(1, "y")),
        F32,
        attrs={"k": 1},
    )

    class Half(ExprMutator):
        def visit_type(self, ty: Any) -> Any:
            ty = super().visit_type(ty)
            if isinstance(ty, TensorType) and ty.dtype == "float32":
                return TensorType(ty.shape, "float16")
            return ty

        def visit_op_(self, op: Op) -> Any:
            return GlobalVar("my_add") if op == ADD else op

    g = Half().visit_function(f)
    h16 = TensorType((4,), "float16")
    assert g.params[0].ty == TupleType((h16, PrimType("int32")))
    assert g.params[0].var is x
    assert g.body.bindings[0].ty == TupleType((h16,))
    assert g.body.bindings[0].value == Call(GlobalVar("my_add"), (x, x))
    assert g.ret_type == h16 and g.attrs == {"k": 1}


def test_subclass_without_super_init_still_works() -> None:
    class NoInit(ExprMutator):
        def __init__(self, tag: str) -> None:
            self.tag = tag

    f, _ = all_kinds_function()
    m = NoInit("t")
    assert m.visit_function(f) is f and m.var_remap == {}


# ---------------------------------------------------------------- scoped handlers


def test_scoped_if_override_sets_context_for_its_branches() -> None:
    x, p = Var(0, "x"), Var(1, "p")
    shared = Call(ADD, (x, x))  # the same object outside and inside the branch
    then_b = SeqExpr((bind(3, shared), bind(4, If(p, SeqExpr((bind(5, shared),), x), SeqExpr((), x)))), x)
    f = func([x, p], [bind(2, shared), bind(6, If(p, then_b, SeqExpr((), x)))], x)

    class Depth(ExprVisitor):
        def __init__(self) -> None:
            self.depth = 0
            self.seen: list[int] = []

        def visit_if_(self, op: If) -> None:
            self.depth += 1
            super().visit_if_(op)
            self.depth -= 1

        def visit_call_(self, op: Call) -> None:
            self.seen.append(self.depth)

    d = Depth()
    d.visit_function(f)
    assert d.seen == [0, 1, 2]  # memo results never cross into another scope


def test_post_order_if_override_sees_rewritten_branches() -> None:
    x, p = Var(0, "x"), Var(1, "p")
    branch = SeqExpr((bind(2, Call(ADD, (const(1), const(2)))),), Var(2, "v2"))
    f = func([x, p], [bind(3, If(p, branch, branch))], Var(3, "v3"))

    class SameBranches(FoldAdd):
        @post_order
        def visit_if_(self, op: If) -> Any:
            op = super().visit_if_(op)
            if isinstance(op, If) and op.then_branch == op.else_branch:
                return Tuple((op.then_branch.body,))  # toy: "if p then b else b" -> b
            return op

    g = SameBranches().visit_function(f)
    assert isinstance(g.body.bindings[0].value, Tuple)


# ---------------------------------------------------------------- errors and robustness


def test_post_order_given_a_node_says_it_marks_handlers() -> None:
    with pytest.raises(TypeError, match=r"marks a visitor's handler method .* got parpass.ir.relax.SeqExpr node"):
        post_order(SeqExpr((), const(1)))  # type: ignore[type-var]


def test_visiting_an_ancestor_from_a_handler_is_a_clear_error() -> None:
    x = Var(0, "x")
    child = Call(ADD, (x, x))
    root = Tuple((child,))

    class Loop(ExprVisitor):
        def visit_call_(self, op: Call) -> None:
            self.visit_expr(root)

    with pytest.raises(RuntimeError, match="while its own children were being visited"):
        Loop().visit_expr(root)


def test_mutator_is_usable_after_a_handler_raised() -> None:
    x = Var(0, "x")
    e = Tuple((Call(ADD, (x, x)), Tuple((Call(MUL, (x, x)),))))

    class Flaky(ExprMutator):
        fail = True

        def visit_call_(self, op: Call) -> Any:
            if self.fail and op.op == MUL:
                raise ValueError("boom")
            return super().visit_call_(op)

    m = Flaky(var_remap={0: Var(1, "y")})
    with pytest.raises(ValueError, match="boom"):
        m.visit_expr(e)
    m.fail = False
    y = Var(1, "y")
    assert m.visit_expr(e) == Tuple((Call(ADD, (y, y)), Tuple((Call(MUL, (y, y)),))))


def test_error_in_a_nested_visit_propagates_unchanged_and_can_be_caught() -> None:
    x = Var(0, "x")
    inner = Tuple((Call(MUL, (x, x)),))  # visited from a handler, not part of the root

    class Nested(ExprMutator):
        catch = False

        def visit_call_(self, op: Call) -> Any:
            if op.op == MUL:
                raise ValueError("inner failure")
            return super().visit_call_(op)

        def visit_tuple_(self, op: Tuple) -> Any:
            if op is not inner:
                try:
                    self.visit_expr(inner)
                except ValueError:
                    if not self.catch:
                        raise
            return super().visit_tuple_(op)

    for root in (Tuple((x,)), Tuple((x, Tuple((x,))))):  # the handler of the root, or of a node under it
        with pytest.raises(ValueError, match="inner failure"):
            Nested().visit_expr(root)
        m = Nested(var_remap={0: Var(1, "y")})
        m.catch = True
        assert m.visit_expr(root) == ExprMutator(var_remap={0: Var(1, "y")}).visit_expr(root)


# ---------------------------------------------------------------- deep IR


def big_function(n: int, if_depth: int) -> Function:
    """n flat bindings, the last of which holds ``if_depth`` nested Ifs, each branch with bindings."""
    x, p = Var(0, "x"), Var(1, "p")
    c = const(1.0)
    bindings = []
    prev: Var = x
    for vid in range(2, n + 2):
        v = Var(vid, "v")
        bindings.append(Binding(v, Call(ADD, (prev, c)), F32))
        prev = v
    vid = n + 2
    inner: Any = SeqExpr((Binding(Var(vid, "leaf"), Call(MUL, (prev, prev)), F32),), Var(vid, "leaf"))
    for _ in range(if_depth):
        vid += 1
        cond = If(p, inner, SeqExpr((Binding(Var(vid, "e"), Call(ADD, (prev, c)), F32),), Var(vid, "e")))
        vid += 1
        inner = SeqExpr((Binding(Var(vid, "t"), cond, F32),), Var(vid, "t"))
    bindings.extend(inner.bindings)
    return Function((Param(x, F32), Param(p, PrimType("bool"))), SeqExpr(tuple(bindings), inner.body), F32)


@pytest.fixture(scope="module")
def big() -> Function:
    return big_function(100_000, if_depth=4)


@pytest.fixture
def default_recursion_limit():  # the deep tests run under Python's default limit
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


@pytest.mark.usefixtures("default_recursion_limit")
def test_100k_bindings_visitor_and_noop_mutator(big: Function) -> None:
    class CountCalls(ExprVisitor):
        n = 0

        def visit_call_(self, op: Call) -> None:
            CountCalls.n += 1
            super().visit_call_(op)

    CountCalls().visit_function(big)
    assert CountCalls.n == 100_000 + 1 + 4
    assert ExprMutator().visit_function(big) is big


@pytest.mark.usefixtures("default_recursion_limit")
def test_100k_bindings_mutation_rebuilds_the_changed_bindings_only(big: Function) -> None:
    x = big.params[0].var
    y = Var(10**9, "y")
    g = ExprMutator(var_remap={x.vid: y}).visit_function(big)
    assert g.body.bindings[0].value.args[0] is y  # the one use of x
    assert g.body.bindings[0] is not big.body.bindings[0]
    same = sum(a is b for a, b in zip(g.body.bindings, big.body.bindings, strict=True))
    assert same == len(big.body.bindings) - 1


@pytest.mark.usefixtures("default_recursion_limit")
def test_100k_bindings_copy_propagation(big: Function) -> None:
    # turn every other binding into a copy, then propagate
    bs = list(big.body.bindings)
    for k in range(1, 100_000, 2):
        prev = bs[k - 1].var
        bs[k] = Binding(bs[k].var, prev, F32)
    f = msgspec.structs.replace(big, body=SeqExpr(tuple(bs), big.body.body))
    g = CopyPropagation().visit_function(f)
    assert len(g.body.bindings) == len(bs) - 50_000
    # each surviving add now reads the variable defined two bindings earlier
    first, second = g.body.bindings[0], g.body.bindings[1]
    assert second.value.args[0] is first.var


@pytest.mark.usefixtures("default_recursion_limit")
def test_deep_tuple_nest_does_not_recurse() -> None:
    e: Any = Var(0, "x")
    for _ in range(5000):
        e = Tuple((e, const(0.0)))
    r = Recorder()
    r.visit_expr(e)
    assert r.kinds().count("tuple") == 5000
    assert ExprMutator().visit_expr(e) is e
    out = ExprMutator(var_remap={0: Var(1, "y")}).visit_expr(e)
    depth = 0
    while isinstance(out, Tuple):
        out = out.fields[0]
        depth += 1
    assert depth == 5000 and out == Var(1, "y")


def if_nest(depth: int) -> Function:
    """A function whose result is ``depth`` Ifs nested in each other's then-branch."""
    p = Var(0, "p")
    inner = SeqExpr((), p)
    for vid in range(1, depth + 1):
        r = Var(vid, "r")
        inner = SeqExpr((Binding(r, If(p, inner, SeqExpr((), p)), PrimType("bool")),), r)
    return Function((Param(p, PrimType("bool")),), inner, PrimType("bool"))


@pytest.mark.skipif(sys.version_info < (3, 11), reason="on 3.10 the recursion limit is not raised (C stack)")
@pytest.mark.usefixtures("default_recursion_limit")
def test_5000_deep_if_nest_default_and_overridden_handlers() -> None:
    """Nested If blocks recurse (a few frames a level); 5,000 levels still work, and the limit comes back."""
    f = if_nest(5000)

    class CountIfs(ExprVisitor):
        def __init__(self) -> None:
            self.n = 0

        def visit_if_(self, op: If) -> None:  # an overridden scoped handler: runs before its children
            self.n += 1
            super().visit_if_(op)

    class PostOrderIfs(ExprMutator):
        @post_order
        def visit_if_(self, op: If) -> Any:
            return super().visit_if_(op)

    ExprVisitor().visit_function(f)
    assert ExprMutator().visit_function(f) is f
    counter = CountIfs()
    counter.visit_function(f)
    assert counter.n == 5000
    assert PostOrderIfs().visit_function(f) is f
    remapped = ExprMutator(var_remap={0: Var(10**6, "q")}).visit_function(f)
    assert remapped.body.bindings[0].value.cond == Var(10**6, "q")
    assert sys.getrecursionlimit() == 1000


@pytest.mark.usefixtures("default_recursion_limit")
def test_recursion_limit_is_restored_when_a_nested_handler_raises() -> None:
    class Boom(ExprVisitor):
        def visit_var_(self, op: Var) -> None:
            raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        Boom().visit_function(if_nest(500))
    assert sys.getrecursionlimit() == 1000


def test_walk_helper_counts_big_function(big: Function) -> None:
    # sanity of the fixture: every binding but the nested ones is flat
    assert sum(1 for n in walk(big.body) if type(n) is If) == 4
