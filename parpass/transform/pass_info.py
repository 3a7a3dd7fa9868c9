"""PassInfo: the metadata of a pass (TVM's ``tvm.transform.PassInfo``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["PassInfo", "check_opt_level", "check_pass_names"]


_NAMED_ESCAPES = {'"': '\\"', "\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _tvm_quote(text: str) -> str:
    """``text`` in double quotes, escaped as TVM 0.27 prints a string in an object's text.

    ``"``, backslash, tab, newline and carriage return get a backslash; other
    ASCII control characters (and DEL) become ``\\xNN``; every non-ASCII
    character becomes ``\\uNNNN`` (``\\UNNNNNNNN`` beyond the BMP).
    """
    out: list[str] = []
    for ch in text:
        code = ord(ch)
        if ch in _NAMED_ESCAPES:
            out.append(_NAMED_ESCAPES[ch])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif code < 0x80:
            out.append(ch)
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


def check_opt_level(opt_level: object, where: str) -> int:
    """``opt_level`` as an int; a clear error naming ``where`` if it is not one."""
    if isinstance(opt_level, bool) or not isinstance(opt_level, int):
        raise TypeError(f"{where}: opt_level must be an int, got {type(opt_level).__name__}: {opt_level!r}")
    return opt_level


def check_pass_names(names: object, where: str, *, allow_set: bool = False) -> tuple[str, ...]:
    """``names`` (a list or tuple of pass names; None means none) as a tuple of str.

    A bare string is rejected rather than split into characters, and so is any
    element that is not a non-empty str. Sets (when allowed) are sorted so the
    result does not depend on hash order.
    """
    if names is None:
        return ()
    if isinstance(names, (str, bytes)):
        raise TypeError(
            f"{where} must be a list or tuple of pass names, not a bare string ({names!r}); write [{names!r}]"
        )
    items: Iterable[object]
    if isinstance(names, (list, tuple)):
        items = names
    elif allow_set and isinstance(names, (set, frozenset)):
        items = sorted(names, key=repr)
    else:
        expected = "a list, tuple or set" if allow_set else "a list or tuple"
        raise TypeError(f"{where} must be {expected} of pass names, got {type(names).__name__}: {names!r}")
    out: list[str] = []
    for index, name in enumerate(items):
        if not isinstance(name, str) or not name:
            raise TypeError(
                f"{where}[{index}] must be a non-empty pass name (str), got {type(name).__name__}: {name!r}"
            )
        out.append(name)
    return tuple(out)


class PassInfo:
    """The metadata of a pass: ``PassInfo(opt_level, name, required=None, traceable=False)``.

    ``opt_level`` is the lowest optimization level at which a :class:`Sequential`
    runs the pass; ``required`` names (registered) passes that must run before it;
    ``traceable`` is kept for API compatibility with TVM. The fields are
    read-only, and two infos with equal fields are equal.
    """

    __slots__ = ("_name", "_opt_level", "_required", "_traceable")

    _opt_level: int
    _name: str
    _required: tuple[str, ...]
    _traceable: bool

    def __init__(
        self, opt_level: int, name: str, required: Iterable[str] | None = None, traceable: bool = False
    ) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"PassInfo: name must be a non-empty str, got {type(name).__name__}: {name!r}")
        where = f"PassInfo of pass {name!r}"
        object.__setattr__(self, "_opt_level", check_opt_level(opt_level, where))
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_required", check_pass_names(required, f"{where}: required"))
        if not isinstance(traceable, bool):
            raise TypeError(f"{where}: traceable must be a bool, got {type(traceable).__name__}: {traceable!r}")
        object.__setattr__(self, "_traceable", traceable)

    @property
    def opt_level(self) -> int:
        """The lowest ``PassContext.opt_level`` at which a Sequential runs this pass."""
        return self._opt_level

    @property
    def name(self) -> str:
        """The pass name (used by ``disabled_pass``, ``required_pass``, instruments and the registry)."""
        return self._name

    @property
    def required(self) -> tuple[str, ...]:
        """Names of registered passes a Sequential runs before this one."""
        return self._required

    @property
    def traceable(self) -> bool:
        return self._traceable

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError(f"PassInfo is read-only: cannot set {key!r}")

    def __delattr__(self, key: str) -> None:
        raise AttributeError(f"PassInfo is read-only: cannot delete {key!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (PassInfo, (self._opt_level, self._name, list(self._required), self._traceable))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PassInfo):
            return NotImplemented
        return (self._opt_level, self._name, self._required, self._traceable) == (
            other._opt_level,
            other._name,
            other._required,
            other._traceable,
        )

    def __hash__(self) -> int:
        return hash((self._opt_level, self._name, self._required, self._traceable))

    def __repr__(self) -> str:
        return (
            f"PassInfo(opt_level={self._opt_level}, name={self._name!r}, "
            f"required={list(self._required)!r}, traceable={self._traceable})"
        )

    def __str__(self) -> str:
        # TVM 0.27's text (what PrintBeforeAll / PrintAfterAll print), strings quoted as TVM quotes them.
        required = ", ".join(_tvm_quote(name) for name in self._required)
        if len(self._required) == 1:
            required += ","
        return (
            f"transform.PassInfo(opt_level={self._opt_level}, name={_tvm_quote(self._name)}, "
            f"required=({required}), traceable={self._traceable})"
        )
