"""tilegraph.get as a scheduler for real dask collections (array, bag, delayed)."""

import operator

import numpy as np
import pytest

import tilegraph

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
db = pytest.importorskip("dask.bag")


def both(*collections):
    ours = dask.compute(*collections, scheduler=tilegraph.get)
    theirs = dask.compute(*collections, scheduler="sync")
    return ours, theirs


def test_array_expressions():
    x = da.random.default_rng(0).random((97, 61), chunks=(20, 17))
    y = da.random.default_rng(1).random((61, 45), chunks=(17, 30))
    exprs = [
        (x @ y).sum(axis=0),
        x.T[::3, 5:40].mean(),
        (x + 1).std(axis=1),
        da.einsum("ij,jk->ik", x, y),
        x.rechunk((50, 50))[10:60],
        da.concatenate([x, x], axis=0).max(axis=0),
        x.argmin(axis=0),
        da.where(x > 0.5, x, -x).cumsum(axis=1),
    ]
    ours, theirs = both(*exprs)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b)


def test_array_compute_method_and_dtypes():
    for dtype in (np.float32, np.int64, np.complex128):
        x = da.arange(100, chunks=7).astype(dtype)
        got = (x * 2 - 1).sum().compute(scheduler=tilegraph.get)
        assert got == (np.arange(100).astype(dtype) * 2 - 1).sum()
        assert got.dtype == dtype


def test_bag():
    b = db.from_sequence(range(200), npartitions=9)
    ours, theirs = both(
        b.map(lambda v: v * 3).filter(lambda v: v % 2 == 0).sum(),
        b.map(lambda v: v % 7).frequencies(),
        b.fold(operator.add),
        b.map(lambda v: (v % 5, v)).foldby(0, lambda acc, kv: acc + kv[1], 0, operator.add, 0),
    )
    assert ours[0] == theirs[0]
    assert sorted(ours[1]) == sorted(theirs[1])
    assert ours[2] == theirs[2] == sum(range(200))
    assert sorted(ours[3]) == sorted(theirs[3])


def test_delayed():
    @dask.delayed
    def inc(x):
        return x + 1

    @dask.delayed
    def total(xs):
        return sum(xs)

    parts = [inc(i) for i in range(20)]
    result = total(parts)
    assert result.compute(scheduler=tilegraph.get) == sum(range(1, 21))
    assert dask.compute(parts[:3], scheduler=tilegraph.get) == ([1, 2, 3],)


def test_persist_and_config_scheduler():
    x = da.ones((40, 40), chunks=10)
    (p,) = dask.persist(x + 1, scheduler=tilegraph.get)
    assert (p.sum().compute(scheduler=tilegraph.get)) == 2 * 1600
    with dask.config.set(scheduler=tilegraph.get):
        assert (x * 3).sum().compute() == 4800


def test_options_pass_through_and_errors_surface():
    x = da.ones((10, 10), chunks=5)
    assert (x.sum().compute(scheduler=tilegraph.get, backend="sync")) == 100

    def fail(block):
        raise RuntimeError("block failed")

    y = x.map_blocks(fail, dtype=float)
    with pytest.raises(RuntimeError, match="block failed") as info:
        y.compute(scheduler=tilegraph.get)
    assert any("op fail" in note for note in info.value.__notes__)
