"""Block sizes as dask chooses them: normalize_chunks with "auto" and sizes in bytes per
axis, with and without a rechunk's current blocks, against dask's own function for many
shapes, dtypes and limits; rechunk("auto") giving dask's blocks; bad input."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from dask.array.core import normalize_chunks as dask_normalize

import tilegraph as tg
from tilegraph.array.chunks import AUTO_BLOCK_BYTES, normalize_chunks

SHAPES = [(1000, 1000), (4096, 8192), (100, 200, 300), (7,), (10000,), (3, 1000000),
          (365, 721, 1440), (50, 60, 70, 80)]
LIMITS = [None, 1000, 80_000, "1 MiB", 64 * 2**20]


def _specs(shape):
    yield "auto"
    yield "100 kB"
    if len(shape) > 1:
        yield (-1,) + ("auto",) * (len(shape) - 1)
        yield ("auto",) + (7,) * (len(shape) - 1)
        yield ("10 MB",) + (None,) * (len(shape) - 1)


def _previous(shape, k):
    return None if k is None else tuple(dask_normalize(max(1, s // k), (s,))[0]
                                        for s in shape)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_auto_and_byte_sizes_give_dasks_blocks(shape):
    compared = 0
    for dtype, limit, spec, k in itertools.product(["f8", "f4", "i1", "c16"], LIMITS,
                                                   list(_specs(shape)), [None, 3, 17]):
        previous = _previous(shape, k)
        try:
            want = dask_normalize(spec, shape, limit=limit, dtype=dtype,
                                  previous_chunks=previous)
        except ValueError:  # dask refuses a byte size that disagrees with limit=
            with pytest.raises(ValueError, match="must agree"):
                normalize_chunks(spec, shape, dtype, limit=limit, previous_chunks=previous)
            continue
        got = normalize_chunks(spec, shape, dtype, limit=limit, previous_chunks=previous)
        assert got == want, (shape, dtype, limit, spec, k)
        compared += 1
    assert compared > 50


def test_the_default_limit_is_dasks_chunk_size():
    import dask

    assert AUTO_BLOCK_BYTES == dask.utils.parse_bytes(dask.config.get("array.chunk-size"))


@pytest.mark.parametrize(("shape", "chunks", "dtype"), [
    ((365, 721, 1440), (10, 721, 1440), "f4"), ((2000, 3000), (100, 100), "f8"),
    ((10000, 10000), (1000, 10), "f8"), ((400, 500), (7, 500), "i2"),
    ((800, 900, 100), (800, 30, 10), "f8")])
def test_rechunk_auto_gives_dasks_blocks(shape, chunks, dtype, forbid_compute):
    import dask.array as da

    theirs = da.zeros(shape, chunks=chunks, dtype=dtype)
    ours = tg.zeros(shape, chunks=chunks, dtype=dtype)
    assert ours.rechunk("auto").chunks == theirs.rechunk("auto").chunks
    assert ours.rechunk({0: "auto"}).chunks == theirs.rechunk({0: "auto"}).chunks
    assert ours.rechunk(("auto", None) + (-1,) * (len(shape) - 2)).chunks == \
        theirs.rechunk(("auto", None) + (-1,) * (len(shape) - 2)).chunks


def test_per_axis_byte_sizes_in_creation_and_rechunk(forbid_compute):
    x = tg.ones((4000, 30, 20), chunks=("1 MB", None, None))
    assert x.chunks[1:] == ((30,), (20,))
    assert max(x.chunks[0]) * 30 * 20 * 8 <= 1_000_000
    y = x.rechunk((None, "auto", -1))
    assert y.chunks[0] == x.chunks[0] and y.chunks[2] == (20,)
    a = np.arange(60.0).reshape(6, 10)
    z = tg.from_numpy(a, chunks=("160B", -1))
    assert z.chunks == ((2, 2, 2), (10,))


def test_bad_chunks_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="must agree"):
        normalize_chunks(("1 MB", "2 MB"), (10, 10))
    with pytest.raises(TypeError, match="cannot read 'bogus'"):
        normalize_chunks(("auto", "bogus"), (10, 10))
    with pytest.raises(ValueError, match="smaller than one element"):
        normalize_chunks("4B", (10,), "f8")
    with pytest.raises(TypeError, match="Python objects"):
        normalize_chunks("auto", (10,), object)
    with pytest.raises(ValueError, match="previous_chunks"):
        normalize_chunks("auto", (10, 10), previous_chunks=((10,),))
    assert normalize_chunks(("auto", "auto"), (0, 5)) == ((0,), (5,))
    assert normalize_chunks("auto", (2,), "i1", previous_chunks=((0, 0, 2),)) == ((2,),)
