"""PLACEHOLDER (being written): structural equality and hashing."""
from __future__ import annotations


def structural_equal(a, b, map_free_vars=False):  # type: ignore[no-untyped-def]
    raise NotImplementedError


def structural_hash(x, map_free_vars=False):  # type: ignore[no-untyped-def]
    raise NotImplementedError


def assert_structural_equal(a, b, map_free_vars=False):  # type: ignore[no-untyped-def]
    raise NotImplementedError
