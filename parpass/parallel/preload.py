"""Reading a module file for a run in worker processes: every function checked, most of it by the workers.

:func:`~parpass.ir.serialization.load` decodes every function of a module in the
calling process, so that a corrupt file is rejected before any pass runs. When the
module goes to worker processes next, that decoding is done twice, and the first
time serially: on 16,000 functions (a 59 MB file) about 1.2 s before the first
pass starts, while the workers have not even been asked to start.

:func:`load_for_workers` checks the file just as strictly (a bad function gives
the very error ``load`` gives, naming the file, the function and the place) but
starts the workers first, reads the file keeping its functions as bytes, and
then checks them in a wave of their own: this process decodes functions in
module order while the workers start (the executor's probe), and the workers
decode the rest, which they keep resident for the pipeline's first wave. A file
too small for that to pay, a format whose reader decodes every function anyway
(JSON), or a run that keeps its passes in-process, is read by ``load`` as before.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from parpass.ir import IRModule
from parpass.ir.node import BaseFunc
from parpass.ir.serialization import IRObject, load
from parpass.parallel.config import REPRODUCER
from parpass.transform import FunctionLevelPass, PassContext, PassInfo

__all__ = ["CHECK_IN_WORKERS_BYTES", "load_for_workers"]

#: Files smaller than this are checked in-process: decoding them (about 20 ns a byte here, 0.3 s for
#: 16 MB) costs less than the workers' start, and a pipeline on less may not want workers at all.
CHECK_IN_WORKERS_BYTES = 16 << 20


def _unchanged(func: BaseFunc, mod: IRModule, ctx: PassContext) -> BaseFunc:
    return func


class CheckDecodes(FunctionLevelPass):
    """Visits every function (``SkipOptimization`` ones too) and returns it as it is: running it decodes each
    one, wherever it runs, which is the check."""

    def __init__(self) -> None:
        super().__init__(_unchanged, PassInfo(0, "CheckDecodes"))

    def visits(self, func_kind: type[BaseFunc], attrs: Mapping[str, Any]) -> bool:
        return True


def load_for_workers(path: str, config: Mapping[str, Any] | None = None) -> IRObject:
    """The module or function in ``path``, as :func:`~parpass.ir.serialization.load` gives it and with its
    errors, read for a pipeline run under ``config`` (a PassContext config): for a file of at least
    :data:`CHECK_IN_WORKERS_BYTES` that the run may send to workers, the workers are started now and do
    most of the checking, keeping what they decode for the first wave."""
    from parpass.parallel import default_executor

    try:
        large = os.path.getsize(path) >= CHECK_IN_WORKERS_BYTES
    except OSError:
        large = False  # load() words the error
    if not large:
        return load(path)
    # the check is no pass of the run: a failure of it leaves no reproducer (the in-process check words it)
    ctx = PassContext(config={k: v for k, v in (config or {}).items() if k != REPRODUCER})
    if not default_executor.start_workers(ctx):
        return load(path)
    obj = load(path, validate=False)
    if not isinstance(obj, IRModule) or all(obj.held_columns()[1]):
        return obj  # a function, or a format whose reader decoded (and so checked) every function
    try:
        return default_executor.run([CheckDecodes()], obj, ctx)
    except Exception:
        # A function that does not decode (or workers lost on the way): the in-process check says which,
        # in the words it always uses, or hands back the module it read if the trouble was the workers'.
        return load(path)
