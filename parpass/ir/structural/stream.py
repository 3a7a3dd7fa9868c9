"""The canonical token stream of a piece of IR (see :mod:`parpass.ir.structural`), built without recursion.

A pre-order walk over an explicit stack. Each item popped from the stack is
handed to the emitter of its type, from a dispatch table built from the node
specs: a generic node emits its tag and leaves and pushes its children, a
variable or buffer emits the number of its definition, a var-free subtree
emits itself. Definition sites push a marker that numbers the variables when
it is popped, so that a definition is numbered after the fields walked before
it (a binding's value, a loop's bounds).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from parpass.ir import relax, tir
from parpass.ir.node import Node
from parpass.ir.structural import specs as _specs
from parpass.ir.structural.specs import BUFFER, CHILD, DEF, GENERIC, INTIMM, OPAQUE, RVAR, TVAR, Spec
from parpass.ir.structural.tokens import SIMPLE, norm, norm_scalar


class Trace:
    """What a tracked walk records to explain a difference: where each item's tokens start, and its path."""

    __slots__ = ("def_paths", "paths", "starts", "subjects")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.paths: list[Any] = []
        self.subjects: list[Any] = []
        self.def_paths: dict[int, Any] = {}

    def record(self, start: int, path: Any, subject: Any) -> None:
        """An item whose tokens start at ``start``."""
        self.starts.append(start)
        self.paths.append(path)
        self.subjects.append(subject)


class _DefineGroup:
    """Stack marker: the tuple of variables under it is defined here, together (then buffer shapes are walked)."""


class _DefineRelaxVar:
    """Stack marker: the dataflow variable under it is defined here (untracked walks only)."""


_DEFINE_GROUP = _DefineGroup()
_DEFINE_RELAX_VAR = _DefineRelaxVar()
#: Spec passed to the handlers of the markers, which use none.
_NO_SPEC: Spec = (GENERIC, "", (), ())

_Handler = Callable[["_Emitter", Any, Spec], None]
#: ``type -> (its emitter, its spec)``: updated in place when node classes are defined later.
_TABLE: dict[type, tuple[_Handler, Spec]] = {}


class _Emitter:
    """One walk: the token stream so far, the stack of items to visit, and the numbering of definitions."""

    __slots__ = ("bnum", "counter", "map_free_vars", "out", "path", "paths", "rnum", "stack", "tnum", "trace")

    def __init__(self, map_free_vars: bool, trace: Trace | None) -> None:
        self.map_free_vars = map_free_vars
        self.trace = trace
        self.out: list[Any] = []
        self.stack: list[Any] = []
        #: the path of each stack item, in parallel to ``stack``, when tracing; the path of the current item
        self.paths: list[Any] | None = None if trace is None else []
        self.path: Any = ()
        #: definition numbers of dataflow variables, tir variables and buffers, by vid
        self.rnum: dict[int, int] = {}
        self.tnum: dict[int, int] = {}
        self.bnum: dict[int, int] = {}
        self.counter = 0

    # ------------------------------------------------------------------------------------------------ walks

    def run(self, root: Any) -> list[Any]:
        """The stream of ``root``."""
        table = _dispatch_table()
        stack = self.stack
        pop = stack.pop
        stack.append(root)
        while stack:
            node = pop()
            entry = table.get(type(node))
            if entry is None:
                self.emit_unknown(node)
            else:
                entry[0](self, node, entry[1])
        return self.out

    def run_traced(self, root: Any, stop_at: int) -> list[Any]:
        """The stream of ``root``, recording each item in the trace; stops once longer than ``stop_at`` (if >= 0)."""
        table = _dispatch_table()
        trace, stack, paths, out = self.trace, self.stack, self.paths, self.out
        assert trace is not None and paths is not None
        stack.append(root)
        paths.append(())
        while stack:
            node = stack.pop()
            if 0 <= stop_at < len(out):
                break
            self.path = paths.pop()
            if type(node) is not _DefineGroup:
                trace.record(len(out), self.path, node)
            entry = table.get(type(node))
            if entry is None:
                self.emit_unknown(node)
            else:
                entry[0](self, node, entry[1])
        return out

    # ------------------------------------------------------------------------------------------------ pushing

    def push_items(self, items: tuple[Any, ...] | list[Any], name: str) -> None:
        """Visit ``items`` (field ``name`` of the current item) next, in order."""
        self.stack.extend(reversed(items))
        if self.paths is not None:
            path = self.path
            self.paths.extend((path, name, i) for i in reversed(range(len(items))))

    def push_definition(self, var: Any, name: str) -> None:
        """Define ``var`` (field ``name``) once the items pushed before it are visited."""
        if self.paths is not None:
            self.stack.append((var,))
            self.stack.append(_DEFINE_GROUP)
            self.paths.append(((self.path, name, None),))
            self.paths.append(None)
        elif type(var) is relax.Var:  # the common case, without the group machinery
            self.stack.append(var)
            self.stack.append(_DEFINE_RELAX_VAR)
        else:
            self.stack.append((var,))
            self.stack.append(_DEFINE_GROUP)

    def push_definitions(self, group: tuple[Any, ...], name: str) -> None:
        """Define the variables of ``group`` (field ``name``) together, before any of their shapes is walked."""
        self.out.append(-1 - len(group))
        self.stack.append(group)
        self.stack.append(_DEFINE_GROUP)
        if self.paths is not None:
            path = self.path
            self.paths.append(tuple((path, name, i) for i in range(len(group))))
            self.paths.append(None)

    def number_free(self) -> int:
        """A definition number for a free variable met first here (``map_free_vars``)."""
        n = self.counter
        if self.trace is not None:
            self.trace.def_paths[n] = self.path
        self.counter = n + 1
        return n

    # ------------------------------------------------------------------------------------------------ emitters

    def emit_generic(self, node: Any, spec: Spec) -> None:
        """Tag and leaves; children pushed, definitions marked."""
        append = self.out.append
        append(spec[1])
        for name in spec[2]:
            v = getattr(node, name)
            append(v if type(v) in SIMPLE else norm(v))
        opaque = _specs.opaque_set()
        for name, role in spec[3]:
            v = getattr(node, name)
            if role != CHILD:
                if role == DEF:
                    self.push_definition(v, name)
                else:
                    self.push_definitions(v, name)
            elif type(v) is tuple:
                append(-1 - len(v))
                self.push_items(v, name)
            elif v is None or type(v) in opaque:
                append(v)
            else:
                self.stack.append(v)
                if self.paths is not None:
                    self.paths.append((self.path, name, None))

    def emit_relax_var(self, node: Any, spec: Spec) -> None:
        """A use of a dataflow variable: its definition number, or its vid if free."""
        vid = node.vid
        n = self.rnum.get(vid)
        if n is None and self.map_free_vars:
            n = self.rnum[vid] = self.number_free()
        if n is None:
            self.out += ("%free", vid)
        else:
            self.out += ("%v", n)

    def emit_tir_var(self, node: Any, spec: Spec) -> None:
        """A use of a tir variable: its definition number (or vid if free) and its dtype."""
        vid = node.vid
        n = self.tnum.get(vid)
        if n is None and self.map_free_vars:
            n = self.tnum[vid] = self.number_free()
        if n is None:
            self.out += ("%tfree", vid, node.dtype)
        else:
            self.out += ("%tv", n, node.dtype)

    def emit_buffer(self, node: Any, spec: Spec) -> None:
        """A use of a buffer: its definition number and dtype; a free one also its shape and strides."""
        vid = node.vid
        n = self.bnum.get(vid)
        if n is not None:
            self.out += ("%b", n, node.dtype)
            return
        if self.map_free_vars:
            n = self.bnum[vid] = self.number_free()
            self.out += ("%bmap", n)
        else:
            self.out += ("%bfree", vid)
        self.out += (node.dtype, -1 - len(node.shape), -1 - len(node.strides))
        self.push_items(node.strides, "strides")
        self.push_items(node.shape, "shape")

    def emit_int_imm(self, node: Any, spec: Spec) -> None:
        """Var-free like the opaque nodes, once its value is a plain int."""
        v = node.value
        if type(v) is int:
            self.out.append(node)
            return
        v = norm_scalar(v)
        if type(v) is int:  # True, 2.0: the IntImm they are == to
            self.out.append(tir.IntImm(node.dtype, v))
        else:
            self.out += (spec[1], node.dtype, v)

    def emit_opaque(self, node: Any, spec: Spec) -> None:
        """A var-free subtree: the node itself (msgspec compares and encodes it)."""
        self.out.append(node)

    def emit_unknown(self, node: Any) -> None:
        """A node class defined since the table was built, a sequence holding nodes, or plain data."""
        if isinstance(node, Node) and _specs.tag_of(type(node)) is not None:
            entry = _dispatch_table(refresh=True).get(type(node))
            if entry is not None:
                entry[0](self, node, entry[1])
                return
        if isinstance(node, (tuple, list)) and any(isinstance(x, Node) for x in node):
            self.out += ("%seq", len(node))
            self.push_items(node, "")
        else:
            self.out.append(norm(node))

    # ------------------------------------------------------------------------------------------------ definitions

    def define_relax_var(self, mark: Any, spec: Spec) -> None:
        """The dataflow variable under the marker is defined here."""
        self.out.append("%def")
        self.rnum[self.stack.pop().vid] = self.counter
        self.counter += 1

    def define_group(self, mark: Any, spec: Spec) -> None:
        """The variables of the tuple under the marker are defined here; then their buffers' shapes are walked."""
        group = self.stack.pop()
        group_paths = self.paths.pop() if self.paths is not None else None
        later: list[tuple[Any, Any]] = []
        specs = _specs.node_specs()
        for index, target in enumerate(group):
            tpath = group_paths[index] if group_paths is not None else ()
            if self.trace is not None:
                self.trace.record(len(self.out), tpath, target)
                self.trace.def_paths[self.counter] = tpath
            spec_of_target = specs.get(type(target))
            kind = spec_of_target[0] if spec_of_target is not None else GENERIC
            _DEFINERS.get(kind, _Emitter.define_non_var)(self, target, tpath, later)
            self.counter += 1
        for expr, epath in reversed(later):
            self.stack.append(expr)
            if self.paths is not None:
                self.paths.append(epath)

    def define_rvar(self, target: Any, tpath: Any, later: list[tuple[Any, Any]]) -> None:
        self.out.append("%def")
        self.rnum[target.vid] = self.counter

    def define_tvar(self, target: Any, tpath: Any, later: list[tuple[Any, Any]]) -> None:
        self.out += ("%tdef", target.dtype)
        self.tnum[target.vid] = self.counter

    def define_buffer(self, target: Any, tpath: Any, later: list[tuple[Any, Any]]) -> None:
        """A buffer definition; its shape and strides are walked after the whole group is defined."""
        self.out += ("%bdef", target.dtype)
        self.bnum[target.vid] = self.counter
        self.out += (-1 - len(target.shape), -1 - len(target.strides))
        later.extend((e, (tpath, "shape", i)) for i, e in enumerate(target.shape))
        later.extend((e, (tpath, "strides", i)) for i, e in enumerate(target.strides))

    def define_non_var(self, target: Any, tpath: Any, later: list[tuple[Any, Any]]) -> None:
        """Not a variable: an ill-formed definition site, compared as an ordinary child."""
        self.out.append("%notvar")
        later.append((target, tpath))


#: Emitters by node kind.
_EMITTERS: dict[int, _Handler] = {
    GENERIC: _Emitter.emit_generic,
    RVAR: _Emitter.emit_relax_var,
    TVAR: _Emitter.emit_tir_var,
    BUFFER: _Emitter.emit_buffer,
    INTIMM: _Emitter.emit_int_imm,
    OPAQUE: _Emitter.emit_opaque,
}
#: Definers by the kind of the defined node (anything else: :meth:`_Emitter.define_non_var`).
_DEFINERS: dict[int, Callable[[_Emitter, Any, Any, list[tuple[Any, Any]]], None]] = {
    RVAR: _Emitter.define_rvar,
    TVAR: _Emitter.define_tvar,
    BUFFER: _Emitter.define_buffer,
}


def _dispatch_table(refresh: bool = False) -> dict[type, tuple[_Handler, Spec]]:
    """``type -> (emitter, spec)`` for every node class and the stack markers (``refresh``: node classes anew)."""
    if refresh or not _TABLE:
        specs = _specs.node_specs(refresh)
        table: dict[type, tuple[_Handler, Spec]] = {cls: (_EMITTERS[spec[0]], spec) for cls, spec in specs.items()}
        table[_DefineGroup] = (_Emitter.define_group, _NO_SPEC)
        table[_DefineRelaxVar] = (_Emitter.define_relax_var, _NO_SPEC)
        _TABLE.update(table)
    return _TABLE


def emit(root: Any, map_free_vars: bool, trace: Trace | None = None, stop_at: int = -1) -> list[Any]:
    """The canonical token stream of ``root`` (see :mod:`parpass.ir.structural`).

    With a ``trace``, also records where each item's tokens start and its path,
    and stops once the stream is longer than ``stop_at`` (when that is >= 0).
    """
    if trace is None:
        return _Emitter(map_free_vars, None).run(root)
    return _Emitter(map_free_vars, trace).run_traced(root, stop_at)
