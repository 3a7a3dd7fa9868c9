"""cloudpickle for pass code that keeps the file names of the code it ships by value.

cloudpickle 3 writes ``<dynamic-code>`` as the file name of every code object
it pickles by value (so that a payload does not depend on where a notebook
cell ran). A pass defined in a script or a notebook is shipped that way, and a
worker's traceback (or a reproducer's) would then lose the file and line that
the serial run's traceback shows. The file name is read by tracebacks only:
pickled pass code is never part of any output.
"""

from __future__ import annotations

import io
import pickle
import types
from collections import ChainMap
from typing import Any

import cloudpickle

#: Where cloudpickle's code reducer puts ``co_filename`` among the code constructor's arguments (3.8 to 3.13).
_FILENAME_ARG = 10
_cloudpickle_code_reduce = cloudpickle.Pickler.dispatch_table[types.CodeType]


def _code_reduce(code: types.CodeType) -> Any:
    constructor, args = _cloudpickle_code_reduce(code)
    if len(args) > _FILENAME_ARG and args[_FILENAME_ARG] == "<dynamic-code>":
        args = (*args[:_FILENAME_ARG], code.co_filename, *args[_FILENAME_ARG + 1 :])
    return constructor, args


class _Pickler(cloudpickle.Pickler):  # type: ignore[misc]
    dispatch_table = ChainMap({types.CodeType: _code_reduce}, cloudpickle.Pickler.dispatch_table)


def dumps_keeping_files(obj: object) -> bytes:
    """``cloudpickle.dumps(obj)``, with the file names of the code shipped by value kept."""
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue()


__all__ = ["dumps_keeping_files"]
