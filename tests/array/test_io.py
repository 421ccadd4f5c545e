"""Arrays from and to .npy files and zarr, block by block, with atomic completion."""

import os

import numpy as np
import pytest

import tilegraph as tg


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.complex128, bool])
def test_npy_round_trip(tmp_path, dtype, backend_options):
    ref = (np.arange(7 * 9).reshape(7, 9) % 5).astype(dtype)
    src = tmp_path / "in.npy"
    np.save(src, ref)
    x = tg.from_npy(src, chunks=(3, 4))
    assert x.shape == ref.shape and x.dtype == ref.dtype and x.chunks == ((3, 3, 1), (4, 4, 1))
    out = tmp_path / "out.npy"
    (x * 1).astype(dtype).to_npy(out, **backend_options)
    np.testing.assert_array_equal(np.load(out), ref)
    assert sorted(os.listdir(tmp_path)) == ["in.npy", "out.npy"]


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.complex64])
def test_zarr_round_trip(tmp_path, dtype, backend_options):
    ref = (np.arange(10 * 6).reshape(10, 6)).astype(dtype)
    x = tg.from_numpy(ref, chunks=(4, 5))
    path = tmp_path / "a.zarr"
    x.to_zarr(path, **backend_options)
    y = tg.from_zarr(path)
    assert y.chunks == ((4, 4, 2), (5, 1)) and y.dtype == ref.dtype
    np.testing.assert_array_equal(y.compute(), ref)
    np.testing.assert_array_equal(tg.from_zarr(path, chunks=3).sum(axis=0).compute(),
                                  ref.sum(axis=0))


def test_irregular_blocks_are_regularised_for_zarr(tmp_path):
    ref = np.arange(10.0)
    x = tg.from_numpy(ref, chunks=((3, 5, 2),))
    x.to_zarr(tmp_path / "z")
    np.testing.assert_array_equal(tg.from_zarr(tmp_path / "z").compute(), ref)


def boom(block):
    raise RuntimeError("disk on fire")


@pytest.mark.parametrize("fmt", ["npy", "zarr"])
def test_failed_write_leaves_nothing(tmp_path, fmt):
    x = tg.ones((20, 20), chunks=5)
    y = tg.concatenate([x, x.map_blocks(boom)], axis=0)
    path = tmp_path / f"out.{fmt}"
    with pytest.raises(RuntimeError, match="disk on fire"):
        getattr(y, f"to_{fmt}")(path)
    assert os.listdir(tmp_path) == []


def test_existing_output_is_refused_unless_overwrite(tmp_path):
    path = tmp_path / "o.npy"
    np.save(path, np.zeros(3))
    x = tg.arange(3.0, chunks=2)
    with pytest.raises(FileExistsError, match=r"o\.npy"):
        x.to_npy(path)
    x.to_npy(path, overwrite=True)
    np.testing.assert_array_equal(np.load(path), [0.0, 1.0, 2.0])


def test_bad_paths_and_options(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"missing\.npy"):
        tg.from_npy(tmp_path / "missing.npy")
    with pytest.raises(FileNotFoundError):
        tg.from_zarr(tmp_path / "missing.zarr")
    with pytest.raises(TypeError, match="unknown option"):
        tg.ones(3).to_npy(tmp_path / "x.npy", wrokers=2)
    assert os.listdir(tmp_path) == []


def test_larger_than_block_reads_stay_blockwise(tmp_path):
    ref = np.random.default_rng(0).random((300, 200))
    np.save(tmp_path / "big.npy", ref)
    x = tg.from_npy(tmp_path / "big.npy", chunks=50)
    peaks = []
    from tilegraph.runtime.events import TaskEnd

    tg.compute((x * 2).sum(), callbacks=[lambda e: isinstance(e, TaskEnd)
                                         and peaks.append(e.nbytes)])
    assert max(peaks) <= 50 * 200 * 8  # no task result is bigger than a block
    np.testing.assert_allclose((x * 2).sum().compute(), 2 * ref.sum())
