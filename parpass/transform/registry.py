"""The pass registry: named factories that build passes (TVM's ``GetPass``).

``@register_pass("FoldConstant")`` on a zero-argument factory makes the pass
available as ``get_pass("FoldConstant")``; a Sequential resolves
``PassInfo.required`` names through it.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from parpass._loading import load_all
from parpass.errors import unknown_name
from parpass.transform.pass_info import PassInfo

if TYPE_CHECKING:
    from parpass.transform.passes import Pass

__all__ = ["get_pass", "get_pass_factory", "list_passes", "register_pass"]

_F = TypeVar("_F", bound=Callable[[], "Pass"])

#: Where an unknown-pass error says the registered passes are listed.
PASS_LISTING = "list_passes() (on the command line: parpass passes)"

_LOCK = threading.Lock()
_FACTORIES: dict[str, Callable[[], Pass]] = {}


def _same_definition(a: object, b: object) -> bool:
    """The same factory, or one redefined by re-importing its module."""
    return a is b or (
        getattr(a, "__module__", None) == getattr(b, "__module__", None)
        and getattr(a, "__qualname__", None) == getattr(b, "__qualname__", None)
        and getattr(a, "__qualname__", None) is not None
    )


def register_pass(name: str, *, override: bool = False) -> Callable[[_F], _F]:
    """Decorator registering a zero-argument pass factory under ``name``; returns the factory unchanged.

    Registering another factory under a taken name is an error unless
    ``override=True`` (re-registering the same definition, as on a module
    reload, is allowed).
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"register_pass: name must be a non-empty str, got {type(name).__name__}: {name!r}")

    def decorate(factory: _F) -> _F:
        if not callable(factory):
            raise TypeError(f"register_pass({name!r}) decorates a pass factory, got {type(factory).__name__}")
        try:
            inspect.signature(factory).bind()
        except TypeError:
            raise TypeError(
                f"register_pass({name!r}): the factory must be callable without arguments, "
                f"but its signature is {inspect.signature(factory)}"
            ) from None
        except ValueError:  # no signature available
            pass
        with _LOCK:
            old = _FACTORIES.get(name)
            if old is not None and not override and not _same_definition(old, factory):
                raise ValueError(
                    f"a pass named {name!r} is already registered (by {getattr(old, '__qualname__', old)!r}); "
                    "pass override=True to replace it"
                )
            _FACTORIES[name] = factory
        return factory

    return decorate


def get_pass(name: str) -> Pass:
    """A new instance of the pass registered as ``name``; a KeyError naming the closest names if unknown."""
    factory = get_pass_factory(name)
    if factory is None:
        raise unknown_name("pass", name, sorted(_FACTORIES), "in the pass registry", PASS_LISTING)
    p = factory()
    if not isinstance(getattr(p, "info", None), PassInfo):  # every Pass has one (and passes.py imports this module)
        raise TypeError(f"the factory registered as pass {name!r} returned {type(p).__name__}, not a Pass")
    return p


def get_pass_factory(name: str) -> Callable[..., Pass] | None:
    """The factory registered as ``name`` (to call with options, as pipeline specs do), or None."""
    factory = _FACTORIES.get(name)
    if factory is None:
        load_all()  # the standard passes register themselves when the package is loaded
        factory = _FACTORIES.get(name)
    return factory


def list_passes() -> list[str]:
    """The names of all registered passes, sorted."""
    load_all()
    return sorted(_FACTORIES)
