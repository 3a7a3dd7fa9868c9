"""The command and its configuration, as an outside audit used them (issue 11, items 15 and 18-22).

Each test pins a behaviour that was wrong: a file parpass wrote that it then
refused to read, a usage error reported as a pipeline failure, an accepted
value outside its range, a missing way to list passes, a benchmark table that
did not say what ran where.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import test_cli
from test_cli import SPEC, assert_usage_error, in_process, parpass

from parpass.ir import IRModule, from_bytes, load, structural_equal, to_bytes
from parpass.ir.serialization import FORMATS
from parpass.testing import random_module

run_main = test_cli.run_main  # the fixture: main(argv) in this process

# ---------------------------------------------------------------------------------------------------------------------
# item 15: what parpass writes, it reads


@pytest.mark.parametrize("ext", sorted(FORMATS))
def test_gen_writes_every_extension_that_load_show_and_opt_read(ext: str, tmp_path: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    name = f"m{ext}"
    made = run_main("gen", "-o", name, "--functions", "4", "--seed", "5", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    loaded = load(tmp_path / name)
    assert isinstance(loaded, IRModule)
    assert structural_equal(loaded, random_module(4, seed=5))
    shown = run_main("show", name, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    optimized = run_main("opt", name, "-p", SPEC, "-o", "o.msgpack", cwd=tmp_path)
    assert optimized.returncode == 0, optimized.stderr
    assert to_bytes(load(tmp_path / "o.msgpack")) == in_process(SPEC, loaded)


def test_gen_txt_round_trips(tmp_path: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    made = run_main("gen", "-o", "m.txt", "--functions", "3", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert run_main("show", "m.txt", cwd=tmp_path).returncode == 0
    assert run_main("opt", "m.txt", "-p", SPEC, cwd=tmp_path).returncode == 0
    assert isinstance(load(tmp_path / "m.txt"), IRModule)


def test_unsupported_output_extension_is_refused_up_front_naming_the_supported_ones(tmp_path: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    first = assert_usage_error(run_main("gen", "-o", "m.docx", cwd=tmp_path), "m.docx", "supported extensions")
    for ext in FORMATS:
        assert ext in first
    assert list(tmp_path.iterdir()) == []


def test_dump_ir_files_load_back(tmp_path: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    made = run_main("gen", "-o", "m.msgpack", "--functions", "4", cwd=tmp_path)
    assert made.returncode == 0
    result = run_main("opt", "m.msgpack", "-p", "InferType,FoldConstant", "--dump-ir", "dumps", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    dumps = sorted((tmp_path / "dumps").iterdir())
    assert [p.name for p in dumps] == ["000_InferType.txt", "001_FoldConstant.txt", "002_sequential.txt"]
    expected = from_bytes(in_process("InferType,FoldConstant", load(tmp_path / "m.msgpack")))  # type: ignore[arg-type]
    for dump in dumps:
        assert isinstance(load(dump), IRModule)
        assert run_main("show", str(dump), cwd=tmp_path).returncode == 0
    assert structural_equal(load(dumps[-1]), expected)  # the last dump is the pipeline's output


# ---------------------------------------------------------------------------------------------------------------------
# items 18 and 20: usage errors exit 2 on one line naming the option, values outside their range are refused


@pytest.fixture
def small(tmp_path: Path) -> Path:
    from parpass.ir import save

    save(random_module(3, seed=1), tmp_path / "m.msgpack")
    return tmp_path


@pytest.mark.parametrize("value", ["0", "-1"])
def test_config_num_workers_below_one_is_a_usage_error(value: str, small: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    result = run_main("opt", "m.msgpack", "-p", SPEC, "--config", f"parpass.num_workers={value}", cwd=small)
    assert_usage_error(result, "--config", "parpass.num_workers", ">= 1")
    assert len(result.stderr.splitlines()) == 1


def test_unwritable_dump_ir_directory_is_a_usage_error(small: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    (small / "afile").write_text("x")
    result = run_main("opt", "m.msgpack", "-p", SPEC, "--dump-ir", "afile/dumps", cwd=small)
    assert_usage_error(result, "--dump-ir", "afile/dumps")
    assert len(result.stderr.splitlines()) == 1


def test_read_only_dump_ir_directory_is_a_usage_error(small: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    import os

    if os.geteuid() == 0:
        pytest.skip("root writes into read-only directories")
    (small / "ro").mkdir(mode=0o500)
    result = run_main("opt", "m.msgpack", "-p", SPEC, "--dump-ir", "ro", cwd=small)
    assert_usage_error(result, "--dump-ir", "ro", "not writable")


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--config", "parpass.timeout=-1"], ["--config", "parpass.timeout", ">= 0"]),
        (["-p", "UnrollLoop{auto_max_step=-5}"], ["auto_max_step", ">= 0", "-5"]),
        (["-p", "UnrollLoop{auto_max_depth=-1}"], ["auto_max_depth", ">= 0"]),
        (["--config", 'tir.UnrollLoop={"auto_max_extent": -2}'], ["tir.UnrollLoop", "auto_max_extent", ">= 0"]),
        (["-O", "9"], ["--opt-level", "0 to 3", "9"]),
        (["-O", "-1"], ["--opt-level", "0 to 3"]),
        (["-p", ""], ["-p", "empty"]),
        (["-p", "seq()"], ["-p", "empty"]),
    ],
)
def test_values_outside_their_range_are_refused(args: list[str], fragments: list[str], small: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    full = ["opt", "m.msgpack", *args] if "-p" in args else ["opt", "m.msgpack", "-p", SPEC, *args]
    assert_usage_error(run_main(*full, cwd=small), *fragments)


def test_bench_refuses_an_opt_level_out_of_range_and_an_empty_pipeline(tmp_path: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    assert_usage_error(run_main("bench", "-O", "4", "--functions", "2", cwd=tmp_path), "--opt-level", "0 to 3")
    assert_usage_error(run_main("bench", "--pipeline", "", "--functions", "2", cwd=tmp_path), "--pipeline", "empty")


def test_library_rejects_out_of_range_values_naming_the_key_and_the_range() -> None:
    from parpass.passes import UnrollLoop
    from parpass.transform import PassConfigError, PassContext

    with pytest.raises(PassConfigError, match=r"'parpass\.timeout' expects float >= 0"):
        PassContext(config={"parpass.timeout": -1.0})
    with pytest.raises(PassConfigError, match=r"'parpass\.num_workers' expects int >= 1"):
        PassContext(config={"parpass.num_workers": 0})
    with pytest.raises(PassConfigError, match=r"field 'auto_max_step' expects int >= 0, got int -5"):
        UnrollLoop(auto_max_step=-5)
    PassContext(config={"parpass.timeout": 0.0, "parpass.num_workers": 1, "tir.UnrollLoop": {"auto_max_step": 0}})


def test_a_value_out_of_range_is_a_value_error_and_a_wrong_type_is_not() -> None:
    """Out of range: a ConfigValueRangeError (a ValueError, and the PassConfigError / AttributeError TVM code
    catches). The wrong type stays a TypeError only."""
    from parpass.passes import UnrollLoop
    from parpass.transform import ConfigValueRangeError, PassConfigError, PassContext

    for make in (
        lambda: PassContext(config={"parpass.timeout": -1.0}),
        lambda: PassContext(config={"parpass.num_workers": 0}),
        lambda: UnrollLoop(auto_max_step=-5),
    ):
        with pytest.raises(ConfigValueRangeError) as info:
            make()
        assert isinstance(info.value, ValueError) and isinstance(info.value, AttributeError)
    with pytest.raises(PassConfigError) as wrong_type:
        PassContext(config={"parpass.num_workers": "two"})
    assert not isinstance(wrong_type.value, ValueError)
    assert isinstance(wrong_type.value, TypeError)


# ---------------------------------------------------------------------------------------------------------------------
# item 19: more workers than usable cores is said, once


@pytest.fixture
def one_core(monkeypatch: pytest.MonkeyPatch) -> None:
    """The executor sees 1 usable core and has not warned yet in this process."""
    import parpass.parallel.config as parallel_config

    monkeypatch.setattr(parallel_config, "usable_cores", lambda: 1)
    monkeypatch.setattr(parallel_config, "_CHECKED_WORKER_COUNTS", set(), raising=False)
    monkeypatch.setattr(parallel_config, "_warned_oversubscribed", False, raising=False)


def test_more_workers_than_cores_warns_once_per_process(one_core: None) -> None:
    import warnings

    from parpass.passes import FoldConstant
    from parpass.transform import PassContext

    mod = random_module(4, seed=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for workers in (2, 2, 3):
            with PassContext(config={"parpass.num_workers": workers, "parpass.parallel": "auto"}):
                FoldConstant()(mod)
    said = [str(w.message) for w in caught if "usable core" in str(w.message)]
    assert len(said) == 1, said
    assert "'parpass.num_workers' is 2" in said[0] and "1 usable core" in said[0]
    assert issubclass(next(w.category for w in caught if "usable core" in str(w.message)), RuntimeWarning)


def test_default_num_workers_is_the_usable_cores() -> None:
    from parpass.parallel import usable_cores
    from parpass.transform import get_config_option

    assert get_config_option("parpass.num_workers").default == usable_cores()


def test_cli_warns_in_one_line_when_workers_exceed_the_cores(one_core: None, small: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    result = run_main("opt", "m.msgpack", "-p", SPEC, "--workers", "2", "-o", "o.msgpack", cwd=small)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("parpass: warning: "), lines
    assert "1 usable core" in lines[0]


# ---------------------------------------------------------------------------------------------------------------------
# item 21: the registered passes, listed from the command line

USER_PASSES = str(Path(__file__).with_name("cli_user_passes.py"))


def test_passes_lists_every_registered_pass_with_kind_opt_level_and_options(tmp_path: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    from parpass.transform import list_passes

    result = run_main("passes", "--load", USER_PASSES, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = {line.split()[0]: line for line in result.stdout.splitlines()[2:] if line.strip()}
    assert set(list_passes()) <= set(lines), set(list_passes()) - set(lines)
    assert lines["FoldConstant"].split()[1:3] == ["function", "2"]
    assert lines["Simplify"].split()[1:3] == ["prim_func", "0"]
    assert lines["RemoveUnusedFunctions"].split()[1:3] == ["module", "1"]
    assert "auto_max_step: int >= 0 = 0" in lines["UnrollLoop"]
    assert "explicit_unroll: bool = True" in lines["UnrollLoop"]
    assert "tag: str = 'tagged'" in lines["TagModule"] and "count: int = 1" in lines["TagModule"]  # a user's pass


def test_passes_json(tmp_path: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    import json

    result = run_main("passes", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    table = {entry["name"]: entry for entry in json.loads(result.stdout)}
    assert table["InferType"]["kind"] == "function" and table["InferType"]["opt_level"] == 0
    step = next(o for o in table["UnrollLoop"]["options"] if o["name"] == "auto_max_step")
    assert step == {"name": "auto_max_step", "type": "int >= 0", "default": 0}
    assert table["FoldConstant"]["options"] == [] and table["FoldConstant"]["doc"]


def test_unknown_pass_errors_point_at_parpass_passes(tmp_path: Path, small: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    spec = run_main("opt", "m.msgpack", "-p", "Zzzqqq", cwd=small)
    assert_usage_error(spec, "unknown pass 'Zzzqqq'", "parpass passes")
    assert_usage_error(
        run_main("opt", "m.msgpack", "-p", SPEC, "--disabled-pass", "Zzzqqq", cwd=small),
        "--disabled-pass: unknown pass 'Zzzqqq'",
        "parpass passes",
    )


def test_readme_documents_parpass_passes() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "**`parpass passes`**" in readme


def test_readme_documents_fusion_under_instruments_and_its_key() -> None:
    from parpass.transform import list_configs

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    entry = list_configs()["parpass.fuse_passes"]
    assert f"| `parpass.fuse_passes` | {entry['type']} | {str(entry['default']).lower()} |" in readme
    assert "`reads_module = False`" in readme and "on_pass_timing(info, timing," in readme
    assert "Pass execution timing report" in readme and "`--time-passes`" in readme


def test_unroll_loop_options_in_a_spec_are_checked_by_name_and_range(small: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    typo = run_main("opt", "m.msgpack", "-p", "UnrollLoop{auto_max_stpe=4}", cwd=small)
    assert_usage_error(typo, "auto_max_stpe", "auto_max_step")
    ok = run_main("opt", "m.msgpack", "-p", "Simplify,UnrollLoop{auto_max_step=16,explicit_unroll=false}", cwd=small)
    assert ok.returncode == 0, ok.stderr


# ---------------------------------------------------------------------------------------------------------------------
# item 22: parpass bench says what ran where


def test_bench_table_says_what_ran_where() -> None:
    from parpass.cli.bench_report import render_table, summarize
    from parpass.cli.bench_runs import Run, leaf_kinds
    from parpass.transform import parse_pipeline

    pipeline = parse_pipeline("InferType,FoldConstant,Simplify,RemoveUnusedFunctions")
    keys = [("sequential#0", f"{n}#0") for n in ("InferType", "FoldConstant", "Simplify", "RemoveUnusedFunctions")]
    depths = dict.fromkeys(keys, 0)

    def wave(name: str, parallel: bool) -> dict[str, object]:
        reason = "parallel" if parallel else "estimated faster in-process"
        return {
            "passes": [name],
            "parallel": parallel,
            "reason": reason,
            "functions": 10,
            "parent_seconds": 0.0,
            "wall": 0.1,
            "worker_seconds": 0.1 if parallel else 0.0,
            "pass_seconds": 0.08 if parallel else 0.0,
        }

    def run(workers: int, infer_parallel: bool) -> Run:
        waves = [wave("InferType", infer_parallel), wave("FoldConstant", False), wave("Simplify", True)]
        return Run(workers, 1.0, dict.fromkeys(keys, 0.1), depths, [] if workers == 1 else waves, 0.5, [])

    runs = [run(1, True), run(2, True), run(2, False)]
    summary = summarize(runs, [2], 2, {"sequential"}, leaf_kinds(pipeline))
    ran = {row["name"]: row["ran"]["2"] for row in summary["rows"]}
    assert ran == {
        "InferType": "mixed",  # shipped in one run, kept in-process in the other
        "FoldConstant": "in-process",
        "Simplify": "workers",
        "RemoveUnusedFunctions": "in-process",  # a module pass
    }
    table = render_table(summary, [2], 2).splitlines()
    assert table[0].split()[:5] == ["pass", "in-process", "2", "workers", "ran"]
    rows = {line.split()[0]: line for line in table[2:6]}
    assert " in-process " in rows["FoldConstant"] and " workers " in rows["Simplify"] and " mixed " in rows["InferType"]


def test_bench_refuses_an_empty_module(tmp_path: Path, run_main) -> None:  # type: ignore[no-untyped-def]
    assert_usage_error(run_main("bench", "--functions", "0", cwd=tmp_path), "--functions 0", "empty module")
    assert_usage_error(
        run_main("bench", "--functions", "0", "--prim-funcs", "0", cwd=tmp_path), "--prim-funcs 0", "empty module"
    )


def test_bench_json_names_the_prim_funcs_it_made(tmp_path: Path) -> None:
    import json

    proc = parpass(
        "bench", "--functions", "6", "--repeat", "1", "--workers", "2", "--json", "b.json", "--no-ceiling", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    figures = json.loads((tmp_path / "b.json").read_text())
    assert figures["module"]["prim_funcs"] == 3 and figures["module"]["num_functions"] == 9
    assert "prim_funcs=3" in proc.stdout.splitlines()[0]
    assert all("2" in row["ran"] for row in figures["summary"]["rows"] if row["depth"] >= 0)


def test_bench_plot_install_hint_is_the_readme_s(tmp_path: Path, run_main, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    first = assert_usage_error(run_main("bench", "--plot", "p.png", cwd=tmp_path), "--plot", "matplotlib")
    hint = first.split("install it with: ", 1)[1]
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert hint in readme.replace("\n", " ").replace("`", ""), hint
