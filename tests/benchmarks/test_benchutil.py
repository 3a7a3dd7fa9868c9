"""The benchmarks' shared helpers: the core burner always dies, the line fit and the ratio summaries are right."""

from __future__ import annotations

import py_compile
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from benchutil import _cached, burning_one_core, bytecode_state, fit_line, mark, median_ratio, module_digest
from support import alive, make_module, relax_func, wait_gone

from parpass.ir import IRModule

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_burner_runs_inside_and_is_killed_after() -> None:
    with burning_one_core() as burner:
        pid = burner.pid
        assert alive(pid)
    assert burner.returncode is not None
    assert not alive(pid)


def test_burner_is_killed_when_the_body_raises() -> None:
    pid = None
    with pytest.raises(KeyboardInterrupt), burning_one_core() as burner:
        pid = burner.pid
        raise KeyboardInterrupt
    assert pid is not None
    assert not alive(pid)


def test_burner_ends_by_itself_when_its_parent_is_killed() -> None:
    # A parent killed with SIGKILL runs no cleanup: the burner must notice and stop on its own.
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from benchutil import burning_one_core\n"
        "with burning_one_core() as b:\n"
        "    print(b.pid, flush=True)\n"
        "    import time; time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code, str(BENCHMARKS)], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    burner_pid = int(parent.stdout.readline())
    assert alive(burner_pid)
    parent.kill()
    parent.wait()
    assert not wait_gone([burner_pid])


def _cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().split(") ", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime, in clock ticks


def test_burner_really_burns_cpu() -> None:
    # Its CPU time keeps growing while it runs (however busy the machine is, it gets some).
    with burning_one_core() as burner:
        samples = [_cpu_ticks(burner.pid)]
        while len(set(samples)) < 3 and len(samples) < 2000:  # the bound only keeps a broken burner from hanging
            time.sleep(0.05)
            samples.append(_cpu_ticks(burner.pid))
    assert len(set(samples)) == 3 and samples == sorted(samples)


def test_fit_line_recovers_an_exact_line() -> None:
    fixed, slope = fit_line([(200, 0.002 + 200 * 3e-6), (1000, 0.002 + 1000 * 3e-6), (2000, 0.002 + 2000 * 3e-6)])
    assert fixed == pytest.approx(0.002)
    assert slope == pytest.approx(3e-6)


def test_fit_line_is_least_squares_on_noisy_points() -> None:
    fixed, slope = fit_line([(0, 1.0), (1, 2.0), (2, 2.0), (3, 4.0)])
    assert slope == pytest.approx(0.9)
    assert fixed == pytest.approx(0.9)


def test_fit_line_needs_two_distinct_sizes() -> None:
    with pytest.raises(ValueError, match="two different"):
        fit_line([(100, 1.0), (100, 2.0)])
    with pytest.raises(ValueError, match="two different"):
        fit_line([])


def test_median_ratio_pairs_samples_in_order() -> None:
    assert median_ratio([2.0, 4.0, 9.0], [1.0, 1.0, 3.0]) == pytest.approx(3.0)
    with pytest.raises(ValueError, match="same number"):
        median_ratio([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="no samples"):
        median_ratio([], [])


def test_mark_says_whether_a_ratio_meets_its_target() -> None:
    assert mark(1.51, 1.5) == "1.51x ok"
    assert mark(0.94, 0.95) == "0.94x MISS"


def test_module_digest_tells_modules_apart_by_their_bytes() -> None:
    a = make_module()
    assert module_digest(a) == module_digest(make_module())
    b = IRModule({**{name: a[name] for name in a.names()}, "f": relax_func(2)})
    assert module_digest(a) != module_digest(b)
    assert module_digest(a) != module_digest(a.with_attr("target", "elsewhere"))  # attributes count too


def test_sigterm_ends_the_body_through_its_cleanup() -> None:
    code = (
        "import sys, time; sys.path.insert(0, sys.argv[1])\n"
        "from benchutil import burning_one_core, sigterm_as_exit\n"
        "try:\n"
        "    with sigterm_as_exit(), burning_one_core() as b:\n"
        "        print(b.pid, flush=True)\n"
        "        time.sleep(60)\n"
        "finally:\n"
        "    print('burner ended' if b.returncode is not None else 'burner running', flush=True)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code, str(BENCHMARKS)], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    burner_pid = int(parent.stdout.readline())
    parent.terminate()
    rest = parent.stdout.read()
    assert parent.wait() == 128 + signal.SIGTERM
    assert rest.strip() == "burner ended"
    assert not alive(burner_pid)


def test_bytecode_counts_as_cached_only_where_the_import_system_would_take_it(tmp_path: Path) -> None:
    """A cold run's timed span includes its imports: bench_cold says whether parpass's bytecode is cached."""
    source = tmp_path / "mod.py"
    source.write_text("x = 1\n")
    assert not _cached(source)
    py_compile.compile(str(source))
    assert _cached(source)
    source.write_text("x = 22\n")  # edited since: another size (and mtime), so the pyc is stale
    assert not _cached(source)
    assert bytecode_state().startswith(("cached for every module", "compiled from source", "not cached yet"))
