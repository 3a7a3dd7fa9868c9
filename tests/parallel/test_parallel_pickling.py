"""What parpass ships to workers besides IR: pass code keeps its file names, and msgspec Struct classes
defined in ``__main__`` (a script's config option type, say) are rebuilt from their definition."""

from __future__ import annotations

import cloudpickle
import msgspec
import pytest

from parpass.ir import IRModule
from parpass.parallel.pickling import dumps_for_workers
from parpass.transform import PassContext, function_pass, register_config_option

_SCRIPT = """\
import msgspec


class Base(msgspec.Struct, frozen=True, kw_only=True):
    level: int = 1


class Options(Base, frozen=True, kw_only=True, rename={"scale": "Scale"}):
    '''Options of a script's pass.'''

    name: str
    scale: float = 2.0
    tags: list = msgspec.field(default_factory=list)

    def scaled(self) -> float:
        return self.level * self.scale


class Tagged(msgspec.Struct, tag="t", array_like=True):
    x: int
"""


def _script() -> dict[str, object]:
    namespace: dict[str, object] = {"__name__": "__main__"}  # shipped by value, as a script's classes are
    exec(compile(_SCRIPT, "/nonexistent/script.py", "exec"), namespace)
    return namespace


def test_a_struct_class_from_main_is_rebuilt_with_its_fields_options_and_methods() -> None:
    ns = _script()
    options_type, tagged_type = ns["Options"], ns["Tagged"]
    value = options_type(name="a", level=3, tags=["x"])  # type: ignore[operator]
    copy = cloudpickle.loads(dumps_for_workers(value))
    assert type(copy) is not options_type and type(copy).__name__ == "Options"
    assert (copy.name, copy.level, copy.scale, copy.tags, copy.scaled()) == ("a", 3, 2.0, ["x"], 6.0)
    assert type(copy).__doc__ == "Options of a script's pass."
    assert msgspec.json.encode(copy) == msgspec.json.encode(value)  # rename and field order kept
    assert type(copy).__struct_config__.frozen and type(copy).__mro__[1].__name__ == "Base"
    tagged = cloudpickle.loads(dumps_for_workers(tagged_type(5)))  # type: ignore[operator]
    assert msgspec.msgpack.encode(tagged) == msgspec.msgpack.encode(tagged_type(5))  # type: ignore[operator]


def test_a_config_option_of_a_struct_type_from_main_reaches_the_workers(
    small_module: IRModule, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Such an option made every parallel pass fail ("could not run in a worker process")."""
    from parpass.transform import config as config_registry

    monkeypatch.setattr(config_registry, "_OPTIONS", dict(config_registry._OPTIONS))  # registered for this test only
    options_type = _script()["Options"]
    register_config_option("test.script_options", options_type, override=True)

    @function_pass(opt_level=0, name="ReadScriptOptions")
    def read_options(func, mod, ctx):  # type: ignore[no-untyped-def]
        return func.with_attr("scaled", ctx.config["test.script_options"].scaled())

    outputs = []
    for workers in (1, 2):
        config = {
            "test.script_options": {"name": "n", "level": 2},
            "parpass.num_workers": workers,
            "parpass.parallel": "always" if workers > 1 else "never",
        }
        with PassContext(config=config):
            out = read_options(small_module)
        assert {out[n].attrs["scaled"] for n in read_options.targets(out)} == {4.0}
        outputs.append([(n, out.encoded_function(n)) for n in out.names()])
    assert outputs[0] == outputs[1]
