"""Builders that make writing IR in Python pleasant: tests, examples and passes use them.

Dataflow functions (:class:`FunctionBuilder`, in the spirit of TVM's ``BlockBuilder``):
parameters and bindings are emitted in order and each returns its variable; the
builder checks that ops exist and get the right number of arguments, that every
variable used was defined in this builder (and is in scope), and fills in binding
types from the op registry's type rules when the argument types are known::

    from parpass.ir import PrimType, TensorType
    from parpass.ir.builder import FunctionBuilder, call, const

    fb = FunctionBuilder("main", attrs={"global_symbol": "main"})
    x = fb.param("x", TensorType((4, 4), "float32"))
    p = fb.param("p", PrimType("bool"))
    y = fb.emit(call("add", x, const(1.0, "float32")), name="y")   # y: Tensor((4, 4), "float32")
    branch = fb.if_(p, name="r")
    with branch as (then, else_):
        with then:
            then.yield_(fb.emit(call("relu", y)))
        with else_:
            else_.yield_(y)
    func = fb.finish(branch.var)                                    # a relax.Function

Loop-level functions (:class:`PrimFuncBuilder`): parameters are declared with
:meth:`~PrimFuncBuilder.buffer` and :meth:`~PrimFuncBuilder.var`; loops, lets,
allocations and conditionals are context managers that collect the statements
made inside them::

    from parpass.ir import tir
    from parpass.ir.builder import PrimFuncBuilder

    pb = PrimFuncBuilder("scale", attrs={"global_symbol": "scale"})
    A = pb.buffer("A", (16, 16), "float32")
    B = pb.buffer("B", (16, 16), "float32")
    n = pb.var("n", "int32")
    with pb.for_range("i", 16) as i:                          # i in range(16)
        with pb.for_range("j", 0, 16, kind="vectorized") as j:
            with pb.if_then_else(tir.lt(i, n)):
                pb.store(B, (i, j), A[i, j] * 2.0)
            with pb.else_():
                pb.store(B, (i, j), 0.0)
    func = pb.finish()                                        # a tir.PrimFunc

Variable ids come from the builder's :class:`~parpass.ir.ids.IdSupply` (fresh from 0,
or one you pass in, e.g. ``IdSupply.for_function(old_func)`` in a pass), never from a
process-wide counter, so building the same IR twice gives identical functions.

The dataflow builder is in :mod:`~parpass.ir.builder.function` (its checked expression
constructors in :mod:`~parpass.ir.builder.exprs`), the loop-level one in
:mod:`~parpass.ir.builder.prim_func`; what both share (naming, attrs, finishing once) in
:mod:`~parpass.ir.builder.base`.
"""

from __future__ import annotations

from parpass.ir.builder.errors import BuilderError
from parpass.ir.builder.exprs import call, const, getitem, tuple_
from parpass.ir.builder.function import FunctionBuilder, IfBranch, IfBuilder
from parpass.ir.builder.prim_func import PrimFuncBuilder

__all__ = [
    "BuilderError",
    "FunctionBuilder",
    "IfBranch",
    "IfBuilder",
    "PrimFuncBuilder",
    "call",
    "const",
    "getitem",
    "tuple_",
]
