"""tilegraph.get as a drop-in dask scheduler: what dask passes to schedulers, dask's task
references, dask's callbacks, and the persistent worker pool."""

import contextlib
import io
import threading
from operator import add

import numpy as np
import pytest

import tilegraph
from tilegraph.runtime.backends import IDLE_THREAD_NAME, POOL

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
from dask._task_spec import Alias, TaskRef  # noqa: E402
from dask.callbacks import Callback  # noqa: E402


def test_num_workers_pool_and_forwarded_keywords():
    x = da.arange(50, chunks=7)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(3) as pool:
        assert x.sum().compute(scheduler=tilegraph.get, pool=pool) == 1225
    assert x.sum().compute(scheduler=tilegraph.get, num_workers=3) == 1225
    assert tilegraph.last_run().workers == 3
    # keywords dask forwards from compute(...) are ignored, as dask's schedulers do
    assert x.sum().compute(scheduler=tilegraph.get, optimize_graph=True, foo="bar") == 1225
    with dask.config.set(scheduler=tilegraph.get):
        assert dask.compute(x.max(), traverse=False, anything=1) == (49,)
    with dask.config.set(num_workers=3):
        assert x.sum().compute(scheduler=tilegraph.get) == 1225
    assert tilegraph.last_run().workers == 3


def test_typo_of_an_option_and_bad_arguments_are_errors():
    x = da.arange(5, chunks=2)
    with pytest.raises(TypeError, match="wrokers"):
        x.sum().compute(scheduler=tilegraph.get, wrokers=2)
    with pytest.raises(TypeError, match="unknown option"):
        tilegraph.get({"a": 1}, "a", foo=1)  # a direct call checks every option
    with pytest.raises(ValueError, match="workers"):
        tilegraph.get({"a": 1}, "a", num_workers=0)
    with pytest.raises(TypeError, match="cache must be a dict"):
        tilegraph.get({"a": 1}, "a", cache=[1])


def test_nested_keys_and_cache():
    dsk = {"a": 1, "b": (add, "a", 10), "c": (add, "b", "b")}
    assert tilegraph.get(dsk, [["a"], ["b", ["c"]]]) == ((1,), (11, (22,)))
    cache = {"a": 5}
    assert tilegraph.get(dsk, ["c", "b"], cache=cache) == (30, 15)
    assert cache == {"a": 5, "c": 30, "b": 15}


def test_bare_task_refs_and_aliases_are_followed():
    dsk = {"a": 1, "b": TaskRef("a"), "c": (sum, [TaskRef("a"), "b", TaskRef("b")]),
           "d": Alias("d", "c")}
    assert tilegraph.get(dsk, ["b", "c", "d"]) == (1, 3, 3)
    x = da.arange(10, chunks=3)
    np.testing.assert_array_equal(dask.delayed(x).compute(scheduler=tilegraph.get),
                                  np.arange(10))


class Counting(Callback):
    def __init__(self):
        super().__init__()
        self.calls = {"start": 0, "start_state": 0, "pretask": 0, "posttask": 0, "finish": 0}
        self.keys = []

    def _start(self, dsk):
        self.calls["start"] += 1

    def _start_state(self, dsk, state):
        self.calls["start_state"] += 1
        assert {"ready", "waiting", "running", "finished", "cache"} <= set(state)

    def _pretask(self, key, dsk, state):
        self.calls["pretask"] += 1
        assert key in dsk and key in state["running"]

    def _posttask(self, key, result, dsk, state, worker_id):
        self.calls["posttask"] += 1
        self.keys.append(key)
        assert key in state["finished"]

    def _finish(self, dsk, state, errored):
        self.calls["finish"] += 1
        self.errored = errored


def test_callbacks_are_called_as_dask_calls_them():
    x = da.random.default_rng(0).random((40, 30), chunks=(10, 7))
    y = (x @ x.T + 1).sum(axis=0)
    counts = {}
    for name, scheduler in (("dask", "threads"), ("tilegraph", tilegraph.get)):
        cb = Counting()
        with cb:  # registered globally
            got = y.compute(scheduler=scheduler)
        counts[name] = cb.calls
        np.testing.assert_allclose(got, y.compute(scheduler="sync"))
        assert not cb.errored
    assert counts["tilegraph"] == counts["dask"]
    assert counts["dask"]["posttask"] > 10
    cb = Counting()  # given per call
    assert x.sum().compute(scheduler=tilegraph.get, callbacks=[cb]) > 0
    assert cb.calls["posttask"] == cb.calls["pretask"] > 0 and cb.calls["finish"] == 1


def test_failed_run_finishes_callbacks_with_errored():
    def boom(v):
        raise ValueError("no")

    cb = Counting()
    with cb, pytest.raises(ValueError, match="no"):
        tilegraph.get({"a": 1, "b": (boom, "a")}, "b")
    assert cb.calls["finish"] == 1 and cb.errored


def test_progress_bar_and_profiler_see_every_task():
    from dask.diagnostics import Profiler, ProgressBar

    x = da.ones((60, 60), chunks=10)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), ProgressBar(dt=0.001), Profiler() as prof:
        assert (x + 1).sum().compute(scheduler=tilegraph.get) == 2 * 3600
    assert "100% Completed" in buf.getvalue()
    assert len(prof.results) >= 36


def test_nested_compute_uses_global_callbacks_once():
    inner = da.arange(4, chunks=2)
    outer = dask.delayed(lambda: int(inner.sum().compute(scheduler=tilegraph.get)))()
    cb = Counting()
    with cb:
        assert outer.compute(scheduler=tilegraph.get) == 6
    assert cb.calls["start"] == 1  # the inner run does not call the outer run's callbacks


def test_pool_threads_are_reused_and_nested_runs_do_not_wait():
    def inner(v):
        return tilegraph.get({"a": v, "b": (add, "a", 1)}, "b", workers=2)

    before = {t.ident for t in threading.enumerate()}
    for _ in range(5):
        assert tilegraph.get({"x": 1, "y": (inner, "x")}, "y", workers=2) == 2
    after = [t for t in threading.enumerate() if t.ident not in before]
    assert len(after) <= POOL.max_idle
    assert all(t.name == IDLE_THREAD_NAME for t in threading.enumerate()
               if t.name.startswith("tilegraph-"))
    def pool_threads():
        return {t.ident for t in threading.enumerate() if t.name.startswith("tilegraph-")}

    known = pool_threads()
    for _ in range(20):
        tilegraph.get({"x": 1, "y": (add, "x", 1)}, "y", workers=2)
    assert pool_threads() <= known  # no thread started per run

