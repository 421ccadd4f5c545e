"""tilegraph arrays as dask collections and dask arrays folded into tilegraph plans."""

import numpy as np
import pytest

import tilegraph as tg

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
from dask.callbacks import Callback  # noqa: E402


class CountTasks(Callback):
    """Counts every task dask's or tilegraph's scheduler runs while it is active."""

    def __init__(self):
        super().__init__()
        self.ran = 0

    def _posttask(self, key, result, dsk, state, worker_id):
        self.ran += 1


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.complex128])
def test_round_trips_equal_numpy(dtype):
    a = (np.random.default_rng(1).random((23, 17)) * 100).astype(dtype)
    x = tg.from_numpy(a, chunks=(5, 6))  # uneven edge blocks
    d = x.to_dask()
    assert d.chunks == x.chunks and d.dtype == dtype
    np.testing.assert_allclose(d.compute(), a)
    back = tg.from_dask(d * 2)  # tg -> dask -> tg
    assert back.chunks == x.chunks
    np.testing.assert_allclose(back.compute(), a * 2)
    dd = da.from_array(a, chunks=(4, 7))  # dask -> tg -> dask
    again = (tg.from_dask(dd) + 1).to_dask()
    np.testing.assert_allclose(again.sum(axis=1).compute(scheduler="sync"),
                               (a + 1).sum(axis=1))


def test_blocks_with_their_own_keys_and_in_place_accumulation():
    rng = np.random.default_rng(3)
    a = rng.random((40, 30))
    spd = a.T @ a + 30 * np.eye(30)
    x = tg.from_numpy(spd, chunks=12)
    chol = tg.linalg.cholesky(x)  # blocks keyed by the factorisation's own keys
    prod = (tg.from_numpy(a, chunks=(16, 12)) @ x + 1).T  # gemm accumulates in place
    for arr in (chol, prod):
        want = arr.compute()
        np.testing.assert_allclose(arr.to_dask().compute(scheduler="threads"), want)
        np.testing.assert_allclose(dask.compute(arr, scheduler="sync")[0], want)
        (p,) = dask.persist(arr, scheduler="sync")
        np.testing.assert_allclose(p.compute(), want)
    np.testing.assert_allclose(chol.compute(), np.linalg.cholesky(spd))


def test_dask_treats_tilegraph_arrays_as_lazy_collections():
    a = np.arange(30.0).reshape(5, 6)
    x = tg.from_numpy(a, chunks=(2, 4))
    assert dask.is_dask_collection(x)
    assert dask.base.tokenize(x) == dask.base.tokenize(x)
    (got,) = dask.compute(x * 3)
    np.testing.assert_array_equal(got, a * 3)
    (p,) = dask.persist(x + 1, scheduler="sync")
    assert isinstance(p, tg.Array) and p.chunks == x.chunks
    np.testing.assert_array_equal(p.compute(), a + 1)
    total = dask.delayed(np.sum)(x)
    assert total.compute() == a.sum()
    s = tg.from_numpy(np.float64(2.5))
    assert dask.compute(s)[0] == 2.5
    with pytest.warns(UserWarning, match="already a Dask collection"):
        z = da.from_array(x, chunks=x.chunks)
    assert isinstance(z, da.Array)
    np.testing.assert_array_equal(z.compute(), a)


def test_from_dask_computes_nothing_and_keeps_chunks():
    rng = da.random.default_rng(0)
    d = rng.random((30, 20), chunks=(7, 9))
    e = (d @ d.T + d[:, :1]).sum(axis=0)
    counter = CountTasks()
    with counter:
        x = tg.from_dask(d)
        y = tg.asarray(e)
        z = x + d  # a dask operand of a tilegraph operation
        w = np.add(x, d)
        assert x.chunks == d.chunks and y.chunks == e.chunks
        assert isinstance(z, tg.Array) and isinstance(w, tg.Array)
        assert counter.ran == 0
    want = e.compute(scheduler="sync")
    np.testing.assert_allclose(y.compute(), want)
    np.testing.assert_allclose(z.compute(), 2 * d.compute(scheduler="sync"))
    # two dask arrays sharing inputs fold into one plan (their common tasks once)
    a, b = tg.compute(tg.from_dask(d + 1), tg.from_dask(d * 2))
    dv = d.compute(scheduler="sync")
    np.testing.assert_allclose(a, dv + 1)
    np.testing.assert_allclose(b, dv * 2)


def test_from_dask_rejects_what_it_cannot_fold():
    with pytest.raises(TypeError, match="expected a dask array"):
        tg.from_dask(np.ones(3))
    with pytest.raises(TypeError, match="expected a dask array"):
        tg.from_dask(dask.delayed(1))
    d = da.arange(10, chunks=3)
    unknown = d[d > 3]
    with pytest.raises(ValueError, match="unknown chunk sizes"):
        tg.from_dask(unknown)
    x = tg.from_numpy(np.ones(3))
    assert tg.from_dask(x) is x
