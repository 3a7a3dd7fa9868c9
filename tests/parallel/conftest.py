"""Fixtures for the parallel-executor tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from parallel_support import executor

from parpass.ir import IRModule
from parpass.testing import random_module


@pytest.fixture(scope="session")
def small_module() -> IRModule:
    return random_module(num_functions=24, num_prim_funcs=8, size=8, seed=11)


@pytest.fixture
def history() -> Iterator[list]:
    """The executor's wave log, cleared for the test (with what the executor learned before it)."""
    executor.forget()
    yield executor.history


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The directory of this test's wave, progress and output files, to check that none is left behind."""
    from parpass.parallel import wave

    where = tmp_path / "scratch"
    where.mkdir()
    monkeypatch.setattr(wave, "_scratch_dir", lambda: str(where))
    return where
