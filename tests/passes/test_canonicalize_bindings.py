"""CanonicalizeBindings: exact results on hand-written functions, and the pass properties on random modules."""

from __future__ import annotations

from hypothesis import given
from passes_support import F32, PROPERTY_SETTINGS, SEEDS, assert_same_ir, check_function_pass, run_on

from parpass.ir import Binding, Function, IRModule, Param, PrimType, SeqExpr, TupleType, Var
from parpass.ir.builder import FunctionBuilder, call, getitem, tuple_
from parpass.passes import CanonicalizeBindings
from parpass.transform import PassContext

BOOL = PrimType("bool")


def test_copies_are_propagated_and_dropped() -> None:
    fb = FunctionBuilder("main")
    x = fb.param("x", F32)
    y = fb.emit(x)
    z = fb.emit(y)  # a copy of a copy
    a = fb.emit(call("add", y, z))
    func = fb.finish(fb.emit(a))  # the returned expression is a copy too

    fb = FunctionBuilder("main")
    x = fb.param("x", F32)
    a = fb.emit(call("add", x, x))
    expected = fb.finish(a)
    out = run_on(CanonicalizeBindings(), func)
    assert_same_ir(out, expected)
    assert run_on(CanonicalizeBindings(), out) is out


def test_tuple_round_trips() -> None:
    fb = FunctionBuilder("main")
    x, w = fb.param("x", F32), fb.param("w", F32)
    a = fb.emit(call("exp", x))
    t = fb.emit(tuple_(a, w))
    t2 = fb.emit(t)  # a copy of the tuple
    first = fb.emit(getitem(t2, 0))  # is `a`
    second = fb.emit(getitem(tuple_(x, w), 1))  # an inline tuple: is `w`
    func = fb.finish(fb.emit(call("add", first, second)))

    fb = FunctionBuilder("main")
    x, w = fb.param("x", F32), fb.param("w", F32)
    a = fb.emit(call("exp", x))
    fb.emit(tuple_(a, w))  # the tuple itself stays (DeadCodeElimination's business)
    expected = fb.finish(fb.emit(call("add", a, w)))
    assert_same_ir(run_on(CanonicalizeBindings(), func), expected)


def test_projection_of_an_unknown_tuple_stays() -> None:
    pair = TupleType((F32, F32))
    fb = FunctionBuilder("main")
    p = fb.param("p", pair)
    a = fb.emit(getitem(p, 0))
    t = fb.emit(tuple_(a, a))
    func = fb.finish(fb.emit(call("add", fb.emit(getitem(p, 1)), fb.emit(getitem(t, 0)))))
    out = run_on(CanonicalizeBindings(), func)
    # p[0] and p[1] stay (p is a parameter); t[0] becomes p[0]'s variable
    assert [type(b.value).__name__ for b in out.bindings] == ["TupleGetItem", "Tuple", "TupleGetItem", "Call"]
    assert out.bindings[-1].value.args[1] == a


def test_copies_inside_branches() -> None:
    fb = FunctionBuilder("main")
    x = fb.param("x", F32)
    flag = fb.param("flag", BOOL)
    branch = fb.if_(flag, name="r")
    with branch as (then, else_):
        with then:
            c = fb.emit(x)
            then.yield_(fb.emit(call("exp", c)))
        with else_:
            else_.yield_(fb.emit(x))  # the branch yields a copy: it yields x
    func = fb.finish(branch.var)

    fb = FunctionBuilder("main")
    x = fb.param("x", F32)
    flag = fb.param("flag", BOOL)
    branch = fb.if_(flag, name="r")
    with branch as (then, else_):
        with then:
            then.yield_(fb.emit(call("exp", x)))
        with else_:
            else_.yield_(x)
    expected = fb.finish(branch.var)
    assert_same_ir(run_on(CanonicalizeBindings(), func), expected)


def test_nothing_to_do_returns_the_same_function() -> None:
    fb = FunctionBuilder("main")
    x = fb.param("x", F32)
    t = fb.emit(tuple_(x, x))
    func = fb.finish(t)
    assert run_on(CanonicalizeBindings(), func) is func


def test_skip_optimization_function_is_untouched() -> None:
    fb = FunctionBuilder("main", attrs={"SkipOptimization": True})
    x = fb.param("x", F32)
    func = fb.finish(fb.emit(x))
    assert run_on(CanonicalizeBindings(), func) is func


def test_deep_ir_without_recursion_error() -> None:
    # A chain of 100,000 copies collapses to the parameter.
    x = Var(0, "x")
    bindings, prev = [], x
    for k in range(1, 100_001):
        v = Var(k, "v")
        bindings.append(Binding(v, prev, F32))
        prev = v
    func = Function((Param(x, F32),), SeqExpr(tuple(bindings), prev), F32)
    out = run_on(CanonicalizeBindings(), func)
    assert out.bindings == ()
    assert out.body.body == x


@PROPERTY_SETTINGS
@given(seed=SEEDS)
def test_properties_on_random_modules(seed: int) -> None:
    check_function_pass(CanonicalizeBindings, seed)


def test_random_module_has_work_for_canonicalize() -> None:
    before, after = check_function_pass(CanonicalizeBindings, 3)
    assert any(after[n] is not before[n] for n in before.names()), "nothing changed: the test proves nothing"


def test_statistics_count_copies_and_projections() -> None:
    fb = FunctionBuilder("main")
    x, w = fb.param("x", F32), fb.param("w", F32)
    y = fb.emit(x)  # a copy
    z = fb.emit(y)  # a copy of a copy
    a = fb.emit(call("exp", z))
    t = fb.emit(tuple_(a, w))
    first = fb.emit(getitem(t, 0))  # a projection, then a copy of `a`
    second = fb.emit(getitem(tuple_(x, w), 1))  # an inline tuple: a projection, then a copy of `w`
    nested = fb.emit(call("add", getitem(t, 1), first))  # a projection inside a call: no binding goes
    main = fb.finish(fb.emit(call("multiply", nested, second)))
    mod = IRModule({"main": main})
    with PassContext(config={"parpass.pass_statistics": True}) as ctx:
        out = CanonicalizeBindings()(mod)
    assert ctx.pass_statistics.as_dict()["CanonicalizeBindings"] == {"copies": 4, "projections": 3}
    with PassContext(config={"parpass.pass_statistics": True}) as ctx:
        assert CanonicalizeBindings()(out)["main"] is out["main"]
    assert ctx.pass_statistics.as_dict()["CanonicalizeBindings"] == {"copies": 0, "projections": 0}
