"""Running a PrimFunc on arguments: checking them, laying buffers out in memory and copying results back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from parpass.ir import tir
from parpass.ir.module import IRModule
from parpass.testing.interpreter.errors import ArgumentError, InterpreterError, lookup
from parpass.testing.interpreter.prim_machine import TirMachine
from parpass.testing.interpreter.prim_values import np_element_dtype
from parpass.testing.interpreter.values import describe


class _Layout(NamedTuple):
    """Where a buffer argument lives during the run: the caller's array, its offset grid (None when dense)."""

    array: np.ndarray
    grid: Any
    vid: int


def run_prim_func(func_or_mod: tir.PrimFunc | IRModule, *args: Any, name: str | None = None) -> tuple[np.ndarray, ...]:
    """Run a PrimFunc on positional ``args`` and return its buffer arrays, updated in place.

    ``func_or_mod`` is a :class:`~parpass.ir.PrimFunc`, or an :class:`IRModule` with
    ``name`` naming one. Buffer arguments are numpy arrays of the declared shape and
    dtype (a buffer with ``strides`` is laid out in fresh memory with those element
    strides); scalar arguments are Python numbers or numpy scalars of the dtype.
    The arrays are written only if the run succeeds.
    """
    if isinstance(func_or_mod, IRModule):
        if name is None:
            raise TypeError("run_prim_func on an IRModule needs name=")
        func = lookup(func_or_mod, name, "in the module given to run_prim_func")
        label = name
    else:
        func = func_or_mod
        label = name or str(func.attrs.get("global_symbol", "<PrimFunc>"))
    if not isinstance(func, tir.PrimFunc):
        raise TypeError(f"{label!r} is a {type(func).__name__}, not a PrimFunc")
    return tuple(run_prim(func, label, args))


def run_prim(func: tir.PrimFunc, name: str, args: Sequence[Any], allocate_outputs: bool = False) -> list[np.ndarray]:
    """Run ``func`` on ``args``; return its buffer arrays (params order), updated in place.

    With ``allocate_outputs``, parameters past ``len(args)`` get zeroed arrays of their
    declared shape (the dataflow call convention).
    """
    params = func.params
    if len(args) != len(params) and not (allocate_outputs and len(args) <= len(params)):
        shown = ", ".join(p.name if isinstance(p, tir.Buffer) else p.name_hint for p in params)
        raise ArgumentError(f"PrimFunc {name!r} takes {len(params)} argument(s) ({shown}), got {len(args)}")
    machine = TirMachine(func, name)
    _bind_scalars(machine, args)
    with np.errstate(all="ignore"):
        layouts = [_lay_out(machine, k, param, args) for k, param in enumerate(params) if isinstance(param, tir.Buffer)]
        machine.execute(func.body)
    # Copy the results back only after a successful run: a failing run leaves the arguments as they were.
    for layout in layouts:
        _copy_back(machine, layout)
    return [layout.array for layout in layouts]


def _bind_scalars(machine: TirMachine, args: Sequence[Any]) -> None:
    """Check the parameters' vids are distinct and every one is a Var or Buffer; bind the scalar arguments."""
    name = machine.name
    seen: dict[int, int] = {}
    for k, param in enumerate(machine.func.params):
        if param.vid in seen:
            raise ArgumentError(
                f"PrimFunc {name!r}: parameters {seen[param.vid]} and {k} have the same vid {param.vid}"
            )
        seen[param.vid] = k
        if isinstance(param, tir.Var):
            if k >= len(args):
                raise ArgumentError(f"PrimFunc {name!r}: no argument for scalar parameter {k} ({param.name_hint})")
            machine.env[param.vid] = _scalar_arg(args[k], param, k, name)
        elif not isinstance(param, tir.Buffer):
            raise ArgumentError(f"PrimFunc {name!r}: parameter {k} is a {type(param).__name__}, not a Var or Buffer")


def _lay_out(machine: TirMachine, k: int, param: tir.Buffer, args: Sequence[Any]) -> _Layout:
    """Put buffer parameter ``k``'s argument (zeros past the arguments) in fresh memory of its layout."""
    name = machine.name
    try:
        shape = machine.shape_of(param)
        size = machine.memory_size(param)
        strides = machine.strides_of(param) if param.strides else None
    except InterpreterError as exc:
        raise ArgumentError(f"PrimFunc {name!r}: cannot lay out parameter {k} ({param.name}): {exc}") from exc
    dtype = np_element_dtype(param.dtype)
    arr = np.zeros(shape, dtype=dtype) if k >= len(args) else _buffer_arg(args[k], param, k, name, shape)
    if strides is None:
        memory = np.array(arr, dtype=dtype, copy=True).reshape(-1)
        grid = None
    else:
        grid = _grid(shape, strides)
        memory = np.zeros(size, dtype=dtype)
        memory[grid.reshape(-1)] = arr.reshape(-1)
    machine.memory[param.vid] = memory
    return _Layout(arr, grid, param.vid)


def _buffer_arg(arr: Any, param: tir.Buffer, k: int, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """Argument ``k``, checked to be an array of ``param``'s shape and dtype."""
    if not isinstance(arr, np.ndarray):
        raise ArgumentError(
            f"PrimFunc {name!r}: argument {k} ({param.name}) must be a numpy array of shape {shape} "
            f"and dtype {param.dtype}, got {describe(arr)}"
        )
    if arr.dtype != np_element_dtype(param.dtype) or tuple(arr.shape) != shape:
        raise ArgumentError(
            f"PrimFunc {name!r}: argument {k} ({param.name}) must have shape {shape} and dtype "
            f"{param.dtype}, got {describe(arr)}"
        )
    return arr


def _copy_back(machine: TirMachine, layout: _Layout) -> None:
    """Write a buffer's memory after the run into the caller's array (a read-only one must be unchanged)."""
    arr = layout.array
    memory = machine.memory[layout.vid]
    result = memory.reshape(arr.shape) if layout.grid is None else memory[layout.grid]
    if arr.flags.writeable:
        arr[...] = result
    elif not np.array_equal(arr, result, equal_nan=arr.dtype.kind in "fc"):
        raise ArgumentError(f"PrimFunc {machine.name!r} wrote to a buffer whose array is read-only")


def _scalar_arg(value: Any, var: tir.Var, k: int, name: str) -> Any:
    """A scalar argument converted to a numpy scalar of ``var``'s dtype."""
    want = np_element_dtype(var.dtype)
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, np.generic):
        if value.dtype != want:
            raise ArgumentError(
                f"PrimFunc {name!r}: argument {k} ({var.name_hint}) must be a {var.dtype} scalar, got {describe(value)}"
            )
        return value
    if not isinstance(value, (bool, int, float)):
        raise ArgumentError(
            f"PrimFunc {name!r}: argument {k} ({var.name_hint}) must be a {var.dtype} scalar, got {describe(value)}"
        )
    if isinstance(value, float) and want.kind in "biu":
        raise ArgumentError(
            f"PrimFunc {name!r}: argument {k} ({var.name_hint}) is {var.dtype}, got the float {value!r}"
        )
    try:
        return want.type(value)
    except (OverflowError, ValueError) as exc:
        raise ArgumentError(
            f"PrimFunc {name!r}: argument {k} ({var.name_hint}) = {value!r} does not fit {var.dtype}"
        ) from exc


def _grid(shape: tuple[int, ...], strides: tuple[int, ...]) -> Any:
    """Element offsets of every index of ``shape`` under ``strides``, as an int64 array of ``shape``."""
    offsets = np.zeros(shape, dtype=np.int64)
    for axis, (dim, stride) in enumerate(zip(shape, strides, strict=True)):
        view = [1] * len(shape)
        view[axis] = dim
        offsets = offsets + np.arange(dim, dtype=np.int64).reshape(view) * stride
    return offsets
