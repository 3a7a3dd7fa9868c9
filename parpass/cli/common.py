"""Helpers shared by the commands of ``parpass``: errors and exit codes, user code, files, config, contexts.

Exit status (the convention of compiler drivers): 0 success, 1 a pass failed
(or ``bench`` found outputs that differ), 2 a usage error (bad arguments, bad
or unreadable files, unknown pass, bad option, bad config). Errors are printed
on stderr as ``parpass: error: ...``.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import json
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, NoReturn

from parpass.errors import IRFormatError, ParpassError, suggestion
from parpass.ir.module import IRModule
from parpass.ir.node import BaseFunc
from parpass.transform import Pass, PassContext, Sequential, get_config_option, list_passes, walk_passes
from parpass.transform.passes import NOTE_PREFIX
from parpass.transform.registry import PASS_LISTING

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class UsageError(ParpassError, ValueError):
    """Bad command-line input: exit status 2. ``caret`` (optional) is printed below the error line."""

    def __init__(self, message: str, caret: str | None = None) -> None:
        super().__init__(message)
        self.caret = caret


def _file_error(path: str, err: BaseException) -> UsageError:
    """A UsageError naming ``path`` for an error reading it; extra lines (a parser's caret) kept aside."""
    head, _, rest = str(err).strip().partition("\n")
    message = head if path in head else f"{path}: {head}"
    return UsageError(message, rest.rstrip() or None)


class PassFailure(ParpassError, RuntimeError):
    """A pass (or the pipeline) raised while running: exit status 1; ``error`` is what it raised."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(describe_failure(error))
        self.error = error


class Parser(argparse.ArgumentParser):
    """argparse with parpass's error line (``parpass: error: ...``) and no SystemExit from ``error``."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


# ---------------------------------------------------------------------------------------------------------------------
# messages


def error_line(message: str) -> str:
    return f"parpass: error: {message}"


def pass_note(error: BaseException) -> tuple[str | None, str | None]:
    """``(pass name, function name)`` from the note parpass attaches to an exception raised in a pass."""
    for note in getattr(error, "__notes__", None) or ():
        if isinstance(note, str) and note.startswith(NOTE_PREFIX):
            rest = note[len(NOTE_PREFIX) :]
            m = re.fullmatch(r"(.+?)(?: on function (.+))?", rest, re.S)
            if m is None:
                break
            try:
                pass_name = ast.literal_eval(m.group(1))
                func = ast.literal_eval(m.group(2)) if m.group(2) else None
            except (ValueError, SyntaxError):
                break
            return (str(pass_name), None if func is None else str(func))
    return None, None


@contextlib.contextmanager
def one_line_warnings() -> Iterator[None]:
    """Warnings shown as ``parpass: warning: ...`` on one line of stderr, like the command's errors.

    Python's default display adds the file, the line and its source: noise to a
    user of the command, who did not write the line that warns.
    """

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: IO[str] | None = None,
        line: str | None = None,
    ) -> None:
        print(f"parpass: warning: {first_line(str(message))}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


def first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0] if text.strip() else ""


def describe_failure(error: BaseException) -> str:
    """One line: which pass failed on which function, and the exception."""
    from parpass.errors import ParallelExecutionError

    pass_name, func = pass_note(error)
    detail = first_line(str(error))
    what = f"{type(error).__name__}: {detail}" if detail else type(error).__name__
    if isinstance(error, ParallelExecutionError):
        return detail or what
    if pass_name is not None:
        where = f"pass {pass_name!r}" + (f" failed on function {func!r}" if func else " failed")
        return f"{where}: {what}"
    return f"the pipeline failed: {what}"


# ---------------------------------------------------------------------------------------------------------------------
# argument types


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def bisect_limit(text: str) -> int:
    """An opt-bisect limit: -1 (number nothing) or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer of at least -1, got {text!r}") from None
    if value < -1:
        raise argparse.ArgumentTypeError(f"expected an integer of at least -1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {value}")
    return value


#: The opt levels the commands take (TVM's, as ``tvmc --opt-level`` takes them); a Sequential skips passes above it.
OPT_LEVELS = range(4)


def opt_level(text: str) -> int:
    """An ``--opt-level`` value: an integer from 0 to 3."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an opt_level from 0 to 3, got {text!r}") from None
    if value not in OPT_LEVELS:
        raise argparse.ArgumentTypeError(f"expected an opt_level from 0 to 3, got {value}")
    return value


def split_names(values: Iterable[str] | None) -> list[str]:
    """Comma lists (the option may also be repeated) as one list of non-empty names, in order, without repeats."""
    out: list[str] = []
    for value in values or ():
        for part in value.split(","):
            name = part.strip()
            if name and name not in out:
                out.append(name)
    return out


def pipeline_names(p: Pass) -> list[str]:
    """Names of ``p`` and every pass inside it (Sequentials included), in order."""
    return [q.info.name for q in walk_passes(p)]


def build_pipeline(spec: str, option: str) -> Pass:
    """The pipeline ``spec`` describes; a UsageError naming ``option`` when it holds no pass (it would run nothing)."""
    from parpass.transform import parse_pipeline

    pipeline = parse_pipeline(spec)
    if all(isinstance(p, Sequential) for p in walk_passes(pipeline)):
        raise UsageError(f"{option} {spec!r}: empty pipeline spec, it names no pass ('parpass passes' lists them)")
    return pipeline


def check_pass_names(names: Sequence[str], option: str, pipeline: Pass | None = None) -> list[str]:
    """``names`` if each is a registered pass or a pass of ``pipeline``; else a UsageError naming the closest."""
    known = list(dict.fromkeys([*list_passes(), *(pipeline_names(pipeline) if pipeline is not None else [])]))
    for name in names:
        if name not in known:
            raise UsageError(f"{option}: unknown pass {name!r}; {suggestion(name, known, PASS_LISTING)}")
    return list(names)


# ---------------------------------------------------------------------------------------------------------------------
# user code


def import_builtins() -> None:
    """Register the standard passes (``parpass.passes``) and the ``.ppir`` text format (``parpass.ir.parser``)."""
    for module, what in (("parpass.passes", "the standard passes"), ("parpass.ir.parser", "the .ppir text format")):
        try:
            importlib.import_module(module)
        except ImportError as err:  # a broken installation: say so, but let what does not need it work
            print(f"parpass: warning: {what} cannot be imported: {err}", file=sys.stderr)


def load_user_code(items: Sequence[str] | None) -> None:
    """Import each ``--load`` item: a Python file (``passes.py``) or a module name (``mypkg.passes``).

    A file is imported as a module named after it, with its directory put on
    ``sys.path`` and ``PYTHONPATH``, so that worker processes and reproducers
    import the passes it defines by the same name.
    """
    for item in items or ():
        path = Path(item)
        is_file = item.endswith(".py") or os.sep in item or (os.altsep is not None and os.altsep in item)
        try:
            if is_file or path.is_file():
                _load_file(item, path)
            else:
                importlib.import_module(item)
        except UsageError:
            raise
        except ModuleNotFoundError as err:
            if err.name == item:
                raise UsageError(f"--load {item}: no such file or importable module") from err
            raise UsageError(f"--load {item}: {type(err).__name__}: {err}") from err
        except Exception as err:
            raise UsageError(
                f"--load {item}: importing it raised {type(err).__name__}: {first_line(str(err))}"
            ) from err


def _load_file(item: str, path: Path) -> None:
    if not path.is_file():
        raise UsageError(f"--load {item}: no such file")
    if path.suffix != ".py":
        raise UsageError(f"--load {item}: not a Python file (expected a .py file or a module name)")
    name = path.stem
    if not name.isidentifier():
        raise UsageError(f"--load {item}: {name!r} is not a valid module name; rename the file")
    resolved = path.resolve()
    existing = sys.modules.get(name)
    if existing is not None:
        existing_file = getattr(existing, "__file__", None)
        if existing_file and Path(existing_file).resolve() == resolved:
            return
        raise UsageError(
            f"--load {item}: a different module named {name!r} is already imported "
            f"({existing_file or 'built in'}); rename the file"
        )
    directory = str(resolved.parent)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if directory not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([directory, *parts])
    importlib.import_module(name)


# ---------------------------------------------------------------------------------------------------------------------
# config


def parse_config(items: Sequence[str] | None) -> dict[str, Any]:
    """``KEY=VALUE`` items, VALUE read as JSON when it is JSON (else as a string), validated by the registry."""
    out: dict[str, Any] = {}
    for item in items or ():
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--config {item!r}: expected KEY=VALUE")
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        try:
            out[key] = get_config_option(key).validate(value)
        except (ParpassError, KeyError, TypeError, ValueError) as err:
            raise UsageError(f"--config {item}: {first_line(str(err))}") from err
    return out


def make_context(
    opt_level: int = 2,
    required: Sequence[str] = (),
    disabled: Sequence[str] = (),
    instruments: Sequence[Any] = (),
    config: dict[str, Any] | None = None,
) -> PassContext:
    try:
        return PassContext(
            opt_level=opt_level,
            required_pass=list(required),
            disabled_pass=list(disabled),
            instruments=list(instruments),
            config=config or {},
        )
    except (ParpassError, KeyError, TypeError, ValueError) as err:
        raise UsageError(first_line(str(err))) from err


# ---------------------------------------------------------------------------------------------------------------------
# files


def read_module(path: str, config: Mapping[str, Any] | None = None) -> IRModule:
    """The module in ``path`` (a file holding one function becomes a module with that function).

    With ``config``, the PassContext config of the pipeline run it is read for, a big file is checked
    mostly by that run's workers (:func:`~parpass.parallel.preload.load_for_workers`).
    """
    from parpass.ir.serialization import load

    if not os.path.exists(path):
        raise UsageError(f"{path}: no such file")
    if os.path.isdir(path):
        raise UsageError(f"{path}: is a directory, not a module file")
    try:
        if config is None:
            obj = load(path)
        else:
            from parpass.parallel.preload import load_for_workers

            obj = load_for_workers(path, config)
    except (IRFormatError, ValueError, TypeError, RecursionError) as err:  # the text parser's carry line and column
        raise _file_error(path, err) from err
    except OSError as err:
        raise UsageError(f"{path}: cannot read: {err.strerror or err}") from err
    if isinstance(obj, BaseFunc):
        name = obj.attrs.get("global_symbol") if isinstance(obj.attrs.get("global_symbol"), str) else "main"
        return IRModule({str(name): obj})
    if not isinstance(obj, IRModule):
        raise UsageError(f"{path}: holds a {type(obj).__name__}, not a module")
    return obj


def module_text(mod: IRModule | BaseFunc) -> str:
    """The text form, ending with exactly one newline."""
    from parpass.ir.printer import astext

    return astext(mod).rstrip("\n") + "\n"


@contextlib.contextmanager
def atomic_output(path: str, mode: str = "wb") -> Iterator[IO[Any]]:
    """A file opened for writing whose content replaces ``path`` only if the block succeeds."""
    target = os.path.abspath(path)
    directory = os.path.dirname(target)
    if not os.path.isdir(directory):
        raise UsageError(f"{path}: cannot write: directory {directory} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=directory)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; an output file gets the usual permissions
        with open(fd, mode, encoding=None if "b" in mode else "utf-8") as handle:
            yield handle
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def output_format(path: str) -> str:
    """The registered file format (its extension) an output path names; UsageError if none does.

    The same table (:data:`parpass.ir.serialization.FORMATS`) that ``load`` reads
    with, so that every file parpass writes reads back.
    """
    from parpass.ir.serialization import FORMATS

    ext = Path(path).suffix.lower()
    if ext in FORMATS:
        return ext
    supported = ", ".join(sorted(FORMATS))
    what = f"extension {ext!r}" if ext else "no extension"
    raise UsageError(f"{path}: unsupported output format ({what}); supported extensions: {supported}")


def write_module(mod: IRModule, path: str | None, stdout: IO[str] | None = None) -> None:
    """Write ``mod`` to ``path`` in the format its extension names (atomically); text to stdout if no path or ``-``."""
    from parpass.ir.serialization import FORMATS

    if path is None or path == "-":
        out = stdout if stdout is not None else sys.stdout
        out.write(module_text(mod))
        out.flush()
        return
    writer, _ = FORMATS[output_format(path)]
    try:
        data = writer(mod)
        with atomic_output(path, "wb") as handle:
            handle.write(data)
    except OSError as err:
        raise UsageError(f"{path}: cannot write: {err.strerror or err}") from err


def make_output_dir(path: str, option: str) -> None:
    """Create directory ``path`` (for files written while passes run) now, or a UsageError naming ``option``."""
    try:
        os.makedirs(path, exist_ok=True)
    except FileExistsError:
        raise UsageError(f"{option} {path}: exists and is not a directory") from None
    except OSError as err:
        raise UsageError(f"{option} {path}: cannot create the directory: {err.strerror or err}") from err
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path}: the directory is not writable")


def check_parent_dir(path: str, option: str) -> None:
    """Fail early when the directory ``path`` would be written in does not exist (``option`` names the flag)."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise UsageError(f"{option} {path}: directory {directory} does not exist")


def check_output_path(path: str | None) -> None:
    """Fail early (before any work) when ``path`` cannot be written in a known format."""
    if path is None or path == "-":
        return
    output_format(path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise UsageError(f"{path}: cannot write: directory {directory} does not exist")
    if os.path.isdir(path):
        raise UsageError(f"{path}: is a directory")


# ---------------------------------------------------------------------------------------------------------------------
# commands


def add_common_options(parser: argparse.ArgumentParser) -> None:
    """``--load`` and ``--traceback``, which every command takes."""
    parser.add_argument(
        "--load",
        action="append",
        default=[],
        metavar="MODULE_OR_FILE",
        help="import a Python file or module first (to register your own passes); may be repeated",
    )
    parser.add_argument("--traceback", action="store_true", help="print the full traceback of an error")


def add_config_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a PassContext config option (VALUE is JSON, else a string), e.g. parpass.timeout=30; may be repeated",
    )


Command = Callable[[argparse.Namespace], int]
