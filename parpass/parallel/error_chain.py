"""An exception and the exceptions it was raised from, across a process boundary.

Pickling an exception keeps its type, arguments and attributes (its notes
among them) but drops ``__cause__`` and ``__context__``: a pass that raises
``PassError(...) from err`` in a worker would reach the caller without the
``err`` a serial run gives it (``except PassError as e: e.__cause__``, and the
"direct cause" block of a printed traceback). So a worker pickles the whole
chain, each exception on its own, with the links between them; an exception of
the chain that does not pickle goes as a ``RuntimeError`` naming its type and
message (only the raised one decides whether the error crosses at all).
Tracebacks do not cross: the worker sends the raised one's text.

Each exception is pickled alone, as its class reduces it, whatever reducers
``copyreg`` holds for exception classes: Dask's workers install tblib's, which
pickle the chain and the tracebacks too, so that a context that does not pickle
would fail the whole error there and not on a loky worker.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Callable

import cloudpickle

#: For each exception of a chain, the places in the chain of its ``__cause__`` and ``__context__`` (None:
#: none) and its ``__suppress_context__``.
_Links = list[tuple[int | None, int | None, bool]]


def chain_of(err: BaseException) -> list[BaseException]:
    """``err`` first, then every exception reachable through ``__cause__`` and ``__context__``, each once."""
    chain: list[BaseException] = []
    seen: set[int] = set()
    stack = [err]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        chain.append(e)
        stack.extend(linked for linked in (e.__context__, e.__cause__) if linked is not None)
    return chain


class _Pickler(cloudpickle.Pickler):  # type: ignore[misc]  # cloudpickle ships no stubs: its Pickler is Any
    """cloudpickle's pickler without the reducers ``copyreg`` holds for exception classes."""

    def __init__(self, file: io.BytesIO) -> None:
        # read by the pickler's __init__, so set first
        self.dispatch_table = {
            cls: reduce
            for cls, reduce in cloudpickle.Pickler.dispatch_table.items()
            if not (isinstance(cls, type) and issubclass(cls, BaseException))
        }
        super().__init__(file, protocol=pickle.DEFAULT_PROTOCOL)


def pickled_alone(err: BaseException) -> bytes | None:
    """``err`` pickled as its class reduces it (not its chain, see the module docstring), if it also unpickles."""
    try:
        out = io.BytesIO()
        _Pickler(out).dump(err)
        data = out.getvalue()
        pickle.loads(data)
    except Exception:
        return None
    return data


def pickled_chain(err: BaseException, portable: Callable[[BaseException], BaseException]) -> bytes | None:
    """``err`` with its chain, for :func:`unpickled_chain`; None if ``err`` itself does not pickle.

    ``portable`` gives a stand-in for an exception of the chain that does not pickle.
    """
    chain = chain_of(err)
    top = pickled_alone(err)
    if top is None:
        return None
    place = {id(e): i for i, e in enumerate(chain)}
    blobs = [top] + [pickled_alone(e) or pickled_alone(portable(e)) for e in chain[1:]]
    links: _Links = [
        (
            None if e.__cause__ is None else place[id(e.__cause__)],
            None if e.__context__ is None else place[id(e.__context__)],
            e.__suppress_context__,
        )
        for e in chain
    ]
    return pickle.dumps((blobs, links))


def _loaded(blob: bytes | None) -> BaseException | None:
    """An exception of the chain unpickled; None if it did not cross or does not unpickle here (its class
    is not importable in this process, say): the raised one still comes."""
    if blob is None:
        return None
    try:
        err: BaseException = pickle.loads(blob)
    except Exception:
        return None
    return err


def unpickled_chain(data: bytes) -> BaseException:
    """The exception :func:`pickled_chain` pickled, linked again to the exceptions of its chain (a link whose
    exception did not cross is left out); raises what unpickling the raised exception raises."""
    blobs, links = pickle.loads(data)
    errors: list[BaseException | None] = [pickle.loads(blobs[0]), *map(_loaded, blobs[1:])]
    for e, (cause, context, suppress) in zip(errors, links, strict=True):
        if e is None:
            continue
        if cause is not None and errors[cause] is not None:
            e.__cause__ = errors[cause]
        if context is not None and errors[context] is not None:
            e.__context__ = errors[context]
        e.__suppress_context__ = suppress
    top = errors[0]
    assert top is not None, "the raised exception itself pickled (else pickled_chain gave None)"
    return top


__all__ = ["chain_of", "pickled_alone", "pickled_chain", "unpickled_chain"]
