"""Testing helpers: deterministic random modules, and the reference interpreter that defines what IR means."""

from parpass.testing.generator import random_module
from parpass.testing.interpreter import (
    ArgumentError,
    DivisionByZeroError,
    InterpreterError,
    assert_same_meaning,
    random_inputs,
    run,
    run_function,
    run_prim_func,
)

__all__ = [
    "ArgumentError",
    "DivisionByZeroError",
    "InterpreterError",
    "assert_same_meaning",
    "random_inputs",
    "random_module",
    "run",
    "run_function",
    "run_prim_func",
]
