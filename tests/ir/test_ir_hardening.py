"""Hardening of the IR (issue 11): values reachable from a node are immutable all the way down, and what
``load`` accepts can be written back, shipped to workers and checked."""

from __future__ import annotations

import copy
import pickle
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from parpass.errors import IRFormatError
from parpass.ir import IRModule, Op, load, save, tir
from parpass.ir.node import FrozenAttrs, FrozenList
from parpass.ir.parser import ParseError
from parpass.ir.relax import Binding, Call, Constant, Function, Param, SeqExpr, Var
from parpass.ir.serialization import decode_function, encode_function, from_bytes, from_json, to_bytes, to_json
from parpass.ir.structural import assert_structural_equal, structural_hash
from parpass.ir.types import TensorType
from parpass.ir.well_formed import well_formed
from parpass.testing import random_module
from parpass.transform import (
    PassContext,
    function_pass,
    get_function_pass_executor,
    set_function_pass_executor,
)


def _zeros_function(attrs: dict[str, Any] | None = None) -> Function:
    x = Var(0, "x")
    call = Call(Op("zeros"), (), {"shape": [2, 3], "dtype": "float32", "nested": {"k": [1, {"m": [2]}]}})
    return Function(
        (Param(Var(1, "p"), TensorType((2, 3), "float32")),),
        SeqExpr((Binding(x, call),), x),
        attrs=attrs if attrs is not None else {"global_symbol": "f", "tags": ["a", "b"]},
    )


def _the_call(func: Function) -> Call:
    value = func.bindings[0].value
    assert isinstance(value, Call)
    return value


# ---------------------------------------------------------------- item 1: nested attribute values are frozen


def _assert_frozen_all_the_way_down(call: Call, func: Function) -> None:
    shape = call.attrs["shape"]
    for mutate in (
        lambda: shape.append(99),
        lambda: shape.extend([1]),
        lambda: shape.insert(0, 1),
        lambda: shape.pop(),
        lambda: shape.remove(2),
        lambda: shape.clear(),
        lambda: shape.sort(),
        lambda: shape.reverse(),
        lambda: shape.__setitem__(0, 7),
        lambda: shape.__delitem__(0),
        lambda: shape.__iadd__([1]),
        lambda: shape.__imul__(2),
    ):
        with pytest.raises(TypeError, match="read-only"):
            mutate()
    assert shape == [2, 3]
    inner = call.attrs["nested"]
    with pytest.raises(TypeError, match="read-only"):
        inner["k"] = 1
    with pytest.raises(TypeError, match="read-only"):
        inner["k"].append(1)
    with pytest.raises(TypeError, match="read-only"):
        inner["k"][1]["m"].append(3)
    with pytest.raises(TypeError, match="read-only"):
        func.attrs["tags"].append("c")
    assert call.attrs == {"shape": [2, 3], "dtype": "float32", "nested": {"k": [1, {"m": [2]}]}}


def test_nested_attribute_values_are_read_only_when_built() -> None:
    func = _zeros_function()
    _assert_frozen_all_the_way_down(_the_call(func), func)


def test_nested_attribute_values_are_read_only_after_decoding() -> None:
    func = _zeros_function()
    for decoded in (decode_function(encode_function(func)), from_json(to_json(func))):
        assert isinstance(decoded, Function)
        _assert_frozen_all_the_way_down(_the_call(decoded), decoded)


def test_nested_attribute_values_are_read_only_after_replace_and_with_attr() -> None:
    func = _zeros_function()
    replaced = msgspec.structs.replace(_the_call(func), attrs={"shape": [4], "more": {"x": [1]}})
    with pytest.raises(TypeError, match="read-only"):
        replaced.attrs["shape"].append(5)
    with pytest.raises(TypeError, match="read-only"):
        replaced.attrs["more"]["x"].append(5)
    tagged = func.with_attr("list", [1, [2]])
    with pytest.raises(TypeError, match="read-only"):
        tagged.attrs["list"][1].append(3)
    loop = tir.For(
        tir.Var(0, "i"),
        tir.const(0),
        tir.const(4),
        tir.ForKind.SERIAL,
        tir.Evaluate(tir.const(0)),
        annotations={"pragma": ["unroll", {"n": [4]}]},
    )
    with pytest.raises(TypeError, match="read-only"):
        loop.annotations["pragma"][1]["n"].append(5)
    mod = IRModule({"f": func}, attrs={"targets": ["llvm", {"opt": [1]}]}).with_attr("more", [1])
    with pytest.raises(TypeError, match="read-only"):
        mod.attrs["targets"][1]["opt"].append(2)
    with pytest.raises(TypeError, match="read-only"):
        mod.attrs["more"].append(2)


def test_the_callers_value_is_copied_not_frozen_in_place() -> None:
    shape = [2, 3]
    call = Call(Op("zeros"), (), {"shape": shape})
    shape.append(4)  # the caller's own list stays theirs, and the node does not see the change
    assert call.attrs["shape"] == [2, 3]


def test_frozen_values_compare_encode_print_and_hash_like_plain_ones() -> None:
    func = _zeros_function()
    call = _the_call(func)
    shape = call.attrs["shape"]
    assert isinstance(shape, FrozenList) and isinstance(shape, list)
    assert shape == [2, 3] and list.__eq__([2, 3], shape) and shape != (2, 3)
    assert type(list(shape)) is list and list(shape) == [2, 3]
    assert repr(shape) == "[2, 3]" and repr(call.attrs["nested"]) == "{'k': [1, {'m': [2]}]}"
    plain = Call(Op("zeros"), (), {"shape": [2, 3], "dtype": "float32", "nested": {"k": [1, {"m": [2]}]}})
    assert call == plain
    assert msgspec.msgpack.encode(shape) == msgspec.msgpack.encode([2, 3])
    assert msgspec.json.encode(call.attrs["nested"]) == b'{"k":[1,{"m":[2]}]}'
    assert 'zeros(attrs={"shape": [2, 3]' in str(call)
    assert structural_hash(func) == structural_hash(decode_function(encode_function(func)))
    assert_structural_equal(func, decode_function(encode_function(func)))
    for clone in (copy.copy(shape), copy.deepcopy(shape), pickle.loads(pickle.dumps(shape))):
        assert clone == [2, 3] and type(clone) is FrozenList
    nested = pickle.loads(pickle.dumps(call.attrs))
    assert type(nested) is FrozenAttrs and type(nested["nested"]["k"]) is FrozenList


def test_tuples_bytearrays_and_plain_subclasses_become_what_decoding_gives() -> None:
    """A value is held as it comes back from bytes, so a serial run and a worker see the same thing."""
    call = Call(Op("zeros"), (), {"t": (1, (2, 3)), "b": bytearray(b"ab"), "e": tir.ForKind.SERIAL, "f": True})
    decoded = decode_function(encode_function(Function((), SeqExpr((Binding(Var(0, "x"), call),), Var(0, "x")))))
    again = _the_call(decoded)  # type: ignore[arg-type]
    for attrs in (call.attrs, again.attrs):
        assert attrs == {"t": [1, [2, 3]], "b": b"ab", "e": "serial", "f": True}
        assert type(attrs["t"]) is FrozenList and type(attrs["t"][1]) is FrozenList
        assert type(attrs["b"]) is bytes and type(attrs["e"]) is str and attrs["f"] is True


def test_constant_payload_is_immutable_or_reported() -> None:
    c = Constant.from_value([1, 2], "int32")
    assert type(c.data) is bytes
    with pytest.raises(ValueError, match="read-only"):
        c.numpy()[0] = 5
    mutable = Constant(bytearray(c.data), "int32", (2,))  # type: ignore[arg-type]
    problems = well_formed(Function((), SeqExpr((), mutable)), name="f")
    assert problems and "mutable payload" in problems[0] and "function 'f'" in problems[0]
    assert well_formed(Function((), SeqExpr((), c)), name="f") == []


def test_unsupported_attribute_values_are_refused_at_construction_naming_the_key() -> None:
    with pytest.raises(TypeError, match=r"attribute 'obj'.*object.*plain data"):
        Call(Op("zeros"), (), {"obj": object()})
    with pytest.raises(TypeError, match=r"attribute 'deep'\[1\]\['k'\].*plain data"):
        _zeros_function().with_attr("deep", [1, {"k": object()}])
    with pytest.raises(TypeError, match=r"attribute 'm'.*key 1 is a int, not a str"):
        Call(Op("zeros"), (), {"m": {1: 2}})


class _Mutate:
    """A pass body that edits a nested attribute value of its function in place (what must not work)."""

    def __call__(self, func: Function, mod: IRModule, ctx: PassContext) -> Function:
        for binding in func.bindings:
            value = binding.value
            if isinstance(value, Call) and "shape" in value.attrs:
                value.attrs["shape"].append(99)
        return func


@pytest.fixture
def parallel_executor() -> Iterator[None]:
    import parpass.parallel

    previous = get_function_pass_executor()
    set_function_pass_executor(parpass.parallel.default_executor)
    try:
        yield
    finally:
        set_function_pass_executor(previous)


@pytest.mark.parametrize("workers", [1, 2])
def test_in_place_edit_of_a_nested_attribute_raises_in_both_modes(parallel_executor: None, workers: int) -> None:
    mod = random_module(6, num_prim_funcs=0, size=12, seed=4)
    shapes = [
        b.value
        for _, f in mod.items()
        for b in f.bindings  # type: ignore[attr-defined]
        if isinstance(b.value, Call) and "shape" in b.value.attrs
    ]
    assert shapes, "the module has calls with a shape attribute"
    before = to_bytes(mod)
    mutate = function_pass(_Mutate(), opt_level=0, name="MutateShape")
    config = {"parpass.num_workers": workers, "parpass.parallel": "always" if workers > 1 else "never"}
    with pytest.raises(TypeError, match="read-only") as info, PassContext(config=config):
        mutate(mod)
    assert any("raised in pass 'MutateShape'" in note for note in getattr(info.value, "__notes__", []))
    assert to_bytes(mod) == before
    assert all(99 not in call.attrs["shape"] for call in shapes)


# ---------------------------------------------------------------- item 3: sets are refused


@pytest.mark.parametrize("value", [{1, 2}, frozenset({"a"}), [1, {2}], {"k": {3}}])
def test_set_attribute_values_are_refused_naming_the_key(value: object) -> None:
    with pytest.raises(TypeError, match=r"attribute 'axes'.*a set.*sorted list"):
        Call(Op("sum"), (), {"axes": value})
    with pytest.raises(TypeError, match=r"attribute 'axes'.*a set"):
        _zeros_function().with_attr("axes", value)
    with pytest.raises(TypeError, match=r"module attribute 'axes'.*a set"):
        IRModule(attrs={"axes": value})


# ---------------------------------------------------------------- byte identity


def test_encoded_bytes_are_unchanged_by_freezing() -> None:
    mod = random_module(40, seed=9)
    data = to_bytes(mod)
    fresh = from_bytes(data)
    assert isinstance(fresh, IRModule)
    rebuilt = IRModule({gv: decode_function(fresh.encoded_function(gv)) for gv in fresh})
    rebuilt = rebuilt if not mod.attrs else IRModule(dict(rebuilt.items()), attrs=dict(mod.attrs))
    for name in mod.names():
        assert encode_function(rebuilt[name]) == mod.encoded_function(name)
    assert to_json(rebuilt) == to_json(mod)


# ---------------------------------------------------------------- item 12: every malformed file is an IRFormatError


def test_invalid_utf8_in_msgpack_and_json_names_the_file_and_the_place(tmp_path: Path) -> None:
    mod = IRModule({"f": _zeros_function()})
    save(mod, tmp_path / "m.msgpack")
    data = (tmp_path / "m.msgpack").read_bytes()
    at = data.index(b"float32")
    (tmp_path / "bad.msgpack").write_bytes(data[:at] + b"\xff" + data[at + 1 :])
    with pytest.raises(IRFormatError, match=r"bad\.msgpack: @f: .*not valid UTF-8.*\$\[4\]\[0\]\[1\]") as info:
        load(tmp_path / "bad.msgpack")
    assert isinstance(info.value.__cause__, UnicodeDecodeError)
    save(mod, tmp_path / "m.json")
    text = (tmp_path / "m.json").read_bytes()
    at = text.index(b"float32")
    (tmp_path / "bad.json").write_bytes(text[:at] + b"\xc3" + text[at + 1 :])
    with pytest.raises(IRFormatError, match=r"bad\.json: @f: .*not valid UTF-8"):
        load(tmp_path / "bad.json")
    # in the envelope (a function name) too
    at = text.index(b'"f"')
    (tmp_path / "name.json").write_bytes(text[: at + 1] + b"\xff" + text[at + 2 :])
    with pytest.raises(IRFormatError, match=r"name\.json: .*not valid UTF-8"):
        load(tmp_path / "name.json")


@pytest.mark.parametrize(
    "cut", ["@f = primfunc(%bias:", "@f = primfunc(%bias", "@f = primfunc(%A: Buffer((4,), ", "@f = primfunc("]
)
def test_text_cut_inside_a_prim_func_parameter_list_is_a_parse_error(tmp_path: Path, cut: str) -> None:
    path = tmp_path / "cut.ppir"
    path.write_text(cut)
    with pytest.raises(ParseError, match=r"cut\.ppir:1:\d+: ") as info:
        load(path)
    assert info.value.line == 1


def _mutants(data: bytes, rng: random.Random, count: int) -> Iterator[bytes]:
    """Truncations and byte flips of ``data`` (deterministic for a seeded ``rng``)."""
    for _ in range(count):
        if rng.random() < 0.3:
            yield data[: rng.randrange(len(data))]
        else:
            out = bytearray(data)
            for _ in range(rng.randrange(1, 4)):
                out[rng.randrange(len(out))] = rng.randrange(256)
            yield bytes(out)


@pytest.mark.parametrize("ext", [".msgpack", ".json", ".ppir"])
def test_mutated_files_raise_only_ir_format_errors(tmp_path: Path, ext: str) -> None:
    mod = random_module(3, num_prim_funcs=2, size=6, seed=1).with_attr("note", "ünïcode")
    save(mod, tmp_path / f"good{ext}")
    data = (tmp_path / f"good{ext}").read_bytes()
    path = tmp_path / f"x{ext}"
    escaped: list[str] = []
    for mutant in _mutants(data, random.Random(11), 400):
        path.write_bytes(mutant)
        try:
            loaded = load(path)
        except IRFormatError as err:
            assert str(path) in str(err)
            continue
        except Exception as err:  # what this test is about: nothing but IRFormatError escapes
            escaped.append(f"{type(err).__name__}: {err}")
            continue
        # what loads can be written back in every format
        for other in (".msgpack", ".json", ".ppir"):
            try:
                save(loaded, tmp_path / f"back{other}")
            except ValueError as err:  # JSON cannot carry nan/inf floats: said before writing
                assert other == ".json" and "JSON" in str(err), err
    assert escaped == []


# ---------------------------------------------------------------- item 14: a wrong field type is reported as one


@pytest.mark.parametrize(
    ("old", "new", "place"),
    [
        ('["TensorType",[2,3]', '["TensorType",["2",3]', r"params\[0\]\.ty\.shape\[0\] \(TensorType\.shape\)"),
        ('["Var",0,"x"]', '["Var","0","x"]', r"body\.bindings\[0\]\.var\.vid \(Var\.vid\)"),
        ('["TensorType",[2,3]', '["TensorType",[2,[3]]', r"params\[0\]\.ty\.shape\[1\] \(TensorType\.shape\)"),
    ],
)
def test_json_string_where_an_int_belongs_is_a_wrong_field_type(tmp_path: Path, old: str, new: str, place: str) -> None:
    save(IRModule({"f": _zeros_function()}), tmp_path / "m.json")
    text = (tmp_path / "m.json").read_text()
    assert old in text
    (tmp_path / "bad.json").write_text(text.replace(old, new, 1))
    with pytest.raises(IRFormatError) as info:
        load(tmp_path / "bad.json")
    message = str(info.value)
    assert "unknown node tag" not in message and "closest known tags" not in message
    assert re.search(
        rf"bad\.json: @f: wrong field type at {place} \(\$\[4\]\[0\]\[1\]\S*\): Expected `int`", message
    ), message


def test_unknown_node_tag_is_still_reported_with_the_closest_tags(tmp_path: Path) -> None:
    save(IRModule({"f": _zeros_function()}), tmp_path / "m.json")
    text = (tmp_path / "m.json").read_text().replace('["TensorType",', '["TensorTyp",', 1)
    (tmp_path / "bad.json").write_text(text)
    with pytest.raises(IRFormatError, match=r"unknown node tag 'TensorTyp' at params\[0\]\.ty .*'TensorType'"):
        load(tmp_path / "bad.json")


# ---------------------------------------------------------------- item 13: what loads can be written back


def _big_prim_func(value: int = 2**70, name: str = "i") -> tir.PrimFunc:
    i = tir.Var(0, name, "int64")
    A = tir.Buffer(1, "A", "int64", (tir.IntImm("int32", 4),))
    return tir.PrimFunc((A, i), A.store((tir.IntImm("int32", 0),), tir.Add(i, tir.IntImm("int64", value))))


@pytest.mark.parametrize("ext", [".json", ".ppir"])
def test_integers_beyond_64_bits_are_refused_at_load(tmp_path: Path, ext: str) -> None:
    good = IRModule({"f": _big_prim_func(12345)}, attrs={"n": 9})
    save(good, tmp_path / f"m{ext}")
    text = (tmp_path / f"m{ext}").read_text()
    for old, new, place in (
        ("12345", str(2**70), r"@f: body\.value\.b\.value"),
        ("9", str(-(2**64)), r"module attrs\['n'\]"),
    ):
        assert text.count(old) == 1, (old, text)
        (tmp_path / f"bad{ext}").write_text(text.replace(old, new))
        with pytest.raises(IRFormatError, match=rf"bad\{ext}: {place}.*does not fit in 64 bits"):
            load(tmp_path / f"bad{ext}")


def test_lone_surrogates_are_refused_at_load(tmp_path: Path) -> None:
    (tmp_path / "s.ppir").write_text('@f = function(%"x\\ud800": Prim("int32")) {\n  return %"x\\ud800"\n}\n')
    with pytest.raises(IRFormatError, match=r"s\.ppir: @f: params\[0\]\.var\.name_hint: .*lone surrogate"):
        load(tmp_path / "s.ppir")
    (tmp_path / "a.ppir").write_text('module attrs {"s": "\\udc00"}\n')
    with pytest.raises(IRFormatError, match=r"a\.ppir: module attrs\['s'\]: .*lone surrogate"):
        load(tmp_path / "a.ppir")


@pytest.mark.parametrize("ext", [".msgpack", ".json", ".ppir"])
def test_what_cannot_be_read_back_is_not_written(tmp_path: Path, ext: str) -> None:
    for obj, place in (
        (IRModule({"f": _big_prim_func()}), "@f: body.value.b.value"),
        (IRModule({"f": _big_prim_func(1, "i\ud800")}), "@f: params[1].name_hint"),
        (IRModule({"f": _big_prim_func(1)}, attrs={"k": ["\udfff"]}), "module attrs['k'][0]"),
    ):
        with pytest.raises(ValueError, match="cannot write") as info:
            save(obj, tmp_path / f"out{ext}")
        assert place in str(info.value)
        assert not (tmp_path / f"out{ext}").exists()


def test_well_formed_reports_values_that_cannot_be_encoded() -> None:
    mod = IRModule({"f": _big_prim_func(), "g": _big_prim_func(1, "i\ud800")})
    problems = well_formed(mod)
    assert any("function 'f'" in p and "body.value.b.value" in p and "64 bits" in p for p in problems), problems
    assert any("function 'g'" in p and "params[1].name_hint" in p and "surrogate" in p for p in problems), problems
    assert well_formed(IRModule({"f": _big_prim_func(5)})) == []


def test_attribute_values_beyond_64_bits_or_with_lone_surrogates_are_refused_when_set() -> None:
    func = _zeros_function()
    with pytest.raises(ValueError, match=r"attribute 'n'.*does not fit in 64 bits"):
        func.with_attr("n", 2**64)
    with pytest.raises(ValueError, match=r"attribute 's'\[0\].*lone surrogate"):
        func.with_attr("s", ["\ud800"])
    with pytest.raises(ValueError, match=r"module attribute 'n'.*64 bits"):
        IRModule().with_attr("n", -(2**63) - 1)
    assert func.with_attr("n", 2**64 - 1).attrs["n"] == 2**64 - 1


# ---------------------------------------------------------------- item 16: an undefined @global is an input error

_CALLS_UNDEFINED = """@main = function(%x: Tensor((4,), "float32")) {
  %y = @helper(%x)
  %z = @missing(%y)
  return %z
}

@helper = function(%a: Tensor((4,), "float32")) -> Tensor((4,), "float32") {
  return %a
}
"""


def test_undefined_global_in_text_is_a_parse_error_at_its_first_use(tmp_path: Path) -> None:
    path = tmp_path / "m.ppir"
    path.write_text(_CALLS_UNDEFINED)
    with pytest.raises(ParseError, match=r"m\.ppir:3:8: @missing is called but not defined in the module") as info:
        load(path)
    assert "@helper" in str(info.value)  # the functions it does define are named
    defined_later = _CALLS_UNDEFINED.replace("%z = @missing(%y)", "%z = @helper(%y)")
    path.write_text(defined_later)  # a function defined after its use is fine
    assert isinstance(load(path), IRModule)


def test_parpass_opt_on_an_undefined_global_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from parpass.cli.main import main

    path = tmp_path / "m.ppir"
    path.write_text(_CALLS_UNDEFINED)
    code = main(["opt", str(path), "-o", str(tmp_path / "out.ppir")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "@missing is called but not defined" in err and "m.ppir:3:8" in err
    assert not (tmp_path / "out.ppir").exists()
