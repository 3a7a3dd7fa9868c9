"""``parpass``: the command-line driver (``bench``, ``opt``, ``bisect``, ``gen``, ``show``, ``passes``, ``reproduce``).

``main(argv)`` returns the exit status: 0 success, 1 a failed pass, 2 a usage
error, 130 after Ctrl-C and 143 after SIGTERM (the workers killed and the
scratch files removed first). Errors are one line on stderr (``parpass: error: ...``); ``--traceback``
adds the traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import traceback
from collections.abc import Iterator, Sequence
from typing import NoReturn

from parpass.cli import bench, bisect, gen, opt, passes, reproduce, show
from parpass.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Parser, PassFailure, UsageError, error_line
from parpass.errors import IRError, ParpassError

_COMMANDS = (bench, opt, bisect, gen, show, passes, reproduce)

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
    if isinstance(err, PassFailure) and isinstance(cause, IRError):
        listed = str(cause).partition("\n")[2]  # the problems ill-formed IR has (--verify-each), one a line
        if listed:
            print(listed, file=sys.stderr)
    if not show_traceback and isinstance(err, PassFailure):
        print("parpass: (run with --traceback for the traceback)", file=sys.stderr)


#: The exit status after Ctrl-C (128 + 2, as a shell reports a process the signal killed).
EXIT_INTERRUPTED = 128 + signal.SIGINT
#: The exit status after SIGTERM (128 + 15).
EXIT_TERMINATED = 128 + signal.SIGTERM


class Terminated(BaseException):
    """Raised in the ``parpass`` command's main thread on SIGTERM: it unwinds as Ctrl-C does, so that the
    workers are killed and the scratch files removed on the way out (not an ``Exception``: pass code that
    catches those must not swallow it)."""


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt and SIGTERM :class:`Terminated`, once; a repeated signal is ignored.

    The first signal starts the shutdown; a second Ctrl-C (or SIGTERM) must not
    break into the cleanup it runs (killing the workers, removing files), or
    workers and files are left behind and a traceback is printed. Once a signal
    came, the handlers stay ignoring until the process exits. Only the main
    thread can install handlers: elsewhere (``main`` called from a thread) this
    does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    fired: list[int] = []

    def stop(signum: int, frame: object) -> None:
        if fired:
            return
        fired.append(signum)
        raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_IGN if fired else handler)


#: Seconds the ``parpass`` process may take to exit after Ctrl-C or SIGTERM before it leaves without waiting.
EXIT_GRACE = 20.0


def run() -> NoReturn:
    """The ``parpass`` command's entry point: :func:`main`, then exit with its status.

    After Ctrl-C or SIGTERM the workers are killed and the scratch files removed
    before ``main`` returns, and the process exits the usual way (loky releases
    its semaphores). Should that exit hang (the interpreter joins loky's manager
    threads without a limit, and a pool torn down mid-wave once left one
    waiting), a watchdog ends the process after :data:`EXIT_GRACE` seconds with
    the same status: a process the user asked to stop stops.
    """
    status = main()
    if status in (EXIT_INTERRUPTED, EXIT_TERMINATED):
        watchdog = threading.Timer(EXIT_GRACE, os._exit, args=(status,))
        watchdog.daemon = True
        watchdog.start()
    sys.exit(status)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``parpass`` command with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    with _stop_on_signals():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    show_traceback = "--traceback" in args_list
    try:
        try:
            args = parser.parse_args(args_list)
        except SystemExit as done:  # --help and --version
            return int(done.code or 0) if not isinstance(done.code, str) else EXIT_USAGE
        show_traceback = bool(getattr(args, "traceback", False))
        return _dispatch(args)
    except (Exception, KeyboardInterrupt, Terminated) as err:
        return _exit_status(err, show_traceback)


def _dispatch(args: argparse.Namespace) -> int:
    """Run the command ``args`` names, after the built-in passes and the user's ``--load`` code."""
    if args.command is None:
        names = ", ".join(module.__name__.rsplit(".", 1)[1] for module in _COMMANDS)
        raise UsageError(f"no command given; choose one of: {names} (start with 'parpass bench')")
    from parpass.cli.common import import_builtins, load_user_code, one_line_warnings

    import_builtins()  # before user code, which may build on them (and must not register first)
    load_user_code(getattr(args, "load", None))
    with one_line_warnings():
        status: int = args.func(args)
    return status


def _exit_status(err: BaseException, show_traceback: bool) -> int:
    """Report ``err`` on stderr the way its kind is reported, and the exit status it gives."""
    if isinstance(err, PassFailure):
        _report(err, show_traceback)
        return EXIT_FAILED
    if isinstance(err, (UsageError, ParpassError)):
        _report(err, show_traceback)
        return EXIT_USAGE
    if isinstance(err, KeyboardInterrupt):
        print(error_line("interrupted"), file=sys.stderr)
        return EXIT_INTERRUPTED
    if isinstance(err, Terminated):
        print(error_line("terminated"), file=sys.stderr)
        return EXIT_TERMINATED
    if isinstance(err, BrokenPipeError):
        # The reader of our output went away (``parpass show big.msgpack | head``): not an error.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    if show_traceback:
        traceback.print_exception(type(err), err, err.__traceback__, file=sys.stderr)
    detail = str(err).split("\n", 1)[0]
    print(error_line(f"internal error: {type(err).__name__}: {detail}"), file=sys.stderr)
    if not show_traceback:
        print("parpass: (run with --traceback for the traceback)", file=sys.stderr)
    return EXIT_FAILED


if __name__ == "__main__":  # pragma: no cover
    run()
