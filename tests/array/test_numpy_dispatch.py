"""NumPy functions on tilegraph arrays (``__array_function__``/``__array_ufunc__``), each
against NumPy on uneven blocks, and the errors for what is not supported."""

from __future__ import annotations

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.algebra.demand import lower

rng = np.random.default_rng(11)
A = rng.standard_normal((9, 7))
A32 = A.astype(np.float32)
INTS = rng.integers(0, 20, (9, 7)).astype(np.int64)


def x_of(a, chunks=(4, 3)):
    return tg.from_numpy(a, chunks=chunks)


def check(got, want, rtol=1e-10):
    assert isinstance(got, tg.Array), type(got)
    value = got.compute()
    assert np.shape(value) == np.shape(want)
    np.testing.assert_allclose(value, want, rtol=rtol, atol=1e-12)


@pytest.mark.parametrize("a", [A, A32, INTS], ids=["f8", "f4", "i8"])
@pytest.mark.parametrize("axis", [0, 1, None])
def test_scans_sorts_and_order_statistics(a, axis):
    x = x_of(a)
    rtol = 1e-5 if a.dtype == np.float32 else 1e-10
    check(np.cumsum(x, axis=axis), np.cumsum(a, axis=axis), rtol)
    check(np.cumprod(x[:4] / 3 if a.dtype.kind == "f" else x[:4] % 3, axis=axis),
          np.cumprod(a[:4] / 3 if a.dtype.kind == "f" else a[:4] % 3, axis=axis), rtol)
    check(np.sort(x, axis=axis), np.sort(a, axis=axis))
    idx = np.argsort(x, axis=axis).compute()
    if axis is None:
        np.testing.assert_array_equal(a.ravel()[idx], np.sort(a, axis=None))
    else:
        np.testing.assert_array_equal(np.take_along_axis(a, idx, axis), np.sort(a, axis))
    check(np.median(x, axis=axis), np.median(a, axis=axis), rtol)
    check(np.percentile(x, [10, 50, 90], axis=axis), np.percentile(a, [10, 50, 90], axis=axis),
          rtol)
    check(np.quantile(x, 0.3, axis=axis), np.quantile(a, 0.3, axis=axis), rtol)
    check(np.maximum.accumulate(x, axis=0 if axis is None else axis),
          np.maximum.accumulate(a, axis=0 if axis is None else axis))


def test_sample_sort_is_blocked_not_gathered():
    a = rng.standard_normal(1000)
    x = tg.from_numpy(a, chunks=100)
    s = np.sort(x)
    graph = lower([s.collection]).build()
    assert max(s.chunks[0]) < 1000  # ten output blocks of about 100, not one
    assert graph.meta["kind"].count("sort") == 20  # a partition and a merge per block
    np.testing.assert_array_equal(s.compute(), np.sort(a))
    d = np.concatenate([a, a[:300]])  # ties between blocks, argsort stable
    xd = tg.from_numpy(d, chunks=130)
    np.testing.assert_array_equal(np.argsort(xd).compute(), np.argsort(d, kind="stable"))


def test_unique_histogram_bincount():
    x = x_of(INTS)
    for got, want in zip(np.unique(x, return_index=True, return_inverse=True,
                                   return_counts=True),
                         np.unique(INTS, return_index=True, return_inverse=True,
                                   return_counts=True), strict=True):
        np.testing.assert_array_equal(got.compute(), want)
    h, e = np.histogram(x_of(A), bins=5)
    hw, ew = np.histogram(A, bins=5)
    np.testing.assert_array_equal(h.compute(), hw)
    np.testing.assert_allclose(e, ew)
    h, e = np.histogram(x_of(A), bins=[-1, 0, 0.5, 3], weights=x_of(A32), density=True)
    hw, _ = np.histogram(A, bins=[-1, 0, 0.5, 3], weights=A32, density=True)
    np.testing.assert_allclose(h.compute(), hw, rtol=1e-5)
    flat = tg.from_numpy(INTS.ravel(), chunks=10)
    check(np.bincount(flat), np.bincount(INTS.ravel()))
    check(np.bincount(flat, weights=flat * 0.5, minlength=40),
          np.bincount(INTS.ravel(), weights=INTS.ravel() * 0.5, minlength=40))


def test_nan_reductions():
    a = A.copy()
    a[1, 2] = a[5, 5] = a[8, 0] = np.nan
    x = x_of(a)
    for f in (np.nansum, np.nanprod, np.nanmin, np.nanmax, np.nanmean, np.nanvar, np.nanstd,
              np.nanargmin, np.nanargmax, np.nanmedian, np.nancumsum):
        for axis in (0, 1, None):
            check(f(x, axis=axis), f(a, axis=axis))
    check(np.nanpercentile(x, 25, axis=0), np.nanpercentile(a, 25, axis=0))
    check(np.nanquantile(x, [0.2, 0.7]), np.nanquantile(a, [0.2, 0.7]))


def test_statistics_and_shapes():
    x, y = x_of(A), x_of(A + 1)
    check(np.cov(x), np.cov(A))
    check(np.cov(x, rowvar=False, ddof=0), np.cov(A, rowvar=False, ddof=0))
    check(np.corrcoef(x, y), np.corrcoef(A, A + 1))
    check(np.cov(x[0], x[1]), np.cov(A[0], A[1]))
    check(np.diff(x), np.diff(A))
    check(np.diff(x, n=2, axis=0, prepend=0), np.diff(A, n=2, axis=0, prepend=0))
    check(np.vstack([x, y]), np.vstack([A, A + 1]))
    check(np.hstack([x, y]), np.hstack([A, A + 1]))
    check(np.dstack([x, y]), np.dstack([A, A + 1]))
    check(np.column_stack([x[:, 0], x[:, 1]]), np.column_stack([A[:, 0], A[:, 1]]))
    check(np.clip(x, -0.5, 0.5), np.clip(A, -0.5, 0.5))
    check(np.round(x, 2), np.round(A, 2))
    check(np.isclose(x, x + 1e-9), np.isclose(A, A + 1e-9))
    assert np.allclose(x, A) and not np.allclose(x, A + 1)
    assert bool(np.array_equal(x, A)) and not np.array_equal(x, A[:2])
    check(np.average(x, axis=0, weights=np.arange(9.0)), np.average(A, 0, np.arange(9.0)))
    check(np.ptp(x, axis=1), np.ptp(A, axis=1))
    check(np.squeeze(x[:1]), np.squeeze(A[:1]))
    check(np.expand_dims(x, (0, 2)), np.expand_dims(A, (0, 2)))
    check(np.moveaxis(x[None], 0, -1), np.moveaxis(A[None], 0, -1))
    check(np.flip(x), np.flip(A))
    check(np.broadcast_to(x[0], (3, 7)), np.broadcast_to(A[0], (3, 7)))
    check(np.count_nonzero(x > 0, axis=0), np.count_nonzero(A > 0, axis=0))
    check(np.trace(x[:7]), np.trace(A[:7]))
    check(np.zeros_like(x), np.zeros_like(A))
    check(np.searchsorted(np.sort(x[:, 0]), x[0]), np.searchsorted(np.sort(A[:, 0]), A[0]))


def test_linalg_dispatches_to_tilegraph_linalg():
    s = A[:7] @ A[:7].T + 7 * np.eye(7)
    x = x_of(s, 3)
    b = x_of(A[:7, :2], (3, 2))
    check(np.linalg.solve(x, b), np.linalg.solve(s, A[:7, :2]), 1e-8)
    check(np.linalg.inv(x), np.linalg.inv(s), 1e-8)
    check(np.linalg.cholesky(x), np.linalg.cholesky(s), 1e-8)
    check(np.linalg.det(x), np.linalg.det(s), 1e-8)
    check(np.linalg.norm(x), np.linalg.norm(s), 1e-8)
    sv = np.linalg.svd(x, compute_uv=False)
    np.testing.assert_allclose(sv.compute(), np.linalg.svd(s, compute_uv=False), rtol=1e-8)


def test_unsupported_functions_name_the_alternative_or_compute():
    x = x_of(A[:7, :7])
    with pytest.raises(TypeError, match=r"numpy.linalg.eig is not supported.*svd"):
        np.linalg.eig(x)
    with pytest.raises(TypeError, match=r"numpy.partition .*tilegraph.sort"):
        np.partition(x, 2)
    with pytest.raises(TypeError, match=r"numpy.trapezoid .*\.compute\(\) first"):
        np.trapezoid(x)
    with pytest.raises(TypeError, match=r"subtract.accumulate .*associative"):
        np.subtract.accumulate(x)
    with pytest.raises(TypeError, match=r"add.reduceat .*\.compute\(\)"):
        np.add.reduceat(x, [0, 2])
    with pytest.raises(TypeError, match="bins='auto'"):
        np.histogram(x, bins="auto")
    with pytest.raises(ValueError, match="negative"):
        np.bincount(tg.from_numpy(np.array([1, -2])))
