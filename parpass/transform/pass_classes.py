"""Passes written as classes: a frozen dataclass whose fields are the pass's options (as xDSL writes passes).

::

    @dataclass(frozen=True)
    class ScaleLoops(PrimFuncTransform):
        name: ClassVar[str] = "ScaleLoops"
        opt_level: ClassVar[int] = 1

        factor: int = 2

        def transform_function(self, func, mod, ctx):
            ...

``ScaleLoops(factor=4)`` is the pass itself (a :class:`PrimFuncPass`); the class
is registered under ``name`` when it is defined, so a pipeline spec can say
``ScaleLoops{factor=4}`` and ``parpass passes`` lists its options with their
types and defaults. It travels to workers as its class and field values. The
name is written once, the options are plain fields, and there is no factory.
TVM's decorator forms (:func:`~parpass.transform.function_pass` and its siblings)
stay as they are; both forms make the same kind of pass.

A class without a ``name`` of its own is not registered (a base for other passes).
``required`` (a tuple of pass names) and ``traceable`` are class variables too, and so is a
function-level pass's ``reads_other_functions`` hint (see :class:`~parpass.transform.passes.FunctionLevelPass`).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar, cast

from parpass.ir.module import IRModule
from parpass.ir.relax import Function
from parpass.ir.tir import PrimFunc
from parpass.transform.context import PassContext
from parpass.transform.pass_info import PassInfo, check_opt_level, check_pass_names
from parpass.transform.passes import FunctionPass, ModulePass, Pass, PrimFuncPass
from parpass.transform.registry import register_pass

__all__ = ["FunctionTransform", "ModuleTransform", "PrimFuncTransform", "changed_options"]


def changed_options(p: Pass) -> list[tuple[str, Any]]:
    """The options of a pass written as a class that differ from their defaults, in field order ([] otherwise).

    What a pipeline spec must say to build the pass again.
    """
    if not isinstance(p, _Transform) or not dataclasses.is_dataclass(p):
        return []
    return [(f.name, getattr(p, f.name)) for f in dataclasses.fields(p) if f.init and not _at_default(p, f)]


def _at_default(p: object, f: dataclasses.Field[Any]) -> bool:
    """Whether ``p``'s field ``f`` holds its default (a required field never does)."""
    if f.default is not dataclasses.MISSING:
        return bool(getattr(p, f.name) == f.default)
    if f.default_factory is not dataclasses.MISSING:
        return bool(getattr(p, f.name) == f.default_factory())
    return False


def _rebuild(cls: type[Any], options: dict[str, Any]) -> Any:
    return cls(**options)


class _Transform:
    """What the three pass classes share: the pass's identity as class variables, registration on definition."""

    name: ClassVar[str]
    opt_level: ClassVar[int]
    required: ClassVar[tuple[str, ...]] = ()
    traceable: ClassVar[bool] = False
    #: the method that transforms one function (or the module)
    _method: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            return  # a base for other passes
        where = f"pass class {cls.__qualname__}"
        if not isinstance(cls.name, str) or not cls.name:
            raise TypeError(f"{where}: name must be a non-empty str, got {cls.name!r}")
        if not isinstance(getattr(cls, "opt_level", None), int):
            raise TypeError(f"{where}: opt_level must be set to an int as a class variable")
        check_opt_level(cls.opt_level, where)
        check_pass_names(cls.required, f"{where}: required")
        method = getattr(cls, cls._method, None)
        if not callable(method) or getattr(method, "__isabstractmethod__", False):
            raise TypeError(f"{where} must define {cls._method}")
        register_pass(cls.name)(cast("Callable[[], Pass]", cls))  # the class is its own factory

    def __init__(self) -> None:
        """No options (a dataclass's fields replace this)."""

    def __getattr__(self, key: str) -> Any:
        # The pass's info and function, made on first use: a dataclass's generated __init__ does not
        # call the Pass initializer, and a frozen instance has no other place to set them.
        if key == "_info":
            cls = type(self)
            value: Any = PassInfo(cls.opt_level, cls.name, list(cls.required), cls.traceable)
        elif key == "pass_func":
            value = getattr(self, type(self)._method)
        else:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {key!r}")
        object.__setattr__(self, key, value)
        return value

    def options(self) -> dict[str, Any]:
        """The pass's options: its dataclass fields and their values."""
        if not dataclasses.is_dataclass(self):
            return {}
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init}

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (_rebuild, (type(self), self.options()))


class FunctionTransform(_Transform, FunctionPass):
    """A function pass as a class: define ``transform_function(self, func, mod, ctx) -> Function``."""

    _method = "transform_function"

    @abc.abstractmethod
    def transform_function(self, func: Function, mod: IRModule, ctx: PassContext) -> Function:
        """``func`` transformed (``mod`` is the read-only module it belongs to)."""


class PrimFuncTransform(_Transform, PrimFuncPass):
    """A PrimFunc pass as a class: define ``transform_function(self, func, mod, ctx) -> PrimFunc``."""

    _method = "transform_function"

    @abc.abstractmethod
    def transform_function(self, func: PrimFunc, mod: IRModule, ctx: PassContext) -> PrimFunc:
        """``func`` transformed (``mod`` is the read-only module it belongs to)."""


class ModuleTransform(_Transform, ModulePass):
    """A module pass as a class: define ``transform_module(self, mod, ctx) -> IRModule``."""

    _method = "transform_module"

    @abc.abstractmethod
    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        """``mod`` transformed (the pass's own copy, which it may change)."""
