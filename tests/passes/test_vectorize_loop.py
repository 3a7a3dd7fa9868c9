"""VectorizeLoop: vector code for safe loops, a serial loop (same meaning) for the others."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
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
    same_meaning,
    skipped_copy,
    small_prim_module,
)

from parpass.ir import IRModule, check_well_formed, tir
from parpass.passes.vectorize_loop import VectorizeLoop, vectorize_prim_func
from parpass.testing import assert_same_meaning
from parpass.transform import PassContext, get_pass

A = tir.Buffer(0, "A", F32, (imm(16),))
B = tir.Buffer(1, "B", F32, (imm(16),))
M = tir.Buffer(2, "M", F32, (imm(4), imm(8)))
x = tir.Var(3, "x", F32)
n = tir.Var(4, "n")
i = tir.Var(5, "i")
j = tir.Var(6, "j")
PARAMS = (A, B, M, x, n)


def vloop(body: tir.Stmt, extent: tir.PrimExpr | int = 4, lo: tir.PrimExpr | int = 0, var: tir.Var = i) -> tir.For:
    lo_e = imm(lo) if isinstance(lo, int) else lo
    ext_e = imm(extent) if isinstance(extent, int) else extent
    return tir.For(var, lo_e, ext_e, tir.ForKind.VECTORIZED, body)


def ramp(base: int | tir.PrimExpr, stride: int, lanes: int = 4) -> tir.Ramp:
    return tir.Ramp(imm(base) if isinstance(base, int) else base, imm(stride), lanes)


def vectorized(body: tir.Stmt) -> tir.PrimFunc:
    """The function with ``body`` vectorized, checked well formed and same in meaning."""
    func = tir.PrimFunc(PARAMS, body)
    check_well_formed(func)
    out = vectorize_prim_func(func)
    check_well_formed(out)
    same_meaning(module_of(func), module_of(out), ["main"])
    assert vectorize_prim_func(out) is out
    return out


def is_serial_fallback(out: tir.PrimFunc, loop: tir.For) -> bool:
    body = out.body
    return isinstance(body, tir.For) and body.kind == tir.ForKind.SERIAL and body.body is loop.body


def test_elementwise_loop_becomes_vector_code() -> None:
    out = vectorized(vloop(B.store(i, A[i] * 2.0 + x)))
    expected = tir.BufferStore(
        B,
        tir.BufferLoad(A, (ramp(0, 1),)) * tir.Broadcast(tir.FloatImm(F32, 2.0), 4) + tir.Broadcast(x, 4),
        (ramp(0, 1),),
    )
    assert_ir(out.body, expected)


def test_linear_indices_stay_ramps_with_immediates_folded() -> None:
    out = vectorized(vloop(B.store(i * 2 + 1, A[(i + 1) - 1] + A[15 - i])))
    store = out.body
    assert isinstance(store, tir.BufferStore)
    assert_ir(store.indices[0], ramp(1, 2))
    assert_ir(store.value.a.indices[0], ramp(0, 1))  # type: ignore[union-attr]
    assert_ir(store.value.b.indices[0], ramp(15, -1))  # type: ignore[union-attr]
    out = vectorized(vloop(B.store(i * 1 + 5, x), lo=n - 1, extent=4))
    assert_ir(out.body.indices[0], tir.Ramp(n - 1 + 5, imm(1), 4))  # type: ignore[union-attr]


def test_inner_dimension_of_a_nest() -> None:
    body = tir.For(j, imm(0), imm(4), tir.ForKind.SERIAL, vloop(M.store((j, i), M[j, i] + tir.Cast(F32, i)), extent=8))
    out = vectorized(body)
    inner = out.body.body  # type: ignore[union-attr]
    assert_ir(inner, tir.BufferStore(M, M[j, ramp(0, 1, 8)] + tir.Cast("float32x8", ramp(0, 1, 8)), (j, ramp(0, 1, 8))))


def test_intrinsics_selects_and_comparisons_get_vector_dtypes() -> None:
    value = tir.Select(tir.lt(A[i], x), tir.Call(F32, "exp", (A[i],)), x)
    out = vectorized(vloop(B.store(i, value)))
    load = tir.BufferLoad(A, (ramp(0, 1),))
    bx = tir.Broadcast(x, 4)
    expected = tir.Select(tir.LT(load, bx), tir.Call("float32x4", "exp", (load,)), bx)
    assert_ir(out.body.value, expected)  # type: ignore[union-attr]


def test_in_place_update_of_each_lanes_own_element_is_vectorized() -> None:
    out = vectorized(vloop(tir.SeqStmt((A.store(i, A[i] + 1.0), B.store(i, A[i] * A[i])))))
    assert isinstance(out.body, tir.SeqStmt)


def test_extent_one_substitutes_and_scalar_lets_stay() -> None:
    out = vectorized(vloop(tir.LetStmt(j, n - 1, B.store(i + j, x)), extent=1, lo=3))
    assert_ir(out.body, tir.LetStmt(j, n - 1, B.store(imm(3) + j, x)))


def test_pure_lets_are_substituted_and_lets_with_loads_become_vector_lets() -> None:
    t = tir.Var(7, "t")
    u = tir.Var(8, "u", F32)
    body = tir.LetStmt(t, i * 2, tir.LetStmt(u, A[t], B.store(i, u + A[t + 1])))
    out = vectorized(vloop(body))
    let = out.body
    assert isinstance(let, tir.LetStmt)
    assert let.var.dtype == "float32x4" and let.var.vid > 8  # a fresh id
    assert_ir(let.value, tir.BufferLoad(A, (ramp(0, 2),)))
    assert_ir(let.body.indices[0], ramp(0, 1))  # type: ignore[union-attr]


def test_loop_invariant_condition_is_kept_around_vector_code() -> None:
    out = vectorized(vloop(tir.IfThenElse(tir.lt(n, 3), B.store(i, x), B.store(i, A[i]))))
    assert isinstance(out.body, tir.IfThenElse)
    assert isinstance(out.body.then_case.indices[0], tir.Ramp)  # type: ignore[union-attr]


def test_gather_from_a_buffer_that_is_only_read() -> None:
    out = vectorized(vloop(B.store(i, A[i * i])))
    assert isinstance(out.body, tir.BufferStore)


@pytest.mark.parametrize(
    "body",
    [
        A.store(i + 1, A[i] + 1.0),  # lane k reads what lane k - 1 wrote
        tir.SeqStmt((A.store(i, x), B.store(i, A[i + 1]))),  # reads a later lane's element after the store
        tir.SeqStmt((A.store(i + 1, x), A.store(i, x))),  # two stores at different places
        A.store(0, A[0] + A[i]),  # every lane writes the same element (a reduction)
        A.store(i * i, x),  # a scatter
        A.store(i * 0 + 3, x),  # a ramp of stride 0
        tir.IfThenElse(tir.lt(i, 2), A.store(i, x)),  # condition on the loop variable
        tir.For(j, imm(0), imm(2), tir.ForKind.SERIAL, A.store(i * 2 + j, x)),  # a loop inside
        tir.Allocate(tir.Buffer(9, "T", F32, (imm(4),)), A.store(i, x)),
        tir.BufferStore(B, tir.BufferLoad(A, (tir.Ramp(i * 4, imm(1), 4),)), (tir.Ramp(i * 4, imm(1), 4),)),  # vectors
    ],
    ids=[
        "read-after-write",
        "read-ahead",
        "two-indices",
        "same-element",
        "scatter",
        "stride-0",
        "varying-if",
        "inner-loop",
        "allocate",
        "vectors",
    ],
)
def test_unsafe_loops_fall_back_to_serial(body: tir.Stmt) -> None:
    loop = vloop(body)
    func = tir.PrimFunc(PARAMS, loop)
    out = vectorize_prim_func(func)
    check_well_formed(out)
    assert is_serial_fallback(out, loop)


def test_non_constant_extent_falls_back_and_nested_vectorized_loops_vectorize_the_inner_one() -> None:
    loop = vloop(B.store(i, x), extent=n)
    assert is_serial_fallback(vectorize_prim_func(tir.PrimFunc(PARAMS, loop)), loop)
    nested = vloop(vloop(M.store((j, i), x), extent=8), var=j)
    out = vectorized(nested)
    assert isinstance(out.body, tir.For) and out.body.kind == tir.ForKind.SERIAL
    assert isinstance(out.body.body.indices[1], tir.Ramp)  # type: ignore[union-attr]


def test_no_vectorized_loop_is_identity_and_skip_optimization_is_respected() -> None:
    func = tir.PrimFunc(PARAMS, tir.For(i, imm(0), imm(4), tir.ForKind.SERIAL, B.store(i, x)))
    assert vectorize_prim_func(func) is func
    mod = skipped_copy(tir.PrimFunc(PARAMS, vloop(B.store(i, x))))
    out = VectorizeLoop()(mod)
    assert out["skipped"] is mod["skipped"]
    assert isinstance(out["main"].body, tir.BufferStore)  # type: ignore[union-attr]
    assert get_pass("VectorizeLoop").info.name == "VectorizeLoop"


def test_deep_expressions_lets_and_nests_do_not_recurse() -> None:
    value = deep_expression(5000, A[i], lambda e, k: e + x if k % 2 else tir.max_(e, A[i]))
    out = vectorized(vloop(B.store(i, value)))
    assert isinstance(out.body, tir.BufferStore)
    lets: tir.Stmt = B.store(i, x)
    for k in range(2000):
        lets = tir.LetStmt(tir.Var(100 + k, f"t{k}"), i + k, lets)
    out = vectorized(vloop(lets))
    assert isinstance(out.body, tir.BufferStore)  # every let was pure arithmetic: substituted
    nest = deep_nest(2000, vloop(B.store(i, x)), tir.ForKind.SERIAL)
    out = vectorize_prim_func(tir.PrimFunc(PARAMS, nest))
    check_well_formed(out)


@PROPERTY_SETTINGS
@given(seed=SEEDS)
def test_random_modules_keep_their_meaning_and_lose_their_vectorized_loops(seed: int) -> None:
    _, after = check_prim_func_pass(VectorizeLoop, small_prim_module(seed))
    for name in after.names():
        func = after[name]
        if isinstance(func, tir.PrimFunc) and not func.skip_optimization:
            assert "vectorized(" not in str(func)


def _random_loop(seed: int) -> tir.PrimFunc:
    """A vectorized loop over random stores, lets and ifs whose indices may make lanes interfere."""
    rng = random.Random(seed)
    a = tir.Buffer(0, "A", F32, (imm(64),))
    m = tir.Buffer(1, "M", F32, (imm(8), imm(8)))
    p = tir.Var(2, "p")
    lv = tir.Var(3, "i")
    next_vid = [10]

    def index() -> tir.PrimExpr:
        stride, offset = rng.choice([0, 1, 1, 1, 2, -1]), rng.randint(0, 8)
        return lv * stride + (offset + 8 if stride < 0 else offset)

    def value(depth: int, lets: list[tir.Var]) -> tir.PrimExpr:
        if depth == 0 or rng.random() < 0.3:
            pick = rng.randrange(4)
            if pick == 0:
                return a[index()]
            if pick == 1:
                return m[rng.randint(0, 3), index()]
            return tir.Cast(F32, rng.choice(lets) if lets and pick == 2 else lv)
        x, y = value(depth - 1, lets), value(depth - 1, lets)
        return rng.choice([x + y, x * y, tir.max_(x, y), tir.Select(tir.lt(x, y), x, y)])

    def stmt(depth: int, lets: list[tir.Var]) -> tir.Stmt:
        roll = rng.random()
        if depth > 0 and roll < 0.2:
            var = tir.Var(next_vid[0], "t")
            next_vid[0] += 1
            bound = lv * rng.randint(0, 2) + rng.randint(0, 3) if rng.random() < 0.6 else tir.Cast(I32, a[index()])
            return tir.LetStmt(var, bound, stmt(depth - 1, [*lets, var]))
        if depth > 0 and roll < 0.35:
            cond = tir.lt(p, 4) if rng.random() < 0.6 else tir.lt(lv, 3)
            return tir.IfThenElse(cond, stmt(depth - 1, lets), stmt(depth - 1, lets) if rng.random() < 0.5 else None)
        if depth > 0 and roll < 0.55:
            return tir.SeqStmt(tuple(stmt(depth - 1, lets) for _ in range(rng.randint(2, 3))))
        if rng.random() < 0.5:
            return a.store(index(), value(2, lets))
        return m.store((rng.randint(0, 3), index()), value(2, lets))

    body = stmt(3, [])
    loop = tir.For(lv, imm(rng.randint(0, 2)), imm(rng.choice([1, 2, 4, 8])), tir.ForKind.VECTORIZED, body)
    return tir.PrimFunc((a, m, p), loop)


@settings(max_examples=60, deadline=None)
@given(seed=SEEDS)
def test_random_loops_with_interfering_lanes_keep_their_meaning(seed: int) -> None:
    """Loops that may read what another lane writes: either vectorized safely or left serial, same results."""
    func = _random_loop(seed)
    check_well_formed(func)
    out = vectorize_prim_func(func)
    check_well_formed(out)
    assert vectorize_prim_func(out) is out
    for input_seed in (0, 1):
        assert_same_meaning(module_of(func), module_of(out), "main", seed=input_seed, allow_failing_before=True)


def test_statistics_count_vectorized_and_serialized_loops() -> None:
    mod = IRModule(
        {
            "vector": tir.PrimFunc(PARAMS, vloop(B.store(i, A[i] * 2.0 + x))),  # vectorized
            "one_lane": tir.PrimFunc(PARAMS, vloop(B.store(i, x), extent=1)),  # vectorized: the body, i = 0
            "same_element": tir.PrimFunc(PARAMS, vloop(B.store(0, A[i]))),  # serialized: every lane stores B[0]
            "symbolic": tir.PrimFunc(PARAMS, vloop(B.store(i, x), extent=n)),  # serialized: extent not constant
        }
    )
    with PassContext(config={"parpass.pass_statistics": True}) as ctx:
        out = VectorizeLoop()(mod)
    assert ctx.pass_statistics.as_dict()["VectorizeLoop"] == {"vectorized": 2, "serialized": 2}
    with PassContext(config={"parpass.pass_statistics": True}) as ctx:
        again = VectorizeLoop()(out)
    assert all(again[name] is out[name] for name in out.names())
    assert ctx.pass_statistics.as_dict()["VectorizeLoop"] == {"vectorized": 0, "serialized": 0}
