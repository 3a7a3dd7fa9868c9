"""Fixtures of the tests of the standard passes.

Every test here runs passes in-process (the inline executor), so that results do
not depend on whether another test module installed the parallel executor.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from parpass.transform import InlineExecutor, get_function_pass_executor, set_function_pass_executor


@pytest.fixture(autouse=True)
def inline_executor() -> Iterator[None]:
    previous = get_function_pass_executor()
    set_function_pass_executor(InlineExecutor())
    try:
        yield
    finally:
        set_function_pass_executor(previous)
