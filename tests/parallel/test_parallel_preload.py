"""load_for_workers: a big module file checked mostly by the workers, with what load gives and its errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from parallel_support import module_bytes, parallel_ctx, probe_moves_at_once
from ptest_passes import count_bindings

from parpass.errors import IRFormatError
from parpass.ir import IRModule
from parpass.ir.serialization import from_bytes, load, to_bytes
from parpass.parallel import preload
from parpass.parallel.preload import load_for_workers
from parpass.testing import random_module

ALWAYS = {"parpass.num_workers": 2, "parpass.parallel": "always"}
AUTO = {"parpass.num_workers": 2}


@pytest.fixture
def any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file counts as big enough to be checked in the workers."""
    monkeypatch.setattr(preload, "CHECK_IN_WORKERS_BYTES", 0)


def _module() -> IRModule:
    mod = random_module(num_functions=12, num_prim_funcs=4, size=5, seed=7)
    skipped = mod.names()[3]
    mod[skipped] = mod[skipped].with_attr("SkipOptimization", True)  # no pass visits it: the check does
    return mod


def _saved(tmp_path: Path, mod: IRModule, bad: str | None = None) -> Path:
    """``mod`` in a file; with ``bad``, that function's bytes name a node tag no one knows (its head still reads)."""
    lazy = from_bytes(to_bytes(mod), validate=False)
    assert isinstance(lazy, IRModule)
    if bad is not None:
        data = lazy.encoded_function(bad)
        tag = b"Binding" if b"Binding" in data else b"BufferStore"
        lazy.set_encoded_function(bad, data.replace(tag, tag[:-1] + b"x", 1))
    path = tmp_path / "m.msgpack"
    path.write_bytes(to_bytes(lazy))
    return path


def test_a_big_file_is_checked_in_the_workers_who_keep_what_they_decoded(tmp_path, history, any_size) -> None:  # type: ignore[no-untyped-def]
    mod = _module()
    path = _saved(tmp_path, mod)
    out = load_for_workers(str(path), ALWAYS)
    assert isinstance(out, IRModule)
    assert module_bytes(out) == module_bytes(mod)
    check = history[-1]
    assert check.passes == ("CheckDecodes",) and check.parallel and check.functions == len(mod.names())
    assert check.misses == len(mod.names())  # each decoded once, in a worker
    with parallel_ctx():
        counted = count_bindings(out)
    first = history[-1]
    with parallel_ctx(1):
        assert module_bytes(counted) == module_bytes(count_bindings(mod))
    # every function resident, but for those a worker took from the other's queue (and so decodes)
    assert first.parallel and first.hits > 0 and first.misses <= first.stolen
    assert first.hits + first.misses == first.functions


@pytest.mark.parametrize("config", [ALWAYS, AUTO], ids=["in workers", "probed first"])
@pytest.mark.parametrize("which", [0, 3, -1], ids=["first", "skipped by passes", "last"])
def test_a_function_that_does_not_decode_gives_the_error_load_gives(  # type: ignore[no-untyped-def]
    tmp_path, history, any_size, monkeypatch, config, which
) -> None:
    """Where it is decoded (here, by the probe, or in a worker) the message is load's: file, function, place."""
    mod = _module()
    path = _saved(tmp_path, mod, bad=mod.names()[which])
    if config is AUTO:
        probe_moves_at_once(monkeypatch)  # the first function is decoded here, the rest in the workers
    with pytest.raises(IRFormatError) as expected:
        load(path)
    with pytest.raises(IRFormatError) as got:
        load_for_workers(str(path), config)
    assert str(got.value) == str(expected.value)
    assert str(path) in str(got.value) and f"@{mod.names()[which]}" in str(got.value)


@pytest.mark.parametrize("config", [{"parpass.num_workers": 1}, {**ALWAYS, "parpass.parallel": "never"}])
def test_a_run_that_keeps_its_passes_in_process_checks_in_process(tmp_path, history, any_size, config) -> None:  # type: ignore[no-untyped-def]
    path = _saved(tmp_path, _module())
    out = load_for_workers(str(path), config)
    assert isinstance(out, IRModule)
    assert not history and all(out.is_decoded(name) for name in out.names())  # load's check keeps them decoded


def test_a_small_file_is_checked_in_process(tmp_path, history) -> None:  # type: ignore[no-untyped-def]
    path = _saved(tmp_path, _module())
    assert path.stat().st_size < preload.CHECK_IN_WORKERS_BYTES
    out = load_for_workers(str(path), ALWAYS)
    assert isinstance(out, IRModule)
    assert not history and all(out.is_decoded(name) for name in out.names())


def test_a_file_holding_one_function_or_no_file(tmp_path, history, any_size) -> None:  # type: ignore[no-untyped-def]
    mod = _module()
    func = mod[mod.names()[0]]
    path = tmp_path / "f.msgpack"
    path.write_bytes(to_bytes(func))
    assert load_for_workers(str(path), ALWAYS) == func
    with pytest.raises(IRFormatError, match="no such file"):
        load_for_workers(str(tmp_path / "none.msgpack"), ALWAYS)
    assert not history


def test_a_format_whose_reader_decodes_every_function_is_not_checked_again(tmp_path, history, any_size) -> None:  # type: ignore[no-untyped-def]
    from parpass.ir.serialization import save

    mod = _module()
    save(mod, tmp_path / "m.json")
    out = load_for_workers(str(tmp_path / "m.json"), ALWAYS)
    assert isinstance(out, IRModule) and module_bytes(out) == module_bytes(mod)
    assert not history  # JSON's reader decoded (and checked) them all: no wave ships them to be decoded again
