"""Capture what pass code emits in a worker, and re-emit it in the parent.

Inside a worker, everything a pass prints to ``sys.stdout``/``sys.stderr``, logs
through :mod:`logging` or warns through :mod:`warnings` is recorded as one
ordered list of :class:`Emission`s per function. The parent replays the lists in
module order through its own streams, loggers and warning filters, so the user
sees what a serial run would have shown, in the same order.
"""

from __future__ import annotations

import contextlib
import io
import logging
import pickle
import sys
import warnings
from typing import Any, TextIO

import msgspec


class Emission(msgspec.Struct, frozen=True, array_like=True):
    """One thing pass code emitted: ``kind`` is "stdout", "stderr", "log" or "warning"."""

    kind: str
    text: str = ""
    # log records: logger name, level number, and the pickled, pre-formatted LogRecord
    logger: str = ""
    level: int = 0
    record: bytes = b""
    # warnings: the pickled category (UserWarning if it cannot be pickled), file and line
    category: bytes = b""
    filename: str = ""
    lineno: int = 0


class _StreamRecorder(io.TextIOBase):
    """A text stream that appends what is written to the capture's current emission list."""

    def __init__(self, kind: str, capture: Capture) -> None:
        self._kind = kind
        self._capture = capture

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if text:
            sink = self._capture.sink
            if sink and sink[-1].kind == self._kind:
                sink[-1] = Emission(self._kind, sink[-1].text + text)
            else:
                sink.append(Emission(self._kind, text))
        return len(text)


class _LogRecorder(logging.Handler):
    def __init__(self, capture: Capture) -> None:
        super().__init__(level=1)
        self._capture = capture

    def emit(self, record: logging.LogRecord) -> None:
        # Ship a self-contained record: message formatted, exception rendered as text.
        record.msg = record.getMessage()
        record.args = None
        if record.exc_info:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
        try:
            data = pickle.dumps(record)
        except Exception:
            plain = logging.makeLogRecord({k: v for k, v in record.__dict__.items() if _plain(v)})
            data = pickle.dumps(plain)
        self._capture.sink.append(Emission("log", logger=record.name, level=record.levelno, record=data))


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool, tuple))


class Capture:
    """Redirects stdout, stderr, logging and warnings, while entered, into :attr:`sink`.

    Enter it once around many pass calls and give each call its own list with
    :meth:`begin`: redirecting is set up once, so a function costs one list.
    """

    def __init__(self) -> None:
        self.sink: list[Emission] = []
        self._stack = contextlib.ExitStack()

    def begin(self) -> list[Emission]:
        """Start a new emission list (the previous one is left to its owner) and return it."""
        self.sink = []
        return self.sink

    def __enter__(self) -> Capture:
        stack = self._stack
        root = logging.getLogger()
        saved_handlers, saved_level = root.handlers[:], root.level
        root.handlers = [_LogRecorder(self)]
        root.setLevel(1)

        def restore_logging() -> None:
            root.handlers = saved_handlers
            root.setLevel(saved_level)

        stack.callback(restore_logging)
        stack.enter_context(contextlib.redirect_stdout(_StreamRecorder("stdout", self)))
        stack.enter_context(contextlib.redirect_stderr(_StreamRecorder("stderr", self)))
        stack.enter_context(warnings.catch_warnings())
        warnings.simplefilter("always")
        warnings.showwarning = self._record_warning
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _record_warning(
        self,
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        try:
            cat = pickle.dumps(category)
        except Exception:
            cat = pickle.dumps(UserWarning)
        self.sink.append(Emission("warning", str(message), category=cat, filename=filename, lineno=lineno))


#: Per-file warning registries, so the parent's "default"/"once" filters dedupe per location as serially.
_WARNING_REGISTRIES: dict[str, dict[Any, Any]] = {}


def replay(emissions: list[Emission]) -> None:
    """Re-emit ``emissions`` in the calling (parent) process, in order."""
    for em in emissions:
        if em.kind == "stdout":
            sys.stdout.write(em.text)
        elif em.kind == "stderr":
            sys.stderr.write(em.text)
        elif em.kind == "log":
            logger = logging.getLogger(em.logger) if em.logger != "root" else logging.getLogger()
            if logger.isEnabledFor(em.level):
                logger.handle(pickle.loads(em.record))
        elif em.kind == "warning":
            try:
                category = pickle.loads(em.category)
            except Exception:
                category = UserWarning
            registry = _WARNING_REGISTRIES.setdefault(em.filename, {})
            warnings.warn_explicit(em.text, category, em.filename, em.lineno, registry=registry)
    if emissions:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
