"""Simplify: constant folding, canonical sums, identities, facts from loops and lets, statement consequences."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given
from tir_helpers import (
    F32,
    I32,
    PROPERTY_SETTINGS,
    SEEDS,
    assert_ir,
    check_prim_func_pass,
    deep_expression,
    deep_nest,
    imm,
    module_of,
    prim_names,
    run_pass,
    same_meaning,
    skipped_copy,
    small_prim_module,
)

from parpass.ir import IRModule, check_well_formed, tir, to_bytes
from parpass.ir.builder import PrimFuncBuilder
from parpass.ir.serialization import decode_function, encode_function
from parpass.passes.simplify import Simplify, simplify_expr, simplify_prim_func
from parpass.testing import assert_same_meaning
from parpass.transform import PassContext, get_pass

i = tir.Var(0, "i")
j = tir.Var(1, "j")
x = tir.Var(2, "x")
f = tir.Var(3, "f", F32)
u8 = tir.Var(4, "u", "uint8")


def fimm(value: float) -> tir.FloatImm:
    return tir.FloatImm(F32, value)


# ---------------------------------------------------------------------- expressions on their own


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (imm(7) // 2 + imm(-7) % 2, imm(4)),
        (imm(-7) // 2, imm(-4)),  # floor division rounds toward -inf
        (imm(-7) % 2, imm(1)),
        (imm(7) % -2, imm(-1)),  # the remainder has the sign of the divisor
        (imm(2**31 - 1) + 1, imm(-(2**31))),  # int32 wraps
        (tir.IntImm("int8", 127) + tir.IntImm("int8", 1), tir.IntImm("int8", -128)),
        (tir.IntImm("uint8", 0) - tir.IntImm("uint8", 1), tir.IntImm("uint8", 255)),
        (imm(1 << 20) * imm(1 << 12), imm(0)),
        (tir.min_(imm(3), imm(-2)), imm(-2)),
        (tir.lt(imm(3), imm(4)), tir.IntImm("bool", 1)),
        (tir.Cast("int8", imm(300)), tir.IntImm("int8", 44)),
        (tir.Cast(F32, imm(3)), fimm(3.0)),
        (tir.Cast(I32, fimm(-2.75)), imm(-2)),  # truncation toward zero, as numpy's astype
    ],
)
def test_constant_folding_follows_the_dtype(expr: tir.PrimExpr, expected: tir.PrimExpr) -> None:
    assert_ir(simplify_expr(expr), expected)


@pytest.mark.parametrize(
    "expr",
    [x // 0, x % 0, imm(7) // 0, imm(7) % imm(0), imm(-(2**31)) // -1, tir.Cast(I32, fimm(3e10))],
    ids=["x//0", "x%0", "7//0", "7%0", "min//-1 overflows", "cast out of range"],
)
def test_what_would_fail_or_is_undefined_is_not_folded(expr: tir.PrimExpr) -> None:
    assert simplify_expr(expr) is expr


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (x + 0, x),
        (x * 1, x),
        (x * 0, imm(0)),
        (x - x, imm(0)),
        (tir.min_(x, x), x),
        (tir.max_(x, x), x),
        (x // 1, x),
        (x % 1, imm(0)),
        (tir.Select(tir.IntImm("bool", 1), x, i), x),
        (tir.Select(tir.lt(x, i), j, j), j),
        (tir.Not(tir.Not(tir.lt(x, i))), tir.lt(x, i)),
        (tir.Not(tir.lt(x, i)), tir.ge(x, i)),
        (tir.Cast(I32, x), x),
        (tir.And(tir.IntImm("bool", 1), tir.lt(x, i)), tir.lt(x, i)),
        (tir.Or(tir.lt(x, i), tir.IntImm("bool", 1)), tir.IntImm("bool", 1)),
    ],
)
def test_identities(expr: tir.PrimExpr, expected: tir.PrimExpr) -> None:
    assert_ir(simplify_expr(expr), expected)


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (j + i, i + j),  # variables in id order
        ((i + 1) * 8 - 8 + j, i * 8 + j),
        (x * 3 + i + x * 5, i + x * 8),
        (2 * x, x * 2),
        (imm(5) - x + 2, imm(7) - x),
        (imm(0) - x - x, imm(0) - x * 2),
        ((i + j) * (i - j), i * i - j * j),
        (i * (x * j), i * j * x),
        (u8 - tir.IntImm("uint8", 1) + u8, u8 * tir.IntImm("uint8", 2) - tir.IntImm("uint8", 1)),
    ],
)
def test_integer_sums_and_products_get_a_canonical_form(expr: tir.PrimExpr, expected: tir.PrimExpr) -> None:
    assert_ir(simplify_expr(expr), expected)


def test_canonical_order_does_not_depend_on_how_the_expression_was_built() -> None:
    a = tir.Buffer(9, "A", I32, (imm(8),))
    loads = [a[k] for k in range(4)]
    forward = loads[0] + loads[1] + loads[2] + loads[3]
    backward = loads[3] + (loads[2] + (loads[1] + loads[0]))
    shuffled = loads[2] + loads[0] + loads[3] + loads[1]
    expected = simplify_expr(forward)
    assert_ir(simplify_expr(backward), expected)
    assert_ir(simplify_expr(shuffled), expected)
    assert simplify_expr(expected) is expected


def test_floats_fold_exactly_and_never_reassociate() -> None:
    folded = simplify_expr(fimm(0.1) + fimm(0.2))
    assert isinstance(folded, tir.FloatImm)
    assert folded.value == float(np.float32(0.1) + np.float32(0.2))  # float32 precision, not float64
    assert_ir(simplify_expr(f + 0.0), f)
    assert_ir(simplify_expr(f * 1.0), f)
    assert_ir(simplify_expr(2.0 * f), f * 2.0)
    kept = [f * 0.0, f - f, (f + 1.0) + 2.0, fimm(1.0) // fimm(0.0), fimm(3e38) * fimm(10.0)]
    for expr in kept:
        assert simplify_expr(expr) is expr, f"{expr} must not be simplified"


def test_unchanged_expressions_keep_their_identity() -> None:
    a = tir.Buffer(9, "A", F32, (imm(8),))
    expr = a[i * 2 + 1] * f + tir.Call(F32, "exp", (f,))
    assert simplify_expr(expr) is expr


def test_equal_leaves_that_are_distinct_objects_simplify_alike() -> None:
    """Decoded IR has a new object at every use of a variable or constant; results must not depend on it."""
    twin_i, twin_f = tir.Var(i.vid, i.name_hint), tir.Var(f.vid, f.name_hint, F32)
    a = tir.Buffer(9, "A", F32, (imm(8),))
    kept = a[i * 2 + 1] * f + a[twin_i * imm(2) + imm(1)] * twin_f
    assert simplify_expr(kept) is kept  # each unchanged use keeps its own object
    cancelled = (i * 8 + imm(1)) - (twin_i * imm(8)) + tir.Var(i.vid, i.name_hint) * 0
    assert simplify_expr(cancelled) == imm(1)
    zero, negative_zero = tir.FloatImm(F32, 0.0), tir.FloatImm(F32, -0.0)
    seen_first = tir.Select(tir.lt(i, 4), zero, f)
    pair = tir.Select(tir.lt(i, 5), zero, negative_zero)
    signs = (seen_first + pair) * (pair + seen_first)  # the constant 0.0 gets its sid first, whatever the walk order
    assert simplify_expr(signs) is signs  # 0.0 == -0.0 as floats, but they are different constants


# ---------------------------------------------------------------------- facts from the program


def test_comparisons_min_max_and_divisions_are_decided_from_loop_bounds() -> None:
    pb = PrimFuncBuilder("main")
    a = pb.buffer("A", (16, 8), I32)
    with pb.for_range("i", 16) as li, pb.for_range("j", 8) as lj:
        with pb.if_then_else(tir.lt(li, 16)):
            pb.store(a, (tir.min_(li, 15), tir.max_(lj, 0)), (li * 8 + lj) // 8 + (li * 8 + lj) % 8)
        with pb.else_():
            pb.store(a, (li, lj), 0)
    func = pb.finish()

    eb = PrimFuncBuilder("main")
    ea = eb.buffer("A", (16, 8), I32)
    with eb.for_range("i", 16) as ei, eb.for_range("j", 8) as ej:
        eb.store(ea, (ei, ej), ei + ej)
    assert_ir(run_pass(Simplify(), func), eb.finish())


def test_lets_bound_to_constants_are_substituted_and_other_lets_give_ranges() -> None:
    pb = PrimFuncBuilder("main")
    a = pb.buffer("A", (4, 8), F32)
    b = pb.buffer("B", (4, 8), F32)
    with (
        pb.for_range("i", 4) as li,
        pb.for_range("j", 8) as lj,
        pb.let("c", imm(3)) as c,
        pb.let("flat", li * 8 + lj) as flat,
    ):
        pb.store(a, (flat // 8, flat % 8), b[li, lj * 1 + c - 3])
    func = pb.finish()

    eb = PrimFuncBuilder("main")
    ea = eb.buffer("A", (4, 8), F32)
    e_b = eb.buffer("B", (4, 8), F32)
    with eb.for_range("i", 4) as ei, eb.for_range("j", 8) as ej, eb.let("flat", ei * 8 + ej):
        eb.store(ea, (ei, ej), e_b[ei, ej])
    assert_ir(run_pass(Simplify(), func), eb.finish())


def test_variables_in_allocated_shapes_keep_their_definitions() -> None:
    a = tir.Buffer(0, "A", F32, (imm(8),))
    n = tir.Var(1, "n")
    t = tir.Buffer(2, "T", F32, (n + 1,))
    body = tir.LetStmt(n, imm(4), tir.Allocate(t, tir.SeqStmt((t.store(0, 1.0), a.store(n, t[0])))))
    func = tir.PrimFunc((a,), body)
    out = simplify_prim_func(func)
    check_well_formed(out)
    assert out is func  # the let cannot go: the buffer's shape uses n


def test_comparison_not_decided_when_a_value_could_wrap() -> None:
    pb = PrimFuncBuilder("main")
    a = pb.buffer("A", (1,), "bool")
    n = pb.var("n")
    with pb.for_range("i", 4) as li:
        pb.store(a, (0,), tir.lt(n, n + 1))  # false for n = 2**31 - 1
        pb.store(a, (0,), tir.lt(li, li + 1))  # i is small: true
    out = run_pass(Simplify(), pb.finish())
    stores = out.body.body.seq  # type: ignore[union-attr]
    assert_ir(stores[0].value, tir.lt(n, n + 1))
    assert_ir(stores[1].value, tir.IntImm("bool", 1))


# ---------------------------------------------------------------------- statements


def test_dead_branches_empty_loops_and_unit_loops() -> None:
    pb = PrimFuncBuilder("main")
    a = pb.buffer("A", (8,), F32)
    n = pb.var("n")
    with pb.for_range("i", 8) as li, pb.if_then_else(tir.ge(li, 8)):
        pb.store(a, (li,), 1.0)
    with pb.for_range("k", 0):
        pb.store(a, (0,), 2.0)
    with pb.for_range("u", n, n + 1) as lu:  # extent (n + 1) - n == 1
        pb.store(a, (lu - n,), 3.0)
    with pb.for_range("v", 2, 3) as lv:
        pb.store(a, (lv * 2,), 4.0)
    func = pb.finish()

    eb = PrimFuncBuilder("main")
    ea = eb.buffer("A", (8,), F32)
    eb.var("n")
    eb.store(ea, (0,), 3.0)
    eb.store(ea, (4,), 4.0)
    assert_ir(run_pass(Simplify(), func), eb.finish())


def test_a_body_that_disappears_becomes_evaluate_zero() -> None:
    pb = PrimFuncBuilder("main")
    a = pb.buffer("A", (8,), F32)
    with pb.for_range("i", 8) as li, pb.if_then_else(tir.lt(li, 0)):
        pb.store(a, (li,), 1.0)
    assert_ir(run_pass(Simplify(), pb.finish()).body, tir.Evaluate(imm(0)))


def test_untaken_then_branch_keeps_the_else_branch_under_the_negated_condition() -> None:
    pb = PrimFuncBuilder("main")
    a = pb.buffer("A", (8,), F32)
    n = pb.var("n")
    with pb.for_range("i", 8) as li:
        with pb.if_then_else(tir.lt(li, n)), pb.for_range("k", 0):
            pb.store(a, (li,), 1.0)
        with pb.else_():
            pb.store(a, (li,), 2.0)
    out = run_pass(Simplify(), pb.finish())
    assert isinstance(out.body, tir.For)
    assert_ir(out.body.body, tir.IfThenElse(tir.ge(out.body.loop_var, n), a.store(out.body.loop_var, 2.0)))


def test_function_with_nothing_to_simplify_is_returned_as_is() -> None:
    pb = PrimFuncBuilder("main")
    a = pb.buffer("A", (8,), F32)
    n = pb.var("n")
    with pb.for_range("i", n) as li:
        pb.store(a, (li * 2 + 1,), a[li] * 2.0)
    func = pb.finish()
    mod = module_of(func)
    assert simplify_prim_func(func) is func
    assert Simplify()(mod)["main"] is func


def test_skip_optimization_functions_are_left_alone() -> None:
    pb = PrimFuncBuilder("main")
    a = pb.buffer("A", (8,), I32)
    pb.store(a, (0,), imm(1) + 2)
    mod = skipped_copy(pb.finish())
    out = Simplify()(mod)
    assert out["skipped"] is mod["skipped"]
    assert out["main"] is not mod["main"]


def test_registered_by_name() -> None:
    p = get_pass("Simplify")
    assert p.info.name == "Simplify"
    assert p.info.opt_level == 0


# ---------------------------------------------------------------------- deep IR


def test_deep_expressions_and_nests_do_not_recurse() -> None:
    a = tir.Buffer(0, "A", I32, (imm(8),))
    n = tir.Var(1, "n")
    chain = deep_expression(5000, n, lambda e, k: e + 1)
    mixed = deep_expression(5000, n, lambda e, k: tir.min_(e + 1, n * 2) if k % 2 else e // 2)
    func = tir.PrimFunc((a, n), tir.SeqStmt((a.store(0, chain), a.store(1, mixed % 8))))
    out = simplify_prim_func(func)
    check_well_formed(out)
    assert_ir(out.body.seq[0].value, n + 5000)  # type: ignore[union-attr]
    assert simplify_prim_func(out) is out
    same_meaning(module_of(func), module_of(out), ["main"])

    nest = tir.PrimFunc((a, n), deep_nest(2000, a.store(0, n), tir.ForKind.SERIAL, extent=1))
    flat = simplify_prim_func(nest)
    assert_ir(flat.body, a.store(0, n))

    lets: tir.Stmt = a.store(0, n)
    for k in range(2000):
        v = tir.Var(10 + k, f"t{k}")
        lets = tir.LetStmt(v, n + k, tir.IfThenElse(tir.lt(v, n), lets, a.store(1, v)))
    out = simplify_prim_func(tir.PrimFunc((a, n), lets))
    check_well_formed(out)


# ---------------------------------------------------------------------- properties


@PROPERTY_SETTINGS
@given(seed=SEEDS)
def test_random_modules_keep_their_meaning_and_simplify_once(seed: int) -> None:
    before, after = check_prim_func_pass(Simplify, small_prim_module(seed))
    # random modules always hold something to simplify (checked on 300 seeds): a pass that did nothing fails
    assert any(after[n] is not before[n] for n in prim_names(before)), "nothing simplified: the test proves nothing"


def _random_int_expr(rng: random.Random, depth: int, leaves: list[tir.PrimExpr], dtype: str) -> tir.PrimExpr:
    if depth == 0 or rng.random() < 0.25:
        if rng.random() < 0.6:
            return rng.choice(leaves)
        bits = int(dtype.removeprefix("u").removeprefix("int"))
        signed = not dtype.startswith("u")
        edges = [(1 << (bits - 1)) - 1, -(1 << (bits - 1))] if signed else [(1 << bits) - 1, 1 << (bits - 1)]
        return tir.IntImm(dtype, rng.choice([0, 1, 2, 3, 7, 8, *edges, *([-1, -3] if signed else [])]))
    a = _random_int_expr(rng, depth - 1, leaves, dtype)
    b = _random_int_expr(rng, depth - 1, leaves, dtype)
    op = rng.randrange(11)
    if op < 5:
        return (tir.Add, tir.Sub, tir.Mul, tir.Min, tir.Max)[op](a, b)
    if op < 7:
        return (tir.FloorDiv, tir.FloorMod)[op - 5](a, tir.IntImm(dtype, rng.choice([1, 2, 3, 8, 16])))
    if op < 9:
        cmp = rng.choice([tir.LT, tir.LE, tir.GT, tir.GE, tir.EQ, tir.NE])(a, b)
        cond = tir.Not(cmp) if op == 8 else tir.And(cmp, tir.Or(tir.LT(b, a), tir.EQ(a, b)))
        return tir.Select(cond, a, b)
    other = "int8" if dtype != "int8" else "int32"
    return tir.Cast(dtype, tir.Cast(other, a))


def _int_function(seed: int, dtype: str) -> tir.PrimFunc:
    """A loop nest storing a random integer expression over loop variables, a let, a load and parameters."""
    rng = random.Random(seed)
    a = tir.Buffer(0, "A", dtype, (imm(16),))
    out = tir.Buffer(1, "O", dtype, (imm(16),))
    p, q = tir.Var(2, "p", dtype), tir.Var(3, "q", dtype)
    li, lj, t = tir.Var(4, "i"), tir.Var(5, "j"), tir.Var(6, "t", dtype)
    lo = rng.randint(-3, 3)
    ci = li if dtype == I32 else tir.Cast(dtype, li)
    cj = lj if dtype == I32 else tir.Cast(dtype, lj)
    where = (li - lo) * 4 + lj
    value = _random_int_expr(rng, rng.randint(1, 6), [p, q, ci, cj, t, a[where]], dtype)
    let_value = _random_int_expr(rng, 2, [p, q, ci, cj], dtype)
    inner = tir.For(lj, imm(0), imm(4), tir.ForKind.SERIAL, tir.LetStmt(t, let_value, out.store(where, value)))
    return tir.PrimFunc((a, out, p, q), tir.For(li, imm(lo), imm(rng.randint(1, 4)), tir.ForKind.SERIAL, inner))


@PROPERTY_SETTINGS
@given(seed=SEEDS)
def test_integer_arithmetic_keeps_its_exact_meaning(seed: int) -> None:
    """Random integer expressions of every width, with edge constants that wrap: same results, bit for bit."""
    for dtype in ("int32", "int8", "uint8", "int64", "uint32"):
        func = _int_function(seed, dtype)
        check_well_formed(func)
        out = simplify_prim_func(func)
        check_well_formed(out)
        assert simplify_prim_func(out) is out, f"not idempotent:\n{out}"
        for input_seed in (0, 1, 2):
            assert_same_meaning(module_of(func), module_of(out), "main", seed=input_seed, allow_failing_before=True)


@PROPERTY_SETTINGS
@given(seed=SEEDS)
def test_a_decoded_copy_simplifies_to_the_same_bytes(seed: int) -> None:
    """What workers do: simplify a function decoded from bytes (no leaf shared) instead of the built one."""
    prim_funcs = [f for f in small_prim_module(seed).functions.values() if isinstance(f, tir.PrimFunc)]
    for func in (_int_function(seed, "int32"), _int_function(seed, "uint8"), *prim_funcs):
        copy = decode_function(encode_function(func))
        assert isinstance(copy, tir.PrimFunc)
        assert encode_function(simplify_prim_func(copy)) == encode_function(simplify_prim_func(func))


def test_output_is_byte_identical_across_runs() -> None:
    mod = small_prim_module(7)
    assert to_bytes(Simplify()(mod)) == to_bytes(Simplify()(IRModule(dict(mod.items()))))


def test_statistics_count_rewritten_expressions_removed_statements_and_decided_conditions() -> None:
    a = tir.Buffer(10, "A", F32, (imm(16),))
    b = tir.Buffer(11, "B", F32, (imm(16),))
    n = tir.Var(12, "n")
    g = tir.Var(13, "g", F32)
    k, e = tir.Var(14, "k"), tir.Var(15, "e")
    serial = tir.ForKind.SERIAL
    body = tir.SeqStmt(
        (
            tir.For(
                i,
                imm(0),
                imm(16),
                serial,
                tir.SeqStmt(
                    (
                        a.store(i + 0, b[i] * 1.0),  # 2 expressions rewritten: the index and the value
                        tir.IfThenElse(tir.lt(i, 16), b.store(i, g)),  # decided (true), removed
                    )
                ),
            ),
            tir.For(k, imm(0), imm(1), serial, a.store(k, g)),  # removed (extent 1); its index k -> 0 rewritten
            tir.For(e, imm(0), imm(0), serial, a.store(e, g)),  # removed (extent 0)
            tir.IfThenElse(tir.lt(n, 4), a.store(0, g)),  # nothing to do
        )
    )
    mod = module_of(tir.PrimFunc((a, b, n, g), body))
    check_well_formed(mod["main"])
    with PassContext(config={"parpass.pass_statistics": True}) as ctx:
        out = Simplify()(mod)
    assert ctx.pass_statistics.as_dict()["Simplify"] == {"simplified": 3, "removed": 3, "decided": 1}
    with PassContext(config={"parpass.pass_statistics": True}) as ctx:
        assert Simplify()(out)["main"] is out["main"]
    assert ctx.pass_statistics.as_dict()["Simplify"] == {"simplified": 0, "removed": 0, "decided": 0}
