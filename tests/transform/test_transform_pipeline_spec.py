"""The textual pipeline grammar: parse_pipeline, printing back (round trip), options, errors with positions."""

from __future__ import annotations

import math
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import make_module

import parpass
from parpass.ir import IRModule
from parpass.transform import (
    FunctionPass,
    ModulePass,
    Pass,
    PassContext,
    PassInfo,
    Pipeline,
    PipelineSpecError,
    Sequential,
    function_pass,
    parse_pipeline,
    pipeline_spec,
    register_pass,
)
from parpass.transform.pipeline_spec import spec_value

#: What each test pass factory was called with, in call order.
CALLS: list[tuple[str, dict[str, object]]] = []


def _tag(name: str):  # type: ignore[no-untyped-def]
    def tag(func, mod, ctx):  # type: ignore[no-untyped-def]
        return func.with_attr("trace", [*func.attrs.get("trace", []), name])

    return tag


def _simple_factory(name: str):  # type: ignore[no-untyped-def]
    def factory() -> Pass:
        CALLS.append((name, {}))
        return function_pass(_tag(name), opt_level=0, name=name)

    return factory


@pytest.fixture(autouse=True)
def passes() -> None:
    """Registers A, B, C (no options), Knob (typed options) and a few more; the conftest removes them afterwards."""
    CALLS.clear()
    for name in ("A", "B", "C"):
        register_pass(name)(_simple_factory(name))

    @register_pass("Knob")
    def knob(
        level: int = 1,
        scale: float = 1.0,
        mode: Literal["fast", "slow"] = "fast",
        label: str = "x",
        on: bool = False,
        limit: int | None = None,
    ) -> Pass:
        CALLS.append(("Knob", dict(level=level, scale=scale, mode=mode, label=label, on=on, limit=limit)))
        return function_pass(_tag(f"Knob{level}"), opt_level=0, name="Knob")

    @register_pass("Untyped")
    def untyped(count=3, anything=None):  # type: ignore[no-untyped-def]
        CALLS.append(("Untyped", dict(count=count, anything=anything)))
        return function_pass(_tag("Untyped"), opt_level=0, name="Untyped")

    @register_pass("Picky")
    def picky(level: int = 1) -> Pass:
        if level < 0:
            raise ValueError(f"level must be >= 0, got {level}")
        return function_pass(_tag("Picky"), opt_level=0, name="Picky")

    register_pass("dotted.name-1")(_simple_factory("dotted.name-1"))
    register_pass("odd name")(_simple_factory("odd name"))


def trace(mod: IRModule, name: str = "f") -> list[str]:
    return list(mod[name].attrs.get("trace", []))


def shape(p: Pass) -> object:
    """A comparable description of a pipeline: names, kinds and Sequential settings, nested."""
    if isinstance(p, Sequential):
        return ("seq", p.info.name, p.info.opt_level, p.info.traceable, [shape(q) for q in p.passes])
    return (type(p).__name__, p.info.name, p.info.opt_level)


# ---------------------------------------------------------------------------------------------------------------------
# parsing and running


def test_parse_builds_a_sequential_that_runs_the_passes_in_order() -> None:
    p = parse_pipeline("A, B,C")
    assert isinstance(p, Sequential) and isinstance(p, Pipeline)
    assert [q.info.name for q in p.passes] == ["A", "B", "C"]
    with PassContext(config={"parpass.num_workers": 1}):
        out = p(make_module())
    assert trace(out) == ["A", "B", "C"]
    assert str(p) == "A,B,C"


def test_exported_from_the_top_level_package() -> None:
    assert parpass.parse_pipeline is parse_pipeline
    assert parpass.pipeline_spec is pipeline_spec


def test_empty_spec_is_an_empty_pipeline() -> None:
    for text in ("", "   ", "\n"):
        p = parse_pipeline(text)
        assert p.passes == () and str(p) == ""
    mod = make_module()
    assert parse_pipeline("")(mod).names() == mod.names()


def test_nested_seq_with_options() -> None:
    p = parse_pipeline("A,seq{name=inner opt_level=3 traceable=true}(B,seq(C)),seq()")
    inner = p.passes[1]
    assert isinstance(inner, Sequential)
    assert (inner.info.name, inner.info.opt_level, inner.info.traceable) == ("inner", 3, True)
    assert shape(inner.passes[1]) == ("seq", "sequential", 0, False, [("FunctionPass", "C", 0)])
    assert str(p) == "A,seq{name=inner opt_level=3 traceable=true}(B,seq(C)),seq()"
    with PassContext(opt_level=3, config={"parpass.num_workers": 1}):
        assert trace(p(make_module())) == ["A", "B", "C"]
    with PassContext(opt_level=2, config={"parpass.num_workers": 1}):  # the inner Sequential is above opt_level
        assert trace(p(make_module())) == ["A"]


def test_options_reach_the_factory_as_keyword_arguments() -> None:
    p = parse_pipeline('Knob{level=3 scale=2 mode=slow label="a b" on=true limit=none}')
    assert CALLS[-1] == ("Knob", dict(level=3, scale=2, mode="slow", label="a b", on=True, limit=None))
    assert str(p) == 'Knob{level=3 scale=2 mode=slow label="a b" on=true limit=none}'
    with PassContext(config={"parpass.num_workers": 1}):
        assert trace(p(make_module())) == ["Knob3"]


def test_option_separators_dashes_and_quotes() -> None:
    parse_pipeline("Knob{ level = 4 , on=false }")
    assert CALLS[-1][1]["level"] == 4 and CALLS[-1][1]["on"] is False
    parse_pipeline("Knob{label='single \"quoted\"'}")
    assert CALLS[-1][1]["label"] == 'single "quoted"'
    parse_pipeline(r'Knob{label="tab\there"}')
    assert CALLS[-1][1]["label"] == "tab\there"
    parse_pipeline("Untyped{count=5}")
    assert CALLS[-1] == ("Untyped", {"count": 5, "anything": None})


def test_dash_in_option_names_means_underscore() -> None:
    @register_pass("Dashy")
    def dashy(max_step: int = 0) -> Pass:
        CALLS.append(("Dashy", {"max_step": max_step}))
        return function_pass(_tag("Dashy"), opt_level=0, name="Dashy")

    p = parse_pipeline("Dashy{max-step=7}")
    assert CALLS[-1] == ("Dashy", {"max_step": 7})
    assert str(p) == "Dashy{max_step=7}"


def test_words_and_literals() -> None:
    parse_pipeline("Untyped{anything=1e-3}")
    assert CALLS[-1][1]["anything"] == 0.001
    parse_pipeline("Untyped{anything=-7}")
    assert CALLS[-1][1]["anything"] == -7
    parse_pipeline("Untyped{anything=inf}")
    assert CALLS[-1][1]["anything"] == math.inf
    parse_pipeline("Untyped{anything=some/path.txt}")
    assert CALLS[-1][1]["anything"] == "some/path.txt"
    parse_pipeline('Untyped{anything="true"}')
    assert CALLS[-1][1]["anything"] == "true"


def test_dotted_and_quoted_pass_names() -> None:
    p = parse_pipeline('dotted.name-1,"odd name",A')
    assert [q.info.name for q in p.passes] == ["dotted.name-1", "odd name", "A"]
    assert str(p) == 'dotted.name-1,"odd name",A'
    assert shape(parse_pipeline(str(p))) == shape(p)


def test_a_pass_registered_as_seq_must_be_quoted() -> None:
    @register_pass("seq")
    def seq_pass() -> Pass:
        return function_pass(_tag("seq"), opt_level=0, name="seq")

    p = parse_pipeline('"seq",A')
    assert [q.info.name for q in p.passes] == ["seq", "A"]
    assert str(p) == '"seq",A'
    with pytest.raises(PipelineSpecError, match=r"expected '\(' after 'seq'"):
        parse_pipeline("seq,A")


# ---------------------------------------------------------------------------------------------------------------------
# printing


def test_pipeline_spec_of_plain_passes_and_sequentials() -> None:
    from parpass.transform import get_pass

    assert pipeline_spec(get_pass("A")) == "A"
    seq = Sequential([get_pass("A"), Sequential([get_pass("B")], name="grp", opt_level=1)])
    assert pipeline_spec(seq) == "A,seq{name=grp opt_level=1}(B)"
    named = Sequential([get_pass("C")], name="top")
    assert pipeline_spec(named) == "seq{name=top}(C)"
    assert shape(parse_pipeline(pipeline_spec(named)).passes[0]) == shape(named)


def test_a_pass_built_from_a_spec_keeps_its_options() -> None:
    p = parse_pipeline("Knob{level=5},A")
    assert pipeline_spec(p.passes[0]) == "Knob{level=5}"
    assert p.specs == ("Knob{level=5}", "A")
    assert repr(p) == "<Pipeline 'Knob{level=5},A'>"
    assert p.describe().startswith("Run Sequential pass: sequential")  # the TVM description is still there


def test_unregistered_pass_has_no_spec() -> None:
    lone = FunctionPass(lambda f, m, c: f, PassInfo(0, "Lonely"))
    with pytest.raises(ValueError, match=r"'Lonely'.*not in the pass registry"):
        pipeline_spec(lone)
    with pytest.raises(TypeError, match="expects a Pass"):
        pipeline_spec("A")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="required passes"):
        pipeline_spec(Sequential([], name="r", required=["A"]))


def test_existing_str_of_passes_is_unchanged() -> None:
    assert str(ModulePass(lambda m, c: m, PassInfo(2, "M"))) == "Run Module pass: M at the optimization level 2"
    assert "The passes will be executed are: [A]" in str(Sequential(list(parse_pipeline("A").passes), name="S"))


def test_spec_value_round_trips() -> None:
    for value in (True, False, None, 0, -3, 1.5, 1e-300, -math.inf, "word", "two words", "true", "12", "", "a=b"):
        p = parse_pipeline(f"Untyped{{anything={spec_value(value)}}}")
        got = CALLS[-1][1]["anything"]
        assert got == value and type(got) is type(value), (value, str(p))
    parse_pipeline(f"Untyped{{anything={spec_value(math.nan)}}}")
    assert math.isnan(CALLS[-1][1]["anything"])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        spec_value([1, 2])


_VALUES = st.one_of(
    st.booleans(),
    st.none(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8),
)


@st.composite
def _pipelines(draw: st.DrawFn, depth: int = 0) -> str:
    n = draw(st.integers(0 if depth else 1, 3))
    parts = []
    for _ in range(n):
        kind = draw(st.sampled_from(["A", "B", "knob", "untyped", "seq"] if depth < 3 else ["A", "knob"]))
        if kind == "knob":
            level = draw(st.integers(0, 9))
            parts.append(f"Knob{{level={level} label={spec_value(draw(st.text(max_size=5)))}}}")
        elif kind == "untyped":
            parts.append(f"Untyped{{anything={spec_value(draw(_VALUES))}}}")
        elif kind == "seq":
            opts = draw(st.sampled_from(["", "{opt_level=1}", "{name=grp}", '{name="a b" traceable=true}']))
            parts.append(f"seq{opts}({draw(_pipelines(depth + 1))})")
        else:
            parts.append(kind)
    return ",".join(parts)


@settings(max_examples=40, deadline=None)
@given(_pipelines())
def test_round_trip(text: str) -> None:
    def typed_calls() -> list[object]:
        return [(name, {k: (type(v), v) for k, v in kwargs.items()}) for name, kwargs in CALLS]

    CALLS.clear()
    p = parse_pipeline(text)
    first = typed_calls()
    printed = str(p)
    CALLS.clear()
    again = parse_pipeline(printed)
    assert typed_calls() == first  # the same factories got the same option values, of the same types
    assert shape(again) == shape(p)
    assert str(again) == printed  # the printed form is a fixed point


# ---------------------------------------------------------------------------------------------------------------------
# errors


def _error(text: str) -> PipelineSpecError:
    with pytest.raises(PipelineSpecError) as info:
        parse_pipeline(text)
    err = info.value
    assert isinstance(err, ValueError) and isinstance(err, parpass.errors.ParpassError)
    return err


def _caret_column(err: PipelineSpecError) -> int:
    spec_line, caret_line = str(err).split("\n")[1:3]
    assert spec_line == "  " + err.source_line
    return caret_line.index("^") - 2 + 1


def test_unknown_pass_names_the_closest_and_points_at_it() -> None:
    err = _error("A, Knb{level=1}")
    assert err.column == 4 and _caret_column(err) == 4
    assert "unknown pass 'Knb'" in str(err) and "'Knob'" in str(err)
    assert str(err).startswith("pipeline spec, column 4: unknown pass 'Knb'; ")


def test_unknown_option_names_the_closest() -> None:
    err = _error("Knob{levl=2}")
    assert err.column == 6 and _caret_column(err) == 6
    assert "pass 'Knob' has no option 'levl'; closest: 'level'" in err.reason
    assert "options: level, scale, mode, label, on, limit" in err.reason


def test_wrong_option_types() -> None:
    err = _error("A,Knob{level=true}")
    assert err.column == 14 and "option 'level' of pass 'Knob' expects int, got bool true" in err.reason
    assert "expects Literal" in _error("Knob{mode=medium}").reason
    assert "expects float" in _error('Knob{scale="2"}').reason
    assert "expects str" in _error("Knob{label=3}").reason
    assert "expects int, got float" in _error("Untyped{count=2.5}").reason  # unannotated: the default's type
    assert "takes no options" in _error("A{x=1}").reason


def test_factory_errors_become_spec_errors() -> None:
    err = _error("A,Picky{level=-1}")
    assert err.column == 3
    assert "pass 'Picky' rejected its options: ValueError: level must be >= 0, got -1" in err.reason
    assert isinstance(err.__cause__, ValueError)


def test_factory_errors_point_at_the_option_they_name() -> None:
    """A factory taking **kwargs checks its own options; the caret goes under the option its error names."""

    @register_pass("Loose")
    def loose(**options: object) -> Pass:
        for key, value in options.items():
            if key not in ("depth", "step"):
                raise KeyError(f"no field {key!r}; closest: 'step'")
            if not isinstance(value, int):
                raise TypeError(f"field {key!r} expects int, got {value!r}")
        return function_pass(_tag("Loose"), opt_level=0, name="Loose")

    err = _error("A,Loose{step=4 stpe=16}")  # unknown: at the key, not at 'step' named as a suggestion
    assert err.column == 16 and _caret_column(err) == 16
    err = _error("Loose{depth=2 step=x}")  # bad value: at the value
    assert err.column == 20 and "field 'step' expects int" in err.reason
    assert _error("Loose{step=4,what=1}").column == 14


@pytest.mark.parametrize(
    ("text", "column", "reason"),
    [
        ("A,", 3, "expected a pass name after ','"),
        (",A", 1, "expected a pass name or 'seq(', found ','"),
        ("A,,B", 3, "expected a pass name after ','"),
        ("A B", 3, "expected ',' or the end of the pipeline, found 'B'"),
        ("A)", 2, "unmatched ')'"),
        ("seq(A,seq(B", 7, "missing ')' to close this 'seq('"),
        ("seq(A,)", 7, "expected a pass name after ','"),
        ("Knob{level=1", 5, "missing '}' to close the options opened here"),
        ("Knob{level}", 11, "expected '=' after option 'level'"),
        ("Knob{level=}", 12, "expected a value for option 'level'"),
        ("Knob{level=1 level=2}", 14, "option 'level' given twice"),
        ("Knob{,}", 6, "expected an option (key=value) after '{'"),
        ("Knob{3=1}", 6, "expected an option name or '}'"),
        ('Knob{label="abc}', 12, "unterminated string"),
        ('Knob{label="\\q"}', 13, "bad string literal"),
        ("seq{names=x}(A)", 5, "'seq' has no option 'names'; closest: 'name'"),
        ("seq{opt_level=x}(A)", 15, "option 'opt_level' of 'seq' expects int, got str x"),
        ("seq{opt_level=-1}(A)", 1, "must be >= 0"),
        ("'A", 1, "unterminated string"),
    ],
)
def test_syntax_errors_point_at_the_problem(text: str, column: int, reason: str) -> None:
    err = _error(text)
    assert reason in err.reason, err
    assert err.column == column, err
    assert _caret_column(err) == column


def test_multi_line_spec_reports_line_and_column() -> None:
    err = _error("A,\n  B,\n  Nope")
    assert (err.line, err.column) == (3, 3)
    assert str(err).startswith("pipeline spec, line 3, column 3: unknown pass 'Nope'")
    assert str(err).split("\n")[1] == "    Nope"


def test_deep_nesting_does_not_recurse() -> None:
    depth = 1000
    p = parse_pipeline("seq(" * depth + "A" + ")" * depth)
    inner = p
    for _ in range(depth + 1):  # the top-level pipeline, then each seq
        inner = inner.passes[0]  # type: ignore[assignment]
    assert inner.info.name == "A"


def test_non_string_input() -> None:
    with pytest.raises(TypeError, match="expects a str"):
        parse_pipeline(["A"])  # type: ignore[arg-type]
