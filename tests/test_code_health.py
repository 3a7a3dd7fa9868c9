"""The code stays as the house rules say: ruff clean (lint, McCabe complexity <= 10 in the package, format),
mypy --strict clean, and every ``type: ignore`` in the package says why on its line.

ruff and mypy are pinned in the ``test`` extra, so these checks mean the same on every machine.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "parpass"
#: ``# type: ignore[code]`` followed on its line by ``# the reason``.
IGNORE = re.compile(r"#\s*type:\s*ignore(\[[^\]]*\])?(?P<rest>.*)$")


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, check=False)


def test_ruff_lint_and_complexity() -> None:
    done = _run("ruff", "check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format() -> None:
    done = _run("ruff", "format", "--no-cache", "--check", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict(tmp_path: Path) -> None:
    done = _run("mypy", "--cache-dir", str(tmp_path / "mypy"))
    assert done.returncode == 0, done.stdout + done.stderr


def ignores_without_reason(text: str) -> list[int]:
    """Line numbers of ``type: ignore`` comments with no ``# reason`` after them."""
    lines = []
    for number, line in enumerate(text.splitlines(), 1):
        m = IGNORE.search(line)
        if m is not None and not m.group("rest").strip().startswith("#"):
            lines.append(number)
    return lines


def test_every_type_ignore_in_the_package_says_why() -> None:
    bare = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for number in ignores_without_reason(path.read_text())
    ]
    assert not bare, "type: ignore without a reason on its line: " + ", ".join(bare)


@pytest.mark.parametrize(
    ("line", "bare"),
    [
        ("x = f()  # type: ignore[arg-type]", True),
        ("x = f()  # type: ignore", True),
        ("x = f()  # type: ignore[misc]  # loky has no stubs", False),
        ("x = f()", False),
    ],
)
def test_the_reason_check_itself(line: str, bare: bool) -> None:
    assert (ignores_without_reason(line) == [1]) is bare
