"""The loop-level machine: runs a PrimFunc's statements on an explicit task stack.

A task is a tuple whose first item is the bound method that runs it, given the
whole task; statements are dispatched by node type through :data:`_STATEMENTS`.
Scoped definitions (``LetStmt`` variables, ``Allocate`` memory, loop variables)
push a task that restores what they shadowed once their body has run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from parpass.ir import tir
from parpass.ir.dtype import element_dtype
from parpass.testing.interpreter.prim_exprs import PrimExprEvaluator
from parpass.testing.interpreter.prim_values import np_element_dtype, value_dtype
from parpass.testing.interpreter.values import MISSING

_Task = tuple[Any, ...]

_INTEGER_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


class TirMachine(PrimExprEvaluator):
    """Runs one PrimFunc: scalar environment, buffer memory and an explicit statement stack."""

    def __init__(self, func: tir.PrimFunc, name: str) -> None:
        super().__init__(func, name)
        self.tasks: list[_Task] = []

    def execute(self, body: Any) -> None:
        """Run statement ``body`` on an explicit stack of statement tasks."""
        tasks: list[_Task] = [(self._run_stmt, body, None)]
        self.tasks = tasks  # a fresh stack: a failed run may have left tasks on the last one
        while tasks:
            task = tasks.pop()
            task[0](task)

    def _run_stmt(self, task: _Task) -> None:
        _, stmt, loc = task
        self.loc, self.stmt = loc, stmt
        handler = _STATEMENTS.get(type(stmt))
        if handler is None:
            raise self.error(f"cannot execute a {type(stmt).__name__} node as a statement")
        handler(self, stmt, loc)

    # ------------------------------------------------------------ statements

    def _store(self, stmt: tir.BufferStore, loc: Any) -> None:
        value = self.eval(stmt.value)
        indices = [self.eval(i) for i in stmt.indices]
        buffer = stmt.buffer
        offset = self.offsets(buffer, indices, "store")
        if value.dtype != np_element_dtype(buffer.dtype):
            raise self.error(f"store of a {value_dtype(value)} value into buffer {buffer.name} of dtype {buffer.dtype}")
        if isinstance(offset, np.ndarray):
            if not isinstance(value, np.ndarray) or value.shape != offset.shape:
                raise self.error(
                    f"vector store into buffer {buffer.name} writes {offset.shape[0]} lanes but the value is "
                    f"{value_dtype(value)}"
                )
        elif isinstance(value, np.ndarray):
            raise self.error(f"store of a {value_dtype(value)} vector into buffer {buffer.name} at a scalar index")
        self.memory[buffer.vid][offset] = value

    def _seq(self, stmt: tir.SeqStmt, loc: Any) -> None:
        tasks = self.tasks
        for k in range(len(stmt.seq) - 1, -1, -1):
            tasks.append((self._run_stmt, stmt.seq[k], (loc, stmt, k)))

    def _if_then_else(self, stmt: tir.IfThenElse, loc: Any) -> None:
        cond = self.eval(stmt.condition)
        if not isinstance(cond, np.bool_):
            raise self.error(f"IfThenElse condition must be a bool scalar, got {value_dtype(cond)}")
        if cond:
            self.tasks.append((self._run_stmt, stmt.then_case, (loc, stmt, "then")))
        elif stmt.else_case is not None:
            self.tasks.append((self._run_stmt, stmt.else_case, (loc, stmt, "else")))

    def _let(self, stmt: tir.LetStmt, loc: Any) -> None:
        value = self.eval(stmt.value)
        var = stmt.var
        if value_dtype(value) != var.dtype:
            raise self.error(f"LetStmt binds {var.name_hint} of dtype {var.dtype} to a {value_dtype(value)} value")
        self.tasks.append((self._restore_var, var.vid, self.env.get(var.vid, MISSING)))
        self.env[var.vid] = value
        self.tasks.append((self._run_stmt, stmt.body, (loc, stmt, None)))

    def _allocate(self, stmt: tir.Allocate, loc: Any) -> None:
        buffer = stmt.buffer
        fresh = np.zeros(self.memory_size(buffer), dtype=np_element_dtype(buffer.dtype))
        self.tasks.append((self._restore_buffer, buffer.vid, self.memory.get(buffer.vid)))
        self.memory[buffer.vid] = fresh
        self.tasks.append((self._run_stmt, stmt.body, (loc, stmt, None)))

    def _evaluate(self, stmt: tir.Evaluate, loc: Any) -> None:
        self.eval(stmt.value)

    # ------------------------------------------------------------ loops and scopes

    def _for(self, stmt: tir.For, loc: Any) -> None:
        var = stmt.loop_var
        try:
            tir.ForKind(stmt.kind)
        except ValueError:
            raise self.error(f"For {var.name_hint} has an invalid kind {stmt.kind!r}") from None
        lo = self.eval(stmt.min)
        extent = self.eval(stmt.extent)
        for what, value in (("min", lo), ("extent", extent)):
            if value_dtype(value) != var.dtype:
                raise self.error(
                    f"For {var.name_hint}: loop variable is {var.dtype} but {what} is {value_dtype(value)}"
                )
        if element_dtype(var.dtype) not in _INTEGER_DTYPES:
            raise self.error(f"For {var.name_hint}: loop variable must be an integer, got {var.dtype}")
        start = int(lo)
        self.tasks.append((self._iterate, stmt, loc, start, start + int(extent), self.env.get(var.vid, MISSING)))

    def _iterate(self, task: _Task) -> None:
        """Run the body for loop value ``i``, then the next one; after the last, restore the shadowed variable."""
        _, stmt, loc, i, end, prev = task
        var = stmt.loop_var
        if i < end:
            self.env[var.vid] = np_element_dtype(var.dtype).type(i)
            self.tasks.append((self._iterate, stmt, loc, i + 1, end, prev))
            self.tasks.append((self._run_stmt, stmt.body, (loc, stmt, None)))
        elif prev is MISSING:
            self.env.pop(var.vid, None)
        else:
            self.env[var.vid] = prev

    def _restore_var(self, task: _Task) -> None:
        _, vid, prev = task
        if prev is MISSING:
            self.env.pop(vid, None)
        else:
            self.env[vid] = prev

    def _restore_buffer(self, task: _Task) -> None:
        _, vid, prev = task
        if prev is None:
            self.memory.pop(vid, None)
        else:
            self.memory[vid] = prev


_STATEMENTS: dict[type, Callable[[TirMachine, Any, Any], None]] = {
    tir.BufferStore: TirMachine._store,
    tir.SeqStmt: TirMachine._seq,
    tir.For: TirMachine._for,
    tir.IfThenElse: TirMachine._if_then_else,
    tir.LetStmt: TirMachine._let,
    tir.Allocate: TirMachine._allocate,
    tir.Evaluate: TirMachine._evaluate,
}
