"""ModulePass, FunctionPass, PrimFuncPass: semantics, read-only views, result checks, error notes."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from support import make_module, prim_func, relax_func

from parpass.errors import ReadOnlyModuleError
from parpass.ir import IRModule, relax, tir
from parpass.ir.node import BaseFunc
from parpass.testing import random_module
from parpass.transform import (
    FunctionPass,
    ModulePass,
    PassContext,
    PassInfo,
    PrimFuncPass,
    PrintIR,
    Sequential,
    function_pass,
    module_pass,
    prim_func_pass,
)
from parpass.transform.passes import NOTE_PREFIX, visited_by_default, visited_positions


def _parpass_notes(err: BaseException) -> list[str]:
    return [n for n in getattr(err, "__notes__", []) if n.startswith(NOTE_PREFIX)]


def test_function_pass_visits_functions_in_order_and_skips(mod: IRModule) -> None:
    seen: list[tuple[str, bool]] = []

    @function_pass(opt_level=1)
    def visit(func: relax.Function, m: IRModule, ctx: PassContext) -> relax.Function:
        assert isinstance(func, relax.Function)
        seen.append((len(func.bindings), m.is_read_only))
        return func.with_attr("seen", True)

    out = visit(mod)
    assert seen == [(1, True), (2, True)]  # f, g (k is a PrimFunc, skip is SkipOptimization)
    assert out.names() == mod.names()
    assert out["f"].attrs == {"seen": True} and out["g"].attrs == {"seen": True}
    assert out["k"] is mod["k"] and out["skip"] is mod["skip"]
    assert "seen" not in mod["f"].attrs  # the caller's module is unchanged


@pytest.mark.parametrize(
    "kinds", [relax.Function, tir.PrimFunc, (relax.Function,), (relax.Function, tir.PrimFunc), BaseFunc]
)
def test_the_positions_an_executor_picks_are_those_the_rule_visits(kinds: object) -> None:
    """visited_positions (a wave's targets, the class test made once per class) keeps the rule of
    visited_by_default (FunctionLevelPass.visits), SkipOptimization functions of both kinds included."""
    heads = [head[1:] for head in random_module(num_functions=40, num_prim_funcs=20, seed=5).heads()]
    heads += [(relax.Function, {"SkipOptimization": True}), (tir.PrimFunc, {"SkipOptimization": 1})]
    assert {kind for kind, _ in heads} == {relax.Function, tir.PrimFunc}
    assert any(attrs.get("SkipOptimization") for _, attrs in heads[:60])  # the generator's own too
    expected = [i for i, (kind, attrs) in enumerate(heads) if visited_by_default(kinds, kind, attrs)]  # type: ignore[arg-type]
    assert visited_positions(kinds, heads) == expected  # type: ignore[arg-type]
    assert 0 < len(expected) < len(heads) - 1


def test_targets_keep_a_pass_s_own_visit_rule() -> None:
    mod = random_module(num_functions=30, num_prim_funcs=10, seed=3)
    hot = mod.names()[3::4]
    for name in hot:
        mod[name] = mod[name].with_attr("hot", True)

    class HotOnly(FunctionPass):
        def visits(self, func_kind: type[BaseFunc], attrs: Any) -> bool:
            return bool(attrs.get("hot"))

    only_hot = HotOnly(lambda f, m, c: f, PassInfo(0, "HotOnly"))
    assert only_hot.targets(mod) == hot  # both kinds, in module order
    assert {type(mod[n]) for n in hot} == {relax.Function, tir.PrimFunc}


def test_prim_func_pass_visits_prim_funcs_only(mod: IRModule) -> None:
    seen: list[str] = []

    @prim_func_pass(opt_level=0)
    def visit(func: tir.PrimFunc, m: IRModule, ctx: PassContext) -> tir.PrimFunc:
        seen.append(type(func).__name__)
        return func

    out = visit(mod)
    assert seen == ["PrimFunc"]
    assert out is not mod and out.names() == mod.names()
    assert all(out[n] is mod[n] for n in mod.names())


def test_every_call_sees_the_module_before_the_pass(mod: IRModule) -> None:
    @function_pass(opt_level=0)
    def rename(func: relax.Function, m: IRModule, ctx: PassContext) -> relax.Function:
        # f and g both see the other without the mark, whatever order they run in.
        for name in ("f", "g"):
            assert "mark" not in m[name].attrs
        return func.with_attr("mark", 1)

    out = rename(mod)
    assert out["f"].attrs["mark"] == 1 and out["g"].attrs["mark"] == 1


def test_module_view_is_read_only_with_clear_error(mod: IRModule) -> None:
    @function_pass(opt_level=0, name="Sneaky")
    def sneaky(func: relax.Function, m: IRModule, ctx: PassContext) -> relax.Function:
        m["new"] = func
        return func

    with pytest.raises(ReadOnlyModuleError, match=r"'Sneaky'.*read-only") as info:
        sneaky(mod)
    assert _parpass_notes(info.value) == [f"{NOTE_PREFIX}'Sneaky' on function 'f'"]
    assert mod.names() == make_module().names()


@pytest.mark.parametrize("bad", [None, "text", "prim"])
def test_function_pass_result_must_be_same_kind(mod: IRModule, bad: str | None) -> None:
    prim = prim_func()

    def pass_func(func: relax.Function, m: IRModule, ctx: PassContext) -> object:
        return {"text": "text", "prim": prim}.get(bad) if bad else None  # type: ignore[arg-type]

    p = function_pass(pass_func, opt_level=0, name="Bad")
    with pytest.raises(TypeError) as info:
        p(mod)
    msg = str(info.value)
    assert "'Bad'" in msg and "'f'" in msg and "must return a Function" in msg
    assert "neither add nor delete" in msg


def test_prim_func_pass_result_must_be_prim_func(mod: IRModule) -> None:
    p = prim_func_pass(lambda f, m, c: relax_func(), opt_level=0, name="Swap")
    with pytest.raises(TypeError, match=r"'Swap' returned Function for function 'k'; it must return a PrimFunc"):
        p(mod)


def test_module_pass_gets_a_copy(mod: IRModule) -> None:
    before = mod.fingerprint()

    @module_pass(opt_level=0)
    def mutate(m: IRModule, ctx: PassContext) -> IRModule:
        assert m is not mod and not m.is_read_only
        del m["f"]
        m["h"] = relax_func(3)
        return m

    out = mutate(mod)
    assert out.names() == ["k", "g", "skip", "h"]
    assert mod.fingerprint() == before and mod.names() == ["f", "k", "g", "skip"]


def test_module_pass_must_return_module(mod: IRModule) -> None:
    p = module_pass(lambda m, c: None, opt_level=0, name="Nothing")
    with pytest.raises(
        TypeError, match="module pass 'Nothing' returned NoneType; a module pass must return an IRModule"
    ):
        p(mod)


def test_pass_requires_a_module() -> None:
    p = module_pass(lambda m, c: m, opt_level=0, name="P")
    with pytest.raises(TypeError, match="pass 'P' expects an IRModule, got dict"):
        p({})  # type: ignore[arg-type]


def test_caller_module_unchanged_when_a_pass_raises(mod: IRModule) -> None:
    snapshot = mod.fingerprint()

    @module_pass(opt_level=0)
    def half(m: IRModule, ctx: PassContext) -> IRModule:
        del m["f"]
        raise RuntimeError("boom")

    calls = []

    @function_pass(opt_level=0)
    def second_fails(func: relax.Function, m: IRModule, ctx: PassContext) -> relax.Function:
        calls.append(1)
        if len(calls) == 2:
            raise ValueError("second")
        return func.with_attr("x", 1)

    for p in (half, second_fails, Sequential([second_fails]), Sequential([Sequential([half])])):
        calls.clear()
        with pytest.raises((RuntimeError, ValueError)):
            p(mod)
        assert mod.fingerprint() == snapshot


def test_exception_keeps_type_and_gets_one_note(mod: IRModule) -> None:
    class Custom(Exception):
        pass

    @function_pass(opt_level=0, name="Explode")
    def explode(func: relax.Function, m: IRModule, ctx: PassContext) -> relax.Function:
        raise Custom("inner")

    nested = Sequential([Sequential([explode], name="in")], name="out")
    with pytest.raises(Custom) as info:
        Sequential([nested], name="top")(mod)
    assert _parpass_notes(info.value) == [f"{NOTE_PREFIX}'Explode' on function 'f'"]

    @module_pass(opt_level=0, name="ModBoom")
    def mod_boom(m: IRModule, ctx: PassContext) -> IRModule:
        raise KeyError("k")

    with pytest.raises(KeyError) as kinfo:
        Sequential([Sequential([mod_boom])])(mod)
    assert _parpass_notes(kinfo.value) == [f"{NOTE_PREFIX}'ModBoom'"]


def test_result_type_errors_of_a_nested_call_keep_the_inner_note(mod: IRModule) -> None:
    bad = function_pass(lambda f, m, c: None, opt_level=0, name="BadInner")

    @function_pass(opt_level=0, name="Caller")
    def caller(func: relax.Function, m: IRModule, ctx: PassContext) -> relax.Function:
        bad(m)
        return func

    with pytest.raises(TypeError, match="'BadInner' returned NoneType") as info:
        caller(mod)
    assert _parpass_notes(info.value) == [f"{NOTE_PREFIX}'BadInner' on function 'f'"]


def test_note_only_from_the_innermost_pass_of_nested_calls(mod: IRModule) -> None:
    @module_pass(opt_level=0, name="Inner")
    def inner(m: IRModule, ctx: PassContext) -> IRModule:
        raise ArithmeticError("deep")

    @function_pass(opt_level=0, name="Outer")
    def outer(func: relax.Function, m: IRModule, ctx: PassContext) -> relax.Function:
        inner(m)
        return func

    with pytest.raises(ArithmeticError) as info:
        Sequential([outer])(mod)
    assert _parpass_notes(info.value) == [f"{NOTE_PREFIX}'Inner'"]


def test_notes_on_python_310_without_add_note(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without BaseException.add_note (3.10) the note goes to __notes__ by hand, still only once."""
    from parpass.transform import passes

    err = ValueError("x")
    real_hasattr = hasattr
    monkeypatch.setattr(passes, "hasattr", lambda o, n: False if n == "add_note" else real_hasattr(o, n), raising=False)
    passes.attach_pass_note(err, "P", "f")
    passes.attach_pass_note(err, "Q", "g")
    assert err.__notes__ == [f"{NOTE_PREFIX}'P' on function 'f'"]


def test_nested_function_pass_call_inside_a_pass(mod: IRModule) -> None:
    @function_pass(opt_level=0, name="InnerTag")
    def inner(func: relax.Function, m: IRModule, ctx: PassContext) -> relax.Function:
        return func.with_attr("inner", True)

    @module_pass(opt_level=0, name="OuterMod")
    def outer(m: IRModule, ctx: PassContext) -> IRModule:
        return inner(m)

    @function_pass(opt_level=0, name="ReadsView")
    def reads(func: relax.Function, m: IRModule, ctx: PassContext) -> relax.Function:
        tagged = inner(m)  # a pass on the read-only view works and returns a new module
        assert not tagged.is_read_only and tagged["f"].attrs == {"inner": True}
        return func

    out = outer(mod)
    assert out["g"].attrs == {"inner": True}
    assert reads(mod)["f"] is mod["f"]


def test_direct_constructors_and_text() -> None:
    p = FunctionPass(lambda f, m, c: f, PassInfo(1, "Id"))
    assert str(p) == "Run Function pass: Id at the optimization level 1"
    assert str(PrimFuncPass(lambda f, m, c: f, PassInfo(0, "P"))).startswith("Run PrimFunc pass: P")
    assert str(ModulePass(lambda m, c: m, PassInfo(2, "M"))) == "Run Module pass: M at the optimization level 2"
    assert "The passes will be executed are: [Id]" in str(Sequential([p], name="S"))
    with pytest.raises(TypeError, match="info must be a PassInfo"):
        FunctionPass(lambda f, m, c: f, "Id")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"3 positional arguments \(func, mod, ctx\)"):
        FunctionPass(lambda f, m: f, PassInfo(1, "Two"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be callable"):
        ModulePass(3, PassInfo(1, "Three"))  # type: ignore[arg-type]


def test_targets_and_transform_one(mod: IRModule) -> None:
    p = function_pass(lambda f, m, c: f.with_attr("t", 1), opt_level=0, name="T")
    assert p.targets(mod) == ["f", "g"]
    q = prim_func_pass(lambda f, m, c: f, opt_level=0, name="Q")
    assert q.targets(mod) == ["k"]
    new = p.transform_one(mod["f"], "f", mod.read_only_view(), PassContext.current())
    assert new.attrs == {"t": 1}


@function_pass(opt_level=1, name="ModuleLevelTag")
def module_level_tag(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    return func.with_attr("tag", 1)


def test_passes_pickle(mod: IRModule) -> None:
    p = pickle.loads(pickle.dumps(PrintIR("hdr")))
    assert p.info.name == "PrintIR" and p.info.opt_level == 0
    q = pickle.loads(pickle.dumps(module_level_tag))
    assert isinstance(q, FunctionPass) and q.info == module_level_tag.info
    assert q(mod)["f"].attrs == {"tag": 1}


def test_print_ir_writes_header_and_text(mod: IRModule, capsys: pytest.CaptureFixture[str]) -> None:
    out = PrintIR("after fold")(mod)
    err = capsys.readouterr().err
    assert err.startswith("PrintIR(after fold):\n")
    assert mod.script() in err
    assert out.names() == mod.names()
    assert isinstance(PrintIR(), ModulePass)
    with pytest.raises(TypeError, match="header must be a str"):
        PrintIR(3)  # type: ignore[arg-type]
