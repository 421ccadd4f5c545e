"""to_hdf5 and .npy stacks (dask's formats): written and read back on uneven blocks for
several dtypes; a failed write leaves no dataset or stack that looks whole; an info file
written by someone else cannot run code; bad input."""

from __future__ import annotations

import os
import pickle

import h5py
import numpy as np
import pytest

import tilegraph as tg

rng = np.random.default_rng(4)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int16, np.complex128,
                                   np.bool_])
def test_to_hdf5_writes_datasets_that_read_back(tmp_path, dtype):
    a = (rng.standard_normal((9, 5)) * 5).astype(dtype)
    x = tg.from_numpy(a, chunks=(4, 3))
    path = tmp_path / "out.h5"
    tg.to_hdf5(path, "/x", x)
    tg.to_hdf5(path, {"/g/y": x[::2], "/z": tg.from_numpy(np.float64(2.5))})
    x.to_hdf5(path, "/x")  # replaced in place of the old one
    with h5py.File(path, "r") as f:
        np.testing.assert_array_equal(f["/x"][()], a)
        np.testing.assert_array_equal(f["/g/y"][()], a[::2])
        assert f["/x"].chunks == (4, 3) and f["/z"][()] == 2.5
        assert [k for k in f if "partial" in k] == []


def test_a_failed_hdf5_write_leaves_no_dataset(tmp_path):
    def boom(block):
        raise RuntimeError("no")

    bad = tg.from_numpy(np.ones((4, 4)), chunks=2).map_blocks(boom, dtype=float)
    path = tmp_path / "out.h5"
    with pytest.raises(RuntimeError, match="no"):
        tg.to_hdf5(path, {"/a": tg.ones((3,)), "/b": bad})
    with h5py.File(path, "r") as f:
        assert list(f) == []
    with pytest.raises(TypeError, match="give"):
        tg.to_hdf5(path, tg.ones(3))
    with pytest.raises(ValueError, match="non-empty"):
        tg.to_hdf5(path, "/", tg.ones(3))


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.uint8])
@pytest.mark.parametrize("axis", [0, 1])
def test_npy_stacks_round_trip_and_read_dasks(tmp_path, dtype, axis):
    import dask.array as da

    a = (rng.standard_normal((7, 6)) * 9).astype(dtype)
    x = tg.from_numpy(a, chunks=(3, 4))
    tg.to_npy_stack(tmp_path / "tg", x, axis=axis)
    y = tg.from_npy_stack(tmp_path / "tg")
    assert y.chunks[axis] == x.chunks[axis] and y.dtype == dtype
    np.testing.assert_array_equal(y.compute(), a)
    da.to_npy_stack(tmp_path / "dask", da.from_array(a, chunks=(3, 4)), axis=axis)
    z = tg.from_npy_stack(tmp_path / "dask")
    np.testing.assert_array_equal(z.compute(), a)
    back = da.from_npy_stack(tmp_path / "tg")  # dask reads tilegraph's
    np.testing.assert_array_equal(back.compute(), a)


def test_a_stack_whose_info_would_run_code_is_refused(tmp_path):
    tg.to_npy_stack(tmp_path / "s", tg.from_numpy(np.arange(6.0), chunks=4))

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    with open(tmp_path / "s" / "info", "wb") as f:
        pickle.dump({"chunks": ((4, 2),), "dtype": Evil(), "axis": 0}, f)
    with pytest.raises(ValueError, match="only plain data and NumPy dtypes"):
        tg.from_npy_stack(tmp_path / "s")
    with open(tmp_path / "s" / "info", "wb") as f:
        pickle.dump(["not", "a", "dict"], f)
    with pytest.raises(ValueError, match="not a stack's info"):
        tg.from_npy_stack(tmp_path / "s")
    with open(tmp_path / "s" / "info", "wb") as f:
        pickle.dump({"chunks": ((3, 3),), "dtype": np.dtype("f8"), "axis": 0}, f)
    with pytest.raises(ValueError, match=r"0.npy .* holds \(4,\)"):
        tg.from_npy_stack(tmp_path / "s")
    os.unlink(tmp_path / "s" / "info")
    with pytest.raises(FileNotFoundError, match="did not finish"):
        tg.from_npy_stack(tmp_path / "s")


def test_a_failed_stack_write_has_no_info(tmp_path):
    tg.to_npy_stack(tmp_path / "s", tg.ones(4, chunks=2))

    def boom(block):
        raise RuntimeError("no")

    with pytest.raises(RuntimeError, match="no"):
        tg.to_npy_stack(tmp_path / "s", tg.ones(4, chunks=2).map_blocks(boom, dtype=float))
    assert not (tmp_path / "s" / "info").exists()  # the old stack is not whole any more
    assert not [p for p in os.listdir(tmp_path / "s") if "partial" in p]
    with pytest.raises(ValueError, match="0-d"):
        tg.to_npy_stack(tmp_path / "t", tg.from_numpy(np.float64(1.0)))
