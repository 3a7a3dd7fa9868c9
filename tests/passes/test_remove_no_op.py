"""RemoveNoOp: statements without effect disappear; everything else stays, the same objects where unchanged."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from tir_helpers import (
    F32,
    I32,
    PROPERTY_SETTINGS,
    SEEDS,
    assert_ir,
    check_prim_func_pass,
    deep_nest,
    imm,
    module_of,
    prim_names,
    run_pass,
    same_meaning,
    skipped_copy,
    small_prim_module,
)

from parpass.ir import check_well_formed, tir
from parpass.ir.builder import PrimFuncBuilder
from parpass.passes.remove_no_op import RemoveNoOp, is_no_op, remove_no_op_prim_func
from parpass.transform import PassContext, get_pass

NOOP = tir.Evaluate(imm(0))


def test_no_op_statements_are_removed_from_sequences() -> None:
    pb = PrimFuncBuilder("main")
    a = pb.buffer("A", (8,), F32)
    b = pb.buffer("B", (8,), F32)
    x = pb.var("x", F32)
    pb.evaluate(imm(0))
    with pb.for_range("i", 8) as i:
        pb.store(a, (i,), a[i])  # a store of what is there
        pb.evaluate(tir.Call(F32, "exp", (b[i] * x,)))  # pure: no effect
    with pb.for_range("k", 4):
        pb.evaluate(tir.FloatImm(F32, 1.0))
    with pb.for_range("e", 0) as e:  # runs zero times
        pb.store(b, (e,), x)
    with pb.for_range("j", 8) as j:
        pb.store(b, (j,), a[j] + x)
    func = pb.finish()

    eb = PrimFuncBuilder("main")
    ea = eb.buffer("A", (8,), F32)
    e_b = eb.buffer("B", (8,), F32)
    ex = eb.var("x", F32)
    with eb.for_range("j", 8) as ej:
        eb.store(e_b, (ej,), ea[ej] + ex)
    assert_ir(run_pass(RemoveNoOp(), func), eb.finish())


def test_nested_sequences_are_flattened() -> None:
    a = tir.Buffer(0, "A", F32, (imm(4),))
    s = [a.store(k, tir.FloatImm(F32, float(k))) for k in range(4)]
    body = tir.SeqStmt((tir.SeqStmt((s[0], NOOP, tir.SeqStmt((s[1],)))), tir.SeqStmt(()), s[2], tir.SeqStmt((s[3],))))
    out = remove_no_op_prim_func(tir.PrimFunc((a,), body))
    assert_ir(out.body, tir.SeqStmt(tuple(s)))
    assert all(x is y for x, y in zip(out.body.seq, s, strict=True))  # type: ignore[union-attr]


def test_if_then_else_branches() -> None:
    a = tir.Buffer(0, "A", F32, (imm(4),))
    n = tir.Var(1, "n")
    store = a.store(0, tir.FloatImm(F32, 1.0))
    cond = tir.lt(n, 2)

    def run(stmt: tir.Stmt) -> tir.Stmt:
        return remove_no_op_prim_func(tir.PrimFunc((a, n), stmt)).body

    assert_ir(run(tir.IfThenElse(cond, NOOP, NOOP)), NOOP)
    assert_ir(run(tir.IfThenElse(cond, a.store(1, a[1]))), NOOP)
    assert_ir(run(tir.IfThenElse(cond, store, NOOP)), tir.IfThenElse(cond, store))
    assert_ir(run(tir.IfThenElse(cond, NOOP, store)), tir.IfThenElse(tir.Not(cond), store))
    assert_ir(run(tir.IfThenElse(tir.Not(cond), NOOP, store)), tir.IfThenElse(cond, store))


def test_lets_without_uses_are_removed_with_the_lets_they_were_the_only_use_of() -> None:
    pb = PrimFuncBuilder("main")
    a = pb.buffer("A", (4,), I32)
    n = pb.var("n")
    with pb.let("used", n + 1) as used, pb.let("a", n * 2) as la, pb.let("b", la + 1):
        with pb.let("empty", n):
            pb.evaluate(imm(0))
        pb.store(a, (0,), used)
    func = pb.finish()

    eb = PrimFuncBuilder("main")
    ea = eb.buffer("A", (4,), I32)
    en = eb.var("n")
    with eb.let("used", en + 1) as e_used:
        eb.store(ea, (0,), e_used)
    assert_ir(run_pass(RemoveNoOp(), func), eb.finish())


def test_allocate_without_effect_is_removed_and_kept_otherwise() -> None:
    pb = PrimFuncBuilder("main")
    a = pb.buffer("A", (4,), F32)
    with pb.allocate("tmp", (4,), F32) as tmp:
        pb.store(tmp, (0,), tmp[0])
    with pb.allocate("acc", (1,), F32) as acc:
        pb.store(acc, (0,), a[0])
        pb.store(a, (1,), acc[0])
    out = run_pass(RemoveNoOp(), pb.finish())
    assert isinstance(out.body, tir.Allocate)
    assert out.body.buffer.name == "acc"


def test_vector_store_of_the_same_lanes_is_a_no_op() -> None:
    a = tir.Buffer(0, "A", F32, (imm(8),))
    ramp = tir.Ramp(imm(0), imm(1), 4)
    out = remove_no_op_prim_func(tir.PrimFunc((a,), tir.BufferStore(a, a[ramp], (tir.Ramp(imm(0), imm(1), 4),))))
    assert_ir(out.body, NOOP)


def test_a_store_to_another_place_or_buffer_is_kept() -> None:
    a = tir.Buffer(0, "A", F32, (imm(8),))
    b = tir.Buffer(1, "B", F32, (imm(8),))
    i = tir.Var(2, "i")
    body = tir.For(i, imm(0), imm(7), tir.ForKind.SERIAL, tir.SeqStmt((a.store(i, a[i + 1]), b.store(i, a[i]))))
    func = tir.PrimFunc((a, b), body)
    assert remove_no_op_prim_func(func) is func


def test_whole_body_without_effect_becomes_evaluate_zero_and_nothing_to_remove_is_identity() -> None:
    a = tir.Buffer(0, "A", F32, (imm(8),))
    i = tir.Var(1, "i")
    func = tir.PrimFunc((a,), tir.For(i, imm(0), imm(8), tir.ForKind.PARALLEL, a.store(i, a[i])))
    out = remove_no_op_prim_func(func)
    assert_ir(out.body, NOOP)
    assert remove_no_op_prim_func(out) is out
    assert is_no_op(out.body)
    assert not is_no_op(a.store(0, a[1]))


def test_skip_optimization_functions_are_left_alone() -> None:
    a = tir.Buffer(0, "A", F32, (imm(8),))
    mod = skipped_copy(tir.PrimFunc((a,), tir.SeqStmt((NOOP, a.store(0, tir.FloatImm(F32, 1.0))))))
    out = RemoveNoOp()(mod)
    assert out["skipped"] is mod["skipped"]
    assert out["main"] is not mod["main"]
    assert get_pass("RemoveNoOp").info.name == "RemoveNoOp"


def test_deep_nests_do_not_recurse() -> None:
    a = tir.Buffer(0, "A", F32, (imm(8),))
    x = tir.Var(1, "x", F32)
    for kind in (tir.ForKind.SERIAL, tir.ForKind.UNROLLED):
        empty = tir.PrimFunc((a, x), deep_nest(2000, a.store(0, a[0]), kind, extent=2))
        assert_ir(remove_no_op_prim_func(empty).body, NOOP)
        full = tir.PrimFunc((a, x), deep_nest(2000, tir.SeqStmt((NOOP, a.store(0, x))), kind))
        out = remove_no_op_prim_func(full)
        check_well_formed(out)
        same_meaning(module_of(full), module_of(out), ["main"], seeds=(0,))
    lets: tir.Stmt = a.store(0, x)
    for k in range(2000):
        lets = tir.LetStmt(tir.Var(10 + k, f"t{k}", F32), x, lets)
    assert_ir(remove_no_op_prim_func(tir.PrimFunc((a, x), lets)).body, a.store(0, x))


@PROPERTY_SETTINGS
@given(seed=SEEDS)
def test_random_modules_keep_their_meaning_and_lose_their_no_ops(seed: int) -> None:
    _, after = check_prim_func_pass(RemoveNoOp, small_prim_module(seed))
    for name in prim_names(after):
        func = after[name]
        if not func.skip_optimization:
            assert is_no_op(func.body) or not _holds_no_op(func.body), f"{name} still has a no-op:\n{func}"


def _holds_no_op(stmt: tir.Stmt) -> bool:
    """A no-op statement, or an ``A[i] = A[i]`` store, anywhere in ``stmt``."""
    stack: list[Any] = [stmt]
    while stack:
        s = stack.pop()
        if is_no_op(s) or (type(s) is tir.BufferStore and s.value == s.buffer[s.indices]):
            return True
        stack.extend(c for c in s.children() if isinstance(c, tir.Stmt.__args__))  # type: ignore[attr-defined]
    return False


def test_statistics_count_removed_statements() -> None:
    a = tir.Buffer(0, "A", F32, (imm(8),))
    b = tir.Buffer(1, "B", F32, (imm(8),))
    x = tir.Var(2, "x", F32)
    n = tir.Var(3, "n")
    i, e, j, v = tir.Var(4, "i"), tir.Var(5, "e"), tir.Var(6, "j"), tir.Var(7, "v")
    serial = tir.ForKind.SERIAL
    body = tir.SeqStmt(
        (
            NOOP,  # 1: dropped from the sequence
            tir.For(  # 3: the store, the evaluate, then the loop
                i,
                imm(0),
                imm(8),
                serial,
                tir.SeqStmt((a.store(i, a[i]), tir.Evaluate(tir.Call(F32, "exp", (b[i] * x,))))),
            ),
            tir.For(e, imm(0), imm(0), serial, b.store(e, x)),  # 1: runs zero times
            tir.IfThenElse(tir.lt(n, 4), b.store(0, x), NOOP),  # 1: the empty else
            tir.LetStmt(v, n + 1, b.store(1, x)),  # 1: v is unused
            tir.For(j, imm(0), imm(8), serial, b.store(j, a[j] + x)),  # kept
        )
    )
    mod = module_of(tir.PrimFunc((a, b, x, n), body))
    check_well_formed(mod["main"])
    with PassContext(config={"parpass.pass_statistics": True}) as ctx:
        out = RemoveNoOp()(mod)
    assert_ir(out["main"].body, tir.SeqStmt((tir.IfThenElse(tir.lt(n, 4), b.store(0, x)), b.store(1, x), body.seq[-1])))
    assert ctx.pass_statistics.as_dict()["RemoveNoOp"] == {"removed": 7}
    with PassContext(config={"parpass.pass_statistics": True}) as ctx:
        assert RemoveNoOp()(out)["main"] is out["main"]
    assert ctx.pass_statistics.as_dict()["RemoveNoOp"] == {"removed": 0}
