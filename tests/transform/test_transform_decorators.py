"""module_pass / function_pass / prim_func_pass: both forms, any callable, decoration-time errors."""

from __future__ import annotations

import functools
import pickle

import cloudpickle
import pytest

from parpass.ir import IRModule, relax, tir
from parpass.transform import (
    FunctionPass,
    ModulePass,
    PassContext,
    PrimFuncPass,
    function_pass,
    module_pass,
    prim_func_pass,
)


@function_pass(opt_level=1)
class AddAttr:
    """Sets one attribute on every Function."""

    def __init__(self, key: str, value: int = 1) -> None:
        self.key = key
        self.value = value

    def transform_function(self, func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
        return func.with_attr(self.key, self.value)

    def describe(self) -> str:
        return f"{self.key}={self.value}"


@module_pass(opt_level=2, name="Renamed")
class DropFirst:
    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        del mod[mod.names()[0]]
        return mod


def test_function_form(mod: IRModule) -> None:
    @function_pass(opt_level=1)
    def tag(func: relax.Function, m: IRModule, ctx: PassContext) -> relax.Function:
        return func.with_attr("tag", 1)

    assert isinstance(tag, FunctionPass)
    assert tag.info.name == "tag" and tag.info.opt_level == 1 and tag.info.required == ()
    assert tag(mod)["f"].attrs == {"tag": 1}

    def raw(func: tir.PrimFunc, m: IRModule, ctx: PassContext) -> tir.PrimFunc:
        return func.with_attr("p", 1)

    p = prim_func_pass(raw, opt_level=0, name="P", required=["A"], traceable=True)
    assert isinstance(p, PrimFuncPass)
    assert (p.info.name, p.info.required, p.info.traceable) == ("P", ("A",), True)
    assert p(mod)["k"].attrs == {"p": 1}
    m = module_pass(lambda m, c: m, opt_level=0)
    assert isinstance(m, ModulePass) and m.info.name == "<lambda>"


def test_class_form(mod: IRModule) -> None:
    p = AddAttr("k", value=5)
    assert isinstance(p, FunctionPass)
    assert p.info.name == "AddAttr" and p.info.opt_level == 1
    assert p.key == "k" and p.describe() == "k=5"  # attribute lookups fall through to the user object
    assert p(mod)["f"].attrs == {"k": 5}
    assert AddAttr.__name__ == "AddAttr" and AddAttr.__doc__ == "Sets one attribute on every Function."
    with pytest.raises(AttributeError, match="missing"):
        p.missing  # noqa: B018
    d = DropFirst()
    assert isinstance(d, ModulePass) and d.info.name == "Renamed" and d.info.opt_level == 2
    assert d(mod).names() == mod.names()[1:]


def test_class_form_instances_pickle(mod: IRModule) -> None:
    p = pickle.loads(pickle.dumps(AddAttr("z", 3)))
    assert isinstance(p, AddAttr) and p.key == "z" and p.info.name == "AddAttr"
    assert p(mod)["g"].attrs == {"z": 3}
    d = pickle.loads(pickle.dumps(DropFirst()))
    assert d(mod).names() == mod.names()[1:]


def test_any_callable(mod: IRModule) -> None:
    def set_attr(key: str, func: relax.Function, m: IRModule, ctx: PassContext) -> relax.Function:
        return func.with_attr(key, 1)

    part = function_pass(functools.partial(set_attr, "from_partial"), opt_level=0)
    assert part.info.name == "set_attr"
    assert part(mod)["f"].attrs == {"from_partial": 1}

    class Callable:
        def __call__(self, func: relax.Function, m: IRModule, ctx: PassContext) -> relax.Function:
            return func.with_attr("obj", 1)

    obj = function_pass(Callable(), opt_level=0)
    assert obj.info.name == "Callable" and obj(mod)["g"].attrs == {"obj": 1}

    lam = function_pass(lambda f, m, c: f.with_attr("lam", 1), opt_level=0, name="Lam")
    assert lam.info.name == "Lam" and lam(mod)["f"].attrs == {"lam": 1}
    again = cloudpickle.loads(cloudpickle.dumps(lam))  # lambdas travel with cloudpickle
    assert again(mod)["f"].attrs == {"lam": 1}

    class Holder:
        def method(self, func: relax.Function, m: IRModule, ctx: PassContext) -> relax.Function:
            return func

    bound = function_pass(Holder().method, opt_level=0)
    assert bound.info.name == "method"
    assert function_pass(opt_level=3, name="Deferred")(lambda f, m, c: f).info.opt_level == 3


def test_missing_opt_level() -> None:
    with pytest.raises(ValueError, match="opt_level"):
        function_pass(lambda f, m, c: f)
    with pytest.raises(ValueError, match="opt_level"):
        module_pass(name="X")  # even before the function is given
    with pytest.raises(TypeError, match="opt_level must be an int"):
        prim_func_pass(lambda f, m, c: f, opt_level="1")  # type: ignore[arg-type]


@pytest.mark.parametrize("required", ["A", {"A"}, ["A", 1], 3])
def test_bad_required(required: object) -> None:
    with pytest.raises(TypeError, match="required"):
        function_pass(lambda f, m, c: f, opt_level=0, required=required)  # type: ignore[arg-type]


def test_wrong_arity_at_decoration_time() -> None:
    with pytest.raises(TypeError, match=r"3 positional arguments \(func, mod, ctx\).*\(f, m\)"):
        function_pass(lambda f, m: f, opt_level=0)
    with pytest.raises(TypeError, match=r"2 positional arguments \(mod, ctx\)"):
        module_pass(lambda m: m, opt_level=0)
    with pytest.raises(TypeError, match="positional arguments"):
        prim_func_pass(lambda f, m, c, extra: f, opt_level=0)
    with pytest.raises(TypeError, match="positional arguments"):
        function_pass(functools.partial(lambda a, f, m, c: f, 1, 2), opt_level=0)
    # *args and defaults are fine
    function_pass(lambda *args: args[0], opt_level=0)
    module_pass(lambda m, c, extra=None: m, opt_level=0)

    with pytest.raises(TypeError, match=r"transform_function.*\(self, func, mod, ctx\)"):

        @function_pass(opt_level=0)
        class TooFew:
            def transform_function(self, func: relax.Function) -> relax.Function:
                return func

    with pytest.raises(TypeError, match="must define transform_module"):

        @module_pass(opt_level=0)
        class Nothing:
            def transform_function(self, func: object, mod: object, ctx: object) -> object:
                return func


def test_not_callable_and_bad_name() -> None:
    with pytest.raises(TypeError, match="decorates a function or a class"):
        function_pass(42, opt_level=0)
    with pytest.raises(TypeError, match="name must be a non-empty str"):
        function_pass(lambda f, m, c: f, opt_level=0, name=3)  # type: ignore[arg-type]


def test_class_form_wraps_user_errors_in_constructor() -> None:
    with pytest.raises(TypeError):
        AddAttr()  # type: ignore[call-arg]
