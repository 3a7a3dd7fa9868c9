"""The printing instruments and DumpIR."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from parpass.instrument import (
    DumpIR,
    PassPrintingInstrument,
    PrintAfterAll,
    PrintAfterChange,
    PrintBeforeAll,
    PrintIRAfter,
    PrintIRBefore,
    pass_instrument,
)
from parpass.ir import IRModule, relax
from parpass.transform import PassContext, PassInfo, Sequential, function_pass, module_pass


def tagger(name: str) -> object:
    return function_pass(lambda f, m, c: f.with_attr(name, 1), opt_level=0, name=name)


def noop(name: str) -> object:
    return module_pass(lambda m, c: m, opt_level=0, name=name)


def test_print_before_and_after_all(mod: IRModule, capsys: pytest.CaptureFixture[str]) -> None:
    with PassContext(instruments=[PrintBeforeAll(), PrintAfterAll()]):
        out = tagger("T")(mod)
    text = capsys.readouterr().out
    info = 'transform.PassInfo(opt_level=0, name="T", required=(), traceable=False)'  # TVM 0.27's text
    before = f"Before Running Pass: {info}\n{mod}\n"
    after = f"After Running Pass: {info}\n{out}\n"
    assert text == before + after


def test_pass_printing_instrument_filters(mod: IRModule, capsys: pytest.CaptureFixture[str]) -> None:
    with PassContext(instruments=[PassPrintingInstrument(["A"], ["B"])]):
        Sequential([noop("A"), noop("B"), noop("C")])(mod)
    text = capsys.readouterr().out
    assert text == f"Print IR before: A\n{mod}\n\n\nPrint IR after: B\n{mod}\n\n\n"


def test_print_ir_before_after_with_and_without_filter(mod: IRModule) -> None:
    buf = io.StringIO()
    with PassContext(instruments=[PrintIRBefore(file=buf), PrintIRAfter(["B"], file=buf)]):
        Sequential([noop("A"), noop("B")], name="S")(mod)
    text = buf.getvalue()
    assert [line for line in text.splitlines() if line.startswith("Print IR")] == [
        "Print IR before: S",
        "Print IR before: A",
        "Print IR before: B",
        "Print IR after: B",
    ]
    with pytest.raises(TypeError, match="bare string"):
        PrintIRAfter("B")


def test_print_after_change(mod: IRModule) -> None:
    buf = io.StringIO()

    @function_pass(opt_level=0, name="Rebuild")
    def rebuild(func: relax.Function, m: IRModule, ctx: PassContext) -> relax.Function:
        return relax.Function(func.params, func.body, func.ret_type, attrs=dict(func.attrs))  # equal, not the same

    with PassContext(instruments=[PrintAfterChange(file=buf)]):
        out = Sequential([noop("Same"), rebuild, tagger("Tag")], name="Pipe")(mod)
    text = buf.getvalue()
    assert text == (
        f"*** IR Dump At Start ***\n{mod}\n"
        "*** IR Dump After Same omitted because no change ***\n"
        "*** IR Dump After Rebuild omitted because no change ***\n"
        f"*** IR Dump After Tag ***\n{out}\n"
        f"*** IR Dump After Pipe ***\n{out}\n"
    )


def test_printers_render_nothing_for_passes_they_skip(mod: IRModule, monkeypatch: pytest.MonkeyPatch) -> None:
    from parpass.instrument.module_text import ModuleText

    calls: list[int] = []
    original = ModuleText.text

    def counting_text(self: ModuleText, m: IRModule) -> str:
        calls.append(1)
        return original(self, m)

    monkeypatch.setattr(ModuleText, "text", counting_text)
    buf = io.StringIO()
    with PassContext(instruments=[PassPrintingInstrument([], []), PrintIRAfter(["Nope"], file=buf)]):
        Sequential([noop("A"), tagger("B")])(mod)
    assert calls == [] and buf.getvalue() == ""
    with PassContext(instruments=[PrintIRAfter(["A"], file=buf)]):
        noop("A")(mod)
    assert calls == [1]


def test_dump_ir(mod: IRModule, tmp_path: Path) -> None:
    dump = DumpIR(tmp_path / "dumps")
    with PassContext(instruments=[dump]):
        Sequential([noop("A"), tagger("B/slash")], name="Seq")(mod)
        noop("A")(mod)
    files = sorted(p.name for p in (tmp_path / "dumps").iterdir())
    assert files == ["000_A.txt", "001_B_slash.txt", "002_Seq.txt", "003_A.txt"]
    assert (tmp_path / "dumps" / "000_A.txt").read_text() == mod.script()  # the .txt format: load() reads it
    (tmp_path / "dumps" / "keep.me").write_text("x")
    DumpIR(tmp_path / "dumps", refresh=True)
    assert sorted(p.name for p in (tmp_path / "dumps").iterdir()) == ["keep.me"]


def test_dump_ir_skips_vetoed_and_failed(mod: IRModule, tmp_path: Path) -> None:
    @pass_instrument
    class VetoA:
        def should_run(self, m: IRModule, info: PassInfo) -> bool:
            return info.name != "A"

    def fail(m: IRModule, c: PassContext) -> IRModule:
        raise ValueError("no")

    dump = DumpIR(tmp_path)
    with pytest.raises(ValueError), PassContext(instruments=[VetoA(), dump]):
        noop("A")(mod)
        noop("B")(mod)
        module_pass(fail, opt_level=0, name="F")(mod)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["000_B.txt"]


def test_builtin_instruments_pickle(tmp_path: Path) -> None:
    import pickle

    from parpass.instrument import PassTimingInstrument

    for inst in (
        DumpIR(tmp_path),
        PrintAfterChange(["A"]),
        PrintBeforeAll(),
        PrintAfterAll(),
        PrintIRBefore(),
        PrintIRAfter(["B"]),
        PassPrintingInstrument(["A"], []),
        PassTimingInstrument(),
    ):
        again = pickle.loads(pickle.dumps(inst))
        assert type(again) is type(inst)
    assert pickle.loads(pickle.dumps(DumpIR(tmp_path))).dump_dir == tmp_path
