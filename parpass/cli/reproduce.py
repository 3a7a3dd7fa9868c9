"""``parpass reproduce``: re-run a crash reproducer in-process and say whether the failure is still there.

The reproduction runs in a child process (``parpass reproduce --in-process``),
so that a pass that kills its process (a segfault, ``os._exit``) is reported
with its exit code instead of taking the command down with it. Exit status: 1
if the failure reproduces, 0 if it does not, 2 if the file is not a reproducer.
"""

from __future__ import annotations

import argparse
import dataclasses
import signal
import subprocess
import sys
import traceback
from typing import Any

from parpass.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    add_common_options,
    describe_failure,
    first_line,
)
from parpass.errors import IRFormatError

_DESCRIPTION = """\
Re-run a crash reproducer (written by 'parpass opt --reproducer FILE' or by the
config option parpass.reproducer) in-process, on the functions that failed, and say
whether the failure is still there. Exit status 1 if it reproduces, 0 if not.
Give the same --load options as the failing run if the passes are your own.

examples:
  parpass reproduce crash.repro
  parpass reproduce crash.repro --load mypasses.py --traceback
"""

#: Config options that must not carry over into a re-run: it is in-process and must not overwrite the file.
_OVERRIDES = {"parpass.num_workers": 1, "parpass.reproducer": ""}


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "reproduce",
        help="re-run a crash reproducer and say whether it still fails",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("file", metavar="FILE", help="reproducer file")
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run the passes in this process instead of a child process (a crash then ends this command)",
    )
    add_common_options(parser)
    parser.set_defaults(func=run)


def load(path: str) -> Any:
    """The reproducer in ``path``; UsageError naming the file when it cannot be read."""
    import os

    from parpass.parallel.reproducer import load_reproducer

    if not os.path.exists(path):
        raise UsageError(f"{path}: no such file")
    if os.path.isdir(path):
        raise UsageError(f"{path}: is a directory, not a reproducer")
    try:
        return load_reproducer(path)
    except IRFormatError as err:
        message = first_line(str(err))
        raise UsageError(message if path in message else f"{path}: {message}") from err
    except (ModuleNotFoundError, AttributeError) as err:
        raise UsageError(
            f"{path}: the reproducer's passes refer to code that is not loaded ({err}); "
            "give the --load options of the failing run"
        ) from err
    except OSError as err:
        raise UsageError(f"{path}: cannot read: {err.strerror or err}") from err
    except Exception as err:
        raise UsageError(f"{path}: not a readable parpass reproducer ({type(err).__name__}: {err})") from err


def _summary(path: str, repro: Any) -> str:
    names = [getattr(getattr(p, "info", None), "name", type(p).__name__) for p in repro.passes]
    config = dict(getattr(repro.context, "config", ()))
    lines = [
        f"reproducer {path}",
        f"  failure:   {first_line(repro.message)}",
        f"  passes:    {', '.join(names) or '(none)'}",
        f"  functions: {', '.join(repro.functions) if repro.functions else f'all ({len(repro.module)})'}",
    ]
    shown = {k: v for k, v in config.items() if k not in _OVERRIDES}
    if shown:
        lines.append("  config:    " + ", ".join(f"{k}={v!r}" for k, v in sorted(shown.items())))
    return "\n".join(lines)


def _in_process_context(snapshot: Any) -> Any:
    config = dict(snapshot.config)
    config.update(_OVERRIDES)
    return dataclasses.replace(snapshot, config=tuple(sorted(config.items())))


def reproduce_in_process(repro: Any) -> BaseException | None:
    """Run the reproducer's passes in this process; the exception they raise, or None.

    Function-level passes run on the failing functions only (as
    :func:`parpass.parallel.reproduce` does); a pipeline or module pass runs on
    the whole module.
    """
    from parpass.parallel.reproducer import reproduce
    from parpass.transform import PassContext
    from parpass.transform.passes import FunctionLevelPass

    repro = dataclasses.replace(repro, context=_in_process_context(repro.context))
    if all(isinstance(p, FunctionLevelPass) for p in repro.passes):
        return reproduce(repro)
    mod = repro.module
    try:
        with PassContext.from_snapshot(repro.context):
            for p in repro.passes:
                mod = p(mod)
    except Exception as err:
        return err
    return None


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def run(args: argparse.Namespace) -> int:
    repro = load(args.file)
    if args.in_process:
        error = reproduce_in_process(repro)
        if error is None:
            print("not reproduced: the passes ran without error")
            return EXIT_OK
        if args.traceback:
            traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)
        print(f"reproduced: {describe_failure(error)}")
        return EXIT_FAILED
    print(_summary(args.file, repro), flush=True)
    command = [sys.executable, "-m", "parpass", "reproduce", "--in-process", args.file]
    for item in args.load:
        command += ["--load", item]
    if args.traceback:
        command.append("--traceback")
    child = subprocess.run(command, check=False)
    code = child.returncode
    if code in (EXIT_OK, EXIT_FAILED, EXIT_USAGE):  # the child printed what happened
        return code
    how = f"killed by {_signal_name(code)}" if code < 0 else f"exited with status {code}"
    print(f"reproduced: the process running the passes {how}")
    return EXIT_FAILED
