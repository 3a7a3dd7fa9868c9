"""A worker opens a wave when the parent publishes it, before its first chunk comes (OpenWave)."""

from __future__ import annotations

from typing import Any

import pytest

from parpass.parallel import worker
from parpass.parallel.protocol import OpenWave, decode_to_worker, encode

pytestmark = pytest.mark.own_backend


class _File:
    def __init__(self, path: str) -> None:
        self.path = path
        self.closed = False

    def close(self) -> None:
        self.closed = True


class _OpenedWave:
    """Stands for worker._Wave: what a seat holds of the wave it serves."""

    opened: list[str] = []

    def __init__(self, file: _File, cache: Any) -> None:
        self.file = file
        _OpenedWave.opened.append(file.path)

    def close(self) -> None:
        self.file.close()


def _seat(missing: frozenset[str] = frozenset()) -> worker.Seat:
    def open_wave(path: str) -> _File:
        if path in missing:
            raise FileNotFoundError(path)
        return _File(path)

    return worker.Seat(0, progress=None, store=None, open_wave=open_wave)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _stub_wave(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker, "_Wave", _OpenedWave)
    _OpenedWave.opened = []


def test_the_message_round_trips() -> None:
    assert decode_to_worker(encode(OpenWave("/dev/shm/w.bin"))) == OpenWave("/dev/shm/w.bin")


def test_a_wave_opened_early_is_the_one_its_chunks_run_in() -> None:
    seat = _seat()
    worker.open_early(seat, "a")
    early = seat.wave
    assert early is not None and early.file.path == "a"
    assert seat.wave_of("a") is early  # the first chunk finds it open: not read again
    assert _OpenedWave.opened == ["a"]


def test_opening_the_next_wave_closes_the_last() -> None:
    seat = _seat()
    worker.open_early(seat, "a")
    first = seat.wave
    worker.open_early(seat, "b")
    assert first is not None and first.file.closed
    assert seat.wave is not None and seat.wave.file.path == "b"


def test_a_wave_that_cannot_be_opened_early_is_left_for_its_chunk_to_report() -> None:
    """A wave already over (its file withdrawn) or unreadable: nothing raised here, nothing left open; a chunk
    of it, should one come, meets the error and answers it (serve_chunk's WorkerFailure)."""
    seat = _seat(missing=frozenset({"gone"}))
    worker.open_early(seat, "a")
    before = seat.wave
    worker.open_early(seat, "gone")
    assert before is not None and before.file.closed
    assert seat.wave is None
    with pytest.raises(FileNotFoundError):
        seat.wave_of("gone")
