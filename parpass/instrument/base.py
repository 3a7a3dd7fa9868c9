"""PassInstrument: callbacks around every pass run in a PassContext (TVM's ``tvm.instrument``).

An instrument is registered with ``PassContext(instruments=[...])``. The context
calls, in the order of its instrument list:

* ``enter_pass_ctx()`` when the context is entered (or the instrument installed
  with ``override_instruments``), ``exit_pass_ctx()`` when it is left;
* ``should_run(mod, info)`` of every instrument before each pass (unless the
  pass is in the context's ``required_pass``); the pass runs only if none of
  them returned False;
* ``run_before_pass(mod, info)`` and, if the pass returned normally,
  ``run_after_pass(mod, info)``.

``on_pass_error(mod, info, error)`` is a parpass addition: it is called instead
of ``run_after_pass`` when the pass raised, or when an instrument's
``run_before_pass`` / ``run_after_pass`` for it raised (to the instruments whose
``run_before_pass`` was called and whose ``run_after_pass`` did not complete), so
that an instrument that pairs before/after (timing, change printing) can close
its record. It is not part of the TVM trace and the default does nothing.
``on_pass_timing(info, timing, fused)``, also a parpass addition, is called just
before ``run_after_pass`` of a function-level pass with the time the executor
measured for it (wall and CPU seconds summed over the processes that ran it).

The modules given to the callbacks are read-only views: an instrument cannot
change the IR the passes work on.

An instrument that never reads those modules says so with the class attribute
``reads_module = False``; then, unless it overrides ``should_run`` (a veto
cannot be honoured inside a fused chain), a Sequential may still run
consecutive function-level passes as one fused chain (one round trip to the
workers), and calls the callbacks of each pass of the chain exactly as a
pass-by-pass run would, in the same order. What such an instrument is given is
then not the module before or after that pass: every callback of a pass in a
fused chain gets the module the chain started from.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, overload

from parpass.ir.module import same_fingerprint

if TYPE_CHECKING:
    from parpass.ir.module import IRModule
    from parpass.transform.executor import StageTiming
    from parpass.transform.pass_info import PassInfo

__all__ = ["PassInstrument", "keeps_fusion", "pass_instrument", "same_fingerprint"]


class PassInstrument:
    """Base of all instruments; every callback does nothing by default (``should_run`` says True).

    The recommended way to write one is the :func:`pass_instrument` class
    decorator on a plain class that defines only the callbacks it needs;
    subclassing works too.
    """

    #: Whether the callbacks read the modules they are given. True (the default) keeps TVM's exact
    #: semantics: every pass runs on its own, and each callback gets the module before or after its
    #: pass. An instrument that never reads them sets False, so that passes can still be fused; each
    #: callback of a pass in a fused chain then gets the module the chain started from.
    reads_module: ClassVar[bool] = True

    @property
    def name(self) -> str:
        """The instrument's name (its class name)."""
        return type(self).__name__

    def enter_pass_ctx(self) -> None:
        """Called when a PassContext holding this instrument is entered."""

    def exit_pass_ctx(self) -> None:
        """Called when a PassContext holding this instrument is left (also on an exception)."""

    def should_run(self, mod: IRModule, info: PassInfo) -> bool:
        """Whether the pass described by ``info`` may run on ``mod``; any False vetoes it."""
        return True

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        """Called just before a pass that will run, with its input module."""

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        """Called just after a pass returned, with its output module."""

    def on_pass_error(self, mod: IRModule, info: PassInfo, error: BaseException) -> None:
        """Called (instead of ``run_after_pass``) when a pass that got ``run_before_pass`` raised ``error``.

        Also called when an instrument callback around that pass raised ``error``
        before this instrument's ``run_after_pass`` completed.
        """

    def on_pass_timing(self, info: PassInfo, timing: StageTiming, fused: bool) -> None:
        """Called just before ``run_after_pass`` of a function-level pass with the time the executor measured.

        ``timing.wall`` and ``timing.cpu`` are seconds summed over the processes that
        ran the pass (the workers, or this process). ``fused`` says that the pass ran
        as one stage of a fused chain, so that no time of its own elapsed in this
        process between its ``run_before_pass`` and ``run_after_pass``. Not called
        when the executor reported nothing (a pass that raised, an executor without
        a chain observer). Not part of the TVM trace; the default does nothing.
        """

    def __repr__(self) -> str:
        return f"<{self.name}>"


def may_veto(pi: PassInstrument) -> bool:
    """Whether ``pi`` may veto passes: it overrides ``should_run`` (in its class or on the instance)."""
    return type(pi).should_run is not PassInstrument.should_run or "should_run" in getattr(pi, "__dict__", {})


def keeps_fusion(pi: PassInstrument) -> bool:
    """Whether ``pi`` lets a Sequential fuse passes: it reads no module and cannot veto a pass."""
    return pi.reads_module is False and not may_veto(pi)


def _wrap_class_pass_instrument(pi_cls: type) -> type[PassInstrument]:
    """A subclass of ``pi_cls`` and :class:`PassInstrument`, named like ``pi_cls``."""
    if issubclass(pi_cls, PassInstrument):
        return pi_cls

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        pi_cls.__init__(self, *args, **kwargs)

    wrapped = type(
        pi_cls.__name__,
        (pi_cls, PassInstrument),
        {
            "__init__": functools.wraps(pi_cls.__init__)(__init__),
            "__doc__": pi_cls.__doc__,
            "__module__": pi_cls.__module__,
            "__qualname__": pi_cls.__qualname__,
        },
    )
    # Instances pickle by reference to the wrapper, which took the class's module-level name.
    return wrapped


@overload
def pass_instrument(pi_cls: type) -> type[PassInstrument]: ...


@overload
def pass_instrument(pi_cls: None = None) -> Callable[[type], type[PassInstrument]]: ...


def pass_instrument(pi_cls: type | None = None) -> Any:
    """Class decorator that makes a plain class a :class:`PassInstrument` (TVM's ``pass_instrument``).

    The class defines any of ``enter_pass_ctx``, ``exit_pass_ctx``, ``should_run``,
    ``run_before_pass``, ``run_after_pass`` (and ``on_pass_error``); the others
    keep the do-nothing defaults; ``reads_module = False`` in the class body says that
    its callbacks never read the modules they get (see :class:`PassInstrument`).
    Usable as ``@pass_instrument`` or ``@pass_instrument()``.
    """

    def create(cls: type) -> type[PassInstrument]:
        if not inspect.isclass(cls):
            raise TypeError(f"pass_instrument decorates a class, got {type(cls).__name__}: {cls!r}")
        return _wrap_class_pass_instrument(cls)

    if pi_cls is not None:
        return create(pi_cls)
    return create
