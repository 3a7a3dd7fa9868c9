"""Direct tests of the arithmetic analyzer's public API (:mod:`parpass.ir.arith`)."""

from __future__ import annotations

import numpy as np
import pytest

from parpass.ir import tir
from parpass.ir.arith import Arith, simplify_expr


def imm(value: int, dtype: str = "int32") -> tir.IntImm:
    return tir.IntImm(dtype, value)


def fimm(value: float) -> tir.FloatImm:
    return tir.FloatImm("float32", value)


VI = tir.Var(0, "i")
VJ = tir.Var(1, "j")
VX = tir.Var(2, "x", "float32")


def test_canonical_integer_sums() -> None:
    assert str(simplify_expr((VI + 1) * 8 - 8 + VJ)) == "%i * 8 + %j"
    assert str(simplify_expr(tir.Sub(VI, VI))) == "0"
    assert str(simplify_expr(tir.Add(tir.Mul(VI, imm(1)), imm(0)))) == "%i"


def test_unchanged_expression_keeps_its_identity() -> None:
    e = tir.Add(VI, VJ)
    assert simplify_expr(e) is e


def test_integer_folding_wraps_like_c() -> None:
    assert simplify_expr(tir.Add(imm(2147483647), imm(1))) == imm(-2147483648)
    assert simplify_expr(tir.Mul(imm(200, "uint8"), imm(2, "uint8"))) == imm(144, "uint8")


def test_floor_division_rounds_down_and_division_by_zero_is_not_folded() -> None:
    assert simplify_expr(tir.FloorDiv(imm(-7), imm(2))) == imm(-4)
    assert simplify_expr(tir.FloorMod(imm(-7), imm(2))) == imm(1)
    assert str(simplify_expr(tir.FloorDiv(imm(7), imm(0)))) == "7 // 0"
    assert str(simplify_expr(tir.FloorDiv(VI, imm(0)))) == "%i // 0"


def test_bound_ranges_decide_comparisons_and_divisions() -> None:
    arith = Arith()
    arith.bind_range(VI, 0, 15)
    arith.bind_range(VJ, 0, 7)
    assert arith.simplify(tir.LT(VI, imm(16))) == imm(1, "bool")
    assert str(arith.simplify(tir.LT(VI, imm(8)))) == "%i < 8"  # depends on i: kept
    assert str(arith.simplify(tir.FloorDiv(VI * 8 + VJ, imm(8)))) == "%i"
    assert str(arith.simplify(tir.FloorMod(VI * 8 + VJ, imm(8)))) == "%j"
    assert arith.dtype_of(tir.LT(VI, imm(1))) == "bool"


def test_bind_range_is_clamped_to_the_dtype() -> None:
    arith = Arith()
    arith.bind_range(VI, -(10**30), 10**30)
    assert arith.ranges[VI.vid] == (-(2**31), 2**31 - 1)


def test_let_bound_variable_gives_its_range() -> None:
    arith = Arith()
    n = tir.Var(3, "n")
    arith.bind_range(VJ, 0, 7)
    arith.bind_let(n, arith.simplify(VJ + 8))
    assert arith.simplify(tir.LT(n, imm(16))) == imm(1, "bool")
    assert arith.simplify(tir.FloorDiv(n, imm(8))) == imm(1)


def test_bound_value_is_substituted() -> None:
    arith = Arith()
    arith.bind_value(VI, arith.simplify(imm(3)))
    assert arith.substitutes(VI)
    assert not arith.substitutes(VJ)
    assert arith.simplify(VI + 1) == imm(4)


def test_float_folding_in_the_dtype_precision_and_only_when_finite() -> None:
    folded = simplify_expr(tir.Add(fimm(0.1), fimm(0.2)))
    assert isinstance(folded, tir.FloatImm)
    assert folded.value == float(np.float32(0.1) + np.float32(0.2))
    assert str(simplify_expr(tir.Mul(fimm(3e38), fimm(10.0)))) == "3e+38 * 10.0"  # inf: not folded


def test_float_identities_that_nan_or_signed_zero_break_are_not_applied() -> None:
    assert str(simplify_expr(tir.Mul(VX, fimm(0.0)))) == "%x * 0.0"  # NaN * 0 and -1 * 0 are not 0.0
    assert str(simplify_expr(tir.Sub(VX, VX))) == "%x - %x"  # NaN - NaN is NaN
    assert str(simplify_expr(tir.EQ(VX, VX))) == "%x == %x"  # NaN == NaN is false
    assert str(simplify_expr(tir.Not(tir.LT(VX, fimm(1.0))))) == "not %x < 1.0"  # not NaN < 1 is not NaN >= 1
    assert str(simplify_expr(tir.Not(tir.LT(VI, VJ)))) == "%i >= %j"  # integers: negated


def test_exact_float_identities_are_applied() -> None:
    assert simplify_expr(tir.Mul(VX, fimm(1.0))) is VX
    assert simplify_expr(tir.Add(VX, fimm(0.0))) is VX  # as -fno-signed-zeros (documented)


def test_not_a_loop_level_expression_is_an_error() -> None:
    buffer = tir.Buffer(5, "A", "float32", (imm(4),), ())
    with pytest.raises(TypeError, match="is not a loop-level expression"):
        simplify_expr(buffer)  # type: ignore[arg-type]  # deliberately not a PrimExpr
