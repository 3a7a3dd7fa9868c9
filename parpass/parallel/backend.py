"""Where function-level work runs: a small interface over a pool of worker processes.

The executor only needs to submit a callable, wait on futures, know how many
workers there are, and throw the pool away after a fault. :class:`LokyBackend`
does this with loky's reusable executor (started once, reused across passes
and contexts, resized on demand). Another engine, a cluster scheduler say,
implements :class:`Backend` and is installed with :func:`set_backend`.
"""

from __future__ import annotations

import atexit
import gc
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol

#: Set in worker processes, so that a pass run inside a worker never starts another pool.
_IN_WORKER = False


def in_worker() -> bool:
    """True inside a parpass worker process."""
    return _IN_WORKER


def _mark_worker() -> None:
    """The initializer of every worker process."""
    global _IN_WORKER
    _IN_WORKER = True
    # A worker must not grab every core for numpy's own threads: the pool is the parallelism.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    # loky collects garbage in a worker about once a second between tasks (without psutil);
    # parpass and its imports are here for good, so leave them out of those collections.
    gc.freeze()


def usable_cores() -> int:
    """Cores this process may use (affinity and cgroup limits respected)."""
    import loky

    return max(1, int(loky.cpu_count()))


class Backend(Protocol):
    """A pool of worker processes."""

    def submit(self, num_workers: int, fn: Callable[..., Any], /, *args: Any) -> Future[Any]:
        """Run ``fn(*args)`` on a pool of ``num_workers`` workers (resizing it if needed).

        A pool that broke (a worker died) never raises here: the returned
        future holds the :data:`BrokenPool` error, so that a crash is reported
        the same way whether it happened before or after the submission.
        """
        ...

    def warm(self, num_workers: int) -> None:
        """Start ``num_workers`` workers and load parpass in each (a no-op when already done)."""
        ...

    def worker_pids(self) -> list[int]:
        """Pids of the live workers (for tests and diagnostics)."""
        ...

    def kill(self) -> None:
        """Terminate all workers now (after a crash, a timeout or an interrupt)."""
        ...

    def shutdown(self) -> None:
        """Release the workers."""
        ...


class LokyBackend:
    """Workers from loky's reusable executor."""

    def __init__(self, idle_timeout: float = 300.0) -> None:
        self._idle_timeout = idle_timeout
        self._executor: Any = None
        self._size = 0
        self._warm = False
        self._lock = threading.Lock()

    def _get(self, num_workers: int) -> Any:
        import loky

        with self._lock:
            if self._executor is None or self._size != num_workers or _is_broken(self._executor):
                self._executor = loky.get_reusable_executor(
                    max_workers=num_workers, timeout=self._idle_timeout, initializer=_mark_worker
                )
                self._size = num_workers
                self._warm = False
            return self._executor

    def submit(self, num_workers: int, fn: Callable[..., Any], /, *args: Any) -> Future[Any]:
        executor = self._get(num_workers)
        try:
            return executor.submit(fn, *args)  # type: ignore[no-any-return]
        except BrokenPool as err:  # a worker died since the last submission
            failed: Future[Any] = Future()
            failed.set_exception(err)
            return failed

    def warm(self, num_workers: int) -> None:
        if self._executor is not None and self._size == num_workers and self._warm:
            return
        from parpass.parallel.worker import warm_up

        executor = self._get(num_workers)
        for future in [executor.submit(warm_up, 0.05) for _ in range(num_workers)]:
            future.result()
        self._warm = True

    def worker_pids(self) -> list[int]:
        executor = self._executor
        if executor is None:
            return []
        processes = getattr(executor, "_processes", None) or {}
        return sorted(int(pid) for pid in processes)

    def kill(self) -> None:
        with self._lock:
            executor, self._executor, self._size, self._warm = self._executor, None, 0, False
        if executor is not None:
            executor.shutdown(wait=True, kill_workers=True)

    def shutdown(self) -> None:
        with self._lock:
            executor, self._executor, self._size, self._warm = self._executor, None, 0, False
        if executor is not None:
            executor.shutdown(wait=True)


def _is_broken(executor: Any) -> bool:
    """Whether a loky executor lost a worker or was shut down (it then refuses new work)."""
    flags = getattr(executor, "_flags", None)
    return flags is not None and (flags.broken is not None or bool(flags.shutdown))


_backend: Backend = LokyBackend()


def get_backend() -> Backend:
    """The backend function-level passes run on."""
    return _backend


def set_backend(backend: Backend) -> Backend:
    """Install another backend; returns the previous one (shut it down if you are done with it)."""
    global _backend
    previous, _backend = _backend, backend
    return previous


def shutdown() -> None:
    """Release the worker processes (they are started again on demand)."""
    _backend.shutdown()


atexit.register(shutdown)


def _broken_pool_type() -> type[BaseException]:
    from concurrent.futures.process import BrokenProcessPool as StdBroken

    try:
        from loky.process_executor import BrokenProcessPool as LokyBroken

        return LokyBroken
    except ImportError:  # pragma: no cover
        return StdBroken


#: What a future raises when its worker process died.
BrokenPool = _broken_pool_type()
