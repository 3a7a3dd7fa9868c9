"""The IR builders: what they build, the types they infer, and every misuse they reject."""

from __future__ import annotations

import pytest

from parpass.errors import NameNotFoundError
from parpass.ir import (
    Binding,
    Call,
    Constant,
    Function,
    GlobalVar,
    IdSupply,
    If,
    Op,
    Param,
    PrimType,
    SeqExpr,
    TensorType,
    Tuple,
    TupleGetItem,
    TupleType,
    Var,
    builder,
    tir,
)
from parpass.ir.builder import BuilderError, FunctionBuilder, PrimFuncBuilder, call, const, getitem, tuple_

F32_44 = TensorType((4, 4), "float32")
BOOL = PrimType("bool")


def _docstring_function() -> Function:
    fb = FunctionBuilder("main", attrs={"global_symbol": "main"})
    x = fb.param("x", F32_44)
    p = fb.param("p", BOOL)
    y = fb.emit(call("add", x, const(1.0, "float32")), name="y")
    branch = fb.if_(p, name="r")
    with branch as (then, else_):
        with then:
            then.yield_(fb.emit(call("relu", y)))
        with else_:
            else_.yield_(y)
    return fb.finish(branch.var)


# ---------------------------------------------------------------- dataflow: what is built


def test_function_builder_builds_the_expected_function() -> None:
    x, p, y, r, lv = Var(0, "x"), Var(1, "p"), Var(2, "y"), Var(3, "r"), Var(4, "lv")
    one = Constant.from_value(1.0, "float32")
    expected = Function(
        (Param(x, F32_44), Param(p, BOOL)),
        SeqExpr(
            (
                Binding(y, Call(Op("add"), (x, one)), F32_44),
                Binding(
                    r,
                    If(p, SeqExpr((Binding(lv, Call(Op("relu"), (y,)), F32_44),), lv), SeqExpr((), y)),
                    F32_44,
                ),
            ),
            r,
        ),
        F32_44,
        attrs={"global_symbol": "main"},
    )
    assert _docstring_function() == expected


def test_building_twice_gives_identical_functions() -> None:
    assert _docstring_function() == _docstring_function()


def test_the_module_docstring_example_runs() -> None:
    doc = builder.__doc__ or ""
    scope: dict[str, object] = {}
    for start_marker, end_marker in (
        ("    from parpass.ir import PrimType", "\nLoop-level"),
        ("    from parpass.ir import tir", "\nVariable ids"),
    ):
        start = doc.index(start_marker)
        code = "\n".join(line[4:] for line in doc[start : doc.index(end_marker)].splitlines())
        exec(compile(code, "<builder docstring>", "exec"), scope)
    assert isinstance(scope["func"], tir.PrimFunc)
    assert len(scope["func"].params) == 3  # type: ignore[attr-defined]


def test_ids_come_from_the_given_supply() -> None:
    fb = FunctionBuilder(ids=IdSupply(100), infer_types=False)
    x = fb.param("x", F32_44)
    y = fb.emit(call("relu", x))
    assert (x.vid, y.vid) == (100, 101)
    assert fb.ids.next_id == 102


def test_existing_var_as_parameter_advances_the_supply() -> None:
    fb = FunctionBuilder()
    old = Var(7, "old")
    assert fb.param(old, F32_44) is old
    fresh = fb.emit(call("relu", old))
    assert fresh.vid == 8
    with pytest.raises(BuilderError, match="already defined"):
        fb.param(old, F32_44)


def test_tuples_getitem_globalvars_and_attrs() -> None:
    fb = FunctionBuilder("f", infer_types=False)
    x = fb.param("x", F32_44)
    t = fb.emit(tuple_(x, const([1, 2], "int32")), name="t")
    g = fb.emit(getitem(t, 1), name="g")
    c = fb.emit(call(GlobalVar("other"), g, x, mode="fast"), name="c")
    s = fb.emit(call("sum", x, axis=[0], keepdims=True), name="s")
    rec = fb.emit(call(fb.global_var, x), name="rec")
    fn = fb.finish(fb.tuple_(c, s, rec))
    values = [b.value for b in fn.bindings]
    assert values[0] == Tuple((x, Constant.from_value([1, 2], "int32")))
    assert values[1] == TupleGetItem(t, 1)
    assert values[2] == Call(GlobalVar("other"), (g, x), {"mode": "fast"})
    assert values[3] == Call(Op("sum"), (x,), {"axis": [0], "keepdims": True})
    assert values[4] == Call(GlobalVar("f"), (x,))
    assert fn.body.body == Tuple((c, s, rec))
    assert all(b.ty is None for b in fn.bindings)
    assert fb.call is call and fb.const is const


def test_nested_ifs_and_scopes() -> None:
    fb = FunctionBuilder()
    p = fb.param("p", BOOL)
    x = fb.param("x", F32_44)
    outer = fb.if_(p, name="o")
    with outer as (then, else_):
        with then:
            inner = fb.if_(p, name="i")
            with inner as (t2, e2):
                with t2:
                    t2.yield_(fb.emit(call("exp", x), name="e"))
                with e2:
                    e2.yield_(x)
            then.yield_(inner.var)
        with else_:
            else_.yield_(fb.emit(call("negative", x), name="n"))
    fn = fb.finish(outer.var)
    (binding,) = fn.bindings
    assert isinstance(binding.value, If)
    assert isinstance(binding.value.then_branch.bindings[0].value, If)
    assert binding.ty == F32_44 and fn.ret_type == F32_44
    assert [v.name_hint for v in fb.params] == ["p", "x"]
    assert fb.bindings == fn.bindings


# ---------------------------------------------------------------- dataflow: types


def test_types_are_inferred_from_op_rules() -> None:
    fb = FunctionBuilder()
    x = fb.param("x", TensorType((2, 3), "float32"))
    y = fb.param("y", TensorType((3,), "float32"))
    s = fb.emit(call("add", x, y))
    m = fb.emit(call("matmul", s, call("transpose", s)))
    t = fb.emit(tuple_(m, y))
    g = fb.emit(getitem(t, -1))
    fn = fb.finish(t)
    types = [b.ty for b in fn.bindings]
    assert types[0] == TensorType((2, 3), "float32")
    assert types[1] == TensorType((2, 2), "float32")
    assert types[2] == TupleType((TensorType((2, 2), "float32"), TensorType((3,), "float32")))
    assert types[3] == TensorType((3,), "float32")
    assert fn.ret_type == types[2]
    assert fb.type_of(g) == TensorType((3,), "float32")


def test_unknown_types_stay_none_and_explicit_types_win() -> None:
    fb = FunctionBuilder()
    x = fb.param("x", F32_44)
    r = fb.emit(call(GlobalVar("g"), x), name="r")  # a call of a function: no rule
    s = fb.emit(call("add", r, x), name="s")  # r's type is unknown, so s's is too
    forced = fb.emit(call("add", x, x), ty=TensorType((9,), "int8"))
    fn = fb.finish(s)
    assert [b.ty for b in fn.bindings] == [None, None, TensorType((9,), "int8")]
    assert fb.type_of(forced) == TensorType((9,), "int8")
    assert fn.ret_type is None


def test_ill_typed_call_names_the_binding() -> None:
    fb = FunctionBuilder("f")
    x = fb.param("x", F32_44)
    y = fb.param("y", TensorType((3,), "float32"))
    with pytest.raises(TypeError, match=r"FunctionBuilder 'f', binding %bad: op 'add': shapes do not broadcast"):
        fb.emit(call("add", x, y), name="bad")
    # With inference off the same call is accepted.
    fb2 = FunctionBuilder(infer_types=False)
    a, b = fb2.param("a", F32_44), fb2.param("b", TensorType((3,), "float32"))
    fb2.emit(call("add", a, b))


# ---------------------------------------------------------------- dataflow: errors


def test_unknown_op_names_the_closest() -> None:
    with pytest.raises(NameNotFoundError, match=r"no op named 'ad' in the op registry; closest: 'add'"):
        call("ad", Var(0, "x"))
    with pytest.raises(KeyError):
        call(Op("relux"), Var(0, "x"))
    fb = FunctionBuilder()
    x = fb.param("x", F32_44)
    with pytest.raises(KeyError, match="no op named 'nope'"):
        fb.emit(Call(Op("nope"), (x,)))


def test_wrong_arity() -> None:
    x = Var(0, "x")
    with pytest.raises(BuilderError, match="op 'add' takes 2 arguments, got 3"):
        call("add", x, x, x)
    with pytest.raises(BuilderError, match="op 'relu' takes 1 argument, got 0"):
        call("relu")
    fb = FunctionBuilder()
    y = fb.param("y", F32_44)
    with pytest.raises(BuilderError, match="op 'relu' takes 1 argument, got 2"):
        fb.emit(Tuple((Call(Op("relu"), (y, y)),)))


def test_non_expressions_are_rejected() -> None:
    with pytest.raises(TypeError, match=r"argument 1 of the call of add must be a dataflow expression.*const\(value"):
        call("add", Var(0, "x"), 1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="callee must be"):
        call(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="index must be an int"):
        getitem(Var(0, "t"), "0")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tuple field 0"):
        tuple_(tir.const(1))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="a value of type set"):
        call("sum", Var(0, "x"), axis={1})
    fb = FunctionBuilder()
    with pytest.raises(TypeError, match="parameter 'x' must be a Type"):
        fb.param("x", "float32")  # type: ignore[arg-type]


def test_variable_from_another_builder() -> None:
    other = FunctionBuilder("other")
    foreign = other.param("w", F32_44)
    fb = FunctionBuilder("main")
    fb.param("x", F32_44)
    with pytest.raises(BuilderError, match=r"variable %w \(id 0\) is not defined in FunctionBuilder 'main'") as err:
        fb.emit(call("relu", foreign))
    assert "in scope: 'x'" in str(err.value)
    # Same id, different variable: still rejected.
    with pytest.raises(BuilderError, match="%imposter"):
        fb.finish(Var(0, "imposter"))


def test_branch_variables_are_not_visible_outside_their_branch() -> None:
    fb = FunctionBuilder()
    p = fb.param("p", BOOL)
    branch = fb.if_(p, name="r")
    with branch as (then, else_):
        with then:
            inside = fb.emit(const(1.0, "float32"), name="inside")
            then.yield_(inside)
        with else_:
            with pytest.raises(BuilderError, match="%inside"):
                else_.yield_(inside)
            else_.yield_(p)
        with pytest.raises(BuilderError, match="already built"):
            else_.__enter__()
    with pytest.raises(BuilderError, match="%inside"):
        fb.finish(inside)
    value = fb.finish(branch.var).bindings[0].value
    assert isinstance(value, If) and value.else_branch == SeqExpr((), p)


def test_if_builder_misuse() -> None:
    fb = FunctionBuilder()
    p = fb.param("p", BOOL)
    ifb = fb.if_(p, name="r")
    with pytest.raises(BuilderError, match="enter the then branch directly inside `with` of if %r"):
        ifb.then.__enter__()
    with pytest.raises(BuilderError, match="the else branch was not built"), ifb as (then, _else), then:
        then.yield_(p)
        with pytest.raises(BuilderError, match="already yielded"):
            then.yield_(p)
    with pytest.raises(BuilderError, match="directly inside `with` of if %s"), fb.if_(p, name="s"):
        fb.emit(p)
    with pytest.raises(BuilderError, match="yields nothing"), fb.if_(p, name="t") as (then, _else), then:
        pass
    with pytest.raises(BuilderError, match="outside that branch"), fb.if_(p, name="u") as (then, _else):
        then.yield_(p)
    with pytest.raises(BuilderError, match="was already built"):
        ifb.__enter__()
    # After all these errors the builder is still usable and consistent.
    done = fb.if_(p, name="ok")
    with done as (then, else_):
        with then:
            then.yield_(p)
        with else_:
            else_.yield_(p)
    fn = fb.finish(done.var)
    assert [b.var.name_hint for b in fn.bindings] == ["ok"]


def test_finish_twice_and_use_after_finish() -> None:
    fb = FunctionBuilder("f")
    x = fb.param("x", F32_44)
    fb.finish(x)
    with pytest.raises(BuilderError, match="FunctionBuilder 'f' was already finished"):
        fb.finish(x)
    with pytest.raises(BuilderError, match="already finished"):
        fb.emit(call("relu", x))
    with pytest.raises(BuilderError, match="already finished"):
        fb.param("y", F32_44)


def test_finish_with_an_open_if() -> None:
    fb = FunctionBuilder("f")
    p = fb.param("p", BOOL)
    ifb = fb.if_(p, name="r").__enter__()
    with pytest.raises(BuilderError, match="cannot finish while if %r is still open"):
        fb.finish(p)
    ifb.then.__enter__()
    with pytest.raises(BuilderError, match="the then branch of if %r is still open"):
        fb.finish(p)


def test_global_var_needs_a_name() -> None:
    with pytest.raises(BuilderError, match="no name"):
        _ = FunctionBuilder().global_var
    with pytest.raises(TypeError, match="attrs of FunctionBuilder 'f'"):
        FunctionBuilder("f", attrs={"x": object()})


# ---------------------------------------------------------------- loop-level


def test_prim_func_builder_builds_the_expected_function() -> None:
    pb = PrimFuncBuilder("scale", attrs={"global_symbol": "scale"})
    A = pb.buffer("A", (16, 16), "float32")
    B = pb.buffer("B", (16, 16), "float32")
    n = pb.var("n", "int32")
    with pb.for_range("i", 16) as i, pb.for_range("j", 0, 16, kind="vectorized") as j:
        with pb.if_then_else(tir.lt(i, n)):
            pb.store(B, (i, j), A[i, j] * 2.0)
        with pb.else_():
            pb.store(B, (i, j), 0.0)
    fn = pb.finish()

    A2 = tir.Buffer(0, "A", "float32", (tir.const(16), tir.const(16)))
    B2 = tir.Buffer(1, "B", "float32", (tir.const(16), tir.const(16)))
    n2, i2, j2 = tir.Var(2, "n"), tir.Var(3, "i"), tir.Var(4, "j")
    body = tir.IfThenElse(
        tir.LT(i2, n2),
        tir.BufferStore(B2, tir.Mul(tir.BufferLoad(A2, (i2, j2)), tir.FloatImm("float32", 2.0)), (i2, j2)),
        tir.BufferStore(B2, tir.FloatImm("float32", 0.0), (i2, j2)),
    )
    inner = tir.For(j2, tir.const(0), tir.const(16), tir.ForKind.VECTORIZED, body)
    outer = tir.For(i2, tir.const(0), tir.const(16), tir.ForKind.SERIAL, inner)
    assert fn == tir.PrimFunc((A2, B2, n2), outer, attrs={"global_symbol": "scale"})
    assert pb.params == (A2, B2, n2)


def test_loop_ranges_lets_allocations_and_sequences() -> None:
    pb = PrimFuncBuilder()
    n = pb.var("n", "int64")
    with pb.for_range("a", 2, 10, kind=tir.ForKind.UNROLLED, annotations={"k": 1}) as a:
        pb.evaluate(a)
    with pb.for_range("b", 0, n, dtype="int64") as b:
        pb.evaluate(b)
    with pb.for_range("c", 1, n, dtype="int64"):
        pass
    with pb.allocate("T", (4,), "int8") as T, pb.let("s", n * 2) as s:
        pb.store(T, 0, tir.Cast("int8", s))
        pb.evaluate(tir.Call("int32", "print", (s,)))
    fn = pb.finish()
    assert isinstance(fn.body, tir.SeqStmt)
    loop_a, loop_b, loop_c, alloc = fn.body.seq
    assert isinstance(loop_a, tir.For) and isinstance(loop_b, tir.For) and isinstance(loop_c, tir.For)
    assert (loop_a.min, loop_a.extent, loop_a.kind, loop_a.annotations) == (
        tir.const(2),
        tir.const(8),
        tir.ForKind.UNROLLED,
        {"k": 1},
    )
    assert loop_b.min == tir.IntImm("int64", 0) and loop_b.extent == n
    assert loop_c.extent == tir.Sub(n, tir.IntImm("int64", 1))
    assert loop_c.body == tir.SeqStmt(())
    assert isinstance(alloc, tir.Allocate) and alloc.buffer.dtype == "int8"
    let = alloc.body
    assert isinstance(let, tir.LetStmt) and let.var.dtype == "int64"
    assert isinstance(let.body, tir.SeqStmt) and len(let.body.seq) == 2


def test_prim_builder_errors() -> None:
    pb = PrimFuncBuilder("k")
    A = pb.buffer("A", (8,), "float32")
    kinds = "serial, parallel, vectorized, unrolled"
    with (
        pytest.raises(BuilderError, match=f"unknown loop kind 'fast'; kinds: {kinds}"),
        pb.for_range("i", 8, kind="fast"),
    ):
        pass
    with pytest.raises(BuilderError, match="stop 2 is below start 5"), pb.for_range("i", 5, 2):
        pass
    with pb.for_range("i", 8) as i:
        pb.store(A, i, 1.0)
    with pytest.raises(BuilderError, match=r"variable %i \(id \d+\) is not defined in PrimFuncBuilder 'k'"):
        pb.store(A, i, 2.0)  # the loop is closed
    other = PrimFuncBuilder()
    foreign = other.buffer("F", (8,), "float32")
    with pytest.raises(BuilderError, match=r"buffer %F .* in scope: 'A'"):
        pb.store(foreign, 0, 1.0)
    with pytest.raises(BuilderError, match="store to %A: 2 indices for 1 dimensions"):
        pb.store(A, (0, 0), 1.0)
    with pytest.raises(BuilderError, match="2 strides for 1 dimensions"):
        pb.buffer("S", (4,), "float32", strides=(1, 1))
    with pytest.raises(BuilderError, match="else_"), pb.else_():
        pass
    with pb.if_then_else(tir.const(True)):
        pb.evaluate(0)
    pb.evaluate(1)
    with pytest.raises(BuilderError, match="right after"), pb.else_():
        pass
    with pytest.raises(TypeError, match=r"must be a tir\.Buffer"):
        pb.store("A", 0, 1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="annotations of loop 'j'"), pb.for_range("j", 2, annotations={"x": {1, 2}}):
        pass


def test_prim_builder_recovers_from_errors_inside_blocks() -> None:
    pb = PrimFuncBuilder()
    with pytest.raises(RuntimeError), pb.for_range("i", 4):
        raise RuntimeError("user code failed")
    pb.evaluate(0)
    fn = pb.finish()
    assert fn.body == tir.Evaluate(tir.const(0))


def test_prim_builder_finish_twice_and_with_open_scope() -> None:
    pb = PrimFuncBuilder("k")
    cm = pb.for_range("i", 4)
    cm.__enter__()
    with pytest.raises(BuilderError, match="cannot finish while loop %i is still open"):
        pb.finish()
    cm.__exit__(None, None, None)  # closing the loop appends it
    fn = pb.finish()
    assert isinstance(fn.body, tir.For)
    with pytest.raises(BuilderError, match="PrimFuncBuilder 'k' was already finished"):
        pb.finish()
    with pytest.raises(BuilderError, match="already finished"):
        pb.var("n")


def test_emit_checks_statements_built_elsewhere() -> None:
    pb = PrimFuncBuilder()
    A = pb.buffer("A", (4,), "int32")
    j = tir.Var(50, "j")
    inner_loop = tir.For(j, tir.const(0), tir.const(4), tir.ForKind.SERIAL, A.store((j,), j))
    assert pb.emit(inner_loop) is inner_loop  # j is bound by the loop itself
    with pytest.raises(BuilderError, match="%j"):
        pb.emit(A.store((j,), 0))
    assert pb.finish().body is inner_loop
