"""Loading the whole of parpass on first use, so that importing one layer loads only that layer.

``import parpass.ir`` runs ``parpass/__init__.py`` first, so that file imports
nothing: it registers here how to load the rest (the parallel executor, the
standard passes, their config options). The pass and config registries and the
executor seam call :func:`load_all` the first time they are asked for something
they may not hold yet, so every way of importing parpass ends with the same
passes, options and executor, and a program that only builds IR never loads
the process pool.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["load_all", "set_loader"]

_lock = threading.RLock()
_loader: Callable[[], None] | None = None
_loaded = False
_loading = False  # the loader is running (in the thread that holds the lock)


def set_loader(loader: Callable[[], None]) -> None:
    """What :func:`load_all` runs (``parpass/__init__.py`` sets it)."""
    global _loader
    _loader = loader


def load_all() -> None:
    """Load the whole package once: a no-op once loaded and, in the loading thread, while it loads.

    Another thread asking while it loads waits for it to finish, so that it never
    finds the registries half filled.
    """
    global _loaded, _loading
    if _loaded or _loader is None:
        return
    with _lock:  # re-entrant: what the loader imports asks again, in this thread
        if _loaded or _loading:
            return
        _loading = True
        try:
            _loader()
            _loaded = True
        finally:
            _loading = False
