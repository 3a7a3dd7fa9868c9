"""A deliberately wrong pass, to try ``parpass bisect`` on: it miscompiles exactly one PrimFunc.

``MiscompileOne`` adds 1 to the first element of the last buffer of the PrimFunc whose
``global_symbol`` is ``$PARPASS_MISCOMPILE`` (default ``fused_reshape_502``, a function of
``parpass gen --functions 2000 --seed 0``), after its body; every other function is left alone::

    parpass gen --functions 2000 --seed 0 -o model.msgpack
    parpass bisect model.msgpack --load examples/miscompile.py \\
        -p 'InferType,FoldConstant,Simplify,MiscompileOne,FlattenBuffer,RemoveUnusedFunctions'
"""

from __future__ import annotations

import os

from parpass.ir import IRModule, tir
from parpass.transform import Pass, PassContext, prim_func_pass, register_pass


def _miscompile_one(func: tir.PrimFunc, mod: IRModule, ctx: PassContext) -> tir.PrimFunc:
    if func.attrs.get("global_symbol") != os.environ.get("PARPASS_MISCOMPILE", "fused_reshape_502"):
        return func
    out = [p for p in func.params if isinstance(p, tir.Buffer)][-1]
    zero = tuple(tir.IntImm("int32", 0) for _ in out.shape)
    one = tir.IntImm(out.dtype, 1) if "int" in out.dtype else tir.FloatImm(out.dtype, 1.0)
    bump = tir.BufferStore(out, tir.Add(tir.BufferLoad(out, zero), one), zero)
    return tir.PrimFunc(func.params, tir.SeqStmt((func.body, bump)), attrs=func.attrs)


@register_pass("MiscompileOne")
def MiscompileOne() -> Pass:
    """The wrong pass (PrimFunc level, opt_level 0)."""
    return prim_func_pass(_miscompile_one, opt_level=0, name="MiscompileOne")
