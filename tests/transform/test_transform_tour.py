"""examples/tour.py runs and shows what it claims."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

TOUR = Path(__file__).resolve().parents[2] / "examples" / "tour.py"


def test_tour_runs(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(TOUR), run_name="__main__")
    out = capsys.readouterr().out
    assert "input module unchanged: ['main', 'helper', 'kernel']; output: ['main', 'kernel']" in out
    profile = out[out.index("timing profile") :].splitlines()[1:]
    assert [line.split(":")[0] for line in profile] == [
        "sequential",
        "\tMark",
        "\tUnroll",
        "\tCountFunctions",
        "\tDropHelpers",
    ]
