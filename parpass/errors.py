"""Exceptions shared by every layer of parpass.

All parpass errors derive from :class:`ParpassError`, and each also derives from
the builtin exception a Python programmer would expect (``ValueError`` for bad
input, ``KeyError`` for a missing name, ``TypeError`` for a wrong type), so that
``except ValueError`` keeps working. Where TVM raises another builtin for the same
mistake (``AttributeError`` for a bad config key or value), the class derives from
that one too, so that code written for TVM keeps catching it.
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


#: The similarity (difflib ratio, 0..1) a name needs to be suggested by :func:`close_names`.
SIMILARITY_CUTOFF = 0.6


def _similarity(a: str, b: str) -> float:
    """How alike ``a`` and ``b`` are, case-insensitively; also by their last dotted part (``num_workers``).

    Two keys in the same namespace (``parpass.x``, ``parpass.y``) are compared by
    their last parts only, so that a shared prefix does not make every key look close.
    """
    import difflib

    a, b = a.lower(), b.lower()
    head_a, _, tail_a = a.rpartition(".")
    head_b, _, tail_b = b.rpartition(".")
    if head_a and head_a == head_b:
        score = difflib.SequenceMatcher(None, tail_a, tail_b).ratio()
    else:
        score = difflib.SequenceMatcher(None, a, b).ratio()
        if (head_a or head_b) and tail_a and tail_b:
            score = max(score, difflib.SequenceMatcher(None, tail_a, tail_b).ratio())
    if len(a) >= 3 and a in b:
        score = max(score, SIMILARITY_CUTOFF)
    return score


def _ranked(name: str, candidates: Iterable[str]) -> list[tuple[float, str]]:
    """(similarity, candidate) of each distinct candidate, closest first.

    Ties go to a name in the same dotted namespace as ``name``, then to the given order.
    """
    space = name.lower().rpartition(".")[0]
    scored = []
    for index, cand in enumerate(dict.fromkeys(candidates)):
        scored.append((-_similarity(name, cand), cand.lower().rpartition(".")[0] != space, index, cand))
    scored.sort()
    return [(-neg, cand) for neg, _, _, cand in scored]


def closest_names(name: str, candidates: Iterable[str], limit: int = 8) -> list[str]:
    """``candidates`` ordered by similarity to ``name`` (closest first), at most ``limit``."""
    return [cand for _, cand in _ranked(name, candidates)[:limit]]


def close_names(name: str, candidates: Iterable[str], limit: int = 3) -> list[str]:
    """At most ``limit`` of ``candidates`` similar enough to ``name`` to be what was meant, closest first."""
    return [cand for score, cand in _ranked(name, candidates) if score >= SIMILARITY_CUTOFF][:limit]


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


def suggestion(name: str, candidates: Iterable[str], listing: str) -> str:
    """``closest: 'A', 'B'`` for the registered names close to ``name``, else where to find them all.

    For registries (passes, config keys) where a dump of every name would bury
    the few the user meant; ``listing`` says where they are all (``"list_passes()"``).
    """
    pool = list(candidates)
    near = close_names(name, pool)
    if near:
        return f"closest: {format_names(near)}"
    if pool:
        return f"none of the {len(pool)} registered is close; {listing} lists them"
    return f"none is registered; {listing} lists them"


def unknown_name(
    kind: str,
    name: str,
    candidates: Iterable[str],
    where: str,
    listing: str,
    error: type[NameNotFoundError] = NameNotFoundError,
) -> NameNotFoundError:
    """An ``error`` (a NameNotFoundError) for ``kind`` ``name`` in a registry, naming only the names close to it."""
    place = f" {where}" if where else ""
    return error(f"no {kind} named {name!r}{place}; {suggestion(name, candidates, listing)}")


def add_note(err: BaseException, note: str) -> None:
    """Attach ``note`` to ``err`` as a PEP 678 note, so the exception keeps its type (``add_note`` on 3.11+).

    Raises AttributeError or TypeError for an exception that refuses attributes.
    """
    if hasattr(err, "add_note"):
        err.add_note(note)
    else:  # Python 3.10: the list add_note keeps
        notes = getattr(err, "__notes__", None)
        err.__notes__ = [*(notes if isinstance(notes, list) else []), note]  # type: ignore[attr-defined]  # 3.10 stubs
