"""Whether a wave is worth shipping to workers (who runs what is :mod:`parpass.parallel.schedule`'s).

The executor learns, per pass (and per fused chain), how many seconds of work
a byte of IR costs, from every run it makes in-process or in workers, and how
long a round trip to the pool costs. A wave runs in workers only when the
estimated parallel time beats the estimated in-process time, which includes
decoding the functions an earlier wave left as bytes (workers decode their
share themselves). The parallel time of a chain that ran in workers before is
what its last waves took in the caller, from the first byte shipped to the
last event replayed: it counts what a model of the workers would miss (the
decoding and encoding there, the end of the wave, and above all a machine
whose other programs leave the workers less than a core each). Such a time
stands only for waves like the ones that took it: on as many workers and on
about as many bytes (within a factor of :data:`_COMPARABLE`; a small wave is
mostly its round trip, which a rate per byte would multiply). A chain not
measured so is estimated as a round trip plus its work divided among the
workers. Where the data lies counts on both sides: in-process, the functions
an earlier wave left as bytes are decoded first; in workers, the functions
held only decoded here (an earlier pass ran here) are encoded here and decoded
there first. A wave's measured time is recorded without those (what the parent
spent encoding, and the workers' decoding of what they did not hold), and the
estimate adds them back for the data as it lies now, so that a chain measured
on resident IR is not judged by it when its input was just built here. A pass
never measured is estimated at a deliberately high default rate, so big
modules start parallel and small ones in-process. A chain kept in-process on
its measured parallel time is tried in workers again now and then, so that a
load that went away does not keep it in-process for good. A measured time
ships a chain only if it beats in-process by a margin (:data:`_WIN_MARGIN`):
on a busy machine the same chain's waves spread by more than a thin
advantage, and in-process cannot lose to itself.

A parallel wave's measured time is taken back to a machine with nothing
else running, and its estimate forward to the load of the moment it decides
(:mod:`parpass.parallel.load`): a chain measured quiet is judged by what its
workers will get of the cores now from its first wave under a load, not
after new waves have outvoted the quiet ones. In-process times are taken as
they come: this process keeps a core of its own unless more threads than
cores run.

Shipping a chain that loses in workers on its own work, only because running
it here would first decode what an earlier wave left as bytes, does not save
that decoding: its results come back as bytes too, so the next pass faces the
same choice. Such shipping is rent paid to postpone a purchase, and the model
decides as in the ski-rental problem: it ships while what the postponing has
lost so far, this wave's loss included, stays below the decoding it avoids,
and decodes (runs in-process) once it would not. That costs at most twice
what the better of the two choices would have in hindsight, whether the
pipeline's next passes win in workers (the bytes never need decoding here) or
lose there too (decoding at once was best): a light pipeline on a cluster,
whose round trip costs more than the passes, once shipped every pass after the
first one that won there, each ~30 ms slower than in-process. The wave that
starts such a run of bytes is charged for it too: the decoding of the
functions it changes, weighted by how often, lately, bytes a wave left here
ended up decoded here (rather than taken up by workers that win).

The same choice comes the other way. After a pass ran here (a module pass,
or a function pass that gains little in workers), every function it changed
is held only decoded, and a chain that would win in workers must first have
it encoded here and decoded there; if that outweighs its gain it runs here,
its results are held decoded too, and the next chain faces the same choice:
one in-process decision kept every later Function pass of the default
pipeline here (InferType here, then the four passes after it). Running here
is then the rent and encoding the purchase: the model ships (pays the
encoding) once what running here has forgone so far, this wave's gain
included, reaches that encoding; the account closes whenever held functions
are shipped.
"""

from __future__ import annotations

import statistics
import threading
from collections.abc import Callable, Sequence
from typing import NamedTuple

from parpass.parallel.load import parallel_speed

#: Seconds per byte of encoded IR assumed for a pass never measured (a light Python pass runs ~ 10-50 ns/B).
DEFAULT_RATE = 30e-9
#: Round-trip cost of a wave assumed before one is measured (write, submit, wait, merge), seconds.
DEFAULT_OVERHEAD = 4e-3
#: Parent-side cost per byte shipped and merged, assumed before measured.
DEFAULT_SHIP_RATE = 1e-9
#: Seconds per byte to decode a function held as bytes, assumed before measured (~100 ms for 7 MB).
DEFAULT_DECODE_RATE = 14e-9
#: Seconds per byte to encode a function held only decoded, assumed before measured (~9 us for 2.4 kB).
DEFAULT_ENCODE_RATE = 4e-9
#: Seconds a chunk's round trip adds to its work (sending it, starting it, taking its answer), assumed before
#: measured: a local crew's socket costs ~0.2 ms, a Dask cluster's scheduler ~5 ms.
DEFAULT_LATENCY = 0.5e-3
#: Smoothing of the running estimates (weight of the newest measurement).
_ALPHA = 0.5
#: Waves whose overhead the estimate is the median of.
_SAMPLES = 5
#: A chain's parallel waves whose measured time the estimate is the median of (one slow wave does not decide).
_PARALLEL_SAMPLES = 3
#: Parallel waves kept per chain (of all sizes and worker counts), to find the comparable ones among.
_PARALLEL_KEPT = 16
#: A parallel wave's measured time stands for waves of between 1/_COMPARABLE and _COMPARABLE times its bytes.
_COMPARABLE = 4.0
#: In-process decisions in a row, taken on a chain's measured parallel time, after which it is tried in
#: workers once more (when that time was within _RETRY_MARGIN of in-process).
_RETRY_AFTER = 8
_RETRY_MARGIN = 2.0
#: A chain ships on its measured parallel time only if that beats in-process by this factor: a thinner
#: advantage is within the spread of a wave's time on a busy machine, and in-process cannot lose to itself.
_WIN_MARGIN = 1.15
#: A chain measured only in workers whose wave is estimated under this many seconds in-process runs here
#: once to learn its cost, however wide the advantage its workers' rate shows: that rate, taken on the big
#: module of another wave (or in a spell when other programs held the cores), had a 20-function module's
#: light pipeline shipped every time at 0.40x of in-process, never run here to show it.
_EXPLORE_BELOW = 0.05
#: Share of a wave's functions a chain is assumed to change, before a parallel wave of it has shown it.
_CHANGED_DEFAULT = 1.0


class _ParallelWave(NamedTuple):
    """A chain's parallel wave as :meth:`CostModel.record_parallel` keeps it."""

    seconds: float  #: in the caller, all of it (the round trip included)
    nbytes: int
    workers: int
    others: int  #: threads that ran besides (see CostModel.others)


class CostModel:
    """Running estimates of pass cost and pool overhead, shared by all contexts of a process.

    A chain's cost is learned twice: in-process (wall seconds per byte of IR in
    the parent, from whole waves run here) and in workers (seconds per byte of its pass calls there, less
    the workers' waits for a CPU: not their decoding and encoding, nor what
    other programs took of their cores, so that it stands for the in-process
    cost until that is measured; a pass that waits, on a subprocess say, keeps
    its waiting). What a parallel wave costs is measured whole (see
    :meth:`record_parallel`). A chain measured only in workers, whose measured
    advantage is thin, is run in-process once to learn its in-process cost; on
    workers that are not this machine's (a cluster's), one measured here only
    roughly too.

    A third, weaker measure is the rough one (see :meth:`record_rough`): the
    first functions a probe ran here before it moved the rest of a wave (a few
    milliseconds, with the lookups a pass makes of other functions decoding
    them: DeadCodeElimination's probe once measured 25 times its rate), or a
    run here on functions never seen encoded, whose bytes are a guess (the
    average size of another wave's functions: Simplify's PrimFuncs were put at
    3/4 of their size, its rate at 4/3). It stands for the chain's cost only
    until a whole wave on known sizes, here or in the workers, measured it.
    """

    def __init__(
        self,
        overhead: float = DEFAULT_OVERHEAD,
        latency: float = DEFAULT_LATENCY,
        *,
        workers_on_this_machine: bool = True,
        load: Callable[[], int] | None = None,
        cores: int = 0,
    ) -> None:
        """``overhead`` and ``latency``: what a wave's and a chunk's round trips are assumed to cost before any
        is measured (a backend's own: see :attr:`~parpass.parallel.backend.Backend.assumed_overhead`);
        ``workers_on_this_machine``: whether what a pass costs in the workers stands for what it costs here
        (else a chain measured in workers and only roughly here is run here once to learn that); ``load``:
        how many other threads run on this machine, where the workers run too, at the moment it is called
        (:func:`~parpass.parallel.load.others_running`), and ``cores`` its cores: None, a machine with nothing
        else running, and as many cores as workers."""
        self.workers_on_this_machine = workers_on_this_machine
        self.cores = cores
        self._load = load
        self._last_others: int | None = None
        self._inline: dict[tuple[str, ...], float] = {}
        self._worker: dict[tuple[str, ...], float] = {}
        #: per chain: seconds per byte here, measured roughly (see record_rough)
        self._rough: dict[tuple[str, ...], float] = {}
        #: per chain: its last parallel waves (seconds per byte in the caller beyond the round trip, size, workers)
        self._parallel: dict[tuple[str, ...], list[_ParallelWave]] = {}
        #: per chain: in-process decisions in a row taken on its measured parallel time
        self._kept_inline: dict[tuple[str, ...], int] = {}
        self.overhead = overhead
        self._overheads: list[float] = []
        self.ship_rate = DEFAULT_SHIP_RATE
        self.decode_rate = DEFAULT_DECODE_RATE
        self.encode_rate = DEFAULT_ENCODE_RATE
        #: what a chunk costs beyond its work (see record_latency): the median of the last waves' samples
        self.latency = latency
        self._latencies: list[float] = []
        #: seconds lost so far by shipping chains that lose in workers, to postpone decoding their input here
        self._postponed = 0.0
        #: seconds forgone so far by running here chains that would win in workers but for encoding their input
        self._forgone = 0.0
        #: how often, lately, functions a wave left as bytes were decoded here after (0: workers took them up)
        self._decoded_later = 0.0
        #: per chain: the share of its targets a parallel wave of it changed
        self._changed: dict[tuple[str, ...], float] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _fold(table: dict[tuple[str, ...], float], key: tuple[str, ...], rate: float) -> None:
        old = table.get(key)
        table[key] = rate if old is None else (1 - _ALPHA) * old + _ALPHA * rate

    def others(self) -> int:
        """Threads running on the workers' machine besides this one now, as far as this sample and the last
        one taken agree: a kernel thread's wake-up is in one sample, rarely in two; a busy program in both."""
        if self._load is None:
            return 0
        now = self._load()
        last, self._last_others = self._last_others, now
        return now if last is None else min(now, last)

    def speed(self, workers: int, others: int) -> float:
        """Cores' worth of work ``workers`` busy workers do while ``others`` threads run besides."""
        return parallel_speed(workers, others, self.cores)

    def record_inline(self, chain: Sequence[str], seconds: float, nbytes: int) -> None:
        """The chain took ``seconds`` in-process on ``nbytes`` of IR."""
        if nbytes > 0:
            with self._lock:
                self._fold(self._inline, tuple(chain), seconds / nbytes)

    def record_rough(self, chain: Sequence[str], seconds: float, nbytes: int) -> None:
        """The chain took ``seconds`` in-process on ``nbytes`` of IR, measured roughly: a probe's first
        functions, or functions whose sizes were mostly guessed. The chain's in-process cost until a whole
        wave on known sizes measures it."""
        if nbytes > 0:
            with self._lock:
                self._fold(self._rough, tuple(chain), seconds / nbytes)

    def record_decode(self, seconds: float, nbytes: int) -> None:
        """Decoding ``nbytes`` of functions held as bytes took ``seconds`` in this process."""
        if nbytes > 0:
            with self._lock:
                self.decode_rate = (1 - _ALPHA) * self.decode_rate + _ALPHA * seconds / nbytes

    def record_encode(self, seconds: float, nbytes: int) -> None:
        """Encoding ``nbytes`` of functions held only decoded took ``seconds`` in this process."""
        if nbytes > 0:
            with self._lock:
                self.encode_rate = (1 - _ALPHA) * self.encode_rate + _ALPHA * seconds / nbytes

    def record_workers(self, chain: Sequence[str], busy: float, nbytes: int) -> None:
        """The chain's pass calls took ``busy`` seconds in the workers, in all, on ``nbytes`` of IR (less their
        waits for a CPU): what it would cost in-process, until it runs there (see :meth:`estimates`)."""
        if nbytes > 0:
            with self._lock:
                self._fold(self._worker, tuple(chain), busy / nbytes)

    def record_parallel(self, chain: Sequence[str], wall: float, nbytes: int, workers: int, missed: int = 0) -> None:
        """A parallel wave of the chain on ``nbytes`` of IR took ``wall`` seconds in the caller (shipping,
        the workers' work, waiting, merging, replaying; not starting the workers nor encoding here what was
        held only decoded), its ``workers`` decoding ``missed`` bytes they did not hold (taken out here too)."""
        wall -= self.decode_rate * missed / max(workers, 1)
        if nbytes > 0:
            others = self.others()
            with self._lock:
                waves = self._parallel.setdefault(tuple(chain), [])
                waves.append(_ParallelWave(max(wall, 0.0), nbytes, workers, others))
                del waves[:-_PARALLEL_KEPT]

    def measured_parallel(self, chain: Sequence[str], nbytes: float, workers: int, others: int = 0) -> float | None:
        """The chain's parallel seconds on ``nbytes`` of IR and ``workers`` workers while ``others`` threads
        run besides, as its last parallel waves of about that size on that many workers took them; None if
        it has run no such wave (see :meth:`record_parallel`).

        Each such wave stands for its own time, its part beyond the round trip scaled to ``nbytes`` and to
        what the workers get of the cores now against then: a wave of the same size on the same load is
        estimated at what it took, whatever the round trip is estimated at since (that estimate moves with
        every wave of every chain: 40 to 100 ms on a cluster within a few runs). Waves measured on this
        load, if there are any, stand for it alone: scaled from another load, a quiet wave is a model's
        guess, which outvoted what the chain took under the load itself (a small wave's time grew 2-2.4x
        under one busy program where the cores' share says 1.5x).
        """
        now = self.speed(workers, others)
        with self._lock:
            fixed = self.overhead
            waves = [
                wave
                for wave in self._parallel.get(tuple(chain), ())
                if wave.workers == workers and nbytes / _COMPARABLE <= wave.nbytes <= nbytes * _COMPARABLE
            ]
            here = [wave for wave in waves if wave.others == others]
            times = [
                fixed + max(wave.seconds - fixed, 0.0) * nbytes / wave.nbytes * self.speed(workers, wave.others) / now
                for wave in (here or waves)[-_PARALLEL_SAMPLES:]
            ]
            return statistics.median(times) if times else None

    def record_changed(self, chain: Sequence[str], changed: int, functions: int) -> None:
        """A parallel wave of the chain changed ``changed`` of its ``functions`` targets (the rest came back as
        they went: held here as they were)."""
        if functions > 0:
            with self._lock:
                self._fold(self._changed, tuple(chain), changed / functions)

    def record_wave(self, wall: float, busy: float, workers: int, nbytes: int) -> None:
        """Fold in a parallel wave: ``wall`` seconds in the parent for ``busy`` seconds of worker time.

        The overhead estimate is the median of the last few waves, so that one wave
        slowed down by another program does not turn parallel runs off.
        """
        sample = max(wall - busy / max(workers, 1), 0.0)
        with self._lock:
            self._overheads.append(sample)
            del self._overheads[:-_SAMPLES]
            self.overhead = statistics.median(self._overheads)

    def record_latency(self, samples: Sequence[float]) -> None:
        """What chunks cost beyond their work, as the parent saw them. On workers of this machine, for each
        chunk after a seat's first in a wave, the time from the seat's previous answer (or from handing it out,
        if later) to its own, less the chunk's seconds in the worker: what one more chunk costs a busy seat. On
        a cluster, each seat's first chunk's whole round trip less its work, which also holds what the cluster's
        machinery spends on a chunk (see the executor's ``_Run.answered``). The executor sizes chunks by it
        (see ``_LATENCY_MULTIPLE``)."""
        if samples:
            with self._lock:
                self._latencies.extend(max(sample, 0.0) for sample in samples)
                del self._latencies[: -_SAMPLES * 4]
                self.latency = statistics.median(self._latencies)

    def worker_rate(self, chain: Sequence[str]) -> float:
        """Seconds per byte of IR of the chain's pass calls in a worker: measured there, else in-process,
        else the default."""
        key = tuple(chain)
        with self._lock:
            rate = self._worker.get(key) or self._inline.get(key) or self._rough.get(key)
        return rate if rate is not None else DEFAULT_RATE * len(key)

    def knows(self, chain: Sequence[str]) -> bool:
        """Whether the chain's cost was measured (in-process, roughly too, or in workers) in this process."""
        key = tuple(chain)
        with self._lock:
            return key in self._inline or key in self._worker or key in self._rough

    def inline_seconds(self, chain: Sequence[str], nbytes: float) -> float | None:
        """The chain's in-process seconds on ``nbytes`` of IR at its rate here (see :meth:`_rate_here`); None if
        it was never measured."""
        rate = self._rate_here(tuple(chain))
        return None if rate is None else rate * nbytes

    def _rate_here(self, key: tuple[str, ...]) -> float | None:
        """Seconds per byte of IR of the chain in this process: measured here, else in the workers, else
        roughly here; None if not measured at all."""
        with self._lock:
            return self._inline.get(key) or self._worker.get(key) or self._rough.get(key)

    def estimates(
        self,
        chain: Sequence[str],
        nbytes: int,
        workers: int,
        encoded: int = 0,
        unencoded: int = 0,
        others: int | None = None,
    ) -> tuple[float, float]:
        """Estimated (in-process seconds, parallel seconds) of the chain on ``nbytes`` of IR, while ``others``
        threads run besides (None: as many as run now).

        ``encoded`` bytes of it are functions held only as bytes: in-process, they are decoded first.
        ``unencoded`` bytes are functions held only decoded: in workers, they are encoded here and decoded there.
        """
        key = tuple(chain)
        others = self.others() if others is None else others
        measured = self.measured_parallel(key, nbytes, workers, others)
        return self._estimates(key, nbytes, workers, encoded, unencoded, measured, others)

    def _estimates(
        self,
        key: tuple[str, ...],
        nbytes: int,
        workers: int,
        encoded: int,
        unencoded: int,
        measured: float | None,
        others: int,
    ) -> tuple[float, float]:
        """:meth:`estimates`, given what :meth:`measured_parallel` says of the chain (None: not measured)."""
        inline_rate = self._rate_here(key) or DEFAULT_RATE * len(key)
        with self._lock:
            worker_rate = self._worker.get(key) or inline_rate
        speed = self.speed(workers, others)
        parallel = measured
        if parallel is None:
            parallel = self.overhead + self.ship_rate * nbytes + worker_rate * nbytes / speed
        return inline_rate * nbytes + self.decode_rate * encoded, parallel + self._shipping_held(unencoded, speed)

    def _shipping_held(self, unencoded: int, speed: float) -> float:
        """Seconds to ship ``unencoded`` bytes of functions held only decoded here: encoded here, decoded there
        by workers doing ``speed`` cores' worth of work."""
        return (self.encode_rate + self.decode_rate / speed) * unencoded

    def should_parallelize(
        self, chain: Sequence[str], nbytes: int, workers: int, inline_below: float, encoded: int = 0, unencoded: int = 0
    ) -> bool:
        """The automatic decision: workers only when they are expected to win (see :meth:`estimates`)."""
        key = tuple(chain)
        rate = self._rate_here(key)
        # below any parallel time (at least the overhead) by more than a retry's margin: nothing else counts
        if inline_below < 0 and rate and _RETRY_MARGIN * (rate * nbytes + self.decode_rate * encoded) <= self.overhead:
            return self._decodes_here(encoded)
        others = self.others()
        measured_time = self.measured_parallel(key, nbytes, workers, others)
        inline, parallel = self._estimates(key, nbytes, workers, encoded, unencoded, measured_time, others)
        if inline_below >= 0:
            return inline >= inline_below
        with self._lock:
            # measured in workers, and here only roughly if at all: where those workers are other machines
            # (or share this one with a cluster's scheduler), a rough measure does not settle the cost here
            here_roughly = key in self._rough and self.workers_on_this_machine
            explore = key in self._worker and key not in self._inline and not here_roughly
        if explore and (inline < 1.5 * parallel or inline < _EXPLORE_BELOW):
            # not by a wide margin, or a wave so short that one run here costs next to nothing: learn the
            # in-process cost once
            return self._decodes_here(encoded)
        measured = measured_time is not None
        margin = _WIN_MARGIN if measured else 1.0
        left = self._left_as_bytes(key, nbytes - encoded)
        if margin * parallel + left < inline:
            with self._lock:
                self._kept_inline.pop(key, None)
                if unencoded:  # what was held decoded here goes as bytes: the encoding account closes
                    self._forgone = 0.0
            decoding = self.decode_rate * encoded
            return self._postpones(parallel - (inline - decoding), decoding)
        if unencoded:
            encoding = self._shipping_held(unencoded, self.speed(workers, others))
            if self._buys_encoding(inline - (parallel - encoding) - left, encoding):
                return True
        return (measured and self._retry(key, inline, parallel)) or self._decodes_here(encoded)

    def _left_as_bytes(self, key: tuple[str, ...], decoded: int) -> float:
        """What shipping the chain costs beyond its wave, from ``decoded`` bytes of its targets held decoded
        here: the functions it changes come back as bytes, which a pass run here after decodes first, as
        often as that happened lately (see the module docstring)."""
        with self._lock:
            later = self._decoded_later
            changed = self._changed.get(key, _CHANGED_DEFAULT)
        return self.decode_rate * max(decoded, 0) * changed * later

    def _postpones(self, loss: float, decoding: float) -> bool:
        """Whether to ship a chain that loses ``loss`` seconds in workers (against its own work here) to keep
        from ``decoding`` its input here first (see the module docstring: rent or buy)."""
        with self._lock:
            if loss <= 0:  # wins in workers on its own: no postponing
                if decoding > 0:  # bytes an earlier wave left, taken up by workers that win: the account closes
                    self._decoded_later *= 1 - _ALPHA
                    self._postponed = 0.0
                return True
            if self._postponed + loss > decoding:
                self._bought()
                return False
            self._postponed += loss
            return True

    def _buys_encoding(self, gain: float, encoding: float) -> bool:
        """Whether to ship a chain that would win ``gain`` seconds in workers on its own but for ``encoding``
        its input, held decoded here, first (see the module docstring: the same rent or buy, the other way)."""
        if gain <= 0:
            return False
        with self._lock:
            if self._forgone + gain >= encoding:
                self._forgone = 0.0
                return True
            self._forgone += gain
            return False

    def _decodes_here(self, encoded: int) -> bool:
        """False (the chain runs here); with ``encoded`` bytes to decode first, the postponing account closes."""
        if encoded:
            with self._lock:
                self._bought()
        return False

    def _bought(self) -> None:
        """Bytes an earlier wave left are decoded here now (the lock held): the next bytes start a new
        account, and a wave that leaves bytes weighs their decoding more."""
        self._postponed = 0.0
        self._decoded_later = (1 - _ALPHA) * self._decoded_later + _ALPHA

    def _retry(self, key: tuple[str, ...], inline: float, parallel: float) -> bool:
        """Whether to try in workers once more a chain whose measured parallel time keeps it in-process."""
        with self._lock:
            if parallel >= _RETRY_MARGIN * inline:
                return False
            kept = self._kept_inline[key] = self._kept_inline.get(key, 0) + 1
            if kept < _RETRY_AFTER:
                return False
            self._kept_inline[key] = 0
            return True
