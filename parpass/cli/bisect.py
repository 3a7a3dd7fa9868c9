"""``parpass bisect``: find the pass application that breaks a module (opt-bisect, automated)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from parpass.cli.common import EXIT_FAILED, EXIT_OK, UsageError, add_common_options, output_format, read_module
from parpass.cli.opt import add_pipeline_options, pipeline_settings
from parpass.ir.module import IRModule
from parpass.transform.bisect import BISECT_LIMIT, BISECT_PRINT

_DESCRIPTION = """\
Find the first pass application of a pipeline after which a check fails, in O(log n) runs of
the pipeline under --opt-bisect-limit (a module pass is one application, a function-level
pass one per function, numbered as 'parpass opt --opt-bisect-limit' prints them). Prints
that pass, that function, and the function before and after it.

The check, by default: every function computes on random inputs what it computed in INPUT
(the reference interpreter). With --check CMD: the shell command CMD, run on each result
written to a file (its path replaces {module} in CMD, or is appended; also in
$PARPASS_BISECT_MODULE), must exit 0 on a good module. A pipeline run that raises is bad.

exit status: 0 the first bad application was found; 1 nothing to find (the check passes
with every application, or fails with none); 2 a usage error.

examples:
  parpass bisect model.msgpack
  parpass bisect model.msgpack -p 'FoldConstant,MyPass' --load mypasses.py --workers 2
  parpass bisect model.msgpack --check 'python check.py {module}'
"""


#: Functions a module-level application changed that are shown before and after.
_SHOWN = 3


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "bisect",
        help="find the pass application that breaks a module",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("input", metavar="INPUT", help="module file (.msgpack, .json, or the text format)")
    add_pipeline_options(parser)
    parser.add_argument(
        "--check",
        metavar="CMD",
        help="a shell command that exits 0 on a good module (default: the reference interpreter compares "
        "every function with INPUT's)",
    )
    parser.add_argument(
        "--check-format",
        metavar="EXT",
        help="the format of the file --check reads, as an extension: .msgpack, .json or .ppir (default: INPUT's)",
    )
    parser.add_argument("--seed", type=int, default=0, metavar="K", help="the interpreter check's inputs (default 0)")
    parser.add_argument(
        "--rtol", type=float, default=0.0, metavar="X", help="the interpreter check's relative tolerance on floats"
    )
    parser.add_argument(
        "--atol", type=float, default=0.0, metavar="X", help="the interpreter check's absolute tolerance on floats"
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="do not print each run on stderr")
    add_common_options(parser)
    parser.set_defaults(func=run)


def _suffix(args: argparse.Namespace) -> str:
    """The extension of the files the check command reads: --check-format's, else the input's."""
    if args.check_format is None:
        try:
            return output_format(args.input)
        except UsageError:
            return ".msgpack"
    ext = "." + args.check_format.lstrip(".")
    try:
        return output_format("module" + ext)
    except UsageError as err:
        raise UsageError(f"--check-format {args.check_format}: {str(err).partition(': ')[2] or err}") from None


def _function_text(mod: IRModule | None, name: str) -> str:
    from parpass.ir.printer import astext

    if mod is None:
        return "(no module: the pipeline raised)\n"
    if name not in mod:
        return "(not in the module)\n"
    return astext(mod[name], name=name).rstrip("\n") + "\n"


def _changed(before: IRModule, after: IRModule | None) -> list[str]:
    """The functions a module-level application added, removed or changed, in module order."""
    if after is None:
        return []
    names = list(dict.fromkeys([*before.names(), *after.names()]))
    return [
        n
        for n in names
        if n not in before or n not in after or bytes(before.encoded_buffer(n)) != bytes(after.encoded_buffer(n))
    ]


def run(args: argparse.Namespace) -> int:
    from parpass.testing.bisect import EVERYTHING, CommandCheck, MeaningCheck, bisect_pipeline, worker_settings

    pipeline, required, disabled, config = pipeline_settings(args)
    for key in (BISECT_LIMIT, BISECT_PRINT):
        if key in config:
            raise UsageError(f"--config {key}: bisect sets it itself")
    mod = read_module(args.input)
    check = (
        CommandCheck(args.check, _suffix(args))
        if args.check is not None
        else MeaningCheck(mod, args.seed, args.rtol, args.atol, config=worker_settings(config))
    )
    err = sys.stderr

    def progress(limit: int, good: bool, seconds: float) -> None:
        if not args.quiet:
            shown = "all" if limit >= EVERYTHING else str(limit)
            err.write(f"parpass bisect: limit {shown}: {'good' if good else 'bad'} ({seconds:.2f}s)\n")
            err.flush()

    report = bisect_pipeline(
        mod,
        pipeline,
        check,
        opt_level=args.opt_level,
        required_pass=required,
        disabled_pass=disabled,
        config=config,
        progress=progress,
    )
    out = sys.stdout
    summary = f"{report.applications} pass applications; {report.runs} pipeline runs in {report.seconds:.1f}s"
    if report.first_bad is None:
        if report.fails_from_start:
            out.write(f"parpass bisect: the check fails with no pass applied ({summary}): {report.reason}\n")
        else:
            out.write(f"parpass bisect: the check passes with every pass applied ({summary}); nothing to find\n")
        return EXIT_FAILED
    bad = report.first_bad
    out.write(f"parpass bisect: {summary}\n")
    target = "the module" if bad.function is None else f"function {bad.function!r}"
    out.write(f"first bad application: ({bad.number}) {bad.pass_name} on {target}\n")
    out.write(f"check: {report.reason}\n")
    out.write(f"to see it: the same pipeline under --opt-bisect-limit {bad.number} (bad) and {bad.number - 1} (good)\n")
    assert report.before is not None
    names = [bad.function] if bad.function is not None else _changed(report.before, report.after)
    if len(names) > _SHOWN:
        out.write(f"the module pass changed {len(names)} functions; the first {_SHOWN}, in module order:\n")
        names = names[:_SHOWN]
    for name in names:
        out.write(f"\n--- function {name!r} before application {bad.number}\n")
        out.write(_function_text(report.before, name))
        out.write(f"+++ function {name!r} after application {bad.number}\n")
        out.write(_function_text(report.after, name))
    return EXIT_OK
