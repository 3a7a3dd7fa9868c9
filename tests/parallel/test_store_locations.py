"""Where a function's bytes lie in the result stores (store, offset, length), and a module's functions held as
regions of a store (sliced out when first read)."""

from __future__ import annotations

import gc

from parpass.ir import IRModule
from parpass.parallel.store import location_store, pack_locations, store_number, unpack_locations
from parpass.testing import random_module


def test_a_location_unpacks_to_its_store_offset_and_length() -> None:
    first = pack_locations("/scratch/a.bin", [0, 17, 1 << 45], [17, 5, (1 << 40) + 1])
    second = pack_locations("/scratch/b.bin", [3], [4])
    assert unpack_locations([*first, *second], ["/scratch/b.bin", "/scratch/a.bin"]) == (
        [1, 1, 1, 0],
        [0, 17, 1 << 45, 3],
        [17, 5, (1 << 40) + 1, 4],
    )
    assert location_store(first[1]) == "/scratch/a.bin" and location_store(second[0]) == "/scratch/b.bin"
    gc.collect()
    assert not any(map(gc.is_tracked, first))  # untracked once collected: nothing for the collector to walk


def test_a_location_not_placed_or_in_a_store_not_live_unpacks_to_none() -> None:
    placed = pack_locations("/scratch/c.bin", [0, 8], [8, 8])
    assert unpack_locations([placed[0], None], ["/scratch/c.bin"]) is None
    assert unpack_locations(placed, ["/scratch/other.bin"]) is None
    assert unpack_locations([], []) == ([], [], [])


def test_a_store_keeps_its_number_and_no_two_stores_share_one() -> None:
    assert store_number("/scratch/d.bin") == store_number("/scratch/d.bin")
    assert store_number("/scratch/d.bin") != store_number("/scratch/e.bin")
    assert location_store((1 << 200, 0, 1)) is None  # a number never given


def test_functions_held_as_regions_of_one_buffer_read_as_their_own_bytes() -> None:
    mod = random_module(num_functions=4, num_prim_funcs=1, size=4, seed=3)
    names = mod.names()
    blobs = [mod.encoded_function(name) for name in names]
    whole = memoryview(b"".join(blobs))
    starts = [sum(map(len, blobs[:i])) for i in range(len(blobs))]
    merged = mod.copy()
    heads = [mod.kind_and_attrs(name) for name in names]
    merged.set_encoded_regions(
        names, [whole] * len(names), starts, list(map(len, blobs)), [None] * 5, [None] * 5, heads
    )
    assert [merged.cached_size(name) for name in names] == list(map(len, blobs))
    assert not any(merged.is_decoded(name) for name in names)
    assert [merged.encoded_function(name) for name in names] == blobs
    assert isinstance(merged, IRModule) and [merged[name] for name in names] == [mod[name] for name in names]


def test_a_store_is_extended_ahead_so_its_reader_maps_it_again_only_when_it_doubled(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The parent maps a store whole: a file extended ahead of its writes is mapped again far less often than
    at every answer, and every blob reads back as written."""
    from parpass.parallel.store import StoreReader, StoreWriter

    writer = StoreWriter("store-test-")
    path, (first,) = writer.append(str(tmp_path), 1 << 30, [b"a" * 100])
    reader = StoreReader(path)
    assert bytes(reader.view(first, 100)) == b"a" * 100
    mapping = reader._view
    blobs = [bytes([i]) * (1000 + i) for i in range(50)]
    _, offsets = writer.append(str(tmp_path), 1 << 30, blobs)
    assert [bytes(reader.view(o, len(b))) for o, b in zip(offsets, blobs, strict=True)] == blobs
    assert reader._view is mapping  # within the extent: not mapped again
    big = b"z" * (3 << 20)
    _, (far,) = writer.append(str(tmp_path), 1 << 30, [big])
    assert bytes(reader.view(far, len(big))) == big and reader._view is not mapping
    assert writer.size == far + len(big)
    writer.close()
