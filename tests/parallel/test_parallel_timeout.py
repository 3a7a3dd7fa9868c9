"""``parpass.timeout`` is never silently ignored (issue 11, item 9).

A timeout is enforced by killing the worker that runs past it, so ``auto``
ships every pass to workers while a timeout is set; where the configuration
keeps a pass in-process (``num_workers`` 1, ``parallel`` "never"), the
timeout cannot be enforced and a warning says so, once.
"""

from __future__ import annotations

import warnings

import pytest
from parallel_support import leftovers, parallel_ctx, survivors, wait_gone, worker_pids
from ptest_passes import count_bindings, sleeps

from parpass.errors import PassTimeoutError
from parpass.ir import IRModule
from parpass.transform import PassContext


def _ctx(workers: int, mode: str, timeout: float) -> PassContext:
    return PassContext(config={"parpass.num_workers": workers, "parpass.parallel": mode, "parpass.timeout": timeout})


def _timeout_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if "parpass.timeout" in str(w.message)]


def test_auto_ships_a_pass_whenever_a_timeout_is_set(small_module: IRModule, history) -> None:  # type: ignore[no-untyped-def]
    with _ctx(2, "auto", 0):
        count_bindings(small_module)
    assert not history[-1].parallel  # small module, cheap pass: in-process without a timeout
    with _ctx(2, "auto", 30):
        count_bindings(small_module)
    assert history[-1].parallel


def test_auto_enforces_the_timeout(small_module: IRModule, history, scratch, backend: str) -> None:  # type: ignore[no-untyped-def]
    with parallel_ctx(2):
        count_bindings(small_module)
    pids = worker_pids()
    with pytest.raises(PassTimeoutError) as info, _ctx(2, "auto", 0.5):
        sleeps(small_module)  # 60 s on 'main' unless stopped
    assert info.value.functions == ("main",)
    assert "parpass.timeout" in str(info.value)
    # the worker past its time was killed: with its pool (loky), alone (a cluster, whose nanny starts another)
    left = survivors(backend, pids)
    assert len(wait_gone(pids, leaving=left)) == left
    assert leftovers(scratch) == []
    with parallel_ctx(2):
        count_bindings(small_module)  # fresh workers
    assert len(set(worker_pids()) & set(pids)) == left


@pytest.mark.parametrize(("workers", "mode"), [(1, "auto"), (2, "never")])
def test_in_process_configuration_warns_that_the_timeout_is_not_enforced(  # type: ignore[no-untyped-def]
    small_module: IRModule, workers: int, mode: str, history
) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # Python's own once-per-place rule
        with _ctx(workers, mode, 30):
            count_bindings(small_module)
            count_bindings(small_module)
        with _ctx(workers, mode, 0):
            count_bindings(small_module)
    assert not history[-1].parallel
    messages = _timeout_warnings(caught)
    assert len(messages) == 1
    assert "CountBindings" in messages[0] and "not enforced" in messages[0] and "in-process" in messages[0]
    assert all(issubclass(w.category, RuntimeWarning) for w in caught if "parpass.timeout" in str(w.message))
