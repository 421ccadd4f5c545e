"""dask's calling conventions: compute/persist/visualize take ``scheduler=`` (a name, a
distributed.Client, one of dask's get functions) and ``num_workers=`` as dask.compute
does, mapped to tilegraph's backends; a scheduler with no tilegraph meaning is refused by
name."""

import warnings

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import config

dask = pytest.importorskip("dask")


@pytest.fixture
def arrays():
    rng = np.random.default_rng(1)
    a = rng.random((11, 7)).astype(np.float32)
    b = rng.integers(-5, 5, size=(11, 7))
    return a, b, tg.from_numpy(a, chunks=(4, 3)), tg.from_numpy(b, chunks=(5, 2))


@pytest.mark.parametrize("scheduler,backend", [
    ("threads", "threads"), ("threading", "threads"), ("sync", "sync"),
    ("single-threaded", "sync"), ("synchronous", "sync"), ("Threads", "threads")])
def test_scheduler_names_are_backends(arrays, scheduler, backend):
    a, b, x, y = arrays
    got_x, got_y, other = tg.compute(x * 2, y.sum(axis=0), "left", scheduler=scheduler,
                                     num_workers=2)
    np.testing.assert_allclose(got_x, a * 2)
    np.testing.assert_array_equal(got_y, b.sum(axis=0))
    assert other == "left"
    assert tg.last_run().backend == backend
    assert (x + y).compute(scheduler=scheduler).dtype == (a + b).dtype
    (p,) = [x.persist(scheduler=scheduler)]
    np.testing.assert_allclose(p.compute(), a)


def test_the_options_record_gets_the_mapping():
    opts = config.resolve({"scheduler": "sync", "num_workers": 3}, "compute()")
    assert (opts.backend, opts.workers) == ("sync", 3)
    assert config.resolve({"scheduler": None}, "compute()").backend == config.get("backend")
    opts = config.resolve({"optimize_graph": False}, "compute()")
    assert opts == config.resolve({}, "compute()")
    with config.set(scheduler="sync", num_workers=1):
        assert (config.get("backend"), config.get("workers")) == ("sync", 1)


def test_dasks_get_functions_and_tilegraphs_own(arrays):
    import dask.local
    import dask.threaded

    a, _, x, _ = arrays
    for get, backend in ((dask.threaded.get, "threads"), (dask.get, "sync"),
                         (dask.local.get_sync, "sync")):
        np.testing.assert_allclose(x.sum().compute(scheduler=get), a.sum(), rtol=1e-5)
        assert tg.last_run().backend == backend
    with config.set(backend="sync"):
        x.sum().compute(scheduler=tg.get)
        assert tg.last_run().backend == "sync"


def test_processes_run_on_threads_and_say_so_once(arrays, monkeypatch):
    import dask.multiprocessing

    a, _, x, _ = arrays
    monkeypatch.setattr(config, "_WARNED_PROCESSES", [])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = x.sum().compute(scheduler="processes")  # the user's line
        line = __import__("inspect").currentframe().f_lineno - 1
        tg.compute(x, scheduler="multiprocessing")
        x.compute(scheduler=dask.multiprocessing.get)
    np.testing.assert_allclose(got, a.sum(), rtol=1e-5)
    assert tg.last_run().backend == "threads"
    said = [w for w in seen if "no process pool" in str(w.message)]
    assert len(said) == 1
    assert said[0].filename == __file__ and said[0].lineno == line
    assert "backend='dask'" in str(said[0].message)


@pytest.mark.parametrize("bad", ["gpu", "processes-pool", 3, object()])
def test_a_scheduler_with_no_meaning_is_refused_by_name(arrays, bad):
    x = arrays[2]
    with pytest.raises(ValueError, match=r"scheduler=.* has no meaning in tilegraph") as e:
        x.compute(scheduler=bad)
    assert "'threads'" in str(e.value) and "dask.compute(x, scheduler=" in str(e.value)
    with pytest.raises(ValueError, match="has no meaning"):
        tg.persist(x, scheduler=bad)


def test_a_scheduler_function_of_the_users_own_gets_the_plan_as_dask_gives_it(arrays):
    a, b, x, y = arrays
    calls = []

    def my_get(dsk, keys, **kwargs):
        calls.append(kwargs)
        return dask.get(dsk, keys)

    got = x.sum().compute(scheduler=my_get, num_workers=3)
    np.testing.assert_allclose(got, a.sum(), rtol=1e-5)
    assert calls == [{"num_workers": 3}]  # dask passes the other keywords on
    s, other, p = tg.compute(y.sum(axis=1), "kept", x, scheduler=my_get)
    np.testing.assert_array_equal(s, b.sum(axis=1))
    assert other == "kept"
    np.testing.assert_allclose(p, a)
    (kept,) = tg.persist(y * 2, scheduler=my_get)
    assert isinstance(kept, tg.Array) and kept.chunks == y.chunks
    np.testing.assert_array_equal(kept.compute(scheduler="sync"), b * 2)
    assert len(calls) == 3
    with pytest.raises(ValueError, match="has no meaning in tilegraph"):
        tg.to_npy(x, "/nonexistent/never-written.npy", scheduler=my_get)


def test_contradictions_are_refused(arrays):
    x = arrays[2]
    with pytest.raises(TypeError, match="disagree"):
        x.compute(scheduler="sync", backend="threads")
    with pytest.raises(TypeError, match="num_workers=2 and workers=3 disagree"):
        x.compute(num_workers=2, workers=3)
    with pytest.raises(ValueError, match="workers must be a positive integer"):
        x.compute(num_workers=0)
    assert x.sum().compute(scheduler="threads", backend="threads", num_workers=2,
                           workers=2) == pytest.approx(float(arrays[0].sum()), rel=1e-5)


def test_a_distributed_client_is_the_dask_backend(arrays):
    distributed = pytest.importorskip("distributed")
    a, b, x, y = arrays
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        got, total = tg.compute(x + 1, y.sum(), scheduler=client)
        np.testing.assert_allclose(got, a + 1)
        assert total == b.sum()
        assert tg.last_run().backend == "dask"
        p = x.persist(scheduler=client.get)
        assert tg.last_run().backend == "dask"
        np.testing.assert_allclose(p.compute(scheduler="sync"), a)
        with distributed.Client(cluster, set_as_default=False) as other:
            with pytest.raises(TypeError, match=r"one distributed\.Client and client= "
                                                "another"):
                x.compute(scheduler=client, client=other)


def test_persist_of_several_shares_one_plan_and_keeps_blocks(arrays):
    a, b, x, y = arrays
    s = x.sum()
    p1, p2, p3, n = tg.persist(x + s, y * 2, s, None, scheduler="sync")
    assert n is None
    assert (p1.chunks, p2.chunks) == (x.chunks, y.chunks)
    np.testing.assert_allclose(p1.compute(), a + a.sum(), rtol=1e-5)
    np.testing.assert_array_equal(p2.compute(), b * 2)
    assert p3.shape == () and float(p3.compute()) == pytest.approx(float(a.sum()), rel=1e-5)
    assert tg.persist() == ()
    assert tg.persist(1, "a") == (1, "a")


def test_visualize_takes_dasks_keywords(arrays, tmp_path):
    x, y = arrays[2], arrays[3]
    path = tg.visualize(x.sum(), y + 1, filename=str(tmp_path / "g"), format="dot",
                        optimize_graph=True, color="order", rankdir="LR")
    assert path == str(tmp_path / "g.dot")
    text = (tmp_path / "g.dot").read_text()
    assert "rankdir=LR" in text and text.count("->") > 0
    assert tg.visualize(x, filename=None).startswith("digraph")
    assert x.visualize(filename=str(tmp_path / "h.dot"), engine="dot").endswith("h.dot")
    with pytest.raises(TypeError, match=r"unknown keyword.*'colour'"):
        tg.visualize(x, filename=str(tmp_path / "g.dot"), colour="order")
    with pytest.raises(ValueError, match="disagree"):
        tg.visualize(x, filename=str(tmp_path / "g.svg"), format="png")
    with pytest.raises(ValueError, match="no tilegraph Array"):
        tg.visualize(1, 2, filename=None)
    with pytest.raises(ValueError, match="rankdir"):
        tg.visualize(x, filename=None, rankdir="up")
    assert not list(tmp_path.glob("g.svg*"))
