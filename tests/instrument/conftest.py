"""Fixtures for the instrument tests: a small module, and registries restored after each test."""

from registry_fixtures import _isolated_registries, mod

__all__ = ["_isolated_registries", "mod"]
