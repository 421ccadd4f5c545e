"""tilegraph.linalg with dask.array.linalg's keywords and names: cholesky(lower=),
svd(coerce_signs=) and svd_flip, tsqr(compute_svd=), svd_compressed's n_oversamples/
iterator/compute/coerce_signs, solve(sym_pos=), sfqr, compression_level/matrix, against
dask and NumPy on uneven blocks."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

import tilegraph as tg

rng = np.random.default_rng(31)
M = rng.standard_normal((6, 6))
SPD = M @ M.T + 6 * np.eye(6)
TALL = rng.standard_normal((13, 4))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cholesky_lower_and_solve_sym_pos(dtype):
    a = SPD.astype(dtype)
    x = tg.from_numpy(a, chunks=((2, 3, 1), (2, 3, 1)))
    rtol = 1e-4 if dtype == np.float32 else 1e-10
    upper = tg.linalg.cholesky(x, lower=False).compute()
    np.testing.assert_allclose(upper, np.linalg.cholesky(a).T, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(
        upper, da.linalg.cholesky(da.from_array(a, chunks=2)).compute(), rtol=rtol, atol=rtol)
    np.testing.assert_allclose(tg.linalg.cholesky(x, lower=True).compute(),
                               np.linalg.cholesky(a), rtol=rtol, atol=rtol)
    b = np.arange(6.0, dtype=dtype)
    np.testing.assert_allclose(tg.linalg.solve(x, b, sym_pos=True).compute(),
                               np.linalg.solve(a, b), rtol=rtol * 10, atol=rtol)


def test_svd_with_dasks_signs_and_tsqr_compute_svd():
    x = tg.from_numpy(TALL, chunks=(5, 4))
    u, _s, v = tg.linalg.svd(x, coerce_signs=True)
    du, _ds, dv = da.linalg.svd(da.from_array(TALL, chunks=(5, 4)), coerce_signs=True)
    np.testing.assert_allclose(u.compute(), du.compute(), atol=1e-10)
    np.testing.assert_allclose(v.compute(), dv.compute(), atol=1e-10)
    assert (v.compute().sum(axis=1) >= 0).all()
    _tu, ts, _tv = tg.linalg.tsqr(x, compute_svd=True)
    np.testing.assert_allclose(ts.compute(), np.linalg.svd(TALL, compute_uv=False))
    q, r = tg.linalg.sfqr(tg.from_numpy(TALL.T, chunks=(4, 5)))
    np.testing.assert_allclose((q @ r).compute(), TALL.T, atol=1e-10)


def test_svd_compressed_with_dasks_keywords_and_the_compression_helpers():
    low = TALL @ rng.standard_normal((4, 9))
    x = tg.from_numpy(low, chunks=(5, 9))
    want = np.linalg.svd(low, compute_uv=False)[:4]
    for iterator in ("power", "QR"):
        _u, s, v = tg.linalg.svd_compressed(x, 4, iterator=iterator, n_power_iter=1,
                                           n_oversamples=3, compute=True, coerce_signs=True,
                                           seed=0)
        np.testing.assert_allclose(s.compute(), want, rtol=1e-8)
        assert (v.compute().sum(axis=1) >= 0).all()
    assert tg.linalg.compression_level(100, 10) == da.linalg.compression_level(100, 10) == 20
    q = tg.linalg.compression_matrix(x, 3, seed=0)
    assert q.shape == da.linalg.compression_matrix(da.from_array(low, chunks=(5, 9)), 3,
                                                   seed=0).shape
    np.testing.assert_allclose((q @ q.T).compute(), np.eye(q.shape[0]), atol=1e-10)
    with pytest.raises(ValueError, match="iterator"):
        tg.linalg.svd_compressed(x, 2, iterator="lanczos")
    with pytest.raises(ValueError, match="iterator"):
        tg.linalg.compression_matrix(x, 2, iterator="lanczos")
