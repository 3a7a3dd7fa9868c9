"""``parpass opt --pass-statistics``, ``parpass opt --opt-bisect-limit`` and ``parpass bisect``, as users run them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from test_cli import USER_PASSES, assert_usage_error, parpass

from parpass.ir import Function, IRModule, PrimFunc, save
from parpass.testing import random_module

PARALLEL = ["--config", "parpass.parallel=always"]
#: The README's wrong pass, MiscompileOne: it breaks the PrimFunc named by $PARPASS_MISCOMPILE.
MISCOMPILE = str(Path(__file__).resolve().parents[2] / "examples" / "miscompile.py")


def _broken_target(mod: IRModule) -> tuple[str, int]:
    """A PrimFunc MiscompileOne can break (it has a global_symbol), and its place among LeaveAlone's targets."""
    targets = [n for n in mod.names() if isinstance(mod[n], PrimFunc) and not mod[n].attrs.get("SkipOptimization")]
    named = [n for n in targets if mod[n].attrs.get("global_symbol") == n]
    name = named[len(named) // 2]
    return name, targets.index(name)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bisect")
    save(random_module(60, seed=7), root / "m.msgpack")
    return root


def test_pass_statistics_are_printed_and_equal_at_1_and_2_workers(small: Path) -> None:
    reports = []
    for workers in ("1", "2"):
        proc = parpass(
            "opt", "m.msgpack", "--pass-statistics", "--workers", workers, *PARALLEL, "-o", "o.msgpack", cwd=small
        )
        assert proc.returncode == 0, proc.stderr
        reports.append(proc.stderr)
    assert reports[0] == reports[1]
    lines = reports[0].splitlines()
    assert lines[1].strip() == "... Pass statistics report ..."
    assert "FoldConstant" in lines and "DeadCodeElimination" in lines
    folded = next(line for line in lines if line.endswith("folded - calls folded into constants"))
    assert int(folded.split()[1]) > 0


def test_opt_bisect_limit_prints_and_skips_the_same_at_1_and_2_workers(small: Path) -> None:
    runs = []
    for workers in ("1", "2"):
        out = f"o{workers}.msgpack"
        args = ("opt", "m.msgpack", "--opt-bisect-limit", "150", "--workers", workers, *PARALLEL, "-o", out)
        proc = parpass(*args, cwd=small)
        assert proc.returncode == 0, proc.stderr
        runs.append((proc.stderr, (small / out).read_bytes()))
    assert runs[0] == runs[1]
    lines = runs[0][0].splitlines()
    assert lines[0].startswith("BISECT: running pass (1) InferType on function (")
    assert lines[149].startswith("BISECT: running pass (150) ")
    assert lines[150].startswith("BISECT: NOT running pass (151) ")
    assert lines[-1].endswith("RemoveUnusedFunctions on module")
    assert_usage_error(parpass("opt", "m.msgpack", "--opt-bisect-limit", "-2", cwd=small), "--opt-bisect-limit")


@pytest.mark.scale
def test_bisect_finds_the_broken_application_in_a_2000_function_module(tmp_path: Path) -> None:
    mod = random_module(2000, seed=0)
    save(mod, tmp_path / "big.msgpack")
    name, place = _broken_target(mod)
    targets = sum(1 for n in mod.names() if isinstance(mod[n], PrimFunc) and not mod[n].attrs.get("SkipOptimization"))
    proc = parpass(
        "bisect",
        "big.msgpack",
        "--load",
        USER_PASSES,
        "--load",
        MISCOMPILE,
        "-p",
        "LeaveAlone,MiscompileOne,LeaveAlone",
        "--workers",
        "2",
        cwd=tmp_path,
        env={"PARPASS_MISCOMPILE": name},
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert f"parpass bisect: {3 * targets} pass applications;" in out
    assert f"first bad application: ({targets + place + 1}) MiscompileOne on function {name!r}\n" in out
    assert f"meaning changed (seed 0): function {name!r}" in out
    before, after = out.split(f"--- function {name!r} before application")[1].split("+++")
    assert before.count("seq {") < after.count("seq {") or "+ 1" in after
    assert "parpass bisect: limit all: bad" in proc.stderr


def test_bisect_of_the_default_pipeline_with_a_check_command(small: Path) -> None:
    mod = random_module(60, seed=7)
    name, _ = _broken_target(mod)
    script = small / "check.py"
    script.write_text(
        "import sys\n"
        "from parpass.ir import load\n"
        "from parpass.testing import assert_same_meaning\n"
        f"before, after = load({str(small / 'm.msgpack')!r}), load(sys.argv[1])\n"
        f"assert_same_meaning(before, after, {name!r})\n"
    )
    spec = "InferType,FoldConstant,MiscompileOne,Simplify,DeadCodeElimination"
    check = f"{sys.executable} {script}"
    proc = parpass(
        "bisect",
        "m.msgpack",
        "--load",
        MISCOMPILE,
        "-p",
        spec,
        "--check",
        check,
        cwd=small,
        env={"PARPASS_MISCOMPILE": name},
    )
    assert proc.returncode == 0, proc.stderr
    assert f"MiscompileOne on function {name!r}\n" in proc.stdout
    assert "check: the check command exited with status 1: AssertionError: meaning changed" in proc.stdout
    # the same with the interpreter as the check, and the numbers agree with opt's
    proc2 = parpass(
        "bisect", "m.msgpack", "--load", MISCOMPILE, "-p", spec, "-q", cwd=small, env={"PARPASS_MISCOMPILE": name}
    )
    assert proc2.returncode == 0 and proc2.stderr == ""
    first = proc.stdout.splitlines()[1]
    assert first == proc2.stdout.splitlines()[1]
    number = int(first.split("(")[1].split(")")[0])
    opt = parpass(
        "opt",
        "m.msgpack",
        "--load",
        MISCOMPILE,
        "-p",
        spec,
        "--opt-bisect-limit",
        str(number),
        "-o",
        "x.msgpack",
        cwd=small,
        env={"PARPASS_MISCOMPILE": name},
    )
    assert opt.stderr.splitlines()[number - 1] == f"BISECT: running pass ({number}) MiscompileOne on function ({name})"


def test_bisect_with_nothing_to_find(small: Path) -> None:
    clean = parpass("bisect", "m.msgpack", "-p", "FoldConstant,DeadCodeElimination", "-q", cwd=small)
    assert clean.returncode == 1
    assert "the check passes with every pass applied" in clean.stdout and "nothing to find" in clean.stdout
    always_bad = parpass("bisect", "m.msgpack", "-p", "FoldConstant", "--check", "false", "-q", cwd=small)
    assert always_bad.returncode == 1
    assert "the check fails with no pass applied" in always_bad.stdout
    assert "the check command exited with status 1" in always_bad.stdout


def test_bisect_usage_errors(small: Path) -> None:
    assert_usage_error(
        parpass("bisect", "m.msgpack", "--config", "parpass.bisect_limit=3", cwd=small),
        "--config parpass.bisect_limit",
        "bisect sets it itself",
    )
    assert_usage_error(
        parpass("bisect", "m.msgpack", "--check", "true", "--check-format", "xyz", cwd=small), "--check-format xyz"
    )
    assert_usage_error(parpass("bisect", "missing.msgpack", cwd=small), "missing.msgpack")


def test_bisect_names_a_module_pass_application(small: Path) -> None:
    script = small / "untagged.py"
    script.write_text("import sys\nfrom parpass.ir import load\nsys.exit('tagged' in load(sys.argv[1]).attrs)\n")
    spec = "FoldConstant,TagModule,DeadCodeElimination"
    proc = parpass(
        "bisect",
        "m.msgpack",
        "--load",
        USER_PASSES,
        "-p",
        spec,
        "--check",
        f"{sys.executable} {script}",
        "-q",
        cwd=small,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    mod = random_module(60, seed=7)
    folded = [n for n in mod.names() if isinstance(mod[n], Function) and not mod[n].attrs.get("SkipOptimization")]
    assert lines[1] == f"first bad application: ({len(folded) + 1}) TagModule on the module"  # after FoldConstant's
    assert "the check command exited with status 1" in lines[2]
