"""Lazy reads of array-likes (h5py datasets, zarr arrays and groups, memory maps): each task
reads its own block, and nothing is read whole."""

import os

import numpy as np
import psutil
import pytest

import tilegraph as tg

h5py = pytest.importorskip("h5py")
zarr = pytest.importorskip("zarr")


class Recording:
    """An array-like that records the regions read from it."""

    def __init__(self, data):
        self.data = data
        self.shape = data.shape
        self.dtype = data.dtype
        self.reads = []

    def __getitem__(self, idx):
        self.reads.append(idx)
        return self.data[idx]


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, np.complex64])
def test_each_task_reads_its_own_block(dtype):
    a = (np.random.default_rng(0).random((11, 7)) * 50).astype(dtype)
    src = Recording(a)
    x = tg.from_array(src, chunks=(4, 3))
    assert not src.reads  # nothing read while planning
    assert x.chunks == ((4, 4, 3), (3, 3, 1)) and x.dtype == dtype
    np.testing.assert_allclose((x * 2).compute(), a * 2)
    assert len(src.reads) == 9
    assert all(np.shape(a[r]) in {(4, 3), (4, 1), (3, 3), (3, 1)} for r in src.reads)
    src.reads.clear()
    np.testing.assert_allclose(x[5:, 2].compute(), a[5:, 2])
    assert len(src.reads) < 9  # only the blocks the slice needs


def test_h5py_dataset_is_not_read_whole(tmp_path):
    n = 4_000_000  # 32 MB of float64
    with h5py.File(tmp_path / "d.h5", "w") as f:
        f.create_dataset("v", data=np.arange(n, dtype=np.float64).reshape(2000, 2000),
                         chunks=(250, 2000))
    proc = psutil.Process()
    with h5py.File(tmp_path / "d.h5", "r") as f:
        ds = f["v"]
        before = proc.memory_info().rss
        x = tg.asarray(ds, chunks=(250, 2000))
        y = tg.from_array(ds, chunks=(500, 1000), lock=True)
        assert proc.memory_info().rss - before < 16e6  # nothing was read
        assert x.chunks[0] == (250,) * 8
        got = x.sum(axis=1).compute(memory_limit="16MB")
        np.testing.assert_allclose(got, np.arange(n, dtype=np.float64)
                                   .reshape(2000, 2000).sum(axis=1))
        assert (y.max() == n - 1).compute()


def test_from_zarr_path_array_and_group(tmp_path):
    a = np.arange(60.0).reshape(6, 10)
    root = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    za = root.create_array("sub", shape=a.shape, chunks=(4, 4), dtype="f8")
    za[:] = a
    from_obj = tg.from_zarr(za)
    assert from_obj.chunks == ((4, 2), (4, 4, 2))
    np.testing.assert_array_equal(from_obj.compute(), a)
    np.testing.assert_array_equal(tg.from_zarr(root, component="sub").compute(), a)
    np.testing.assert_array_equal(
        tg.from_zarr(str(tmp_path / "g.zarr"), component="sub", chunks=3).compute(), a)
    np.testing.assert_array_equal(tg.asarray(za).compute(), a)
    with pytest.raises(TypeError, match="needs component"):
        tg.from_zarr(root)
    with pytest.raises(KeyError, match="no array 'nope'"):
        tg.from_zarr(root, component="nope")
    with pytest.raises(TypeError, match="component= is for a group"):
        tg.from_zarr(za, component="sub")
    with pytest.raises(TypeError, match="expected a path"):
        tg.from_zarr(3)


def test_memmap_and_bad_input(tmp_path):
    path = os.path.join(tmp_path, "m.dat")
    m = np.memmap(path, dtype="f4", mode="w+", shape=(9, 5))
    m[:] = np.arange(45).reshape(9, 5)
    m.flush()
    ro = np.memmap(path, dtype="f4", mode="r", shape=(9, 5))
    np.testing.assert_array_equal(tg.from_array(ro, chunks=4).compute(), m)
    with pytest.raises(TypeError, match="needs shape, dtype and __getitem__"):
        tg.from_array(object())
    with pytest.raises(TypeError, match="lock must be"):
        tg.from_array(Recording(np.ones(3)), lock="yes")

    class Wrong(Recording):
        def __getitem__(self, idx):
            return np.ones(3)

    with pytest.raises(ValueError, match="expected"):
        tg.from_array(Wrong(np.ones((4,))), chunks=2).compute()


@pytest.mark.parametrize(("data", "dtype"), [
    ([1, 2, 3, 4, 5, 6, 7], np.int64), ([[1.5, 2.0], [3.0, 4.5], [5.0, 6.0]], np.float64),
    ((True, False, True), np.bool_), (2.5, np.float64), (np.float32(3), np.float32),
])
def test_lists_tuples_and_scalars_are_arrays_in_memory(data, dtype):
    # as dask's from_array: in-memory data becomes a NumPy array first
    x = tg.from_array(data, chunks=2)
    want = np.asarray(data)
    assert x.dtype == dtype and x.shape == want.shape
    assert x.chunks == tuple(tuple([2] * (n // 2) + [n % 2] * (n % 2)) for n in want.shape)
    np.testing.assert_array_equal(x.compute(), want)
    with pytest.raises(TypeError, match="Python objects"):
        tg.from_array([1, "a", None])
