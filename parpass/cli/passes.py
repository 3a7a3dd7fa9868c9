"""``parpass passes``: the registered passes, with their kind, opt_level and options (``list_passes()`` on the CLI)."""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from typing import Any, cast

from parpass.cli.common import EXIT_OK, add_common_options, first_line
from parpass.transform import FunctionPass, ModulePass, Pass, PrimFuncPass, Sequential, list_passes
from parpass.transform.config import type_name
from parpass.transform.registry import get_pass_factory

_DESCRIPTION = """\
List the registered passes (the standard ones, and yours with --load): each pass's name,
kind (function: runs on each dataflow Function; prim_func: on each loop-level PrimFunc;
module: on the whole module, in-process; sequential: a pipeline), opt_level (a Sequential
skips the pass when the PassContext's opt_level is below it) and the options a pipeline
spec may give it (NAME{option=value}), with their types and defaults.

examples:
  parpass passes
  parpass passes --load mypasses.py --json
"""


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "passes",
        help="list the registered passes, their opt_level and options",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    add_common_options(parser)
    parser.set_defaults(func=run)


def _kind(p: Pass) -> str:
    if isinstance(p, Sequential):
        return "sequential"
    if isinstance(p, PrimFuncPass):
        return "prim_func"
    if isinstance(p, FunctionPass):
        return "function"
    if isinstance(p, ModulePass):
        return "module"
    return type(p).__name__


def _options(factory: Any) -> list[dict[str, Any]]:
    """The keyword options of a pass factory: name, type (when annotated or defaulted) and default."""
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return []
    out: list[dict[str, Any]] = []
    for param in params:
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            out.append({"name": f"**{param.name}", "type": None, "default": None})
            continue
        if param.kind not in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
            continue
        has_default = param.default is not inspect.Parameter.empty
        if param.annotation is not inspect.Parameter.empty and not isinstance(param.annotation, str):
            shown: str | None = type_name(param.annotation)
        elif isinstance(param.annotation, str):
            shown = param.annotation
        else:
            shown = type(param.default).__name__ if has_default and param.default is not None else None
        out.append({"name": param.name, "type": shown, "default": param.default if has_default else None})
    return out


def describe(name: str) -> dict[str, Any]:
    """What ``parpass passes`` says of the registered pass ``name`` (a pass whose factory fails says why)."""
    factory = get_pass_factory(name)
    entry: dict[str, Any] = {"name": name, "kind": None, "opt_level": None, "options": _options(factory)}
    entry["doc"] = first_line(inspect.getdoc(factory) or "")
    try:
        p = factory() if factory is not None else None
    except Exception as err:  # a broken user factory: list it, and say what it raised
        entry["error"] = f"{type(err).__name__}: {first_line(str(err))}"
        return entry
    if isinstance(p, Pass):
        entry["kind"] = _kind(p)
        entry["opt_level"] = p.info.opt_level
    return entry


def _option_text(option: dict[str, Any]) -> str:
    if option["name"].startswith("**"):
        return cast(str, option["name"])
    text = option["name"] + (f": {option['type']}" if option["type"] else "")
    return cast(str, text + f" = {option['default']!r}")


def render(entries: list[dict[str, Any]]) -> str:
    header = ["pass", "kind", "opt_level", "options"]
    rows = [
        [
            e["name"],
            e["kind"] or "?",
            "?" if e["opt_level"] is None else str(e["opt_level"]),
            f"(its factory raised {e['error']})" if "error" in e else ", ".join(map(_option_text, e["options"])),
        ]
        for e in entries
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]

    def line(cells: list[str]) -> str:
        return "  ".join([*(cells[i].ljust(widths[i]) for i in range(3)), cells[3]]).rstrip()

    return "\n".join([line(header), "-" * len(line(header)), *map(line, rows)]) + "\n"


def run(args: argparse.Namespace) -> int:
    entries = [describe(name) for name in list_passes()]
    if args.json:
        json.dump(entries, sys.stdout, indent=2, default=repr)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render(entries))
    return EXIT_OK
