"""The registry of PassContext config options, and validation of their values.

A pass that reads ``ctx.config["my.option"]`` registers the option first with
:func:`register_config_option` (TVM's ``TVM_REGISTER_PASS_CONFIG_OPTION``). The
type is a scalar type (``int``, ``float``, ``bool``, ``str``), anything
:func:`msgspec.convert` understands (``list[int]``, ``Literal[...]``, ``X | None``,
a range: ``Annotated[int, msgspec.Meta(ge=1)]``, named ``int >= 1`` in errors),
or a structured type: a ``msgspec.Struct`` or dataclass, given in the context as a
dict (or as an instance) and stored as the type with its defaults filled in.

Unlike TVM, a bad key or value is an error that says what is wrong: an unknown
key names the closest registered keys, and a wrong type, an unknown struct field
or a struct field of the wrong type names the key, the field and the type
expected (TVM silently replaces a bad struct field by its default).
"""

from __future__ import annotations

import dataclasses
import threading
import typing
from collections.abc import Iterator, Mapping
from typing import Any

import msgspec

from parpass._loading import load_all
from parpass.errors import NameNotFoundError, ParpassError, close_names, format_names, unknown_name

__all__ = [
    "ConfigOption",
    "ConfigValueRangeError",
    "PassConfig",
    "PassConfigError",
    "UnknownConfigOptionError",
    "get_config_option",
    "list_configs",
    "register_config_option",
    "validate_config",
]

_NO_DEFAULT: Any = object()


class PassConfigError(ParpassError, TypeError, AttributeError):
    """A PassContext config value of the wrong type, or a struct value with an unknown or bad field.

    Also an ``AttributeError``: TVM raises one for a value of the wrong type, and
    code written for TVM catches that.
    """


class ConfigValueRangeError(PassConfigError, ValueError):
    """A config value of the right type outside the option's valid range (``parpass.timeout=-1``).

    A :class:`PassConfigError` (so also the ``AttributeError`` TVM raises) and a ``ValueError``,
    which is what Python code expects for a value of the right type that is out of range.
    """


class UnknownConfigOptionError(NameNotFoundError, AttributeError):
    """A config key that is not registered; the message names the closest registered keys.

    A ``KeyError`` (parpass's :class:`~parpass.errors.NameNotFoundError`) and, as
    TVM raises for an unknown key, an ``AttributeError``.
    """


#: ``msgspec.Meta`` bounds, as a type name shows them (``int >= 1``).
_BOUNDS = (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))


def type_name(tp: object) -> str:
    """How errors and listings name a value type: ``int``, ``int >= 1``, ``Literal['a', 'b']``, a struct's path."""
    if typing.get_origin(tp) is typing.Annotated:  # a type with a valid range: Annotated[int, msgspec.Meta(ge=1)]
        base, *extras = typing.get_args(tp)
        bounds = [
            f"{op} {getattr(meta, attr)}"
            for meta in extras
            if isinstance(meta, msgspec.Meta)
            for attr, op in _BOUNDS
            if getattr(meta, attr) is not None
        ]
        return " ".join([type_name(base), " and ".join(bounds)]) if bounds else type_name(base)
    if isinstance(tp, type):
        return tp.__qualname__ if tp.__module__ in ("builtins", "__main__") else f"{tp.__module__}.{tp.__qualname__}"
    return repr(tp).replace("typing.", "")


def _is_struct_type(tp: object) -> bool:
    return isinstance(tp, type) and (issubclass(tp, msgspec.Struct) or dataclasses.is_dataclass(tp))


def _struct_fields(tp: type) -> list[tuple[str, Any, bool]]:
    """``(name, type, has_default)`` for each field of a Struct or dataclass type."""
    if issubclass(tp, msgspec.Struct):
        return [
            (f.name, f.type, f.default is not msgspec.NODEFAULT or f.default_factory is not msgspec.NODEFAULT)
            for f in msgspec.structs.fields(tp)
        ]
    if not dataclasses.is_dataclass(tp):
        raise TypeError(f"{tp!r} is neither a msgspec Struct nor a dataclass")
    hints = typing.get_type_hints(tp)
    out = []
    for f in dataclasses.fields(tp):
        if not f.init:
            continue
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        out.append((f.name, hints.get(f.name, Any), has_default))
    return out


def _struct_values(value: object) -> dict[str, Any]:
    if isinstance(value, msgspec.Struct):
        return {name: getattr(value, name) for name in value.__struct_fields__}
    if not dataclasses.is_dataclass(value):
        raise TypeError(f"{type(value).__name__} is neither a msgspec Struct nor a dataclass")
    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.init}


def _convert(value: object, tp: object) -> Any:
    """``value`` checked against (and converted to) ``tp``; raises msgspec.ValidationError."""
    if tp is Any:
        return value
    return msgspec.convert(value, tp, strict=True)


def _error_class(value: object, tp: object) -> type[PassConfigError]:
    """The error for ``value``, which ``tp`` refused: out of range when it has the type without the range."""
    if typing.get_origin(tp) is typing.Annotated:
        try:
            _convert(value, typing.get_args(tp)[0])
        except (msgspec.ValidationError, TypeError):
            return PassConfigError
        return ConfigValueRangeError
    return PassConfigError


def _describe(value: object) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


@dataclasses.dataclass(frozen=True)
class ConfigOption:
    """A registered config option: its key, value type, default (if any) and documentation."""

    name: str
    value_type: Any
    default: Any
    doc: str

    @property
    def has_default(self) -> bool:
        return self.default is not _NO_DEFAULT

    @property
    def type_name(self) -> str:
        return type_name(self.value_type)

    def validate(self, value: object) -> Any:
        """``value`` checked against the option's type; structs are built from a dict with defaults filled."""
        tp = self.value_type
        if _is_struct_type(tp):
            return self._validate_struct(value)
        try:
            return _convert(value, tp)
        except (msgspec.ValidationError, TypeError) as err:
            raise _error_class(value, tp)(
                f"config option {self.name!r} expects {type_name(tp)}, got {_describe(value)} ({err})"
            ) from None

    def _validate_struct(self, value: object) -> Any:
        tp = self.value_type
        if isinstance(value, tp):
            given = _struct_values(value)
        elif isinstance(value, Mapping):
            given = dict(value)
        else:
            raise PassConfigError(
                f"config option {self.name!r} expects {type_name(tp)} (or a dict of its fields), got {_describe(value)}"
            )
        fields = _struct_fields(tp)
        known = [name for name, _, _ in fields]
        for key in given:
            if key not in known:
                near = close_names(str(key), known)
                hint = f"closest: {format_names(near)}" if near else f"its fields: {format_names(known)}"
                raise PassConfigError(f"config option {self.name!r}: {type_name(tp)} has no field {key!r}; {hint}")
        converted: dict[str, Any] = {}
        for name, ftype, has_default in fields:
            if name not in given:
                if not has_default:
                    raise PassConfigError(f"config option {self.name!r}: field {name!r} of {type_name(tp)} is required")
                continue
            try:
                converted[name] = _convert(given[name], ftype)
            except (msgspec.ValidationError, TypeError) as err:
                raise _error_class(given[name], ftype)(
                    f"config option {self.name!r}: field {name!r} expects {type_name(ftype)}, "
                    f"got {_describe(given[name])} ({err})"
                ) from None
        return tp(**converted)


_LOCK = threading.Lock()
_OPTIONS: dict[str, ConfigOption] = {}


def register_config_option(
    name: str, value_type: Any, default: Any = _NO_DEFAULT, doc: str = "", *, override: bool = False
) -> ConfigOption:
    """Register config key ``name`` with values of ``value_type``.

    ``default`` (validated here) is what ``ctx.config[name]`` returns when the
    context does not set the key; a struct type without an explicit default
    defaults to the struct built from its own field defaults, when it has them.
    Registering a key again with the same type and default is a no-op; with
    anything else it is an error unless ``override=True``.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"register_config_option: name must be a non-empty str, got {name!r}")
    if not isinstance(doc, str):
        raise TypeError(f"register_config_option({name!r}): doc must be a str, got {type(doc).__name__}")
    probe = ConfigOption(name, value_type, _NO_DEFAULT, doc)
    if not _is_struct_type(value_type):
        try:
            msgspec.inspect.type_info(value_type)
        except (TypeError, ValueError) as err:
            raise TypeError(f"register_config_option({name!r}): unsupported value type {value_type!r}: {err}") from None
    if default is not _NO_DEFAULT:
        default = probe.validate(default)
    elif _is_struct_type(value_type) and all(has for _, _, has in _struct_fields(value_type)):
        default = value_type()
    option = ConfigOption(name, value_type, default, doc)
    with _LOCK:
        old = _OPTIONS.get(name)
        if old is not None and not override:
            same = old.value_type == value_type and old.has_default == option.has_default
            if same and option.has_default:
                same = old.default is default or bool(old.default == default)
            if not same:
                raise ValueError(
                    f"config option {name!r} is already registered (type {old.type_name}); "
                    "pass override=True to replace it"
                )
        _OPTIONS[name] = option
    return option


def get_config_option(name: str) -> ConfigOption:
    """The registered option ``name``; an UnknownConfigOptionError naming the closest registered keys if unknown."""
    option = _OPTIONS.get(name)
    if option is None:
        load_all()  # the parallel executor's and the passes' options register when the package is loaded
        option = _OPTIONS.get(name)
    if option is None:
        raise unknown_name(
            "config option",
            name,
            sorted(_OPTIONS),
            "(register it with register_config_option)",
            "list_configs()",
            UnknownConfigOptionError,
        )
    return option


def list_configs() -> dict[str, dict[str, Any]]:
    """Every registered option, sorted by key: ``{key: {"type": ..., "default": ..., "doc": ...}}``."""
    load_all()
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(_OPTIONS):
        option = _OPTIONS[name]
        entry: dict[str, Any] = {"type": option.type_name, "doc": option.doc}
        if option.has_default:
            entry["default"] = option.default
        out[name] = entry
    return out


def validate_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The validated values of ``config``, in sorted key order (so that contexts compare and print stably)."""
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise TypeError(f"PassContext: config must be a dict of config options, got {type(config).__name__}")
    out: dict[str, Any] = {}
    for key in sorted(config, key=str):
        if not isinstance(key, str):
            raise TypeError(f"PassContext: config keys must be str, got {type(key).__name__}: {key!r}")
        out[key] = get_config_option(key).validate(config[key])
    return out


class PassConfig(Mapping[str, Any]):
    """The config of a PassContext: a read-only mapping of the keys the context sets.

    ``config[key]`` returns the validated value the context sets, else the
    option's registered default; a key that is not registered raises a KeyError
    naming the closest registered keys. Iteration, ``len`` and ``in`` cover only
    the keys the context sets.
    """

    __slots__ = ("_defaults", "_values")

    def __init__(self, values: dict[str, Any], defaults: Mapping[str, Any] | None = None) -> None:
        self._values = values
        self._defaults = defaults  # registered defaults carried by a snapshot (a worker may lack the registration)

    def __getitem__(self, key: str) -> Any:
        try:
            return self._values[key]
        except KeyError:
            pass
        if self._defaults is not None and key in self._defaults:
            return self._defaults[key]
        option = get_config_option(key)
        if not option.has_default:
            raise KeyError(f"config option {key!r} is not set in this PassContext and has no default")
        return option.default

    def get(self, key: str, default: Any = None) -> Any:
        """The value the context sets, else the registered default, else ``default`` (also for unknown keys)."""
        try:
            return self[key]
        except KeyError:
            return default

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __repr__(self) -> str:
        return f"PassConfig({self._values!r})"
