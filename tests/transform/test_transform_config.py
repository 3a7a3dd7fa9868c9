"""Config options: registration, validation with clear errors, defaults, list_configs."""

from __future__ import annotations

import dataclasses
import pickle
import re
from typing import Literal

import msgspec
import pytest

from parpass.errors import NameNotFoundError
from parpass.transform import PassConfigError, PassContext, list_configs, register_config_option


class Unroll(msgspec.Struct):
    max_depth: int = 8
    explicit: bool = False
    names: list[str] = []


@dataclasses.dataclass
class Tiling:
    tile: int = 16
    order: str = "ij"


@dataclasses.dataclass
class NeedsField:
    size: int


def test_scalar_options() -> None:
    register_config_option("test.level", int, default=3, doc="a level")
    register_config_option("test.ratio", float, default=0.5)
    register_config_option("test.flag", bool, default=False)
    register_config_option("test.mode", Literal["fast", "safe"], default="safe")
    ctx = PassContext(config={"test.level": 7, "test.ratio": 1, "test.mode": "fast"})
    assert ctx.config["test.level"] == 7
    assert ctx.config["test.ratio"] == 1.0 and isinstance(ctx.config["test.ratio"], float)
    assert ctx.config["test.flag"] is False  # registered default
    assert ctx.config["test.mode"] == "fast"
    assert set(ctx.config) == {"test.level", "test.mode", "test.ratio"}  # only the keys the context sets
    assert "test.flag" not in ctx.config
    assert ctx.config.get("test.flag", True) is False  # the registered default wins over get's


def test_unknown_key_names_closest_not_all() -> None:
    for i in range(30):
        register_config_option(f"test.filler{i:02d}", int, default=0)
    register_config_option("test.UnrollLoop", Unroll)
    with pytest.raises(NameNotFoundError) as info:
        PassContext(config={"test.UnrolLoop": {}})
    msg = str(info.value)
    assert "'test.UnrolLoop'" in msg and "closest: 'test.UnrollLoop'" in msg
    assert "test.filler" not in msg  # only the close keys, not a dump of every key
    # nothing close: say so, and where the keys are listed, rather than dump them
    with pytest.raises(NameNotFoundError) as info:
        PassContext(config={"zzz": 1})
    msg = str(info.value)
    assert re.search(r"none of the \d+ registered is close; list_configs\(\) lists them$", msg) and "test." not in msg
    # keys in one namespace are compared by their last part: the shared prefix does not make them close
    register_config_option("test.num_workers", int, default=1)
    with pytest.raises(NameNotFoundError) as info:
        PassContext(config={"test.worker": 1})
    msg = str(info.value)
    assert "closest: 'test.num_workers'" in msg and "test.filler" not in msg and "test.UnrollLoop" not in msg
    assert isinstance(info.value, KeyError)
    ctx = PassContext()
    with pytest.raises(KeyError, match=r"tir\.UnrollLoop"):
        ctx.config["test.UnrolLoop"]


@pytest.mark.parametrize(
    ("value_type", "value", "expected"),
    [(int, "3", "int"), (int, True, "int"), (int, 1.5, "int"), (bool, 1, "bool"), (str, 3, "str")],
)
def test_wrong_scalar_type(value_type: type, value: object, expected: str) -> None:
    register_config_option("test.opt", value_type)
    with pytest.raises(PassConfigError, match=rf"'test.opt' expects {expected}, got") as info:
        PassContext(config={"test.opt": value})
    assert isinstance(info.value, TypeError)


def test_struct_option_from_dict_with_defaults() -> None:
    register_config_option("test.UnrollLoop", Unroll)
    ctx = PassContext(config={"test.UnrollLoop": {"max_depth": 4}})
    value = ctx.config["test.UnrollLoop"]
    assert isinstance(value, Unroll)
    assert value == Unroll(max_depth=4, explicit=False, names=[])
    assert PassContext().config["test.UnrollLoop"] == Unroll()  # default built from field defaults
    register_config_option("test.tiling", Tiling)
    assert PassContext(config={"test.tiling": {"order": "ji"}}).config["test.tiling"] == Tiling(16, "ji")
    assert PassContext(config={"test.tiling": Tiling(8)}).config["test.tiling"] == Tiling(8, "ij")


def test_struct_field_wrong_type_is_an_error_not_a_default() -> None:
    register_config_option("test.UnrollLoop", Unroll)
    with pytest.raises(PassConfigError) as info:
        PassContext(config={"test.UnrollLoop": {"max_depth": "deep"}})
    msg = str(info.value)
    assert "'test.UnrollLoop'" in msg and "'max_depth'" in msg and "expects int" in msg
    with pytest.raises(PassConfigError, match="'names' expects list"):
        PassContext(config={"test.UnrollLoop": {"names": "a"}})
    register_config_option("test.tiling", Tiling)
    with pytest.raises(PassConfigError, match="'tile' expects int"):
        PassContext(config={"test.tiling": Tiling(tile="big")})  # type: ignore[arg-type]


def test_struct_unknown_field_names_closest() -> None:
    register_config_option("test.UnrollLoop", Unroll)
    with pytest.raises(PassConfigError) as info:
        PassContext(config={"test.UnrollLoop": {"max_dpth": 2}})
    msg = str(info.value)
    assert "'test.UnrollLoop'" in msg and "'max_dpth'" in msg and "'max_depth'" in msg
    with pytest.raises(PassConfigError, match=r"has no field 'zzz'; its fields: 'max_depth', "):
        PassContext(config={"test.UnrollLoop": {"zzz": 2}})  # nothing close: the fields, not a "closest" list


def test_struct_wrong_container_and_required_field() -> None:
    register_config_option("test.UnrollLoop", Unroll)
    with pytest.raises(PassConfigError, match="or a dict of its fields"):
        PassContext(config={"test.UnrollLoop": 3})
    register_config_option("test.needs", NeedsField)
    with pytest.raises(PassConfigError, match=r"field 'size' of .* is required"):
        PassContext(config={"test.needs": {}})
    with pytest.raises(KeyError, match="no default"):
        PassContext().config["test.needs"]
    assert PassContext(config={"test.needs": {"size": 2}}).config["test.needs"] == NeedsField(2)


def test_registration_errors_and_idempotence() -> None:
    register_config_option("test.level", int, default=3)
    register_config_option("test.level", int, default=3)  # same definition again: fine
    with pytest.raises(ValueError, match="already registered"):
        register_config_option("test.level", str, default="a")
    register_config_option("test.level", str, default="a", override=True)
    assert PassContext().config["test.level"] == "a"
    with pytest.raises(PassConfigError, match="expects int"):
        register_config_option("test.bad_default", int, default="x")
    with pytest.raises(TypeError, match="non-empty str"):
        register_config_option("", int)


def test_list_configs_sorted_with_types() -> None:
    register_config_option("test.b", int, default=1, doc="bee")
    register_config_option("test.a", Unroll)
    configs = PassContext.list_configs()
    assert configs == list_configs()
    keys = [k for k in configs if k.startswith("test.")]
    assert keys == ["test.a", "test.b"]
    assert configs["test.b"] == {"type": "int", "doc": "bee", "default": 1}
    assert configs["test.a"]["type"].endswith("Unroll")


def test_config_must_be_a_mapping_of_str() -> None:
    with pytest.raises(TypeError, match="config must be a dict"):
        PassContext(config=[("a", 1)])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="config keys must be str"):
        PassContext(config={1: 2})  # type: ignore[dict-item]


# TVM raises AttributeError for an unknown config key and for a value of the wrong type
# (apache-tvm 0.27: "Invalid config option 'x' candidates are: ..." and "Expect config x to have type
# bool, but instead get float"). parpass's own classes are also AttributeErrors, so code written for TVM
# (``except AttributeError``) still catches them, and code written for parpass (KeyError/TypeError) too.


def _raised(config: dict) -> BaseException:
    with pytest.raises(Exception) as info:
        PassContext(config=config)
    return info.value


def test_unknown_key_is_also_an_attribute_error_as_in_tvm() -> None:
    from parpass.transform import UnknownConfigOptionError

    register_config_option("test.level", int, default=3)
    err = _raised({"test.levle": 1})
    assert type(err) is UnknownConfigOptionError
    for cls in (AttributeError, KeyError, LookupError, NameNotFoundError, UnknownConfigOptionError):
        assert isinstance(err, cls), cls
    # the message reads as one sentence: not quoted as KeyError's str() would quote it
    assert str(err) == (
        "no config option named 'test.levle' (register it with register_config_option); closest: 'test.level'"
    )
    assert pickle.loads(pickle.dumps(err)).args == err.args
    for catch in (AttributeError, KeyError, NameNotFoundError):
        with pytest.raises(catch):
            PassContext(config={"test.levle": 1})
    # reading an unknown key from a context's config raises the same error
    with pytest.raises(AttributeError, match=r"no config option named 'test\.levle'"):
        PassContext().config["test.levle"]
    assert PassContext().config.get("test.levle", 5) == 5


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ({"test.opt": "3"}, r"^config option 'test.opt' expects int, got str '3'"),
        ({"test.unroll": 5}, r"expects .*Unroll \(or a dict of its fields\), got int 5$"),
        ({"test.unroll": {"max_dpth": 1}}, r"has no field 'max_dpth'; closest: 'max_depth'$"),
        ({"test.unroll": {"max_depth": "1"}}, r"field 'max_depth' expects int, got str '1'"),
    ],
)
def test_wrong_value_is_also_an_attribute_error_as_in_tvm(config: dict, match: str) -> None:
    register_config_option("test.opt", int)
    register_config_option("test.unroll", Unroll)
    err = _raised(config)
    assert type(err) is PassConfigError
    for cls in (AttributeError, TypeError, PassConfigError):
        assert isinstance(err, cls), cls
    assert re.search(match, str(err)), str(err)
    assert pickle.loads(pickle.dumps(err)).args == err.args
