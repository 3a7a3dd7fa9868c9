"""FoldConstant: exact results on hand-written functions, and the pass properties on random modules."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from passes_support import F32, PROPERTY_SETTINGS, SEEDS, assert_same_ir, check_function_pass, run_on

from parpass.ir import (
    Binding,
    Call,
    Constant,
    Function,
    GlobalVar,
    IRModule,
    Op,
    Param,
    PrimType,
    SeqExpr,
    TensorType,
    Tuple,
    Var,
)
from parpass.ir.builder import FunctionBuilder, call, const, getitem, tuple_
from parpass.passes import FoldConstant
from parpass.transform import PassContext


def c4(*values: float) -> Constant:
    return const(list(values), "float32")


def test_chain_folds_in_one_run() -> None:
    fb = FunctionBuilder("main")
    x = fb.param("x", F32)
    a = fb.emit(call("add", c4(1, 2, 3, 4), c4(1, 1, 1, 1)))
    b = fb.emit(call("multiply", a, const(2.0, "float32")))
    y = fb.emit(call("add", x, b))
    func = fb.finish(y)

    fb = FunctionBuilder("main")
    x = fb.param("x", F32)
    fb.emit(c4(2, 3, 4, 5))
    b = fb.emit(c4(4, 6, 8, 10))
    y = fb.emit(call("add", x, b))
    expected = fb.finish(y)

    out = run_on(FoldConstant(), func)
    assert_same_ir(out, expected)
    assert run_on(FoldConstant(), out) is out  # a fixed point after one run


def test_result_has_the_dtype_and_shape_of_the_type_rule() -> None:
    fb = FunctionBuilder("main")
    x = fb.param("x", F32)
    lt = fb.emit(call("less", c4(1, 5, 3, 0), c4(2, 2, 2, 2)))  # bool
    total = fb.emit(call("sum", const([[1, 2], [3, 4]], "int32"), axis=0))  # int32, shape (2,)
    quot = fb.emit(call("divide", const([7, -7], "int32"), const([2, 2], "int32")))  # integer floor division
    half = fb.emit(call("astype", c4(1.5, 2.5, 3.5, 4.5), dtype="float16"))
    y = fb.emit(call("where", lt, x, x))
    func = fb.finish(y)
    out = run_on(FoldConstant(), func)
    values = {b.var.vid: b.value for b in out.bindings}
    folded = [values[v.vid] for v in (lt, total, quot, half)]
    assert all(type(c) is Constant for c in folded)
    assert [(c.dtype, c.shape) for c in folded] == [("bool", (4,)), ("int32", (2,)), ("int32", (2,)), ("float16", (4,))]
    np.testing.assert_array_equal(folded[0].numpy(), [True, False, False, True])
    np.testing.assert_array_equal(folded[1].numpy(), [4, 6])
    np.testing.assert_array_equal(folded[2].numpy(), [3, -4])
    # the binding types the builder inferred still hold
    for b in out.bindings[:4]:
        assert b.ty == TensorType(b.value.shape, b.value.dtype)


def test_tuple_projections_fold() -> None:
    fb = FunctionBuilder("main")
    x = fb.param("x", F32)
    t = fb.emit(tuple_(c4(1, 1, 1, 1), x))
    a = fb.emit(getitem(t, 0))  # constant field of a tuple variable
    fb.emit(getitem(t, 1))  # not constant: stays
    c = fb.emit(getitem(tuple_(x, c4(2, 2, 2, 2)), 1))  # inline tuple expression
    parts = fb.emit(call("split", const([1.0, 2.0, 3.0, 4.0], "float32"), sections=2))
    fb.emit(getitem(parts, 1))  # a tuple-valued op folds to a tuple of constants
    y = fb.emit(call("add", a, c))
    func = fb.finish(y)

    fb = FunctionBuilder("main")
    x = fb.param("x", F32)
    t = fb.emit(tuple_(c4(1, 1, 1, 1), x))
    fb.emit(c4(1, 1, 1, 1))
    fb.emit(getitem(t, 1))
    fb.emit(c4(2, 2, 2, 2))
    fb.emit(tuple_(const([1.0, 2.0], "float32"), const([3.0, 4.0], "float32")))
    fb.emit(const([3.0, 4.0], "float32"))
    y = fb.emit(c4(3, 3, 3, 3))
    expected = fb.finish(y)
    assert_same_ir(run_on(FoldConstant(), func), expected)


def test_impure_ops_and_function_calls_are_not_evaluated() -> None:
    helper = FunctionBuilder("helper")
    p = helper.param("p", F32)
    helper_func = helper.finish(helper.emit(call("negative", p)))

    fb = FunctionBuilder("main")
    fb.param("x", F32)
    noise = fb.emit(call("random_uniform", shape=[4], seed=3))
    shown = fb.emit(call("print", c4(1, 2, 3, 4), message="c="))
    g = fb.emit(call(GlobalVar("helper"), c4(1, 2, 3, 4)))
    y = fb.emit(call("add", noise, shown))
    func = fb.finish(fb.emit(call("add", y, g)))
    out = run_on(FoldConstant(), func, helper=helper_func)
    assert out is func


def test_nothing_to_fold_returns_the_same_function() -> None:
    fb = FunctionBuilder("main")
    x = fb.param("x", F32)
    y = fb.emit(call("add", x, c4(1, 2, 3, 4)))
    t = fb.emit(tuple_(x, y))
    func = fb.finish(fb.emit(getitem(t, 1)))
    assert run_on(FoldConstant(), func) is func


def test_ill_typed_constant_call_is_left_for_infer_type() -> None:
    fb = FunctionBuilder("main", infer_types=False)
    x = fb.param("x", F32)
    bad = fb.emit(call("add", c4(1, 2, 3, 4), const([1, 2, 3, 4], "int32")))  # dtypes differ
    func = fb.finish(fb.emit(call("add", x, bad)))
    assert run_on(FoldConstant(), func) is func


def test_nested_expressions_fold_bottom_up() -> None:
    # Not A-normal form: add(multiply(c, c), x[...]) written as one expression.
    x = Var(0, "x")
    c = c4(1, 2, 3, 4)
    inner = Call(Op("multiply"), (c, c))
    value = Call(Op("add"), (Call(Op("add"), (inner, c)), x))
    y = Var(1, "y")
    func = Function((Param(x, F32),), SeqExpr((Binding(y, value, F32),), y), F32)
    out = run_on(FoldConstant(), func)
    new_value = out.bindings[0].value
    assert type(new_value) is Call and new_value.args[1] is x
    folded = new_value.args[0]
    assert type(folded) is Constant
    np.testing.assert_array_equal(folded.numpy(), [2, 6, 12, 20])


def test_constants_from_outside_fold_inside_branches() -> None:
    fb = FunctionBuilder("main")
    x = fb.param("x", F32)
    flag = fb.param("flag", PrimType("bool"))
    a = fb.emit(call("add", c4(1, 1, 1, 1), c4(1, 1, 1, 1)))
    branch = fb.if_(flag, name="r")
    with branch as (then, else_):
        with then:
            then.yield_(fb.emit(call("multiply", a, c4(3, 3, 3, 3))))
        with else_:
            else_.yield_(x)
    func = fb.finish(branch.var)
    out = run_on(FoldConstant(), func)
    inner = out.bindings[1].value.then_branch.bindings[0].value
    assert type(inner) is Constant
    np.testing.assert_array_equal(inner.numpy(), [6, 6, 6, 6])


def test_skip_optimization_function_is_untouched() -> None:
    fb = FunctionBuilder("main", attrs={"SkipOptimization": True})
    fb.param("x", F32)
    func = fb.finish(fb.emit(call("add", c4(1, 1, 1, 1), c4(1, 1, 1, 1))))
    assert run_on(FoldConstant(), func) is func


def test_deep_ir_without_recursion_error() -> None:
    # 100,000 bindings, nothing foldable: walked without recursion, returned as the same object.
    x = Var(0, "x")
    one = c4(1, 1, 1, 1)
    bindings, prev = [], x
    for k in range(1, 100_001):
        v = Var(k, "v")
        bindings.append(Binding(v, Call(Op("add"), (prev, one)), F32))
        prev = v
    func = Function((Param(x, F32),), SeqExpr(tuple(bindings), prev), F32)
    assert run_on(FoldConstant(), func) is func
    # A 5,000-deep nested constant expression folds to a single constant.
    expr: object = one
    for _ in range(5_000):
        expr = Call(Op("add"), (expr, one))
    y = Var(1, "y")
    nested = Function((Param(x, F32),), SeqExpr((Binding(y, expr, F32),), y), F32)  # type: ignore[arg-type]
    out = run_on(FoldConstant(), nested)
    np.testing.assert_array_equal(out.bindings[0].value.numpy(), [5001.0] * 4)


def test_tuple_constant_as_call_argument() -> None:
    # A tuple-valued constant variable feeds a projection that then feeds a call.
    fb = FunctionBuilder("main")
    fb.param("x", F32)
    t = fb.emit(Tuple((c4(1, 2, 3, 4), c4(5, 6, 7, 8))))
    first = fb.emit(getitem(t, 0))
    func = fb.finish(fb.emit(call("add", first, first)))
    out = run_on(FoldConstant(), func)
    np.testing.assert_array_equal(out.bindings[-1].value.numpy(), [2, 4, 6, 8])


@PROPERTY_SETTINGS
@given(seed=SEEDS)
def test_properties_on_random_modules(seed: int) -> None:
    check_function_pass(FoldConstant, seed)


def test_random_module_has_work_for_fold_constant() -> None:
    before, after = check_function_pass(FoldConstant, 3)
    assert any(after[n] is not before[n] for n in before.names()), "nothing folded: the test proves nothing"


def test_statistics_count_folded_calls_and_projections() -> None:
    fb = FunctionBuilder("main")
    x = fb.param("x", F32)
    a = fb.emit(call("add", c4(1, 2, 3, 4), c4(1, 1, 1, 1)))  # folded
    fb.emit(call("multiply", a, const(2.0, "float32")))  # folded: `a` is known
    t = fb.emit(tuple_(a, x))
    first = fb.emit(getitem(t, 0))  # a projection, folded
    fb.emit(getitem(t, 1))  # not constant
    fb.emit(call("add", x, first))  # not constant
    main = fb.finish(fb.emit(call("print", first)))  # impure: not folded
    fb = FunctionBuilder("other")
    w = fb.param("w", F32)
    other = fb.finish(fb.emit(call("add", w, fb.emit(call("negative", c4(1, 2, 3, 4))))))  # one folded
    mod = IRModule({"main": main, "other": other})
    with PassContext(config={"parpass.pass_statistics": True}) as ctx:
        out = FoldConstant()(mod)
    assert ctx.pass_statistics.as_dict()["FoldConstant"] == {"folded": 3, "projections": 1}
    with PassContext(config={"parpass.pass_statistics": True}) as ctx:
        again = FoldConstant()(out)
    assert all(again[name] is out[name] for name in out.names())
    assert ctx.pass_statistics.as_dict()["FoldConstant"] == {"folded": 0, "projections": 0}
