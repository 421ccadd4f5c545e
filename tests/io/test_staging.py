"""The intermediate store of a staged rechunk (tilegraph/io/staging.py): pieces written and
read back at the offsets the plan computes, through slabs of bounded size; handles of a
fixed few bytes; bytes that arrive from another process checked against their handle."""

from __future__ import annotations

import gc
import itertools
import os
import pickle
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilegraph.io import staging
from tilegraph.io.staging import (
    HANDLE_BYTES,
    STAGE_BUFFER,
    load_pieces,
    piece_offsets,
    slabs,
    stage_pieces,
)


@settings(max_examples=150, deadline=None)
@given(shape=st.lists(st.integers(0, 7), min_size=0, max_size=4),
       itemsize=st.sampled_from([1, 2, 8, 16]), limit=st.integers(1, 600))
def test_slabs_cover_the_array_in_order_each_contiguous_and_bounded(shape, itemsize, limit):
    shape = tuple(shape)
    x = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    position = 0
    for index, start, sshape in slabs(shape, itemsize, limit):
        part = x[index]
        assert part.shape == sshape
        assert part.flags.c_contiguous
        assert part.size * itemsize <= max(limit, itemsize) or index == ()
        assert start == position
        np.testing.assert_array_equal(part.reshape(-1), x.reshape(-1)[start:start + part.size])
        position += part.size
    assert position == x.size


def _cuts(shape, rng):
    """Each axis cut at random places: the per-axis slices and lengths."""
    per_axis = []
    for n in shape:
        points = sorted(set(rng.integers(0, n + 1, size=3).tolist()) | {0, n})
        per_axis.append([slice(a, b) for a, b in itertools.pairwise(points)] or
                        [slice(0, 0)])
    return per_axis


@pytest.mark.parametrize("dtype", ["float64", "int32", "complex128", "float32", "int8"])
@pytest.mark.parametrize("transposed", [False, True])
def test_pieces_read_back_at_the_planned_offsets(dtype, transposed, tmp_path, monkeypatch):
    """A block (contiguous or a transposed view) cut along every axis: each piece read at
    the offset :func:`piece_offsets` gives equals the block's; a block assembled from the
    pieces into places that are not contiguous, through slabs of a few bytes, equals it."""
    monkeypatch.setattr(staging, "STAGE_BUFFER", 48)
    rng = np.random.default_rng(3)
    x = (rng.random((9, 7, 5)) * 100).astype(dtype)
    if transposed:
        x = x.transpose(2, 0, 1)
    per_axis = _cuts(x.shape, rng)
    cuts = list(itertools.product(*per_axis))
    handle = stage_pieces(x, cuts, str(tmp_path))
    assert handle.stored_bytes == x.nbytes and handle.nbytes == HANDLE_BYTES
    starts = piece_offsets([[s.stop - s.start for s in axis] for axis in per_axis]).ravel()
    placements = []
    for k, cut in enumerate(cuts):
        np.testing.assert_array_equal(handle.piece(int(starts[k]) * x.itemsize, x[cut].shape),
                                      x[cut])
        placements.append((0, int(starts[k]) * x.itemsize, x[cut].shape, cut))
    out = load_pieces(x.shape, x.dtype, tuple(placements), handle)
    np.testing.assert_array_equal(out, x)


def test_a_large_piece_that_is_not_contiguous_moves_through_a_bounded_buffer(tmp_path):
    """Writing and reading a piece that is not contiguous (a column band of a block)
    allocates one slab at a time, never a copy of the piece."""
    x = np.random.default_rng(0).random((2048, 1024))  # 16 MiB
    cut = (slice(0, 2048), slice(0, 768))  # 12 MiB, not contiguous
    gc.collect()
    tracemalloc.start()
    try:
        handle = stage_pieces(x, [cut], str(tmp_path))
        _, written = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        out = load_pieces(x.shape, x.dtype, ((0, 0, (2048, 768), cut),), handle)
        _, read = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert written <= STAGE_BUFFER + (1 << 16)
    assert read <= x.nbytes + STAGE_BUFFER + (1 << 16)  # the block made, and one slab
    np.testing.assert_array_equal(out[:, :768], x[:, :768])


def test_a_handle_is_a_few_bytes_and_its_file_goes_with_it(tmp_path):
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        handles = [stage_pieces(np.ones(4), [(slice(0, 4),)], str(tmp_path))
                   for _ in range(200)]
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (after - before) / len(handles) <= HANDLE_BYTES
    paths = [h.path for h in handles]
    assert all(os.path.exists(p) for p in paths)
    del handles
    gc.collect()
    assert not any(os.path.exists(p) for p in paths)
    assert [p for p in tmp_path.iterdir()] == []  # the folder goes with its last handle


def test_bytes_that_arrive_are_checked_against_their_handle(tmp_path):
    """A payload whose bytes do not match the size its handle names (truncated or padded
    on the way, or made up) is refused, and nothing is written."""
    handle = stage_pieces(np.arange(6.0), [(slice(0, 6),)], str(tmp_path))
    func, args = handle.__reduce__()
    dtype, stored, data, parent = args
    assert pickle.loads(pickle.dumps(handle)).piece(0, (6,)).tolist() == list(range(6))
    for bad in (data[:-8], data + b"\0" * 8):
        with pytest.raises(ValueError, match="arrived with"):
            func(dtype, stored, bad, parent)


def test_a_read_outside_the_file_is_refused(tmp_path):
    handle = stage_pieces(np.arange(6.0), [(slice(0, 6),)], str(tmp_path))
    with pytest.raises(ValueError, match="holds 48 bytes"):
        handle.piece(8, (6,))
    with pytest.raises(ValueError, match="holds 48 bytes"):
        handle.piece(-8, (1,))
    with pytest.raises(ValueError, match="does not fit its place"):
        load_pieces((6,), np.float64, ((0, 0, (5,), (slice(0, 6),)),), handle)


def test_piece_offsets_of_a_block_cut_in_three_axes():
    got = piece_offsets([(1, 2), (3,), (2, 2)])
    sizes = [[[1 * 3 * 2, 1 * 3 * 2]], [[2 * 3 * 2, 2 * 3 * 2]]]
    flat = np.cumsum([0, *np.ravel(sizes)])[:-1]
    assert got.tolist() == flat.reshape(2, 1, 2).tolist()
