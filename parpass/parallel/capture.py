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
from collections.abc import Iterator
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
    """A text stream that appends what is written to the shared emission list."""

    def __init__(self, kind: str, sink: list[Emission]) -> None:
        self._kind = kind
        self._sink = sink

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if text:
            sink = self._sink
            if sink and sink[-1].kind == self._kind:
                sink[-1] = Emission(self._kind, sink[-1].text + text)
            else:
                sink.append(Emission(self._kind, text))
        return len(text)


class _LogRecorder(logging.Handler):
    def __init__(self, sink: list[Emission]) -> None:
        super().__init__(level=1)
        self._sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        # Ship a self-contained record: message formatted, exception rendered as text.
        record.msg = record.getMessage()
        record.args = None
        if record.exc_info:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
        record.stack_info = record.stack_info
        try:
            data = pickle.dumps(record)
        except Exception:
            plain = logging.makeLogRecord({k: v for k, v in record.__dict__.items() if _plain(v)})
            data = pickle.dumps(plain)
        self._sink.append(Emission("log", logger=record.name, level=record.levelno, record=data))


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool, tuple))


class Capture:
    """Records emissions of the code run inside :meth:`recording`; reusable per function."""

    def __init__(self) -> None:
        self.emissions: list[Emission] = []

    @contextlib.contextmanager
    def recording(self) -> Iterator[list[Emission]]:
        """Redirect stdout, stderr, logging and warnings into a fresh emission list."""
        sink: list[Emission] = []
        self.emissions = sink
        root = logging.getLogger()
        handler = _LogRecorder(sink)
        saved_handlers, saved_level = root.handlers[:], root.level
        root.handlers = [handler]
        root.setLevel(1)
        saved_out, saved_err = sys.stdout, sys.stderr
        sys.stdout = _StreamRecorder("stdout", sink)  # type: ignore[assignment]
        sys.stderr = _StreamRecorder("stderr", sink)  # type: ignore[assignment]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("always")

                def record_warning(
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
                    sink.append(Emission("warning", str(message), category=cat, filename=filename, lineno=lineno))

                warnings.showwarning = record_warning
                yield sink
        finally:
            sys.stdout, sys.stderr = saved_out, saved_err
            root.handlers = saved_handlers
            root.setLevel(saved_level)


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
