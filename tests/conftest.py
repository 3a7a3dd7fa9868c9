"""Root of the test suite: puts ``tests/`` on ``sys.path`` so that ``support`` is importable."""
