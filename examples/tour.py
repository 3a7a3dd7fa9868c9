"""A short tour of parpass's pass infrastructure. Run it: ``python examples/tour.py``.

It builds a small module, writes a function pass in both forms and a module
pass, runs them in a Sequential under a PassContext (opt_level, disabled and
required passes, a config option) and prints the timing instrument's profile.
"""

from __future__ import annotations

import msgspec

import parpass
from parpass.ir import IRModule, relax, tir
from parpass.ir.node import Op
from parpass.ir.types import TensorType

# --------------------------------------------------------------- a module


def double(n: int) -> relax.Function:
    """``x -> add(x, x)`` applied ``n`` times."""
    x = relax.Var(0, "x")
    bindings, prev = [], x
    for k in range(n):
        v = relax.Var(k + 1, f"v{k}")
        bindings.append(relax.Binding(v, relax.Call(Op("add"), (prev, prev))))
        prev = v
    return relax.Function((relax.Param(x, TensorType((4,), "float32")),), relax.SeqExpr(tuple(bindings), prev))


i = tir.Var(0, "i")
A = tir.Buffer(1, "A", "float32", (tir.IntImm("int32", 8),))
loop = tir.PrimFunc(
    (A,), tir.For(i, tir.IntImm("int32", 0), tir.IntImm("int32", 8), tir.ForKind.SERIAL, A.store(i, A[i] * 2.0))
)
mod = IRModule({"main": double(3), "helper": double(1), "kernel": loop})

# --------------------------------------------------------------- a config option


class Marking(msgspec.Struct):
    """Options of the Mark pass."""

    key: str = "visited"
    value: int = 1


parpass.register_config_option("tour.marking", Marking, doc="what Mark writes on each function")

# --------------------------------------------------------------- passes


@parpass.function_pass(opt_level=1)
def Mark(func: relax.Function, mod: IRModule, ctx: parpass.PassContext) -> relax.Function:
    """Function form: tag every dataflow function with the configured attribute."""
    marking = ctx.config["tour.marking"]
    return func.with_attr(marking.key, marking.value)


@parpass.prim_func_pass(opt_level=2, name="Unroll")
class UnrollLoops:
    """Class form: mark every loop function as unrolled by ``factor`` (constructor arguments go to the class)."""

    def __init__(self, factor: int) -> None:
        self.factor = factor

    def transform_function(self, func: tir.PrimFunc, mod: IRModule, ctx: parpass.PassContext) -> tir.PrimFunc:
        return func.with_attr("unroll", self.factor)


@parpass.register_pass("CountFunctions")
def count_functions() -> parpass.ModulePass:
    """A registered module pass that others can require by name."""

    @parpass.module_pass(opt_level=0, name="CountFunctions")
    def run(mod: IRModule, ctx: parpass.PassContext) -> IRModule:
        return mod.with_attr("num_functions", len(mod))

    return run


@parpass.module_pass(opt_level=1, required=["CountFunctions"])
def DropHelpers(mod: IRModule, ctx: parpass.PassContext) -> IRModule:
    """Module form: may add and delete functions; it runs after the pass it requires."""
    assert mod.get_attr("num_functions") == 3
    del mod["helper"]
    return mod


@parpass.module_pass(opt_level=3)
def Expensive(mod: IRModule, ctx: parpass.PassContext) -> IRModule:
    raise AssertionError("not run: opt_level 3 is above the context's")


def main() -> None:
    pipeline = parpass.Sequential([Mark, UnrollLoops(factor=4), DropHelpers, Expensive, parpass.PrintIR("tour")])
    timing = parpass.PassTimingInstrument()
    with parpass.PassContext(
        opt_level=2,
        disabled_pass=["PrintIR"],
        instruments=[timing],
        config={"tour.marking": {"key": "seen_by_tour"}},
    ):
        out = pipeline(mod)
    print(out.script())
    print()
    print(f"input module unchanged: {mod.names()}; output: {out.names()}")
    print("timing profile (name: total [self] (% of total; % of parent)):")
    print(timing.render(), end="")
    assert out.names() == ["main", "kernel"]
    assert out["main"].attrs == {"seen_by_tour": 1} and out["kernel"].attrs == {"unroll": 4}


if __name__ == "__main__":
    main()
