"""parpass: a TVM-style pass infrastructure whose function-level passes run on every core."""

from parpass import instrument, parallel, transform
from parpass.instrument import (
    DumpIR,
    PassInstrument,
    PassPrintingInstrument,
    PassTimingInstrument,
    PrintAfterAll,
    PrintAfterChange,
    PrintBeforeAll,
    PrintIRAfter,
    PrintIRBefore,
    pass_instrument,
)
from parpass.ir import IRModule
from parpass.parallel import shutdown
from parpass.transform import (
    FunctionPass,
    ModulePass,
    Pass,
    PassContext,
    PassInfo,
    PrimFuncPass,
    PrintIR,
    Sequential,
    function_pass,
    get_pass,
    list_configs,
    list_passes,
    module_pass,
    prim_func_pass,
    register_config_option,
    register_pass,
)

__version__ = "0.1.0"

__all__ = [
    "DumpIR",
    "FunctionPass",
    "IRModule",
    "ModulePass",
    "Pass",
    "PassContext",
    "PassInfo",
    "PassInstrument",
    "PassPrintingInstrument",
    "PassTimingInstrument",
    "PrimFuncPass",
    "PrintAfterAll",
    "PrintAfterChange",
    "PrintBeforeAll",
    "PrintIR",
    "PrintIRAfter",
    "PrintIRBefore",
    "Sequential",
    "__version__",
    "function_pass",
    "get_pass",
    "instrument",
    "list_configs",
    "list_passes",
    "module_pass",
    "parallel",
    "pass_instrument",
    "prim_func_pass",
    "register_config_option",
    "register_pass",
    "shutdown",
    "transform",
]
