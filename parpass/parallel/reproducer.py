"""Crash reproducers: one file holding what a failed parallel pass needs to fail again in-process.

The file holds the failing function names, the module (the context the pass
saw), the pickled passes of the wave and the pass context's settings. Re-run it
with ``python -m parpass.parallel.reproducer FILE``: it applies the passes, in
order and in-process, to the failing functions, and says whether the failure
is still there.
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import cloudpickle
import msgspec

from parpass.errors import IRFormatError
from parpass.ir.module import IRModule
from parpass.ir.serialization import from_bytes, to_bytes
from parpass.parallel.pickling import dumps_for_workers

MAGIC = "parpass-reproducer"
VERSION = 1


class _File(msgspec.Struct, array_like=True):
    magic: str
    version: int
    message: str
    functions: list[str]
    module: bytes
    passes: bytes
    context: bytes


@dataclass
class Reproducer:
    """A loaded reproducer."""

    message: str
    functions: list[str]
    module: IRModule
    passes: list[Any]
    context: Any  # PassContextSnapshot


def write_reproducer(
    path: str, mod: IRModule, passes: Sequence[Any], snapshot: Any, functions: list[str], message: str
) -> None:
    """Write the reproducer atomically (a temporary file renamed into place)."""
    data = msgspec.msgpack.encode(
        _File(
            MAGIC,
            VERSION,
            message,
            functions,
            to_bytes(mod),
            dumps_for_workers(list(passes)),
            dumps_for_workers(snapshot),
        )
    )
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".parpass-repro-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_reproducer(path: str) -> Reproducer:
    """Read a reproducer file; IRFormatError naming the file if it is not one."""
    try:
        with open(path, "rb") as handle:
            raw = msgspec.msgpack.decode(handle.read(), type=_File)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise IRFormatError(f"{path}: not a parpass reproducer ({err})") from err
    if raw.magic != MAGIC:
        raise IRFormatError(f"{path}: not a parpass reproducer (magic {raw.magic!r})")
    if raw.version != VERSION:
        raise IRFormatError(f"{path}: reproducer format version {raw.version}, this parpass reads {VERSION}")
    module = from_bytes(raw.module)
    if not isinstance(module, IRModule):
        raise IRFormatError(f"{path}: the reproducer's module is a single function, not a module")
    return Reproducer(raw.message, raw.functions, module, cloudpickle.loads(raw.passes), cloudpickle.loads(raw.context))


def reproduce(repro: Reproducer) -> BaseException | None:
    """Apply the passes to the failing functions in-process; the exception they raise, or None."""
    from parpass.parallel.worker import applies
    from parpass.transform.context import PassContext
    from parpass.transform.executor import view_reason

    ctx = PassContext.from_snapshot(repro.context)
    current = repro.module
    names = repro.functions or current.names()
    try:
        with ctx:
            for p in repro.passes:
                view = current.read_only_view(view_reason(p.info.name))
                updates = {}
                for name in names:
                    func = current[name]
                    if applies(p, func):
                        updates[name] = p.transform_one(func, name, view, ctx)
                current = current.copy()
                for name, func in updates.items():
                    current[name] = func
    except Exception as err:
        return err
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m parpass.parallel.reproducer FILE``: exit 1 if the failure reproduces, 0 if not."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m parpass.parallel.reproducer FILE", file=sys.stderr)
        return 2
    repro = load_reproducer(args[0])
    print(f"reproducing: {repro.message}")
    error = reproduce(repro)
    if error is None:
        print("the failure did not reproduce in-process")
        return 0
    traceback.print_exception(type(error), error, error.__traceback__)
    print(f"reproduced: {type(error).__name__}: {error}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
