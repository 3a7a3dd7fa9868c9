"""The parser of the IR text form: round trips, golden texts, names and ids, deep IR, errors, ``.ppir`` files."""

from __future__ import annotations

import base64
import contextlib
import math
import pickle
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parpass.errors import IRFormatError
from parpass.ir import (
    Binding,
    Call,
    Constant,
    Function,
    GlobalVar,
    If,
    IRModule,
    Op,
    Param,
    ParseError,
    PrimType,
    SeqExpr,
    TensorType,
    Tuple,
    TupleGetItem,
    TupleType,
    Var,
    assert_structural_equal,
    astext,
    load,
    parse,
    parse_function,
    printer,
    save,
    structural_equal,
    tir,
    to_bytes,
)
from parpass.ir.node import FrozenList
from parpass.ir.parser import parse_text
from parpass.ir.serialization import FORMATS
from parpass.testing import random_module

F32_44 = TensorType((4, 4), "float32")


def _round_trip(mod: IRModule) -> IRModule:
    """Parse the module's text; check structural equality, the print fixpoint and determinism."""
    text = astext(mod)
    parsed = parse(text)
    assert_structural_equal(parsed, mod)
    assert astext(parsed) == text
    assert to_bytes(parse(text)) == to_bytes(parsed)
    return parsed


@contextlib.contextmanager
def _recursion_budget(frames: int) -> Iterator[None]:
    """Allow only ``frames`` Python frames beyond the current depth: proves the code inside does not recurse."""
    depth = 0
    frame = sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back  # type: ignore[assignment]
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + frames)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


@contextlib.contextmanager
def _deep_comparisons() -> Iterator[None]:
    """structural_equal compares attribute values and types with ``==``, which recurses: room for deep ones."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 20_000))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


# ---------------------------------------------------------------------------------------------------------------------
# round trips of random modules


@given(
    seed=st.integers(0, 10_000),
    num_functions=st.integers(0, 12),
    num_prim_funcs=st.integers(0, 8),
    size=st.integers(1, 30),
)
@settings(max_examples=25, deadline=None)
def test_random_modules_round_trip(seed: int, num_functions: int, num_prim_funcs: int, size: int) -> None:
    mod = random_module(num_functions, num_prim_funcs, size=size, seed=seed).with_attr("seed", seed)
    _round_trip(mod)


@pytest.mark.scale
def test_a_large_random_module_round_trips() -> None:
    mod = random_module(150, size=25, seed=3)
    parsed = _round_trip(mod)
    assert parsed.names() == mod.names()
    assert any(f.skip_optimization for _, f in parsed.items())


# ---------------------------------------------------------------------------------------------------------------------
# golden texts


def test_printer_docstring_example_round_trips() -> None:
    doc = printer.__doc__ or ""
    start = doc.index("::\n", doc.index("Example (a module")) + 3
    example = textwrap.dedent(doc[start : doc.index("\nGrammar (EBNF")]).strip("\n") + "\n"
    mod = parse(example)
    assert mod.names() == ["add_relu", "helper", "scale"]
    assert dict(mod.attrs) == {"target": "llvm"}
    assert mod.script() == example


RELAX_TEXT = r"""module attrs {"target": "llvm", "opt": [1, 2.5, null, true, false, "s\n\"é", -inf, nan, -7], "nested": {"a": {"b": [[]]}, "e": {}}}

@main = function(%x: Tensor((4, 4), "float32"), %t: Tuple(Tensor((4,), "int64"), Prim("bool")), %p: Prim("bool")) -> Tensor((4, 4), "float32") attrs {"global_symbol": "main"} {
  %0: Tensor((4, 4), "float32") = add(%x, const(1.5, "float32"))
  %c = const([[1, 2], [3, -4]], "int32")
  %flags = const([true, false], "bool")
  %f = const([inf, -inf, nan, -0.0, 1e+20], "float32")
  %payload = const(b64"AQDAfw==", "float32", (1,))
  %empty = const(b64"", "float32", (0, 3))
  %first: Tensor((4,), "int64") = %t[0]
  %pair: Tuple(Tensor((4, 4), "float32"), Tensor((4,), "int64")) = (%0, %first)
  %one = (%0,)
  %none: Tuple() = ()
  %h = @helper(%0, attrs={"mode": "fast", "k": 1})
  %z = zeros(attrs={"shape": [2], "dtype": "float32"})
  %nested = add(negative(%x), %pair[0])
  %r = if %p {
    %in = relu(%0)
    yield %in
  } else {
    %in = exp(%0)
    yield (%in, %one)[1][0]
  }
  return %r
}

@helper = function(%a: Tensor((4, 4), "float32")) attrs {"SkipOptimization": true} {
  return @main
}
"""  # noqa: E501


def _relax_expected() -> IRModule:
    x, t, p = Var(0, "x"), Var(1, "t"), Var(2, "p")
    v0, c, flags, f, payload, empty = (Var(k, n) for k, n in enumerate(["0", "c", "flags", "f", "payload", "empty"], 3))
    first, pair, one, none, h, z, nested, r, inner = (
        Var(k, n) for k, n in enumerate(["first", "pair", "one", "none", "h", "z", "nested", "r", "in"], 9)
    )
    i64 = TensorType((4,), "int64")
    then = SeqExpr((Binding(inner, Call(Op("relu"), (v0,))),), inner)
    else_ = SeqExpr((Binding(inner, Call(Op("exp"), (v0,))),), TupleGetItem(TupleGetItem(Tuple((inner, one)), 1), 0))
    nan_payload = np.array([0x7FC00001], dtype="<u4").tobytes()
    main = Function(
        (Param(x, F32_44), Param(t, TupleType((i64, PrimType("bool")))), Param(p, PrimType("bool"))),
        SeqExpr(
            (
                Binding(v0, Call(Op("add"), (x, Constant.from_value(np.float32(1.5)))), F32_44),
                Binding(c, Constant.from_value([[1, 2], [3, -4]], "int32")),
                Binding(flags, Constant.from_value([True, False], "bool")),
                Binding(f, Constant.from_value([np.inf, -np.inf, np.nan, -0.0, 1e20], "float32")),
                Binding(payload, Constant(nan_payload, "float32", (1,))),
                Binding(empty, Constant(b"", "float32", (0, 3))),
                Binding(first, TupleGetItem(t, 0), i64),
                Binding(pair, Tuple((v0, first)), TupleType((F32_44, i64))),
                Binding(one, Tuple((v0,))),
                Binding(none, Tuple(()), TupleType(())),
                Binding(h, Call(GlobalVar("helper"), (v0,), {"mode": "fast", "k": 1})),
                Binding(z, Call(Op("zeros"), (), {"shape": [2], "dtype": "float32"})),
                Binding(nested, Call(Op("add"), (Call(Op("negative"), (x,)), TupleGetItem(pair, 0)))),
                Binding(r, If(p, then, else_)),
            ),
            r,
        ),
        F32_44,
        attrs={"global_symbol": "main"},
    )
    a = Var(0, "a")
    helper = Function((Param(a, F32_44),), SeqExpr((), GlobalVar("main")), attrs={"SkipOptimization": True})
    attrs = {
        "target": "llvm",
        "opt": [1, 2.5, None, True, False, 's\n"é', -math.inf, math.nan, -7],
        "nested": {"a": {"b": [[]]}, "e": {}},
    }
    return IRModule({"main": main, "helper": helper}, attrs=attrs)


def test_dataflow_golden() -> None:
    mod = parse(RELAX_TEXT)
    expected = _relax_expected()
    assert_structural_equal(mod, expected)
    assert mod.script() == RELAX_TEXT
    # Same text, same ids and names: the parse is exactly the hand-built IR (vids in definition order).
    assert mod["helper"] == expected["helper"]
    main = mod["main"]
    assert isinstance(main, Function)
    assert [p.var.vid for p in main.params] == [0, 1, 2]
    # A binding's variable is defined after its value: %in (inside the If) before %r.
    assert [b.var.vid for b in main.bindings] == [*range(3, 16), 17]
    assert [b.var.name_hint for b in main.bindings][:3] == ["0", "c", "flags"]
    assert main.bindings[4].value == Constant(np.array([0x7FC00001], dtype="<u4").tobytes(), "float32", (1,))
    assert mod["helper"].skip_optimization
    # The variable bound in both branches of the If is one variable.
    cond = main.bindings[-1].value
    assert isinstance(cond, If)
    assert cond.then_branch.bindings[0].var is cond.else_branch.bindings[0].var


PRIM_TEXT = """\
@kernel = primfunc(%A: Buffer((%n, 16), "float32", strides=(16, 1)), %n: int32, %B: Buffer((4,), "int8")) attrs {"global_symbol": "kernel", "tuned": [1, 2.5]} {
  for %i: int32 in serial(min=0, extent=%n) annotations {"pragma_unroll": true} {
    for %j: int32 in vectorized(min=0, extent=4) {
      %A[%i, %j * 4] = %A[%i, %j * 4] * 2.0 + cast("float32", %j) - float64(0.5)
    }
  }
  for %k: int64 in parallel(min=int64(0), extent=int64(8)) {
    evaluate(%k // int64(2) % int64(3))
  }
  for %i: int32 in unrolled(min=0, extent=2) {
    seq {
      evaluate(%i)
    }
  }
  if %n > 0 and not %n == 3 or false {
    let %s: int32 = %n * 3 {
      %B[%s % 4] = int8(-1)
    }
  } else {
    allocate %T: Buffer((4,), "int32") {
      %T[0] = min(%n, max(1, -2))
      evaluate(call("float32", "exp", select(%n != 1 and %n <= 2 or %n >= 5 and %n < 9, 1.0, -inf)))
      %A[ramp(0, 1, 4), 0] = broadcast(float32(1), 4)
      evaluate(call("int32", "noop"))
      evaluate(bool(2))
      evaluate(true)
      evaluate(nan)
      evaluate(int32(1.0))
      evaluate(%T[])
    }
  }
  seq {
  }
  if (%n - (1 - %n)) * 2 < 3 {
  }
}
"""  # noqa: E501


def _prim_expected() -> tir.PrimFunc:
    n, i, j, k, s = tir.Var(1, "n"), tir.Var(3, "i"), tir.Var(4, "j"), tir.Var(5, "k", "int64"), tir.Var(6, "s")
    A = tir.Buffer(0, "A", "float32", (n, tir.const(16)), (tir.const(16), tir.const(1)))
    B = tir.Buffer(2, "B", "int8", (tir.const(4),))
    T = tir.Buffer(7, "T", "int32", (tir.const(4),))
    c = tir.const
    i64 = tir.IntImm
    load = A[i, j * 4]
    store = A.store((i, j * 4), load * 2.0 + tir.Cast("float32", j) - tir.FloatImm("float64", 0.5))
    loop1 = tir.For(
        i,
        c(0),
        n,
        tir.ForKind.SERIAL,
        tir.For(j, c(0), c(4), tir.ForKind.VECTORIZED, store),
        {"pragma_unroll": True},
    )
    loop2 = tir.For(
        k,
        i64("int64", 0),
        i64("int64", 8),
        tir.ForKind.PARALLEL,
        tir.Evaluate(tir.FloorMod(tir.FloorDiv(k, i64("int64", 2)), i64("int64", 3))),
    )
    loop3 = tir.For(i, c(0), c(2), tir.ForKind.UNROLLED, tir.SeqStmt((tir.Evaluate(i),)))
    cond = tir.Or(tir.And(tir.gt(n, 0), tir.Not(tir.eq(n, 3))), c(False))
    then = tir.LetStmt(s, n * 3, tir.BufferStore(B, i64("int8", -1), (tir.FloorMod(s, c(4)),)))
    sel = tir.Select(
        tir.Or(tir.And(tir.ne(n, 1), tir.le(n, 2)), tir.And(tir.ge(n, 5), tir.lt(n, 9))),
        c(1.0),
        tir.FloatImm("float32", -math.inf),
    )
    else_ = tir.Allocate(
        T,
        tir.SeqStmt(
            (
                tir.BufferStore(T, tir.Min(n, tir.Max(c(1), c(-2))), (c(0),)),
                tir.Evaluate(tir.Call("float32", "exp", (sel,))),
                tir.BufferStore(A, tir.Broadcast(i64("float32", 1), 4), (tir.Ramp(c(0), c(1), 4), c(0))),
                tir.Evaluate(tir.Call("int32", "noop", ())),
                tir.Evaluate(i64("bool", 2)),
                tir.Evaluate(c(True)),
                tir.Evaluate(tir.FloatImm("float32", math.nan)),
                tir.Evaluate(tir.FloatImm("int32", 1.0)),
                tir.Evaluate(tir.BufferLoad(T, ())),
            )
        ),
    )
    last = tir.IfThenElse(tir.lt((n - (c(1) - n)) * 2, c(3)), tir.SeqStmt(()))
    body = tir.SeqStmt((loop1, loop2, loop3, tir.IfThenElse(cond, then, else_), tir.SeqStmt(()), last))
    return tir.PrimFunc((A, n, B), body, attrs={"global_symbol": "kernel", "tuned": [1, 2.5]})


def test_loop_level_golden() -> None:
    mod = parse(PRIM_TEXT)
    kernel = mod["kernel"]
    expected = _prim_expected()
    assert_structural_equal(kernel, expected)
    assert mod.script() == PRIM_TEXT
    assert isinstance(kernel, tir.PrimFunc)
    # Parameters get ids in order, before the body; a buffer shape names a later scalar parameter.
    A, n, B = kernel.params
    assert isinstance(A, tir.Buffer) and isinstance(n, tir.Var) and isinstance(B, tir.Buffer)
    assert (A.vid, n.vid, B.vid) == (0, 1, 2)
    assert A.shape[0] is n
    # A loop variable reused by two sibling loops is one variable.
    assert isinstance(kernel.body, tir.SeqStmt)
    first, _, third = kernel.body.seq[:3]
    assert isinstance(first, tir.For) and isinstance(third, tir.For)
    assert first.loop_var is third.loop_var


@pytest.mark.parametrize(
    "value",
    [
        Constant.from_value(1.5, "float32"),
        Constant.from_value(True, "bool"),
        Constant.from_value(-(2**63), "int64"),
        Constant.from_value(2**64 - 1, "uint64"),
        Constant.from_value([0.1, 65504, -0.0], "float16"),
        Constant.from_value([[np.inf], [-np.inf], [np.nan]], "float64"),
        Constant.from_value(np.arange(24, dtype="int8").reshape(2, 3, 4)),
        Constant.from_value(np.arange(65, dtype="int8")),  # base64: more than 64 values
        Constant.from_value(np.linspace(0, 1, 100, dtype="float32").reshape(4, 25)),
        Constant.from_value(np.zeros((0, 3), dtype="float32")),
        Constant.from_value(np.zeros((2, 0), dtype="bool")),
        Constant(np.array([0x7FC00001], dtype="<u4").tobytes(), "float32", (1,)),  # NaN payload: base64
        Constant(b"\x01\x02\x03", "float32", (2,)),  # data that does not match the shape: base64, kept as is
    ],
    ids=str,
)
def test_constants_round_trip_byte_exact(value: Constant) -> None:
    fn = Function((), SeqExpr((Binding(Var(0, "c"), value),), Var(0, "c")))
    parsed = parse_function(str(fn))
    assert isinstance(parsed, Function)
    assert parsed.bindings[0].value == value  # same bytes, dtype and shape


def test_constants_in_other_spellings() -> None:
    def const(text: str) -> Any:
        fn = parse_function(f"function() {{\n  return {text}\n}}")
        assert isinstance(fn, Function)
        return fn.body.body

    # base64 where values would do, ints for a float dtype, other spacing, empty lists
    assert const('const(b64"AACAPw==", "float32", (1,))') == Constant.from_value([1.0], "float32")
    assert const('const([ 1 , 2 ], "float64")') == Constant.from_value([1.0, 2.0], "float64")
    assert const('const( [[1,2] ,[3,4]] ,"int16" )') == Constant.from_value([[1, 2], [3, 4]], "int16")
    assert const('const([], "int32")') == Constant.from_value(np.zeros((0,), "int32"))
    assert const('const([[], []], "int32")') == Constant.from_value(np.zeros((2, 0), "int32"))


@given(
    st.lists(st.floats(width=32), min_size=1, max_size=70),
    st.sampled_from(["float16", "float32", "float64"]),
)
@settings(max_examples=40, deadline=None)
def test_float_constants_round_trip(values: list[float], dtype: str) -> None:
    with np.errstate(over="ignore"):
        value = Constant.from_value(np.asarray(values, dtype="float32").astype(dtype))
    fn = Function((), SeqExpr((), value))
    parsed = parse_function(str(fn))
    assert isinstance(parsed, Function)
    assert parsed.body.body == value


_LITERALS = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(st.text(max_size=10), _LITERALS, max_size=5))
@settings(max_examples=40, deadline=None)
def test_attribute_literals_round_trip(attrs: dict[str, Any]) -> None:
    fn = Function((), SeqExpr((), Tuple(())), attrs=attrs)
    text = astext(IRModule({"f": fn}, attrs=attrs))
    mod = parse(text)
    assert structural_equal(mod["f"], fn)  # NaN equals NaN, ints stay ints, floats stay floats
    assert mod.script() == text


def test_attribute_values_keep_their_types() -> None:
    fn = parse_function(
        'function() attrs {"i": 1, "f": 1.0, "b": true, "n": null, "l": [1, 2.0], "e": -1e-300} {\n  return ()\n}'
    )
    assert fn.attrs == {"i": 1, "f": 1.0, "b": True, "n": None, "l": [1, 2.0], "e": -1e-300}
    assert [type(v) for v in fn.attrs.values()] == [int, float, bool, type(None), FrozenList, float]


_TLEAVES = st.sampled_from(
    [tir.Var(0, "i"), tir.Var(1, "j"), tir.const(3), tir.const(-2), tir.const(True), tir.FloatImm("float64", -0.5)]
)
_TBINARY = [tir.Add, tir.Sub, tir.Mul, tir.FloorDiv, tir.FloorMod, tir.LT, tir.LE, tir.GT, tir.GE, tir.EQ, tir.NE]
_TBINARY += [tir.And, tir.Or, tir.Min, tir.Max]


def _textend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    binary = st.tuples(st.sampled_from(_TBINARY), children, children).map(lambda t: t[0](t[1], t[2]))
    unary = children.map(tir.Not)
    select = st.tuples(children, children, children).map(lambda t: tir.Select(*t))
    cast = children.map(lambda e: tir.Cast("int64", e))
    vector = st.tuples(children, children).map(lambda t: tir.Broadcast(tir.Ramp(t[0], t[1], 4), 2))
    return st.one_of(binary, unary, select, cast, vector)


@given(st.recursive(_TLEAVES, _textend, max_leaves=30))
@settings(max_examples=60, deadline=None)
def test_loop_level_expressions_round_trip_exactly(expr: Any) -> None:
    i, j = tir.Var(0, "i"), tir.Var(1, "j")
    fn = tir.PrimFunc((i, j), tir.Evaluate(expr))
    # Parameters get ids 0 and 1 in order, so the parse is the very same IR, precedence included.
    assert parse_function(str(fn)) == fn


# ---------------------------------------------------------------------------------------------------------------------
# names, ids, spellings


def test_quoted_and_clashing_names() -> None:
    a, b, e = Var(0, "a b"), Var(1, ""), Var(2, "")
    x1, x2 = Var(3, "x_1"), Var(4, "x")
    fn = Function(
        (Param(a, PrimType("int32")), Param(b, PrimType("int32")), Param(e, PrimType("int32"))),
        SeqExpr(
            (
                Binding(Var(5, 'q"\n'), Call(Op("add"), (a, b))),
                Binding(x1, Call(Op("add"), (b, e))),
                Binding(x2, Call(Op("add"), (x1, e))),
                Binding(Var(6, "x"), Call(Op("add"), (x2, e))),
            ),
            Call(GlobalVar("a-b"), (Var(5, 'q"\n'),)),
        ),
    )
    mod = IRModule({"weird name": fn, "a-b": fn})
    parsed = _round_trip(mod)
    f = parsed["weird name"]
    assert isinstance(f, Function)
    assert [p.var.name_hint for p in f.params] == ["a b", "", "_1"]
    assert f.bindings[0].var.name_hint == 'q"\n'


def test_quoted_spelling_of_a_plain_name_is_the_same_variable() -> None:
    fn = parse_function('function(%x: Prim("int32")) {\n  %"y" = add(%"x", %x)\n  return %y\n}')
    assert isinstance(fn, Function)
    x = fn.params[0].var
    assert fn.bindings[0].value == Call(Op("add"), (x, x))
    assert fn.body.body is fn.bindings[0].var


def test_tir_and_buffer_names_share_one_namespace() -> None:
    A = tir.Buffer(0, "A", "int32", (tir.const(4),))
    v = tir.Var(1, "A")
    fn = tir.PrimFunc((A, v), A.store((0,), v))
    assert str(fn).splitlines()[0] == 'primfunc(%A: Buffer((4,), "int32"), %A_1: int32) {'
    assert parse_function(str(fn)) == tir.PrimFunc((A, tir.Var(1, "A_1")), A.store((0,), tir.Var(1, "A_1")))


def test_comments_whitespace_and_a_leading_name_are_accepted() -> None:
    text = """
    # a comment line
    @f   =   primfunc ( %n : int64 )   # trailing comment
    {
        evaluate ( %n+int64 ( 1 ) )   evaluate(%n % int64(2))
    }
    """
    fn = parse_function(text)
    n = tir.Var(0, "n", "int64")
    one, two = tir.IntImm("int64", 1), tir.IntImm("int64", 2)
    assert fn == tir.PrimFunc((n,), tir.SeqStmt((tir.Evaluate(n + one), tir.Evaluate(tir.FloorMod(n, two)))))
    assert parse(text.replace("# a comment line", "module attrs {}  # none")).names() == ["f"]


def test_same_text_gives_byte_identical_ir_with_ids_in_definition_order() -> None:
    text = PRIM_TEXT + "\n" + RELAX_TEXT.split("\n\n", 1)[1]
    first, second = parse(text), parse(text)
    assert to_bytes(first) == to_bytes(second)
    kernel = first["kernel"]
    assert isinstance(kernel, tir.PrimFunc)
    vids: list[int] = []
    stack: list[Any] = [kernel.body]
    while stack:  # pre-order: loop, let and allocate variables appear in text order
        node = stack.pop()
        if isinstance(node, tir.For):
            vids.append(node.loop_var.vid)
        elif isinstance(node, tir.LetStmt):
            vids.append(node.var.vid)
        elif isinstance(node, tir.Allocate):
            vids.append(node.buffer.vid)
        stack.extend(reversed(list(node.children())))
    assert vids == [3, 4, 5, 3, 6, 7]  # %i, %j, %k, %i again, %s, %T after the parameters 0, 1, 2


def test_module_and_function_entry_points() -> None:
    assert len(parse("")) == 0
    assert dict(parse('module attrs {"a": 1}\n').attrs) == {"a": 1}
    fn_text = 'function(%x: Prim("int32")) {\n  return %x\n}'
    assert isinstance(parse_text(fn_text), Function)
    assert isinstance(parse_text("@f = " + fn_text), IRModule)
    with pytest.raises(ParseError, match=r"a module's functions are named \(use parse_function\)"):
        parse(fn_text)
    with pytest.raises(ParseError, match=r"unexpected '@g' after the end of the function"):
        parse_function(fn_text + "\n@g = " + fn_text)
    with pytest.raises(TypeError, match="as a str"):
        parse(b"")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------------------------
# deep IR: no recursion over the IR


@pytest.mark.scale
def test_hundred_thousand_bindings() -> None:
    x = Var(0, "x")
    bindings = []
    prev = x
    for k in range(100_000):
        v = Var(k + 1, "v")
        bindings.append(Binding(v, Call(Op("add"), (prev, x))))
        prev = v
    fn = Function((Param(x, F32_44),), SeqExpr(tuple(bindings), prev))
    text = str(fn)
    with _recursion_budget(60):
        parsed = parse_function(text)
    assert isinstance(parsed, Function)
    assert_structural_equal(parsed, fn)
    assert parsed.bindings[-1].var.name_hint == "v_99999"  # the printed name
    same_vids = all(b.var.vid == k for k, b in enumerate(parsed.bindings, 1))  # ids in definition order
    assert same_vids


def test_deep_loop_level_expressions_statements_and_attributes() -> None:
    i = tir.Var(0, "i")
    left: Any = i
    right: Any = i
    nested: Any = i
    for _ in range(5000):
        left = tir.Sub(left, tir.const(1))
        right = tir.Sub(tir.const(1), right)
        nested = tir.Max(tir.Not(nested), tir.Cast("int32", i))
    A = tir.Buffer(1, "A", "int32", (tir.const(4),))
    stmt: Any = tir.SeqStmt((A.store((i,), A[A[A[i]]] + left - right), tir.Evaluate(nested)))
    for k in range(3000):
        stmt = tir.For(tir.Var(k + 2, "j"), tir.const(0), tir.const(2), tir.ForKind.SERIAL, stmt)
    for k in range(2000):
        stmt = tir.IfThenElse(tir.lt(i, k), tir.LetStmt(tir.Var(k + 4000, "t"), i, stmt), tir.Evaluate(i))
    deep_attr: Any = 1
    for _ in range(5000):
        deep_attr = [deep_attr]
    fn = tir.PrimFunc((A, i), stmt, attrs={"deep": deep_attr})
    text = str(fn)
    with _recursion_budget(60):
        parsed = parse_function(text)
    with _deep_comparisons():
        assert_structural_equal(parsed, fn)
    assert str(parsed) == text


def test_deep_dataflow_expressions_blocks_and_types() -> None:
    x = Var(0, "x")
    expr: Any = x
    for _ in range(5000):
        expr = Call(Op("relu"), (Tuple((expr, TupleGetItem(x, 0))),))
    seq = SeqExpr((Binding(Var(1, "y"), expr),), x)
    for k in range(1500):
        v = Var(k + 2, "r")
        seq = SeqExpr((Binding(v, If(x, seq, SeqExpr((), x))),), v)
    ty: Any = PrimType("bool")
    for _ in range(3000):
        ty = TupleType((ty, TensorType((2,), "int8")))
    fn = Function((Param(x, PrimType("bool")),), seq, ty)
    text = str(fn)
    with _recursion_budget(60):
        parsed = parse_function(text)
    with _deep_comparisons():
        assert_structural_equal(parsed, fn)
    assert str(parsed) == text


# ---------------------------------------------------------------------------------------------------------------------
# errors: file:line:col, the source line and a caret


def _error(text: str, *, module: bool = False, filename: str = "t.ppir") -> ParseError:
    with pytest.raises(ParseError) as info:
        (parse if module else parse_function)(text, filename)
    return info.value


def _check(err: ParseError, line: int, column: int, reason: str) -> None:
    assert (err.line, err.column) == (line, column), str(err)
    assert reason in err.reason, str(err)
    first, shown, caret = str(err).split("\n")
    assert first == f"{err.filename}:{line}:{column}: {err.reason}" == err.brief
    assert shown == err.source_line.replace("\t", " ")
    assert caret == " " * (column - 1) + "^"


def test_error_message_layout_and_type() -> None:
    err = _error('function(%x: Prim("int32")) {\n  %y = add(%x, %z)\n  return %y\n}')
    assert isinstance(err, IRFormatError) and isinstance(err, ValueError)
    expected = "t.ppir:2:16: undefined variable %z; closest defined: %x\n  %y = add(%x, %z)\n               ^"
    assert str(err) == expected
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == str(err) and again.line == 2


@pytest.mark.parametrize(
    ("text", "line", "column", "reason"),
    [
        ('function(%x: Prim("int32")) {\n  return %y\n}', 2, 10, "undefined variable %y; closest defined: %x"),
        ("function() {\n  %a = ()\n  return %b\n}", 3, 10, "undefined variable %b; closest defined: %a"),
        # a variable is defined after its value: its value cannot use it
        ("function() {\n  %a = add(%a, %a)\n  return %a\n}", 2, 12, "undefined variable %a"),
        ("primfunc() {\n  let %s: int32 = %s + 1 {\n  }\n}", 2, 19, "undefined variable %s"),
        ("primfunc() {\n  for %i: int32 in serial(min=0, extent=%i) {\n  }\n}", 2, 41, "undefined variable %i"),
        ("primfunc(%n: int32) {\n  evaluate(%m + 1)\n}", 2, 12, "undefined variable %m; closest defined: %n"),
        ("primfunc(%n: int32) {\n  %A[0] = 1\n}", 2, 3, "undefined buffer %A"),
        ('primfunc(%A: Buffer((4,), "int8")) {\n  evaluate(%A + 1)\n}', 2, 12, "%A is a buffer"),
        ("primfunc(%n: int32) {\n  %n[0] = 1\n}", 2, 3, "%n is a scalar variable, not a buffer"),
        ('primfunc(%A: Buffer((%B[0],), "int8"), %B: Buffer((4,), "int8")) {\n}', 1, 22, "before its own"),
    ],
)
def test_undefined_and_misused_names(text: str, line: int, column: int, reason: str) -> None:
    _check(_error(text), line, column, reason)


def test_unknown_op_names_the_closest() -> None:
    err = _error('function(%x: Prim("int32")) {\n  %y = ad(%x, %x)\n  return %y\n}')
    _check(err, 2, 8, "no op named 'ad' in the op registry; closest: 'add'")
    err = _error('function(%x: Prim("int32")) {\n  return "nn.relu_"(%x)\n}')
    _check(err, 2, 10, "no op named 'nn.relu_'")


@pytest.mark.parametrize(
    ("text", "line", "column", "reason"),
    [
        ("@f = functon() {\n  return ()\n}\n", 1, 6, "got 'functon' (did you mean 'function'?)"),
        ("primfunc(%n: int32) {\n  fro %i: int32 in serial(min=0, extent=%n) {\n  }\n}", 2, 3, "did you mean 'for'?"),
        ("primfunc(%n: int32) {\n  for %i: int32 in seriall(min=0, extent=1) {\n  }\n}", 2, 20, "unknown loop kind"),
        ("primfunc(%n: int32) {\n  evaluate(foo)\n}", 2, 12, "unknown name 'foo' in an expression"),
        ('primfunc(%A: Bufer((4,), "float32")) {\n}', 1, 14, "got 'Bufer' (did you mean 'Buffer'?)"),
        ("function() {\n  retrun ()\n}", 2, 3, "or 'return', got 'retrun' (did you mean 'return'?)"),
        ("function() {\n  yield ()\n}", 2, 3, "expected 'return' to end this block"),
        ("function() {\n  return @f[0] @g\n}", 2, 16, "expected '}' after 'return' and its expression"),
        ("function() {\n  return $\n}", 2, 10, "expected an expression, got '$'"),
        ('function() {\n  return "unterminated\n}', 2, 10, "unterminated string"),
        ("function() {\n  return (", 2, 11, "expected an expression, got end of input"),
        ("primfunc() {\n  evaluate(0)\n", 2, 14, "a '}' is missing"),
        ("function() {\n  return (%a)\n}", 2, 11, "undefined variable %a"),
        ("function() {\n  return ((),)[0\n}", 3, 1, "expected ']' after a tuple index"),
        ("primfunc(%n: int32) {\n  evaluate(%n < 1 < 2)\n}", 2, 19, "comparisons do not chain"),
        ("primfunc(%n: int32) {\n  evaluate(max(%n))\n}", 2, 12, "max(...) takes 2 arguments, got 1"),
        ("primfunc(%n: int32) {\n  evaluate(-%n)\n}", 2, 12, "only part of a number literal"),
        ("primfunc(%n: int32) {\n  evaluate(((%n + 1) * 2\n}", 3, 1, "expected ')' to close the '(' at line 2"),
        ("primfunc(%n: int32) {\n  evaluate(ramp(0, 1, %n))\n}", 2, 12, "number of lanes, an integer literal"),
        ('function() attrs {"a": 1, "a": 2} {\n  return ()\n}', 1, 27, "duplicate key 'a'"),
        ('function() attrs {"a": [1, 2} {\n  return ()\n}', 1, 29, "expected ',' or ']' in a list"),
        ('function() attrs ["a"] {\n  return ()\n}', 1, 18, "expected a dict of function attributes"),
    ],
)
def test_syntax_errors(text: str, line: int, column: int, reason: str) -> None:
    _check(_error(text, module=text.startswith("@")), line, column, reason)


@pytest.mark.parametrize(
    ("text", "line", "column", "reason"),
    [
        ('function(%x: Tensr((4,), "float32")) {\n  return %x\n}', 1, 14, "got 'Tensr' (did you mean 'Tensor'?)"),
        ('function(%x: Tensor((4,) "float32")) {\n  return %x\n}', 1, 26, "expected ',' after a tensor shape"),
        ('function(%x: Tensor((4), "float32")) {\n  return %x\n}', 1, 23, "one-element shape"),
        ('function(%x: Tensor(4, "float32")) {\n  return %x\n}', 1, 21, "expected '(' to open a shape"),
        ('function(%x: Tensor((4.5,), "float32")) {\n  return %x\n}', 1, 22, "expected an integer (a dimension)"),
        ('function(%x: Tuple(Prim("int8") Prim("int8"))) {\n  return %x\n}', 1, 33, "expected ',' or ')' in Tuple"),
        ("function(%x: Prim(int8)) {\n  return %x\n}", 1, 19, "expected a string (a dtype)"),
        ("function(%x) {\n  return %x\n}", 1, 12, "expected ':' after a parameter name"),
        ("function() -> {\n  return ()\n}", 1, 15, "expected a type"),
    ],
)
def test_type_syntax_errors(text: str, line: int, column: int, reason: str) -> None:
    _check(_error(text), line, column, reason)


@pytest.mark.parametrize(
    ("text", "line", "column", "reason"),
    [
        ('function(%x: Tensor((4,), "flaot32")) {\n  return %x\n}', 1, 27, "'flaot32'; closest: 'float32'"),
        ('function(%x: Tensor((4,),  "int32x4")) {\n  return %x\n}', 1, 28, "unknown dtype 'int32x4'"),
        ('function(%x: Prim("i32")) {\n  return %x\n}', 1, 19, "unknown dtype 'i32'"),
        ('function() {\n  return const([1], "int31")\n}', 2, 21, "unknown dtype 'int31'"),
        ('function() {\n  return const(b64"", "complex64", (0,))\n}', 2, 23, "unknown dtype 'complex64'"),
        ("primfunc(%n: int33) {\n}", 1, 14, "unknown dtype (or vector dtype such as 'int32x4') 'int33'"),
        ("primfunc(%n: int32x1) {\n}", 1, 14, "'int32x1'"),
        ('primfunc(%A: Buffer((4,), "floatx4")) {\n}', 1, 27, "'floatx4'"),
        ("primfunc() {\n  for %i: int in serial(min=0, extent=1) {\n  }\n}", 2, 11, "unknown dtype"),
        ('primfunc(%n: int32) {\n  evaluate(cast("flt", %n))\n}', 2, 17, "'flt'"),
        ('primfunc(%n: int32) {\n  evaluate(call("f32", "exp", 1.0))\n}', 2, 17, "'f32'"),
        ("primfunc(%n: int32) {\n  evaluate(in32(1))\n}", 2, 12, "unknown dtype"),
    ],
)
def test_wrong_dtype_strings(text: str, line: int, column: int, reason: str) -> None:
    _check(_error(text), line, column, reason)


def test_vector_dtypes_are_known_in_loop_level_functions() -> None:
    fn = parse_function('primfunc(%v: int32x4, %A: Buffer((4,), "float32x4")) {\n  evaluate(cast("float32x4", %v))\n}')
    assert isinstance(fn, tir.PrimFunc)
    assert fn.params[0].dtype == "int32x4"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "line", "column", "reason"),
    [
        ('function() {\n  return const([1, [2]], "int32")\n}', 2, 21, "ragged constant"),
        ('function() {\n  return const([[1, 2], [3]], "int32")\n}', 2, 16, "ragged constant"),
        ('function() {\n  return const([1.5], "int32")\n}', 2, 17, "holds integers, got '1.5'"),
        ('function() {\n  return const([1, true], "float32")\n}', 2, 20, "holds numbers, got 'true'"),
        ('function() {\n  return const([1], "bool")\n}', 2, 17, "holds true or false, got '1'"),
        ('function() {\n  return const([300], "int8")\n}', 2, 23, "do not fit int8"),
        ('function() {\n  return const(b64"AQ!D", "int8", (3,))\n}', 2, 20, "bad base64 data"),
        ('function() {\n  return const([1, 2] "int8")\n}', 2, 23, "expected ',' after the constant's values"),
    ],
)
def test_constant_errors(text: str, line: int, column: int, reason: str) -> None:
    _check(_error(text), line, column, reason)


def test_duplicate_function_names() -> None:
    text = "@f = function() {\n  return ()\n}\n\n@g = function() {\n  return ()\n}\n\n@f = primfunc() {\n}\n"
    _check(_error(text, module=True), 9, 1, "duplicate function name @f (first defined on line 1)")
    _check(_error(text.replace("@g", '@"f"'), module=True), 5, 1, "duplicate function name @f")


def test_long_lines_are_cut_around_the_column() -> None:
    args = ", ".join(["%x"] * 200)
    err = _error(f'function(%x: Prim("int32")) {{\n  return add({args}, %nope, {args})\n}}')
    _, shown, caret = str(err).split("\n")
    assert err.column == 2 + len("return add(") + len(args) + 3
    assert len(shown) <= 106 and shown.startswith("...") and shown.endswith("...")
    assert shown[caret.index("^") : caret.index("^") + 5] == "%nope"


# ---------------------------------------------------------------------------------------------------------------------
# .ppir files


def test_ppir_is_a_registered_format() -> None:
    assert ".ppir" in FORMATS


def test_save_and_load_ppir_module_and_function(tmp_path: Path) -> None:
    mod = random_module(8, size=10, seed=5).with_attr("note", "text")
    path = tmp_path / "m.ppir"
    save(mod, path)
    assert path.read_text(encoding="utf-8") == mod.script()
    loaded = load(path)
    assert isinstance(loaded, IRModule)
    assert_structural_equal(loaded, mod)
    assert [p.name for p in tmp_path.iterdir()] == ["m.ppir"]  # written atomically: no temporary left behind
    # A single function is saved as its own text and loads back as a function.
    fn = mod["main"]
    save(fn, tmp_path / "f.PPIR")
    assert (tmp_path / "f.PPIR").read_text(encoding="utf-8") == str(fn) + "\n"
    again = load(tmp_path / "f.PPIR")
    assert isinstance(again, Function)
    assert_structural_equal(again, fn)
    # The empty module is an empty file.
    save(IRModule(), tmp_path / "empty.ppir")
    assert (tmp_path / "empty.ppir").read_bytes() == b""
    empty = load(tmp_path / "empty.ppir")
    assert isinstance(empty, IRModule) and len(empty) == 0


def test_load_errors_name_the_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.ppir"
    path.write_text('@f = function(%x: Prim("int32")) {\n  return %y\n}\n', encoding="utf-8")
    with pytest.raises(ParseError) as info:
        load(path)
    assert str(info.value).startswith(f"{path}:2:10: undefined variable %y")
    # truncated text
    path.write_text('@f = function(%x: Prim("int32")) {\n  %a = add(%x,', encoding="utf-8")
    with pytest.raises(ParseError, match=r"bad\.ppir:2:15: expected an expression, got end of input"):
        load(path)
    # bytes that are not UTF-8
    path.write_bytes(b"@f = function() {\n  return \xff\n}\n")
    with pytest.raises(ParseError, match=r"bad\.ppir:2:10: not UTF-8 text"):
        load(path)
    # a byte-order mark is fine
    path.write_bytes(b"\xef\xbb\xbf@f = function() {\n  return ()\n}\n")
    loaded = load(path)
    assert isinstance(loaded, IRModule) and loaded.names() == ["f"]


def test_non_ascii_names_save_and_load_and_lone_surrogates_are_refused(tmp_path: Path) -> None:
    fn = Function((Param(Var(0, "ü\u2028"), PrimType("int32")),), SeqExpr((), Var(0, "ü\u2028")))
    mod = IRModule({"функция": fn}, attrs={"s": "\u00e9\U0001f600"})
    save(mod, tmp_path / "u.ppir")
    loaded = load(tmp_path / "u.ppir")
    assert isinstance(loaded, IRModule)
    assert_structural_equal(loaded, mod)
    assert loaded.script() == mod.script()
    # A lone surrogate has no UTF-8 encoding: no format can hold it (issue 11), so it is neither written nor read.
    bad = IRModule({"f": Function((Param(Var(0, "x\ud800"), PrimType("int32")),), SeqExpr((), Var(0, "x\ud800")))})
    with pytest.raises(ValueError, match=r"cannot write .*s\.ppir: @f: params\[0\]\.var\.name_hint: .*lone surrogate"):
        save(bad, tmp_path / "s.ppir")
    (tmp_path / "s.ppir").write_text(bad.script(), encoding="utf-8", errors="surrogatepass")
    with pytest.raises(IRFormatError, match=r"s\.ppir: @f: params\[0\]\.var\.name_hint: .*lone surrogate"):
        load(tmp_path / "s.ppir")


def test_payload_bytes_survive_files(tmp_path: Path) -> None:
    data = bytes(range(256)) * 3
    c = Constant(data, "uint8", (768,))
    fn = Function((), SeqExpr((), c))
    save(fn, tmp_path / "c.ppir")
    assert f'b64"{base64.b64encode(data).decode()}"' in (tmp_path / "c.ppir").read_text()
    loaded = load(tmp_path / "c.ppir")
    assert isinstance(loaded, Function) and loaded.body.body == c
