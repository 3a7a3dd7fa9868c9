"""DumpIR: one file per pass run, with the module's text after the pass (a file ``load`` reads back)."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from parpass.instrument.base import PassInstrument
from parpass.instrument.module_text import ModuleText

if TYPE_CHECKING:
    from parpass.ir.module import IRModule
    from parpass.transform.pass_info import PassInfo

__all__ = ["DumpIR"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
#: The extension of dump files: the text form, a registered file format (``parpass show`` and ``load`` read them).
DUMP_EXTENSION = ".txt"
_DUMP_FILE = re.compile(r"^\d{3,}_.*" + re.escape(DUMP_EXTENSION) + "$")


def _file_part(name: str) -> str:
    return _UNSAFE.sub("_", name).strip(".") or "pass"


class DumpIR(PassInstrument):
    """Writes ``<dump_dir>/<NNN>_<pass name>.txt`` after every pass run (TVM's ``DumpIR``).

    ``NNN`` is a counter of this instrument's pass runs, zero-padded to three
    digits (more when needed), so the files sort in run order and the names are
    the same on every run of the same pipeline. ``refresh=True`` first removes
    earlier dump files (only files named like dumps) from ``dump_dir``.
    Vetoed and failed passes write nothing. A dump is written by the text
    format's writer from the table ``load`` reads with, so ``load(dump)`` gives
    the module back.
    """

    def __init__(self, dump_dir: str | os.PathLike[str], refresh: bool = False) -> None:
        self.dump_dir = Path(dump_dir)
        self.counter = 0
        self._lock = threading.Lock()
        self._texts = ModuleText()
        if refresh and self.dump_dir.is_dir():
            for entry in sorted(self.dump_dir.iterdir()):
                if entry.is_file() and _DUMP_FILE.match(entry.name):
                    entry.unlink()

    def __getstate__(self) -> dict[str, object]:
        return {"dump_dir": self.dump_dir, "counter": self.counter}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.dump_dir = Path(state["dump_dir"])
        self.counter = int(state["counter"])
        self._lock = threading.Lock()
        self._texts = ModuleText()

    def exit_pass_ctx(self) -> None:
        self._texts.clear()  # the text of a whole module: not kept beyond the context

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        with self._lock:
            index = self.counter
            self.counter += 1
        from parpass.ir.parser import text_bytes, write_text
        from parpass.ir.serialization import FORMATS

        writer, _ = FORMATS[DUMP_EXTENSION]
        # parpass's text, each function printed once while it stays the same; a writer registered in its place
        # writes the module itself
        data = text_bytes(self._texts.text(mod)) if writer is write_text else writer(mod)
        self.dump_dir.mkdir(parents=True, exist_ok=True)
        path = self.dump_dir / f"{index:03d}_{_file_part(info.name)}{DUMP_EXTENSION}"
        path.write_bytes(data)
