"""``parpass``: the command-line driver (``bench``, ``opt``, ``gen``, ``show``, ``reproduce``).

``main(argv)`` returns the exit status: 0 success, 1 a failed pass, 2 a usage
error. Errors are one line on stderr (``parpass: error: ...``); ``--traceback``
adds the traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence

from parpass.cli import bench, gen, opt, passes, reproduce, show
from parpass.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Parser, PassFailure, UsageError, error_line
from parpass.errors import ParpassError

_COMMANDS = (bench, opt, gen, show, passes, reproduce)

_EPILOG = """\
exit status: 0 success, 1 a pass failed, 2 a usage error.
Run 'parpass COMMAND --help' for the options of a command; start with 'parpass bench'.
"""


def build_parser() -> argparse.ArgumentParser:
    from parpass import __version__

    parser = Parser(
        prog="parpass",
        description="A TVM-style pass infrastructure whose function-level passes run on every core.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"parpass {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for module in _COMMANDS:
        module.add_parser(subparsers)
    return parser


def _report(err: BaseException, show_traceback: bool) -> None:
    cause: BaseException = err.error if isinstance(err, PassFailure) else err
    if show_traceback:
        traceback.print_exception(type(cause), cause, cause.__traceback__, file=sys.stderr)
    text = str(err)
    head = text.partition("\n")[0]
    print(error_line(head), file=sys.stderr)
    caret = getattr(err, "caret", None) or getattr(getattr(err, "__cause__", None), "caret", None)
    if isinstance(caret, str):
        print(caret, file=sys.stderr)
    if not show_traceback and isinstance(err, PassFailure):
        print("parpass: (run with --traceback for the traceback)", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``parpass`` command with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    show_traceback = "--traceback" in args_list
    try:
        try:
            args = parser.parse_args(args_list)
        except SystemExit as done:  # --help and --version
            return int(done.code or 0) if not isinstance(done.code, str) else EXIT_USAGE
        if args.command is None:
            names = ", ".join(module.__name__.rsplit(".", 1)[1] for module in _COMMANDS)
            raise UsageError(f"no command given; choose one of: {names} (start with 'parpass bench')")
        show_traceback = bool(getattr(args, "traceback", False))
        from parpass.cli.common import import_builtins, load_user_code, one_line_warnings

        import_builtins()  # before user code, which may build on them (and must not register first)
        load_user_code(getattr(args, "load", None))
        with one_line_warnings():
            status: int = args.func(args)
        return status
    except PassFailure as err:
        _report(err, show_traceback)
        return EXIT_FAILED
    except (UsageError, ParpassError) as err:
        _report(err, show_traceback)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(error_line("interrupted"), file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of our output went away (``parpass show big.msgpack | head``): not an error.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except Exception as err:
        if show_traceback:
            traceback.print_exception(type(err), err, err.__traceback__, file=sys.stderr)
        detail = str(err).split("\n", 1)[0]
        print(error_line(f"internal error: {type(err).__name__}: {detail}"), file=sys.stderr)
        if not show_traceback:
            print("parpass: (run with --traceback for the traceback)", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
