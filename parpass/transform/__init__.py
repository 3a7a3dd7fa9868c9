"""The pass infrastructure (TVM's ``tvm.transform``): PassInfo, PassContext, passes, Sequential,
the pass and config registries, and the decorators that make passes from plain Python.

This layer holds the serial semantics; how the functions of a function-level
pass are run is behind :mod:`parpass.transform.executor`.
"""

from parpass.transform.analysis import FunctionAnalysis
from parpass.transform.config import (
    ConfigOption,
    ConfigValueRangeError,
    PassConfig,
    PassConfigError,
    UnknownConfigOptionError,
    get_config_option,
    list_configs,
    register_config_option,
)
from parpass.transform.context import PassContext, PassContextSnapshot
from parpass.transform.decorators import function_pass, module_pass, prim_func_pass
from parpass.transform.executor import (
    FunctionPassExecutor,
    InlineExecutor,
    get_function_pass_executor,
    set_function_pass_executor,
)
from parpass.transform.pass_classes import FunctionTransform, ModuleTransform, PrimFuncTransform
from parpass.transform.pass_info import PassInfo
from parpass.transform.passes import (
    FunctionLevelPass,
    FunctionPass,
    ModulePass,
    Pass,
    PassDependencyError,
    PrimFuncPass,
    Sequential,
    attach_pass_note,
    walk_passes,
)
from parpass.transform.pipeline_spec import Pipeline, PipelineSpecError, parse_pipeline, pipeline_spec
from parpass.transform.print_ir import PrintIR
from parpass.transform.registry import get_pass, list_passes, register_pass
from parpass.transform.statistics import PassStatistics, Statistic

__all__ = [
    "ConfigOption",
    "ConfigValueRangeError",
    "FunctionAnalysis",
    "FunctionLevelPass",
    "FunctionPass",
    "FunctionPassExecutor",
    "FunctionTransform",
    "InlineExecutor",
    "ModulePass",
    "ModuleTransform",
    "Pass",
    "PassConfig",
    "PassConfigError",
    "PassContext",
    "PassContextSnapshot",
    "PassDependencyError",
    "PassInfo",
    "PassStatistics",
    "Pipeline",
    "PipelineSpecError",
    "PrimFuncPass",
    "PrimFuncTransform",
    "PrintIR",
    "Sequential",
    "Statistic",
    "UnknownConfigOptionError",
    "attach_pass_note",
    "function_pass",
    "get_config_option",
    "get_function_pass_executor",
    "get_pass",
    "list_configs",
    "list_passes",
    "module_pass",
    "parse_pipeline",
    "pipeline_spec",
    "prim_func_pass",
    "register_config_option",
    "register_pass",
    "set_function_pass_executor",
    "walk_passes",
]
