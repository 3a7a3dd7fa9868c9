"""The error of a builder used inconsistently, shared by the dataflow and the loop-level builders."""

from __future__ import annotations

from parpass.errors import IRError

__all__ = ["BuilderError"]


class BuilderError(IRError):
    """A builder used inconsistently: a variable from elsewhere, a wrong arity, finishing twice, ..."""
