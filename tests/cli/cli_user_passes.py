"""User passes for the command-line tests, loaded with ``parpass ... --load <this file>``.

Not a test module: the ``parpass`` subprocesses import it as a user's pass file.
"""

from __future__ import annotations

import os

from parpass.ir import BaseFunc, IRModule
from parpass.transform import Pass, PassContext, function_pass, module_pass, prim_func_pass, register_pass


def _is_main(func: BaseFunc) -> bool:
    return func.attrs.get("global_symbol") == "main"


def _fail_on_main(func: BaseFunc, mod: IRModule, ctx: PassContext) -> BaseFunc:
    if _is_main(func):
        raise ValueError("boom on main")
    return func


def _crash_on_main(func: BaseFunc, mod: IRModule, ctx: PassContext) -> BaseFunc:
    if _is_main(func):
        os._exit(3)  # the process dies, as on a segfault
    return func


def _fail_if_env(func: BaseFunc, mod: IRModule, ctx: PassContext) -> BaseFunc:
    if _is_main(func) and os.environ.get("CLI_TEST_FAIL") == "1":
        raise RuntimeError("failing because CLI_TEST_FAIL=1")
    return func


@register_pass("FailOnMain")
def FailOnMain() -> Pass:
    """Raises ValueError on the function called main."""
    return function_pass(_fail_on_main, opt_level=0, name="FailOnMain")


@register_pass("CrashOnMain")
def CrashOnMain() -> Pass:
    """Kills its process (exit status 3) on the function called main."""
    return function_pass(_crash_on_main, opt_level=0, name="CrashOnMain")


@register_pass("FailIfEnv")
def FailIfEnv() -> Pass:
    """Fails on main only while the environment variable CLI_TEST_FAIL is 1."""
    return function_pass(_fail_if_env, opt_level=0, name="FailIfEnv")


@register_pass("TagModule")
def TagModule(tag: str = "tagged", count: int = 1) -> Pass:
    """A module pass with options: sets the module attribute ``tag`` to ``count``."""

    def run(mod: IRModule, ctx: PassContext) -> IRModule:
        return mod.with_attr(tag, count)

    return module_pass(run, opt_level=0, name="TagModule")


@register_pass("FailModule")
def FailModule() -> Pass:
    """A module pass that raises KeyError."""

    def run(mod: IRModule, ctx: PassContext) -> IRModule:
        raise KeyError("no such thing")

    return module_pass(run, opt_level=0, name="FailModule")


def _leave_alone(func: BaseFunc, mod: IRModule, ctx: PassContext) -> BaseFunc:
    return func


@register_pass("LeaveAlone")
def LeaveAlone() -> Pass:
    return prim_func_pass(_leave_alone, opt_level=0, name="LeaveAlone")
