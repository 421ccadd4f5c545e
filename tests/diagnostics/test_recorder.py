"""The Recorder: what it keeps of a run, as plain data."""

import pickle
import time

import tilegraph as tg
from tilegraph.diagnostics.recorder import FORMAT, VERSION, Recorder
from tilegraph.runtime.events import RunStart, TaskEnd, TaskFailed


def test_subscribe_and_data_is_plain():
    rec = Recorder()
    with tg.subscribe(rec):
        tg.ones((40, 40), chunks=10).sum().compute()
    data = rec.data()

    def plain(x):
        if isinstance(x, dict):
            return all(isinstance(k, str) and plain(v) for k, v in x.items())
        if isinstance(x, (list, tuple)):
            return all(plain(v) for v in x)
        return x is None or isinstance(x, (str, int, float, bool))

    assert plain(data) and pickle.loads(pickle.dumps(data)) == data
    assert data["format"] == FORMAT and data["version"] == VERSION
    assert data["rank"] == 0 and data["backend"] and data["start"] > 0
    assert data["tasks"] and data["end"]["status"] == "done"
    # What data() returned does not change as the recorder goes on.
    n = len(data["tasks"])
    rec(TaskEnd("k", "op", 0, 1.0, 2.0, 8))
    assert len(data["tasks"]) == n


def test_failures_are_recorded_without_the_exception():
    rec = Recorder()
    rec(RunStart(1, 1, "threads", time=time.perf_counter()))
    rec(TaskFailed(("x", 0), "boom", 0, ZeroDivisionError("no"), retry=False))
    (failure,) = rec.data()["failures"]
    assert failure == ("('x', 0)", "boom", 0, "ZeroDivisionError", False)
