"""Passes written as frozen dataclasses: options as fields, registered once by their name."""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import ClassVar

import pytest

from parpass.ir import IRModule, PrimFunc, relax, to_bytes
from parpass.testing import random_module
from parpass.transform import (
    FunctionTransform,
    ModuleTransform,
    PassContext,
    PrimFuncTransform,
    Sequential,
    get_pass,
    parse_pipeline,
    pipeline_spec,
)
from parpass.transform.pipeline_spec import PipelineSpecError
from parpass.transform.registry import get_pass_factory


@dataclass(frozen=True)
class ScaleTag(PrimFuncTransform):
    """Tags every PrimFunc with ``factor`` times its parameter count."""

    name: ClassVar[str] = "ScaleTag"
    opt_level: ClassVar[int] = 2

    factor: int = 2
    label: str = "scaled"

    def transform_function(self, func: PrimFunc, mod: IRModule, ctx: PassContext) -> PrimFunc:
        return func.with_attr(self.label, self.factor * len(func.params))


@dataclass(frozen=True)
class CountFunctions(ModuleTransform):
    name: ClassVar[str] = "CountFunctionsAsClass"
    opt_level: ClassVar[int] = 0

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return mod.with_attr("functions", len(mod))


class _TagBase(FunctionTransform):
    """No name of its own: a base, not registered."""

    opt_level: ClassVar[int] = 0


@dataclass(frozen=True)
class TagFunctions(_TagBase):
    name: ClassVar[str] = "TagFunctions"

    def transform_function(self, func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
        return func.with_attr("tagged", True)


@pytest.fixture
def module() -> IRModule:
    return random_module(num_functions=6, num_prim_funcs=4, size=5, seed=3)


def _prims(mod: IRModule) -> list[str]:
    return [n for n in mod.names() if isinstance(mod[n], PrimFunc) and not mod[n].attrs.get("SkipOptimization")]


def test_the_instance_is_the_pass_with_its_options(module: IRModule) -> None:
    p = ScaleTag(factor=3)
    assert (p.info.name, p.info.opt_level) == ("ScaleTag", 2)
    assert p.options() == {"factor": 3, "label": "scaled"}
    assert repr(p) == "ScaleTag(factor=3, label='scaled')"
    assert p == ScaleTag(factor=3) and hash(p) == hash(ScaleTag(factor=3)) and p != ScaleTag()
    with PassContext(config={"parpass.num_workers": 1}):
        out = p(module)
    assert [out[n].attrs["scaled"] for n in _prims(module)] == [3 * len(module[n].params) for n in _prims(module)]
    with pytest.raises(AttributeError):
        p.factor = 4  # type: ignore[misc]  # frozen: assigning a field is what is tested


def test_registered_once_by_name_and_usable_in_pipeline_specs(module: IRModule) -> None:
    assert get_pass_factory("ScaleTag") is ScaleTag
    assert get_pass("ScaleTag") == ScaleTag()
    pipeline = parse_pipeline("ScaleTag{factor=5, label='k'},CountFunctionsAsClass")
    with PassContext(config={"parpass.num_workers": 1}):
        out = pipeline(module)
    assert out[_prims(module)[0]].attrs["k"] == 5 * len(module[_prims(module)[0]].params)
    assert out.attrs["functions"] == len(module)
    with pytest.raises(PipelineSpecError, match="option 'factor' of pass 'ScaleTag' expects int"):
        parse_pipeline("ScaleTag{factor='x'}")
    with pytest.raises(PipelineSpecError, match="size"):
        parse_pipeline("ScaleTag{size=1}")


def test_its_pipeline_spec_says_the_options_that_are_not_defaults() -> None:
    assert pipeline_spec(ScaleTag(factor=5)) == "ScaleTag{factor=5}"
    assert pipeline_spec(ScaleTag()) == "ScaleTag"
    assert pipeline_spec(Sequential([ScaleTag(label="k"), TagFunctions()])) == "ScaleTag{label=k},TagFunctions"
    # a single element parsed from a spec (a frozen pass cannot keep the text it was built from)
    (parsed,) = parse_pipeline("ScaleTag{factor=4, label='scaled'}").passes
    assert pipeline_spec(parsed) == "ScaleTag{factor=4}"
    assert parse_pipeline(pipeline_spec(parsed)).passes == (ScaleTag(factor=4),)


def test_a_base_without_a_name_is_not_registered() -> None:
    assert get_pass_factory("_TagBase") is None
    assert get_pass("TagFunctions").info.opt_level == 0  # inherited from the base


def test_a_sequential_applies_opt_level_to_it(module: IRModule) -> None:
    with PassContext(opt_level=1, config={"parpass.num_workers": 1}):
        out = Sequential([ScaleTag(), TagFunctions()])(module)
    assert not any("scaled" in out[n].attrs for n in _prims(module))  # opt_level 2 > 1: skipped
    assert any(out[n].attrs.get("tagged") for n in out.names())


def test_it_pickles_as_its_class_and_options(module: IRModule) -> None:
    p = ScaleTag(factor=7, label="z")
    again = pickle.loads(pickle.dumps(p))
    assert again == p and type(again) is ScaleTag
    with PassContext(config={"parpass.num_workers": 1}):
        assert to_bytes(again(module)) == to_bytes(p(module))


def test_bad_definitions_are_refused() -> None:
    with pytest.raises(TypeError, match="opt_level must be set"):

        class NoLevel(PrimFuncTransform):
            name: ClassVar[str] = "NoLevel"

            def transform_function(self, func: PrimFunc, mod: IRModule, ctx: PassContext) -> PrimFunc:
                return func

    with pytest.raises(TypeError, match="must define transform_module"):

        class NoMethod(ModuleTransform):
            name: ClassVar[str] = "NoMethod"
            opt_level: ClassVar[int] = 0

    with pytest.raises(ValueError, match="already registered"):

        @dataclass(frozen=True)
        class ScaleTagAgain(PrimFuncTransform):
            name: ClassVar[str] = "ScaleTag"
            opt_level: ClassVar[int] = 0

            def transform_function(self, func: PrimFunc, mod: IRModule, ctx: PassContext) -> PrimFunc:
                return func
