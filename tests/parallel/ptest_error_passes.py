"""Passes whose errors must reach the caller as the serial run raises them (issue 11, items 8, 11, 17).

They live in an importable module so that worker processes load them by reference.
"""

from __future__ import annotations

from parpass.ir import IRModule, relax
from parpass.transform import PassContext, function_pass


def is_main(func: relax.Function) -> bool:
    return func.attrs.get("global_symbol") == "main"


@function_pass(opt_level=0, name="RaisesSystemExit")
def raises_system_exit(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    """``sys.exit(7)`` on ``main``; changes the other functions (so chunks write results)."""
    if is_main(func):
        raise SystemExit(7)
    return func.with_attr("survived", True)


@function_pass(opt_level=0, name="RaisesKeyboardInterrupt")
def raises_keyboard_interrupt(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    if is_main(func):
        raise KeyboardInterrupt("stop here")
    return func.with_attr("survived", True)


class UnprintableError(ValueError):
    """An exception whose ``__str__`` itself raises."""

    def __str__(self) -> str:
        raise RuntimeError("__str__ of UnprintableError failed")


@function_pass(opt_level=0, name="RaisesUnprintable")
def raises_unprintable(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    if is_main(func):
        raise UnprintableError("hidden")
    return func.with_attr("survived", True)


class NotEncodable:
    """A value msgspec cannot encode."""


@function_pass(opt_level=0, name="ReturnsUnencodable")
def returns_unencodable(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
    if is_main(func):
        return func.with_attr("weird", NotEncodable())
    return func.with_attr("survived", True)
