"""parpass: a TVM-style pass infrastructure whose function-level passes run on every core.

``import parpass`` is the convenient whole: every name below. It is loaded on first use, so that
``import parpass.ir`` (which runs this file first) loads the IR only, and no process pool.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from parpass import _loading

if TYPE_CHECKING:
    from parpass import instrument, parallel, passes, transform
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
        parse_pipeline,
        prim_func_pass,
        register_config_option,
        register_pass,
    )
    from parpass.transform.pipeline_spec import pipeline_spec


def _load_everything() -> None:
    """The parallel executor (installed on import) and the standard passes with their config options."""
    importlib.import_module("parpass.parallel")
    importlib.import_module("parpass.passes")


_loading.set_loader(_load_everything)

#: Where each name of the package lives.
_NAMES: dict[str, str] = {
    "DumpIR": "parpass.instrument",
    "PassInstrument": "parpass.instrument",
    "PassPrintingInstrument": "parpass.instrument",
    "PassTimingInstrument": "parpass.instrument",
    "PrintAfterAll": "parpass.instrument",
    "PrintAfterChange": "parpass.instrument",
    "PrintBeforeAll": "parpass.instrument",
    "PrintIRAfter": "parpass.instrument",
    "PrintIRBefore": "parpass.instrument",
    "pass_instrument": "parpass.instrument",
    "IRModule": "parpass.ir",
    "shutdown": "parpass.parallel",
    "FunctionPass": "parpass.transform",
    "ModulePass": "parpass.transform",
    "Pass": "parpass.transform",
    "PassContext": "parpass.transform",
    "PassInfo": "parpass.transform",
    "PrimFuncPass": "parpass.transform",
    "PrintIR": "parpass.transform",
    "Sequential": "parpass.transform",
    "function_pass": "parpass.transform",
    "get_pass": "parpass.transform",
    "list_configs": "parpass.transform",
    "list_passes": "parpass.transform",
    "module_pass": "parpass.transform",
    "parse_pipeline": "parpass.transform",
    "pipeline_spec": "parpass.transform",
    "prim_func_pass": "parpass.transform",
    "register_config_option": "parpass.transform",
    "register_pass": "parpass.transform",
}
_SUBMODULES = frozenset({"cli", "instrument", "ir", "parallel", "passes", "testing", "transform"})


def __getattr__(name: str) -> Any:
    if name in _NAMES or name in _SUBMODULES:
        _loading.load_all()
        if name in _SUBMODULES:
            return importlib.import_module(f"parpass.{name}")
        value = getattr(importlib.import_module(_NAMES[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'parpass' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_NAMES, *_SUBMODULES})


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
    "parse_pipeline",
    "pass_instrument",
    "passes",
    "pipeline_spec",
    "prim_func_pass",
    "register_config_option",
    "register_pass",
    "shutdown",
    "transform",
]
