"""Each benchmark script runs end to end with tiny sizes and prints what issue 12 asks it to show.

No figure is checked (timing belongs to benchmarks, not tests): only that the
scripts run, print every section, find the outputs byte-identical, and refuse
bad arguments. Marked ``benchmark_smoke`` (the bench_parallel run takes about
half a minute on 2 cores).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

pytestmark = pytest.mark.benchmark_smoke


def run_script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / name), *args], capture_output=True, text=True, check=False, timeout=None
    )


def run_in_scratch(tmp_path: Path, name: str, *args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The script run in ``tmp_path`` with its temporary folder in ``tmp_path/tmp`` (returned, to see it removed)."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / name), *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "TMPDIR": str(scratch)},
        cwd=tmp_path,  # `python -m parpass` imports the parpass this interpreter imports, not one in the cwd
    )
    return proc, scratch


@pytest.mark.parametrize(
    "name",
    [
        "bench_parallel.py",
        "bench_overhead.py",
        "bench_cold.py",
        "bench_passes.py",
        "bench_serialization.py",
        "bench_statistics.py",
        "bench_cluster.py",
        "bench_scaling.py",
        "bench_instruments.py",
    ],
)
def test_help_describes_the_script(name: str) -> None:
    proc = run_script(name, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "usage:" in proc.stdout
    assert f"python benchmarks/{name}" in proc.stdout  # the docstring's command line


def test_bench_parallel_prints_warm_cold_quiet_and_loaded_figures() -> None:
    proc = run_script(
        "bench_parallel.py", "--functions", "12", "--repeat", "1", "--cold-repeat", "2", "--short-cold-repeat", "1"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "machine headroom now" in out
    assert "ceiling of (a) now" in out
    assert "machine headroom under the load" in out
    assert "cold speedup" in out
    for label in ("(a) CPU-heavy", "(b) light pipeline", "(b') dataflow", "(c) light pipeline", "(d) one light pass"):
        rows = [line for line in out.splitlines() if line.startswith(f"| {label}")]
        assert len(rows) == 2, out  # quiet and loaded
        assert all(" ok |" in row or " MISS |" in row for row in rows)
    assert "targets missed:" in out
    assert "in every figure (warm and cold, quiet and loaded): " in out
    assert "outputs byte-identical to the in-process run: yes" in out


def test_bench_cluster_compares_the_backends_on_a_local_cluster() -> None:
    pytest.importorskip("distributed")
    proc = run_script("bench_cluster.py", "--functions", "12", "--repeat", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "machine headroom (2 processes against 1): " in out
    assert "latency per chunk: local " in out and " ms, cluster " in out
    assert out.count("x ") >= 4  # both cases, both backends
    assert "heavy " in out and "default pipeline " in out
    assert "MISS" in out.splitlines()[3] or " ok" in out.splitlines()[3]
    auto = out[out.index("auto on the cluster against in-process") :].splitlines()[1:4]
    assert [line.split()[0] for line in auto] == ["heavy", "default", "pipeline,"]
    assert all(line.endswith((" ok", " MISS")) for line in auto)
    assert "Dask's worker profiler (heavy pass on the cluster, alternate rounds): off " in out


def test_bench_scaling_prints_a_row_per_worker_count_it_can_run() -> None:
    proc = run_script("bench_scaling.py", "--functions", "12", "--workers", "2,4096", "--repeat", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "skipped (more than the usable cores): [4096]" in out
    rows = [line for line in out.splitlines() if line.startswith("| 2 |")]
    assert len(rows) == 1 and rows[0].count("x |") == 5, out  # headroom, (a), its ceiling, (b), (b')
    assert "outputs byte-identical to the in-process run: yes" in out


def test_bench_scaling_refuses_one_worker() -> None:
    proc = run_script("bench_scaling.py", "--workers", "1,2")
    assert proc.returncode == 2
    assert "every count must be at least 2" in proc.stderr


def test_bench_cluster_refuses_one_worker() -> None:
    proc = run_script("bench_cluster.py", "--workers", "1")
    assert proc.returncode == 2
    assert "--workers >= 2" in proc.stderr


def test_bench_parallel_refuses_a_repeat_of_zero() -> None:
    proc = run_script("bench_parallel.py", "--repeat", "0")
    assert proc.returncode == 2
    assert "--repeat must be >= 1" in proc.stderr


def test_bench_overhead_fits_the_parent_work_and_projects_it() -> None:
    proc = run_script(
        "bench_overhead.py",
        *("--sizes", "10,30", "--waves", "1", "--passes", "2", "--project-functions", "12", "--project-repeat", "1"),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "fusion off by" in out
    assert out.count("parent fixed work per wave: ") == 4  # one pass per call and pipeline, unchanged and changed
    assert out.count("(target < 3 ms)") == 4
    assert out.count("per function: ") == 4
    assert out.count("(target < 3 us)") == 4
    assert "projection (not a measurement)" in out
    for run in ("pass by pass", "fused"):
        (row,) = [line for line in out.splitlines() if line.startswith(f"| {run} |")]
        assert row.count("x |") == 3  # bounds on 2, 16 and 64 workers


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--sizes", "100"), "two different sizes"),
        (("--sizes", "a,b"), "expected sizes like"),
        (("--workers", "1"), "--workers must be >= 2"),
        (("--waves", "0"), "--waves must be >= 1"),
    ],
)
def test_bench_overhead_refuses_bad_arguments(args: tuple[str, ...], message: str) -> None:
    proc = run_script("bench_overhead.py", *args)
    assert proc.returncode == 2
    assert message in proc.stderr


def test_fusion_off_makes_a_sequential_run_one_wave_per_pass() -> None:
    from bench_overhead import FUSION_OFF, trivial_pass

    from parpass.parallel import default_executor
    from parpass.testing import random_module
    from parpass.transform import PassContext, Sequential

    pipeline = Sequential([trivial_pass(k, changes=True) for k in range(3)])
    default_executor.history.clear()
    with PassContext(config={**FUSION_OFF, "parpass.num_workers": 1}):
        out = pipeline(random_module(num_functions=4, seed=0))
    assert [w.passes for w in default_executor.history] == [("Touch0",), ("Touch1",), ("Touch2",)]
    assert out["main"].attrs["touched_2"] == 2


def test_bench_cold_compares_fresh_processes_and_cleans_up(tmp_path: Path) -> None:
    proc, scratch = run_in_scratch(tmp_path, "bench_cold.py", "--functions", "12", "--repeat", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "parpass's bytecode (what each timed process and its workers import): " in proc.stdout
    out = proc.stdout
    assert "module: parpass gen --functions 12 --seed 0" in out
    assert "machine headroom before the runs" in out
    assert "machine headroom after the runs" in out
    assert "run 1, --workers 1:" in out
    assert "run 1, --workers 2:" in out
    assert "(target >= 1.5x)" in out
    assert "  run 1, 2 x --workers 1 at once: " in out
    assert "ceiling of the run on this machine (2 x --workers 1 at once against one alone, median of 1): " in out
    assert "outputs byte-identical: yes (4 runs)" in out  # the ceiling's runs are checked too
    assert not list(scratch.iterdir())


@pytest.mark.parametrize(
    ("args", "message"),
    [(("--workers", "1"), "--workers must be >= 2"), (("--repeat", "0"), "--repeat must be >= 1")],
)
def test_bench_cold_refuses_bad_arguments(args: tuple[str, ...], message: str) -> None:
    proc = run_script("bench_cold.py", *args)
    assert proc.returncode == 2
    assert message in proc.stderr


def test_bench_cold_reports_a_failing_run() -> None:
    from bench_cold import run_command

    with pytest.raises(
        RuntimeError, match=r"(?s)parpass opt /nonexistent\.msgpack .*failed \(exit status [1-9].*no such file"
    ):
        run_command(["opt", "/nonexistent.msgpack", "-o", "/nonexistent-out.msgpack"])


def test_bench_instruments_compares_instrumented_pipelines_warm_and_cold(tmp_path: Path) -> None:
    proc, scratch = run_in_scratch(tmp_path, "bench_instruments.py", "--functions", "16", "--repeat", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    for line in (
        "machine headroom before the runs",
        "WellFormedInstrument(), warm, median of 1 interleaved runs: in-process ",
        "PrintAfterAll(file=os.devnull), warm, ",
        "DumpIR(dump), warm, ",
        "the instrument's waves",
        "cold, parpass opt --verify-each in a fresh process, median of 1: --workers 1 ",
        "cold, parpass opt --dump-ir in a fresh process, median of 1: --workers 1 ",
        "machine headroom after the runs",
        "summary: ",
    ):
        assert line in out, line
    assert out.count("outputs byte-identical: yes") == 5 and "dumps byte-identical: yes" in out
    assert not list(scratch.iterdir())


@pytest.mark.parametrize("args", [("--workers", "1"), ("--repeat", "0"), ("--functions", "0")])
def test_bench_instruments_refuses_bad_arguments(args: tuple[str, ...]) -> None:
    proc = run_script("bench_instruments.py", *args)
    assert proc.returncode == 2 and f"{args[0]} must be >= " in proc.stderr


def test_bench_passes_times_every_pass_of_the_default_pipeline() -> None:
    from parpass.passes import PIPELINE_PASSES

    proc = run_script("bench_passes.py", "--functions", "10", "--repeat", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in PIPELINE_PASSES:
        assert f"| {name} |" in proc.stdout


def test_bench_serialization_compares_msgspec_with_pickle() -> None:
    proc = run_script("bench_serialization.py", "--functions", "10", "--repeats", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "| msgspec encode: to_bytes (no cached bytes) |" in proc.stdout
    assert "| encode: pickle.dumps / to_bytes |" in proc.stdout


def test_bench_statistics_prints_the_three_ratios() -> None:
    proc = run_script("bench_statistics.py", "--functions", "12", "--repeat", "1")
    assert proc.returncode == 0, proc.stderr
    assert "off / stubbed: " in proc.stdout and "on / off: " in proc.stdout
    assert run_script("bench_statistics.py", "--repeat", "0").returncode == 2
