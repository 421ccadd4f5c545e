"""backend="dask": planned graphs run on a real dask.distributed LocalCluster."""

import numpy as np
import pytest

import tilegraph as tg

distributed = pytest.importorskip("distributed")


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_matmul_and_reductions_equal_numpy(client, dtype):
    rng = np.random.default_rng(0)
    a = rng.random((70, 45)).astype(dtype)
    b = rng.random((45, 33)).astype(dtype)
    x = tg.from_numpy(a, chunks=(16, 20))  # uneven edge blocks
    y = tg.from_numpy(b, chunks=(20, 10))
    got, total = tg.compute(x @ y + 1, (x.T @ x).sum(axis=0), backend="dask", client=client)
    np.testing.assert_allclose(got, a @ b + 1, rtol=1e-5)
    np.testing.assert_allclose(total, (a.T @ a).sum(axis=0), rtol=1e-5)
    assert tg.last_run().backend == "dask"


def test_tasks_called_with_their_inputs_and_keywords_run_on_the_cluster(client):
    """A task whose call is its inputs plus keywords (the Cholesky's potrf tasks carry
    ``where=``) is submitted as one function of its inputs."""
    rng = np.random.default_rng(4)
    s = rng.random((50, 50))
    s = s @ s.T + 50 * np.eye(50)
    got = tg.linalg.cholesky(tg.from_numpy(s, chunks=15)).compute(backend="dask",
                                                                  client=client)
    np.testing.assert_allclose(got, np.linalg.cholesky(s), rtol=1e-10)


def test_placement_becomes_worker_restrictions(client, monkeypatch):
    submitted = []
    real = client.submit

    def recording(*args, **kwargs):
        submitted.append(kwargs.get("workers"))
        return real(*args, **kwargs)

    monkeypatch.setattr(client, "submit", recording)
    x = tg.random.random((64, 64), chunks=16, seed=1)
    got = (x @ x).compute(backend="dask", client=client)
    np.testing.assert_allclose(got, x.compute() @ x.compute())
    addresses = set(client.scheduler_info()["workers"])
    used = {w[0] for w in submitted if w}
    assert submitted and used == addresses  # both workers get tasks, by the placement


def test_large_inputs_are_scattered_not_sent_with_every_task(client, monkeypatch):
    a = np.random.default_rng(2).random((600, 500))  # 2.4 MB: kept here, blocks scattered
    sizes = []
    real = client.submit

    def recording(func, *args, **kwargs):
        import cloudpickle

        sizes.append(len(cloudpickle.dumps(func)))
        return real(func, *args, **kwargs)

    monkeypatch.setattr(client, "submit", recording)
    x = tg.from_numpy(a, chunks=(200, 250))
    np.testing.assert_allclose((x * 2).sum(axis=1).compute(backend="dask", client=client),
                               (a * 2).sum(axis=1))
    assert max(sizes, default=0) < 100_000


def test_scheduler_address_get_and_to_zarr(client, tmp_path):
    address = client.scheduler.address
    assert tg.get({"a": 1, "b": (sum, ["a", "a"])}, "b", backend="dask", client=address) == 2
    a = np.arange(35.0).reshape(5, 7)
    with tg.config.set(backend="dask", client=client):
        tg.from_numpy(a, chunks=(2, 3)).to_zarr(tmp_path / "a.zarr")
        back = tg.from_zarr(tmp_path / "a.zarr").compute()
    np.testing.assert_array_equal(back, a)


def test_task_error_names_the_task_that_failed(client):
    def bad(block):
        raise ZeroDivisionError("broken block")

    x = tg.from_numpy(np.ones((8, 8)), chunks=4)
    with pytest.raises(ZeroDivisionError, match="broken block") as info:
        (x.map_blocks(bad) + 1).sum().compute(backend="dask", client=client)
    assert any("bad" in note and "failed" in note for note in info.value.__notes__)
    # the run left no futures behind
    assert (x + 1).sum().compute(backend="dask", client=client) == 128


def test_bad_options(client):
    with pytest.raises(ValueError, match="client= is an option of backend='dask'"):
        tg.ones(3).sum().compute(backend="threads", client=client)
    with pytest.raises(TypeError, match="client must be"):
        tg.ones(3).sum().compute(backend="dask", client=3)
    with pytest.raises(ValueError, match="workers= is not used"):
        tg.ones(3).sum().compute(backend="dask", client=client, workers=2)
    with pytest.raises(ValueError, match=r"needs a dask\.distributed cluster"):
        tg.ones(3).sum().compute(backend="dask")


def test_one_worker_cluster_runs_without_placement():
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster, set_as_default=False) as c:
        a = np.arange(30.0).reshape(5, 6)
        x = tg.from_numpy(a, chunks=(2, 4))
        got = (x @ x.T).compute(backend="dask", client=c)
        np.testing.assert_allclose(got, a @ a.T)
        assert tg.last_run().processes == 1


def test_a_rechunk_through_its_store_runs_on_worker_processes(tmp_path):
    """The intermediate store's handles move between dask worker processes with their
    pieces' bytes: NumPy's values, and no file left in the spill directory."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster, set_as_default=False) as c:
        x = np.random.default_rng(0).random((40, 9, 11))
        out = (tg.from_numpy(x, chunks=(3, 9, 11)) + 0).rechunk((40, 2, 3), max_mem="12KB")
        run = tg.config.per_process(tg.config.resolve({"memory_limit": "30KB"}, "test"), 1)
        graph = tg.algebra.lower([out.collection], options=run).build()
        assert "rechunk-store" in {graph.opname(i) for i in range(len(graph))}
        got = out.compute(backend="dask", client=c, memory_limit="30KB",
                          spill_dir=str(tmp_path))
    np.testing.assert_array_equal(got, x)
    assert list(tmp_path.iterdir()) == []
