"""Results a worker keeps decoded between the waves of a pipeline, and their bytes fetched when needed.

With ``parpass.keep_results`` on, within a pipeline (a ``Sequential`` with passes
still to come), a wave on local workers whose passes read no other function
leaves each function its chain changed with the worker that made it, decoded,
instead of encoding, digesting and storing it for the parent (that work is
10-15% of the workers' time in a pass-by-pass run; net of what keeping costs
the parent, the run measured 1.08-1.13x on 2 workers). A chain whose results
were fetched before any wave took them stops keeping (:attr:`Keeper.fetched_early`).
The worker names each such result by
a token (17 bytes: b"K", its process id, a counter; never equal to a digest),
and the parent's module holds it as a :class:`KeptBytes`: the next wave sends
the function to that worker (which alone can run it: see
:class:`~parpass.parallel.schedule.Dispatcher`'s ``pinned``), and anything that
reads its bytes or the function (an instrument, a module pass, an in-process
run, a wave whose passes read other functions, saving the module) first has
every kept result fetched, one round trip per worker. The pipeline's end
fetches the ones still held by some module, so that what it returns needs no
worker; the ones no module holds any more are let go.

What this gives up: a worker that dies holding results the parent has not
fetched loses them. The wave or the fetch that meets the loss raises
:class:`~parpass.errors.WorkerCrashedError` naming the functions and the pass
that made them (the caller still holds its input module; the next call works).
"""

from __future__ import annotations

import itertools
import operator
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from itertools import repeat
from typing import Any, Protocol, cast

import msgspec

from parpass.errors import IRError, WorkerCrashedError
from parpass.parallel.protocol import Fetched
from parpass.parallel.store import Location, StoreReader, store_number
from parpass.parallel.worker import token_pid

__all__ = ["Keeper", "KeptBytes", "token_pid"]


class FetchingCrew(Protocol):
    """What fetching needs of a crew (:class:`~parpass.parallel.crew.Crew`)."""

    pids: list[int]

    def ask(self, seat: int, tokens: list[bytes], drop: list[bytes]) -> None: ...

    def answer(self, seat: int) -> Fetched: ...

    def store(self, seat: int, path: str) -> StoreReader: ...


#: Opens the crew of a (scheduler, number of workers): what a backend's ``crew`` gives.
CrewOpener = Callable[[str, int], AbstractContextManager[FetchingCrew]]


class KeptBytes(msgspec.Struct, weakref=True):
    """The bytes of one kept result: a module slot's buffer, fetched (with every other kept result) when first
    sliced. Until then ``data`` is None; after, ``data``, ``location`` (where the worker stored them) and
    ``digest`` are those of the bytes. (A struct: a wave makes thousands, each in C.)"""

    keeper: Any  # the Keeper
    token: bytes
    name: str  # the function's
    pass_name: str  # the chain that made it
    where: tuple[str, int]  # (scheduler, number of workers) of the crew whose worker keeps it
    data: Any = None  # bytes | memoryview, once fetched
    location: Any = None  # Location, once fetched
    digest: Any = None  # bytes, once fetched

    def __getitem__(self, _: slice) -> bytes | memoryview:
        """The whole bytes (a slot asks for ``[0:size]`` with ``size`` only an estimate)."""
        if self.data is None:
            self.keeper.fetch_all()
        data: bytes | memoryview | None = self.data
        assert data is not None, "fetching resolves every kept result or raises"
        return data


class Keeper:
    """The kept results of one executor: which are still to fetch, fetching them, and the tokens to let go."""

    def __init__(self, open_crew: CrewOpener) -> None:
        self._open_crew = open_crew
        self._lock = threading.RLock()
        self._held: dict[bytes, weakref.ref[KeptBytes]] = {}  # every kept result, fetched or not, while held
        self._unfetched: set[bytes] = set()  # kept, not fetched (some no module holds any more: let go next)
        self._where: dict[tuple[str, int], None] = {}  # the crews results were kept on
        #: per (scheduler, number of workers): tokens no module holds any more, to let go at the next fetch
        self._gone: dict[tuple[str, int], list[bytes]] = {}
        #: chains whose kept results were fetched before a wave took them (by a wave whose passes read other
        #: functions, or this process reading them): keeping theirs only adds a round trip (see keeps)
        self.fetched_early: set[str] = set()
        self._taken: set[bytes] = set()  # kept results a wave has had as its input (see took)
        #: results kept so far (for tests and tuning)
        self.kept_total = 0

    def took(self, tokens: Iterable[bytes]) -> None:
        """A wave had the kept results ``tokens`` as its input: they were worth keeping."""
        with self._lock:
            self._taken.update(tokens)

    def keeps(self, pass_name: str) -> bool:
        """Whether the results of chain ``pass_name`` are worth keeping: none of its were fetched early."""
        return pass_name not in self.fetched_early

    def fetch_at_end(self) -> None:
        """:meth:`fetch_all` at a pipeline's end (what is fetched there was not fetched early)."""
        self.fetch_all(early=False)

    def keep(self, tokens: list[bytes], names: list[str], pass_name: str, where: tuple[str, int]) -> list[KeptBytes]:
        """New kept results (the buffers of their slots), one per token, of the functions ``names``."""
        kept = list(map(KeptBytes, repeat(self), tokens, names, repeat(pass_name), repeat(where)))
        with self._lock:
            self.kept_total += len(kept)
            self._held.update(zip(tokens, map(weakref.ref, kept), strict=True))
            self._unfetched.update(tokens)
            self._where[where] = None
        return kept

    def let_go(self, tokens: list[bytes], where: tuple[str, int]) -> None:
        """Results kept by the workers of ``where`` that no module holds (an attempt that counted for nothing):
        let go at the next fetch."""
        if tokens:
            with self._lock:
                self._gone.setdefault(where, []).extend(tokens)

    @property
    def unfetched_tokens(self) -> set[bytes]:
        """The tokens of kept results not fetched (read it, never change it)."""
        return self._unfetched

    def unfetched(self, token: bytes | None) -> bool:
        """Whether ``token`` names a kept result the parent has no bytes of."""
        return token in self._unfetched

    def places(self, tokens: list[bytes | None]) -> list[tuple[Location, bytes] | None]:
        """For each token, where the result it names lies and the digest of its bytes, once fetched; None
        where it is not fetched, or the bytes are its slot's own now."""
        out: list[tuple[Location, bytes] | None] = [None] * len(tokens)
        unfetched = self._unfetched
        for at in itertools.compress(range(len(tokens)), map(operator.not_, map(unfetched.__contains__, tokens))):
            ref = self._held.get(cast("bytes", tokens[at]))
            kept = None if ref is None else ref()
            if kept is not None and kept.location is not None:
                out[at] = (kept.location, kept.digest)
        return out

    def waiting(self) -> set[tuple[str, int]]:
        """The crews (scheduler, number of workers) whose workers keep results not fetched yet."""
        with self._lock:
            return set(self._where) if self._unfetched else set()

    def fetch_all(self, early: bool = True) -> None:
        """Fetch every kept result some module still holds (and let go of the others), per worker one round
        trip; raise WorkerCrashedError for results a worker lost, IRError for a value the IR cannot hold.
        ``early``: before a wave took them (see :attr:`fetched_early`)."""
        with self._lock:
            by_crew: dict[tuple[str, int], dict[int, list[KeptBytes]]] = {}
            for token in sorted(self._unfetched):
                ref = self._held.get(token)
                kept = None if ref is None else ref()
                if kept is None:  # no module holds it any more
                    self._held.pop(token, None)
                    self._unfetched.discard(token)
                    for where in self._where:  # a token names its worker: the others ignore it
                        self._gone.setdefault(where, []).append(token)
                    continue
                pid = token_pid(token)
                assert pid is not None, "a kept result's token names its worker"
                by_crew.setdefault(kept.where, {}).setdefault(pid, []).append(kept)
                if early and token not in self._taken:
                    self.fetched_early.add(kept.pass_name)
            try:
                for where in set(by_crew) | set(self._gone):
                    self._fetch(where, by_crew.get(where, {}), self._gone.pop(where, []))
            finally:
                if not self._unfetched:
                    self._where.clear()
                self._held = {token: ref for token, ref in self._held.items() if ref() is not None}
                self._taken.intersection_update(self._unfetched)

    def _fetch(self, where: tuple[str, int], by_pid: dict[int, list[KeptBytes]], gone: list[bytes]) -> None:
        scheduler, workers = where
        with self._open_crew(scheduler, workers) as crew:
            seats = {pid: seat for seat, pid in enumerate(crew.pids)}
            lost = [k for pid, ks in by_pid.items() if pid not in seats for k in ks]
            asked = []  # every seat asked first, then each answer taken: the workers encode at once
            for pid, seat in seats.items():
                results = by_pid.get(pid, [])
                drop = [t for t in gone if token_pid(t) == pid]
                if results or drop:
                    crew.ask(seat, [k.token for k in results], drop)
                    asked.append((seat, results))
            unencodable: list[tuple[KeptBytes, str]] = []
            for seat, results in asked:  # every answer taken before anything is raised: none left unread
                unencodable += self._take(crew, seat, results, crew.answer(seat), lost)
        if unencodable:
            result, message = unencodable[0]
            raise IRError(
                f"function {result.name!r} as pass {result.pass_name} left it cannot be encoded: {message} "
                "(parpass IR holds plain data: 64-bit integers and UTF-8 strings)"
            )
        if lost:
            for result in lost:
                self._unfetched.discard(result.token)
            names = ", ".join(repr(k.name) for k in lost[:8]) + (", ..." if len(lost) > 8 else "")
            passes = ", ".join(sorted({k.pass_name for k in lost}))  # each quoted already (see _label)
            raise WorkerCrashedError(
                f"a worker process died holding the results of pass {passes} on function(s) {names}, "
                "which it kept for the pipeline's next pass; they are lost (the caller's module is unchanged)",
                passes,
                tuple(k.name for k in lost),
            )

    def _take(
        self, crew: FetchingCrew, seat: int, kept: list[KeptBytes], answer: Fetched, lost: list[KeptBytes]
    ) -> list[tuple[KeptBytes, str]]:
        """Resolve ``kept`` from the answer of ``seat`` to a fetch (those it no longer had into ``lost``); the
        results that hold a value the IR cannot encode, with the error."""
        by_token = {k.token: k for k in kept}
        lost += [by_token[t] for t in answer.lost]
        if answer.tokens:
            reader = crew.store(seat, answer.store)
            number = store_number(answer.store)
            for token, offset, length, digest in zip(
                answer.tokens, answer.offsets, answer.lengths, answer.digests, strict=True
            ):
                result = by_token[token]
                result.data = reader.view(offset, length)
                result.location = (number, offset, length)
                result.digest = digest
                self._unfetched.discard(token)
        self._unfetched.difference_update(token for token, _ in answer.unencodable)
        return [(by_token[token], message) for token, message in answer.unencodable]

    def __iter__(self) -> Iterator[bytes]:
        """The tokens not fetched yet (for tests)."""
        with self._lock:
            return iter(sorted(self._unfetched))
