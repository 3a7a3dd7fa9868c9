"""Call-graph edges: called_names on decoded functions and on their bytes, and IRModule.called_names."""

from __future__ import annotations

import threading

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parpass.errors import IRFormatError
from parpass.ir import GlobalVar, IRModule, Op, relax
from parpass.ir.calls import _MIRRORS, called_names, called_names_encoded
from parpass.ir.serialization import encode_function
from parpass.ir.types import TensorType
from parpass.testing import random_module

T = TensorType((2,), "float32")


def var(vid: int, name: str = "v") -> relax.Var:
    return relax.Var(vid, name)


def seq(*values: relax.Expr, body: relax.Expr | None = None, first_vid: int = 100) -> relax.SeqExpr:
    bindings = tuple(relax.Binding(var(first_vid + i), value, T) for i, value in enumerate(values))
    return relax.SeqExpr(bindings, body if body is not None else bindings[-1].var)


def everywhere() -> relax.Function:
    """A GlobalVar in every place an expression can hold one, with look-alikes where none is."""
    trap = b"\xa9GlobalVar\xa4trap" * 2  # a GlobalVar's bytes, inside a constant's data
    cond = relax.Call(GlobalVar("in_cond"), (var(1),))
    then_branch = seq(relax.Call(Op("add"), (var(1), GlobalVar("in_then"))), first_vid=200)
    else_branch = seq(relax.Tuple((GlobalVar("in_else"),)), body=GlobalVar("else_body"), first_vid=300)
    body = seq(
        relax.Call(GlobalVar("op"), (var(1), relax.Call(GlobalVar("nested_arg"), ()))),
        relax.Call(Op("add"), (GlobalVar("arg"), var(1)), attrs={"list": ["GlobalVar", "attr_trap"]}),
        relax.Tuple((var(1), GlobalVar("tuple_field"), relax.Constant(trap, "uint8", (len(trap),)))),
        relax.TupleGetItem(relax.Tuple((GlobalVar("getitem"),)), 0),
        relax.If(cond, then_branch, else_branch),
        relax.Call(GlobalVar("op"), ()),  # a second reference: listed once, at its first
        var(7, "GlobalVar"),
        body=GlobalVar("returned"),
    )
    params = (relax.Param(var(1, "x"), T),)
    return relax.Function(params, body, None, attrs={"global_symbol": "main", "trap": ["GlobalVar", "fn_attr"]})


EVERYWHERE = [
    "op",
    "nested_arg",
    "arg",
    "tuple_field",
    "getitem",
    "in_cond",
    "in_then",
    "in_else",
    "else_body",
    "returned",
]


def test_every_place_a_call_can_be_in_first_reference_order() -> None:
    func = everywhere()
    assert called_names(func) == EVERYWHERE
    assert called_names_encoded(encode_function(func)) == EVERYWHERE
    assert called_names_encoded(memoryview(b"pad" + encode_function(func))[3:]) == EVERYWHERE


def test_no_call_no_names() -> None:
    func = relax.Function((relax.Param(var(1), T),), seq(relax.Call(Op("negative"), (var(1),))))
    assert called_names(func) == [] == called_names_encoded(encode_function(func))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 100_000))
def test_bytes_and_decoded_functions_give_the_same_list(seed: int) -> None:
    mod = random_module(num_functions=12, num_prim_funcs=2, size=12, seed=seed)
    for name in mod.names():
        func = mod[name]
        if isinstance(func, relax.Function):
            assert called_names_encoded(encode_function(func)) == called_names(func), name


def _real_classes() -> dict[str, type[msgspec.Struct]]:
    from parpass.ir.serialization import _node_tags

    return dict(_node_tags())


def test_the_mirror_reads_every_field_that_can_hold_a_call() -> None:
    """Each mirror is a real node's leading fields by name, and leaves out only fields that hold no call."""
    real = _real_classes()
    holds_no_call = {("Binding", "var"), ("Binding", "ty"), ("Function", "params"), ("Function", "ret_type")}
    for mirror in _MIRRORS:
        tag = mirror.__struct_config__.tag
        assert isinstance(tag, str) and tag in real, mirror
        node = real[tag]
        fields = mirror.__struct_fields__
        assert node.__struct_fields__[: len(fields)] == fields, tag
        children = {f for f in node.__child_fields__ if (tag, f) not in holds_no_call}  # type: ignore[attr-defined]
        assert children <= set(fields), f"{tag}: the mirror skips {sorted(children - set(fields))}"
    expression_tags = {cls.__struct_config__.tag for cls in relax.Expr.__args__}  # type: ignore[attr-defined]
    assert expression_tags <= {m.__struct_config__.tag for m in _MIRRORS}


def test_the_module_reads_calls_from_bytes_without_decoding() -> None:
    source = IRModule({"main": everywhere()})
    lazy = IRModule()
    lazy.set_encoded_function("main", source.encoded_function("main"))
    lazy.set_encoded_function("view", memoryview(source.encoded_function("main")))
    assert lazy.called_names("main") == EVERYWHERE == lazy.called_names("view")
    assert not lazy.is_decoded("main") and not lazy.is_decoded("view")
    assert source.called_names("main") == EVERYWHERE  # a decoded one is walked


def test_a_prim_func_calls_nothing() -> None:
    mod = random_module(num_functions=2, num_prim_funcs=2, size=6, seed=1)
    from parpass.ir import PrimFunc

    prims = [name for name in mod.names() if isinstance(mod[name], PrimFunc)]
    assert prims and all(mod.called_names(name) == [] for name in prims)


def test_bytes_the_mirror_cannot_read_are_decoded_whole_which_says_what_is_wrong() -> None:
    bogus = msgspec.msgpack.encode(
        ["Function", [], ["SeqExpr", [["Binding", ["Var", 1, "x"], ["Bogus", 1]]], ["GlobalVar", "g"]], None, {}]
    )
    with pytest.raises(msgspec.DecodeError):
        called_names_encoded(bogus)
    mod = IRModule()
    mod.set_encoded_function("broken", bogus)
    with pytest.raises(IRFormatError, match="Bogus"):
        mod.called_names("broken")
    not_utf8 = msgspec.msgpack.encode(
        ["Function", [], ["SeqExpr", [["Binding", ["Var", 1, "x"], ["GlobalVar", "gX"]]], ["Var", 1, "x"]], None, {}]
    ).replace(b"gX", b"g\xff")
    with pytest.raises(UnicodeDecodeError):
        called_names_encoded(not_utf8)
    mod.set_encoded_function("not_utf8", not_utf8)
    with pytest.raises(IRFormatError, match=r"(?i)utf-8"):
        mod.called_names("not_utf8")


def test_a_body_nested_past_the_recursion_limit_is_read_too() -> None:
    value: relax.Expr = GlobalVar("deep")
    for _ in range(3000):
        value = relax.Tuple((value,))
    func = relax.Function((relax.Param(var(1), T),), seq(value))
    mod = IRModule()
    mod.set_encoded_function("deep", encode_function(func))
    assert mod.called_names("deep") == ["deep"] == called_names(func)
    assert mod.kind_and_attrs("deep")[0] is relax.Function
    assert not mod.is_decoded("deep")
    out: list[list[str]] = []  # in another thread, whose stack is not the main thread's
    reader = threading.Thread(target=lambda: out.append(called_names_encoded(encode_function(func))))
    reader.start()
    reader.join()
    assert out == [["deep"]]


def test_threads_reading_at_once_keep_their_own_names() -> None:
    data = [encode_function(everywhere())] * 200
    mod = random_module(num_functions=20, num_prim_funcs=0, size=12, seed=5)
    others = [(encode_function(mod[n]), called_names(mod[n])) for n in mod.names()]  # type: ignore[arg-type]
    errors: list[str] = []

    def read(items: list[tuple[bytes, list[str]]]) -> None:
        for blob, expected in items * 20:
            if called_names_encoded(blob) != expected:
                errors.append(repr(expected))

    threads = [
        threading.Thread(target=read, args=([(d, EVERYWHERE) for d in data],)),
        threading.Thread(target=read, args=(others,)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
