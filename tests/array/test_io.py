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


def test_store_writes_blocks_into_targets_as_dask_store_does(tmp_path):
    import zarr

    a = np.arange(35.0).reshape(7, 5)
    x = tg.from_numpy(a, chunks=(3, 2))
    canvas = np.zeros((10, 8))
    tg.store(x, canvas, regions=(slice(2, 9), slice(1, 6)))
    np.testing.assert_array_equal(canvas[2:9, 1:6], a)
    assert canvas.sum() == a.sum()
    # several sources in one run, one of them into a zarr array, with a lock
    z = zarr.create_array(str(tmp_path / "z.zarr"), shape=(5,), chunks=(2,), dtype="f8")
    whole = np.zeros((7, 5), dtype=np.int32)
    tg.store([x.sum(axis=0), x.astype(np.int32)], [z, whole], lock=True)
    np.testing.assert_allclose(z[:], a.sum(axis=0))
    np.testing.assert_array_equal(whole, a.astype(np.int32))
    seen = []

    class Sink:
        def __setitem__(self, key, value):
            seen.append((key, value.shape))

    tg.store(x * 2, Sink())
    assert len(seen) == x.npartitions
    assert sorted(s for _, s in seen) == sorted(
        (r, c) for r in x.chunks[0] for c in x.chunks[1])


@pytest.mark.parametrize(("target", "kwargs", "error", "match"), [
    (np.zeros((3, 3)), {}, ValueError, "does not fit a target of shape"),
    (5, {}, TypeError, "does not support item assignment"),
    (np.zeros((9, 9)), {"regions": (slice(0, 3),)}, ValueError, "3 long on axis 0"),
    (np.zeros((7, 5)), {"compute": False}, TypeError, "compute=False"),
    (np.zeros((7, 5)), {"lock": 3}, TypeError, "lock must be"),
    (np.zeros((7, 5)), {"regions": (slice(0, 7, 2),)}, ValueError, "step 1"),
])
def test_store_rejects_bad_input_before_running(target, kwargs, error, match,
                                                forbid_compute):
    x = tg.from_numpy(np.ones((7, 5)), chunks=3)
    with pytest.raises(error, match=match):
        tg.store(x, target, **kwargs)
    with pytest.raises(ValueError, match="one target per source"):
        tg.store([x, x], [np.zeros((7, 5))])
