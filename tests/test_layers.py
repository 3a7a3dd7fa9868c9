"""The layers hold, in the source and at run time: ir -> transform/instrument -> parallel -> passes -> cli/testing.

Every import of every module counts (function-local and ``TYPE_CHECKING`` ones
too): a module imports only its own layer and the ones below it. And importing
a layer loads only that layer and the ones below it, which a fresh interpreter
shows; ``import parpass`` stays the convenient whole, loaded on first use.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import parpass

PACKAGE = Path(parpass.__file__).resolve().parent

#: The layer of each top-level part of the package (0: what every layer may use).
LAYERS = {"errors": 0, "_loading": 0, "ir": 1, "transform": 2, "instrument": 2, "parallel": 3, "passes": 4}
TOP = 5  # cli, testing, __main__
LIBRARIES = ("loky", "cloudpickle")


def layer_of(module: str) -> int | None:
    """The layer of a ``parpass...`` module (None for anything else)."""
    parts = module.split(".")
    if parts[0] != "parpass":
        return None
    if len(parts) == 1:
        return 0  # the package itself loads nothing (its names come on first use)
    return LAYERS.get(parts[1], TOP)


def imports(path: Path) -> list[tuple[str, int]]:
    """Every module ``path`` imports (names imported from the package itself resolved to their modules)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            # a bare ``import parpass`` is for its names: the whole package
            found += [
                (alias.name if alias.name != "parpass" else "parpass.<whole>", node.lineno) for alias in node.names
            ]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "parpass":
                for alias in node.names:
                    target = parpass._NAMES.get(alias.name)
                    sub = f"parpass.{alias.name}" if alias.name in parpass._SUBMODULES else None
                    found.append((target or sub or "parpass", node.lineno))
            else:
                found.append((node.module, node.lineno))
    return found


def test_no_module_imports_a_layer_above_its_own() -> None:
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        module = ".".join(rel.parts).removesuffix(".__init__")
        if module == "parpass":
            continue  # the convenient whole: it names every layer, for type checkers only
        mine = layer_of(module)
        assert mine is not None
        for target, line in imports(path):
            theirs = layer_of(target)
            if theirs is not None and theirs > mine:
                wrong.append(f"{rel}.py:{line} ({module}, layer {mine}) imports {target} (layer {theirs})")
    assert wrong == []


def loaded_after(code: str) -> list[str]:
    """The parpass modules and process libraries loaded in a fresh interpreter after ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return [m for m in json.loads(out.splitlines()[-1]) if m.startswith(("parpass", *LIBRARIES))]


@pytest.mark.parametrize(
    ("code", "allowed"),
    [
        ("import parpass.ir", ("parpass.ir",)),
        ("import parpass.transform", ("parpass.ir", "parpass.transform", "parpass.instrument")),
        ("import parpass.instrument", ("parpass.ir", "parpass.transform", "parpass.instrument")),
        (
            "import parpass.parallel",
            ("parpass.ir", "parpass.transform", "parpass.instrument", "parpass.parallel", *LIBRARIES),
        ),
    ],
)
def test_importing_a_layer_loads_only_it_and_the_layers_below(code: str, allowed: tuple[str, ...]) -> None:
    base = ("parpass", "parpass._loading", "parpass.errors")
    extra = [m for m in loaded_after(code) if m not in base and not m.startswith(allowed)]
    assert extra == []


def test_import_parpass_ir_loads_no_process_pool() -> None:
    loaded = loaded_after("import parpass.ir")
    assert not [m for m in loaded if m.startswith(("parpass.parallel", *LIBRARIES))]


def test_the_whole_comes_on_first_use() -> None:
    loaded = loaded_after(
        "import parpass\n"
        "parpass.Sequential\n"
        "from parpass.transform import get_function_pass_executor\n"
        "assert type(get_function_pass_executor()).__name__ == 'ParallelExecutor'\n"
        "assert 'FoldConstant' in parpass.list_passes()"
    )
    assert "parpass.parallel" in loaded and "parpass.passes" in loaded


def test_a_lower_layer_alone_still_gets_the_standard_passes_options_and_executor() -> None:
    """A program that imports only the transform layer finds what the registries hold once loaded."""
    loaded_after(
        "from parpass.transform import PassContext, get_function_pass_executor, get_pass\n"
        "get_pass('FoldConstant')\n"
        "PassContext(config={'parpass.num_workers': 2})\n"
        "assert type(get_function_pass_executor()).__name__ == 'ParallelExecutor'"
    )


def test_an_executor_chosen_before_loading_is_kept() -> None:
    loaded_after(
        "from parpass.transform import InlineExecutor, get_function_pass_executor, set_function_pass_executor\n"
        "mine = InlineExecutor()\n"
        "set_function_pass_executor(mine)\n"
        "from parpass.transform import get_pass\n"
        "get_pass('FoldConstant')  # loads the whole package, parallel executor included\n"
        "assert get_function_pass_executor() is mine"
    )
