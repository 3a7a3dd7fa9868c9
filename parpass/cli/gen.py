"""``parpass gen``: write a :func:`~parpass.testing.random_module` to a file (or its text to stdout)."""

from __future__ import annotations

import argparse
from typing import Any

from parpass.cli.common import (
    EXIT_OK,
    UsageError,
    add_common_options,
    check_output_path,
    non_negative_int,
    positive_int,
    write_module,
)

_DESCRIPTION = """\
Write a random but realistic module (parpass.testing.random_module) to OUTPUT, in the format
its extension names (.msgpack, .json, .ppir/.txt text), or as text to stdout. The same
arguments always give the same module, byte for byte.

example:
  parpass gen -o big.msgpack --functions 2000 --seed 1
"""


def add_module_size_options(parser: argparse.ArgumentParser, functions: int) -> None:
    """``--functions``, ``--prim-funcs``, ``--size``, ``--seed`` (shared with ``bench``)."""
    parser.add_argument(
        "--functions",
        type=non_negative_int,
        default=functions,
        metavar="N",
        help=f"dataflow Functions in the module (default {functions})",
    )
    parser.add_argument(
        "--prim-funcs",
        type=non_negative_int,
        default=None,
        metavar="M",
        help="loop-level PrimFuncs (default: half of --functions)",
    )
    parser.add_argument(
        "--size", type=positive_int, default=20, metavar="S", help="typical bindings per function (default 20)"
    )
    parser.add_argument("--seed", type=int, default=0, metavar="K", help="random seed (default 0)")


def make_module(args: argparse.Namespace) -> Any:
    from parpass.testing import random_module

    try:
        return random_module(args.functions, args.prim_funcs, args.size, args.seed)
    except (TypeError, ValueError) as err:
        raise UsageError(str(err)) from err


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "gen",
        help="write a random module to a file",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-o", "--output", metavar="OUTPUT", help="output file (default: text to stdout)")
    add_module_size_options(parser, functions=20)
    add_common_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    check_output_path(args.output)
    write_module(make_module(args), args.output)
    return EXIT_OK
