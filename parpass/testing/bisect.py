"""Finding the pass application that breaks a module: a bisection over opt-bisect limits.

:func:`bisect_pipeline` runs a pipeline under ``parpass.bisect_limit`` (see
:mod:`parpass.transform.bisect`) and asks a check about the result: with every
application (bad, or there is nothing to find), with none (good, or the input
itself fails), then halves the interval between the last good and the first bad
limit until they are one application apart, in O(log n) pipeline runs. The
runs use the installed executor, so workers run the function-level passes.

A check takes the module a run produced and returns None when it is good, else
why it is bad. Two are provided: :class:`MeaningCheck` (the default: every
function computes on random inputs what it computed in the input module, by
the reference interpreter) and :class:`CommandCheck` (a command that exits
non-zero on a bad module, as ``git bisect run`` takes).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shlex
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from parpass.ir.module import IRModule
from parpass.ir.node import BaseFunc
from parpass.parallel.config import MODE, NUM_WORKERS
from parpass.testing.interpreter import InterpreterError, Reference, meaning_difference, reference_run
from parpass.transform.bisect import BISECT_LIMIT, BISECT_PRINT, BisectDecision
from parpass.transform.context import PassContext
from parpass.transform.pass_info import PassInfo
from parpass.transform.passes import FunctionLevelPass, Pass

__all__ = [
    "EVERYTHING",
    "BisectReport",
    "Check",
    "CommandCheck",
    "MeaningChanged",
    "MeaningCheck",
    "bisect_pipeline",
    "worker_settings",
]


class Check(Protocol):
    """Says whether a module is good: None, or why it is bad."""

    def __call__(self, mod: IRModule) -> str | None: ...


# ---------------------------------------------------------------------------------------------------------------------
# checks


def _closure_keys(mod: IRModule) -> dict[str, bytes]:
    """Per function, a digest of its bytes and of the bytes of every function it reaches by calls: two
    functions with the same key compute the same thing."""
    own = {name: hashlib.blake2b(mod.encoded_buffer(name), digest_size=16).digest() for name in mod.names()}
    callees: dict[str, list[str]] = {}
    for name in mod.names():
        callees[name] = [c for c in mod.called_names(name) if c in own]  # from the bytes where the module holds them
    keys: dict[str, bytes] = {}
    for name in mod.names():
        reached = {name}
        stack = [name]
        while stack:
            for callee in callees[stack.pop()]:
                if callee not in reached:
                    reached.add(callee)
                    stack.append(callee)
        digest = hashlib.blake2b(digest_size=16)
        for reached_name in sorted(reached):
            digest.update(reached_name.encode() + b"\0" + own[reached_name])
        keys[name] = digest.digest()
    return keys


class MeaningChanged(AssertionError):
    """Function ``name`` does not compute what it computed before the passes (``problem`` says how)."""

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(name, problem)
        self.name, self.problem = name, problem

    def __str__(self) -> str:
        return self.problem


#: The module checks compare with (decoded once per process), and the reference runs made on it.
_ORIGINAL: dict[bytes, IRModule] = {}
_REFERENCES: dict[tuple[bytes, str], Reference | None] = {}


def _original(data: bytes, digest: bytes) -> IRModule:
    mod = _ORIGINAL.get(digest)
    if mod is None:
        from parpass.ir.serialization import from_bytes

        _ORIGINAL.clear()
        _REFERENCES.clear()
        decoded = from_bytes(data)
        assert isinstance(decoded, IRModule)
        mod = _ORIGINAL[digest] = decoded
    return mod


class _CompareMeaning(FunctionLevelPass):
    """A function-level pass that changes nothing and raises :class:`MeaningChanged` on each function of
    ``names`` whose meaning differs from the original's: a check that the executor spreads over the
    workers, reporting the first failure in module order."""

    def __init__(self, original: bytes, names: frozenset[str], seed: int, rtol: float, atol: float) -> None:
        super().__init__(_unchanged, PassInfo(0, "CompareMeaning"))
        self.original, self.names = original, names
        self.digest = hashlib.blake2b(original, digest_size=16).digest()
        self.seed, self.rtol, self.atol = seed, rtol, atol

    def transform_one(self, func: BaseFunc, name: str, mod: IRModule, ctx: PassContext) -> BaseFunc:
        if name not in self.names:
            return func
        original = _original(self.original, self.digest)
        with contextlib.redirect_stdout(io.StringIO()):  # what the functions print while interpreted
            key = (self.digest, name)
            if key not in _REFERENCES:
                try:
                    _REFERENCES[key] = reference_run(original, name, self.seed)
                except InterpreterError:
                    _REFERENCES[key] = None  # fails on its inputs before any pass: no meaning to keep
            ref = _REFERENCES[key]
            if ref is None:
                return func
            try:
                problem = meaning_difference(ref, mod, name, self.rtol, self.atol, self.seed)
            except Exception as err:  # IR the interpreter cannot run at all is bad IR too
                problem = f"function {name!r}: the interpreter failed on it: {type(err).__name__}: {err}"
        if problem is not None:
            raise MeaningChanged(name, problem)
        return func

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (_CompareMeaning, (self.original, self.names, self.seed, self.rtol, self.atol))


def _unchanged(func: BaseFunc, mod: IRModule, ctx: PassContext) -> BaseFunc:
    return func


#: Functions the interpreter check compares at least per wave (it stops at the first batch with a failure).
_BATCH = 64


def worker_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """What of a pipeline's config the interpreter check runs under: where it may run, nothing else."""
    return {key: config[key] for key in (NUM_WORKERS, MODE) if key in config}


class MeaningCheck:
    """Every function of the module computes what it computed in ``original`` (the reference interpreter,
    on the :func:`~parpass.testing.random_inputs` of ``seed``; floats within ``rtol``/``atol``).

    A function that fails on its inputs in ``original`` has no meaning to keep and is not compared; nor is a
    function ``original`` lacks. A function is run only when it, or a function it calls, differs from every
    version already found good, so a bisection interprets little more than the module twice. The functions
    run as a function-level pass under ``config`` (``parpass.num_workers`` and the like): in workers when
    that pays. Output the functions print while interpreted is dropped.
    """

    def __init__(
        self,
        original: IRModule,
        seed: int = 0,
        rtol: float = 0.0,
        atol: float = 0.0,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        from parpass.ir.serialization import to_bytes

        self.original = original
        self.seed, self.rtol, self.atol = seed, rtol, atol
        self.config = dict(config or {})
        self._data = to_bytes(original)
        self._original_keys: dict[str, bytes] | None = None
        self._good: set[tuple[str, bytes]] = set()
        self._suspects: list[str] = []  # functions found changed in meaning before, in the order found
        self.interpreted = 0  # functions compared after passes, for the report

    def __call__(self, mod: IRModule) -> str | None:
        if self._original_keys is None:
            self._original_keys = _closure_keys(self.original)
        original_keys = self._original_keys
        keys = _closure_keys(mod)
        names = [
            n
            for n in mod.names()
            if n in original_keys and original_keys[n] != keys[n] and (n, keys[n]) not in self._good
        ]
        # The functions that failed before first (a bisection keeps meeting the same one), then the rest
        # in batches of module order, so that a bad module is known without running every function.
        suspects = [n for n in self._suspects if n in names]
        suspected = set(suspects)
        rest = [n for n in names if n not in suspected]
        size = max(_BATCH, len(rest) // 8)
        batches = [suspects] if suspects else []
        batches += [rest[i : i + size] for i in range(0, len(rest), size)]
        for batch in batches:
            self.interpreted += len(batch)
            check = _CompareMeaning(self._data, frozenset(batch), self.seed, self.rtol, self.atol)
            try:
                with PassContext(opt_level=0, config=self.config):
                    check(mod)
            except MeaningChanged as bad:
                if bad.name not in self._suspects:
                    self._suspects.append(bad.name)
                # what comes before the first failure in module order was compared and found good
                if bad.name in batch:
                    self._good.update((n, keys[n]) for n in batch[: batch.index(bad.name)])
                return bad.problem
            self._good.update((n, keys[n]) for n in batch)
        return None


class CommandCheck:
    """A shell command that exits 0 on a good module: the module is written to a file in the format ``suffix``
    names, whose path replaces ``{module}`` in ``command`` (or is appended to it) and is in the environment
    as ``PARPASS_BISECT_MODULE``."""

    def __init__(self, command: str, suffix: str = ".msgpack", directory: str | None = None) -> None:
        if not command.strip():
            raise ValueError("the check command is empty")
        self.command = command
        self.suffix = suffix
        self.directory = directory

    def __call__(self, mod: IRModule) -> str | None:
        from parpass.ir.serialization import save

        with tempfile.TemporaryDirectory(prefix="parpass-bisect-", dir=self.directory) as scratch:
            path = os.path.join(scratch, "module" + self.suffix)
            save(mod, path)
            quoted = shlex.quote(path)
            command = (
                self.command.replace("{module}", quoted) if "{module}" in self.command else f"{self.command} {quoted}"
            )
            done = subprocess.run(
                command,
                shell=True,
                env={**os.environ, "PARPASS_BISECT_MODULE": path},
                capture_output=True,
                text=True,
                errors="replace",
                check=False,
            )
        if done.returncode == 0:
            return None
        said = (done.stderr.strip() or done.stdout.strip()).splitlines()
        return f"the check command exited with status {done.returncode}" + (f": {said[-1]}" if said else "")


# ---------------------------------------------------------------------------------------------------------------------
# the bisection


@dataclass
class BisectReport:
    """What a bisection found.

    ``first_bad`` is the first application after which the check fails (None when
    it never fails, or fails already with no application: ``fails_from_start``);
    ``reason`` what the check said of the first bad module; ``before`` and
    ``after`` the modules with one application less and with it (``after`` is None
    when that run raised: ``reason`` says what).
    """

    applications: int
    first_bad: BisectDecision | None = None
    fails_from_start: bool = False
    reason: str | None = None
    before: IRModule | None = None
    after: IRModule | None = None
    runs: int = 0
    seconds: float = 0.0
    #: every probe: (limit, good, seconds)
    probes: list[tuple[int, bool, float]] = field(default_factory=list)


#: A limit above any pipeline's count of applications: number them all, skip none.
#: A limit above any application count: every application runs.
EVERYTHING = 2**62


def bisect_pipeline(
    mod: IRModule,
    pipeline: Pass,
    check: Check | None = None,
    *,
    opt_level: int = 2,
    required_pass: Sequence[str] = (),
    disabled_pass: Sequence[str] = (),
    config: Mapping[str, Any] | None = None,
    progress: Callable[[int, bool, float], None] | None = None,
) -> BisectReport:
    """Find the first application of ``pipeline`` on ``mod`` after which ``check`` fails.

    ``check`` defaults to :class:`MeaningCheck` of ``mod``. Each run goes under a
    fresh PassContext of ``opt_level``, ``required_pass``, ``disabled_pass`` and
    ``config`` (``parpass.bisect_limit`` set by the bisection; nothing printed). A
    run that raises counts as bad. ``progress(limit, good, seconds)`` is called
    after every run. ``mod`` is not changed.
    """
    if check is None:
        check = MeaningCheck(mod, config=worker_settings(config or {}))
    began = time.perf_counter()
    report = BisectReport(0)
    # The applications below a probe's limit are those of earlier probes: their results are reused.
    memo: dict[tuple[object, ...], tuple[IRModule, IRModule]] = {}

    def probe(limit: int) -> tuple[IRModule | None, str | None, tuple[BisectDecision, ...]]:
        start = time.perf_counter()
        settings = {**(config or {}), BISECT_LIMIT: limit, BISECT_PRINT: False}
        ctx = PassContext(opt_level, required_pass, disabled_pass, config=settings)
        ctx.memoize_applications(memo)
        out: IRModule | None = None
        try:
            with ctx:
                out = pipeline(mod)
        except Exception as err:
            reason: str | None = f"the pipeline raised {type(err).__name__}: {err}"
        else:
            reason = check(out)
        seconds = time.perf_counter() - start
        report.runs += 1
        report.probes.append((limit, reason is None, seconds))
        if progress is not None:
            progress(limit, reason is None, seconds)
        return out, reason, ctx.bisect_log

    last, reason, log = probe(EVERYTHING)
    report.applications = len(log)
    if reason is None:
        report.seconds = time.perf_counter() - began
        return report
    bad_reason, bad_mod, bad_log = reason, last, log
    good_mod, reason, _ = probe(0)
    if reason is not None:
        report.fails_from_start, report.reason = True, reason
        report.seconds = time.perf_counter() - began
        return report
    lo, hi = 0, report.applications
    while hi - lo > 1:
        mid = (lo + hi) // 2
        out, reason, log = probe(mid)
        if reason is None:
            lo, good_mod = mid, out
        else:
            hi, bad_mod, bad_reason, bad_log = mid, out, reason, log
    report.first_bad = bad_log[hi - 1]
    report.reason = bad_reason
    report.before, report.after = good_mod, bad_mod
    report.seconds = time.perf_counter() - began
    return report
