"""Inputs are snapshotted when an array is made from them, and every block read checks the
snapshot: an input changed under a run is an error naming the file, never a mixed result."""

from __future__ import annotations

import os

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import tilegraph as tg
from tilegraph.io.snapshot import InputChangedError


def test_npy_replaced_between_plan_and_compute_is_an_error(tmp_path):
    path = str(tmp_path / "a.npy")
    np.save(path, np.arange(40.0))
    x = tg.from_npy(path, chunks=10)
    np.save(path, np.arange(40.0) * 2)  # same shape and dtype, other values
    with pytest.raises(InputChangedError, match=r"a\.npy") as info:
        x.sum().compute()
    assert "changed after the plan" in str(info.value)
    assert_array_equal(tg.from_npy(path, chunks=10).compute(), np.arange(40.0) * 2)


def test_npy_replaced_mid_run_is_an_error_never_a_mixed_result(tmp_path):
    path = str(tmp_path / "a.npy")
    np.save(path, np.ones((40, 4)))
    x = tg.from_npy(path, chunks=(10, 4))
    swapped = []

    def hook(block):
        if not swapped:  # after the first block: another shape and dtype at the same path
            swapped.append(True)
            np.save(path + ".new.npy", np.zeros((80, 4), dtype=np.float32))
            os.replace(path + ".new.npy", path)
        return block

    with pytest.raises(InputChangedError, match=r"a\.npy.*replaced"):
        x.map_blocks(hook).sum().compute(backend="sync")
    assert swapped


def test_npy_rewritten_in_place_is_an_error(tmp_path):
    path = str(tmp_path / "a.npy")
    np.save(path, np.arange(40.0))
    x = tg.from_npy(path, chunks=10)
    with open(path, "r+b") as f:  # the same file, other bytes at the end
        f.seek(-8, os.SEEK_END)
        f.write(np.float64(99).tobytes())
        f.write(b"\0" * 8)
    with pytest.raises(InputChangedError, match="size changed"):
        x.compute()


def test_zarr_overwritten_after_plan_is_an_error(tmp_path):
    path = str(tmp_path / "a.zarr")
    tg.from_numpy(np.arange(12.0), chunks=4).to_zarr(path)
    x = tg.from_zarr(path)
    tg.from_numpy(np.arange(12.0) + 1, chunks=4).to_zarr(path, overwrite=True)
    with pytest.raises(InputChangedError, match=r"a\.zarr"):
        x.compute()
    assert_array_equal(tg.from_zarr(path).compute(), np.arange(12.0) + 1)


def test_unchanged_inputs_read_as_before(tmp_path):
    path = str(tmp_path / "a.npy")
    np.save(path, np.arange(40.0))
    x = tg.from_npy(path, chunks=10)
    assert float(x.sum().compute()) == float(np.arange(40.0).sum())
    assert float(x.sum().compute()) == float(np.arange(40.0).sum())  # plans are reusable
