"""The loop-level function builder: loops, lets, allocations and conditionals as context managers."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Union

from parpass.ir import tir
from parpass.ir.builder.base import BuilderBase
from parpass.ir.builder.errors import BuilderError
from parpass.ir.ids import IdSupply
from parpass.ir.node import AttrValue, Node
from parpass.ir.printer import format_literal

__all__ = ["PrimFuncBuilder"]

_ExprLike = Union[tir.PrimExpr, int, float, bool]


class _Block:
    """Statements collected inside one construct, and the variables and buffers it defines."""

    __slots__ = ("buffers", "label", "stmts", "vars")

    def __init__(self, label: str) -> None:
        self.label = label
        self.stmts: list[tir.Stmt] = []
        self.vars: dict[int, tir.Var] = {}
        self.buffers: dict[int, tir.Buffer] = {}


def _stmt_of(stmts: list[tir.Stmt]) -> tir.Stmt:
    """The body of a construct: its one statement itself, several as a SeqStmt."""
    return stmts[0] if len(stmts) == 1 else tir.SeqStmt(tuple(stmts))


#: The kind of name in a binding key: a variable or a buffer (their vids are counted apart).
_VAR, _BUFFER = "v", "b"


def _binding_key(node: Any) -> tuple[str, int] | None:
    """The key (kind of name, vid) of the variable or buffer a statement binds over its body; None for others."""
    t = type(node)
    if t is tir.For:
        return (_VAR, node.loop_var.vid)
    if t is tir.LetStmt:
        return (_VAR, node.var.vid)
    if t is tir.Allocate:
        return (_BUFFER, node.buffer.vid)
    return None


class PrimFuncBuilder(BuilderBase):
    """Builds a loop-level :class:`~parpass.ir.tir.PrimFunc` (see the module docstring).

    Every statement made inside a ``with`` construct becomes part of that
    construct's body; one statement stays itself, several become a SeqStmt.
    Variables and buffers used must be parameters of this builder or defined by an
    enclosing loop, let or allocation.
    """

    kind_name = "PrimFuncBuilder"

    def __init__(
        self,
        name: str | None = None,
        *,
        attrs: Mapping[str, AttrValue] | None = None,
        ids: IdSupply | None = None,
    ) -> None:
        super().__init__(name, attrs)
        self.ids = ids if ids is not None else IdSupply()
        self._params: list[tir.Var | tir.Buffer] = []
        self._blocks: list[_Block] = [_Block(self._what())]
        self._last_if: tuple[_Block, int, tir.IfThenElse] | None = None

    # ------------------------------------------------------------ scope checks

    def _known_var(self, v: tir.Var) -> bool:
        for block in reversed(self._blocks):
            found = block.vars.get(v.vid)
            if found is not None:
                return bool(found == v)
        return False

    def _known_buffer(self, b: tir.Buffer) -> bool:
        for block in reversed(self._blocks):
            found = block.buffers.get(b.vid)
            if found is not None:
                return bool(found == b)
        return False

    def _visible(self) -> list[str]:
        names: list[str] = []
        for block in self._blocks:
            names.extend(v.name_hint for v in block.vars.values())
            names.extend(b.name for b in block.buffers.values())
        return names

    def _check_uses(self, root: Node, where: str) -> None:
        """Variables and buffers under ``root`` (not bound inside it) are in scope."""
        bound: set[tuple[str, int]] = set()
        seen: set[int] = set()
        stack: list[Any] = [root]
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if self._is_checked_use(node, bound, where):
                continue  # a buffer's shape was checked where it was declared
            # Variables bound by a statement inside ``root`` are in scope for the rest of it.
            key = _binding_key(node)
            if key is not None:
                bound.add(key)
            if isinstance(node, Node):
                stack.extend(reversed(list(node.children())))
            else:
                raise TypeError(f"{where}: {type(node).__name__} {node!r} is not an IR node")

    def _is_checked_use(self, node: Any, bound: set[tuple[str, int]], where: str) -> bool:
        """Whether ``node`` is a variable or buffer use, raising if it is not in scope (nor in ``bound``)."""
        t = type(node)
        if t is tir.Var:
            if (_VAR, node.vid) not in bound and not self._known_var(node):
                raise self._undefined("variable", node.name_hint, node.vid, where)
            return True
        if t is tir.Buffer:
            if (_BUFFER, node.vid) not in bound and not self._known_buffer(node):
                raise self._undefined("buffer", node.name, node.vid, where)
            return True
        return False

    # ------------------------------------------------------------ parameters

    def var(self, name: str, dtype: str = "int32") -> tir.Var:
        """Add a scalar parameter and return its variable."""
        self._check_open()
        v = self.ids.tir_var(name, dtype)
        self._params.append(v)
        self._blocks[0].vars[v.vid] = v
        return v

    def buffer(
        self,
        name: str,
        shape: tuple[_ExprLike, ...] | list[_ExprLike],
        dtype: str = "float32",
        strides: tuple[_ExprLike, ...] | list[_ExprLike] = (),
    ) -> tir.Buffer:
        """Add a buffer parameter of ``shape`` and ``dtype`` (compact row-major unless ``strides``)."""
        self._check_open()
        buf = self._new_buffer(name, shape, dtype, strides)
        self._params.append(buf)
        self._blocks[0].buffers[buf.vid] = buf
        return buf

    def _new_buffer(
        self,
        name: str,
        shape: tuple[_ExprLike, ...] | list[_ExprLike],
        dtype: str,
        strides: tuple[_ExprLike, ...] | list[_ExprLike],
    ) -> tir.Buffer:
        if not isinstance(shape, (tuple, list)) or not isinstance(strides, (tuple, list)):
            raise TypeError(f"buffer {name!r}: shape and strides are tuples, got {shape!r} and {strides!r}")
        if strides and len(strides) != len(shape):
            raise BuilderError(f"buffer {name!r}: {len(strides)} strides for {len(shape)} dimensions")
        return self.ids.buffer(name, dtype, tuple(shape), tuple(strides))

    # ------------------------------------------------------------ statements

    def emit(self, stmt: tir.Stmt) -> tir.Stmt:
        """Append a statement built elsewhere to the current block (checking the names it uses)."""
        self._check_open()
        block = self._blocks[-1]
        self._check_uses(stmt, f"{block.label}, statement {type(stmt).__name__}")
        block.stmts.append(stmt)
        self._last_if = None
        return stmt

    def store(
        self, buffer: tir.Buffer, indices: _ExprLike | tuple[_ExprLike, ...] | list[_ExprLike], value: _ExprLike
    ) -> tir.BufferStore:
        """``buffer[indices] = value``; Python numbers become immediates of the buffer's dtype."""
        if not isinstance(buffer, tir.Buffer):
            raise TypeError(f"store(): the target must be a tir.Buffer, got {type(buffer).__name__}")
        idx = tuple(indices) if isinstance(indices, (tuple, list)) else (indices,)
        if len(idx) != len(buffer.shape):
            raise BuilderError(f"store to %{buffer.name}: {len(idx)} indices for {len(buffer.shape)} dimensions")
        stmt = buffer.store(idx, value)
        self.emit(stmt)
        return stmt

    def evaluate(self, value: _ExprLike) -> tir.Evaluate:
        """Evaluate ``value`` for its side effects."""
        stmt = tir.Evaluate(tir.convert(value))
        self.emit(stmt)
        return stmt

    @contextmanager
    def _block(self, label: str) -> Iterator[_Block]:
        """Open a block for the statements of a construct; closed on exit (also on error)."""
        self._check_open()
        block = _Block(label)
        self._blocks.append(block)
        try:
            yield block
        finally:
            if self._blocks and self._blocks[-1] is block:
                self._blocks.pop()
            self._last_if = None

    def _append(self, stmt: tir.Stmt) -> None:
        self._blocks[-1].stmts.append(stmt)
        self._last_if = None

    @contextmanager
    def for_range(
        self,
        name: str,
        start: _ExprLike,
        stop: _ExprLike | None = None,
        *,
        kind: str | tir.ForKind = "serial",
        dtype: str = "int32",
        annotations: Mapping[str, AttrValue] | None = None,
    ) -> Iterator[tir.Var]:
        """A loop over ``range(start, stop)`` (or ``range(start)``) whose body is built in the ``with``.

        ``kind`` is serial, parallel, vectorized or unrolled. Yields the loop variable.
        """
        try:
            for_kind = tir.ForKind(kind)
        except ValueError:
            kinds = ", ".join(k.value for k in tir.ForKind)
            raise BuilderError(f"for_range {name!r}: unknown loop kind {kind!r}; kinds: {kinds}") from None
        if stop is None:
            lo: tir.PrimExpr = tir.convert(0, dtype=dtype)
            extent = tir.convert(start, dtype=dtype)
        elif isinstance(start, int) and isinstance(stop, int):
            if stop < start:
                raise BuilderError(f"for_range {name!r}: stop {stop} is below start {start}")
            lo, extent = tir.convert(start, dtype=dtype), tir.convert(stop - start, dtype=dtype)
        else:
            lo = tir.convert(start, dtype=dtype)
            hi = tir.convert(stop, dtype=dtype)
            extent = hi if isinstance(start, int) and start == 0 else tir.Sub(hi, lo)
        where = f"{self._blocks[-1].label}, for_range {name!r}"
        self._check_uses(lo, where)
        self._check_uses(extent, where)
        ann = dict(annotations or {})
        if ann:
            format_literal(ann, f"annotations of loop {name!r}")
        loop_var = self.ids.tir_var(name, dtype)
        with self._block(f"loop %{name}") as block:
            block.vars[loop_var.vid] = loop_var
            yield loop_var
        self._append(tir.For(loop_var, lo, extent, for_kind, _stmt_of(block.stmts), ann))

    @contextmanager
    def let(self, name: str, value: _ExprLike, dtype: str | None = None) -> Iterator[tir.Var]:
        """``let name = value`` over the statements built in the ``with``; yields the variable."""
        val = tir.convert(value, dtype=dtype)
        self._check_uses(val, f"{self._blocks[-1].label}, let {name!r}")
        var = self.ids.tir_var(name, dtype or val.dtype)
        with self._block(f"let %{name}") as block:
            block.vars[var.vid] = var
            yield var
        self._append(tir.LetStmt(var, val, _stmt_of(block.stmts)))

    @contextmanager
    def allocate(
        self,
        name: str,
        shape: tuple[_ExprLike, ...] | list[_ExprLike],
        dtype: str = "float32",
        strides: tuple[_ExprLike, ...] | list[_ExprLike] = (),
    ) -> Iterator[tir.Buffer]:
        """Allocate a buffer for the statements built in the ``with``; yields the buffer."""
        self._check_open()
        buf = self._new_buffer(name, shape, dtype, strides)
        for dim in (*buf.shape, *buf.strides):
            self._check_uses(dim, f"{self._blocks[-1].label}, allocate {name!r}")
        with self._block(f"allocate %{name}") as block:
            block.buffers[buf.vid] = buf
            yield buf
        self._append(tir.Allocate(buf, _stmt_of(block.stmts)))

    @contextmanager
    def if_then_else(self, cond: _ExprLike) -> Iterator[None]:
        """``if cond`` with the statements built in the ``with`` as the then-branch.

        An :meth:`else_` block right after it adds the else-branch.
        """
        c = tir.convert(cond)
        self._check_uses(c, f"{self._blocks[-1].label}, if_then_else")
        with self._block("if_then_else") as block:
            yield
        stmt = tir.IfThenElse(c, _stmt_of(block.stmts), None)
        parent = self._blocks[-1]
        parent.stmts.append(stmt)
        self._last_if = (parent, len(parent.stmts) - 1, stmt)

    @contextmanager
    def else_(self) -> Iterator[None]:
        """The else-branch of the :meth:`if_then_else` block that has just closed."""
        last = self._last_if
        parent = self._blocks[-1]
        if last is None or last[0] is not parent or last[1] != len(parent.stmts) - 1:
            raise BuilderError("else_() must come right after a `with if_then_else(...)` block")
        _, index, stmt = last
        with self._block("else") as block:
            yield
        parent.stmts[index] = tir.IfThenElse(stmt.condition, stmt.then_case, _stmt_of(block.stmts))
        self._last_if = None

    # ------------------------------------------------------------ finishing

    @property
    def params(self) -> tuple[tir.Var | tir.Buffer, ...]:
        """The parameters declared so far."""
        return tuple(self._params)

    def finish(self) -> tir.PrimFunc:
        """The PrimFunc; the builder cannot be used afterwards."""
        self._check_open()
        if len(self._blocks) > 1:
            raise BuilderError(f"{self._what()}: cannot finish while {self._blocks[-1].label} is still open")
        self._finished = True
        return tir.PrimFunc(tuple(self._params), _stmt_of(self._blocks[0].stmts), attrs=dict(self.attrs))
