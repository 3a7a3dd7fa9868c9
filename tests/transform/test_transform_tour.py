"""examples/tour.py runs and shows what it claims: a tour of all of the pass infrastructure."""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path

import pytest

TOUR = Path(__file__).resolve().parents[2] / "examples" / "tour.py"


@pytest.fixture
def tour_output(capsys: pytest.CaptureFixture[str]) -> str:
    runpy.run_path(str(TOUR), run_name="__main__")
    return capsys.readouterr().out


def test_tour_runs(tour_output: str) -> None:
    out = tour_output
    assert "input module unchanged: ['main', 'helper', 'kernel']; output: ['main', 'kernel']" in out
    profile = out[out.index("timing profile") :].split("\n\n", 1)[0].splitlines()[1:]
    assert [line.split(":")[0] for line in profile] == [
        "sequential",
        "\tMark",
        "\tUnroll",
        "\tFoldConstant",
        "\tCountFunctions",
        "\tDropHelpers",
    ]


def test_tour_shows_every_part_it_claims(tour_output: str) -> None:
    source = TOUR.read_text()
    for name in ("@parpass.pass_instrument", "PrintBeforeAll", "DumpIR", "WellFormedInstrument", "get_pass("):
        assert name in source, name
    assert "parpass.num_workers" in source
    out = tour_output
    # the user's own instrument saw every pass run, in order
    assert (
        "passes run (seen by @pass_instrument PassLog): Mark, Unroll, FoldConstant, CountFunctions, DropHelpers" in out
    )
    assert "PrintBeforeAll printed the module before 6 passes" in out  # the Sequential and its 5 passes
    assert "DumpIR wrote 000_Mark.txt ... 005_sequential.txt; the last loads back equal to the output: True" in out
    assert "WellFormedInstrument: every pass got and returned well-formed IR" in out
    assert "with 2 workers: same output as in-process: True" in out


def test_tour_runs_as_a_script(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(TOUR)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "with 2 workers: same output as in-process: True" in proc.stdout
    assert list(tmp_path.iterdir()) == []  # DumpIR wrote to a temporary directory, removed afterwards
