"""Where function-level work runs: a small interface over a pool of worker processes.

The executor only needs to submit a callable, wait on futures, know how many
workers there are, and throw a pool away after a fault. :class:`LokyBackend`
does this with pools of loky workers (started once, reused across passes and
contexts, replaced when the worker count changes or a worker dies). Another
engine, a cluster scheduler say, implements :class:`Backend` and is installed
with :func:`set_backend`.

Every pool has a *generation*, a number that grows each time the backend
starts a pool. A task that its pool took down with it (a worker died, or the
pool was killed) fails with :class:`PoolLost`, which names the generation and
the workers that died on their own. That is what lets a wave tell "a function
of mine killed its worker" (an error to report) from "my pool was lost to
someone else's fault" (a retry on a fresh pool), when several threads share
the pool.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import gc
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from multiprocessing.connection import wait as wait_ready
from typing import TYPE_CHECKING, Any, Protocol

from parpass.parallel.cost import DEFAULT_LATENCY, DEFAULT_OVERHEAD

if TYPE_CHECKING:
    from parpass.parallel.crew import Crew, CrewLike

#: Set in worker processes, so that a pass run inside a worker never starts another pool.
_IN_WORKER = False

#: Seconds to wait for killed workers to be gone, and for a warm-up task; only a stuck system gets near.
_KILL_WAIT = 10.0
_WARM_WAIT = 60.0


def in_worker() -> bool:
    """True inside a parpass worker process."""
    return _IN_WORKER


def _mark_worker(parent: int) -> None:
    """The initializer of every worker process; ``parent`` is the pid of the process that started the pool."""
    # Ctrl-C in a terminal reaches the whole process group: the parent handles it (and kills the
    # workers); a worker dying of it on its own would look like a crash to the parent.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _skip_teardown_after_a_clean_exit()
    from parpass.parallel.wave import watch_parent

    watch_parent(parent)  # a parent killed outright (SIGTERM, SIGKILL): clean up this worker's wave and exit
    become_worker()


#: Set in a worker once loky let it go the clean way (its pool shut down, or it idled out): see below.
_LET_GO = False


def _skip_teardown_after_a_clean_exit() -> None:
    """Make a worker that loky lets go cleanly end without the interpreter's teardown.

    A worker's exit frees its heap object by object, the resident IR mostly: 0.4 s for the 16,000
    functions of ``parpass gen --functions 16000``, which the parent waits for at its own exit, at
    ``parpass.shutdown()`` and when the pool is resized. loky's worker loop calls its ``_python_exit`` on
    that clean way out only (not when it fails); that call is noted here, and the worker's last exit handler
    (registered first, so every other one, a coverage tool's say, runs before it) ends the process with
    status 0, as the clean way out does. Any other exit, or a loky without that call, goes the usual way.
    """
    from loky import process_executor

    loky_exit = getattr(process_executor, "_python_exit", None)
    if not callable(loky_exit):  # pragma: no cover
        return

    def noted_exit() -> None:
        global _LET_GO
        _LET_GO = True
        loky_exit()

    process_executor._python_exit = noted_exit
    atexit.register(_end_if_let_go)


def _end_if_let_go() -> None:
    """A worker's last exit handler: end the process now if loky let it go cleanly (see above)."""
    if not _LET_GO:
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            if stream is not None:
                stream.flush()
    os._exit(0)


def become_worker() -> None:
    """Make this process a parpass worker: passes run here never start workers of their own."""
    global _IN_WORKER
    _IN_WORKER = True
    # A worker must not grab every core for numpy's own threads: the pool is the parallelism.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    # loky collects garbage in a worker about once a second between tasks (without psutil);
    # parpass and its imports are here for good, so leave them out of those collections.
    gc.freeze()


@functools.cache
def usable_cores() -> int:
    """Cores this process may use (affinity and cgroup limits respected), read once: reading them costs
    ~0.1-0.2 ms, which a first short run in ``auto`` mode would otherwise pay on top of its work."""
    import loky

    return max(1, int(loky.cpu_count()))


def _broken_pool_type() -> type[BaseException]:
    from concurrent.futures.process import BrokenProcessPool as StdBroken

    try:
        from loky.process_executor import BrokenProcessPool as LokyBroken

        broken: type[BaseException] = LokyBroken
        return broken
    except ImportError:  # pragma: no cover
        return StdBroken


#: What a future raises when its pool broke (loky's BrokenProcessPool; :class:`PoolLost` is one).
BrokenPool = _broken_pool_type()


class PoolLost(BrokenPool):  # type: ignore[misc,valid-type]  # a base chosen at run time (loky has no stubs)
    """The pool a task ran on was lost: a worker died, or the pool was killed.

    ``dead`` holds the pids of the workers that died on their own (a crash, a
    signal from outside), seen before the pool killed the others; it is empty
    when the parent killed the pool (after a timeout, an interrupt, another
    wave's crash). ``generation`` is the pool's.
    """

    def __init__(self, message: str, generation: int, dead: frozenset[int] = frozenset(), exit_codes: str = "") -> None:
        super().__init__(message)
        self.generation = generation
        self.dead = dead
        self.exit_codes = exit_codes

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.generation, self.dead, self.exit_codes))


class Task(Future[Any]):
    """A future of a backend, which also says which pool (``generation``) runs it."""

    def __init__(self, generation: int) -> None:
        super().__init__()
        self.generation = generation


class Backend(Protocol):
    """A pool of worker processes."""

    #: Seconds a wave's round trip (beyond its work) and a chunk's are assumed to cost on this backend before
    #: the executor has measured any: what its first decisions go by (see parpass.parallel.cost.CostModel).
    assumed_overhead: float
    assumed_latency: float
    #: Whether the workers run on this machine, so that what a pass costs there stands for what it costs
    #: here until measured here (a cluster's workers may be other machines, faster or slower).
    workers_on_this_machine: bool

    def submit(self, num_workers: int, fn: Callable[..., Any], /, *args: Any) -> Task:
        """Run ``fn(*args)`` on a pool of ``num_workers`` workers (replacing the pool if its size differs).

        Never raises for a lost pool: a task whose pool died under it, or that
        could not be handed to a pool, fails with :class:`PoolLost`, so that a
        loss is reported the same way whether it happened before or after the
        submission.
        """
        ...

    def warm(self, num_workers: int) -> None:
        """Start ``num_workers`` workers and load parpass in each (a no-op when already done; never raises
        for a lost pool: the tasks submitted next meet the loss)."""
        ...

    def ready(self, num_workers: int) -> bool:
        """Whether ``num_workers`` workers are started and loaded; if not, start them without waiting.

        Lets the executor go on in-process while the workers start, and move
        work to them once they are there.
        """
        ...

    def started(self, num_workers: int) -> bool:
        """Whether ``num_workers`` workers are started or starting already (whoever asked for them), so that
        asking for them costs no new start; starts nothing and asks nothing of them."""
        ...

    def worker_pids(self) -> list[int]:
        """Pids of the live workers of the current pool (for tests and diagnostics)."""
        ...

    def crew(self, num_workers: int) -> contextlib.AbstractContextManager[CrewLike]:
        """Hold the crew of ``num_workers`` workers (one seat per worker, each addressable: what lets the
        executor send a function to the worker that holds it) for one wave; waves of other threads wait.

        The crew outlives the wave (and the pass) while it is used. When the
        wave fails (an exception leaves the ``with``), the crew's workers are
        killed and the next wave gets a new crew.
        """
        ...

    def kill(self, generation: int | None = None) -> None:
        """Terminate the workers of pool ``generation`` now (default: the current pool) and wait until they
        are gone; their pending tasks fail with :class:`PoolLost`. A pool already replaced is still killed
        (a wave that timed out on it needs that); the pool that replaced it is left alone."""
        ...

    def shutdown(self) -> None:
        """Release the workers."""
        ...


class _Pool:
    """One loky executor and what the backend knows of it: its generation, its workers, how it ended."""

    def __init__(self, executor: Any, size: int, generation: int) -> None:
        self.executor = executor
        self.size = size
        self.generation = generation
        self.warm = False
        self.warming: list[Task] = []  # warm-up tasks started without waiting for them
        self.killed = False
        self.retired = False  # replaced (another size, or it refused a task): it takes no new tasks
        self.pending = 0  # tasks submitted and not done
        self.workers: dict[int, Any] = {}  # every worker process seen, by pid (loky forgets them as it kills)
        self.dead: frozenset[int] | None = None  # set once, when the pool is lost

    def usable(self) -> bool:
        flags = getattr(self.executor, "_flags", None)
        refused = flags is not None and (flags.broken is not None or bool(flags.shutdown))
        return not (self.killed or self.retired or refused)

    def note_workers(self) -> None:
        """Remember the pool's current workers (loky starts them on demand, in ``submit``)."""
        self.workers.update(getattr(self.executor, "_processes", None) or {})

    def gone(self) -> bool:
        """Whether every worker this pool ever had has exited."""
        self.note_workers()
        sentinels = [p.sentinel for p in list(self.workers.values())]
        return len(wait_ready(sentinels, timeout=0)) == len(sentinels)

    def lost(self, error: BaseException) -> PoolLost:
        """The :class:`PoolLost` for a task that failed with loky's ``error``.

        Called from loky's manager thread as it fails the pending tasks, before
        it kills the surviving workers: the workers already dead then are the
        ones that died on their own.
        """
        if self.dead is None:
            self.note_workers()
            if self.killed:
                self.dead = frozenset()
            else:
                by_sentinel = {p.sentinel: pid for pid, p in self.workers.items()}
                self.dead = frozenset(by_sentinel[s] for s in wait_ready(list(by_sentinel), timeout=0))
        detail = str(error).strip().split("\n")[0]
        codes = str(error).split("The exit codes of the workers are ", 1)
        exit_codes = codes[1].split("\n", 1)[0].strip() if len(codes) == 2 else ""
        if self.killed:
            detail = "the worker pool was killed"
        return PoolLost(detail, self.generation, self.dead, exit_codes)

    def kill(self) -> None:
        """SIGKILL every worker and wait (bounded) until all are gone; loky's executor is then shut down.

        The workers are killed here, not by loky: loky looks for a worker's
        children with a ``pgrep`` subprocess, which a second Ctrl-C in a terminal
        interrupts (and loky then fails on its own error path).
        """
        self.killed = True
        executor = self.executor
        with contextlib.suppress(Exception):
            executor._flags.flag_as_shutting_down(True)
        self.note_workers()
        processes = getattr(executor, "_processes", None)
        if processes is not None:
            processes.clear()  # nothing left for loky's manager to kill its own way
        sentinels = [p.sentinel for p in list(self.workers.values())]
        exited = set(wait_ready(sentinels, timeout=0))
        for pid, process in list(self.workers.items()):
            if process.sentinel not in exited:  # an exited worker's pid may belong to someone else by now
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            _wait_all(sentinels, _KILL_WAIT)
        with contextlib.suppress(Exception):
            executor.shutdown(wait=False, kill_workers=True)


def _wait_all(sentinels: list[Any], seconds: float) -> None:
    """Wait until every sentinel is ready (its process exited), at most ``seconds``."""
    deadline = time.monotonic() + seconds
    left = list(sentinels)
    while left and time.monotonic() < deadline:
        ready = wait_ready(left, timeout=max(0.0, deadline - time.monotonic()))
        left = [s for s in left if s not in ready]


class LokyBackend:
    """Workers from loky process pools, one pool at a time (a retired pool finishes its tasks, then ends)."""

    #: a wave here: writing its file, a message to each seat, the answers, the merge; a chunk's socket
    assumed_overhead = DEFAULT_OVERHEAD
    assumed_latency = DEFAULT_LATENCY
    workers_on_this_machine = True

    def __init__(self, idle_timeout: float = 300.0, crew_idle: float = 120.0) -> None:
        self._idle_timeout = idle_timeout
        self._crew_idle = crew_idle
        self._pool: _Pool | None = None
        self._pools: dict[int, _Pool] = {}  # every pool with tasks or workers that may still run, by generation
        self._generation = 0
        self._lock = threading.Lock()
        self._crew: Crew | None = None
        self._crew_lock = threading.Lock()  # held for a whole wave
        self._exit_watch: threading.Thread | None = None

    def _current(self, num_workers: int) -> _Pool:
        """The pool to submit to: the current one if it has ``num_workers`` and is usable, else a new one.

        A pool replaced while another thread's tasks run on it finishes them
        first; an idle one (or one that broke) is killed at once: loky's own
        shutdown of a pool that just lost a worker can leave the others running.
        """
        from loky import ProcessPoolExecutor

        with self._lock:
            pool = self._pool
            if pool is not None and pool.size == num_workers and pool.usable():
                return pool
            if pool is not None:
                pool.retired = True
                with contextlib.suppress(Exception):
                    pool.executor.shutdown(wait=False)
            self._generation += 1
            executor = ProcessPoolExecutor(
                max_workers=num_workers, timeout=self._idle_timeout, initializer=_mark_worker, initargs=(os.getpid(),)
            )
            self._pool = pool = _Pool(executor, num_workers, self._generation)
            idle = [p for p in self._pools.values() if not p.pending and not p.killed]
            self._pools = {g: p for g, p in self._pools.items() if not p.gone()}
            self._pools[pool.generation] = pool
        for old in idle:
            old.kill()
        return pool

    def submit(self, num_workers: int, fn: Callable[..., Any], /, *args: Any) -> Task:
        if self._crew is not None:  # its seats hold every worker: let them go, or the task would wait for ever
            with self._crew_lock:
                crew, self._crew = self._crew, None
                if crew is not None:
                    crew.close()
        return self._submit(num_workers, fn, *args)

    def _submit(self, num_workers: int, fn: Callable[..., Any], /, *args: Any) -> Task:
        for attempt in range(2):
            pool = self._current(num_workers)
            task = Task(pool.generation)
            try:
                inner = pool.executor.submit(fn, *args)
                break
            except Exception as err:  # lost since it was handed out (broken, shut down, queues closed)
                pool.retired = True  # the next attempt gets a fresh pool
                if attempt:
                    task.set_exception(pool.lost(err) if isinstance(err, BrokenPool) else _refused(pool, err))
                    return task
        pool.note_workers()
        with self._lock:
            pool.pending += 1
        inner.add_done_callback(lambda done: self._settle(pool, task, done))
        return task

    def _settle(self, pool: _Pool, task: Task, done: Future[Any]) -> None:
        """Pass loky's outcome on to ``task``, a lost pool as :class:`PoolLost`."""
        with self._lock:
            pool.pending -= 1
        from loky.process_executor import ShutdownExecutorError

        if done.cancelled():
            task.cancel()
            return
        error = done.exception()
        if error is None:
            task.set_result(done.result())
        elif _is_worker_death(error) or isinstance(error, ShutdownExecutorError):
            task.set_exception(pool.lost(error))
        else:
            task.set_exception(error)

    def warm(self, num_workers: int) -> None:
        pool = self._current(num_workers)
        if pool.warm:
            return
        tasks = self._start(pool, num_workers)
        try:
            for task in tasks:
                task.result(timeout=_WARM_WAIT)
        except Exception:  # a lost or slow pool: the wave's own tasks meet (and report or retry) it
            return
        pool.warm = True

    def _start(self, pool: _Pool, num_workers: int) -> list[Task]:
        """The warm-up tasks of ``pool``, submitted now unless they already are."""
        if not pool.warming:
            from parpass.parallel.worker import warm_up

            pool.warming = [self._submit(num_workers, warm_up, 0.05) for _ in range(num_workers)]
        return pool.warming

    def _has_crew(self, num_workers: int) -> bool:
        """Whether a live crew of ``num_workers`` seats holds the workers (their pool may be gone meanwhile)."""
        crew = self._crew
        return crew is not None and crew.size == num_workers and crew.alive()

    def ready(self, num_workers: int) -> bool:
        if self._has_crew(num_workers):
            return True
        pool = self._current(num_workers)
        if pool.warm:
            return True
        tasks = self._start(pool, num_workers)
        if all(t.done() for t in tasks):
            if any(t.exception() is not None for t in tasks):
                pool.warming = []  # lost while starting: the next look starts it again
                return False
            pool.warm = True
        return pool.warm

    def started(self, num_workers: int) -> bool:
        if self._has_crew(num_workers):
            return True
        with self._lock:
            pool = self._pool
            return pool is not None and pool.size == num_workers and pool.usable() and (pool.warm or bool(pool.warming))

    @contextlib.contextmanager
    def crew(self, num_workers: int) -> Iterator[Crew]:
        from parpass.parallel.crew import Crew

        with self._crew_lock:
            crew = self._crew
            pool = self._pool
            current = pool is not None and crew is not None and crew.generation == pool.generation and pool.usable()
            if crew is None or crew.size != num_workers or not current or not crew.alive():
                self._crew = None
                if crew is not None:
                    crew.close()
                self.warm(num_workers)
                crew = self._crew = Crew(self._submit, num_workers, self._crew_idle)
            _close_crew_before_loky_exits(self)
            if self._exit_watch is None:
                self._exit_watch = threading.Thread(
                    target=_close_crew_when_exiting, args=(self,), name="parpass-exit-watch", daemon=True
                )
                self._exit_watch.start()
            try:
                yield crew
            except BaseException:
                # No worker may go on with (or outlive) a wave that failed or was interrupted.
                self._crew = None
                self.kill(crew.generation)
                crew.close()
                raise

    def crew_files(self) -> list[str]:
        """The files the live crew keeps between waves (its result stores); removed when it closes."""
        crew = self._crew
        return [] if crew is None else crew.files()

    def worker_pids(self) -> list[int]:
        pool = self._pool
        if pool is None:
            return []
        processes = getattr(pool.executor, "_processes", None) or {}
        return sorted(int(pid) for pid in list(processes))

    def kill(self, generation: int | None = None) -> None:
        with self._lock:
            pool = self._pool if generation is None else self._pools.get(generation)
            if pool is None:
                return
            if pool is self._pool:
                self._pool = None
        pool.kill()  # idempotent: a second thread killing the same pool also waits until its workers are gone

    def close_crew(self) -> None:
        """Let the crew's seats go (their workers stay in the pool)."""
        crew, self._crew = self._crew, None
        if crew is not None:
            crew.close()

    def shutdown(self) -> None:
        self.close_crew()
        with self._lock:
            pools = list(self._pools.values())
            self._pool = None
            self._pools.clear()
        for pool in pools:
            pool.retired = True
            manager = getattr(pool.executor, "_executor_manager_thread", None)
            with contextlib.suppress(Exception):
                pool.executor.shutdown(wait=False)
            if manager is not None:
                manager.join(timeout=_KILL_WAIT)
            if not pool.gone():  # a task still running (or a stuck worker): do not wait on it for ever
                pool.kill()


def _close_crew_before_loky_exits(backend: LokyBackend) -> None:
    """At interpreter exit, let the crew's seats go before loky waits for its workers' tasks to end.

    loky's exit hook (a :mod:`threading` one, which runs before :mod:`atexit`)
    joins its manager thread, which waits for every running task: a seat serves
    until it is let go or idles out (two minutes). Hooks registered later run
    first, and loky registers its hook again each time a process pool starts
    (ours, or any other in this process): ours is registered again whenever
    it is no longer the last.
    """
    hooks = getattr(threading, "_threading_atexits", None)
    register = getattr(threading, "_register_atexit", None)
    if hooks is None or register is None:  # pragma: no cover
        return
    last = getattr(hooks[-1], "func", None) if hooks else None
    if last == backend.close_crew:
        return
    with contextlib.suppress(RuntimeError):  # already shutting down
        register(backend.close_crew)


#: Seconds between two looks of the exit watch (see _close_crew_when_exiting).
_EXIT_WATCH_EVERY = 0.1


def _close_crew_when_exiting(backend: LokyBackend) -> None:
    """Let the crew's seats go as soon as the interpreter starts exiting (a daemon thread's loop).

    What :func:`_close_crew_before_loky_exits` cannot ensure: a process pool
    started after the last wave (a benchmark's, a user's) registers loky's exit
    hook after ours, and it runs first, waiting for the seats; this lets them
    go while it waits.
    """
    while not getattr(threading, "_SHUTTING_DOWN", False):
        time.sleep(_EXIT_WATCH_EVERY)
    backend.close_crew()


def _is_worker_death(error: BaseException) -> bool:
    try:
        from loky.process_executor import TerminatedWorkerError
    except ImportError:  # pragma: no cover
        return False
    return isinstance(error, TerminatedWorkerError)


def _refused(pool: _Pool, error: BaseException) -> PoolLost:
    """A submission the pool refused (shut down or closed by another thread's kill): lost, nobody's fault here."""
    return PoolLost(f"the worker pool refused the task: {type(error).__name__}: {error}", pool.generation)


_backend: Backend = LokyBackend()


def get_backend() -> Backend:
    """The backend function-level passes run on."""
    return _backend


def backend_for(scheduler: str) -> Backend:
    """The backend of a run whose ``parpass.scheduler`` is ``scheduler``: the installed one for "" (this
    machine's workers, unless :func:`set_backend` chose others), else the Dask cluster at that address."""
    if not scheduler:
        return _backend
    from parpass.parallel.cluster import backend_at

    return backend_at(scheduler)


def set_backend(backend: Backend) -> Backend:
    """Install another backend; returns the previous one (shut it down if you are done with it)."""
    global _backend
    previous, _backend = _backend, backend
    return previous


def shutdown() -> None:
    """Release the worker processes (they are started again on demand)."""
    _backend.shutdown()


atexit.register(shutdown)
