"""Each benchmark script runs end to end with tiny sizes and prints what issue 12 asks it to show.

No figure is checked (timing belongs to benchmarks, not tests): only that the
scripts run, print every section, find the outputs byte-identical, and refuse
bad arguments. Marked ``benchmark_smoke`` (the bench_parallel run takes about
half a minute on 2 cores).
"""

from __future__ import annotations

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


@pytest.mark.parametrize("name", ["bench_parallel.py"])
def test_help_describes_the_script(name: str) -> None:
    proc = run_script(name, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "usage:" in proc.stdout
    assert f"python benchmarks/{name}" in proc.stdout  # the docstring's command line


def test_bench_parallel_prints_warm_cold_quiet_and_loaded_figures() -> None:
    proc = run_script("bench_parallel.py", "--functions", "12", "--repeat", "1", "--cold-repeat", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "machine headroom now" in out
    assert "ceiling of (a) now" in out
    assert "machine headroom under the load" in out
    assert "cold speedup" in out
    for label in ("(a) CPU-heavy", "(b) light pipeline", "(b') dataflow", "(c) light pipeline"):
        rows = [line for line in out.splitlines() if line.startswith(f"| {label}")]
        assert len(rows) == 2, out  # quiet and loaded
        assert all(" ok |" in row or " MISS |" in row for row in rows)
    assert "targets missed:" in out
    assert "outputs byte-identical to the in-process run: yes" in out


def test_bench_parallel_refuses_a_repeat_of_zero() -> None:
    proc = run_script("bench_parallel.py", "--repeat", "0")
    assert proc.returncode == 2
    assert "--repeat must be >= 1" in proc.stderr
