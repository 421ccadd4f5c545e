"""tg.blockwise against dask.array.blockwise and NumPy: elementwise with broadcasting,
transposes, contractions (lists of blocks and concatenate=True), new axes, adjusted block
sizes, literal arguments, uneven blocks, and bad input."""

from __future__ import annotations

import numpy as np
import pytest

import tilegraph as tg

da = pytest.importorskip("dask.array")


def _sum_dots(xs, ys):
    return sum(np.dot(a, b) for a, b in zip(xs, ys, strict=True))


def _outer(a, b):
    return a[:, None] * b[None, :]


def _rows(a, k):
    return np.repeat(a.sum(axis=1, keepdims=True), k, axis=1)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_blockwise_equals_dask_and_numpy(dtype):
    rng = np.random.default_rng(4)
    a = (rng.random((13, 9)) * 10).astype(dtype)
    b = (rng.random((9, 7)) * 10).astype(dtype)
    v = (rng.random(9) * 10).astype(dtype)
    x, y, w = (tg.from_numpy(a, chunks=(5, 4)), tg.from_numpy(b, chunks=(4, 3)),
               tg.from_numpy(v, chunks=4))
    dx, dy, dw = da.from_array(a, chunks=(5, 4)), da.from_array(b, chunks=(4, 3)), \
        da.from_array(v, chunks=4)
    cases = [
        ((np.add, "ij", x, "ij", w, "j"), (np.add, "ij", dx, "ij", dw, "j"), {}),
        ((np.transpose, "ji", x, "ij"), (np.transpose, "ji", dx, "ij"), {}),
        ((np.dot, "ik", x, "ij", y, "jk"), (np.dot, "ik", dx, "ij", dy, "jk"),
         {"concatenate": True}),
        ((_sum_dots, "ik", x, "ij", y, "jk"), (_sum_dots, "ik", dx, "ij", dy, "jk"), {}),
        ((_outer, "ij", w, "i", w, "j"), (_outer, "ij", dw, "i", dw, "j"), {}),
        ((np.multiply, "ij", x, "ij", 3, None), (np.multiply, "ij", dx, "ij", 3, None), {}),
    ]
    for ours, theirs, kw in cases:
        got = tg.blockwise(*ours, dtype=dtype, **kw)
        want = da.blockwise(*theirs, dtype=dtype, **kw)
        assert got.chunks == want.chunks, ours[0]
        np.testing.assert_allclose(got.compute(), want.compute(), rtol=1e-5)
    # without dtype=, it is found on one-element blocks
    assert tg.blockwise(np.add, "ij", x, "ij", w, "j").dtype == np.add(a, v).dtype


def test_new_axes_adjust_chunks_and_alignment():
    a = np.arange(24.0).reshape(6, 4)
    x = tg.from_numpy(a, chunks=(4, 2))
    got = tg.blockwise(_rows, "ik", x, "ij", new_axes={"k": 3}, concatenate=True, k=3,
                       dtype=float)
    assert got.shape == (6, 3) and got.chunks == ((4, 2), (3,))
    np.testing.assert_array_equal(got.compute(), _rows(a, 3))
    halves = tg.blockwise(lambda b: b[::2], "ij", x, "ij", adjust_chunks={"i": lambda n: n // 2},
                          dtype=float)
    assert halves.chunks == ((2, 1), (2, 2))
    np.testing.assert_array_equal(halves.compute(), np.concatenate([a[0:4:2], a[4:6:2]]))
    # arrays sharing an index with different blocks are aligned to a common refinement
    y = tg.from_numpy(a, chunks=(3, 4))
    s = tg.blockwise(np.add, "ij", x, "ij", y, "ij", dtype=float)
    assert s.chunks == ((3, 1, 2), (2, 2))
    np.testing.assert_array_equal(s.compute(), a + a)
    with pytest.raises(ValueError, match="different blocks"):
        tg.blockwise(np.add, "ij", x, "ij", y, "ij", dtype=float, align_arrays=False)


@pytest.mark.parametrize("call, err, match", [
    (lambda x: tg.blockwise(5, "ij", x, "ij"), TypeError, "is not callable"),
    (lambda x: tg.blockwise(np.add, "ij", x), TypeError, "in pairs"),
    (lambda x: tg.blockwise(np.add, "ij", x, "i"), ValueError, "names 1"),
    (lambda x: tg.blockwise(np.add, "ik", x, "ij"), ValueError, "output index 'k' is in no"),
    (lambda x: tg.blockwise(np.add, "ii", x, "ij"), ValueError, "repeats an index"),
    (lambda x: tg.blockwise(np.add, "ij", x, "ii"), ValueError, "diagonal"),
    (lambda x: tg.blockwise(np.add, "ij", x, "ij", x.T, "ij"), ValueError, "lengths"),
    (lambda x: tg.blockwise(np.add, "ij", x, 3), TypeError, "string or tuple"),
    (lambda x: tg.blockwise(lambda b: 1 / "a", "ij", x, "ij"), TypeError, "give dtype="),
    (lambda x: tg.blockwise(np.abs, "ij", x, "ij", adjust_chunks={"k": 1}), ValueError,
     "not an output index"),
])
def test_bad_input_is_refused_with_the_reason(call, err, match):
    x = tg.from_numpy(np.ones((4, 6)), chunks=2)
    with pytest.raises(err, match=match):
        call(x)


def test_isin_and_the_numpy_functions_xarray_calls_on_the_namespace():
    from tilegraph.array import array_api as xp

    rng = np.random.default_rng(3)
    a = rng.integers(0, 9, (7, 6))
    f = rng.random((7, 6))
    x, y = tg.from_numpy(a, chunks=(3, 4)), tg.from_numpy(f, chunks=(3, 4))
    for values, invert in (([1, 4, 8], False), (np.array([[2], [3]]), True),
                           (tg.from_numpy(np.array([0, 5]), chunks=1), False)):
        want = np.isin(a, np.asarray(values.compute() if hasattr(values, "compute")
                                     else values), invert=invert)
        np.testing.assert_array_equal(tg.isin(x, values, invert=invert).compute(), want)
        np.testing.assert_array_equal(xp.isin(x, values, invert=invert).compute(), want)
    np.testing.assert_allclose(xp.quantile(y, 0.3, axis=0).compute(),
                               np.quantile(f, 0.3, axis=0))
    np.testing.assert_allclose(xp.median(y, axis=1).compute(), np.median(f, axis=1))
    np.testing.assert_allclose(xp.cumsum(y, axis=1).compute(), np.cumsum(f, axis=1))
    np.testing.assert_allclose(xp.cumprod(y, axis=0).compute(), np.cumprod(f, axis=0))
    np.testing.assert_allclose(xp.gradient(y, axis=1).compute(), np.gradient(f, axis=1))
    g = f.copy()
    g[1, 2] = np.nan
    z = tg.from_numpy(g, chunks=(3, 4))
    np.testing.assert_allclose(xp.nanmedian(z, axis=0).compute(), np.nanmedian(g, axis=0))
    np.testing.assert_allclose(xp.nanquantile(z, 0.7, axis=1).compute(),
                               np.nanquantile(g, 0.7, axis=1))


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.complex64])
@pytest.mark.parametrize(("shape", "chunks"), [
    ((5, 42), None), ((30, 7), None), ((210,), None), ((5, 6, 7, 1), ((2, 2, 1), (4, 2),
                                                                     (3, 3, 1), (1,))),
])
def test_reshape_blockwise_matches_dask(dtype, shape, chunks):
    a = (np.arange(5 * 6 * 7) * 3 % 17).reshape(5, 6, 7).astype(dtype)
    x = tg.from_numpy(a, chunks=(2, 4, 3))  # uneven blocks on every axis
    d = da.from_array(a, chunks=(2, 4, 3))
    got = tg.reshape_blockwise(x, shape, chunks=chunks)
    want = da.reshape_blockwise(d, shape, chunks=chunks)
    assert got.chunks == want.chunks and got.dtype == want.dtype
    np.testing.assert_array_equal(got.compute(), want.compute())
    if chunks is None:  # and back again, block by block
        back = tg.reshape_blockwise(got, a.shape, chunks=x.chunks)
        assert back.chunks == x.chunks
        np.testing.assert_array_equal(back.compute(), a)


def test_reshape_blockwise_rechunks_an_input_cut_otherwise():
    a = np.arange(4 * 6).reshape(4, 6)
    x = tg.from_numpy(a, chunks=(3, 4))
    flat = tg.reshape_blockwise(x, (24,))
    assert flat.chunks == ((12, 6, 4, 2),)
    # a result computed column by column from ``flat`` comes cut differently (one block)
    one = flat.rechunk(-1)
    back = tg.reshape_blockwise(one, (4, 6), chunks=x.chunks)
    np.testing.assert_array_equal(back.compute(), a)


def test_reshape_blockwise_bad_input():
    x = tg.from_numpy(np.ones((4, 6)), chunks=(3, 4))
    with pytest.raises(ValueError, match="chunks= is for adding dimensions"):
        tg.reshape_blockwise(x, (24,), chunks=((12, 12),))
    with pytest.raises(ValueError, match="needs chunks="):
        tg.reshape_blockwise(x, (2, 2, 6))
    with pytest.raises(ValueError, match="as many dimensions"):
        tg.reshape_blockwise(x, (6, 4))
    with pytest.raises(ValueError, match="cannot be grouped"):
        tg.reshape_blockwise(tg.ones((4, 6, 5), chunks=2), (8, 15))
    with pytest.raises(ValueError, match="size 24"):
        tg.reshape_blockwise(x, (25,))
