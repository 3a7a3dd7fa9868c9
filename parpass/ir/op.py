"""The operator registry: what each :class:`~parpass.ir.Op` of the dataflow IR means.

An op has an arity, a purity flag (stateful ops are never folded or removed), a
Python evaluation rule on numpy arrays (used by constant folding and the
reference interpreter) and a type rule (used by InferType).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from parpass.errors import ParpassError, not_found
from parpass.ir.node import Attrs

if TYPE_CHECKING:
    from parpass.ir.types import Type

#: ``evaluate(args, attrs) -> value``: args are numpy arrays (or tuples of them).
EvalRule = Callable[[Sequence[Any], Attrs], Any]
#: ``infer_type(arg_types, attrs) -> Type``: raises TypeError on ill-typed arguments.
TypeRule = Callable[[Sequence[Any], Attrs], "Type"]


class OpRegistryError(ParpassError, ValueError):
    """An op registered twice, or registered with bad properties."""


@dataclass(frozen=True)
class OpInfo:
    """The registered properties of one operator."""

    name: str
    num_inputs: int | None
    pure: bool = True
    evaluate: EvalRule | None = None
    infer_type: TypeRule | None = None
    doc: str = ""
    attrs_doc: dict[str, str] = field(default_factory=dict)

    @property
    def stateful(self) -> bool:
        return not self.pure


_REGISTRY: dict[str, OpInfo] = {}


def register_op(
    name: str,
    *,
    num_inputs: int | None,
    pure: bool = True,
    evaluate: EvalRule | None = None,
    infer_type: TypeRule | None = None,
    doc: str = "",
    override: bool = False,
) -> OpInfo:
    """Register operator ``name``; ``num_inputs=None`` means variadic.

    Registering a name twice is an error unless ``override=True``.
    """
    if not isinstance(name, str) or not name:
        raise OpRegistryError(f"op names are non-empty strings, got {name!r}")
    if num_inputs is not None and (not isinstance(num_inputs, int) or num_inputs < 0):
        raise OpRegistryError(f"op {name!r}: num_inputs must be a non-negative int or None, got {num_inputs!r}")
    if name in _REGISTRY and not override:
        raise OpRegistryError(f"op {name!r} is already registered (pass override=True to replace it)")
    info = OpInfo(name, num_inputs, pure, evaluate, infer_type, doc)
    _REGISTRY[name] = info
    return info


def get_op(name: str) -> OpInfo:
    """The registered op ``name``; a KeyError naming the closest ops if there is none."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise not_found("op", name, _REGISTRY, where="in the op registry") from None


def list_ops() -> list[str]:
    """Names of all registered ops, sorted."""
    return sorted(_REGISTRY)
