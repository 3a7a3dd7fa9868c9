"""The ``parpass`` command, run as a user runs it: a subprocess per invocation.

Each command and each error path runs at least once as a subprocess: exit
status (0 success, 1 a failed pass, 2 a usage error), the one-line
``parpass: error: ...`` message on stderr, and no traceback unless
``--traceback`` is given. Variants of an error path already exercised as a
subprocess call :func:`parpass.cli.main.main` in this process (same code,
without a second of interpreter start-up each). Modules are small.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import parpass.passes  # registers the standard passes in this process too
from parpass.cli.main import main
from parpass.ir import IRModule, load, save, to_bytes
from parpass.ir.printer import astext
from parpass.parallel import usable_cores
from parpass.testing import random_module
from parpass.transform import PassContext, parse_pipeline

USER_PASSES = str(Path(__file__).with_name("cli_user_passes.py"))
SPEC = "InferType,FoldConstant,DeadCodeElimination"

#: A row of ``--time-passes``'s report: wall (%), CPU (%), the name indented two spaces per level.
REPORT_ROW = re.compile(r"^ +(\d+\.\d{4}) \( *\d+\.\d%\) +(\d+\.\d{4}) \( *\d+\.\d%\)  (?P<name> *\S+)$", re.M)


def report_rows(text: str) -> list[str]:
    """The names of the rows of a ``--time-passes`` report, indented as printed."""
    return [m["name"] for m in REPORT_ROW.finditer(text)]


def parpass(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m parpass ARGS`` in ``cwd``; output captured as text."""
    full_env = dict(os.environ)
    full_env.pop("CLI_TEST_FAIL", None)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "parpass", *args], cwd=cwd, env=full_env, capture_output=True, text=True, check=False
    )


class Result:
    """What an in-process ``main(argv)`` call returned and printed (shaped like a CompletedProcess)."""

    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


@pytest.fixture
def run_main(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """``run_main(*args, cwd=...)``: ``main(args)`` in this process, in ``cwd``."""

    def call(*args: str, cwd: Path) -> Result:
        monkeypatch.chdir(cwd)
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return call


def assert_usage_error(proc: subprocess.CompletedProcess[str] | Result, *fragments: str) -> str:
    """Exit status 2, one error line first on stderr holding ``fragments``, no traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    first = proc.stderr.splitlines()[0]
    assert first.startswith("parpass: error: "), proc.stderr
    for fragment in fragments:
        assert fragment in first, (fragment, proc.stderr)
    assert "Traceback" not in proc.stderr
    return first


def in_process(spec: str, mod: IRModule) -> bytes:
    with PassContext(config={"parpass.num_workers": 1}):
        return to_bytes(parse_pipeline(spec)(mod))


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with small module files, a truncated one, a non-IR one and an empty one."""
    root = tmp_path_factory.mktemp("cli")
    mod = random_module(12, seed=3)
    save(mod, root / "m.msgpack")
    save(mod, root / "m.json")
    data = (root / "m.msgpack").read_bytes()
    (root / "truncated.msgpack").write_bytes(data[: len(data) // 2])
    (root / "garbage.msgpack").write_bytes(b"\x93\x01\x02\x03 this is not parpass IR")
    (root / "empty.json").write_bytes(b"")
    return root


# ---------------------------------------------------------------------------------------------------------------------
# the command itself


def test_console_script(tmp_path: Path) -> None:
    exe = shutil.which("parpass")
    if exe is None:
        pytest.skip("the parpass console script is not on PATH (the package is not installed)")
    proc = subprocess.run([exe, "gen", "-o", "s.msgpack", "--functions", "3"], cwd=tmp_path, capture_output=True)
    assert proc.returncode == 0, proc.stderr
    assert to_bytes(load(tmp_path / "s.msgpack")) == to_bytes(random_module(3))


@pytest.mark.parametrize("command", [None, "bench", "opt", "bisect", "gen", "show", "passes", "reproduce"])
def test_every_command_has_help(command: str | None, run_main, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    result = run_main(*([command, "--help"] if command else ["--help"]), cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout.startswith(f"usage: parpass{' ' + command if command else ''}")
    if command:
        assert "--traceback" in result.stdout and "--load" in result.stdout and "example" in result.stdout


def test_help_and_usage_errors(tmp_path: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    helped = parpass("opt", "--help", cwd=tmp_path)
    assert helped.returncode == 0 and "--print-ir-after-change" in helped.stdout
    assert_usage_error(parpass("frobnicate", cwd=tmp_path), "invalid choice: 'frobnicate'")
    assert_usage_error(run_main(cwd=tmp_path), "no command given", "bench")
    assert_usage_error(run_main("gen", "--functions", "-3", cwd=tmp_path), "--functions", "non-negative")
    assert_usage_error(run_main("opt", cwd=tmp_path), "required: INPUT")
    assert run_main("--version", cwd=tmp_path).stdout.startswith("parpass ")


# ---------------------------------------------------------------------------------------------------------------------
# gen and show


def test_gen_then_show(tmp_path: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    proc = parpass("gen", "-o", "g.msgpack", "--functions", "6", "--prim-funcs", "2", "--seed", "4", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == ""
    expected = random_module(6, 2, seed=4)
    assert to_bytes(load(tmp_path / "g.msgpack")) == to_bytes(expected)
    shown = parpass("show", "g.msgpack", cwd=tmp_path)
    assert shown.returncode == 0
    assert shown.stdout == astext(expected).rstrip("\n") + "\n"
    one = run_main("show", "g.msgpack", "-f", "main", cwd=tmp_path)
    assert one.returncode == 0 and one.stdout == astext(expected["main"], name="main").rstrip("\n") + "\n"
    unknown = run_main("show", "g.msgpack", "-f", "mian", cwd=tmp_path)
    assert_usage_error(unknown, "g.msgpack: no function named 'mian'", "closest: 'main'")


def test_gen_formats(tmp_path: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    text = run_main("gen", "--functions", "2", "--size", "3", cwd=tmp_path)
    assert text.returncode == 0 and text.stdout == astext(random_module(2, size=3)).rstrip("\n") + "\n"
    assert run_main("gen", "-o", "g.json", "--functions", "2", cwd=tmp_path).returncode == 0
    assert to_bytes(load(tmp_path / "g.json")) == to_bytes(random_module(2))
    assert run_main("gen", "-o", "g.txt", "--functions", "2", cwd=tmp_path).returncode == 0
    assert (tmp_path / "g.txt").read_text() == astext(random_module(2)).rstrip("\n") + "\n"
    assert_usage_error(run_main("gen", "-o", "g.docx", cwd=tmp_path), "g.docx", "unsupported output format")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.json", "g.txt"]  # no temporary file left behind


def test_show_missing_and_truncated_files(files: Path) -> None:
    assert_usage_error(parpass("show", "missing.msgpack", cwd=files), "missing.msgpack: no such file")
    assert_usage_error(parpass("show", "truncated.msgpack", cwd=files), "truncated.msgpack", "truncated")


@pytest.mark.parametrize(
    ("name", "fragments"),
    [
        ("garbage.msgpack", ["garbage.msgpack"]),
        ("empty.json", ["empty.json"]),
        (".", ["is a directory"]),
        ("m.zip", ["m.zip", "unsupported file format"]),
    ],
)
def test_show_bad_files(files: Path, name: str, fragments: list[str], run_main) -> None:  # type: ignore[no-untyped-def]
    if name == "m.zip":
        (files / "m.zip").write_bytes(b"PK")
    assert_usage_error(run_main("show", name, cwd=files), *fragments)


def test_text_format_files(tmp_path: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    mod = random_module(5, seed=2)
    made = parpass("gen", "-o", "m.ppir", "--functions", "5", "--seed", "2", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "m.ppir").read_text() == astext(mod).rstrip("\n") + "\n"
    optimized = run_main("opt", "m.ppir", "-p", SPEC, "-o", "o.msgpack", cwd=tmp_path)
    assert optimized.returncode == 0, optimized.stderr
    # The text gives structurally equal IR (fresh variable ids): compare with the pipeline run on the parsed file.
    assert to_bytes(load(tmp_path / "o.msgpack")) == in_process(SPEC, load(tmp_path / "m.ppir"))  # type: ignore[arg-type]
    (tmp_path / "bad.ppir").write_text('@main = function(%x: Tensor((4,), "float32")) {\n  return %y\n}\n')
    bad = parpass("show", "bad.ppir", cwd=tmp_path)
    assert_usage_error(bad, "bad.ppir:2:10: undefined variable %y")  # the file, line and column
    assert bad.stderr.splitlines()[1:] == ["  return %y", "         ^"]  # the line, and a caret under the column


# ---------------------------------------------------------------------------------------------------------------------
# opt


def test_opt_writes_what_the_pipeline_computes(files: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.msgpack"
    proc = parpass("opt", str(files / "m.msgpack"), "-p", SPEC, "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and proc.stderr == ""
    expected = in_process(SPEC, load(files / "m.msgpack"))  # type: ignore[arg-type]
    assert to_bytes(load(out)) == expected
    assert [p.name for p in tmp_path.iterdir()] == ["out.msgpack"]  # no temporary file left behind


def test_opt_text_to_stdout_from_json_input_with_workers(files: Path) -> None:
    proc = parpass("opt", "m.json", "-p", SPEC, "--workers", "2", "--config", "parpass.parallel=always", cwd=files)
    assert proc.returncode == 0, proc.stderr
    from parpass.ir.serialization import from_bytes

    expected = from_bytes(in_process(SPEC, load(files / "m.json")))  # type: ignore[arg-type]
    assert proc.stdout == astext(expected).rstrip("\n") + "\n"


def test_opt_unknown_pass(files: Path) -> None:
    proc = parpass("opt", "m.msgpack", "-p", "InferType,FoldConstnt", cwd=files)
    first = assert_usage_error(proc, "column 11", "unknown pass 'FoldConstnt'", "closest: 'FoldConstant'")
    assert first.startswith("parpass: error: pipeline spec, column 11:")
    lines = proc.stderr.splitlines()
    assert lines[1] == "  InferType,FoldConstnt" and lines[2] == "  " + " " * 10 + "^"


def test_opt_bad_pass_options(files: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    wrong = parpass("opt", "m.msgpack", "-p", "TagModule{count=two}", "--load", USER_PASSES, cwd=files)
    assert_usage_error(wrong, "column 17", "option 'count' of pass 'TagModule' expects int, got str two")
    unknown = run_main("opt", "m.msgpack", "-p", "TagModule{cout=2}", "--load", USER_PASSES, cwd=files)
    assert_usage_error(unknown, "has no option 'cout'", "closest: 'count'")
    no_options = run_main("opt", "m.msgpack", "-p", "FoldConstant{level=1}", cwd=files)
    assert_usage_error(no_options, "pass 'FoldConstant' takes no options")


def test_opt_user_pass_with_options(files: Path, tmp_path: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    spec = "TagModule{tag=seen count=7},FoldConstant"
    result = run_main("opt", str(files / "m.msgpack"), "-p", spec, "--load", USER_PASSES, "-o", "o.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = load(tmp_path / "o.json")
    assert isinstance(out, IRModule) and out.attrs["seen"] == 7


def test_opt_bad_config(files: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    wrong_type = parpass("opt", "m.msgpack", "-p", SPEC, "--config", "parpass.num_workers=two", cwd=files)
    assert_usage_error(wrong_type, "--config parpass.num_workers=two", "expects int", "str 'two'")
    struct = run_main("opt", "m.msgpack", "-p", SPEC, "--config", 'tir.UnrollLoop={"auto_max_step": "x"}', cwd=files)
    assert_usage_error(struct, "tir.UnrollLoop", "auto_max_step")
    unknown = run_main("opt", "m.msgpack", "-p", SPEC, "--config", "parpass.num_worker=2", cwd=files)
    assert_usage_error(unknown, "no config option named 'parpass.num_worker'", "'parpass.num_workers'")
    no_value = run_main("opt", "m.msgpack", "-p", SPEC, "--config", "parpass.timeout", cwd=files)
    assert_usage_error(no_value, "expected KEY=VALUE")
    assert run_main("opt", "m.msgpack", "-p", SPEC, "--config", "parpass.parallel=never", cwd=files).returncode == 0


def test_opt_unknown_pass_names_in_options(files: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    proc = run_main("opt", "m.msgpack", "-p", SPEC, "--disabled-pass", "FoldConstant,DeadCode", cwd=files)
    assert_usage_error(proc, "--disabled-pass: unknown pass 'DeadCode'", "'DeadCodeElimination'")
    proc = run_main("opt", "m.msgpack", "-p", SPEC, "--print-ir-after", "Inferr", cwd=files)
    assert_usage_error(proc, "--print-ir-after: unknown pass 'Inferr'", "'InferType'")


def test_opt_unreadable_inputs_and_outputs(files: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    assert_usage_error(run_main("opt", "nope.msgpack", "-p", SPEC, cwd=files), "nope.msgpack: no such file")
    assert_usage_error(run_main("opt", "truncated.msgpack", "-p", SPEC, cwd=files), "truncated.msgpack", "truncated")
    bad_dir = run_main("opt", "m.msgpack", "-p", SPEC, "-o", "no/such/dir/o.msgpack", cwd=files)
    assert_usage_error(bad_dir, "no/such/dir")
    bad_ext = run_main("opt", "m.msgpack", "-p", SPEC, "-o", "o.exe", cwd=files)
    assert_usage_error(bad_ext, "o.exe", "unsupported output format")


def test_opt_checks_a_big_input_in_its_workers_with_the_same_errors(tmp_path: Path, run_main, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from parpass.ir import from_bytes
    from parpass.parallel import default_executor, preload

    monkeypatch.setattr(preload, "CHECK_IN_WORKERS_BYTES", 0)  # every file is big
    mod = random_module(8, seed=2)
    save(mod, tmp_path / "m.msgpack")
    default_executor.forget()
    always = ("--config", "parpass.parallel=always")
    ok = run_main("opt", "m.msgpack", "-p", SPEC, "--workers", "2", *always, "-o", "o.msgpack", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert default_executor.history[0].passes == ("CheckDecodes",) and default_executor.history[0].parallel
    assert to_bytes(load(tmp_path / "o.msgpack")) == in_process(SPEC, mod)
    lazy = from_bytes(to_bytes(mod), validate=False)
    assert isinstance(lazy, IRModule)
    last = lazy.names()[-1]
    lazy.set_encoded_function(last, lazy.encoded_function(last).replace(b"Binding", b"Bindinx", 1))
    (tmp_path / "bad.msgpack").write_bytes(to_bytes(lazy))
    errors = [run_main("opt", "bad.msgpack", "-p", SPEC, "--workers", n, *always, cwd=tmp_path) for n in ("1", "2")]
    assert_usage_error(errors[0], "bad.msgpack", f"@{last}", "Bindinx")
    assert vars(errors[1]) == vars(errors[0])


def test_opt_failing_pass(files: Path, tmp_path: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "out.msgpack").write_bytes(b"previous content")
    args = ["opt", str(files / "m.msgpack"), "-p", "InferType,FailOnMain", "--load", USER_PASSES, "-o", "out.msgpack"]
    proc = parpass(*args, "--reproducer", "repro.bin", "--workers", "1", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    assert "parpass: error: pass 'FailOnMain' failed on function 'main': ValueError: boom on main" in lines
    assert "Traceback" not in proc.stderr
    assert (tmp_path / "out.msgpack").read_bytes() == b"previous content"  # the output was not touched
    assert (tmp_path / "repro.bin").exists() and "wrote the reproducer repro.bin" in proc.stderr

    again = parpass("reproduce", "repro.bin", "--load", USER_PASSES, cwd=tmp_path)
    assert again.returncode == 1, again.stderr
    assert "passes:    FailOnMain" in again.stdout and "functions: main" in again.stdout
    assert "reproduced: pass 'FailOnMain' failed on function 'main': ValueError: boom on main" in again.stdout

    traced = run_main(*args, "--workers", "1", "--traceback", cwd=tmp_path)
    assert traced.returncode == 1
    assert "Traceback (most recent call last)" in traced.stderr and "boom on main" in traced.stderr
    assert traced.stderr.splitlines()[-1].startswith("parpass: error: pass 'FailOnMain' failed on function 'main'")


def test_worker_crash_is_reported_and_reproduced(files: Path, tmp_path: Path) -> None:
    proc = parpass(
        "opt",
        str(files / "m.msgpack"),
        "-p",
        "CrashOnMain",
        "--load",
        USER_PASSES,
        "--workers",
        "2",  # on a small module 'auto' would run in-process: --reproducer ships the passes to workers
        "--reproducer",
        "crash.repro",
        cwd=tmp_path,
    )
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    error = [line for line in proc.stderr.splitlines() if line.startswith("parpass: error:")]
    assert len(error) == 1 and "worker process died" in error[0] and "'CrashOnMain'" in error[0]
    assert "'main'" in error[0]
    assert (tmp_path / "crash.repro").exists()

    again = parpass("reproduce", "crash.repro", "--load", USER_PASSES, cwd=tmp_path)
    assert again.returncode == 1, again.stderr
    assert "reproduced: the process running the passes exited with status 3" in again.stdout
    assert "functions: main" in again.stdout

    without_load = parpass("reproduce", "crash.repro", cwd=tmp_path)
    assert_usage_error(without_load, "crash.repro", "No module named 'cli_user_passes'", "--load")


def test_reproducer_that_no_longer_fails(files: Path, tmp_path: Path) -> None:
    args = ["opt", str(files / "m.msgpack"), "-p", "FailIfEnv", "--load", USER_PASSES, "--reproducer", "r.bin"]
    proc = parpass(*args, cwd=tmp_path, env={"CLI_TEST_FAIL": "1"})
    assert proc.returncode == 1 and "failing because CLI_TEST_FAIL=1" in proc.stderr
    fixed = parpass("reproduce", "r.bin", "--load", USER_PASSES, cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stderr
    assert "not reproduced" in fixed.stdout


def test_module_pass_failure_reproducer(files: Path, tmp_path: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    spec = "TagModule{tag=t},FailModule"
    args = ["opt", str(files / "m.msgpack"), "-p", spec, "--load", USER_PASSES, "--reproducer", "mp.bin"]
    failed = run_main(*args, cwd=tmp_path)
    assert failed.returncode == 1
    assert "parpass: error: pass 'FailModule' failed: KeyError: 'no such thing'" in failed.stderr.splitlines()
    again = run_main("reproduce", "mp.bin", "--in-process", "--load", USER_PASSES, cwd=tmp_path)
    assert again.returncode == 1, again.stderr
    assert "reproduced: pass 'FailModule' failed: KeyError: 'no such thing'" in again.stdout
    from parpass.parallel import load_reproducer

    repro = load_reproducer(str(tmp_path / "mp.bin"))
    assert [p.info.name for p in repro.passes] == ["FailModule"]  # just the failing pass,
    assert repro.module.attrs["t"] == 1  # on the module it was given (after TagModule)


def test_reproduce_bad_files(files: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    assert_usage_error(parpass("reproduce", "m.msgpack", cwd=files), "m.msgpack", "not a parpass reproducer")
    assert_usage_error(run_main("reproduce", "gone.repro", cwd=files), "gone.repro: no such file")


def test_opt_instruments(files: Path, tmp_path: Path) -> None:
    proc = parpass(
        "opt",
        str(files / "m.msgpack"),
        "-p",
        SPEC,
        "-o",
        "o.msgpack",
        "--time-passes",
        "--print-ir-before=InferType",
        "--print-ir-after=FoldConstant",
        "--print-ir-after-change",
        "--dump-ir",
        "dumps",
        "--disabled-pass",
        "DeadCodeElimination",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr
    assert "Print IR before: InferType" in err and "Print IR after: FoldConstant" in err
    assert "Print IR after: InferType" not in err
    assert "*** IR Dump At Start ***" in err and "*** IR Dump After FoldConstant" in err
    assert "Pass execution timing report" in err and "summed over the processes that ran it" in err
    assert report_rows(err) == ["sequential", "  InferType", "  FoldConstant", "Total"]
    assert "DeadCodeElimination" not in err  # disabled
    dumps = sorted(p.name for p in (tmp_path / "dumps").iterdir())
    assert dumps == ["000_InferType.txt", "001_FoldConstant.txt", "002_sequential.txt"]
    assert proc.stdout == ""


def test_opt_print_ir_after_all_and_levels(files: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    every = run_main("opt", "m.msgpack", "-p", "InferType,FoldConstant", "--print-ir-after-all", cwd=files)
    assert every.returncode == 0
    assert "Print IR after: InferType" in every.stderr and "Print IR after: FoldConstant" in every.stderr
    # FoldConstant has opt_level 2: at -O1 it is skipped unless required.
    skipped = run_main("opt", "m.msgpack", "-p", "FoldConstant", "-O", "1", "--time-passes", cwd=files)
    assert skipped.returncode == 0 and "FoldConstant" not in skipped.stderr
    required = run_main(
        "opt",
        "m.msgpack",
        "-p",
        "FoldConstant",
        "-O",
        "1",
        "--required-pass",
        "FoldConstant",
        "--time-passes",
        cwd=files,
    )
    assert required.returncode == 0 and report_rows(required.stderr) == ["sequential", "  FoldConstant", "Total"]


def test_opt_time_passes_runs_fused_and_reports_wall_and_cpu(files: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    """The timing instrument reads no module: on workers the pipeline still runs fused (cut only before a
    pass that reads other functions), the output is the same, and every pass has a wall and a CPU figure."""
    from parpass.parallel import default_executor

    default_executor.forget()
    args = ["opt", "m.msgpack", "-p", SPEC, "--workers", "2", "--config", "parpass.parallel=always"]
    timed = run_main(*args, "-o", "timed.msgpack", "--time-passes", cwd=files)
    assert timed.returncode == 0, timed.stderr
    waves = list(default_executor.history)
    # fused, but for the cut before DeadCodeElimination, which reads its callees (reads_other_functions)
    assert SPEC == "InferType,FoldConstant,DeadCodeElimination"
    assert [(w.passes, w.parallel) for w in waves] == [
        (("InferType", "FoldConstant"), True),
        (("DeadCodeElimination",), True),
    ]
    plain = run_main(*args, "-o", "plain.msgpack", cwd=files)
    assert plain.returncode == 0 and plain.stderr == ""
    assert (files / "timed.msgpack").read_bytes() == (files / "plain.msgpack").read_bytes()
    rows = {m["name"].strip(): (float(m[1]), float(m[2])) for m in REPORT_ROW.finditer(timed.stderr)}
    assert list(rows) == ["sequential", *SPEC.split(","), "Total"]
    assert all(wall > 0 for wall, _ in rows.values())
    assert "Total Execution Time: " in timed.stderr


def test_opt_verify_each_checks_every_pass_on_the_workers(files: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    """The instrument reads the module: pass by pass, each pass's wave followed by the check of what it
    changed, both on the workers; the output is the one of a run without it."""
    from parpass.parallel import default_executor

    default_executor.forget()
    args = ["opt", "m.msgpack", "-p", SPEC, "--workers", "2", "--config", "parpass.parallel=always"]
    verified = run_main(*args, "--verify-each", "-o", "verified.msgpack", cwd=files)
    assert verified.returncode == 0 and verified.stderr == ""
    waves = [(w.passes, w.parallel) for w in default_executor.history]
    check = ("WellFormedCheck",)
    assert waves[0] == (check, True)  # the module given to the first pass: every function
    assert [passes for passes, _ in waves if passes != check] == [(name,) for name in SPEC.split(",")]
    assert all(parallel for _, parallel in waves)
    plain = run_main(*args, "-o", "plain.msgpack", cwd=files)
    assert plain.returncode == 0
    assert (files / "verified.msgpack").read_bytes() == (files / "plain.msgpack").read_bytes()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_opt_verify_each_stops_at_ill_formed_ir(tmp_path: Path, run_main, workers: str) -> None:  # type: ignore[no-untyped-def]
    from parpass.ir import relax

    mod = random_module(12, seed=3)
    victim = next(name for name in mod.names() if isinstance(mod[name], relax.Function))
    mod[victim] = mod[victim].with_body(relax.SeqExpr(mod[victim].bindings, relax.Var(9999, "ghost")))
    save(mod, tmp_path / "bad.msgpack")
    args = ["opt", "bad.msgpack", "-p", SPEC, "--workers", workers, "-o", "out.msgpack"]
    proc = run_main(*args, "--verify-each", cwd=tmp_path)
    assert proc.returncode == 1
    first = proc.stderr.splitlines()[0]
    assert first.startswith("parpass: error: ") and "ill-formed IR before pass 'sequential'" in first
    assert f"function {victim!r}, result expression: %ghost (vid 9999) is used before it is defined" in proc.stderr
    assert not (tmp_path / "out.msgpack").exists()


def test_opt_default_pipeline(files: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    from parpass.passes import default_pipeline

    result = run_main("opt", "m.msgpack", "-O", "1", "-o", "default.msgpack", cwd=files)
    assert result.returncode == 0, result.stderr
    with PassContext(opt_level=1, config={"parpass.num_workers": 1}):
        expected = to_bytes(default_pipeline(1)(load(files / "m.msgpack")))  # type: ignore[arg-type]
    assert to_bytes(load(files / "default.msgpack")) == expected


def test_load_errors(tmp_path: Path, files: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "broken_passes.py").write_text("raise RuntimeError('cannot import me')\n")
    broken = parpass("opt", str(files / "m.msgpack"), "-p", SPEC, "--load", "broken_passes.py", cwd=tmp_path)
    assert_usage_error(broken, "--load broken_passes.py", "RuntimeError: cannot import me")
    missing = run_main("opt", str(files / "m.msgpack"), "-p", SPEC, "--load", "nothere.py", cwd=tmp_path)
    assert_usage_error(missing, "--load nothere.py: no such file")
    module = run_main("opt", str(files / "m.msgpack"), "-p", SPEC, "--load", "no_such_module_xyz", cwd=tmp_path)
    assert_usage_error(module, "--load no_such_module_xyz: no such file or importable module")


# ---------------------------------------------------------------------------------------------------------------------
# bench


def test_bench_tiny_with_json(tmp_path: Path) -> None:
    proc = parpass("bench", "--functions", "30", "--repeat", "1", "--json", "b.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # no progress bar when stderr is not a terminal
    out = proc.stdout
    from parpass.passes import PIPELINE_PASSES

    for name in PIPELINE_PASSES:
        assert f"\n{name} " in out, name
    assert (
        "\ntotal, pass by pass " in out
        and "\ntotal, fused, timing instrument " in out
        and "\ntotal, fused (no instruments) " in out
        and "speedup" in out
        and "efficiency" in out
    )
    assert (
        "parent overhead per function" in out
        and "outputs byte-identical to the in-process run, pass statistics equal: yes (6 runs)" in out
    )
    workers = max(2, usable_cores())
    assert f"parent's serial share, pass by pass ({workers} workers): " in out
    assert "projection (Amdahl's law from that share, not a measurement): at most " in out
    assert " on 16 workers, " in out and " on 64 workers " in out
    figures = json.loads((tmp_path / "b.json").read_text())
    assert figures["identical"] is True and figures["repeat"] == 1
    assert figures["module"]["num_functions"] == 45
    assert len(figures["runs"]) == 1 + len(figures["worker_counts"])
    assert figures["statistics"]["FoldConstant"]["folded"] > 0
    assert all(run["statistics"] == figures["statistics"] for run in figures["runs"])
    names = [row["name"] for row in figures["summary"]["rows"]]
    for run in figures["runs"]:
        assert run["identical"] is True and run["wall"] > 0 and run["timed_wall"] > 0 and run["fused_wall"] > 0
        assert run["workers"] == 1 or run["waves"]  # the executor's decisions are recorded
        # pass by pass: one wave per function-level pass; fused with the timing instrument: fewer, longer waves
        function_level = [n for n in names if n != "RemoveUnusedFunctions"]
        assert [w["passes"] for w in run["waves"]] == [[n] for n in function_level]
        assert [p for w in run["timed_waves"] for p in w["passes"]] == function_level
        assert any(len(w["passes"]) > 1 for w in run["timed_waves"])
        timed = {p["path"][-1].rsplit("#", 1)[0]: p for p in run["timed_passes"]}
        assert list(timed) == names and all(p["wall"] > 0 and p["cpu"] >= 0 for p in timed.values())
    assert names == list(PIPELINE_PASSES)
    for row in figures["summary"]["rows"]:
        assert row["seconds"]["1"] > 0
    assert figures["summary"]["total_timed"]["seconds"]["1"] > 0
    amdahl = figures["summary"]["amdahl"][str(workers)]
    assert 0 < amdahl["serial_share"] <= 1 and set(amdahl["bound"]) == {"16", "64"}
    shipped = any(w["parallel"] for run in figures["runs"] for w in run["waves"])
    assert 0 <= amdahl["pass_seconds"] <= amdahl["parallel_seconds"] and (amdahl["pass_seconds"] > 0) == shipped
    # keeping the results as bytes is part of the executor's work in the workers
    assert 0 <= amdahl["result_seconds"] <= amdahl["parallel_seconds"] - amdahl["pass_seconds"]
    assert (amdahl["result_seconds"] > 0) == shipped
    assert (f"of the workers' busy time ({workers} workers): the passes' calls " in out) == shipped
    # what the machine allowed, measured in the same run: the headroom, and the pipeline's own ceiling
    machine = figures["summary"]["machine"]
    assert machine["headroom_before"] > 0 and machine["headroom_after"] > 0
    ceiling = machine["ceiling"][str(workers)]
    assert len(ceiling["rounds"]) == 1 and ceiling["median"] == ceiling["rounds"][0] > 0
    assert f"machine headroom (a pure-Python loop on {workers} processes vs 1): " in out
    assert f"ceiling of this pipeline on {workers} processes (" in out and f"): {ceiling['median']:.2f}x\n" in out
    assert f"speedup as a share of that ceiling ({workers} workers): pass by pass " in out
    # what each way cost the cores: this process's CPU and the workers' over their chunks
    for run in figures["runs"]:
        assert run["cpu"] > 0 and run["timed_cpu"] > 0 and run["fused_cpu"] > 0
        for wave in run["waves"]:
            if wave["parallel"]:
                assert 0 < wave["worker_cpu_seconds"] <= wave["worker_seconds"] + 0.05
            else:
                assert wave["worker_cpu_seconds"] == 0.0
    bound = figures["summary"]["cpu"]["total"]["bound"][str(workers)]
    assert bound > 0
    assert f"CPU of the runs ({workers} workers: this process and the workers' chunks) " in out
    assert f"pass by pass {figures['summary']['cpu']['total']['seconds'][str(workers)] * 1e3:,.1f} ms against " in out
    assert f"at most {bound:.2f}x;" in out


def test_bench_interleaves_its_runs_and_can_skip_the_ceiling(tmp_path: Path) -> None:
    proc = parpass(
        "bench",
        *("--functions", "8", "--repeat", "2", "--workers", "2", "--pipeline", "InferType", "--no-ceiling"),
        *("--json", "b.json"),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "machine headroom and the pipeline's ceiling: not measured (--no-ceiling)" in proc.stdout
    figures = json.loads((tmp_path / "b.json").read_text())
    assert [run["workers"] for run in figures["runs"]] == [1, 2, 1, 2]  # interleaved, not all of one first
    assert figures["summary"]["machine"]["ceiling"] == {}


@pytest.mark.parametrize(("counts", "warmed"), [("2", [1, 2]), ("2,3", [1, 2, 3, 2, 3, 2, 3])])
def test_bench_warms_each_worker_count_before_its_runs_when_it_times_several(
    tmp_path: Path, run_main, monkeypatch: pytest.MonkeyPatch, counts: str, warmed: list[int]
) -> None:  # type: ignore[no-untyped-def]
    """Its worker counts take turns, so each count's first wave would pay for resizing the pool (on a
    16-core machine, InferType took 993 ms on 16 workers against 212 ms in-process): each count's runs
    follow an untimed warm-up then. With one count the pool keeps its size and needs none."""
    from parpass.cli.bench_runs import Bench

    calls: list[int] = []
    warm_up = Bench.warm_up

    def recorded(self: Bench, workers: int, small: bytes) -> None:
        calls.append(workers)
        warm_up(self, workers, small)

    monkeypatch.setattr(Bench, "warm_up", recorded)
    args = ("--functions", "8", "--repeat", "2", "--pipeline", "InferType", "--no-ceiling", "--no-progress")
    result = run_main("bench", *args, "--workers", counts, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert calls == warmed


def test_bench_can_time_each_repeat_on_a_new_module(tmp_path: Path) -> None:
    """By default every repeat reads the same module's bytes, and the workers find what they decoded the
    repeat before; with --new-module-each-run they hold nothing of the next module, and each repeat's
    outputs are still checked against that repeat's in-process run."""
    common = ("--functions", "16", "--repeat", "2", "--workers", "2", "--pipeline", "InferType", "--no-ceiling")
    second_waves = {}
    for flag in ((), ("--new-module-each-run",)):
        proc = parpass("bench", *common, "--config", "parpass.parallel=always", *flag, "--json", "b.json", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert ("a new module for each way of each repeat (seeds from 1000)" in proc.stdout) == bool(flag)
        figures = json.loads((tmp_path / "b.json").read_text())
        assert figures["module"]["new_module_each_run"] == bool(flag)
        assert [run["workers"] for run in figures["runs"]] == [1, 2, 1, 2]
        (wave,) = figures["runs"][3]["waves"]  # the second repeat's run on workers, pass by pass
        assert wave["parallel"]
        second_waves[bool(flag)] = wave
    assert second_waves[False]["hits"] > second_waves[False]["misses"]  # held from the repeat before
    assert second_waves[True]["hits"] < second_waves[True]["misses"]  # a module no worker has seen


def test_bench_reads_each_total_against_the_ceiling() -> None:
    from parpass.cli.bench_report import render_machine

    summary = {
        "total": {"speedup": {"2": 0.9}},
        "total_timed": {"speedup": {"2": 1.2}},
        "total_fused": {"speedup": {"2": 1.5}},
        "machine": {
            "headroom_before": 1.8,
            "headroom_after": 1.7,
            "ceiling": {"2": {"rounds": [1.4, 1.6, 1.5], "median": 1.5}},
            "ceiling_skipped": "",
        },
    }
    text = render_machine(summary, [1, 2])
    assert "machine headroom (a pure-Python loop on 2 processes vs 1): 1.80x before the runs, 1.70x after" in text
    assert "rounds 1.40x, 1.60x, 1.50x): 1.50x" in text
    assert "(2 workers): pass by pass 60%, fused with the timing instrument 80%, fused 100%" in text
    assert "warning" not in text and "warning" not in render_machine(summary, [1, 2], cores=2)
    summary["machine"]["headroom_after"] = 1.4  # type: ignore[index]
    busy = render_machine(summary, [1, 2], cores=2)
    assert "warning: 2 processes got 1.40x of one here, where 2 usable cores allow 2x: other programs" in busy
    assert "warning" not in render_machine(summary, [1, 2], cores=1)  # one core allows no more than 1x
    summary["machine"] = {"headroom_before": None, "ceiling": {}, "ceiling_skipped": "why not"}
    assert render_machine(summary, [2]) == "machine headroom and the pipeline's ceiling: not measured (why not)"


def test_bench_worker_list_and_pipeline(tmp_path: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    proc = parpass(
        "bench",
        "--functions",
        "12",
        "--repeat",
        "1",
        "--workers",
        "1,2",
        "--pipeline",
        "seq(InferType,FoldConstant)",
        "--no-ceiling",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "\nsequential " in proc.stdout and "\n  InferType " in proc.stdout and "2 workers" in proc.stdout
    assert_usage_error(run_main("bench", "--workers", "2,zero", cwd=tmp_path), "--workers", "'zero'")
    assert_usage_error(run_main("bench", "--pipeline", "Nope", cwd=tmp_path), "unknown pass 'Nope'")
    reserved = run_main("bench", "--config", "parpass.num_workers=2", cwd=tmp_path)
    assert_usage_error(reserved, "parpass.num_workers", "--workers")
    fusion = run_main("bench", "--config", "parpass.fuse_passes=false", cwd=tmp_path)
    assert_usage_error(fusion, "parpass.fuse_passes", "both pass by pass and fused")


def test_bench_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    pty = pytest.importorskip("pty")
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "parpass",
                "bench",
                "--functions",
                "8",
                "--repeat",
                "2",
                "--pipeline",
                "InferType,FoldConstant",
                "--no-ceiling",
            ],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=slave,
        )
        os.close(slave)
        stdout, _ = proc.communicate()
        shown = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal closed
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(master)
    assert proc.returncode == 0
    assert b"\r[" in shown and b"in-process run 2/2: FoldConstant" in shown and b"2 workers run 1/2: InferType" in shown
    assert shown.endswith(b"\r\x1b[K")  # the bar is erased at the end
    assert b"\r" not in stdout  # the table itself has no bar in it


def test_bench_plot(tmp_path: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        result = run_main("bench", "--functions", "8", "--repeat", "1", "--plot", "s.png", cwd=tmp_path)
        assert_usage_error(result, "--plot needs matplotlib", 'pip install ".[plot]"')
        assert not (tmp_path / "s.png").exists()
        return
    proc = parpass(
        "bench", "--functions", "8", "--repeat", "1", "--workers", "2", "--plot", "s.png", "--no-ceiling", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_cpu_bound_is_the_in_process_time_over_the_cpu_spread_on_the_usable_cores() -> None:
    from parpass.cli.bench_report import render_cpu, summarize
    from parpass.cli.bench_runs import Run, leaf_kinds, run_cpu

    waves = [
        {"passes": ["InferType"], "parallel": True, "worker_cpu_seconds": 0.5},
        {"passes": ["FoldConstant"], "parallel": False, "worker_cpu_seconds": 0.0},
        {"passes": ["Simplify"], "parallel": True},  # saved before the figure was measured: none
    ]
    assert run_cpu(0.25, waves) == 0.75

    def run(workers: int, wall: float, cpu: float) -> Run:
        return Run(workers, wall, {}, {}, [], wall / 2, [], True, wall, [], {}, {}, cpu, cpu * 0.9, cpu * 0.8)

    runs = [run(1, 2.0, 2.0), run(1, 2.2, 2.2), run(1, 3.0, 3.0), run(4, 1.0, 2.5), run(4, 1.2, 2.4), run(4, 9.0, 3.0)]
    summary = summarize(runs, [4], 2, set(), leaf_kinds(parse_pipeline("InferType")))
    cpu = summary["cpu"]
    assert cpu["total"]["seconds"] == {"1": 2.2, "4": 2.5}  # medians
    assert cpu["total"]["bound"] == {"4": pytest.approx(2.2 / (2.5 / 2))}  # 4 workers on 2 usable cores
    assert cpu["total_fused"]["bound"] == {"4": pytest.approx(1.1 / (2.0 / 2))}
    text = render_cpu(summary, [1, 4])
    assert text.startswith("CPU of the runs (4 workers: this process and the workers' chunks) ")
    assert "pass by pass 2,500.0 ms against 2,200.0 ms in-process, at most 1.76x;" in text
    assert "fused 2,000.0 ms against 1,760.0 ms in-process, at most 1.10x" in text
    wide = summarize(runs, [4], 8, set(), leaf_kinds(parse_pipeline("InferType")))  # 8 cores: the 4 workers' own
    assert wide["cpu"]["total"]["bound"] == {"4": pytest.approx(2.2 / (2.5 / 4))}


def test_bench_figures_are_medians_speedups_and_efficiencies() -> None:
    from parpass.cli.bench_report import render_amdahl, render_table, summarize
    from parpass.cli.bench_runs import Run, leaf_kinds

    pipeline = parse_pipeline("InferType,RemoveUnusedFunctions")
    a, b = ("sequential#0", "InferType#0"), ("sequential#0", "RemoveUnusedFunctions#0")
    depths = {a: 0, b: 0}

    def run(workers: int, t_a: float, t_b: float, wall: float, parallel: bool = True) -> Run:
        parallel = parallel and workers > 1
        waves = [{"passes": ["InferType"], "parallel": parallel, "reason": "parallel" if parallel else "estimated"}]
        # a parallel wave of 0.6 * wall, of which the parent's own 0.001 s; the workers busy 2 * t_a, of which
        # the pass's calls 1.5 * t_a and keeping the results as bytes 0.25 * t_a
        waves[0].update(
            functions=100,
            parent_seconds=0.001,
            wall=0.6 * wall,
            worker_seconds=2 * t_a,
            pass_seconds=1.5 * t_a,
            result_seconds=0.25 * t_a,
        )
        if not parallel:
            waves[0].update(parent_seconds=t_a, wall=t_a, worker_seconds=0.0, pass_seconds=0.0, result_seconds=0.0)
        return Run(workers, wall, {a: t_a, b: t_b}, depths, waves, wall / 2, [], True, wall * 0.75)

    runs = [run(1, 1.0, 0.1, 1.2), run(1, 3.0, 0.1, 3.2), run(1, 2.0, 0.1, 2.2)]
    runs += [run(4, 0.5, 0.2, 0.8), run(4, 0.4, 0.2, 0.7), run(4, 9.0, 0.2, 9.9, parallel=False)]
    summary = summarize(runs, [4], 2, {"sequential"}, leaf_kinds(pipeline))
    infer = summary["rows"][0]
    assert infer["seconds"] == {"1": 2.0, "4": 0.5}  # medians
    assert infer["speedup"]["4"] == 4.0 and infer["efficiency"]["4"] == 2.0  # 4x on min(4 workers, 2 cores)
    assert infer["where"] == "4 workers: in-process (estimated)"
    assert summary["rows"][1]["where"] == "module pass: in-process"
    assert summary["total"]["seconds"] == {"1": 2.2, "4": 0.8}
    assert summary["total_timed"]["seconds"] == {"1": pytest.approx(1.65), "4": pytest.approx(0.6)}
    assert summary["total_fused"]["seconds"] == {"1": 1.1, "4": 0.4}
    assert summary["parent_overhead_per_function"]["4"] == pytest.approx(1e-5)
    table = render_table(summary, [4], 2)
    assert "InferType                        2,000.0 ms" in table and "4.00x" in table and "200%" in table
    assert "\ntotal, fused, timing instrument  1,650.0 ms   600.0 ms" in table
    # Amdahl: serial = wall - (parallel wave wall - its parent seconds); parallel = the workers' busy time.
    # The three 4-worker runs: (0.8 - 0.479, 1.0), (0.7 - 0.419, 0.8), in-process (9.9, 0): medians.
    amdahl = summary["amdahl"]["4"]
    serial, parallel = 0.321, 0.8
    assert amdahl["t1_seconds"] == 2.2
    assert amdahl["serial_seconds"] == pytest.approx(serial) and amdahl["parallel_seconds"] == pytest.approx(parallel)
    assert amdahl["serial_share"] == pytest.approx(serial / (serial + parallel))
    assert amdahl["bound"]["16"] == pytest.approx(2.2 / (serial + parallel / 16))
    assert amdahl["bound"]["64"] == pytest.approx(2.2 / (serial + parallel / 64))
    text = render_amdahl(summary)
    share = "parent's serial share, pass by pass (4 workers): 321.0 ms of 1,121.0 ms (29%); workers busy 800.0 ms"
    assert share in text
    # the workers' busy time: the pass's calls (median of 0.75, 0.6 and 0: the in-process run shipped nothing)
    # against the same wave in the in-process runs (median of 1.0, 3.0, 2.0)
    assert amdahl["pass_seconds"] == pytest.approx(0.6) and amdahl["pass_seconds_in_process"] == 2.0
    # of the executor's work, keeping the results as bytes: the median of 0.125, 0.1 and 0
    assert amdahl["result_seconds"] == pytest.approx(0.1)
    busy = (
        "of the workers' busy time (4 workers): the passes' calls 600.0 ms (the same waves in-process: 2,000.0 ms, "
        "0.30x as long), the executor's own work 200.0 ms (reading, decoding, encoding and storing functions; of "
        "it, the results: encoding, digesting, storing and keeping resident the functions the passes changed, "
        "100.0 ms)"
    )
    assert busy in text
    for r in runs:  # runs saved before the figure was measured: no such part printed
        for w in r.waves:
            w.pop("result_seconds")
    old = render_amdahl(summarize(runs, [4], 2, {"sequential"}, leaf_kinds(pipeline)))
    assert "(reading, decoding, encoding and storing functions)" in old and "of it, the results" not in old
    assert f"at most {2.2 / (serial + parallel / 16):.2f}x on 16 workers, {2.2 / (serial + parallel / 64):.2f}x" in text
