"""Each difference from TVM that README's "Differences from TVM" lists holds, and the README lists it.

What TVM does was checked against apache-tvm 0.27.0: an identity module pass
returns its input (``same_as``); ``PassTimingInstrument.render()`` returns ""
once the context exited; a two-parameter ``relax.transform.function_pass`` is
accepted when decorated; a pass's exception reaches the caller without notes;
``{"tirx.UnrollLoop": {"auto_max_step": "x"}}`` is accepted.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from parpass.instrument import PassTimingInstrument, WellFormedInstrument
from parpass.ir import IRModule, relax
from parpass.transform import PassConfigError, PassContext, PassInfo, function_pass, module_pass, prim_func_pass

README = Path(__file__).resolve().parents[2] / "README.md"


def _section() -> str:
    text = README.read_text(encoding="utf-8")
    match = re.search(r"^## Differences from TVM\n(.*?)(?=^## )", text, re.S | re.M)
    assert match, "README has no '## Differences from TVM' section"
    return " ".join(match.group(1).split())


@pytest.mark.parametrize(
    "claim",
    [
        "A module pass returns a new module object",
        "`render()` keeps the profile after the context exits",
        "is refused when it is decorated",
        "Errors carry notes",
        "Bad struct fields are errors",
        "`WellFormedInstrument(check_ty=True)` checks the types that are there",
        "`DumpIR` writes `NNN_<pass>.txt` files in parpass's text form",
    ],
)
def test_the_readme_lists_the_difference(claim: str) -> None:
    assert claim in _section()


def test_a_module_pass_returns_a_copy_and_leaves_its_input_alone(mod: IRModule) -> None:
    @module_pass(opt_level=0, name="Identity")
    def identity(m: IRModule, ctx: PassContext) -> IRModule:
        return m

    @module_pass(opt_level=0, name="Drop")
    def drop(m: IRModule, ctx: PassContext) -> IRModule:
        del m["f"]
        return m

    out = identity(mod)
    assert out is not mod and out.names() == mod.names()
    assert all(out[name] is mod[name] for name in mod.names())  # a shallow copy: the functions are shared
    assert "f" not in drop(mod).names() and "f" in mod.names()


def test_render_keeps_the_profile_after_the_context_exits(mod: IRModule) -> None:
    tagger = function_pass(lambda f, m, c: f, opt_level=0, name="T")
    timing = PassTimingInstrument()
    with PassContext(instruments=[timing]):
        tagger(mod)
    assert timing.render().startswith("T: ")
    with PassContext(instruments=[timing]):  # a new context starts afresh
        pass
    assert timing.render() == ""


@pytest.mark.parametrize("decorator", [function_pass, prim_func_pass])
def test_a_two_parameter_function_pass_is_refused_when_decorated(decorator) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError, match=r"must accept 3 positional arguments \(func, mod, ctx\)"):
        decorator(lambda f, m: f, opt_level=0, name="Two")


def test_errors_carry_the_pass_and_function_note_serially_too(mod: IRModule) -> None:
    @function_pass(opt_level=0, name="Boom")
    def boom(f: relax.Function, m: IRModule, ctx: PassContext) -> relax.Function:
        raise ValueError("boom")

    with pytest.raises(ValueError) as info:
        boom(mod)
    assert type(info.value) is ValueError and info.value.args == ("boom",)  # the exception itself, as in TVM
    assert info.value.__notes__ == ["parpass: raised in pass 'Boom' on function 'f'"]


def test_a_bad_struct_field_is_an_error(mod: IRModule) -> None:
    with pytest.raises(PassConfigError, match="'auto_max_step' expects int"):
        PassContext(config={"tir.UnrollLoop": {"auto_max_step": "x"}})


def test_well_formed_instrument_does_not_require_types(mod: IRModule) -> None:
    untyped = mod["f"]
    assert all(b.ty is None for b in untyped.bindings)  # type: ignore[attr-defined]
    WellFormedInstrument(check_ty=True).run_after_pass(mod, PassInfo(0, "P"))  # raises nothing


def test_dump_ir_writes_text_files_that_load_back(mod: IRModule, tmp_path: Path) -> None:
    from parpass.instrument import DumpIR
    from parpass.ir import load

    @module_pass(opt_level=0, name="Identity")
    def identity(m: IRModule, ctx: PassContext) -> IRModule:
        return m

    with PassContext(instruments=[DumpIR(tmp_path)]):
        out = identity(mod)
    dumps = sorted(tmp_path.iterdir())
    assert [p.name for p in dumps] == ["000_Identity.txt"]
    assert load(dumps[0]).script() == out.script()
