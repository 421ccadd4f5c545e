"""``backend="dask"`` on a dask.distributed cluster whose scheduler and workers run on three
emulated hosts that share no ``/tmp``, with the driver (this process) outside: results
against NumPy, a worker that spills to its own disk, a staged rechunk whose pieces cross
hosts, writes of the driver's files, and inputs only the driver has (an error naming the
path and the worker's host)."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

import tilegraph as tg

from .conftest import needs_cluster

distributed = pytest.importorskip("distributed")
pytestmark = [pytest.mark.cluster, needs_cluster]

# dask's own spill: to the worker's disk past 5% of its limit in held results; the limits
# on the whole process (its interpreter alone is half of 200 MB) off
SPILL_CONFIG = {"distributed.worker.memory.target": 0.05,
                "distributed.worker.memory.spill": False,
                "distributed.worker.memory.pause": False,
                "distributed.worker.memory.terminate": False}


@pytest.fixture(scope="module")
def client(bed):
    with bed.start_dask(memory_limit="200MB", config=SPILL_CONFIG), \
            distributed.Client(f"tcp://{bed.address(0)}:8786") as c:
        assert len(c.scheduler_info()["workers"]) == 3
        yield c


def _on_workers(client, func) -> dict:
    return dict(client.run(func))


def test_matmul_reductions_and_cholesky_match_numpy_across_hosts(bed, client):
    rng = np.random.default_rng(1)
    before = bed.traffic()
    for dtype in (np.float64, np.float32, np.int64):  # (complex: tests/cluster/test_mpi.py)
        a = (rng.random((130, 90)) * 10).astype(dtype)
        b = (rng.random((90, 70)) * 10).astype(dtype)
        A, B = tg.from_numpy(a, chunks=(40, 35)), tg.from_numpy(b, chunks=(35, 30))
        rtol = 1e-4 if dtype == np.float32 else 1e-10
        got = (A @ B).compute(backend="dask", client=client)
        assert got.dtype == (a @ b).dtype
        np.testing.assert_allclose(got, a @ b, rtol=rtol)
        np.testing.assert_allclose((A * 2 - 1).sum(axis=0).compute(
            backend="dask", client=client), (a * 2 - 1).sum(axis=0), rtol=rtol)
        assert np.isclose(complex(A.mean().compute(backend="dask", client=client)),
                          a.mean(), rtol=rtol)
    s = rng.random((130, 130))
    s = s @ s.T + 130 * np.eye(130)
    np.testing.assert_allclose(tg.linalg.cholesky(tg.from_numpy(s, chunks=40)).compute(
        backend="dask", client=client), np.linalg.cholesky(s), rtol=1e-10)
    moved = bed.traffic() - before
    assert all(tx > 20_000 for tx in moved.tx), moved  # every host sent blocks


def test_a_worker_spills_to_its_own_disk_and_the_result_is_right(bed, client):
    def disk_writes(dask_worker):
        return sum(v for (label, unit), v in dask_worker.data.cumulative_metrics.items()
                   if label == "disk-write" and unit == "count")

    before = _on_workers(client, disk_writes)
    x = tg.random.random((1600, 1200), chunks=400, seed=11)
    want = x.compute(backend="threads")
    got = (x.T @ x).compute(backend="dask", client=client)
    np.testing.assert_allclose(got, want.T @ want, rtol=1e-10)
    after = _on_workers(client, disk_writes)
    assert sum(after.values()) > sum(before.values()), (before, after)
    # each worker spilled to its own host's /tmp, which the others do not see
    dirs = _on_workers(client, lambda dask_worker: dask_worker.local_directory)
    assert all(d.startswith("/tmp/") for d in dirs.values())
    assert not os.path.exists(next(iter(dirs.values())))


def test_a_staged_rechunk_crosses_hosts_and_leaves_nothing(bed, client):
    with tg.config.set(memory_limit="1MB"):
        x = tg.random.random((400, 400), chunks=(400, 10), seed=3) + 1
        y = x.rechunk((10, 400))
        assert "stage" in y.explain()  # the pieces go through the intermediate store
        before = bed.traffic()
        got = y.compute(backend="dask", client=client)
        moved = bed.traffic() - before
    np.testing.assert_array_equal(got, x.compute(backend="threads"))
    # pieces written on one host were read on another: most of the array crossed
    assert moved.sent > 0.5 * got.nbytes
    left = _on_workers(client, lambda: [n for n in os.listdir("/tmp")
                                        if n.startswith("tilegraph-spill-")])
    assert not any(left.values()), left


def test_writes_go_to_the_drivers_file_whatever_the_workers_see(bed, client, tmp_path):
    a = np.random.default_rng(2).random((95, 60))
    A = tg.from_numpy(a, chunks=(30, 25))
    npy, zarr_path = str(tmp_path / "out.npy"), str(tmp_path / "out.zarr")
    tg.to_npy(A * 2, npy, backend="dask", client=client)
    tg.to_zarr(A + 1, zarr_path, backend="dask", client=client)
    np.testing.assert_array_equal(np.load(npy), a * 2)
    np.testing.assert_array_equal(tg.from_zarr(zarr_path).compute(), a + 1)
    for h in range(3):  # the hosts never see the driver's /tmp
        assert bed.call(h, ["test", "-e", str(tmp_path)], check=False).returncode == 1
    # and into a directory every host shares, which every host then reads
    shared = os.path.join(bed.shared, "out.npy")
    tg.to_npy(A - 3, shared, backend="dask", client=client)
    sums = [float(bed.python(h, "import numpy, sys; print(numpy.load(sys.argv[1]).sum())",
                             args=[shared]).stdout) for h in range(3)]
    assert np.allclose(sums, (a - 3).sum())


def test_an_input_only_the_driver_has_is_an_error_naming_it_and_the_host(bed, client,
                                                                          tmp_path):
    a = np.arange(600.0).reshape(30, 20)
    path = str(tmp_path / "in.npy")
    np.save(path, a)
    x = tg.from_npy(path, chunks=10)
    t = time.monotonic()
    with pytest.raises(FileNotFoundError) as info:
        (x + 1).sum().compute(backend="dask", client=client)
    assert time.monotonic() - t < 30  # an error, not a hang
    message = str(info.value)
    assert path in message and "on host host" in message, message
    zarr_path = str(tmp_path / "in.zarr")
    tg.to_zarr(tg.from_numpy(a, chunks=10), zarr_path)
    with pytest.raises(FileNotFoundError, match=r"no zarr array at .*in\.zarr.* on host host"):
        tg.from_zarr(zarr_path).sum().compute(backend="dask", client=client)
    # the same input in the shared directory is read by the workers
    shared = os.path.join(bed.shared, "in.npy")
    np.save(shared, a)
    got = (tg.from_npy(shared, chunks=(7, 9)) + 1).sum(axis=1).compute(backend="dask",
                                                                       client=client)
    np.testing.assert_array_equal(got, (a + 1).sum(axis=1))
