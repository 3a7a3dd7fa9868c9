"""What else wants this machine's CPUs now, and what that leaves a wave.

A parallel wave's measured time says what its workers got of the machine
when it ran. A chain measured on a quiet machine and run again while another
program burns a core would be judged by its quiet time until new waves
outvote it; the runnable count the kernel keeps (``/proc/loadavg``) says at
once that the workers will share their cores. The cost model takes such a
time back to a machine with nothing else running (see
:func:`parallel_speed`) and forward to the load of the moment it decides.
"""

from __future__ import annotations

import os


class _ProcField:
    """One whitespace-separated field of a small file under ``/proc``, read without reopening it (a
    descriptor per process: a forked child opens its own, since ``/proc/self`` names the opener)."""

    def __init__(self, path: str, index: int) -> None:
        self.path, self.index = path, index
        self._fd: tuple[int, int] | None = None  # (pid, descriptor; -1: not available)

    def read(self) -> bytes | None:
        """The field now; None where the system does not say."""
        pid = os.getpid()
        if self._fd is None or self._fd[0] != pid:
            try:
                self._fd = (pid, os.open(self.path, os.O_RDONLY))
            except OSError:
                self._fd = (pid, -1)
        if self._fd[1] < 0:
            return None
        try:
            return os.pread(self._fd[1], 128, 0).split()[self.index]
        except (OSError, IndexError):
            return None


_RUNNABLE = _ProcField("/proc/loadavg", 3)  # "running/total" threads
#: nanoseconds the calling thread was runnable but waiting for a CPU (``/proc/self`` would be the process's
#: first thread: a Dask worker runs a chunk in a thread of its pool)
_SCHEDSTAT = "/proc/thread-self/schedstat"


def others_running() -> int:
    """Threads runnable on this machine now besides the calling one (Linux's ``/proc/loadavg``), at one
    instant: a program that burns a core is in every sample; 0 where the system does not say.

    A container may see its host's count; a machine whose count says more programs than it has cores,
    all the time, is one whose workers get less than a core each anyway.
    """
    field = _RUNNABLE.read()
    try:
        return max(int(field.split(b"/")[0]) - 1, 0) if field else 0
    except ValueError:
        return 0


def run_delay() -> float:
    """Seconds the calling thread has been runnable but waiting for a CPU so far (Linux's schedstat); 0.0
    where the system does not say. What other programs took of a worker's time is in this, not in its work.

    Read afresh each time (~5 us): a descriptor kept open would name the thread that opened it.
    """
    try:
        fd = os.open(_SCHEDSTAT, os.O_RDONLY)
    except OSError:
        return 0.0
    try:
        return int(os.pread(fd, 128, 0).split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0
    finally:
        os.close(fd)


def parallel_speed(workers: int, others: int, cores: int) -> float:
    """How many cores' worth of work ``workers`` busy workers do on ``cores`` cores while ``others`` other
    threads run (the kernel shares cores evenly among runnable threads); ``cores`` 0: as many as needed."""
    workers = max(workers, 1)
    if cores <= 0:
        return float(workers)
    return workers * min(1.0, cores / (workers + others))
