"""Parsing relax constants: ``const(values, "dtype")`` and ``const(b64"...", "dtype", shape)``."""

from __future__ import annotations

import base64
import binascii
from typing import Any

import numpy as np

from parpass.ir import relax
from parpass.ir.parser.core import _ParserCore
from parpass.ir.parser.tokens import _CONST_WORDS, _INT_RE, _NUMBER_RE, describe


class _ConstScan:
    """The state of :meth:`_ConstantParser.const_values`: values so far and the nesting seen."""

    __slots__ = ("counts", "dims", "leaf_depth", "start", "values", "where")

    def __init__(self, start: int) -> None:
        self.start = start
        self.values: list[str] = []
        self.where: list[int] = []
        self.counts: list[int] = []  # elements so far of each open list
        self.dims: dict[int, int] = {}  # depth -> length of the lists closed at that depth
        self.leaf_depth = -1


class _ConstantParser(_ParserCore):
    """Relax constants (values checked against the dtype, nesting against a regular shape)."""

    def constant(self) -> relax.Constant:
        """``const(values, "dtype")`` or ``const(b64"...", "dtype", shape)``."""
        self.expect("const")
        self.expect("(", "after const")
        toks = self.toks
        k = self.i
        tok = toks[k]
        if tok.startswith('b64"'):
            try:
                data = base64.b64decode(tok[4:-1], validate=True)
            except (binascii.Error, ValueError) as exc:
                self.fail(f"bad base64 data: {exc}", k, shift=4)
            self.i = k + 1
            self.expect(",", "after the constant's data")
            dtype = self.dtype_string(False)
            self.expect(",", "after the constant's dtype")
            shape = self.int_shape()
            self.expect(")", "to close const(...)")
            return relax.Constant(data, dtype, shape)
        k0 = self.i
        values, where, shape = self.const_values()
        self.expect(",", "after the constant's values")
        kd = self.i
        dtype = self.dtype_string(False)
        self.expect(")", "to close const(...)")
        dt = np.dtype(dtype)
        if dt.byteorder not in "|<":
            dt = dt.newbyteorder("<")
        converted: list[Any]
        if dt.kind == "b":
            bad = [n for n, text in enumerate(values) if text != "true" and text != "false"]
            if bad:
                self.fail(f"a constant of dtype {dtype} holds true or false, got {values[bad[0]]!r}", where[bad[0]])
            converted = [text == "true" for text in values]
        else:
            numeric = _INT_RE.match if dt.kind in "iu" else _NUMBER_RE.match
            bad = [n for n, text in enumerate(values) if not numeric(text)]
            if bad:
                kind = "integers" if dt.kind in "iu" else "numbers"
                self.fail(f"a constant of dtype {dtype} holds {kind}, got {values[bad[0]]!r}", where[bad[0]])
            try:
                converted = [int(t) for t in values] if dt.kind in "iu" else [float(t) for t in values]
            except ValueError as exc:  # an integer with more digits than int() converts
                self.fail(f"bad constant value: {exc}", k0)
        try:
            data = np.asarray(converted, dtype=dt).tobytes()
        except (OverflowError, ValueError) as exc:
            self.fail(f"constant values do not fit {dtype}: {exc}", kd)
        return relax.Constant(data, dtype, shape)

    def const_values(self) -> tuple[list[str], list[int], tuple[int, ...]]:
        """A scalar, or a regular nested list, of true/false/numbers.

        Returns the value texts (a negative number with its ``-``), the token index
        of each, and the shape. One loop over tokens with a stack of element counts.
        """
        toks = self.toks
        scan = _ConstScan(self.i)
        want_value = True
        while True:
            if want_value:
                if toks[self.i] == "[":
                    self.i += 1
                    scan.counts.append(0)
                    want_value = toks[self.i] != "]"  # an empty list is closed at once
                    continue
                self._const_run(scan)
                if not scan.counts:
                    return scan.values, scan.where, ()
                want_value = False
                continue
            tok = toks[self.i]
            if tok == ",":
                self.i += 1
                want_value = True
                continue
            if tok != "]":
                self.fail(f"expected ',' or ']' in constant values, got {describe(tok)}")
            self.i += 1
            shape = self._const_close(scan)
            if shape is not None:
                return scan.values, scan.where, shape
            scan.counts[-1] += 1

    def _const_run(self, scan: _ConstScan) -> None:
        """Values separated by commas (at least one), up to the end of their list or a nested ``[``."""
        toks = self.toks
        i = self.i
        values = scan.values
        where = scan.where
        counts = scan.counts
        depth = len(counts)
        while True:
            where.append(i)
            raw = tok = toks[i]
            if raw == "-":
                i += 1
                raw = toks[i]
                tok = "-" + raw
            if not ("0" <= raw[0] <= "9" or raw in _CONST_WORDS):
                self.fail(f"expected a constant value (true, false or a number), got {describe(raw)}", i)
            values.append(tok)
            i += 1
            if depth != scan.leaf_depth:
                self._const_depth(scan, depth)
            if not counts:
                break
            counts[-1] += 1
            if toks[i] != "," or toks[i + 1] == "[":
                break
            i += 1
        self.i = i

    def _const_depth(self, scan: _ConstScan, depth: int) -> None:
        """The first value sets the depth of all values: later ones and closed lists must agree."""
        if scan.leaf_depth >= 0:
            self.fail("ragged constant: values are nested to different depths", scan.where[-1])
        scan.leaf_depth = depth
        if any(d >= depth for d in scan.dims):
            self.fail("ragged constant: values are nested to different depths", scan.where[-1])

    def _const_close(self, scan: _ConstScan) -> tuple[int, ...] | None:
        """Close the innermost list (just after its ``]``): the shape once the outermost closes, else None."""
        n = scan.counts.pop()
        depth = len(scan.counts)
        dims = scan.dims
        if dims.setdefault(depth, n) != n:
            self.fail("ragged constant: lists of one level have different lengths", scan.start)
        if 0 <= scan.leaf_depth <= depth:
            self.fail("ragged constant: values are nested to different depths", scan.start)
        if scan.counts:
            return None
        ndim = scan.leaf_depth if scan.leaf_depth >= 0 else len(dims)
        if any(d not in dims for d in range(ndim)):
            self.fail("ragged constant: empty lists at different depths", scan.start)
        return tuple(dims[d] for d in range(ndim))
