"""WellFormedInstrument: check the IR before and after every pass (TVM's ``WellFormedInstrument``).

Add it to a context to catch the pass that breaks the IR at the moment it does::

    with PassContext(instruments=[WellFormedInstrument()]):
        mod = pipeline(mod)

Before each pass it checks the module the pass is given, after it the module the
pass returned, with :func:`parpass.ir.well_formed.well_formed`; any problem raises
:class:`~parpass.errors.IRError` naming the pass, whether the IR was already
ill-formed before it or became so after it, and every problem found.

Checking every function twice per pass would cost a whole-module walk each time,
so the instrument remembers which functions it found well-formed. Functions are
immutable: the same function object, calling the same callee objects, has the
same problems. Only functions a pass changed (or whose callees it changed) are
checked again, which keeps a long pipeline on a 2,000-function module cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from parpass.errors import IRError
from parpass.instrument.base import PassInstrument
from parpass.ir.well_formed import format_problems, function_problems

if TYPE_CHECKING:
    from parpass.ir.module import IRModule
    from parpass.ir.node import BaseFunc
    from parpass.transform.pass_info import PassInfo

__all__ = ["WellFormedInstrument"]


class _Entry:
    """The cached result of checking one function object."""

    __slots__ = ("callees", "func", "problems")

    def __init__(self, func: BaseFunc, callees: tuple[tuple[str, BaseFunc | None], ...], problems: list[str]) -> None:
        self.func = func  # kept alive, so identity comparisons stay valid
        self.callees = callees
        self.problems = problems


class WellFormedInstrument(PassInstrument):
    """Raises :class:`~parpass.errors.IRError` when a pass receives or returns ill-formed IR.

    TVM's arguments, with TVM's meaning (``tvm.relax.ir.instrument.WellFormedInstrument``):

    * ``check_ty`` (default True): check types (inferred types against
      annotations, argument types of calls, ...). False leaves them out, as
      TVM's ``check_ty=False`` does, and checks only the structure. Unlike
      TVM's, True does not require every binding to carry a type: parpass IR
      carries types only where known (InferType fills them in).
    * ``validate_before_transform`` (default True): also check the module a pass
      is given (this catches IR that was ill-formed from the start, or that an
      earlier pass outside this context broke); False checks only after.

    ``check_before`` is parpass's name for ``validate_before_transform`` (give
    either; both must agree when both are given); ``check_after=False`` skips
    the check after each pass, which TVM always makes.
    """

    def __init__(
        self,
        check_ty: bool = True,
        validate_before_transform: bool | None = None,
        *,
        check_before: bool | None = None,
        check_after: bool = True,
    ) -> None:
        both = check_before is not None and validate_before_transform is not None
        if both and bool(check_before) != bool(validate_before_transform):
            raise TypeError(
                f"WellFormedInstrument: check_before={check_before!r} and "
                f"validate_before_transform={validate_before_transform!r} disagree "
                "(they are the same switch; give one)"
            )
        before = check_before if check_before is not None else validate_before_transform
        self._check_ty = bool(check_ty)
        self.check_before = True if before is None else bool(before)
        self.check_after = bool(check_after)
        self._cache: dict[str, _Entry] = {}
        #: Number of functions actually checked (not answered from the cache); for tests and tuning.
        self.functions_checked = 0

    @property
    def check_ty(self) -> bool:
        """Whether types are checked (TVM's ``check_ty``); setting it forgets the cached results."""
        return self._check_ty

    @check_ty.setter
    def check_ty(self, value: bool) -> None:
        self._check_ty = bool(value)
        self._cache.clear()

    @property
    def validate_before_transform(self) -> bool:
        """TVM's name for :attr:`check_before`: whether the module a pass is given is checked."""
        return self.check_before

    @validate_before_transform.setter
    def validate_before_transform(self, value: bool) -> None:
        self.check_before = bool(value)

    def __getstate__(self) -> dict[str, object]:
        # The cache is a per-process memo: never ship it (instruments may be pickled to workers).
        return {"check_ty": self.check_ty, "check_before": self.check_before, "check_after": self.check_after}

    def __setstate__(self, state: dict[str, object]) -> None:
        WellFormedInstrument.__init__(
            self,
            bool(state.get("check_ty", True)),
            check_before=bool(state["check_before"]),
            check_after=bool(state["check_after"]),
        )

    def enter_pass_ctx(self) -> None:
        self._cache.clear()

    def exit_pass_ctx(self) -> None:
        self._cache.clear()

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        if self.check_before:
            self._check(mod, f"before pass {info.name!r} (the pass was given ill-formed IR)")

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        if self.check_after:
            self._check(mod, f"after pass {info.name!r} (the pass produced ill-formed IR)")

    def problems(self, mod: IRModule) -> list[str]:
        """The well-formedness problems of ``mod``, reusing results for unchanged functions."""
        out: list[str] = []
        cache = self._cache
        live: set[str] = set()
        for gv, func in mod.items():
            name = gv.name_hint
            live.add(name)
            entry = cache.get(name)
            if entry is None or entry.func is not func or not _callees_unchanged(mod, entry):
                found, callees = function_problems(func, name, mod, check_types=self.check_ty)
                self.functions_checked += 1
                snapshot = tuple((c, _function_or_none(mod, c)) for c in callees)
                entry = _Entry(func, snapshot, found)
                cache[name] = entry
            out.extend(entry.problems)
        for name in [n for n in cache if n not in live]:
            del cache[name]
        return out

    def _check(self, mod: IRModule, when: str) -> None:
        found = self.problems(mod)
        if found:
            raise IRError(format_problems(found, header=f"ill-formed IR {when}"))


def _function_or_none(mod: IRModule, name: str) -> BaseFunc | None:
    if name not in mod:  # IRModule has no .get: a missing name raises a KeyError naming the closest
        return None
    return mod[name]


def _callees_unchanged(mod: IRModule, entry: _Entry) -> bool:
    for name, func in entry.callees:
        if func is None:
            if name in mod:
                return False
        elif name not in mod or mod[name] is not func:
            return False
    return True
