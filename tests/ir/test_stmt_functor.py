"""StmtExprVisitor / StmtExprMutator, post_order_visit and substitute."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from parpass.ir import relax, tir
from parpass.ir.stmt_functor import StmtExprMutator, StmtExprVisitor, post_order, post_order_visit, substitute
from parpass.ir.tir import (
    Allocate,
    Broadcast,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Cast,
    Evaluate,
    FloatImm,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    LetStmt,
    Not,
    PrimFunc,
    Ramp,
    Select,
    SeqStmt,
    Var,
)

I32 = "int32"


def imm(v: int) -> IntImm:
    return IntImm(I32, v)


def loop(var: Var, extent: int, body: Any, kind: ForKind = ForKind.SERIAL) -> For:
    return For(var, imm(0), imm(extent), kind, body)


@pytest.fixture
def default_recursion_limit():  # the deep tests run under Python's default limit
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def walk(root: Any):  # iterative, for checks on deep IR
    stack = [root]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(n.children())


ALL_EXPR_KINDS = [
    "Add", "Sub", "Mul", "FloorDiv", "FloorMod", "Min", "Max", "EQ", "NE", "LT", "LE", "GT", "GE", "And", "Or",
]  # fmt: skip


def all_kinds_func() -> tuple[PrimFunc, dict[str, Any]]:
    """A PrimFunc using every statement and expression kind."""
    n = Var(0, "n")
    i, j, t = Var(1, "i"), Var(2, "j"), Var(3, "t")
    A = Buffer(10, "A", "float32", (n, imm(8)))
    B = Buffer(11, "B", "float32", (imm(64),))
    T = Buffer(12, "T", "float32", (imm(4),))
    binops = [getattr(tir, k)(i, j) for k in ALL_EXPR_KINDS]
    cond = tir.And(tir.LT(i, n), Not(tir.EQ(j, imm(3))))
    value = Select(cond, Cast("float32", i), Call("float32", "exp", (BufferLoad(A, (i, j)),)))
    vec = BufferLoad(B, (Ramp(i * 4, imm(1), 4),)) + Broadcast(FloatImm("float32", 2.0), 4)
    body = SeqStmt(
        (
            BufferStore(A, value, (i, j)),
            IfThenElse(tir.GT(i, imm(0)), BufferStore(B, vec, (Ramp(i * 4, imm(1), 4),)), Evaluate(imm(0))),
            LetStmt(t, i + j, Evaluate(Call(I32, "print", (t, *binops)))),
            Allocate(T, BufferStore(T, FloatImm("float32", 0.0), (j,))),
        )
    )
    f = PrimFunc((n, A, B), loop(i, 16, loop(j, 8, body)), attrs={"global_symbol": "f"})
    return f, {"A": A, "B": B, "T": T, "binops": binops, "value": value, "vec": vec, "t": t}


def _recording(name: str) -> Any:
    def handler(self: Any, op: Any) -> None:
        self.log.append(type(op).__name__)
        getattr(StmtExprVisitor, name)(self, op)

    handler.__name__ = name
    return handler


_HANDLERS = sorted(n for n in dir(StmtExprVisitor) if n.startswith("visit_") and n.endswith("_"))
#: Logs the node type of each handler call (every handler overridden, each calling the default).
Recorder: Any = type("Recorder", (StmtExprVisitor,), {name: _recording(name) for name in _HANDLERS})


def test_every_handler_is_dispatched_to() -> None:
    f, _ = all_kinds_func()
    r = Recorder()
    r.log = []
    r.visit_prim_func(f)
    expected = set(ALL_EXPR_KINDS) | {
        "IntImm", "FloatImm", "Var", "Not", "Select", "Cast", "Call", "Ramp", "Broadcast", "BufferLoad",
        "For", "SeqStmt", "BufferStore", "IfThenElse", "LetStmt", "Allocate", "Evaluate",
    }  # fmt: skip
    assert set(r.log) == expected
    assert len(_HANDLERS) == len(expected)


def test_binary_handlers_share_a_default_but_override_separately() -> None:
    i, j = Var(1, "i"), Var(2, "j")

    class ModToDiv(StmtExprMutator):
        def visit_floor_mod_(self, op: tir.FloorMod) -> Any:
            op = super().visit_floor_mod_(op)
            return tir.FloorDiv(op.a, op.b)

    e = (i % j) + (i // j) * (i % 2)
    out = ModToDiv().visit_expr(e)
    assert out == (i // j) + (i // j) * (i // 2)
    assert out.a.__class__ is tir.FloorDiv and out.b.b.__class__ is tir.FloorDiv


def test_handlers_run_post_order_left_to_right() -> None:
    i = Var(1, "i")
    a, b = i + 1, i * 2
    s = SeqStmt((Evaluate(a - b), Evaluate(b)))
    order: list[Any] = []

    class Log(StmtExprVisitor):
        def visit_add_(self, op: Any) -> None:
            order.append(op)

        def visit_mul_(self, op: Any) -> None:
            order.append(op)

        def visit_sub_(self, op: Any) -> None:
            order.append(op)

        def visit_evaluate_(self, op: Any) -> None:
            order.append(op)

        def visit_seq_stmt_(self, op: Any) -> None:
            order.append(op)

    Log().visit_stmt(s)
    assert [id(x) for x in order] == [id(a), id(b), id(s.seq[0].value), id(s.seq[0]), id(s.seq[1]), id(s)]


def test_visit_rejects_foreign_nodes() -> None:
    with pytest.raises(TypeError, match=r"StmtExprVisitor cannot visit parpass\.ir\.relax\.Var node"):
        StmtExprVisitor().visit_stmt(relax.Var(0, "x"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="cannot visit NoneType None"):
        StmtExprMutator().visit_expr(None)  # type: ignore[arg-type]


# ---------------------------------------------------------------- identity and memoization


def test_noop_mutator_returns_the_same_objects() -> None:
    f, parts = all_kinds_func()
    m = StmtExprMutator()
    assert m.visit_prim_func(f) is f
    assert m.visit_stmt(f.body) is f.body
    assert m.visit_expr(parts["value"]) is parts["value"]
    assert m.visit_buffer(parts["A"]) is parts["A"]


def test_change_deep_inside_rebuilds_only_the_path() -> None:
    f, parts = all_kinds_func()
    target = parts["vec"]

    class Two(StmtExprMutator):
        def visit_float_imm_(self, op: FloatImm) -> Any:
            return FloatImm(op.dtype, 3.0) if op.value == 2.0 else op

    g = Two().visit_prim_func(f)
    assert g is not f and g.attrs == f.attrs and g.params is f.params
    old_seq, new_seq = f.body.body.body.seq, g.body.body.body.seq
    assert new_seq[0] is old_seq[0] and new_seq[2] is old_seq[2] and new_seq[3] is old_seq[3]
    new_if = new_seq[1]
    assert new_if.condition is old_seq[1].condition and new_if.else_case is old_seq[1].else_case
    new_vec = new_if.then_case.value
    assert new_vec.a is target.a and new_vec.b.value == FloatImm("float32", 3.0)
    assert new_if.then_case.indices is old_seq[1].then_case.indices
    assert g.body.loop_var is f.body.loop_var and g.body.min is f.body.min


def test_shared_expression_is_visited_once_per_walk() -> None:
    i = Var(1, "i")
    shared = i * 4 + 1
    B = Buffer(5, "B", "int32", (imm(64),))
    s = SeqStmt((BufferStore(B, shared, (shared,)), BufferStore(B, shared + shared, (i,))))

    class Count(StmtExprMutator):
        adds = 0

        def visit_add_(self, op: Any) -> Any:
            Count.adds += 1
            return super().visit_add_(op)

    c = Count(var_remap={1: Var(2, "j")})
    out = c.visit_stmt(s)
    assert Count.adds == 2  # `shared` once, `shared + shared` once
    first = out.seq[0]
    assert first.value is first.indices[0] is out.seq[1].value.a is out.seq[1].value.b


def test_visit_buffer_is_memoized_per_buffer_object() -> None:
    i = Var(1, "i")
    A = Buffer(5, "A", "float32", (imm(8),))
    A2 = Buffer(5, "A", "float32", (imm(8),))  # equal, another object (as after decoding)
    s = SeqStmt((BufferStore(A, A[i] + A[i + 1], (i,)), BufferStore(A2, A2[i], (i,))))
    seen: list[Buffer] = []

    class Bufs(StmtExprVisitor):
        def visit_buffer(self, buf: Buffer) -> None:
            seen.append(buf)

    Bufs().visit_stmt(s)
    assert [id(b) for b in seen] == [id(A), id(A2)]


def test_buffer_remap_replaces_every_occurrence() -> None:
    f, _ = all_kinds_func()
    flat = Buffer(10, "A_flat", "float32", (imm(512),))
    g = StmtExprMutator(buffer_remap={10: flat}).visit_prim_func(f)
    names = {n.name for n in walk(g) if type(n) is Buffer}
    assert "A" not in names and "A_flat" in names
    assert g.params[1] is flat and g.params[2] is f.params[2]


# ---------------------------------------------------------------- scoped handlers


class LoopContext(StmtExprVisitor):
    """Records, for each store, the loop variables around it (needs the scoped For override)."""

    def __init__(self) -> None:
        self.loops: list[str] = []
        self.stores: list[tuple[str, ...]] = []

    def visit_for_(self, op: For) -> None:
        self.loops.append(op.loop_var.name_hint)
        super().visit_for_(op)
        self.loops.pop()

    def visit_buffer_store_(self, op: BufferStore) -> None:
        self.stores.append(tuple(self.loops))
        super().visit_buffer_store_(op)


def test_scoped_for_override_sees_its_context_even_for_shared_statements() -> None:
    i, j, k = Var(1, "i"), Var(2, "j"), Var(3, "k")
    B = Buffer(5, "B", "int32", (imm(8),))
    store = BufferStore(B, imm(0), (imm(0),))  # one object in three places
    s = SeqStmt((store, loop(i, 4, SeqStmt((store, loop(j, 2, store)))), loop(k, 3, store)))
    v = LoopContext()
    v.visit_stmt(s)
    assert v.stores == [(), ("i",), ("i", "j"), ("k",)]


class InlineLets(StmtExprMutator):
    """Scoped LetStmt override: substitutes the value into the body and drops the let."""

    def visit_let_stmt_(self, op: LetStmt) -> Any:
        self.var_remap[op.var.vid] = self.visit_expr(op.value)
        body = self.visit_stmt(op.body)
        del self.var_remap[op.var.vid]
        return body


def test_scoped_let_override_substitutes_in_its_body_only() -> None:
    i, t, u = Var(1, "i"), Var(2, "t"), Var(3, "u")
    B = Buffer(5, "B", "int32", (imm(8),))
    inner = LetStmt(u, t * 2, BufferStore(B, u + t, (i,)))
    s = loop(i, 8, SeqStmt((LetStmt(t, i + 1, inner), BufferStore(B, t, (i,)))))
    out = InlineLets().visit_stmt(s)
    assert out.body.seq[0] == BufferStore(B, (i + 1) * 2 + (i + 1), (i,))
    assert out.body.seq[1] is s.body.seq[1]  # `t` outside the let's scope is left alone


class UnrollInner(StmtExprMutator):
    """Post-order For override: replaces loops of extent 1 by their (already rewritten) body."""

    @post_order
    def visit_for_(self, op: For) -> Any:
        op = super().visit_for_(op)
        if isinstance(op, For) and isinstance(op.extent, IntImm) and op.extent.value == 1:
            return substitute(op.body, {op.loop_var: op.min})
        return op


def test_post_order_for_override_gets_rewritten_body() -> None:
    i, j = Var(1, "i"), Var(2, "j")
    B = Buffer(5, "B", "int32", (imm(8),))
    s = loop(i, 1, loop(j, 4, BufferStore(B, i + j, (j,))))
    out = UnrollInner().visit_stmt(s)
    assert out == loop(j, 4, BufferStore(B, imm(0) + j, (j,)))


@pytest.mark.usefixtures("default_recursion_limit")
def test_scoped_override_handles_a_moderate_nest_under_the_default_limit() -> None:
    B = Buffer(5, "B", "int32", (imm(8),))
    s: Any = BufferStore(B, imm(0), (imm(0),))
    for d in range(100):
        s = loop(Var(10 + d, f"k{d}"), 2, s)
    v = LoopContext()
    v.visit_stmt(s)
    assert v.stores == [tuple(f"k{d}" for d in reversed(range(100)))]


# ---------------------------------------------------------------- deep IR


@pytest.mark.skipif(sys.version_info < (3, 11), reason="on 3.10 the recursion limit is not raised (C stack)")
@pytest.mark.usefixtures("default_recursion_limit")
def test_scoped_overrides_handle_a_5000_deep_nest() -> None:
    """TVM-style overrides of For / LetStmt run before their children and recurse; 5,000 levels still work."""
    B = Buffer(5, "B", "int32", (imm(8),))
    s: Any = BufferStore(B, imm(0), (imm(0),))
    for d in range(5000):
        s = loop(Var(10 + d, f"k{d}"), 2, s) if d % 2 else LetStmt(Var(10 + d, f"v{d}"), imm(d), s)

    class Rebuild(StmtExprMutator):
        def visit_for_(self, op: For) -> Any:
            return super().visit_for_(op)

        def visit_let_stmt_(self, op: LetStmt) -> Any:
            return super().visit_let_stmt_(op)

    v = LoopContext()
    v.visit_stmt(s)
    assert len(v.stores) == 1 and len(v.stores[0]) == 2500
    assert Rebuild().visit_stmt(s) is s
    assert sys.getrecursionlimit() == 1000


@pytest.mark.usefixtures("default_recursion_limit")
def test_5000_deep_expression_nest() -> None:
    x = Var(1, "x")
    e: Any = x
    for _ in range(5000):
        e = tir.Add(e, imm(1))  # constructors: `e + 1` would compute e.dtype, O(depth), each time

    class CountAdds(StmtExprVisitor):
        n = 0

        def visit_add_(self, op: Any) -> None:
            CountAdds.n += 1
            super().visit_add_(op)

    CountAdds().visit_expr(e)
    assert CountAdds.n == 5000
    assert StmtExprMutator().visit_expr(e) is e

    class FoldAddConst(StmtExprMutator):
        """(a + c1) + c2 -> a + (c1 + c2), post-order: the whole chain folds to x + 5000."""

        def visit_add_(self, op: Any) -> Any:
            op = super().visit_add_(op)
            a, b = op.a, op.b
            if type(a) is tir.Add and type(a.b) is IntImm and type(b) is IntImm:
                return tir.Add(a.a, imm(a.b.value + b.value))
            return op

    assert FoldAddConst().visit_expr(e) == x + 5000
    y = Var(2, "y")
    out = StmtExprMutator(var_remap={1: y}).visit_expr(e)
    depth, orig = 0, e
    while type(out) is tir.Add:
        assert out is not orig and out.b is orig.b  # the path is rebuilt, constants are the same objects
        out, orig, depth = out.a, orig.a, depth + 1
    assert depth == 5000 and out is y


@pytest.mark.usefixtures("default_recursion_limit")
@pytest.mark.parametrize("shape", ["seq", "for", "mixed"])
def test_2000_deep_statement_nest(shape: str) -> None:
    i = Var(1, "i")
    B = Buffer(5, "B", "int32", (imm(8),))
    s: Any = BufferStore(B, i, (imm(0),))
    for d in range(2000):
        if shape == "seq" or (shape == "mixed" and d % 2):
            s = SeqStmt((BufferStore(B, imm(d), (imm(0),)), s))
        else:
            s = loop(Var(100 + d, "k"), 2, s)

    class Count(StmtExprVisitor):
        n = 0

        def visit_buffer_store_(self, op: Any) -> None:
            Count.n += 1
            super().visit_buffer_store_(op)

    Count().visit_stmt(s)
    assert Count.n == (2001 if shape == "seq" else 1001 if shape == "mixed" else 1)
    assert StmtExprMutator().visit_stmt(s) is s
    out = StmtExprMutator(var_remap={1: imm(-7)}).visit_stmt(s)
    assert sum(1 for n in walk(out) if type(n) is Var and n.vid == 1) == 0
    assert sum(1 for n in walk(out) if type(n) is IntImm and n.value == -7) == 1
    f = PrimFunc((i, B), s)
    assert UnrollInner().visit_prim_func(f) is f  # a post-order For override on a deep nest


@pytest.mark.usefixtures("default_recursion_limit")
def test_post_order_visit_and_substitute_on_deep_ir() -> None:
    x = Var(1, "x")
    e: Any = x
    for k in range(5000):
        e = tir.Mul(e, imm(2)) if k % 2 else tir.Add(e, imm(1))
    n = 0

    def count(_: Any) -> None:
        nonlocal n
        n += 1

    post_order_visit(e, count)
    assert n == 5000 + 1 + 5000  # the ops, x, and one immediate per op
    out = substitute(e, {x: 3})
    leaf = out
    while type(leaf) in (tir.Add, tir.Mul):
        leaf = leaf.a
    assert leaf == imm(3)


# ---------------------------------------------------------------- post_order_visit


def test_post_order_visit_order_and_dedup() -> None:
    i, j = Var(1, "i"), Var(2, "j")
    one = imm(1)
    a = i + one
    e = tir.Select(tir.LT(a, j), a * j, one)
    seen: list[Any] = []
    post_order_visit(e, seen.append)
    assert [id(x) for x in seen] == [
        id(i), id(one), id(a), id(j), id(e.condition), id(e.true_value), id(e)
    ]  # fmt: skip


def test_post_order_visit_statements_buffers_and_definitions() -> None:
    n, i = Var(0, "n"), Var(1, "i")
    A = Buffer(10, "A", "float32", (n,))
    store = BufferStore(A, A[i], (i,))
    f = PrimFunc((n, A), loop(i, 4, store))
    names: list[str] = []
    post_order_visit(f, lambda x: names.append(f"{type(x).__name__}:{getattr(x, 'name_hint', '')}"))
    # param buffer shape (n), then loop min/extent, then the store: buffer shape already seen, value, index
    assert names == [
        "Var:n", "IntImm:", "IntImm:", "Var:i", "BufferLoad:", "BufferStore:", "For:",
    ]  # fmt: skip


def test_post_order_visit_rejects_foreign_nodes() -> None:
    with pytest.raises(TypeError, match=r"post_order_visit: cannot walk parpass\.ir\.relax\.Var node"):
        post_order_visit(relax.Var(0, "x"), print)
    bad = SeqStmt((Evaluate(imm(0)), relax.Var(0, "x")))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"cannot walk parpass\.ir\.relax\.Var node \(found under .*SeqStmt"):
        post_order_visit(bad, lambda _: None)


# ---------------------------------------------------------------- substitute


def test_substitute_expressions_and_numbers_take_the_var_dtype() -> None:
    i, x = Var(1, "i"), Var(2, "x", "float32")
    e = tir.Add(Cast("float32", i), x)
    out = substitute(e, {i: 5, x: 0.5})
    assert out == tir.Add(Cast("float32", imm(5)), FloatImm("float32", 0.5))
    assert substitute(e, {2: i}) == tir.Add(Cast("float32", i), i)
    assert substitute(e, {Var(9, "unused"): 1}) is e
    assert substitute(e, {}) is e
    assert substitute(e, lambda v: imm(0) if v.vid == 1 else None) == tir.Add(Cast("float32", imm(0)), x)


def test_substitute_reaches_buffer_shapes_everywhere_but_not_definitions() -> None:
    n, i = Var(0, "n"), Var(1, "i")
    A = Buffer(10, "A", "float32", (n, n * 2), strides=(n * 2, imm(1)))
    T = Buffer(11, "T", "float32", (n,))
    body = For(i, imm(0), n, ForKind.SERIAL, Allocate(T, BufferStore(A, BufferLoad(T, (i,)), (i, i))))
    f = PrimFunc((n, A), body)
    g = substitute(f, {n: 16})
    A16 = Buffer(10, "A", "float32", (imm(16), imm(16) * 2), strides=(imm(16) * 2, imm(1)))
    assert g.params[0] is n  # the parameter (a definition) stays
    assert g.params[1] == A16
    assert g.body.extent == imm(16) and g.body.loop_var is i
    alloc = g.body.body
    assert alloc.buffer.shape == (imm(16),)
    assert alloc.body.buffer == A16 and alloc.body.value.buffer == alloc.buffer
    assert alloc.body.buffer is g.params[1]  # one rewritten object for one input object
    assert substitute(A, {n: 3}).shape == (imm(3), imm(3) * 2)


def test_substitute_bad_arguments() -> None:
    i = Var(1, "i")
    with pytest.raises(TypeError, match=r"map keys must be tir\.Var or int vids, got str 'i'"):
        substitute(i + 1, {"i": 1})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match=r"map keys must be tir\.Var or int vids, got bool True"):
        substitute(i + 1, {True: 1})
    with pytest.raises(TypeError, match=r"replacement of %i \(vid 1\) must be a tir expression or a number"):
        substitute(i + 1, {i: "zero"})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match=r"cannot substitute in parpass\.ir\.relax\.Var node"):
        substitute(relax.Var(0, "x"), {i: 1})
    with pytest.raises(TypeError, match="value_map must be a mapping or a function"):
        substitute(i, 3)  # type: ignore[arg-type]
