"""Pass statistics: named counters a pass increments while it runs, totalled per pass.

As LLVM's ``STATISTIC`` and MLIR's ``Pass::Statistic``: a pass declares its
counters once, at module level, and adds to them while it runs::

    FOLDED = Statistic("FoldConstant", "folded", "calls folded into constants")

    @function_pass(opt_level=2, name="FoldConstant")
    def fold_constant(func, mod, ctx):
        ...
        FOLDED.add(n)

Counting is on under a :class:`~parpass.transform.PassContext` whose config sets
``parpass.pass_statistics``; the totals are then read from
``ctx.pass_statistics`` (or by an instrument, from ``PassContext.current()``)
and ``parpass opt --pass-statistics`` prints them. Counts made in worker
processes are sent back with each function's results and added in the parent,
so the totals are those of a serial run at any worker count. With counting off,
``add`` is one thread-local read.

Counters are integers. A counter belongs to the pass it names, not to the pass
that happens to run it: counts made by a pass called from inside another pass
go to the inner pass's counters.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from parpass.transform.config import register_config_option

__all__ = ["PASS_STATISTICS", "PassStatistics", "Statistic", "counting", "declared_statistics"]

#: The config key that turns counting on.
PASS_STATISTICS = "parpass.pass_statistics"

register_config_option(
    PASS_STATISTICS,
    bool,
    default=False,
    doc="Count pass statistics (the Statistic counters passes declare) under this context; read the totals "
    "from ctx.pass_statistics, or print them with 'parpass opt --pass-statistics'.",
)

#: A counter's key: (pass name, counter name).
Key = tuple[str, str]

_LOCK = threading.Lock()
#: Declared counters: pass name -> {counter name: description}, in declaration order.
_DECLARED: dict[str, dict[str, str]] = {}


class _Sink(threading.local):
    """Where this thread's counts go now (None: nobody is counting)."""

    counts: dict[Key, int] | None = None


_SINK = _Sink()


def _check_name(value: object, what: str) -> str:
    if not isinstance(value, str) or not value or value != value.strip():
        raise ValueError(f"Statistic: {what} must be a non-empty name without surrounding spaces, got {value!r}")
    return value


class Statistic:
    """``Statistic(pass_name, name, description="")``: a counter of pass ``pass_name``, declared once.

    Declaring the same counter again with the same description is allowed (a
    module imported twice, a worker unpickling a pass); with another description
    it is an error.
    """

    __slots__ = ("_key", "description")

    def __init__(self, pass_name: str, name: str, description: str = "") -> None:
        key = (_check_name(pass_name, "the pass name"), _check_name(name, "the counter name"))
        if not isinstance(description, str):
            raise TypeError(f"Statistic {key[0]}.{key[1]}: description must be a str, got {description!r}")
        with _LOCK:
            counters = _DECLARED.setdefault(key[0], {})
            old = counters.get(key[1])
            if old is not None and old != description:
                raise ValueError(
                    f"Statistic {key[0]}.{key[1]} is declared already, as {old!r}; declared again as {description!r}"
                )
            counters[key[1]] = description
        self._key = key
        self.description = description

    @property
    def pass_name(self) -> str:
        return self._key[0]

    @property
    def name(self) -> str:
        return self._key[1]

    def add(self, count: int = 1) -> None:
        """Add ``count`` (an int) to this counter, if anyone is counting."""
        counts = _SINK.counts
        if counts is not None:
            if type(count) is not int:
                raise TypeError(f"Statistic {self._key[0]}.{self._key[1]}: add() takes an int, got {count!r}")
            key = self._key
            counts[key] = counts.get(key, 0) + count

    def __reduce__(self) -> tuple[type[Statistic], tuple[str, str, str]]:
        return (Statistic, (*self._key, self.description))

    def __repr__(self) -> str:
        return f"Statistic({self._key[0]!r}, {self._key[1]!r}, {self.description!r})"


def declared_statistics() -> dict[str, dict[str, str]]:
    """Every declared counter: ``{pass name: {counter name: description}}``."""
    with _LOCK:
        return {name: dict(counters) for name, counters in _DECLARED.items()}


def swap_sink(counts: dict[Key, int] | None) -> dict[Key, int] | None:
    """Send this thread's counts to ``counts`` (None: drop them) and return where they went before."""
    old = _SINK.counts
    _SINK.counts = counts
    return old


@contextmanager
def counting(counts: dict[Key, int] | None) -> Iterator[dict[Key, int] | None]:
    """Within the block, this thread's counts go to ``counts`` (None: nowhere)."""
    old = swap_sink(counts)
    try:
        yield counts
    finally:
        swap_sink(old)


def add_counts(items: Iterable[tuple[str, str, int]]) -> None:
    """Add counts made elsewhere (in a worker process) to where this thread's counts go now."""
    counts = _SINK.counts
    if counts is not None:
        for pass_name, name, value in items:
            key = (pass_name, name)
            counts[key] = counts.get(key, 0) + value


class PassStatistics:
    """The totals of the counters counted under one PassContext, by pass.

    Passes are listed in the order they first ran at the top level (not called
    from inside another pass), then any other pass that counted, by name; a
    pass's declared counters come first, in declaration order, zeros included.
    """

    __slots__ = ("_ran", "counts")

    def __init__(self) -> None:
        self.counts: dict[Key, int] = {}
        self._ran: dict[str, None] = {}

    def note_run(self, pass_name: str) -> None:
        """Record that ``pass_name`` ran (so that it is listed, with its declared counters, even at zero)."""
        self._ran.setdefault(pass_name, None)

    def clear(self) -> None:
        self.counts.clear()
        self._ran.clear()

    def __getitem__(self, key: Key) -> int:
        """``stats["FoldConstant", "folded"]``: a counter's total (0 if it never counted)."""
        return self.counts.get(key, 0)

    def as_dict(self) -> dict[str, dict[str, int]]:
        """``{pass name: {counter name: total}}``, in report order."""
        declared = declared_statistics()
        counted = {pass_name for pass_name, _ in self.counts}
        order = [p for p in self._ran if p in declared or p in counted]
        order += sorted(p for p in counted if p not in self._ran)
        out: dict[str, dict[str, int]] = {}
        for pass_name in order:
            names = list(declared.get(pass_name, {}))
            names += sorted(n for p, n in self.counts if p == pass_name and n not in declared.get(pass_name, {}))
            out[pass_name] = {n: self.counts.get((pass_name, n), 0) for n in names}
        return out

    def render(self) -> str:
        """The totals as MLIR's ``--mlir-pass-statistics-display=list`` prints them."""
        declared = declared_statistics()
        rule = "===" + "-" * 73 + "==="
        lines = [rule, " " * 25 + "... Pass statistics report ...", rule]
        table = self.as_dict()
        for pass_name, counters in table.items():
            lines.append(pass_name)
            width = max((len(str(v)) for v in counters.values()), default=1)
            for name, value in counters.items():
                about = declared.get(pass_name, {}).get(name, "")
                lines.append(f"  (S) {value:>{width}} {name}" + (f" - {about}" if about else ""))
        if not table:
            lines.append("(no pass statistics were counted)")
        return "\n".join(lines) + "\n"

    def __repr__(self) -> str:
        return f"PassStatistics({self.as_dict()!r})"
