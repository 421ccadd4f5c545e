"""tilegraph.ma's names from dask.array.ma beyond the masks: *_like, where, nonzero and
set_fill_value, against numpy.ma on uneven blocks."""

from __future__ import annotations

import numpy as np
import pytest

import tilegraph as tg

rng = np.random.default_rng(41)
A = rng.standard_normal((7, 5))
MASK = rng.random((7, 5)) > 0.6


def masked(dtype=np.float64):
    return tg.ma.masked_array(tg.from_numpy(A.astype(dtype), chunks=(3, 2)),
                              mask=tg.from_numpy(MASK, chunks=(3, 2)))


def same(got, want):
    value = got.compute()
    np.testing.assert_array_equal(np.ma.getmaskarray(value), np.ma.getmaskarray(want))
    np.testing.assert_allclose(value.filled(0), np.ma.filled(want, 0))
    assert value.dtype == want.dtype


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32])
def test_likes_where_nonzero(dtype):
    m = masked(dtype)
    ref = np.ma.masked_array(A.astype(dtype), MASK)
    same(tg.ma.zeros_like(m), np.ma.zeros_like(ref))
    same(tg.ma.ones_like(m), np.ma.ones_like(ref))
    assert tg.ma.empty_like(m, dtype=np.int8).dtype == np.int8
    cond = tg.from_numpy(A > 0, chunks=(3, 2))
    same(tg.ma.where(cond, m, tg.ma.masked_equal(m, 0)), np.ma.where(A > 0, ref,
                                                                      np.ma.masked_equal(ref,
                                                                                         0)))
    same(tg.ma.where(cond, m, 5), np.ma.where(A > 0, ref, 5))
    for g, w in zip(tg.ma.nonzero(m), np.ma.nonzero(ref), strict=True):
        np.testing.assert_array_equal(g.compute(), w)
    for g, w in zip(tg.ma.where(m > 0), np.ma.where(ref > 0), strict=True):
        np.testing.assert_array_equal(g.compute(), w)


def test_set_fill_value():
    m = masked()
    tg.ma.set_fill_value(m, -7.0)
    out = m.compute()
    assert out.fill_value == -7.0
    np.testing.assert_array_equal(m.filled().compute(), np.where(MASK, -7.0, A))
    tg.ma.set_fill_value(tg.ones(3), 1.0)  # nothing to set on an array without a mask
    with pytest.raises(TypeError, match="not a valid fill value"):
        tg.ma.set_fill_value(masked(np.int32), "x")
    with pytest.raises(TypeError, match="both x and y"):
        tg.ma.where(m > 0, m)
