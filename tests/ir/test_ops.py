"""Tests of the op registry and the standard op set (parpass.ir.builtin_ops).

The central property: for every op, evaluating it on inputs of given types yields
values of exactly the type its type rule promises (dtype and shape), so constant
folding, the interpreter and InferType agree.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parpass.errors import NameNotFoundError
from parpass.ir import Op, get_op, list_ops, register_op
from parpass.ir import op as op_module
from parpass.ir.builtin_ops import BUILTIN_OPS, format_type, type_of_value
from parpass.ir.op import OpRegistryError
from parpass.ir.types import PrimType, TensorType, TupleType

T = TensorType
F32 = "float32"

#: (op, argument types, attrs) for every builtin op; several per op where the rules branch.
CASES: list[tuple[str, list[Any], dict[str, Any]]] = [
    ("add", [T((2, 3), F32), T((3,), F32)], {}),
    ("add", [T((4, 1), "int32"), T((1, 5), "int32")], {}),
    ("add", [PrimType("int64"), PrimType("int64")], {}),
    ("add", [PrimType(F32), T((2,), F32)], {}),
    ("subtract", [T((2, 2), "int8"), T((), "int8")], {}),
    ("multiply", [T((3,), "float64"), T((3,), "float64")], {}),
    ("divide", [T((2, 3), F32), T((2, 3), F32)], {}),
    ("divide", [T((4,), "int32"), T((4,), "int32")], {}),
    ("maximum", [T((2, 1, 3), "uint8"), T((4, 1), "uint8")], {}),
    ("minimum", [T((2,), "float16"), T((2,), "float16")], {}),
    ("power", [T((3,), F32), T((), F32)], {}),
    ("less", [T((2, 3), F32), T((3,), F32)], {}),
    ("less_equal", [T((2,), "int32"), T((2,), "int32")], {}),
    ("greater", [T((2, 3), "int64"), T((), "int64")], {}),
    ("greater_equal", [T((2,), F32), T((2,), F32)], {}),
    ("equal", [T((3,), "bool"), T((3,), "bool")], {}),
    ("not_equal", [T((1, 3), F32), T((2, 1), F32)], {}),
    ("logical_and", [T((3,), "bool"), T((3,), "bool")], {}),
    ("logical_or", [T((2, 3), "bool"), T((3,), "bool")], {}),
    ("logical_not", [T((4,), "bool")], {}),
    ("negative", [T((2, 2), "int32")], {}),
    ("abs", [T((3,), F32)], {}),
    ("relu", [T((2, 3), F32)], {}),
    ("relu", [T((5,), "int16")], {}),
    ("exp", [T((3,), "float16")], {}),
    ("log", [T((3,), F32)], {}),
    ("sqrt", [T((2, 2), "float64")], {}),
    ("tanh", [T((3,), F32)], {}),
    ("sigmoid", [T((4,), "float16")], {}),
    ("where", [T((2, 3), "bool"), T((2, 3), F32), T((3,), F32)], {}),
    ("where", [PrimType("bool"), PrimType("int32"), PrimType("int32")], {}),
    ("astype", [T((2, 3), F32)], {"dtype": "int32"}),
    ("astype", [T((3,), "int64")], {"dtype": "bool"}),
    ("matmul", [T((2, 3), F32), T((3, 4), F32)], {}),
    ("matmul", [T((5, 2, 3), "int32"), T((3, 4), "int32")], {}),
    ("matmul", [T((3,), F32), T((3, 2), F32)], {}),
    ("matmul", [T((2, 3), F32), T((3,), F32)], {}),
    ("matmul", [T((3,), F32), T((3,), F32)], {}),
    ("transpose", [T((2, 3, 4), F32)], {}),
    ("transpose", [T((2, 3, 4), F32)], {"axes": [1, 2, 0]}),
    ("transpose", [T((2, 3), F32)], {"axes": [-1, 0]}),
    ("reshape", [T((2, 3, 4), F32)], {"shape": [6, 4]}),
    ("reshape", [T((2, 3, 4), F32)], {"shape": [-1]}),
    ("reshape", [T((2, 3), "int32")], {"shape": [3, -1]}),
    ("concat", [T((2, 3), F32), T((4, 3), F32), T((1, 3), F32)], {}),
    ("concat", [T((2, 3), "int32"), T((2, 5), "int32")], {"axis": -1}),
    ("concat", [T((2,), F32)], {}),
    ("split", [T((4, 6), F32)], {"sections": 3, "axis": 1}),
    ("split", [T((5, 2), "int32")], {"sections": [1, 3]}),
    ("sum", [T((2, 3), "int32")], {}),
    ("sum", [T((2, 3, 4), F32)], {"axis": [0, 2], "keepdims": True}),
    ("mean", [T((2, 3), "float16")], {"axis": 1}),
    ("max", [T((2, 3), "uint8")], {"axis": -1}),
    ("min", [T((2, 3), F32)], {"keepdims": True}),
    ("zeros", [], {"shape": [2, 3]}),
    ("ones", [], {"shape": [4], "dtype": "int32"}),
    ("full", [], {"shape": [2, 2], "dtype": "float64", "value": 1.5}),
    ("random_uniform", [], {"shape": [3, 2], "seed": 7}),
    ("random_uniform", [], {"shape": [2], "dtype": "float16"}),
    ("print", [T((2,), F32)], {"message": "x = "}),
]


def sample(ty: Any, rng: np.random.Generator) -> Any:
    """Random values of type ``ty`` (positive where a domain needs it is the op's business, not ours)."""
    if isinstance(ty, TupleType):
        return tuple(sample(f, rng) for f in ty.fields)
    shape = tuple(ty.shape) if isinstance(ty, TensorType) else ()
    if ty.dtype == "bool":
        return rng.random(shape) < 0.5
    if ty.dtype.startswith("uint"):
        return rng.integers(0, 9, shape).astype(ty.dtype)
    if ty.dtype.startswith("int"):
        return rng.integers(-8, 9, shape).astype(ty.dtype)
    return rng.uniform(0.1, 3.0, shape).astype(ty.dtype)


def expected_value_type(ty: Any) -> Any:
    """What a runtime value of ``ty`` looks like: a PrimType is a 0-d array of its dtype."""
    if isinstance(ty, PrimType):
        return TensorType((), ty.dtype)
    if isinstance(ty, TupleType):
        return TupleType(tuple(expected_value_type(f) for f in ty.fields))
    return ty


@pytest.mark.parametrize(("name", "arg_types", "attrs"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_evaluate_matches_type_rule(name: str, arg_types: list[Any], attrs: dict[str, Any], capsys: Any) -> None:
    info = get_op(name)
    assert info.evaluate is not None and info.infer_type is not None
    ty = info.infer_type(arg_types, attrs)
    rng = np.random.default_rng(len(name))
    args = [sample(t, rng) for t in arg_types]
    before = [np.copy(a) for a in args]
    out = info.evaluate(args, attrs)
    assert type_of_value(out) == expected_value_type(ty), f"{name}: evaluated {type_of_value(out)}, typed {ty}"
    for a, b in zip(args, before, strict=True):
        np.testing.assert_array_equal(a, b)  # evaluation never changes its inputs


def test_every_builtin_op_has_a_case_and_is_registered() -> None:
    assert {c[0] for c in CASES} == set(BUILTIN_OPS)
    assert set(BUILTIN_OPS) <= set(list_ops())
    assert len(BUILTIN_OPS) == len(set(BUILTIN_OPS))


def test_purity_flags() -> None:
    stateful = {n for n in BUILTIN_OPS if not get_op(n).pure}
    assert stateful == {"random_uniform", "print"}
    assert get_op("print").stateful and not get_op("add").stateful


def ev(name: str, *args: Any, **attrs: Any) -> Any:
    return get_op(name).evaluate([np.asarray(a) if not isinstance(a, tuple) else a for a in args], attrs)  # type: ignore[misc]


def ty(name: str, *arg_types: Any, **attrs: Any) -> Any:
    return get_op(name).infer_type(list(arg_types), attrs)  # type: ignore[misc]


class TestValues:
    """Evaluation rules compute the right values, in the promised dtype (not numpy's promotion)."""

    def test_integer_divide_is_floor_division(self) -> None:
        out = ev("divide", np.array([7, -7, 5], "int32"), np.array([2, 2, 0], "int32"))
        assert out.dtype == np.int32
        assert out.tolist() == [3, -4, 0]

    def test_float_divide_by_zero_is_inf_without_warning(self) -> None:
        with np.errstate(all="raise"):
            out = ev("divide", np.array([1.0], F32), np.array([0.0], F32))
        assert np.isinf(out).all() and out.dtype == np.float32

    def test_sum_of_int32_stays_int32(self) -> None:
        out = ev("sum", np.arange(6, dtype="int32").reshape(2, 3), axis=1)
        assert out.dtype == np.int32 and out.tolist() == [3, 12]

    def test_mean_float16_stays_float16(self) -> None:
        out = ev("mean", np.ones((2, 2), "float16"))
        assert out.dtype == np.float16 and out.shape == () and float(out) == 1.0

    def test_sigmoid_relu_where(self) -> None:
        x = np.array([-2.0, 0.0, 3.0], F32)
        np.testing.assert_allclose(ev("sigmoid", x), 1 / (1 + np.exp(-x)), rtol=1e-6)
        assert ev("relu", x).tolist() == [0.0, 0.0, 3.0]
        assert ev("where", x > 0, x, np.float32(9)).tolist() == [9.0, 9.0, 3.0]

    def test_split_returns_tuple_of_arrays(self) -> None:
        parts = ev("split", np.arange(6, dtype="int64"), sections=[2, 5])
        assert isinstance(parts, tuple) and [p.tolist() for p in parts] == [[0, 1], [2, 3, 4], [5]]

    def test_concat_transpose_reshape_matmul(self) -> None:
        a = np.arange(6, dtype="int32").reshape(2, 3)
        assert ev("concat", a, a, axis=1).shape == (2, 6)
        assert ev("transpose", a).tolist() == a.T.tolist()
        assert ev("reshape", a, shape=[3, -1]).shape == (3, 2)
        out = ev("matmul", a, a.T)
        assert out.dtype == np.int32 and out.tolist() == (a @ a.T).tolist()

    def test_creation(self) -> None:
        assert ev("full", shape=[2], value=3, dtype="int8").tolist() == [3, 3]
        assert ev("zeros", shape=[1, 2]).dtype == np.float32

    def test_random_uniform_is_reproducible_by_seed(self) -> None:
        a = ev("random_uniform", shape=[4], seed=3)
        b = ev("random_uniform", shape=[4], seed=3)
        c = ev("random_uniform", shape=[4], seed=4)
        assert a.tolist() == b.tolist() != c.tolist()
        assert ((a >= 0) & (a < 1)).all()

    def test_print_prints_and_returns_its_argument(self, capsys: Any) -> None:
        x = np.array([1, 2], "int32")
        out = ev("print", x, message="value: ")
        assert out.tolist() == [1, 2] and out.dtype == np.int32
        assert capsys.readouterr().out == "value: [1 2]\n"

    def test_scalars_count_as_zero_d(self) -> None:
        assert ty("add", PrimType(F32), PrimType(F32)) == PrimType(F32)
        assert ty("add", PrimType(F32), T((2,), F32)) == T((2,), F32)
        assert ty("astype", PrimType("int32"), dtype=F32) == PrimType(F32)
        assert ev("add", np.float32(1), np.float32(2)).dtype == np.float32


@pytest.mark.parametrize(
    ("name", "arg_types", "attrs", "pattern"),
    [
        ("add", [T((2,), F32), T((2,), "int32")], {}, "same dtype.*float32, int32"),
        ("add", [T((2,), F32), T((3,), F32)], {}, "do not broadcast"),
        ("add", [T((2,), F32)], {}, "takes 2 argument"),
        ("add", [T((2,), "bool"), T((2,), "bool")], {}, "numeric"),
        ("add", [TupleType((T((2,), F32),)), T((2,), F32)], {}, "argument 0 must be a tensor or scalar"),
        ("add", [T((2,), "complex64"), T((2,), "complex64")], {}, "unsupported dtype"),
        ("exp", [T((2,), "int32")], {}, "floating-point"),
        ("add", [T((2,), F32), T((2,), F32)], {"axis": 0}, "unknown attribute.*axis"),
        ("logical_and", [T((2,), F32), T((2,), F32)], {}, "bool"),
        ("where", [T((2,), F32), T((2,), F32), T((2,), F32)], {}, "condition must be bool"),
        ("where", [T((2,), "bool"), T((2,), F32), T((2,), "int32")], {}, "same dtype"),
        ("matmul", [T((2, 3), F32), T((4, 2), F32)], {}, r"contracted dimensions differ \(3 vs 4\)"),
        ("matmul", [T((), F32), T((2,), F32)], {}, "at least 1-d"),
        ("matmul", [PrimType(F32), T((2,), F32)], {}, "must be a tensor"),
        ("transpose", [T((2, 3), F32)], {"axes": [0, 0]}, "not a permutation"),
        ("transpose", [T((2, 3), F32)], {"axes": "ab"}, "list of ints"),
        ("reshape", [T((2, 3), F32)], {"shape": [4, 2]}, "cannot reshape 6 elements"),
        ("reshape", [T((2, 3), F32)], {"shape": [-1, -1]}, "at most one -1"),
        ("reshape", [T((2, 3), F32)], {}, "missing required attribute.*shape"),
        ("concat", [], {}, "at least 1 argument"),
        ("concat", [T((2, 3), F32), T((2, 4), F32)], {}, "differ outside axis 0"),
        ("concat", [T((2,), F32), T((2,), "int32")], {}, "same dtype"),
        ("concat", [T((2,), F32)], {"axis": 1}, "axis 1 is out of range"),
        ("split", [T((5,), F32)], {"sections": 2}, "does not split into 2 equal parts"),
        ("split", [T((5,), F32)], {"sections": [3, 1]}, "not ascending"),
        ("sum", [T((2, 3), F32)], {"axis": 2}, "out of range"),
        ("sum", [T((2, 3), F32)], {"axis": [0, -2]}, "repeats an axis"),
        ("sum", [T((2, 3), F32)], {"keepdims": 1}, "keepdims"),
        ("max", [T((0, 3), F32)], {"axis": 0}, "empty axis"),
        ("mean", [T((2,), "int32")], {}, "floating-point"),
        ("astype", [T((2,), F32)], {"dtype": "float128"}, "attribute 'dtype' must be one of"),
        ("zeros", [], {"shape": [2, -1]}, "non-negative ints"),
        ("full", [], {"shape": [2]}, "missing required attribute.*value"),
        ("full", [], {"shape": [2], "value": "x"}, "'value' must be a number"),
        ("random_uniform", [], {"shape": [2], "dtype": "int32"}, "floating dtype"),
        ("random_uniform", [], {"shape": [2], "seed": -1}, "seed"),
        ("print", [T((2,), F32)], {"message": 3}, "message"),
    ],
)
def test_type_errors_name_op_and_arguments(
    name: str, arg_types: list[Any], attrs: dict[str, Any], pattern: str
) -> None:
    with pytest.raises(TypeError) as info:
        get_op(name).infer_type(arg_types, attrs)  # type: ignore[misc]
    message = str(info.value)
    assert message.startswith(f"op {name!r}: ")
    assert re.search(pattern, message), message
    if "argument types" in message:
        assert all(format_type(t) in message for t in arg_types)


def test_evaluate_checks_types_too() -> None:
    with pytest.raises(TypeError, match=r"'add'.*do not broadcast"):
        ev("add", np.zeros(2, F32), np.zeros(3, F32))


def test_format_type() -> None:
    assert format_type(T((2, 3), F32)) == "Tensor((2, 3), float32)"
    assert format_type(PrimType("bool")) == "Prim(bool)"
    assert format_type(TupleType((T((), "int8"), PrimType(F32)))) == "Tuple[Tensor((), int8), Prim(float32)]"


# ---------------------------------------------------------------- registry errors


@pytest.fixture
def scratch_op() -> Iterator[str]:
    """A fresh op name, removed from the registry afterwards."""
    name = "test_ops.scratch"
    op_module._REGISTRY.pop(name, None)
    yield name
    op_module._REGISTRY.pop(name, None)


def test_double_registration_is_an_error(scratch_op: str) -> None:
    first = register_op(scratch_op, num_inputs=1)
    with pytest.raises(OpRegistryError, match="already registered"):
        register_op(scratch_op, num_inputs=2)
    assert get_op(scratch_op) is first
    second = register_op(scratch_op, num_inputs=2, override=True)
    assert get_op(scratch_op) is second and second.num_inputs == 2


def test_builtin_ops_cannot_be_registered_again() -> None:
    with pytest.raises(OpRegistryError, match="'add' is already registered"):
        register_op("add", num_inputs=2)


@pytest.mark.parametrize("bad", [{"name": ""}, {"name": 3}, {"num_inputs": -1}, {"num_inputs": "2"}])
def test_bad_registration(bad: dict[str, Any], scratch_op: str) -> None:
    kwargs: dict[str, Any] = {"name": scratch_op, "num_inputs": 1, **bad}
    name = kwargs.pop("name")
    with pytest.raises(OpRegistryError):
        register_op(name, **kwargs)


@pytest.mark.parametrize(("typo", "closest"), [("ad", "add"), ("mutliply", "multiply"), ("sigmod", "sigmoid")])
def test_unknown_op_names_closest(typo: str, closest: str) -> None:
    with pytest.raises(NameNotFoundError) as info:
        get_op(typo)
    assert isinstance(info.value, KeyError)
    message = str(info.value)
    assert f"no op named {typo!r}" in message
    assert re.search(rf"(closest|known): {re.escape(repr(closest))}", message), message
    with pytest.raises(KeyError, match=re.escape(repr(closest))):
        Op.get(typo)


# ---------------------------------------------------------------- property tests

_DT = st.sampled_from(["int32", "int64", "uint8", "float16", "float32", "float64"])
_BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "less", "greater", "equal"]


@st.composite
def broadcast_pair(draw: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=0, max_size=3)))
    other = tuple(d if draw(st.booleans()) else 1 for d in shape)
    other = other[draw(st.integers(0, len(other))) :]
    return (shape, other) if draw(st.booleans()) else (other, shape)


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(_BINARY), dtype=_DT, shapes=broadcast_pair(), seed=st.integers(0, 1000))
def test_binary_ops_match_their_type_rule(name: str, dtype: str, shapes: Any, seed: int) -> None:
    types = [T(shapes[0], dtype), T(shapes[1], dtype)]
    result = ty(name, *types)
    assert result.shape == np.broadcast_shapes(*shapes)
    rng = np.random.default_rng(seed)
    out = get_op(name).evaluate([sample(t, rng) for t in types], {})  # type: ignore[misc]
    assert type_of_value(out) == result


@settings(max_examples=30, deadline=None)
@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    name=st.sampled_from(["sum", "max", "min", "mean"]),
    keepdims=st.booleans(),
    data=st.data(),
)
def test_reductions_match_their_type_rule(shape: list[int], name: str, keepdims: bool, data: Any) -> None:
    axes = data.draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)))
    t = T(tuple(shape), "float32")
    result = ty(name, t, axis=axes, keepdims=keepdims)
    out = ev(name, sample(t, np.random.default_rng(0)), axis=axes, keepdims=keepdims)
    assert type_of_value(out) == result
    assert out.shape == getattr(np, name)(np.zeros(shape), axis=axes, keepdims=keepdims).shape
