"""The ``parpass`` command: ``bench``, ``opt``, ``gen``, ``show`` and ``reproduce`` (see :mod:`parpass.cli.main`)."""
