"""Exceptions shared by every layer of parpass.

All parpass errors derive from :class:`ParpassError`, and each also derives from
the builtin exception a Python programmer would expect (``ValueError`` for bad
input, ``KeyError`` for a missing name, ``TypeError`` for a wrong type), so that
``except ValueError`` keeps working.
"""

from __future__ import annotations

from collections.abc import Iterable


class ParpassError(Exception):
    """Base class of every error raised by parpass itself."""


class IRFormatError(ParpassError, ValueError):
    """Serialized IR could not be read: truncated, not parpass IR, wrong version, bad field."""


class IRError(ParpassError, ValueError):
    """IR that is structurally invalid (ill-formed) or used inconsistently."""


class ReadOnlyModuleError(ParpassError, TypeError):
    """An attempt to change a module that was handed out read-only."""


class NameNotFoundError(ParpassError, KeyError):
    """A name (function, op, pass, config key) that is not there; the message lists the closest."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else ""


def closest_names(name: str, candidates: Iterable[str], limit: int = 8) -> list[str]:
    """``candidates`` ordered by similarity to ``name`` (closest first), at most ``limit``."""
    import difflib

    pool = list(dict.fromkeys(candidates))
    matcher = difflib.SequenceMatcher()
    matcher.set_seq2(name.lower())
    scored = []
    for index, cand in enumerate(pool):
        matcher.set_seq1(cand.lower())
        scored.append((-matcher.ratio(), index, cand))
    scored.sort()
    return [cand for _, _, cand in scored[:limit]]


def format_names(names: Iterable[str], total: int | None = None) -> str:
    """``'a', 'b', 'c'`` (and ``... N more`` when ``total`` exceeds the names shown)."""
    shown = list(names)
    text = ", ".join(repr(n) for n in shown) if shown else "(none)"
    if total is not None and total > len(shown):
        text += f", ... ({total - len(shown)} more)"
    return text


def not_found(kind: str, name: str, candidates: Iterable[str], where: str = "") -> NameNotFoundError:
    """A NameNotFoundError for ``kind`` ``name``, naming the closest of ``candidates``."""
    pool = list(candidates)
    near = closest_names(name, pool)
    place = f" {where}" if where else ""
    label = "closest" if len(pool) > len(near) else "known"
    return NameNotFoundError(f"no {kind} named {name!r}{place}; {label}: {format_names(near, len(pool))}")


class ParallelExecutionError(ParpassError, RuntimeError):
    """A function-level pass could not be completed in the worker processes."""

    def __init__(self, message: str, pass_name: str = "", functions: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.pass_name = pass_name
        self.functions = functions


class WorkerCrashedError(ParallelExecutionError):
    """A worker process died (segfault, ``os._exit``, a signal, the OOM killer) while running a pass."""


class PassTimeoutError(ParallelExecutionError, TimeoutError):
    """A function ran longer than the ``parpass.timeout`` config option allows."""


class RemotePassError(ParallelExecutionError):
    """A pass raised, in a worker, an exception that could not be sent back as itself.

    ``type_name`` and ``message`` describe the original exception.
    """

    def __init__(self, message: str, pass_name: str, functions: tuple[str, ...], type_name: str) -> None:
        super().__init__(message, pass_name, functions)
        self.type_name = type_name


class PassShippingError(ParpassError, TypeError):
    """A pass cannot be sent to worker processes (it cannot be pickled) and ``parpass.strict`` is set."""
