"""Fixtures shared by the transform and instrument tests (their conftests import them)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support import make_module

from parpass.ir import IRModule
from parpass.transform import config as config_mod
from parpass.transform import registry as registry_mod


@pytest.fixture
def mod() -> IRModule:
    return make_module()


@pytest.fixture(autouse=True)
def _isolated_registries() -> Iterator[None]:
    """Passes and config options registered by a test disappear after it."""
    passes = dict(registry_mod._FACTORIES)
    options = dict(config_mod._OPTIONS)
    yield
    registry_mod._FACTORIES.clear()
    registry_mod._FACTORIES.update(passes)
    config_mod._OPTIONS.clear()
    config_mod._OPTIONS.update(options)
