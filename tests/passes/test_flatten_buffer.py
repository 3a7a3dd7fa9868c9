"""FlattenBuffer: buffers become one-dimensional, accesses use flat offsets, memory and meaning stay the same."""

from __future__ import annotations

import numpy as np
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
    run_pass,
    same_meaning,
    skipped_copy,
    small_prim_module,
)

from parpass.ir import IRModule, check_well_formed, tir
from parpass.ir.builder import PrimFuncBuilder
from parpass.passes.flatten_buffer import FlattenBuffer, flatten_prim_func, flattened_layout
from parpass.testing import random_inputs, run_prim_func
from parpass.transform import PassContext, get_pass


def test_row_major_buffers_become_one_dimensional() -> None:
    pb = PrimFuncBuilder("main")
    a = pb.buffer("A", (4, 8), F32)
    b = pb.buffer("B", (2, 4, 8), F32)
    with pb.for_range("i", 4) as i, pb.for_range("j", 8) as j:
        pb.store(a, (i, j), b[1, i, j] + a[i, 0])
    func = pb.finish()

    eb = PrimFuncBuilder("main")
    ea = eb.buffer("A", (32,), F32)
    e_b = eb.buffer("B", (64,), F32)
    with eb.for_range("i", 4) as ei, eb.for_range("j", 8) as ej:
        eb.store(ea, (ei * 8 + ej,), e_b[32 + ei * 8 + ej] + ea[ei * 8])
    out = run_pass(FlattenBuffer(), func)
    assert_ir(out, eb.finish())
    assert [p.vid for p in out.params] == [p.vid for p in func.params]  # same buffers, same memory
    same_meaning(module_of(func), module_of(out), ["main"])


def test_zero_dimensional_buffer_becomes_one_element() -> None:
    s = tir.Buffer(0, "s", F32, ())
    a = tir.Buffer(1, "A", F32, (imm(4),))
    func = tir.PrimFunc((s, a), a.store(2, tir.BufferLoad(s, ())))
    out = flatten_prim_func(func)
    flat_s = tir.Buffer(0, "s", F32, (imm(1),))
    assert_ir(out, tir.PrimFunc((flat_s, a), a.store(2, flat_s[0])))


def test_symbolic_shapes_give_symbolic_strides_and_size() -> None:
    pb = PrimFuncBuilder("main")
    n = pb.var("n")
    m = pb.var("m")
    a = pb.buffer("A", (n, 4, m), I32)
    with pb.for_range("i", n) as i, pb.for_range("k", m) as k:
        pb.store(a, (i, 3, k), i + k)
    func = pb.finish()

    eb = PrimFuncBuilder("main")
    en = eb.var("n")
    em = eb.var("m")
    ea = eb.buffer("A", ((em * 4) * en,), I32)
    with eb.for_range("i", en) as ei, eb.for_range("k", em) as ek:
        eb.store(ea, (ei * (em * 4) + imm(3) * em + ek,), ei + ek)
    out = run_pass(FlattenBuffer(), func)
    assert_ir(out, eb.finish())
    same_meaning(module_of(func), module_of(out), ["main"])


def test_strided_buffers_use_their_strides_and_the_memory_they_reach() -> None:
    pb = PrimFuncBuilder("main")
    out_buf = pb.buffer("O", (3, 4), I32)
    with pb.allocate("T", (3, 4), I32, strides=(10, 2)) as t:
        with pb.for_range("i", 3) as i, pb.for_range("j", 4) as j:
            pb.store(t, (i, j), i * 4 + j)
        with pb.for_range("i2", 3) as i2, pb.for_range("j2", 4) as j2:
            pb.store(out_buf, (i2, j2), t[i2, j2] * 2)
    func = pb.finish()
    layout = flattened_layout(func.body.buffer)  # type: ignore[union-attr]
    assert layout is not None
    flat, strides = layout
    assert_ir(flat, tir.Buffer(func.body.buffer.vid, "T", I32, (imm(1 + 2 * 10 + 3 * 2),)))  # type: ignore[union-attr]
    assert [s.value for s in strides] == [10, 2]  # type: ignore[union-attr]
    out = flatten_prim_func(func)
    check_well_formed(out)
    assert "T[i2 * 10 + j2 * 2]".replace(" ", "") in str(out).replace(" ", "").replace("%", "")
    same_meaning(module_of(func), module_of(out), ["main"])


def test_strided_parameter_reads_the_same_memory() -> None:
    a = tir.Buffer(0, "A", F32, (imm(2), imm(3)), (imm(4), imm(1)))
    o = tir.Buffer(1, "O", F32, (imm(2), imm(3)))
    i, j = tir.Var(2, "i"), tir.Var(3, "j")
    body = tir.For(
        i, imm(0), imm(2), tir.ForKind.SERIAL, tir.For(j, imm(0), imm(3), tir.ForKind.SERIAL, o.store((i, j), a[i, j]))
    )
    func = tir.PrimFunc((a, o), body)
    out = flatten_prim_func(func)
    assert out.params[0].shape[0].value == 1 + 1 * 4 + 2 * 1  # type: ignore[union-attr]
    src = np.arange(6, dtype=np.float32).reshape(2, 3)
    (_, expected) = run_prim_func(func, src, np.zeros((2, 3), np.float32))
    memory = np.zeros(7, np.float32)  # the strided layout: row k starts at element 4 * k
    memory[[0, 1, 2, 4, 5, 6]] = src.reshape(-1)
    (_, got) = run_prim_func(out, memory, np.zeros(6, np.float32))
    np.testing.assert_array_equal(got, expected.reshape(-1))


def test_vector_accesses_stay_vector_accesses() -> None:
    a = tir.Buffer(0, "A", F32, (imm(4), imm(8)))
    b = tir.Buffer(1, "B", F32, (imm(4), imm(8)))
    i = tir.Var(2, "i")
    ramp = tir.Ramp(imm(0), imm(1), 4)
    gather = tir.Ramp(imm(0), imm(2), 4) * tir.Broadcast(imm(1), 4)
    store = tir.BufferStore(a, tir.BufferLoad(b, (i, gather)), (i, ramp))
    out = flatten_prim_func(tir.PrimFunc((a, b, i), store))
    flat_a = tir.Buffer(0, "A", F32, (imm(32),))
    flat_b = tir.Buffer(1, "B", F32, (imm(32),))
    expected = tir.BufferStore(
        flat_a,
        tir.BufferLoad(flat_b, (gather + tir.Broadcast(i * 8, 4),)),
        (tir.Ramp(i * 8, imm(1), 4),),
    )
    assert_ir(out.body, expected)
    check_well_formed(out)


def test_flat_buffers_are_left_alone_and_the_pass_is_registered() -> None:
    a = tir.Buffer(0, "A", F32, (imm(8),))
    i = tir.Var(1, "i")
    func = tir.PrimFunc((a,), tir.For(i, imm(0), imm(8), tir.ForKind.SERIAL, a.store(i, a[i] * 2.0)))
    assert flatten_prim_func(func) is func
    assert FlattenBuffer()(module_of(func))["main"] is func
    assert get_pass("FlattenBuffer").info.name == "FlattenBuffer"


def test_skip_optimization_functions_are_left_alone() -> None:
    a = tir.Buffer(0, "A", F32, (imm(2), imm(2)))
    mod = skipped_copy(tir.PrimFunc((a,), a.store((1, 1), tir.FloatImm(F32, 1.0))))
    out = FlattenBuffer()(mod)
    assert out["skipped"] is mod["skipped"]
    assert out["main"] is not mod["main"]


def test_deep_indices_and_nests_do_not_recurse() -> None:
    a = tir.Buffer(0, "A", I32, (imm(4), imm(4)))
    n = tir.Var(1, "n")
    index = deep_expression(5000, n, lambda e, k: tir.min_(e + 1, imm(3)))
    func = tir.PrimFunc((a, n), deep_nest(2000, a.store((index, 0), n), tir.ForKind.SERIAL))
    out = flatten_prim_func(func)
    check_well_formed(out)
    same_meaning(module_of(func), module_of(out), ["main"], seeds=(0,))
    assert random_inputs(out)[0].shape == (16,)


@PROPERTY_SETTINGS
@given(seed=SEEDS)
def test_random_modules_keep_their_meaning_with_reshaped_inputs(seed: int) -> None:
    _, after = check_prim_func_pass(FlattenBuffer, small_prim_module(seed))
    for name in after.names():
        func = after[name]
        if isinstance(func, tir.PrimFunc) and not func.skip_optimization:
            assert all(len(p.shape) == 1 for p in func.params if isinstance(p, tir.Buffer))


def test_statistics_count_flattened_buffers() -> None:
    pb = PrimFuncBuilder("main")
    a = pb.buffer("A", (4, 8), F32)  # flattened
    b = pb.buffer("B", (2, 4, 8), F32)  # flattened
    c = pb.buffer("C", (8,), F32)  # already flat
    with pb.for_range("i", 4) as i, pb.for_range("j", 8) as j:
        pb.store(a, (i, j), b[1, i, j] + a[i, 0] + c[j])  # A is used three times: one buffer
    s = tir.Buffer(0, "s", F32, ())  # 0-d: flattened
    d = tir.Buffer(1, "D", F32, (imm(4),))
    mod = IRModule({"main": pb.finish(), "scalar": tir.PrimFunc((s, d), d.store(2, tir.BufferLoad(s, ())))})
    with PassContext(config={"parpass.pass_statistics": True}) as ctx:
        out = FlattenBuffer()(mod)
    assert ctx.pass_statistics.as_dict()["FlattenBuffer"] == {"flattened": 3}
    with PassContext(config={"parpass.pass_statistics": True}) as ctx:
        again = FlattenBuffer()(out)
    assert all(again[name] is out[name] for name in out.names())
    assert ctx.pass_statistics.as_dict()["FlattenBuffer"] == {"flattened": 0}
