"""Well-formedness of loop-level PrimFuncs: scoped variables and buffers, accesses and dtypes.

Statements are walked with an explicit stack of tasks (a handler and its
arguments), expressions bottom-up with an explicit stack and a memo (shared
subexpressions are checked once per statement); deep IR is fine. The dtype
rules of operators are in :mod:`parpass.ir.well_formed.tir_exprs`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from parpass.ir import tir
from parpass.ir.dtype import split_vector, vector_dtype
from parpass.ir.well_formed.common import INT_DTYPES, INT_RANGES, KNOWN_DTYPES
from parpass.ir.well_formed.tir_exprs import DTYPE_RULES, DtypeProblem

__all__ = ["TirChecker"]

_FOR_KINDS = frozenset(k.value for k in tir.ForKind)


def _format_tir_loc(loc: Any) -> str:
    """A chain ``(parent, stmt, k)`` as ``For i > SeqStmt[1] > BufferStore B``."""
    parts: list[str] = []
    while loc is not None:
        parent, stmt, k = loc
        if type(stmt) is tir.SeqStmt and k is not None:
            parts.append(f"SeqStmt[{k}]")
        elif type(stmt) is tir.IfThenElse and k is not None:
            parts.append(f"IfThenElse ({k})")
        elif isinstance(stmt, str):
            parts.append(stmt)
        else:
            parts.append(tir.stmt_label(stmt))
        loc = parent
    return " > ".join(reversed(parts))


def _buffer_text(buffer: tir.Buffer) -> str:
    def dims(exprs: tuple[Any, ...]) -> str:
        return "(" + ", ".join(str(e.value) if type(e) is tir.IntImm else type(e).__name__ for e in exprs) + ")"

    text = f"{buffer.name}: {buffer.dtype}{dims(buffer.shape)}"
    if buffer.strides:
        text += f" strides {dims(buffer.strides)}"
    return text


class TirChecker:
    """Checks one PrimFunc: scoped variables and buffers, dtypes, on explicit stacks."""

    def __init__(self, func: tir.PrimFunc, name: str, problems: list[str]) -> None:
        self.func = func
        self.name = name
        self.problems = problems
        self.vars: dict[int, tir.Var] = {}  # in scope: vid -> defining Var
        self.buffers: dict[int, tir.Buffer] = {}  # declared here: vid -> Buffer
        self.defined: dict[int, Any] = {}  # every definition so far: vid -> place
        self.tasks: list[tuple[Any, ...]] = []  # (handler, *arguments), run last in, first out

    def report(self, loc: Any, message: str) -> None:
        where = _format_tir_loc(loc)
        self.problems.append(f"PrimFunc {self.name!r}{', at ' + where if where else ''}: {message}")

    def define(self, vid: int, loc: Any, what: str) -> None:
        first = self.defined.get(vid)
        if first is not None:
            where = _format_tir_loc(first) or "the parameters"
            self.report(loc, f"{what} reuses vid {vid} (first defined at {where})")
        else:
            self.defined[vid] = loc

    def run(self) -> None:
        params = self.func.params
        for k, param in enumerate(params):
            if isinstance(param, tir.Var):
                loc = (None, f"parameter {k} ({param.name_hint})", None)
                self.define(param.vid, loc, f"scalar parameter {param.name_hint}")
                self.check_var_dtype(param, loc)
                self.vars[param.vid] = param
            elif not isinstance(param, tir.Buffer):
                self.report((None, f"parameter {k}", None), f"is a {type(param).__name__}, not a Var or Buffer")
        for k, param in enumerate(params):
            if isinstance(param, tir.Buffer):
                loc = (None, f"parameter {k} ({param.name})", None)
                self.declare(param, loc, f"buffer parameter {param.name}")
        self.walk(self.func.body)

    def check_var_dtype(self, var: tir.Var, loc: Any) -> None:
        if split_vector(var.dtype)[0] not in KNOWN_DTYPES:
            self.report(loc, f"variable {var.name_hint} has unknown dtype {var.dtype!r}")

    # ------------------------------------------------------------ buffers

    def declare(self, buffer: tir.Buffer, loc: Any, what: str) -> None:
        self.define(buffer.vid, loc, what)
        if buffer.dtype not in KNOWN_DTYPES:
            self.report(loc, f"buffer {buffer.name} has unknown dtype {buffer.dtype!r}")
        if buffer.strides and len(buffer.strides) != len(buffer.shape):
            self.report(
                loc, f"buffer {buffer.name} has {len(buffer.shape)} dimensions but {len(buffer.strides)} strides"
            )
        for k, dim in enumerate((*buffer.shape, *buffer.strides)):
            role = f"dimension {k}" if k < len(buffer.shape) else f"stride {k - len(buffer.shape)}"
            dtype = self.expr(dim, loc)
            if dtype is not None and dtype not in INT_DTYPES:
                self.report(loc, f"{role} of buffer {buffer.name} must be an integer scalar, got {dtype}")
            if type(dim) is tir.IntImm and dim.value < 0:
                self.report(loc, f"{role} of buffer {buffer.name} is negative ({dim.value})")
        self.buffers[buffer.vid] = buffer

    def check_buffer_use(self, buffer: Any, loc: Any, access: str) -> bool:
        if not isinstance(buffer, tir.Buffer):
            self.report(loc, f"{access} of a {type(buffer).__name__}, not a Buffer")
            return False
        decl = self.buffers.get(buffer.vid)
        if decl is None:
            self.report(
                loc,
                f"{access} of buffer {buffer.name} (vid {buffer.vid}), which is neither a parameter nor allocated "
                f"by an enclosing Allocate",
            )
            return False
        if decl is not buffer and decl != buffer:
            self.report(
                loc,
                f"{access} of buffer {buffer.name} (vid {buffer.vid}) does not match its declaration "
                f"({_buffer_text(buffer)} vs declared {_buffer_text(decl)})",
            )
            return False
        return True

    def index_lanes(self, buffer: tir.Buffer, index_types: list[Any], loc: Any, access: str) -> int | None:
        """The vector width of an access (1 for scalar), or None after reporting a problem."""
        if len(index_types) != len(buffer.shape):
            self.report(
                loc,
                f"{access} of buffer {buffer.name} has {len(index_types)} indices but the buffer has "
                f"{len(buffer.shape)} dimensions",
            )
            return None
        lanes = 1
        for k, dtype in enumerate(index_types):
            if dtype is None:
                return None
            base, n = split_vector(dtype)
            if base not in INT_DTYPES:
                self.report(loc, f"index {k} of {access} of buffer {buffer.name} is {dtype}, not an integer")
                return None
            if n != 1:
                if lanes not in (1, n):
                    self.report(loc, f"vector indices of {access} of buffer {buffer.name} have different lanes")
                    return None
                lanes = n
        return lanes

    # ------------------------------------------------------------ statements

    def walk(self, body: Any) -> None:
        """Check statement ``body`` and everything in it."""
        tasks = self.tasks
        tasks.append((self.visit_stmt, body, None))
        while tasks:
            handler, *args = tasks.pop()
            handler(*args)

    def forget_var(self, vid: int) -> None:
        """A loop or let variable goes out of scope after its body."""
        self.vars.pop(vid, None)

    def forget_buffer(self, vid: int) -> None:
        """An allocated buffer goes out of scope after its body."""
        self.buffers.pop(vid, None)

    def visit_stmt(self, stmt: Any, parent: Any) -> None:
        visitor = _STMT_VISITORS.get(type(stmt))
        if visitor is None:
            self.report(parent, f"a {type(stmt).__name__} is not a statement")
        else:
            visitor(self, stmt, (parent, stmt, None))

    def visit_seq(self, stmt: tir.SeqStmt, loc: Any) -> None:
        parent = loc[0]
        for k in range(len(stmt.seq) - 1, -1, -1):
            self.tasks.append((self.visit_stmt, stmt.seq[k], (parent, stmt, k)))

    def visit_for(self, stmt: tir.For, loc: Any) -> None:
        self.for_header(stmt, loc)
        self.tasks.append((self.forget_var, stmt.loop_var.vid))
        self.tasks.append((self.visit_stmt, stmt.body, loc))

    def visit_if(self, stmt: tir.IfThenElse, loc: Any) -> None:
        parent = loc[0]
        cond = self.expr(stmt.condition, loc)
        if cond is not None and cond != "bool":
            self.report(loc, f"IfThenElse condition must be a bool scalar, got {cond}")
        if stmt.else_case is not None:
            self.tasks.append((self.visit_stmt, stmt.else_case, (parent, stmt, "else")))
        self.tasks.append((self.visit_stmt, stmt.then_case, (parent, stmt, "then")))

    def visit_let(self, stmt: tir.LetStmt, loc: Any) -> None:
        var = stmt.var
        value = self.expr(stmt.value, loc)
        if not isinstance(var, tir.Var):
            self.report(loc, f"LetStmt binds a {type(var).__name__}, not a Var")
            self.tasks.append((self.visit_stmt, stmt.body, loc))
            return
        self.check_var_dtype(var, loc)
        if value is not None and value != var.dtype:
            self.report(loc, f"LetStmt variable {var.name_hint} is {var.dtype} but its value is {value}")
        self.define(var.vid, loc, f"LetStmt variable {var.name_hint}")
        self.vars[var.vid] = var
        self.tasks.append((self.forget_var, var.vid))
        self.tasks.append((self.visit_stmt, stmt.body, loc))

    def visit_allocate(self, stmt: tir.Allocate, loc: Any) -> None:
        if isinstance(stmt.buffer, tir.Buffer):
            self.declare(stmt.buffer, loc, f"allocated buffer {stmt.buffer.name}")
            self.tasks.append((self.forget_buffer, stmt.buffer.vid))
        else:
            self.report(loc, f"allocates a {type(stmt.buffer).__name__}, not a Buffer")
        self.tasks.append((self.visit_stmt, stmt.body, loc))

    def visit_evaluate(self, stmt: tir.Evaluate, loc: Any) -> None:
        self.expr(stmt.value, loc)

    def for_header(self, stmt: tir.For, loc: Any) -> None:
        var = stmt.loop_var
        if not (isinstance(stmt.kind, str) and stmt.kind in _FOR_KINDS):
            self.report(loc, f"For kind {stmt.kind!r} is not one of {', '.join(sorted(_FOR_KINDS))}")
        lo = self.expr(stmt.min, loc)
        extent = self.expr(stmt.extent, loc)
        if not isinstance(var, tir.Var):
            self.report(loc, f"loop variable is a {type(var).__name__}, not a Var")
            return
        if var.dtype not in INT_DTYPES:
            self.report(loc, f"loop variable {var.name_hint} must be an integer scalar, got {var.dtype}")
        for what, dtype in (("min", lo), ("extent", extent)):
            if dtype is not None and dtype != var.dtype:
                self.report(loc, f"loop variable {var.name_hint} is {var.dtype} but {what} is {dtype}")
        self.define(var.vid, loc, f"loop variable {var.name_hint}")
        self.vars[var.vid] = var

    def visit_store(self, stmt: tir.BufferStore, loc: Any) -> None:
        value = self.expr(stmt.value, loc)
        index_types = [self.expr(i, loc) for i in stmt.indices]
        buffer = stmt.buffer
        if not self.check_buffer_use(buffer, loc, "store"):
            return
        lanes = self.index_lanes(buffer, index_types, loc, "store")
        if value is None or lanes is None:
            return
        base, value_lanes = split_vector(value)
        if base != buffer.dtype:
            self.report(loc, f"stores a {value} value into buffer {buffer.name} of dtype {buffer.dtype}")
        elif value_lanes != lanes:
            self.report(
                loc,
                f"stores a {value} value into buffer {buffer.name} at "
                f"{'a scalar index' if lanes == 1 else f'a {lanes}-lane vector index'}",
            )

    # ------------------------------------------------------------ expressions

    def expr(self, root: Any, loc: Any) -> str | None:
        """The dtype of PrimExpr ``root`` (None if unknown after a problem), checking it on the way."""
        if isinstance(root, tir.LEAF_EXPRS):
            return self.leaf(root, loc)
        memo: dict[int, str | None] = {}
        stack = [root]
        while stack:
            node = stack[-1]
            key = id(node)
            if key in memo:
                stack.pop()
                continue
            if isinstance(node, tir.LEAF_EXPRS):
                memo[key] = self.leaf(node, loc)
                stack.pop()
                continue
            kids = tir.operands_or_none(node)
            pending = [k for k in kids if id(k) not in memo]
            if pending:
                stack.extend(reversed(pending))
                continue
            stack.pop()
            memo[key] = self.compute(node, [memo[id(k)] for k in kids], loc)
        return memo[id(root)]

    def leaf(self, node: Any, loc: Any) -> str | None:
        if type(node) is tir.Var:
            return self.var_use(node, loc)
        return self.immediate(node, loc)

    def var_use(self, node: tir.Var, loc: Any) -> str | None:
        decl = self.vars.get(node.vid)
        if decl is None:
            if node.vid in self.defined:
                self.report(loc, f"variable {node.name_hint} (vid {node.vid}) is used outside its scope")
            else:
                self.report(loc, f"variable {node.name_hint} (vid {node.vid}) is used before it is defined")
            return None
        if decl.dtype != node.dtype:
            self.report(
                loc,
                f"variable {node.name_hint} (vid {node.vid}) is used as {node.dtype} but defined as {decl.dtype}",
            )
            return None
        return str(node.dtype)

    def immediate(self, node: tir.IntImm | tir.FloatImm, loc: Any) -> str | None:
        kind = type(node)
        base = split_vector(node.dtype)[0]
        if base not in KNOWN_DTYPES:
            self.report(loc, f"{kind.__name__} {node.value!r} has unknown dtype {node.dtype!r}")
            return None
        if kind is tir.FloatImm and not base.startswith("float"):
            self.report(loc, f"FloatImm {node.value!r} has non-float dtype {node.dtype}")
            return None
        if kind is tir.IntImm:
            bounds = INT_RANGES.get(base)
            if bounds is None:
                self.report(loc, f"IntImm {node.value!r} has non-integer dtype {node.dtype}")
                return None
            if not bounds[0] <= node.value <= bounds[1]:
                self.report(loc, f"IntImm {node.value!r} does not fit dtype {node.dtype}")
                return None
        return str(node.dtype)

    def compute(self, node: Any, kids: list[str | None], loc: Any) -> str | None:
        """The dtype of ``node`` from its operands' dtypes ``kids``, reporting a mismatch."""
        rule = DTYPE_RULES.get(type(node))
        if rule is not None:
            try:
                return rule(node, kids)
            except DtypeProblem as problem:
                self.report(loc, str(problem))
                return None
        if type(node) is tir.BufferLoad:
            return self.load(node, kids, loc)
        self.report(loc, f"a {type(node).__name__} is not an expression")
        return None

    def load(self, node: tir.BufferLoad, index_types: list[str | None], loc: Any) -> str | None:
        if not self.check_buffer_use(node.buffer, loc, "load"):
            return None
        lanes = self.index_lanes(node.buffer, index_types, loc, "load")
        if lanes is None:
            return None
        return vector_dtype(node.buffer.dtype, lanes)


#: The handler of each kind of statement (anything else is reported as not a statement).
_STMT_VISITORS: dict[type, Callable[[TirChecker, Any, Any], None]] = {
    tir.BufferStore: TirChecker.visit_store,
    tir.SeqStmt: TirChecker.visit_seq,
    tir.For: TirChecker.visit_for,
    tir.IfThenElse: TirChecker.visit_if,
    tir.LetStmt: TirChecker.visit_let,
    tir.Allocate: TirChecker.visit_allocate,
    tir.Evaluate: TirChecker.visit_evaluate,
}
