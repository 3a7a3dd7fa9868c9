"""Root of the test suite: puts ``tests/`` on ``sys.path`` so that ``support`` is importable, and sets the
hypothesis profile: no per-example deadline (CI machines are shared and noisy; timing is for benchmarks)."""

from hypothesis import HealthCheck, settings

settings.register_profile("parpass", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("parpass")
