"""cloudpickle for pass code: file names of the code it ships by value kept, Struct classes rebuilt.

cloudpickle 3 writes ``<dynamic-code>`` as the file name of every code object
it pickles by value (so that a payload does not depend on where a notebook
cell ran). A pass defined in a script or a notebook is shipped that way, and a
worker's traceback (or a reproducer's) would then lose the file and line that
the serial run's traceback shows. The file name is read by tracebacks only:
pickled pass code is never part of any output.

A msgspec Struct class defined in ``__main__`` (a config option's type, say)
cannot be shipped by value as cloudpickle ships classes; it is rebuilt from its
definition with :func:`msgspec.defstruct`.
"""

from __future__ import annotations

import io
import itertools
import pickle
import types
from collections import ChainMap
from typing import Any

import cloudpickle
import msgspec
from cloudpickle.cloudpickle import _should_pickle_by_reference

#: Where cloudpickle's code reducer puts ``co_filename`` among the code constructor's arguments (3.8 to 3.13).
_FILENAME_ARG = 10
_cloudpickle_code_reduce = cloudpickle.Pickler.dispatch_table[types.CodeType]


def _code_reduce(code: types.CodeType) -> Any:
    constructor, args = _cloudpickle_code_reduce(code)
    if len(args) > _FILENAME_ARG and args[_FILENAME_ARG] == "<dynamic-code>":
        args = (*args[:_FILENAME_ARG], code.co_filename, *args[_FILENAME_ARG + 1 :])
    return constructor, args


#: What a rebuilt Struct class keeps of its class body: methods, properties and the docstring.
_STRUCT_BODY = (types.FunctionType, property, classmethod, staticmethod)
#: ``StructConfig`` attributes that :func:`msgspec.defstruct` takes as keywords of the same name.
_STRUCT_OPTIONS = (
    "omit_defaults", "forbid_unknown_fields", "frozen", "eq", "order", "repr_omit_defaults",
    "array_like", "gc", "weakref", "dict", "cache_hash", "tag", "tag_field",
)  # fmt: skip


def _struct_reduce(cls: type[msgspec.Struct]) -> Any:
    """A msgspec Struct class defined where workers cannot import it (``__main__``), as its definition.

    cloudpickle ships such a class by value by rebuilding its ``__dict__``,
    which a Struct's slots refuse; :func:`msgspec.defstruct` rebuilds it from
    its fields, options and methods instead.
    """
    config = cls.__struct_config__
    options = {name: getattr(config, name) for name in _STRUCT_OPTIONS}
    fields = msgspec.structs.fields(cls)
    rename = {f.name: f.encode_name for f in fields if f.encode_name != f.name}
    specs = [(f.name, f.type, f.default, f.default_factory) for f in fields]  # msgspec.field() does not pickle
    required = [f.default is msgspec.NODEFAULT and f.default_factory is msgspec.NODEFAULT for f in fields]
    kw_only = any(not r and later for r, later in itertools.pairwise(required))  # a required field after a default
    body = {k: v for k, v in vars(cls).items() if isinstance(v, _STRUCT_BODY) or k == "__doc__"}
    bases = tuple(b for b in cls.__bases__ if b is not msgspec.Struct) or None
    kwargs = {**options, "rename": rename or None, "kw_only": kw_only, "bases": bases, "module": cls.__module__}
    return _defstruct, (cls.__qualname__, specs, body, kwargs)


def _defstruct(name: str, specs: list[Any], body: dict[str, Any], kwargs: dict[str, Any]) -> type:
    fields: list[Any] = []
    for field_name, tp, default, factory in specs:
        if factory is not msgspec.NODEFAULT:
            fields.append((field_name, tp, msgspec.field(default_factory=factory)))
        elif default is not msgspec.NODEFAULT:
            fields.append((field_name, tp, default))
        else:
            fields.append((field_name, tp))
    return msgspec.defstruct(name, fields, namespace=body, **kwargs)


class _Pickler(cloudpickle.Pickler):  # type: ignore[misc]  # cloudpickle ships no stubs: its Pickler is Any
    dispatch_table = ChainMap({types.CodeType: _code_reduce}, cloudpickle.Pickler.dispatch_table)

    def reducer_override(self, obj: Any) -> Any:
        if (
            isinstance(obj, type)
            and issubclass(obj, msgspec.Struct)
            and obj is not msgspec.Struct
            and not _should_pickle_by_reference(obj)
        ):
            return _struct_reduce(obj)
        return super().reducer_override(obj)


def dumps_for_workers(obj: object) -> bytes:
    """``cloudpickle.dumps(obj)``, with the file names of the code shipped by value kept, and Struct classes
    defined in ``__main__`` shipped as their definitions."""
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue()


__all__ = ["dumps_for_workers"]
