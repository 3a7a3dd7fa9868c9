"""Fixtures for the command-line and pipeline-spec tests."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from parpass.transform import config as config_mod
from parpass.transform import registry as registry_mod

#: The user pass file the command-line tests load with ``--load``.
USER_MODULE = "cli_user_passes"


@pytest.fixture(autouse=True)
def _isolated_registries() -> Iterator[None]:
    """Passes and config options registered by a test disappear after it, and so does what ``--load`` imported.

    ``parpass.cli.main.main`` run in this process imports ``--load`` files
    (registering their passes) and puts their folder on ``sys.path`` and
    ``PYTHONPATH``; all of that is undone, so that the next test loads them afresh.
    """
    passes = dict(registry_mod._FACTORIES)
    options = dict(config_mod._OPTIONS)
    path = list(sys.path)
    pythonpath = os.environ.get("PYTHONPATH")
    yield
    registry_mod._FACTORIES.clear()
    registry_mod._FACTORIES.update(passes)
    config_mod._OPTIONS.clear()
    config_mod._OPTIONS.update(options)
    sys.modules.pop(USER_MODULE, None)
    sys.path[:] = path
    if pythonpath is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = pythonpath
