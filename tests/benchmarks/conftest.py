"""Benchmark smoke tests: the scripts under ``benchmarks/`` run with tiny sizes; no figure is checked.

Registers the ``benchmark_smoke`` marker (``pytest -m "not benchmark_smoke"`` skips the tests that start the
scripts) and puts ``benchmarks/`` on ``sys.path`` so that its shared helpers (``benchutil``) can be imported.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "benchmark_smoke: starts a benchmark script with tiny sizes (a few seconds to a minute)"
    )
