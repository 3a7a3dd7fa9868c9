"""InferType: filled-in types, signatures of called functions, type errors, and the pass properties."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from passes_support import (
    F32,
    PROPERTY_SETTINGS,
    SEEDS,
    assert_same_ir,
    check_function_pass,
    run_on,
    small_random_module,
)

from parpass.errors import ParpassError
from parpass.ir import (
    Binding,
    Call,
    Function,
    GlobalVar,
    IRModule,
    Op,
    Param,
    PrimType,
    SeqExpr,
    TensorType,
    TupleType,
    Var,
    relax,
)
from parpass.ir.builder import FunctionBuilder, PrimFuncBuilder, call, const, getitem, tuple_
from parpass.passes import InferType, TypeInferenceError
from parpass.transform import PassContext, set_function_pass_executor

I32 = TensorType((4,), "int32")
BOOL = PrimType("bool")


def build(infer: bool, name: str = "main", **attrs: Any) -> Function:
    """The same function, with (infer=True) or without (False) types: tuples, a split, an If, a reduction."""
    fb = FunctionBuilder(name, infer_types=infer, attrs=attrs)
    x = fb.param("x", F32)
    flag = fb.param("flag", BOOL)
    a = fb.emit(call("exp", x))
    t = fb.emit(tuple_(a, x))
    parts = fb.emit(call("split", getitem(t, 0), sections=2))
    half = fb.emit(getitem(parts, 1))
    branch = fb.if_(flag, name="r")
    with branch as (then, else_):
        with then:
            then.yield_(fb.emit(call("sum", x, axis=0, keepdims=True)))
        with else_:
            else_.yield_(fb.emit(call("max", half, keepdims=True)))
    return fb.finish(fb.emit(call("greater", branch.var, const(0.0, "float32"))))


def all_bindings(func: Function) -> list[Binding]:
    out: list[Binding] = []
    stack: list[Any] = [func.body]
    while stack:
        node = stack.pop()
        if type(node) is Binding:
            out.append(node)
        stack.extend(node.children())
    return out


def test_fills_every_binding_and_the_return_type() -> None:
    untyped, typed = build(False), build(True)
    assert untyped.ret_type is None and any(b.ty is None for b in all_bindings(untyped))
    out = run_on(InferType(), untyped)
    assert all(b.ty is not None for b in all_bindings(out))
    assert out.ret_type == TensorType((1,), "bool")
    assert_same_ir(out, typed)
    assert run_on(InferType(), out) is out
    assert run_on(InferType(), typed) is typed


def test_calls_of_module_functions_use_their_signatures() -> None:
    with_ret = FunctionBuilder("with_ret")  # ret_type given
    p = with_ret.param("p", F32)
    with_ret_func = with_ret.finish(with_ret.emit(call("sum", p)))
    without = FunctionBuilder("without", infer_types=False)  # no ret_type: inferred from its body
    q = without.param("q", F32)
    without_func = without.finish(without.emit(call("astype", q, dtype="int32")))
    assert without_func.ret_type is None
    pb = PrimFuncBuilder("kernel")  # destination-passing: (A) -> B
    a = pb.buffer("A", (4,), "float32")
    b = pb.buffer("B", (2, 2), "float32")
    with pb.for_range("i", 4) as i:
        pb.store(b, (i // 2, i % 2), a[i])
    kernel = pb.finish()

    fb = FunctionBuilder("main", infer_types=False)
    x = fb.param("x", F32)
    r1 = fb.emit(call(GlobalVar("with_ret"), x))
    r2 = fb.emit(call(GlobalVar("without"), x))
    r3 = fb.emit(call(GlobalVar("kernel"), x))
    func = fb.finish(fb.emit(tuple_(r1, r2, r3)))
    out = run_on(InferType(), func, with_ret=with_ret_func, without=without_func, kernel=kernel)
    types = [b.ty for b in out.bindings]
    expected = [TensorType((), "float32"), I32, TensorType((2, 2), "float32")]
    assert types == [*expected, TupleType(tuple(expected))]


def test_a_module_run_types_every_function() -> None:
    callee = FunctionBuilder("callee", infer_types=False)
    q = callee.param("q", F32)
    callee_func = callee.finish(callee.emit(call("negative", q)))
    fb = FunctionBuilder("main", infer_types=False)
    x = fb.param("x", F32)
    func = fb.finish(fb.emit(call(GlobalVar("callee"), x)))
    out = InferType()(IRModule({"callee": callee_func, "main": func}))
    assert out["callee"].ret_type == F32  # type: ignore[union-attr]
    assert out["main"].ret_type == F32  # type: ignore[union-attr]


def test_recursive_function_without_return_type() -> None:
    fb = FunctionBuilder("rec", infer_types=False)
    p = fb.param("p", F32)
    again = fb.emit(call(GlobalVar("rec"), p))  # its type cannot be known before rec's
    func = fb.finish(fb.emit(call("exp", p)))
    out = InferType()(IRModule({"rec": func}))["rec"]
    assert isinstance(out, Function)
    assert out.ret_type == F32
    assert out.bindings[0].var == again and out.bindings[0].ty is None


# ---------------------------------------------------------------- type errors


def infer_error(func: Function, **others: Any) -> str:
    with pytest.raises(TypeInferenceError) as info:
        InferType()(IRModule({"my_func": func, **others}))
    err = info.value
    assert isinstance(err, TypeError) and isinstance(err, ParpassError)
    return str(err)


def test_annotation_contradicting_the_value_names_both_types() -> None:
    x, y = Var(0, "x"), Var(1, "y")
    func = Function((Param(x, F32),), SeqExpr((Binding(y, Call(Op("exp"), (x,)), I32),), y))
    message = infer_error(func)
    for part in ("'my_func'", "%y", "annotated Tensor((4,), int32)", "has type Tensor((4,), float32)"):
        assert part in message, message


def test_ill_typed_op_call_names_the_op_and_argument_types() -> None:
    fb = FunctionBuilder("f", infer_types=False)
    x, w = fb.param("x", F32), fb.param("w", I32)
    fb.emit(call("add", x, w), name="total")
    message = infer_error(fb.finish(x))
    for part in ("'my_func'", "%total", "'add'", "Tensor((4,), float32)", "Tensor((4,), int32)"):
        assert part in message, message


def test_call_with_wrong_argument_type_names_the_parameter() -> None:
    callee = FunctionBuilder("callee")
    q = callee.param("q", F32)
    callee_func = callee.finish(q)
    fb = FunctionBuilder("f", infer_types=False)
    w = fb.param("w", I32)
    fb.emit(call(GlobalVar("callee"), w), name="out")
    message = infer_error(fb.finish(w), callee=callee_func)
    for part in ("'my_func'", "%out", "@callee", "%q", "Tensor((4,), int32)", "Tensor((4,), float32)"):
        assert part in message, message


def test_if_errors() -> None:
    fb = FunctionBuilder("f", infer_types=False)
    x = fb.param("x", F32)
    branch = fb.if_(x, name="r")  # a tensor condition
    with branch as (then, else_):
        with then:
            then.yield_(x)
        with else_:
            else_.yield_(x)
    message = infer_error(fb.finish(branch.var))
    assert "%r" in message and "bool scalar" in message and "Tensor((4,), float32)" in message

    fb = FunctionBuilder("f", infer_types=False)
    x = fb.param("x", F32)
    flag = fb.param("flag", BOOL)
    branch = fb.if_(flag, name="r")
    with branch as (then, else_):
        with then:
            then.yield_(x)
        with else_:
            else_.yield_(fb.emit(call("sum", x)))
    message = infer_error(fb.finish(branch.var))
    assert "%r" in message and "then Tensor((4,), float32), else Tensor((), float32)" in message


def test_return_type_contradicting_the_body() -> None:
    x = Var(0, "x")
    func = Function((Param(x, F32),), SeqExpr((), x), I32)
    message = infer_error(func)
    assert "'my_func'" in message and "ret_type is Tensor((4,), int32)" in message
    assert "Tensor((4,), float32)" in message


def test_undefined_variable_and_unknown_function() -> None:
    x, y, ghost = Var(0, "x"), Var(1, "y"), Var(7, "ghost")
    func = Function((Param(x, F32),), SeqExpr((Binding(y, Call(Op("exp"), (ghost,))),), y))
    assert "%ghost (vid 7) is used before it is defined" in infer_error(func)
    func = Function((Param(x, F32),), SeqExpr((Binding(y, Call(GlobalVar("nowhere"), (x,))),), y))
    assert "@nowhere" in infer_error(func)


# ---------------------------------------------------------------- scale, properties, parallel runs


def test_deep_ir_without_recursion_error() -> None:
    x = Var(0, "x")
    bindings, prev = [], x
    for k in range(1, 100_001):
        v = Var(k, "v")
        bindings.append(Binding(v, Call(Op("negative"), (prev,))))
        prev = v
    func = Function((Param(x, F32),), SeqExpr(tuple(bindings), prev))
    out = run_on(InferType(), func)
    assert out.ret_type == F32 and all(b.ty == F32 for b in out.bindings)


@PROPERTY_SETTINGS
@given(seed=SEEDS)
def test_properties_on_random_modules(seed: int) -> None:
    _, after = check_function_pass(InferType, seed)
    for name in after.names():
        func = after[name]
        if isinstance(func, relax.Function) and not func.skip_optimization:
            assert func.ret_type is not None
            assert all(b.ty is not None for b in all_bindings(func)), f"untyped binding in {name}"


def test_parallel_run_uses_the_worker_module_view() -> None:
    """Callee signatures are looked up in the module view each worker holds: same result as in-process."""
    import parpass.parallel

    mod = small_random_module(5)
    serial = InferType()(mod)
    set_function_pass_executor(parpass.parallel.default_executor)  # the autouse fixture restores the inline one
    with PassContext(config={"parpass.num_workers": 2, "parpass.parallel": "always"}):
        parallel = InferType()(mod)
    last = parpass.parallel.default_executor.last
    assert last is not None and last.parallel, last
    assert parallel.names() == serial.names()
    for name in serial.names():
        assert_same_ir(parallel[name], serial[name])


def test_statistics_count_filled_in_types() -> None:
    callee = FunctionBuilder("callee", infer_types=False)
    q = callee.param("q", F32)
    callee_func = callee.finish(callee.emit(call("negative", q)))  # 1 binding
    caller = FunctionBuilder("caller", infer_types=False)
    x = caller.param("x", F32)
    caller_func = caller.finish(caller.emit(call("exp", caller.emit(call(GlobalVar("callee"), x)))))  # 2 bindings
    mod = IRModule(
        {
            "caller": caller_func,  # typed first: typing the callee for its return type counts nothing
            "callee": callee_func,
            "main": build(False),  # 8 bindings, the If's blocks included
            "typed": build(True, name="typed"),  # nothing to fill in
        }
    )
    assert len(all_bindings(mod["main"])) == 8  # type: ignore[arg-type]
    with PassContext(config={"parpass.pass_statistics": True}) as ctx:
        out = InferType()(mod)
    assert ctx.pass_statistics.as_dict()["InferType"] == {"annotated": 11, "ret_types": 3}
    with PassContext(config={"parpass.pass_statistics": True}) as ctx:
        again = InferType()(out)
    assert all(again[name] is out[name] for name in out.names())
    assert ctx.pass_statistics.as_dict()["InferType"] == {"annotated": 0, "ret_types": 0}
