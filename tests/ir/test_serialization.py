"""Serialization of IR: bare function bytes, enveloped modules and functions, files, malformed input."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import parpass.ir
from parpass.errors import IRError, IRFormatError, ReadOnlyModuleError
from parpass.ir import GlobalVar, IRModule, Op, relax, serialization, tir
from parpass.ir.serialization import (
    FORMAT_VERSION,
    FORMATS,
    IRFileNotFoundError,
    decode_function,
    encode_function,
    from_bytes,
    from_json,
    load,
    module_pieces,
    register_format,
    save,
    to_bytes,
    to_json,
)
from parpass.ir.structural import assert_structural_equal, structural_equal, structural_hash
from parpass.ir.types import PrimType, TensorType, TupleType
from parpass.testing import random_module

T = TensorType((2, 3), "float32")


# ---------------------------------------------------------------------------------------------------------------------
# hand-built IR


def dataflow_function() -> relax.Function:
    """``main(x, c) = (relax.add(x, const), if c: ... else: ...)`` with types, attrs and a call of ``helper``."""
    x, c, y, z, t, u, w = (relax.Var(i, n) for i, n in enumerate("xcyztuw"))
    cond_then = relax.SeqExpr((relax.Binding(u, relax.Call(Op("relu"), (y,))),), u)
    cond_else = relax.SeqExpr((), y)
    return relax.Function(
        (relax.Param(x, T), relax.Param(c, PrimType("bool"))),
        relax.SeqExpr(
            (
                relax.Binding(y, relax.Call(Op("add"), (x, relax.Constant.from_value([1.5, 2.0, 3.0], "float32"))), T),
                relax.Binding(z, relax.If(c, cond_then, cond_else), T),
                relax.Binding(t, relax.Tuple((y, z))),
                relax.Binding(w, relax.Call(GlobalVar("helper"), (relax.TupleGetItem(t, 1),), {"inline": True})),
            ),
            w,
        ),
        ret_type=TupleType((T,)),
        attrs={"global_symbol": "main", "opt_level": 2, "tags": ["a", "b"], "scale": 0.5},
    )


def prim_function() -> tir.PrimFunc:
    """``helper(A, B, n)``: a loop nest with a let, an allocation, a condition and vector ops."""
    n = tir.Var(0, "n")
    A = tir.Buffer(1, "A", "float32", (tir.IntImm("int32", 16), n))
    B = tir.Buffer(2, "B", "float32", (tir.IntImm("int32", 16), n), (n, tir.IntImm("int32", 1)))
    i, j, k = tir.Var(3, "i"), tir.Var(4, "j"), tir.Var(5, "k")
    tmp = tir.Buffer(6, "tmp", "float32", (tir.IntImm("int32", 4),))
    body = tir.For(
        i,
        tir.IntImm("int32", 0),
        tir.IntImm("int32", 16),
        tir.ForKind.PARALLEL,
        tir.SeqStmt(
            (
                tir.LetStmt(k, i * 2 + 1, B.store((i, k % n), A[i, k % n] * 2.0)),
                tir.For(
                    j,
                    tir.IntImm("int32", 0),
                    n,
                    tir.ForKind.SERIAL,
                    tir.IfThenElse(
                        tir.lt(j, n),
                        B.store((i, j), tir.Select(tir.gt(j, 3), A[i, j], tir.FloatImm("float32", -0.0))),
                        tir.Evaluate(tir.Call("int32", "noop", (j,))),
                    ),
                    {"pragma": "x"},
                ),
                tir.Allocate(
                    tmp,
                    tmp.store(
                        tir.Ramp(tir.IntImm("int32", 0), tir.IntImm("int32", 1), 4),
                        tir.Broadcast(tir.Cast("float32", i), 4),
                    ),
                ),
            )
        ),
    )
    return tir.PrimFunc((A, B, n), body, attrs={"global_symbol": "helper"})


def hand_module() -> IRModule:
    return IRModule({"main": dataflow_function(), "helper": prim_function()}, attrs={"target": "llvm", "n": 3})


def deep_prim_function(depth: int) -> tir.PrimFunc:
    i = tir.Var(0, "i")
    expr: Any = i
    for step in range(depth):
        expr = tir.Add(expr, tir.IntImm("int32", step))
    return tir.PrimFunc((i,), tir.Evaluate(expr))


def many_bindings_function(count: int) -> relax.Function:
    x = relax.Var(0, "x")
    bindings = []
    prev = x
    for index in range(1, count + 1):
        var = relax.Var(index, f"v{index}")
        bindings.append(relax.Binding(var, relax.Call(Op("add"), (prev, x))))
        prev = var
    return relax.Function((relax.Param(x, T),), relax.SeqExpr(tuple(bindings), prev))


# ---------------------------------------------------------------------------------------------------------------------
# round trips


def test_import_locations() -> None:
    assert parpass.ir.to_bytes is to_bytes
    assert parpass.ir.from_bytes is from_bytes
    assert parpass.ir.save is save
    assert parpass.ir.load is load


def test_encode_decode_function_round_trip() -> None:
    for func in (dataflow_function(), prim_function()):
        data = encode_function(func)
        back = decode_function(data)
        assert back == func
        assert type(back) is type(func)
        assert encode_function(back) == data


def test_decode_function_rejects_other_bytes() -> None:
    with pytest.raises(IRFormatError, match="truncated"):
        decode_function(encode_function(prim_function())[:-5])
    with pytest.raises(IRFormatError, match="unknown node tag 'Nope'"):
        decode_function(msgspec.msgpack.encode(["Nope", 1]))


def test_validated_round_trip_keeps_decoded_functions_and_bytes() -> None:
    mod = hand_module()
    data = to_bytes(mod)
    back = from_bytes(data)
    assert isinstance(back, IRModule)
    assert back.is_decoded("main") and back.is_decoded("helper")  # validation decoded them once; kept
    assert to_bytes(back) == data
    assert_structural_equal(back, mod)


def test_module_round_trip_is_lazy_and_byte_identical() -> None:
    mod = hand_module()
    data = to_bytes(mod)
    back = from_bytes(data, validate=False)
    assert isinstance(back, IRModule)
    assert back.names() == ["main", "helper"]
    assert dict(back.attrs) == {"target": "llvm", "n": 3}
    assert not back.is_decoded("main") and not back.is_decoded("helper")
    assert back.held_function("main") is None and back.cached_size("main")
    assert to_bytes(back) == data  # re-encoding reuses the held bytes
    assert_structural_equal(back, mod)
    assert back["main"] == mod["main"] and back["helper"] == mod["helper"]
    assert back.is_decoded("main")
    assert back.held_function("main") is back["main"]
    assert back.cached_size("main") == len(back.encoded_function("main"))
    built = IRModule({"main": mod["main"]})
    assert built.held_function("main") is mod["main"] and built.cached_size("main") is None  # held decoded only
    with pytest.raises(KeyError, match="nope"):
        built.held_function("nope")
    assert to_bytes(back) == data  # and still after decoding


def test_heads_and_set_encoded_functions() -> None:
    mod = hand_module()
    assert [(name, kind) for name, kind, _ in mod.heads()] == [("main", relax.Function), ("helper", tir.PrimFunc)]
    helper = mod["helper"].with_attr("SkipOptimization", True)
    new = mod.copy()
    # helper: new bytes whose head is given; main: new bytes (the same function) whose head is the old module's
    new.set_encoded_functions(
        [
            ("main", mod.encoded_function("main"), b"d" * 16, "here", None),
            ("helper", encode_function(helper), None, None, (tir.PrimFunc, {"SkipOptimization": True})),
        ],
        same_head_as=mod,
    )
    assert not new.is_decoded("main") and not new.is_decoded("helper")
    assert new.kind_and_attrs("helper") == (tir.PrimFunc, {"SkipOptimization": True})
    assert new.kind_and_attrs("main") == (relax.Function, mod["main"].attrs)
    assert not new.is_decoded("helper") and not new.is_decoded("main")  # heads read without decoding
    entries = {name: (digest, location) for name, _, digest, location in new.encoded_entries()}
    assert entries == {"main": (b"d" * 16, "here"), "helper": (None, None)}
    assert new["helper"] == helper and mod["helper"] is not helper  # the original is untouched
    with pytest.raises(TypeError, match="function names are str"):
        new.set_encoded_functions([(GlobalVar("main"), b"", None, None, None)])  # type: ignore[list-item]
    with pytest.raises(ReadOnlyModuleError):
        mod.read_only_view().set_encoded_functions([])


def test_module_encoding_embeds_cached_function_bytes() -> None:
    mod = hand_module()
    cached = mod.encoded_function("helper")
    assert cached in to_bytes(mod)
    assert mod.encoded_function("helper") is cached  # not encoded again


def test_function_round_trip() -> None:
    func = dataflow_function()
    data = to_bytes(func)
    back = from_bytes(data)
    assert isinstance(back, relax.Function)
    assert back == func
    assert to_bytes(back) == data


def test_envelope_layout() -> None:
    mod = hand_module()
    env = msgspec.msgpack.decode(to_bytes(mod))
    assert env[:4] == ["parpass", FORMAT_VERSION, "module", {"target": "llvm", "n": 3}]
    assert [name for name, _ in env[4]] == ["main", "helper"]
    assert msgspec.msgpack.decode(to_bytes(prim_function()))[:3] == ["parpass", FORMAT_VERSION, "function"]


def test_encoding_is_deterministic() -> None:
    assert to_bytes(hand_module()) == to_bytes(hand_module())
    assert to_json(hand_module()) == to_json(hand_module())


def test_empty_module_round_trip() -> None:
    back = from_bytes(to_bytes(IRModule()))
    assert isinstance(back, IRModule) and len(back) == 0 and dict(back.attrs) == {}


def test_json_round_trip() -> None:
    mod = hand_module()
    text = to_json(mod)
    assert text.startswith(b'["parpass",1,"module"')
    back = from_json(text)
    assert isinstance(back, IRModule)
    assert to_bytes(back) == to_bytes(mod)
    assert from_json(text.decode()) is not None  # str input works too
    func = from_json(to_json(prim_function()))
    assert func == prim_function()


def test_json_refuses_values_it_cannot_carry() -> None:
    func = prim_function()
    nan_func = tir.PrimFunc(func.params, tir.Evaluate(tir.FloatImm("float32", float("nan"))))
    with pytest.raises(ValueError, match="nan"):
        to_json(nan_func)
    with pytest.raises(ValueError, match="bytes attribute"):
        to_json(IRModule({"f": func}, attrs={"blob": b"\x00"}))
    with pytest.raises(ValueError, match="inf"):
        to_json(func.with_attr("limit", float("inf")))
    # msgpack carries them
    back = from_bytes(to_bytes(nan_func))
    assert structural_equal(back, nan_func)


def test_unsupported_attribute_values_are_named() -> None:
    # refused when the node or module is built (issue 11), so nothing unencodable reaches the encoder
    with pytest.raises(TypeError, match="attribute 'bad': a value of type complex"):
        prim_function().with_attr("bad", 1 + 2j)
    with pytest.raises(TypeError, match="module attribute 'bad': a value of type object"):
        IRModule({"f": prim_function()}, attrs={"bad": object()})
    with pytest.raises(TypeError, match="IRModule or a function"):
        to_bytes(tir.IntImm("int32", 1))  # type: ignore[arg-type]


@pytest.mark.parametrize("depth", [5000, 20000])
def test_deep_ir_round_trip(depth: int, tmp_path: Path) -> None:
    limit = sys.getrecursionlimit()
    func = deep_prim_function(depth)
    data = encode_function(func)
    back = decode_function(data)
    assert encode_function(back) == data
    assert structural_equal(back, func)
    mod = IRModule({"deep": func})
    assert to_bytes(from_bytes(to_bytes(mod))) == to_bytes(mod)
    save(mod, tmp_path / "deep.json")
    assert to_bytes(load(tmp_path / "deep.json")) == to_bytes(mod)
    assert sys.getrecursionlimit() == limit


def test_deep_ir_in_another_thread() -> None:
    """Threads other than the main one have stacks of unknown size: deep IR goes through a helper thread."""
    func = deep_prim_function(5000)
    results: list[bytes] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            data = encode_function(func)
            results.append(encode_function(decode_function(data)))
            results.append(data)
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    assert not errors
    assert results[0] == results[1] == encode_function(func)


def test_deep_dataflow_round_trip() -> None:
    x = relax.Var(0, "x")
    expr: Any = x
    for _ in range(5000):
        expr = relax.Tuple((expr,))
    func = relax.Function((relax.Param(x, T),), relax.SeqExpr((), expr))
    back = from_bytes(to_bytes(func))
    assert structural_equal(back, func)


@pytest.mark.scale
def test_many_bindings_round_trip() -> None:
    func = many_bindings_function(100_000)
    data = to_bytes(IRModule({"big": func}))
    back = from_bytes(data)
    assert isinstance(back, IRModule)
    assert to_bytes(back) == data
    assert len(back["big"].body.bindings) == 100_000


def _buffers_by_id(func: tir.PrimFunc) -> dict[int, list[tir.Buffer]]:
    """Every Buffer object of ``func`` (parameters, loads, stores, allocations), grouped by buffer id."""
    found: dict[int, dict[int, tir.Buffer]] = {}
    stack: list[Any] = [func]
    while stack:
        node = stack.pop()
        if isinstance(node, tir.Buffer):
            found.setdefault(node.vid, {})[id(node)] = node
        stack.extend(node.children())
    return {vid: list(objs.values()) for vid, objs in found.items()}


@pytest.mark.parametrize("how", ["decode_function", "from_bytes", "from_json"])
def test_decoded_functions_share_each_buffer_like_built_ones(how: str) -> None:
    built = prim_function()
    assert {vid: len(objs) for vid, objs in _buffers_by_id(built).items()} == {1: 1, 2: 1, 6: 1}
    if how == "decode_function":
        back = decode_function(encode_function(built))
    else:
        data = to_bytes(built) if how == "from_bytes" else to_json(built)
        back = from_bytes(data) if how == "from_bytes" else from_json(data)
    assert isinstance(back, tir.PrimFunc)
    # msgspec alone gives every load and store its own Buffer; decoding gives back one per buffer,
    # the parameter's own object included
    assert {vid: len(objs) for vid, objs in _buffers_by_id(back).items()} == {1: 1, 2: 1, 6: 1}
    assert back.params[0] is back.body.body.seq[0].body.value.a.buffer
    assert encode_function(back) == encode_function(built)


def test_decoding_shares_only_equal_buffers() -> None:
    """Two different buffers under one id (ill-formed, but decodable) stay two objects."""
    a = tir.Buffer(1, "A", "float32", (tir.IntImm("int32", 4),))
    other = tir.Buffer(1, "A", "float32", (tir.IntImm("int32", 8),))
    i = tir.Var(0, "i")
    func = tir.PrimFunc((a, i), tir.SeqStmt((a.store(i, 1.0), other.store(i, a[i]), a.store(i, other[i]))))
    back = decode_function(encode_function(func))
    assert isinstance(back, tir.PrimFunc)
    first, second, third = back.body.seq
    assert first.buffer is third.buffer is second.value.buffer is back.params[0]
    assert second.buffer is third.value.buffer
    assert second.buffer is not first.buffer and second.buffer == other
    assert tir.buffer_sharing.table is None  # nothing left behind for nodes built later
    assert tir.BufferLoad(a, (i,)).buffer is a


def test_generated_module_round_trip() -> None:
    mod = random_module(num_functions=12, num_prim_funcs=6, size=12, seed=5)
    data = to_bytes(mod)
    back = from_bytes(data)
    assert structural_equal(back, mod)
    assert structural_hash(back) == structural_hash(mod)
    assert to_bytes(back) == data


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    num_functions=st.integers(0, 6),
    num_prim_funcs=st.integers(0, 4),
    size=st.integers(1, 24),
)
def test_round_trip_property(seed: int, num_functions: int, num_prim_funcs: int, size: int) -> None:
    mod = random_module(num_functions=num_functions, num_prim_funcs=num_prim_funcs, size=size, seed=seed)
    data = to_bytes(mod)
    back = from_bytes(data)
    assert isinstance(back, IRModule)
    assert structural_equal(back, mod)
    assert to_bytes(back) == data
    for name in back.names():  # every function decoded, encoded again: the same bytes
        assert encode_function(back[name]) == mod.encoded_function(name)
    json_back = from_json(to_json(mod))
    assert to_bytes(json_back) == data


# ---------------------------------------------------------------------------------------------------------------------
# files


@pytest.mark.parametrize("ext", [".msgpack", ".mpk", ".bin", ".json", ".JSON", ".MsgPack"])
def test_save_load(tmp_path: Path, ext: str) -> None:
    mod = hand_module()
    path = tmp_path / f"model{ext}"
    save(mod, path)
    back = load(str(path))
    assert isinstance(back, IRModule)
    assert to_bytes(back) == to_bytes(mod)
    assert sorted(os.listdir(tmp_path)) == [path.name]  # no temporary file left behind


def test_save_load_function(tmp_path: Path) -> None:
    func = prim_function()
    for name in ("f.msgpack", "f.json"):
        save(func, tmp_path / name)
        assert load(tmp_path / name) == func


def test_msgpack_file_is_to_bytes(tmp_path: Path) -> None:
    mod = hand_module()
    save(mod, tmp_path / "m.msgpack")
    assert (tmp_path / "m.msgpack").read_bytes() == to_bytes(mod)
    save(mod, tmp_path / "m.json")
    assert (tmp_path / "m.json").read_bytes() == to_json(mod)


def _envelope_as_msgspec_writes_it(mod: IRModule) -> bytes:
    """The module's bytes, the whole envelope encoded by msgspec in one call (each function's bytes as Raw)."""
    funcs = [[name, msgspec.Raw(bytes(mod.encoded_buffer(name)))] for name in mod.names()]
    return msgspec.msgpack.encode(["parpass", FORMAT_VERSION, "module", dict(mod.attrs), funcs])


# 15 and 16 functions: msgpack's short array header and its 16-bit one; 65,536: its 32-bit one
@pytest.mark.parametrize("count", [0, 1, 15, 16, 65_536])
def test_module_pieces_join_into_the_envelope(count: int) -> None:
    body = encode_function(prim_function())
    mod = IRModule(attrs={"target": "llvm"})
    mod.set_encoded_functions_in_order([f"f{i}" for i in range(count)], [body] * count)
    expected = _envelope_as_msgspec_writes_it(mod)
    assert b"".join(module_pieces(mod)) == expected
    assert to_bytes(mod) == expected


def test_saving_leaves_views_uncopied(tmp_path: Path) -> None:
    mod = hand_module()
    held = {name: mod.encoded_function(name) for name in mod.names()}
    whole = memoryview(b"".join(held.values()))  # as a worker's store file, mapped: one buffer
    sizes = [len(data) for data in held.values()]
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    views = mod.copy()
    names = views.names()
    heads = [views.kind_and_attrs(name) for name in names]
    unknown = [None] * len(names)  # digests and locations
    views.set_encoded_regions(names, [whole] * len(names), starts, sizes, unknown, unknown, heads)
    save(views, tmp_path / "m.msgpack")
    assert (tmp_path / "m.msgpack").read_bytes() == to_bytes(mod)
    assert all(isinstance(views.encoded_buffer(name), memoryview) for name in names)  # still the buffer's


def test_unsupported_extension(tmp_path: Path) -> None:
    with pytest.raises(IRFormatError, match=r"unsupported file format.*'\.docx'.*\.json.*\.msgpack.*\.txt"):
        save(hand_module(), tmp_path / "m.docx")  # .txt is the text format, as .ppir
    with pytest.raises(IRFormatError, match="no extension"):
        load(tmp_path / "model")
    assert os.listdir(tmp_path) == []
    with pytest.raises(TypeError, match="IRModule or a function"):
        save("not ir", tmp_path / "m.msgpack")  # type: ignore[arg-type]


def test_save_is_atomic_when_writing_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "m.msgpack"
    save(hand_module(), path)
    before = path.read_bytes()

    def broken_replace(src: Any, dst: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        save(IRModule({"other": prim_function()}), path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["m.msgpack"]


def test_save_into_a_missing_directory_names_the_target(tmp_path: Path) -> None:
    target = tmp_path / "no_such_dir" / "m.msgpack"
    with pytest.raises(FileNotFoundError) as info:
        save(hand_module(), target)
    assert str(target) in str(info.value) and ".tmp" not in str(info.value)


def test_save_json_error_leaves_old_file(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    save(hand_module(), path)
    before = path.read_bytes()
    with pytest.raises(ValueError, match="nan"):
        save(prim_function().with_attr("x", float("nan")), path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["m.json"]


def test_register_format_hook(tmp_path: Path) -> None:
    def writer(obj: Any) -> bytes:
        return b"TXT" + to_bytes(obj)

    def reader(data: bytes, source: str) -> Any:
        if not data.startswith(b"TXT"):
            raise IRFormatError(f"{source}: no TXT header")
        return from_bytes(data[3:], source=source)

    register_format(".ppirtest", writer, reader)
    try:
        with pytest.raises(ValueError, match="already registered"):
            register_format(".ppirtest", writer, reader)
        with pytest.raises(ValueError, match="starts with"):
            register_format("ppir", writer, reader)
        save(hand_module(), tmp_path / "m.ppirtest")
        assert to_bytes(load(tmp_path / "m.ppirtest")) == to_bytes(hand_module())
    finally:
        del FORMATS[".ppirtest"]


# ---------------------------------------------------------------------------------------------------------------------
# malformed input: every kind gives IRFormatError naming the file and the problem


def _envelope() -> list[Any]:
    return msgspec.msgpack.decode(to_bytes(hand_module()))


def _with_function(env: list[Any], index: int, tree: Any) -> bytes:
    env[4][index][1] = tree
    return msgspec.msgpack.encode(env)


def _write(tmp_path: Path, data: bytes, name: str = "bad.msgpack") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _load_error(path: Path) -> str:
    with pytest.raises(IRFormatError) as info:
        load(path)
    message = str(info.value)
    assert str(path) in message
    assert not isinstance(info.value, msgspec.MsgspecError)
    assert info.value.__cause__ is None or isinstance(info.value.__cause__, (msgspec.MsgspecError, OSError, IRError))
    return message


@pytest.mark.parametrize("cut", [1, 5, 9, 20, 100, -40, -1])
def test_truncated(tmp_path: Path, cut: int) -> None:
    data = to_bytes(hand_module())
    message = _load_error(_write(tmp_path, data[:cut]))
    assert "truncated" in message


def test_truncated_json(tmp_path: Path) -> None:
    data = to_json(hand_module())
    for cut in (3, 30, len(data) - 1):
        message = _load_error(_write(tmp_path, data[:cut], "bad.json"))
        assert "truncated" in message


def test_empty_file(tmp_path: Path) -> None:
    for name in ("empty.msgpack", "empty.json"):
        assert "empty" in _load_error(_write(tmp_path, b"", name))


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.msgpack"
    with pytest.raises(IRFormatError, match=r"absent\.msgpack: no such file") as info:
        load(path)
    assert isinstance(info.value, FileNotFoundError)
    assert isinstance(info.value, IRFileNotFoundError)


def test_directory_is_not_a_file(tmp_path: Path) -> None:
    (tmp_path / "dir.msgpack").mkdir()
    with pytest.raises(IRFormatError, match=r"dir\.msgpack: cannot read"):
        load(tmp_path / "dir.msgpack")


def test_flipped_magic(tmp_path: Path) -> None:
    data = to_bytes(hand_module()).replace(b"parpass", b"parposs", 1)
    message = _load_error(_write(tmp_path, data))
    assert "not parpass IR" in message


def test_not_msgpack_at_all(tmp_path: Path) -> None:
    assert "not parpass IR" in _load_error(_write(tmp_path, b"\x89PNG\r\n\x1a\n" + bytes(100)))
    assert "not parpass IR" in _load_error(_write(tmp_path, msgspec.msgpack.encode({"a": 1})))
    assert "not parpass IR" in _load_error(_write(tmp_path, b"hello", "bad.json"))


def test_format_mixup_hints(tmp_path: Path) -> None:
    assert "looks like JSON" in _load_error(_write(tmp_path, to_json(hand_module())))
    assert "looks like msgpack" in _load_error(_write(tmp_path, to_bytes(hand_module()), "bad.json"))


def test_trailing_garbage(tmp_path: Path) -> None:
    message = _load_error(_write(tmp_path, to_bytes(hand_module()) + b"\x00"))
    assert "trailing" in message


@pytest.mark.parametrize("version", [2, 0, 99])
def test_unsupported_version(tmp_path: Path, version: int) -> None:
    env = _envelope()
    env[1] = version
    message = _load_error(_write(tmp_path, msgspec.msgpack.encode(env)))
    assert f"unsupported format version {version}" in message
    assert "reads version(s) 1" in message


def test_version_of_wrong_type(tmp_path: Path) -> None:
    env = _envelope()
    env[1] = "1"
    assert "format version must be an integer" in _load_error(_write(tmp_path, msgspec.msgpack.encode(env)))


def test_unknown_payload_kind_and_bad_envelope(tmp_path: Path) -> None:
    env = _envelope()
    env[2] = "package"
    assert "unknown payload kind 'package'" in _load_error(_write(tmp_path, msgspec.msgpack.encode(env)))
    env = _envelope()
    env.append(1)
    assert "5 elements, found 6" in _load_error(_write(tmp_path, msgspec.msgpack.encode(env)))


def test_unknown_node_tag(tmp_path: Path) -> None:
    env = _envelope()
    main = env[4][0][1]
    main[2][1][0][2][0] = "Cal"  # body.bindings[0].value: a Call
    message = _load_error(_write(tmp_path, msgspec.msgpack.encode(env)))
    assert "@main" in message
    assert "unknown node tag 'Cal'" in message
    assert "body.bindings[0].value" in message
    assert "'Call'" in message  # closest known tag


def test_abstract_base_tags_are_unknown_and_never_suggested(tmp_path: Path) -> None:
    env = _envelope()
    env[4][1][1][0] = "BaseFunc"  # the tag of an abstract base class, never written by to_bytes
    message = _load_error(_write(tmp_path, msgspec.msgpack.encode(env)))
    assert "unknown node tag 'BaseFunc'" in message
    env = _envelope()
    env[4][0][1][2][1][0][2][0] = "tir._Binar"
    message = _load_error(_write(tmp_path, msgspec.msgpack.encode(env)))
    for abstract in ("'BaseFunc'", "'Node'", "'tir._Binary'", "'tir._Compare'", "'tir.PrimExprBase'", "'tir._TirNode'"):
        assert abstract not in message


def test_unknown_function_tag(tmp_path: Path) -> None:
    env = _envelope()
    env[4][1][1][0] = "PrimFun"
    message = _load_error(_write(tmp_path, msgspec.msgpack.encode(env)))
    assert "@helper" in message and "unknown node tag 'PrimFun'" in message


def test_node_in_the_wrong_place(tmp_path: Path) -> None:
    env = _envelope()
    env[4][0][1][2][1][0][2][0] = "tir.Add"  # a loop-level node where a dataflow expression belongs
    message = _load_error(_write(tmp_path, msgspec.msgpack.encode(env)))
    assert "node 'tir.Add' is not allowed at body.bindings[0].value" in message


def test_wrong_field_type(tmp_path: Path) -> None:
    env = _envelope()
    env[4][0][1][1][0][1][1] = "0"  # params[0].var.vid as a string
    message = _load_error(_write(tmp_path, msgspec.msgpack.encode(env)))
    assert "@main" in message
    assert "wrong field type at params[0].var.vid (Var.vid)" in message
    assert "Expected `int`, got `str`" in message
    assert "($[4][0][1][1][0][1][1])" in message  # the place in the whole file, as msgspec writes paths


def test_wrong_field_type_in_loop_level_function(tmp_path: Path) -> None:
    env = _envelope()
    helper = env[4][1][1]
    helper[2][4] = "fast"  # body.kind: not a ForKind
    message = _load_error(_write(tmp_path, msgspec.msgpack.encode(env)))
    assert "@helper" in message and "body.kind" in message


def test_wrong_field_type_json(tmp_path: Path) -> None:
    text = to_json(hand_module()).replace(b'["Var",0,"x"]', b'["Var","zero","x"]', 1)
    message = _load_error(_write(tmp_path, text, "bad.json"))
    assert "@main" in message and "params[0].var.vid" in message


def test_bad_module_attrs_and_names(tmp_path: Path) -> None:
    env = _envelope()
    env[3] = [1, 2]
    assert "module attrs" in _load_error(_write(tmp_path, msgspec.msgpack.encode(env)))
    env = _envelope()
    env[4][1][0] = 7
    message = _load_error(_write(tmp_path, msgspec.msgpack.encode(env)))
    assert "entry #1 (its name)" in message


def test_duplicate_function_name(tmp_path: Path) -> None:
    env = _envelope()
    env[4][1][0] = "main"
    message = _load_error(_write(tmp_path, msgspec.msgpack.encode(env)))
    assert "duplicate function name 'main' (entries #0 and #1)" in message
    text = to_json(hand_module()).replace(b'"helper",["PrimFunc"', b'"main",["PrimFunc"')
    assert "duplicate function name 'main'" in _load_error(_write(tmp_path, text, "bad.json"))


def test_duplicate_function_name_without_validation() -> None:
    env = _envelope()
    env[4][1][0] = "main"
    with pytest.raises(IRFormatError, match=r"duplicate function name 'main' \(entries #0 and #1\)"):
        from_bytes(msgspec.msgpack.encode(env), validate=False)


def test_set_encoded_functions_in_order_is_set_encoded_function_for_each() -> None:
    mod = hand_module()
    main, helper = mod.encoded_function("main"), mod.encoded_function("helper")
    one_by_one = IRModule()
    one_by_one.set_encoded_function("helper", helper)
    one_by_one.set_encoded_function("main", main, mod["main"])
    at_once = IRModule()
    at_once.set_encoded_functions_in_order(["helper", "main"], [helper, main], [None, mod["main"]])
    assert at_once.names() == one_by_one.names() == ["helper", "main"]
    assert at_once.is_decoded("main") and not at_once.is_decoded("helper")
    assert at_once["main"] is mod["main"] and at_once["helper"] == mod["helper"]
    assert to_bytes(at_once) == to_bytes(one_by_one)
    # a name already in the module keeps its place and takes the new bytes, as set_encoded_function does
    at_once.set_encoded_functions_in_order(["main", "extra"], [helper, main])
    assert at_once.names() == ["helper", "main", "extra"]
    assert at_once["main"] == mod["helper"] and not at_once.is_decoded("extra")
    with pytest.raises(TypeError, match="function names are str, got GlobalVar"):
        at_once.set_encoded_functions_in_order([GlobalVar("g")], [main])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="differ in length"):
        at_once.set_encoded_functions_in_order(["a", "b"], [main])
    assert at_once.names() == ["helper", "main", "extra"]  # nothing set by a refused call
    with pytest.raises(ReadOnlyModuleError):
        mod.read_only_view().set_encoded_functions_in_order([], [])


def test_a_module_read_in_one_pass_is_the_one_read_in_two() -> None:
    """The one-pass reading of a module envelope gives what the general path gives, and leaves every other
    envelope (a function, a malformed one) to it."""
    mod = random_module(num_functions=6, seed=3)
    data = to_bytes(mod)
    buf = memoryview(data)
    fast = serialization._module_envelope(buf, serialization._MSGPACK, "m", validate=False)
    assert fast is not None
    items = serialization._envelope_items(buf, serialization._MSGPACK, "m")
    entries = serialization._function_entries(serialization._MSGPACK, items[4], "m")
    assert [(name, bytes(raw)) for name, raw, _ in fast[2]] == [(name, bytes(raw)) for name, raw in entries]
    assert fast[1] == dict(mod.attrs)
    function = to_bytes(mod[mod.names()[0]])
    assert serialization._module_envelope(memoryview(function), serialization._MSGPACK, "f", False) is None
    env = _envelope()
    env[4][1][0] = 7
    bad = memoryview(msgspec.msgpack.encode(env))
    assert serialization._module_envelope(bad, serialization._MSGPACK, "m", False) is None


def test_from_bytes_names_the_source() -> None:
    with pytest.raises(IRFormatError, match=r"^<msgpack bytes>: empty"):
        from_bytes(b"")
    with pytest.raises(IRFormatError, match=r"^model\.bin: empty"):
        from_bytes(b"", source="model.bin")
    with pytest.raises(TypeError, match="expected bytes"):
        from_bytes("text")  # type: ignore[arg-type]


def test_validation_catches_a_bad_last_function() -> None:
    env = _envelope()
    env[4][1][1][2][0] = "tir.Fro"
    data = msgspec.msgpack.encode(env)
    with pytest.raises(IRFormatError, match=r"@helper: unknown node tag 'tir\.Fro'"):
        from_bytes(data)
    # without validation only the framing is checked, and the bad function fails on first access
    mod = from_bytes(data, validate=False)
    assert isinstance(mod, IRModule)
    assert mod["main"] == dataflow_function()
    with pytest.raises(IRFormatError, match=r"unknown node tag 'tir\.Fro'"):
        mod["helper"]


def test_corrupt_bytes_never_escape_as_other_errors() -> None:
    """Every single-byte corruption of a small module is rejected with IRFormatError or still is valid IR."""
    data = to_bytes(IRModule({"helper": prim_function()}))
    outcomes = {"rejected": 0, "accepted": 0}
    for pos in range(0, len(data), 3):
        bad = bytearray(data)
        bad[pos] ^= 0x5A
        try:
            back = from_bytes(bytes(bad))
        except IRFormatError:
            outcomes["rejected"] += 1
            continue
        # what loads is fully valid IR: every function decodes and re-encodes
        assert isinstance(back, IRModule)
        for name in back.names():
            encode_function(back[name])
        outcomes["accepted"] += 1
    assert outcomes["rejected"] > 0


def test_too_deep_for_anything_is_a_clear_error() -> None:
    from parpass.ir import serialization

    func = deep_prim_function(3000)
    old, old_limit = serialization._MAX_LEVELS, sys.getrecursionlimit()
    serialization._MAX_LEVELS = 1000
    sys.setrecursionlimit(1000)  # as in a fresh interpreter, whatever other tests in this process set
    try:
        with pytest.raises(IRError, match="cannot be serialized"):
            encode_function(func)
    finally:
        serialization._MAX_LEVELS = old
        sys.setrecursionlimit(old_limit)


def test_hash_and_bytes_stable_across_processes() -> None:
    """Another interpreter (other str hash seed) writes the same bytes and computes the same hash."""
    mod = random_module(num_functions=6, num_prim_funcs=3, size=10, seed=11)
    code = (
        "from parpass.testing import random_module\n"
        "from parpass.ir.serialization import to_bytes\n"
        "from parpass.ir.structural import structural_hash\n"
        "m = random_module(num_functions=6, num_prim_funcs=3, size=10, seed=11)\n"
        "import hashlib, sys\n"
        "sys.stdout.write(hashlib.sha256(to_bytes(m)).hexdigest() + ' ' + str(structural_hash(m)))\n"
    )
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    import hashlib

    assert out.split() == [hashlib.sha256(to_bytes(mod)).hexdigest(), str(structural_hash(mod))]


def test_node_attributes_are_read_only_however_the_node_was_made() -> None:
    import copy
    import pickle

    from parpass.ir import relax, tir

    mod = random_module(num_functions=6, num_prim_funcs=2, seed=4)
    decoded = from_bytes(to_bytes(mod))
    assert isinstance(decoded, IRModule)
    call = relax.Call(relax.Op("add"), (), {"mode": "fast"})
    loop = tir.For(
        tir.Var(0, "i", "int32"),
        tir.IntImm("int32", 0),
        tir.IntImm("int32", 4),
        tir.ForKind.SERIAL,
        tir.Evaluate(tir.IntImm("int32", 0)),
        {"pragma": 1},
    )
    maps = [mod[n].attrs for n in mod.names()] + [decoded[n].attrs for n in decoded.names()]
    maps += [call.attrs, loop.annotations, mod[mod.names()[0]].with_attr("k", 1).attrs]
    for attrs in maps:
        for change in (
            lambda a: a.__setitem__("k", 2),
            lambda a: a.__delitem__(next(iter(a), "k")),
            lambda a: a.update(k=2),
            lambda a: a.pop("k", None),
            lambda a: a.setdefault("k", 2),
            lambda a: a.clear(),
        ):
            with pytest.raises(TypeError, match="read-only; use with_attr"):
                change(attrs)
    # the caller's function is unchanged, and changed copies are what with_attr/without_attr are for
    name = mod.names()[0]
    before = mod.encoded_function(name)
    changed = mod[name].with_attr("k", 1).without_attr("global_symbol")
    assert "k" in changed.attrs and "global_symbol" not in changed.attrs
    assert mod.encoded_function(name) == before and "k" not in mod[name].attrs
    # still plain data for everything that reads it
    assert dict(changed.attrs) == changed.attrs and {**call.attrs} == {"mode": "fast"}
    assert pickle.loads(pickle.dumps(call)) == call and copy.deepcopy(loop) == loop


def test_a_head_read_from_bytes_or_given_refuses_changes_as_the_function_s_attributes_do() -> None:
    """However a module learned a function's head (read from its bytes, or given with them), the attributes
    it hands out are frozen like the function's own: changing them raises instead of changing which passes
    visit the function while the function keeps its attributes."""
    mod = hand_module()
    helper = mod["helper"].with_attr("level", [1, 2])
    held = mod.copy()
    held.set_encoded_function("helper", encode_function(helper))  # the head is read from the bytes
    given = mod.copy()
    given.set_encoded_functions([("helper", encode_function(helper), None, None, (tir.PrimFunc, dict(helper.attrs)))])
    for module in (held, given):
        kind, attrs = module.kind_and_attrs("helper")
        assert (kind, attrs) == (tir.PrimFunc, helper.attrs) and type(attrs) is type(helper.attrs)
        with pytest.raises(TypeError):
            attrs["SkipOptimization"] = True  # type: ignore[index]
        with pytest.raises((TypeError, AttributeError)):
            attrs["level"].append(3)  # type: ignore[union-attr]
        assert module.kind_and_attrs("helper") == (tir.PrimFunc, helper.attrs)
        assert not module.is_decoded("helper")


def test_bytes_whose_attributes_hold_no_attribute_value_fail_naming_the_function() -> None:
    """An attribute value no function may hold (a msgpack extension) is found by reading the head, and
    reported as decoding the whole function reports it."""
    mod = hand_module()
    raw = msgspec.msgpack.decode(encode_function(mod["helper"].with_attr("x", 1)))
    attrs = raw[-1]
    assert attrs == {"x": 1} or attrs.get("x") == 1
    attrs["x"] = msgspec.msgpack.Ext(1, b"?")
    broken = mod.copy()
    broken.set_encoded_function("helper", msgspec.msgpack.encode(raw))
    with pytest.raises(IRFormatError, match="helper"):
        broken.kind_and_attrs("helper")
