"""A short tour of parpass's pass infrastructure. Run it: ``python examples/tour.py`` (a few seconds).

It builds a small module, writes a function pass in both forms and a module
pass, takes a standard pass from the registry (``get_pass``), runs them in a
Sequential under a PassContext (opt_level, disabled and required passes, a
config option) with instruments: timing, one of your own (``@pass_instrument``),
``PrintBeforeAll``, ``DumpIR`` (whose files ``load`` reads back) and
``WellFormedInstrument``. Then it runs function-level passes on 2 worker
processes and checks the result is the in-process one.
"""

from __future__ import annotations

import dataclasses
import io
import tempfile
from pathlib import Path

import parpass
from parpass.instrument import WellFormedInstrument
from parpass.ir import IRModule, load, relax, structural_equal, tir
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


@dataclasses.dataclass(frozen=True)
class Marking:
    """Options of the Mark pass (a dataclass or a msgspec.Struct; given in a context as a dict of its fields)."""

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


# --------------------------------------------------------------- an instrument of your own


@parpass.pass_instrument
class PassLog:
    """Records the name of every pass that runs (any of TVM's callbacks may be defined; the rest do nothing)."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def run_before_pass(self, mod: IRModule, info: parpass.PassInfo) -> None:
        self.names.append(info.name)


def main() -> None:
    fold = parpass.get_pass("FoldConstant")  # a standard pass, from the registry (`parpass passes` lists them)
    pipeline = parpass.Sequential([Mark, UnrollLoops(factor=4), fold, DropHelpers, Expensive, parpass.PrintIR("tour")])
    timing, log, before = parpass.PassTimingInstrument(), PassLog(), io.StringIO()
    with tempfile.TemporaryDirectory() as dump_dir:
        with parpass.PassContext(
            opt_level=2,
            disabled_pass=["PrintIR"],
            instruments=[
                timing,
                log,
                parpass.PrintBeforeAll(file=before),
                parpass.DumpIR(dump_dir),
                WellFormedInstrument(),
            ],
            config={"tour.marking": {"key": "seen_by_tour"}},
        ):
            out = pipeline(mod)
        dumps = sorted(Path(dump_dir).iterdir())
        reloaded = structural_equal(load(dumps[-1]), out)
    print(out.script())
    print()
    print(f"input module unchanged: {mod.names()}; output: {out.names()}")
    print(f"passes run (seen by @pass_instrument PassLog): {', '.join(log.names[1:])}")
    print(f"PrintBeforeAll printed the module before {before.getvalue().count('@kernel =')} passes")
    print(f"DumpIR wrote {dumps[0].name} ... {dumps[-1].name}; the last loads back equal to the output: {reloaded}")
    print("WellFormedInstrument: every pass got and returned well-formed IR (it raises IRError otherwise)")
    print("timing profile (name: total [self] (% of total; % of parent)):")
    print(timing.render())
    assert out.names() == ["main", "kernel"]
    assert out["main"].attrs == {"seen_by_tour": 1} and out["kernel"].attrs == {"unroll": 4}

    # Function-level passes fan out to worker processes; the result is exactly the in-process one.
    functions = parpass.Sequential([Mark, parpass.get_pass("InferType"), fold])
    results = []
    for workers in (1, 2):
        config = {"parpass.num_workers": workers, "parpass.parallel": "always", "tour.marking": {"value": 7}}
        with parpass.PassContext(config=config):
            results.append(functions(mod))
    print(f"with 2 workers: same output as in-process: {structural_equal(results[0], results[1])}")


if __name__ == "__main__":
    main()
