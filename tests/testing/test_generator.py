"""Tests of parpass.testing.random_module: determinism, realism, and well-formedness of what it builds.

The checks here are independent of the passes: a small type checker and evaluator for
Functions (through the op registry) and a small interpreter for PrimFuncs that proves
every variable is defined before use, dtypes agree, and every buffer access is in bounds.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parpass.ir import GlobalVar, IRModule, Op, get_op, tir
from parpass.ir.relax import Binding, Call, Constant, Function, If, SeqExpr, Tuple, TupleGetItem, Var
from parpass.ir.types import PrimType, TensorType, TupleType
from parpass.testing import random_module

ENC = msgspec.msgpack.Encoder()


@pytest.fixture(autouse=True)
def _deep_recursion() -> Iterator[None]:
    """This file's checkers recurse over the IR; the limit is restored for the other test files."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(20000)
    yield
    sys.setrecursionlimit(old)


# ---------------------------------------------------------------- dataflow checker / evaluator


class Checked:
    """What the checker saw in one Function."""

    def __init__(self) -> None:
        self.vids: list[int] = []
        self.bindings = 0
        self.features: Counter[str] = Counter()
        self.callees: list[str] = []


def type_of(expr: Any, env: dict[int, Any], rets: dict[str, Any], info: Checked) -> Any:
    """The type of ``expr`` under ``env``; asserts well-typedness and definition before use."""
    if isinstance(expr, Var):
        assert expr.vid in env, f"variable %{expr.name_hint}#{expr.vid} used before definition"
        return env[expr.vid]
    if isinstance(expr, Constant):
        return TensorType(tuple(expr.shape), expr.dtype)
    if isinstance(expr, Tuple):
        if all(isinstance(f, Constant) for f in expr.fields):
            info.features["const_tuple"] += 1
        return TupleType(tuple(type_of(f, env, rets, info) for f in expr.fields))
    if isinstance(expr, TupleGetItem):
        tty = type_of(expr.tuple_value, env, rets, info)
        assert isinstance(tty, TupleType) and 0 <= expr.index < len(tty.fields)
        return tty.fields[expr.index]
    if isinstance(expr, Call):
        arg_types = [type_of(a, env, rets, info) for a in expr.args]
        for a in expr.args:
            assert isinstance(a, (Var, Constant)), f"call arguments are leaves, got {type(a).__name__}"
        if isinstance(expr.op, GlobalVar):
            name = expr.op.name_hint
            assert name in rets, f"call to {name!r}, which is not an earlier function"
            params, ret = rets[name]
            assert arg_types == list(params), f"call to {name!r}: {arg_types} vs {params}"
            info.callees.append(name)
            info.features["call_global"] += 1
            return ret
        assert isinstance(expr.op, Op)
        if expr.args and all(isinstance(a, Constant) for a in expr.args):
            info.features["const_call"] += 1
        if not get_op(expr.op.name).pure:
            info.features["stateful"] += 1
        info.features[f"op:{expr.op.name}"] += 1
        return get_op(expr.op.name).infer_type(arg_types, expr.attrs)
    if isinstance(expr, If):
        cond = type_of(expr.cond, env, rets, info)
        assert cond in (TensorType((), "bool"), PrimType("bool")), cond
        then_ty = check_block(expr.then_branch, env, rets, info)
        else_ty = check_block(expr.else_branch, env, rets, info)
        assert then_ty == else_ty
        info.features["if"] += 1
        return then_ty
    raise AssertionError(f"unexpected expression {type(expr).__name__}")


def check_block(block: SeqExpr, env: dict[int, Any], rets: dict[str, Any], info: Checked) -> Any:
    inner = dict(env)
    seen_calls: set[bytes] = set()
    for b in block.bindings:
        assert isinstance(b, Binding)
        ty = type_of(b.value, inner, rets, info)
        if b.ty is not None:
            assert b.ty == ty, f"binding %{b.var.name_hint}: declared {b.ty}, computed {ty}"
        else:
            info.features["untyped_binding"] += 1
        if isinstance(b.value, Var):
            info.features["copy"] += 1
        if isinstance(b.value, Call) and isinstance(b.value.op, Op) and get_op(b.value.op.name).pure:
            key = ENC.encode(b.value)
            if key in seen_calls:
                info.features["repeated_call"] += 1
            seen_calls.add(key)
        if isinstance(b.value, TupleGetItem):
            info.features["getitem"] += 1
        inner[b.var.vid] = ty
        info.vids.append(b.var.vid)
        info.bindings += 1
    return type_of(block.body, inner, rets, info)


def used_vids(block: SeqExpr) -> set[int]:
    out: set[int] = set()
    stack: list[Any] = [block]
    while stack:
        node = stack.pop()
        if isinstance(node, Binding):
            stack.append(node.value)
            continue
        if isinstance(node, Var):
            out.add(node.vid)
        stack.extend(node.children())
    return out


def check_module(mod: IRModule) -> dict[str, Checked]:
    """Type-checks every Function (in module order) and runs every PrimFunc; returns per-function facts."""
    rets: dict[str, Any] = {}
    infos: dict[str, Checked] = {}
    for gv, func in mod.items():
        info = Checked()
        if isinstance(func, Function):
            env = {}
            for p in func.params:
                env[p.var.vid] = p.ty
                info.vids.append(p.var.vid)
            ret = check_block(func.body, env, rets, info)
            if func.ret_type is not None:
                assert func.ret_type == ret
            rets[gv.name_hint] = (tuple(p.ty for p in func.params), ret)
            defined = {b.var.vid for b in func.bindings}
            if defined - used_vids(func.body):
                info.features["dead"] += 1
        else:
            run_prim(func, info)
        assert len(info.vids) == len(set(info.vids)), f"{gv.name_hint}: duplicate vids"
        infos[gv.name_hint] = info
    return infos


def sample(ty: Any, rng: np.random.Generator) -> Any:
    if isinstance(ty, TupleType):
        return tuple(sample(f, rng) for f in ty.fields)
    shape = tuple(ty.shape) if isinstance(ty, TensorType) else ()
    return np.asarray(rng.uniform(-2, 2, size=shape)).astype(ty.dtype)


def value_type(v: Any) -> Any:
    if isinstance(v, tuple):
        return TupleType(tuple(value_type(x) for x in v))
    return TensorType(tuple(v.shape), str(v.dtype))


def evaluate(mod: IRModule, name: str, args: list[Any]) -> Any:
    """Evaluates Function ``name`` and checks every binding's runtime value against its type."""
    func = mod[name]
    assert isinstance(func, Function)
    env = {p.var.vid: a for p, a in zip(func.params, args, strict=True)}

    def ev(expr: Any, env: dict[int, Any]) -> Any:
        if isinstance(expr, Var):
            return env[expr.vid]
        if isinstance(expr, Constant):
            return expr.numpy()
        if isinstance(expr, Tuple):
            return tuple(ev(f, env) for f in expr.fields)
        if isinstance(expr, TupleGetItem):
            return ev(expr.tuple_value, env)[expr.index]
        if isinstance(expr, Call):
            vals = [ev(a, env) for a in expr.args]
            if isinstance(expr.op, GlobalVar):
                return evaluate(mod, expr.op.name_hint, vals)
            return get_op(expr.op.name).evaluate(vals, expr.attrs)
        if isinstance(expr, If):
            return block(expr.then_branch if bool(ev(expr.cond, env)) else expr.else_branch, env)
        raise AssertionError(type(expr).__name__)

    def block(seq: SeqExpr, env: dict[int, Any]) -> Any:
        env = dict(env)
        for b in seq.bindings:
            v = ev(b.value, env)
            if b.ty is not None and not isinstance(b.ty, PrimType):
                assert value_type(v) == b.ty, f"{name}: %{b.var.name_hint} is {value_type(v)}, typed {b.ty}"
            env[b.var.vid] = v
        return ev(seq.body, env)

    return block(func.body, env)


# ---------------------------------------------------------------- loop-level interpreter


def run_prim(func: tir.PrimFunc, info: Checked) -> None:
    """Runs ``func`` on zero-filled buffers, asserting scoping, dtypes and in-bounds accesses."""
    buffers: dict[int, np.ndarray] = {}
    scalars: dict[int, Any] = {}
    for p in func.params:
        info.vids.append(p.vid)
        if isinstance(p, tir.Buffer):
            shape = tuple(d.value for d in p.shape)
            buffers[p.vid] = np.random.default_rng(p.vid).uniform(-1, 1, shape).astype(p.dtype)
        else:
            scalars[p.vid] = np.asarray(1.5 if p.dtype.startswith("float") else 2, dtype=p.dtype)[()]

    def ev(e: Any) -> Any:
        if isinstance(e, (tir.IntImm, tir.FloatImm)):
            return np.asarray(e.value, dtype=e.dtype)[()]
        if isinstance(e, tir.Var):
            assert e.vid in scalars, f"tir var {e.name_hint}#{e.vid} used out of scope"
            return scalars[e.vid]
        if isinstance(e, tir.BufferLoad):
            assert e.buffer.vid in buffers, f"buffer {e.buffer.name} not declared"
            idx = tuple(int(ev(i)) for i in e.indices)
            shape = buffers[e.buffer.vid].shape
            assert all(0 <= i < d for i, d in zip(idx, shape, strict=True)), f"{e.buffer.name}{idx} out of {shape}"
            return buffers[e.buffer.vid][idx]
        if isinstance(e, tir.Cast):
            return np.asarray(ev(e.value)).astype(e.dtype)[()]
        if isinstance(e, tir.Select):
            return ev(e.true_value) if ev(e.condition) else ev(e.false_value)
        if isinstance(e, tir.Call):
            info.features["tir_call"] += 1
            return getattr(np, e.op)(ev(e.args[0]))
        if isinstance(e, tir.Not):
            return not ev(e.a)
        assert isinstance(e, tir._Binary), type(e).__name__
        assert e.a.dtype == e.b.dtype, f"{type(e).__name__} of {e.a.dtype} and {e.b.dtype}"
        a, b = ev(e.a), ev(e.b)
        ops = {
            tir.Add: lambda: a + b,
            tir.Sub: lambda: a - b,
            tir.Mul: lambda: a * b,
            tir.FloorDiv: lambda: a // b,
            tir.FloorMod: lambda: a % b,
            tir.Min: lambda: min(a, b),
            tir.Max: lambda: max(a, b),
            tir.LT: lambda: a < b,
            tir.LE: lambda: a <= b,
            tir.GT: lambda: a > b,
            tir.GE: lambda: a >= b,
            tir.EQ: lambda: a == b,
            tir.NE: lambda: a != b,
        }
        if isinstance(e, tir.FloorDiv | tir.FloorMod):
            info.features["tir_divmod"] += 1
        with np.errstate(all="ignore"):
            return ops[type(e)]()

    def run(s: Any) -> None:
        if isinstance(s, tir.SeqStmt):
            for x in s.seq:
                run(x)
        elif isinstance(s, tir.For):
            assert isinstance(s.extent, tir.IntImm) and isinstance(s.min, tir.IntImm), "constant trip counts"
            info.features[f"for:{s.kind.value}"] += 1
            info.vids.append(s.loop_var.vid)
            for i in range(s.min.value, s.min.value + s.extent.value):
                scalars[s.loop_var.vid] = np.int32(i)
                run(s.body)
            scalars.pop(s.loop_var.vid, None)
        elif isinstance(s, tir.BufferStore):
            assert s.value.dtype == s.buffer.dtype, f"store of {s.value.dtype} into {s.buffer.dtype} buffer"
            if isinstance(s.value, tir.BufferLoad) and s.value.buffer == s.buffer and s.value.indices == s.indices:
                info.features["noop_store"] += 1
            value = ev(s.value)
            idx = tuple(int(ev(i)) for i in s.indices)
            shape = buffers[s.buffer.vid].shape
            assert all(0 <= i < d for i, d in zip(idx, shape, strict=True)), f"{s.buffer.name}{idx} out of {shape}"
            buffers[s.buffer.vid][idx] = value
        elif isinstance(s, tir.IfThenElse):
            info.features["tir_if"] += 1
            if ev(s.condition):
                run(s.then_case)
            elif s.else_case is not None:
                run(s.else_case)
        elif isinstance(s, tir.LetStmt):
            info.features["let"] += 1
            info.vids.append(s.var.vid)
            scalars[s.var.vid] = ev(s.value)
            run(s.body)
            del scalars[s.var.vid]
        elif isinstance(s, tir.Allocate):
            info.features["allocate"] += 1
            info.vids.append(s.buffer.vid)
            shape = tuple(d.value for d in s.buffer.shape)
            buffers[s.buffer.vid] = np.zeros(shape, dtype=s.buffer.dtype)
            run(s.body)
            del buffers[s.buffer.vid]
        elif isinstance(s, tir.Evaluate):
            if isinstance(s.value, (tir.IntImm, tir.FloatImm)):
                info.features["evaluate_const"] += 1
            ev(s.value)
        else:
            raise AssertionError(type(s).__name__)

    run(func.body)
    # Allocate and Let vids are appended on every visit; count each once.
    info.vids = list(dict.fromkeys(info.vids))


# ---------------------------------------------------------------- tests


def test_module_counts_and_defaults() -> None:
    mod = random_module(num_functions=10, seed=3)
    kinds = Counter(type(f).__name__ for _, f in mod.items())
    assert kinds == {"Function": 10, "PrimFunc": 5}
    mod = random_module(num_functions=4, num_prim_funcs=7, size=5, seed=3)
    kinds = Counter(type(f).__name__ for _, f in mod.items())
    assert kinds == {"Function": 4, "PrimFunc": 7}
    assert len(random_module(0, 0)) == 0


@pytest.mark.parametrize(
    ("kwargs", "exc", "text"),
    [
        ({"num_functions": -1}, ValueError, "counts"),
        ({"num_prim_funcs": -2}, ValueError, "counts"),
        ({"size": 0}, ValueError, "size"),
        ({"seed": "a"}, TypeError, "seed"),
        ({"num_functions": 2.5}, TypeError, "num_functions"),
        ({"num_prim_funcs": True}, TypeError, "num_prim_funcs"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], exc: type[Exception], text: str) -> None:
    with pytest.raises(exc, match=text):
        random_module(**kwargs)


def encode_all(mod: IRModule) -> list[tuple[str, bytes]]:
    return [(gv.name_hint, ENC.encode(f)) for gv, f in mod.items()]


def test_same_seed_same_bytes_different_seed_differs() -> None:
    a = encode_all(random_module(30, size=15, seed=7))
    b = encode_all(random_module(30, size=15, seed=7))
    c = encode_all(random_module(30, size=15, seed=8))
    assert a == b
    assert a != c
    assert [n for n, _ in a] != [n for n, _ in c] or [x for _, x in a] != [x for _, x in c]


def test_bytes_independent_of_hash_seed() -> None:
    """A fresh interpreter with another string-hash seed builds the very same bytes."""
    import hashlib

    here = hashlib.sha256(b"".join(x for _, x in encode_all(random_module(25, size=12, seed=11)))).hexdigest()
    code = (
        "import hashlib, msgspec; from parpass.testing import random_module;"
        "enc = msgspec.msgpack.Encoder();"
        "m = random_module(25, size=12, seed=11);"
        "print(hashlib.sha256(b''.join(enc.encode(f) for _, f in m.items())).hexdigest())"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == here


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 8), size=st.integers(1, 30))
def test_well_formed_over_seeds(seed: int, n: int, size: int) -> None:
    """Every binding type-checks, every variable is defined before use, vids are unique, accesses in bounds."""
    mod = random_module(n, size=size, seed=seed)
    infos = check_module(mod)
    for gv, func in mod.items():
        if isinstance(func, Function):
            for callee in infos[gv.name_hint].callees:
                assert mod.names().index(callee) < mod.names().index(gv.name_hint)


def test_evaluation_matches_types() -> None:
    """Running each Function (op evaluation rules included) gives values of exactly the declared types."""
    mod = random_module(16, num_prim_funcs=0, size=14, seed=5)
    check_module(mod)
    rng = np.random.default_rng(0)
    for gv, func in mod.items():
        assert isinstance(func, Function)
        result = evaluate(mod, gv.name_hint, [sample(p.ty, rng) for p in func.params])
        if func.ret_type is not None and not isinstance(func.ret_type, PrimType):
            assert value_type(result) == func.ret_type


def test_every_feature_appears() -> None:
    mod = random_module(60, size=20, seed=0)
    infos = check_module(mod)
    features: Counter[str] = Counter()
    for info in infos.values():
        features.update(info.features)
    wanted = [
        "const_call",
        "const_tuple",
        "repeated_call",
        "dead",
        "copy",
        "if",
        "getitem",
        "call_global",
        "stateful",
        "untyped_binding",
        "op:split",
        "op:matmul",
        "op:concat",
        "op:where",
        "op:transpose",
        "op:reshape",
        "op:sum",
        "for:serial",
        "for:parallel",
        "for:vectorized",
        "for:unrolled",
        "tir_if",
        "let",
        "allocate",
        "evaluate_const",
        "noop_store",
        "tir_divmod",
    ]
    missing = [w for w in wanted if not features[w]]
    assert not missing, f"features never generated: {missing}"

    funcs = [f for _, f in mod.items()]
    assert sum(bool(f.attrs.get("SkipOptimization")) for f in funcs) >= 2
    assert mod["main"].attrs.get("global_symbol") == "main"
    # Some Functions are unreachable from any entry point.
    callers: dict[str, list[str]] = {n: i.callees for n, i in infos.items()}
    entries = [gv.name_hint for gv, f in mod.items() if "global_symbol" in f.attrs]
    reach, stack = set(), list(entries)
    while stack:
        name = stack.pop()
        if name not in reach:
            reach.add(name)
            stack.extend(callers[name])
    assert len(reach) < len(mod)
    assert any(isinstance(mod[n], Function) for n in mod.names() if n not in reach)
    # Tensor constants (not only scalars) feed calls.
    assert any(
        isinstance(a, Constant) and a.shape
        for _, f in mod.items()
        if isinstance(f, Function)
        for b in f.bindings
        if isinstance(b.value, Call)
        for a in b.value.args
    )


def test_sizes_are_skewed() -> None:
    mod = random_module(400, num_prim_funcs=0, size=20, seed=1)
    infos = check_module(mod)
    sizes = sorted(info.bindings for info in infos.values())
    median, mean = statistics.median(sizes), statistics.fmean(sizes)
    assert median < mean, "a right-skewed distribution has its mean above its median"
    assert sizes[-1] >= 5 * median, "a few functions are much larger than the typical one"
    assert sum(s <= 10 for s in sizes) >= len(sizes) // 3, "many functions are small"
    assert 10 <= mean <= 40


def test_calls_are_acyclic_and_match_arity() -> None:
    mod = random_module(80, size=15, seed=2)
    names = mod.names()
    n_calls = 0
    for gv, func in mod.items():
        if not isinstance(func, Function):
            continue
        stack: list[Any] = [func.body]
        while stack:
            node = stack.pop()
            if isinstance(node, Call) and isinstance(node.op, GlobalVar):
                callee = mod[node.op]
                assert isinstance(callee, Function)
                assert len(callee.params) == len(node.args)
                assert names.index(node.op.name_hint) < names.index(gv.name_hint)
                n_calls += 1
            stack.extend(node.children())
    assert n_calls > 0


def test_names_readable_and_unique() -> None:
    mod = random_module(40, seed=4)
    names = mod.names()
    assert len(set(names)) == len(names)
    prim = [n for n in names if isinstance(mod[n], tir.PrimFunc)]
    assert prim and all(n.startswith("fused_") and n.rsplit("_", 1)[1].isdigit() for n in prim)
    assert "main" in names


def test_prim_funcs_are_typed_and_static() -> None:
    mod = random_module(0, num_prim_funcs=30, size=20, seed=9)
    for _, func in mod.items():
        assert isinstance(func, tir.PrimFunc)
        bufs = [p for p in func.params if isinstance(p, tir.Buffer)]
        assert bufs and all(all(isinstance(d, tir.IntImm) and 1 <= d.value <= 8 for d in b.shape) for b in bufs)
    check_module(mod)
