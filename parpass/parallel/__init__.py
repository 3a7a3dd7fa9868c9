"""The parallel executor: function-level passes on worker processes, indistinguishable from a serial run.

Importing this package installs :class:`ParallelExecutor` as the process's
function-pass executor, unless one was chosen already; the package is loaded on
first use (the first function-level pass, registry lookup or config check), so
``import parpass.ir`` alone loads no process pool. Configure it through the
PassContext config options ``parpass.num_workers``, ``parpass.parallel``,
``parpass.inline_below_seconds``, ``parpass.timeout``, ``parpass.strict`` and
``parpass.reproducer``.
"""

from parpass.parallel.backend import Backend, LokyBackend, get_backend, in_worker, set_backend, shutdown, usable_cores
from parpass.parallel.config import ParallelConfig
from parpass.parallel.executor import ParallelExecutor, WaveStats
from parpass.parallel.reproducer import load_reproducer, reproduce, write_reproducer
from parpass.transform.executor import install_default_executor

#: The executor installed for this process (its ``history`` / ``last`` say how each wave ran).
default_executor = ParallelExecutor()
install_default_executor(default_executor)

__all__ = [
    "Backend",
    "LokyBackend",
    "ParallelConfig",
    "ParallelExecutor",
    "WaveStats",
    "default_executor",
    "get_backend",
    "in_worker",
    "load_reproducer",
    "reproduce",
    "set_backend",
    "shutdown",
    "usable_cores",
    "write_reproducer",
]
