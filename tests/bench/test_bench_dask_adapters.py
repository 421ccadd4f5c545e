"""dask as a competitor: the programs run on dask arrays, sparse ones included."""

import numpy as np
import pytest
from _bench_modules import bench_module

from tilegraph.workloads import WORKLOADS

dask_adapters = bench_module("dask_adapters")


def test_numpy_and_dask_runs():
    pytest.importorskip("dask")
    wl = WORKLOADS["pagerank"]
    for r in (wl.run_numpy(300), dask_adapters.run_dask(wl, 300)):
        assert r.shape == (300, 1)
        assert r.sum() == pytest.approx(1.0)
        assert (r > 0).all()
    u, s, vt = dask_adapters.run_dask(WORKLOADS["svd"], 300)
    assert u.shape == (300, 30) and s.shape == (30,) and vt.shape == (30, 30)


def test_dask_sparse_adapter_matches_scipy():
    da = pytest.importorskip("dask.array")
    import scipy.sparse

    rng = np.random.default_rng(5)
    S = scipy.sparse.random_array((70, 50), density=0.1, rng=rng, format="csr")
    B = rng.random((50, 4))
    x = dask_adapters.DaskSparse(da.from_array(S, chunks=(30, 20), asarray=False))
    np.testing.assert_allclose((x @ da.from_array(B, chunks=(25, 2))).compute(), S @ B)
    np.testing.assert_allclose((x.T @ da.ones((70, 3), chunks=30)).compute(),
                               S.T @ np.ones((70, 3)))
    np.testing.assert_allclose(x.sum(axis=0).compute(), S.sum(axis=0))
    np.testing.assert_allclose(x.sum(axis=1).compute(), S.sum(axis=1))
    D = rng.random((70, 50))
    prod = (x * da.from_array(D, chunks=(30, 20))) @ da.from_array(B, chunks=(20, 4))
    np.testing.assert_allclose(prod.compute(), S.multiply(D) @ B)


def test_dask_cholesky_is_the_lower_factor():
    pytest.importorskip("dask")
    a = dask_adapters.run_dask(WORKLOADS["cholesky"], 40, block=10)
    assert np.allclose(a, np.tril(a))
