"""``parpass show``: print a module file (any supported format) as text."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from parpass.cli.common import EXIT_OK, UsageError, add_common_options, module_text, read_module, split_names
from parpass.errors import closest_names, format_names

_DESCRIPTION = """\
Print a module file (.msgpack, .json, or the text format) as text on stdout.

examples:
  parpass show module.msgpack
  parpass show module.msgpack -f main,helper
"""


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "show",
        help="print a module file as text",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("file", metavar="FILE", help="module file")
    parser.add_argument(
        "-f",
        "--function",
        action="append",
        default=[],
        metavar="NAMES",
        help="print only these functions (comma list; may be repeated)",
    )
    add_common_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    mod = read_module(args.file)
    names = split_names(args.function)
    if not names:
        sys.stdout.write(module_text(mod))
        return EXIT_OK
    known = mod.names()
    for name in names:
        if name not in mod:
            near = closest_names(name, known, limit=5)
            raise UsageError(f"{args.file}: no function named {name!r}; closest: {format_names(near, len(known))}")
    from parpass.ir.printer import astext

    texts = [astext(mod[name], name=name).rstrip("\n") for name in names]
    sys.stdout.write("\n\n".join(texts) + "\n")
    return EXIT_OK
