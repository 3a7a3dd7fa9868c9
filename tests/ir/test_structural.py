"""Structural equality and hashing modulo variable renaming, and the messages of assert_structural_equal."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import parpass.ir
from parpass.errors import ReadOnlyModuleError
from parpass.ir import BaseFunc, GlobalVar, IRModule, Node, Op, relax, tir
from parpass.ir.serialization import decode_function, encode_function, from_bytes, to_bytes
from parpass.ir.structural import assert_structural_equal, structural_equal, structural_hash
from parpass.ir.types import PrimType, TensorType, TupleType
from parpass.testing import random_module

T = TensorType((4,), "float32")


def add(*args: relax.Expr, **attrs: Any) -> relax.Call:
    return relax.Call(Op("add"), args, attrs)


def dataflow(
    vids: tuple[int, int, int] = (0, 1, 2),
    names: str = "xyz",
    swap: bool = False,
    dtype: str = "float32",
    attrs: dict[str, Any] | None = None,
) -> relax.Function:
    """``f(x, y) { z = add(x, y, const); return z }`` with chosen ids and names."""
    x, y, z = (relax.Var(v, n) for v, n in zip(vids, names, strict=True))
    args = (y, x) if swap else (x, y)
    value = add(*args, relax.Constant.from_value([1, 2, 3, 4], dtype))
    return relax.Function(
        (relax.Param(x, T), relax.Param(y, T)),
        relax.SeqExpr((relax.Binding(z, value, T),), z),
        attrs=attrs or {},
    )


def loop_func(i_vid: int = 0, n_vid: int = 1, a_vid: int = 2, extent: Any = None, step: float = 1.0) -> tir.PrimFunc:
    """``f(A: Buffer((n,)), n) { for i in range(n): A[i] = A[i] + step }``: the buffer shape uses a later param."""
    i, n = tir.Var(i_vid, "i"), tir.Var(n_vid, "n")
    A = tir.Buffer(a_vid, "A", "float32", (n,))
    ext = n if extent is None else extent
    return tir.PrimFunc((A, n), tir.For(i, tir.IntImm("int32", 0), ext, tir.ForKind.SERIAL, A.store(i, A[i] + step)))


def rename_all(func: Any, shift: int = 1000) -> Any:
    """``func`` with every variable and buffer given another id and name (a bijection), via its msgpack tree."""
    tree = msgspec.msgpack.decode(encode_function(func))
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            if node and node[0] in ("Var", "tir.Var", "tir.Buffer") and isinstance(node[1], int):
                node[1] = node[1] * 3 + shift
                node[2] = f"renamed_{node[2]}"
            stack.extend(node)
        elif isinstance(node, dict):
            stack.extend(node.values())
    return decode_function(msgspec.msgpack.encode(tree))


def check_equal(a: Any, b: Any, **kw: Any) -> None:
    assert structural_equal(a, b, **kw)
    assert structural_equal(b, a, **kw)
    assert structural_hash(a, **kw) == structural_hash(b, **kw)
    assert_structural_equal(a, b, **kw)


def check_differ(a: Any, b: Any, **kw: Any) -> str:
    assert not structural_equal(a, b, **kw)
    assert not structural_equal(b, a, **kw)
    assert structural_hash(a, **kw) != structural_hash(b, **kw)  # fixed inputs: a collision would be a real bug
    with pytest.raises(AssertionError) as info:
        assert_structural_equal(a, b, **kw)
    return str(info.value)


# ---------------------------------------------------------------------------------------------------------------------
# alpha-equivalence


def test_import_locations() -> None:
    assert parpass.ir.structural_equal is structural_equal
    assert parpass.ir.structural_hash is structural_hash
    assert parpass.ir.assert_structural_equal is assert_structural_equal


def test_renamed_dataflow_function_is_equal() -> None:
    a = dataflow()
    b = dataflow(vids=(10, 11, 12), names="pqr")
    assert a != b  # field-wise different
    check_equal(a, b)


def test_swapped_variable_use_differs() -> None:
    message = check_differ(dataflow(), dataflow(swap=True))
    assert message.splitlines()[0] == (
        "body.bindings[0].value.args[0]: variable x (defined at params[0].var) != y (defined at params[1].var)"
    )
    assert "lhs: " in message and "rhs: " in message


def test_message_names_the_constant_field() -> None:
    message = check_differ(dataflow(), dataflow(dtype="int32"))
    assert message.splitlines()[0] == "body.bindings[0].value.args[2]: Constant dtype 'float32' != 'int32'"


def test_permuted_ids_are_equal() -> None:
    # the same structure where the ids are a permutation of each other
    check_equal(dataflow(vids=(0, 1, 2)), dataflow(vids=(2, 0, 1)))


def test_hash_is_an_int_and_deterministic() -> None:
    h = structural_hash(dataflow())
    assert isinstance(h, int) and 0 <= h < 2**64
    assert h == structural_hash(dataflow())


def test_name_hints_ignored_but_globals_and_ops_matter() -> None:
    check_equal(relax.Var(3, "a"), relax.Var(3, "b"))
    check_differ(GlobalVar("f"), GlobalVar("g"))
    x = relax.Var(0, "x")
    message = check_differ(relax.Call(Op("add"), (x, x)), relax.Call(Op("multiply"), (x, x)))
    assert "Call op" in message
    message = check_differ(relax.Call(GlobalVar("f"), (x,)), relax.Call(GlobalVar("g"), (x,)))
    assert "@f" in message and "@g" in message


def test_free_variables() -> None:
    x, y = relax.Var(0, "x"), relax.Var(5, "y")
    check_equal(x, relax.Var(0, "other_name"))
    message = check_differ(x, y)
    assert "free, vid 0" in message and "free, vid 5" in message
    check_equal(x, y, map_free_vars=True)
    # mapping is consistent: x + y is not a + a
    a = relax.Var(9, "a")
    check_equal(add(x, y), add(a, relax.Var(10, "b")), map_free_vars=True)
    check_differ(add(x, y), add(a, a), map_free_vars=True)
    check_differ(add(x, x), add(a, relax.Var(10, "b")), map_free_vars=True)


def test_bound_variable_is_not_a_free_one() -> None:
    # in f, the body returns its parameter; in g it returns a free variable with the same id as f's param
    x = relax.Var(0, "x")
    f = relax.Function((relax.Param(x, T),), relax.SeqExpr((), x))
    g = relax.Function((relax.Param(relax.Var(1, "p"), T),), relax.SeqExpr((), relax.Var(0, "x")))
    check_differ(f, g)
    check_differ(f, g, map_free_vars=True)


def test_type_annotations_matter() -> None:
    a = dataflow()
    b = msgspec.structs.replace(a, ret_type=TupleType((T,)))
    message = check_differ(a, b)
    assert "ret_type" in message
    c = msgspec.structs.replace(a, params=(a.params[0], relax.Param(a.params[1].var, TensorType((4,), "float16"))))
    message = check_differ(a, c)
    assert message.startswith("params[1]: Param ty")


def test_if_branches_and_nested_bindings() -> None:
    def build(base: int, swap: bool) -> relax.Function:
        c, x, t, e, r = (relax.Var(base + i, n) for i, n in enumerate("cxter"))
        then = relax.SeqExpr((relax.Binding(t, add(x, x)),), t)
        other = relax.SeqExpr((relax.Binding(e, relax.Call(Op("relu"), (x,))),), e if not swap else x)
        return relax.Function(
            (relax.Param(c, PrimType("bool")), relax.Param(x, T)),
            relax.SeqExpr((relax.Binding(r, relax.If(c, then, other)),), r),
        )

    check_equal(build(0, False), build(100, False))
    message = check_differ(build(0, False), build(100, True))
    assert message.startswith("body.bindings[0].value.else_branch.body: variable e (defined at ")


# ---------------------------------------------------------------------------------------------------------------------
# loop-level functions


def test_renamed_prim_func_is_equal() -> None:
    # The buffer shape uses n, a parameter listed after the buffer: all params are defined together.
    check_equal(loop_func(), loop_func(7, 3, 9))


def test_loop_extent_and_floats() -> None:
    message = check_differ(loop_func(), loop_func(extent=tir.IntImm("int32", 4)))
    assert message.startswith("body.extent: node type Var != IntImm")
    message = check_differ(loop_func(step=1.0), loop_func(step=2.0))
    assert "FloatImm value 1.0 != 2.0" in message
    assert "body.value.b" in message


def test_float_leaves() -> None:
    check_equal(tir.FloatImm("float32", float("nan")), tir.FloatImm("float32", float("nan")))
    check_equal(tir.FloatImm("float32", -0.0), tir.FloatImm("float32", 0.0))
    check_equal(tir.FloatImm("float32", 2.0), tir.FloatImm("float32", 2))  # type: ignore[arg-type]
    check_differ(tir.FloatImm("float32", 0.5), tir.FloatImm("float64", 0.5))


def test_tir_var_dtype_and_buffer_shape() -> None:
    i32, i64 = tir.Var(0, "i", "int32"), tir.Var(0, "i", "int64")
    assert "Var dtype 'int32' != 'int64'" in check_differ(i32, i64)
    n = tir.Var(1, "n")
    A = tir.Buffer(2, "A", "float32", (n,))
    B = tir.Buffer(2, "A", "float32", (tir.IntImm("int32", 8),))
    body = tir.Evaluate(tir.IntImm("int32", 0))
    f = tir.PrimFunc((A, n), body)
    g = tir.PrimFunc((B, n), body)
    message = check_differ(f, g)
    assert message.startswith("params[0].shape[0]: node type Var != IntImm")
    # strides, and buffer dtype at a def site
    h = tir.PrimFunc((tir.Buffer(2, "A", "float32", (n,), (tir.IntImm("int32", 1),)), n), body)
    assert "Buffer strides: length 0 != 1" in check_differ(f, h)
    k = tir.PrimFunc((tir.Buffer(2, "A", "float16", (n,)), n), body)
    assert "Buffer dtype 'float32' != 'float16'" in check_differ(f, k)


def test_loop_variable_scopes() -> None:
    """Sibling loops that reuse one variable equal sibling loops with distinct ones; loop order matters."""

    def two_loops(first: tir.Var, second: tir.Var, B: tir.Buffer) -> tir.PrimFunc:
        zero, four = tir.IntImm("int32", 0), tir.IntImm("int32", 4)
        return tir.PrimFunc(
            (B,),
            tir.SeqStmt(
                (
                    tir.For(first, zero, four, tir.ForKind.SERIAL, B.store(first, tir.FloatImm("float32", 1.0))),
                    tir.For(second, zero, four, tir.ForKind.UNROLLED, B.store(second, tir.FloatImm("float32", 2.0))),
                )
            ),
        )

    B = tir.Buffer(9, "B", "float32", (tir.IntImm("int32", 4),))
    i, j = tir.Var(0, "i"), tir.Var(1, "j")
    check_equal(two_loops(i, i, B), two_loops(i, j, B))
    assert "For kind" in check_differ(
        two_loops(i, j, B),
        tir.PrimFunc(
            (B,),
            tir.SeqStmt(
                (
                    two_loops(i, j, B).body.seq[0],
                    msgspec.structs.replace(two_loops(i, j, B).body.seq[1], kind=tir.ForKind.SERIAL),
                )
            ),
        ),
    )


def test_let_value_sees_the_outer_scope() -> None:
    """``let x = 1 in let x = x + 1 in x`` (shadowing) equals ``let a = 1 in let b = a + 1 in b``."""

    def lets(outer: tir.Var, inner: tir.Var) -> tir.LetStmt:
        return tir.LetStmt(
            outer,
            tir.IntImm("int32", 1),
            tir.LetStmt(inner, outer + 1, tir.Evaluate(inner)),
        )

    x = tir.Var(0, "x")
    check_equal(lets(x, x), lets(tir.Var(1, "a"), tir.Var(2, "b")))


def test_allocate_and_free_buffers() -> None:
    tmp = tir.Buffer(3, "tmp", "float32", (tir.IntImm("int32", 4),))
    other = tir.Buffer(8, "scratch", "float32", (tir.IntImm("int32", 4),))
    zero = tir.IntImm("int32", 0)
    check_equal(
        tir.Allocate(tmp, tmp.store(zero, tmp[zero])),
        tir.Allocate(other, other.store(zero, other[zero])),
    )
    # free buffers compare by id, unless mapped; their shape always counts
    check_differ(tmp.store(zero, tmp[zero]), other.store(zero, other[zero]))
    check_equal(tmp.store(zero, tmp[zero]), other.store(zero, other[zero]), map_free_vars=True)
    wide = tir.Buffer(8, "scratch", "float32", (tir.IntImm("int32", 8),))
    check_differ(tmp.store(zero, tmp[zero]), wide.store(zero, wide[zero]), map_free_vars=True)


# ---------------------------------------------------------------------------------------------------------------------
# attributes and leaves


def test_attr_order_and_number_kinds() -> None:
    a = dataflow(attrs={"a": 1, "b": [1, 2], "c": {"x": 1.0, "y": None}})
    b = dataflow(attrs={"c": {"y": None, "x": 1}, "b": (1, 2), "a": True})
    check_equal(a, b)
    message = check_differ(a, dataflow(attrs={"a": 1, "b": [1, 3], "c": {"x": 1.0, "y": None}}))
    assert message.startswith("Function attrs")
    check_differ(dataflow(attrs={"a": "1"}), dataflow(attrs={"a": 1}))
    check_differ(dataflow(attrs={"a": None}), dataflow(attrs={}))


def test_unsupported_attr_value() -> None:
    with pytest.raises(TypeError, match="does not support values of type object"):
        structural_hash({"bad": object()})  # type: ignore[arg-type]


def test_for_kind_enum_equals_its_string() -> None:
    i = tir.Var(0, "i")
    body = tir.Evaluate(i)
    zero, four = tir.IntImm("int32", 0), tir.IntImm("int32", 4)
    check_equal(
        tir.For(i, zero, four, tir.ForKind.SERIAL, body),
        tir.For(i, zero, four, "serial", body),  # type: ignore[arg-type]
    )


def test_sequences_of_nodes() -> None:
    x, y = relax.Var(0, "x"), relax.Var(1, "y")
    check_equal([x, GlobalVar("f")], (x, GlobalVar("f")))
    check_differ([x, y], [x, x])
    check_differ([x], [x, x])


# ---------------------------------------------------------------------------------------------------------------------
# modules


def module(**overrides: Any) -> IRModule:
    funcs = {"main": dataflow(), "loop": loop_func()}
    funcs.update(overrides)
    return IRModule(funcs, attrs={"target": "llvm"})


def test_module_equality() -> None:
    check_equal(module(), module(main=dataflow(vids=(5, 6, 7))))
    message = check_differ(module(), module(main=dataflow(swap=True)))
    assert message.startswith("@main: body.bindings[0].value.args[0]: variable x")
    message = check_differ(module(), module(extra=loop_func()))
    assert "module function names differ" in message and "only in rhs: ['extra']" in message
    reordered = IRModule({"loop": loop_func(), "main": dataflow()}, attrs={"target": "llvm"})
    assert "same names, different order" in check_differ(module(), reordered)
    message = check_differ(module(), module().with_attr("target", "cuda"))
    assert message == "module attrs differ at 'target': 'llvm' != 'cuda'"
    assert not structural_equal(module(), module()["main"])


def test_module_hash_with_lazy_functions() -> None:
    mod = module()
    lazy = from_bytes(to_bytes(mod), validate=False)
    assert isinstance(lazy, IRModule)
    assert structural_hash(lazy) == structural_hash(mod)
    assert structural_equal(lazy, mod)
    assert not lazy.is_decoded("main")  # equal bytes: nothing needed decoding
    changed = from_bytes(to_bytes(module(loop=loop_func(step=3.0))), validate=False)
    assert isinstance(changed, IRModule)
    assert structural_hash(changed) != structural_hash(mod)
    assert not changed.is_decoded("loop")  # hashing does not leave lazily held functions decoded
    assert_structural_equal(lazy, module(main=dataflow(vids=(5, 6, 7))))


def test_module_from_loader() -> None:
    mod = module()
    lazy = IRModule.from_loader(mod.names(), lambda name: mod[name], attrs=mod.attrs)
    assert structural_hash(lazy) == structural_hash(mod)
    assert structural_equal(lazy, mod)


def test_deferred_modules_load_only_what_is_read_and_can_be_read_only() -> None:
    mod = module()
    asked: list[str] = []

    def loader(name: str) -> BaseFunc:
        asked.append(name)
        return mod[name]

    def data_of(name: str) -> bytes:
        asked.append(f"bytes of {name}")
        return mod.encoded_function(name)

    lazy = IRModule.from_loader(mod.names(), loader, attrs={"target": "llvm"}, read_only="a test says so")
    encoded = IRModule.from_encoded(mod.names(), data_of, mod.attrs, read_only=None)
    assert asked == []  # nothing is asked for before the module is used
    assert len(lazy) == len(mod) and lazy.names() == mod.names() and lazy.get_attr("target") == "llvm"
    assert "main" in lazy and "nope" not in lazy
    assert asked == []
    assert lazy["main"] is mod["main"] and lazy["main"] is mod["main"]
    assert asked == ["main"]  # loaded once, then cached
    with pytest.raises(ReadOnlyModuleError, match="a test says so"):
        lazy["main"] = mod["loop"]
    copy = lazy.copy()  # a plain, writable module; pending loads run once for both
    copy["main"] = mod["loop"]
    assert type(copy) is IRModule and lazy["main"] is mod["main"]
    with pytest.raises(KeyError, match="nope"):
        lazy["nope"]
    assert encoded.encoded_function("loop") == mod.encoded_function("loop")
    assert not encoded.is_decoded("loop")
    assert_structural_equal(encoded, mod)
    encoded["extra"] = mod["main"]  # no reason given: writable
    assert encoded.names() == [*mod.names(), "extra"]


def test_hash_memo_is_keyed_by_content() -> None:
    base = module()
    h1 = structural_hash(base)
    base["main"] = dataflow(swap=True)
    h2 = structural_hash(base)
    base["main"] = dataflow(vids=(40, 41, 42))
    assert h1 != h2
    assert structural_hash(base) == h1
    assert structural_hash(base, map_free_vars=True) == structural_hash(module(), map_free_vars=True)


# ---------------------------------------------------------------------------------------------------------------------
# deep and large IR


@pytest.mark.scale
def test_100k_bindings() -> None:
    def build(offset: int, break_at: int | None = None) -> relax.Function:
        x = relax.Var(offset, "x")
        bindings = []
        prev = x
        for index in range(1, 100_001):
            var = relax.Var(offset + index, f"v{index}")
            arg = x if index == break_at else prev
            bindings.append(relax.Binding(var, add(prev, arg)))
            prev = var
        return relax.Function((relax.Param(x, T),), relax.SeqExpr(tuple(bindings), prev))

    a, b, c = build(0), build(500_000), build(0, break_at=77_777)
    assert structural_equal(a, b)
    assert structural_hash(a) == structural_hash(b) != structural_hash(c)
    with pytest.raises(AssertionError) as info:
        assert_structural_equal(a, c)
    assert str(info.value).startswith(
        "body.bindings[77776].value.args[1]: variable v77776 (defined at body.bindings[77775].var)"
    )


def test_deep_tir_expression() -> None:
    def build(vid: int, last: int = 4999) -> tir.PrimFunc:
        i = tir.Var(vid, "i")
        expr: Any = i
        for step in range(5000):
            expr = tir.Add(expr, tir.IntImm("int32", last if step == 0 else step))
        return tir.PrimFunc((i,), tir.Evaluate(expr))

    check_equal(build(0), build(1))
    message = check_differ(build(0), build(0, last=-1))
    first = message.splitlines()[0]
    assert first.startswith("body.value" + ".a" * 4999 + ".b: IntImm value 4999 != -1")


def test_deep_module_hash() -> None:
    i = tir.Var(0, "i")
    expr: Any = i
    for step in range(5000):
        expr = tir.Mul(expr, tir.IntImm("int32", step))
    mod = IRModule({"deep": tir.PrimFunc((i,), tir.Evaluate(expr))})
    assert structural_hash(mod) == structural_hash(from_bytes(to_bytes(mod)))


# ---------------------------------------------------------------------------------------------------------------------
# generated modules


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(1, 20), shift=st.integers(1, 10_000))
def test_renamed_generated_module_property(seed: int, size: int, shift: int) -> None:
    mod = random_module(num_functions=4, num_prim_funcs=3, size=size, seed=seed)
    renamed = IRModule({name: rename_all(mod[name], shift) for name in mod.names()}, attrs=mod.attrs)
    check_equal(mod, renamed)
    for name in mod.names():
        assert structural_hash(mod[name]) == structural_hash(renamed[name])


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(2, 16), pick=st.integers(0, 2**16))
def test_one_changed_leaf_is_found(seed: int, size: int, pick: int) -> None:
    """Changing one integer immediate or one constant makes the functions differ, and the message says which."""
    mod = random_module(num_functions=2, num_prim_funcs=2, size=size, seed=seed)
    for name in mod.names():
        tree = msgspec.msgpack.decode(mod.encoded_function(name))
        spots: list[list[Any]] = []
        stack = [tree]
        while stack:
            node = stack.pop()
            if isinstance(node, list):
                if node and node[0] == "tir.Buffer":
                    continue  # a buffer's shape is compared where it is defined, not at each use
                if node and node[0] in ("tir.IntImm", "Constant"):
                    spots.append(node)
                stack.extend(node)
        if not spots:
            continue
        spot = spots[pick % len(spots)]
        if spot[0] == "tir.IntImm":
            spot[2] += 1
        else:
            spot[2] = "int8" if spot[2] != "int8" else "int16"
        changed = decode_function(msgspec.msgpack.encode(tree))
        message = check_differ(mod[name], changed)
        assert ("IntImm value" in message) or ("Constant dtype" in message)


def test_node_class_defined_later() -> None:
    """A node class defined after the first comparison is walked like the built-in ones."""
    structural_hash(relax.Var(0, "x"))  # the class table exists by now

    class Wrap(Node, frozen=True, gc=False, tag="test_structural.Wrap"):
        inner: relax.Var
        label: str

        __child_fields__ = ("inner",)

    x, y = relax.Var(0, "x"), relax.Var(1, "y")
    f = relax.Function((relax.Param(x, T),), relax.SeqExpr((), relax.Tuple((x,))))
    g = relax.Function((relax.Param(y, T),), relax.SeqExpr((), relax.Tuple((y,))))
    assert structural_equal(f, g)
    check_equal(Wrap(x, "a"), Wrap(x, "a"))
    assert "Wrap label 'a' != 'b'" in check_differ(Wrap(x, "a"), Wrap(x, "b"))
    check_differ(Wrap(x, "a"), Wrap(y, "a"))
    check_equal(Wrap(x, "a"), Wrap(y, "a"), map_free_vars=True)


def test_dict_subclasses_and_nested_empty_containers() -> None:
    from collections import OrderedDict

    check_equal(
        dataflow(attrs={"a": {}, "b": []}), dataflow(attrs=dict(OrderedDict([("b", ()), ("a", OrderedDict())])))
    )
    check_differ(dataflow(attrs={"a": {}}), dataflow(attrs={"a": []}))


def test_int_immediates_of_other_python_types() -> None:
    one = tir.IntImm("int32", 1)
    check_equal(one, tir.IntImm("int32", True))  # type: ignore[arg-type]
    check_equal(one, tir.IntImm("int32", 1.0))  # type: ignore[arg-type]
    check_differ(one, tir.IntImm("int32", 1.5))  # type: ignore[arg-type]
    check_differ(one, tir.IntImm("int64", 1))


def test_huge_integers_hash() -> None:
    big = 2**80
    check_equal(tir.IntImm("int64", big), tir.IntImm("int64", big))
    check_differ(tir.IntImm("int64", big), tir.IntImm("int64", big + 1))
    check_equal(dataflow(attrs={"n": big}), dataflow(attrs={"n": float(big)}))
    check_differ(dataflow(attrs={"n": [big]}), dataflow(attrs={"n": [big + 1]}))
