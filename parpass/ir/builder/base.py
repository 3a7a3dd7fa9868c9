"""What the dataflow and the loop-level builders share: their name in messages, checked attrs, finishing once."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import ClassVar

from parpass.errors import closest_names, format_names
from parpass.ir.builder.errors import BuilderError
from parpass.ir.node import AttrValue
from parpass.ir.printer import format_literal

__all__ = ["BuilderBase"]


class BuilderBase(ABC):
    """A function builder: named in its messages, with attrs checked up front, unusable once finished."""

    #: The builder's class name as its messages say it (``"FunctionBuilder"``).
    kind_name: ClassVar[str]

    def __init__(self, name: str | None, attrs: Mapping[str, AttrValue] | None) -> None:
        self.name = name
        self.attrs: dict[str, AttrValue] = dict(attrs or {})
        if self.attrs:
            format_literal(self.attrs, f"attrs of {self._what()}")
        self._finished = False

    def _what(self) -> str:
        """The builder as messages name it (``FunctionBuilder 'main'``)."""
        return f"{self.kind_name} {self.name!r}" if self.name else self.kind_name

    def _check_open(self) -> None:
        """Raise if the builder was already finished."""
        if self._finished:
            raise BuilderError(f"{self._what()} was already finished; start a new builder")

    @abstractmethod
    def _visible(self) -> list[str]:
        """The names in scope where the builder is now, outermost first."""

    def _undefined(self, what: str, name: str, vid: int, where: str) -> BuilderError:
        """The error for a use of ``what`` (variable, buffer) ``%name`` that is not in scope."""
        visible = self._visible()
        near = closest_names(name, visible)
        return BuilderError(
            f"{where}: {what} %{name} (id {vid}) is not defined in {self._what()} or not in scope here; "
            f"in scope: {format_names(near, len(visible))}"
        )
