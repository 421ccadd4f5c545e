"""tg.ma against numpy.ma: building, arithmetic with masks combined and invalid results
masked, reductions over all axes and one (all-masked cases included), weighted averages,
uneven blocks, several dtypes, and bad input."""

from __future__ import annotations

import numpy as np
import pytest

import tilegraph as tg


def _same(got, want):
    got = got.compute() if hasattr(got, "compute") else got
    if want is np.ma.masked:
        assert got is np.ma.masked
        return
    if np.ndim(want) == 0:
        np.testing.assert_allclose(got, want, rtol=1e-6)
        return
    want = np.ma.asarray(want)
    assert isinstance(got, np.ma.MaskedArray)
    np.testing.assert_array_equal(np.ma.getmaskarray(got), np.ma.getmaskarray(want))
    np.testing.assert_allclose(got.filled(0), want.filled(0), rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_masked_arrays_equal_numpy_ma(dtype):
    rng = np.random.default_rng(2)
    a = (rng.random((11, 7)) * 20 - 5).astype(dtype)
    b = (rng.random((11, 7)) * 4).astype(dtype)
    x, y = tg.from_numpy(a, chunks=(4, 3)), tg.from_numpy(b, chunks=(5, 2))
    ma, mb = np.ma.masked_greater(a, 10), np.ma.masked_less(b, 1)
    tx, ty = tg.ma.masked_greater(x, 10), tg.ma.masked_less(y, 1)
    _same(tx, ma)
    _same(tx + ty, ma + mb)
    _same(tx * 2 - 1, ma * 2 - 1)
    _same(3 - tx, 3 - ma)
    _same(tx / ty, ma / mb)            # b == 0 is masked, as numpy.ma does
    _same(tx > 4, ma > 4)
    _same(tx.T, ma.T)
    _same(tx[2:9, 1:], ma[2:9, 1:])
    for axis in (None, 0, 1):
        _same(tx.sum(axis=axis), ma.sum(axis=axis))
        _same(tx.mean(axis=axis), ma.mean(axis=axis))
        _same(tx.max(axis=axis), ma.max(axis=axis))
        _same(tx.min(axis=axis), ma.min(axis=axis))
        _same(tx.var(axis=axis), ma.var(axis=axis))
        _same(tx.std(axis=axis, ddof=1), ma.std(axis=axis, ddof=1))
        np.testing.assert_array_equal(tx.count(axis=axis).compute(), ma.count(axis=axis))
    np.testing.assert_array_equal(tx.filled(-7).compute(), ma.filled(-7))
    np.testing.assert_array_equal(tg.ma.getmaskarray(tx).compute(), np.ma.getmaskarray(ma))
    w = rng.random(7)
    _same(tg.ma.average(tx, axis=1, weights=w), np.ma.average(ma, axis=1, weights=w))
    _same(tg.ma.average(tx), np.ma.average(ma))


def test_all_masked_reductions_invalid_values_and_builders():
    a = np.array([[1.0, np.nan, 3.0, np.inf], [5.0, 6.0, -1.0, 8.0], [9.0, 9.0, 9.0, 9.0]])
    x = tg.from_numpy(a, chunks=(2, 3))
    m = tg.ma.masked_invalid(x)
    _same(m, np.ma.masked_invalid(a))
    _same(np.sqrt(m), np.ma.sqrt(np.ma.masked_invalid(a)))
    _same(np.log(m), np.ma.log(np.ma.masked_invalid(a)))
    every = tg.ma.masked_array(x, mask=True)     # everything masked
    assert every.sum().compute() is np.ma.masked
    assert every.max().compute() is np.ma.masked
    assert every.var().compute() is np.ma.masked
    _same(every.mean(axis=0), np.ma.masked_array(a, mask=True).mean(axis=0))
    _same(tg.ma.masked_equal(x, 9.0), np.ma.masked_equal(a, 9.0))
    _same(tg.ma.masked_inside(x, 8, 2), np.ma.masked_inside(a, 8, 2))
    _same(tg.ma.masked_outside(x, 2, 8), np.ma.masked_outside(a, 2, 8))
    _same(tg.ma.masked_values(x, 6.0), np.ma.masked_values(a, 6.0))
    _same(tg.ma.masked_where(x > 5, x), np.ma.masked_where(a > 5, a))
    fixed = tg.ma.fix_invalid(x, fill_value=0.0)
    want = np.ma.fix_invalid(a, fill_value=0.0)
    _same(fixed, want)
    np.testing.assert_array_equal(fixed.data.compute(), want.data)
    _same(tg.ma.masked_array(np.ma.masked_less(a, 3)), np.ma.masked_less(a, 3))
    _same(tg.ma.masked_array(x, mask=a > 5), np.ma.masked_array(a, mask=a > 5))


def test_bad_input_is_refused():
    x = tg.from_numpy(np.ones((4, 4)), chunks=2)
    with pytest.raises(ValueError, match="mask's shape"):
        tg.ma.masked_array(x, mask=np.zeros((3, 4), bool))
    with pytest.raises(ValueError, match="condition of shape"):
        tg.ma.masked_where(np.zeros(3, bool), x)
    with pytest.raises(ValueError, match="need axis="):
        tg.ma.average(tg.ma.masked_array(x), weights=np.ones(4))
    with pytest.raises(TypeError, match=r"call \.compute"):
        np.asarray(tg.ma.masked_array(x))
    with pytest.raises(TypeError, match="slices and integers"):
        tg.ma.masked_array(x)[x > 0]


def test_powers_mask_a_negative_base_to_a_fractional_exponent_as_numpy_ma():
    a = np.array([[-1.0, 4.0, 9.0], [2.0, -8.0, 3.0]])
    x = tg.ma.masked_array(tg.from_numpy(a, chunks=2))
    for e in (0.5, np.array([0.5, 2.0, 1.0]), 2,
              tg.from_numpy(np.array([[0.5, 2.0, 1.0], [1.5, 3.0, 0.5]]), chunks=2)):
        want_e = e.compute() if hasattr(e, "compute") else e
        _same(x ** e, np.ma.masked_array(a) ** want_e)
