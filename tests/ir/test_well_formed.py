"""Well-formedness: good IR passes, each kind of bad IR is reported with a precise message."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parpass.errors import IRError
from parpass.instrument.well_formed import WellFormedInstrument
from parpass.ir import IRModule, relax, tir
from parpass.ir.node import GlobalVar, Op
from parpass.ir.types import PrimType, TensorType, TupleType
from parpass.ir.well_formed import check_well_formed, well_formed
from parpass.testing.generator import random_module
from parpass.transform.pass_info import PassInfo

F32x4 = TensorType((4,), "float32")
I32 = "int32"


def rv(vid: int, name: str) -> relax.Var:
    return relax.Var(vid, name)


def call(op: str, *args: relax.Expr, **attrs: object) -> relax.Call:
    return relax.Call(Op(op), tuple(args), dict(attrs))


def gcall(name: str, *args: relax.Expr) -> relax.Call:
    return relax.Call(GlobalVar(name), tuple(args))


def bind(var: relax.Var, value: relax.Expr, ty: object = None) -> relax.Binding:
    return relax.Binding(var, value, ty)  # type: ignore[arg-type]


def func(
    params: list[tuple[relax.Var, object]],
    bindings: list[relax.Binding],
    body: relax.Expr,
    ret_type: object = None,
) -> relax.Function:
    return relax.Function(
        tuple(relax.Param(v, t) for v, t in params),  # type: ignore[arg-type]
        relax.SeqExpr(tuple(bindings), body),
        ret_type,  # type: ignore[arg-type]
    )


def imm(v: int, dtype: str = I32) -> tir.IntImm:
    return tir.IntImm(dtype, v)


def buf(vid: int, name: str, shape: tuple[int, ...], dtype: str = I32) -> tir.Buffer:
    return tir.Buffer(vid, name, dtype, tuple(imm(d) for d in shape))


def loop(var: tir.Var, extent: int, body: tir.Stmt, kind: object = tir.ForKind.SERIAL) -> tir.For:
    return tir.For(var, imm(0, var.dtype), imm(extent, var.dtype), kind, body)  # type: ignore[arg-type]


def only_problem(x: object, mod: IRModule | None = None) -> str:
    problems = well_formed(x, mod)  # type: ignore[arg-type]
    assert len(problems) == 1, problems
    return problems[0]


# ---------------------------------------------------------------- good IR


def good_function() -> relax.Function:
    x, c, y, z, r, t, w = rv(0, "x"), rv(1, "c"), rv(2, "y"), rv(3, "z"), rv(4, "r"), rv(5, "t"), rv(6, "w")
    then_ = relax.SeqExpr((bind(w, call("exp", y), F32x4),), w)
    return func(
        [(x, F32x4), (c, PrimType("bool"))],
        [
            bind(y, call("add", x, relax.Constant.from_value(np.ones(4, "float32"))), F32x4),
            bind(z, call("split", y, sections=2)),
            bind(r, relax.If(c, then_, relax.SeqExpr((), y)), F32x4),
            bind(t, relax.Tuple((r, relax.TupleGetItem(z, 1)))),
        ],
        t,
        TupleType((F32x4, TensorType((2,), "float32"))),
    )


def good_prim_func() -> tir.PrimFunc:
    n, i, j, v = tir.Var(0, "n"), tir.Var(1, "i"), tir.Var(2, "j"), tir.Var(3, "v", "float32")
    A, B, T = buf(4, "A", (4, 8), "float32"), buf(5, "B", (4, 8), "float32"), buf(6, "T", (8,), "float32")
    body = loop(
        i,
        4,
        tir.Allocate(
            T,
            tir.SeqStmt(
                (
                    T.store(tir.Ramp(imm(0), imm(1), 8), A[i, tir.Ramp(imm(0), imm(1), 8)]),
                    loop(
                        j,
                        8,
                        tir.LetStmt(
                            v,
                            tir.Call("float32", "exp", (T[j],)),
                            tir.IfThenElse(tir.lt(j, n), B.store((i, j), tir.Max(v, tir.FloatImm("float32", 0.0)))),
                        ),
                        tir.ForKind.UNROLLED,
                    ),
                )
            ),
        ),
        tir.ForKind.PARALLEL,
    )
    return tir.PrimFunc((n, A, B), body)


def test_good_ir_has_no_problems() -> None:
    mod = IRModule({"f": good_function(), "k": good_prim_func()})
    assert well_formed(mod) == []
    check_well_formed(mod)
    assert well_formed(good_function()) == []
    assert well_formed(good_prim_func()) == []


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**20), size=st.integers(4, 40))
def test_generated_modules_are_well_formed(seed: int, size: int) -> None:
    mod = random_module(num_functions=10, num_prim_funcs=5, size=size, seed=seed)
    assert well_formed(mod) == []


def test_deep_and_long_ir() -> None:
    x = rv(0, "x")
    expr: relax.Expr = x
    for _ in range(5000):
        expr = call("add", expr, x)
    bindings = [bind(rv(1, "y"), expr, F32x4)]
    for k in range(2, 20002):
        bindings.append(bind(rv(k, f"v{k}"), call("multiply", rv(k - 1, "p"), x), F32x4))
    f = func([(x, F32x4)], bindings, rv(20001, "last"), F32x4)
    assert well_formed(f) == []
    i = tir.Var(0, "i")
    A = buf(1, "A", (3,))
    e: tir.PrimExpr = i
    for _ in range(5000):
        e = tir.Add(e, imm(1))
    assert well_formed(tir.PrimFunc((A,), loop(i, 3, A.store(i, e)))) == []


def test_check_well_formed_raises_ir_error_listing_problems() -> None:
    x, y = rv(0, "x"), rv(1, "y")
    f = func([(x, F32x4)], [bind(y, call("add", x, rv(7, "ghost"))), bind(rv(8, "z"), call("nope", y))], y)
    with pytest.raises(IRError) as info:
        check_well_formed(IRModule({"main": f}))
    text = str(info.value)
    assert text.startswith("ill-formed IR: 2 problem(s):")
    assert "function 'main', binding 0 (%y): %ghost (vid 7) is used before it is defined" in text
    assert "function 'main', binding 1 (%z): call of an unknown op: no op named 'nope'" in text
    assert isinstance(info.value, ValueError)


def test_well_formed_rejects_non_ir() -> None:
    with pytest.raises(TypeError, match="expects an IRModule, Function or PrimFunc, got int"):
        well_formed(3)  # type: ignore[arg-type]


# ---------------------------------------------------------------- bad dataflow functions


def test_use_before_definition() -> None:
    x, y, z = rv(0, "x"), rv(1, "y"), rv(2, "z")
    f = func([(x, F32x4)], [bind(y, call("add", x, z)), bind(z, call("add", x, x))], y)
    assert only_problem(f) == "function '<function>', binding 0 (%y): %z (vid 2) is used before it is defined"


def test_branch_binding_used_outside_its_branch() -> None:
    c, x, r, y, z = rv(0, "c"), rv(1, "x"), rv(2, "r"), rv(3, "y"), rv(4, "z")
    then_ = relax.SeqExpr((bind(y, call("add", x, x)),), y)
    f = func(
        [(c, PrimType("bool")), (x, F32x4)],
        [bind(r, relax.If(c, then_, relax.SeqExpr((), x))), bind(z, call("add", y, r))],
        z,
    )
    assert only_problem(f) == (
        "function '<function>', binding 1 (%z): %y (vid 3) is used outside the branch that defines it "
        "(at binding 0 (%r) > then branch > binding 0 (%y))"
    )


def test_duplicate_vid() -> None:
    x, y = rv(0, "x"), rv(1, "y")
    f = func([(x, F32x4)], [bind(y, call("add", x, x)), bind(rv(0, "again"), call("add", y, y))], y)
    assert only_problem(f) == (
        "function '<function>', binding 1 (%again): vid 0 is defined twice (first at parameter 0 (%x))"
    )


def test_wrong_binding_type() -> None:
    x, y = rv(0, "x"), rv(1, "y")
    f = func([(x, F32x4)], [bind(y, call("add", x, x), TensorType((4,), "float64"))], y)
    assert only_problem(f) == (
        "function '<function>', binding 0 (%y): annotated type Tensor((4,), float64) differs from the inferred "
        "type Tensor((4,), float32)"
    )


def test_type_of_an_annotation_propagates() -> None:
    # y's type comes from its annotation; the call using y is then checked against it.
    x, y, z = rv(0, "x"), rv(1, "y"), rv(2, "z")
    f = func([(x, F32x4)], [bind(y, call("astype", x, dtype="int32")), bind(z, call("add", x, y))], z)
    problem = only_problem(f)
    assert problem.startswith("function '<function>', binding 1 (%z): ill-typed call of op 'add': op 'add': operands")


def test_unknown_op_and_wrong_arity() -> None:
    x, y = rv(0, "x"), rv(1, "y")
    assert only_problem(func([(x, F32x4)], [bind(y, call("ad", x, x))], y)).startswith(
        "function '<function>', binding 0 (%y): call of an unknown op: no op named 'ad' in the op registry; "
        "closest: 'add'"
    )
    assert only_problem(func([(x, F32x4)], [bind(y, call("add", x))], y)) == (
        "function '<function>', binding 0 (%y): op 'add' takes 2 argument(s), got 1"
    )


def test_calls_of_module_functions() -> None:
    a = rv(0, "a")
    callee = func([(a, F32x4)], [], a, F32x4)
    x, y = rv(0, "x"), rv(1, "y")
    mod = IRModule(
        {
            "callee": callee,
            "arity": func([(x, F32x4)], [bind(y, gcall("callee", x, x))], y),
            "typed": func([(x, TensorType((3,), "float32"))], [bind(y, gcall("callee", x))], y),
            "missing": func([(x, F32x4)], [bind(y, gcall("calee", x))], y),
            "ret": func([(x, F32x4)], [bind(y, gcall("callee", x), TensorType((4,), "int32"))], y),
        }
    )
    assert well_formed(mod) == [
        "function 'arity', binding 0 (%y): call of @callee: it takes 1 argument(s), got 2",
        "function 'typed', binding 0 (%y): call of @callee: argument 0 has type Tensor((3,), float32), parameter %a "
        "is Tensor((4,), float32)",
        "function 'missing', binding 0 (%y): call of @calee: no function named 'calee' in the module; known: "
        "'callee', 'ret', 'arity', 'typed', 'missing'",
        "function 'ret', binding 0 (%y): annotated type Tensor((4,), int32) differs from the inferred type "
        "Tensor((4,), float32)",
    ]
    # Without a module, calls of module functions cannot be checked and are not reported.
    assert well_formed(mod["missing"]) == []


def test_calls_of_prim_funcs() -> None:
    A, B = buf(1, "A", (4,), "float32"), buf(2, "B", (4,), "float32")
    n = tir.Var(3, "n")
    kernel = tir.PrimFunc((A, B), B.store(imm(0), A[imm(0)]))
    scalar_out = tir.PrimFunc((A, n), A.store(imm(0), tir.FloatImm("float32", 1.0)))
    x, y = rv(0, "x"), rv(1, "y")
    mod = IRModule(
        {
            "kernel": kernel,
            "scalar_out": scalar_out,
            "ok": func([(x, F32x4)], [bind(y, gcall("kernel", x), F32x4)], y),
            "bad_arg": func([(x, TensorType((4,), "int32"))], [bind(y, gcall("kernel", x))], y),
            "no_scalar": func([(x, F32x4)], [bind(y, gcall("scalar_out", x))], y),
        }
    )
    assert well_formed(mod) == [
        "function 'bad_arg', binding 0 (%y): call of PrimFunc @kernel: argument 0 has type Tensor((4,), int32), "
        "expected Tensor((4,), float32)",
        "function 'no_scalar', binding 0 (%y): call of PrimFunc @scalar_out: scalar parameter 1 (n) has no argument",
    ]


def test_if_condition_branch_types_and_tuple_index() -> None:
    x, c, r, t, g = rv(0, "x"), rv(1, "c"), rv(2, "r"), rv(3, "t"), rv(4, "g")
    cast = rv(5, "k")
    else_ = relax.SeqExpr((bind(cast, call("astype", x, dtype="int32")),), cast)
    f = func(
        [(x, F32x4), (c, TensorType((4,), "bool"))],
        [
            bind(r, relax.If(c, relax.SeqExpr((), x), else_)),
            bind(t, relax.Tuple((x, x))),
            bind(g, relax.TupleGetItem(t, 2)),
            bind(rv(6, "h"), relax.TupleGetItem(x, 0)),
        ],
        x,
    )
    assert well_formed(f) == [
        "function '<function>', binding 0 (%r): If condition must be a bool scalar, got Tensor((4,), bool)",
        "function '<function>', binding 0 (%r): If branches have different types: Tensor((4,), float32) and "
        "Tensor((4,), int32)",
        "function '<function>', binding 2 (%g): TupleGetItem index 2 is out of range for "
        "Tuple[Tensor((4,), float32), Tensor((4,), float32)] (2 fields)",
        "function '<function>', binding 3 (%h): TupleGetItem index 0 of a non-tuple of type Tensor((4,), float32)",
    ]


def test_ret_type_and_bad_types() -> None:
    x = rv(0, "x")
    assert only_problem(func([(x, F32x4)], [], x, TensorType((4,), "int8"))) == (
        "function '<function>', return type: ret_type Tensor((4,), int8) differs from the body's type "
        "Tensor((4,), float32)"
    )
    assert only_problem(func([(x, TensorType((4,), "float31"))], [], x)) == (
        "function '<function>', parameter 0 (%x): type Tensor((4,), float31) has unknown dtype 'float31'"
    )


def test_global_var_used_as_a_value() -> None:
    x, y = rv(0, "x"), rv(1, "y")
    f = func([(x, F32x4)], [bind(y, GlobalVar("g"))], y)
    assert (
        only_problem(f) == "function '<function>', binding 0 (%y): @g is used as a value; functions can only be called"
    )


# ---------------------------------------------------------------- bad loop-level functions


def test_tir_use_outside_scope_and_before_definition() -> None:
    i, j = tir.Var(0, "i"), tir.Var(1, "j")
    A = buf(2, "A", (4,))
    f = tir.PrimFunc((A,), tir.SeqStmt((loop(i, 4, A.store(i, i)), A.store(imm(0), i), A.store(imm(1), j))))
    assert well_formed(f, name="k") == [
        "PrimFunc 'k', at SeqStmt[1] > BufferStore A: variable i (vid 0) is used outside its scope",
        "PrimFunc 'k', at SeqStmt[2] > BufferStore A: variable j (vid 1) is used before it is defined",
    ]


def test_tir_duplicate_vid() -> None:
    i = tir.Var(0, "i")
    A = buf(1, "A", (4,))
    f = tir.PrimFunc((A,), tir.SeqStmt((loop(i, 4, A.store(i, i)), loop(i, 2, A.store(i, i)))))
    assert only_problem(f) == (
        "PrimFunc '<function>', at SeqStmt[1] > For i: loop variable i reuses vid 0 "
        "(first defined at SeqStmt[0] > For i)"
    )
    g = tir.PrimFunc((A,), loop(tir.Var(1, "i"), 4, A.store(imm(0), imm(0))))
    assert only_problem(g) == (
        "PrimFunc '<function>', at For i: loop variable i reuses vid 1 (first defined at parameter 0 (A))"
    )


def test_tir_undeclared_and_mismatched_buffers() -> None:
    A, T = buf(1, "A", (4,)), buf(2, "T", (4,))
    f = tir.PrimFunc((A,), tir.SeqStmt((tir.Allocate(T, T.store(imm(0), imm(1))), A.store(imm(0), T[imm(0)]))))
    assert only_problem(f) == (
        "PrimFunc '<function>', at SeqStmt[1] > BufferStore A: load of buffer T (vid 2), which is neither a "
        "parameter nor allocated by an enclosing Allocate"
    )
    other = buf(1, "A", (8,), "float32")
    g = tir.PrimFunc((A,), other.store(imm(0), tir.FloatImm("float32", 1.0)))
    assert only_problem(g) == (
        "PrimFunc '<function>', at BufferStore A: store of buffer A (vid 1) does not match its declaration "
        "(A: float32(8) vs declared A: int32(4))"
    )


def test_tir_dtype_mismatches() -> None:
    i = tir.Var(0, "i")
    A, F = buf(1, "A", (4,)), buf(2, "F", (4,), "float32")
    cases = {
        "store": F.store(imm(0), imm(1)),
        "operands": A.store(imm(0), tir.Add(imm(1), imm(1, "int64"))),
        "vector": A.store(imm(0), tir.Broadcast(imm(1), 4)),
        "loop": tir.For(i, imm(0, "int64"), imm(4), tir.ForKind.SERIAL, A.store(i, i)),
        "cond": tir.IfThenElse(imm(1), A.store(imm(0), imm(1))),
        "let": tir.LetStmt(tir.Var(3, "v", "float32"), imm(1), A.store(imm(0), imm(1))),
    }
    got = {k: only_problem(tir.PrimFunc((A, F), s), None) for k, s in cases.items()}
    assert got == {
        "store": "PrimFunc '<function>', at BufferStore F: stores a int32 value into buffer F of dtype float32",
        "operands": "PrimFunc '<function>', at BufferStore A: operands of Add have different dtypes: int32 and int64",
        "vector": "PrimFunc '<function>', at BufferStore A: stores a int32x4 value into buffer A at a scalar index",
        "loop": "PrimFunc '<function>', at For i: loop variable i is int32 but min is int64",
        "cond": "PrimFunc '<function>', at IfThenElse: IfThenElse condition must be a bool scalar, got int32",
        "let": "PrimFunc '<function>', at LetStmt v: LetStmt variable v is float32 but its value is int32",
    }


def test_tir_loop_extent_dtype_and_kind() -> None:
    i = tir.Var(0, "i")
    A = buf(1, "A", (4,))
    f = tir.PrimFunc((A,), tir.For(i, imm(0), imm(4, "int64"), tir.ForKind.SERIAL, A.store(i, i)))
    assert only_problem(f) == "PrimFunc '<function>', at For i: loop variable i is int32 but extent is int64"
    g = tir.PrimFunc((A,), loop(i, 4, A.store(i, i), kind="pipelined"))
    assert only_problem(g) == (
        "PrimFunc '<function>', at For i: For kind 'pipelined' is not one of parallel, serial, unrolled, vectorized"
    )


def test_tir_indices_and_intrinsics() -> None:
    A = buf(1, "A", (2, 2), "float32")
    one = tir.FloatImm("float32", 1.0)
    cases = {
        "count": A.store(imm(0), one),
        "float_index": A.store((imm(0), tir.Cast("float32", imm(0))), one),
        "intrinsic": A.store((imm(0), imm(0)), tir.Call("float32", "expp", (one,))),
        "arity": A.store((imm(0), imm(0)), tir.Call("float32", "pow", (one,))),
        "arg_dtype": A.store((imm(0), imm(0)), tir.Call("float32", "exp", (tir.FloatImm("float64", 1.0),))),
    }
    got = {k: only_problem(tir.PrimFunc((A,), s)) for k, s in cases.items()}
    assert (
        got["count"]
        == "PrimFunc '<function>', at BufferStore A: store of buffer A has 1 indices but the buffer has 2 dimensions"
    )
    assert (
        got["float_index"]
        == "PrimFunc '<function>', at BufferStore A: index 1 of store of buffer A is float32, not an integer"
    )
    assert got["intrinsic"].startswith(
        "PrimFunc '<function>', at BufferStore A: call of unknown intrinsic 'expp'; known: abs,"
    )
    assert got["arity"] == "PrimFunc '<function>', at BufferStore A: intrinsic 'pow' takes 2 argument(s), got 1"
    assert (
        got["arg_dtype"]
        == "PrimFunc '<function>', at BufferStore A: argument 0 of intrinsic 'exp' is float64, the call is float32"
    )


def test_problems_in_a_module_name_each_function() -> None:
    i = tir.Var(0, "i")
    A = buf(1, "A", (4,))
    bad_prim = tir.PrimFunc((A,), A.store(imm(0), i))
    x, y = rv(0, "x"), rv(1, "y")
    bad_fn = func([(x, F32x4)], [bind(y, call("add", x, rv(9, "q")))], y)
    assert well_formed(IRModule({"fine": good_function(), "k": bad_prim, "f": bad_fn})) == [
        "PrimFunc 'k', at BufferStore A: variable i (vid 0) is used before it is defined",
        "function 'f', binding 0 (%y): %q (vid 9) is used before it is defined",
    ]


# ---------------------------------------------------------------- the instrument


def test_instrument_names_the_pass_and_the_side() -> None:
    x, y = rv(0, "x"), rv(1, "y")
    bad = IRModule({"f": func([(x, F32x4)], [bind(y, call("add", x, rv(5, "q")))], y)})
    good = IRModule({"f": good_function()})
    inst = WellFormedInstrument()
    info = PassInfo(0, "MyPass")
    inst.run_before_pass(good, info)
    inst.run_after_pass(good, info)
    with pytest.raises(
        IRError, match=r"ill-formed IR after pass 'MyPass' \(the pass produced ill-formed IR\): 1 problem"
    ):
        inst.run_after_pass(bad, info)
    with pytest.raises(
        IRError, match=r"before pass 'MyPass' \(the pass was given ill-formed IR\)[^\n]*\n  - function 'f'"
    ):
        inst.run_before_pass(bad, info)
    WellFormedInstrument(check_before=False).run_before_pass(bad, info)  # disabled side: no check


def test_instrument_rechecks_only_changed_functions_and_their_callers() -> None:
    a = rv(0, "a")
    callee = func([(a, F32x4)], [], a, F32x4)
    x, y = rv(0, "x"), rv(1, "y")
    caller = func([(x, F32x4)], [bind(y, gcall("callee", x), F32x4)], y)
    mod = IRModule({"callee": callee, "caller": caller, "k": good_prim_func()})
    inst = WellFormedInstrument()
    info = PassInfo(0, "P")
    inst.run_before_pass(mod, info)
    assert inst.functions_checked == 3
    inst.run_after_pass(mod, info)
    assert inst.functions_checked == 3  # nothing changed: answered from the cache
    changed = mod.copy()
    changed["callee"] = func([(a, TensorType((4,), "int32"))], [], a, TensorType((4,), "int32"))
    with pytest.raises(IRError, match="call of @callee: argument 0 has type Tensor"):
        inst.run_after_pass(changed, info)
    assert inst.functions_checked == 5  # the callee and its caller, not the PrimFunc
    restored = pickle.loads(pickle.dumps(inst))
    assert restored.functions_checked == 0 and restored.check_before and restored.check_after


def test_instrument_in_a_pass_context_catches_the_breaking_pass() -> None:
    from parpass.transform import PassContext, Sequential, function_pass, module_pass

    @function_pass(opt_level=0, name="Identity")
    def identity(f: relax.Function, mod: IRModule, ctx: object) -> relax.Function:
        return f

    @function_pass(opt_level=0, name="DropFirstBinding")
    def drop_first(f: relax.Function, mod: IRModule, ctx: object) -> relax.Function:
        return f.with_body(relax.SeqExpr(f.body.bindings[1:], f.body.body))

    @module_pass(opt_level=0, name="Nothing")
    def nothing(mod: IRModule, ctx: object) -> IRModule:
        return mod

    x, y, z = rv(0, "x"), rv(1, "y"), rv(2, "z")
    chain = func([(x, F32x4)], [bind(y, call("add", x, x), F32x4), bind(z, call("add", y, y), F32x4)], z)
    mod = IRModule({"f": chain, "k": good_prim_func()})
    inst = WellFormedInstrument()
    with PassContext(opt_level=3, instruments=[inst]):
        out = Sequential([identity, nothing, identity])(mod)
        assert out["f"] is chain
        with pytest.raises(IRError) as info:
            Sequential([identity, drop_first, nothing])(mod)
    text = str(info.value)
    assert "after pass 'DropFirstBinding'" in text
    assert "function 'f', binding 0 (%z): %y (vid 1) is used before it is defined" in text


def test_tir_immediates_fit_their_dtype() -> None:
    A = buf(1, "A", (4,), "int8")
    assert only_problem(tir.PrimFunc((A,), A.store(imm(0), imm(300, "int8")))) == (
        "PrimFunc '<function>', at BufferStore A: IntImm 300 does not fit dtype int8"
    )
    F = buf(2, "F", (4,), "float32")
    assert only_problem(tir.PrimFunc((F,), F.store(imm(0), tir.IntImm("float32", 1)))) == (
        "PrimFunc '<function>', at BufferStore F: IntImm 1 has non-integer dtype float32"
    )
