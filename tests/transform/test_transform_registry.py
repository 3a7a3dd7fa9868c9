"""The pass registry: register_pass / get_pass / list_passes."""

from __future__ import annotations

import pytest

from parpass.errors import NameNotFoundError
from parpass.ir import IRModule
from parpass.transform import ModulePass, PassContext, get_pass, list_passes, module_pass, register_pass


def _factory() -> ModulePass:
    return module_pass(lambda m, c: m, opt_level=1, name="Identity")


def test_register_and_get() -> None:
    returned = register_pass("Identity")(_factory)
    assert returned is _factory
    a, b = get_pass("Identity"), get_pass("Identity")
    assert isinstance(a, ModulePass) and a.info.name == "Identity"
    assert a is not b  # a new instance each time
    assert "Identity" in list_passes() and list_passes() == sorted(list_passes())


def test_unknown_name_lists_closest() -> None:
    register_pass("FoldConstantX")(_factory)
    register_pass("FuseOps")(_factory)
    with pytest.raises(NameNotFoundError, match=r"no pass named 'FoldConstX'.*'FoldConstantX'") as info:
        get_pass("FoldConstX")
    assert isinstance(info.value, KeyError)
    assert "FuseOps" not in str(info.value)  # only the close names, not every registered one
    listing = r"list_passes\(\) \(on the command line: parpass passes\) lists them"
    with pytest.raises(NameNotFoundError, match=r"none of the \d+ registered is close; " + listing):
        get_pass("zzz")


def test_duplicates_and_bad_factories() -> None:
    register_pass("Dup")(_factory)
    register_pass("Dup")(_factory)  # the same factory again is fine

    def other() -> ModulePass:
        return _factory()

    with pytest.raises(ValueError, match="already registered"):
        register_pass("Dup")(other)
    register_pass("Dup", override=True)(other)
    with pytest.raises(TypeError, match="without arguments"):
        register_pass("Args")(lambda x: x)
    with pytest.raises(TypeError, match="non-empty str"):
        register_pass("")
    register_pass("NotAPass")(lambda: 42)
    with pytest.raises(TypeError, match="returned int, not a Pass"):
        get_pass("NotAPass")


def test_registered_pass_runs(mod: IRModule) -> None:
    @register_pass("Drop")
    def drop() -> ModulePass:
        @module_pass(opt_level=0, name="Drop")
        def run(m: IRModule, ctx: PassContext) -> IRModule:
            del m["f"]
            return m

        return run

    assert "f" not in get_pass("Drop")(mod)
