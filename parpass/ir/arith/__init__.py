"""Arithmetic analysis of loop-level expressions (TVM's ``tvm.arith``), used by ``Simplify`` and open to any pass.

:class:`Arith` rewrites expressions with a small arithmetic engine:

* **Constant folding** with the semantics of the dtype: integer arithmetic wraps
  like C (two's complement), ``FloorDiv``/``FloorMod`` round toward negative
  infinity, division by zero is never folded (it stays an error at run time),
  floating-point operations are computed in the dtype's own precision (numpy) and
  folded only when the result is finite.
* **Canonical integer sums and products.** ``+``, ``-`` and ``*`` on scalar
  integers are flattened into a polynomial over *atoms* (variables, loads,
  divisions, ...), with coefficients reduced modulo ``2**bits``. That is exact:
  wrapping integers form a ring, so reassociating, commuting and distributing
  never changes a result. The polynomial is written back in a canonical order
  (variables by id, then other atoms by a structural digest; the constant last),
  so ``(i + 1) * 8 - 8 + j`` becomes ``i * 8 + j``, ``x - x`` becomes ``0`` and
  ``x * 1 + 0`` becomes ``x``. A product of two sums is distributed only when it
  gives at most 8 terms, otherwise it stays an atom.
* **Identities**: ``min(x, x)``, ``x // 1``, ``x % 1``, ``select`` with a constant
  condition or equal branches, ``not not x``, ``and``/``or`` with constants,
  casts to the same dtype, lane-wise folding of ``Broadcast`` operands and
  ``Ramp`` arithmetic.
* **Facts about variables**, given by the caller: a range (``bind_range``), a
  value that replaces every use (``bind_value``), or a let value whose range and
  polynomial ``FloorDiv``/``FloorMod`` see through (``bind_let``). With those
  ranges comparisons, ``min``/``max`` and divisions are decided by interval
  arithmetic: ``i < 16`` is true for ``i`` in ``[0, 15]``, ``(i * 8 + j) // 8`` is
  ``i`` when ``0 <= j < 8``. Integer ranges are tracked in exact integers and used
  only when an expression provably does not wrap.

Floating point: only exact folds are done, never reassociation. One exception,
as in TVM and C compilers' ``-fno-signed-zeros``: ``x + 0.0`` becomes ``x``, which
differs only in the sign of a zero result (``-0.0 + 0.0`` is ``+0.0``; the two
compare equal).

Results are memoized per expression object and unchanged subtrees keep their
identity. All walks are iterative (any depth).

Modules: :mod:`~parpass.ir.arith.dtypes` (integer widths, ranges, wrapping, node
dtypes), :mod:`~parpass.ir.arith.hashcons` (structural ids),
:mod:`~parpass.ir.arith.polynomial` (canonical sums), :mod:`~parpass.ir.arith.bounds`
(interval bounds and what they decide), :mod:`~parpass.ir.arith.rules` (rewrite
rules) and :mod:`~parpass.ir.arith.analyzer` (the walk, :class:`Arith`).
"""

from __future__ import annotations

from parpass.ir.arith.analyzer import Arith, simplify_expr

__all__ = ["Arith", "simplify_expr"]
