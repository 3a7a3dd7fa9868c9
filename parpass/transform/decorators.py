"""The pass decorators ``module_pass``, ``function_pass`` and ``prim_func_pass`` (TVM's signatures).

Each takes ``(pass_func=None, opt_level=None, name=None, required=None, traceable=False)``
and works in two forms:

* on a callable (function, lambda, ``functools.partial``, callable object):
  returns a pass whose ``pass_func`` is that callable;
* on a class defining ``transform_module(self, mod, ctx)`` (module pass) or
  ``transform_function(self, func, mod, ctx)`` (function-level passes): returns
  a class whose instances are passes; constructor arguments go to the user's
  class, and attribute lookups that the pass does not answer fall through to
  the user's object.

``opt_level`` is mandatory. Missing opt_level, a ``required`` that is not a
list/tuple of names and a pass function of the wrong arity are errors at
decoration time. The name defaults to the function's or class's ``__name__``
(for a partial, the wrapped function's; for a callable object, its class name).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, Union, overload

from parpass.transform.pass_info import PassInfo, check_opt_level, check_pass_names
from parpass.transform.passes import FunctionPass, ModulePass, Pass, PrimFuncPass, check_pass_func

__all__ = ["PassDecorator", "function_pass", "module_pass", "prim_func_pass"]

_P = TypeVar("_P", bound=Pass, covariant=True)
#: The pass kinds a decorator makes; each is built from ``(pass_func, info)``.
_Base = type[ModulePass] | type[FunctionPass] | type[PrimFuncPass]


def default_pass_name(obj: object) -> str:
    """A sensible pass name for a pass function or class."""
    while isinstance(obj, functools.partial):
        obj = obj.func
    name = getattr(obj, "__name__", None)
    if isinstance(name, str) and name:
        return name
    return type(obj).__name__


def _wrap_class(pass_cls: type, info: PassInfo, base: _Base, method: str, arity: int, params: str) -> type:
    """A subclass of ``base`` named like ``pass_cls`` whose instances wrap an instance of ``pass_cls``."""
    label = "module pass" if base is ModulePass else f"{base._kind.lower()} pass"
    impl = inspect.getattr_static(pass_cls, method, None)
    if impl is None:
        raise TypeError(f"{label} class {pass_cls.__qualname__} must define {method}{params}")
    if isinstance(impl, (staticmethod, classmethod)):
        raise TypeError(f"{label} class {pass_cls.__qualname__}: {method} must be a plain method")
    check_pass_func(impl, arity + 1, f"{label} class {pass_cls.__qualname__}.{method}", f"(self, {params[1:]}")

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        inst = pass_cls(*args, **kwargs)
        base.__init__(self, getattr(inst, method), info)
        self._inst = inst

    def __getattr__(self: Any, key: str) -> Any:
        # Only reached when normal lookup failed; never recurse while _inst is missing (unpickling).
        inst = self.__dict__.get("_inst")
        if inst is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {key!r}")
        return getattr(inst, key)

    wrapped = type(
        pass_cls.__name__,
        (base,),
        {
            "__init__": functools.wraps(pass_cls.__init__)(__init__),  # type: ignore[misc]  # mypy calls reading __init__ unsound; wraps only copies its metadata
            "__getattr__": __getattr__,
            "__doc__": pass_cls.__doc__,
            "__module__": pass_cls.__module__,
            "__qualname__": pass_cls.__qualname__,
            "__wrapped__": pass_cls,
        },
    )
    # The wrapper takes the class's module-level name; keep the user's class importable
    # for pickle (its instances travel to worker processes) as <Name>.__wrapped__.
    if "<locals>" not in pass_cls.__qualname__:
        pass_cls.__qualname__ = f"{pass_cls.__qualname__}.__wrapped__"
    return wrapped


def _make_decorator(
    kind: str,
    base: _Base,
    method: str,
    arity: int,
    params: str,
    pass_func: Any,
    opt_level: int | None,
    name: str | None,
    required: Any,
    traceable: bool,
) -> Any:
    if opt_level is None:
        raise ValueError(f"Please provide opt_level for the {kind} pass (e.g. @{kind}_pass(opt_level=1))")
    where = f"{kind}_pass" + (f" {name!r}" if name else "")
    check_opt_level(opt_level, where)
    if required is not None and not isinstance(required, (list, tuple)):
        raise TypeError(
            f"{where}: required must be a list or tuple of pass names, got {type(required).__name__}: {required!r}"
        )
    req = check_pass_names(required, f"{where}: required")
    if name is not None and (not isinstance(name, str) or not name):
        raise TypeError(f"{kind}_pass: name must be a non-empty str, got {type(name).__name__}: {name!r}")
    if not isinstance(traceable, bool):
        raise TypeError(f"{where}: traceable must be a bool, got {type(traceable).__name__}")

    def create(pass_arg: Any) -> Any:
        info = PassInfo(opt_level, name or default_pass_name(pass_arg), req, traceable)
        if inspect.isclass(pass_arg):
            return _wrap_class(pass_arg, info, base, method, arity, params)
        if not callable(pass_arg):
            raise TypeError(f"{kind}_pass decorates a function or a class, got {type(pass_arg).__name__}: {pass_arg!r}")
        return base(pass_arg, info)

    if pass_func is not None:
        return create(pass_func)
    return create


class PassDecorator(Protocol[_P]):
    """What ``function_pass(opt_level=...)`` and its siblings return: applied to a function it gives a pass,
    applied to a class it gives a class whose instances are passes."""

    @overload
    def __call__(self, pass_arg: type) -> type[_P]: ...  # type: ignore[overload-overlap]  # as below

    @overload
    def __call__(self, pass_arg: Callable[..., Any]) -> _P: ...

    def __call__(self, pass_arg: Any) -> Any: ...


_Required = Union[list[str], tuple[str, ...], None]


@overload
def module_pass(  # type: ignore[overload-overlap]  # a class is callable too; mypy cannot tell the forms apart
    pass_func: type,
    opt_level: int | None = ...,
    name: str | None = ...,
    required: _Required = ...,
    traceable: bool = ...,
) -> type[ModulePass]: ...


@overload
def module_pass(
    pass_func: Callable[..., Any],
    opt_level: int | None = ...,
    name: str | None = ...,
    required: _Required = ...,
    traceable: bool = ...,
) -> ModulePass: ...


@overload
def module_pass(
    pass_func: None = None,
    opt_level: int | None = ...,
    name: str | None = ...,
    required: _Required = ...,
    traceable: bool = ...,
) -> PassDecorator[ModulePass]: ...


def module_pass(
    pass_func: Callable[..., Any] | type | None = None,
    opt_level: int | None = None,
    name: str | None = None,
    required: _Required = None,
    traceable: bool = False,
) -> Any:
    """Make a :class:`ModulePass` from ``pass_func(mod, ctx) -> IRModule`` or a class with ``transform_module``."""
    return _make_decorator(
        "module", ModulePass, "transform_module", 2, "(mod, ctx)", pass_func, opt_level, name, required, traceable
    )


@overload
def function_pass(  # type: ignore[overload-overlap]  # a class is callable too; mypy cannot tell the forms apart
    pass_func: type,
    opt_level: int | None = ...,
    name: str | None = ...,
    required: _Required = ...,
    traceable: bool = ...,
) -> type[FunctionPass]: ...


@overload
def function_pass(
    pass_func: Callable[..., Any],
    opt_level: int | None = ...,
    name: str | None = ...,
    required: _Required = ...,
    traceable: bool = ...,
) -> FunctionPass: ...


@overload
def function_pass(
    pass_func: None = None,
    opt_level: int | None = ...,
    name: str | None = ...,
    required: _Required = ...,
    traceable: bool = ...,
) -> PassDecorator[FunctionPass]: ...


def function_pass(
    pass_func: Callable[..., Any] | type | None = None,
    opt_level: int | None = None,
    name: str | None = None,
    required: _Required = None,
    traceable: bool = False,
) -> Any:
    """Make a :class:`FunctionPass` from ``pass_func(func, mod, ctx) -> Function``, or from a class
    with ``transform_function(self, func, mod, ctx)``."""
    return _make_decorator(
        "function",
        FunctionPass,
        "transform_function",
        3,
        "(func, mod, ctx)",
        pass_func,
        opt_level,
        name,
        required,
        traceable,
    )


@overload
def prim_func_pass(  # type: ignore[overload-overlap]  # a class is callable too; mypy cannot tell the forms apart
    pass_func: type,
    opt_level: int | None = ...,
    name: str | None = ...,
    required: _Required = ...,
    traceable: bool = ...,
) -> type[PrimFuncPass]: ...


@overload
def prim_func_pass(
    pass_func: Callable[..., Any],
    opt_level: int | None = ...,
    name: str | None = ...,
    required: _Required = ...,
    traceable: bool = ...,
) -> PrimFuncPass: ...


@overload
def prim_func_pass(
    pass_func: None = None,
    opt_level: int | None = ...,
    name: str | None = ...,
    required: _Required = ...,
    traceable: bool = ...,
) -> PassDecorator[PrimFuncPass]: ...


def prim_func_pass(
    pass_func: Callable[..., Any] | type | None = None,
    opt_level: int | None = None,
    name: str | None = None,
    required: _Required = None,
    traceable: bool = False,
) -> Any:
    """Make a :class:`PrimFuncPass` from ``pass_func(func, mod, ctx) -> PrimFunc``, or from a class
    with ``transform_function(self, func, mod, ctx)``."""
    return _make_decorator(
        "prim_func",
        PrimFuncPass,
        "transform_function",
        3,
        "(func, mod, ctx)",
        pass_func,
        opt_level,
        name,
        required,
        traceable,
    )
