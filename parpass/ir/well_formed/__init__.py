"""Well-formedness: the structural rules every pass must keep (TVM's ``WellFormed``).

:func:`well_formed` returns the problems it finds (an empty list when there are
none); :func:`check_well_formed` raises :class:`~parpass.errors.IRError` listing
them. Both take an :class:`~parpass.ir.IRModule` or a single function. Each
message names the function, the place and what is wrong.

Dataflow functions (:class:`~parpass.ir.Function`):

- every variable is defined before it is used: parameters, then bindings in
  order; the bindings of an ``If`` branch are visible only inside that branch;
- no two definitions (parameters, bindings, nested ones included) share a ``vid``;
- calls name a registered op or a function of the module, with the right arity;
- types are consistent: a binding's ``ty``, when present, equals the type the
  op registry's ``infer_type`` gives for the call (from the known types of its
  arguments); a call of a module ``Function`` passes arguments of its parameter
  types (and has the type of its ``ret_type``); a call of a ``PrimFunc`` follows
  the destination-passing convention of :mod:`parpass.testing.interpreter`; an
  ``If`` condition is a ``bool`` scalar and both branches have the same type;
  ``TupleGetItem`` projects a tuple with an index in range; ``ret_type``, when
  present, is the type of the body.

Loop-level functions (:class:`~parpass.ir.PrimFunc`):

- scalar variables are in scope where used: parameters everywhere, a loop
  variable in its loop's body, a ``LetStmt`` variable in its body; a use has the
  dtype of the definition;
- no two definitions (parameters, loop and let variables, allocated buffers)
  share a ``vid``;
- every buffer accessed by ``BufferLoad``/``BufferStore`` is a parameter or
  allocated by an enclosing ``Allocate``, and the accessing ``Buffer`` node equals
  that declaration; accesses have one index per dimension, integer indices, at
  most one vector width;
- dtypes are consistent: operands of binary operators have equal dtypes (lanes
  included), conditions are ``bool``, a stored value has the buffer's dtype (or a
  vector of it as wide as the vector index), a loop variable has the dtype of
  ``min`` and ``extent``, a let variable the dtype of its value, intrinsic calls
  name a known intrinsic (:data:`INTRINSICS`) with the right arity and arguments
  of the call's dtype;
- every ``For`` has a valid :class:`~parpass.ir.tir.ForKind`.

Both kinds: every integer fits in 64 bits and every string is UTF-8 (no lone
surrogate), or the function could be neither saved nor shipped to a worker.

The checker walks with explicit stacks (deep IR is fine) and takes time linear in
the size of the IR, so it can run before and after every pass of a pipeline.
The dataflow checker is in :mod:`~parpass.ir.well_formed.relax_checker`, the
loop-level one in :mod:`~parpass.ir.well_formed.tir_checker` (the dtype rules of
its operators in :mod:`~parpass.ir.well_formed.tir_exprs`).
"""

from __future__ import annotations

from parpass.errors import IRError
from parpass.ir import relax, tir
from parpass.ir.module import IRModule
from parpass.ir.node import BaseFunc
from parpass.ir.serialization import encoding_problem, node_problem
from parpass.ir.well_formed.relax_checker import RelaxChecker
from parpass.ir.well_formed.tir_checker import TirChecker
from parpass.ir.well_formed.tir_exprs import INTRINSICS

__all__ = ["INTRINSICS", "check_well_formed", "format_problems", "function_problems", "well_formed"]

_MAX_LISTED = 50


def well_formed(
    x: IRModule | BaseFunc, mod: IRModule | None = None, name: str | None = None, *, check_types: bool = True
) -> list[str]:
    """The well-formedness problems of ``x`` (a module or one function); empty if there are none.

    For a single function, ``mod`` (when given) is the module its calls refer to;
    without it, calls of module functions are not checked. ``name`` is the
    function's name in messages. ``check_types=False`` (TVM's ``check_ty=False``)
    leaves out the type checks of dataflow Functions: no type is inferred or
    compared, so only structural problems (scopes, ids, callees, arity) and
    annotations that are not valid types are reported.
    """
    problems: list[str] = []
    if isinstance(x, IRModule):
        for gv, func in x.items():
            _check_function(func, gv.name_hint, x, problems, check_types)
    elif isinstance(x, BaseFunc):
        label = name or str(x.attrs.get("global_symbol", "<function>"))
        _check_function(x, label, mod, problems, check_types)
    else:
        raise TypeError(f"well_formed expects an IRModule, Function or PrimFunc, got {type(x).__name__}")
    return problems


def check_well_formed(
    x: IRModule | BaseFunc, mod: IRModule | None = None, name: str | None = None, *, check_types: bool = True
) -> None:
    """Raise :class:`~parpass.errors.IRError` listing the problems of ``x``, if it has any."""
    problems = well_formed(x, mod, name, check_types=check_types)
    if problems:
        raise IRError(format_problems(problems))


def format_problems(problems: list[str], header: str = "ill-formed IR") -> str:
    """``problems`` as one message: a header with the count, one line per problem (at most 50)."""
    shown = problems[:_MAX_LISTED]
    text = f"{header}: {len(problems)} problem(s):\n" + "\n".join(f"  - {p}" for p in shown)
    if len(problems) > len(shown):
        text += f"\n  ... and {len(problems) - len(shown)} more"
    return text


def _check_function(
    func: BaseFunc, name: str, mod: IRModule | None, problems: list[str], check_types: bool = True
) -> tuple[str, ...]:
    """Append the problems of one function to ``problems``; return the module functions it calls."""
    unencodable = _encoding_problem(func, name, mod)
    if unencodable is not None:  # it could be neither saved nor shipped to a worker
        problems.append(f"function {name!r}, {unencodable}")
    if isinstance(func, relax.Function):
        checker = RelaxChecker(func, name, mod, problems, check_types)
        checker.run()
        return tuple(checker.callees)
    if isinstance(func, tir.PrimFunc):
        TirChecker(func, name, problems).run()
    else:
        problems.append(f"function {name!r}: a {type(func).__name__} is neither a Function nor a PrimFunc")
    return ()


def _encoding_problem(func: BaseFunc, name: str, mod: IRModule | None) -> str | None:
    """Why ``func`` cannot be encoded, or None; through the module's cached bytes when it holds this very
    function (encoded once: saving or shipping it later costs nothing more)."""
    if mod is None or name not in mod or mod[name] is not func:
        return encoding_problem(func)
    try:
        mod.encoded_function(name)
    except (OverflowError, UnicodeEncodeError):
        return node_problem(func) or "cannot be encoded"
    return None


def function_problems(
    func: BaseFunc, name: str, mod: IRModule | None, *, check_types: bool = True
) -> tuple[list[str], tuple[str, ...]]:
    """The problems of function ``name`` of ``mod``, and the names of the module functions it calls.

    A function's problems depend only on the function and on the functions it
    calls (their signatures), so a caller may cache the result while those stay
    the same objects (as :class:`parpass.instrument.well_formed.WellFormedInstrument` does).
    """
    problems: list[str] = []
    callees = _check_function(func, name, mod, problems, check_types)
    return problems, callees
