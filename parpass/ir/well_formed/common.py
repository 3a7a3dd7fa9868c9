"""What the dataflow and the loop-level checkers share: the known dtypes and how a variable is named."""

from __future__ import annotations

from typing import Any

from parpass.ir.builtin_ops import DTYPES
from parpass.ir.dtype import INT_RANGE

#: Every dtype a type, buffer, variable or immediate may have (a vector's base included).
KNOWN_DTYPES = frozenset(DTYPES)
#: The signed and unsigned integer dtypes: loop variables, indices and buffer dimensions.
INT_DTYPES = frozenset(d for d in DTYPES if d.startswith(("int", "uint")))
#: The values an integer immediate of each dtype may hold.
INT_RANGES: dict[str, tuple[int, int]] = {**INT_RANGE, "bool": (0, 1)}


def var_name(var: Any) -> str:
    """The name of ``var`` in a message, or ``?`` when it is not a variable (in ill-formed IR)."""
    return str(getattr(var, "name_hint", "?"))
