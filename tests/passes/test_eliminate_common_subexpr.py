"""EliminateCommonSubexpr: exact results on hand-written functions, and the pass properties on random modules."""

from __future__ import annotations

from hypothesis import given
from passes_support import F32, PROPERTY_SETTINGS, SEEDS, assert_same_ir, check_function_pass, run_on

from parpass.ir import Binding, Call, Function, GlobalVar, IRModule, Op, Param, PrimType, SeqExpr, Var
from parpass.ir.builder import FunctionBuilder, call, const
from parpass.passes import EliminateCommonSubexpr
from parpass.transform import PassContext

BOOL = PrimType("bool")


def test_duplicate_call_is_computed_once() -> None:
    fb = FunctionBuilder("main")
    x, y = fb.param("x", F32), fb.param("y", F32)
    a = fb.emit(call("add", x, y))
    b = fb.emit(call("add", x, y))
    func = fb.finish(fb.emit(call("multiply", a, b)))

    fb = FunctionBuilder("main")
    x, y = fb.param("x", F32), fb.param("y", F32)
    a = fb.emit(call("add", x, y))
    expected = fb.finish(fb.emit(call("multiply", a, a)))
    assert_same_ir(run_on(EliminateCommonSubexpr(), func), expected)


def test_chains_collapse_in_one_run() -> None:
    fb = FunctionBuilder("main")
    x = fb.param("x", F32)
    a1 = fb.emit(call("exp", x))
    b1 = fb.emit(call("negative", a1))
    a2 = fb.emit(call("exp", x))
    b2 = fb.emit(call("negative", a2))  # equal to b1 once a2 is replaced by a1
    func = fb.finish(fb.emit(call("add", b1, b2)))

    fb = FunctionBuilder("main")
    x = fb.param("x", F32)
    b1 = fb.emit(call("negative", fb.emit(call("exp", x))))
    expected = fb.finish(fb.emit(call("add", b1, b1)))
    out = run_on(EliminateCommonSubexpr(), func)
    assert_same_ir(out, expected)
    assert run_on(EliminateCommonSubexpr(), out) is out


def test_keys_compare_attributes_and_constants_by_value() -> None:
    fb = FunctionBuilder("main")
    x = fb.param("x", F32)
    s1 = fb.emit(call("sum", x, axis=0, keepdims=True))
    s2 = fb.emit(call("sum", x, keepdims=True, axis=0))  # same attributes in another order: equal
    s3 = fb.emit(call("sum", x, axis=0))  # other attributes: different
    c1 = fb.emit(call("add", x, const([1.0, 2.0, 3.0, 4.0], "float32")))
    c2 = fb.emit(call("add", x, const([1.0, 2.0, 3.0, 4.0], "float32")))  # an equal, distinct constant
    c3 = fb.emit(call("add", x, const([1.0, 2.0, 3.0, 5.0], "float32")))
    r = fb.emit(fb.tuple_(s1, s2, s3, c1, c2, c3))
    func = fb.finish(r)
    out = run_on(EliminateCommonSubexpr(), func)
    fields = out.bindings[-1].value.fields
    kept = [b.var for b in out.bindings[:-1]]
    assert len(kept) == 4
    assert fields == (kept[0], kept[0], kept[1], kept[2], kept[2], kept[3])


def test_impure_calls_and_function_calls_are_not_shared() -> None:
    helper = FunctionBuilder("helper")
    p = helper.param("p", F32)
    helper_func = helper.finish(helper.emit(call("negative", p)))
    fb = FunctionBuilder("main")
    x = fb.param("x", F32)
    r1 = fb.emit(call("random_uniform", shape=[4], seed=1))
    r2 = fb.emit(call("random_uniform", shape=[4], seed=1))
    p1 = fb.emit(call("print", x))
    p2 = fb.emit(call("print", x))
    g1 = fb.emit(call(GlobalVar("helper"), x))
    g2 = fb.emit(call(GlobalVar("helper"), x))
    func = fb.finish(fb.emit(fb.tuple_(r1, r2, p1, p2, g1, g2)))
    assert run_on(EliminateCommonSubexpr(), func, helper=helper_func) is func


def test_if_scopes() -> None:
    """A branch reuses an outer value; a branch's values are not reused after the If, nor by the other branch."""
    fb = FunctionBuilder("main")
    x = fb.param("x", F32)
    flag = fb.param("flag", BOOL)
    outer = fb.emit(call("exp", x))
    branch = fb.if_(flag, name="r")
    with branch as (then, else_):
        with then:
            again = fb.emit(call("exp", x))  # reuses `outer`
            inner = fb.emit(call("tanh", again))
            then.yield_(inner)
        with else_:
            else_.yield_(fb.emit(call("tanh", outer)))  # not shared with the then branch
    after = fb.emit(call("tanh", outer))  # not shared with either branch
    func = fb.finish(fb.emit(call("add", branch.var, after)))

    fb = FunctionBuilder("main")
    x = fb.param("x", F32)
    flag = fb.param("flag", BOOL)
    outer = fb.emit(call("exp", x))
    branch = fb.if_(flag, name="r")
    with branch as (then, else_):
        with then:
            then.yield_(fb.emit(call("tanh", outer)))
        with else_:
            else_.yield_(fb.emit(call("tanh", outer)))
    after = fb.emit(call("tanh", outer))
    expected = fb.finish(fb.emit(call("add", branch.var, after)))
    assert_same_ir(run_on(EliminateCommonSubexpr(), func), expected)


def test_nothing_to_share_returns_the_same_function() -> None:
    fb = FunctionBuilder("main")
    x = fb.param("x", F32)
    a = fb.emit(call("exp", x))
    func = fb.finish(fb.emit(call("add", a, x)))
    assert run_on(EliminateCommonSubexpr(), func) is func


def test_skip_optimization_function_is_untouched() -> None:
    fb = FunctionBuilder("main", attrs={"SkipOptimization": True})
    x = fb.param("x", F32)
    a, b = fb.emit(call("exp", x)), fb.emit(call("exp", x))
    func = fb.finish(fb.emit(call("add", a, b)))
    assert run_on(EliminateCommonSubexpr(), func) is func


def test_deep_ir_without_recursion_error() -> None:
    # 100,000 bindings: every other one repeats the previous call.
    x = Var(0, "x")
    bindings, prev = [], x
    for k in range(1, 100_001, 2):
        a, b = Var(k, "a"), Var(k + 1, "b")
        bindings.append(Binding(a, Call(Op("negative"), (prev,)), F32))
        bindings.append(Binding(b, Call(Op("negative"), (prev,)), F32))
        prev = b
    func = Function((Param(x, F32),), SeqExpr(tuple(bindings), prev), F32)
    out = run_on(EliminateCommonSubexpr(), func)
    assert len(out.bindings) == 50_000
    assert out.bindings[-1].value.args[0] == out.bindings[-2].var


@PROPERTY_SETTINGS
@given(seed=SEEDS)
def test_properties_on_random_modules(seed: int) -> None:
    check_function_pass(EliminateCommonSubexpr, seed)


def test_random_module_has_work_for_cse() -> None:
    before, after = check_function_pass(EliminateCommonSubexpr, 3)
    assert any(after[n] is not before[n] for n in before.names()), "nothing shared: the test proves nothing"


def test_statistics_count_eliminated_bindings() -> None:
    fb = FunctionBuilder("main")
    x = fb.param("x", F32)
    flag = fb.param("flag", BOOL)
    a1 = fb.emit(call("exp", x))
    b1 = fb.emit(call("negative", a1))
    a2 = fb.emit(call("exp", x))  # eliminated
    b2 = fb.emit(call("negative", a2))  # eliminated once a2 reads a1
    fb.emit(call("print", x))
    fb.emit(call("print", x))  # impure: kept
    branch = fb.if_(flag, name="r")
    with branch as (then, else_):
        with then:
            then.yield_(fb.emit(call("add", fb.emit(call("exp", x)), fb.emit(call("tanh", x)))))  # exp eliminated
        with else_:
            else_.yield_(fb.emit(call("tanh", x)))  # the other branch's tanh is not shared: kept
    main = fb.finish(fb.emit(fb.tuple_(b1, b2, branch.var)))
    mod = IRModule({"main": main})
    with PassContext(config={"parpass.pass_statistics": True}) as ctx:
        out = EliminateCommonSubexpr()(mod)
    assert ctx.pass_statistics.as_dict()["EliminateCommonSubexpr"] == {"eliminated": 3}
    with PassContext(config={"parpass.pass_statistics": True}) as ctx:
        assert EliminateCommonSubexpr()(out)["main"] is out["main"]
    assert ctx.pass_statistics.as_dict()["EliminateCommonSubexpr"] == {"eliminated": 0}
