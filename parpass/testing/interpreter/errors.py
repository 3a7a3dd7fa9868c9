"""The interpreter's errors, and the function lookup that raises the standard not-found error."""

from __future__ import annotations

from parpass.errors import ParpassError, not_found
from parpass.ir.module import IRModule
from parpass.ir.node import BaseFunc


class InterpreterError(ParpassError, RuntimeError):
    """A program failed while being interpreted (names the function and the place)."""


class ArgumentError(InterpreterError, ValueError):
    """Arguments that do not match a function's parameters (names the function and the parameter)."""


class DivisionByZeroError(InterpreterError, ZeroDivisionError):
    """``FloorDiv`` or ``FloorMod`` by zero in a PrimFunc."""


def lookup(mod: IRModule, name: str, where: str) -> BaseFunc:
    """Function ``name`` of ``mod``; a not-found error (naming ``where`` and close names) when it is missing."""
    if name not in mod:
        raise not_found("function", name, mod.names(), where=where)
    return mod[name]
