"""Results a worker keeps decoded between the waves of a pipeline, and their bytes fetched when needed.

With ``parpass.keep_results`` on, within a pipeline (a ``Sequential`` with passes
still to come), a wave on local workers whose passes read no other function
leaves each function its chain changed with the worker that made it, decoded,
instead of encoding, digesting and storing it for the parent (that work is
10-15% of the workers' time in a pass-by-pass run; net of what keeping costs
the parent, a gain within this machine's noise so far: see the README). A
chain whose results were fetched before any wave took them (the pipeline's
end included) stops keeping for a while (:attr:`Keeper.fetched_early`); a wave
that keeps nothing sends the kept inputs it left unchanged with its results.
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

A worker that dies holding results the parent has not fetched loses them; the
fetch that meets the loss makes them again here from what made them (see
:mod:`parpass.parallel.lineage`), so the run goes on and its output is the
serial run's. Only a result whose making was not recorded (or whose pass,
made again, raises or looks up another function) cannot be: the call then
raises :class:`~parpass.errors.WorkerCrashedError` naming the functions and
the pass that made them (the caller still holds its input module).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import operator
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from itertools import repeat
from typing import Any, Protocol, cast

import msgspec

from parpass.errors import IRError, WorkerCrashedError, add_note
from parpass.ir.digest import digest_of
from parpass.ir.module import FunctionSource, source_function, source_region
from parpass.ir.node import BaseFunc
from parpass.ir.serialization import decode_function, encode_function
from parpass.parallel.crew import CrewLost
from parpass.parallel.error_chain import unpickled_chain
from parpass.parallel.lineage import Lineage, remake
from parpass.parallel.protocol import Fetched
from parpass.parallel.store import Location, StoreReader, store_number
from parpass.parallel.worker import token_pid
from parpass.transform.passes import NOTE_PREFIX

__all__ = ["RETRY_KEEPING_AFTER", "Keeper", "KeptBytes", "token_pid"]

#: Waves of a chain that keep nothing after its kept results were fetched before any wave took them; the next
#: one keeps again. A chain that never gains by keeping pays one round trip in this many waves of it.
RETRY_KEEPING_AFTER = 8

log = logging.getLogger("parpass.parallel")


class FetchingCrew(Protocol):
    """What fetching needs of a crew (:class:`~parpass.parallel.crew.Crew`)."""

    pids: list[int]
    owners: dict[bytes, int]  # the seat holding each function resident, by digest

    def ask(self, seat: int, tokens: list[bytes], drop: list[bytes]) -> None: ...

    def answer(self, seat: int) -> Fetched: ...

    def store(self, seat: int, path: str) -> StoreReader: ...


#: Opens the crew of a (scheduler, number of workers): what a backend's ``crew`` gives.
CrewOpener = Callable[[str, int], AbstractContextManager[FetchingCrew]]


class KeptBytes(msgspec.Struct, weakref=True):
    """The bytes of one kept result: a module slot's buffer, fetched (with every other kept result) when first
    sliced. Until then ``data`` is None; after, ``data``, ``location`` (where the worker stored them) and
    ``digest`` are those of the bytes (``location`` None for bytes made again here, in no store). (A struct: a
    wave makes thousands, each in C.)"""

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
        self._fetching = threading.RLock()  # held by a fetch (see fetch_all)
        self._held: dict[bytes, weakref.ref[KeptBytes]] = {}  # every kept result, fetched or not, while held
        self._unfetched: set[bytes] = set()  # kept, not fetched (some no module holds any more: let go next)
        self._where: dict[tuple[str, int], None] = {}  # the crews results were kept on
        #: per (scheduler, number of workers): tokens no module holds any more, to let go at the next fetch
        self._gone: dict[tuple[str, int], list[bytes]] = {}
        #: chains whose kept results were fetched before any wave took them (by a wave whose passes read other
        #: functions, this process reading them, or the pipeline's end): keeping theirs only turned their
        #: encoding in the wave into a round trip of its own. Each maps to the waves of it that keep nothing
        #: before one tries again (see keeps)
        self.fetched_early: dict[str, int] = {}
        self._taken: set[bytes] = set()  # kept results a wave has had as its input (see took)
        #: what made each kept result not fetched yet, and each one let go since the last fetch that left none
        #: unfetched (a later result may be made from it): its wave's lineage and its position there
        self._lineage: dict[bytes, tuple[Lineage, int]] = {}
        #: results kept so far, and made again here for a worker that died (for tests and tuning)
        self.kept_total = 0
        self.remade_total = 0

    def took(self, tokens: Iterable[bytes]) -> None:
        """A wave had the kept results ``tokens`` as its input: they were worth keeping."""
        with self._lock:
            self._taken.update(tokens)

    def keeps(self, pass_name: str) -> bool:
        """Whether a wave of chain ``pass_name`` keeps its results: not while its last kept ones were fetched
        untaken, for :data:`RETRY_KEEPING_AFTER` of its waves. Then it tries again: what fetched them early may
        have been one run's (a wave after it decided in-process on a noisy spell, say); learned for good, it
        stopped the chain keeping for the rest of the process."""
        with self._lock:
            waves = self.fetched_early.get(pass_name)
            if waves is None:
                return True
            if waves > 1:
                self.fetched_early[pass_name] = waves - 1
            else:
                del self.fetched_early[pass_name]
            return False

    def keep(
        self,
        tokens: list[bytes],
        names: list[str],
        pass_name: str,
        where: tuple[str, int],
        lineage: Lineage,
        sources: list[FunctionSource],
    ) -> list[KeptBytes]:
        """New kept results (the buffers of their slots), one per token, of the functions ``names``; made by
        ``lineage``'s wave from ``sources`` (what the parent held of each function as the wave's input), so
        that they can be made again if their worker dies."""
        kept = list(map(KeptBytes, repeat(self), tokens, names, repeat(pass_name), repeat(where)))
        with self._lock:
            self.kept_total += len(kept)
            self._held.update(zip(tokens, map(weakref.ref, kept), strict=True))
            self._unfetched.update(tokens)
            self._where[where] = None
            first = lineage.add(names, list(map(_input_of, sources)))
            self._lineage.update(zip(tokens, zip(repeat(lineage), itertools.count(first)), strict=False))
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

    def places(self, tokens: list[bytes | None]) -> list[tuple[Location | None, bytes] | None]:
        """For each token, where the result it names lies (None: in no store; its slot holds the bytes) and the
        digest of its bytes, once fetched; None where it is not fetched, or the bytes are its slot's own now."""
        out: list[tuple[Location | None, bytes] | None] = [None] * len(tokens)
        unfetched = self._unfetched
        for at in itertools.compress(range(len(tokens)), map(operator.not_, map(unfetched.__contains__, tokens))):
            ref = self._held.get(cast("bytes", tokens[at]))
            kept = None if ref is None else ref()
            if kept is not None and kept.data is not None:
                out[at] = (kept.location, kept.digest)
        return out

    def waiting(self) -> set[tuple[str, int]]:
        """The crews (scheduler, number of workers) whose workers keep results not fetched yet."""
        with self._lock:
            return set(self._where) if self._unfetched else set()

    def fetch_all(self) -> None:
        """Fetch every kept result some module still holds (and let go of the others), per worker one round
        trip; raise what the wave would have for a value the IR cannot hold, WorkerCrashedError for results a
        worker lost that cannot be made again. A chain with a result no wave took learns not to keep."""
        # One fetch at a time, and the keeper's lock never held while a crew is awaited: a wave holds its crew
        # while it notes what it took here (the two orders deadlocked two pipelines in two threads).
        with self._fetching:
            with self._lock:
                plan = self._plan()
            try:
                for where, by_pid, gone in plan:
                    self._fetch(where, by_pid, gone)
            finally:
                with self._lock:
                    if not self._unfetched:  # nothing left that could be made from what was let go
                        self._where.clear()
                        self._lineage.clear()
                    self._held = {token: ref for token, ref in self._held.items() if ref() is not None}
                    self._taken.intersection_update(self._unfetched)

    def _plan(self) -> list[tuple[tuple[str, int], dict[int, list[KeptBytes]], list[bytes]]]:
        """What a fetch asks of each crew: the kept results some module still holds, by worker, and the tokens
        no module holds any more (let go). Learns which chains keep results no wave takes."""
        tokens = sorted(self._unfetched)  # by worker: the process id follows the b"K"
        held = [None if ref is None else ref() for ref in map(self._held.get, tokens)]
        gone = list(itertools.compress(tokens, map(operator.not_, held)))  # no module holds them any more
        if gone:
            self._unfetched.difference_update(gone)
            for token in gone:
                self._held.pop(token, None)
            for where in self._where:  # a token names its worker: the others ignore it
                self._gone.setdefault(where, []).extend(gone)
        alive = cast("list[KeptBytes]", list(filter(None, held)))
        untaken = map(operator.not_, map(self._taken.__contains__, (kept.token for kept in alive)))
        self.fetched_early.update((kept.pass_name, RETRY_KEEPING_AFTER) for kept in itertools.compress(alive, untaken))
        by_crew: dict[tuple[str, int], dict[int, list[KeptBytes]]] = {}
        for _, group in itertools.groupby(alive, key=_worker_of):
            results = list(group)
            pid = token_pid(results[0].token)
            assert pid is not None, "a kept result's token names its worker"
            by_crew.setdefault(results[0].where, {})[pid] = results
        return [
            (where, by_crew.get(where, {}), self._gone.pop(where, []))
            for where in dict.fromkeys([*by_crew, *self._gone])
        ]

    def _fetch(self, where: tuple[str, int], by_pid: dict[int, list[KeptBytes]], gone: list[bytes]) -> None:
        unencodable: list[tuple[KeptBytes, str, bytes]] = []
        lost: list[KeptBytes] = []
        try:
            self._ask_crew(where, by_pid, gone, unencodable, lost)
        except CrewLost:  # a seat died as it was asked: the crew is gone, and with it all it kept
            lost = [k for results in by_pid.values() for k in results if k.data is None]
        if unencodable:
            raise _unencodable(*unencodable[0])
        if lost:
            self._make_again(lost)

    def _ask_crew(
        self,
        where: tuple[str, int],
        by_pid: dict[int, list[KeptBytes]],
        gone: list[bytes],
        unencodable: list[tuple[KeptBytes, str, bytes]],
        lost: list[KeptBytes],
    ) -> None:
        """Fetch ``by_pid`` from the crew of ``where`` (what its workers no longer have into ``lost``, what
        cannot be encoded into ``unencodable``) and let its workers drop ``gone``."""
        scheduler, workers = where
        with self._open_crew(scheduler, workers) as crew:
            seats = {pid: seat for seat, pid in enumerate(crew.pids)}
            lost += [k for pid, ks in by_pid.items() if pid not in seats for k in ks]
            asked = []  # every seat asked first, then each answer taken: the workers encode at once
            for pid, seat in seats.items():
                results = by_pid.get(pid, [])
                if results or gone:  # (each worker drops what it keeps of ``gone``: cheaper than sorting it)
                    crew.ask(seat, [k.token for k in results], gone)
                    asked.append((seat, results))
            for seat, results in asked:  # every answer taken before anything is raised: none left unread
                unencodable += self._take(crew, seat, results, crew.answer(seat), lost)

    def _make_again(self, lost: list[KeptBytes]) -> None:
        """Make the results ``lost`` with their worker again from their lineage, as if fetched; raise
        WorkerCrashedError naming them where they cannot be (their making was not recorded, or failed)."""
        passes = ", ".join(sorted({k.pass_name for k in lost}))  # each quoted already (see _label)
        log.warning(
            "a worker process died holding %d result(s) of pass %s, kept for the pipeline's next pass; "
            "making them again in this process",
            len(lost),
            passes,
        )
        made: dict[bytes, BaseFunc] = {}
        try:
            self._remade([k.token for k in lost], made)
        except Exception as err:  # _NoLineage, or the pass made again raised
            with self._lock:
                self._unfetched.difference_update(result.token for result in lost)
            names = ", ".join(repr(k.name) for k in lost[:8]) + (", ..." if len(lost) > 8 else "")
            why = "" if isinstance(err, _NoLineage) else f" (making them again failed: {type(err).__name__}: {err})"
            raise WorkerCrashedError(
                f"a worker process died holding the results of pass {passes} on function(s) {names}, "
                f"which it kept for the pipeline's next pass; they are lost{why} (the caller's module is unchanged)",
                passes,
                tuple(k.name for k in lost),
            ) from err
        for result in lost:
            data = encode_function(made[result.token])
            result.data, result.location, result.digest = data, None, digest_of(data)
        with self._lock:
            self._unfetched.difference_update(result.token for result in lost)
            self.remade_total += len(lost)

    def _remade(self, tokens: list[bytes], made: dict[bytes, BaseFunc]) -> None:
        """Make the kept results ``tokens`` again into ``made`` (by token): their inputs first (a token: made
        again too, unless fetched), then each wave's chain on them; _NoLineage if one's making is unknown."""
        by_wave: dict[int, tuple[Lineage, list[int], list[bytes]]] = {}
        for token in tokens:
            if token in made:
                continue
            entry = self._lineage.get(token)
            if entry is None:
                raise _NoLineage(token)
            lineage, at = entry
            _, positions, wanted = by_wave.setdefault(id(lineage), (lineage, [], []))
            positions.append(at)
            wanted.append(token)
        for lineage, every, tokens_of in by_wave.values():
            todo = [(at, token) for at, token in zip(every, tokens_of, strict=True) if token not in made]
            positions, wanted = [at for at, _ in todo], [token for _, token in todo]
            sources = [lineage.sources[at] for at in positions]
            needed = [s for s in sources if isinstance(s, bytes) and self._fetched(s) is None]
            if needed:
                self._remade(needed, made)
            inputs = [self._input(s, lineage.results[at], made) for s, at in zip(sources, positions, strict=True)]
            made.update(zip(wanted, remake(lineage, positions, inputs), strict=True))

    def _fetched(self, token: bytes) -> KeptBytes | None:
        """The kept result ``token`` names, if some module holds it and its bytes are here."""
        ref = self._held.get(token)
        kept = None if ref is None else ref()
        return kept if kept is not None and kept.data is not None else None

    def _input(self, source: object, name: str, made: dict[bytes, BaseFunc]) -> BaseFunc:
        """Function ``name`` as a wave had it for its input (``source``, see :func:`_input_of`)."""
        if isinstance(source, bytes):  # a token
            fetched = self._fetched(source)
            return made[source] if fetched is None else decode_function(fetched.data, f"@{name}")
        if isinstance(source, KeptBytes):
            return decode_function(source.data, f"@{name}")
        return source_function(cast("FunctionSource", source), name)

    def _take(
        self, crew: FetchingCrew, seat: int, kept: list[KeptBytes], answer: Fetched, lost: list[KeptBytes]
    ) -> list[tuple[KeptBytes, str, bytes]]:
        """Resolve ``kept`` from the answer of ``seat`` to a fetch (those it no longer had into ``lost``); the
        results that hold a value the IR cannot encode, with the error's text and the error pickled."""
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
            crew.owners.update(zip(answer.digests, repeat(seat)))  # resident there under its digest now
        with self._lock:
            self._unfetched.difference_update(answer.tokens)
            self._unfetched.difference_update(token for token, _ in answer.unencodable)
        errors = answer.unencodable_errors or [b""] * len(answer.unencodable)
        return [(by_token[token], text, error) for (token, text), error in zip(answer.unencodable, errors, strict=True)]

    def __iter__(self) -> Iterator[bytes]:
        """The tokens not fetched yet (for tests)."""
        with self._lock:
            return iter(sorted(self._unfetched))


def _unencodable(result: KeptBytes, text: str, pickled: bytes) -> BaseException:
    """The error for kept result ``result``, which its worker could not encode when fetched: what encoding it in
    the wave would have raised (the worker's error, noted with the pass and the function), else an IRError."""
    error: BaseException | None = None
    if pickled:
        with contextlib.suppress(Exception):
            error = unpickled_chain(pickled)
    if error is None:
        error = IRError(
            f"function {result.name!r} as pass {result.pass_name} left it cannot be encoded: {text} "
            "(parpass IR holds plain data: 64-bit integers and UTF-8 strings)"
        )
    notes = getattr(error, "__notes__", [])
    if not any(isinstance(n, str) and n.startswith(NOTE_PREFIX) for n in notes):
        with contextlib.suppress(AttributeError, TypeError):
            add_note(error, f"{NOTE_PREFIX}{result.pass_name} on function {result.name!r}")
    return error


def _worker_of(kept: KeptBytes) -> bytes:
    """What of ``kept``'s token names its worker (see token_pid)."""
    return kept.token[:9]


class _NoLineage(Exception):
    """A lost kept result whose making was not recorded (or is forgotten): it cannot be made again."""


def _input_of(source: FunctionSource) -> object:
    """What a lineage records of a wave's input (``source``, what the parent held of the function): a result
    kept and not fetched as its token (what made it is recorded: holding it would keep it in its worker), a
    fetched one as its bytes' holder, anything else as it is."""
    region = source_region(source)
    if type(region) is KeptBytes:
        return region.token if region.data is None else region
    return source
