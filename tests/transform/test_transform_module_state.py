"""Module-level state in a function-level pass is per process, as the README says ("What runs where").

A pass that increments a global counter counts every function in a serial run
and leaves the parent's counter at 0 when it runs in workers. That divergence is
documented, not fixed (pass statistics gathered from workers are a separate
feature); these tests keep the README true: the divergence is what it says, and
the way to count that it shows gives the same count in both modes.

The passes run in a child interpreter whose ``__main__`` defines them, as a
user's script does (cloudpickle then ships them by value, globals included).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"

COUNTER_SCRIPT = """
import json
import parpass
from parpass.parallel import get_backend
from parpass.testing import random_module

COUNT = 0


@parpass.function_pass(opt_level=0, name="CountWithAGlobal")
def count_with_a_global(func, mod, ctx):
    global COUNT
    COUNT += 1
    return func


mod = random_module(num_functions=12, num_prim_funcs=4, size=6, seed=3)
functions = sum(1 for _, f in mod.items() if type(f).__name__ == "Function")
counts = {}
for mode, workers in (("serial", 1), ("workers", 2)):
    COUNT = 0
    config = {"parpass.num_workers": workers, "parpass.parallel": "always" if workers > 1 else "never"}
    with parpass.PassContext(config=config):
        count_with_a_global(mod)
    counts[mode] = COUNT
pids = get_backend().worker_pids()
parpass.shutdown()
print(json.dumps({"functions": functions, "counts": counts, "pids": pids}))
"""


def _readme_block(marker: str) -> str:
    """The README's ```python block that contains ``marker``."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    found = [b for b in blocks if marker in b]
    assert len(found) == 1, f"README should have one python block with {marker!r}, found {len(found)}"
    return found[0]


def _run(script: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=os.path.dirname(__file__)
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    _assert_gone(result.pop("pids", []))
    return result


def _assert_gone(pids: list[int]) -> None:
    """The child's worker processes ended with it."""
    deadline = time.monotonic() + 30
    left = list(pids)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for p in left if os.path.exists(f"/proc/{p}") and "Z" not in _state(p)]
    assert left == [], f"worker processes left behind: {left}"


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/status") as handle:
            return next((line for line in handle if line.startswith("State:")), "")
    except FileNotFoundError:
        return "Z"


def test_a_global_counter_counts_serially_and_stays_zero_with_workers() -> None:
    result = _run(COUNTER_SCRIPT)
    assert result["functions"] > 0
    assert result["counts"] == {"serial": result["functions"], "workers": 0}


def test_the_readme_way_to_count_gives_the_same_count_in_both_modes() -> None:
    example = _readme_block('name="CountAdds"')
    script = textwrap.dedent(
        """
        import json
        from parpass.parallel import get_backend
        from parpass.testing import random_module
        """
    )
    script += example + textwrap.dedent(
        """
        mod = random_module(num_functions=12, num_prim_funcs=4, size=6, seed=3)
        expected = sum(
            1
            for _, f in mod.items()
            if isinstance(f, relax.Function)
            for b in f.bindings
            if isinstance(b.value, relax.Call) and getattr(b.value.op, "name", None) == "add"
        )
        seen = {}
        for mode, workers in (("serial", 1), ("workers", 2)):
            stats.clear()
            config = {"parpass.num_workers": workers, "parpass.parallel": "always" if workers > 1 else "never"}
            with parpass.PassContext(config=config):
                out = parpass.Sequential([count_adds, sum_adds])(mod)
            leftover = [gv.name_hint for gv, f in out.items() if "count_adds.n" in f.attrs]
            seen[mode] = [stats["add calls"], leftover]
        pids = get_backend().worker_pids()
        parpass.shutdown()
        print(json.dumps({"expected": expected, "seen": seen, "pids": pids}))
        """
    )
    result = _run(script)
    assert result["expected"] > 0
    assert result["seen"] == {"serial": [result["expected"], []], "workers": [result["expected"], []]}


def test_the_readme_says_where_passes_run_and_what_that_means() -> None:
    text = " ".join(README.read_text(encoding="utf-8").split())
    assert "### What runs where" in README.read_text(encoding="utf-8")
    for claim in (
        "must be a pure function of (function, module view, context)",
        "is gathered from the workers and summed in the parent",
    ):
        assert claim in text, claim
