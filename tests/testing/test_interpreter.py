"""The reference interpreter: known results for both function kinds, errors, deep IR, helpers."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parpass.ir import IRModule, relax, tir
from parpass.ir.node import GlobalVar, Op
from parpass.ir.types import PrimType, TensorType, TupleType
from parpass.testing.generator import random_module
from parpass.testing.interpreter import (
    ArgumentError,
    DivisionByZeroError,
    InterpreterError,
    assert_same_meaning,
    random_inputs,
    run,
    run_function,
    run_prim_func,
)

F32x4 = TensorType((4,), "float32")
I32 = "int32"


# ---------------------------------------------------------------- builders for the tests


def rv(vid: int, name: str) -> relax.Var:
    return relax.Var(vid, name)


def call(op: str, *args: relax.Expr, **attrs: object) -> relax.Call:
    return relax.Call(Op(op), tuple(args), dict(attrs))


def bind(var: relax.Var, value: relax.Expr, ty: object = None) -> relax.Binding:
    return relax.Binding(var, value, ty)  # type: ignore[arg-type]


def func(params: list[tuple[relax.Var, object]], bindings: list[relax.Binding], body: relax.Expr) -> relax.Function:
    return relax.Function(
        tuple(relax.Param(v, t) for v, t in params),  # type: ignore[arg-type]
        relax.SeqExpr(tuple(bindings), body),
    )


def imm(v: int, dtype: str = I32) -> tir.IntImm:
    return tir.IntImm(dtype, v)


def buf(vid: int, name: str, shape: tuple[int, ...], dtype: str = I32, strides: tuple[int, ...] = ()) -> tir.Buffer:
    return tir.Buffer(vid, name, dtype, tuple(imm(d) for d in shape), tuple(imm(s) for s in strides))


def loop(var: tir.Var, extent: int, body: tir.Stmt, kind: tir.ForKind = tir.ForKind.SERIAL, lo: int = 0) -> tir.For:
    return tir.For(var, imm(lo, var.dtype), imm(extent, var.dtype), kind, body)


def quiet(fn, *args):  # type: ignore[no-untyped-def]
    """Run ``fn`` with stdout swallowed (generated modules use the stateful ``print`` op)."""
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args)


# ---------------------------------------------------------------- dataflow functions


def test_function_bindings_constants_and_ops() -> None:
    x, y, z = rv(0, "x"), rv(1, "y"), rv(2, "z")
    two = relax.Constant.from_value(np.float32(2.0))
    f = func(
        [(x, F32x4)],
        [bind(y, call("add", x, x), F32x4), bind(z, call("multiply", y, two), F32x4)],
        relax.Tuple((z, y)),
    )
    out = run_function(IRModule({"f": f}), "f", np.array([1, 2, 3, -4], "float32"))
    assert isinstance(out, tuple) and len(out) == 2
    np.testing.assert_array_equal(out[0], np.array([4, 8, 12, -16], "float32"))
    np.testing.assert_array_equal(out[1], np.array([2, 4, 6, -8], "float32"))
    assert out[0].dtype == np.float32


def test_function_does_not_mutate_its_arguments() -> None:
    x, y = rv(0, "x"), rv(1, "y")
    f = func([(x, F32x4)], [bind(y, call("negative", x))], y)
    arg = np.ones(4, "float32")
    run_function(IRModule({"f": f}), "f", arg)
    np.testing.assert_array_equal(arg, np.ones(4, "float32"))
    assert arg.flags.writeable


def test_tuple_get_item_and_tuple_params() -> None:
    t, a, b, s = rv(0, "t"), rv(1, "a"), rv(2, "b"), rv(3, "s")
    pair = TupleType((F32x4, TensorType((), "int32")))
    parts = rv(4, "parts")
    f = func(
        [(t, pair)],
        [
            bind(a, relax.TupleGetItem(t, 0)),
            bind(parts, call("split", a, sections=2)),
            bind(b, relax.TupleGetItem(parts, 1)),
            bind(s, call("add", relax.TupleGetItem(parts, 0), b)),
        ],
        relax.Tuple((s, relax.TupleGetItem(t, 1))),
    )
    out = run_function(IRModule({"f": f}), "f", (np.array([1, 2, 3, 4], "float32"), np.array(7, "int32")))
    np.testing.assert_array_equal(out[0], np.array([4, 6], "float32"))
    assert out[1] == 7 and out[1].dtype == np.int32


def _if_function(else_value: relax.Expr) -> relax.Function:
    c, x, r, y = rv(0, "c"), rv(1, "x"), rv(2, "r"), rv(3, "y")
    w = rv(4, "w")
    then_ = relax.SeqExpr((bind(y, call("add", x, x)),), y)
    else_ = relax.SeqExpr((bind(w, else_value),), w)
    return func([(c, PrimType("bool")), (x, F32x4)], [bind(r, relax.If(c, then_, else_))], r)


def test_if_runs_only_the_branch_taken() -> None:
    # The else branch calls an op that does not exist: it must not be evaluated when the condition is true.
    mod = IRModule({"f": _if_function(call("no_such_op", rv(1, "x")))})
    x = np.array([1, 2, 3, 4], "float32")
    np.testing.assert_array_equal(run_function(mod, "f", True, x), 2 * x)
    with pytest.raises(InterpreterError, match=r"in function 'f', binding 0 \(%r\) > else branch > binding 0 \(%w\)"):
        run_function(mod, "f", False, x)


def test_if_condition_must_be_a_bool_scalar() -> None:
    c, r = rv(0, "c"), rv(1, "r")
    one = relax.Constant.from_value(np.float32(1))
    f = func([(c, TensorType((2,), "bool"))], [bind(r, relax.If(c, relax.SeqExpr((), one), relax.SeqExpr((), one)))], r)
    with pytest.raises(InterpreterError, match="If condition must be a boolean scalar"):
        run_function(IRModule({"f": f}), "f", np.array([True, False]))


def test_branch_bindings_are_gone_after_the_branch() -> None:
    c, x, r, y = rv(0, "c"), rv(1, "x"), rv(2, "r"), rv(3, "y")
    z = rv(5, "z")
    then_ = relax.SeqExpr((bind(y, call("add", x, x)),), y)
    f = func(
        [(c, PrimType("bool")), (x, F32x4)],
        [bind(r, relax.If(c, then_, relax.SeqExpr((), x))), bind(z, call("add", y, r))],
        z,
    )
    with pytest.raises(InterpreterError, match=r"%y \(vid 3\) is used before it is defined"):
        run_function(IRModule({"f": f}), "f", True, np.zeros(4, "float32"))


def test_an_error_after_a_nested_if_names_the_binding_not_the_branch() -> None:
    # %r = add(If(c, x, x), %u) with %u undefined: the If has ended when %u is read
    c, x, r, u = rv(0, "c"), rv(1, "x"), rv(2, "r"), rv(9, "u")
    nested = relax.If(c, relax.SeqExpr((), x), relax.SeqExpr((), x))
    f = func([(c, PrimType("bool")), (x, F32x4)], [bind(r, call("add", nested, u))], r)
    with pytest.raises(InterpreterError) as caught:
        run_function(IRModule({"f": f}), "f", True, np.zeros(4, "float32"))
    assert str(caught.value).startswith("in function 'f', binding 0 (%r): variable %u (vid 9)"), str(caught.value)


def test_calls_between_functions() -> None:
    a, b, s = rv(0, "a"), rv(1, "b"), rv(2, "s")
    helper = func([(a, F32x4), (b, F32x4)], [bind(s, call("subtract", a, b))], s)
    x, y, r1, r2 = rv(0, "x"), rv(1, "y"), rv(2, "r1"), rv(3, "r2")
    main = func(
        [(x, F32x4), (y, F32x4)],
        [
            bind(r1, relax.Call(GlobalVar("helper"), (x, y))),
            bind(r2, relax.Call(GlobalVar("helper"), (r1, x))),
        ],
        r2,
    )
    mod = IRModule({"main": main, "helper": helper})
    xv, yv = np.array([5, 6, 7, 8], "float32"), np.array([1, 1, 2, 2], "float32")
    np.testing.assert_array_equal(run_function(mod, "main", xv, yv), -yv)  # (x - y) - x


def test_error_in_callee_names_the_call_chain() -> None:
    a, s = rv(0, "a"), rv(1, "s")
    bad = func([(a, F32x4)], [bind(s, call("matmul", a, relax.Constant.from_value(np.float32(1))))], s)
    x, r = rv(0, "x"), rv(1, "r")
    main = func([(x, F32x4)], [bind(r, relax.Call(GlobalVar("bad"), (x,)))], r)
    mod = IRModule({"main": main, "bad": bad})
    with pytest.raises(InterpreterError) as info:
        run_function(mod, "main", np.zeros(4, "float32"))
    text = str(info.value)
    assert "in function 'bad', binding 0 (%s): op 'matmul' failed" in text
    assert "called from function 'main', binding 0 (%r)" in text


def test_call_argument_type_is_checked() -> None:
    a = rv(0, "a")
    callee = func([(a, TensorType((3,), "float32"))], [], a)
    x, r = rv(0, "x"), rv(1, "r")
    main = func([(x, F32x4)], [bind(r, relax.Call(GlobalVar("callee"), (x,)))], r)
    mod = IRModule({"main": main, "callee": callee})
    with pytest.raises(
        InterpreterError, match=r"call of @callee: argument 0 \(%a\): expected Tensor\(\(3,\), float32\)"
    ):
        run_function(mod, "main", np.zeros(4, "float32"))


def test_deep_call_chain_does_not_recurse() -> None:
    n = 1500
    functions = {}
    for k in range(n):
        x, y = rv(0, "x"), rv(1, "y")
        if k == n - 1:
            functions[f"f{k}"] = func([(x, F32x4)], [bind(y, call("add", x, x))], y)
        else:
            functions[f"f{k}"] = func([(x, F32x4)], [bind(y, relax.Call(GlobalVar(f"f{k + 1}"), (x,)))], y)
    out = run_function(IRModule(functions), "f0", np.ones(4, "float32"))
    np.testing.assert_array_equal(out, np.full(4, 2, "float32"))


def test_deep_expression_nest() -> None:
    x, y = rv(0, "x"), rv(1, "y")
    one = relax.Constant.from_value(np.ones(4, "float32"))
    expr: relax.Expr = x
    for _ in range(5000):
        expr = call("add", expr, one)
    f = func([(x, F32x4)], [bind(y, expr)], y)
    out = run_function(IRModule({"f": f}), "f", np.zeros(4, "float32"))
    np.testing.assert_array_equal(out, np.full(4, 5000, "float32"))


def test_stateful_random_uniform_is_deterministic() -> None:
    a, b, c = rv(0, "a"), rv(1, "b"), rv(2, "c")
    f = func(
        [],
        [
            bind(a, call("random_uniform", shape=[3], seed=7)),
            bind(b, call("random_uniform", shape=[3], seed=7)),
            bind(c, call("random_uniform", shape=[3], seed=8)),
        ],
        relax.Tuple((a, b, c)),
    )
    mod = IRModule({"f": f})
    first, second = run_function(mod, "f"), run_function(mod, "f")
    np.testing.assert_array_equal(first[0], first[1])
    np.testing.assert_array_equal(first[0], second[0])
    assert not np.array_equal(first[0], first[2])


def test_use_before_definition_and_unknown_callee() -> None:
    x, y, z = rv(0, "x"), rv(1, "y"), rv(2, "z")
    f = func([(x, F32x4)], [bind(y, call("add", x, z))], y)
    with pytest.raises(InterpreterError, match=r"binding 0 \(%y\): variable %z \(vid 2\) is used before it is defined"):
        run_function(IRModule({"f": f}), "f", np.zeros(4, "float32"))
    g = func([(x, F32x4)], [bind(y, relax.Call(GlobalVar("helpr"), (x,)))], y)
    with pytest.raises(InterpreterError, match=r"call of @helpr: no function named 'helpr'"):
        run_function(IRModule({"g": g, "helper": f}), "g", np.zeros(4, "float32"))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), r"function 'f' takes 2 argument\(s\) \(%x, %n\), got 0"),
        (
            (np.zeros(4, "float64"), 1),
            r"argument 0 \(%x\): expected Tensor\(\(4,\), float32\), got an array of shape \(4,\) and dtype float64",
        ),
        (
            (np.zeros(5, "float32"), 1),
            r"argument 0 \(%x\): expected Tensor\(\(4,\), float32\), got an array of shape \(5,\)",
        ),
        (
            ([0.0, 1.0, 2.0, 3.0], 1),
            r"argument 0 \(%x\): expected a numpy array for Tensor\(\(4,\), float32\), got a list",
        ),
        ((np.zeros(4, "float32"), 1.5), r"argument 1 \(%n\): expected Prim\(int32\), got the float 1.5"),
        (
            (np.zeros(4, "float32"), np.int64(1)),
            r"argument 1 \(%n\): expected Prim\(int32\), got an array of shape \(\) and dtype int64",
        ),
    ],
)
def test_function_argument_errors(args: tuple[object, ...], message: str) -> None:
    x, n = rv(0, "x"), rv(1, "n")
    f = func([(x, F32x4), (n, PrimType("int32"))], [], x)
    with pytest.raises(ArgumentError, match=message) as info:
        run_function(IRModule({"f": f}), "f", *args)
    assert "'f'" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_tuple_argument_errors() -> None:
    t = rv(0, "t")
    f = func([(t, TupleType((F32x4, F32x4)))], [], t)
    mod = IRModule({"f": f})
    with pytest.raises(ArgumentError, match=r"argument 0 \(%t\): expected a tuple of 2 fields .*, got 1"):
        run_function(mod, "f", (np.zeros(4, "float32"),))
    with pytest.raises(ArgumentError, match=r"argument 0 \(%t\)\[1\]: expected Tensor\(\(4,\), float32\)"):
        run_function(mod, "f", (np.zeros(4, "float32"), np.zeros(4, "int32")))


def test_unknown_function_name() -> None:
    with pytest.raises(KeyError, match=r"no function named 'mian'.*'main'"):
        run_function(IRModule({"main": func([], [], relax.Tuple(()))}), "mian")


# ---------------------------------------------------------------- loop-level functions


def elementwise(expr_of, dtype: str = I32, n: int = 8) -> tir.PrimFunc:  # type: ignore[no-untyped-def]
    """``C[i] = expr_of(A[i], B[i])`` for ``i`` in ``range(n)``."""
    i = tir.Var(0, "i")
    A, B, C = buf(1, "A", (n,), dtype), buf(2, "B", (n,), dtype), buf(3, "C", (n,), dtype)
    return tir.PrimFunc((A, B, C), loop(i, n, C.store(i, expr_of(A[i], B[i]))))


def test_floordiv_and_floormod_round_toward_negative_infinity() -> None:
    pairs = [(a, b) for a in range(-7, 8) for b in range(-4, 5) if b != 0]
    a = np.array([p[0] for p in pairs], "int32")
    b = np.array([p[1] for p in pairs], "int32")
    n = len(pairs)
    div = run_prim_func(elementwise(lambda x, y: x // y, n=n), a, b, np.zeros(n, "int32"))[2]
    mod = run_prim_func(elementwise(lambda x, y: x % y, n=n), a, b, np.zeros(n, "int32"))[2]
    assert div.tolist() == [x // y for x, y in pairs]  # Python's // floors too
    assert mod.tolist() == [x % y for x, y in pairs]
    assert (
        run_prim_func(
            elementwise(lambda x, y: x // y, n=1), np.array([-7], "int32"), np.array([2], "int32"), np.zeros(1, "int32")
        )[2][0]
        == -4
    )


def test_float_floordiv_and_floormod() -> None:
    a = np.array([-7.5, 7.5, -1.0, 3.0], "float32")
    b = np.array([2.0, -2.0, 3.0, 3.0], "float32")
    div = run_prim_func(elementwise(lambda x, y: x // y, "float32", 4), a, b, np.zeros(4, "float32"))[2]
    mod = run_prim_func(elementwise(lambda x, y: x % y, "float32", 4), a, b, np.zeros(4, "float32"))[2]
    np.testing.assert_array_equal(div, np.array([-4.0, -4.0, -1.0, 1.0], "float32"))
    np.testing.assert_array_equal(mod, np.array([0.5, -0.5, 2.0, 0.0], "float32"))


@pytest.mark.parametrize("op", ["floordiv", "floormod"])
def test_division_by_zero_is_an_error_and_leaves_buffers_unchanged(op: str) -> None:
    f = elementwise((lambda x, y: x // y) if op == "floordiv" else (lambda x, y: x % y), n=3)
    c = np.full(3, 9, "int32")
    with pytest.raises(
        DivisionByZeroError, match=r"in PrimFunc 'k', at For i > BufferStore C: Floor(Div|Mod) by zero"
    ) as info:
        run_prim_func(IRModule({"k": f}), np.array([4, 5, 6], "int32"), np.array([1, 0, 1], "int32"), c, name="k")
    assert isinstance(info.value, ZeroDivisionError)
    np.testing.assert_array_equal(c, np.full(3, 9, "int32"))  # a failing run writes nothing back


def test_int32_wraps_and_float32_precision() -> None:
    big = np.array([2**31 - 1], "int32")
    out = run_prim_func(elementwise(lambda x, y: x + y, n=1), big, np.array([1], "int32"), np.zeros(1, "int32"))[2]
    assert out[0] == -(2**31)
    a = np.array([16777216.0], "float32")  # 2**24: adding 1 is lost in float32, not in float64
    out32 = run_prim_func(
        elementwise(lambda x, y: x + y, "float32", 1), a, np.ones(1, "float32"), np.zeros(1, "float32")
    )
    assert out32[2][0] == np.float32(16777216.0)


def test_all_loop_kinds_mean_the_same() -> None:
    results = []
    for kind in tir.ForKind:
        i = tir.Var(0, "i")
        A, B = buf(1, "A", (6,)), buf(2, "B", (6,))
        f = tir.PrimFunc((A, B), loop(i, 4, B.store(i, A[i] * 3 + i), kind, lo=2))
        results.append(run_prim_func(f, np.arange(6, dtype="int32"), np.zeros(6, "int32"))[1].tolist())
    assert results == [[0, 0, 8, 12, 16, 20]] * len(tir.ForKind)


def test_vector_ramp_and_broadcast() -> None:
    A, B = buf(1, "A", (8,)), buf(2, "B", (8,))
    i = tir.Var(0, "i")
    # Two iterations of 4 lanes: B[4i : 4i+4] = A[4i : 4i+4] * 2 + 1
    lanes = tir.Ramp(i * 4, imm(1), 4)
    value = A[lanes] * tir.Broadcast(imm(2), 4) + tir.Broadcast(imm(1), 4)
    f = tir.PrimFunc((A, B), loop(i, 2, B.store(lanes, value)))
    a = np.arange(8, dtype="int32")
    np.testing.assert_array_equal(run_prim_func(f, a, np.zeros(8, "int32"))[1], a * 2 + 1)
    # A strided ramp gathers every other element.
    g = tir.PrimFunc((A, B), B.store(tir.Ramp(imm(0), imm(1), 4), A[tir.Ramp(imm(1), imm(2), 4)]))
    np.testing.assert_array_equal(run_prim_func(g, a, np.zeros(8, "int32"))[1], [1, 3, 5, 7, 0, 0, 0, 0])


def test_vector_store_needs_a_matching_vector() -> None:
    A = buf(1, "A", (8,))
    f = tir.PrimFunc((A,), A.store(tir.Ramp(imm(0), imm(1), 4), imm(1)))
    with pytest.raises(InterpreterError, match=r"vector store into buffer A writes 4 lanes but the value is int32"):
        run_prim_func(f, np.zeros(8, "int32"))


def test_multi_dimensional_access_and_strides() -> None:
    i, j = tir.Var(0, "i"), tir.Var(1, "j")
    A = buf(2, "A", (2, 3))
    S = buf(3, "S", (2, 3), strides=(4, 1))  # rows padded to 4 elements
    body = loop(i, 2, loop(j, 3, S.store((i, j), A[i, j] * 10)))
    f = tir.PrimFunc((A, S), body)
    a = np.arange(6, dtype="int32").reshape(2, 3)
    out = run_prim_func(f, a, np.zeros((2, 3), "int32"))[1]
    np.testing.assert_array_equal(out, a * 10)
    # Through a 1-D view of S's memory (same vid), element (1, 0) is at offset 4, not 3.
    flat = buf(3, "S", (8,))
    g = tir.PrimFunc((A, S), tir.SeqStmt((S.store((imm(1), imm(0)), imm(7)), flat.store(imm(4), flat[imm(4)] + 1))))
    np.testing.assert_array_equal(run_prim_func(g, a, np.zeros((2, 3), "int32"))[1], [[0, 0, 0], [8, 0, 0]])


def test_flat_view_of_a_row_major_buffer() -> None:
    A = buf(1, "A", (2, 3))
    flat = buf(1, "A", (6,))
    i = tir.Var(0, "i")
    f = tir.PrimFunc((A,), loop(i, 6, flat.store(i, i)))
    np.testing.assert_array_equal(run_prim_func(f, np.zeros((2, 3), "int32"))[0], [[0, 1, 2], [3, 4, 5]])


def test_control_flow_let_allocate_select_cast_minmax() -> None:
    i, t = tir.Var(0, "i"), tir.Var(1, "t")
    A, B = buf(2, "A", (6,)), buf(3, "B", (6,), "float32")
    T = buf(4, "T", (6,))
    body = tir.Allocate(
        T,
        tir.SeqStmt(
            (
                loop(i, 6, tir.LetStmt(t, A[i] * 2, T.store(i, tir.max_(tir.min_(t, imm(6)), imm(-2))))),
                loop(
                    i,
                    6,
                    tir.IfThenElse(
                        tir.And(tir.ge(i, 1), tir.Not(tir.eq(i, 4))),
                        B.store(i, tir.Cast("float32", tir.Select(tir.lt(T[i], 0), T[i] - 100, T[i]))),
                        B.store(i, tir.FloatImm("float32", -1.0)),
                    ),
                ),
            )
        ),
    )
    f = tir.PrimFunc((A, B), body)
    a = np.array([-3, -1, 0, 2, 5, 1], "int32")
    out = run_prim_func(f, a, np.zeros(6, "float32"))[1]
    # T = clamp(2a, -2, 6) = [-2, -2, 0, 4, 6, 2]; i == 0 and i == 4 take the else branch.
    np.testing.assert_array_equal(out, np.array([-1, -102, 0, 4, -1, 2], "float32"))


def test_allocate_is_zeroed_and_scoped() -> None:
    T, A = buf(5, "T", (2,)), buf(6, "A", (2,))
    inner = tir.SeqStmt((A.store(imm(0), T[imm(0)]), T.store(imm(0), imm(9))))
    f = tir.PrimFunc((A,), tir.SeqStmt((tir.Allocate(T, inner), tir.Allocate(T, A.store(imm(1), T[imm(0)])))))
    np.testing.assert_array_equal(run_prim_func(f, np.full(2, 5, "int32"))[0], [0, 0])
    g = tir.PrimFunc((A,), tir.SeqStmt((tir.Allocate(T, inner), A.store(imm(0), T[imm(0)]))))
    with pytest.raises(
        InterpreterError, match=r"load of buffer T \(vid 5\): the buffer is not a parameter and not allocated"
    ):
        run_prim_func(g, np.zeros(2, "int32"))


def test_cast_truncates_toward_zero() -> None:
    A, B = buf(1, "A", (4,), "float32"), buf(2, "B", (4,))
    i = tir.Var(0, "i")
    f = tir.PrimFunc((A, B), loop(i, 4, B.store(i, tir.Cast(I32, A[i]))))
    out = run_prim_func(f, np.array([-2.7, -0.5, 0.5, 2.7], "float32"), np.zeros(4, "int32"))[1]
    assert out.tolist() == [-2, 0, 0, 2]


@pytest.mark.parametrize(
    ("name", "reference"),
    [
        ("exp", np.exp),
        ("log", np.log),
        ("sqrt", np.sqrt),
        ("tanh", np.tanh),
        ("fabs", np.abs),
        ("abs", np.abs),
        ("sigmoid", lambda x: np.float32(1) / (np.float32(1) + np.exp(-x))),
        ("floor", np.floor),
        ("round", np.rint),
    ],
)
def test_intrinsics_in_float32(name: str, reference) -> None:  # type: ignore[no-untyped-def]
    A, B = buf(1, "A", (4,), "float32"), buf(2, "B", (4,), "float32")
    i = tir.Var(0, "i")
    f = tir.PrimFunc((A, B), loop(i, 4, B.store(i, tir.Call("float32", name, (A[i],)))))
    a = np.array([0.25, 1.5, 2.5, 3.75], "float32")
    out = run_prim_func(f, a, np.zeros(4, "float32"))[1]
    np.testing.assert_array_equal(out, reference(a).astype("float32"))


def test_pow_and_unknown_intrinsic() -> None:
    A, B = buf(1, "A", (3,), "float32"), buf(2, "B", (3,), "float32")
    i = tir.Var(0, "i")
    f = tir.PrimFunc((A, B), loop(i, 3, B.store(i, tir.Call("float32", "pow", (A[i], tir.FloatImm("float32", 2.0))))))
    np.testing.assert_array_equal(
        run_prim_func(f, np.array([1, 2, 3], "float32"), np.zeros(3, "float32"))[1], [1, 4, 9]
    )
    g = tir.PrimFunc((A, B), loop(i, 3, B.store(i, tir.Call("float32", "erfinv", (A[i],)))))
    with pytest.raises(InterpreterError, match=r"unknown intrinsic 'erfinv'; known: abs, ceil, cos"):
        run_prim_func(g, np.zeros(3, "float32"), np.zeros(3, "float32"))


def test_operand_dtypes_must_match() -> None:
    A, B = buf(1, "A", (2,)), buf(2, "B", (2,))
    f = tir.PrimFunc((A, B), B.store(imm(0), A[imm(0)] + imm(1, "int64")))
    with pytest.raises(InterpreterError, match="operands of Add have different dtypes: int32 and int64"):
        run_prim_func(f, np.zeros(2, "int32"), np.zeros(2, "int32"))


def test_out_of_bounds_access() -> None:
    A = buf(1, "A", (2, 3))
    f = tir.PrimFunc((A,), A.store((imm(2), imm(0)), imm(1)))
    with pytest.raises(
        InterpreterError, match=r"store of buffer A\[2, 0\] is out of bounds: element offset 6 outside \[0, 6\)"
    ):
        run_prim_func(f, np.zeros((2, 3), "int32"))


def test_loop_variable_is_scoped() -> None:
    i = tir.Var(0, "i")
    A = buf(1, "A", (4,))
    f = tir.PrimFunc((A,), tir.SeqStmt((loop(i, 4, A.store(i, i)), A.store(imm(0), i))))
    with pytest.raises(InterpreterError, match=r"variable i \(vid 0\) is used outside the scope of its definition"):
        run_prim_func(f, np.zeros(4, "int32"))


def test_deep_prim_expression_and_deep_statement_nest() -> None:
    i = tir.Var(0, "i")
    A = buf(1, "A", (3,))
    e: tir.PrimExpr = i
    for _ in range(5000):
        e = tir.Add(e, imm(1))  # not `e + 1`: that computes e.dtype down the whole spine each time
    f = tir.PrimFunc((A,), loop(i, 3, A.store(i, e)))
    np.testing.assert_array_equal(run_prim_func(f, np.zeros(3, "int32"))[0], [5000, 5001, 5002])
    # 3,000 nested LetStmts, each adding one.
    body: tir.Stmt = A.store(imm(0), tir.Var(3000, "v3000"))
    for k in range(3000, 0, -1):
        body = tir.LetStmt(tir.Var(k, f"v{k}"), tir.Var(k - 1, f"v{k - 1}") + 1 if k > 1 else imm(1), body)
    g = tir.PrimFunc((A,), body)
    assert run_prim_func(g, np.zeros(3, "int32"))[0][0] == 3000


def test_shared_subexpressions_are_evaluated_once() -> None:
    # e = max(e, e) 200 times over one shared node: 2**200 paths, linear work with memoization.
    x = tir.Var(0, "x")
    A = buf(1, "A", (1,))
    e: tir.PrimExpr = x
    for _ in range(200):
        e = tir.Max(e, e)
    f = tir.PrimFunc((x, A), A.store(imm(0), e))
    assert run_prim_func(f, 5, np.zeros(1, "int32"))[0][0] == 5


def test_symbolic_shape_from_a_scalar_param() -> None:
    n, i = tir.Var(0, "n"), tir.Var(1, "i")
    A = tir.Buffer(2, "A", "float32", (n,))
    f = tir.PrimFunc((n, A), tir.For(i, imm(0), n, tir.ForKind.SERIAL, A.store(i, A[i] * 2.0)))
    values = random_inputs(f, seed=3)
    assert isinstance(values[0], int) and 1 <= values[0] <= 8
    assert values[1].shape == (values[0],) and values[1].dtype == np.float32
    expected = values[1] * 2
    run_prim_func(f, *values)
    np.testing.assert_array_equal(values[1], expected)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((np.zeros(4, "int32"),), r"PrimFunc 'k' takes 2 argument\(s\) \(n, A\), got 1"),
        (
            (3, np.zeros(4, "int64")),
            r"argument 1 \(A\) must have shape \(4,\) and dtype int32, got an array of shape \(4,\) and dtype int64",
        ),
        (
            (3, np.zeros((2, 2), "int32")),
            r"argument 1 \(A\) must have shape \(4,\) and dtype int32, got an array of shape \(2, 2\)",
        ),
        ((3, [0, 0, 0, 0]), r"argument 1 \(A\) must be a numpy array of shape \(4,\) and dtype int32, got a list"),
        ((2.5, np.zeros(4, "int32")), r"argument 0 \(n\) is int32, got the float 2.5"),
        ((np.int64(2), np.zeros(4, "int32")), r"argument 0 \(n\) must be a int32 scalar, got a numpy int64 scalar"),
        ((2**40, np.zeros(4, "int32")), r"argument 0 \(n\) = 1099511627776 does not fit int32"),
    ],
)
def test_prim_func_argument_errors(args: tuple[object, ...], message: str) -> None:
    n = tir.Var(0, "n")
    A = buf(1, "A", (4,))
    f = tir.PrimFunc((n, A), A.store(imm(0), n))
    with pytest.raises(ArgumentError, match=message):
        run_prim_func(IRModule({"k": f}), *args, name="k")


def test_run_prim_func_needs_a_prim_func() -> None:
    mod = IRModule({"f": func([], [], relax.Tuple(()))})
    with pytest.raises(TypeError, match="'f' is a Function, not a PrimFunc"):
        run_prim_func(mod, name="f")
    with pytest.raises(TypeError, match="needs name="):
        run_prim_func(mod)


def test_prim_func_called_from_a_function() -> None:
    # add_one(A, B): B[i] = A[i] + 1 ; main(x) = add_one(add_one(x))
    i = tir.Var(0, "i")
    A, B = buf(1, "A", (4,), "float32"), buf(2, "B", (4,), "float32")
    kernel = tir.PrimFunc(
        (A, B), loop(i, 4, tir.SeqStmt((B.store(i, A[i] + 1.0), A.store(i, tir.FloatImm("float32", 0.0)))))
    )
    x, y, z = rv(0, "x"), rv(1, "y"), rv(2, "z")
    main = func(
        [(x, F32x4)],
        [bind(y, relax.Call(GlobalVar("add_one"), (x,))), bind(z, relax.Call(GlobalVar("add_one"), (y,)))],
        relax.Tuple((x, z)),
    )
    mod = IRModule({"main": main, "add_one": kernel})
    xv = np.array([1, 2, 3, 4], "float32")
    out = run(mod, "main", xv)
    np.testing.assert_array_equal(out[1], xv + 2)
    np.testing.assert_array_equal(out[0], xv)  # the kernel zeroes its input buffer: a copy, not the caller's value


def test_prim_func_with_several_outputs_returns_a_tuple() -> None:
    A, B, C = buf(1, "A", (2,)), buf(2, "B", (2,)), buf(3, "C", (2,))
    i = tir.Var(0, "i")
    kernel = tir.PrimFunc((A, B, C), loop(i, 2, tir.SeqStmt((B.store(i, A[i] * 2), C.store(i, A[i] * 3)))))
    x, y = rv(0, "x"), rv(1, "y")
    main = func([(x, TensorType((2,), "int32"))], [bind(y, relax.Call(GlobalVar("k"), (x,)))], y)
    out = run_function(IRModule({"main": main, "k": kernel}), "main", np.array([1, 2], "int32"))
    assert isinstance(out, tuple) and [o.tolist() for o in out] == [[2, 4], [3, 6]]


def test_prim_func_call_errors_name_the_caller() -> None:
    n, A = tir.Var(0, "n"), buf(1, "A", (2,))
    kernel = tir.PrimFunc((A, n), A.store(imm(0), n))
    x, y = rv(0, "x"), rv(1, "y")
    main = func([(x, TensorType((2,), "int32"))], [bind(y, relax.Call(GlobalVar("k"), (x,)))], y)
    with pytest.raises(
        InterpreterError,
        match=r"in function 'main', binding 0 \(%y\): call of PrimFunc @k: parameter 1 \(n\) is a scalar",
    ):
        run_function(IRModule({"main": main, "k": kernel}), "main", np.zeros(2, "int32"))


# ---------------------------------------------------------------- helpers


def test_random_inputs_are_deterministic_and_typed() -> None:
    x, t, p = rv(0, "x"), rv(1, "t"), rv(2, "p")
    f = func(
        [
            (x, TensorType((2, 3), "float32")),
            (t, TupleType((TensorType((2,), "int64"), PrimType("bool")))),
            (p, PrimType("float64")),
        ],
        [],
        x,
    )
    a, b, c = random_inputs(f, seed=5), random_inputs(f, seed=5), random_inputs(f, seed=6)
    assert a[0].shape == (2, 3) and a[0].dtype == np.float32
    assert isinstance(a[1], tuple) and a[1][0].dtype == np.int64 and a[1][1].dtype == np.bool_ and a[1][1].shape == ()
    assert a[2].dtype == np.float64 and a[2].shape == ()
    np.testing.assert_array_equal(a[0], b[0])
    assert not np.array_equal(a[0], c[0])
    assert np.all((a[0] >= -2) & (a[0] < 2))
    run_function(IRModule({"f": f}), "f", *a)  # the values fit the parameters


def _module_with_constant(value: float) -> IRModule:
    x, y = rv(0, "x"), rv(1, "y")
    c = relax.Constant.from_value(np.full(4, value, "float32"))
    return IRModule({"f": func([(x, F32x4)], [bind(y, call("add", x, c))], y)})


def test_assert_same_meaning_exact_and_with_tolerance() -> None:
    before = _module_with_constant(1.0)
    assert assert_same_meaning(before, _module_with_constant(1.0), "f") == ["f"]
    with pytest.raises(
        AssertionError,
        match=r"meaning changed \(seed 0\): function 'f': output: 4 of 4 element\(s\) differ; first at index \(0,\)",
    ):
        assert_same_meaning(before, _module_with_constant(1.5), "f")
    nudged = _module_with_constant(1.0 + 1e-6)
    with pytest.raises(AssertionError, match="max abs difference"):
        assert_same_meaning(before, nudged, "f")
    assert_same_meaning(before, nudged, "f", rtol=1e-5, atol=1e-5)


def test_assert_same_meaning_on_prim_funcs_and_flattened_buffers() -> None:
    i, j = tir.Var(0, "i"), tir.Var(1, "j")
    A, B = buf(2, "A", (2, 3)), buf(3, "B", (2, 3))
    nested = tir.PrimFunc((A, B), loop(i, 2, loop(j, 3, B.store((i, j), A[i, j] + i))))
    fA, fB = buf(2, "A", (6,)), buf(3, "B", (6,))
    k = tir.Var(4, "k")
    flat = tir.PrimFunc((fA, fB), loop(k, 6, fB.store(k, fA[k] + k // 3)))
    assert assert_same_meaning(IRModule({"k": nested}), IRModule({"k": flat})) == ["k"]
    wrong = tir.PrimFunc((fA, fB), loop(k, 6, fB.store(k, fA[k] + k % 3)))
    with pytest.raises(AssertionError, match=r"function 'k': output\[1\]: 4 of 6 element\(s\) differ"):
        assert_same_meaning(IRModule({"k": nested}), IRModule({"k": wrong}))


def test_assert_same_meaning_when_a_side_fails() -> None:
    i = tir.Var(0, "i")
    A, B = buf(1, "A", (2,)), buf(2, "B", (2,))
    dividing = tir.PrimFunc((A, B), loop(i, 2, B.store(i, A[i] // (i - i))))
    harmless = tir.PrimFunc((A, B), loop(i, 2, B.store(i, A[i])))
    with pytest.raises(AssertionError, match="fails before the pass"):
        assert_same_meaning(IRModule({"k": dividing}), IRModule({"k": harmless}))
    assert assert_same_meaning(IRModule({"k": dividing}), IRModule({"k": harmless}), allow_failing_before=True) == []
    with pytest.raises(AssertionError, match="runs before the pass but fails after it"):
        assert_same_meaning(IRModule({"k": harmless}), IRModule({"k": dividing}))


def test_assert_same_meaning_checks_every_common_function() -> None:
    before = _module_with_constant(1.0)
    before["g"] = _module_with_constant(2.0)["f"]
    after = IRModule({"f": _module_with_constant(1.0)["f"]})  # g was removed: not compared
    assert assert_same_meaning(before, after) == ["f"]
    after["g"] = _module_with_constant(3.0)["f"]
    with pytest.raises(AssertionError, match="function 'g'"):
        assert_same_meaning(before, after)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**16))
def test_every_generated_function_runs(seed: int) -> None:
    mod = random_module(num_functions=8, num_prim_funcs=4, size=12, seed=seed)
    for name in mod.names():
        out = quiet(run_function, mod, name, *random_inputs(mod[name], seed))
        assert out is not None
    # A module means the same as itself, and the inputs are the same for the same seed.
    assert quiet(assert_same_meaning, mod, mod, None, seed) == mod.names()


def test_repeated_calls_with_the_same_arguments_are_memoized() -> None:
    a, p = rv(0, "a"), rv(1, "p")
    noisy = func([(a, F32x4)], [bind(p, call("print", a, message="seen "))], p)
    x, r1, r2, r3 = rv(0, "x"), rv(1, "r1"), rv(2, "r2"), rv(3, "r3")
    main = func(
        [(x, F32x4)],
        [
            bind(r1, gcall_("noisy", x)),
            bind(r2, gcall_("noisy", x)),
            bind(r3, gcall_("noisy", call("add", x, x))),
        ],
        relax.Tuple((r1, r2, r3)),
    )
    mod = IRModule({"main": main, "noisy": noisy})
    xv = np.array([1, 2, 3, 4], "float32")
    for memoize, prints in ((True, 2), (False, 3)):
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            out = run_function(mod, "main", xv, memoize=memoize)
        assert buffer.getvalue().count("seen ") == prints
        np.testing.assert_array_equal(out[0], xv)
        np.testing.assert_array_equal(out[1], xv)
        np.testing.assert_array_equal(out[2], 2 * xv)


def gcall_(name: str, *args: relax.Expr) -> relax.Call:
    return relax.Call(GlobalVar(name), tuple(args))
