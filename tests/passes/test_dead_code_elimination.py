"""DeadCodeElimination: exact results on hand-written functions, and the pass properties on random modules."""

from __future__ import annotations

from hypothesis import given
from passes_support import F32, PROPERTY_SETTINGS, SEEDS, assert_same_ir, check_function_pass, run_on

from parpass.ir import Binding, Call, Function, GlobalVar, IRModule, Op, Param, PrimType, SeqExpr, Var
from parpass.ir.builder import FunctionBuilder, PrimFuncBuilder, call, const
from parpass.passes import DeadCodeElimination
from parpass.transform import PassContext

BOOL = PrimType("bool")


def helper(name: str, op: str) -> Function:
    """``p -> op(p)``."""
    fb = FunctionBuilder(name)
    p = fb.param("p", F32)
    return fb.finish(fb.emit(call(op, p)))


def test_unused_chains_go_and_effects_stay() -> None:
    fb = FunctionBuilder("main")
    x = fb.param("x", F32)
    a = fb.emit(call("exp", x))
    fb.emit(call("negative", a))  # dead, and makes `a` dead
    shown = fb.emit(call("add", x, x))
    fb.emit(call("print", shown))  # unused but stateful: stays, and keeps `shown`
    fb.emit(call("random_uniform", shape=[4]))  # stateful
    fb.emit(x)  # a dead copy
    fb.emit(const(1.0, "float32"))
    func = fb.finish(fb.emit(call("tanh", x)))

    fb = FunctionBuilder("main")
    x = fb.param("x", F32)
    shown = fb.emit(call("add", x, x))
    fb.emit(call("print", shown))
    fb.emit(call("random_uniform", shape=[4]))
    expected = fb.finish(fb.emit(call("tanh", x)))
    out = run_on(DeadCodeElimination(), func)
    assert_same_ir(out, expected)
    assert run_on(DeadCodeElimination(), out) is out


def test_if_blocks() -> None:
    fb = FunctionBuilder("main")
    x = fb.param("x", F32)
    flag = fb.param("flag", BOOL)
    used_only_in_branch = fb.emit(call("exp", x))
    unused = fb.if_(flag, name="unused")  # pure and unused: goes
    with unused as (then, else_):
        with then:
            then.yield_(fb.emit(call("tanh", x)))
        with else_:
            else_.yield_(x)
    noisy = fb.if_(flag, name="noisy")  # unused but prints: stays, its dead bindings go
    with noisy as (then, else_):
        with then:
            fb.emit(call("negative", x))  # dead inside the branch
            then.yield_(fb.emit(call("print", used_only_in_branch)))
        with else_:
            else_.yield_(x)
    func = fb.finish(fb.emit(call("abs", x)))

    fb = FunctionBuilder("main")
    x = fb.param("x", F32)
    flag = fb.param("flag", BOOL)
    used_only_in_branch = fb.emit(call("exp", x))
    noisy = fb.if_(flag, name="noisy")
    with noisy as (then, else_):
        with then:
            then.yield_(fb.emit(call("print", used_only_in_branch)))
        with else_:
            else_.yield_(x)
    expected = fb.finish(fb.emit(call("abs", x)))
    assert_same_ir(run_on(DeadCodeElimination(), func), expected)


def test_calls_of_module_functions_follow_the_callee_purity() -> None:
    pb = PrimFuncBuilder("kernel")
    a = pb.buffer("A", (4,), "float32")
    b = pb.buffer("B", (4,), "float32")
    with pb.for_range("i", 4) as i:
        pb.store(b, (i,), a[i] * 2.0)
    kernel = pb.finish()

    rec = FunctionBuilder("rec")  # recursive: might not terminate, so a call of it stays
    p = rec.param("p", F32)
    recursive = rec.finish(rec.emit(call(GlobalVar("rec"), p)))

    outer = FunctionBuilder("outer")  # pure only if everything it calls is
    q = outer.param("q", F32)
    calls_noisy = outer.finish(outer.emit(call(GlobalVar("noisy"), q)))

    fb = FunctionBuilder("main")
    x = fb.param("x", F32)
    fb.emit(call(GlobalVar("pure"), x), name="drop1")
    fb.emit(call(GlobalVar("kernel"), x), name="drop2")
    keep1 = fb.emit(call(GlobalVar("noisy"), x), name="keep1")
    keep2 = fb.emit(call(GlobalVar("rec"), x), name="keep2")
    keep3 = fb.emit(call(GlobalVar("outer"), x), name="keep3")
    func = fb.finish(x)
    others = {
        "pure": helper("pure", "exp"),
        "noisy": helper("noisy", "print"),
        "kernel": kernel,
        "rec": recursive,
        "outer": calls_noisy,
    }
    out = run_on(DeadCodeElimination(), func, **others)
    assert [b.var for b in out.bindings] == [keep1, keep2, keep3]


def test_nothing_to_remove_returns_the_same_function() -> None:
    fb = FunctionBuilder("main")
    x = fb.param("x", F32)
    a = fb.emit(call("exp", x))
    fb.emit(call("print", a))
    func = fb.finish(fb.emit(call("add", a, x)))
    assert run_on(DeadCodeElimination(), func) is func


def test_skip_optimization_function_is_untouched() -> None:
    fb = FunctionBuilder("main", attrs={"SkipOptimization": True})
    x = fb.param("x", F32)
    fb.emit(call("exp", x))
    func = fb.finish(x)
    assert run_on(DeadCodeElimination(), func) is func


def test_deep_ir_without_recursion_error() -> None:
    # A 100,000-binding chain nobody uses goes in one run; a used one stays untouched.
    x = Var(0, "x")
    bindings, prev = [], x
    for k in range(1, 100_001):
        v = Var(k, "v")
        bindings.append(Binding(v, Call(Op("negative"), (prev,)), F32))
        prev = v
    dead = Function((Param(x, F32),), SeqExpr(tuple(bindings), x), F32)
    assert run_on(DeadCodeElimination(), dead).bindings == ()
    live = Function((Param(x, F32),), SeqExpr(tuple(bindings), prev), F32)
    assert run_on(DeadCodeElimination(), live) is live


@PROPERTY_SETTINGS
@given(seed=SEEDS)
def test_properties_on_random_modules(seed: int) -> None:
    check_function_pass(DeadCodeElimination, seed)


def test_random_module_has_work_for_dce() -> None:
    before, after = check_function_pass(DeadCodeElimination, 3)
    assert any(after[n] is not before[n] for n in before.names()), "nothing removed: the test proves nothing"


def test_statistics_count_removed_bindings() -> None:
    fb = FunctionBuilder("main")
    x = fb.param("x", F32)
    flag = fb.param("flag", BOOL)
    a = fb.emit(call("exp", x))  # dead once `b` goes
    fb.emit(call("negative", a))  # dead
    fb.emit(x)  # a dead copy
    unused = fb.if_(flag, name="unused")  # pure and unused: one binding removed, whatever its blocks hold
    with unused as (then, else_):
        with then:
            then.yield_(fb.emit(call("tanh", fb.emit(call("exp", x)))))
        with else_:
            else_.yield_(x)
    fb.emit(call("print", x))  # unused but stateful: stays
    main = fb.finish(fb.emit(call("abs", x)))
    mod = IRModule({"main": main, "helper": helper("helper", "tanh")})  # nothing to remove in helper
    with PassContext(config={"parpass.pass_statistics": True}) as ctx:
        out = DeadCodeElimination()(mod)
    assert ctx.pass_statistics.as_dict()["DeadCodeElimination"] == {"removed": 4}
    with PassContext(config={"parpass.pass_statistics": True}) as ctx:
        again = DeadCodeElimination()(out)
    assert all(again[name] is out[name] for name in out.names())
    assert ctx.pass_statistics.as_dict()["DeadCodeElimination"] == {"removed": 0}
